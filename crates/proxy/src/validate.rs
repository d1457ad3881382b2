//! Resource names checked as Java's `GrpcValidator` checks them, before any broker sees them,
//! in their namespace (see [`crate::namespace`]).

use ferromq_protocol::topic_validator::{is_system_topic, validate_group, validate_topic};

use crate::namespace;
use crate::pb::Resource;
use crate::status::{bad, ProxyResult};

/// The topic a request's resource names, with its namespace.
///
/// # Errors
/// ILLEGAL_TOPIC when it is missing, malformed or a system topic.
pub fn topic(resource: Option<&Resource>) -> ProxyResult<String> {
    let name = resource.map(namespace::of).unwrap_or_default();
    let name = name.as_str();
    validate_topic(name).map_err(|reason| bad!(IllegalTopic, "{reason}"))?;
    if is_system_topic(name) {
        return Err(bad!(IllegalTopic, "topic name cannot be the system topic: {name}"));
    }
    Ok(name.to_owned())
}

/// The consumer group a request's resource names, with its namespace.
///
/// # Errors
/// ILLEGAL_CONSUMER_GROUP when it is missing or malformed.
pub fn group(resource: Option<&Resource>) -> ProxyResult<String> {
    let name = resource.map(namespace::of).unwrap_or_default();
    let name = name.as_str();
    validate_group(name).map_err(|reason| bad!(IllegalConsumerGroup, "{reason}"))?;
    if name.starts_with("CID_RMQ_SYS_") || is_system_topic(name) {
        return Err(bad!(IllegalConsumerGroup, "group name cannot be the system group: {name}"));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Code;

    fn r(name: &str) -> Resource {
        Resource { resource_namespace: String::new(), name: name.into() }
    }

    #[test]
    fn names() {
        assert_eq!(topic(Some(&r("Orders"))).unwrap(), "Orders");
        assert_eq!(topic(None).unwrap_err().code, Code::IllegalTopic);
        assert_eq!(topic(Some(&r("a b"))).unwrap_err().code, Code::IllegalTopic);
        assert_eq!(topic(Some(&r("TBW102"))).unwrap_err().code, Code::IllegalTopic);
        assert_eq!(topic(Some(&r("rmq_sys_x"))).unwrap_err().code, Code::IllegalTopic);
        assert_eq!(group(Some(&r("g1"))).unwrap(), "g1");
        assert_eq!(group(Some(&r(""))).unwrap_err().code, Code::IllegalConsumerGroup);
        let ns = |name: &str| Resource { resource_namespace: "ns1".into(), name: name.into() };
        assert_eq!(topic(Some(&ns("Orders"))).unwrap(), "ns1%Orders");
        assert_eq!(group(Some(&ns("g1"))).unwrap(), "ns1%g1");
        assert_eq!(topic(Some(&ns("TBW102"))).unwrap_err().code, Code::IllegalTopic);
    }
}
