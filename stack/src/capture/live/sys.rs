//! The system calls behind live capture (packet(7), Documentation/networking/packet_mmap.rst):
//! an AF_PACKET socket bound to one interface with a TPACKET_V3 receive ring mapped into
//! memory, the interface put in promiscuous mode through a packet membership (which the kernel
//! counts and drops when the socket closes, so the interface is never left changed), and the
//! SIGINT/SIGTERM flag that ends a capture cleanly. Everything above this module is safe code.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid, initialised T for the duration of the call and the length
    // passed is its size; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// The index of interface `name` (if_nametoindex(3)); ENODEV when there is none.
pub(super) fn interface_index(name: &str) -> io::Result<u32> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?} (1 to 15 bytes)"),
        ));
    }
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the interface name"))?;
    // SAFETY: c_name is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

/// One captured frame's place in the ring and what the kernel said about it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    /// Offset of the frame's first byte (its MAC header) in the ring.
    pub(super) data: usize,
    pub(super) snaplen: u32,
    pub(super) len: u32,
    pub(super) sec: u32,
    pub(super) nsec: u32,
    /// The 802.1Q tag the kernel (or the NIC) took off the frame, as (TPID, TCI).
    pub(super) vlan: Option<(u16, u16)>,
}

/// An AF_PACKET socket with its mapped TPACKET_V3 receive ring of `blocks` blocks.
///
/// A block belongs to the kernel until its status has TP_STATUS_USER; then it is ours until
/// we write TP_STATUS_KERNEL back. [`Ring::block`] and [`Ring::release`] keep to that: the
/// frames of a block are read only between the two.
#[derive(Debug)]
pub(super) struct Ring {
    fd: OwnedFd,
    map: NonNull<u8>,
    block_size: usize,
    blocks: usize,
}

// SAFETY: the ring mapping is owned by this value alone; moving it to another thread moves
// that ownership (the kernel side synchronises through the block status words).
unsafe impl Send for Ring {}

/// Bytes of a TPACKET_V3 block header before its first frame can start.
const BLOCK_HEADER: usize = size_of::<libc::tpacket_block_desc>();

