//! Static topics (RIP-21) as real processes: `ferromq namesrv`, two broker masters (broker-a,
//! broker-b) and `ferromq admin updateStaticTopic` / `remappingStaticTopic`.
//!
//! A static topic of 4 logic queues is spread over both brokers; messages go to each logic
//! queue through its leader as a 5.x client addresses them (logic queue id, no `lo`), and to
//! physical queues as a client older than 5.0 does (its route's queueDatas). Then every logic
//! queue is moved onto broker-b. After the move: the old leader refuses logic writes, the new
//! one answers offsets past the old end (rounded up to a block of 10,000); a logic reader
//! pulling broker-b from offset 0 gets every message exactly once, the old ones forwarded
//! from broker-a; consumer offsets committed before the move stay readable; a physical reader
//! (`lo=false`) still reads each physical queue once. broker-b is then SIGKILLed and started
//! again on its store: the mapping and the reads survive. The official C++ client, which knows
//! no mappings, produces and consumes a static topic across a move as well.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferromq_protocol::body::{JsonBody, TopicQueueMappingInfo, TopicQueueMappingSerializeWrapper, TopicRouteData};
use ferromq_protocol::header::{
    GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueueRequestHeader, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::pull_request;
use ferromq_testkit::send_request;

mod common;
use common::admin::{ok, runtime};
use common::cluster::{start_brokers, start_namesrv, Broker};

const TOPIC: &str = "StaticT";
const QUEUES: i32 = 4;
/// Messages per logic queue before the move (logic sends), then one physical send per
/// physical queue, then this many more per logic queue after the move.
const BEFORE: i64 = 10;
const AFTER: i64 = 5;
const TIMEOUT: Duration = Duration::from_secs(10);

fn ext(req: RemotingCommand, key: &str, value: &str) -> RemotingCommand {
    let mut req = req;
    req.ext_fields.insert(ferromq_protocol::ext_fields::intern_key(key), value);
    req
}

/// As a client older than 5.0 sends it.
fn old_client(mut req: RemotingCommand) -> RemotingCommand {
    req.version = version::ordinal("V4_9_8").expect("a known version");
    req
}

async fn route(client: &RemotingClient, namesrv: &str, topic: &str) -> Option<TopicRouteData> {
    let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
        .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) });
    let r = client.invoke(namesrv, req, TIMEOUT).await.ok()?;
    (r.code == response_code::SUCCESS).then(|| TopicRouteData::decode(&r.body).expect("route body"))
}

/// Logic queue -> leading broker, from the route's mappings, once `check` accepts it.
async fn leaders_when(
    client: &RemotingClient,
    namesrv: &str,
    topic: &str,
    check: impl Fn(&BTreeMap<i32, String>) -> bool,
) -> BTreeMap<i32, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut leaders = BTreeMap::new();
        if let Some(route) = route(client, namesrv, topic).await {
            for (bname, info) in route.topic_queue_mapping_by_broker.unwrap_or_default() {
                let info: TopicQueueMappingInfo = serde_json::from_value(info).expect("mapping info");
                assert_eq!(info.bname, bname);
                assert_eq!(info.total_queues, QUEUES);
                for logic in info.curr_id_map.keys() {
                    leaders.insert(*logic, bname.clone());
                }
            }
        }
        if check(&leaders) {
            return leaders;
        }
        assert!(Instant::now() < deadline, "the route never showed the expected mapping: {leaders:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn send(client: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    client.invoke(addr, req, TIMEOUT).await.expect("send answered")
}

async fn offset_call(client: &RemotingClient, addr: &str, req: RemotingCommand) -> (i32, i64) {
    let r = client.invoke(addr, req, TIMEOUT).await.expect("offset request answered");
    let offset = r.decode_header::<OffsetResponseHeader>().map_or(-1, |h| h.offset);
    (r.code, offset)
}

