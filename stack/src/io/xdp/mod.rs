//! AF_XDP on an existing interface (a veth end, a NIC queue): frames move through a UMEM
//! shared with the kernel and four single-producer rings, steered to the socket by a small
//! XDP program, with one system call per batch of transmitted frames and none per received
//! frame.
//!
//! # Why no xsk-rs
//! xsk-rs (MIT) drives libxdp and libbpf through libxdp-sys, which builds libxdp from source:
//! that needs clang to compile libxdp's BPF dispatcher objects, libelf and zlib headers, and at
//! run time libxdp looks for those objects on disk. Debian ships libbpf 1.1 and libxdp, so it
//! is possible, but every developer machine and CI would need the toolchain, for what amounts
//! to a handful of system calls. Here instead: `libc` for the socket, UMEM and rings
//! ([`sys`]), and the redirect program assembled as two dozen eBPF instructions ([`bpf`]),
//! loaded with bpf(2) and attached with a BPF link, which the kernel removes when the device
//! is dropped or the process dies, so no stale program is left on the interface. (The
//! licences were not the obstacle: libxdp and libbpf are LGPL-2.1 OR BSD-2-Clause.)
//!
//! # Limits
//! One queue (`queue`, default 0): on a multi-queue NIC, steer RoCE to it or set one channel.
//! Where the kernel has AF_XDP multi-buffer (XDP_USE_SG, Linux 6.6), a frame larger than a
//! chunk spans several descriptors, each but the last flagged XDP_PKT_CONTD
//! (Documentation/networking/af_xdp.rst), and the link's MTU bounds frames: a RoCE path MTU
//! of 4096 needs a link MTU of 4096 + 78 or more. Received chains are joined in a buffer
//! (one more copy, of the frames that span chunks only). Without it, frames larger than a
//! chunk less the kernel's 256-byte XDP headroom are dropped by the kernel, so
//! [`Capabilities::mtu`] is at most 4096 - 256 - 18 = 3822 and a RoCE path MTU of 2048 is the
//! largest that fits.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use super::netdev::Netdev;
use super::{Built, Capabilities, Device, DeviceError, check_frame_len, transmit_from};
use crate::wire::encap::{ETHERNET_HEADER_LEN, VLAN_TAG_LEN};

mod bpf;
#[allow(unsafe_code)]
mod sys;

pub use bpf::XdpFilter;
use sys::{RingKind, Umem};

/// Where the kernel puts a received frame inside its chunk (XDP_PACKET_HEADROOM).
const XDP_PACKET_HEADROOM: usize = 256;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Copy-mode transmit handles at most this many descriptors per kick (TX_BATCH_SIZE).
const TX_KICK_BATCH: u32 = 32;

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode if the driver has it, else generic.
    #[default]
    Auto,
    /// Native mode or fail.
    Native,
    /// Generic (SKB) mode: any interface, frames copied from socket buffers.
    Generic,
}

/// Sizes and placement of an AF_XDP socket; [`XdpConfig::validate`] checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface's receive queue to bind (below [`MAX_QUEUE`]).
    pub queue: u32,
    /// Native, generic, or whichever the driver supports.
    pub mode: XdpMode,
    /// Which frames come to the socket.
    pub filter: XdpFilter,
    /// UMEM chunks of 4096 bytes; half receive, half transmit. A power of two, from 2 to
    /// [`MAX_CHUNKS`].
    pub chunks: u32,
    /// Entries of each ring; a power of two, at least `chunks / 2` (the fill ring holds
    /// every receive chunk at once, the completion ring every transmit chunk) and at most
    /// `chunks`.
    pub ring_size: u32,
}

/// The largest `chunks`: a 4 GiB UMEM.
pub const MAX_CHUNKS: u32 = 1 << 20;
/// The largest `queue` + 1 (the XSKMAP's size).
pub const MAX_QUEUE: u32 = 1 << 16;

