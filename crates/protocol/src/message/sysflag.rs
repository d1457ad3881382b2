//! SYSFLAG bits of a message (fact sheet 3.2). Java: `MessageSysFlag`.
//!
//! SYSFLAG is a Java `int`, so the constants and helpers use `i32`.

/// The body is compressed (with [`compression_type`]).
pub const COMPRESSED_FLAG: i32 = 0x1;
/// The topic's filter type is MULTI_TAG.
pub const MULTI_TAGS_FLAG: i32 = 0x2;
/// Transaction value of an ordinary message.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// Transaction value of a half (prepared) message.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
/// Transaction value of a committed transactional message.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
/// Transaction value of a rolled-back transactional message.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
/// Bits 2-3 holding the transaction value.
pub const TRANSACTION_MASK: i32 = 0xC;
/// BORNHOST is IPv6 (20 bytes instead of 8).
pub const BORNHOST_V6_FLAG: i32 = 0x10;
/// STOREHOSTADDRESS is IPv6 (20 bytes instead of 8).
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
/// 5.x inner batch that consumers must unwrap.
pub const NEED_UNWRAP_FLAG: i32 = 0x40;
/// 5.x inner batch stored as one record (BatchConsumeQueue).
pub const INNER_BATCH_FLAG: i32 = 0x80;
/// Compression type LZ4 in bits 8-10.
pub const COMPRESSION_LZ4_TYPE: i32 = 0x100;
/// Compression type ZSTD in bits 8-10.
pub const COMPRESSION_ZSTD_TYPE: i32 = 0x200;
/// Compression type ZLIB in bits 8-10.
pub const COMPRESSION_ZLIB_TYPE: i32 = 0x300;
/// Bits 8-10 holding the compression type.
pub const COMPRESSION_TYPE_MASK: i32 = 0x700;

/// The transaction value (one of the `TRANSACTION_*_TYPE` constants).
/// Java: `MessageSysFlag#getTransactionValue`.
pub const fn transaction_value(sys_flag: i32) -> i32 {
    sys_flag & TRANSACTION_MASK
}

/// `sys_flag` with its transaction value replaced by `transaction_type` (bits outside the mask
/// are ignored). Java: `MessageSysFlag#resetTransactionValue`.
pub const fn with_transaction_value(sys_flag: i32, transaction_type: i32) -> i32 {
    (sys_flag & !TRANSACTION_MASK) | (transaction_type & TRANSACTION_MASK)
}

/// `sys_flag` without [`COMPRESSED_FLAG`], as a consumer leaves it after inflating the body.
/// Java: `MessageSysFlag#clearCompressedFlag`.
pub const fn clear_compressed_flag(sys_flag: i32) -> i32 {
    sys_flag & !COMPRESSED_FLAG
}

/// Whether any bit of `flag` is set in `sys_flag`. Java: `MessageSysFlag#check`.
pub const fn has_flag(sys_flag: i32, flag: i32) -> bool {
    sys_flag & flag != 0
}

/// Body compression algorithms named by bits 8-10. Java: `CompressionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionType {
    /// Value 1.
    Lz4,
    /// Value 2.
    Zstd,
    /// Value 3, and value 0 for senders before 5.x, which only knew zlib.
    Zlib,
}

impl CompressionType {
    /// The value stored in bits 8-10 (1, 2 or 3).
    pub const fn value(self) -> i32 {
        match self {
            CompressionType::Lz4 => 1,
            CompressionType::Zstd => 2,
            CompressionType::Zlib => 3,
        }
    }
}

/// The compression type in bits 8-10, `None` for the unassigned values 4 to 7.
///
/// This says which algorithm *would* apply; whether the body is compressed at all is
/// [`COMPRESSED_FLAG`]. Java: `MessageSysFlag#getCompressionType`.
pub const fn compression_type(sys_flag: i32) -> Option<CompressionType> {
    match (sys_flag & COMPRESSION_TYPE_MASK) >> 8 {
        1 => Some(CompressionType::Lz4),
        2 => Some(CompressionType::Zstd),
        0 | 3 => Some(CompressionType::Zlib),
        _ => None,
    }
}

/// `sys_flag` with bits 8-10 set to `kind`.
pub const fn with_compression_type(sys_flag: i32, kind: CompressionType) -> i32 {
    (sys_flag & !COMPRESSION_TYPE_MASK) | (kind.value() << 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_value_round_trips_without_touching_other_bits() {
        let flag = COMPRESSED_FLAG | BORNHOST_V6_FLAG | TRANSACTION_PREPARED_TYPE;
        assert_eq!(transaction_value(flag), TRANSACTION_PREPARED_TYPE);
        let committed = with_transaction_value(flag, TRANSACTION_COMMIT_TYPE);
        assert_eq!(committed, COMPRESSED_FLAG | BORNHOST_V6_FLAG | TRANSACTION_COMMIT_TYPE);
        assert_eq!(transaction_value(with_transaction_value(flag, TRANSACTION_NOT_TYPE)), 0);
        assert_eq!(clear_compressed_flag(flag) & COMPRESSED_FLAG, 0);
        assert!(has_flag(flag, BORNHOST_V6_FLAG));
    }

    #[test]
    fn compression_type_treats_zero_as_zlib() {
        assert_eq!(compression_type(COMPRESSED_FLAG), Some(CompressionType::Zlib));
        assert_eq!(compression_type(COMPRESSION_LZ4_TYPE), Some(CompressionType::Lz4));
        assert_eq!(compression_type(COMPRESSION_ZSTD_TYPE), Some(CompressionType::Zstd));
        assert_eq!(compression_type(COMPRESSION_ZLIB_TYPE), Some(CompressionType::Zlib));
        assert_eq!(compression_type(0x400), None);
        assert_eq!(with_compression_type(0x701, CompressionType::Zstd), 0x201);
    }
}
