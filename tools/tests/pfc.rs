//! PFC and 802.3x PAUSE in `roce analyze` and `roce decode`, on captures with known pause
//! timelines that a helper writes with the library's pcap writer: exact paused times,
//! longest pauses, XOFF/XON counts, storms and stalled flows; a flood of pause frames from
//! many MACs stays bounded; reserved bits are counted, never a panic.

use std::net::IpAddr;
use std::path::PathBuf;

use roce::io::pcap::PcapWriter;
use roce::time::Instant;
use roce::wire::opcode::op;
use roce::wire::pause::{MacControlRepr, PauseRepr, PfcRepr};
use roce::wire::{BthRepr, ExtHeaders, IbPacketRepr, Opcode, Psn, Qpn, RoceRepr, VlanTag};
use serde_json::{Value, json};

mod common;
use common::{roce_json, roce_ok};

const SWITCH: [u8; 6] = [2, 0, 0, 0, 0, 0x01];
const HOST_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const HOST_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const OTHER_PORT: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
/// 512 bits at 51.2 Gb/s: one quantum is 10 ns exactly.
const LINK_GBPS: &str = "51.2";
/// Capture times start here (seconds since the epoch), so relative times are tested.
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;

/// A capture written frame by frame at chosen microseconds.
#[derive(Default)]
struct Timeline {
    frames: Vec<(u64, Vec<u8>)>,
    psn: u32,
}

impl Timeline {
    /// An RC SEND from A to B on QP `qp`: 802.1Q-tagged with `pcp`, or untagged with `dscp`.
    fn roce(&mut self, us: u64, qp: u32, pcp: Option<u8>, dscp: u8) -> &mut Self {
        self.psn += 1;
        let opcode = Opcode(op::SEND_ONLY);
        let (ext, _) = ExtHeaders::parse(opcode, &[0u8; 64]).unwrap();
        let payload = [0x5a; 64];
        let ib = IbPacketRepr::new(
            BthRepr::new(opcode, Qpn::new(qp), Psn::new(self.psn)),
            ext,
            &payload,
        );
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let mut repr = RoceRepr::rxe(HOST_A, HOST_B, a, b, Qpn::new(qp), ib).unwrap();
        if let Some(eth) = &mut repr.eth {
            eth.vlan = pcp.map(|pcp| VlanTag {
                pcp,
                dei: false,
                vid: 100,
            });
        }
        repr.ip.set_dscp(dscp);
        self.frames.push((us, repr.to_vec().unwrap()));
        self
    }

    fn pfc(&mut self, us: u64, from: [u8; 6], times: &[(usize, u16)]) -> &mut Self {
        let body = MacControlRepr::Pfc(PfcRepr::new(times));
        self.frames.push((us, body.frame(from)));
        self
    }

    fn pause(&mut self, us: u64, from: [u8; 6], quanta: u16) -> &mut Self {
        let body = MacControlRepr::Pause(PauseRepr { quanta });
        self.frames.push((us, body.frame(from)));
        self
    }

    fn write(&self, name: &str) -> PathBuf {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (us, frame) in &self.frames {
            w.write_frame(Instant::from_nanos(EPOCH_NS + us * 1000), frame)
                .unwrap();
        }
        common::temp_file_in("pfc-tests", name, &w.into_inner())
    }
}

/// The timeline of the module's figures (microseconds; quanta of 10 ns):
/// the switch pauses priority 3 10-80 (XOFF 100 us at 10, replaced by 20 us at 60) and
/// 200-270 (XOFF, then XON), the whole link 300-350 (802.3x), host A pauses priority 3
/// 410-420 (its own flows are not stalled by it), another port pauses priority 6 500-750
/// (XOFF refreshed twice, then XON). Flow QP 1 rides PCP 3, QP 2 PCP 5, QP 3 untagged
/// DSCP 48 (priority 6).
fn timeline() -> Timeline {
    let mut t = Timeline::default();
    t.roce(0, 1, Some(3), 0)
        .roce(0, 2, Some(5), 0)
        .pfc(10, SWITCH, &[(3, 10_000)])
        .roce(20, 2, Some(5), 0)
        .pfc(60, SWITCH, &[(3, 2_000)])
        .roce(100, 1, Some(3), 0)
        .pfc(200, SWITCH, &[(3, 10_000)])
        .pfc(270, SWITCH, &[(3, 0)])
        .roce(280, 1, Some(3), 0)
        .pause(300, SWITCH, 5_000)
        .roce(400, 2, Some(5), 0)
        .roce(400, 1, Some(3), 0)
        .pfc(410, HOST_A, &[(3, 1_000)])
        .roce(450, 3, None, 48)
        .roce(500, 1, Some(3), 0)
        .pfc(500, OTHER_PORT, &[(6, 10_000)])
        .pfc(590, OTHER_PORT, &[(6, 10_000)])
        .pfc(680, OTHER_PORT, &[(6, 10_000)])
        .pfc(750, OTHER_PORT, &[(6, 0)])
        .roce(800, 3, None, 48);
    t
}

