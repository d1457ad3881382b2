//! Output helpers: aligned tables like mqadmin's, JSON printing, time formatting.

use ferromq_client::admin::{json_to_string_pretty, JsonValue};
use ferromq_protocol::civil_date::{civil_from_days, days_from_civil};

/// A table printed with left-aligned, padded columns.
pub(crate) struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(headers: &[&'static str]) -> Self {
        Table { headers: headers.to_vec(), rows: Vec::new() }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn print(&self) {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let text: Vec<String> =
                cells.zip(&widths).map(|(cell, width)| format!("{cell:<width$}", width = *width)).collect();
            println!("{}", text.join("  ").trim_end());
        };
        line(&mut self.headers.iter().copied());
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str));
        }
    }
}

/// One server's settings as mqadmin prints them (getBrokerConfig, getNamesrvConfig): a
/// `====addr====` line, then `key  =  value` lines.
pub(crate) fn print_settings(addr: &str, entries: &[(String, String)]) {
    println!("============{addr}============");
    for (k, v) in entries {
        println!("{k:<50}=  {v}");
    }
}

/// Prints `value` as pretty JSON.
pub(crate) fn print_json(value: &JsonValue) -> anyhow::Result<()> {
    println!("{}", json_to_string_pretty(value)?);
    Ok(())
}

/// Milliseconds since the epoch as `yyyy-MM-dd HH:mm:ss,SSS` (UTC); `0` prints as `-`.
pub(crate) fn format_ms(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_owned();
    }
    human_time_ms(ms)
}

/// Milliseconds since the epoch as `yyyy-MM-dd HH:mm:ss,SSS` (UTC), whatever the value.
/// Java: `UtilAll.timeMillisToHumanString2` (in the JVM's time zone).
pub(crate) fn human_time_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:03}", rem / 3600, rem % 3600 / 60, rem % 60, ms.rem_euclid(1000))
}

/// A `-s` timestamp of resetOffsetByTime: milliseconds since the epoch, or RocketMQ's
/// `yyyy-MM-dd#HH:mm:ss:SSS` read as UTC (Java's `UtilAll.parseDate` uses the JVM's local time
/// zone; FerroMQ does not guess one). `None` if it is neither.
pub(crate) fn parse_timestamp(text: &str) -> Option<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Some(ms);
    }
    let (date, time) = text.split_once('#')?;
    let number = |s: &str, len: usize| -> Option<i64> {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    let mut d = date.split('-');
    let (y, m, day) = (number(d.next()?, 4)?, number(d.next()?, 2)?, number(d.next()?, 2)?);
    let mut t = time.split(':');
    let (h, min, sec, ms) =
        (number(t.next()?, 2)?, number(t.next()?, 2)?, number(t.next()?, 2)?, number(t.next()?, 3)?);
    if d.next().is_some() || t.next().is_some() {
        return None;
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&m)
        || day < 1
        || day > month_days[usize::try_from(m - 1).ok()?]
        || h > 23
        || min > 59
        || sec > 59
    {
        return None;
    }
    let days = days_from_civil(y, m, day);
    Some(((days * 86_400 + h * 3600 + min * 60 + sec) * 1000) + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_millis_in_utc() {
        assert_eq!(format_ms(0), "-");
        assert_eq!(format_ms(1_700_000_000_123), "2023-11-14 22:13:20,123");
    }

    #[test]
    fn parses_rocketmq_timestamps_as_utc() {
        assert_eq!(parse_timestamp("1700000000123"), Some(1_700_000_000_123));
        assert_eq!(parse_timestamp("2023-11-14#22:13:20:123"), Some(1_700_000_000_123));
        assert_eq!(parse_timestamp("1970-01-01#00:00:00:000"), Some(0));
        assert_eq!(parse_timestamp("2024-02-29#23:59:59:999"), Some(1_709_251_199_999));
        assert_eq!(parse_timestamp("2023-02-29#00:00:00:000"), None);
        assert_eq!(parse_timestamp("2023-11-14 22:13:20:123"), None);
        assert_eq!(parse_timestamp("2023-11-14#22:13:20"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
