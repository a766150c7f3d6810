//! `roce demo`'s scenario through the library, as the tests and benchmarks share it: a small
//! run over a link with loss, reordering and a CE-marking bottleneck verifies every byte,
//! recovers by retransmission, and writes a capture whose frames all parse with good ICRCs.
//! The command line itself is tested in tools/tests/demo.rs (Cargo builds the `roce` binary
//! only for its own package's tests).

use std::io::Cursor;

use roce::capture::CaptureReader;
use roce::scenario::{self, CaptureWindow, DemoConfig, Op};
use roce::wire::{Ecn, RocePacket};

fn small() -> DemoConfig {
    let mut c = DemoConfig::default().with_seed(42);
    c.traffic.total_bytes = 8 << 20;
    c.traffic.max_message = 64 << 10;
    c.net.loss = 0.02;
    c.net.reorder = 0.02;
    c.capture = CaptureWindow {
        first: 3000,
        last: 500,
    };
    c
}

#[test]
fn a_faulty_congested_run_verifies_every_byte_and_recovers() {
    let c = small();
    let (r, pcap) = scenario::run(&c, Some(Vec::new())).expect("every byte verified");
    assert!(r.ops.total_bytes() >= c.traffic.total_bytes);
    for op in Op::ALL {
        assert!(r.ops.messages(op) > 0, "{} ran", op.name());
    }
    assert!(r.link_a_to_b.dropped > 0 && r.link_a_to_b.reordered > 0);
    assert!(r.retransmitted_packets() > 0);
    assert!(r.b.seq_naks_sent > 0, "gaps were NAKed");
    assert!(r.link_a_to_b.ce_marked > 0, "the bottleneck marked CE");
    assert!(r.host_b.cnps_sent > 0 && r.host_a.cnps_received > 0);
    assert!(r.dcqcn_a.is_some_and(|d| d.rate_cuts > 0));
    assert!(r.goodput_gbps() > 0.0);

    // The capture: every frame is ARP or RoCEv2 with a good ICRC; CE marks and CNPs show.
    let summary = r.capture.expect("a capture was asked for");
    let mut reader = CaptureReader::new(Cursor::new(pcap.unwrap())).unwrap();
    let (mut roce, mut arp, mut ce, mut cnp) = (0u64, 0u64, 0u64, 0u64);
    while let Some(frame) = reader.next_frame().unwrap() {
        if frame.data.get(12..14) == Some(&[0x08, 0x06]) {
            arp += 1;
            continue;
        }
        let p =
            RocePacket::parse(frame.data).unwrap_or_else(|e| panic!("frame {}: {e}", frame.index));
        assert!(p.icrc_ok(), "frame {}: bad ICRC", frame.index);
        assert!(p.ip_checksum_ok(), "frame {}: bad IP checksum", frame.index);
        roce += 1;
        ce += u64::from(p.ecn() == Ecn::Ce);
        cnp += u64::from(p.bth().opcode == roce::wire::Opcode::CNP);
    }
    assert_eq!(roce + arp, summary.written);
    assert_eq!(arp, 2, "one ARP request and its reply");
    assert!(ce > 0 && cnp > 0, "CE marks {ce}, CNPs {cnp}");
}

#[test]
fn a_clean_link_needs_no_recovery() {
    let mut c = small();
    c.net.loss = 0.0;
    c.net.reorder = 0.0;
    c.traffic.recv_hold = std::time::Duration::ZERO;
    let (r, _) = scenario::run::<Vec<u8>>(&c, None).expect("every byte verified");
    assert_eq!(r.retransmitted_packets(), 0);
    assert_eq!(r.a.naks_received + r.a.rnr_naks_received, 0);
}
