use std::io::Cursor;

use super::*;
use crate::time::Instant;
use crate::wire::sample;

/// A classic pcap file (microsecond timestamps, Ethernet) holding `frames`, each captured up
/// to `snaplen` bytes, the i-th at i milliseconds.
pub(crate) fn pcap_bytes(frames: &[Vec<u8>], snaplen: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&(snaplen as u32).to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let cap = f.len().min(snaplen);
        out.extend_from_slice(&7u32.to_le_bytes());
        out.extend_from_slice(&(i as u32 * 1000).to_le_bytes());
        out.extend_from_slice(&(cap as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&f[..cap]);
    }
    out
}

/// A pcapng file: section header, one Ethernet interface with nanosecond timestamps
/// (if_tsresol 9), then one enhanced packet block per frame, the i-th at 7 s + i us.
fn pcapng_bytes(frames: &[Vec<u8>]) -> Vec<u8> {
    let block = |out: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = 12 + body.len().next_multiple_of(4);
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + body.len().next_multiple_of(4) - body.len(), 0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    };
    let mut out = Vec::new();
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = vec![1, 0, 0, 0, 0, 0, 4, 0];
    idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    block(&mut out, 1, &idb);
    for (i, f) in frames.iter().enumerate() {
        let ts = 7_000_000_000u64 + i as u64 * 1000;
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(f);
        epb.resize(20 + f.len().next_multiple_of(4), 0);
        block(&mut out, 6, &epb);
    }
    out
}

/// (timestamp, bytes, original length) of each frame read, and the damage if any.
type ReadBack = (Vec<(u64, Vec<u8>, u32)>, Option<CaptureError>);

/// A file in the temp dir, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(bytes: &[u8]) -> TempFile {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("roce-capture-{}-{n}.pcap", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads `bytes` both ways, mapped from a file and streamed, and checks they agree.
fn read_all(bytes: Vec<u8>) -> ReadBack {
    let file = TempFile::new(&bytes);
    let mapped = drain(CaptureReader::open(&file.0).expect("a capture"));
    let streamed = drain(CaptureReader::new(Cursor::new(bytes)).expect("a capture"));
    assert_eq!(mapped.0, streamed.0, "the same frames both ways");
    let at = |e: &Option<CaptureError>| match e {
        Some(CaptureError::Damaged { frame, offset, .. }) => Some((*frame, *offset)),
        _ => None,
    };
    assert_eq!(
        at(&mapped.1),
        at(&streamed.1),
        "damage at the same place both ways"
    );
    let says = |e: &Option<CaptureError>| e.as_ref().map(|e| e.to_string());
    assert_eq!(says(&mapped.1), says(&streamed.1), "and in the same words");
    streamed
}

fn drain(mut reader: CaptureReader) -> ReadBack {
    let mut frames = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => frames.push((f.timestamp_ns, f.data.to_vec(), f.orig_len)),
            Ok(None) => return (frames, None),
            Err(e) => {
                assert!(
                    reader.next_frame().unwrap().is_none(),
                    "nothing after damage"
                );
                return (frames, Some(e));
            }
        }
    }
}

#[test]
fn pcap_and_pcapng_give_the_same_frames() {
    let frames = sample::frames(3);
    let (from_pcap, damage) = read_all(pcap_bytes(&frames, 65535));
    assert!(damage.is_none());
    let (from_ng, damage) = read_all(pcapng_bytes(&frames));
    assert!(damage.is_none());
    assert_eq!(from_pcap.len(), frames.len());
    for (i, ((ts, data, len), (ts_ng, data_ng, _))) in from_pcap.iter().zip(&from_ng).enumerate() {
        assert_eq!(data, &frames[i]);
        assert_eq!(data_ng, &frames[i]);
        assert_eq!(*len as usize, frames[i].len());
        assert_eq!(*ts, 7_000_000_000 + i as u64 * 1_000_000);
        assert_eq!(*ts_ng, 7_000_000_000 + i as u64 * 1000);
    }
}

#[test]
fn frames_are_sliced_by_link_type() {
    let frames = sample::frames(4);
    let mut reader = CaptureReader::new(Cursor::new(pcap_bytes(&frames, 65535))).unwrap();
    assert_eq!(reader.format(), Format::Pcap);
    while let Some(f) = reader.next_frame().unwrap() {
        assert_eq!(f.link, Link::Ethernet);
        assert!(f.roce().unwrap().icrc_ok());
    }
    assert_eq!(reader.frames(), frames.len() as u64);
}

