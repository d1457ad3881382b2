//! ACL 1.0 end to end (acl-and-tls.md section 2): a `ferromq standalone` process with
//! `aclEnable=true` and a `plain_acl.yml` under its `rocketmqHome`, our Rust client and admin
//! CLI signing with accounts' keys, and the official C++ client (PyPI `rocketmq`) signing with
//! its session credentials. Allowed and denied per topic, group, admin request and address;
//! the file changed at runtime and by the admin commands.

#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ferromq_client::ConsumeFromWhere;
use ferromq_client::{
    ClientConfig, LitePullConsumer, LitePullConsumerConfig, Message, Producer, ProducerConfig, SessionCredentials,
};
use ferromq_protocol::header::UpdateConsumerOffsetRequestHeader;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{pull_request, start_standalone_with_conf, Standalone};

mod common;
use common::e2e::run_e2e;

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);

const ACL: &str = "\
globalWhiteRemoteAddresses:

accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - orders=PUB
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - orders=SUB
    groupPerms:
      - billing=SUB
  - accessKey: admin0001
    secretKey: admin-secret
    admin: true
";

struct Secured {
    server: Standalone,
    home: tempfile::TempDir,
}

impl Secured {
    fn start() -> Secured {
        let home = tempfile::tempdir().expect("home");
        std::fs::create_dir_all(home.path().join("conf")).expect("conf dir");
        std::fs::write(acl_file(home.path()), ACL).expect("plain_acl.yml");
        let conf = format!("aclEnable=true\nrocketmqHome={}\n", home.path().display());
        let server = start_standalone_with_conf(BIN, &conf);
        let s = Secured { server, home };
        // Topics are an admin matter now.
        s.admin_ok(
            &["updateTopic", "-b", &s.server.broker.clone(), "-t", "orders", "-r", "4", "-w", "4"],
            "admin0001",
            "admin-secret",
        );
        s.admin_ok(
            &["updateTopic", "-b", &s.server.broker.clone(), "-t", "payments", "-r", "4", "-w", "4"],
            "admin0001",
            "admin-secret",
        );
        s
    }

    fn admin(&self, args: &[&str], ak: &str, sk: &str) -> Output {
        let mut command = Command::new(BIN);
        command.arg("admin");
        if !ak.is_empty() {
            command.args(["--accessKey", ak, "--secretKey", sk]);
        }
        command.args(args).args(["-n", &self.server.namesrv]).env("RUST_LOG", "warn").env_remove("ROCKETMQ_HOME");
        command.output().expect("run ferromq admin")
    }