fn analyze(path: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["analyze", "--json", "--link-gbps", LINK_GBPS];
    args.extend_from_slice(extra);
    args.push(path.to_str().unwrap());
    roce_json(&args)
}

fn row(
    mac: &str,
    priority: Value,
    frames: u64,
    xoff: u64,
    xon: u64,
    paused: f64,
    longest: f64,
) -> Value {
    json!({"mac": mac, "priority": priority, "frames": frames, "xoff": xoff, "xon": xon,
           "paused_us": paused, "longest_pause_us": longest})
}

#[test]
fn a_known_timeline_gives_exact_pause_figures() {
    let path = timeline().write("timeline.pcap");
    let doc = analyze(&path, &["--storm-window-ms", "0.1", "--storm-share", "0.5"]);
    let pfc = &doc["pfc"];
    assert_eq!(pfc["frames"], 9);
    assert_eq!(pfc["pause_8023x_frames"], 1);
    assert_eq!(
        pfc["by_source"],
        json!([
            row("02:00:00:00:00:01", Value::Null, 1, 1, 0, 50.0, 50.0),
            row("02:00:00:00:00:01", json!(3), 4, 3, 1, 140.0, 70.0),
            row("02:00:00:00:00:0a", json!(3), 1, 1, 0, 10.0, 10.0),
            row("02:00:00:00:00:0c", json!(6), 4, 3, 1, 250.0, 250.0),
        ])
    );
    let storms: Vec<Value> = pfc["storms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["mac"],
                s["priority"],
                s["start_us"],
                s["end_us"],
                s["windows"],
                s["paused_us"],
                s["max_share"]
            ])
        })
        .collect();
    assert_eq!(
        storms,
        vec![
            json!(["02:00:00:00:00:01", 3, 0.0, 100.0, 1, 70.0, 0.7]),
            json!(["02:00:00:00:00:01", 3, 200.0, 300.0, 1, 70.0, 0.7]),
            json!(["02:00:00:00:00:0c", 6, 500.0, 700.0, 2, 200.0, 1.0]),
        ]
    );
    let stalled: Vec<Value> = pfc["stalled_flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["dest_qp"],
                s["priority"],
                s["priority_from"],
                s["pauses"],
                s["stalled_us"]
            ])
        })
        .collect();
    assert_eq!(
        stalled,
        vec![
            json!([1, 3, "pcp", 3, 190.0]),
            json!([2, 5, "pcp", 1, 50.0]),
            json!([3, 6, "dscp", 1, 250.0]),
        ]
    );
    assert_eq!(pfc["reserved_bits_frames"], 0);
    assert_eq!(pfc["untracked"]["frames"], 0);
}

#[test]
fn storms_follow_the_window_and_share_asked_for() {
    let path = timeline().write("storm-flags.pcap");
    // At the default 10 ms window nothing here is a storm.
    assert_eq!(analyze(&path, &[])["pfc"]["storms"], json!([]));
    // A share of 0.45 makes the 802.3x PAUSE's window (half paused) stormy too.
    let doc = analyze(
        &path,
        &["--storm-window-ms", "0.1", "--storm-share", "0.45"],
    );
    let storms = doc["pfc"]["storms"].as_array().unwrap();
    assert_eq!(storms.len(), 4);
    assert_eq!(storms[2]["priority"], Value::Null);
    assert_eq!(storms[2]["start_us"], 300.0);
    let text = roce_ok(&[
        "analyze",
        "--link-gbps",
        LINK_GBPS,
        "--storm-window-ms",
        "0.1",
        path.to_str().unwrap(),
    ]);
    common::assert_contains_all(
        &text,
        &[
            "PFC and PAUSE: 9 PFC frames, 1 802.3x PAUSE frames",
            "02:00:00:00:00:01 priority 3: 4 frames (3 XOFF, 1 XON), paused 140.000 us, longest 70.000 us",
            "02:00:00:00:00:01 all (802.3x PAUSE): 1 frames (1 XOFF, 0 XON), paused 50.000 us",
            "STORM: 02:00:00:00:00:0c priority 6 paused 200.000 us of 2 windows",
            "QP 3 (priority 6 from DSCP): 1 pauses, 250.000 us",
        ],
    );
}

