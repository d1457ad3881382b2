//! ACL 2.0 (acl-and-tls.md section 3) on a real store in a temp dir: authentication's
//! refusals, SUPER users, the precedence of policy entries, source addresses, what requests
//! need, and the store's admin semantics (merge, delete, filters) surviving a reopen.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use ferromq_auth::v2::context::needed;
use ferromq_auth::v2::model::{Acl, UserChange, UserStatus, UserType};
use ferromq_auth::v2::{AuthMetadata, AuthService, AuthSettings};
use ferromq_protocol::body::{
    AclInfo, ConsumerData, HeartbeatData, JsonBody, PolicyEntryInfo, PolicyInfo, SubscriptionData,
};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{request_code, RemotingCommand};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn user(name: &str, password: &str, user_type: UserType) -> UserChange {
    UserChange { username: name.into(), password: Some(password.into()), user_type: Some(user_type), user_status: None }
}

fn entry(resource: &str, actions: &[&str], ips: &[&str], decision: &str) -> PolicyEntryInfo {
    PolicyEntryInfo {
        resource: Some(resource.into()),
        actions: actions.iter().map(|a| (*a).to_owned()).collect(),
        source_ips: ips.iter().map(|a| (*a).to_owned()).collect(),
        decision: Some(decision.into()),
    }
}

fn acl(subject: &str, policy_type: &str, entries: Vec<PolicyEntryInfo>) -> Acl {
    let info = AclInfo {
        subject: Some(subject.into()),
        policies: vec![PolicyInfo { policy_type: Some(policy_type.into()), entries }],
    };
    Acl::from_info(&info, None).expect("valid acl")
}

fn send(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_body(&b"x"[..]);
    r.ext_fields.insert("a".into(), "pg");
    r.ext_fields.insert("b".into(), topic);
    r
}

fn signed(mut r: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
    SessionCredentials::new(ak, sk).sign(&mut r);
    r
}

struct Fixture {
    _dir: tempfile::TempDir,
    service: AuthService,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("dir");
    let metadata = Arc::new(AuthMetadata::open(dir.path()).expect("open"));
    metadata.create_user(user("root", "root-secret", UserType::Super)).expect("root");
    metadata.create_user(user("alice", "alice-secret", UserType::Normal)).expect("alice");
    let settings = AuthSettings {
        authentication_enabled: true,
        authorization_enabled: true,
        authentication_whitelist: HashSet::new(),
        authorization_whitelist: HashSet::new(),
        cluster_name: "DefaultCluster".into(),
    };
    Fixture { service: AuthService::new(settings, metadata), _dir: dir }
}

fn reason(f: &Fixture, r: &RemotingCommand, from: &str) -> Option<String> {
    f.service.check(r, ip(from)).err().map(|d| d.reason)
}

#[test]
fn authentication_refusals_in_java_words() {
    let f = fixture();
    assert_eq!(reason(&f, &send("t"), "127.0.0.1").as_deref(), Some("username cannot be null."));
    assert_eq!(reason(&f, &signed(send("t"), "bob", "x"), "127.0.0.1").as_deref(), Some("User:bob is not found."));
    assert_eq!(
        reason(&f, &signed(send("t"), "alice", "wrong"), "127.0.0.1").as_deref(),
        Some("check signature failed.")
    );
    f.service
        .metadata()
        .update_user(UserChange {
            username: "alice".into(),
            password: None,
            user_type: None,
            user_status: Some(UserStatus::Disable),
        })
        .expect("disable");
    assert_eq!(
        reason(&f, &signed(send("t"), "alice", "alice-secret"), "127.0.0.1").as_deref(),
        Some("User:alice is disabled.")
    );
    // SUPER users pass authorization without any ACL.
    assert_eq!(reason(&f, &signed(send("t"), "root", "root-secret"), "127.0.0.1"), None);
}

