//! Block reservation for files the store maps.
//!
//! A page of a shared file mapping whose blocks the filesystem cannot allocate kills the
//! process with SIGBUS when it is touched: a write fault on ext4 or XFS, and on tmpfs even a
//! read fault on a hole. So no page of a mapped file is ever touched before its blocks are
//! reserved with `fallocate` (or, where that is not supported, written as zeros by a write
//! call). A reservation that fails is an ordinary `StorageFull` error naming the file and the
//! free space, which the store turns into a refused write; nothing has touched the mapping.
//!
//! Files are reserved in steps ahead of their writer, not whole: a 1 GiB CommitLog segment
//! holds only the blocks its data and one step beyond need, so a fresh store takes megabytes of
//! disk, not gigabytes.

#![allow(unsafe_code)] // fallocate, lseek and fstatvfs on descriptors the caller owns.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Free bytes (available to unprivileged users) and the usable size (used + that) of the
/// filesystem holding `file`.
///
/// # Errors
/// `fstatvfs` failed.
#[allow(clippy::unnecessary_cast)] // `fsblkcnt_t` is u32 on some targets and u64 on others.
pub fn free_space(file: &File) -> io::Result<(u64, u64)> {
    let mut buf = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: the descriptor is open for the call and `buf` is writable memory of the type
    // `fstatvfs` fills in; it is read only after the call reported success.
    let stat = unsafe {
        if libc::fstatvfs(file.as_raw_fd(), buf.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        buf.assume_init()
    };
    let block = stat.f_frsize as u64;
    // As Java's `UtilAll.getDiskPartitionSpaceUsedPercent` sees the disk: what is used plus
    // what is available to unprivileged users (blocks reserved for root count as neither).
    let used = (stat.f_blocks as u64).saturating_sub(stat.f_bfree as u64);
    let available = stat.f_bavail as u64;
    Ok((available.saturating_mul(block), used.saturating_add(available).saturating_mul(block)))
}

/// The error of a reservation that did not fit: `StorageFull`, naming the path and the space.
pub fn storage_full(path: &Path, wanted: u64, free: Option<u64>, cause: &io::Error) -> io::Error {
    let free = free.map_or_else(|| "unknown".to_owned(), |f| f.to_string());
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "disk full: cannot reserve {wanted} bytes for {} ({free} bytes free on its filesystem: {cause}); \
             free space there or move storePathRootDir",
            path.display()
        ),
    )
}

/// Whether `e` means the filesystem has no room (ENOSPC, EDQUOT).
pub fn is_no_space(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Allocates the blocks of `[offset, offset + len)` of `file` without changing what it reads
/// as. Where `fallocate` is not supported the range is written back with its own bytes.
/// `path` names the file in errors.
///
/// # Errors
/// `StorageFull` (see [`storage_full`]) when the filesystem has no room; other I/O errors.
pub fn reserve(file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "reservation out of range"));
    };
    // SAFETY: a plain system call on a descriptor the caller keeps open; mode 0 allocates
    // blocks for the range (unwritten extents read as zeros) and never discards data.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, l) };
    let result = if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => rewrite_in_place(file, offset, len),
            _ => Err(e),
        }
    };
    result.map_err(|e| reservation_error(file, path, len, &e))
}

/// A failed reservation of `len` bytes as the store reports it: [`storage_full`] for want of
/// space, else the error naming the file.
fn reservation_error(file: &File, path: &Path, len: u64, e: &io::Error) -> io::Error {
    if is_no_space(e) {
        storage_full(path, len, free_space(file).ok().map(|(free, _)| free), e)
    } else {
        io::Error::new(e.kind(), format!("cannot reserve {len} bytes for {}: {e}", path.display()))
    }
}

/// Allocates `[offset, offset + len)` by writing zeros and forcing them to disk: the blocks
/// are then plain written blocks, so a later write there is a data write only. `fallocate`
/// leaves unwritten extents instead, which the filesystem converts (a metadata change in its
/// journal) at the first flush of each part written: a cost every SYNC_FLUSH group commit
/// pays (measured in docs/benchmarks.md). The range must hold no data.
///
/// # Errors
/// As [`reserve`].
pub fn reserve_zeroed(file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    write_zeros(file, offset, len).and_then(|()| file.sync_data()).map_err(|e| reservation_error(file, path, len, &e))
}

