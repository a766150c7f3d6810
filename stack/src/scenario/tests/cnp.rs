//! DCQCN end to end, judged from a capture: host A writes to host B through a bottleneck
//! that marks CE; B's notification point answers with CNPs, A's reaction point slows down;
//! then the bottleneck goes away and A speeds up again. Every claim is read back from the
//! pcap of A's side of the wire (what A sent and received), not from the hosts' state.

use std::io::Cursor;

use crate::capture::CaptureReader;
use crate::scenario::*;
use crate::wire::{Ecn, Opcode, Qpn};

const LINE_GBPS: f64 = 10.0;
const MARKING_ENDS: Duration = Duration::from_millis(4);
/// DCQCN climbs back by additive and hyper increase (about 0.75 Gb/s per ms here, from the
/// few hundred Mb/s the cuts left): 16 ms after marking stops it is back at the line rate.
const RUN_ENDS: Duration = Duration::from_millis(20);

/// A's data packets (send time, frame length) and the arrival times of CNPs at A.
struct Seen {
    data: Vec<(u64, usize)>,
    cnps: Vec<u64>,
    data_not_ect0: usize,
    /// Each CNP's IP packet (ICRC included) and whether its ICRC checked.
    cnp_packets: Vec<(Vec<u8>, bool)>,
}

/// A writes 64 KiB messages as fast as DCQCN lets it; a 4 Gb/s bottleneck marks CE above
/// 20 KB until `MARKING_ENDS`. Returns A's side of the wire as a pcap, and A's QP.
fn run_capture() -> (Vec<u8>, Qpn) {
    let config = DemoConfig {
        traffic: TrafficConfig {
            total_bytes: 1 << 30,
            max_message: 64 << 10,
            mix: [1, 0, 0],
            atomic_every: 0,
            recv_hold: Duration::ZERO,
            ..TrafficConfig::default()
        },
        net: NetConfig {
            line_gbps: LINE_GBPS,
            loss: 0.0,
            reorder: 0.0,
            bottleneck: Some(Bottleneck {
                gbps: 4.0,
                ce_threshold_bytes: 20_000,
            }),
            ..DemoConfig::default().net
        },
        ..DemoConfig::default()
    };
    let window = CaptureWindow {
        first: u64::MAX,
        last: 0,
    };
    let capture = WindowedCapture::new(Vec::new(), window).unwrap();
    let mut net = Network::new(&config.net, config.transport, Some(capture), Side::A).unwrap();
    net.set_dcqcn(Preset::Paper.params(LINE_GBPS * 1e9))
        .unwrap();
    let mut traffic = crate::scenario::demo_traffic(&mut net, &config).unwrap();
    let mut marking = true;
    while net.now() < Instant::ZERO + RUN_ENDS {
        if marking && net.now() >= Instant::ZERO + MARKING_ENDS {
            net.set_bottleneck(None).unwrap();
            marking = false;
        }
        let now = net.now();
        let (a, b) = net.hosts_mut();
        traffic.pump(now, a.engine_mut(), b.engine_mut()).unwrap();
        let wake = [traffic.next_wakeup(), Some(Instant::ZERO + MARKING_ENDS)]
            .into_iter()
            .flatten()
            .filter(|&t| t > net.now())
            .min();
        assert!(net.step(wake).unwrap(), "the traffic keeps the link busy");
    }
    (net.finish().unwrap().unwrap().1, traffic.qp_a)
}

fn read(pcap: Vec<u8>) -> Seen {
    let a = IP_A;
    let mut seen = Seen {
        data: Vec::new(),
        cnps: Vec::new(),
        data_not_ect0: 0,
        cnp_packets: Vec::new(),
    };
    let mut reader = CaptureReader::new(Cursor::new(pcap)).unwrap();
    while let Some(frame) = reader.next_frame().unwrap() {
        let Ok(p) = frame.roce() else { continue };
        let t = frame.timestamp_ns;
        let op = p.opcode();
        if p.ip().src_addr() == a && op.is_request() {
            seen.data.push((t, frame.data.len()));
            seen.data_not_ect0 += usize::from(p.ecn() != Ecn::Ect0);
        } else if p.ip().dst_addr() == a && op == Opcode::CNP {
            seen.cnps.push(t);
            seen.cnp_packets.push((p.ip_packet().to_vec(), p.icrc_ok()));
        }
    }
    seen
}

