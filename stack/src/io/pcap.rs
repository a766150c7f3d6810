//! Captures as devices: [`PcapDevice`] receives the frames of a pcap or pcapng file (replay
//! analysis, regression inputs) and writes what it transmits to a pcap file; [`PcapWriter`]
//! writes the classic pcap format that [`PcapRecorder`](super::PcapRecorder) also uses.
//!
//! Reading goes through pcap-parser, which knows both formats. Writing is classic pcap with
//! nanosecond timestamps (magic 0xa1b23c4d): every tool reads it, and a handful of
//! fixed-layout fields are less code than another dependency.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{Linktype, PcapBlockOwned, PcapError, create_reader};

use crate::fault::Nanos;

use super::{Capabilities, Device, DeviceError, check_frame_len};

const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const SNAPLEN: u32 = 262_144;
const LINKTYPE_ETHERNET: u32 = 1;

/// Writes frames to a classic pcap stream, Ethernet link type, nanosecond timestamps.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        header[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out })
    }

    /// Appends one frame seen at `at` (nanoseconds since the Unix epoch).
    pub fn write_frame(&mut self, at: Nanos, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let captured = len.min(SNAPLEN);
        let seconds = u32::try_from(at / 1_000_000_000).unwrap_or(u32::MAX);
        let mut record = [0u8; 16];
        record[0..4].copy_from_slice(&seconds.to_le_bytes());
        record[4..8].copy_from_slice(&((at % 1_000_000_000) as u32).to_le_bytes());
        record[8..12].copy_from_slice(&captured.to_le_bytes());
        record[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(&frame[..captured as usize])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

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
    reader: Box<dyn PcapReaderIterator + Send>,
    /// Link type of each pcapng interface of the current section, or of the pcap file.
    linktypes: Vec<Linktype>,
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
        let file = File::open(input).map_err(|e| DeviceError::os(&name, "open", e))?;
        let reader = create_reader(1 << 16, file).map_err(|e| DeviceError::Capture {
            device: name.clone(),
            reason: match e {
                PcapError::Eof => "empty file".to_owned(),
                e => e.to_string(),
            },
        })?;
        Ok(PcapDevice {
            name,
            reader,
            linktypes: Vec::new(),
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

/// Where a block leaves the reader.
enum Step {
    Frame,
    Skip,
    NotEthernet(Linktype),
}

impl Device for PcapDevice {
    /// Returns [`DeviceError::Closed`] once the capture is exhausted.
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        loop {
            let step = match self.reader.next() {
                Ok((offset, block)) => {
                    let linktypes = &mut self.linktypes;
                    let mut deliver = |linktype: Option<&Linktype>, data: &[u8]| match linktype {
                        Some(&Linktype::ETHERNET) => {
                            consume(data);
                            Step::Frame
                        }
                        other => Step::NotEthernet(other.copied().unwrap_or(Linktype(-1))),
                    };
                    let step = match block {
                        PcapBlockOwned::LegacyHeader(header) => {
                            *linktypes = vec![header.network];
                            Step::Skip
                        }
                        PcapBlockOwned::Legacy(b) => deliver(linktypes.first(), b.data),
                        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                            linktypes.clear();
                            Step::Skip
                        }
                        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                            linktypes.push(idb.linktype);
                            Step::Skip
                        }
                        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                            let linktype = linktypes.get(epb.if_id as usize);
                            deliver(linktype, epb.packet_data())
                        }
                        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                            let len = (spb.origlen as usize).min(spb.data.len());
                            deliver(linktypes.first(), &spb.data[..len])
                        }
                        PcapBlockOwned::NG(_) => Step::Skip,
                    };
                    self.reader.consume(offset);
                    step
                }
                Err(PcapError::Eof) => {
                    return Err(DeviceError::Closed {
                        device: self.name.clone(),
                    });
                }
                Err(PcapError::UnexpectedEof) => {
                    return Err(self.error("the file ends inside a record".to_owned()));
                }
                Err(PcapError::Incomplete(_)) => {
                    if self.reader.reader_exhausted() {
                        return Err(self.error("the file ends inside a record".to_owned()));
                    }
                    let refilled = self.reader.refill().map_err(|e| e.to_string());
                    refilled.map_err(|reason| self.error(reason))?;
                    continue;
                }
                Err(e) => {
                    let reason = e.to_string();
                    return Err(self.error(reason));
                }
            };
            match step {
                Step::Frame => {
                    self.frames += 1;
                    return Ok(true);
                }
                Step::Skip => {}
                Step::NotEthernet(linktype) => {
                    return Err(self.error(format!(
                        "frame {} has link type {}, only Ethernet (1) is supported",
                        self.frames + 1,
                        linktype.0
                    )));
                }
            }
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
