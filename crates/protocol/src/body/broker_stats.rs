//! One broker counter over the last minute, hour and day (VIEW_BROKER_STATS_DATA, 315), which
//! `mqadmin statsAll` reads. Java: `BrokerStatsData`, `BrokerStatsItem`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// A counter's totals over one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    /// What was added per addition (messages per put or pull).
    #[serde(deserialize_with = "lenient::or_default")]
    pub avgpt: f64,
    /// What was added within the window.
    #[serde(deserialize_with = "lenient::int")]
    pub sum: i64,
    /// `sum` per second.
    #[serde(deserialize_with = "lenient::or_default")]
    pub tps: f64,
}

/// The three windows of one counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    /// The last day.
    #[serde(deserialize_with = "lenient::or_default")]
    pub stats_day: BrokerStatsItem,
    /// The last hour.
    #[serde(deserialize_with = "lenient::or_default")]
    pub stats_hour: BrokerStatsItem,
    /// The last minute.
    #[serde(deserialize_with = "lenient::or_default")]
    pub stats_minute: BrokerStatsItem,
}

impl JsonBody for BrokerStatsData {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        let item = |sum, tps, avgpt| BrokerStatsItem { avgpt, sum, tps };
        let data = BrokerStatsData {
            stats_day: item(86_400, 1.0, 2.0),
            stats_hour: item(3_600, 1.0, 2.0),
            stats_minute: item(90, 1.5, 3.0),
        };
        let golden = concat!(
            r#"{"statsDay":{"avgpt":2.0,"sum":86400,"tps":1.0},"statsHour":{"avgpt":2.0,"sum":3600,"tps":1.0},"#,
            r#""statsMinute":{"avgpt":3.0,"sum":90,"tps":1.5}}"#
        );
        assert_eq!(String::from_utf8(data.encode()).unwrap(), golden);
        assert_eq!(BrokerStatsData::decode(golden.as_bytes()).unwrap(), data);
    }
}
