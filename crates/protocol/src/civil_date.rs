//! Proleptic Gregorian dates from and to day counts since 1970-01-01, without a time-zone
//! database: what RocketMQ's UTC-named files (IndexFile names), UNIQ_KEY month starts and the
//! admin tool's timestamps need. Howard Hinnant's `civil_from_days` / `days_from_civil`.

/// Milliseconds in a day.
pub const MS_PER_DAY: i64 = 86_400_000;

/// (year, month 1..=12, day 1..=31) of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    // Shift the epoch to 0000-03-01 so a leap day ends its 400-year era's year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153; // 0 = March
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Day count since 1970-01-01 of (year, month 1..=12, day 1..=31).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_512), (2026, 2, 28));
        assert_eq!(days_from_civil(2026, 11, 30), 20_787);
        assert_eq!(days_from_civil(1900, 3, 1), -25_508);
    }

    #[test]
    fn round_trips_over_four_centuries_either_side_of_the_epoch() {
        let mut previous = civil_from_days(-146_098);
        for days in -146_097..=146_097 {
            let date = civil_from_days(days);
            assert_eq!(days_from_civil(date.0, date.1, date.2), days, "{date:?}");
            assert!(date > previous, "{date:?} after {previous:?}");
            previous = date;
        }
    }
}
