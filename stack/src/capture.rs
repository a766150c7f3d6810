//! Reading captures: the project's one reader of pcap and pcapng files (through pcap-parser),
//! shared by `roce decode`, `roce analyze`, `roce ladder` and the pcap device.
//!
//! [`CaptureReader::next_frame`] streams frames through one fixed read buffer, so memory does
//! not grow with the file. A file that is not a capture fails at [`CaptureReader::open`]; a
//! capture damaged part way (cut short, a record that lies about its length, an unknown
//! interface) yields its good frames, then one [`CaptureError::Damaged`], then the end. Frames
//! cut by a snap length are delivered as they are, with [`Frame::orig_len`] saying how long
//! they were on the wire.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{Linktype, PcapBlockOwned, PcapError, create_reader};
use thiserror::Error;

use crate::wire::packet::{PacketError, RocePacket};

/// Read buffer; grown (up to [`MAX_BUFFER`]) only for a record larger than it.
const INITIAL_BUFFER: usize = 1 << 20;
const MAX_BUFFER: usize = 16 << 20;
/// libpcap's largest snap length: a record claiming more is corrupt, not a jumbo frame.
const MAX_RECORD: u32 = 262_144;

/// The link layer a frame starts with (the capture's LINKTYPE_ value, per interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Link {
    /// LINKTYPE_ETHERNET (1).
    Ethernet,
    /// LINKTYPE_RAW (101), IPV4 (228), IPV6 (229): the frame is an IP packet.
    RawIp,
    /// LINKTYPE_LINUX_SLL (113): `tcpdump -i any`, 16-byte cooked header.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): 20-byte cooked header.
    LinuxSll2,
    /// Any other link type, by number; its frames are never RoCEv2 to us.
    Other(i32),
}

impl Link {
    /// The LINKTYPE_ number (101 for any raw IP).
    pub fn number(self) -> i32 {
        match self {
            Link::Ethernet => 1,
            Link::RawIp => 101,
            Link::LinuxSll => 113,
            Link::LinuxSll2 => 276,
            Link::Other(n) => n,
        }
    }

    fn from_linktype(l: Linktype) -> Link {
        match l {
            Linktype::ETHERNET => Link::Ethernet,
            Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => Link::RawIp,
            Linktype::LINUX_SLL => Link::LinuxSll,
            Linktype::LINUX_SLL2 => Link::LinuxSll2,
            Linktype(other) => Link::Other(other),
        }
    }
}

/// Which of the two file formats is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// Why a capture could not be read (further).
#[derive(Debug, Error)]
pub enum CaptureError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("empty file: not a pcap or pcapng capture")]
    Empty,
    #[error("not a pcap or pcapng capture (unknown file header)")]
    NotACapture,
    #[error("read error")]
    Read,
    /// The capture is damaged at `offset`: frames before `frame` were delivered, none after.
    #[error("damaged capture at byte {offset} (after {frame} frames): {reason}")]
    Damaged {
        frame: u64,
        offset: u64,
        reason: String,
    },
}

/// One captured frame, borrowed from the reader's buffer until the next call.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Position among the capture's frames, from 0.
    pub index: u64,
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    pub link: Link,
    /// The bytes captured: fewer than `orig_len` when a snap length cut the frame.
    pub data: &'a [u8],
    pub orig_len: u32,
}

/// Why a captured frame is not a usable RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error(transparent)]
    Packet(#[from] PacketError),
    #[error("link type {0} is not read")]
    UnsupportedLink(i32),
    #[error("not RoCEv2: Linux cooked protocol {0:#06x} is neither IPv4 nor IPv6")]
    CookedProtocol(u16),
    #[error("Linux cooked header: truncated, {needed} bytes needed but {available} present")]
    CookedTruncated { needed: usize, available: usize },
}

impl FrameError {
    /// True for frames of another protocol, false for broken or cut RoCEv2 frames.
    pub fn is_not_roce(&self) -> bool {
        match self {
            FrameError::Packet(e) => e.is_not_roce(),
            FrameError::UnsupportedLink(_) | FrameError::CookedProtocol(_) => true,
            FrameError::CookedTruncated { .. } => false,
        }
    }
}

impl<'a> Frame<'a> {
    /// True when the capture kept fewer bytes than the frame had (a snap length).
    pub fn is_cut(&self) -> bool {
        (self.data.len() as u64) < u64::from(self.orig_len)
    }

