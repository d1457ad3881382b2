//! Topic and subscription-group configs as the broker holds them: GET_TOPIC_CONFIG and
//! GET_SUBSCRIPTIONGROUP_CONFIG over remoting, the proxy's topic message types and consumer
//! settings over gRPC.

use ferromq_protocol::body::{SubscriptionGroupConfig, TopicConfig};

use super::{Service, ServiceError};
use crate::broker::Broker;

impl Service {
    /// The topic's config.
    ///
    /// # Errors
    /// TOPIC_NOT_EXIST.
    pub fn topic_config(&self, topic: &str) -> Result<TopicConfig, ServiceError> {
        self.broker.topic_config_of(topic)
    }

    /// The group's config, created first when the broker's `autoCreateSubscriptionGroup` is
    /// on (as every lookup of a group does in Java).
    ///
    /// # Errors
    /// SUBSCRIPTION_GROUP_NOT_EXIST.
    pub fn subscription_group(&self, group: &str) -> Result<SubscriptionGroupConfig, ServiceError> {
        self.broker.subscription_group_of(group)
    }
}

impl Broker {
    pub(crate) fn topic_config_of(&self, topic: &str) -> Result<TopicConfig, ServiceError> {
        self.topics()
            .select(topic)
            .ok_or_else(|| ServiceError::TopicNotExist(format!("No topic in this broker. topic: {topic}")))
    }

    pub(crate) fn subscription_group_of(&self, group: &str) -> Result<SubscriptionGroupConfig, ServiceError> {
        self.groups()
            .find(group, self.config.auto_create_subscription_group)
            .ok_or_else(|| ServiceError::GroupNotExist("No group in this broker".into()))
    }
}
