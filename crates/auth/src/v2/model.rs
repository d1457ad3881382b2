//! ACL 2.0's data model (acl-and-tls.md 3.3): users, subjects, resources, actions, policies.
//! Names on the wire are Java's (`Super`, `enable`, `Topic:orders`, `Pub`, `Allow`); input names
//! are matched without regard to case, as Java's `getByName` does.

use std::fmt;
use std::net::IpAddr;

use ferromq_protocol::body::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};

use super::AuthError;

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $(#[allow(missing_docs)] $variant),* }

        impl $name {
            /// Java's name.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }

            /// Parses a name, ignoring case.
            pub fn parse(text: &str) -> Option<Self> {
                let t = text.trim();
                $(if t.eq_ignore_ascii_case($text) { return Some($name::$variant); })*
                None
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum!(
    /// `userType`.
    UserType { Super = "Super", Normal = "Normal" }
);
named_enum!(
    /// `userStatus`.
    UserStatus { Enable = "enable", Disable = "disable" }
);
named_enum!(
    /// What a policy entry allows or denies.
    Action { All = "All", Any = "Any", Pub = "Pub", Sub = "Sub", Create = "Create", Update = "Update", Delete = "Delete", Get = "Get", List = "List" }
);
named_enum!(
    /// A policy entry's verdict.
    Decision { Allow = "Allow", Deny = "Deny" }
);
named_enum!(
    /// CUSTOM entries are tried first, DEFAULT ones only when no CUSTOM entry matches.
    PolicyType { Custom = "Custom", Default = "Default" }
);
named_enum!(
    /// A resource's kind.
    ResourceType { Any = "Any", Cluster = "Cluster", Namespace = "Namespace", Topic = "Topic", Group = "Group" }
);

/// A user (`username` is also the access key requests are signed with, `password` the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Name and access key.
    pub username: String,
    /// The HMAC key.
    pub password: String,
    /// SUPER users pass every authorization.
    pub user_type: UserType,
    /// A disabled user fails authentication.
    pub user_status: UserStatus,
}

impl User {
    /// The admin API's view (password included, as Java's).
    pub fn to_info(&self) -> UserInfo {
        UserInfo {
            username: Some(self.username.clone()),
            password: Some(self.password.clone()),
            user_type: Some(self.user_type.name().to_owned()),
            user_status: Some(self.user_status.name().to_owned()),
        }
    }
}

/// How a resource name matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResourceName {
    /// `Topic:*`, or `*`.
    Any,
    /// `Topic:orders`.
    Literal(String),
    /// `Topic:order*`.
    Prefixed(String),
}

/// `*`, `Topic:*`, `Topic:orders`, `Group:g*`, `Cluster:DefaultCluster`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The kind; `Any` matches every kind.
    pub kind: ResourceType,
    /// The name or pattern.
    pub name: ResourceName,
}

/// Prefix of retry topics; a retry topic names its group.
const RETRY_PREFIX: &str = "%RETRY%";
/// Prefix of dead-letter topics.
const DLQ_PREFIX: &str = "%DLQ%";

impl Resource {
    /// Parses a resource key; `None` for an unknown kind or a blank key.
    pub fn parse(key: &str) -> Option<Resource> {
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        if key == "*" {
            return Some(Resource { kind: ResourceType::Any, name: ResourceName::Any });
        }
        let (kind, name) = key.split_once(':').unwrap_or((key, ""));
        let kind = ResourceType::parse(kind)?;
        let name = if name == "*" {
            ResourceName::Any
        } else if let Some(prefix) = name.strip_suffix('*') {
            ResourceName::Prefixed(prefix.to_owned())
        } else {
            ResourceName::Literal(name.to_owned())
        };
        Some(Resource { kind, name })
    }

    /// A topic, literally.
    pub fn topic(name: &str) -> Resource {
        Resource { kind: ResourceType::Topic, name: ResourceName::Literal(name.to_owned()) }
    }

    /// A group, literally; a retry or dead-letter topic names its group.
    pub fn group(name: &str) -> Resource {
        let name = name.strip_prefix(RETRY_PREFIX).or_else(|| name.strip_prefix(DLQ_PREFIX)).unwrap_or(name);
        Resource { kind: ResourceType::Group, name: ResourceName::Literal(name.to_owned()) }
    }

