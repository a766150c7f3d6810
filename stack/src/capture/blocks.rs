//! What each pcap or pcapng block means, the same for both ways of reading a file: a packet
//! (where its bytes lie, when, on which link), nothing (headers, interfaces, statistics), or
//! damage.

use pcap_parser::pcapng::{Block, OptionCode, PcapNGOption};
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{LegacyPcapBlock, PcapBlockOwned, PcapError};

use super::Link;

/// libpcap's largest snap length: a record or pcapng packet block claiming more captured
/// bytes is corrupt, not a jumbo frame.
const MAX_RECORD: u32 = 262_144;

/// The longest pcapng block read (any type): longer is damage, not a reason to hold it.
pub(super) const MAX_BLOCK: usize = 16 << 20;

/// The damage of a block or record longer than the reader holds.
pub(super) fn too_big(len: usize) -> String {
    format!(
        "a block claims {len} bytes, more than {} MiB: corrupt capture",
        MAX_BLOCK >> 20
    )
}

/// The state the blocks of a file build up: the link type and clock of each interface.
#[derive(Debug, Default)]
pub(super) struct Interfaces {
    /// pcap: the one interface of the file header; pcapng: those of the current section.
    list: Vec<Interface>,
    /// The current pcapng section is big-endian (its option values are too).
    big_endian: bool,
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
pub(super) struct Located {
    /// Where the data starts: an address until [`Located::relative_to`] makes it an offset.
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) orig_len: u32,
    pub(super) timestamp_ns: u64,
    pub(super) link: Link,
    /// The packet's comment (pcapng opt_comment, section 3.5), an address and length like
    /// the data; length 0 when it has none.
    pub(super) comment: (usize, usize),
}

impl Located {
    /// Turns the absolute address of the data into an offset from the buffer's start.
    #[inline]
    pub(super) fn relative_to(mut self, base: usize) -> Located {
        // A slice outside the buffer would be a pcap-parser bug; an offset past the end makes
        // `next_frame` report the end rather than index out of bounds.
        self.start = self.start.checked_sub(base).unwrap_or(usize::MAX / 2);
        if self.comment.1 > 0 {
            // An option pcap-parser had to copy lies outside the buffer: no comment then.
            self.comment = self
                .comment
                .0
                .checked_sub(base)
                .map_or((0, 0), |at| (at, self.comment.1));
        }
        self
    }
}

impl Interfaces {
    /// A pcap record: the common case, without going through [`PcapBlockOwned`].
    #[inline]
    pub(super) fn legacy(&self, b: &LegacyPcapBlock<'_>) -> Result<Located, String> {
        legacy(b, &self.list)
    }

    /// What a block means: a packet (where it lies), nothing (header, interface,
    /// statistics...), or damage. Header and interface blocks update the interfaces.
    pub(super) fn describe(
        &mut self,
        block: &PcapBlockOwned<'_>,
    ) -> Result<Option<Located>, String> {
        if let PcapBlockOwned::NG(Block::SectionHeader(shb)) = block {
            self.big_endian = shb.big_endian();
        }
        describe(block, &mut self.list, self.big_endian)
    }
}

