//! The records POP keeps in the revive topic `rmq_sys_REVIVE_LOG_<cluster>`: a checkpoint
//! (tag `ck`) per queue per pop, an ack (tag `ack`) per acknowledged message, a batch ack
//! (tag `bAck`) per BATCH_ACK_MESSAGE entry. Each carries TIMER_DELIVER_MS, so the timer
//! wheel holds it until its deadline: a checkpoint appears in its revive queue one second
//! before its messages are due back, an ack at the deadline. Java: `PopMessageProcessor#
//! buildCkMsg`, `AckMessageProcessor`, `PopAckConstants`.

use crate::pop::pop_metrics::ReviveKind;
use ferromq_protocol::body::{AckMsg, JsonBody, PopCheckPoint};
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_store::PutMessageStatus;

use crate::broker::Broker;
use crate::metadata::revive_topic;

/// Tag of a checkpoint record.
pub(crate) const CK_TAG: &str = "ck";
/// Tag of an ack record.
pub(crate) const ACK_TAG: &str = "ack";
/// Tag of a batch ack record.
pub(crate) const BATCH_ACK_TAG: &str = "bAck";
/// A checkpoint is delivered to its revive queue this long before its deadline, so its
/// acks (delivered at the deadline) find it there (Java: `ackTimeInterval`).
pub(crate) const ACK_TIME_INTERVAL_MS: i64 = 1_000;
/// The group whose offsets in the revive topic are the revive progress.
pub(crate) const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";

/// Why a revive record was not stored.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RecordNotStored(pub(crate) String);

impl Broker {
    /// The revive topic of this broker's cluster.
    pub(crate) fn revive_topic(&self) -> String {
        revive_topic(&self.config.broker_cluster_name)
    }

    /// Stores a checkpoint in revive queue `revive_qid`. Returns once it is stored (and
    /// flushed where the store flushes synchronously), so a pop is answered only with messages
    /// whose checkpoint survives a crash.
    pub(crate) async fn put_checkpoint(&self, ck: &PopCheckPoint, revive_qid: i32) -> Result<(), RecordNotStored> {
        let uniq = format!(
            "{}@{}@{}@{}@{}@{}@{CK_TAG}",
            ck.topic.as_deref().unwrap_or_default(),
            ck.queue_id,
            ck.start_offset,
            ck.cid.as_deref().unwrap_or_default(),
            ck.pop_time,
            ck.broker_name.as_deref().unwrap_or_default()
        );
        let deliver_ms = ck.revive_time() - ACK_TIME_INTERVAL_MS;
        self.put_revive_record(ck.to_json(), CK_TAG, uniq, deliver_ms, revive_qid).await
    }

    /// Stores an ack (or, with `ack_offset_list`, a batch ack) in revive queue `revive_qid`,
    /// due at `deliver_ms` (the pop time plus the invisible time of the acknowledged pop).
    pub(crate) async fn put_ack(&self, ack: &AckMsg, revive_qid: i32, deliver_ms: i64) -> Result<(), RecordNotStored> {
        let tag = if ack.ack_offset_list.is_some() { BATCH_ACK_TAG } else { ACK_TAG };
        // Java 5.3.3 sets the batch form of the key and then overwrites it with the single
        // form (both puts use one property): a batch ack's key names offset -1 and `ack`.
        let uniq = format!(
            "{}@{}@{}@{}@{}@{}@{ACK_TAG}",
            ack.topic.as_deref().unwrap_or_default(),
            ack.queue_id,
            ack.ack_offset,
            ack.consumer_group.as_deref().unwrap_or_default(),
            ack.pop_time,
            ack.broker_name.as_deref().unwrap_or_default()
        );
        self.put_revive_record(ack.encode(), tag, uniq, deliver_ms, revive_qid).await
    }

    async fn put_revive_record(
        &self,
        body: Vec<u8>,
        tag: &str,
        uniq_key: String,
        deliver_ms: i64,
        revive_qid: i32,
    ) -> Result<(), RecordNotStored> {
        let mut topic = self.revive_topic();
        let mut queue_id = revive_qid;
        let mut props = MessageProperties::new();
        props.insert(keys::TAGS, tag);
        props.insert(keys::UNIQ_KEY, uniq_key);
        props.insert(keys::TIMER_DELIVER_MS, deliver_ms.to_string());
        self.route_to_wheel_or_level(&mut topic, &mut queue_id, &mut props)
            .map_err(|(_, remark)| RecordNotStored(format!("{tag} record refused by the timer: {remark}")))?;
        let msg = StoredMessage {
            topic,
            queue_id,
            body: body.into(),
            properties: props.encode(),
            born_timestamp_ms: crate::broker::now_ms(),
            born_host: self.store_host,
            store_host: self.store_host,
            ..StoredMessage::default()
        };
        let result = self.store.put_message(msg).await;
        let kind = if tag == CK_TAG { ReviveKind::Ck } else { ReviveKind::Ack };
        self.pop.metrics.revive_in(kind, revive_qid, result.status.java_name());
        match result.status {
            PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => Ok(()),
            status => Err(RecordNotStored(format!(
                "{tag} record not stored: {}",
                result.remark.unwrap_or_else(|| format!("{status:?}"))
            ))),
        }
    }
}
