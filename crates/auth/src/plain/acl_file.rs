//! The `plain_acl.yml` document (Java: `PlainAccessConfig` lists read by SnakeYAML): global
//! white addresses, accounts and the file's data version, read from and written back to YAML.
//!
//! Scalars are read as text whatever YAML typed them (`secretKey: 12345678` is a number to
//! YAML and a string to Java's bean mapping).

use ferromq_protocol::body::DataVersion;
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

/// One account (Java: `PlainAccessConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlainAccessConfig {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`.
    pub secret_key: String,
    /// `whiteRemoteAddress`: requests from here are trusted without a signature.
    pub white_remote_address: Option<String>,
    /// `admin`.
    pub admin: bool,
    /// `defaultTopicPerm`.
    pub default_topic_perm: Option<String>,
    /// `defaultGroupPerm`.
    pub default_group_perm: Option<String>,
    /// `topicPerms`: `topic=PERM` entries.
    pub topic_perms: Vec<String>,
    /// `groupPerms`: `group=PERM` entries.
    pub group_perms: Vec<String>,
}

/// One ACL file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlainAclFile {
    /// `globalWhiteRemoteAddresses`.
    pub global_white_remote_addresses: Vec<String>,
    /// `accounts`.
    pub accounts: Vec<PlainAccessConfig>,
    /// `dataVersion` (Java writes a one-element list).
    pub data_version: DataVersion,
}

fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn texts(y: &Yaml, key: &str) -> Result<Vec<String>, String> {
    match y {
        Yaml::BadValue | Yaml::Null => Ok(Vec::new()),
        Yaml::Array(items) => {
            items.iter().map(|i| text(i).ok_or_else(|| format!("{key} must list plain values"))).collect()
        }
        // One value where a list was expected: Java's mapping refuses it; a single string is
        // what the writer meant.
        other => text(other).map(|t| vec![t]).ok_or_else(|| format!("{key} must be a list")),
    }
}

fn number(y: &Yaml) -> i64 {
    match y {
        Yaml::Integer(i) => *i,
        other => text(other).and_then(|t| t.trim().parse().ok()).unwrap_or(0),
    }
}

impl PlainAclFile {
    /// Reads a document. An empty file is an empty ACL (Java loads it as such).
    ///
    /// # Errors
    /// The reason, with the YAML position for syntax errors.
    pub fn parse(source: &str) -> Result<Self, String> {
        let docs = YamlLoader::load_from_str(source).map_err(|e| e.to_string())?;
        let Some(doc) = docs.into_iter().next() else {
            return Ok(Self::default());
        };
        if doc.is_null() {
            return Ok(Self::default());
        }
        if !doc.is_hash() {
            return Err("the document must be a mapping (globalWhiteRemoteAddresses, accounts)".to_owned());
        }
        let mut file = PlainAclFile {
            global_white_remote_addresses: texts(&doc["globalWhiteRemoteAddresses"], "globalWhiteRemoteAddresses")?,
            ..Self::default()
        };
        match &doc["accounts"] {
            Yaml::BadValue | Yaml::Null => {}
            Yaml::Array(accounts) => {
                for (i, a) in accounts.iter().enumerate() {
                    file.accounts.push(account(a).map_err(|e| format!("accounts[{i}]: {e}"))?);
                }
            }
            _ => return Err("accounts must be a list".to_owned()),
        }
        let version = match &doc["dataVersion"] {
            Yaml::Array(list) => list.first().cloned().unwrap_or(Yaml::Null),
            other => other.clone(),
        };
        if version.is_hash() {
            file.data_version = DataVersion {
                counter: number(&version["counter"]),
                state_version: 0,
                timestamp: number(&version["timestamp"]),
            };
        }
        Ok(file)
    }

