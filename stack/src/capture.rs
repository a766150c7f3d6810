//! Reading captures: the project's one reader of pcap and pcapng files (through pcap-parser),
//! shared by `roce decode`, `roce analyze`, `roce ladder` and the pcap device.
//!
//! [`CaptureReader::next_frame`] hands out one frame at a time: a regular file is mapped into
//! memory and parsed in place ([`mapped`]), anything else streams through one read buffer
//! ([`stream`]); the analysis keeps no frame, so its memory does not grow with the file. A
//! file that is not a capture fails at [`CaptureReader::open`]; a
//! capture damaged part way (cut short, a record that lies about its length, an unknown
//! interface) yields its good frames, then one [`CaptureError::Damaged`], then the end. Frames
//! cut by a snap length are delivered as they are, with [`Frame::orig_len`] saying how long
//! they were on the wire.

mod blocks;
pub mod live;
mod mapped;
mod stream;
#[allow(unsafe_code)]
mod sys;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use pcap_parser::Linktype;
use thiserror::Error;

use crate::wire::packet::{LinkHeader, PacketError, RocePacket};
use blocks::{Interfaces, Located};
use mapped::Mapped;
use stream::Stream;

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

    pub(crate) fn from_linktype(l: Linktype) -> Link {
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
    /// Classic pcap (libpcap's format, one link type for the file).
    Pcap,
    /// pcapng (blocks; link type per interface, packet comments).
    PcapNg,
}

/// Why a capture could not be read (further).
#[derive(Debug, Error)]
pub enum CaptureError {
    /// The cause is part of the message (and not an error source, which `{:#}` would print
    /// a second time).
    #[error("cannot open {path}: {cause}")]
    Open {
        /// The path as given.
        path: String,
        /// What the operating system said.
        cause: std::io::Error,
    },
    /// The file has no bytes at all.
    #[error("empty file: not a pcap or pcapng capture")]
    Empty,
    /// The first bytes are neither a pcap nor a pcapng header.
    #[error("not a pcap or pcapng capture (unknown file header)")]
    NotACapture,
    /// The underlying reader failed.
    #[error("read error")]
    Read,
    /// The capture is damaged at `offset`: frames before `frame` were delivered, none after.
    #[error("damaged capture at byte {offset} (after {frame} frames): {reason}")]
    Damaged {
        /// Frames delivered before the damage.
        frame: u64,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What the parser found wrong there.
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
    /// How to read `data`: the capture's link type for this frame.
    pub link: Link,
    /// The bytes captured: fewer than `orig_len` when a snap length cut the frame.
    pub data: &'a [u8],
    /// The frame's length on the wire, as the record says.
    pub orig_len: u32,
}

/// Why a captured frame is not a usable RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The RoCEv2 layers inside failed to parse.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// A link type other than Ethernet, raw IP or Linux cooked (the pcap number).
    #[error("link type {0} is not read")]
    UnsupportedLink(i32),
}

impl FrameError {
    /// True for frames of another protocol, false for broken or cut RoCEv2 frames.
    pub fn is_not_roce(&self) -> bool {
        match self {
            FrameError::Packet(e) => e.is_not_roce(),
            FrameError::UnsupportedLink(_) => true,
        }
    }
}

impl<'a> Frame<'a> {
    /// A frame kept whole (`orig_len` is `data`'s length): how tests, benchmarks and fuzz
    /// targets hand bytes of their own to what reads captured frames.
    pub fn whole(index: u64, timestamp_ns: u64, link: Link, data: &'a [u8]) -> Frame<'a> {
        Frame {
            index,
            timestamp_ns,
            link,
            data,
            orig_len: data.len() as u32,
        }
    }

    /// True when the capture kept fewer bytes than the frame had (a snap length).
    pub fn is_cut(&self) -> bool {
        (self.data.len() as u64) < u64::from(self.orig_len)
    }

    /// The header the frame starts with, for the slicer; `None` for a link type not read.
    pub fn link_header(&self) -> Option<LinkHeader> {
        Some(match self.link {
            Link::Ethernet => LinkHeader::Ethernet,
            Link::RawIp => LinkHeader::Ip,
            Link::LinuxSll => LinkHeader::Sll,
            Link::LinuxSll2 => LinkHeader::Sll2,
            Link::Other(_) => return None,
        })
    }

    /// Slices the frame into a RoCEv2 packet according to its link type, through any outer
    /// layers (tags, tunnels, mirror encapsulations).
    #[inline]
    pub fn roce(&self) -> Result<RocePacket<'a>, FrameError> {
        match self.link_header() {
            Some(link) => Ok(RocePacket::parse_link(self.data, link)?),
            None => Err(FrameError::UnsupportedLink(self.link.number())),
        }
    }
}

