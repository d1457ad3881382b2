//! An unmodified RocketMQ client asks our name server for a route.
//!
//! The client is the official Apache RocketMQ C++ client (librocketmq.so from the PyPI package
//! `rocketmq` 0.4.4, installed by `compat/setup.sh`). A test-owned remoting server stands in
//! for the broker: it is registered with the name server, and the test checks that the client
//! resolved the route, connected to that address and sent the message there. The client speaks
//! version 63 (3.1.8), so this also exercises the fastjson-style route body.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ferromq_namesrv::NamesrvConfig;
use ferromq_protocol::body::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigAndMappingSerializeWrapper};
use ferromq_protocol::header::{RegisterBrokerRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader};
use ferromq_protocol::{request_code, response_code, version, LanguageCode, RemotingCommand};
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient, RemotingServer, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn compat_python() -> PathBuf {
    let venv =
        std::env::var_os("FERROMQ_COMPAT_VENV").map_or_else(|| repo_root().join("target/compat-venv"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "the C++ client venv is missing at {}: run `bash compat/setup.sh` (the README's test command does)",
        python.display()
    );
    python
}

#[derive(Debug)]
struct SeenSend {
    language: LanguageCode,
    code: i32,
    header: SendMessageRequestHeader,
    body: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_client_resolves_route_from_namesrv_and_sends_to_the_registered_broker() {
    let python = compat_python();
    let dir = tempfile::tempdir().unwrap();

    // Name server.
    let config = NamesrvConfig { kv_config_path: dir.path().join("kvConfig.json"), ..NamesrvConfig::default() };
    let ns_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ns_addr = ns_listener.local_addr().unwrap().to_string();
    let (ns_stop, ns_stopped) = tokio::sync::oneshot::channel::<()>();
    let ns_task = tokio::spawn(ferromq_namesrv::run(config, ns_listener, async {
        let _ = ns_stopped.await;
    }));

    // Stand-in broker: records sends, answers them the way a broker does.
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let mut broker = Dispatcher::new();
    broker.register_sync(request_code::SEND_MESSAGE, move |_conn, req| {
        let header =
            SendMessageRequestHeader::decode_for(req.code, &req.ext_fields).expect("client sends a valid send header");
        let queue_id = header.queue_id.max(0);
        let _ = seen_tx.send(SeenSend { language: req.language, code: req.code, header, body: req.body.to_vec() });
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_header(&SendMessageResponseHeader {
            msg_id: "7F00000100002A9F0000000000000000".into(),
            queue_id,
            queue_offset: 0,
            ..Default::default()
        }))
    });
    for code in [request_code::HEART_BEAT, request_code::UNREGISTER_CLIENT] {
        broker.register_sync(code, |_conn, req| Some(RemotingCommand::response_to(req, response_code::SUCCESS, None)));
    }
    let broker_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let broker_addr = broker_listener.local_addr().unwrap().to_string();
    let (broker_stop, broker_stopped) = tokio::sync::oneshot::channel::<()>();
    let broker_server = RemotingServer::new(ServerConfig::default(), Arc::new(broker));
    let broker_task = tokio::spawn(async move {
        broker_server
            .serve(broker_listener, async {
                let _ = broker_stopped.await;
            })
            .await
    });

    // Register the stand-in broker with CompatTopic, as a broker would.
    let mut table = std::collections::BTreeMap::new();
    table.insert("CompatTopic".to_owned(), TopicConfig::new("CompatTopic", 4, 4));
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper {
            data_version: DataVersion::now(),
            topic_config_table: table,
            ..Default::default()
        },
    }
    .encode(false, version::CURRENT);
    let register = RemotingCommand::request(request_code::REGISTER_BROKER)
        .with_header(&RegisterBrokerRequestHeader {
            broker_name: "broker-compat".into(),
            broker_addr: broker_addr.clone(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: "127.0.0.1:1".into(),
            broker_id: 0,
            ..Default::default()
        })
        .with_body(body);
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&ns_addr, register, Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // Run the C++ client.
    let probe = repo_root().join("compat/python/route_probe.py");
    let ns_for_probe = ns_addr.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(probe)
            .args(["--namesrv", &ns_for_probe, "--topic", "CompatTopic", "--group", "CompatGroup"])
            .args(["--send-timeout-ms", "3000", "--timeout-s", "30", "--key", "order-42", "--tag", "TagA"])
            .output()
            .expect("run the probe")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the C++ client did not send: status {:?}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\"outcome\": \"sent\""), "{stdout}");

    // The send reached the broker address the route named, with the client's message.
    let seen = tokio::time::timeout(Duration::from_secs(5), seen_rx.recv()).await.unwrap().unwrap();
    assert_eq!(seen.language, LanguageCode::Cpp);
    assert_eq!(seen.code, request_code::SEND_MESSAGE);
    assert_eq!(seen.header.topic, "CompatTopic");
    assert_eq!(seen.header.producer_group, "CompatGroup");
    assert!((0..4).contains(&seen.header.queue_id), "queue from the route: {}", seen.header.queue_id);
    assert_eq!(seen.body, b"hello-ferromq");
    let props = seen.header.properties.unwrap_or_default();
    assert!(props.contains("KEYS\u{1}order-42\u{2}") && props.contains("TAGS\u{1}TagA\u{2}"), "{props:?}");

    client.shutdown().await;
    let _ = broker_stop.send(());
    let _ = ns_stop.send(());
    broker_task.await.unwrap().unwrap();
    ns_task.await.unwrap().unwrap();
}
