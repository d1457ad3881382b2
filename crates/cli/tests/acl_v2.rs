//! ACL 2.0 end to end (acl-and-tls.md section 3): a `ferromq standalone` process with
//! `authenticationEnabled` and `authorizationEnabled`, its first SUPER user from
//! `initAuthenticationUser`, users and ACLs made with the admin CLI, and our Rust client
//! allowed and refused per topic, group, action and source address, with 5.3's NO_PERMISSION
//! and remarks. Then a slave that copies its master's users and ACLs.

#![cfg(unix)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ferromq_client::{ClientConfig, Message, Producer, ProducerConfig, SessionCredentials};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{pull_request, start_standalone_with_conf, LocalCluster, Standalone};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);
const ROOT: (&str, &str) = ("rocketmq", "12345678");

struct Secured {
    server: Standalone,
}

impl Secured {
    fn start() -> Secured {
        let conf = "authenticationEnabled=true\nauthorizationEnabled=true\n\
                    initAuthenticationUser={\"username\":\"rocketmq\",\"password\":\"12345678\"}\n";
        Secured { server: start_standalone_with_conf(BIN, conf) }
    }

    fn admin(&self, args: &[&str], creds: Option<(&str, &str)>) -> Output {
        let mut command = Command::new(BIN);
        command.arg("admin");
        if let Some((ak, sk)) = creds {
            command.args(["--accessKey", ak, "--secretKey", sk]);
        }
        command.args(args).args(["-n", &self.server.namesrv]).env("RUST_LOG", "warn").env_remove("ROCKETMQ_HOME");
        command.output().expect("run ferromq admin")
    }

    fn ok(&self, args: &[&str], creds: (&str, &str)) -> String {
        let out = self.admin(args, Some(creds));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "admin {args:?} failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        stdout
    }

