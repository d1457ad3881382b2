//! One round of the broker's registration with the name servers: the whole topic table, the
//! topics changed since the last round (REGISTER_TOPIC_IN_NAMESRV each, Java's
//! `registerSingleTopicAll`), or the periodic one, which with `forceRegister=false` first asks
//! each name server for the data version it holds (QUERY_DATA_VERSION, which also keeps the
//! broker alive there) and re-sends the table only where it differs. Java:
//! `BrokerController#registerBrokerAll` and `#needRegister`.
//!
//! A single-topic registration goes only to name servers whose last full registration
//! succeeded: a name server ignores one for a broker it does not know. Single-topic
//! registrations leave the name server's data version behind the broker's, so the next periodic
//! round sends the whole table again, which also drops what a name server may have missed.

use ferromq_protocol::body::{perm, DataVersion, JsonBody, QueueData, TopicRouteData};
use ferromq_protocol::header::{
    QueryDataVersionRequestHeader, QueryDataVersionResponseHeader, RegisterTopicRequestHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tracing::{debug, warn};

use crate::broker::{Broker, NAMESRV_TIMEOUT};
use crate::registration_queue::RegistrationWork;

impl Broker {
    /// Runs one round; returns whether every name server took what it was sent. `periodic`:
    /// the round is the period's, not one asked for.
    pub(crate) async fn register_round(&self, work: Option<RegistrationWork>, periodic: bool) -> bool {
        match (work, periodic) {
            (Some(RegistrationWork::Full), _) => self.register_all().await,
            // A changed topic bumped the data version, so the periodic round covers it.
            (_, true) => self.register_periodic().await,
            (Some(RegistrationWork::Topics(topics)), false) => self.register_topics(&topics).await,
            (None, false) => true,
        }
    }

    /// The period's registration: the whole table to every name server, or with
    /// `forceRegister=false` only to those whose data version differs.
    async fn register_periodic(&self) -> bool {
        // A slave learns its master from the registration's answer.
        if self.config.force_register || self.is_slave() {
            return self.register_all().await;
        }
        if self.role().fenced {
            return true;
        }
        let version = self.topics().data_version();
        let mut all = true;
        for addr in &self.config.namesrv_addrs() {
            match self.query_data_version(addr, &version).await {
                Some(false) => debug!(namesrv = %addr, "topic table unchanged there; registration skipped"),
                Some(true) | None => all &= self.register_with(addr).await,
            }
        }
        all
    }

    /// Registers `topics` (changed since the last round) with every name server: alone where
    /// the name server knows this broker, in a full registration elsewhere.
    async fn register_topics(&self, topics: &[String]) -> bool {
        if self.role().fenced {
            return true;
        }
        if self.is_slave() {
            // A name server takes a slave's topics from its full registration only.
            return self.register_all().await;
        }
        // A static topic's queue mapping rides on the full registration only.
        let static_topic = topics.iter().any(|t| self.mappings().get(t).is_some());
        let mut all = true;
        for addr in &self.config.namesrv_addrs() {
            if static_topic || !self.is_namesrv_in_sync(addr) {
                all &= self.register_with(addr).await;
                continue;
            }
            for topic in topics {
                if !self.register_topic_with(addr, topic).await {
                    self.set_namesrv_in_sync(addr, false);
                    all = false;
                    break;
                }
            }
        }
        all
    }

    /// REGISTER_TOPIC_IN_NAMESRV for one topic (a deleted one is left to the full
    /// registration). The broker's permission is masked in, as in the full registration.
    async fn register_topic_with(&self, addr: &str, topic: &str) -> bool {
        let Some(config) = self.topics().select(topic) else { return true };
        let queue_data = QueueData {
            broker_name: self.config.broker_name.clone(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: masked_perm(config.perm, self.permission()),
            topic_sys_flag: config.topic_sys_flag,
        };
        let body = TopicRouteData { queue_datas: vec![queue_data], ..TopicRouteData::default() }.encode();
        let request = RemotingCommand::request(request_code::REGISTER_TOPIC_IN_NAMESRV)
            .with_header(&RegisterTopicRequestHeader { topic: topic.to_owned() })
            .with_body(body);
        self.call_namesrv(addr, request, "topic registration").await.is_some()
    }

    /// Sends `request` to the name server at `addr` and returns its SUCCESS answer; a refusal
    /// or a failure is logged as `what` refused / failed and gives `None`.
    pub(crate) async fn call_namesrv(
        &self,
        addr: &str,
        request: RemotingCommand,
        what: &str,
    ) -> Option<RemotingCommand> {
        let code = request.code;
        match self.namesrv.invoke(addr, request, NAMESRV_TIMEOUT).await {
            Ok(r) if r.code == response_code::SUCCESS => Some(r),
            Ok(r) => {
                warn!(namesrv = %addr, request_code = code, code = r.code, remark = ?r.remark, "{what} refused");
                None
            }
            Err(e) => {
                warn!(namesrv = %addr, request_code = code, error = %e, "{what} failed");
                None
            }
        }
    }

    /// Whether the name server at `addr` holds another data version than `version` (`None`: it
    /// could not tell). Java: `BrokerOuterAPI#needRegister`.
    async fn query_data_version(&self, addr: &str, version: &DataVersion) -> Option<bool> {
        let request = RemotingCommand::request(request_code::QUERY_DATA_VERSION)
            .with_header(&QueryDataVersionRequestHeader {
                broker_name: self.config.broker_name.clone(),
                broker_addr: self.config.broker_addr(),
                cluster_name: self.config.broker_cluster_name.clone(),
                broker_id: self.role().broker_id,
            })
            .with_body(version.encode());
        let r = self.call_namesrv(addr, request, "data version query").await?;
        r.decode_header::<QueryDataVersionResponseHeader>().ok().map(|h| h.changed)
    }

    fn is_namesrv_in_sync(&self, addr: &str) -> bool {
        self.namesrv_in_sync.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(addr)
    }

    pub(crate) fn set_namesrv_in_sync(&self, addr: &str, in_sync: bool) {
        let mut set = self.namesrv_in_sync.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if in_sync {
            set.insert(addr.to_owned());
        } else {
            set.remove(addr);
        }
    }
}

/// A topic's perm as registered: with the broker's permission masked in when the broker is not
/// both readable and writable, so clients route around it. Java: `registerBrokerAll` and
/// `registerSingleTopicAll`.
pub(crate) fn masked_perm(topic_perm: i32, broker_permission: i32) -> i32 {
    if perm::is_writeable(broker_permission) && perm::is_readable(broker_permission) {
        topic_perm
    } else {
        topic_perm & broker_permission
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_permission_masks_topic_perm_only_when_restricted() {
        use perm::{PERM_INHERIT, PERM_READ, PERM_WRITE};
        let rw = PERM_READ | PERM_WRITE;
        assert_eq!(masked_perm(rw | PERM_INHERIT, rw), rw | PERM_INHERIT);
        assert_eq!(masked_perm(rw, PERM_READ), PERM_READ);
        assert_eq!(masked_perm(PERM_WRITE, PERM_READ), 0);
    }
}
