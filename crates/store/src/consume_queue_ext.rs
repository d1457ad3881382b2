//! The ConsumeQueue extension (`enableConsumeQueueExt`): per topic queue, files under
//! `<storePathRootDir>/consumequeue_ext/<topic>/<queueId>/` holding one variable-size unit per
//! message: `i16 size | i64 tagsCode | i64 msgStoreTime | i16 bitMapSize | bitMap`, all
//! big-endian. The ConsumeQueue unit's tagsCode slot then holds the unit's *address*: its
//! byte offset plus `i64::MIN`, which is at most `i32::MIN - 1`, so no tag hash (an `int`) and
//! no delivery time can be mistaken for one. A unit that does not fit before the last 4 bytes
//! of a file ends the file with `i16 -1`. Java: `ConsumeQueueExt`, `ConsumeQueueExt.CqExtUnit`.
//!
//! The bitmap is the bloom-filter bitmap of the SQL92 subscriptions the message matched when
//! it was dispatched; pulls skip messages whose bitmap lacks their subscription's bits.

use std::io;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use tracing::{info, warn};

use crate::mapped_file_queue::MappedFileQueue;

/// Bytes reserved at the end of each file for the end marker (Java: `END_BLANK_DATA_LENGTH`).
pub const END_BLANK_DATA_LENGTH: usize = 4;
/// The highest address: every address is at or below it (Java: `MAX_ADDR`).
pub const MAX_ADDR: i64 = i32::MIN as i64 - 1;
/// Fixed part of a unit: size, tagsCode, store time, bitmap size (Java: `MIN_EXT_UNIT_SIZE`).
pub const MIN_EXT_UNIT_SIZE: usize = 2 + 8 + 8 + 2;
/// Largest unit (its size is an `i16`).
pub const MAX_EXT_UNIT_SIZE: usize = i16::MAX as usize;

/// Whether a ConsumeQueue tagsCode is an extension address. Java: `isExtAddr`.
pub fn is_ext_addr(tags_code: i64) -> bool {
    tags_code <= MAX_ADDR
}

/// The address of the unit at byte offset `offset` of the extension files.
fn decorate(offset: i64) -> i64 {
    offset.wrapping_add(i64::MIN)
}

/// The byte offset of the unit at `address`.
fn undecorate(address: i64) -> i64 {
    address.wrapping_sub(i64::MIN)
}

/// One extension unit. Java: `CqExtUnit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CqExtUnit {
    /// The message's real tagsCode (tag hash, or delivery time on the schedule topic).
    pub tags_code: i64,
    /// When the message was stored, ms.
    pub msg_store_time: i64,
    /// The bloom-filter bitmap, if one was computed.
    pub filter_bit_map: Option<Vec<u8>>,
}

impl CqExtUnit {
    fn size(&self) -> usize {
        MIN_EXT_UNIT_SIZE + self.filter_bit_map.as_ref().map_or(0, Vec::len)
    }

    /// The unit's bytes (big-endian, as Java's `ByteBuffer`).
    pub fn encode(&self) -> Vec<u8> {
        let bit_map = self.filter_bit_map.as_deref().unwrap_or(&[]);
        let mut out = Vec::with_capacity(self.size());
        out.extend_from_slice(&(self.size() as i16).to_be_bytes());
        out.extend_from_slice(&self.tags_code.to_be_bytes());
        out.extend_from_slice(&self.msg_store_time.to_be_bytes());
        out.extend_from_slice(&(bit_map.len() as i16).to_be_bytes());
        out.extend_from_slice(bit_map);
        out
    }

    /// Reads a unit from the start of `bytes`; `None` for an end marker, zeros or a cut unit.
    pub fn decode(bytes: &[u8]) -> Option<CqExtUnit> {
        let size = i16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
        let size = usize::try_from(size).ok().filter(|s| *s >= MIN_EXT_UNIT_SIZE)?;
        let unit = bytes.get(..size)?;
        let tags_code = i64::from_be_bytes(unit[2..10].try_into().ok()?);
        let msg_store_time = i64::from_be_bytes(unit[10..18].try_into().ok()?);
        let bit_map_size = usize::try_from(i16::from_be_bytes(unit[18..20].try_into().ok()?)).unwrap_or(0);
        let filter_bit_map = match bit_map_size {
            0 => None,
            n => Some(unit.get(20..20 + n)?.to_vec()),
        };
        Some(CqExtUnit { tags_code, msg_store_time, filter_bit_map })
    }
}

