//! The two JSON-valued keys of ACL 2.0's configuration: `initAuthenticationUser`
//! (`{"username":..,"password":..}`) and `innerClientAuthenticationCredentials`
//! (`{"accessKey":..,"secretKey":..}`), read the same way by every server.

/// Reads `{"<name_field>":..,"<secret_field>":..}` from the value of `key`; `None` when blank.
///
/// # Errors
/// Text that is not such an object, naming `key` and the expected shape.
fn pair(key: &str, text: &str, name_field: &str, secret_field: &str) -> Result<Option<(String, String)>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let shape = format!("{key} must be JSON {{\"{name_field}\":\"..\",\"{secret_field}\":\"..\"}}");
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{shape}: {e}"))?;
    let field = |f: &str| json.get(f).and_then(|v| v.as_str()).map(str::to_owned).filter(|s| !s.is_empty());
    match (field(name_field), field(secret_field)) {
        (Some(name), Some(secret)) => Ok(Some((name, secret))),
        _ => Err(format!("{shape}: both fields are needed")),
    }
}

/// `initAuthenticationUser`: the SUPER user created at start, as (username, password).
///
/// # Errors
/// Malformed JSON or a missing field, in words naming the key.
pub fn init_user(text: &str) -> Result<Option<(String, String)>, String> {
    pair("initAuthenticationUser", text, "username", "password")
}

/// `innerClientAuthenticationCredentials`: what a server signs its own requests with, as
/// (access key, secret key).
///
/// # Errors
/// Malformed JSON or a missing field, in words naming the key.
pub fn inner_credentials(text: &str) -> Result<Option<(String, String)>, String> {
    pair("innerClientAuthenticationCredentials", text, "accessKey", "secretKey")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_names_the_key_when_wrong() {
        assert_eq!(init_user(" ").unwrap(), None);
        assert_eq!(
            init_user(r#"{"username":"root","password":"12345678"}"#).unwrap(),
            Some(("root".into(), "12345678".into()))
        );
        assert_eq!(
            inner_credentials(r#"{"accessKey":"rocketmq","secretKey":"secret"}"#).unwrap(),
            Some(("rocketmq".into(), "secret".into()))
        );
        let e = init_user(r#"{"username":"root"}"#).unwrap_err();
        assert!(e.contains("initAuthenticationUser") && e.contains("password"), "{e}");
        let e = inner_credentials("root:pw").unwrap_err();
        assert!(e.contains("innerClientAuthenticationCredentials"), "{e}");
    }
}
