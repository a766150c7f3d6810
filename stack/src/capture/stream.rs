//! Reading a capture from any byte stream (a pipe, a file that cannot be mapped) through
//! pcap-parser's streaming reader and one buffer that grows only for a record larger than it.

use std::io::Read;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError, create_reader};

use super::blocks::{
    Interfaces, Located, MAX_BLOCK, check_block_len, damage, pcap_record_too_big, too_big,
};
use super::{CaptureError, Format};

const INITIAL_BUFFER: usize = 1 << 20;
/// The buffer holds the largest block allowed.
const MAX_BUFFER: usize = MAX_BLOCK;

pub(super) struct Stream {
    reader: Box<dyn PcapReaderIterator + Send>,
    capacity: usize,
    /// Bytes of the previous frame, consumed on the next call.
    pending: usize,
    offset: u64,
    /// The file's first four bytes, when it is pcap: they give its byte order.
    pcap_magic: Option<[u8; 4]>,
    /// Whether the first section is big-endian, when it is pcapng.
    pcapng_big_endian: Option<bool>,
}

impl Stream {
    pub(super) fn new(input: impl Read + Send + 'static) -> Result<(Stream, Format), CaptureError> {
        let reader = create_reader(INITIAL_BUFFER, input).map_err(|e| match e {
            PcapError::Eof => CaptureError::Empty,
            PcapError::ReadError => CaptureError::Read,
            _ => CaptureError::NotACapture,
        })?;
        // The first block tells the format; `next` reads it again.
        let format = super::format_of(reader.data());
        let pcap_magic = reader
            .data()
            .get(..4)
            .and_then(|m| <[u8; 4]>::try_from(m).ok())
            .filter(|_| format == Format::Pcap);
        // The section header's byte-order magic, 1A2B3C4D in the writer's order.
        let pcapng_big_endian = (format == Format::PcapNg)
            .then(|| reader.data().get(8..12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d][..]));
        let stream = Stream {
            reader,
            capacity: INITIAL_BUFFER,
            pending: 0,
            offset: 0,
            pcap_magic,
            pcapng_big_endian,
        };
        Ok((stream, format))
    }

    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// The buffer the last [`Located`] points into.
    pub(super) fn data(&self) -> &[u8] {
        self.reader.data()
    }

    fn consume(&mut self, n: usize) {
        self.reader.consume(n);
        self.offset += n as u64;
    }

    fn grow(&mut self) -> bool {
        self.capacity *= 2;
        self.capacity <= MAX_BUFFER && self.reader.grow(self.capacity)
    }

    /// Damage when the block at the buffer's start claims more than a block or record may
    /// hold, as the mapped reader finds it.
    fn check_claim(&self) -> Result<(), String> {
        let data = self.reader.data();
        // A pcap file's header is no record: past it, the buffer starts at one.
        if let Some(magic) = self.pcap_magic
            && self.offset > 0
            && let Some(too_big) = pcap_record_too_big(&magic, data)
        {
            return Err(too_big);
        }
        match self.pcapng_big_endian {
            Some(big_endian) => check_block_len(data, big_endian),
            None => Ok(()),
        }
    }

    /// Reads blocks until a packet; `Ok(None)` at the end, `Err` for damage.
    pub(super) fn next(&mut self, interfaces: &mut Interfaces) -> Result<Option<Located>, String> {
        let pending = std::mem::take(&mut self.pending);
        self.consume(pending);
        loop {
            // The block's data is a slice of the buffer at this address; its offset from it
            // survives the borrow that `next` holds.
            let base = self.reader.data().as_ptr() as usize;
            match self.reader.next() {
                Ok((consumed, block)) => match interfaces.describe(&block)? {
                    Some(at) => {
                        self.pending = consumed;
                        return Ok(Some(at.relative_to(base)));
                    }
                    None => {
                        // Each section says its own byte order.
                        if let PcapBlockOwned::NG(Block::SectionHeader(shb)) = &block {
                            self.pcapng_big_endian = Some(shb.big_endian());
                        }
                        self.consume(consumed);
                    }
                },
                Err(PcapError::Eof) => return Ok(None),
                Err(PcapError::Incomplete(_)) => {
                    self.check_claim()?;
                    let before = self.reader.data().len();
                    self.reader.refill().map_err(|_| "read error".to_string())?;
                    // A full buffer reads nothing: grow it or this would spin.
                    let stuck =
                        self.reader.data().len() == before && !self.reader.reader_exhausted();
                    if stuck && !self.grow() {
                        return Err(too_big(MAX_BUFFER + 1));
                    }
                }
                Err(PcapError::BufferTooSmall) => {
                    self.check_claim()?;
                    if !self.grow() {
                        return Err(too_big(MAX_BUFFER + 1));
                    }
                }
                Err(e) => return Err(damage(&e)),
            }
        }
    }
}
