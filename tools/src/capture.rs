//! Reading frames from pcap and pcapng files, and handing each to the wire layer according to
//! its link type. Shared by the subcommands that read captures (`decode`, `analyze`).
//!
//! A damaged capture (cut short, a record that lies about its length) yields the frames before
//! the damage and then one [`Record::Damaged`]; only a file that is not a capture at all is an
//! error.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, bail};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{Block, Linktype, PcapBlockOwned, PcapError, create_reader};
use roce::wire::{PacketError, RocePacket};

/// Read buffer: large enough for any frame of a 256 KiB snap length after growing.
const INITIAL_BUFFER: usize = 1 << 20;
const MAX_BUFFER: usize = 16 << 20;

/// One record of a capture, in file order.
#[derive(Debug)]
pub enum Record<'a> {
    Frame(Frame<'a>),
    /// The capture is damaged here; no frames follow.
    Damaged {
        index: usize,
        reason: String,
    },
}

/// A captured frame and how to read it.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Position among the capture's frames, from 0.
    pub index: usize,
    pub link: Linktype,
    /// The bytes captured (perhaps fewer than were on the wire, see `orig_len`).
    pub data: &'a [u8],
    pub orig_len: usize,
}

/// What a frame turned out to be.
#[derive(Debug)]
pub enum Dissected<'a> {
    Roce(Box<RocePacket<'a>>),
    /// Not a RoCEv2 frame (another protocol, or a link type we do not read).
    NotRoce(String),
    /// Addressed to UDP port 4791 but not a well-formed RoCEv2 packet, or cut before we could
    /// tell.
    Broken(String),
}

impl<'a> Frame<'a> {
    /// Slices the frame according to its link type: Ethernet, Linux cooked (SLL, SLL2) or raw IP.
    pub fn dissect(&self) -> Dissected<'a> {
        let parsed = match self.link {
            Linktype::ETHERNET => RocePacket::parse(self.data),
            Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => RocePacket::parse_ip(self.data),
            Linktype::LINUX_SLL => match cooked(self.data, 16, 14) {
                Ok(ip) => RocePacket::parse_ip(ip),
                Err(d) => return d,
            },
            Linktype::LINUX_SLL2 => match cooked(self.data, 20, 0) {
                Ok(ip) => RocePacket::parse_ip(ip),
                Err(d) => return d,
            },
            other => return Dissected::NotRoce(format!("link type {} is not read", other.0)),
        };
        match parsed {
            Ok(pkt) => Dissected::Roce(Box::new(pkt)),
            Err(e) if e.is_not_roce() => Dissected::NotRoce(e.to_string()),
            Err(e) => Dissected::Broken(self.explain(e)),
        }
    }

    /// The error, plus a note when the capture kept only part of the frame (a snap length),
    /// which is the usual reason for a truncated packet.
    fn explain(&self, e: PacketError) -> String {
        if self.data.len() < self.orig_len {
            format!(
                "{e} (the capture kept only {} of the frame's {} bytes)",
                self.data.len(),
                self.orig_len
            )
        } else {
            e.to_string()
        }
    }
}

/// The IP packet inside a Linux cooked frame whose header is `header_len` bytes with the
/// EtherType-like protocol field at `protocol_at`.
fn cooked(data: &[u8], header_len: usize, protocol_at: usize) -> Result<&[u8], Dissected<'_>> {
    if data.len() < header_len {
        return Err(Dissected::Broken(format!(
            "Linux cooked header: truncated, {header_len} bytes needed but {} present",
            data.len()
        )));
    }
    match u16::from_be_bytes([data[protocol_at], data[protocol_at + 1]]) {
        0x0800 | 0x86dd => Ok(&data[header_len..]),
        other => Err(Dissected::NotRoce(format!(
            "not RoCEv2: protocol {other:#06x} is neither IPv4 nor IPv6"
        ))),
    }
}