#[test]
fn quanta_follow_the_link_speed() {
    let mut t = Timeline::default();
    t.pfc(0, SWITCH, &[(0, 1_000), (7, 0xffff)])
        .pfc(1_000, SWITCH, &[(0, 0), (7, 0)]);
    let path = t.write("speeds.pcap");
    // 1000 quanta at 25 Gb/s: 20.48 us; 65535 at 25 Gb/s: 1342.1568 us, cut at the XON.
    let doc = roce_json(&[
        "analyze",
        "--json",
        "--link-gbps",
        "25",
        path.to_str().unwrap(),
    ]);
    let rows = doc["pfc"]["by_source"].as_array().unwrap();
    assert_eq!(rows[0]["paused_us"], 20.48);
    assert_eq!(rows[1]["paused_us"], 1000.0);
    let lines = roce_ok(&[
        "decode",
        "--json",
        "--link-gbps",
        "25",
        path.to_str().unwrap(),
    ]);
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let m = &first["mac_control"];
    assert_eq!(m["kind"], "PFC");
    assert_eq!(m["class_enable_vector"], 0x81);
    assert_eq!(m["enabled_priorities"], json!([0, 7]));
    assert_eq!(m["quanta"], json!([1000, 0, 0, 0, 0, 0, 0, 65535]));
    assert_eq!(m["time_us"][0], 20.48);
    assert_eq!(m["time_us"][7], 1342.1568);
    assert_eq!(m["reserved_bits_set"], false);
}

#[test]
fn a_flood_from_many_macs_is_bounded_and_counted() {
    let mut t = Timeline::default();
    for i in 0..10_000u32 {
        let b = i.to_be_bytes();
        t.pfc(u64::from(i), [2, 1, b[0], b[1], b[2], b[3]], &[(3, 100)]);
    }
    let doc = analyze(&t.write("flood.pcap"), &[]);
    let pfc = &doc["pfc"];
    assert_eq!(pfc["frames"], 10_000);
    assert_eq!(pfc["by_source"].as_array().unwrap().len(), 512);
    assert_eq!(pfc["untracked"]["frames"], 10_000 - 512);
    assert_eq!(pfc["untracked"]["macs"], 10_000 - 512);
}

#[test]
fn reserved_bits_and_short_frames_are_counted_not_fatal() {
    let mut t = Timeline::default();
    let mut pfc = PfcRepr::new(&[(3, 100)]);
    pfc.enable_vector |= 0xa500;
    t.frames.push((0, MacControlRepr::Pfc(pfc).frame(SWITCH)));
    // Cut after the opcode: too short for PFC's parameters.
    let mut short = MacControlRepr::Pfc(PfcRepr::new(&[(1, 1)])).frame(SWITCH);
    short.truncate(17);
    t.frames.push((1, short));
    t.frames
        .push((2, MacControlRepr::Other(0x0002).frame(SWITCH)));
    let path = t.write("reserved.pcap");
    let pfc = analyze(&path, &[])["pfc"].clone();
    assert_eq!(pfc["frames"], 1);
    assert_eq!(pfc["reserved_bits_frames"], 1);
    assert_eq!(pfc["truncated_frames"], 1);
    assert_eq!(pfc["other_mac_control_frames"], 1);
    let text = roce_ok(&["decode", path.to_str().unwrap()]);
    common::assert_contains_all(
        &text,
        &[
            "PFC from 02:00:00:00:00:01: P3 XOFF 100 (0.512 us)  RESERVED BITS SET",
            "SET: reserved bits must be zero",
            "MAC control from 02:00:00:00:00:01: truncated",
            "opcode 0x0002 (not flow control)",
        ],
    );
    let first = roce_ok(&["decode", "--json", path.to_str().unwrap()]);
    let first: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(first["mac_control"]["reserved"], 0xa5);
    assert_eq!(first["mac_control"]["reserved_bits_set"], true);
}

#[test]
fn the_ladder_shades_the_pauses_in_force() {
    let path = timeline().write("ladder.pcap");
    let svg = path.with_extension("svg");
    roce_ok(&[
        "ladder",
        "--link-gbps",
        LINK_GBPS,
        path.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    common::assert_contains_all(
        &doc,
        &[
            "<title>PFC priority 3 paused by 02:00:00:00:00:01 for 70.000 us</title>",
            "<title>802.3x PAUSE (all priorities) paused by 02:00:00:00:00:01 for 50.000 us</title>",
            "<title>PFC priority 3 paused by 02:00:00:00:00:0a for 10.000 us</title>",
            "PFC / PAUSE in force (band)",
        ],
    );
    // Two pauses of 70 us, the PAUSE, host A's and the other port's (it starts with the last
    // packet drawn).
    assert_eq!(doc.matches("<g><title>").count(), 5);
}
