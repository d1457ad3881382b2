//! Slave metadata sync over real loopback TCP: a name server, a master (brokerId 0,
//! ASYNC_MASTER) and a slave (brokerId 1, SLAVE, same brokerName), all started in process with
//! `run`. The slave learns its master from the name server's registration answer and copies
//! the master's topics, subscription groups, consumer offsets and delay offsets every
//! `slaveSyncInterval`; the copies are persisted and survive a slave restart without the master.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use ferromq_broker::metadata::DelayOffsetSerializeWrapper;
use ferromq_broker::BrokerSettings;
use ferromq_protocol::body::{
    ConsumerOffsetSerializeWrapper, JsonBody, SubscriptionGroupConfig, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
};
use ferromq_protocol::header::{CreateTopicRequestHeader, DeleteTopicRequestHeader, UpdateConsumerOffsetRequestHeader};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{send_request, test_settings, LocalCluster};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const T: Duration = Duration::from_secs(10);
/// The slave's sync interval here (the default is 10 s).
const SYNC_INTERVAL_MS: &str = "200";

/// The master listens for slaves on a free port rather than listenPort + 1, which another
/// test may hold.
fn master_tweak(s: &mut BrokerSettings) {
    s.set("haListenPort", "0").unwrap();
}

fn slave_settings(dir: &Path, ns_addr: &str) -> BrokerSettings {
    let mut s = test_settings(dir, ns_addr);
    s.set("brokerId", "1").unwrap();
    s.set("brokerRole", "SLAVE").unwrap();
    s.set("slaveSyncInterval", SYNC_INTERVAL_MS).unwrap();
    s
}

/// A broker started with `run` outside the testkit's cluster.
struct Slave {
    addr: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Slave {
    async fn start(settings: BrokerSettings) -> Slave {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            ferromq_broker::run(settings, listener, async {
                let _ = stopped.await;
            })
            .await
            .expect("slave runs");
        });
        Slave { addr, stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(T, self.task).await.expect("slave stops in time").unwrap();
    }
}

async fn call(client: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    let r = client.invoke(addr, req, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "request {} to {addr}: {:?}", r.code, r.remark);
    r
}

async fn topics(client: &RemotingClient, addr: &str) -> TopicConfigSerializeWrapper {
    let r = call(client, addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)).await;
    TopicConfigSerializeWrapper::decode(&r.body).unwrap()
}

async fn groups(client: &RemotingClient, addr: &str) -> SubscriptionGroupWrapper {
    let r = call(client, addr, RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).await;
    SubscriptionGroupWrapper::decode(&r.body).unwrap()
}

async fn offsets(client: &RemotingClient, addr: &str) -> ConsumerOffsetSerializeWrapper {
    let r = call(client, addr, RemotingCommand::request(request_code::GET_ALL_CONSUMER_OFFSET)).await;
    ConsumerOffsetSerializeWrapper::decode(&r.body).unwrap()
}

async fn delay_offsets(client: &RemotingClient, addr: &str) -> DelayOffsetSerializeWrapper {
    let r = call(client, addr, RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET)).await;
    DelayOffsetSerializeWrapper::decode(&r.body).unwrap()
}

/// Polls `check` until it returns true or `T` passes.
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + T;
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn create_topic(topic: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: None,
        order: false,
        attributes: None,
        force: None,
    })
}

fn commit_offset(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        commit_offset: offset,
        broker_name: None,
        lo: None,
    })
}

/// Checks the slave at `addr` holds what the master was given (after the deletion).
async fn assert_slave_tables(client: &RemotingClient, addr: &str) {
    let t = topics(client, addr).await;
    assert!(t.topic_config_table.contains_key("Orders") && !t.topic_config_table.contains_key("Doomed"));
    assert!(groups(client, addr).await.subscription_group_table.contains_key("billing"));
    let o = offsets(client, addr).await;
    assert_eq!(o.offset_table.get("Orders@billing").and_then(|q| q.get(&2)), Some(&9));
    assert_eq!(delay_offsets(client, addr).await.offset_table.get(&1), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_copies_master_metadata_and_keeps_it_across_a_restart() {
    let master = LocalCluster::start(master_tweak).await;
    let m = master.broker_addr.clone();
    let client = RemotingClient::new(ClientConfig::default());
    // The master's metadata: two topics, a group, a committed offset and, once a level-1
    // (1 s) message is delivered, a delay offset.
    call(&client, &m, create_topic("Orders")).await;
    call(&client, &m, create_topic("Doomed")).await;
    let group = serde_json::to_vec(&SubscriptionGroupConfig::new("billing")).unwrap();
    call(&client, &m, RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group))
        .await;
    call(&client, &m, commit_offset("billing", "Orders", 2, 7)).await;
    call(&client, &m, send_request("Orders", 0, b"later", &[("DELAY", "1")])).await;
    eventually("the master delivers the delayed message", || async {
        delay_offsets(&client, &m).await.offset_table.get(&1) == Some(&1)
    })
    .await;

    let slave_dir = tempfile::tempdir().unwrap();
    let slave = Slave::start(slave_settings(slave_dir.path(), &master.ns_addr)).await;
    let s = slave.addr.clone();
    eventually("the slave copies every table", || async {
        let t = topics(&client, &s).await;
        t.topic_config_table.contains_key("Doomed")
            && groups(&client, &s).await.subscription_group_table.contains_key("billing")
            && offsets(&client, &s).await.offset_table.get("Orders@billing").and_then(|q| q.get(&2)) == Some(&7)
            && delay_offsets(&client, &s).await.offset_table.get(&1) == Some(&1)
    })
    .await;
    assert_eq!(topics(&client, &s).await, topics(&client, &m).await, "same topics, same data version");
    assert_eq!(groups(&client, &s).await, groups(&client, &m).await, "same groups, same data version");

    // Changes follow: a deleted topic disappears, a moved offset moves.
    call(
        &client,
        &m,
        RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER)
            .with_header(&DeleteTopicRequestHeader { topic: "Doomed".into() }),
    )
    .await;
    call(&client, &m, commit_offset("billing", "Orders", 2, 9)).await;
    eventually("the slave drops the deleted topic and moves the offset", || async {
        !topics(&client, &s).await.topic_config_table.contains_key("Doomed")
            && offsets(&client, &s).await.offset_table.get("Orders@billing").and_then(|q| q.get(&2)) == Some(&9)
    })
    .await;
    assert_slave_tables(&client, &s).await;

    // Restarted without its master (nothing to sync from), the slave still has it all.
    slave.stop().await;
    master.stop().await;
    let slave = Slave::start(slave_settings(slave_dir.path(), "127.0.0.1:1")).await;
    assert_slave_tables(&client, &slave.addr).await;
    slave.stop().await;
    client.shutdown().await;
}