/// Why an [`XdpConfig`] cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XdpConfigError {
    /// `chunks` is not a power of two in range.
    #[error("chunks must be a power of two from 2 to {MAX_CHUNKS}, got {0}")]
    Chunks(u32),
    #[error(
        "ring_size must be a power of two from chunks / 2 = {min} (the fill ring holds every \
         receive chunk) to chunks = {max}, got {got}"
    )]
    /// `ring_size` is not a power of two in range.
    RingSize {
        /// The size asked for.
        got: u32,
        /// The smallest allowed.
        min: u32,
        /// The largest allowed.
        max: u32,
    },
    /// `queue` is not below [`MAX_QUEUE`].
    #[error("queue must be below {MAX_QUEUE}, got {0}")]
    Queue(u32),
}

impl XdpConfig {
    /// Checks the sizes before anything is allocated or bound.
    pub fn validate(&self) -> Result<(), XdpConfigError> {
        let chunks = self.chunks;
        if !chunks.is_power_of_two() || !(2..=MAX_CHUNKS).contains(&chunks) {
            return Err(XdpConfigError::Chunks(chunks));
        }
        let (min, max) = (chunks / 2, chunks);
        if !self.ring_size.is_power_of_two() || !(min..=max).contains(&self.ring_size) {
            return Err(XdpConfigError::RingSize {
                got: self.ring_size,
                min,
                max,
            });
        }
        if self.queue >= MAX_QUEUE {
            return Err(XdpConfigError::Queue(self.queue));
        }
        Ok(())
    }
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            queue: 0,
            mode: XdpMode::Auto,
            filter: XdpFilter::RoceV2,
            chunks: 4096,
            ring_size: 2048,
        }
    }
}

const CHUNK_SIZE: u32 = 4096;

/// Producer side of a ring: entries are written at `head`, published with a Release store.
#[derive(Debug)]
struct Producer<T> {
    ring: sys::Ring<T>,
    head: u32,
    /// The consumer index last read; the ring is full when `head - tail == size`.
    tail: u32,
}

impl<T: Copy> Producer<T> {
    fn new(ring: sys::Ring<T>) -> Producer<T> {
        let head = ring.producer().load(Ordering::Relaxed);
        let tail = ring.consumer().load(Ordering::Acquire);
        Producer { ring, head, tail }
    }

    fn push(&mut self, value: T) -> bool {
        if self.head.wrapping_sub(self.tail) == self.ring.size {
            self.tail = self.ring.consumer().load(Ordering::Acquire);
            if self.head.wrapping_sub(self.tail) == self.ring.size {
                return false;
            }
        }
        self.ring.write(self.head, value);
        self.head = self.head.wrapping_add(1);
        true
    }

    fn publish(&self) {
        self.ring.producer().store(self.head, Ordering::Release);
    }

    /// Entries that can be pushed before the kernel consumes any.
    fn room(&mut self) -> u32 {
        self.ring.size - self.outstanding()
    }

    /// Entries the kernel has not consumed yet.
    fn outstanding(&mut self) -> u32 {
        self.tail = self.ring.consumer().load(Ordering::Acquire);
        self.head.wrapping_sub(self.tail)
    }

