//! The bloom filter RocketMQ keeps in consume-queue extension units, and its bit helpers.
//!
//! With `enableCalcFilterBitMap`, the broker evaluates every SQL92 subscription of a topic
//! when a message is dispatched, and for each one that matches sets that subscription's `k`
//! bits in an `m`-bit map stored beside the consume-queue entry. At pull time a message whose
//! map lacks any of the puller's bits cannot match and is skipped without reading the commit
//! log. A subscription's bits are the positions of the string `"<consumerGroup>#<topic>"`.
//!
//! This module owns the arithmetic (Java: `BloomFilter`, `BitsArray`); keeping the maps, and
//! deciding when they are valid for a subscription, is the broker's job.

use crate::error::BloomFilterError;
use crate::murmur3::murmur3_x64_128;

/// Java: `org.apache.rocketmq.filter.util.BloomFilter`: `k` hash functions over `m` bits,
/// sized for an error rate and an expected member count.
///
/// The broker builds one from `maxErrorRateOfBloomFilter` (default 20) and
/// `expectConsumerNumUseFilter` (default 32), which gives `k = 3`, `m = 112`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BloomFilter {
    error_rate_percent: i32,
    expected_n: i32,
    k: i32,
    m: i32,
}

impl BloomFilter {
    /// Sizes a filter for a false-positive rate of `error_rate_percent` % with `expected_n`
    /// members: `k = ceil(log_0.5(f))` and `m = ceil(n * log2(1/f) * log2(e))` rounded up to
    /// whole bytes, computed in the same floating-point steps as Java.
    ///
    /// # Errors
    ///
    /// An error rate outside `1..=99` or an expected count below 1, as Java rejects them.
    pub fn new(error_rate_percent: i32, expected_n: i32) -> Result<BloomFilter, BloomFilterError> {
        if !(1..100).contains(&error_rate_percent) {
            return Err(BloomFilterError::ErrorRateOutOfRange { error_rate_percent });
        }
        if expected_n < 1 {
            return Err(BloomFilterError::ExpectedCountTooSmall { expected_n });
        }
        let log = |base: f64, x: f64| x.ln() / base.ln();
        let error_rate = f64::from(error_rate_percent) / 100.0;
        // Java casts with `(int)`, which saturates like `as`; for rates of 1..=99 `k` is
        // between 1 and 7, so Java's "k < 1" check cannot fire.
        let k = log(0.5, error_rate).ceil() as i32;
        let m = (f64::from(expected_n) * log(2.0, 1.0 / error_rate) * log(2.0, std::f64::consts::E)).ceil() as i32;
        let m = (8.0 * (f64::from(m) / 8.0).ceil()) as i32;
        Ok(BloomFilter { error_rate_percent, expected_n, k, m })
    }

    /// The error rate in percent this filter was sized for.
    pub fn error_rate_percent(&self) -> i32 {
        self.error_rate_percent
    }

    /// The member count this filter was sized for.
    pub fn expected_n(&self) -> i32 {
        self.expected_n
    }

    /// The number of hash functions: positions per member.
    pub fn k(&self) -> i32 {
        self.k
    }

    /// The number of bits in a bitmap.
    pub fn m(&self) -> i32 {
        self.m
    }

    /// The length of a bitmap in bytes (Java: `BitsArray.create(m).byteLength()`).
    pub fn byte_len(&self) -> usize {
        (self.m as usize).div_ceil(8)
    }

    /// The `k` bit positions of `member`, each in `0..m`.
    ///
    /// Java: `BloomFilter#calcBitPositions`: double hashing (Kirsch and Mitzenmacher) on the
    /// low and high halves of Guava's `murmur3_128().hashString(member, UTF_8).asLong()`, in
    /// Java `int` arithmetic, negative sums bit-flipped.
    pub fn positions(&self, member: &str) -> Vec<i32> {
        let (h64, _) = murmur3_x64_128(member.as_bytes(), 0);
        let hash1 = h64 as i32;
        let hash2 = (h64 >> 32) as i32;
        (1..=self.k)
            .map(|i| {
                let combined = hash1.wrapping_add(i.wrapping_mul(hash2));
                let combined = if combined < 0 { !combined } else { combined };
                combined % self.m
            })
            .collect()
    }