/// An interface's timestamp units per second from its if_tsresol option (pcapng 4.2): a
/// power of ten, or of two with the high bit set; 10^6 without the option. pcap-parser 0.17
/// takes the flag bit for part of the exponent and so refuses every power of two.
fn units_per_second(options: &[PcapNGOption<'_>]) -> Result<u64, String> {
    let Some(option) = options.iter().find(|o| o.code == OptionCode::IfTsresol) else {
        return Ok(1_000_000);
    };
    let Some(&resol) = option.value().first() else {
        return Err("an interface with an empty if_tsresol option".to_string());
    };
    let exponent = u32::from(resol & 0x7f);
    let units = if resol & 0x80 == 0 {
        10u64.checked_pow(exponent)
    } else {
        1u64.checked_shl(exponent).filter(|_| exponent < 64)
    };
    units.ok_or_else(|| format!("an interface with an unreadable if_tsresol {resol:#04x}"))
}

/// An interface's if_tsoffset option (seconds added to every timestamp), in the section's
/// byte order; 0 without it.
fn offset_seconds(options: &[PcapNGOption<'_>], big_endian: bool) -> i64 {
    options
        .iter()
        .find(|o| o.code == OptionCode::IfTsoffset)
        .and_then(|o| <[u8; 8]>::try_from(o.value().get(..8)?).ok())
        .map_or(0, |b| {
            if big_endian {
                i64::from_be_bytes(b)
            } else {
                i64::from_le_bytes(b)
            }
        })
}

fn describe(
    block: &PcapBlockOwned<'_>,
    interfaces: &mut Vec<Interface>,
    big_endian: bool,
) -> Result<Option<Located>, String> {
    let located = |data: &[u8], orig_len: u32, timestamp_ns: u64, link: Link| Located {
        start: data.as_ptr() as usize,
        len: data.len(),
        orig_len,
        timestamp_ns,
        link,
        comment: (0, 0),
    };
    match block {
        PcapBlockOwned::LegacyHeader(h) => {
            *interfaces = vec![Interface {
                link: Link::from_linktype(h.network),
                units_per_second: if h.is_nanosecond_precision() {
                    1_000_000_000
                } else {
                    1_000_000
                },
                offset_seconds: 0,
            }];
            Ok(None)
        }
        PcapBlockOwned::Legacy(b) => legacy(b, interfaces).map(Some),
        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
            interfaces.clear();
            Ok(None)
        }
        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
            interfaces.push(Interface {
                link: Link::from_linktype(idb.linktype),
                units_per_second: units_per_second(&idb.options)?,
                offset_seconds: offset_seconds(&idb.options, big_endian),
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
            if epb.caplen > MAX_RECORD {
                return Err(too_many_bytes(epb.caplen));
            }
            let raw = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
            let units = iface.units_per_second;
            let ts = timestamp(raw / units, raw % units, units, iface.offset_seconds);
            let mut at = located(epb.packet_data(), epb.origlen, ts, iface.link);
            // The first opt_comment (code 1); a frame rarely has more than one.
            if let Some(text) = epb
                .options
                .iter()
                .find(|o| o.code == OptionCode::Comment)
                .and_then(|o| o.as_bytes().ok())
            {
                at.comment = (text.as_ptr() as usize, text.len());
            }
            Ok(Some(at))
        }
        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
            let Some(iface) = interfaces.first() else {
                return Err("a packet before any interface description".to_string());
            };
            if spb.packet_data().len() > MAX_RECORD as usize {
                return Err(too_many_bytes(spb.packet_data().len() as u32));
            }
            // A simple packet block has no timestamp (pcapng 4.4).
            Ok(Some(located(spb.packet_data(), spb.origlen, 0, iface.link)))
        }
        PcapBlockOwned::NG(_) => Ok(None),
    }
}

#[inline]
fn legacy(b: &LegacyPcapBlock<'_>, interfaces: &[Interface]) -> Result<Located, String> {
    let Some(iface) = interfaces.first() else {
        return Err("a record before the file header".to_string());
    };
    if b.caplen > MAX_RECORD {
        return Err(too_many_bytes(b.caplen));
    }
    let ts = timestamp(
        u64::from(b.ts_sec),
        u64::from(b.ts_usec),
        iface.units_per_second,
        0,
    );
    Ok(Located {
        start: b.data.as_ptr() as usize,
        len: b.data.len(),
        orig_len: b.origlen,
        timestamp_ns: ts,
        link: iface.link,
        comment: (0, 0),
    })
}

/// Damage when the pcapng block at the start of `input` claims more than [`MAX_BLOCK`],
/// read from its header alone (both readers check it before buffering or parsing it).
pub(super) fn check_block_len(input: &[u8], big_endian: bool) -> Result<(), String> {
    let Some(len) = input.get(4..8) else {
        return Ok(());
    };
    // A section header starts a section with its own byte order, which its byte-order magic
    // (1A2B3C4D, after the length) gives.
    let big_endian = match (input.get(..4), input.get(8..12)) {
        (Some([0x0a, 0x0d, 0x0d, 0x0a]), Some(magic)) => magic == [0x1a, 0x2b, 0x3c, 0x4d],
        _ => big_endian,
    };
    let len = <[u8; 4]>::try_from(len).map_or(0, |b| {
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    });
    if len as usize > MAX_BLOCK {
        return Err(too_big(len as usize));
    }
    Ok(())
}

/// Damage when the pcap record at the start of `record` claims more captured bytes than
/// any snap length, read from its header alone (its body may lie past the file's end):
/// both readers say so before trying to buffer or parse it. `magic` is the file's first
/// four bytes, which give the byte order.
pub(super) fn pcap_record_too_big(magic: &[u8], record: &[u8]) -> Option<String> {
    let magic = <[u8; 4]>::try_from(magic.get(..4)?).ok()?;
    let caplen = <[u8; 4]>::try_from(record.get(8..12)?).ok()?;
    // a1b2c3d4 (microseconds), a1b23c4d (nanoseconds), a1b2cd34 (modified): written in the
    // writer's order, so the first byte tells it.
    let caplen = if magic[0] == 0xa1 {
        u32::from_be_bytes(caplen)
    } else {
        u32::from_le_bytes(caplen)
    };
    (caplen > MAX_RECORD).then(|| too_many_bytes(caplen))
}

fn too_many_bytes(caplen: u32) -> String {
    format!("a record claims {caplen} captured bytes, more than any snap length ({MAX_RECORD})")
}

/// Nanoseconds since the epoch from whole seconds and a fraction in `units` per second.
#[inline]
fn timestamp(seconds: u64, fraction: u64, units: u64, offset_seconds: i64) -> u64 {
    let seconds = seconds.saturating_add_signed(offset_seconds);
    let nanos = u128::from(fraction) * 1_000_000_000 / u128::from(units);
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Why pcap-parser stopped, for the damage report. Its messages quote input bytes: keep the
/// start.
pub(super) fn damage(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::UnexpectedEof | PcapError::Incomplete(_) => {
            "the file ends inside a record (cut short)".to_string()
        }
        PcapError::ReadError => "read error".to_string(),
        e => {
            let s = e.to_string();
            format!(
                "corrupt record: {}",
                s.get(..s.find(", input").unwrap_or(s.len())).unwrap_or(&s)
            )
        }
    }
}
