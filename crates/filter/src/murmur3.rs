//! MurmurHash3, x64 128-bit variant (Austin Appleby's `MurmurHash3_x64_128`).
//!
//! The bloom filter needs exactly the hash Java RocketMQ gets from Guava's
//! `Hashing.murmur3_128()`, because the bit positions it derives are stored in consume-queue
//! extension units and in `consumerFilter.json`. Guava implements the reference algorithm, so
//! this does too; the golden tests below pin it to published values.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The 128-bit hash of `data` as its two 64-bit halves `(h1, h2)`. The digest bytes are `h1`
/// then `h2`, each little-endian, so Guava's `HashCode#asLong()` is `h1`.
pub(crate) fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);

    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (k1, k2) = block.split_at(8);
        h1 ^= mix_k1(read_u64_le(k1));
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(read_u64_le(k2));
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix_k2(read_u64_le(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(read_u64_le(&tail[..tail.len().min(8)]));
    }

    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Reads up to 8 bytes as a little-endian integer; missing high bytes are zero, which is how
/// the reference algorithm assembles a partial tail block.
fn read_u64_le(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers from Guava's `Murmur3Hash128Test#testKnownValues`, given there as the two
    /// little-endian longs of the digest.
    #[test]
    fn matches_guava_known_values() {
        let cases: [(u32, u64, u64, &str); 8] = [
            (0, 0x6299_4269_3e10_f867, 0x92db_0b82_baeb_5347, "hell"),
            (1, 0xa78d_dff5_adae_8d10, 0x1289_00ef_2090_0135, "hello"),
            (2, 0x8a48_6b23_f422_e826, 0xf962_a2c5_8947_765f, "hello "),
            (3, 0x2ea5_9f46_6f6b_ed8c, 0xc610_990a_cc42_8a17, "hello w"),
            (4, 0x79f6_305a_386c_572c, 0x4630_5aed_3483_b94e, "hello wo"),
            (5, 0xc221_9d21_3ec1_f1b5, 0xa1d8_e2e0_a527_85bd, "hello wor"),
            (0, 0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347, "The quick brown fox jumps over the lazy dog"),
            (0, 0x658c_a970_ff85_269a, 0x43fe_e3ea_a68e_5c3e, "The quick brown fox jumps over the lazy cog"),
        ];
        for (seed, h1, h2, input) in cases {
            assert_eq!(murmur3_x64_128(input.as_bytes(), seed), (h1, h2), "{input:?} seed {seed}");
        }
    }

    /// SMHasher's verification code for `MurmurHash3_x64_128` ("Murmur3F" in its main.cpp,
    /// also checked by Guava's `testParanoid`): hash the keys {}, {0}, {0,1}, ... {0..254} with
    /// seed 256 - length, hash the concatenated digests with seed 0, and read the first four
    /// bytes little-endian. It covers every tail length and many seeds at once.
    #[test]
    fn matches_smhasher_verification_value() {
        let key: Vec<u8> = (0..=255).collect();
        let mut digests = Vec::with_capacity(256 * 16);
        for len in 0..256usize {
            let (h1, h2) = murmur3_x64_128(&key[..len], 256 - len as u32);
            digests.extend_from_slice(&h1.to_le_bytes());
            digests.extend_from_slice(&h2.to_le_bytes());
        }
        let (h1, _) = murmur3_x64_128(&digests, 0);
        assert_eq!(h1 as u32, 0x6384_ba69);
    }

    #[test]
    fn empty_input_with_seed_zero_hashes_to_zero() {
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
    }
}