/// Reads logic queue `queue` from `addr` as a 5.x client does: logic offsets from 0, following
/// nextBeginOffset through RETRY_IMMEDIATELY, each message's logic offset its physical one
/// plus the answer's offsetDelta. Returns (logic offset, body) in order.
async fn read_logic(client: &RemotingClient, addr: &str, topic: &str, queue: i32) -> Vec<(i64, String)> {
    let mut next = 0;
    let mut out = Vec::new();
    for _ in 0..200 {
        let r = client.invoke(addr, pull_request(topic, queue, next, "*", 0), TIMEOUT).await.expect("pull");
        let h: PullMessageResponseHeader = r.decode_header().unwrap_or_else(|e| panic!("pull {r:?}: {e}"));
        match r.code {
            response_code::SUCCESS => {
                let delta = h.offset_delta.expect("a logic read carries offsetDelta");
                for m in StoredMessage::decode_all(&r.body).expect("records") {
                    out.push((m.queue_offset + delta, String::from_utf8(m.body.to_vec()).unwrap()));
                }
            }
            response_code::PULL_RETRY_IMMEDIATELY | response_code::PULL_OFFSET_MOVED => {}
            response_code::PULL_NOT_FOUND => return out,
            other => panic!("logic pull of queue {queue} at {next} answered {other}: {:?}", r.remark),
        }
        assert!(h.next_begin_offset >= next, "nextBeginOffset went back: {} < {next}", h.next_begin_offset);
        next = h.next_begin_offset;
    }
    panic!("logic queue {queue} never ended");
}

/// Reads physical queue `queue` of the broker at `addr` whole, as a client that lists queues
/// from queueDatas (`lo=false`).
async fn read_physical(client: &RemotingClient, addr: &str, queue: i32) -> Vec<String> {
    let mut next = 0;
    let mut out = Vec::new();
    loop {
        let req = ext(pull_request(TOPIC, queue, next, "*", 0), "lo", "false");
        let r = client.invoke(addr, req, TIMEOUT).await.expect("pull");
        if r.code != response_code::SUCCESS {
            assert_eq!(r.code, response_code::PULL_NOT_FOUND, "physical pull: {:?}", r.remark);
            return out;
        }
        let h: PullMessageResponseHeader = r.decode_header().unwrap();
        assert_eq!(h.offset_delta, None, "a physical read is not rewritten");
        out.extend(
            StoredMessage::decode_all(&r.body)
                .unwrap()
                .into_iter()
                .map(|m| String::from_utf8(m.body.to_vec()).unwrap()),
        );
        next = h.next_begin_offset;
    }
}

fn commit(queue: i32, offset: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&UpdateConsumerOffsetRequestHeader {
        consumer_group: "cg".into(),
        topic: TOPIC.into(),
        queue_id: queue,
        commit_offset: offset,
        broker_name: None,
        lo: None,
    })
}

fn query(queue: i32) -> RemotingCommand {
    RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&QueryConsumerOffsetRequestHeader {
        consumer_group: "cg".into(),
        topic: TOPIC.into(),
        queue_id: queue,
        set_zero_if_not_found: Some(false),
        broker_name: None,
        lo: None,
    })
}

fn mapping_file(broker: &Broker) -> TopicQueueMappingSerializeWrapper {
    let path = broker.dir.join(broker.name).join("config").join("topicQueueMapping.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    TopicQueueMappingSerializeWrapper::decode(&text).expect("topicQueueMapping.json parses")
}

/// A name server and two broker masters, both registered, with the group `cg`.
struct Cluster {
    dir: tempfile::TempDir,
    _namesrv: ferromq_testkit::ChildProcess,
    namesrv: String,
    brokers: [Broker; 2],
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (namesrv_process, ns_port) = start_namesrv(dir.path());
        let namesrv = format!("127.0.0.1:{ns_port}");
        let mut taken = vec![ns_port];
        let brokers = start_brokers(dir.path(), &namesrv, ["broker-a", "broker-b"], "", &mut taken);
        // Both brokers registered before a plan reads the cluster.
        let deadline = Instant::now() + Duration::from_secs(20);
        let registered = |name: &str| {
            String::from_utf8_lossy(&common::admin::admin(&namesrv, &["clusterList"]).stdout).contains(name)
        };
        while !(registered("broker-a") && registered("broker-b")) {
            assert!(Instant::now() < deadline, "the brokers never registered");
            std::thread::sleep(Duration::from_millis(200));
        }
        ok(&namesrv, &["updateSubGroup", "-c", "DefaultCluster", "-g", "cg"]);
        Cluster { dir, _namesrv: namesrv_process, namesrv, brokers }
    }
}