    /// The bit positions of a SQL92 subscription: [`positions`](Self::positions) of
    /// `"<consumer_group>#<topic>"` (Java: `ConsumerFilterManager#register`).
    pub fn subscription_positions(&self, consumer_group: &str, topic: &str) -> Vec<i32> {
        self.positions(&format!("{consumer_group}#{topic}"))
    }

    /// Sets the bits at `positions` in `bitmap` (Java: `BloomFilter#hashTo`).
    ///
    /// # Errors
    ///
    /// A bitmap that is not [`byte_len`](Self::byte_len) bytes long, or positions that are not
    /// `k` values in `0..m`; the bitmap is unchanged then.
    pub fn hash_to(&self, bitmap: &mut [u8], positions: &[i32]) -> Result<(), BloomFilterError> {
        if bitmap.len() != self.byte_len() {
            return Err(BloomFilterError::BitmapLength { expected_bytes: self.byte_len(), actual_bytes: bitmap.len() });
        }
        let positions = self.checked(positions).ok_or(BloomFilterError::ForeignPositions)?;
        for position in positions {
            set_bit(bitmap, position);
        }
        Ok(())
    }

    /// Whether every bit at `positions` is set in `bitmap`: `false` means the message cannot
    /// match the subscription those positions belong to.
    ///
    /// Java's pull path (`ExpressionMessageFilter#isMatchedByConsumeQueue`) treats a bitmap
    /// it cannot judge as a possible match, so a bitmap of the wrong length, or positions that
    /// are not `k` values in `0..m`, give `true` here as well.
    pub fn is_hit(&self, bitmap: &[u8], positions: &[i32]) -> bool {
        if bitmap.len() * 8 != self.m as usize {
            return true;
        }
        match self.checked(positions) {
            Some(mut positions) => positions.all(|position| test_bit(bitmap, position)),
            None => true,
        }
    }

    /// The positions as indexes, if they are `k` values in `0..m`.
    fn checked<'p>(&self, positions: &'p [i32]) -> Option<impl Iterator<Item = usize> + 'p> {
        let m = self.m;
        let valid = positions.len() == self.k as usize && positions.iter().all(|&p| (0..m).contains(&p));
        valid.then(|| positions.iter().map(|&p| p as usize))
    }
}

/// Sets bit `position` of a bitmap: bit `position % 8` of byte `position / 8` (Java:
/// `BitsArray#setBit`).
///
/// # Panics
///
/// If `position / 8` is not an index of `bitmap`.
pub fn set_bit(bitmap: &mut [u8], position: usize) {
    bitmap[position / 8] |= 1 << (position % 8);
}

