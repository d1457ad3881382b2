//! Generator of client unique message ids, the `UNIQ_KEY` property that users see as the msgId
//! (fact sheet 3.5). Java: `MessageClientIDSetter`.
//!
//! Layout before hex: client IP (4 or 16 bytes), pid as `int16`, a per-process random `int32`,
//! milliseconds since the start of the current month as `int32`, and an `int16` counter:
//! 32 hex characters for IPv4, 56 for IPv6. Nobody parses the parts back except for display,
//! so only uniqueness matters.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::civil_date::{civil_from_days, MS_PER_DAY};
use crate::message::hex::push_upper_hex;

/// Makes `UNIQ_KEY` values. Thread-safe: share one per process (or per producer).
///
/// Differences from Java, none of which matter for uniqueness: the month start is computed in
/// UTC rather than the local time zone, and the random part comes from the clock, the pid and a
/// stack address instead of a class-loader hash.
#[derive(Debug)]
pub struct UniqIdGenerator {
    /// Hex of IP, pid and random part: the same in every id.
    prefix: String,
    counter: AtomicU16,
}

impl UniqIdGenerator {
    /// A generator for a client at `client_ip`, with this process's id and a fresh random part.
    pub fn new(client_ip: IpAddr) -> Self {
        // Java keeps the low 16 bits of the pid.
        Self::with_parts(client_ip, std::process::id() as i16, process_salt())
    }

    /// A generator for a client whose IP is unknown: like Java, the low four bytes of the
    /// current time in milliseconds stand in for the address.
    pub fn without_ip() -> Self {
        let fake = (now_ms() as u32).to_be_bytes();
        Self::new(IpAddr::from(fake))
    }

    /// A generator with every fixed part given, for tests and reproducible tools.
    pub fn with_parts(client_ip: IpAddr, pid: i16, random: i32) -> Self {
        let mut prefix = String::with_capacity(2 * (16 + 2 + 4));
        match client_ip {
            IpAddr::V4(ip) => push_upper_hex(&mut prefix, &ip.octets()),
            IpAddr::V6(ip) => push_upper_hex(&mut prefix, &ip.octets()),
        }
        push_upper_hex(&mut prefix, &pid.to_be_bytes());
        push_upper_hex(&mut prefix, &random.to_be_bytes());
        UniqIdGenerator { prefix, counter: AtomicU16::new(0) }
    }

    /// The next id, stamped with the current time.
    pub fn next_id(&self) -> String {
        self.next_id_at(now_ms())
    }

    /// The next id, stamped as if the time were `now_ms` (milliseconds since the Unix epoch).
    pub fn next_id_at(&self, now_ms: i64) -> String {
        // Months are up to 31 days, more than an i32 of milliseconds holds: like Java, let the
        // delta wrap. Distinct instants within a month still give distinct values.
        let delta = now_ms.wrapping_sub(month_start_ms(now_ms)) as i32;
        // The counter wraps at 65536, as Java's `(short)` of an AtomicInteger does.
        let count = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(self.prefix.len() + 12);
        id.push_str(&self.prefix);
        push_upper_hex(&mut id, &delta.to_be_bytes());
        push_upper_hex(&mut id, &count.to_be_bytes());
        id
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

/// Start of the UTC month containing `ms`, in milliseconds since the Unix epoch.
fn month_start_ms(ms: i64) -> i64 {
    let days = ms.div_euclid(MS_PER_DAY);
    (days - (civil_from_days(days).2 - 1)) * MS_PER_DAY
}

/// A per-process value that differs between processes started at the same time on the same
/// host: clock nanoseconds, pid and a stack address (which varies under ASLR), well mixed.
fn process_salt() -> i32 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let probe = 0u8;
    let stack_addr = std::ptr::addr_of!(probe) as usize as u64;
    let mixed = splitmix64(nanos ^ (u64::from(std::process::id()) << 32) ^ stack_addr);
    (mixed >> 32) as i32
}

/// The SplitMix64 finaliser: spreads every input bit over the output.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    #[test]
    fn month_start_handles_leap_days_and_year_ends() {
        // 2024-02-29T12:00:00Z -> 2024-02-01T00:00:00Z.
        assert_eq!(month_start_ms(1_709_208_000_000), 1_706_745_600_000);
        // 2023-12-31T23:59:59.999Z -> 2023-12-01T00:00:00Z.
        assert_eq!(month_start_ms(1_704_067_199_999), 1_701_388_800_000);
        // The epoch itself, and a day before it (1969-12-31 -> 1969-12-01).
        assert_eq!(month_start_ms(0), 0);
        assert_eq!(month_start_ms(-1), -31 * MS_PER_DAY);
    }

    #[test]
    fn delta_wraps_like_java_int_cast_late_in_the_month() {
        let gen = UniqIdGenerator::with_parts(Ipv4Addr::LOCALHOST.into(), 0, 0);
        // 28.5 days into February 2024: 2_462_400_000 ms, which wraps to -1_832_567_296.
        let id = gen.next_id_at(1_709_208_000_000);
        assert_eq!(&id[20..28], "92C53E00");
        assert_eq!(i32::from_str_radix("92C53E00", 16).ok(), None, "does not fit positive i32");
        assert_eq!(u32::from_str_radix("92C53E00", 16).unwrap() as i32, -1_832_567_296);
    }

    #[test]
    fn ids_are_unique_across_threads() {
        let gen = Arc::new(UniqIdGenerator::new(Ipv4Addr::new(10, 1, 2, 3).into()));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let gen = Arc::clone(&gen);
                std::thread::spawn(move || (0..1000).map(|_| gen.next_id_at(1_000)).collect::<Vec<_>>())
            })
            .collect();
        let mut seen = HashSet::new();
        for handle in handles {
            for id in handle.join().unwrap() {
                assert!(seen.insert(id));
            }
        }
        assert_eq!(seen.len(), 4000);
        assert_eq!(UniqIdGenerator::without_ip().next_id().len(), 32);
    }
}
