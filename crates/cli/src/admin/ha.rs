//! `haStatus`: the replication state of a broker (-b) or of every master of a cluster (-c),
//! from GET_BROKER_HA_STATUS, printed as mqadmin prints it; `-i` repeats every that many
//! seconds until interrupted. Java: `tools/command/ha/HAStatusSubCommand`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use ferromq_client::admin::{json_from_str, JsonValue};
use ferromq_protocol::body::{HaRuntimeInfo, JsonBody};

use crate::admin::output::{human_time_ms, print_json};
use crate::admin::{target_brokers, Ctx};

#[derive(Debug, clap::Args)]
pub(crate) struct HaStatusArgs {
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The broker to ask.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Print again every this many seconds, until interrupted.
    #[arg(short = 'i', long = "interval")]
    interval: Option<u64>,
}

pub(crate) async fn ha_status(ctx: &Ctx, a: HaStatusArgs) -> anyhow::Result<()> {
    let Some(every) = a.interval else {
        return print_round(ctx, &a).await;
    };
    // Java waits `interval` seconds after each round, forever.
    loop {
        print_round(ctx, &a).await?;
        tokio::time::sleep(Duration::from_secs(every)).await;
    }
}

/// One round: every target broker asked once, in order.
async fn print_round(ctx: &Ctx, a: &HaStatusArgs) -> anyhow::Result<()> {
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    let mut all = BTreeMap::new();
    for (_, addr) in &targets {
        let info = ctx.client.broker_ha_status(addr).await?;
        if ctx.json {
            all.insert(addr.clone(), to_json(&info)?);
        } else {
            print!("{}", status_text(addr, &info));
        }
    }
    if ctx.json {
        print_json(&JsonValue::Object(all.into_iter().collect()))?;
    }
    Ok(())
}

/// The body as a JSON value with Java's names.
fn to_json(info: &HaRuntimeInfo) -> anyhow::Result<JsonValue> {
    Ok(json_from_str(&String::from_utf8_lossy(&info.encode()))?)
}

/// What mqadmin prints for one broker: a master's summary and one line per slave
/// connection, or a slave's view of its master. Times are printed in UTC (mqadmin uses the
/// JVM's time zone).
fn status_text(broker_addr: &str, info: &HaRuntimeInfo) -> String {
    let mut out = String::new();
    if info.master {
        let _ = write!(
            out,
            "\n#MasterAddr\t{broker_addr}\n#MasterCommitLogMaxOffset\t{}\n#SlaveNum\t{}\n#InSyncSlaveNum\t{}\n",
            info.master_commit_log_max_offset,
            info.ha_connection_info.len(),
            info.in_sync_slave_nums
        );
        let _ = writeln!(
            out,
            "{:<32}  {:<16} {:>16} {:>16} {:>16} {:>16}",
            "#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere"
        );
        for c in &info.ha_connection_info {
            let _ = writeln!(
                out,
                "{:<32}  {:<16} {:>16} {:>16} {:>16} {:>16}",
                c.addr,
                c.slave_ack_offset,
                c.diff,
                kib(c.transferred_byte_in_second),
                if c.in_sync { "OK" } else { "Fall Behind" },
                c.transfer_from_where
            );
        }
    } else {
        let c = &info.ha_client_runtime_info;
        // Java prints a missing master address as `null`.
        let _ = write!(
            out,
            "\n#MasterAddr\t{}\n#CommitLogMaxOffset\t{}\n#TransferSpeed(KB/s)\t{}\n#LastReadTime\t{}\n\
             #LastWriteTime\t{}\n#MasterFlushOffset\t{}\n",
            c.master_addr.as_deref().unwrap_or("null"),
            c.max_offset,
            kib(c.transferred_byte_in_second),
            human_time_ms(c.last_read_timestamp),
            human_time_ms(c.last_write_timestamp),
            c.master_flush_offset
        );
    }
    out
}

