//! Live capture: the frames an interface receives and sends, as they happen, for
//! `roce analyze --live`.
//!
//! An AF_PACKET socket with a memory-mapped TPACKET_V3 ring ([`sys`]): the kernel copies each
//! frame into the ring once and hands over whole blocks of frames, so a busy link costs one
//! wake-up per block rather than a system call per frame. The capture only listens: the
//! interface keeps carrying its traffic, other programs (a RoCE endpoint over AF_XDP, tcpdump)
//! keep theirs, and the promiscuous mode it asks for ends with it.
//!
//! Frames come out as [`Frame`]s of [`Link::Ethernet`], as a capture file would hold them: an
//! 802.1Q tag that the NIC or kernel took off on receive is put back, so VLAN and priority
//! are seen as on the wire.

#[allow(unsafe_code)]
mod sys;

use std::io;
use std::time::Duration;

use thiserror::Error;

use super::{Frame, Link};
use crate::wire::encap::{ETHERNET_HEADER_LEN, VLAN_TAG_LEN};

/// Bytes per ring block: a page multiple that holds any frame up to a 64 KiB GSO packet.
const BLOCK_SIZE: u32 = 1 << 20;
/// Blocks in the ring (32 MiB): room for a quarter of a second of a busy 10 Gb/s link while
/// the analyser is busy printing.
const BLOCKS: u32 = 32;
/// The longest the kernel keeps a partly filled block before handing it over, so that a
/// quiet link's frames are seen within this time.
pub const BLOCK_RETIRE: Duration = Duration::from_millis(20);
/// Offset of the EtherType in an untagged Ethernet header (after the two MAC addresses).
const ETHERTYPE_AT: usize = ETHERNET_HEADER_LEN - 2;

/// Why a live capture could not start or go on.
#[derive(Debug, Error)]
pub enum LiveError {
    /// The kernel knows no interface of that name.
    #[error("{iface}: no such network interface")]
    NoSuchInterface {
        /// The interface asked for.
        iface: String,
    },
    /// The AF_PACKET socket was refused: the process lacks CAP_NET_RAW.
    #[error("{iface}: capturing needs CAP_NET_RAW (run as root)")]
    NeedsCapNetRaw {
        /// The interface asked for.
        iface: String,
    },
    /// The interface went down or away while capturing.
    #[error("{iface}: the interface went down or away")]
    Gone {
        /// The interface captured on.
        iface: String,
    },
    /// Another system call failed.
    #[error("{iface}: {operation}: {source}")]
    Os {
        /// The interface asked for.
        iface: String,
        /// What was being done.
        operation: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

impl LiveError {
    fn os(iface: &str, operation: &'static str, source: io::Error) -> LiveError {
        let iface = iface.to_owned();
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => LiveError::NeedsCapNetRaw { iface },
            Some(libc::ENODEV | libc::ENXIO) if operation == "index" => {
                LiveError::NoSuchInterface { iface }
            }
            Some(libc::ENETDOWN | libc::ENODEV | libc::ENXIO) => LiveError::Gone { iface },
            _ => LiveError::Os {
                iface,
                operation,
                source,
            },
        }
    }
}

/// What the kernel counted for the capture so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelCounts {
    /// Frames the kernel saw for the capture (those it dropped included).
    pub received: u64,
    /// Frames it dropped because the ring was full (the analysis never saw them).
    pub dropped: u64,
}

/// The frames one interface receives and sends.
#[derive(Debug)]
pub struct LiveCapture {
    ring: sys::Ring,
    iface: String,
    /// The next block the kernel will hand over (blocks go round in order).
    block: usize,
    slots: Vec<sys::Slot>,
    /// A frame with its VLAN tag put back.
    scratch: Vec<u8>,
    frames: u64,
    counts: KernelCounts,
}

