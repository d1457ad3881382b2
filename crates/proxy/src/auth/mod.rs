//! ACL 2.0 of the proxy (acl-and-tls.md 3; Java: the proxy's authentication and authorization
//! pipelines). This file: what each gRPC call needs, checked with the `authorization` and
//! `x-mq-date-time` metadata against the users and ACLs; a refusal is UNAUTHORIZED (40100)
//! with Java's remark. A Telemetry stream is checked command by command: a Settings command
//! needs PUB on every publishing topic, or SUB on the subscription group and every subscribed
//! topic.
//!
//! [`config`] reads the ACL 2.0 keys of `rmq-proxy.json`, [`sync`] keeps the cluster proxy's
//! copy of the brokers' users and ACLs; `ferromq_auth::DenialLog` rate-limits the log of refusals. The
//! remoting port's requests are checked by `crate::remoting::gate`.

pub mod config;
pub mod sync;

use std::net::IpAddr;

use ferromq_auth::v2::context::Needed;
use ferromq_auth::v2::model::{Action, Resource};
use ferromq_auth::v2::{AuthService, GrpcCredentials};
use tonic::metadata::MetadataMap;

use crate::pb;
use crate::status::{bad, ProxyResult};

pub use config::{AuthConfigError, ProxyAuthConfig};
pub use ferromq_auth::DenialLog;

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
// Only Settings name resources (Java: `DefaultAuthorizationContextBuilder#newContext` for a
// TelemetryCommand); the client's answers to the proxy's commands are authenticated only.
needs!(TelemetryCommand, |r| {
    use pb::settings::PubSub;
    let mut out = Vec::new();
    if let Some(pb::telemetry_command::Command::Settings(settings)) = &r.command {
        match &settings.pub_sub {
            Some(PubSub::Publishing(p)) => {
                for t in &p.topics {
                    need(
                        &mut out,
                        Some(t.name.as_str()).filter(|n| !n.is_empty()).map(Resource::topic),
                        &[Action::Pub],
                    );
                }
            }
            Some(PubSub::Subscription(s)) => {
                need(&mut out, name(&s.group).map(Resource::group), &[Action::Sub]);
                for e in &s.subscriptions {
                    need(&mut out, name(&e.topic).map(Resource::topic), &[Action::Sub]);
                }
            }
            None => {}
        }
    }
    out
});

/// Checks one call (or one command of a stream) of a client at `peer`; a refusal is logged to
/// `denials`.
///
/// # Errors
/// UNAUTHORIZED with the refusal's text.
pub fn check<T: Needs>(
    auth: &AuthService,
    denials: &DenialLog,
    metadata: &MetadataMap,
    request: &T,
    peer: Option<IpAddr>,
) -> ProxyResult<()> {
    let header = |k: &str| metadata.get(k).and_then(|v| v.to_str().ok());
    let credentials = GrpcCredentials::parse(header("authorization"), header("x-mq-date-time"));
    let ip = peer.unwrap_or(IpAddr::from([0, 0, 0, 0]));
    auth.check_grpc(T::NAME, &credentials, &request.needed(), ip).map_err(|d| {
        denials.log(&d, T::NAME, ip, "2.0");
        bad!(Unauthorized, "{}", d.reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(n: &str) -> Option<pb::Resource> {
        Some(pb::Resource { resource_namespace: String::new(), name: n.to_owned() })
    }

    fn settings(pub_sub: pb::settings::PubSub) -> pb::TelemetryCommand {
        pb::TelemetryCommand {
            status: None,
            command: Some(pb::telemetry_command::Command::Settings(pb::Settings {
                pub_sub: Some(pub_sub),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn telemetry_settings_need_what_the_client_will_do() {
        let producer = settings(pb::settings::PubSub::Publishing(pb::Publishing {
            topics: vec![res("a").unwrap(), res("b").unwrap()],
            ..Default::default()
        }));
        let keys: Vec<(String, Vec<Action>)> =
            producer.needed().into_iter().map(|n| (n.resource.key(), n.actions)).collect();
        assert_eq!(keys, vec![("Topic:a".into(), vec![Action::Pub]), ("Topic:b".into(), vec![Action::Pub])]);

        let consumer = settings(pb::settings::PubSub::Subscription(pb::Subscription {
            group: res("g"),
            subscriptions: vec![pb::SubscriptionEntry { topic: res("t"), expression: None }],
            ..Default::default()
        }));
        let keys: Vec<(String, Vec<Action>)> =
            consumer.needed().into_iter().map(|n| (n.resource.key(), n.actions)).collect();
        assert_eq!(keys, vec![("Group:g".into(), vec![Action::Sub]), ("Topic:t".into(), vec![Action::Sub])]);

        let answer = pb::TelemetryCommand {
            status: None,
            command: Some(pb::telemetry_command::Command::ThreadStackTrace(pb::ThreadStackTrace::default())),
        };
        assert!(answer.needed().is_empty(), "answers to the proxy's commands name nothing");
    }
}
