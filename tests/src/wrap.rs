//! Captures wrapped in outer layers, for the decapsulation's golden tests and cross-checks:
//! every frame of a capture put inside one [`Wrapping`] by the library's own emitters and
//! written by its pcap writer, timestamps and snap-length cuts kept.

use std::path::Path;

use roce::capture::{CaptureReader, Link};
use roce::io::pcap::PcapWriter;
use roce::time::Instant;
use roce::wire::LinkHeader;
use roce::wire::decap::wrap::{Wrapping, wrap};

/// The capture at `path` (Ethernet frames) with every frame wrapped as `how` says, as pcap
/// bytes. A frame too short for an Ethernet header is kept as it is.
pub fn wrap_capture(path: &Path, how: Wrapping) -> Vec<u8> {
    let mut reader = CaptureReader::open(path).expect("a capture");
    let link = match how.link() {
        LinkHeader::Sll => Link::LinuxSll,
        LinkHeader::Sll2 => Link::LinuxSll2,
        LinkHeader::Ip => Link::RawIp,
        LinkHeader::Ethernet => Link::Ethernet,
    };
    let mut out = PcapWriter::with_link(Vec::new(), link).expect("a Vec takes writes");
    let mut seq = 0;
    while let Some(frame) = reader.next_frame().expect("an undamaged capture") {
        assert_eq!(
            frame.link,
            Link::Ethernet,
            "{}: not Ethernet",
            path.display()
        );
        seq += 1;
        let Some(wrapped) = wrap(frame.data, how, seq) else {
            out.write_record(
                Instant::from_nanos(frame.timestamp_ns),
                frame.data,
                frame.orig_len,
            )
            .expect("a Vec takes writes");
            continue;
        };
        // A cut frame stays cut by as many bytes; the outer lengths announce the whole frame.
        let added = wrapped.len() - frame.data.len();
        let orig_len = frame.orig_len + added as u32;
        let full = if frame.is_cut() {
            let mut padded = frame.data.to_vec();
            padded.resize(frame.orig_len as usize, 0);
            wrap(&padded, how, seq).expect("as long as before")
        } else {
            wrapped
        };
        let kept = frame.data.len() + added;
        out.write_record(
            Instant::from_nanos(frame.timestamp_ns),
            &full[..kept],
            orig_len,
        )
        .expect("a Vec takes writes");
    }
    out.into_inner()
}