#[test]
fn snap_length_cut_frames_are_delivered_and_marked() {
    let frames = sample::frames(5);
    let (read, damage) = read_all(pcap_bytes(&frames, 64));
    assert!(damage.is_none());
    assert_eq!(read.len(), frames.len());
    for ((_, data, orig), full) in read.iter().zip(&frames) {
        assert_eq!(data.len(), full.len().min(64));
        assert_eq!(*orig as usize, full.len());
    }
}

#[test]
fn a_file_cut_short_yields_its_whole_frames_then_damage() {
    let frames = sample::frames(6);
    let bytes = pcap_bytes(&frames, 65535);
    for cut in [
        bytes.len() - 1,
        bytes.len() - frames.last().unwrap().len() - 10,
    ] {
        let (read, damage) = read_all(bytes[..cut].to_vec());
        assert_eq!(read.len(), frames.len() - 1);
        match damage {
            Some(CaptureError::Damaged { frame, reason, .. }) => {
                assert_eq!(frame, frames.len() as u64 - 1);
                assert!(reason.contains("cut short"), "{reason}");
            }
            other => panic!("expected damage, got {other:?}"),
        }
    }
    let ng = pcapng_bytes(&frames);
    let (read, damage) = read_all(ng[..ng.len() - 3].to_vec());
    assert_eq!(read.len(), frames.len() - 1);
    assert!(matches!(damage, Some(CaptureError::Damaged { .. })));
}

#[test]
fn a_record_lying_about_its_length_is_damage_not_a_panic() {
    let frames = sample::frames(7);
    let mut bytes = pcap_bytes(&frames[..3], 65535);
    let second = 24 + 16 + frames[0].len();
    bytes[second + 8..second + 12].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let (read, damage) = read_all(bytes);
    assert_eq!(read.len(), 1);
    assert!(matches!(
        damage,
        Some(CaptureError::Damaged { frame: 1, .. })
    ));
    // Claims past the file's end, beyond what a stream buffers, in either byte order: the
    // claim is the damage (not "cut short" one way and "too big" the other).
    for (caplen, big_endian) in [
        (0x7fff_0000u32, false),
        (300_000, false),
        (0x0200_0000, true),
    ] {
        let mut bytes = pcap_bytes(&frames[..1], 65535);
        if big_endian {
            for field in [0..4, 8..12, 12..16, 16..20] {
                bytes[field].reverse();
            }
            bytes[4..6].reverse();
            bytes[6..8].reverse();
            for field in [24..28, 28..32, 32..36, 36..40] {
                bytes[field].reverse();
            }
        }
        let at = bytes.len();
        bytes.extend_from_slice(&[0; 16]);
        let claim = if big_endian {
            caplen.to_be_bytes()
        } else {
            caplen.to_le_bytes()
        };
        bytes[at + 8..at + 12].copy_from_slice(&claim);
        bytes.extend_from_slice(&[0; 10]);
        let (read, damage) = read_all(bytes);
        assert_eq!(read.len(), 1);
        let damage = damage.map(|d| d.to_string()).unwrap_or_default();
        assert!(
            damage.contains(&format!("a record claims {caplen} captured bytes")),
            "{damage}"
        );
    }
}

#[test]
fn an_unknown_interface_is_damage() {
    let frames = sample::frames(8);
    let mut bytes = pcapng_bytes(&frames[..2]);
    // The first EPB's interface id: after the 28-byte SHB and the 32-byte IDB, 8 bytes in.
    bytes[28 + 32 + 8] = 5;
    let (read, damage) = read_all(bytes);
    assert!(read.is_empty());
    let Some(CaptureError::Damaged { reason, .. }) = damage else {
        panic!("expected damage");
    };
    assert!(reason.contains("interface 5"), "{reason}");
}

#[test]
fn files_that_are_not_captures_fail_to_open() {
    for bytes in [
        Vec::new(),
        b"hello, this is text and not a capture at all\n".to_vec(),
        vec![0xd4, 0xc3],
    ] {
        let file = TempFile::new(&bytes);
        for err in [
            CaptureReader::new(Cursor::new(bytes)).unwrap_err(),
            CaptureReader::open(&file.0).unwrap_err(),
        ] {
            assert!(
                matches!(err, CaptureError::Empty | CaptureError::NotACapture),
                "{err:?}"
            );
        }
    }
}

