//! The one unsafe thing capture reading does: map a file read-only into memory (mmap(2)).
//!
//! A mapping is only as stable as the file: if another process truncates the file while it
//! is mapped, touching the lost pages raises SIGBUS. Captures being analysed are not rewritten
//! in place; a capture still being written is read with [`super::CaptureReader::new`]
//! instead.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// Granularity of madvise ranges (the smallest page size; larger ones are multiples).
const PAGE: usize = 4096;

/// A read-only private mapping of a whole file.
pub(super) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; sending it sends immutable
// bytes.
unsafe impl Send for Mapping {}
// SAFETY: as above; nothing mutates the bytes through this value.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `file`; `None` for what cannot be mapped (an empty file, a pipe, a device).
    pub(super) fn new(file: &File) -> io::Result<Option<Mapping>> {
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() == 0 {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(meta.len()) else {
            return Ok(None);
        };
        // SAFETY: a fresh read-only private mapping of `len` bytes of an open file descriptor;
        // the kernel chooses the address, and failure is checked before the pointer is used.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Ok(None);
        }
        Ok(NonNull::new(ptr.cast::<u8>()).map(|ptr| Mapping { ptr, len }))
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping covers `len` readable bytes from `ptr` and lives as long as
        // `self`; it is never written (PROT_READ).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The page-aligned part of `start..end` that lies in the mapping, as madvise takes it.
    fn pages(&self, start: usize, end: usize) -> Option<(*mut libc::c_void, usize)> {
        let start = start - start % PAGE;
        let end = end.min(self.len);
        (start < end).then(|| (self.ptr.as_ptr().wrapping_add(start).cast(), end - start))
    }

    /// Drops the pages before `end` from this process (they stay in the page cache), so that
    /// its memory does not grow with the file.
    pub(super) fn release(&self, end: usize) {
        if let Some((ptr, len)) = self.pages(0, end - end % PAGE) {
            // SAFETY: the range lies within the mapping (`pages`). For a private file mapping
            // that is never written, MADV_DONTNEED only drops page table entries: a later read
            // faults the same file bytes back in, so no slice of the mapping ever changes.
            unsafe {
                libc::madvise(ptr, len, libc::MADV_DONTNEED);
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
