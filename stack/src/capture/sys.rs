//! The one unsafe thing capture reading does: map a file read-only into memory (mmap(2)).
//!
//! A mapping is only as stable as the file: if another process truncates the file while it
//! is mapped, touching the lost pages raises SIGBUS, which would kill the process without a
//! word (issue 14: `roce analyze BIG.pcap & truncate -s 100000 BIG.pcap`). So every mapping
//! is registered with a SIGBUS handler: a fault inside one replaces the rest of that mapping
//! with zero pages (the read that faulted then goes on and reads zeros) and marks it
//! [`Mapping::shrunk`]; the reader checks the mark after every record and reports the file as
//! damaged. A fault anywhere else goes to the handler that was there before (Rust's own, or
//! the default, which ends the process as it would have).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Granularity of madvise ranges (the smallest page size; larger ones are multiples).
const PAGE: usize = 4096;

/// Mappings the SIGBUS handler can repair at once; a file mapped beyond them is streamed.
const SLOTS: usize = 64;

/// Per slot: claimed, the mapped address range (`start` 0 while not armed), and whether a
/// fault hit it. Plain atomics, so that the signal handler may read and write them.
static CLAIMED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static ENDS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static SHRUNK: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

/// The SIGBUS action before ours, and the system's page size; set once, before any mapping
/// is armed.
static PREVIOUS: OnceLock<(libc::sigaction, usize)> = OnceLock::new();

/// A read-only private mapping of a whole file.
pub(super) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    slot: usize,
    /// The file, to learn its length where a fault cannot tell (see [`Mapping::touch`]).
    file: File,
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
        let Some(ptr) = NonNull::new(ptr.cast::<u8>()) else {
            return Ok(None);
        };
        let Some(slot) = arm(ptr.as_ptr() as usize, len) else {
            // No slot for the handler: unmap and let the caller stream the file instead.
            // SAFETY: unmaps exactly the mapping made above, which nothing else refers to.
            unsafe {
                libc::munmap(ptr.as_ptr().cast(), len);
            }
            return Ok(None);
        };
        let file = file.try_clone()?;
        Ok(Some(Mapping {
            ptr,
            len,
            slot,
            file,
        }))
    }

    /// Makes sure the bytes `start..end` are still the file's before they are handed out:
    /// the last of them and the first of the next page are read, so that a lost page faults
    /// now (a file shrinks from its end: if those are there, all before them is). Bytes lost
    /// inside the file's last page read as zeros without a fault, so there the file's length
    /// is asked. Afterwards [`Mapping::shrunk`] says whether the file shrank.
    #[inline]
    pub(super) fn touch(&self, start: usize, end: usize) {
        let bytes = self.bytes();
        let page = PREVIOUS.get().map_or(PAGE, |p| p.1.max(1));
        let next_page = end.next_multiple_of(page);
        for at in [end.checked_sub(1).filter(|&i| i >= start), Some(next_page)] {
            if let Some(byte) = at.and_then(|i| bytes.get(i)) {
                std::hint::black_box(*byte);
            }
        }
        if next_page >= self.len && start < end {
            let now = self.file.metadata().map_or(0, |m| m.len());
            if now < end as u64 {
                SHRUNK[self.slot].store(true, Ordering::Release);
            }
        }
    }

    /// True once the file was found shorter than when it was mapped: from the first lost
    /// page on, the mapping reads as zeros.
    pub(super) fn shrunk(&self) -> bool {
        SHRUNK[self.slot].load(Ordering::Acquire)
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

/// The cache line of the CPUs this runs on (x86-64, and most others).
pub(super) const CACHE_LINE: usize = 64;

/// Asks the CPU to start bringing the cache line of `bytes[0]` into its caches, so that a read
/// of it a little later does not wait for memory. A hint only: nothing is read or written.
#[inline(always)]
pub(super) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and changes no memory, whatever the address; this one
    // is the start of a live slice.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Disarmed first: a fault after this is not ours to repair.
        STARTS[self.slot].store(0, Ordering::Release);
        // SAFETY: unmaps exactly the mapping made in `new`; no slice of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
        CLAIMED[self.slot].store(false, Ordering::Release);
    }
}

/// Registers `start..start + len` with the SIGBUS handler (installing it the first time);
/// the slot, or `None` when every slot is taken or the handler cannot be installed.
fn arm(start: usize, len: usize) -> Option<usize> {
    install()?;
    let slot = (0..SLOTS).find(|&i| {
        CLAIMED[i]
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    SHRUNK[slot].store(false, Ordering::Relaxed);
    ENDS[slot].store(start + len, Ordering::Relaxed);
    STARTS[slot].store(start, Ordering::Release);
    Some(slot)
}

/// Installs [`on_sigbus`] once; `None` if the system refused.
fn install() -> Option<()> {
    let installed = PREVIOUS.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(PAGE);
        // SAFETY: a zeroed sigaction is a valid value (no handler, empty mask, no flags);
        // the fields set below make it ours.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as extern "C" fn(_, _, _) as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: as above.
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to valid sigaction values; SIGBUS may be caught.
        let ok = unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, &mut previous)
        } == 0;
        // A page size of 0 marks the failure: no mapping is ever armed then.
        (previous, if ok { page.max(1) } else { 0 })
    });
    (installed.1 != 0).then_some(())
}

/// The SIGBUS handler. Only async-signal-safe work: atomics, mmap(2), sigaction(2).
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PREVIOUS.get().map_or(PAGE, |p| p.1.max(1));
    for slot in 0..SLOTS {
        let start = STARTS[slot].load(Ordering::Acquire);
        let end = ENDS[slot].load(Ordering::Acquire);
        if start == 0 || !(start..end).contains(&addr) {
            continue;
        }
        let from = addr - addr % page;
        // SAFETY: `from..end` lies inside a live mapping of ours (armed until it is unmapped);
        // MAP_FIXED swaps those pages for fresh zero pages, which the reader then sees instead
        // of the lost file bytes. Nothing holds a reference the swap could invalidate: the
        // bytes were read-only and become other read-only bytes at the same addresses.
        let swapped = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if swapped != libc::MAP_FAILED {
            SHRUNK[slot].store(true, Ordering::Release);
            return;
        }
    }
    chain(signal, info, context);
}

/// Hands a fault that is not ours to the action installed before.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.get().map(|p| p.0);
    match previous {
        Some(p)
            if p.sa_flags & libc::SA_SIGINFO != 0
                && p.sa_sigaction != libc::SIG_DFL
                && p.sa_sigaction != libc::SIG_IGN =>
        {
            // SAFETY: the previous action was installed with SA_SIGINFO, so its handler has
            // this signature; it receives what the kernel gave us.
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(p.sa_sigaction) };
            handler(signal, info, context);
        }
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: a handler installed without SA_SIGINFO takes the signal number alone.
            let handler: extern "C" fn(libc::c_int) =
                unsafe { std::mem::transmute(p.sa_sigaction) };
            handler(signal);
        }
        _ => {
            // The default action: returning re-executes the faulting access, which now ends
            // the process with SIGBUS as it would have without us.
            // SAFETY: a zeroed sigaction with SIG_DFL (0) is the default action.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}
