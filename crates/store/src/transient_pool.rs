//! The transient store pool: segment-sized buffers that take CommitLog appends before a commit
//! service copies them into the file mapping. Readers see only committed bytes. Java:
//! `TransientStorePool`, `CommitRealTimeService`.
//!
//! The pool is bounded (`transientStorePoolSize` buffers); when it is empty a new segment is
//! written directly, so appends never wait for a buffer.

use std::io;
use std::sync::{Arc, Mutex};

use crate::mapped_file::TransientBuffer;

/// A fixed set of reusable buffers.
#[derive(Debug)]
pub struct TransientStorePool {
    free: Mutex<Vec<Arc<TransientBuffer>>>,
    size: usize,
}

impl TransientStorePool {
    /// `count` buffers of `buffer_len` bytes each (anonymous memory, taken when written).
    ///
    /// # Errors
    /// A mapping failed.
    pub fn new(count: usize, buffer_len: usize) -> io::Result<TransientStorePool> {
        let free =
            (0..count).map(|_| TransientBuffer::new(buffer_len).map(Arc::new)).collect::<io::Result<Vec<_>>>()?;
        Ok(TransientStorePool { free: Mutex::new(free), size: count })
    }

    /// A free buffer, if any.
    pub fn borrow_buffer(&self) -> Option<Arc<TransientBuffer>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Gives a buffer back.
    pub fn return_buffer(&self, buffer: Arc<TransientBuffer>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.size {
            free.push(buffer);
        }
    }

    /// Buffers currently free.
    pub fn available(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
