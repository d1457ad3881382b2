//! design.md 3.1: the service layer knows no wire. Every file under `src/service/` is read and
//! must not name the remoting frame, its crate or a request header type; the processors and
//! the proxy convert on their side.

use std::path::Path;

const FORBIDDEN: [&str; 4] = ["RemotingCommand", "ferromq_remoting", "header::", "Connection"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("service dir readable") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_service_layer_names_no_remoting_type() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/service");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(files.len() >= 2, "expected the service module's files under {}", dir.display());
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source readable");
        for (n, line) in text.lines().enumerate() {
            // Doc and plain comments may explain the rule; code may not break it.
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                if code.contains(word) {
                    offences.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(offences.is_empty(), "the service layer must not know the remoting wire:\n{}", offences.join("\n"));
}
