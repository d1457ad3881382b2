//! ACL 1.0 accounts as ACL 2.0 users and ACLs (`migrateAuthFromV1Enabled`; Java:
//! `AuthMigrator`): an account becomes a user (admin: SUPER), its topic and group permissions
//! a CUSTOM policy of literal entries, its default permissions a DEFAULT policy on `Topic:*`
//! and `Group:*`. `PUB` allows Pub, `SUB` Sub, `PUB|SUB` both, `DENY` denies All. Java turns
//! any other (misspelt) permission into "allow All"; ACL 1.0 read it as DENY, and so does this.
//! White remote addresses are not carried over (Java neither: they are patterns, not CIDRs).

use crate::plain::PlainAccessConfig;

use super::model::{
    Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource, ResourceName, ResourceType, User, UserStatus,
    UserType,
};

fn entry(resource: Resource, perm: &str) -> PolicyEntry {
    let (actions, decision) = match perm.trim() {
        "PUB" => (vec![Action::Pub], Decision::Allow),
        "SUB" => (vec![Action::Sub], Decision::Allow),
        "PUB|SUB" | "SUB|PUB" => (vec![Action::Pub, Action::Sub], Decision::Allow),
        _ => (vec![Action::All], Decision::Deny),
    };
    PolicyEntry { resource, actions, source_ips: Vec::new(), decision }
}

/// The user and (when the account has permissions) the ACL of one ACL 1.0 account.
pub fn from_plain(account: &PlainAccessConfig) -> (User, Option<Acl>) {
    let user = User {
        username: account.access_key.clone(),
        password: account.secret_key.clone(),
        user_type: if account.admin { UserType::Super } else { UserType::Normal },
        user_status: UserStatus::Enable,
    };
    let mut custom = Vec::new();
    for (perms, group) in [(&account.topic_perms, false), (&account.group_perms, true)] {
        for p in perms {
            let Some((name, perm)) = p.split_once('=') else { continue };
            let name = name.trim();
            let resource = if group { Resource::group(name) } else { Resource::topic(name) };
            custom.push(entry(resource, perm));
        }
    }
    let mut default = Vec::new();
    for (perm, kind) in
        [(&account.default_topic_perm, ResourceType::Topic), (&account.default_group_perm, ResourceType::Group)]
    {
        if let Some(perm) = perm.as_deref().filter(|p| !p.trim().is_empty()) {
            default.push(entry(Resource { kind, name: ResourceName::Any }, perm));
        }
    }
    let mut policies = Vec::new();
    if !custom.is_empty() {
        policies.push(Policy { policy_type: PolicyType::Custom, entries: custom });
    }
    if !default.is_empty() {
        policies.push(Policy { policy_type: PolicyType::Default, entries: default });
    }
    let acl = (!policies.is_empty()).then(|| Acl { subject: format!("User:{}", account.access_key), policies });
    (user, acl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_becomes_a_user_and_an_acl() {
        let account = PlainAccessConfig {
            access_key: "RocketMQ".into(),
            secret_key: "12345678".into(),
            default_topic_perm: Some("DENY".into()),
            default_group_perm: Some("SUB".into()),
            topic_perms: vec!["topicA=DENY".into(), "topicB=PUB|SUB".into(), "topicC=PUBB".into()],
            group_perms: vec!["groupB=SUB".into()],
            ..Default::default()
        };
        let (user, acl) = from_plain(&account);
        assert_eq!((user.username.as_str(), user.user_type), ("RocketMQ", UserType::Normal));
        let info = acl.expect("acl").to_info();
        let custom: Vec<String> = info.policies[0]
            .entries
            .iter()
            .map(|e| {
                format!(
                    "{}:{}:{}",
                    e.resource.clone().unwrap_or_default(),
                    e.actions.join("|"),
                    e.decision.clone().unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(
            custom,
            ["Topic:topicA:All:Deny", "Topic:topicB:Pub|Sub:Allow", "Topic:topicC:All:Deny", "Group:groupB:Sub:Allow"]
        );
        assert_eq!(info.policies[1].policy_type.as_deref(), Some("Default"));
        assert_eq!(info.policies[1].entries[0].resource.as_deref(), Some("Topic:*"));
        assert_eq!(info.policies[1].entries[1].resource.as_deref(), Some("Group:*"));
    }
}
