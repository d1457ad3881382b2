//! One IndexFile: a fixed-size hash table from message keys to CommitLog offsets (fact sheet
//! 4.4). Java: `IndexFile`, `IndexHeader`.
//!
//! Layout, all big-endian: a 40-byte header, `hash_slot_num` 4-byte slots, then `index_num`
//! 20-byte entries. A slot holds the number of the newest entry whose key hashes to it; each
//! entry holds the number of the previous one in the same slot, so a slot heads a chain
//! walked newest to oldest. Entry 0 is never used (the entry count starts at 1), so 0 means
//! "no entry". Entry times are seconds after the header's begin timestamp.
//!
//! The file is sparse, as Java's: a page of it is given blocks (see [`crate::reserve`]) just
//! before it is first written, so an index file takes disk in proportion to the keys it
//! holds, a full disk fails a put with an error instead of a fault, and pages that have no
//! blocks read as zeros without touching the mapping.
//!
//! The file is written through `&mut self` and read through `&self`; the owner
//! ([`IndexService`](crate::IndexService)) keeps it behind a lock. Counts read from disk are
//! checked on load and every entry number read from the file is checked against the entry
//! count, so a damaged file yields wrong answers, never a panic or an endless walk.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::MmapMut;
use tracing::debug;

use ferromq_protocol::message::java_string_hash;

use crate::reserve::PageSet;

/// Header size in bytes. Java: `IndexHeader.INDEX_HEADER_SIZE`.
pub const INDEX_HEADER_SIZE: usize = 40;
/// Size of one hash slot in bytes.
pub const HASH_SLOT_SIZE: usize = 4;
/// Size of one index entry in bytes.
pub const INDEX_ENTRY_SIZE: usize = 20;

const BEGIN_TIMESTAMP_POS: usize = 0;
const END_TIMESTAMP_POS: usize = 8;
const BEGIN_PHY_OFFSET_POS: usize = 16;
const END_PHY_OFFSET_POS: usize = 24;
const HASH_SLOT_COUNT_POS: usize = 32;
const INDEX_COUNT_POS: usize = 36;

/// The "no entry" value of a slot or of an entry's previous link.
const INVALID_INDEX: i32 = 0;
/// Pages of entries given blocks by one reservation (256 KiB, 13,107 entries): a system call
/// per 204 entries cost 7 % of the dispatch thread.
const ENTRY_RESERVE_PAGES: usize = 64;

/// The size in bytes of an index file with these dimensions, or `None` if it does not fit in
/// memory addresses.
pub fn index_file_size(hash_slot_num: u32, index_num: u32) -> Option<usize> {
    let slots = usize::try_from(hash_slot_num).ok()?.checked_mul(HASH_SLOT_SIZE)?;
    let entries = usize::try_from(index_num).ok()?.checked_mul(INDEX_ENTRY_SIZE)?;
    INDEX_HEADER_SIZE.checked_add(slots)?.checked_add(entries)
}

/// The hash stored for `key`: `abs(String.hashCode)`, or 0 when that overflows (the hash is
/// `i32::MIN`). Java: `IndexFile#indexKeyHashMethod`.
pub fn index_key_hash(key: &str) -> i32 {
    java_string_hash(key).checked_abs().unwrap_or(0)
}

/// The header fields, mirrored in memory and written through to the mapping on every change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Header {
    begin_timestamp: i64,
    end_timestamp: i64,
    begin_phy_offset: i64,
    end_phy_offset: i64,
    hash_slot_count: i32,
    index_count: i32,
}

/// One index file.
pub struct IndexFile {
    path: PathBuf,
    hash_slot_num: i32,
    index_num: i32,
    file: File,
    map: MmapMut,
    /// The pages that may hold data, so are read through the mapping (reading a page that is
    /// partly a hole faults in no block); the other pages read as zeros.
    pages: PageSet,
    /// The pages whose blocks this process reserved, so may be written through the mapping.
    /// A page of a file loaded from disk is reserved again before its first write (blocks may
    /// be smaller than a page: a page can be part data, part hole).
    reserved_pages: PageSet,
    header: Header,
    /// Set by writes, cleared by a successful flush.
    dirty: AtomicBool,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("hash_slot_num", &self.hash_slot_num)
            .field("index_num", &self.index_num)
            .field("header", &self.header)
            .finish()
    }
}

