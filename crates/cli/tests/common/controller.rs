//! What the controller-mode process tests share: the broker set's processes, the raw requests
//! they send, and the probes they wait on (controller_failover.rs, controller_partition.rs).

#![allow(dead_code)] // each test file uses its own part

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferromq_protocol::body::{JsonBody, KVTable, SyncStateSet};
use ferromq_protocol::header::{
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    ViewMessageRequestHeader,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::ChildProcess;

use super::cluster::{spawn_listening_in, tail};

pub const TOPIC: &str = "Failover";
pub const BROKER_NAME: &str = "broker-c";
pub const T: Duration = Duration::from_secs(3);
/// A controller or broker process of the test, stopped and started again on its store.
pub struct Proc {
    pub name: String,
    /// The address it listens on, and the network namespace it runs in (`None`: the test's).
    pub host: String,
    pub netns: Option<String>,
    pub port: u16,
    pub conf: String,
    pub dir: PathBuf,
    pub args: &'static [&'static str],
    pub process: Option<ChildProcess>,
}

impl Proc {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    pub fn start(&mut self) {
        let conf = self.dir.join(format!("{}.conf", self.name));
        let started =
            spawn_listening_in(self.netns.as_deref(), self.args, &conf, &self.conf, &self.log(), &self.addr());
        self.process = Some(started.unwrap_or_else(|e| panic!("{}: {e}", self.name)));
    }

    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.0.kill(); // SIGKILL
            let _ = p.0.wait();
        }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.join(format!("store-{}", self.name))
    }
}

/// A SEND_MESSAGE_V2 of `body` to [`TOPIC`].
pub fn send(body: &str) -> RemotingCommand {
    send_to(TOPIC, body, None)
}

/// A SEND_MESSAGE_V2 of a timer message to `topic`, due at `deliver_ms`.
pub fn send_timer(topic: &str, body: &str, deliver_ms: i64) -> RemotingCommand {
    let mut props = ferromq_protocol::message::MessageProperties::new();
    props.insert(ferromq_protocol::message::keys::TIMER_DELIVER_MS, deliver_ms.to_string());
    send_to(topic, body, Some(props.encode()))
}

fn send_to(topic: &str, body: &str, properties: Option<String>) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        born_timestamp: 1,
        properties,
        ..Default::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.as_bytes().to_vec())
}

/// Every acknowledged message of `acked` (body, CommitLog offset) is the record at its offset
/// on `addr`.
pub async fn all_on(client: &RemotingClient, addr: &str, acked: &[(String, i64)]) {
    let mut missing = Vec::new();
    for (body, offset) in acked {
        if view(client, addr, *offset).await.is_none_or(|m| m.body != body.as_bytes()) {
            missing.push(body.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}

/// The timer checkpoint in `store` (a replica's holds the progress it adopted), if written.
pub fn timer_checkpoint(store: &Path) -> Option<ferromq_timer::TimerCheckpoint> {
    ferromq_timer::TimerCheckpoint::decode(&std::fs::read(store.join("config").join("timercheck")).ok()?)
}

/// The broker set as the controllers see it: (master address, SyncStateSet).
pub async fn replica_info(client: &RemotingClient, controllers: &[String]) -> Option<(String, BTreeSet<i64>)> {
    for c in controllers {
        let req = RemotingCommand::request(request_code::CONTROLLER_GET_REPLICA_INFO)
            .with_header(&GetReplicaInfoRequestHeader { broker_name: BROKER_NAME.into() });
        let Ok(r) = client.invoke(c, req, T).await else { continue };
        if r.code != response_code::SUCCESS {
            continue;
        }
        let h: GetReplicaInfoResponseHeader = r.decode_header().ok()?;
        let set = SyncStateSet::decode(&r.body).ok()?;
        return Some((h.master_address?, set.sync_state_set));
    }
    None
}

pub async fn wait_for<T>(what: &str, within: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn runtime_info(client: &RemotingClient, addr: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let r = client.invoke(addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), T).await.ok()?;
    (r.code == response_code::SUCCESS).then(|| KVTable::decode(&r.body).ok()).flatten().map(|t| t.table)
}

pub async fn max_offset(client: &RemotingClient, addr: &str) -> Option<i64> {
    runtime_info(client, addr).await?.get("commitLogMaxOffset")?.parse().ok()
}

/// The record at `offset` on `addr`, if any.
pub async fn view(client: &RemotingClient, addr: &str, offset: i64) -> Option<StoredMessage> {
    let req = RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID)
        .with_header(&ViewMessageRequestHeader { topic: None, offset });
    let r = client.invoke(addr, req, T).await.ok()?;
    (r.code == response_code::SUCCESS).then(|| StoredMessage::decode_all(&r.body).ok()?.into_iter().next()).flatten()
}

pub fn commit_log(store: &Path, upto: i64) -> Vec<u8> {
    let dir = store.join("commitlog");
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let mut all = Vec::new();
    for p in names {
        all.extend(std::fs::read(p).unwrap());
    }
    all.truncate(upto as usize);
    all
}

/// Waits until the broker at `addr` serves as a replica (not active) whose CommitLog ends at
/// `end`: an old master back after a failover, its unreplicated tail cut.
pub async fn caught_up_as_replica(client: &RemotingClient, addr: &str, end: i64) {
    wait_for("the old master caught up as a replica", Duration::from_secs(60), async || {
        let info = runtime_info(client, addr).await?;
        let caught_up = info.get("commitLogMaxOffset")?.parse::<i64>().ok()? == end;
        (info.get("brokerActive")? == "false" && caught_up).then_some(())
    })
    .await;
}

/// Asserts that `replica`'s CommitLog is `master`'s up to `end`.
pub fn same_commit_log(master: &Proc, replica: &Proc, end: i64) {
    let (theirs, ours) = (commit_log(&master.store(), end), commit_log(&replica.store(), end));
    assert_eq!(theirs.len(), ours.len(), "{} holds less than {end} bytes", replica.name);
    let first_diff = theirs.iter().zip(&ours).position(|(a, b)| a != b);
    assert!(
        first_diff.is_none(),
        "{}'s CommitLog differs from {}'s at byte {first_diff:?}:\n{}",
        replica.name,
        master.name,
        tail(&replica.log(), 30)
    );
}
