//! One consumer group as the broker sees it: how it consumes, what it subscribes to, and which
//! connections are its members. Java: `ConsumerGroupInfo`.
//!
//! The update rules live here (which heartbeat changes count as changes); deciding whom to
//! notify and firing events is the consumer manager's job.

use std::collections::{BTreeMap, BTreeSet};

use ferromq_protocol::body::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};
use ferromq_remoting::{Connection, ConnectionId};
use tracing::{info, warn};

use crate::client::client_channel::ClientChannelInfo;

/// A snapshot of one consumer group.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerGroupInfo {
    /// Consumer group name.
    pub group_name: String,
    /// Pull, push or pop, as the latest heartbeat said.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting, as the latest heartbeat said.
    pub message_model: MessageModel,
    /// Start position for queues without an offset, as the latest heartbeat said.
    pub consume_from_where: ConsumeFromWhere,
    /// Topic -> the group's subscription to it.
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    /// Connection id -> member client.
    pub channels: BTreeMap<ConnectionId, ClientChannelInfo>,
    /// When a member last registered, in epoch milliseconds.
    pub last_update_ms: i64,
    /// The group's `notifyConsumerIdsChangedEnable` as of its latest registration; applied
    /// when members leave by closing or expiring, where no request carries it.
    pub notify_consumer_ids_changed: bool,
    /// The subscription fingerprint of the group's latest heartbeat (0 for one without), so a
    /// 5.x client can leave unchanged subscriptions out (heartbeat V2). Java keeps it in
    /// `ClientManageProcessor#consumerGroupHeartbeatTable`; here it goes with the group, so a
    /// group that was dropped (and its subscriptions with it) has none.
    pub heartbeat_fingerprint: Option<i32>,
}

impl ConsumerGroupInfo {
    pub(crate) fn new(
        group_name: &str,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        now_ms: i64,
    ) -> Self {
        ConsumerGroupInfo {
            group_name: group_name.to_owned(),
            consume_type,
            message_model,
            consume_from_where,
            subscriptions: BTreeMap::new(),
            channels: BTreeMap::new(),
            last_update_ms: now_ms,
            notify_consumer_ids_changed: true,
            heartbeat_fingerprint: None,
        }
    }

    /// The members' client ids, sorted and without duplicates (a client reconnecting may
    /// briefly have two connections). Java: `ConsumerGroupInfo#getAllClientId`, which keeps
    /// duplicates.
    pub fn client_ids(&self) -> Vec<String> {
        let ids: BTreeSet<&str> = self.channels.values().map(|info| info.client_id.as_str()).collect();
        ids.into_iter().map(str::to_owned).collect()
    }

    /// The members' connections.
    pub fn connections(&self) -> Vec<Connection> {
        self.channels.values().map(|info| info.connection.clone()).collect()
    }

