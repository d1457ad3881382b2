//! ACL 2.0 for gRPC clients (acl-and-tls.md 3.5; Java: the proxy's authentication and
//! authorization pipelines): what each RPC needs, checked with the `authorization` and
//! `x-mq-date-time` metadata against the users and ACLs. A refusal is UNAUTHORIZED (40100)
//! with Java's remark.

use std::net::IpAddr;

use ferromq_auth::v2::context::Needed;
use ferromq_auth::v2::model::{Action, Resource};
use ferromq_auth::v2::{AuthService, GrpcCredentials};
use tonic::metadata::MetadataMap;

use crate::pb;
use crate::status::{bad, ProxyResult};

/// The resources and actions a gRPC request needs, and its full name for the whitelists.
pub trait Needs {
    /// `apache.rocketmq.v2.<Name>`.
    const NAME: &'static str;
    /// What the request touches.
    fn needed(&self) -> Vec<Needed>;
}

fn name(r: &Option<pb::Resource>) -> Option<&str> {
    r.as_ref().map(|r| r.name.as_str()).filter(|n| !n.is_empty())
}

fn need(out: &mut Vec<Needed>, resource: Option<Resource>, actions: &[Action]) {
    if let Some(resource) = resource {
        out.push(Needed { resource, actions: actions.to_vec() });
    }
}

fn group_and_topic(group: &Option<pb::Resource>, topic: Option<&str>) -> Vec<Needed> {
    let mut out = Vec::new();
    need(&mut out, name(group).map(Resource::group), &[Action::Sub]);
    need(&mut out, topic.map(Resource::topic_or_group), &[Action::Sub]);
    out
}

fn queue_topic(q: &Option<pb::MessageQueue>) -> Option<&str> {
    q.as_ref().and_then(|q| name(&q.topic))
}

macro_rules! needs {
    ($ty:ident, |$r:ident| $body:expr) => {
        impl Needs for pb::$ty {
            const NAME: &'static str = concat!("apache.rocketmq.v2.", stringify!($ty));
            fn needed(&self) -> Vec<Needed> {
                let $r = self;
                $body
            }
        }
    };
}

needs!(QueryRouteRequest, |r| {
    let mut out = Vec::new();
    need(&mut out, name(&r.topic).map(Resource::topic), &[Action::Pub, Action::Sub]);
    out
});
needs!(HeartbeatRequest, |r| {
    let consumer = [pb::ClientType::PushConsumer, pb::ClientType::SimpleConsumer, pb::ClientType::PullConsumer]
        .iter()
        .any(|t| *t as i32 == r.client_type);
    let mut out = Vec::new();
    if consumer {
        need(&mut out, name(&r.group).map(Resource::group), &[Action::Sub]);
    }
    out
});
needs!(SendMessageRequest, |r| {
    let mut out = Vec::new();
    for m in &r.messages {
        need(&mut out, name(&m.topic).map(Resource::topic), &[Action::Pub]);
    }
    out
});
needs!(RecallMessageRequest, |r| {
    let mut out = Vec::new();
    need(&mut out, name(&r.topic).map(Resource::topic), &[Action::Pub]);
    out
});
needs!(EndTransactionRequest, |r| {
    let mut out = Vec::new();
    need(&mut out, name(&r.topic).map(Resource::topic), &[Action::Pub]);
    out
});
needs!(QueryAssignmentRequest, |r| group_and_topic(&r.group, name(&r.topic)));
needs!(ReceiveMessageRequest, |r| group_and_topic(&r.group, queue_topic(&r.message_queue)));
needs!(AckMessageRequest, |r| group_and_topic(&r.group, name(&r.topic)));
needs!(ForwardMessageToDeadLetterQueueRequest, |r| group_and_topic(&r.group, name(&r.topic)));
needs!(ChangeInvisibleDurationRequest, |r| group_and_topic(&r.group, None));
needs!(PullMessageRequest, |r| group_and_topic(&r.group, queue_topic(&r.message_queue)));
needs!(UpdateOffsetRequest, |r| group_and_topic(&r.group, queue_topic(&r.message_queue)));
needs!(GetOffsetRequest, |r| group_and_topic(&r.group, queue_topic(&r.message_queue)));
needs!(QueryOffsetRequest, |r| group_and_topic(&None, queue_topic(&r.message_queue)));
needs!(SyncLiteSubscriptionRequest, |r| group_and_topic(&r.group, name(&r.topic)));
needs!(NotifyClientTerminationRequest, |r| {
    let mut out = Vec::new();
    need(&mut out, name(&r.group).map(Resource::group), &[Action::Sub]);
    out
});
needs!(TelemetryCommand, |_r| Vec::new());

/// Checks one call.
///
/// # Errors
/// UNAUTHORIZED with the refusal's text.
pub fn check<T: Needs>(
    auth: &AuthService,
    metadata: &MetadataMap,
    request: &T,
    peer: Option<IpAddr>,
) -> ProxyResult<()> {
    let header = |k: &str| metadata.get(k).and_then(|v| v.to_str().ok());
    let credentials = GrpcCredentials::parse(header("authorization"), header("x-mq-date-time"));
    let ip = peer.unwrap_or(IpAddr::from([0, 0, 0, 0]));
    auth.check_grpc(T::NAME, &credentials, &request.needed(), ip).map_err(|d| bad!(Unauthorized, "{}", d.reason))
}
