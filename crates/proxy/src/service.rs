//! `apache.rocketmq.v2.MessagingService`: each RPC reads its context, calls the proxy and puts
//! the outcome in the response's status (Java: `GrpcMessagingApplication`).

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::clients::SETTINGS_WAIT;
use crate::context::CallContext;
use crate::listener::GrpcConnectInfo;
use crate::pb::messaging_service_server::MessagingService;
use crate::pb::{self, ClientType, Code};
use crate::proxy::Proxy;
use crate::route::{assignments, route_queues};
use crate::status::{self, bad, ProxyError, ProxyResult};
use crate::{consumer, offsets, producer, telemetry, validate};

/// Frames buffered between a receive and its stream; small, so a client that stops reading
/// is noticed while messages are still being written.
const RECEIVE_STREAM_BUFFER: usize = 4;

/// The gRPC service over a [`Proxy`].
#[derive(Debug, Clone)]
pub struct MessagingServiceImpl {
    proxy: Arc<Proxy>,
}

impl MessagingServiceImpl {
    /// Serves `proxy`.
    pub fn new(proxy: Arc<Proxy>) -> Self {
        MessagingServiceImpl { proxy }
    }
}

impl MessagingServiceImpl {
    /// The call's context, after ACL 2.0 let the call through (when the proxy has it).
    fn checked<T: crate::auth::Needs>(&self, req: &Request<T>) -> ProxyResult<CallContext> {
        let ctx = context(req)?;
        if let Some(auth) = self.proxy.auth.get() {
            let peer = ctx.peer.map(|p| p.ip());
            crate::auth::check(auth, &self.proxy.denials, req.metadata(), req.get_ref(), peer)?;
        }
        Ok(ctx)
    }
}

fn context<T>(req: &Request<T>) -> ProxyResult<CallContext> {
    let peer = req.extensions().get::<GrpcConnectInfo>().map(|i| i.remote_addr).or_else(|| req.remote_addr());
    CallContext::from_metadata(req.metadata(), peer)
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn one<T: Send + 'static>(item: T) -> BoxStream<T> {
    Box::pin(tokio_stream::once(Ok(item)))
}