    /// The subscribed topics.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.subscriptions.keys().cloned().collect()
    }

    /// The member with `client_id`, if any. Java: `ConsumerGroupInfo#findChannel(String)`.
    pub fn find_channel(&self, client_id: &str) -> Option<&ClientChannelInfo> {
        self.channels.values().find(|info| info.client_id == client_id)
    }

    /// Whether members share the messages (clustering) rather than each getting all.
    pub fn is_clustering(&self) -> bool {
        self.message_model == MessageModel::Clustering
    }

    /// Records a heartbeat from `info`'s connection and the consumption settings it carried.
    /// Returns whether membership changed: a new connection, or a known one now announcing a
    /// different client id. Java: `ConsumerGroupInfo#updateChannel`, which does not count the
    /// second case.
    pub(crate) fn update_channel(
        &mut self,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
    ) -> bool {
        self.consume_type = consume_type;
        self.message_model = message_model;
        self.consume_from_where = consume_from_where;
        self.last_update_ms = info.last_update_ms;
        let connection_id = info.connection_id();
        let previous = self.channels.insert(connection_id, info);
        let current = &self.channels[&connection_id];
        match previous {
            None => {
                info!(consumer_group = %self.group_name, client_id = %current.client_id, connection_id,
                    remote_addr = %current.connection.remote_addr(), consume_type = consume_type.as_str(),
                    message_model = message_model.as_str(), "consumer registered");
                true
            }
            Some(previous) if previous.client_id != current.client_id => {
                warn!(consumer_group = %self.group_name, previous_client_id = %previous.client_id,
                    client_id = %current.client_id, connection_id, "consumer connection changed its client id");
                true
            }
            Some(_) => false,
        }
    }

    /// Applies the subscriptions of a heartbeat. A topic not yet subscribed is added; a known
    /// topic is replaced only by a newer `subVersion` (an older or equal one is ignored);
    /// topics missing from `subscriptions` are removed, `%RETRY%` ones included. Returns
    /// whether the set of topics changed; a replaced expression alone does not count, as in
    /// Java (`ConsumerGroupInfo#updateSubscription`).
    pub(crate) fn update_subscriptions(&mut self, subscriptions: &[SubscriptionData], now_ms: i64) -> bool {
        let mut changed = false;
        for sub in subscriptions {
            match self.subscriptions.get_mut(&sub.topic) {
                None => {
                    info!(consumer_group = %self.group_name, topic = %sub.topic, expression = %sub.sub_string,
                        "subscription added");
                    self.subscriptions.insert(sub.topic.clone(), sub.clone());
                    changed = true;
                }
                Some(old) if sub.sub_version > old.sub_version => {
                    if old.sub_string != sub.sub_string || old.expression_type != sub.expression_type {
                        info!(consumer_group = %self.group_name, topic = %sub.topic, old_expression = %old.sub_string,
                            expression = %sub.sub_string, "subscription changed");
                    }
                    *old = sub.clone();
                }
                Some(_) => {}
            }
        }
        let before = self.subscriptions.len();
        self.subscriptions.retain(|topic, _| {
            let keep = subscriptions.iter().any(|sub| &sub.topic == topic);
            if !keep {
                warn!(consumer_group = %self.group_name, topic = %topic, "subscription removed");
            }
            keep
        });
        changed |= self.subscriptions.len() != before;
        self.last_update_ms = now_ms;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(topic: &str, expression: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            topic: topic.into(),
            sub_string: expression.into(),
            sub_version: version,
            ..Default::default()
        }
    }

    fn group() -> ConsumerGroupInfo {
        ConsumerGroupInfo::new(
            "g",
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset,
            0,
        )
    }

    #[test]
    fn new_topics_count_as_changes_and_repeats_do_not() {
        let mut g = group();
        assert!(g.update_subscriptions(&[sub("T", "*", 1), sub("%RETRY%g", "*", 1)], 10));
        assert!(!g.update_subscriptions(&[sub("T", "*", 1), sub("%RETRY%g", "*", 1)], 20));
        assert_eq!(g.subscribed_topics(), BTreeSet::from(["%RETRY%g".to_owned(), "T".to_owned()]));
        assert_eq!(g.last_update_ms, 20);
    }

    #[test]
    fn an_older_or_equal_sub_version_is_ignored_and_a_newer_one_replaces_silently() {
        let mut g = group();
        g.update_subscriptions(&[sub("T", "a", 100)], 0);
        assert!(!g.update_subscriptions(&[sub("T", "b", 50)], 0));
        assert_eq!(g.subscriptions["T"].sub_string, "a");
        assert!(!g.update_subscriptions(&[sub("T", "c", 100)], 0));
        assert_eq!(g.subscriptions["T"].sub_string, "a");
        // A newer version replaces the expression but is not a change of the topic set.
        assert!(!g.update_subscriptions(&[sub("T", "d", 200)], 0));
        assert_eq!(g.subscriptions["T"].sub_string, "d");
        assert_eq!(g.subscriptions["T"].sub_version, 200);
    }

    #[test]
    fn topics_no_longer_subscribed_are_removed_retry_topics_too() {
        let mut g = group();
        g.update_subscriptions(&[sub("A", "*", 1), sub("B", "*", 1), sub("%RETRY%g", "*", 1)], 0);
        assert!(g.update_subscriptions(&[sub("B", "*", 1)], 0));
        assert_eq!(g.subscribed_topics(), BTreeSet::from(["B".to_owned()]));
        assert!(g.update_subscriptions(&[], 0));
        assert!(g.subscriptions.is_empty());
    }

    #[test]
    fn duplicate_topics_in_one_heartbeat_keep_the_newest() {
        let mut g = group();
        assert!(g.update_subscriptions(&[sub("T", "old", 1), sub("T", "new", 2), sub("T", "older", 0)], 0));
        assert_eq!(g.subscriptions["T"].sub_string, "new");
    }
}
