//! Resource names checked as Java's `GrpcValidator` checks them, before any broker sees them.

use ferromq_protocol::topic_validator::{is_system_topic, validate_group, validate_topic};

use crate::pb::Resource;
use crate::status::{bad, ProxyResult};

/// The topic name of a request's resource.
///
/// # Errors
/// ILLEGAL_TOPIC when it is missing, malformed or a system topic.
pub fn topic(resource: Option<&Resource>) -> ProxyResult<&str> {
    let name = resource.map(|r| r.name.as_str()).unwrap_or_default();
    validate_topic(name).map_err(|reason| bad!(IllegalTopic, "{reason}"))?;
    if is_system_topic(name) {
        return Err(bad!(IllegalTopic, "topic name cannot be the system topic: {name}"));
    }
    Ok(name)
}

/// The consumer group of a request's resource.
///
/// # Errors
/// ILLEGAL_CONSUMER_GROUP when it is missing or malformed.
pub fn group(resource: Option<&Resource>) -> ProxyResult<&str> {
    let name = resource.map(|r| r.name.as_str()).unwrap_or_default();
    validate_group(name).map_err(|reason| bad!(IllegalConsumerGroup, "{reason}"))?;
    if name.starts_with("CID_RMQ_SYS_") || is_system_topic(name) {
        return Err(bad!(IllegalConsumerGroup, "group name cannot be the system group: {name}"));
    }
    Ok(name)
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
    }
}
