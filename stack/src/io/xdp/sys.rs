//! The system calls behind the AF_XDP backend (Documentation/networking/af_xdp.rst): the
//! socket and its UMEM and rings, and the bpf(2) commands that create the XSKMAP, load the
//! program and attach it with a BPF link. Everything above this module is safe code.

use std::io;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use super::bpf::Insn;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone; moving it to another thread moves that
// ownership. Shared access goes through atomics or through the ring ownership protocol.
unsafe impl Send for Mmap {}

impl Mmap {
    fn new(
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: RawFd,
        offset: i64,
    ) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel chooses aliases no Rust object.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and no reference into the mapping
        // outlives `self` (every accessor borrows `self`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The UMEM: `chunks` frames of `chunk_size` bytes shared with the kernel.
///
/// A chunk belongs either to us or to the kernel, as the rings say: we only touch a chunk
/// after taking it from the RX or completion ring and before giving it to the fill or TX
/// ring. The accessors rely on the caller following that protocol, which `XdpDevice` does.
#[derive(Debug)]
pub(super) struct Umem {
    map: Mmap,
    pub(super) chunk_size: u32,
}

impl Umem {
    pub(super) fn new(chunks: u32, chunk_size: u32) -> io::Result<Umem> {
        let len = chunks as usize * chunk_size as usize;
        let map = Mmap::new(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )?;
        Ok(Umem { map, chunk_size })
    }

    /// `len` bytes at UMEM offset `addr`, if they lie inside one chunk.
    pub(super) fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (start, len) = self.bounds(addr, len)?;
        // SAFETY: start..start+len lies inside the mapping (checked by `bounds`), and the
        // chunk is ours under the ring protocol, so the kernel does not write it meanwhile.
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr.as_ptr().add(start), len) })
    }

    /// `len` bytes at UMEM offset `addr`, across chunks (a transmit slot of adjacent
    /// chunks), if they lie inside the UMEM.
    pub(super) fn span_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        (start.checked_add(len)? <= self.map.len).then_some(())?;
        // SAFETY: start..start+len lies inside the mapping (checked above); the caller owns
        // every chunk of the span under the ring protocol (a free transmit slot), so the
        // kernel does not touch it meanwhile, and `&mut self` makes this the only reference
        // we hold into it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(start), len) })
    }

    fn bounds(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let start = usize::try_from(addr).ok()?;
        let chunk = self.chunk_size as usize;
        let end = start.checked_add(len)?;
        (end <= self.map.len && start / chunk == (end.max(1) - 1) / chunk).then_some((start, len))
    }
}

