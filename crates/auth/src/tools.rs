//! The admin tools' credentials file (Java: `$ROCKETMQ_HOME/conf/tools.yml`, read by mqadmin
//! to sign its requests): `accessKey:` and `secretKey:`.

use ferromq_protocol::signature::SessionCredentials;
use yaml_rust2::{Yaml, YamlLoader};

/// The file under the RocketMQ home directory.
pub const TOOLS_FILE: &str = "conf/tools.yml";

/// Reads `accessKey` and `secretKey` (and `securityToken`, if given) from a tools file.
///
/// # Errors
/// Not YAML, or a key missing.
pub fn parse_tools_credentials(source: &str) -> Result<SessionCredentials, String> {
    let docs = YamlLoader::load_from_str(source).map_err(|e| e.to_string())?;
    let doc = docs.into_iter().next().unwrap_or(Yaml::Null);
    let field = |k: &str| match &doc[k] {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        _ => None,
    };
    Ok(SessionCredentials {
        access_key: field("accessKey").ok_or("accessKey is missing")?,
        secret_key: field("secretKey").ok_or("secretKey is missing")?,
        security_token: field("securityToken"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_tools_yml() {
        let c = parse_tools_credentials("accessKey: rocketmq2\nsecretKey: 12345678\n").expect("parses");
        assert_eq!((c.access_key.as_str(), c.secret_key.as_str()), ("rocketmq2", "12345678"));
        assert!(parse_tools_credentials("accessKey: x\n").expect_err("no secret").contains("secretKey"));
    }
}
