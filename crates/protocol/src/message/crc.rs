//! RocketMQ's CRC-32: the standard IEEE CRC with the sign bit cleared.

/// CRC-32 (IEEE polynomial, as `java.util.zip.CRC32`) masked with `0x7FFF_FFFF`.
///
/// Java stores CRCs in `int`s and masks them so they are never negative; every RocketMQ CRC
/// (BODYCRC, RegisterBroker `bodyCrc32`, the `__CRC32#` property) uses this form.
/// Java: `UtilAll#crc32`.
pub fn crc32_masked(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes) & 0x7FFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_standard_check_value() {
        assert_eq!(crc32_masked(b"123456789"), 0xCBF4_3926 & 0x7FFF_FFFF);
        assert_eq!(crc32_masked(b"a"), 0x68B7_BE43);
        assert_eq!(crc32_masked(b""), 0);
    }
}