/// Bytes as KiB with two decimals, rounded half up as Java's `%.2f` rounds (`bytes / 1024.0`
/// is exact in a double, so this is the same number).
fn kib(bytes: i64) -> String {
    let hundredths = (i128::from(bytes) * 100 * 2 + 1024).div_euclid(2048);
    let sign = if hundredths < 0 { "-" } else { "" };
    let abs = hundredths.abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master with one slave in sync and one behind, as a Java 5 master answers.
    const MASTER_BODY: &str = r#"{"haClientRuntimeInfo":{"activated":false,"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,"transferredByteInSecond":0},"haConnectionInfo":[{"addr":"127.0.0.1:53210","diff":0,"inSync":true,"slaveAckOffset":4096,"transferFromWhere":4096,"transferredByteInSecond":1536},{"addr":"127.0.0.1:53222","diff":1048576,"inSync":false,"slaveAckOffset":1024,"transferFromWhere":1024,"transferredByteInSecond":128}],"inSyncSlaveNums":1,"master":true,"masterCommitLogMaxOffset":4096}"#;

    /// A slave following its master.
    const SLAVE_BODY: &str = r#"{"haClientRuntimeInfo":{"lastReadTimestamp":1700000000123,"lastWriteTimestamp":1700000000456,"masterAddr":"127.0.0.1:10912","masterFlushOffset":0,"maxOffset":4096,"transferredByteInSecond":2048},"haConnectionInfo":[],"inSyncSlaveNums":0,"master":false,"masterCommitLogMaxOffset":0}"#;

    #[test]
    fn master_status_matches_mqadmin_layout() {
        let info = HaRuntimeInfo::decode(MASTER_BODY.as_bytes()).unwrap();
        let expected = "\n#MasterAddr\t127.0.0.1:10911\n#MasterCommitLogMaxOffset\t4096\n#SlaveNum\t2\n#InSyncSlaveNum\t1\n\
#SlaveAddr                        #SlaveAckOffset             #Diff #TransferSpeed(KB/s)          #Status #TransferFromWhere\n\
127.0.0.1:53210                   4096                            0             1.50               OK             4096\n\
127.0.0.1:53222                   1024                      1048576             0.13      Fall Behind             1024\n";
        assert_eq!(status_text("127.0.0.1:10911", &info), expected);
    }

    #[test]
    fn slave_status_matches_mqadmin_layout() {
        let info = HaRuntimeInfo::decode(SLAVE_BODY.as_bytes()).unwrap();
        let expected = "\n#MasterAddr\t127.0.0.1:10912\n#CommitLogMaxOffset\t4096\n#TransferSpeed(KB/s)\t2.00\n\
#LastReadTime\t2023-11-14 22:13:20,123\n#LastWriteTime\t2023-11-14 22:13:20,456\n#MasterFlushOffset\t0\n";
        assert_eq!(status_text("127.0.0.1:10921", &info), expected);
        let unknown = HaRuntimeInfo::default();
        assert!(status_text("a:1", &unknown).starts_with("\n#MasterAddr\tnull\n"), "Java prints a null master as null");
        assert!(status_text("a:1", &unknown).contains("#LastReadTime\t1970-01-01 00:00:00,000\n"));
    }

    #[test]
    fn speed_rounds_half_up_like_java() {
        assert_eq!(kib(0), "0.00");
        assert_eq!(kib(128), "0.13", "0.125 rounds up");
        assert_eq!(kib(5), "0.00");
        assert_eq!(kib(6), "0.01");
        assert_eq!(kib(1536), "1.50");
        assert_eq!(kib(10 * 1024 * 1024), "10240.00");
    }

    #[test]
    fn json_keeps_java_names() {
        let info = HaRuntimeInfo::decode(SLAVE_BODY.as_bytes()).unwrap();
        let value = to_json(&info).unwrap();
        assert_eq!(value["haClientRuntimeInfo"]["masterAddr"], "127.0.0.1:10912");
        assert_eq!(value["master"], false);
        assert_eq!(value["haClientRuntimeInfo"]["maxOffset"], 4096);
    }
}
