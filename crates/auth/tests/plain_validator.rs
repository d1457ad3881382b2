//! ACL 1.0 decisions (acl-and-tls.md 2.2-2.5) on real files in a temp dir: the validation
//! order, per-resource and default permissions, admin codes, white addresses, reloading, and
//! the admin changes written back.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ferromq_auth::plain::{AccountUpdate, PlainAccessValidator, PlainAclFile};
use ferromq_protocol::body::{ConsumerData, HeartbeatData, JsonBody, SubscriptionData};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{request_code, RemotingCommand};

const ACL: &str = "\
globalWhiteRemoteAddresses:
  - 10.10.103.*

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
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
";

struct Fixture {
    _dir: tempfile::TempDir,
    default_file: PathBuf,
    acl_dir: PathBuf,
    validator: PlainAccessValidator,
}

fn fixture(text: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let default_file = dir.path().join("conf/plain_acl.yml");
    let acl_dir = dir.path().join("conf/acl");
    std::fs::create_dir_all(&acl_dir).expect("acl dir");
    std::fs::write(&default_file, text).expect("acl file");
    let validator = PlainAccessValidator::load(default_file.clone(), acl_dir.clone()).expect("loads");
    Fixture { _dir: dir, default_file, acl_dir, validator }
}

const LOCAL: &str = "127.0.0.1";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn signed(mut r: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
    SessionCredentials::new(ak, sk).sign(&mut r);
    r
}

fn send_v2(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_body(&b"body"[..]);
    r.ext_fields.insert("a".into(), "producer_group");
    r.ext_fields.insert("b".into(), topic);
    r
}

fn pull(topic: &str, group: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::PULL_MESSAGE);
    r.ext_fields.insert("topic".into(), topic);
    r.ext_fields.insert("consumerGroup".into(), group);
    r.ext_fields.insert("queueId".into(), "0");
    r
}

fn reason(f: &Fixture, r: &RemotingCommand, from: &str) -> Option<String> {
    f.validator.validate(r, ip(from)).err().map(|d| d.reason)
}

#[test]
fn validation_order_of_plain_permission_manager() {
    let f = fixture(ACL);
    // 1. Global white address: anything goes, unsigned.
    assert_eq!(reason(&f, &send_v2("topicA"), "10.10.103.7"), None);
    // 2. No access key.
    assert_eq!(reason(&f, &send_v2("topicB"), LOCAL).as_deref(), Some("No accessKey is configured"));
    // 3. Unknown account.
    assert_eq!(
        reason(&f, &signed(send_v2("topicB"), "nobody99", "12345678"), LOCAL).as_deref(),
        Some("No acl config for nobody99")
    );
    // 4. The account's white address: no signature, no permission check.
    let mut unsigned = send_v2("topicA");
    unsigned.ext_fields.insert("AccessKey".into(), "rocketmq2");
    assert_eq!(reason(&f, &unsigned, "192.168.1.20"), None);
    // 5. Signature.
    assert_eq!(
        reason(&f, &signed(send_v2("topicB"), "RocketMQ", "wrong-secret"), LOCAL).as_deref(),
        Some("Check signature failed for accessKey=RocketMQ")
    );
    let mut tampered = signed(send_v2("topicB"), "RocketMQ", "12345678");
    tampered.ext_fields.insert("b".into(), "topicC");
    assert!(reason(&f, &tampered, LOCAL).expect("refused").starts_with("Check signature failed"));
    // 6. The trace topic takes any account's messages.
    assert_eq!(reason(&f, &signed(send_v2("RMQ_SYS_TRACE_TOPIC"), "RocketMQ", "12345678"), LOCAL), None);
    // 7. Admin codes.
    let create = signed(RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC), "RocketMQ", "12345678");
    assert_eq!(
        reason(&f, &create, LOCAL).as_deref(),
        Some("Need admin permission for request code=17, but accessKey=RocketMQ is not")
    );
    let create = signed(RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC), "rocketmq2", "12345678");
    assert_eq!(reason(&f, &create, LOCAL), None);
    // The stricter admin list: rewinding a group's offsets is not for a producer key.
    let reset = signed(RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET), "RocketMQ", "12345678");
    assert!(reason(&f, &reset, LOCAL).expect("refused").starts_with("Need admin permission"));
}