    /// Slices the frame into a RoCEv2 packet according to its link type.
    pub fn roce(&self) -> Result<RocePacket<'a>, FrameError> {
        let parsed = match self.link {
            Link::Ethernet => RocePacket::parse(self.data),
            Link::RawIp => RocePacket::parse_ip(self.data),
            // Linux cooked headers: protocol type at byte 14 (SLL) or 0 (SLL2).
            Link::LinuxSll => RocePacket::parse_ip(cooked(self.data, 16, 14)?),
            Link::LinuxSll2 => RocePacket::parse_ip(cooked(self.data, 20, 0)?),
            Link::Other(l) => return Err(FrameError::UnsupportedLink(l)),
        };
        Ok(parsed?)
    }
}

fn cooked(data: &[u8], header_len: usize, protocol_at: usize) -> Result<&[u8], FrameError> {
    if data.len() < header_len {
        return Err(FrameError::CookedTruncated {
            needed: header_len,
            available: data.len(),
        });
    }
    match u16::from_be_bytes([data[protocol_at], data[protocol_at + 1]]) {
        0x0800 | 0x86dd => Ok(&data[header_len..]),
        other => Err(FrameError::CookedProtocol(other)),
    }
}

/// Per-interface facts a pcapng packet block needs.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: Link,
    /// Timestamp units per second.
    units_per_second: u64,
    offset_seconds: i64,
}

/// Where a frame lies in the reader's buffer, found before the buffer is borrowed again.
struct Located {
    start: usize,
    len: usize,
    orig_len: u32,
    timestamp_ns: u64,
    link: Link,
}

/// Streams the frames of a pcap or pcapng capture.
pub struct CaptureReader {
    reader: Box<dyn PcapReaderIterator + Send>,
    format: Format,
    /// pcap: the one interface of the file header; pcapng: those of the current section.
    interfaces: Vec<Interface>,
    nanosecond_pcap: bool,
    capacity: usize,
    /// Bytes of the previous frame to consume on the next call.
    pending: usize,
    offset: u64,
    frames: u64,
    finished: bool,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.offset)
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl CaptureReader {
    /// Opens the capture at `path`; fails if it cannot be read or is not pcap or pcapng.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let file = File::open(path).map_err(|source| CaptureError::Open {
            path: path.display().to_string(),
            source,
        })?;
        CaptureReader::new(file)
    }

    /// Reads a capture from any byte stream (a file, a pipe, a slice in tests).
    pub fn new(input: impl Read + Send + 'static) -> Result<CaptureReader, CaptureError> {
        let reader = create_reader(INITIAL_BUFFER, input).map_err(|e| match e {
            PcapError::Eof => CaptureError::Empty,
            PcapError::ReadError => CaptureError::Read,
            _ => CaptureError::NotACapture,
        })?;
        // The first block tells the format; it is read (not consumed) by `next_frame`.
        let format = if reader.data().starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            Format::PcapNg
        } else {
            Format::Pcap
        };
        Ok(CaptureReader {
            reader,
            format,
            interfaces: Vec::new(),
            nanosecond_pcap: false,
            capacity: INITIAL_BUFFER,
            pending: 0,
            offset: 0,
            frames: 0,
            finished: false,
        })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Bytes of the file consumed so far (for progress reports).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Frames delivered so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame; `Ok(None)` at the end, `Err(Damaged)` once if the capture is damaged
    /// (then `Ok(None)`).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.finished {
            return Ok(None);
        }
        self.consume(self.pending);
        self.pending = 0;
        match self.locate() {
            Ok(Some((consumed, at))) => {
                self.pending = consumed;
                let index = self.frames;
                self.frames += 1;
                let data = self.reader.data().get(at.start..at.start + at.len);
                Ok(data.map(|data| Frame {
                    index,
                    timestamp_ns: at.timestamp_ns,
                    link: at.link,
                    data,
                    orig_len: at.orig_len,
                }))
            }
            Ok(None) => {
                self.finished = true;
                Ok(None)
            }
            Err(reason) => {
                self.finished = true;
                Err(CaptureError::Damaged {
                    frame: self.frames,
                    offset: self.offset,
                    reason,
                })
            }
        }
    }

    fn consume(&mut self, n: usize) {
        self.reader.consume(n);
        self.offset += n as u64;
    }

    /// Reads blocks until a packet; returns its size in the buffer and where its data lies.
    fn locate(&mut self) -> Result<Option<(usize, Located)>, String> {
        loop {
            // The block's data is a slice of the buffer at this address; its offset from it
            // survives the borrow that `next` holds.
            let base = self.reader.data().as_ptr() as usize;
            let step = match self.reader.next() {
                Ok((consumed, block)) => {
                    let step = describe(&block, &mut self.interfaces, &mut self.nanosecond_pcap);
                    match step.map(|at| at.map(|at| at.relative_to(base))) {
                        Ok(Some(at)) => return Ok(Some((consumed, at))),
                        Ok(None) => Ok(consumed),
                        Err(reason) => Err(reason),
                    }
                }
                Err(PcapError::Eof) => return Ok(None),
                Err(PcapError::Incomplete(_)) => {
                    let before = self.reader.data().len();
                    self.reader.refill().map_err(|_| "read error".to_string())?;
                    // A full buffer reads nothing: grow it or this would spin.
                    let stuck =
                        self.reader.data().len() == before && !self.reader.reader_exhausted();
                    if stuck && !self.grow() {
                        return Err(too_big());
                    }
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    if self.grow() {
                        continue;
                    }
                    return Err(too_big());
                }
                Err(PcapError::UnexpectedEof) => {
                    return Err("the file ends inside a record (cut short)".to_string());
                }
                Err(PcapError::ReadError) => return Err("read error".to_string()),
                Err(e) => return Err(format!("corrupt record: {}", short(&e.to_string()))),
            };
            match step {
                Ok(consumed) => self.consume(consumed),
                Err(reason) => return Err(reason),
            }
        }
    }

    fn grow(&mut self) -> bool {
        self.capacity *= 2;
        self.capacity <= MAX_BUFFER && self.reader.grow(self.capacity)
    }
}