    fn admin_ok(&self, args: &[&str], ak: &str, sk: &str) -> String {
        let out = self.admin(args, ak, sk);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "admin {args:?} as {ak} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn admin_refused(&self, args: &[&str], ak: &str, sk: &str) -> String {
        let out = self.admin(args, ak, sk);
        assert!(!out.status.success(), "admin {args:?} as {ak} should be refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn client(&self, creds: Option<(&str, &str)>) -> ClientConfig {
        ClientConfig {
            credentials: creds.map(|(ak, sk)| SessionCredentials::new(ak, sk)),
            ..ClientConfig::with_namesrv(&self.server.namesrv)
        }
    }
}

fn acl_file(home: &Path) -> std::path::PathBuf {
    home.join("conf/plain_acl.yml")
}

async fn send_one(s: &Secured, creds: Option<(&str, &str)>, topic: &str) -> Result<(), String> {
    let p = Producer::new(ProducerConfig { group: "pg_acl".into(), ..ProducerConfig::default() }, s.client(creds));
    p.start().await.map_err(|e| e.to_string())?;
    let result = p.send(Message::new(topic, b"acl-body".to_vec())).await.map(drop).map_err(|e| format!("{e:#}"));
    p.shutdown().await;
    result
}

fn remark_of(result: Result<(), String>) -> String {
    result.expect_err("the broker should refuse")
}

async fn pull_code(s: &Secured, creds: Option<(&str, &str)>, topic: &str, group: &str) -> (i32, String) {
    let config = ferromq_remoting::ClientConfig::default()
        .with_credentials(creds.map(|(ak, sk)| SessionCredentials::new(ak, sk)));
    let client = RemotingClient::new(config);
    let mut request = pull_request(topic, 0, 0, "*", 0);
    request.ext_fields.insert("consumerGroup".into(), group);
    let response = client.invoke(&s.server.broker, request, T).await.expect("pull answered");
    client.shutdown().await;
    (response.code, response.remark.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_are_enforced_for_our_client_and_admin_cli() {
    let s = Secured::start();

    // Sends: the permitted topic; others, no key, a wrong secret, an unknown account refused.
    send_one(&s, Some(("producer1", "producer-secret")), "orders").await.expect("producer1 may send to orders");
    let r = remark_of(send_one(&s, Some(("producer1", "producer-secret")), "payments").await);
    assert!(r.contains("No default permission for topic:payments (accessKey=producer1 needs PUB)"), "{r}");
    let r = remark_of(send_one(&s, None, "orders").await);
    assert!(r.contains("No accessKey is configured"), "{r}");
    let r = remark_of(send_one(&s, Some(("producer1", "not-the-secret")), "orders").await);
    assert!(r.contains("Check signature failed for accessKey=producer1"), "{r}");
    let r = remark_of(send_one(&s, Some(("stranger1", "whatever1")), "orders").await);
    assert!(r.contains("No acl config for stranger1"), "{r}");

    // Pulls: consumer1 as billing on orders; not another group, not another topic, not the
    // producer's key. Refusals are SYSTEM_ERROR, as Java 4.x answers.
    let (code, _) = pull_code(&s, Some(("consumer1", "consumer-secret")), "orders", "billing").await;
    assert_ne!(code, response_code::SYSTEM_ERROR);
    let (code, remark) = pull_code(&s, Some(("consumer1", "consumer-secret")), "orders", "audit").await;
    assert_eq!(
        (code, remark.as_str()),
        (response_code::SYSTEM_ERROR, "No default permission for group:audit (accessKey=consumer1 needs SUB)")
    );
    let (code, remark) = pull_code(&s, Some(("consumer1", "consumer-secret")), "payments", "billing").await;
    assert_eq!(code, response_code::SYSTEM_ERROR, "{remark}");
    let (code, remark) = pull_code(&s, Some(("producer1", "producer-secret")), "orders", "billing").await;
    assert_eq!(code, response_code::SYSTEM_ERROR, "{remark}");

    // Our lite pull consumer, signing as consumer1, reads what producer1 sent.
    let consumer = LitePullConsumer::new(
        LitePullConsumerConfig {
            group: "billing".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        },
        s.client(Some(("consumer1", "consumer-secret"))),
    );
    consumer.subscribe("orders", "*").await.expect("subscribe");
    consumer.start().await.expect("start");
    let deadline = Instant::now() + T;
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(Instant::now() < deadline, "consumer1 never received the message producer1 sent");
        got.extend(consumer.poll(Duration::from_millis(200)).await);
    }
    assert_eq!(got[0].body()[..], b"acl-body"[..]);
    consumer.shutdown().await;

    // Admin requests need an admin account.
    let e = s.admin_refused(&["updateTopic", "-b", &s.server.broker, "-t", "sneaky"], "producer1", "producer-secret");
    assert!(e.contains("Need admin permission for request code=17, but accessKey=producer1 is not"), "{e}");
    let e = s.admin_refused(
        &["updateAclConfig", "-b", &s.server.broker, "-a", "hacker01", "-s", "hacker-secret", "-m", "true"],
        "producer1",
        "producer-secret",
    );
    assert!(e.contains("Need admin permission"), "{e}");
    let e = s.admin_refused(&["updateTopic", "-b", &s.server.broker, "-t", "sneaky"], "", "");
    assert!(e.contains("No accessKey is configured"), "{e}");

    // The admin account manages accounts; the file on disk follows and the change applies at once.
    s.admin_ok(
        &[
            "updateAclConfig",
            "-b",
            &s.server.broker,
            "-a",
            "auditor1",
            "-s",
            "auditor-secret",
            "-i",
            "PUB",
            "-t",
            "orders=DENY",
        ],
        "admin0001",
        "admin-secret",
    );
    let on_disk = std::fs::read_to_string(acl_file(s.home.path())).expect("acl file");
    assert!(on_disk.contains("auditor1"), "{on_disk}");
    send_one(&s, Some(("auditor1", "auditor-secret")), "payments").await.expect("defaultTopicPerm PUB");
    let r = remark_of(send_one(&s, Some(("auditor1", "auditor-secret")), "orders").await);
    assert!(r.contains("No default permission for topic:orders"), "{r}");
    let versions = s.admin_ok(&["clusterAclConfigVersion", "-b", &s.server.broker], "admin0001", "admin-secret");
    assert!(
        versions.contains("plain_acl.yml") && versions.lines().nth(1).is_some_and(|l| l.contains(" 1 ")),
        "{versions}"
    );
    let accounts = s.admin_ok(&["getAclConfig", "-b", &s.server.broker], "admin0001", "admin-secret");
    assert!(accounts.contains("accessKey=auditor1") && accounts.contains("topicPerms=orders=DENY"), "{accounts}");
    s.admin_ok(&["deleteAclConfig", "-b", &s.server.broker, "-a", "auditor1"], "admin0001", "admin-secret");
    let r = remark_of(send_one(&s, Some(("auditor1", "auditor-secret")), "payments").await);
    assert!(r.contains("No acl config for auditor1"), "{r}");

    // The file edited by hand is picked up without a restart.
    let edited = ACL.replace("      - orders=PUB\n", "      - orders=PUB\n      - payments=PUB\n");
    std::fs::write(acl_file(s.home.path()), edited).expect("edit acl file");
    let deadline = Instant::now() + T;
    while send_one(&s, Some(("producer1", "producer-secret")), "payments").await.is_err() {
        assert!(Instant::now() < deadline, "the edited ACL file was never applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A global white address lets unsigned requests through.
    s.admin_ok(&["updateGlobalWhiteAddr", "-b", &s.server.broker, "-g", "127.0.0.1"], "admin0001", "admin-secret");
    send_one(&s, None, "orders").await.expect("127.0.0.1 is trusted now");
    s.admin_ok(&["updateGlobalWhiteAddr", "-b", &s.server.broker, "-g", ""], "admin0001", "admin-secret");
    assert!(send_one(&s, None, "orders").await.is_err(), "the white list is empty again");

    // An offset commit is a group matter too.
    let config = ferromq_remoting::ClientConfig::default()
        .with_credentials(Some(SessionCredentials::new("consumer1", "consumer-secret")));
    let client = RemotingClient::new(config);
    let commit = |group: &str| {
        RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: "orders".into(),
            queue_id: 0,
            commit_offset: 0,
            broker_name: None,
            lo: None,
        })
    };
    let ok = client.invoke(&s.server.broker, commit("billing"), T).await.expect("answered");
    assert_eq!(ok.code, response_code::SUCCESS, "{:?}", ok.remark);
    let refused = client.invoke(&s.server.broker, commit("audit"), T).await.expect("answered");
    assert_eq!(refused.code, response_code::SYSTEM_ERROR);
    client.shutdown().await;
}

#[test]
fn cpp_client_signs_with_session_credentials() {
    let s = Secured::start();
    let dir = tempfile::tempdir().expect("client homes");
    let run = |label: &str, args: &[&str]| {
        let (run, problem) = run_e2e(label, &dir.path().join(label), args, &s.server.namesrv, 30);
        assert!(problem.is_none(), "{problem:?}");
        run
    };
    let produce = |label: &str, topic: &str, ak: &str, sk: &str| {
        run(
            label,
            &[
                "produce",
                "--topic",
                topic,
                "--group",
                "PG_ACL_CPP",
                "--count",
                "5",
                "--access-key",
                ak,
                "--secret-key",
                sk,
            ],
        )
    };
    let ok = produce("produce-ok", "orders", "producer1", "producer-secret");
    assert!(ok.status.success(), "the C++ client with producer1's keys could not send:\n{}\n{}", ok.stdout, ok.stderr);
    assert_eq!(ok.events("sent").count(), 5, "{}", ok.stdout);

    let wrong = produce("produce-wrong-secret", "orders", "producer1", "not-the-secret");
    assert!(!wrong.status.success(), "a wrong secret must be refused:\n{}", wrong.stdout);
    let log = common::e2e::dir_tail(&dir.path().join("produce-wrong-secret/logs/rocketmq-cpp"), 400);
    assert!(log.contains("Check signature failed"), "{log}");
    let denied = produce("produce-denied", "payments", "producer1", "producer-secret");
    assert!(!denied.status.success(), "payments is not producer1's:\n{}", denied.stdout);
    // The C++ client reports a refused send as "No route info" after its retries; the broker's
    // remark is in its log.
    let log = common::e2e::dir_tail(&dir.path().join("produce-denied/logs/rocketmq-cpp"), 400);
    assert!(log.contains("No default permission for topic:payments"), "{log}");

    let pull = run(
        "pull-ok",
        &[
            "pull-consume",
            "--topic",
            "orders",
            "--group",
            "billing",
            "--expect",
            "5",
            "--access-key",
            "consumer1",
            "--secret-key",
            "consumer-secret",
        ],
    );
    assert!(pull.status.success(), "consumer1 could not pull orders as billing:\n{}\n{}", pull.stdout, pull.stderr);
    assert_eq!(pull.events("message").count(), 5, "{}", pull.stdout);
}