#[test]
fn explicit_and_default_permissions() {
    let f = fixture(ACL);
    let send = |t: &str| reason(&f, &signed(send_v2(t), "RocketMQ", "12345678"), LOCAL);
    assert_eq!(
        send("topicA").as_deref(),
        Some("No default permission for topic:topicA (accessKey=RocketMQ needs PUB)")
    );
    assert_eq!(send("topicB"), None);
    assert_eq!(
        send("topicC").as_deref(),
        Some("No default permission for topic:topicC (accessKey=RocketMQ needs PUB)")
    );
    assert_eq!(
        send("topicD").as_deref(),
        Some("No default permission for topic:topicD (accessKey=RocketMQ needs PUB)"),
        "defaultTopicPerm DENY"
    );
    let pull = |t: &str, g: &str| reason(&f, &signed(pull(t, g), "RocketMQ", "12345678"), LOCAL);
    assert_eq!(pull("topicC", "groupC"), None);
    assert_eq!(
        pull("topicC", "groupA").as_deref(),
        Some("No default permission for group:groupA (accessKey=RocketMQ needs SUB)")
    );
    assert_eq!(pull("topicC", "groupZ"), None, "defaultGroupPerm SUB");
    assert_eq!(
        pull("topicA", "groupB").as_deref(),
        Some("No default permission for topic:topicA (accessKey=RocketMQ needs SUB)")
    );
    // A send to a retry topic is a group matter: groupA is denied, groupC may.
    assert_eq!(
        send("%RETRY%groupA").as_deref(),
        Some("No default permission for group:groupA (accessKey=RocketMQ needs SUB)")
    );
    assert_eq!(send("%RETRY%groupC"), None);
    // An admin account with no explicit permissions may do anything.
    assert_eq!(reason(&f, &signed(send_v2("topicA"), "rocketmq2", "12345678"), LOCAL), None);
}

