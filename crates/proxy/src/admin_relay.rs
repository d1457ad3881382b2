//! Admin requests a broker relays to a gRPC client (Java: `GrpcClientChannel`):
//! GET_CONSUMER_RUNNING_INFO (with a thread dump: PrintThreadStackTraceCommand) and
//! CONSUME_MESSAGE_DIRECTLY (VerifyMessageCommand), answered through the client's Telemetry
//! stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferromq_protocol::body::{ConsumerRunningInfo, JsonBody};
use ferromq_protocol::header::GetConsumerRunningInfoRequestHeader;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{response_code, RemotingCommand};

use crate::convert::{self, Delivery};
use crate::pb::{self, telemetry_command::Command, ClientType, Code};
use crate::proxy::Proxy;

/// How long a relayed command waits for the client's answer.
pub const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

static NONCE: AtomicU64 = AtomicU64::new(1);

fn nonce() -> String {
    format!("ferromq-{}", NONCE.fetch_add(1, Ordering::Relaxed))
}

fn failure(req: &RemotingCommand, code: i32, remark: String) -> RemotingCommand {
    RemotingCommand::response_to(req, code, remark)
}

/// Sends `command` to the client and waits for its answer (same nonce).
async fn ask(p: &Proxy, client_id: &str, nonce: &str, command: Command) -> Result<pb::TelemetryCommand, String> {
    let tx = p
        .clients
        .telemetry_of(client_id)
        .ok_or_else(|| format!("gRPC client {client_id} has no open telemetry stream"))?;
    let rx = p
        .clients
        .expect_answer(client_id, nonce)
        .ok_or_else(|| format!("gRPC client {client_id} has too many commands pending"))?;
    tx.try_send(Ok(pb::TelemetryCommand { status: None, command: Some(command) }))
        .map_err(|_| format!("gRPC client {client_id} is not reading its telemetry stream"))?;
    match tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, rx).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(format!("gRPC client {client_id} went away before answering")),
        Err(_) => Err(format!("gRPC client {client_id} did not answer within {CLIENT_ANSWER_TIMEOUT:?}")),
    }
}

/// GET_CONSUMER_RUNNING_INFO for a gRPC consumer: what the proxy knows of it, and its thread
/// dump when asked (`jstackEnable`).
pub async fn consumer_running_info(p: &Proxy, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerRunningInfoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("bad header: {e}")),
    };
    let known = p.clients.with(&h.client_id, |r| {
        let mut info = ConsumerRunningInfo::default();
        let consume_type =
            if r.client_type == ClientType::PushConsumer { "CONSUME_PASSIVELY" } else { "CONSUME_ACTIVELY" };
        info.properties.insert("PROP_CONSUME_TYPE".into(), consume_type.into());
        info.properties.insert("PROP_CLIENT_VERSION".into(), r.version.clone());
        info.properties.insert("PROP_CONSUMEORDERLY".into(), "false".into());
        info.properties.insert("language".into(), r.language.clone());
        info.subscription_set =
            r.subscriptions.iter().filter_map(|(t, e)| crate::filter::subscription_data(t, e).ok()).collect();
        info
    });
    let Some(mut info) = known else {
        return failure(
            req,
            response_code::SYSTEM_ERROR,
            format!("the consumer {} is not connected to this proxy", h.client_id),
        );
    };
    if h.jstack_enable == Some(true) {
        let n = nonce();
        match ask(
            p,
            &h.client_id,
            &n,
            Command::PrintThreadStackTraceCommand(pb::PrintThreadStackTraceCommand { nonce: n.clone() }),
        )
        .await
        {
            Ok(pb::TelemetryCommand { command: Some(Command::ThreadStackTrace(t)), .. }) => {
                info.jstack = t.thread_stack_trace
            }
            Ok(other) => info.jstack = Some(format!("unexpected answer: {:?}", other.status)),
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e),
        }
    }
    info.sort_subscriptions();
    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(info.encode())
}

/// CONSUME_MESSAGE_DIRECTLY for a gRPC consumer: the message goes to the client as
/// VerifyMessageCommand; its verdict becomes Java's `ConsumeMessageDirectlyResult`.
pub async fn consume_message_directly(p: &Proxy, req: &RemotingCommand) -> RemotingCommand {
    let Some(client_id) = req.ext("clientId").map(str::to_owned) else {
        return failure(req, response_code::SYSTEM_ERROR, "clientId is required".into());
    };
    let message = match StoredMessage::decode(&req.body) {
        Ok((m, _)) => m,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("unreadable message: {e}")),
    };
    let topic = message.topic.clone();
    let n = nonce();
    let started = Instant::now();
    let cmd = Command::VerifyMessageCommand(pb::VerifyMessageCommand {
        nonce: n.clone(),
        message: Some(convert::incoming(
            &message,
            Delivery {
                topic,
                namespace: p.clients.with(&client_id, |r| r.namespace.clone()).unwrap_or_default(),
                ..Default::default()
            },
        )),
    });
    let answer = match ask(p, &client_id, &n, cmd).await {
        Ok(a) => a,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, e),
    };
    let status = answer.status.unwrap_or_default();
    let (result, remark) = if status.code == Code::Ok as i32 {
        ("CR_SUCCESS", String::new())
    } else {
        (
            "CR_THROW_EXCEPTION",
            format!("{:?}: {}", Code::try_from(status.code).unwrap_or(Code::Unspecified), status.message),
        )
    };
    let body = serde_json::json!({
        "autoCommit": true,
        "consumeResult": result,
        "order": false,
        "remark": remark,
        "spentTimeMills": started.elapsed().as_millis() as u64,
    });
    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.to_string().into_bytes())
}
