//! RocketMQ message formats (fact sheet section 3): the stored message record that the commit
//! log holds and pull responses carry unchanged, the properties string, SYSFLAG bits, the
//! SEND_BATCH_MESSAGE body, offset message ids, client unique ids, tag hash codes and the
//! masked CRC-32.
//!
//! Everything here is pure bytes in, values out. Decoders never panic: malformed input gives a
//! [`MessageError`] naming the field and its offset.

mod batch;
mod crc;
mod cursor;
mod error;
mod hex;
mod host;
pub mod keys;
mod layout;
mod message_id;
mod properties;
mod record;
mod record_view;
pub mod sysflag;
mod tag;
mod uniq_key;

pub use batch::{decode_batch, encode_batch, BatchEntry, BATCH_ENTRY_MIN_LEN};
pub use crc::crc32_masked;
pub use error::MessageError;
pub use layout::{
    blank_marker, body_len_pos, born_host_len, patch_physical_offset, patch_queue_offset, patch_store_timestamp,
    prepared_transaction_offset_pos, reconsume_times_pos, record_len, store_host_len, store_host_pos,
    store_timestamp_pos, MessageVersion, BLANK_MAGIC_CODE, BLANK_MARKER_LEN, BODY_CRC_POS, BORN_HOST_POS,
    BORN_TIMESTAMP_POS, FLAG_POS, MAGIC_CODE_POS, MAGIC_CODE_V1, MAGIC_CODE_V2, MAX_TOPIC_LEN_V1, MAX_TOPIC_LEN_V2,
    MIN_RECORD_LEN, PHYSICAL_OFFSET_POS, QUEUE_ID_POS, QUEUE_OFFSET_POS, SYS_FLAG_POS, TOTAL_SIZE_POS,
};
pub use message_id::{
    create_offset_msg_id, decode_offset_msg_id, push_offset_msg_id, OFFSET_MSG_ID_LEN_V4, OFFSET_MSG_ID_LEN_V6,
};
pub use properties::{
    find_properties, find_property, iter_properties, MessageProperties, PropertiesIter, MAX_PROPERTIES_LEN,
    NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};
pub use record::{RecordIter, StoredMessage};
pub use record_view::{peek_record_size, RecordOrBlank, RecordView};
pub use tag::{java_string_hash, tags_code};
pub use uniq_key::UniqIdGenerator;