/// The extension files of one topic queue.
#[derive(Debug)]
pub struct ConsumeQueueExt {
    files: MappedFileQueue,
    file_size: usize,
    writer: Mutex<()>,
}

impl ConsumeQueueExt {
    /// Opens the files of `topic`/`queue_id` under `root` (the `consumequeue_ext` directory).
    /// Call [`recover`](Self::recover) before writing to a queue that had files.
    ///
    /// # Errors
    /// A file size too small for one unit and the end marker; I/O errors.
    pub fn open(root: &Path, topic: &str, queue_id: i32, file_size: usize) -> io::Result<ConsumeQueueExt> {
        if file_size < MIN_EXT_UNIT_SIZE + END_BLANK_DATA_LENGTH {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("consume queue ext {topic}/{queue_id}: file size {file_size} too small"),
            ));
        }
        let files = MappedFileQueue::load(&root.join(topic).join(queue_id.to_string()), file_size, false)?;
        Ok(ConsumeQueueExt { files, file_size, writer: Mutex::new(()) })
    }

    /// Appends `unit`; returns its address (see [`is_ext_addr`]). Java: `put`.
    ///
    /// # Errors
    /// A unit larger than `MAX_EXT_UNIT_SIZE` (32 767 bytes) or than a file; I/O errors creating a file.
    pub fn put(&self, unit: &CqExtUnit) -> io::Result<i64> {
        let bytes = unit.encode();
        if bytes.len() > MAX_EXT_UNIT_SIZE || bytes.len() + END_BLANK_DATA_LENGTH > self.file_size {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("ext unit of {} bytes", bytes.len())));
        }
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let file = self.files.last_or_create(0)?;
            let pos = file.wrote_position();
            if bytes.len() > self.file_size - pos - END_BLANK_DATA_LENGTH {
                // Not enough room: end the file and go on in the next.
                let mut end = vec![0u8; self.file_size - pos];
                end[..2].copy_from_slice(&(-1i16).to_be_bytes());
                file.append(&end)?;
                continue;
            }
            file.append(&bytes)?;
            return Ok(decorate(file.file_from_offset() + pos as i64));
        }
    }

    /// The unit at `address`, if it is one and is written.
    pub fn get(&self, address: i64) -> Option<CqExtUnit> {
        if !is_ext_addr(address) {
            return None;
        }
        let offset = undecorate(address);
        let file = self.files.find(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        let len = file.wrote_position().checked_sub(pos)?.min(MAX_EXT_UNIT_SIZE);
        file.with_bytes(pos, len, CqExtUnit::decode).flatten()
    }

    /// Sets the write position after the last whole unit of every file, dropping what follows
    /// (Java: `recover`; the ConsumeQueue then cuts further by its last unit's address).
    ///
    /// # Errors
    /// I/O errors truncating.
    pub fn recover(&self) -> io::Result<()> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let files = self.files.segments();
        let Some(last) = files.last() else { return Ok(()) };
        let mut end = last.file_from_offset();
        for file in &files {
            let mut pos = 0usize;
            let ended = file
                .with_allocated(0, self.file_size, |bytes| loop {
                    let Some(head) = bytes.get(pos..pos + 2) else { break false };
                    let size = i16::from_be_bytes([head[0], head[1]]);
                    if size == -1 {
                        break true;
                    }
                    match usize::try_from(size) {
                        Ok(s) if s >= MIN_EXT_UNIT_SIZE && pos + s <= bytes.len() => pos += s,
                        _ => break false,
                    }
                })
                .unwrap_or(false);
            end = file.file_from_offset() + if ended { self.file_size } else { pos } as i64;
            if !ended {
                break;
            }
        }
        info!(dir = %self.files.dir().display(), end, "consume queue ext recovered");
        self.files.truncate(end, true)
    }

    /// Drops every unit after the one at `address` (the last unit the ConsumeQueue kept).
    ///
    /// # Errors
    /// I/O errors truncating.
    pub fn truncate_by_max_address(&self, address: i64) -> io::Result<()> {
        let Some(unit) = self.get(address) else {
            warn!(address, "consume queue ext unit to truncate after not found");
            return Ok(());
        };
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.files.truncate(undecorate(address) + unit.size() as i64, true)
    }

    /// Drops everything (the ConsumeQueue has no unit pointing here any more).
    ///
    /// # Errors
    /// I/O errors truncating.
    pub fn truncate_all(&self) -> io::Result<()> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let start = self.files.first().map_or(0, |f| f.file_from_offset());
        self.files.truncate(start, true)
    }

    /// Deletes files wholly below the unit at `address` (the first unit still referenced).
    /// Java: `truncateByMinAddress`.
    ///
    /// # Errors
    /// I/O errors deleting.
    pub fn delete_before_address(&self, address: i64) -> io::Result<usize> {
        if !is_ext_addr(address) {
            return Ok(0);
        }
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.files.delete_before(undecorate(address))
    }

    /// Flushes written units.
    ///
    /// # Errors
    /// `msync` failures.
    pub fn flush(&self) -> io::Result<()> {
        self.files.flush().map(|_| ())
    }

    /// Deletes every file.
    ///
    /// # Errors
    /// I/O errors deleting.
    pub fn destroy(&self) -> io::Result<()> {
        self.files.destroy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_layout_is_javas() {
        let unit = CqExtUnit { tags_code: 0x0102, msg_store_time: 0x0A0B, filter_bit_map: Some(vec![0xF0, 0x0F]) };
        let bytes = unit.encode();
        assert_eq!(
            bytes,
            [
                0, 22, // size = 20 + 2
                0, 0, 0, 0, 0, 0, 0x01, 0x02, // tagsCode
                0, 0, 0, 0, 0, 0, 0x0A, 0x0B, // msgStoreTime
                0, 2, // bitMapSize
                0xF0, 0x0F,
            ]
        );
        assert_eq!(CqExtUnit::decode(&bytes), Some(unit));
        let bare = CqExtUnit { tags_code: -5, msg_store_time: 7, filter_bit_map: None };
        assert_eq!(bare.encode().len(), MIN_EXT_UNIT_SIZE);
        assert_eq!(CqExtUnit::decode(&bare.encode()), Some(bare));
        assert_eq!(CqExtUnit::decode(&[0xFF, 0xFF, 0, 0]), None, "end marker");
        assert_eq!(CqExtUnit::decode(&[0, 22, 1]), None, "cut unit");
    }

    #[test]
    fn addresses_never_collide_with_tag_hashes() {
        assert!(is_ext_addr(decorate(0)));
        assert!(is_ext_addr(decorate(1 << 40)));
        assert!(!is_ext_addr(i64::from(i32::MIN)));
        assert!(!is_ext_addr(0) && !is_ext_addr(1_700_000_000_000));
        assert_eq!(undecorate(decorate(12_345)), 12_345);
        assert_eq!(decorate(0), i64::MIN);
    }

    #[test]
    fn put_get_roll_recover_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let file_size = 100; // four 22-byte units and the end marker
        let units: Vec<CqExtUnit> = (0..10)
            .map(|i| CqExtUnit { tags_code: i, msg_store_time: 1000 + i, filter_bit_map: Some(vec![i as u8; 2]) })
            .collect();
        let addrs: Vec<i64> = {
            let ext = ConsumeQueueExt::open(dir.path(), "T", 0, file_size).unwrap();
            let addrs: Vec<i64> = units.iter().map(|u| ext.put(u).unwrap()).collect();
            for (u, a) in units.iter().zip(&addrs) {
                assert_eq!(ext.get(*a).as_ref(), Some(u));
            }
            assert_eq!(undecorate(addrs[4]), 100, "the fifth unit starts the second file");
            ext.flush().unwrap();
            addrs
        };
        let ext = ConsumeQueueExt::open(dir.path(), "T", 0, file_size).unwrap();
        ext.recover().unwrap();
        assert_eq!(ext.get(addrs[9]).as_ref(), Some(&units[9]));
        let next = ext.put(&units[0]).unwrap();
        assert_eq!(undecorate(next), undecorate(addrs[9]) + 22, "appends continue after the last unit");
        ext.truncate_by_max_address(addrs[5]).unwrap();
        assert!(ext.get(addrs[6]).is_none());
        assert_eq!(ext.get(addrs[5]).as_ref(), Some(&units[5]));
        assert_eq!(ext.delete_before_address(addrs[5]).unwrap(), 1);
        assert!(ext.get(addrs[0]).is_none());
        assert_eq!(ext.get(addrs[5]).as_ref(), Some(&units[5]));
    }
}