#[test]
fn cooked_and_raw_links_reach_the_ip_packet() {
    let frame = &sample::frames(9)[0];
    let ip = &frame[14..];
    let mut sll = vec![0u8; 16];
    sll[14..16].copy_from_slice(&0x0800u16.to_be_bytes());
    sll.extend_from_slice(ip);
    let mut sll2 = vec![0u8; 20];
    sll2[0..2].copy_from_slice(&0x0800u16.to_be_bytes());
    sll2.extend_from_slice(ip);
    let frame = |link, data: &[u8]| -> Result<bool, FrameError> {
        Frame::whole(0, 0, link, data).roce().map(|p| p.icrc_ok())
    };
    assert_eq!(frame(Link::LinuxSll, &sll), Ok(true));
    assert_eq!(frame(Link::LinuxSll2, &sll2), Ok(true));
    assert_eq!(frame(Link::RawIp, ip), Ok(true));
    assert!(frame(Link::LinuxSll, &[0u8; 16]).unwrap_err().is_not_roce());
    assert!(!frame(Link::LinuxSll2, &[0u8; 3]).unwrap_err().is_not_roce());
    assert!(frame(Link::Other(147), ip).unwrap_err().is_not_roce());
}

#[test]
fn frame_refs_name_the_frames_for_another_thread() {
    let frames = sample::frames(4);
    for bytes in [pcap_bytes(&frames, 65535), pcapng_bytes(&frames)] {
        let file = TempFile::new(&bytes);
        let mut reader = CaptureReader::open(&file.0).unwrap();
        let shared = reader
            .shared_file()
            .expect("a regular file is mapped and shared");
        let mut refs = Vec::new();
        while let Some(r) = reader.next_frame_ref().unwrap() {
            refs.push(r);
        }
        assert_eq!(refs.len(), frames.len());
        let looked_up = std::thread::spawn(move || {
            refs.iter()
                .map(|&r| {
                    let f = shared.frame(r).expect("in the file");
                    (f.index, f.data.to_vec(), r.len())
                })
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        for (i, (index, data, len)) in looked_up.into_iter().enumerate() {
            assert_eq!((index, len), (i as u64, frames[i].len()));
            assert_eq!(data, frames[i]);
        }
    }
    let streamed = CaptureReader::new(Cursor::new(pcap_bytes(&frames, 65535))).unwrap();
    assert!(
        streamed.shared_file().is_none(),
        "a stream has no file to share"
    );
}

#[test]
fn packet_comments_come_with_their_frames_mapped_or_streamed() {
    let frames = sample::frames(3);
    let mut w = crate::io::pcapng::PcapngWriter::new(Vec::new(), "test").unwrap();
    w.write_frame(Instant::from_nanos(1), &frames[0], Some("first <b>&</b>"))
        .unwrap();
    w.write_frame(Instant::from_nanos(2), &frames[1], None)
        .unwrap();
    w.write_frame(
        Instant::from_nanos(3),
        &frames[2],
        Some("third, odd length"),
    )
    .unwrap();
    let bytes = w.into_inner();
    let path = std::env::temp_dir().join(format!("roce-comments-{}.pcapng", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let want: [Option<&[u8]>; 3] = [Some(b"first <b>&</b>"), None, Some(b"third, odd length")];
    for mut reader in [
        CaptureReader::open(&path).unwrap(),
        CaptureReader::new(Cursor::new(bytes.clone())).unwrap(),
    ] {
        for (i, expected) in want.iter().enumerate() {
            let (frame, comment) = reader.next_frame_commented().unwrap().unwrap();
            assert_eq!(frame.data, &frames[i][..]);
            assert_eq!(comment, *expected, "frame {i}");
        }
        assert!(reader.next_frame_commented().unwrap().is_none());
    }
    std::fs::remove_file(&path).unwrap();
}

/// A mapped file truncated by another process while it is read: the reader reports damage
/// where it noticed, instead of the process dying of SIGBUS (issue 14).
#[test]
fn a_file_that_shrinks_while_mapped_is_damage_not_sigbus() {
    let frame = vec![0x5a; 1000];
    let frames = vec![frame; 4000];
    let file = TempFile::new(&pcap_bytes(&frames, 65535));
    let mut reader = CaptureReader::open(&file.0).unwrap();
    assert!(reader.shared_file().is_some(), "mapped");
    for _ in 0..10 {
        reader.next_frame().unwrap().unwrap();
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file.0)
        .unwrap()
        .set_len(100_000)
        .unwrap();
    let mut delivered = 10;
    let damage = loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                assert!(
                    f.data.iter().all(|&b| b == 0x5a),
                    "a frame from the lost part"
                );
                delivered += 1;
            }
            Ok(None) => panic!("the end of a file that shrank"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(damage.contains("shrank"), "{damage}");
    assert!(delivered < 100, "{delivered} frames");
    assert!(reader.next_frame().unwrap().is_none());
    // Another mapping afterwards is read as usual.
    let again = drain(CaptureReader::open(&file.0).unwrap());
    assert_eq!(again.0.len(), (100_000 - 24) / 1016);
}

/// pcapng timestamps in any resolution the format allows: powers of ten (nanoseconds here)
/// and of two (if_tsresol with its high bit, which pcap-parser 0.17 refuses).
#[test]
fn pcapng_timestamps_in_binary_and_decimal_resolutions() {
    let frames = sample::frames(2);
    for (tsresol, units) in [(9u8, 1_000_000_000u64), (0x80 | 30, 1 << 30), (3, 1000)] {
        let mut bytes = pcapng_bytes(&frames);
        // The interface block's if_tsresol value (see pcapng_bytes), and the timestamps
        // rewritten in those units: frame i at 7 s + i ms.
        let idb = bytes.windows(4).position(|w| w == [9, 0, 1, 0]).unwrap();
        bytes[idb + 4] = tsresol;
        let mut at = 0;
        for i in 0..frames.len() as u64 {
            at += bytes[at..]
                .windows(4)
                .position(|w| w == 6u32.to_le_bytes())
                .unwrap();
            let raw = 7 * units + i * units / 1000;
            bytes[at + 12..at + 16].copy_from_slice(&((raw >> 32) as u32).to_le_bytes());
            bytes[at + 16..at + 20].copy_from_slice(&(raw as u32).to_le_bytes());
            at += 4;
        }
        let (read, damage) = read_all(bytes);
        assert!(damage.is_none(), "{damage:?}");
        let ts: Vec<u64> = read.iter().map(|r| r.0).collect();
        for (i, t) in ts.iter().enumerate() {
            // Within the nanosecond the units round to.
            let expected = 7_000_000_000 + i as u64 * 1_000_000;
            assert!(
                t.abs_diff(expected) <= 1,
                "if_tsresol {tsresol:#x}: {t} {expected}"
            );
        }
    }
}

/// A pcapng block or packet longer than any capture holds is damage, mapped or streamed, as
/// a pcap record is.
#[test]
fn oversized_pcapng_blocks_and_packets_are_damage() {
    let frames = sample::frames(2);
    let good = pcapng_bytes(&frames[..1]);
    let mut huge = good.clone();
    // A custom block (type 0x0bad) claiming 64 MiB.
    huge.extend_from_slice(&0x0badu32.to_le_bytes());
    huge.extend_from_slice(&(64u32 << 20).to_le_bytes());
    huge.extend_from_slice(&[0; 64]);
    let (read, damage) = read_all(huge);
    assert_eq!(read.len(), 1);
    let damage = damage.map(|d| d.to_string()).unwrap_or_default();
    assert!(damage.contains("more than 16 MiB"), "{damage}");
    // The same after a second section, big-endian: each section says its byte order.
    let mut two = good.clone();
    let shb = [
        &[0x0a, 0x0d, 0x0d, 0x0a][..],
        &28u32.to_be_bytes(),
        &0x1a2b_3c4du32.to_be_bytes(),
        &[0, 1, 0, 0],
        &[0xff; 8],
        &28u32.to_be_bytes(),
    ];
    two.extend(shb.concat());
    two.extend_from_slice(&0x0badu32.to_be_bytes());
    two.extend_from_slice(&(64u32 << 20).to_be_bytes());
    two.extend_from_slice(&[0; 64]);
    let (read, damage) = read_all(two);
    assert_eq!(read.len(), 1);
    let damage = damage.map(|d| d.to_string()).unwrap_or_default();
    assert!(damage.contains("claims 67108864 bytes"), "{damage}");
    let mut big_packet = pcapng_bytes(&[vec![0u8; 300_000]]);
    let (read, damage) = read_all(std::mem::take(&mut big_packet));
    assert!(read.is_empty());
    let damage = damage.map(|d| d.to_string()).unwrap_or_default();
    assert!(damage.contains("more than any snap length"), "{damage}");
}