impl Ring {
    /// Opens the socket, sets up a ring of `blocks` blocks of `block_size` bytes (a multiple
    /// of the page size, each holding whole frames) that the kernel hands over at the latest
    /// `retire` after a block's first frame, and binds it to interface `ifindex`.
    pub(super) fn open(
        ifindex: u32,
        block_size: u32,
        blocks: u32,
        retire: Duration,
    ) -> io::Result<Ring> {
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); the descriptor is checked before it is owned.
        let raw = check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, all.into()) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(
            &fd,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )?;
        // Frames are variable-sized in a V3 block; the frame size only sizes the request.
        let frame_size = 2048;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size,
            tp_block_nr: blocks,
            tp_frame_size: frame_size,
            tp_frame_nr: block_size / frame_size * blocks,
            tp_retire_blk_tov: retire.as_millis().clamp(1, 1000) as u32,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::PACKET_RX_RING, &req)?;
        let len = block_size as usize * blocks as usize;
        // SAFETY: maps the ring the kernel just allocated for this socket, at an address the
        // kernel chooses (aliasing no Rust object); failure is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        let ring = Ring {
            fd,
            map,
            block_size: block_size as usize,
            blocks: blocks as usize,
        };
        // SAFETY: sockaddr_ll is plain data; all zeroes is valid before the fields are set.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = all;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid sockaddr_ll and the length passed is its size.
        check(unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        // Promiscuous through a membership: the kernel counts it per socket and takes it back
        // when the socket closes, whatever else set or clears IFF_PROMISC meanwhile.
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex as i32,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(&ring.fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
        Ok(ring)
    }

    pub(super) fn blocks(&self) -> usize {
        self.blocks
    }

    /// The status word of block `b`, which the kernel and we hand the block over with.
    fn status(&self, b: usize) -> &AtomicU32 {
        let offset = b * self.block_size
            + std::mem::offset_of!(libc::tpacket_block_desc, hdr)
            + std::mem::offset_of!(libc::tpacket_hdr_v1, block_status);
        // SAFETY: `b < blocks`, so the word lies inside the mapping, 4-byte aligned (blocks are
        // page-aligned and the offset is that of a u32 field); the kernel writes it
        // concurrently, which is why it is only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.map.as_ptr().add(offset).cast()) }
    }

    /// Waits at most `timeout` for block `b` to be handed to us; true when it is.
    pub(super) fn wait(&self, b: usize, timeout: Duration) -> io::Result<bool> {
        if self.status(b).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0 {
            return Ok(true);
        }
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd, exclusively borrowed for the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // A signal (the stop flag's) ends the wait early; the caller looks at the flag.
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if self.status(b).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0 {
            return Ok(true);
        }
        if pfd.revents & libc::POLLERR != 0 {
            // The socket's pending error (ENETDOWN once the interface is gone): poll would
            // report it at once on every call from now on.
            return Err(self.socket_error());
        }
        Ok(false)
    }

    /// The error pending on the socket (SO_ERROR), which reading it clears.
    fn socket_error(&self) -> io::Error {
        let mut err: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` is a valid c_int and `len` its size; the kernel writes at most `len`
        // bytes into it.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            io::Error::last_os_error()
        } else if err == 0 {
            io::Error::other("the socket reported an error and then none")
        } else {
            io::Error::from_raw_os_error(err)
        }
    }

    /// The frames of block `b`, which must be ours ([`Ring::wait`] said so), in order. A
    /// frame whose place the block header does not vouch for ends the list (the kernel never
    /// writes one; this keeps a confused kernel from making us read outside the block).
    pub(super) fn block(&self, b: usize, out: &mut Vec<Slot>) {
        out.clear();
        let base = b * self.block_size;
        let block = &self.bytes()[base..base + self.block_size];
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(block.get(at..at + 4)?.try_into().ok()?))
        };
        let half = |at: usize| -> u16 {
            block
                .get(at..at + 2)
                .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]))
        };
        let h1 = std::mem::offset_of!(libc::tpacket_block_desc, hdr);
        let field = |f: usize| word(h1 + f).unwrap_or(0);
        let num = field(std::mem::offset_of!(libc::tpacket_hdr_v1, num_pkts));
        let mut at = field(std::mem::offset_of!(
            libc::tpacket_hdr_v1,
            offset_to_first_pkt
        )) as usize;
        let hdr = size_of::<libc::tpacket3_hdr>();
        for _ in 0..num {
            if at < BLOCK_HEADER || at + hdr > block.len() {
                break;
            }
            let f = |o: usize| word(at + o).unwrap_or(0);
            let status = f(std::mem::offset_of!(libc::tpacket3_hdr, tp_status));
            let mac = half(at + std::mem::offset_of!(libc::tpacket3_hdr, tp_mac)) as usize;
            let snaplen = f(std::mem::offset_of!(libc::tpacket3_hdr, tp_snaplen));
            let data = at + mac;
            if data + snaplen as usize > block.len() {
                break;
            }
            let hv1 = std::mem::offset_of!(libc::tpacket3_hdr, hv1);
            let tci = f(hv1 + std::mem::offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci));
            let tpid =
                half(at + hv1 + std::mem::offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid));
            let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    tpid
                } else {
                    crate::wire::encap::ETHERTYPE_VLAN
                };
                (tpid, tci as u16)
            });
            out.push(Slot {
                data: base + data,
                snaplen,
                len: f(std::mem::offset_of!(libc::tpacket3_hdr, tp_len)),
                sec: f(std::mem::offset_of!(libc::tpacket3_hdr, tp_sec)),
                nsec: f(std::mem::offset_of!(libc::tpacket3_hdr, tp_nsec)),
                vlan,
            });
            let next = f(std::mem::offset_of!(libc::tpacket3_hdr, tp_next_offset)) as usize;
            if next == 0 {
                break;
            }
            at += next;
        }
    }

    /// Hands block `b` back to the kernel; no slot of it may be read afterwards.
    pub(super) fn release(&self, b: usize) {
        self.status(b)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// The whole ring. Blocks the kernel owns may change under this view; only the blocks
    /// handed to us ([`Ring::wait`]) are read through it, until [`Ring::release`].
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `block_size * blocks` bytes, readable, and lives as long as
        // `self`. Bytes of blocks the kernel owns can change, but are not read (see above).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.block_size * self.blocks) }
    }

    /// The kernel's counts since the last call (it resets them on reading): frames it passed
    /// to the socket and frames it dropped for want of room in the ring.
    pub(super) fn statistics(&self) -> io::Result<(u64, u64)> {
        let mut stats = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `stats` is a valid tpacket_stats_v3 and `len` its size; the kernel writes at
        // most `len` bytes into it and updates `len`.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        })?;
        Ok((u64::from(stats.tp_packets), u64::from(stats.tp_drops)))
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: map/len are exactly what mmap returned, and no reference into the mapping
        // outlives `self` (every accessor borrows `self`). The socket closes after this.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.block_size * self.blocks) };
    }
}

/// Set by the SIGINT/SIGTERM handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM: the first of them sets the flag (and makes
/// a blocked poll(2) return), the next one acts as if no handler were there (SA_RESETHAND),
/// so a second Ctrl-C still ends a capture that does not stop.
pub(super) fn catch_stop_signals() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; all zeroes is valid before the fields are set.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND;
        // SAFETY: `action.sa_mask` is a valid sigset_t to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installs a handler that only stores to an atomic (async-signal-safe); the
        // previous action is not needed.
        check(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })?;
    }
    Ok(())
}

pub(super) fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