/// The median gap between A's consecutive data packets sent in `[from, to)` ns after the
/// first one, in ns.
fn median_gap(data: &[(u64, usize)], from: u64, to: u64) -> u64 {
    let t0 = data[0].0;
    let times: Vec<u64> = data
        .iter()
        .map(|&(t, _)| t - t0)
        .filter(|&t| t >= from && t < to)
        .collect();
    let mut gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.len() >= 20,
        "{} packets in [{from}, {to})",
        times.len()
    );
    gaps.sort_unstable();
    gaps[gaps.len() / 2]
}

/// RoCEv2 Annex A17.9.3 as docs/congestion.md lays it out: IPv4 total length 60, Not-ECT, UDP
/// length 40 to port 4791, BTH opcode 0x81 with BECN set, P_Key 0xffff (the data's), DestQP
/// the marked QP's peer, PSN 0, 16 zero bytes, a valid ICRC.
fn check_cnp(ip: &[u8], icrc_ok: bool, dest_qp: Qpn) {
    assert_eq!(ip.len(), 60, "{ip:02x?}");
    assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 60);
    assert_eq!(ip[1] & 3, 0, "a CNP is not ECN-capable");
    assert_eq!(ip[9], 17, "UDP");
    let (udp, bth) = (&ip[20..28], &ip[28..40]);
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4791);
    assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), 40);
    assert_eq!(bth[0], 0x81, "opcode CNP");
    assert_eq!(u16::from_be_bytes([bth[2], bth[3]]), 0xffff, "P_Key");
    assert_eq!(bth[4] & 0x40, 0x40, "BECN");
    assert_eq!(
        u32::from_be_bytes([0, bth[5], bth[6], bth[7]]),
        dest_qp.value()
    );
    assert_eq!(&bth[9..12], &[0, 0, 0], "PSN 0");
    assert_eq!(&ip[40..56], &[0; 16], "16 reserved bytes");
    assert!(icrc_ok, "ICRC");
}

#[test]
fn cnps_slow_the_sender_and_it_recovers_when_marking_stops() {
    let (pcap, qp_a) = run_capture();
    let seen = read(pcap);
    for (ip, icrc_ok) in &seen.cnp_packets {
        check_cnp(ip, *icrc_ok, qp_a);
    }
    assert_eq!(seen.data_not_ect0, 0, "every data packet is ECT(0)");
    assert!(!seen.cnps.is_empty(), "the capture holds CNPs");
    let t0 = seen.data[0].0;
    let ms = 1_000_000;
    let first_cnp = seen.cnps[0] - t0;
    let last_cnp = seen.cnps[seen.cnps.len() - 1] - t0;
    // Full-size frames back to back at the line rate: the NIC's serialization time
    // (frame, FCS, preamble and inter-frame gap).
    let line_gap = ((4096 + 74 + 24) * 8) as f64 / LINE_GBPS;
    let before = median_gap(&seen.data, 0, first_cnp);
    let marking_ends = MARKING_ENDS.as_nanos() as u64;
    let run_ends = RUN_ENDS.as_nanos() as u64;
    let congested = median_gap(&seen.data, first_cnp + ms / 2, marking_ends);
    let recovered = median_gap(&seen.data, run_ends - 3 * ms, run_ends);
    eprintln!(
        "line gap {line_gap:.0} ns; median gaps: before CNPs {before} ns, congested {congested} ns, \
         recovered {recovered} ns; {} CNPs from {first_cnp} to {last_cnp} ns",
        seen.cnps.len()
    );
    assert!(
        (before as f64) < line_gap * 1.05,
        "line rate before any CNP"
    );
    assert!(
        congested as f64 > line_gap * 1.5,
        "spacing widens after CNPs: {congested} ns"
    );
    assert!(
        last_cnp < marking_ends + ms / 2,
        "no CNP long after marking stopped: last at {last_cnp} ns"
    );
    assert!(
        (recovered as f64) < line_gap * 1.1,
        "back near line rate once marking stopped: {recovered} ns"
    );
}