/// Calls `on_record` for every frame of the pcap or pcapng file at `path`, then for the damage
/// if the file is damaged. Fails only if the file cannot be read or is not a capture.
pub fn for_each_record(path: &Path, mut on_record: impl FnMut(Record<'_>)) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = match create_reader(INITIAL_BUFFER, file) {
        Ok(r) => r,
        Err(PcapError::Eof) => bail!("{} is empty, not a pcap or pcapng capture", path.display()),
        Err(PcapError::ReadError) => bail!("cannot read {}", path.display()),
        Err(_) => bail!("{} is not a pcap or pcapng capture", path.display()),
    };
    let mut capacity = INITIAL_BUFFER;
    let mut links: Vec<Linktype> = Vec::new();
    let mut index = 0;
    let damage = loop {
        let (consumed, frame) = match reader.next() {
            Ok((consumed, block)) => (consumed, frame_of(&block, &mut links, index)),
            Err(PcapError::Eof) => break None,
            Err(PcapError::Incomplete(_)) => {
                let before = reader.data().len();
                if reader.refill().is_err() {
                    break Some("read error".to_string());
                }
                // A full buffer reads nothing more: grow it, or the loop would spin.
                let stuck = reader.data().len() == before && !reader.reader_exhausted();
                if stuck && !grow(reader.as_mut(), &mut capacity) {
                    break Some(too_big());
                }
                continue;
            }
            Err(PcapError::BufferTooSmall) => {
                if grow(reader.as_mut(), &mut capacity) {
                    continue;
                }
                break Some(too_big());
            }
            Err(PcapError::UnexpectedEof) => {
                break Some("capture cut short in the middle of a record".to_string());
            }
            Err(e) => break Some(format!("corrupt record: {e}")),
        };
        match frame {
            Ok(Some(frame)) => {
                on_record(Record::Frame(frame));
                index += 1;
            }
            Ok(None) => {}
            Err(reason) => break Some(reason),
        }
        reader.consume(consumed);
    };
    if let Some(reason) = damage {
        on_record(Record::Damaged { index, reason });
    }
    Ok(())
}

/// Doubles the read buffer, up to [`MAX_BUFFER`].
fn grow(reader: &mut dyn PcapReaderIterator, capacity: &mut usize) -> bool {
    *capacity *= 2;
    *capacity <= MAX_BUFFER && reader.grow(*capacity)
}

fn too_big() -> String {
    format!(
        "a record claims more than {} MiB: corrupt capture",
        MAX_BUFFER >> 20
    )
}

/// The frame a block holds, if any; interface descriptions update `links`.
fn frame_of<'a>(
    block: &PcapBlockOwned<'a>,
    links: &mut Vec<Linktype>,
    index: usize,
) -> Result<Option<Frame<'a>>, String> {
    let frame = |link, data: &'a [u8], caplen: u32, orig_len: u32| {
        let data = &data[..data.len().min(caplen as usize)];
        Frame {
            index,
            link,
            data,
            orig_len: orig_len as usize,
        }
    };
    Ok(match block {
        PcapBlockOwned::LegacyHeader(h) => {
            *links = vec![h.network];
            None
        }
        PcapBlockOwned::Legacy(b) => {
            let link = links.first().copied().unwrap_or(Linktype::ETHERNET);
            Some(frame(link, b.data, b.caplen, b.origlen))
        }
        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
            links.clear();
            None
        }
        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
            links.push(idb.linktype);
            None
        }
        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
            let Some(&link) = links.get(epb.if_id as usize) else {
                return Err(format!(
                    "packet on interface {} which no interface description declares",
                    epb.if_id
                ));
            };
            Some(frame(link, epb.data, epb.caplen, epb.origlen))
        }
        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
            let Some(&link) = links.first() else {
                return Err("packet before any interface description".to_string());
            };
            Some(frame(link, spb.data, spb.origlen, spb.origlen))
        }
        PcapBlockOwned::NG(_) => None,
    })
}
