//! The attacks of issue 19 against a secured cluster started from config files (README,
//! "A secured cluster": a name server with white lists and ACL 2.0, a broker with ACL 2.0, both
//! with `tls.server.mode=enforcing`), each from another address (127.0.0.2, raw remoting frames
//! over TLS, trusting any certificate as Java's clients do) than the cluster's own (127.0.0.1),
//! and the name server's and HA port's again from inside the white lists (an attacker on a
//! cluster host): every one refused, plaintext refused outright, and the cluster still serves
//! its legitimate users afterwards.

#![cfg(unix)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferromq_protocol::body::{
    DataVersion, JsonBody, RegisterBrokerBody, ResetOffsetBody, TopicConfigAndMappingSerializeWrapper,
};
use ferromq_protocol::header::{
    DeleteTopicRequestHeader, PullMessageRequestHeader, RegisterBrokerRequestHeader, ResetOffsetRequestHeader,
    UnRegisterBrokerRequestHeader,
};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{decode_frame, encode_frame, request_code, response_code, RemotingCommand, SerializeType};
use ferromq_remoting::tls::ClientTls;
use ferromq_testkit::{free_broker_port, free_port, spawn_with_config, ChildProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);
const ROOT: (&str, &str) = ("rocketmq", "12345678");

struct Cluster {
    _ns: ChildProcess,
    _broker: ChildProcess,
    namesrv: String,
    broker: String,
    ha_port: u16,
    _dir: tempfile::TempDir,
}

async fn wait_listening(addr: &str) {
    let deadline = Instant::now() + T;
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "{addr} never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start() -> Cluster {
    let dir = tempfile::tempdir().expect("dir");
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let ha_port = free_port();
    let ns_conf = format!(
        "listenPort={ns_port}\nbindAddress=127.0.0.1\nkvConfigPath={d}/kv.json\nconfigStorePath={d}/ns.properties\n\
         brokerRegisterWhiteList=127.0.0.1\nadminRequestWhiteList=127.0.0.1\ntls.server.mode=enforcing\n\
         authenticationEnabled=true\nauthConfigPath={d}/ns-auth\n\
         initAuthenticationUser={{\"username\":\"rocketmq\",\"password\":\"12345678\"}}\n",
        d = dir.path().display()
    );
    let ns = spawn_with_config(BIN, &["namesrv"], &dir.path().join("namesrv.conf"), &ns_conf);
    let namesrv = format!("127.0.0.1:{ns_port}");
    wait_listening(&namesrv).await;
    let broker_conf = format!(
        "brokerClusterName=SecureCluster\nbrokerName=broker-a\nbrokerIP1=127.0.0.1\nlistenPort={broker_port}\n\
         haListenPort={ha_port}\nbindAddress=127.0.0.1\nnamesrvAddr={namesrv}\nstorePathRootDir={d}/store\n\
         authenticationEnabled=true\nauthorizationEnabled=true\ntls.server.mode=enforcing\n\
         initAuthenticationUser={{\"username\":\"rocketmq\",\"password\":\"12345678\"}}\n\
         innerClientAuthenticationCredentials={{\"accessKey\":\"rocketmq\",\"secretKey\":\"12345678\"}}\n",
        d = dir.path().display()
    );
    let broker = spawn_with_config(BIN, &["broker"], &dir.path().join("broker.conf"), &broker_conf);
    let broker_addr = format!("127.0.0.1:{broker_port}");
    wait_listening(&broker_addr).await;
    Cluster { _ns: ns, _broker: broker, namesrv, broker: broker_addr, ha_port, _dir: dir }
}

/// Another host, as far as the cluster can tell.
const ELSEWHERE: &str = "127.0.0.2";
/// A cluster host (inside the white lists).
const INSIDE: &str = "127.0.0.1";

/// A connection from `source`.
async fn connect_from(source: &str, addr: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{source}:0").parse().expect("addr")).expect("bind the source address");
    socket.connect(addr.parse::<SocketAddr>().expect("addr")).await.expect("connect")
}

/// A connection from 127.0.0.2.
async fn from_elsewhere(addr: &str) -> TcpStream {
    connect_from(ELSEWHERE, addr).await
}

/// Sends `request` on a fresh TLS connection from 127.0.0.2 and reads the answer.
async fn attack(addr: &str, request: RemotingCommand, creds: Option<(&str, &str)>) -> RemotingCommand {
    attack_from(ELSEWHERE, addr, request, creds).await
}

