//! The Telemetry stream and the Settings exchange (Java: `ClientActivity#processAndWriteClientSettings`,
//! `GrpcClientSettingsManager`): the client says what it is, the proxy registers it with the
//! brokers and answers with the settings it must use.

use std::sync::Arc;

use ferromq_protocol::body::SubscriptionGroupConfig;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::metadata::MetadataMap;
use tracing::{debug, info};

use crate::clients::{ClientRecord, TELEMETRY_QUEUE};
use crate::context::CallContext;
use crate::convert::duration;
use crate::pb::{self, telemetry_command::Command, ClientType};
use crate::proxy::Proxy;
use crate::status::{self, bad, ProxyError, ProxyResult};
use crate::validate;

/// The producer's retry policy the proxy hands out.
fn producer_backoff(p: &Proxy) -> pb::RetryPolicy {
    pb::RetryPolicy {
        max_attempts: p.config.grpc_client_producer_max_attempts,
        strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
            initial: Some(duration(p.config.grpc_client_producer_backoff_initial_millis)),
            max: Some(duration(p.config.grpc_client_producer_backoff_max_millis)),
            multiplier: p.config.grpc_client_producer_backoff_multiplier as f32,
        })),
    }
}

/// A consumer group's retry policy: `groupRetryPolicy` of its config, CUSTOMIZED (the delay
/// levels) by default.
fn consumer_backoff(p: &Proxy, group: &SubscriptionGroupConfig) -> pb::RetryPolicy {
    let policy = &group.group_retry_policy;
    let kind = policy.get("type").and_then(|t| t.as_str()).unwrap_or("CUSTOMIZED");
    let strategy = if kind.eq_ignore_ascii_case("EXPONENTIAL") {
        let e = policy.get("exponentialRetryPolicy");
        let num = |k: &str, d: i64| e.and_then(|e| e.get(k)).and_then(|v| v.as_i64()).unwrap_or(d);
        pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
            initial: Some(duration(num("initial", 5000))),
            max: Some(duration(num("max", 7_200_000))),
            multiplier: num("multiplier", 2) as f32,
        })
    } else {
        let next: Vec<i64> = policy
            .get("customizedRetryPolicy")
            .and_then(|c| c.get("next"))
            .and_then(|n| n.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
            .filter(|v: &Vec<i64>| !v.is_empty())
            .unwrap_or_else(|| p.delay_levels_ms.clone());
        pb::retry_policy::Strategy::CustomizedBackoff(pb::CustomizedBackoff {
            next: next.into_iter().map(duration).collect(),
        })
    };
    pb::RetryPolicy { max_attempts: group.retry_max_times.saturating_add(1), strategy: Some(strategy) }
}

/// Validates the client's Settings, registers it and returns the settings it must use.
///
/// # Errors
/// The validation codes (ILLEGAL_TOPIC, ILLEGAL_CONSUMER_GROUP...), or BAD_REQUEST when the
/// settings say neither publishing nor subscription.
pub async fn apply_settings(p: &Proxy, ctx: &CallContext, settings: pb::Settings) -> ProxyResult<pb::Settings> {
    let client_type =
        settings.client_type.and_then(|t| ClientType::try_from(t).ok()).unwrap_or(ClientType::Unspecified);
    let mut merged = settings.clone();
    merged.metric = Some(pb::Metric { on: false, endpoints: None });
    match &settings.pub_sub {
        Some(pb::settings::PubSub::Publishing(publishing)) => {
            for t in &publishing.topics {
                validate::topic(Some(t))?;
            }
            merged.backoff_policy = Some(producer_backoff(p));
            let mut publishing = publishing.clone();
            publishing.max_body_size = i32::try_from(p.config.max_message_size).unwrap_or(i32::MAX);
            publishing.validate_message_type = p.config.enable_topic_message_type_check;
            merged.pub_sub = Some(pb::settings::PubSub::Publishing(publishing));
            if !matches!(client_type, ClientType::Producer) {
                merged.client_type = Some(ClientType::Producer as i32);
            }
        }
        Some(pb::settings::PubSub::Subscription(subscription)) => {
            let group = validate::group(subscription.group.as_ref())?;
            let mut topics = Vec::new();
            for e in &subscription.subscriptions {
                topics.push(validate::topic(e.topic.as_ref())?);
                if let Some(expr) = &e.expression {
                    crate::filter::subscription_data(&topics[topics.len() - 1], expr)?;
                }
            }
            let group_config = match topics.first() {
                Some(t) => p.brokers.group_config(t, &group).await?,
                None => Arc::new(SubscriptionGroupConfig::new(&group)),
            };
            let mut subscription = subscription.clone();
            subscription.fifo = Some(group_config.consume_message_orderly);
            subscription.receive_batch_size = Some(p.config.grpc_client_consumer_long_polling_batch_size);
            subscription.long_polling_timeout =
                Some(duration(p.config.grpc_client_consumer_max_long_polling_timeout_millis));
            merged.backoff_policy = Some(consumer_backoff(p, &group_config));
            merged.pub_sub = Some(pb::settings::PubSub::Subscription(subscription));
        }
        None => return Err(bad!(BadRequest, "there is no publishing or subscription data in settings")),
    }
    let effective_type = merged.client_type.and_then(|t| ClientType::try_from(t).ok()).unwrap_or(client_type);
    let record = ClientRecord::new(effective_type, merged.clone(), &ctx.language, &ctx.client_version, ctx.peer);
    if p.clients.upsert(&ctx.client_id, record).is_err() {
        return Err(bad!(TooManyRequests, "the proxy serves too many clients already"));
    }
    p.register_with_brokers(&ctx.client_id).await;
    Ok(merged)
}

