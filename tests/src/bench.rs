//! Large captures for the analysis benchmarks, made from the real ones: the RoCEv2 frames of
//! every capture in a directory, repeated in rounds. Each source capture gets its own pair of
//! hosts (the third byte of an IPv4 address or the last of an IPv6 one), and each round moves
//! every PSN 2^17 further on (wrapping at 2^24 as the wire does) and every time past the
//! previous round, so that repeats look like more traffic of the same flows and not like
//! retransmissions. With `vary_qpn` each round also moves every destination QP (both ways by
//! the same amount), so that every round is a connection of its own. Frames are rebuilt with
//! the wire builder: lengths, checksums and ICRCs are right.

use std::net::IpAddr;
use std::path::Path;

use roce::capture::CaptureReader;
use roce::wire::{IpRepr, RocePacket};

/// One source frame: time from the start of the round, its capture's number, bytes.
#[derive(Debug)]
struct Source {
    at: u64,
    capture: u8,
    frame: Vec<u8>,
}

/// The frames of the rounds, in order: (capture time in ns since the epoch, frame).
#[derive(Debug)]
pub struct Rounds {
    sources: Vec<Source>,
    /// Length of a round in nanoseconds.
    span: u64,
    round: u32,
    next: usize,
    vary_qpn: bool,
}

/// Loads the RoCEv2 frames of the captures in `dir`.
pub fn rounds(dir: &Path) -> Result<Rounds, String> {
    rounds_of(&crate::captures_in(dir), false)
}

/// Loads the RoCEv2 frames of `captures`; with `vary_qpn`, each round is a new connection.
pub fn rounds_of(captures: &[std::path::PathBuf], vary_qpn: bool) -> Result<Rounds, String> {
    let mut sources = Vec::new();
    let mut span = 0;
    for (i, path) in captures.iter().enumerate() {
        let mut reader = CaptureReader::open(path).map_err(|e| e.to_string())?;
        let mut start = None;
        let mut last = 0;
        while let Some(f) = reader
            .next_frame()
            .map_err(|e| format!("{}: {e}", path.display()))?
        {
            if f.roce().is_err() {
                continue;
            }
            let t0 = *start.get_or_insert(f.timestamp_ns);
            last = f.timestamp_ns - t0;
            sources.push(Source {
                at: span + last,
                capture: i as u8,
                frame: f.data.to_vec(),
            });
        }
        // A millisecond between captures.
        span += last + 1_000_000;
    }
    if sources.is_empty() {
        return Err(format!("no RoCEv2 frames in {captures:?}"));
    }
    Ok(Rounds {
        sources,
        span,
        round: 0,
        next: 0,
        vary_qpn,
    })
}

fn host(addr: IpAddr, capture: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let mut o = v4.octets();
            o[2] = o[2].wrapping_add(capture);
            IpAddr::from(o)
        }
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[14] = o[14].wrapping_add(capture);
            IpAddr::from(o)
        }
    }
}

/// `s` as round `round` sends it.
fn rebuild(s: &Source, round: u32, vary_qpn: bool) -> Result<Vec<u8>, String> {
    let p = RocePacket::parse(&s.frame).map_err(|e| e.to_string())?;
    let mut repr = p.repr();
    let moved = |a: IpAddr| host(a, s.capture);
    match &mut repr.ip {
        IpRepr::V4(v4) => {
            if let (IpAddr::V4(a), IpAddr::V4(b)) = (moved(v4.src.into()), moved(v4.dst.into())) {
                (v4.src, v4.dst) = (a, b);
            }
        }
        IpRepr::V6(v6) => {
            if let (IpAddr::V6(a), IpAddr::V6(b)) = (moved(v6.src.into()), moved(v6.dst.into())) {
                (v6.src, v6.dst) = (a, b);
            }
        }
    }
    repr.ib.bth.psn = repr.ib.bth.psn.add(round << 17);
    if vary_qpn {
        let qp = repr.ib.bth.dest_qp.value();
        repr.ib.bth.dest_qp = roce::wire::Qpn::new((qp + (round << 4)) & 0xff_ffff);
    }
    repr.to_vec().map_err(|e| e.to_string())
}

impl Iterator for Rounds {
    type Item = Result<(u64, Vec<u8>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.sources.len() {
            self.next = 0;
            self.round += 1;
        }
        let s = &self.sources[self.next];
        self.next += 1;
        let at = 1_700_000_000_000_000_000 + u64::from(self.round) * self.span + s.at;
        Some(rebuild(s, self.round, self.vary_qpn).map(|f| (at, f)))
    }
}