#[test]
fn precedence_of_entries() {
    let f = fixture();
    let m = f.service.metadata();
    let check = |topic: &str| reason(&f, &signed(send(topic), "alice", "alice-secret"), "10.1.2.3");
    assert_eq!(
        check("orders").as_deref(),
        Some("User:alice has no permission to access Topic:orders from 10.1.2.3, no matched policies.")
    );
    m.upsert_acl(acl(
        "User:alice",
        "Custom",
        vec![
            entry("*", &["All"], &[], "Allow"),
            entry("Topic:*", &["Pub"], &[], "Deny"),
            entry("Topic:ord*", &["Pub"], &[], "Allow"),
            entry("Topic:orders-*", &["Pub"], &[], "Deny"),
            entry("Topic:orders-public", &["Pub"], &[], "Allow"),
        ],
    ))
    .expect("acl");
    // A literal name beats every prefix; a longer prefix beats a shorter one; a prefix beats
    // `Topic:*`; a specific kind beats `*`.
    assert_eq!(check("orders-public"), None);
    assert!(check("orders-secret").expect("denied").ends_with("the decision is deny."));
    assert_eq!(check("orderbook"), None);
    assert!(check("payments").expect("denied").ends_with("the decision is deny."));
    // `*` allows what nothing more specific covers (a group here).
    let mut pull = RemotingCommand::request(request_code::PULL_MESSAGE);
    pull.ext_fields.insert("topic".into(), "orders-public");
    pull.ext_fields.insert("consumerGroup".into(), "g1");
    assert_eq!(
        reason(&f, &signed(pull, "alice", "alice-secret"), "10.1.2.3"),
        None,
        "Topic Pub entries do not cover Sub; * All does"
    );

    // Same resource twice can't happen (entries are keyed by resource); Deny wins ties of
    // kind and pattern between two prefixes of equal length.
    m.upsert_acl(acl(
        "User:alice",
        "Custom",
        vec![entry("Topic:abc*", &["Pub"], &[], "Allow"), entry("Topic:ab*", &["Pub"], &[], "Deny")],
    ))
    .expect("acl");
    assert_eq!(check("abcd"), None, "the longer prefix decides");
}

#[test]
fn default_policy_only_when_no_custom_entry_matches_and_source_ips() {
    let f = fixture();
    let m = f.service.metadata();
    m.upsert_acl(acl("User:alice", "Default", vec![entry("Topic:*", &["Pub"], &[], "Allow")])).expect("default");
    m.upsert_acl(acl("User:alice", "Custom", vec![entry("Topic:vip", &["Pub"], &["192.168.0.0/16"], "Allow")]))
        .expect("custom");
    let check = |topic: &str, from: &str| reason(&f, &signed(send(topic), "alice", "alice-secret"), from);
    assert_eq!(check("anything", "10.0.0.1"), None, "the default policy");
    assert_eq!(check("vip", "192.168.3.4"), None);
    // From elsewhere the custom entry does not match; the default one allows.
    assert_eq!(check("vip", "10.0.0.1"), None);
    m.upsert_acl(acl("User:alice", "Custom", vec![entry("Topic:vip", &["Pub"], &["192.168.0.0/16"], "Deny")]))
        .expect("replace entry");
    assert!(check("vip", "192.168.3.4").expect("denied").contains("the decision is deny."));
    assert_eq!(check("vip", "10.0.0.1"), None);
}

#[test]
fn what_requests_need() {
    let keys = |r: &RemotingCommand| -> Vec<String> {
        needed(r, "DefaultCluster")
            .expect("parses")
            .iter()
            .map(|n| {
                format!("{}={}", n.resource.key(), n.actions.iter().map(|a| a.name()).collect::<Vec<_>>().join("|"))
            })
            .collect()
    };
    assert_eq!(keys(&send("orders")), ["Topic:orders=Pub"]);
    assert_eq!(keys(&send("%RETRY%billing")), ["Group:billing=Sub"]);
    let hb = HeartbeatData {
        client_id: "c".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: "billing".into(),
            subscription_data_set: vec![
                SubscriptionData { topic: "orders".into(), sub_string: "*".into(), ..Default::default() },
                SubscriptionData { topic: "%RETRY%billing".into(), sub_string: "*".into(), ..Default::default() },
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        keys(&RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode())),
        ["Group:billing=Sub", "Topic:orders=Sub"]
    );
    let mut create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC);
    create.ext_fields.insert("topic".into(), "orders");
    assert_eq!(keys(&create), ["Topic:orders=Create"]);
    assert_eq!(keys(&RemotingCommand::request(request_code::AUTH_CREATE_USER)), ["Cluster:DefaultCluster=Update"]);
    assert_eq!(keys(&RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG)), ["Cluster:DefaultCluster=Update"]);
    let mut reset = RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET);
    reset.ext_fields.insert("group".into(), "billing");
    reset.ext_fields.insert("topic".into(), "orders");
    assert_eq!(keys(&reset), ["Group:billing=Update", "Topic:orders=Update"]);
    assert!(keys(&RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO)).is_empty());
    // A 4.x VIEW_MESSAGE_BY_ID names only an offset: the cluster stands in for the topic.
    let mut view = RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID);
    view.ext_fields.insert("offset".into(), "0");
    assert_eq!(keys(&view), ["Cluster:DefaultCluster=Get"]);
    view.ext_fields.insert("topic".into(), "orders");
    assert_eq!(keys(&view), ["Topic:orders=Get"]);
    let garbage = RemotingCommand::request(request_code::HEART_BEAT).with_body(&b"{nope"[..]);
    assert!(needed(&garbage, "c").is_err());
    // BATCH_ACK_MESSAGE names its groups and topics in the body (Java checks nothing).
    let batch = br#"{"acks":[{"c":"billing","t":"orders","b":"AQ==","q":0,"so":0,"it":60000,"pt":1,"r":"0","rq":0},
        {"c":"audit","t":"payments","b":"AQ==","q":1,"so":4,"it":60000,"pt":1,"r":"1","rq":0}]}"#;
    let ack = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(&batch[..]);
    assert_eq!(keys(&ack), ["Group:billing=Sub", "Topic:orders=Sub", "Group:audit=Sub", "Topic:payments=Sub"]);
    let bad = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(&b"[1,2"[..]);
    assert!(needed(&bad, "c").is_err());
}