fn stream_error(e: &ProxyError) -> tonic::Status {
    if (40000..50000).contains(&(e.code as i32)) {
        tonic::Status::invalid_argument(e.message.clone())
    } else {
        tonic::Status::internal(e.message.clone())
    }
}

/// The proxy's ACL 2.0 on one command of the stream opened with `metadata`.
fn check(p: &Proxy, ctx: &CallContext, metadata: &MetadataMap, cmd: &pb::TelemetryCommand) -> ProxyResult<()> {
    match p.auth.get() {
        Some(auth) => crate::auth::check(auth, &p.denials, metadata, cmd, ctx.peer.map(|a| a.ip())),
        None => Ok(()),
    }
}

/// Serves one Telemetry stream: Settings in, Settings out; the client's answers to commands
/// go to whoever waits for them. Every command is checked by the proxy's ACL 2.0 first (with
/// the stream's `metadata`): a refused one is answered with a command carrying only the
/// UNAUTHORIZED status, and the stream ends (Java writes the status and completes). Returns
/// the outgoing half.
pub fn serve(
    p: Arc<Proxy>,
    ctx: CallContext,
    metadata: MetadataMap,
    mut inbound: tonic::Streaming<pb::TelemetryCommand>,
) -> mpsc::Receiver<Result<pb::TelemetryCommand, tonic::Status>> {
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE);
    tokio::spawn(async move {
        let mut attached: Option<u64> = None;
        while let Some(next) = inbound.next().await {
            let cmd = match next {
                Ok(cmd) => cmd,
                Err(e) => {
                    debug!(client_id = %ctx.client_id, error = %e, "telemetry stream broke");
                    break;
                }
            };
            if let Err(e) = check(&p, &ctx, &metadata, &cmd) {
                debug!(client_id = %ctx.client_id, error = %e.message, "telemetry command refused");
                let _ = tx.send(Ok(pb::TelemetryCommand { status: Some(e.to_status()), command: None })).await;
                break;
            }
            match cmd.command {
                Some(Command::Settings(settings)) => match apply_settings(&p, &ctx, settings).await {
                    Ok(merged) => {
                        if attached.is_none() {
                            attached = p.clients.attach_telemetry(&ctx.client_id, tx.clone());
                            info!(client_id = %ctx.client_id, language = %ctx.language, version = %ctx.client_version,
                                peer = ?ctx.peer, "gRPC client connected");
                        }
                        let reply = pb::TelemetryCommand {
                            status: Some(status::ok()),
                            command: Some(Command::Settings(merged)),
                        };
                        if tx.send(Ok(reply)).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(stream_error(&e))).await;
                        break;
                    }
                },
                Some(Command::ThreadStackTrace(t)) => {
                    let nonce = t.nonce.clone();
                    p.clients.answer(
                        &ctx.client_id,
                        &nonce,
                        pb::TelemetryCommand { status: cmd.status, command: Some(Command::ThreadStackTrace(t)) },
                    );
                }
                Some(Command::VerifyMessageResult(v)) => {
                    let nonce = v.nonce.clone();
                    p.clients.answer(
                        &ctx.client_id,
                        &nonce,
                        pb::TelemetryCommand { status: cmd.status, command: Some(Command::VerifyMessageResult(v)) },
                    );
                }
                Some(other) => {
                    debug!(client_id = %ctx.client_id, command = ?std::mem::discriminant(&other), "telemetry command ignored")
                }
                None => debug!(client_id = %ctx.client_id, "empty telemetry command"),
            }
        }
        if let Some(id) = attached {
            p.clients.detach_telemetry(&ctx.client_id, id);
        }
    });
    rx
}
