//! Reading a capture file mapped into memory: records are parsed where the page cache holds
//! them, with no copy. This is how a regular file is read; at a million frames a second the
//! copy that read(2) makes would cost more than the analysis.

use pcap_parser::nom::{Err as NomErr, IResult};
use pcap_parser::pcapng::{Block, parse_block_be, parse_block_le, parse_sectionheaderblock};
use pcap_parser::{
    LegacyPcapBlock, PcapBlockOwned, PcapError, parse_pcap_frame, parse_pcap_frame_be,
    parse_pcap_frame_modified, parse_pcap_header,
};

use super::blocks::{Interfaces, Located, check_block_len, damage, pcap_record_too_big};
use std::sync::Arc;

use super::sys::{self, Mapping};
use super::{CaptureError, Format};

type FrameParser =
    for<'a> fn(&'a [u8]) -> IResult<&'a [u8], LegacyPcapBlock<'a>, PcapError<&'a [u8]>>;

/// How the next block is parsed.
#[derive(Clone, Copy)]
enum Parser {
    /// pcap, before the file header.
    PcapHeader,
    Pcap(FrameParser),
    /// pcapng; sections say their own byte order.
    PcapNg {
        big_endian: bool,
    },
}

/// Pages further than this behind the parser are dropped from the process, so that its
/// memory does not grow with the file.
const WINDOW: usize = 32 << 20;

/// Bytes after the record being parsed that are asked into the cache, a line at a time as
/// the parser moves on. The hardware prefetchers stop at every 4 KiB page boundary, so
/// without this the first read of each page (the record walk's [`Mapping::touch`], then the
/// ICRC) waits for memory. Two pages ahead (4 to 16 KiB measured alike on 1 KiB frames).
const PREFETCH_AHEAD: usize = 8192;

/// The damage reported when the file shrinks under the reader.
const SHRUNK: &str = "the file shrank while it was being read (truncated by another process)";

pub(super) struct Mapped {
    map: Arc<Mapping>,
    at: usize,
    parser: Parser,
    /// Everything before this has been released.
    released: usize,
    /// Lines before this have been asked into the cache ([`PREFETCH_AHEAD`]).
    prefetched: usize,
}

impl Mapped {
    pub(super) fn new(map: Mapping) -> Result<(Mapped, Format), CaptureError> {
        let bytes = map.bytes();
        let (format, parser) = if parse_sectionheaderblock(bytes).is_ok() {
            (Format::PcapNg, Parser::PcapNg { big_endian: false })
        } else if parse_pcap_header(bytes).is_ok() {
            (Format::Pcap, Parser::PcapHeader)
        } else if bytes.is_empty() {
            return Err(CaptureError::Empty);
        } else {
            return Err(CaptureError::NotACapture);
        };
        let mapped = Mapped {
            map: Arc::new(map),
            at: 0,
            parser,
            released: 0,
            prefetched: 0,
        };
        Ok((mapped, format))
    }

    pub(super) fn offset(&self) -> u64 {
        self.at as u64
    }

    /// The mapping, shared (see [`super::SharedFile`]).
    pub(super) fn map(&self) -> Arc<Mapping> {
        Arc::clone(&self.map)
    }

    /// The file; [`Located`] offsets point into it.
    pub(super) fn data(&self) -> &[u8] {
        self.map.bytes()
    }

    /// Damage if the frame's bytes are gone, found out before they are handed on
    /// ([`Mapping::touch`]) rather than later in the analysis.
    #[inline]
    fn check_frame(&self, at: &Located) -> Result<(), String> {
        self.map.touch(at.start, at.start.saturating_add(at.len));
        self.check_size()
    }

    /// Damage once the file was found shorter than when it was mapped (what was parsed since
    /// may have been zeros; see `sys.rs`).
    #[inline]
    fn check_size(&self) -> Result<(), String> {
        if self.map.shrunk() {
            return Err(SHRUNK.to_string());
        }
        Ok(())
    }

    /// Drops the pages a window behind the parser, a window at a time.
    fn slide(&mut self) {
        if self.at >= self.released + 2 * WINDOW {
            self.released = self.at - WINDOW;
            self.map.release(self.released);
        }
    }

    /// Asks for the lines up to [`PREFETCH_AHEAD`] bytes past the parser that were not yet
    /// asked for.
    #[inline]
    fn prefetch_ahead(&mut self) {
        let file = self.map.bytes();
        let until = self.at.saturating_add(PREFETCH_AHEAD).min(file.len());
        let mut line = self.prefetched.max(self.at);
        while line < until {
            sys::prefetch(&file[line..]);
            line += sys::CACHE_LINE;
        }
        self.prefetched = line;
    }

    /// Parses blocks until a packet; `Ok(None)` at the end, `Err` for damage.
    #[inline]
    pub(super) fn next(&mut self, interfaces: &mut Interfaces) -> Result<Option<Located>, String> {
        self.slide();
        self.prefetch_ahead();
        let file = self.map.bytes();
        let base = file.as_ptr() as usize;
        while self.at < file.len() {
            let input = &file[self.at..];
            let parsed = match self.parser {
                Parser::PcapHeader => parse_pcap_header(input).map(|(rest, h)| {
                    self.parser = Parser::Pcap(match (h.is_modified_format(), h.is_bigendian()) {
                        (true, _) => parse_pcap_frame_modified,
                        (false, true) => parse_pcap_frame_be,
                        (false, false) => parse_pcap_frame,
                    });
                    (rest, PcapBlockOwned::from(h))
                }),
                Parser::Pcap(parse) => match parse(input) {
                    // Records are nearly every block of a pcap file: straight to the frame.
                    Ok((rest, b)) => {
                        let at = interfaces.legacy(&b)?.relative_to(base);
                        self.check_frame(&at)?;
                        self.at = file.len() - rest.len();
                        return Ok(Some(at));
                    }
                    Err(e) => match pcap_record_too_big(file, input) {
                        Some(too_big) => return Err(too_big),
                        None => Err(e),
                    },
                },
                Parser::PcapNg { big_endian } => {
                    check_block_len(input, big_endian)?;
                    let parse = if big_endian {
                        parse_block_be
                    } else {
                        parse_block_le
                    };
                    parse(input).map(|(rest, b)| {
                        if let Block::SectionHeader(shb) = &b {
                            self.parser = Parser::PcapNg {
                                big_endian: shb.big_endian(),
                            };
                        }
                        (rest, PcapBlockOwned::from(b))
                    })
                }
            };
            let (rest, block) = match parsed {
                Ok(ok) => ok,
                Err(_) if self.map.shrunk() => return Err(SHRUNK.to_string()),
                Err(NomErr::Incomplete(_)) => return Err(damage(&PcapError::UnexpectedEof)),
                Err(NomErr::Error(e) | NomErr::Failure(e)) => return Err(damage(&e)),
            };
            let located = interfaces.describe(&block)?.map(|at| at.relative_to(base));
            if let Some(at) = &located {
                self.check_frame(at)?;
            } else {
                self.check_size()?;
            }
            self.at = file.len() - rest.len();
            if located.is_some() {
                return Ok(located);
            }
        }
        Ok(None)
    }
}