/// Without `fallocate`: writes the range back with what it reads as (its data, or zeros where
/// it is a hole), which allocates its blocks and changes no byte.
fn rewrite_in_place(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; (1 << 20).min(len as usize)];
    let mut at = 0;
    while at < len {
        let n = (buf.len() as u64).min(len - at) as usize;
        let chunk = &mut buf[..n];
        let mut got = 0;
        while got < n {
            match file.read_at(&mut chunk[got..], offset + at + got as u64)? {
                0 => break,
                k => got += k,
            }
        }
        chunk[got..].fill(0);
        file.write_all_at(chunk, offset + at)?;
        at += n as u64;
    }
    Ok(())
}

/// Writes zeros over `[offset, offset + len)` with write calls (no sync).
///
/// # Errors
/// The first failed write.
pub(crate) fn write_zeros(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; (1 << 20).min(len as usize)];
    let mut at = 0;
    while at < len {
        let n = (zeros.len() as u64).min(len - at) as usize;
        file.write_all_at(&zeros[..n], offset + at)?;
        at += n as u64;
    }
    Ok(())
}

/// Gives back the blocks of `[offset, offset + len)`, which then read as zeros (the file keeps
/// its size). Returns false where punching holes is not supported.
///
/// # Errors
/// Other I/O errors.
pub fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    let (Ok(off), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "hole out of range"));
    };
    // SAFETY: a plain system call on a descriptor the caller keeps open.
    let rc =
        unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, off, l) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(false),
        _ => Err(e),
    }
}

/// Where the first hole of `file` starts (its length when it has none): everything written
/// lies below it, since the store writes files front to back. Blocks can be smaller than a
/// page (ext4 on a small disk has 1 KiB blocks), so the page holding this offset may be part
/// data, part hole: round up to read it, down to know which pages need no reservation.
///
/// # Errors
/// `lseek` failed for another reason than the filesystem not knowing about holes (then the
/// whole file is taken as allocated, as it is on such filesystems).
pub fn allocated_prefix(file: &File, len: u64) -> io::Result<u64> {
    // SAFETY: a plain system call on a descriptor the caller keeps open. The file position it
    // moves is not used by the store, which reads and writes at explicit offsets.
    let at = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    if at < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(len),
            Some(libc::ENXIO) => Ok(0),
            _ => Err(e),
        };
    }
    Ok((at as u64).min(len))
}

/// A set of a file's pages, one bit each: for files written at scattered places (the index
/// file, the timer wheel), which pages may hold data or have blocks reserved.
#[derive(Debug, Clone)]
pub struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    /// No page of a file of `file_len` bytes.
    pub fn empty(file_len: usize) -> PageSet {
        PageSet { bits: vec![0; file_len.div_ceil(crate::OS_PAGE_SIZE).div_ceil(64)] }
    }

    /// The pages of `file` (`file_len` bytes) that hold data, rounded outward: a page only
    /// partly data (blocks smaller than a page) is in the set, as reading it faults in no
    /// block.
    ///
    /// # Errors
    /// `lseek` failed (other than for a filesystem that does not tell data from holes).
    pub fn with_data(file: &File, file_len: usize) -> io::Result<PageSet> {
        let mut set = PageSet::empty(file_len);
        for (start, end) in allocated_ranges(file, file_len as u64)? {
            set.insert_range(start as usize, (end - start) as usize);
        }
        Ok(set)
    }

    fn pages(pos: usize, len: usize) -> std::ops::Range<usize> {
        pos / crate::OS_PAGE_SIZE..(pos + len).div_ceil(crate::OS_PAGE_SIZE)
    }

    /// Whether `page` (its number) is in the set.
    pub fn contains(&self, page: usize) -> bool {
        self.bits[page / 64] & (1 << (page % 64)) != 0
    }

    /// Whether every page of `[pos, pos + len)` is in the set.
    pub fn covers(&self, pos: usize, len: usize) -> bool {
        PageSet::pages(pos, len).all(|page| self.contains(page))
    }

    /// Adds `page`.
    pub fn insert(&mut self, page: usize) {
        self.bits[page / 64] |= 1 << (page % 64);
    }

    /// Adds every page of `[pos, pos + len)`.
    pub fn insert_range(&mut self, pos: usize, len: usize) {
        for page in PageSet::pages(pos, len) {
            self.insert(page);
        }
    }

    /// The pages of `[pos, pos + len)` not in the set, by number.
    pub fn missing(&self, pos: usize, len: usize) -> impl Iterator<Item = usize> + '_ {
        PageSet::pages(pos, len).filter(|page| !self.contains(*page))
    }
}

