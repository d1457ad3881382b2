//! One API request as the handlers see it (its parameters from the query string and a form
//! body, or its JSON body) and rocketmq-dashboard's answer envelope, `JsonResult`.

use serde::de::DeserializeOwned;
use serde_json::{json, Value as JsonValue};

use crate::error::ApiError;

/// The largest request body read: a test message's body (4 MiB, the broker's default
/// `maxMessageSize`) with room for its JSON envelope.
pub(crate) const BODY_MAX: usize = 5 * 1024 * 1024;

/// A parsed API request.
#[derive(Debug, Default)]
pub(crate) struct ApiRequest {
    /// `key=value` pairs of the query string and of a form body, decoded, in order.
    params: Vec<(String, String)>,
    /// The body when it is JSON.
    body: Option<JsonValue>,
}

impl ApiRequest {
    /// Reads `query` and, by its content type, `body`.
    ///
    /// # Errors
    /// A JSON body that does not parse.
    pub(crate) fn parse(query: Option<&str>, content_type: Option<&str>, body: &[u8]) -> Result<Self, ApiError> {
        let mut request = ApiRequest { params: query.map(form_pairs).unwrap_or_default(), body: None };
        let content_type = content_type.unwrap_or("").to_ascii_lowercase();
        if content_type.starts_with("application/x-www-form-urlencoded") {
            request.params.extend(form_pairs(&String::from_utf8_lossy(body)));
        } else if !body.iter().all(u8::is_ascii_whitespace) {
            // JSON is what the pages send; a body without a content type is read as JSON too
            // (curl -d without -H).
            let value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad(format!("the request body is not JSON: {e}")))?;
            request.body = Some(value);
        }
        Ok(request)
    }

    /// The parameter `name`, if given (the first when repeated).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The parameter `name`, non-empty after trimming.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] naming it when missing or blank.
    pub(crate) fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.param(name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ApiError::bad(format!("parameter {name} is required")))
    }

    /// A boolean parameter (`true`/`false`, Spring's reading); absent is false.
    ///
    /// # Errors
    /// A value that is neither.
    pub(crate) fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.param(name).map(str::trim) {
            None | Some("") => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") || v == "1" || v.eq_ignore_ascii_case("on") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") || v == "0" || v.eq_ignore_ascii_case("off") => Ok(false),
            Some(v) => Err(ApiError::bad(format!("parameter {name} must be true or false, not {v:?}"))),
        }
    }

    /// An integer parameter.
    ///
    /// # Errors
    /// Missing or not an integer.
    pub(crate) fn int(&self, name: &str) -> Result<i64, ApiError> {
        let v = self.required(name)?;
        v.parse().map_err(|_| ApiError::bad(format!("parameter {name} must be an integer, not {v:?}")))
    }

    /// The JSON body as `T`.
    ///
    /// # Errors
    /// No body, or one that is not a `T` (the serde message names the field).
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        let body = self.body.clone().ok_or_else(|| ApiError::bad("a JSON request body is required"))?;
        serde_json::from_value(body).map_err(|e| ApiError::bad(format!("invalid request body: {e}")))
    }
}

/// rocketmq-dashboard's success envelope.
pub(crate) fn success(data: JsonValue) -> JsonValue {
    json!({ "status": 0, "data": data, "errMsg": null })
}

/// rocketmq-dashboard's failure envelope (its global exception handler's answer).
pub(crate) fn failure(error: &ApiError) -> JsonValue {
    json!({ "status": -1, "data": null, "errMsg": error.chain() })
}

/// `a=1&b=x%20y` as decoded pairs (`+` is a space, as in HTML forms).
fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+`; malformed escapes stay as written, invalid UTF-8 is replaced.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_form_parameters_are_decoded() {
        let r = ApiRequest::parse(
            Some("topic=Topic%20A&skipSysProcess=true&bad=%zz&end=%4"),
            Some("application/x-www-form-urlencoded; charset=UTF-8"),
            b"clusterName=Default+Cluster&k=%E4%BD%A0",
        )
        .unwrap();
        assert_eq!(r.param("topic"), Some("Topic A"));
        assert!(r.flag("skipSysProcess").unwrap());
        assert!(!r.flag("absent").unwrap());
        assert_eq!(r.param("bad"), Some("%zz"));
        assert_eq!(r.param("end"), Some("%4"));
        assert_eq!(r.param("clusterName"), Some("Default Cluster"));
        assert_eq!(r.param("k"), Some("你"));
        assert!(r.required("absent").unwrap_err().to_string().contains("absent"));
    }

    #[test]
    fn a_json_body_is_read_and_a_broken_one_refused() {
        let r = ApiRequest::parse(None, Some("application/json"), br#"{"topic":"T","writeQueueNums":8}"#).unwrap();
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct B {
            topic: String,
            write_queue_nums: i32,
        }
        let b: B = r.json().unwrap();
        assert_eq!((b.topic.as_str(), b.write_queue_nums), ("T", 8));
        let e = ApiRequest::parse(None, Some("application/json"), b"{nope").unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
        assert!(ApiRequest::parse(None, None, b"  ").unwrap().json::<B>().is_err());
    }

    #[test]
    fn envelopes_are_rocketmq_dashboard_json_results() {
        assert_eq!(success(json!([1])), json!({"status":0,"data":[1],"errMsg":null}));
        assert_eq!(failure(&ApiError::bad("x")), json!({"status":-1,"data":null,"errMsg":"x"}));
    }
}