/// Sends `request` on a fresh TLS connection from `source` and reads the answer.
async fn attack_from(
    source: &str,
    addr: &str,
    mut request: RemotingCommand,
    creds: Option<(&str, &str)>,
) -> RemotingCommand {
    request.opaque = 7;
    if let Some((ak, sk)) = creds {
        SessionCredentials::new(ak, sk).sign(&mut request);
    }
    let tcp = connect_from(source, addr).await;
    let mut stream = ClientTls::default().connect(addr, tcp).await.expect("TLS handshake");
    let mut out = BytesMut::new();
    encode_frame(&request, SerializeType::Json, &mut out).expect("encode");
    stream.write_all(&out).await.expect("write");
    let mut buf = BytesMut::new();
    let deadline = Instant::now() + T;
    loop {
        if let Some(answer) = decode_frame(&mut buf, usize::MAX).expect("a frame") {
            return answer;
        }
        assert!(Instant::now() < deadline, "no answer from {addr}");
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(T, stream.read(&mut chunk)).await.expect("read in time").expect("read");
        assert!(n > 0, "{addr} closed the connection without an answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sends `request` in plaintext from 127.0.0.2: an enforcing server closes the connection
/// without reading it.
async fn plaintext_is_refused(addr: &str, request: RemotingCommand) {
    let mut stream = from_elsewhere(addr).await;
    let mut out = BytesMut::new();
    encode_frame(&request, SerializeType::Json, &mut out).expect("encode");
    let _ = stream.write_all(&out).await;
    let mut chunk = [0u8; 64];
    let got = tokio::time::timeout(T, stream.read(&mut chunk)).await.expect("closed in time");
    assert!(matches!(got, Ok(0) | Err(_)), "{addr} answered a plaintext request: {got:?}");
}

fn refused(answer: &RemotingCommand, what: &str) {
    assert_eq!(
        answer.code,
        response_code::NO_PERMISSION,
        "{what} was not refused: {:?} {:?}",
        answer.code,
        answer.remark
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_is_refused() {
    let c = start().await;
    // A legitimate admin prepares a topic and a group with a committed offset.
    let tls_config = || {
        ferromq_remoting::ClientConfig::default()
            .with_tls(Some(ClientTls::default()))
            .with_credentials(Some(SessionCredentials::new(ROOT.0, ROOT.1)))
    };
    let admin = ferromq_client::admin::AdminClient::with_config(&c.namesrv, tls_config());
    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(
        &ferromq_protocol::header::CreateTopicRequestHeader {
            topic: "orders".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: None,
            order: false,
            attributes: None,
            force: None,
        },
    );
    let client = ferromq_remoting::RemotingClient::new(tls_config());
    let r = client.invoke(&c.broker, create, T).await.expect("create");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let deadline = Instant::now() + T;
    while admin.topic_route("orders").await.is_err() {
        assert!(Instant::now() < deadline, "the broker never registered orders");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // ... and a message, so the HA port has something a stranger could read.
    let producer = ferromq_client::Producer::new(
        ferromq_client::ProducerConfig { group: "pg_secure".into(), ..Default::default() },
        ferromq_client::ClientConfig {
            credentials: Some(SessionCredentials::new(ROOT.0, ROOT.1)),
            use_tls: true,
            ..ferromq_client::ClientConfig::with_namesrv(&c.namesrv)
        },
    );
    producer.start().await.expect("producer");
    producer.send(ferromq_client::Message::new("orders", b"secret body".to_vec())).await.expect("legitimate send");
    producer.shutdown().await;

    // Plaintext does not even reach the ACL.
    plaintext_is_refused(&c.broker, RemotingCommand::request(request_code::GET_BROKER_CONFIG)).await;
    plaintext_is_refused(&c.namesrv, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO)).await;

    for creds in [None, Some(("eve", "eve-secret"))] {
        // Delete a topic.
        let delete = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER)
            .with_header(&DeleteTopicRequestHeader { topic: "orders".into() });
        refused(&attack(&c.broker, delete, creds).await, "DELETE_TOPIC_IN_BROKER");
        // Move the store elsewhere.
        let config = RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG)
            .with_body(&b"storePathRootDir=/tmp/stolen\n"[..]);
        refused(&attack(&c.broker, config, creds).await, "UPDATE_BROKER_CONFIG");
        // Rewind a group's offsets.
        let reset = RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_header(&ResetOffsetRequestHeader {
                topic: "orders".into(),
                group: "billing".into(),
                timestamp: 0,
                is_force: true,
                ..Default::default()
            })
            .with_body(ResetOffsetBody::default().encode());
        refused(&attack(&c.broker, reset, creds).await, "INVOKE_BROKER_TO_RESET_OFFSET");
        // Read a topic.
        let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
            consumer_group: "thief".into(),
            topic: "orders".into(),
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: 0,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            ..Default::default()
        });
        refused(&attack(&c.broker, pull, creds).await, "PULL_MESSAGE");
        let mut view = RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID);
        view.ext_fields.insert("offset".into(), "0");
        refused(&attack(&c.broker, view, creds).await, "VIEW_MESSAGE_BY_ID");
        // Make users.
        let user = RemotingCommand::request(request_code::AUTH_CREATE_USER)
            .with_header(&ferromq_protocol::header::UserRequestHeader { username: Some("mallory".into()) })
            .with_body(&br#"{"password":"mallory-secret","userType":"Super"}"#[..]);
        refused(&attack(&c.broker, user, creds).await, "AUTH_CREATE_USER");
    }

    // The name server: a fake master for broker-a, the real one unregistered, write
    // permission taken away; from elsewhere (the white lists) and from a cluster host (ACL
    // 2.0: a SUPER user's signature is needed).
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper {
            data_version: DataVersion::now(),
            ..Default::default()
        },
    };
    let fake = RemotingCommand::request(request_code::REGISTER_BROKER)
        .with_header(&RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.2:10911".into(),
            cluster_name: "SecureCluster".into(),
            ha_server_addr: "127.0.0.2:10912".into(),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            enable_acting_master: None,
            compressed: Some(false),
            body_crc32: Some(0),
        })
        .with_body(body.encode(false, ferromq_protocol::version::CURRENT));
    refused(&attack(&c.namesrv, fake.clone(), None).await, "REGISTER_BROKER");
    for creds in [None, Some(("eve", "eve-secret")), Some((ROOT.0, "not-the-password"))] {
        let answer = attack_from(INSIDE, &c.namesrv, fake.clone(), creds).await;
        refused(&answer, "REGISTER_BROKER from a cluster host");
        let remark = answer.remark.unwrap_or_default();
        assert!(
            ["username cannot be null.", "User:eve is not found.", "check signature failed."]
                .contains(&remark.as_str()),
            "{creds:?}: {remark}"
        );
    }
    let unreg = RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: c.broker.clone(),
        cluster_name: "SecureCluster".into(),
        broker_id: 0,
    });
    refused(&attack(&c.namesrv, unreg.clone(), None).await, "UNREGISTER_BROKER");
    refused(&attack_from(INSIDE, &c.namesrv, unreg, Some(("eve", "eve-secret"))).await, "UNREGISTER_BROKER inside");
    let wipe = RemotingCommand::request(request_code::WIPE_WRITE_PERM_OF_BROKER)
        .with_header(&ferromq_protocol::header::WipeWritePermOfBrokerRequestHeader { broker_name: "broker-a".into() });
    refused(&attack(&c.namesrv, wipe.clone(), None).await, "WIPE_WRITE_PERM_OF_BROKER");
    refused(&attack_from(INSIDE, &c.namesrv, wipe, None).await, "WIPE_WRITE_PERM_OF_BROKER inside");
    let config =
        RemotingCommand::request(request_code::UPDATE_NAMESRV_CONFIG).with_body(&b"brokerRegisterWhiteList=\n"[..]);
    refused(&attack_from(INSIDE, &c.namesrv, config, None).await, "UPDATE_NAMESRV_CONFIG inside");

    // The HA port: eight bytes (an offset report) from elsewhere get no message data, in
    // plaintext (enforcing TLS) or over TLS (no authentication); nor does the HA
    // authentication with a wrong password.
    let ha_addr = format!("127.0.0.1:{}", c.ha_port);
    let mut ha = from_elsewhere(&ha_addr).await;
    ha.write_all(&0i64.to_be_bytes()).await.expect("offset report");
    let mut buf = [0u8; 64];
    let got = tokio::time::timeout(Duration::from_secs(3), ha.read(&mut buf)).await;
    assert!(matches!(got, Ok(Ok(0)) | Ok(Err(_))), "the HA port answered a stranger: {got:?}");
    for source in [ELSEWHERE, INSIDE] {
        let tcp = connect_from(source, &ha_addr).await;
        let mut ha = ClientTls::default().connect(&ha_addr, tcp).await.expect("TLS to the HA port");
        ha.write_all(&0i64.to_be_bytes()).await.expect("offset report");
        let got = tokio::time::timeout(T, ha.read(&mut buf)).await.expect("closed in time");
        assert!(matches!(got, Ok(0) | Err(_)), "the HA port served an unauthenticated replica: {got:?}");

        let tcp = connect_from(source, &ha_addr).await;
        let mut ha = ClientTls::default().connect(&ha_addr, tcp).await.expect("TLS to the HA port");
        ha.write_all(b"FMQHAUTH").await.expect("magic");
        let mut hello = [0u8; 28];
        ha.read_exact(&mut hello).await.expect("the challenge");
        let mut signed = hello[8..].to_vec();
        signed.extend_from_slice(ROOT.0.as_bytes());
        let mut answer = (ROOT.0.len() as u16).to_be_bytes().to_vec();
        answer.extend_from_slice(ROOT.0.as_bytes());
        answer.extend_from_slice(&ferromq_protocol::signature::hmac_sha1(b"a guess", &signed));
        ha.write_all(&answer).await.expect("answer");
        let mut status = [0u8; 1];
        ha.read_exact(&mut status).await.expect("status");
        assert_eq!(status[0], 1, "a wrong password was accepted on the HA port");
        let _ = ha.write_all(&0i64.to_be_bytes()).await;
        let got = tokio::time::timeout(T, ha.read(&mut buf)).await.expect("closed in time");
        assert!(matches!(got, Ok(0) | Err(_)), "a refused replica got data: {got:?}");
    }

    // The cluster still serves its own: the topic is there, with the admin's keys.
    let route = admin.topic_route("orders").await.expect("route");
    assert_eq!(route.broker_datas.len(), 1);
    assert!(route.broker_datas[0].broker_addrs.values().all(|a| a == &c.broker), "{:?}", route.broker_datas);
    client.shutdown().await;
    admin.shutdown().await;
}