/// Where the bytes come from.
enum Source {
    Mapped(Mapped),
    Stream(Stream),
}

/// The frames of a pcap or pcapng capture, one at a time.
pub struct CaptureReader {
    source: Source,
    format: Format,
    interfaces: Interfaces,
    frames: u64,
    finished: bool,
    /// Where the comment of the frame last delivered lies in the source's data (length 0:
    /// none).
    comment: (usize, usize),
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.offset())
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

/// The format a file's first bytes announce (a pcapng section header block's type).
fn format_of(start: &[u8]) -> Format {
    if start.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        Format::PcapNg
    } else {
        Format::Pcap
    }
}

impl CaptureReader {
    /// Opens the capture at `path` (mapped into memory when it is a regular file); fails if
    /// it cannot be read or is not pcap or pcapng.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let open_error = |cause| CaptureError::Open {
            path: path.display().to_string(),
            cause,
        };
        let file = File::open(path).map_err(open_error)?;
        if file.metadata().map_err(open_error)?.is_dir() {
            let is_dir = std::io::Error::new(std::io::ErrorKind::IsADirectory, "a directory");
            return Err(open_error(is_dir));
        }
        match sys::Mapping::new(&file).map_err(open_error)? {
            Some(map) => {
                let (mapped, format) = Mapped::new(map)?;
                Ok(CaptureReader::with(Source::Mapped(mapped), format))
            }
            None => CaptureReader::new(file),
        }
    }

    /// Reads a capture from any byte stream (a pipe, a file being written, bytes in tests).
    pub fn new(input: impl Read + Send + 'static) -> Result<CaptureReader, CaptureError> {
        let (stream, format) = Stream::new(input)?;
        Ok(CaptureReader::with(Source::Stream(stream), format))
    }

    fn with(source: Source, format: Format) -> CaptureReader {
        CaptureReader {
            source,
            format,
            interfaces: Interfaces::default(),
            frames: 0,
            finished: false,
            comment: (0, 0),
        }
    }

    /// Which of the two file formats this capture is in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Bytes of the file read so far (for progress reports).
    pub fn offset(&self) -> u64 {
        match &self.source {
            Source::Mapped(m) => m.offset(),
            Source::Stream(s) => s.offset(),
        }
    }

    /// Frames delivered so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame; `Ok(None)` at the end, `Err(Damaged)` once if the capture is damaged
    /// (then `Ok(None)`).
    #[inline]
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let Some(r) = self.next_frame_ref()? else {
            return Ok(None);
        };
        let data = match &self.source {
            Source::Mapped(m) => m.data(),
            Source::Stream(s) => s.data(),
        };
        Ok(Some(r.frame_in(data)))
    }

    /// As [`CaptureReader::next_frame`], with the frame's packet comment (pcapng opt_comment)
    /// when it has one: raw bytes, which the pcapng spec says are UTF-8 but a file may not keep.
    pub fn next_frame_commented(&mut self) -> Result<Option<Commented<'_>>, CaptureError> {
        let Some(r) = self.next_frame_ref()? else {
            return Ok(None);
        };
        let data = match &self.source {
            Source::Mapped(m) => m.data(),
            Source::Stream(s) => s.data(),
        };
        let (at, len) = self.comment;
        let comment = (len > 0)
            .then(|| data.get(at..at.checked_add(len)?))
            .flatten();
        Ok(Some((r.frame_in(data), comment)))
    }

    /// Like [`CaptureReader::next_frame`], but the frame is given by its place: in the file
    /// for a mapped capture, so that another thread can look at it through
    /// [`CaptureReader::shared_file`] while this one reads on.
    #[inline]
    pub fn next_frame_ref(&mut self) -> Result<Option<FrameRef>, CaptureError> {
        if self.finished {
            return Ok(None);
        }
        let next = match &mut self.source {
            Source::Mapped(m) => m.next(&mut self.interfaces),
            Source::Stream(s) => s.next(&mut self.interfaces),
        };
        let at: Located = match next {
            Ok(Some(at)) => at,
            Ok(None) => {
                self.finished = true;
                return Ok(None);
            }
            Err(reason) => {
                self.finished = true;
                return Err(CaptureError::Damaged {
                    frame: self.frames,
                    offset: self.offset(),
                    reason,
                });
            }
        };
        let data_len = match &self.source {
            Source::Mapped(m) => m.data().len(),
            Source::Stream(s) => s.data().len(),
        };
        // The block parsers only locate frames inside what they parsed.
        if at
            .start
            .checked_add(at.len)
            .is_none_or(|end| end > data_len)
        {
            self.finished = true;
            return Ok(None);
        }
        let index = self.frames;
        self.frames += 1;
        self.comment = at.comment;
        Ok(Some(FrameRef {
            index,
            timestamp_ns: at.timestamp_ns,
            link: at.link,
            orig_len: at.orig_len,
            start: at.start,
            len: at.len,
        }))
    }

    /// The mapped file, to be shared with other threads; `None` for a streamed capture.
    pub fn shared_file(&self) -> Option<SharedFile> {
        match &self.source {
            Source::Mapped(m) => Some(SharedFile(m.map())),
            Source::Stream(_) => None,
        }
    }
}

