//! Decapsulation golden tests (issue 16): every capture in pcaps/, wrapped in each outer
//! layer the slicer takes off (by the library's own emitters and pcap writer, see
//! `roce_tests::wrap`), gives the same analysis as the plain capture, flow by flow (inner
//! addresses and QP, every count, time and the rdma_cm connections); and broken or foreign
//! encapsulations are counted and reported, never a panic.

use std::path::{Path, PathBuf};

use roce::analysis::{Analyzer, Report};
use roce::capture::CaptureReader;
use roce::wire::decap::OuterKind;
use roce::wire::decap::wrap::{Wrapping, wrap};
use roce_tests::wrap::wrap_capture;
use roce_tests::{captures_in, pcap_bytes};

fn pcaps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps")
}

fn analyse(reader: &mut CaptureReader) -> Report {
    let mut analyzer = Analyzer::new();
    while let Some(frame) = reader.next_frame().expect("an undamaged capture") {
        analyzer.frame(&frame);
    }
    analyzer.report()
}

fn analyse_bytes(bytes: Vec<u8>) -> Report {
    analyse(&mut CaptureReader::new(std::io::Cursor::new(bytes)).expect("a capture"))
}

#[test]
fn every_capture_in_every_wrapping_gives_the_plain_flows() {
    let captures = captures_in(&pcaps());
    assert!(captures.len() >= 20, "pcaps/ holds the real captures");
    for path in &captures {
        let plain = analyse(&mut CaptureReader::open(path).unwrap());
        assert!(plain.roce_packets > 0, "{}", path.display());
        for how in Wrapping::ALL {
            let wrapped = analyse_bytes(wrap_capture(path, how));
            let what = format!("{} in {}", path.display(), how.name());
            assert_eq!(wrapped.packets, plain.packets, "{what}");
            assert_eq!(wrapped.roce_packets, plain.roce_packets, "{what}");
            assert_eq!(wrapped.icrc_errors, plain.icrc_errors, "{what}");
            assert_eq!(wrapped.input, plain.input, "{what}");
            assert_eq!(wrapped.not_roce, plain.not_roce, "{what}");
            assert_eq!(wrapped.flows.len(), plain.flows.len(), "{what}");
            let tagged = how.encap().contains(&OuterKind::Vlan);
            for (w, p) in wrapped.flows.iter().zip(&plain.flows) {
                let mut w = w.clone();
                if tagged {
                    // The added tag's PCP (3) is the flow's priority; the rest is the same.
                    assert_eq!((w.priority, w.priority_from_pcp), (3, true), "{what}");
                    (w.priority, w.priority_from_pcp) = (p.priority, p.priority_from_pcp);
                }
                assert_eq!(
                    &w, p,
                    "{what}: flow {} -> {} QP {}",
                    p.src, p.dst, p.dest_qp
                );
            }
            assert_eq!(wrapped.connections, plain.connections, "{what}");
        }
    }
}

#[test]
fn broken_and_looping_encapsulations_are_counted_and_reported() {
    let frame = roce::wire::sample::frames(3).remove(0);
    // A VXLAN header with no frame after it (the outer lengths say so).
    let mut empty = wrap(&frame, Wrapping::Vxlan, 0).unwrap();
    empty.truncate(14 + 20 + 8 + 8);
    empty[16..18].copy_from_slice(&36u16.to_be_bytes());
    empty[38..40].copy_from_slice(&16u16.to_be_bytes());
    // GRE in GRE, one layer past the limit.
    let mut deep = frame.clone();
    for _ in 0..=roce::wire::decap::MAX_DEPTH {
        deep = wrap(&deep, Wrapping::GreTeb, 0).unwrap();
    }
    // ERSPAN III cut inside its platform subheader.
    let mut cut = wrap(&frame, Wrapping::ErspanIII(true), 0).unwrap();
    let keep = 14 + 20 + 8 + 12 + 4;
    cut.truncate(keep);
    cut[16..18].copy_from_slice(&((keep - 14) as u16).to_be_bytes());
    let report = analyse_bytes(pcap_bytes(&[empty, deep, cut, frame]));
    assert_eq!((report.packets, report.roce_packets), (4, 1));
    assert_eq!(report.input.malformed_frames, 3);
    let why: Vec<&str> = report
        .input
        .malformed_examples
        .iter()
        .map(|(_, w)| w.as_str())
        .collect();
    assert_eq!(
        why,
        [
            "Ethernet: truncated, 14 bytes needed but 0 present",
            "encapsulated more than 8 layers deep",
            "ERSPAN III: truncated, 8 bytes needed but 4 present",
        ]
    );
}

#[test]
fn a_capture_of_no_roce_says_what_it_held() {
    let mut arp = roce::wire::sample::frames(3).remove(0);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let mut frames = vec![arp.clone(); 2];
    frames.extend(std::iter::repeat_n(
        wrap(&arp, Wrapping::Vxlan, 0).unwrap(),
        5,
    ));
    frames.push(wrap(&arp, Wrapping::ErspanII, 0).unwrap());
    let report = analyse_bytes(pcap_bytes(&frames));
    assert_eq!(report.roce_packets, 0);
    assert_eq!(report.not_roce.frames, 8);
    let kinds: Vec<(&str, u64)> = report
        .not_roce
        .largest_first()
        .iter()
        .map(|(k, n)| (k.name(), *n))
        .collect();
    assert_eq!(kinds, [("IN_VXLAN", 5), ("ARP", 2), ("IN_ERSPAN_II", 1)]);
}

/// RoCEv1 (EtherType 0x8915) found behind tags, tunnels or a cooked header is analysed as
/// RoCEv1, flow by flow as plain, and not counted as malformed.
#[test]
fn rocev1_in_every_wrapping_gives_the_plain_flows() {
    let frames = roce::wire::sample::roce_v1_frames(7);
    let path = std::env::temp_dir().join(format!("roce-v1-golden-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap_bytes(&frames)).unwrap();
    let plain = analyse(&mut CaptureReader::open(&path).unwrap());
    assert_eq!(plain.roce_v1_packets, frames.len() as u64);
    assert_eq!(plain.input.malformed_frames, 0);
    for how in Wrapping::ALL {
        let wrapped = analyse_bytes(wrap_capture(&path, how));
        let what = format!("RoCEv1 in {}", how.name());
        assert_eq!(wrapped.roce_v1_packets, plain.roce_v1_packets, "{what}");
        assert_eq!(wrapped.input, plain.input, "{what}");
        assert_eq!(wrapped.flows.len(), plain.flows.len(), "{what}");
        for (w, p) in wrapped.flows.iter().zip(&plain.flows) {
            assert_eq!(
                (w.src, w.dst, w.dest_qp, w.packets),
                (p.src, p.dst, p.dest_qp, p.packets),
                "{what}"
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}