#[test]
fn store_semantics_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    {
        let m = AuthMetadata::open(dir.path()).expect("open");
        m.create_user(user("alice", "alice-secret", UserType::Normal)).expect("alice");
        assert!(m.create_user(user("alice", "again", UserType::Normal)).is_err(), "The user is existed");
        assert!(m.upsert_acl(acl("User:nobody", "Custom", vec![entry("Topic:t", &["Pub"], &[], "Allow")])).is_err());
        m.upsert_acl(acl(
            "User:alice",
            "Custom",
            vec![entry("Topic:t1", &["Pub"], &[], "Allow"), entry("Topic:t2", &["Sub"], &[], "Allow")],
        ))
        .expect("acl");
        m.delete_acl(
            "User:alice",
            ferromq_auth::v2::model::PolicyType::Custom,
            Some(&ferromq_auth::v2::model::Resource::parse("Topic:t1").expect("r")),
        )
        .expect("delete entry");
        assert!(m.ensure_super_user("root", "root-secret").expect("root"));
        assert!(!m.ensure_super_user("root", "other").expect("exists"));
    }
    let m = AuthMetadata::open(dir.path()).expect("reopen");
    assert_eq!(m.user("alice").expect("alice").password, "alice-secret");
    assert_eq!(m.user("root").expect("root").user_type, UserType::Super);
    let a = m.acl("User:alice").expect("subject exists").expect("acl");
    assert_eq!(a.policies[0].entries.len(), 1);
    assert_eq!(a.policies[0].entries[0].resource.key(), "Topic:t2");
    assert_eq!(m.list_users(Some("ali")).len(), 1);
    assert_eq!(m.list_users(None).len(), 2);
    assert_eq!(m.list_acls(None, Some("t2")).len(), 1);
    assert_eq!(m.list_acls(None, Some("t9")).len(), 0);
    m.delete_user("alice").expect("delete");
    assert!(m.acl("User:alice").is_err(), "the user and its ACL are gone");
    // Java's validation of ACL bodies.
    let bad = |e: PolicyEntryInfo| {
        let info = AclInfo {
            subject: Some("User:root".into()),
            policies: vec![PolicyInfo { policy_type: None, entries: vec![e] }],
        };
        Acl::from_info(&info, None).expect_err("invalid").to_string()
    };
    assert_eq!(bad(entry("Queue:x", &["Pub"], &[], "Allow")), "The resource is null.");
    assert_eq!(bad(entry("Topic:x", &["Fly"], &[], "Allow")), "The actions is empty.");
    assert_eq!(bad(entry("Topic:x", &["Any"], &[], "Allow")), "The actions can not be Any.");
    assert_eq!(bad(entry("Topic:x", &["Pub"], &["10.0.0.300"], "Allow")), "The source ip is invalid.");
    assert_eq!(bad(entry("Topic:x", &["Pub"], &[], "Maybe")), "The decision is null or illegal.");
}