#[test]
fn a_static_topic_keeps_its_logic_queues_readable_across_a_move() {
    let Cluster { dir: _dir, _namesrv, namesrv, mut brokers } = Cluster::start();
    let addr: BTreeMap<String, String> = brokers.iter().map(|b| (b.name.to_owned(), b.addr())).collect();
    let rt = runtime();
    let client = RemotingClient::new(ClientConfig::default());
    let out = ok(&namesrv, &["updateStaticTopic", "-t", TOPIC, "-qn", "4", "-c", "DefaultCluster"]);
    assert!(out.contains("The new mapping data is written to file"), "{out}");
    // The plan file applies again as it is (-mf): same epoch, same items.
    let plan_file = out.lines().find_map(|l| l.strip_prefix("The new mapping data is written to file ")).unwrap();
    ok(&namesrv, &["updateStaticTopic", "-t", TOPIC, "-mf", plan_file.trim()]);

    // The same number again is refused (Java's words), and so is a plain update that would
    // change a static topic's physical queues.
    let same = common::admin::fails(&namesrv, &["updateStaticTopic", "-t", TOPIC, "-qn", "4", "-c", "DefaultCluster"]);
    assert!(same.contains("The topic queue num is equal the existed queue num, do nothing"), "{same}");
    let plain =
        common::admin::fails(&namesrv, &["updateTopic", "-t", TOPIC, "-c", "DefaultCluster", "-r", "8", "-w", "8"]);
    assert!(plain.contains("is a static topic"), "{plain}");

    // Each broker's file holds its half: two logic queues on physical queues 0 and 1.
    for b in &brokers {
        let file = mapping_file(b);
        let detail = &file.topic_queue_mapping_info_map[TOPIC];
        assert_eq!((detail.bname.as_str(), detail.total_queues), (b.name, QUEUES));
        let mut physical: Vec<i32> = detail.hosted_queues.values().map(|items| items[0].queue_id).collect();
        physical.sort_unstable();
        assert_eq!(physical, vec![0, 1], "{}: {detail:?}", b.name);
    }

    rt.block_on(async {
        let leaders = leaders_when(&client, &namesrv, TOPIC, |l| l.len() == QUEUES as usize).await;

        // Logic sends through each leader: answered with the logic queue and its offsets.
        for queue in 0..QUEUES {
            let leader = &addr[&leaders[&queue]];
            for i in 0..BEFORE {
                let r =
                    send(&client, leader, send_request(TOPIC, queue, format!("q{queue}-{i}").as_bytes(), &[])).await;
                assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
                let h: SendMessageResponseHeader = r.decode_header().unwrap();
                assert_eq!((h.queue_id, h.queue_offset), (queue, i));
            }
            let other = addr.iter().find(|(name, _)| **name != leaders[&queue]).unwrap().1;
            let r = send(&client, other, send_request(TOPIC, queue, b"wrong broker", &[])).await;
            assert_eq!(r.code, response_code::NOT_LEADER_FOR_QUEUE, "{:?}", r.remark);
        }
        // A client older than 5.0 names physical queues (its route's queueDatas).
        let mut physical_sends = 0;
        for b in &brokers {
            let detail = mapping_file(b).topic_queue_mapping_info_map[TOPIC].clone();
            for (logic, physical) in detail.leader_id_map() {
                let body = format!("q{logic}-{BEFORE}");
                let r = send(&client, &b.addr(), old_client(send_request(TOPIC, physical, body.as_bytes(), &[]))).await;
                assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
                let h: SendMessageResponseHeader = r.decode_header().unwrap();
                assert_eq!((h.queue_id, h.queue_offset), (physical, BEFORE), "physical answer");
                physical_sends += 1;
            }
        }
        assert_eq!(physical_sends, QUEUES);
        // Offsets committed before the move, with each leader.
        for queue in 0..QUEUES {
            let (code, _) = offset_call(&client, &addr[&leaders[&queue]], commit(queue, 4)).await;
            assert_eq!(code, response_code::SUCCESS);
        }
    });

    // Move every logic queue onto broker-b.
    let out = ok(&namesrv, &["remappingStaticTopic", "-t", TOPIC, "-b", "broker-b"]);
    assert!(out.contains("static topic StaticT updated"), "{out}");
    let b_detail = mapping_file(&brokers[1]).topic_queue_mapping_info_map[TOPIC].clone();
    assert_eq!(b_detail.leader_id_map().len(), QUEUES as usize);
    let moved: Vec<i32> =
        b_detail.hosted_queues.iter().filter(|(_, items)| items.len() == 2).map(|(q, _)| *q).collect();
    assert_eq!(moved.len(), 2, "broker-a's two queues moved: {b_detail:?}");
    for queue in &moved {
        let items = &b_detail.hosted_queues[queue];
        assert_eq!((items[0].bname.as_str(), items[1].bname.as_str(), items[1].gen), ("broker-a", "broker-b", 1));
        assert_eq!(items[1].logic_offset, 10_000, "the old end (11) rounded up to a block");
    }
    assert!(mapping_file(&brokers[0]).topic_queue_mapping_info_map[TOPIC].leader_id_map().is_empty());

    let (a, b) = (addr["broker-a"].clone(), addr["broker-b"].clone());
    rt.block_on(async {
        leaders_when(&client, &namesrv, TOPIC, |l| l.len() == QUEUES as usize && l.values().all(|b| b == "broker-b"))
            .await;
        // broker-a takes no more writes: logic ones are refused, physical ones too (it writes
        // no queue of the topic any more).
        let r = send(&client, &a, send_request(TOPIC, moved[0], b"late", &[])).await;
        assert_eq!(r.code, response_code::NOT_LEADER_FOR_QUEUE, "{:?}", r.remark);
        let r = send(&client, &a, old_client(send_request(TOPIC, 0, b"late", &[]))).await;
        assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);

        for queue in 0..QUEUES {
            for i in 0..AFTER {
                let body = format!("q{queue}-{}", BEFORE + 1 + i);
                let r = send(&client, &b, send_request(TOPIC, queue, body.as_bytes(), &[])).await;
                assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
                let h: SendMessageResponseHeader = r.decode_header().unwrap();
                let start = if moved.contains(&queue) { 10_000 } else { BEFORE + 1 };
                assert_eq!((h.queue_id, h.queue_offset), (queue, start + i));
            }
        }

        // Every logic queue read from broker-b: each message once, in order, across the move.
        for queue in 0..QUEUES {
            let read = read_logic(&client, &b, TOPIC, queue).await;
            let bodies: Vec<&str> = read.iter().map(|(_, body)| body.as_str()).collect();
            let expected: Vec<String> = (0..=BEFORE + AFTER).map(|i| format!("q{queue}-{i}")).collect();
            assert_eq!(bodies, expected, "logic queue {queue}");
            let offsets: Vec<i64> = read.iter().map(|(o, _)| *o).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]), "logic offsets grow: {offsets:?}");
            if moved.contains(&queue) {
                assert_eq!(offsets[..=BEFORE as usize], (0..=BEFORE).collect::<Vec<_>>()[..]);
                assert_eq!(offsets[BEFORE as usize + 1], 10_000);
            }
            // Offsets, in logic terms, wherever they are kept.
            let max = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
                topic: TOPIC.into(),
                queue_id: queue,
                committed: None,
                broker_name: None,
                lo: None,
            });
            let end = if moved.contains(&queue) { 10_000 + AFTER } else { BEFORE + 1 + AFTER };
            assert_eq!(offset_call(&client, &b, max).await, (response_code::SUCCESS, end));
            let min = RemotingCommand::request(request_code::GET_MIN_OFFSET).with_header(&QueueRequestHeader {
                topic: TOPIC.into(),
                queue_id: queue,
                broker_name: None,
                lo: None,
            });
            assert_eq!(offset_call(&client, &b, min).await, (response_code::SUCCESS, 0));
            assert_eq!(offset_call(&client, &b, query(queue)).await, (response_code::SUCCESS, 4), "queue {queue}");
        }
        // topicStatus shows the logic queues with their logic offsets next to the physical ones.
        let status = ok(&namesrv, &["topicStatus", "-t", TOPIC]);
        for queue in 0..QUEUES {
            let end = if moved.contains(&queue) { 10_000 + AFTER } else { BEFORE + 1 + AFTER };
            let row = status
                .lines()
                .find(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    cols.first() == Some(&"__syslo__global__") && cols.get(1) == Some(&queue.to_string().as_str())
                })
                .unwrap_or_else(|| panic!("no logic row for queue {queue}:\n{status}"));
            let cols: Vec<&str> = row.split_whitespace().collect();
            assert_eq!((cols[2], cols[3]), ("0", end.to_string().as_str()), "{row}");
        }
        // A commit past the move lands with the new item and reads back.
        assert_eq!(offset_call(&client, &b, commit(moved[0], 10_002)).await.0, response_code::SUCCESS);
        assert_eq!(offset_call(&client, &b, query(moved[0])).await, (response_code::SUCCESS, 10_002));
        // consumerProgress shows the group on the logic queues: the moved queue it committed
        // on past the move at that offset, the others at the offset committed before it.
        let progress = ok(&namesrv, &["consumerProgress", "-g", "cg", "-t", TOPIC]);
        for queue in 0..QUEUES {
            let end = if moved.contains(&queue) { 10_000 + AFTER } else { BEFORE + 1 + AFTER };
            let committed = if queue == moved[0] { 10_002 } else { 4 };
            let row = progress
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|cols| {
                    cols.get(1) == Some(&"__syslo__global__") && cols.get(2) == Some(&queue.to_string().as_str())
                })
                .unwrap_or_else(|| panic!("no logic row for queue {queue}:\n{progress}"));
            assert_eq!(
                (row[0], row[3], row[4]),
                (TOPIC, end.to_string().as_str(), committed.to_string().as_str()),
                "queue {queue}:\n{progress}"
            );
        }
        assert!(!progress.contains("broker-a") && !progress.contains("broker-b"), "logic rows only:\n{progress}");

        // A physical reader sees every message once across both brokers' physical queues.
        let mut physical: Vec<String> = Vec::new();
        for (name, queues) in [("broker-a", 2), ("broker-b", 4)] {
            for queue in 0..queues {
                physical.extend(read_physical(&client, &addr[name], queue).await);
            }
        }
        physical.sort();
        let mut expected: Vec<String> =
            (0..QUEUES).flat_map(|q| (0..=BEFORE + AFTER).map(move |i| format!("q{q}-{i}"))).collect();
        expected.sort();
        assert_eq!(physical, expected);
    });

    // SIGKILL broker-b and start it again on its store: the mapping and the reads survive.
    brokers[1].kill();
    brokers[1].start();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        let read = loop {
            let r = client.invoke(&b, pull_request(TOPIC, moved[0], 0, "*", 0), TIMEOUT).await;
            if r.is_ok() {
                break read_logic(&client, &b, TOPIC, moved[0]).await;
            }
            assert!(Instant::now() < deadline, "broker-b did not come back");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(read.len() as i64, BEFORE + 1 + AFTER, "after the restart");
        client.shutdown().await;
    });
}