    fn refused(&self, args: &[&str], creds: Option<(&str, &str)>) -> String {
        let out = self.admin(args, creds);
        assert!(!out.status.success(), "admin {args:?} should be refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn broker(&self) -> String {
        self.server.broker.clone()
    }
}

async fn send_one(s: &Secured, creds: Option<(&str, &str)>, topic: &str) -> Result<(), String> {
    let config = ClientConfig {
        credentials: creds.map(|(ak, sk)| SessionCredentials::new(ak, sk)),
        ..ClientConfig::with_namesrv(&s.server.namesrv)
    };
    let p = Producer::new(ProducerConfig { group: "pg_acl2".into(), ..ProducerConfig::default() }, config);
    p.start().await.map_err(|e| e.to_string())?;
    let result = p.send(Message::new(topic, b"acl2".to_vec())).await.map(drop).map_err(|e| format!("{e:#}"));
    p.shutdown().await;
    result
}

async fn pull(addr: &str, creds: (&str, &str), topic: &str, group: &str) -> (i32, String) {
    let config =
        ferromq_remoting::ClientConfig::default().with_credentials(Some(SessionCredentials::new(creds.0, creds.1)));
    let client = RemotingClient::new(config);
    let mut request = pull_request(topic, 0, 0, "*", 0);
    request.ext_fields.insert("consumerGroup".into(), group);
    let response = client.invoke(addr, request, T).await.expect("answered");
    client.shutdown().await;
    (response.code, response.remark.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_and_policies_decide_for_our_client_and_admin_cli() {
    let s = Secured::start();
    let b = s.broker();
    s.ok(&["updateTopic", "-b", &b, "-t", "orders", "-r", "4", "-w", "4"], ROOT);
    s.ok(&["updateTopic", "-b", &b, "-t", "payments", "-r", "4", "-w", "4"], ROOT);
    s.ok(&["createUser", "-b", &b, "-u", "alice", "-p", "alice-secret"], ROOT);
    s.ok(&["createUser", "-b", &b, "-u", "bob", "-p", "bob-secret"], ROOT);
    s.ok(&["createAcl", "-b", &b, "-s", "User:alice", "-r", "Topic:orders", "-a", "Pub", "-d", "Allow"], ROOT);
    s.ok(
        &["createAcl", "-b", &b, "-s", "User:bob", "-r", "Topic:orders,Group:billing", "-a", "Sub", "-d", "Allow"],
        ROOT,
    );
    s.ok(
        &[
            "createAcl",
            "-b",
            &b,
            "-s",
            "User:bob",
            "-r",
            "Group:billing-*",
            "-a",
            "Sub",
            "-i",
            "10.0.0.0/8",
            "-d",
            "Allow",
        ],
        ROOT,
    );

    // Authentication.
    send_one(&s, Some(("alice", "alice-secret")), "orders").await.expect("alice publishes to orders");
    let r = send_one(&s, None, "orders").await.expect_err("unsigned");
    assert!(r.contains("username cannot be null."), "{r}");
    let r = send_one(&s, Some(("alice", "wrong-secret")), "orders").await.expect_err("bad signature");
    assert!(r.contains("check signature failed."), "{r}");
    let r = send_one(&s, Some(("mallory", "whatever")), "orders").await.expect_err("no such user");
    assert!(r.contains("User:mallory is not found."), "{r}");

    // Authorization: the topic, the action, the group, the source address.
    let r = send_one(&s, Some(("alice", "alice-secret")), "payments").await.expect_err("not alice's topic");
    assert!(
        r.contains("User:alice has no permission to access Topic:payments from 127.0.0.1, no matched policies."),
        "{r}"
    );
    let r = send_one(&s, Some(("bob", "bob-secret")), "orders").await.expect_err("bob may only subscribe");
    assert!(r.contains("User:bob has no permission to access Topic:orders"), "{r}");
    let (code, remark) = pull(&b, ("bob", "bob-secret"), "orders", "billing").await;
    assert_ne!(code, response_code::NO_PERMISSION, "{remark}");
    let (code, remark) = pull(&b, ("bob", "bob-secret"), "orders", "audit").await;
    assert_eq!(
        (code, remark.as_str()),
        (
            response_code::NO_PERMISSION,
            "User:bob has no permission to access Group:audit from 127.0.0.1, no matched policies."
        )
    );
    let (code, _) = pull(&b, ("bob", "bob-secret"), "orders", "billing-eu").await;
    assert_eq!(code, response_code::NO_PERMISSION, "the Group:billing-* entry is for 10.0.0.0/8 only");
    let (code, _) = pull(&b, ("alice", "alice-secret"), "orders", "billing").await;
    assert_eq!(code, response_code::NO_PERMISSION);

    // An explicit Deny beats a wider Allow.
    s.ok(&["updateAcl", "-b", &b, "-s", "User:alice", "-r", "Topic:*", "-a", "Pub", "-d", "Allow"], ROOT);
    s.ok(&["updateAcl", "-b", &b, "-s", "User:alice", "-r", "Topic:payments", "-a", "Pub", "-d", "Deny"], ROOT);
    send_one(&s, Some(("alice", "alice-secret")), "orders").await.expect("still allowed");
    let r = send_one(&s, Some(("alice", "alice-secret")), "payments").await.expect_err("denied");
    assert!(r.contains("the decision is deny."), "{r}");

    // Admin requests need Cluster or resource permissions; only SUPER users make SUPER users.
    let e = s.refused(&["createUser", "-b", &b, "-u", "eve", "-p", "eve-secret"], Some(("alice", "alice-secret")));
    assert!(e.contains("User:alice has no permission to access Cluster:"), "{e}");
    let e = s.refused(&["updateTopic", "-b", &b, "-t", "sneaky"], Some(("alice", "alice-secret")));
    assert!(e.contains("Topic:sneaky"), "{e}");
    let e = s.refused(
        &["updateBrokerConfig", "-b", &b, "-k", "storePathRootDir", "-v", "/tmp/x"],
        Some(("alice", "alice-secret")),
    );
    assert!(e.contains("NO_PERMISSION"), "{e}");
    s.ok(&["createAcl", "-b", &b, "-s", "User:bob", "-r", "Cluster:*", "-a", "All", "-d", "Allow"], ROOT);
    let e = s.refused(
        &["createUser", "-b", &b, "-u", "eve", "-p", "eve-secret", "-t", "Super"],
        Some(("bob", "bob-secret")),
    );
    assert!(e.contains("The super user can only be create by super user"), "{e}");
    let e = s.refused(&["updateUser", "-b", &b, "-u", "rocketmq", "-p", "taken-over"], Some(("bob", "bob-secret")));
    assert!(e.contains("The super user can only be update by super user"), "{e}");

    // Reads of the admin API.
    let users = s.ok(&["listUser", "-b", &b], ROOT);
    assert!(users.contains("alice") && users.contains("bob") && users.contains("rocketmq"), "{users}");
    let acl = s.ok(&["getAcl", "-b", &b, "-s", "User:alice"], ROOT);
    assert!(acl.contains("Topic:payments") && acl.contains("Deny"), "{acl}");
    let acls = s.ok(&["listAcl", "-b", &b, "-r", "billing"], ROOT);
    assert!(acls.contains("Group:billing") && !acls.contains("Topic:orders"), "{acls}");

    // Disabling and deleting.
    s.ok(&["updateUser", "-b", &b, "-u", "alice", "-s", "disable"], ROOT);
    let r = send_one(&s, Some(("alice", "alice-secret")), "orders").await.expect_err("disabled");
    assert!(r.contains("User:alice is disabled."), "{r}");
    s.ok(&["deleteAcl", "-b", &b, "-s", "User:bob", "-r", "Group:billing"], ROOT);
    let (code, _) = pull(&b, ("bob", "bob-secret"), "orders", "billing").await;
    assert_eq!(code, response_code::NO_PERMISSION, "the entry is gone");
    s.ok(&["deleteUser", "-b", &b, "-u", "bob"], ROOT);
    let (_, remark) = pull(&b, ("bob", "bob-secret"), "orders", "billing").await;
    assert_eq!(remark, "User:bob is not found.");
}

/// A slave copies its master's users and ACLs; with the master gone, reads from the slave are
/// checked against them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_follows_its_masters_users_and_acls() {
    let tweak = |s: &mut ferromq_broker::BrokerSettings| {
        s.broker.authentication_enabled = true;
        s.broker.authorization_enabled = true;
        s.broker.inner_client_authentication_credentials =
            r#"{"accessKey":"inner-broker","secretKey":"inner-secret"}"#.into();
        s.broker.slave_sync_interval = 200;
    };
    let c = LocalCluster::start(tweak).await;
    let master = c.broker_addr.clone();
    let admin = ferromq_client::admin::AdminClient::with_credentials(
        &c.ns_addr,
        Some(SessionCredentials::new("inner-broker", "inner-secret")),
    );
    admin
        .create_user(
            &master,
            &ferromq_protocol::body::UserInfo {
                username: Some("carol".into()),
                password: Some("carol-secret".into()),
                ..Default::default()
            },
        )
        .await
        .expect("user on the master");
    let acl = ferromq_protocol::body::AclInfo {
        subject: Some("User:carol".into()),
        policies: vec![ferromq_protocol::body::PolicyInfo {
            policy_type: None,
            entries: vec![ferromq_protocol::body::PolicyEntryInfo {
                resource: Some("Topic:*".into()),
                actions: vec!["Sub".into(), "Get".into()],
                source_ips: vec![],
                decision: Some("Allow".into()),
            }],
        }],
    };
    admin.put_acl(&master, &acl, false).await.expect("acl on the master");

    let slave_dir = tempfile::tempdir().expect("slave dir");
    let slave = c.start_slave(1, slave_dir.path(), |_| {}).await;
    let deadline = Instant::now() + T;
    loop {
        let got = admin.get_user(&slave.addr, "carol").await.expect("slave answers");
        if got.is_some() && admin.get_acl(&slave.addr, "User:carol").await.expect("acl").is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the slave never copied carol and her ACL");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The slave replicates what the master stores through the HA port, where it authenticates
    // with its inner credentials (ACL is on: an unauthenticated replica would get nothing).
    let producer = Producer::new(
        ProducerConfig { group: "pg_ha_acl".into(), ..ProducerConfig::default() },
        ClientConfig {
            credentials: Some(SessionCredentials::new("inner-broker", "inner-secret")),
            ..ClientConfig::with_namesrv(&c.ns_addr)
        },
    );
    producer.start().await.expect("producer");
    let sent = producer.send(Message::new("ha_acl_topic", b"replicated".to_vec())).await.expect("send to the master");
    producer.shutdown().await;
    let replicated = RemotingClient::new(
        ferromq_remoting::ClientConfig::default()
            .with_credentials(Some(SessionCredentials::new("carol", "carol-secret"))),
    );
    let deadline = Instant::now() + T;
    loop {
        let mut r = RemotingCommand::request(request_code::GET_MAX_OFFSET);
        r.ext_fields.insert("topic".into(), "ha_acl_topic");
        r.ext_fields.insert("queueId".into(), sent.message_queue.queue_id.to_string().as_str());
        let answer = replicated.invoke(&slave.addr, r, T).await.expect("answered");
        if answer.code == response_code::SUCCESS && answer.ext("offset").is_some_and(|o| o != "0") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave never replicated the message: {:?} {:?}",
            answer.code,
            answer.remark
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    replicated.shutdown().await;
    // The slave checks carol with the copied data: a signed query is let through, an unsigned
    // one and another user's are refused.
    let query = || {
        let mut r = RemotingCommand::request(request_code::GET_MAX_OFFSET);
        r.ext_fields.insert("topic".into(), "TBW102");
        r.ext_fields.insert("queueId".into(), "0");
        r
    };
    let client = |creds: Option<(&str, &str)>| {
        RemotingClient::new(
            ferromq_remoting::ClientConfig::default()
                .with_credentials(creds.map(|(a, s)| SessionCredentials::new(a, s))),
        )
    };
    let carol = client(Some(("carol", "carol-secret")));
    let answer = carol.invoke(&slave.addr, query(), T).await.expect("answered");
    assert_ne!(answer.code, response_code::NO_PERMISSION, "{:?}", answer.remark);
    let anonymous = client(None);
    let answer = anonymous.invoke(&slave.addr, query(), T).await.expect("answered");
    assert_eq!(answer.code, response_code::NO_PERMISSION);
    carol.shutdown().await;
    anonymous.shutdown().await;
    admin.shutdown().await;
    slave.stop().await;
    c.stop().await;
}

/// A 5.x client's request with `authorization` and `x-mq-date-time` as the Java client signs.
fn signed_grpc<T>(client_id: &str, body: T, creds: Option<(&str, &str)>) -> tonic::Request<T> {
    let mut r = common::grpc::req(client_id, body);
    if let Some((ak, sk)) = creds {
        let date = "20261206T094500Z";
        let sig = ferromq_protocol::signature::sign_hex(sk.as_bytes(), date.as_bytes());
        let value = format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}");
        r.metadata_mut().insert("x-mq-date-time", date.parse().expect("ascii"));
        r.metadata_mut().insert("authorization", value.parse().expect("ascii"));
    }
    r
}

/// The gRPC port (the proxy in local mode) checks 5.x clients against the broker's users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_clients_are_checked_against_the_same_users() {
    use common::grpc::{code, res};
    use ferromq_proxy::pb::{self, Code};
    let s = Secured::start();
    let b = s.broker();
    for t in ["orders", "payments"] {
        s.ok(&["updateTopic", "-b", &b, "-t", t, "-a", "+message.type=NORMAL"], ROOT);
    }
    s.ok(&["createUser", "-b", &b, "-u", "alice", "-p", "alice-secret"], ROOT);
    s.ok(&["createAcl", "-b", &b, "-s", "User:alice", "-r", "Topic:orders", "-a", "Pub", "-d", "Allow"], ROOT);
    let mut c = common::grpc::connect(&s.server.grpc).await;
    let route = |creds| signed_grpc("g1", pb::QueryRouteRequest { topic: res("orders"), endpoints: None }, creds);

    let r = c.query_route(route(None)).await.expect("answered").into_inner();
    assert_eq!(code(&r.status), Code::Unauthorized);
    assert_eq!(r.status.as_ref().map(|s| s.message.as_str()), Some("username cannot be null."));
    let r = c.query_route(route(Some(("alice", "wrong")))).await.expect("answered").into_inner();
    assert_eq!(r.status.as_ref().map(|s| s.message.as_str()), Some("check signature failed."));
    let r = c.query_route(route(Some(("alice", "alice-secret")))).await.expect("answered").into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{:?}", r.status);

    let message = |topic: &str| pb::Message {
        topic: res(topic),
        system_properties: Some(pb::SystemProperties {
            message_id: "ACL2GRPC0001".into(),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            ..Default::default()
        }),
        body: b"grpc".to_vec(),
        ..Default::default()
    };
    let send = |topic: &str, creds| signed_grpc("g1", pb::SendMessageRequest { messages: vec![message(topic)] }, creds);
    let r = c.send_message(send("orders", Some(("alice", "alice-secret")))).await.expect("answered").into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{:?}", r.status);
    let r = c.send_message(send("payments", Some(("alice", "alice-secret")))).await.expect("answered").into_inner();
    assert_eq!(code(&r.status), Code::Unauthorized);
    let text = r.status.map(|s| s.message).unwrap_or_default();
    assert!(text.starts_with("User:alice has no permission to access Topic:payments from 127.0.0.1"), "{text}");
}

/// The official C++ client (PyPI `rocketmq`) signs with a user's name and password as its
/// session credentials: it produces and pull-consumes with its ACL, and is refused otherwise.
#[test]
fn cpp_client_signs_as_an_acl_2_user() {
    let s = Secured::start();
    let b = s.broker();
    s.ok(&["updateTopic", "-b", &b, "-t", "orders", "-r", "4", "-w", "4"], ROOT);
    s.ok(&["createUser", "-b", &b, "-u", "cppuser", "-p", "cpp-secret"], ROOT);
    s.ok(
        &[
            "createAcl",
            "-b",
            &b,
            "-s",
            "User:cppuser",
            "-r",
            "Topic:orders,Group:cpp_group",
            "-a",
            "Pub,Sub,Get,Update",
            "-d",
            "Allow",
        ],
        ROOT,
    );
    let dir = tempfile::tempdir().expect("client homes");
    let run = |label: &str, args: &[&str]| {
        let (run, problem) = common::e2e::run_e2e(label, &dir.path().join(label), args, &s.server.namesrv, 30);
        assert!(problem.is_none(), "{problem:?}");
        run
    };
    let ok = run(
        "produce",
        &[
            "produce",
            "--topic",
            "orders",
            "--group",
            "PG_CPP2",
            "--count",
            "5",
            "--access-key",
            "cppuser",
            "--secret-key",
            "cpp-secret",
        ],
    );
    assert!(ok.status.success(), "the C++ client could not send as cppuser:\n{}\n{}", ok.stdout, ok.stderr);
    assert_eq!(ok.events("sent").count(), 5, "{}", ok.stdout);
    let wrong = run(
        "wrong",
        &[
            "produce",
            "--topic",
            "orders",
            "--group",
            "PG_CPP2",
            "--count",
            "1",
            "--access-key",
            "cppuser",
            "--secret-key",
            "nope",
        ],
    );
    assert!(!wrong.status.success(), "a wrong password must be refused:\n{}", wrong.stdout);
    let log = common::e2e::dir_tail(&dir.path().join("wrong/logs/rocketmq-cpp"), 400);
    assert!(log.contains("check signature failed."), "{log}");
    let pull = run(
        "pull",
        &[
            "pull-consume",
            "--topic",
            "orders",
            "--group",
            "cpp_group",
            "--expect",
            "5",
            "--access-key",
            "cppuser",
            "--secret-key",
            "cpp-secret",
        ],
    );
    assert!(pull.status.success(), "cppuser could not pull orders:\n{}\n{}", pull.stdout, pull.stderr);
    assert_eq!(pull.events("message").count(), 5, "{}", pull.stdout);
}