/// A frame and its packet comment, if it has one.
pub type Commented<'a> = (Frame<'a>, Option<&'a [u8]>);

/// Where a frame lies in its capture file, and what its record said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef {
    /// Position among the capture's frames, from 0.
    pub index: u64,
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// The link type of the frame's interface.
    pub link: Link,
    /// The frame's length on the wire, as the record says.
    pub orig_len: u32,
    start: usize,
    len: usize,
}

impl FrameRef {
    /// Bytes captured.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a record that kept no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frame in `data`, which holds it (checked when the reference was made).
    #[inline]
    fn frame_in(self, data: &[u8]) -> Frame<'_> {
        Frame {
            index: self.index,
            timestamp_ns: self.timestamp_ns,
            link: self.link,
            data: &data[self.start..self.start + self.len],
            orig_len: self.orig_len,
        }
    }
}

/// A mapped capture file shared between threads: one reads records
/// ([`CaptureReader::next_frame_ref`]), others look at the frames they name.
#[derive(Clone)]
pub struct SharedFile(std::sync::Arc<sys::Mapping>);

impl std::fmt::Debug for SharedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedFile({} bytes)", self.0.bytes().len())
    }
}

impl SharedFile {
    /// The frame `r` names, if `r` came from this file's reader; `None` once the file was
    /// found to have shrunk (its reader reports the damage; the frames still on their way to
    /// another thread may have lost their bytes).
    #[inline]
    pub fn frame(&self, r: FrameRef) -> Option<Frame<'_>> {
        let data = self.0.bytes();
        (r.start + r.len <= data.len() && !self.0.shrunk()).then(|| r.frame_in(data))
    }

    /// Starts loading the headers of frame `r` (its first two cache lines) into this CPU's
    /// caches: a hint, for a thread about to look at it some frames from now. The reading
    /// thread read them last, on another core, and waiting for them was most of the time
    /// the analysing thread spent slicing a frame.
    #[inline]
    pub fn prefetch(&self, r: FrameRef) {
        let headers = r.len.min(2 * sys::CACHE_LINE);
        if let Some(bytes) = self.0.bytes().get(r.start..r.start + headers) {
            sys::prefetch(bytes);
            if let Some(rest) = bytes.get(sys::CACHE_LINE..) {
                sys::prefetch(rest);
            }
        }
    }
}

#[cfg(test)]
mod tests;