    /// The document as YAML, in Java's key order.
    pub fn to_yaml(&self) -> String {
        let mut doc = Hash::new();
        let s = |t: &str| Yaml::String(t.to_owned());
        doc.insert(
            s("globalWhiteRemoteAddresses"),
            Yaml::Array(self.global_white_remote_addresses.iter().map(|a| s(a)).collect()),
        );
        let accounts = self
            .accounts
            .iter()
            .map(|a| {
                let mut h = Hash::new();
                h.insert(s("accessKey"), s(&a.access_key));
                h.insert(s("secretKey"), s(&a.secret_key));
                if let Some(w) = &a.white_remote_address {
                    h.insert(s("whiteRemoteAddress"), s(w));
                }
                h.insert(s("admin"), Yaml::Boolean(a.admin));
                if let Some(p) = &a.default_topic_perm {
                    h.insert(s("defaultTopicPerm"), s(p));
                }
                if let Some(p) = &a.default_group_perm {
                    h.insert(s("defaultGroupPerm"), s(p));
                }
                if !a.topic_perms.is_empty() {
                    h.insert(s("topicPerms"), Yaml::Array(a.topic_perms.iter().map(|p| s(p)).collect()));
                }
                if !a.group_perms.is_empty() {
                    h.insert(s("groupPerms"), Yaml::Array(a.group_perms.iter().map(|p| s(p)).collect()));
                }
                Yaml::Hash(h)
            })
            .collect();
        doc.insert(s("accounts"), Yaml::Array(accounts));
        let mut version = Hash::new();
        version.insert(s("counter"), Yaml::Integer(self.data_version.counter));
        version.insert(s("timestamp"), Yaml::Integer(self.data_version.timestamp));
        doc.insert(s("dataVersion"), Yaml::Array(vec![Yaml::Hash(version)]));
        let mut out = String::new();
        // Writing into a String cannot fail; the emitter's only errors are the writer's.
        let _ = YamlEmitter::new(&mut out).dump(&Yaml::Hash(doc));
        out.push('\n');
        out
    }
}

fn account(a: &Yaml) -> Result<PlainAccessConfig, String> {
    if !a.is_hash() {
        return Err("an account must be a mapping".to_owned());
    }
    let field = |k: &str| text(&a[k]);
    Ok(PlainAccessConfig {
        access_key: field("accessKey").ok_or("accessKey is missing")?,
        secret_key: field("secretKey").ok_or("secretKey is missing")?,
        white_remote_address: field("whiteRemoteAddress"),
        admin: matches!(&a["admin"], Yaml::Boolean(true))
            || field("admin").is_some_and(|t| t.eq_ignore_ascii_case("true")),
        default_topic_perm: field("defaultTopicPerm"),
        default_group_perm: field("defaultGroupPerm"),
        topic_perms: texts(&a["topicPerms"], "topicPerms")?,
        group_perms: texts(&a["groupPerms"], "groupPerms")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's distribution/conf/plain_acl.yml, as shipped with 4.9.
    const SAMPLE: &str = "\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
";

    #[test]
    fn reads_the_java_sample() {
        let f = PlainAclFile::parse(SAMPLE).expect("sample parses");
        assert_eq!(f.global_white_remote_addresses, ["10.10.103.*", "192.168.0.*"]);
        assert_eq!(f.accounts.len(), 2);
        let a = &f.accounts[0];
        assert_eq!((a.access_key.as_str(), a.secret_key.as_str()), ("RocketMQ", "12345678"));
        assert_eq!(a.white_remote_address, None);
        assert!(!a.admin);
        assert_eq!(a.default_topic_perm.as_deref(), Some("DENY"));
        assert_eq!(a.topic_perms, ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]);
        assert_eq!(a.group_perms, ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"]);
        let b = &f.accounts[1];
        assert!(b.admin);
        assert_eq!(b.white_remote_address.as_deref(), Some("192.168.1.*"));
    }

    #[test]
    fn writes_what_it_reads() {
        let mut f = PlainAclFile::parse(SAMPLE).expect("sample parses");
        f.data_version = DataVersion { counter: 3, state_version: 0, timestamp: 1_700_000_000_000 };
        let again = PlainAclFile::parse(&f.to_yaml()).expect("own output parses");
        assert_eq!(again, f);
    }

    #[test]
    fn flow_lists_and_null_lists_as_the_readme_writes_them() {
        let f = PlainAclFile::parse(
            "globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: orders-app\n    secretKey: orders-secret\n    topicPerms: [orders=PUB|SUB, audit=SUB]\n",
        )
        .expect("parses");
        assert!(f.global_white_remote_addresses.is_empty());
        assert_eq!(f.accounts[0].topic_perms, ["orders=PUB|SUB", "audit=SUB"]);
    }

    #[test]
    fn empty_documents_and_bad_shapes() {
        assert_eq!(PlainAclFile::parse("").expect("empty"), PlainAclFile::default());
        assert_eq!(PlainAclFile::parse("# nothing\n").expect("comment only"), PlainAclFile::default());
        assert!(PlainAclFile::parse("- a\n- b\n").expect_err("list").contains("mapping"));
        assert!(PlainAclFile::parse("accounts: 3\n").expect_err("scalar").contains("accounts"));
        let e = PlainAclFile::parse("accounts:\n  - secretKey: x\n").expect_err("no key");
        assert!(e.contains("accounts[0]") && e.contains("accessKey"), "{e}");
        assert!(PlainAclFile::parse("accounts: [\n").is_err());
    }
}