#[test]
fn heartbeat_needs_every_group_and_subscribed_topic() {
    let f = fixture(ACL);
    let heartbeat = |group: &str, topic: &str| {
        let body = HeartbeatData {
            client_id: "127.0.0.1@1".into(),
            consumer_data_set: vec![ConsumerData {
                group_name: group.into(),
                subscription_data_set: vec![SubscriptionData {
                    topic: topic.into(),
                    sub_string: "*".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = RemotingCommand::request(request_code::HEART_BEAT).with_body(body.encode());
        reason(&f, &signed(r, "RocketMQ", "12345678"), LOCAL)
    };
    assert_eq!(heartbeat("groupC", "topicC"), None);
    assert_eq!(
        heartbeat("groupA", "topicC").as_deref(),
        Some("No default permission for group:groupA (accessKey=RocketMQ needs SUB)")
    );
    assert_eq!(
        heartbeat("groupC", "topicA").as_deref(),
        Some("No default permission for topic:topicA (accessKey=RocketMQ needs SUB)")
    );
    let garbage = RemotingCommand::request(request_code::HEART_BEAT).with_body(&b"{not json"[..]);
    assert!(reason(&f, &signed(garbage, "RocketMQ", "12345678"), LOCAL)
        .expect("refused")
        .starts_with("heartbeat body"));
}

fn touch_later(path: &Path, text: &str) {
    // A later modification time than the previous write, whatever the file system's clock
    // granularity.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(path, text).expect("rewrite");
}

#[test]
fn files_reload_when_changed_and_a_broken_file_keeps_the_old_rules() {
    let f = fixture(ACL);
    let send =
        |v: &PlainAccessValidator| v.validate(&signed(send_v2("topicD"), "RocketMQ", "12345678"), ip(LOCAL)).err();
    assert!(send(&f.validator).is_some());
    assert!(!f.validator.reload_if_changed().expect("no change"), "nothing changed yet");
    touch_later(&f.default_file, &ACL.replace("defaultTopicPerm: DENY", "defaultTopicPerm: PUB"));
    assert!(f.validator.reload_if_changed().expect("reloads"));
    assert_eq!(send(&f.validator), None);

    touch_later(&f.default_file, "accounts: [\n");
    let e = f.validator.reload_if_changed().expect_err("broken file");
    assert!(e.to_string().contains("plain_acl.yml"), "{e}");
    assert_eq!(send(&f.validator), None, "the previous rules stay in force");

    // A second file in conf/acl adds an account; the same key twice is refused.
    touch_later(&f.default_file, ACL);
    std::fs::write(
        f.acl_dir.join("team.yml"),
        "accounts:\n  - accessKey: teamkey1\n    secretKey: teamsecret\n    defaultTopicPerm: PUB\n",
    )
    .expect("second file");
    assert!(f.validator.reload_if_changed().expect("reloads both"));
    assert_eq!(f.validator.validate(&signed(send_v2("any"), "teamkey1", "teamsecret"), ip(LOCAL)), Ok(()));
    touch_later(&f.acl_dir.join("dup.yaml"), "accounts:\n  - accessKey: teamkey1\n    secretKey: othersecret\n");
    let e = f.validator.reload_if_changed().expect_err("duplicate key");
    assert!(e.to_string().contains("teamkey1"), "{e}");
}

#[test]
fn admin_changes_are_written_back_and_take_effect() {
    let f = fixture(ACL);
    f.validator
        .update_account(AccountUpdate {
            access_key: "newuser1".into(),
            secret_key: Some("newsecret1".into()),
            default_topic_perm: Some("PUB".into()),
            topic_perms: Some(vec!["secret=DENY".into()]),
            ..Default::default()
        })
        .expect("created");
    let ok = f.validator.validate(&signed(send_v2("open"), "newuser1", "newsecret1"), ip(LOCAL));
    assert_eq!(ok, Ok(()));
    assert!(f.validator.validate(&signed(send_v2("secret"), "newuser1", "newsecret1"), ip(LOCAL)).is_err());
    let on_disk = PlainAclFile::parse(&std::fs::read_to_string(&f.default_file).expect("read")).expect("parses");
    assert!(on_disk.accounts.iter().any(|a| a.access_key == "newuser1" && a.topic_perms == ["secret=DENY"]));
    assert_eq!(on_disk.data_version.counter, 1);
    assert_eq!(f.validator.default_data_version().counter, 1);

    // A partial update keeps what it does not name.
    f.validator
        .update_account(AccountUpdate {
            access_key: "newuser1".into(),
            default_topic_perm: Some("SUB".into()),
            ..Default::default()
        })
        .expect("updated");
    assert!(f.validator.validate(&signed(send_v2("open"), "newuser1", "newsecret1"), ip(LOCAL)).is_err());
    assert_eq!(
        f.validator
            .validate(&signed(pull("open", "g"), "newuser1", "newsecret1"), ip(LOCAL))
            .err()
            .map(|d| d.reason)
            .as_deref(),
        Some("No default permission for group:g (accessKey=newuser1 needs SUB)")
    );

    f.validator.delete_account("newuser1").expect("deleted");
    assert!(f.validator.delete_account("newuser1").is_err(), "already gone");
    assert_eq!(
        f.validator
            .validate(&signed(send_v2("open"), "newuser1", "newsecret1"), ip(LOCAL))
            .err()
            .map(|d| d.reason)
            .as_deref(),
        Some("No acl config for newuser1")
    );

    // Rules of the admin API.
    let short = AccountUpdate { access_key: "short".into(), secret_key: Some("12345678".into()), ..Default::default() };
    assert!(f.validator.update_account(short).is_err());
    let no_secret = AccountUpdate { access_key: "nosecret1".into(), ..Default::default() };
    assert!(f.validator.update_account(no_secret).is_err());
    let bad_white = AccountUpdate {
        access_key: "badwhite1".into(),
        secret_key: Some("12345678".into()),
        white_remote_address: Some("1.2.3".into()),
        ..Default::default()
    };
    assert!(f.validator.update_account(bad_white).is_err());

    // Global white addresses: the default file, a file of conf/acl, never elsewhere.
    f.validator.update_global_white_addrs(vec!["127.0.0.*".into()], None).expect("default file");
    assert_eq!(f.validator.validate(&send_v2("topicA"), ip(LOCAL)), Ok(()));
    let outside = f.default_file.parent().expect("conf").parent().expect("home").join("evil.yml");
    assert!(f.validator.update_global_white_addrs(vec!["*".into()], Some(outside.to_str().expect("utf-8"))).is_err());
    assert!(!outside.exists());
    let inside = f.acl_dir.join("extra.yml");
    f.validator
        .update_global_white_addrs(vec!["10.0.0.1".into()], Some(inside.to_str().expect("utf-8")))
        .expect("acl dir file");
    assert!(inside.exists());
    assert_eq!(f.validator.data_versions().len(), 2);
}

#[test]
fn a_missing_file_is_a_start_error_naming_the_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = PlainAccessValidator::load(dir.path().join("conf/plain_acl.yml"), dir.path().join("conf/acl"))
        .expect_err("no file");
    assert!(e.to_string().contains("conf/plain_acl.yml"), "{e}");
}

#[test]
fn batch_ack_needs_every_group_and_topic_it_names() {
    let f = fixture(ACL);
    let batch = |group: &str, topic: &str| {
        let body = format!(
            r#"{{"acks":[{{"c":"groupC","t":"topicC","b":"AQ==","q":0,"so":0,"it":60000,"pt":1,"r":"0","rq":0}},
                {{"c":"{group}","t":"{topic}","b":"AQ==","q":1,"so":3,"it":60000,"pt":1,"r":"0","rq":0}}]}}"#
        );
        let r = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(body.into_bytes());
        reason(&f, &signed(r, "RocketMQ", "12345678"), LOCAL)
    };
    assert_eq!(batch("groupC", "topicB"), None);
    assert_eq!(
        batch("groupA", "topicC").as_deref(),
        Some("No default permission for group:groupA (accessKey=RocketMQ needs SUB)")
    );
    assert_eq!(
        batch("groupC", "topicA").as_deref(),
        Some("No default permission for topic:topicA (accessKey=RocketMQ needs SUB)")
    );
    let garbage = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(&b"{\"acks\":7"[..]);
    assert!(reason(&f, &signed(garbage, "RocketMQ", "12345678"), LOCAL)
        .expect("refused")
        .starts_with("batch ack body"));
}