    fn needs_wakeup(&self) -> bool {
        self.ring.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// Consumer side of a ring: entries are read at `tail`, released with a Release store.
#[derive(Debug)]
struct Consumer<T> {
    ring: sys::Ring<T>,
    tail: u32,
    head: u32,
}

impl<T: Copy> Consumer<T> {
    fn new(ring: sys::Ring<T>) -> Consumer<T> {
        let tail = ring.consumer().load(Ordering::Relaxed);
        Consumer {
            ring,
            tail,
            head: tail,
        }
    }

    fn pop(&mut self) -> Option<T> {
        if self.tail == self.head {
            self.head = self.ring.producer().load(Ordering::Acquire);
            if self.tail == self.head {
                return None;
            }
        }
        let value = self.ring.read(self.tail);
        self.tail = self.tail.wrapping_add(1);
        Some(value)
    }

    fn release(&self) {
        self.ring.consumer().store(self.tail, Ordering::Release);
    }
}

/// An AF_XDP socket bound to one queue of an interface, with its XDP program attached.
#[derive(Debug)]
pub struct XdpDevice {
    name: String,
    mtu: usize,
    mac: [u8; 6],
    mode: XdpMode,
    umem: Umem,
    fill: Producer<u64>,
    completion: Consumer<u64>,
    rx: Consumer<libc::xdp_desc>,
    tx: Producer<libc::xdp_desc>,
    /// Transmit slots we own: each `slot_chunks` adjacent chunks, named by the first one's
    /// address, so that a frame larger than a chunk is one contiguous buffer (lent to
    /// `transmit_built`) sent as one descriptor per chunk.
    tx_free: Vec<u64>,
    /// Chunks per transmit slot.
    slot_chunks: u32,
    /// The first transmit chunk's address: slots start every `slot_chunks` chunks from it.
    tx_base: u64,
    /// Bound with XDP_USE_SG: frames may span several chunks.
    multi_buffer: bool,
    /// The first parts of a received frame whose last descriptor has not been read yet.
    partial: Vec<u8>,
    /// Descriptors published since the last kick.
    unkicked: u32,
    // Dropped in declaration order: the link (detaching the program) before the socket.
    _link: OwnedFd,
    _program: OwnedFd,
    _map: OwnedFd,
    socket: OwnedFd,
}

impl XdpDevice {
    /// Opens AF_XDP on interface `ifname` (which must exist and be up) with `config`.
    pub fn open(ifname: &str, config: XdpConfig) -> Result<XdpDevice, DeviceError> {
        let name = format!("xdp:{ifname}");
        let os = |operation| {
            let name = name.clone();
            move |e| DeviceError::os(&name, operation, e)
        };
        config.validate().map_err(|e| DeviceError::Capture {
            device: name.clone(),
            reason: format!("bad XdpConfig: {e}"),
        })?;
        let netdev = Netdev::new(ifname).map_err(os("name"))?;
        let ifindex = netdev.index().map_err(os("find interface"))?;
        let if_mtu = netdev.mtu().map_err(os("read MTU"))?;
        let mac = netdev.mac().map_err(os("read MAC"))?;

        let socket = sys::socket().map_err(os("create AF_XDP socket"))?;
        let umem = Umem::new(config.chunks, CHUNK_SIZE).map_err(os("allocate UMEM"))?;
        sys::register_umem(&socket, &umem).map_err(os("register UMEM"))?;
        for kind in [
            RingKind::Fill,
            RingKind::Completion,
            RingKind::Rx,
            RingKind::Tx,
        ] {
            sys::set_ring_size(&socket, kind, config.ring_size).map_err(os("size rings"))?;
        }
        let fill = Producer::new(
            sys::map_ring(&socket, RingKind::Fill, config.ring_size)
                .map_err(os("map fill ring"))?,
        );
        let completion = Consumer::new(
            sys::map_ring(&socket, RingKind::Completion, config.ring_size)
                .map_err(os("map completion ring"))?,
        );
        let rx = Consumer::new(
            sys::map_ring(&socket, RingKind::Rx, config.ring_size).map_err(os("map RX ring"))?,
        );
        let tx = Producer::new(
            sys::map_ring(&socket, RingKind::Tx, config.ring_size).map_err(os("map TX ring"))?,
        );
        // No XDP_COPY / XDP_ZEROCOPY: the kernel uses zero-copy where the driver supports it
        // and copy mode otherwise (veth, generic XDP). Multi-buffer where the kernel knows it
        // (older ones refuse the flag with EINVAL, zero-copy drivers without it EOPNOTSUPP).
        let wakeup = libc::XDP_USE_NEED_WAKEUP;
        let bind = |flags| bind_when_free(&socket, ifindex, config.queue, flags);
        let bind_error = |e: std::io::Error| match e.raw_os_error() {
            Some(libc::EBUSY) => {
                os("bind AF_XDP socket: the queue is busy (another AF_XDP socket holds it)")(e)
            }
            _ => os("bind AF_XDP socket (is the interface up?)")(e),
        };
        let multi_buffer = match bind(wakeup | libc::XDP_USE_SG) {
            Ok(()) => true,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => {
                bind(wakeup).map_err(bind_error)?;
                false
            }
            Err(e) => return Err(bind_error(e)),
        };

        let map = sys::create_xskmap(config.queue + 1).map_err(os("create XSKMAP"))?;
        sys::map_update(&map, config.queue, socket.as_raw_fd() as u32)
            .map_err(os("insert socket into XSKMAP"))?;
        let program = bpf::program(map.as_raw_fd(), config.filter);
        let flags = if multi_buffer {
            sys::BPF_F_XDP_HAS_FRAGS
        } else {
            0
        };
        let program =
            sys::load_xdp(&program, "Dual MIT/GPL", flags).map_err(os("load XDP program"))?;
        let (link, mode) = attach(&program, ifindex, config.mode)
            .map_err(os("attach XDP program (is another one attached?)"))?;

        let mut device = XdpDevice {
            name,
            mtu: if multi_buffer {
                if_mtu
            } else {
                if_mtu.min(
                    CHUNK_SIZE as usize - XDP_PACKET_HEADROOM - ETHERNET_HEADER_LEN - VLAN_TAG_LEN,
                )
            },
            mac,
            mode,
            umem,
            fill,
            completion,
            rx,
            tx,
            tx_free: Vec::new(),
            slot_chunks: 1,
            tx_base: 0,
            multi_buffer,
            partial: Vec::new(),
            unkicked: 0,
            _link: link,
            _program: program,
            _map: map,
            socket,
        };
        let half = config.chunks / 2;
        for chunk in 0..half {
            let pushed = device.fill.push(u64::from(chunk) * u64::from(CHUNK_SIZE));
            debug_assert!(
                pushed,
                "ring_size >= chunks / 2 leaves room for every receive chunk"
            );
        }
        device.fill.publish();
        // A slot holds the largest frame and, at least two chunks, the caller's frame buffer
        // (the endpoint's is a little over 4 KiB): room to build any frame in place.
        let largest = device.capabilities().max_frame_len();
        device.slot_chunks = largest
            .div_ceil(CHUNK_SIZE as usize)
            .max(2)
            .min(half as usize) as u32;
        device.tx_base = u64::from(half) * u64::from(CHUNK_SIZE);
        let slot = u64::from(device.slot_chunks * CHUNK_SIZE);
        device.tx_free = (0..u64::from(half / device.slot_chunks))
            .map(|s| device.tx_base + s * slot)
            .collect();
        Ok(device)
    }

    /// Whether frames may span several chunks (the socket is bound with XDP_USE_SG).
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// The mode the XDP program was attached in.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The kernel's counters for this socket: frames dropped because the RX ring was full or
    /// the fill ring empty, and invalid descriptors.
    pub fn statistics(&self) -> Result<libc::xdp_statistics, DeviceError> {
        sys::statistics(&self.socket).map_err(|e| DeviceError::os(&self.name, "read statistics", e))
    }

    /// Gives a received chunk back to the kernel whatever its descriptor said: a descriptor
    /// outside the UMEM cannot come from the kernel, so it is not worth an error.
    fn recycle(&mut self, addr: u64) {
        let chunk = addr - addr % u64::from(CHUNK_SIZE);
        let recycled = self.fill.push(chunk);
        debug_assert!(recycled, "the fill ring has room for every receive chunk");
        self.fill.publish();
    }

    /// Bytes of a transmit slot.
    fn slot_len(&self) -> usize {
        (self.slot_chunks * CHUNK_SIZE) as usize
    }

    /// Takes back the slots the kernel has sent. A frame's chunks complete together, first
    /// to last, so the slot is free when its first chunk comes back; the others are skipped.
    fn reclaim_completions(&mut self) {
        let mut any = false;
        let slot = self.slot_len() as u64;
        while let Some(addr) = self.completion.pop() {
            if addr
                .checked_sub(self.tx_base)
                .is_some_and(|o| o % slot == 0)
            {
                self.tx_free.push(addr);
            }
            any = true;
        }
        if any {
            self.completion.release();
        }
    }

    /// Whether a free slot and ring entries for a frame of `len` bytes are at hand.
    fn has_room(&mut self, len: usize) -> bool {
        self.reclaim_completions();
        !self.tx_free.is_empty() && self.tx.room() as usize >= chunks_of(len)
    }

    /// Sends the `len`-byte frame written at the start of the last free slot: one descriptor
    /// per chunk it touches, each but the last flagged XDP_PKT_CONTD, published together
    /// (after the data is written) so the chain goes whole. Room was checked.
    fn post(&mut self, len: usize) -> Result<(), DeviceError> {
        let addr = self.tx_free.pop().expect("a free slot was checked");
        let chunk_len = CHUNK_SIZE as usize;
        let parts = chunks_of(len);
        for i in 0..parts {
            let desc = libc::xdp_desc {
                addr: addr + (i * chunk_len) as u64,
                len: (len - i * chunk_len).min(chunk_len) as u32,
                options: if i + 1 < parts {
                    libc::XDP_PKT_CONTD
                } else {
                    0
                },
            };
            let pushed = self.tx.push(desc);
            debug_assert!(pushed, "room for the whole chain was checked");
        }
        self.tx.publish();
        self.unkicked += parts as u32;
        if self.unkicked >= TX_KICK_BATCH {
            self.kick()?;
        }
        Ok(())
    }

    fn too_large(&self, len: usize) -> DeviceError {
        DeviceError::FrameTooLarge {
            device: self.name.clone(),
            len,
            max: self.slot_len(),
        }
    }

    fn kick(&mut self) -> Result<(), DeviceError> {
        self.unkicked = 0;
        match sys::kick(&self.socket) {
            Ok(()) => Ok(()),
            // The queue is busy or the ring being drained: the next kick sends the rest.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(DeviceError::os(&self.name, "kick TX", e)),
        }
    }
}

/// Chunks (and descriptors) a frame of `len` bytes takes.
fn chunks_of(len: usize) -> usize {
    len.div_ceil(CHUNK_SIZE as usize).max(1)
}

/// Attaches in the requested mode; `Auto` tries native first. A BPF link never replaces an
/// attached program (only mode flags are allowed with it), so a busy interface is an error.
fn attach(program: &OwnedFd, ifindex: u32, mode: XdpMode) -> std::io::Result<(OwnedFd, XdpMode)> {
    let native = || sys::link_xdp(program, ifindex, XDP_FLAGS_DRV_MODE);
    let generic = || sys::link_xdp(program, ifindex, XDP_FLAGS_SKB_MODE);
    match mode {
        XdpMode::Native => native().map(|l| (l, XdpMode::Native)),
        XdpMode::Generic => generic().map(|l| (l, XdpMode::Generic)),
        XdpMode::Auto => native()
            .map(|l| (l, XdpMode::Native))
            .or_else(|_| generic().map(|l| (l, XdpMode::Generic))),
    }
}

/// How long a bind waits for a queue that is still busy.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Binds `socket` to queue `queue` of interface `ifindex`. The kernel frees an AF_XDP socket
/// some time after its process closed it, and until then its queue answers EBUSY: a tool run
/// twice in a row would fail for no reason, so EBUSY is retried for [`BIND_BUSY_WAIT`]. A
/// queue held by a live socket stays busy and fails after that.
fn bind_when_free(socket: &OwnedFd, ifindex: u32, queue: u32, flags: u16) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    loop {
        match sys::bind(socket, ifindex, queue, flags) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl Device for XdpDevice {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        loop {
            let Some(desc) = self.rx.pop() else {
                if self.fill.needs_wakeup() {
                    // Nothing to do on failure: the next receive asks again.
                    let _ = sys::wake_rx(&self.socket);
                }
                // A chain's first parts stay in `partial` until its last descriptor comes.
                return Ok(false);
            };
            self.rx.release();
            let last = desc.options & libc::XDP_PKT_CONTD == 0;
            let part = self.umem.frame(desc.addr, desc.len as usize);
            match part {
                Some(frame) if last && self.partial.is_empty() => consume(frame),
                Some(part) => self.partial.extend_from_slice(part),
                None => {}
            }
            self.recycle(desc.addr);
            if last {
                if !self.partial.is_empty() {
                    consume(&self.partial);
                    self.partial.clear();
                }
                return Ok(true);
            }
        }
    }

    /// A frame larger than a chunk goes as a chain of descriptors, published whole or not at
    /// all: the data is written into the slot before any descriptor is pushed.
    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        check_frame_len(&self.name, &self.capabilities(), frame)?;
        if frame.len() > self.slot_len() {
            return Err(self.too_large(frame.len()));
        }
        if !self.has_room(frame.len()) {
            self.kick()?;
            return Ok(false);
        }
        let addr = self.tx_free[self.tx_free.len() - 1];
        let Some(slot) = self.umem.span_mut(addr, frame.len()) else {
            return Err(self.too_large(frame.len()));
        };
        slot.copy_from_slice(frame);
        self.post(frame.len())?;
        Ok(true)
    }

    /// Lends a free slot of the UMEM, so the frame is built where the kernel reads it.
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        let want = scratch.len();
        if want > self.slot_len() || !self.has_room(want) {
            // No room: built in `scratch` and held there (`transmit` kicks).
            return transmit_from(self, scratch, build);
        }
        let caps = self.capabilities();
        let addr = self.tx_free[self.tx_free.len() - 1];
        let Some(lent) = self.umem.span_mut(addr, want) else {
            return Err(self.too_large(want));
        };
        let Some(len) = build(lent) else {
            return Ok(Built::Nothing);
        };
        let frame = lent.get(..len).ok_or_else(|| DeviceError::BufferTooSmall {
            device: self.name.clone(),
            len,
            capacity: want,
        })?;
        check_frame_len(&self.name, &caps, frame)?;
        self.post(len)?;
        Ok(Built::Sent)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            mtu: self.mtu,
            icrc_offload: false,
            mac: Some(self.mac),
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }

    /// Kicks until the kernel has taken every published descriptor (copy mode sends at most
    /// 32 per kick) or stops making progress.
    fn flush(&mut self) -> Result<(), DeviceError> {
        let mut last = u32::MAX;
        loop {
            let outstanding = self.tx.outstanding();
            if outstanding == 0 || outstanding == last {
                break;
            }
            last = outstanding;
            self.kick()?;
        }
        self.reclaim_completions();
        Ok(())
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// The sizes are checked before any system call, with the bound the fill ring needs
    /// (issue 14: ring_size < chunks / 2 passed and overfilled the fill ring).
    #[test]
    fn sizes_are_validated_with_a_clear_error() {
        let with = |chunks, ring_size| XdpConfig {
            chunks,
            ring_size,
            ..XdpConfig::default()
        };
        assert_eq!(XdpConfig::default().validate(), Ok(()));
        assert_eq!(with(4096, 4096).validate(), Ok(()));
        let small_ring = with(4096, 1024).validate().unwrap_err();
        assert_eq!(
            small_ring,
            XdpConfigError::RingSize {
                got: 1024,
                min: 2048,
                max: 4096
            }
        );
        assert!(
            small_ring.to_string().contains("from chunks / 2 = 2048"),
            "{small_ring}"
        );
        assert!(with(4096, 8192).validate().is_err());
        assert!(with(4096, 3000).validate().is_err());
        assert!(matches!(
            with(3000, 2048).validate(),
            Err(XdpConfigError::Chunks(3000))
        ));
        assert!(with(1, 1).validate().is_err() && with(1 << 21, 1 << 20).validate().is_err());
        let queue = XdpConfig {
            queue: u32::MAX,
            ..XdpConfig::default()
        };
        assert_eq!(queue.validate(), Err(XdpConfigError::Queue(u32::MAX)));
        // open() refuses before touching the interface (no root needed to see it).
        let err = XdpDevice::open("no-such-if", with(4096, 1024)).unwrap_err();
        assert!(
            err.to_string().contains("bad XdpConfig: ring_size"),
            "{err}"
        );
    }
}