#[tonic::async_trait]
impl MessagingService for MessagingServiceImpl {
    async fn query_route(
        &self,
        request: Request<pb::QueryRouteRequest>,
    ) -> Result<Response<pb::QueryRouteResponse>, Status> {
        let p = &self.proxy;
        let out = async {
            self.checked(&request)?;
            let req = request.get_ref();
            let topic = validate::topic(req.topic.as_ref())?;
            let route = p.brokers.route(&topic).await?;
            let t = p.brokers.topic_message_type(&topic).await;
            let shown = req.topic.clone().unwrap_or_default();
            Ok::<_, ProxyError>(route_queues(&shown, &route, t, &p.advertise, req.endpoints.as_ref()))
        }
        .await;
        Ok(Response::new(match out {
            Ok(message_queues) => pb::QueryRouteResponse { status: Some(status::ok()), message_queues },
            Err(e) => pb::QueryRouteResponse { status: Some(e.to_status()), message_queues: Vec::new() },
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let p = &self.proxy;
        let out = async {
            let ctx = self.checked(&request)?;
            let req = request.get_ref();
            let wait = ctx.remaining().map_or(SETTINGS_WAIT, |d| d.min(SETTINGS_WAIT));
            let known = p.clients.touch_when_known(&ctx.client_id, wait, |r| r.client_type).await;
            let Some(client_type) = known else {
                return Err(bad!(UnrecognizedClientType, "cannot find client settings for this client"));
            };
            match client_type {
                ClientType::Producer => {}
                ClientType::PushConsumer | ClientType::SimpleConsumer => {
                    validate::group(req.group.as_ref())?;
                }
                other => return Err(bad!(UnrecognizedClientType, "unrecognized client type {other:?}")),
            }
            p.register_with_brokers(&ctx.client_id).await;
            Ok(())
        }
        .await;
        Ok(Response::new(pb::HeartbeatResponse { status: Some(out.map_or_else(|e| e.to_status(), |()| status::ok())) }))
    }

    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let ctx = match self.checked(&request) {
            Ok(c) => c,
            Err(e) => {
                return Ok(Response::new(pb::SendMessageResponse { status: Some(e.to_status()), entries: Vec::new() }))
            }
        };
        Ok(Response::new(producer::send_message(&self.proxy, &ctx, request.into_inner()).await))
    }

    async fn query_assignment(
        &self,
        request: Request<pb::QueryAssignmentRequest>,
    ) -> Result<Response<pb::QueryAssignmentResponse>, Status> {
        let p = &self.proxy;
        let out = async {
            self.checked(&request)?;
            let req = request.get_ref();
            let topic = validate::topic(req.topic.as_ref())?;
            let group = validate::group(req.group.as_ref())?;
            let route = p.brokers.route(&topic).await?;
            let fifo = p.brokers.group_config(&topic, &group).await.map(|g| g.consume_message_orderly).unwrap_or(false);
            let shown = req.topic.clone().unwrap_or_default();
            assignments(&shown, &route, fifo, &p.advertise, req.endpoints.as_ref())
        }
        .await;
        Ok(Response::new(match out {
            Ok(assignments) => pb::QueryAssignmentResponse { status: Some(status::ok()), assignments },
            Err(e) => pb::QueryAssignmentResponse { status: Some(e.to_status()), assignments: Vec::new() },
        }))
    }

    type ReceiveMessageStream = BoxStream<pb::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<pb::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        let status_only = |e: ProxyError| {
            one(pb::ReceiveMessageResponse {
                content: Some(pb::receive_message_response::Content::Status(e.to_status())),
            })
        };
        let ctx = match self.checked(&request) {
            Ok(c) => c,
            Err(e) => return Ok(Response::new(status_only(e))),
        };
        let Ok(permit) = self.proxy.receive_permits.clone().try_acquire_owned() else {
            return Ok(Response::new(status_only(bad!(TooManyRequests, "too many receives in flight"))));
        };
        let (tx, rx) = mpsc::channel(RECEIVE_STREAM_BUFFER);
        let p = self.proxy.clone();
        let req = request.into_inner();
        tokio::spawn(async move {
            consumer::receive(p, ctx, req, tx).await;
            drop(permit);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }

    async fn ack_message(
        &self,
        request: Request<pb::AckMessageRequest>,
    ) -> Result<Response<pb::AckMessageResponse>, Status> {
        if let Err(e) = self.checked(&request) {
            return Ok(Response::new(pb::AckMessageResponse { status: Some(e.to_status()), entries: Vec::new() }));
        }
        Ok(Response::new(consumer::ack(&self.proxy, request.into_inner()).await))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<pb::ForwardMessageToDeadLetterQueueResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => consumer::forward_message_to_dlq(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::ForwardMessageToDeadLetterQueueResponse {
            status: Some(out.map_or_else(|e| e.to_status(), |()| status::ok())),
        }))
    }

    type PullMessageStream = BoxStream<pb::PullMessageResponse>;

    async fn pull_message(
        &self,
        request: Request<pb::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, Status> {
        use pb::pull_message_response::Content;
        let out = match self.checked(&request) {
            Ok(_) => offsets::pull(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        let frame = |c| pb::PullMessageResponse { content: Some(c) };
        let frames: Vec<pb::PullMessageResponse> = match out {
            Ok(Some(pulled)) => {
                let mut v = vec![frame(Content::Status(status::ok()))];
                v.extend(pulled.messages.into_iter().map(|m| frame(Content::Message(m))));
                v.push(frame(Content::NextOffset(pulled.next_offset)));
                v
            }
            Ok(None) => vec![frame(Content::Status(status::status(Code::MessageNotFound, "no new message")))],
            Err(e) => vec![frame(Content::Status(e.to_status()))],
        };
        Ok(Response::new(Box::pin(tokio_stream::iter(frames.into_iter().map(Ok)))))
    }

    async fn update_offset(
        &self,
        request: Request<pb::UpdateOffsetRequest>,
    ) -> Result<Response<pb::UpdateOffsetResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => offsets::update_offset(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::UpdateOffsetResponse {
            status: Some(out.map_or_else(|e| e.to_status(), |()| status::ok())),
        }))
    }

    async fn get_offset(
        &self,
        request: Request<pb::GetOffsetRequest>,
    ) -> Result<Response<pb::GetOffsetResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => offsets::get_offset(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(match out {
            Ok(offset) => pb::GetOffsetResponse { status: Some(status::ok()), offset },
            Err(e) => pb::GetOffsetResponse { status: Some(e.to_status()), offset: 0 },
        }))
    }

    async fn query_offset(
        &self,
        request: Request<pb::QueryOffsetRequest>,
    ) -> Result<Response<pb::QueryOffsetResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => offsets::query_offset(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(match out {
            Ok(offset) => pb::QueryOffsetResponse { status: Some(status::ok()), offset },
            Err(e) => pb::QueryOffsetResponse { status: Some(e.to_status()), offset: 0 },
        }))
    }

    async fn end_transaction(
        &self,
        request: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(ctx) => producer::end_transaction(&self.proxy, &ctx, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(pb::EndTransactionResponse {
            status: Some(out.map_or_else(|e| e.to_status(), |()| status::ok())),
        }))
    }

    type TelemetryStream = BoxStream<pb::TelemetryCommand>;

    async fn telemetry(
        &self,
        request: Request<tonic::Streaming<pb::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, Status> {
        let ctx = context(&request).map_err(|e| Status::invalid_argument(e.message))?;
        // Each command is checked as it comes (Java runs its pipeline per command), with the
        // stream's metadata: a Settings command naming what the user may not do is refused.
        let metadata = request.metadata().clone();
        let rx = telemetry::serve(self.proxy.clone(), ctx, metadata, request.into_inner());
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn notify_client_termination(
        &self,
        request: Request<pb::NotifyClientTerminationRequest>,
    ) -> Result<Response<pb::NotifyClientTerminationResponse>, Status> {
        let p = &self.proxy;
        let out = async {
            let ctx = self.checked(&request)?;
            let is_consumer = p
                .clients
                .with(&ctx.client_id, |r| r.is_consumer())
                .ok_or_else(|| bad!(UnrecognizedClientType, "cannot find client settings for this client"))?;
            if is_consumer {
                validate::group(request.get_ref().group.as_ref())?;
            }
            if let Some(d) = p.clients.remove(&ctx.client_id) {
                p.forget(d).await;
            }
            Ok::<_, ProxyError>(())
        }
        .await;
        Ok(Response::new(pb::NotifyClientTerminationResponse {
            status: Some(out.map_or_else(|e| e.to_status(), |()| status::ok())),
        }))
    }

    async fn change_invisible_duration(
        &self,
        request: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<pb::ChangeInvisibleDurationResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => consumer::change_invisible_duration(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(match out {
            Ok(receipt_handle) => pb::ChangeInvisibleDurationResponse { status: Some(status::ok()), receipt_handle },
            Err(e) => {
                pb::ChangeInvisibleDurationResponse { status: Some(e.to_status()), receipt_handle: String::new() }
            }
        }))
    }

    async fn recall_message(
        &self,
        request: Request<pb::RecallMessageRequest>,
    ) -> Result<Response<pb::RecallMessageResponse>, Status> {
        let out = match self.checked(&request) {
            Ok(_) => producer::recall_message(&self.proxy, request.into_inner()).await,
            Err(e) => Err(e),
        };
        Ok(Response::new(match out {
            Ok(message_id) => pb::RecallMessageResponse { status: Some(status::ok()), message_id },
            Err(e) => pb::RecallMessageResponse { status: Some(e.to_status()), message_id: String::new() },
        }))
    }

    async fn sync_lite_subscription(
        &self,
        _request: Request<pb::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<pb::SyncLiteSubscriptionResponse>, Status> {
        // Lite topics are not part of RocketMQ 5.3.3; its proxy answers UNIMPLEMENTED too.
        Err(Status::unimplemented("SyncLiteSubscription (lite topics) is not supported"))
    }
}