/// The official C++ client (version 63, no mapping support) on a static topic: it sends to and
/// pulls from each broker's physical queues, before and after every logic queue moves to
/// broker-b (its sends to broker-a's sealed queues are refused and retried elsewhere), and
/// gets every message once; a logic reader of broker-b gets the same messages once.
#[test]
fn a_client_older_than_5_produces_and_consumes_across_a_move() {
    const CPP_TOPIC: &str = "StaticCpp";
    let cluster = Cluster::start();
    let ns = cluster.namesrv.clone();
    let rt = runtime();
    let client = RemotingClient::new(ClientConfig::default());
    ok(&ns, &["updateStaticTopic", "-t", CPP_TOPIC, "-qn", "4", "-c", "DefaultCluster"]);
    rt.block_on(leaders_when(&client, &ns, CPP_TOPIC, |l| l.len() == QUEUES as usize));
    let home = cluster.dir.path().join("cpp");
    let brokers_tail = || {
        format!(
            "broker-a:\n{}\nbroker-b:\n{}",
            common::cluster::tail(&cluster.brokers[0].log(), 30),
            common::cluster::tail(&cluster.brokers[1].log(), 30)
        )
    };
    let run = |label: &str, args: &[&str]| {
        let (run, problem) = common::e2e::run_e2e(label, &home.join(label), args, &ns, 60);
        assert!(problem.is_none(), "{problem:?}");
        // The client's own log says why a send failed (its exception only says "No route
        // info" after its retries).
        assert!(
            run.status.success(),
            "C++ client {label} failed:\n{}\n{}\n{}\n{}",
            run.stdout,
            run.stderr,
            common::e2e::dir_tail(&run.client_log_dir, 80),
            brokers_tail()
        );
        run
    };
    // The C++ client fails a send at once, without sending it, when its own heartbeat holds its
    // connection table's lock while connecting to the other broker ("get timed_mutex timeout"
    // in its log; 1 run in ~36 here). Such messages are sent again by a new run, as an
    // application would; any other failure fails the test.
    let produce = |label: &str, start: i64| {
        let mut todo = vec![(start, 12)];
        let mut sent = 0;
        for attempt in 0..3 {
            let mut again = Vec::new();
            for (first, count) in std::mem::take(&mut todo) {
                let tag = format!("{label}-{attempt}-{first}");
                let (first_s, count_s) = (first.to_string(), count.to_string());
                let args =
                    ["produce", "--topic", CPP_TOPIC, "--group", "PG_STATIC", "--count", &count_s, "--start", &first_s];
                let (run, problem) = common::e2e::run_e2e(&tag, &home.join(&tag), &args, &ns, 60);
                assert!(problem.is_none(), "{problem:?}");
                sent += run.events("sent").count();
                let log = common::e2e::dir_tail(&run.client_log_dir, 200);
                for failed in run.events("send_failed") {
                    assert!(
                        log.contains("get timed_mutex timeout"),
                        "C++ client {tag} failed:\n{}\n{}\n{log}\n{}",
                        run.stdout,
                        run.stderr,
                        brokers_tail()
                    );
                    again.push((failed.int("i").expect("the failed message's index"), 1));
                }
            }
            todo = again;
            if todo.is_empty() {
                break;
            }
        }
        assert!(todo.is_empty(), "messages {todo:?} of {label} never sent");
        assert_eq!(sent, 12, "{label}");
    };
    produce("produce-before", 0);
    ok(&ns, &["remappingStaticTopic", "-t", CPP_TOPIC, "-b", "broker-b"]);
    rt.block_on(leaders_when(&client, &ns, CPP_TOPIC, |l| {
        l.len() == QUEUES as usize && l.values().all(|b| b == "broker-b")
    }));
    produce("produce-after", 12);

    let expected: Vec<String> = (0..24).map(|i| format!("m-{i}")).collect();
    let consumed = run("pull", &["pull-consume", "--topic", CPP_TOPIC, "--group", "CG_STATIC", "--expect", "24"]);
    let mut bodies: Vec<String> = consumed.events("message").filter_map(|m| m.str("body").map(str::to_owned)).collect();
    bodies.sort_by_key(|b| b[2..].parse::<u32>().unwrap_or(u32::MAX));
    assert_eq!(bodies, expected, "the C++ pull consumer");

    let b = cluster.brokers[1].addr();
    let mut logic: Vec<String> = rt.block_on(async {
        let mut all = Vec::new();
        for queue in 0..QUEUES {
            all.extend(read_logic(&client, &b, CPP_TOPIC, queue).await.into_iter().map(|(_, body)| body));
        }
        client.shutdown().await;
        all
    });
    logic.sort_by_key(|b| b[2..].parse::<u32>().unwrap_or(u32::MAX));
    assert_eq!(logic, expected, "a logic reader of broker-b");
}