fn too_big() -> String {
    format!(
        "a record claims more than {} MiB: corrupt capture",
        MAX_BUFFER >> 20
    )
}

/// pcap-parser's messages quote the input bytes; keep the first line's start.
fn short(s: &str) -> &str {
    s.get(..s.find(", input").unwrap_or(s.len())).unwrap_or(s)
}

impl Located {
    /// Turns the absolute address of the data into an offset from the buffer's start.
    fn relative_to(mut self, base: usize) -> Located {
        // A slice outside the buffer would be a pcap-parser bug; an offset past the end makes
        // `next_frame` report the end rather than index out of bounds.
        self.start = self.start.checked_sub(base).unwrap_or(usize::MAX / 2);
        self
    }
}

/// What a block means: a packet (where it lies), nothing (header, interface, statistics...),
/// or damage. Interface blocks update `interfaces`.
fn describe(
    block: &PcapBlockOwned<'_>,
    interfaces: &mut Vec<Interface>,
    nanosecond_pcap: &mut bool,
) -> Result<Option<Located>, String> {
    let located = |data: &[u8], orig_len: u32, timestamp_ns: u64, link: Link| Located {
        start: data.as_ptr() as usize,
        len: data.len(),
        orig_len,
        timestamp_ns,
        link,
    };
    match block {
        PcapBlockOwned::LegacyHeader(h) => {
            *nanosecond_pcap = h.is_nanosecond_precision();
            *interfaces = vec![Interface {
                link: Link::from_linktype(h.network),
                units_per_second: if *nanosecond_pcap {
                    1_000_000_000
                } else {
                    1_000_000
                },
                offset_seconds: 0,
            }];
            Ok(None)
        }
        PcapBlockOwned::Legacy(b) => {
            let Some(iface) = interfaces.first() else {
                return Err("a record before the file header".to_string());
            };
            if b.caplen > MAX_RECORD {
                return Err(format!(
                    "a record claims {} captured bytes, more than any snap length ({MAX_RECORD})",
                    b.caplen
                ));
            }
            let fraction = u64::from(b.ts_usec);
            let ts = timestamp(u64::from(b.ts_sec), fraction, iface.units_per_second, 0);
            Ok(Some(located(b.data, b.origlen, ts, iface.link)))
        }
        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
            interfaces.clear();
            Ok(None)
        }
        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
            interfaces.push(Interface {
                link: Link::from_linktype(idb.linktype),
                units_per_second: idb.ts_resolution().unwrap_or(1_000_000).max(1),
                offset_seconds: idb.ts_offset(),
            });
            Ok(None)
        }
        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
            let Some(iface) = interfaces.get(epb.if_id as usize) else {
                return Err(format!(
                    "a packet on interface {} which no interface description declares",
                    epb.if_id
                ));
            };
            let raw = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
            let units = iface.units_per_second;
            let ts = timestamp(raw / units, raw % units, units, iface.offset_seconds);
            Ok(Some(located(
                epb.packet_data(),
                epb.origlen,
                ts,
                iface.link,
            )))
        }
        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
            let Some(iface) = interfaces.first() else {
                return Err("a packet before any interface description".to_string());
            };
            // A simple packet block has no timestamp (pcapng 4.4).
            Ok(Some(located(spb.packet_data(), spb.origlen, 0, iface.link)))
        }
        PcapBlockOwned::NG(_) => Ok(None),
    }
}

/// Nanoseconds since the epoch from whole seconds and a fraction in `units` per second.
fn timestamp(seconds: u64, fraction: u64, units: u64, offset_seconds: i64) -> u64 {
    let seconds = seconds.saturating_add_signed(offset_seconds);
    let nanos = u128::from(fraction) * 1_000_000_000 / u128::from(units);
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