    /// A cluster, literally.
    pub fn cluster(name: &str) -> Resource {
        Resource { kind: ResourceType::Cluster, name: ResourceName::Literal(name.to_owned()) }
    }

    /// A topic, or its group when the topic is a retry topic (`Topic` fields holding retry
    /// topics are group matters).
    pub fn topic_or_group(name: &str) -> Resource {
        if is_retry_topic(name) {
            Resource::group(name)
        } else {
            Resource::topic(name)
        }
    }

    /// The key form, as written in policies and refusals.
    pub fn key(&self) -> String {
        if self.kind == ResourceType::Any {
            return "*".to_owned();
        }
        match &self.name {
            ResourceName::Any => format!("{}:*", self.kind),
            ResourceName::Literal(n) => format!("{}:{n}", self.kind),
            ResourceName::Prefixed(p) => format!("{}:{p}*", self.kind),
        }
    }

    /// Whether this (a policy's) resource covers `requested` (a literal resource).
    pub fn matches(&self, requested: &Resource) -> bool {
        if self.kind == ResourceType::Any {
            return true;
        }
        if self.kind != requested.kind {
            return false;
        }
        let ResourceName::Literal(wanted) = &requested.name else {
            return false;
        };
        match &self.name {
            ResourceName::Any => true,
            ResourceName::Literal(n) => n == wanted,
            ResourceName::Prefixed(p) => wanted.starts_with(p.as_str()),
        }
    }
}

/// Whether `topic` is a retry topic.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_PREFIX)
}

/// An address or CIDR block of a policy entry, kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceIp {
    text: String,
    block: ferromq_config::IpBlock,
}

impl SourceIp {
    /// Parses `10.1.2.3`, `10.0.0.0/8`, `::1`, `fe80::/10`.
    pub fn parse(text: &str) -> Option<SourceIp> {
        let block = ferromq_config::IpBlock::parse(text)?;
        Some(SourceIp { text: text.trim().to_owned(), block })
    }

    /// Whether `ip` is in the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.block.contains(ip)
    }

    /// As written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// One rule: a resource, the actions, the source addresses (none: any) and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    /// What it is about.
    pub resource: Resource,
    /// What it allows or denies.
    pub actions: Vec<Action>,
    /// From where; empty means anywhere.
    pub source_ips: Vec<SourceIp>,
    /// Allow or deny.
    pub decision: Decision,
}

impl PolicyEntry {
    /// Whether the entry covers one requested (resource, actions) from `ip`: `All` covers any
    /// action, a request for `Any` is covered by any action, else one action in common.
    pub fn matches(&self, resource: &Resource, actions: &[Action], ip: IpAddr) -> bool {
        self.resource.matches(resource)
            && !self.actions.is_empty()
            && (actions.contains(&Action::Any)
                || actions.iter().any(|a| self.actions.contains(a) || self.actions.contains(&Action::All)))
            && (self.source_ips.is_empty() || self.source_ips.iter().any(|s| s.contains(ip)))
    }
}

/// A subject's entries of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Custom or Default.
    pub policy_type: PolicyType,
    /// The rules; each resource at most once.
    pub entries: Vec<PolicyEntry>,
}

/// A subject's policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// `User:<name>`.
    pub subject: String,
    /// At most one policy per type.
    pub policies: Vec<Policy>,
}

/// The user name of a `User:<name>` subject.
pub fn subject_user(subject: &str) -> Option<&str> {
    let (kind, name) = subject.split_once(':')?;
    (kind.eq_ignore_ascii_case("User") && !name.is_empty()).then_some(name)
}

fn invalid(msg: &str) -> AuthError {
    AuthError::Authorization(msg.to_owned())
}

