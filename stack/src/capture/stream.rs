//! Reading a capture from any byte stream (a pipe, a file that cannot be mapped) through
//! pcap-parser's streaming reader and one buffer that grows only for a record larger than it.

use std::io::Read;

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapError, create_reader};

use super::blocks::{Interfaces, Located, MAX_BLOCK, damage, too_big};
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
        let stream = Stream {
            reader,
            capacity: INITIAL_BUFFER,
            pending: 0,
            offset: 0,
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
                    None => self.consume(consumed),
                },
                Err(PcapError::Eof) => return Ok(None),
                Err(PcapError::Incomplete(_)) => {
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
                    if !self.grow() {
                        return Err(too_big(MAX_BUFFER + 1));
                    }
                }
                Err(e) => return Err(damage(&e)),
            }
        }
    }
}
