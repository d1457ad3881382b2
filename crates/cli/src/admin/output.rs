//! Output helpers: aligned tables like mqadmin's, JSON printing, time formatting.

use ferromq_client::admin::{json_to_string_pretty, JsonValue};

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
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:03}", rem / 3600, rem % 3600 / 60, rem % 60, ms.rem_euclid(1000))
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_millis_in_utc() {
        assert_eq!(format_ms(0), "-");
        assert_eq!(format_ms(1_700_000_000_123), "2023-11-14 22:13:20,123");
    }
}