/// The ranges of `file` (of `len` bytes) that hold data, by `SEEK_DATA` / `SEEK_HOLE`; the
/// whole file when the filesystem does not tell.
///
/// # Errors
/// `lseek` failed for another reason.
fn allocated_ranges(file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let mut ranges = Vec::new();
    let mut at = 0u64;
    while at < len {
        let Ok(from) = libc::off_t::try_from(at) else { break };
        // SAFETY: plain system calls on a descriptor the caller keeps open; the file position
        // they move is not used by the store.
        let data = unsafe { libc::lseek(file.as_raw_fd(), from, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENXIO) => Ok(ranges),
                Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(vec![(0, len)]),
                _ => Err(e),
            };
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(file.as_raw_fd(), data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let (data, hole) = (data as u64, (hole as u64).min(len));
        if hole <= data {
            break;
        }
        ranges.push((data, hole));
        at = hole;
    }
    Ok(ranges)
}

/// Writes every dirty page of the file system holding `dir` to disk (`syncfs`): one call for
/// thousands of small files, where an `msync` or `fsync` each would wait for each in turn.
///
/// # Errors
/// Opening `dir` or the sync failed.
pub(crate) fn sync_file_system(dir: &std::path::Path) -> io::Result<()> {
    let dir = File::open(dir)?;
    // SAFETY: `syncfs` only reads the descriptor, which `dir` keeps open for the call.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocated_bytes(file: &File) -> u64 {
        use std::os::unix::fs::MetadataExt;
        file.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn a_reserved_range_is_allocated_and_a_punched_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).unwrap();
        file.set_len(1 << 20).unwrap();
        assert_eq!(allocated_prefix(&file, 1 << 20).unwrap(), 0, "a sparse file starts with a hole");
        assert_eq!(allocated_bytes(&file), 0);
        reserve(&file, &path, 0, 256 * 1024).unwrap();
        assert!(allocated_bytes(&file) >= 256 * 1024);
        let mut buf = [1u8; 8];
        file.read_exact_at(&mut buf, 1000).unwrap();
        assert_eq!(buf, [0; 8], "reserved blocks read as zeros");
        // Written data counts as allocated on every filesystem (ext4 reports reserved blocks
        // nothing was written to as a hole, tmpfs as data: both are safe to read).
        file.write_all_at(&[7u8; 8192], 0).unwrap();
        assert!(allocated_prefix(&file, 1 << 20).unwrap() >= 8192);
        let ranges = allocated_ranges(&file, 1 << 20).unwrap();
        assert!(ranges.first().is_some_and(|&(from, to)| from == 0 && to >= 8192), "{ranges:?}");
        if punch_hole(&file, 128 * 1024, 128 * 1024).unwrap() {
            assert!(allocated_bytes(&file) < 256 * 1024);
        }
        reserve(&file, &path, 0, 1 << 20).unwrap();
        assert!(allocated_bytes(&file) >= 1 << 20);
    }

    #[test]
    fn no_space_is_storage_full_naming_the_path_and_free_space() {
        let e = storage_full(Path::new("/x/y"), 10, Some(3), &io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        let text = e.to_string();
        assert!(text.contains("/x/y") && text.contains("3 bytes free"), "{text}");
        assert!(is_no_space(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(!is_no_space(&io::Error::from_raw_os_error(libc::EIO)));
    }
}