impl Acl {
    /// Reads an `AclInfo` body, validated as Java's `AuthorizationMetadataManagerImpl` does;
    /// `subject` names the ACL when the body does not.
    ///
    /// # Errors
    /// Java's message for the first invalid part.
    pub fn from_info(info: &AclInfo, subject: Option<&str>) -> Result<Acl, AuthError> {
        let subject = info.subject.as_deref().or(subject).map(str::trim).filter(|s| !s.is_empty());
        let subject = subject.ok_or_else(|| invalid("The subject is null."))?;
        if subject_user(subject).is_none() {
            return Err(invalid("The subject type is null."));
        }
        if info.policies.is_empty() {
            return Err(invalid("The body of acl is null"));
        }
        let mut acl = Acl { subject: canonical_subject(subject), policies: Vec::new() };
        for p in &info.policies {
            let policy_type = match p.policy_type.as_deref() {
                None => PolicyType::Custom,
                Some(t) => PolicyType::parse(t).unwrap_or(PolicyType::Custom),
            };
            if p.entries.is_empty() {
                return Err(invalid("The policy entries is empty."));
            }
            let entries = p.entries.iter().map(entry_from_info).collect::<Result<Vec<_>, _>>()?;
            acl.merge(vec![Policy { policy_type, entries }]);
        }
        Ok(acl)
    }

