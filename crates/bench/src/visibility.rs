//! `ferromq bench visibility`: how long after SEND_OK a message can be pulled, for the first
//! message of topics that do not exist yet (on a fresh broker, the first sample is the first
//! message of the store). Each sample sends one message to a new topic (auto-created from
//! TBW102, as a producer's first send does) and pulls its queue without long polling until the
//! message comes back.

use std::time::{Duration, Instant};

use ferromq_protocol::body::{JsonBody, TopicRouteData};
use ferromq_protocol::header::{
    pull_sys_flag, GetRouteInfoRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
};
use ferromq_protocol::message::{keys, MessageProperties};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

use crate::BenchError;

/// The most samples one run takes (each creates a topic).
pub const MAX_SAMPLES: u32 = 1000;

/// One sample.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The new topic.
    pub topic: String,
    /// From sending to SEND_OK.
    pub send: Duration,
    /// From SEND_OK to the first pull that returned the message.
    pub visible: Duration,
    /// Pulls that found nothing before it.
    pub empty_pulls: u32,
}

fn setup(e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(e.to_string())
}

/// Takes `samples` samples against the broker serving TBW102 (found through `namesrv`);
/// `prefix` names the topics (`<prefix><n>`), `timeout` bounds each request and each wait.
///
/// # Errors
/// [`BenchError`] when the options are out of range, no broker serves TBW102, a send fails or
/// a message does not become visible within `timeout`.
pub async fn probe(namesrv: &str, prefix: &str, samples: u32, timeout: Duration) -> Result<Vec<Sample>, BenchError> {
    if samples == 0 || samples > MAX_SAMPLES {
        return Err(BenchError::Invalid(format!("--samples must be 1..={MAX_SAMPLES}")));
    }
    let client = RemotingClient::new(ClientConfig::default());
    let result = probe_with(&client, namesrv, prefix, samples, timeout).await;
    client.shutdown().await;
    result
}

async fn probe_with(
    client: &RemotingClient,
    namesrv: &str,
    prefix: &str,
    samples: u32,
    timeout: Duration,
) -> Result<Vec<Sample>, BenchError> {
    let h = GetRouteInfoRequestHeader { topic: crate::TBW102.into(), accept_standard_json_only: Some(true) };
    let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&h);
    let resp = client.invoke(namesrv, req, timeout).await.map_err(|e| setup(format!("name server {namesrv}: {e}")))?;
    if resp.code != response_code::SUCCESS {
        return Err(setup(format!("no route for {} on {namesrv}: {}", crate::TBW102, resp.remark.unwrap_or_default())));
    }
    let route = TopicRouteData::decode(&resp.body).map_err(setup)?;
    let broker = route
        .broker_datas
        .iter()
        .find_map(|b| b.master_addr().map(|a| (a.to_string(), b.broker_name.clone())))
        .ok_or_else(|| setup(format!("no master serves {}", crate::TBW102)))?;
    let stamp = crate::now_ms();
    let mut out = Vec::with_capacity(samples as usize);
    for i in 0..samples {
        let topic = format!("{prefix}{stamp}_{i}");
        out.push(sample(client, &broker, topic, timeout).await?);
    }
    Ok(out)
}

async fn sample(
    client: &RemotingClient,
    (addr, broker_name): &(String, String),
    topic: String,
    timeout: Duration,
) -> Result<Sample, BenchError> {
    let mut props = MessageProperties::new();
    props.insert(keys::WAIT, "true");
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "ferro_bench_visibility".into(),
        topic: topic.clone(),
        default_topic: crate::TBW102.into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        born_timestamp: crate::now_ms() as i64,
        properties: Some(props.encode()),
        ..Default::default()
    }
    .into();
    let send = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(b"first".to_vec());
    let began = Instant::now();
    let resp = client.invoke(addr, send, timeout).await.map_err(|e| setup(format!("send to {addr}: {e}")))?;
    if resp.code != response_code::SUCCESS {
        return Err(setup(format!("send to {topic}: code {} {}", resp.code, resp.remark.unwrap_or_default())));
    }
    let acked = Instant::now();
    let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "ferro_bench_visibility".into(),
        topic: topic.clone(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 1,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        broker_name: Some(broker_name.clone()),
        ..Default::default()
    });
    let mut empty_pulls = 0;
    loop {
        let resp =
            client.invoke(addr, pull.clone(), timeout).await.map_err(|e| setup(format!("pull from {addr}: {e}")))?;
        if resp.code == response_code::SUCCESS {
            return Ok(Sample { topic, send: acked - began, visible: acked.elapsed(), empty_pulls });
        }
        empty_pulls += 1;
        if acked.elapsed() > timeout {
            return Err(setup(format!("the message sent to {topic} was not pullable within {timeout:?}")));
        }
    }
}
