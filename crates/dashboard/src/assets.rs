//! The pages, embedded in the binary (no CDN, no build step): one HTML shell, its script and
//! its style sheet. The script draws every page and chart itself from the JSON API.

/// An embedded file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asset {
    pub(crate) content_type: &'static str,
    pub(crate) body: &'static [u8],
}

const INDEX: Asset = Asset { content_type: "text/html; charset=utf-8", body: include_bytes!("../assets/index.html") };
const SCRIPT: Asset =
    Asset { content_type: "text/javascript; charset=utf-8", body: include_bytes!("../assets/app.js") };
const STYLE: Asset = Asset { content_type: "text/css; charset=utf-8", body: include_bytes!("../assets/app.css") };
const ICON: Asset = Asset { content_type: "image/svg+xml", body: include_bytes!("../assets/favicon.svg") };

/// The asset served at `path`, if any.
pub(crate) fn find(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(INDEX),
        "/app.js" => Some(SCRIPT),
        "/app.css" => Some(STYLE),
        "/favicon.svg" | "/favicon.ico" => Some(ICON),
        _ => None,
    }
}