/// One of the four rings, mapped from the socket: a producer index, a consumer index, a flags
/// word and `size` entries of `T` (`u64` addresses or `xdp_desc`).
#[derive(Debug)]
pub(super) struct Ring<T> {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    descs: usize,
    pub(super) size: u32,
    entries: PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the offset comes from XDP_MMAP_OFFSETS, inside the mapping, 4-byte aligned;
        // the kernel accesses these words atomically too.
        unsafe { &*self.map.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    pub(super) fn producer(&self) -> &AtomicU32 {
        self.index(self.producer)
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        self.index(self.consumer)
    }

    pub(super) fn flags(&self) -> &AtomicU32 {
        self.index(self.flags)
    }

    /// Where entry `i` lives (wrapped to the ring size, a power of two).
    fn slot(&self, i: u32) -> *mut T {
        let slot = (i & (self.size - 1)) as usize;
        // SAFETY: slot < size, and the mapping holds `size` entries of T from `descs`
        // (its length was computed from the same numbers in `map_ring`).
        unsafe { self.map.ptr.as_ptr().add(self.descs).cast::<T>().add(slot) }
    }

    pub(super) fn read(&self, i: u32) -> T {
        // SAFETY: the slot is inside the mapping and aligned for T; the caller read the
        // producer index with Acquire before reading an entry it covers.
        unsafe { self.slot(i).read() }
    }

    pub(super) fn write(&mut self, i: u32, value: T) {
        // SAFETY: as in `read`; the slot is free (the consumer index passed it), and the
        // caller publishes it with a Release store of the producer index.
        unsafe { self.slot(i).write(value) }
    }
}

/// An AF_XDP socket.
pub(super) fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the descriptor returned is owned by nobody else.
    let fd = check(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is a fresh, valid descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: value points to a live T of the given size, as the option expects.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn getsockopt<T: Copy>(fd: &OwnedFd, name: libc::c_int, zero: T) -> io::Result<T> {
    let mut value = zero;
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a live, writable T and len says its size.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

pub(super) fn register_umem(fd: &OwnedFd, umem: &Umem) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: umem.map.ptr.as_ptr() as u64,
        len: umem.map.len as u64,
        chunk_size: umem.chunk_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(fd, libc::XDP_UMEM_REG, &reg)
}

/// Which ring to size and map.
#[derive(Debug, Clone, Copy)]
pub(super) enum RingKind {
    Fill,
    Completion,
    Rx,
    Tx,
}

pub(super) fn set_ring_size(fd: &OwnedFd, kind: RingKind, size: u32) -> io::Result<()> {
    let name = match kind {
        RingKind::Fill => libc::XDP_UMEM_FILL_RING,
        RingKind::Completion => libc::XDP_UMEM_COMPLETION_RING,
        RingKind::Rx => libc::XDP_RX_RING,
        RingKind::Tx => libc::XDP_TX_RING,
    };
    setsockopt(fd, name, &size)
}

/// Maps a ring whose size was set; `T` must be the ring's entry type (`u64` for fill and
/// completion, `xdp_desc` for RX and TX).
pub(super) fn map_ring<T>(fd: &OwnedFd, kind: RingKind, size: u32) -> io::Result<Ring<T>> {
    // SAFETY: xdp_mmap_offsets is plain integers; all zeroes is valid.
    let zero: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let offsets = getsockopt(fd, libc::XDP_MMAP_OFFSETS, zero)?;
    let (off, pgoff) = match kind {
        RingKind::Fill => (offsets.fr, libc::XDP_UMEM_PGOFF_FILL_RING as i64),
        RingKind::Completion => (offsets.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64),
        RingKind::Rx => (offsets.rx, libc::XDP_PGOFF_RX_RING),
        RingKind::Tx => (offsets.tx, libc::XDP_PGOFF_TX_RING),
    };
    let len = off.desc as usize + size as usize * size_of::<T>();
    let map = Mmap::new(
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_POPULATE,
        fd.as_raw_fd(),
        pgoff,
    )?;
    Ok(Ring {
        map,
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        descs: off.desc as usize,
        size,
        entries: PhantomData,
    })
}

pub(super) fn bind(fd: &OwnedFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: addr is a valid sockaddr_xdp and the length says so.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Asks the kernel to process the TX ring (copy mode sends only from this call).
pub(super) fn kick(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address touches no memory of ours.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wakes the driver to refill its receive queue from the fill ring (need_wakeup mode).
pub(super) fn wake_rx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length receive with no buffer touches no memory of ours.
    let rc = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn statistics(fd: &OwnedFd) -> io::Result<libc::xdp_statistics> {
    // SAFETY: xdp_statistics is plain integers; all zeroes is valid.
    let zero: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    getsockopt(fd, libc::XDP_STATISTICS, zero)
}

// bpf(2): commands, types and the parts of `union bpf_attr` each command reads.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// bpf(cmd, attr) for a command that returns a new descriptor (or 0).
fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, correctly laid out prefix of `union bpf_attr` for `cmd`, and
    // every pointer inside it refers to memory that outlives the call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut A, size_of::<A>() as u32) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("bpf returned a bad descriptor"))?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (dst, src) in out.iter_mut().zip(name.bytes().take(15)) {
        *dst = src;
    }
    out
}

pub(super) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: name16("roce_xsks"),
        ..MapCreate::default()
    };
    owned(bpf(BPF_MAP_CREATE, &mut attr)?)
}

pub(super) fn map_update(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapUpdate {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapUpdate::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// BPF_F_XDP_HAS_FRAGS: the program copes with frames in several buffers (it reads only the
/// headers, which are in the first), so drivers accept it on links whose MTU exceeds a page.
pub(super) const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// Loads an XDP program with `prog_flags`; on failure the verifier's log is appended to the
/// error.
pub(super) fn load_xdp(insns: &[Insn], license: &str, prog_flags: u32) -> io::Result<OwnedFd> {
    let license = std::ffi::CString::new(license)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name16("roce_xsk_redir"),
        expected_attach_type: BPF_XDP,
        prog_flags,
        ..ProgLoad::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => owned(fd),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            if end == 0 {
                return Err(e);
            }
            let log = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                e.kind(),
                format!("{e}; verifier log:\n{log}"),
            ))
        }
    }
}

/// Attaches `prog` to `ifindex` with a BPF link; the program is detached when the returned
/// descriptor is closed, even if the process dies.
pub(super) fn link_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    owned(bpf(BPF_LINK_CREATE, &mut attr)?)
}