impl LiveCapture {
    /// Starts capturing on `iface` (an existing interface; needs CAP_NET_RAW).
    pub fn open(iface: &str) -> Result<LiveCapture, LiveError> {
        let index = sys::interface_index(iface).map_err(|e| LiveError::os(iface, "index", e))?;
        let ring = sys::Ring::open(index, BLOCK_SIZE, BLOCKS, BLOCK_RETIRE)
            .map_err(|e| LiveError::os(iface, "AF_PACKET ring", e))?;
        Ok(LiveCapture {
            ring,
            iface: iface.to_owned(),
            block: 0,
            slots: Vec::new(),
            scratch: Vec::with_capacity(BLOCK_SIZE as usize),
            frames: 0,
            counts: KernelCounts::default(),
        })
    }

    /// The interface captured on.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Waits at most `timeout` for the kernel's next block of frames and hands each frame to
    /// `each`, in order. Returns the number of frames (0 when the time ran out, or a SIGINT or
    /// SIGTERM caught by [`catch_stop_signals`] cut the wait short).
    pub fn next_block(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(&Frame<'_>),
    ) -> Result<usize, LiveError> {
        let b = self.block;
        if !self
            .ring
            .wait(b, timeout)
            .map_err(|e| LiveError::os(&self.iface, "poll", e))?
        {
            return Ok(0);
        }
        self.ring.block(b, &mut self.slots);
        let bytes = self.ring.bytes();
        for slot in &self.slots {
            let data = &bytes[slot.data..slot.data + slot.snaplen as usize];
            let (data, orig_len) = match slot.vlan {
                Some((tpid, tci)) if data.len() >= ETHERNET_HEADER_LEN => {
                    self.scratch.clear();
                    self.scratch.extend_from_slice(&data[..ETHERTYPE_AT]);
                    self.scratch.extend_from_slice(&tpid.to_be_bytes());
                    self.scratch.extend_from_slice(&tci.to_be_bytes());
                    self.scratch.extend_from_slice(&data[ETHERTYPE_AT..]);
                    (&self.scratch[..], slot.len + VLAN_TAG_LEN as u32)
                }
                _ => (data, slot.len),
            };
            each(&Frame {
                index: self.frames,
                timestamp_ns: u64::from(slot.sec) * 1_000_000_000 + u64::from(slot.nsec),
                link: Link::Ethernet,
                data,
                orig_len,
            });
            self.frames += 1;
        }
        let n = self.slots.len();
        self.ring.release(b);
        self.block = (b + 1) % self.ring.blocks();
        Ok(n)
    }

    /// Hands out the frames the kernel holds for the capture now: the blocks already handed
    /// over and the one being filled (handed over within [`BLOCK_RETIRE`]), the whole ring
    /// at most, so that traffic that goes on cannot keep the caller here. Returns the number
    /// of frames.
    pub fn drain(&mut self, mut each: impl FnMut(&Frame<'_>)) -> Result<usize, LiveError> {
        let mut frames = 0;
        for _ in 0..self.ring.blocks() {
            match self.next_block(BLOCK_RETIRE * 3, &mut each)? {
                0 => break,
                n => frames += n,
            }
        }
        Ok(frames)
    }

    /// Frames handed out so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The kernel's counts since the capture started.
    pub fn kernel_counts(&mut self) -> Result<KernelCounts, LiveError> {
        let (received, dropped) = self
            .ring
            .statistics()
            .map_err(|e| LiveError::os(&self.iface, "PACKET_STATISTICS", e))?;
        self.counts.received += received;
        self.counts.dropped += dropped;
        Ok(self.counts)
    }
}

/// Catches SIGINT and SIGTERM from now on: the first one sets [`stop_requested`] and cuts a
/// wait in [`LiveCapture::next_block`] short; a second one ends the process as usual.
pub fn catch_stop_signals() -> io::Result<()> {
    sys::catch_stop_signals()
}

/// True once SIGINT or SIGTERM arrived after [`catch_stop_signals`].
pub fn stop_requested() -> bool {
    sys::stop_requested()
}