/// Maps the whole file read-write.
#[allow(unsafe_code)]
fn map_file(file: &File) -> io::Result<MmapMut> {
    // SAFETY: the mapping is undefined behaviour only if the file is changed or truncated
    // behind it. Index files belong to this store alone (the broker holds the store's `lock`
    // file while running), they are sized once before mapping and never truncated, and every
    // access to the bytes goes through `IndexFile`, whose owner serializes writes against
    // reads with a lock.
    unsafe { MmapMut::map_mut(file) }
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn invalid_data(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Checks the dimensions and returns them as the file's `i32`s with the file size.
fn dimensions(hash_slot_num: u32, index_num: u32) -> io::Result<(i32, i32, usize)> {
    let slots = i32::try_from(hash_slot_num).ok().filter(|n| *n > 0);
    let entries = i32::try_from(index_num).ok().filter(|n| *n > 0);
    match (slots, entries, index_file_size(hash_slot_num, index_num)) {
        (Some(slots), Some(entries), Some(size)) => Ok((slots, entries, size)),
        _ => Err(invalid_input(format!(
            "index file dimensions out of range: maxHashSlotNum {hash_slot_num}, maxIndexNum {index_num} \
             (each must be 1..=2147483647)"
        ))),
    }
}

impl IndexFile {
    /// Creates a new, zeroed file at `path` (which must not exist) and seeds its begin and end
    /// with the previous file's end offset and timestamp, when positive, as Java does; the
    /// first key put replaces the begin values.
    ///
    /// # Errors
    /// Dimensions out of range (`InvalidInput`), `AlreadyExists` if `path` exists, and I/O
    /// errors creating, sizing or mapping the file.
    pub fn create(
        path: &Path,
        hash_slot_num: u32,
        index_num: u32,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> io::Result<IndexFile> {
        let (slots, entries, size) = dimensions(hash_slot_num, index_num)?;
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        let prepared = file.set_len(size as u64).and_then(|()| map_file(&file));
        let map = match prepared {
            Ok(map) => map,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        };
        let mut index_file = IndexFile {
            path: path.to_owned(),
            hash_slot_num: slots,
            index_num: entries,
            file,
            map,
            pages: PageSet::empty(size),
            reserved_pages: PageSet::empty(size),
            header: Header { index_count: 1, ..Header::default() },
            dirty: AtomicBool::new(true),
        };
        if let Err(e) = index_file.reserve_range(0, INDEX_HEADER_SIZE) {
            drop(index_file);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        if end_phy_offset > 0 {
            index_file.header.begin_phy_offset = end_phy_offset;
            index_file.header.end_phy_offset = end_phy_offset;
        }
        if end_timestamp > 0 {
            index_file.header.begin_timestamp = end_timestamp;
            index_file.header.end_timestamp = end_timestamp;
        }
        index_file.write_header();
        Ok(index_file)
    }

    /// Opens an existing file written with the same dimensions and reads its header.
    ///
    /// # Errors
    /// Dimensions out of range (`InvalidInput`); a file whose size does not match the
    /// dimensions (a config change) or whose entry count exceeds `index_num`
    /// (`InvalidData`); I/O errors opening or mapping it.
    pub fn load(path: &Path, hash_slot_num: u32, index_num: u32) -> io::Result<IndexFile> {
        let (slots, entries, size) = dimensions(hash_slot_num, index_num)?;
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len != size as u64 {
            return Err(invalid_data(format!(
                "{} is {len} bytes but maxHashSlotNum {hash_slot_num} and maxIndexNum {index_num} need {size}",
                path.display()
            )));
        }
        let map = map_file(&file)?;
        let pages = PageSet::with_data(&file, size)?;
        let reserved_pages = PageSet::empty(size);
        let mut index_file = IndexFile {
            path: path.to_owned(),
            hash_slot_num: slots,
            index_num: entries,
            file,
            map,
            pages,
            reserved_pages,
            header: Header::default(),
            dirty: AtomicBool::new(false),
        };
        let mut header = Header {
            begin_timestamp: index_file.read_i64(BEGIN_TIMESTAMP_POS),
            end_timestamp: index_file.read_i64(END_TIMESTAMP_POS),
            begin_phy_offset: index_file.read_i64(BEGIN_PHY_OFFSET_POS),
            end_phy_offset: index_file.read_i64(END_PHY_OFFSET_POS),
            hash_slot_count: index_file.read_i32(HASH_SLOT_COUNT_POS),
            index_count: index_file.read_i32(INDEX_COUNT_POS),
        };
        if header.index_count <= 0 {
            header.index_count = 1;
        }
        if header.index_count > entries {
            return Err(invalid_data(format!(
                "{}: indexCount {} exceeds maxIndexNum {index_num}",
                path.display(),
                header.index_count
            )));
        }
        index_file.header = header;
        Ok(index_file)
    }

    /// Adds `key` for the message at `phy_offset` stored at `store_timestamp` (ms). Returns
    /// false, changing nothing, when the file is full. Java: `IndexFile#putKey`.
    ///
    /// # Errors
    /// The pages the key needs could not be given blocks (`StorageFull` when the disk is
    /// full); nothing is changed then.
    ///
    /// Unlike Java, the first entry's time is measured from its own timestamp (Java measures
    /// it from the seeded begin timestamp, then replaces the begin timestamp, so in a seeded
    /// file the first entry reads back later than it was stored).
    pub fn put_key(&mut self, key: &str, phy_offset: i64, store_timestamp: i64) -> io::Result<bool> {
        let index_count = self.header.index_count;
        if index_count >= self.index_num {
            debug!(file = %self.path.display(), index_count, index_num = self.index_num, "index file is full");
            return Ok(false);
        }
        let key_hash = index_key_hash(key);
        let slot_pos = self.slot_pos(key_hash);
        let entry_pos = self.entry_pos(index_count);
        self.reserve_range(0, INDEX_HEADER_SIZE)?;
        self.reserve_range(slot_pos, HASH_SLOT_SIZE)?;
        self.reserve_entry(entry_pos)?;
        let mut slot_value = self.read_i32(slot_pos);
        if slot_value <= INVALID_INDEX || slot_value > index_count {
            slot_value = INVALID_INDEX;
        }
        if index_count <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        let time_diff_s = if self.header.begin_timestamp <= 0 {
            0
        } else {
            let diff = store_timestamp.saturating_sub(self.header.begin_timestamp) / 1000;
            i32::try_from(diff.max(0)).unwrap_or(i32::MAX)
        };

        self.write_i32(entry_pos, key_hash);
        self.write_i64(entry_pos + 4, phy_offset);
        self.write_i32(entry_pos + 12, time_diff_s);
        self.write_i32(entry_pos + 16, slot_value);
        self.write_i32(slot_pos, index_count);

        if slot_value == INVALID_INDEX {
            self.header.hash_slot_count = self.header.hash_slot_count.saturating_add(1);
        }
        self.header.index_count = index_count + 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        self.write_header();
        self.dirty.store(true, Ordering::Relaxed);
        Ok(true)
    }

    /// Gives blocks to the pages of the entry at `pos`. Entries are written in order, so the
    /// pages after it get theirs in the same system call, [`ENTRY_RESERVE_PAGES`] at a time
    /// (the slots, written at random, are reserved page by page so the file stays sparse).
    /// Short of room for the run, only the entry's own pages are reserved.
    fn reserve_entry(&mut self, pos: usize) -> io::Result<()> {
        let page = crate::OS_PAGE_SIZE;
        let first = pos / page;
        let needed_end = (pos + INDEX_ENTRY_SIZE).div_ceil(page);
        if !self.reserved_pages.covers(pos, INDEX_ENTRY_SIZE) {
            let file_pages = self.map.len().div_ceil(page);
            let end = (first + ENTRY_RESERVE_PAGES).max(needed_end).min(file_pages);
            let (at, len) = (first * page, (end * page).min(self.map.len()) - first * page);
            match crate::reserve::reserve(&self.file, &self.path, at as u64, len as u64) {
                Ok(()) => {
                    for p in first..end {
                        self.reserved_pages.insert(p);
                    }
                }
                Err(_) if end > needed_end => self.reserve_range(pos, INDEX_ENTRY_SIZE)?,
                Err(e) => return Err(e),
            }
        }
        // The entry's pages now hold data: reads go through the mapping.
        for p in first..needed_end {
            self.pages.insert(p);
        }
        Ok(())
    }

    /// Gives blocks to the pages of `[pos, pos + len)` that have none.
    fn reserve_range(&mut self, pos: usize, len: usize) -> io::Result<()> {
        let missing: Vec<usize> = self.reserved_pages.missing(pos, len).collect();
        for page in missing {
            let at = page * crate::OS_PAGE_SIZE;
            let page_len = crate::OS_PAGE_SIZE.min(self.map.len() - at);
            crate::reserve::reserve(&self.file, &self.path, at as u64, page_len as u64)?;
            self.pages.insert(page);
            self.reserved_pages.insert(page);
        }
        Ok(())
    }

    /// Appends to `out` the offsets of entries whose hash equals `key`'s and whose time is in
    /// `[begin, end]` (ms), newest first, until `out` holds `max_num`. Hash collisions are
    /// returned too: the caller checks the messages' real keys. Java: `IndexFile#selectPhyOffset`.
    ///
    /// The walk stops, as in Java, at the end of the chain, at a link that is not a valid
    /// entry number or points to itself, and at the first entry older than `begin`. It also
    /// stops after as many steps as there are entries, so a damaged file with a cycle cannot
    /// loop forever.
    pub fn select_phy_offsets(&self, key: &str, max_num: usize, begin: i64, end: i64, out: &mut Vec<i64>) {
        let index_count = self.header.index_count;
        let key_hash = index_key_hash(key);
        let mut next = self.read_i32(self.slot_pos(key_hash));
        if index_count <= 1 || !self.is_written_entry(next) {
            return;
        }
        // A chain visits each written entry (1..index_count) at most once.
        for _ in 1..index_count {
            if out.len() >= max_num {
                break;
            }
            let entry_pos = self.entry_pos(next);
            let hash_read = self.read_i32(entry_pos);
            let phy_offset_read = self.read_i64(entry_pos + 4);
            let time_diff_s = self.read_i32(entry_pos + 12);
            let prev = self.read_i32(entry_pos + 16);
            if time_diff_s < 0 {
                break;
            }
            let time_read = self.header.begin_timestamp.saturating_add(i64::from(time_diff_s) * 1000);
            if hash_read == key_hash && (begin..=end).contains(&time_read) {
                out.push(phy_offset_read);
            }
            if !self.is_written_entry(prev) || prev == next || time_read < begin {
                break;
            }
            next = prev;
        }
    }

    /// Whether no more keys fit. Java: `IndexFile#isWriteFull`.
    pub fn is_full(&self) -> bool {
        self.header.index_count >= self.index_num
    }

    /// Whether the file's `[begin, end]` time range overlaps the query's. Java:
    /// `IndexFile#isTimeMatched`.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (file_begin, file_end) = (self.header.begin_timestamp, self.header.end_timestamp);
        (begin < file_begin && end > file_end)
            || (begin >= file_begin && begin <= file_end)
            || (end >= file_begin && end <= file_end)
    }

    /// Store time (ms) of the first entry, or the seed.
    pub fn begin_timestamp(&self) -> i64 {
        self.header.begin_timestamp
    }

    /// Store time (ms) of the last entry, or the seed.
    pub fn end_timestamp(&self) -> i64 {
        self.header.end_timestamp
    }

    /// CommitLog offset of the first entry, or the seed.
    pub fn begin_phy_offset(&self) -> i64 {
        self.header.begin_phy_offset
    }

    /// CommitLog offset of the last entry, or the seed.
    pub fn end_phy_offset(&self) -> i64 {
        self.header.end_phy_offset
    }

    /// Slots in use.
    pub fn hash_slot_count(&self) -> i32 {
        self.header.hash_slot_count
    }

    /// Entries used plus one (entry 0 is never used), as stored in the header.
    pub fn index_count(&self) -> i32 {
        self.header.index_count
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> usize {
        self.map.len()
    }

    /// Whether keys were put since the last flush (a created file counts as written).
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Relaxed)
    }

    /// Forces the file's bytes to disk, if anything changed since the last flush.
    ///
    /// # Errors
    /// The `msync` failure; the file then stays dirty.
    pub fn flush(&self) -> io::Result<()> {
        if self.dirty.load(Ordering::Relaxed) {
            self.map.flush()?;
            self.dirty.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Unmaps and deletes the file.
    ///
    /// # Errors
    /// The unlink failure.
    pub fn destroy(self) -> io::Result<()> {
        let path = self.path.clone();
        drop(self);
        std::fs::remove_file(path)
    }

    fn slot_pos(&self, key_hash: i32) -> usize {
        // `key_hash` is non-negative and `hash_slot_num` positive, so the slot is in range.
        INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) as usize * HASH_SLOT_SIZE
    }

    fn entry_pos(&self, index: i32) -> usize {
        debug_assert!((0..self.index_num).contains(&index));
        INDEX_HEADER_SIZE + self.hash_slot_num as usize * HASH_SLOT_SIZE + index as usize * INDEX_ENTRY_SIZE
    }

    /// Whether `index` names an entry already written: `1..index_count`. Java accepts
    /// `index_count` itself, which names the next (unwritten) entry and, in a full file,
    /// a position past the end.
    fn is_written_entry(&self, index: i32) -> bool {
        index > INVALID_INDEX && index < self.header.index_count
    }

    fn write_header(&mut self) {
        let h = self.header;
        self.write_i64(BEGIN_TIMESTAMP_POS, h.begin_timestamp);
        self.write_i64(END_TIMESTAMP_POS, h.end_timestamp);
        self.write_i64(BEGIN_PHY_OFFSET_POS, h.begin_phy_offset);
        self.write_i64(END_PHY_OFFSET_POS, h.end_phy_offset);
        self.write_i32(HASH_SLOT_COUNT_POS, h.hash_slot_count);
        self.write_i32(INDEX_COUNT_POS, h.index_count);
    }

    /// Reads `out.len()` bytes at `pos`: through the mapping where the pages have blocks;
    /// elsewhere the file is a hole (pages are given blocks before anything is written to
    /// them), which reads as zeros, "no entry" to the readers.
    fn read_into(&self, pos: usize, out: &mut [u8]) {
        if self.pages.covers(pos, out.len()) {
            out.copy_from_slice(&self.map[pos..pos + out.len()]);
        } else {
            out.fill(0);
        }
    }

    fn read_i32(&self, pos: usize) -> i32 {
        let mut bytes = [0; 4];
        self.read_into(pos, &mut bytes);
        i32::from_be_bytes(bytes)
    }

    fn read_i64(&self, pos: usize) -> i64 {
        let mut bytes = [0; 8];
        self.read_into(pos, &mut bytes);
        i64::from_be_bytes(bytes)
    }

    /// Writers reserve the pages first (`reserve_range`).
    fn write_i32(&mut self, pos: usize, value: i32) {
        self.map[pos..pos + 4].copy_from_slice(&value.to_be_bytes());
    }

    fn write_i64(&mut self, pos: usize, value: i64) {
        self.map[pos..pos + 8].copy_from_slice(&value.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_java_abs_hash_code_with_min_value_as_zero() {
        // Java: "abc".hashCode() == 96354; "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(index_key_hash("abc"), 96354);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        // "TopicTest#order-1".hashCode() == -1829193424.
        assert_eq!(index_key_hash("TopicTest#order-1"), 1_829_193_424);
    }

    #[test]
    fn file_size_matches_java_default_dimensions() {
        assert_eq!(index_file_size(5_000_000, 20_000_000), Some(420_000_040));
        assert_eq!(index_file_size(16, 8), Some(40 + 64 + 160));
    }

    #[test]
    fn entry_pages_are_reserved_a_run_at_a_time_and_slots_page_by_page() {
        let dir = tempfile::tempdir().unwrap();
        // 1,024 slots (one page) and room for 100,000 entries (~489 pages).
        let mut f = IndexFile::create(&dir.path().join("f"), 1024, 100_000, 0, 0).unwrap();
        assert!(f.put_key("a", 100, 1_000).unwrap());
        let page = crate::OS_PAGE_SIZE;
        let first_entry_page = f.entry_pos(1) / page;
        for p in first_entry_page..first_entry_page + ENTRY_RESERVE_PAGES {
            assert!(f.reserved_pages.contains(p), "entry page {p} reserved with the first entry");
        }
        assert!(!f.reserved_pages.contains(first_entry_page + ENTRY_RESERVE_PAGES));
        // Only the page written reads through the mapping.
        assert!(f.pages.contains(first_entry_page) && !f.pages.contains(first_entry_page + 1));
        // Entries filling the run reserve nothing more; the next one reserves the next run.
        let next_run = first_entry_page + ENTRY_RESERVE_PAGES;
        let mut i = 0i64;
        while (f.entry_pos(f.index_count()) + INDEX_ENTRY_SIZE - 1) / page < next_run {
            assert!(f.put_key(&format!("k{i}"), 200 + i, 2_000).unwrap());
            i += 1;
        }
        assert!(!f.reserved_pages.contains(next_run), "not before an entry needs it");
        // The next entry starts on the run's last page and ends on the next: a new run from
        // its first page.
        let start = f.entry_pos(f.index_count()) / page;
        assert!(f.put_key("next", 1, 2_000).unwrap());
        for p in start..start + ENTRY_RESERVE_PAGES {
            assert!(f.reserved_pages.contains(p), "page {p} of the second run");
        }
        // Every key written reads back.
        let mut out = Vec::new();
        f.select_phy_offsets("k7", 10, 0, i64::MAX, &mut out);
        assert!(out.contains(&207), "{out:?}");
    }

    #[test]
    fn full_file_refuses_keys_and_keeps_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = IndexFile::create(&dir.path().join("f"), 4, 3, 0, 0).unwrap();
        assert!(f.put_key("a", 100, 1_000).unwrap());
        assert!(f.put_key("b", 200, 2_000).unwrap());
        assert!(f.is_full(), "3 entries minus the unused entry 0 hold two keys");
        assert!(!f.put_key("c", 300, 3_000).unwrap());
        assert_eq!((f.index_count(), f.end_phy_offset(), f.end_timestamp()), (3, 200, 2_000));
    }

    #[test]
    fn first_entry_of_a_seeded_file_reads_back_at_its_own_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = IndexFile::create(&dir.path().join("f"), 4, 8, 500, 10_000).unwrap();
        assert_eq!((f.begin_timestamp(), f.begin_phy_offset()), (10_000, 500));
        assert!(f.put_key("k", 600, 70_000).unwrap());
        assert_eq!((f.begin_timestamp(), f.begin_phy_offset()), (70_000, 600));
        let mut out = Vec::new();
        f.select_phy_offsets("k", 10, 70_000, 70_000, &mut out);
        assert_eq!(out, vec![600]);
    }

    #[test]
    fn corrupt_links_end_the_walk_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = IndexFile::create(&path, 1, 4, 0, 0).unwrap();
        assert!(f.put_key("a", 1, 1_000).unwrap());
        assert!(f.put_key("a", 2, 1_000).unwrap());
        assert!(f.put_key("a", 3, 1_000).unwrap());
        assert!(f.is_full());
        // Entry 1's link points at entry 3 (a cycle 3 -> 2 -> 1 -> 3).
        let prev_of_1 = INDEX_HEADER_SIZE + HASH_SLOT_SIZE + INDEX_ENTRY_SIZE + 16;
        f.write_i32(prev_of_1, 3);
        let mut out = Vec::new();
        f.select_phy_offsets("a", 100, 0, i64::MAX, &mut out);
        assert_eq!(out, vec![3, 2, 1], "the walk is bounded by the entry count");
        // A slot pointing past the written entries is ignored.
        f.write_i32(INDEX_HEADER_SIZE, 4);
        out.clear();
        f.select_phy_offsets("a", 100, 0, i64::MAX, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn load_refuses_a_file_of_other_dimensions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        drop(IndexFile::create(&path, 4, 8, 0, 0).unwrap());
        let err = IndexFile::load(&path, 8, 8).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(IndexFile::load(&path, 4, 8).is_ok());
        assert_eq!(IndexFile::create(&path, 4, 8, 0, 0).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            IndexFile::create(&dir.path().join("g"), 0, 8, 0, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
