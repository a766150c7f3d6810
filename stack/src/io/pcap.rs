//! Captures as devices: [`PcapDevice`] receives the frames of a pcap or pcapng file (replay
//! analysis, regression inputs) and writes what it transmits to a pcap file; [`PcapWriter`]
//! writes the classic pcap format that [`PcapRecorder`](super::PcapRecorder) also uses.
//!
//! Reading goes through [`crate::capture`], the project's one capture reader. Writing is classic pcap with
//! nanosecond timestamps (magic 0xa1b23c4d): every tool reads it, and a handful of
//! fixed-layout fields are less code than another dependency.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::capture::{CaptureError, CaptureReader, Link};
use crate::time::Instant;

use super::{Capabilities, Device, DeviceError, check_frame_len};

const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const SNAPLEN: u32 = 262_144;

/// Writes frames to a classic pcap stream, Ethernet link type, nanosecond timestamps.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap file header (nanosecond timestamps, Ethernet) to `out`.
    pub fn new(out: W) -> io::Result<PcapWriter<W>> {
        PcapWriter::with_link(out, Link::Ethernet)
    }

    /// A writer whose frames start with `link` (Linux cooked captures, raw IP).
    pub fn with_link(mut out: W, link: Link) -> io::Result<PcapWriter<W>> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        header[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&(link.number() as u32).to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out })
    }

    /// Appends one frame seen at `at` (nanoseconds since the Unix epoch).
    pub fn write_frame(&mut self, at: Instant, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        self.write_record(at, frame, len)
    }

    /// Appends the `frame` bytes a capture kept of a frame `len` bytes long on the wire (a
    /// snap length keeps fewer).
    pub fn write_record(&mut self, at: Instant, frame: &[u8], len: u32) -> io::Result<()> {
        let kept = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let captured = kept.min(SNAPLEN);
        let at = at.as_nanos();
        let seconds = u32::try_from(at / 1_000_000_000).unwrap_or(u32::MAX);
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&seconds.to_le_bytes());
        record[4..8].copy_from_slice(&((at % 1_000_000_000) as u32).to_le_bytes());
        record[8..12].copy_from_slice(&captured.to_le_bytes());
        record[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(&frame[..captured as usize])
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer (not flushed).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Creates (or truncates) a pcap file at `path`.
pub fn create(path: &Path) -> Result<PcapWriter<BufWriter<File>>, DeviceError> {
    let name = path.display().to_string();
    let file = File::create(path).map_err(|e| DeviceError::os(&name, "create", e))?;
    PcapWriter::new(BufWriter::new(file)).map_err(|e| DeviceError::os(&name, "write", e))
}

/// A device whose received frames are those of a capture, in order and as fast as they are
/// asked for; transmitted frames go to an optional output capture.
pub struct PcapDevice {
    name: String,
    reader: CaptureReader,
    output: Option<PcapWriter<BufWriter<File>>>,
    clock: super::SystemClock,
    caps: Capabilities,
    frames: u64,
}

impl std::fmt::Debug for PcapDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapDevice")
            .field("name", &self.name)
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl PcapDevice {
    /// Opens `input` (pcap or pcapng, Ethernet frames) for receiving.
    pub fn open(input: &Path) -> Result<PcapDevice, DeviceError> {
        let name = format!("pcap:{}", input.display());
        let reader = match CaptureReader::open(input) {
            Ok(reader) => reader,
            Err(CaptureError::Open { cause: source, .. }) => {
                return Err(DeviceError::os(&name, "open", source));
            }
            Err(e) => {
                return Err(DeviceError::Capture {
                    device: name,
                    reason: e.to_string(),
                });
            }
        };
        Ok(PcapDevice {
            name,
            reader,
            output: None,
            clock: super::SystemClock::new(),
            caps: Capabilities {
                // Captures hold whatever the link carried; jumbo frames are the largest.
                mtu: 9000,
                icrc_offload: false,
                mac: None,
            },
            frames: 0,
        })
    }

    /// Writes every transmitted frame to a new pcap file at `output`.
    pub fn with_output(mut self, output: &Path) -> Result<PcapDevice, DeviceError> {
        self.output = Some(create(output)?);
        Ok(self)
    }

    /// Frames received so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    fn error(&self, reason: String) -> DeviceError {
        DeviceError::Capture {
            device: self.name.clone(),
            reason,
        }
    }
}

impl Device for PcapDevice {
    /// Returns [`DeviceError::Closed`] once the capture is exhausted.
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        match self.reader.next_frame() {
            Ok(Some(frame)) if frame.link == Link::Ethernet => {
                consume(frame.data);
                self.frames += 1;
                Ok(true)
            }
            Ok(Some(frame)) => {
                let reason = format!(
                    "frame {} has link type {}, only Ethernet (1) is supported",
                    frame.index + 1,
                    frame.link.number()
                );
                Err(self.error(reason))
            }
            Ok(None) => Err(DeviceError::Closed {
                device: self.name.clone(),
            }),
            Err(e) => Err(self.error(e.to_string())),
        }
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        check_frame_len(&self.name, &self.caps, frame)?;
        if let Some(output) = &mut self.output {
            let now = super::Clock::now(&self.clock);
            output
                .write_frame(now, frame)
                .map_err(|e| DeviceError::os(&self.name, "write", e))?;
        }
        Ok(true)
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        if let Some(output) = &mut self.output {
            output
                .flush()
                .map_err(|e| DeviceError::os(&self.name, "flush", e))?;
        }
        Ok(())
    }
}

impl Drop for PcapDevice {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `flush` is where a caller learns of them.
        let _ = self.flush();
    }
}