/// Whether bit `position` of a bitmap is set (Java: `BitsArray#getBit`).
///
/// # Panics
///
/// If `position / 8` is not an index of `bitmap`.
pub fn test_bit(bitmap: &[u8], position: usize) -> bool {
    bitmap[position / 8] & (1 << (position % 8)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_defaults_give_three_functions_over_112_bits() {
        let filter = BloomFilter::new(20, 32).unwrap();
        assert_eq!((filter.k(), filter.m(), filter.byte_len()), (3, 112, 14));
    }

    /// Sizes of the filters built in Java's `BloomFilterTest`, checked against Java.
    #[test]
    fn sizes_match_java() {
        let size = |f, n| {
            let filter = BloomFilter::new(f, n).unwrap();
            (filter.k(), filter.m())
        };
        assert_eq!(size(10, 20), (4, 96));
        assert_eq!(size(12, 20), (4, 96));
        assert_eq!(size(10, 30), (4, 144));
        assert_eq!(size(1, 300), (7, 2880));
        assert_eq!(size(99, 1), (1, 8));
    }

    #[test]
    fn rejects_what_java_rejects() {
        assert_eq!(BloomFilter::new(0, 32), Err(BloomFilterError::ErrorRateOutOfRange { error_rate_percent: 0 }));
        assert_eq!(BloomFilter::new(100, 32), Err(BloomFilterError::ErrorRateOutOfRange { error_rate_percent: 100 }));
        assert_eq!(BloomFilter::new(20, 0), Err(BloomFilterError::ExpectedCountTooSmall { expected_n: 0 }));
    }

    /// Worked from the Guava known answer for "hell" (h1 = 0x629942693e10f867): hash1 =
    /// 0x3e10f867, hash2 = 0x62994269; hash1 + hash2 overflows to -1599456560, flipped to
    /// 1599456559, which is 15 mod 112; the next two sums are 54754617 (57) and
    /// 1708965794 (18).
    #[test]
    fn positions_follow_from_the_hash() {
        let filter = BloomFilter::new(20, 32).unwrap();
        assert_eq!(filter.positions("hell"), [15, 57, 18]);
    }

    /// Positions of the members in Java's `BloomFilterTest`, as Java computes them.
    #[test]
    fn positions_match_java() {
        let filter = BloomFilter::new(10, 20).unwrap();
        assert_eq!(filter.positions("CID_abc_efg"), [49, 17, 78, 14]);
        assert_eq!(filter.positions("CID_abc_123"), [33, 39, 50, 19]);
    }

    /// From Java's `BloomFilterTest#testIsHit`.
    #[test]
    fn a_member_hits_and_another_does_not_until_added() {
        let filter = BloomFilter::new(10, 20).unwrap();
        let mut bits = vec![0u8; filter.byte_len()];
        let a = filter.positions("CID_abc_efg");
        let b = filter.positions("CID_abc_123");
        filter.hash_to(&mut bits, &a).unwrap();
        assert!(filter.is_hit(&bits, &a));
        assert!(!filter.is_hit(&bits, &b));
        filter.hash_to(&mut bits, &b).unwrap();
        assert!(filter.is_hit(&bits, &a));
        assert!(filter.is_hit(&bits, &b));
    }

    #[test]
    fn bitmaps_or_positions_from_elsewhere_are_refused_or_let_through() {
        let filter = BloomFilter::new(20, 32).unwrap();
        let positions = filter.subscription_positions("group", "topic");
        assert_eq!(positions, filter.positions("group#topic"));
        let mut short = vec![0u8; 13];
        assert_eq!(
            filter.hash_to(&mut short, &positions),
            Err(BloomFilterError::BitmapLength { expected_bytes: 14, actual_bytes: 13 })
        );
        assert!(filter.is_hit(&short, &positions), "a wrong-length bitmap cannot rule a message out");
        let mut bits = vec![0u8; 14];
        for foreign in [&[1, 2][..], &[1, 2, 112], &[-1, 2, 3]] {
            assert_eq!(filter.hash_to(&mut bits, foreign), Err(BloomFilterError::ForeignPositions));
            assert!(filter.is_hit(&bits, foreign));
        }
        assert_eq!(bits, [0; 14]);
    }

    #[test]
    fn bit_p_lives_in_byte_p_over_8() {
        let mut bits = [0u8; 2];
        set_bit(&mut bits, 0);
        set_bit(&mut bits, 9);
        set_bit(&mut bits, 15);
        assert_eq!(bits, [0b0000_0001, 0b1000_0010]);
        assert!(test_bit(&bits, 9));
        assert!(!test_bit(&bits, 10));
    }

    /// Java's `BloomFilterTest#testCheckFalseHit`: with f = 1 % and n = 300 random members,
    /// at most 1 % of insertions find all their bits already set.
    #[test]
    fn false_hits_stay_within_the_error_rate() {
        let filter = BloomFilter::new(1, 300).unwrap();
        let mut bits = vec![0u8; filter.byte_len()];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut false_hits = 0;
        for _ in 0..filter.expected_n() {
            let member: String = (0..20)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    char::from(b'a' + (seed % 26) as u8)
                })
                .collect();
            let positions = filter.positions(&member);
            if filter.is_hit(&bits, &positions) {
                false_hits += 1;
            }
            filter.hash_to(&mut bits, &positions).unwrap();
        }
        assert!(false_hits <= filter.error_rate_percent() * filter.expected_n() / 100, "{false_hits}");
    }
}
