//! A pcapng writer (draft-ietf-opsawg-pcapng) for captures that carry a comment on some
//! frames: the teaching captures of `roce gen` say on the frame itself what happens to it
//! ("dropped by the switch after this point", "retransmission"), and Wireshark shows it as
//! the packet comment. One section, one Ethernet interface with nanosecond timestamps,
//! little-endian blocks; [`crate::capture`] reads it back.

use std::io::{self, Write};

use crate::time::Instant;

const SECTION_HEADER: u32 = 0x0a0d_0d0a;
const INTERFACE_DESCRIPTION: u32 = 0x0000_0001;
const ENHANCED_PACKET: u32 = 0x0000_0006;
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const LINKTYPE_ETHERNET: u16 = 1;
const SNAPLEN: u32 = 262_144;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const OPT_SHB_USERAPPL: u16 = 4;
const OPT_IF_TSRESOL: u16 = 9;

/// Writes frames to a pcapng stream.
#[derive(Debug)]
pub struct PcapngWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapngWriter<W> {
    /// Starts the stream: a section header naming `application`, and the interface.
    pub fn new(mut out: W, application: &str) -> io::Result<PcapngWriter<W>> {
        let mut shb = Vec::new();
        shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        // Section length unknown.
        shb.extend_from_slice(&u64::MAX.to_le_bytes());
        option(&mut shb, OPT_SHB_USERAPPL, application.as_bytes());
        end_of_options(&mut shb);
        block(&mut out, SECTION_HEADER, &shb)?;

        let mut idb = Vec::new();
        idb.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&SNAPLEN.to_le_bytes());
        // Timestamps in units of 10^-9 s.
        option(&mut idb, OPT_IF_TSRESOL, &[9]);
        end_of_options(&mut idb);
        block(&mut out, INTERFACE_DESCRIPTION, &idb)?;
        Ok(PcapngWriter { out })
    }

    /// Appends one frame seen at `at` (nanoseconds since the Unix epoch), with an optional
    /// comment.
    pub fn write_frame(
        &mut self,
        at: Instant,
        frame: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()> {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let captured = len.min(SNAPLEN);
        let mut epb = Vec::with_capacity(frame.len() + 64);
        epb.extend_from_slice(&0u32.to_le_bytes());
        let at = at.as_nanos();
        epb.extend_from_slice(&((at >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(at as u32).to_le_bytes());
        epb.extend_from_slice(&captured.to_le_bytes());
        epb.extend_from_slice(&len.to_le_bytes());
        epb.extend_from_slice(&frame[..captured as usize]);
        pad32(&mut epb);
        if let Some(text) = comment {
            option(&mut epb, OPT_COMMENT, text.as_bytes());
            end_of_options(&mut epb);
        }
        block(&mut self.out, ENHANCED_PACKET, &epb)
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

/// A block: type, total length, body (a multiple of 4 bytes), total length again.
fn block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = u32::try_from(body.len() + 12).unwrap_or(u32::MAX);
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_le_bytes())
}

/// An option: code, length, value padded to 32 bits. Values longer than 65535 bytes are cut.
fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    let value = &value[..value.len().min(usize::from(u16::MAX))];
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    pad32(body);
}

fn end_of_options(body: &mut Vec<u8>) {
    body.extend_from_slice(&OPT_END.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
}

fn pad32(body: &mut Vec<u8>) {
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CaptureReader, Format};

    #[test]
    fn reads_back_with_timestamps_and_frames() {
        let mut w = PcapngWriter::new(Vec::new(), "roce test").unwrap();
        let at = 1_735_689_600_123_456_789;
        w.write_frame(
            Instant::from_nanos(at),
            &[1, 2, 3, 4, 5],
            Some("a comment of odd length"),
        )
        .unwrap();
        w.write_frame(Instant::from_nanos(at + 1), &[9; 60], None)
            .unwrap();
        let bytes = w.into_inner();
        assert_eq!(bytes.len() % 4, 0);
        let mut r = CaptureReader::new(std::io::Cursor::new(bytes)).unwrap();
        assert_eq!(r.format(), Format::PcapNg);
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.timestamp_ns, f.data), (at, &[1u8, 2, 3, 4, 5][..]));
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.timestamp_ns, f.data.len()), (at + 1, 60));
        assert!(r.next_frame().unwrap().is_none());
    }
}