    /// The admin API's view.
    pub fn to_info(&self) -> AclInfo {
        AclInfo {
            subject: Some(self.subject.clone()),
            policies: self
                .policies
                .iter()
                .map(|p| PolicyInfo {
                    policy_type: Some(p.policy_type.name().to_owned()),
                    entries: p
                        .entries
                        .iter()
                        .map(|e| PolicyEntryInfo {
                            resource: Some(e.resource.key()),
                            actions: e.actions.iter().map(|a| a.name().to_owned()).collect(),
                            source_ips: e.source_ips.iter().map(|s| s.as_str().to_owned()).collect(),
                            decision: Some(e.decision.name().to_owned()),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Adds `policies`: a policy type already present has its entries updated (an entry on the
    /// same resource replaced, others added), a new type is added. Java: `Acl.updatePolicy`.
    pub fn merge(&mut self, policies: Vec<Policy>) {
        for new in policies {
            match self.policies.iter_mut().find(|p| p.policy_type == new.policy_type) {
                None => self.policies.push(new),
                Some(old) => {
                    for entry in new.entries {
                        match old.entries.iter_mut().find(|e| e.resource == entry.resource) {
                            Some(e) => *e = entry,
                            None => old.entries.push(entry),
                        }
                    }
                }
            }
        }
    }

    /// Removes the entry on `resource` from the `policy_type` policy, and the policy when it
    /// becomes empty. Java: `Acl.deletePolicy`.
    pub fn remove_entry(&mut self, policy_type: PolicyType, resource: &Resource) {
        if let Some(p) = self.policies.iter_mut().find(|p| p.policy_type == policy_type) {
            p.entries.retain(|e| &e.resource != resource);
        }
        self.policies.retain(|p| !p.entries.is_empty());
    }
}

/// `User:<name>` with the kind spelled as Java writes it.
pub fn canonical_subject(subject: &str) -> String {
    match subject_user(subject) {
        Some(name) => format!("User:{name}"),
        None => subject.to_owned(),
    }
}

fn entry_from_info(e: &PolicyEntryInfo) -> Result<PolicyEntry, AuthError> {
    let resource = e.resource.as_deref().and_then(Resource::parse).ok_or_else(|| invalid("The resource is null."))?;
    // Unknown action names are skipped, as Java's converter does.
    let actions: Vec<Action> = e.actions.iter().filter_map(|a| Action::parse(a)).collect();
    if actions.is_empty() {
        return Err(invalid("The actions is empty."));
    }
    if actions.contains(&Action::Any) {
        return Err(invalid("The actions can not be Any."));
    }
    let mut source_ips = Vec::new();
    for ip in &e.source_ips {
        if ip.trim().is_empty() {
            return Err(invalid("The source ip is empty."));
        }
        source_ips.push(SourceIp::parse(ip).ok_or_else(|| invalid("The source ip is invalid."))?);
    }
    let decision =
        e.decision.as_deref().and_then(Decision::parse).ok_or_else(|| invalid("The decision is null or illegal."))?;
    Ok(PolicyEntry { resource, actions, source_ips, decision })
}

/// A user create or update from a `UserInfo` body: what it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserChange {
    /// The user.
    pub username: String,
    /// New password (required to create).
    pub password: Option<String>,
    /// New type (create: Normal when absent).
    pub user_type: Option<UserType>,
    /// New status (create: enable when absent).
    pub user_status: Option<UserStatus>,
}

impl UserChange {
    /// Reads `info` for the user the header names.
    ///
    /// # Errors
    /// A blank user name, an unknown type or status.
    pub fn from_info(info: &UserInfo, username: &str) -> Result<UserChange, AuthError> {
        let username = username.trim();
        if username.is_empty() {
            return Err(AuthError::Authentication("username can not be blank".to_owned()));
        }
        let user_type = match info.user_type.as_deref().filter(|t| !t.trim().is_empty()) {
            None => None,
            Some(t) => Some(
                UserType::parse(t)
                    .ok_or_else(|| AuthError::Authentication(format!("unknown userType {t}; use Super or Normal")))?,
            ),
        };
        let user_status =
            match info.user_status.as_deref().filter(|t| !t.trim().is_empty()) {
                None => None,
                Some(t) => Some(UserStatus::parse(t).ok_or_else(|| {
                    AuthError::Authentication(format!("unknown userStatus {t}; use enable or disable"))
                })?),
            };
        let password = info.password.clone().filter(|p| !p.is_empty());
        Ok(UserChange { username: username.to_owned(), password, user_type, user_status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_keys_parse_and_print() {
        for key in ["*", "Topic:*", "Topic:orders", "Topic:order*", "Group:g1", "Cluster:DefaultCluster"] {
            assert_eq!(Resource::parse(key).expect(key).key(), key);
        }
        assert_eq!(Resource::parse("topic:orders").expect("case").key(), "Topic:orders");
        assert!(Resource::parse("Queue:x").is_none());
        assert!(Resource::parse("").is_none());
        assert_eq!(Resource::group("%RETRY%g1"), Resource::group("g1"));
        assert_eq!(Resource::topic_or_group("%RETRY%g1").key(), "Group:g1");
    }

    #[test]
    fn matching() {
        let orders = Resource::topic("orders");
        assert!(Resource::parse("*").expect("any").matches(&orders));
        assert!(Resource::parse("Topic:*").expect("t").matches(&orders));
        assert!(Resource::parse("Topic:ord*").expect("p").matches(&orders));
        assert!(!Resource::parse("Topic:x*").expect("p").matches(&orders));
        assert!(!Resource::parse("Group:*").expect("g").matches(&orders));
        let ip = |s: &str| SourceIp::parse(s).expect(s);
        assert!(ip("10.0.0.0/8").contains("10.2.3.4".parse().expect("ip")));
        assert!(!ip("10.0.0.0/8").contains("11.2.3.4".parse().expect("ip")));
        assert!(ip("127.0.0.1").contains("::ffff:127.0.0.1".parse().expect("ip")));
        assert!(ip("fe80::/10").contains("fe80::1".parse().expect("ip")));
        assert!(SourceIp::parse("10.0.0.0/33").is_none());
        assert!(SourceIp::parse("host").is_none());
    }

    #[test]
    fn merge_and_remove_follow_java() {
        let entry = |r: &str, d: Decision| PolicyEntry {
            resource: Resource::parse(r).expect(r),
            actions: vec![Action::Pub],
            source_ips: vec![],
            decision: d,
        };
        let mut acl = Acl {
            subject: "User:a".into(),
            policies: vec![Policy {
                policy_type: PolicyType::Custom,
                entries: vec![entry("Topic:t1", Decision::Allow)],
            }],
        };
        acl.merge(vec![Policy {
            policy_type: PolicyType::Custom,
            entries: vec![entry("Topic:t1", Decision::Deny), entry("Topic:t2", Decision::Allow)],
        }]);
        assert_eq!(acl.policies[0].entries.len(), 2);
        assert_eq!(acl.policies[0].entries[0].decision, Decision::Deny);
        acl.remove_entry(PolicyType::Custom, &Resource::parse("Topic:t1").expect("t1"));
        acl.remove_entry(PolicyType::Custom, &Resource::parse("Topic:t2").expect("t2"));
        assert!(acl.policies.is_empty());
    }
}
