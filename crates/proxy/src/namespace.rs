//! Namespaces: a 5.x client configured with a namespace sends every topic and group as a
//! `Resource` whose `resource_namespace` is set; the proxy serves it as the broker resource
//! `namespace%name` (retry and dead-letter prefixes stay in front: `%RETRY%namespace%group`),
//! and shows names back without the namespace. Java: `NamespaceUtil.wrapNamespace` /
//! `withoutNamespace`, applied by `GrpcConverter.wrapResourceWithNamespace`.
//!
//! System topics and groups are never wrapped, and a name that already carries the namespace is
//! not wrapped twice.

use ferromq_protocol::topic_validator::is_system_topic;

use crate::pb::Resource;

/// Between the namespace and the name.
pub const SEPARATOR: char = '%';
const RETRY_PREFIX: &str = "%RETRY%";
const DLQ_PREFIX: &str = "%DLQ%";
const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

fn is_system(name: &str) -> bool {
    is_system_topic(name) || name.starts_with(SYSTEM_GROUP_PREFIX)
}

/// Splits the retry or dead-letter prefix off `name`.
fn split_prefix(name: &str) -> (&'static str, &str) {
    if let Some(rest) = name.strip_prefix(RETRY_PREFIX) {
        (RETRY_PREFIX, rest)
    } else if let Some(rest) = name.strip_prefix(DLQ_PREFIX) {
        (DLQ_PREFIX, rest)
    } else {
        ("", name)
    }
}

fn has_namespace(name: &str, namespace: &str) -> bool {
    name.len() > namespace.len() + 1 && name.starts_with(namespace) && name[namespace.len()..].starts_with(SEPARATOR)
}

/// The broker resource of `name` in `namespace` (`name` itself when the namespace is empty,
/// the name is a system resource, or it carries the namespace already).
pub fn wrap(namespace: &str, name: &str) -> String {
    if namespace.is_empty() || name.is_empty() || is_system(name) {
        return name.to_owned();
    }
    let (prefix, bare) = split_prefix(name);
    if has_namespace(bare, namespace) {
        return name.to_owned();
    }
    format!("{prefix}{namespace}{SEPARATOR}{bare}")
}

/// `wrapped` as a client of `namespace` names it: the namespace taken out (kept as is when it
/// does not carry that namespace).
pub fn strip(namespace: &str, wrapped: &str) -> String {
    if namespace.is_empty() {
        return wrapped.to_owned();
    }
    let (prefix, bare) = split_prefix(wrapped);
    if has_namespace(bare, namespace) {
        return format!("{prefix}{}", &bare[namespace.len() + 1..]);
    }
    wrapped.to_owned()
}

/// The broker resource a request's `Resource` names.
pub fn of(resource: &Resource) -> String {
    wrap(&resource.resource_namespace, &resource.name)
}

/// The namespace a request's optional `Resource` names (empty when absent).
pub fn namespace_of(resource: Option<&Resource>) -> String {
    resource.map(|r| r.resource_namespace.clone()).unwrap_or_default()
}

/// The `Resource` a client of `namespace` is shown for the broker resource `wrapped`.
pub fn resource(namespace: &str, wrapped: &str) -> Resource {
    Resource { resource_namespace: namespace.to_owned(), name: strip(namespace, wrapped) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_as_java_namespace_util() {
        assert_eq!(wrap("ns", "Orders"), "ns%Orders");
        assert_eq!(wrap("", "Orders"), "Orders");
        assert_eq!(wrap("ns", "ns%Orders"), "ns%Orders", "never twice");
        assert_eq!(wrap("ns", "%RETRY%G1"), "%RETRY%ns%G1");
        assert_eq!(wrap("ns", "%DLQ%G1"), "%DLQ%ns%G1");
        assert_eq!(wrap("ns", "%RETRY%ns%G1"), "%RETRY%ns%G1");
        assert_eq!(wrap("ns", "TBW102"), "TBW102", "system topics stay");
        assert_eq!(wrap("ns", "rmq_sys_wheel"), "rmq_sys_wheel");
        assert_eq!(wrap("ns", "CID_RMQ_SYS_X"), "CID_RMQ_SYS_X", "system groups stay");
        assert_eq!(wrap("ns", "nsOrders"), "ns%nsOrders", "a name merely starting with the namespace");
    }

    #[test]
    fn strips_only_its_own_namespace() {
        assert_eq!(strip("ns", "ns%Orders"), "Orders");
        assert_eq!(strip("ns", "%RETRY%ns%G1"), "%RETRY%G1");
        assert_eq!(strip("ns", "other%Orders"), "other%Orders");
        assert_eq!(strip("", "ns%Orders"), "ns%Orders");
        assert_eq!(strip("ns", "ns%"), "ns%", "no name after the separator");
        let shown = resource("ns", "ns%Orders");
        assert_eq!((shown.resource_namespace.as_str(), shown.name.as_str()), ("ns", "Orders"));
        assert_eq!(of(&shown), "ns%Orders");
    }
}
