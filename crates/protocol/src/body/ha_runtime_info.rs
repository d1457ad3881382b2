//! `HARuntimeInfo`: the replication state a broker reports in the body of
//! GET_BROKER_HA_STATUS (907), field for field with Java's JSON names. Fields are declared
//! in alphabetical key order, so the output lists keys as fastjson does. Java:
//! `org.apache.rocketmq.remoting.protocol.body.HARuntimeInfo`, built by
//! `DefaultHAService#getRuntimeInfo`. It lives here rather than in the replication crate so
//! that admin tools decode it without depending on a server crate.
//!
//! Java's `HAClientRuntimeInfo` also has `isActivated` (JSON `activated`), which nothing in
//! Java ever sets; it is not modelled, and reading ignores it.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// The HA state of one broker: on a master its slave connections, on a slave its client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaRuntimeInfo {
    /// The slave side (default values on a master).
    #[serde(deserialize_with = "lenient::or_default")]
    pub ha_client_runtime_info: HaClientRuntimeInfo,
    /// One entry per connected slave (empty on a slave).
    #[serde(deserialize_with = "lenient::or_default")]
    pub ha_connection_info: Vec<HaConnectionRuntimeInfo>,
    /// Connected slaves within `haMaxGapNotInSync` of the master.
    pub in_sync_slave_nums: i32,
    /// Whether this broker is a master.
    pub master: bool,
    /// The master's CommitLog end offset.
    pub master_commit_log_max_offset: i64,
}

impl JsonBody for HaRuntimeInfo {}

/// A master's view of one slave connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaConnectionRuntimeInfo {
    /// The slave's address, `ip:port`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub addr: String,
    /// Bytes the slave is behind: master end offset minus its acknowledged offset.
    pub diff: i64,
    /// Whether `diff` is below `haMaxGapNotInSync`.
    pub in_sync: bool,
    /// The slave's last reported offset (-1 before its first report).
    pub slave_ack_offset: i64,
    /// Where the master ships from next (-1 before the slave's first report).
    pub transfer_from_where: i64,
    /// Bytes shipped to this slave in the last full second.
    pub transferred_byte_in_second: i64,
}

/// A slave's view of its master.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaClientRuntimeInfo {
    /// When the slave last read from its master (ms since the epoch).
    pub last_read_timestamp: i64,
    /// When the slave last reported its offset (ms since the epoch).
    pub last_write_timestamp: i64,
    /// The master's HA address, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_addr: Option<String>,
    /// The master's flushed offset, when known (0 in the classic protocol, as in Java).
    pub master_flush_offset: i64,
    /// The slave's CommitLog end offset.
    pub max_offset: i64,
    /// Bytes received in the last full second.
    pub transferred_byte_in_second: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_uses_java_names_in_fastjson_order() {
        let info = HaRuntimeInfo {
            ha_connection_info: vec![HaConnectionRuntimeInfo {
                addr: "127.0.0.1:50000".into(),
                diff: 10,
                in_sync: true,
                slave_ack_offset: 90,
                transfer_from_where: 100,
                transferred_byte_in_second: 5,
            }],
            in_sync_slave_nums: 1,
            master: true,
            master_commit_log_max_offset: 100,
            ..HaRuntimeInfo::default()
        };
        let json = String::from_utf8(info.encode()).unwrap();
        assert_eq!(
            json,
            r#"{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,"transferredByteInSecond":0},"haConnectionInfo":[{"addr":"127.0.0.1:50000","diff":10,"inSync":true,"slaveAckOffset":90,"transferFromWhere":100,"transferredByteInSecond":5}],"inSyncSlaveNums":1,"master":true,"masterCommitLogMaxOffset":100}"#
        );
        assert_eq!(HaRuntimeInfo::decode(json.as_bytes()).unwrap(), info);
    }

    /// What a Java 5 slave answers (fastjson leaves out null fields and writes
    /// `isActivated` as `activated`).
    #[test]
    fn reads_a_java_slave_answer() {
        let java = br#"{"haClientRuntimeInfo":{"activated":false,"lastReadTimestamp":1700000000123,"lastWriteTimestamp":1700000000456,"masterAddr":"10.0.0.1:10912","masterFlushOffset":0,"maxOffset":2048,"transferredByteInSecond":1536},"haConnectionInfo":[],"inSyncSlaveNums":0,"master":false,"masterCommitLogMaxOffset":0}"#;
        let info = HaRuntimeInfo::decode(java).unwrap();
        assert!(!info.master);
        assert_eq!(info.ha_client_runtime_info.master_addr.as_deref(), Some("10.0.0.1:10912"));
        assert_eq!(info.ha_client_runtime_info.max_offset, 2048);
        assert_eq!(info.ha_client_runtime_info.transferred_byte_in_second, 1536);
        let nulls = br#"{"haClientRuntimeInfo":null,"haConnectionInfo":null,"master":true}"#;
        assert_eq!(HaRuntimeInfo::decode(nulls).unwrap(), HaRuntimeInfo { master: true, ..HaRuntimeInfo::default() });
    }
}