/// FerroMQ's own client maps logic queues as Java's 5.x client does: a producer sends to
/// `__syslo__global__` queues (answered with logic offsets) through their leaders, and a lite
/// pull consumer subscribed to the topic rebalances over the logic queues and reads every
/// message once across a move, with logic offsets (offsetDelta applied).
#[test]
fn our_client_reads_and_writes_logic_queues_across_a_move() {
    use ferromq_client::{ClientConfig as Client, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig, Message};
    use ferromq_client::{Producer, ProducerConfig};
    const RUST_TOPIC: &str = "StaticRust";
    let cluster = Cluster::start();
    let ns = cluster.namesrv.clone();
    let rt = runtime();
    ok(&ns, &["updateStaticTopic", "-t", RUST_TOPIC, "-qn", "4", "-c", "DefaultCluster"]);
    let remoting = RemotingClient::new(ClientConfig::default());
    rt.block_on(leaders_when(&remoting, &ns, RUST_TOPIC, |l| l.len() == QUEUES as usize));
    // A producer per phase: each starts from the route of its time.
    let produce = |from: usize| {
        let ns = ns.clone();
        async move {
            let producer = Producer::new(
                ProducerConfig { group: "pg_static".into(), ..Default::default() },
                Client::with_namesrv(&ns),
            );
            producer.start().await.unwrap();
            let mut offsets = Vec::new();
            for i in from..from + 20 {
                let r = producer.send(Message::new(RUST_TOPIC, format!("r-{i}"))).await.unwrap();
                assert_eq!(r.message_queue.broker_name, "__syslo__global__", "{r:?}");
                offsets.push((r.message_queue.queue_id, r.queue_offset));
            }
            producer.shutdown().await;
            offsets
        }
    };
    let before = rt.block_on(produce(0));
    assert!(before.iter().all(|(q, o)| (0..QUEUES).contains(q) && (0..20).contains(o)), "{before:?}");
    ok(&ns, &["remappingStaticTopic", "-t", RUST_TOPIC, "-b", "broker-b"]);
    rt.block_on(leaders_when(&remoting, &ns, RUST_TOPIC, |l| l.values().all(|b| b == "broker-b")));
    let after = rt.block_on(produce(20));
    assert!(after.iter().any(|(_, o)| *o >= 10_000), "a moved queue continues past the block: {after:?}");

    rt.block_on(async {
        let config = LitePullConsumerConfig {
            group: "cg_static_rust".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            broker_suspend_max: Duration::from_secs(1),
            ..LitePullConsumerConfig::default()
        };
        let consumer = LitePullConsumer::new(config, Client::with_namesrv(&ns));
        consumer.start().await.unwrap();
        consumer.subscribe(RUST_TOPIC, "*").await.unwrap();
        let mut seen: BTreeMap<String, (i32, i64)> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.len() < 40 {
            for m in consumer.poll(Duration::from_millis(500)).await {
                assert_eq!(m.message_queue.broker_name, "__syslo__global__");
                let body = String::from_utf8(m.body().to_vec()).unwrap();
                let at = (m.message_queue.queue_id, m.queue_offset());
                assert!(seen.insert(body.clone(), at).is_none(), "{body} delivered twice");
            }
            assert!(Instant::now() < deadline, "only {} of 40 messages: {seen:?}", seen.len());
        }
        // The offsets read are the ones the sends were answered with.
        let sent: BTreeMap<String, (i32, i64)> =
            before.iter().chain(&after).enumerate().map(|(i, at)| (format!("r-{i}"), *at)).collect();
        assert_eq!(seen, sent);
        consumer.shutdown().await;
        remoting.shutdown().await;
    });
}
