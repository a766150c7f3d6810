//! RoCEv1 (EtherType 0x8915: GRH, BTH, ..., ICRC) in `roce decode` and `roce analyze`, on a
//! capture built with the library's RoCEv1 builder and pcap writer: decoded field by field
//! with `roce_version` 1, and analysed as flows between GIDs and QPs.

use std::net::Ipv6Addr;
use std::path::PathBuf;

use roce::io::pcap::PcapWriter;
use roce::time::Instant;
use roce::wire::encap::EthernetRepr;
use roce::wire::grh::{GrhRepr, RoceV1Repr};
use roce::wire::opcode::op;
use roce::wire::{
    AethRepr, BthRepr, ExtHeaders, IbPacketRepr, Msn, Opcode, Psn, Qpn, Syndrome, VlanTag,
};
use serde_json::Value;

mod common;
use common::{assert_contains_all, roce_json, roce_ok};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

fn gid(last: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, last)
}

/// A RoCEv1 frame from `from` to `to` (GIDs fe80::1 and fe80::2 by MAC), 802.1Q priority 3.
fn frame(from_a: bool, opcode: u8, qp: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
    let opcode = Opcode(opcode);
    let (mut ext, _) = ExtHeaders::parse(opcode, &[0u8; 64]).unwrap();
    if let Some(a) = &mut ext.aeth {
        *a = AethRepr {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: Msn::new(1),
        };
    }
    let ib = IbPacketRepr::new(
        BthRepr::new(opcode, Qpn::new(qp), Psn::new(psn)),
        ext,
        payload,
    );
    let (src, dst, s, d) = if from_a {
        (A, B, gid(1), gid(2))
    } else {
        (B, A, gid(2), gid(1))
    };
    let mut eth = EthernetRepr::new(src, dst);
    eth.vlan = Some(VlanTag {
        pcp: 3,
        dei: false,
        vid: 7,
    });
    let mut grh = GrhRepr::new(s, d);
    grh.traffic_class = 0x68;
    RoceV1Repr { eth, grh, ib }.to_vec().unwrap()
}

fn frames() -> [Vec<u8>; 4] {
    let mut frames = [
        frame(true, op::SEND_ONLY, 0x12, 100, &[7; 30]),
        frame(false, op::ACKNOWLEDGE, 0x34, 100, &[]),
        frame(true, op::SEND_ONLY, 0x12, 100, &[7; 30]),
        frame(true, op::SEND_ONLY, 0x12, 101, &[8; 64]),
    ];
    // The last one's ICRC is wrong.
    *frames[3].last_mut().unwrap() ^= 0xff;
    frames
}

fn capture() -> PathBuf {
    let frames = frames();
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(Instant::from_micros(1_000 + i as u64 * 10), f)
            .unwrap();
    }
    common::temp_file_in("roce-v1-tests", "v1.pcap", &w.into_inner())
}

#[test]
fn decode_explains_and_lists_roce_v1() {
    let path = capture();
    let path = path.to_str().unwrap();
    let text = roce_ok(&["decode", path]);
    assert_contains_all(
        &text,
        &[
            "#1  ",
            "RoCEv1 fe80::1 -> fe80::2  RC_SEND_ONLY  QP 18  PSN 100  ICRC ok",
            "0x8915               RoCEv1: an InfiniBand GRH follows",
            "GRH: Global Route Header (IBA Vol. 1 8.3; RoCEv1: Annex A16)",
            "NxtHdr           0x1b",
            "SGID             fe80::1",
            "ICRC: invariant CRC (IBA Vol. 1 7.8.1; Annex A16)",
            "ICRC BAD",
        ],
    );
    let lines: Vec<Value> = roce_ok(&["decode", "--json", path])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = &lines[0];
    assert_eq!(first["roce"], true);
    assert_eq!(first["roce_version"], 1);
    assert_eq!(first["src"], "fe80::1");
    assert_eq!(first["dst"], "fe80::2");
    assert_eq!(first["opcode"], "RC_SEND_ONLY");
    assert_eq!(first["dest_qp"], 0x12);
    assert_eq!(first["psn"], 100);
    assert_eq!(first["vlan"], 7);
    assert_eq!(first["dscp"], 0x68 >> 2);
    assert_eq!(first["grh"]["traffic_class"], 0x68);
    assert_eq!(first["grh"]["payload_len"], 12 + 30 + 2 + 4);
    assert_eq!(first["payload_len"], 30);
    assert_eq!(first["icrc"], "ok");
    assert!(first.get("udp_src_port").is_none());
    assert_eq!(lines[1]["aeth"]["kind"], "ACK");
    assert_eq!(lines[3]["icrc"], "bad");
}

#[test]
fn analyze_follows_roce_v1_flows_by_gid_and_qp() {
    let path = capture();
    let doc = roce_json(&["analyze", "--json", path.to_str().unwrap()]);
    assert_eq!(doc["packets"], 4);
    assert_eq!(doc["roce_packets"], 4);
    assert_eq!(doc["roce_v1_packets"], 4);
    assert_eq!(doc["icrc_errors"], 1);
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    let f = &flows[0];
    assert_eq!(
        (&f["src"], &f["dst"], &f["dest_qp"], &f["roce_version"]),
        (
            &Value::from("fe80::1"),
            &Value::from("fe80::2"),
            &Value::from(0x12),
            &Value::from(1)
        )
    );
    assert_eq!(f["packets"], 3);
    assert_eq!(f["retransmitted_packets"], 1);
    assert_eq!(f["icrc_errors"], 1);
    assert_eq!(f["priority"], 3);
    assert_eq!(f["priority_from"], "pcp");
    assert_eq!(flows[1]["opcodes"]["RC_ACKNOWLEDGE"], 1);
    assert_eq!(flows[1]["reverse_flow"], 0);
    let text = roce_ok(&["analyze", path.to_str().unwrap()]);
    assert_contains_all(
        &text,
        &[
            "4 frames, 0 RoCEv2, 4 RoCEv1, 2 flows",
            "fe80::1 -> fe80::2  QP 0x000012  RoCEv1 (GIDs)",
        ],
    );
}

#[test]
fn frames_cut_by_a_snap_length_are_analysed_without_their_icrc() {
    let bytes = roce_tests::pcap_bytes_snap(&frames(), 1, 80);
    let path = common::temp_file_in("roce-v1-tests", "v1-cut.pcap", &bytes);
    let out = common::roce(&["analyze", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "exit 3: frames were cut");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["roce_v1_packets"], 4);
    assert_eq!(doc["icrc_errors"], 0, "the ICRCs were cut off");
    assert_eq!(doc["input"]["cut_frames"], 3, "the 78-byte ACK fits");
    assert_eq!(doc["flows"][0]["packets"], 3);
    assert_eq!(doc["flows"][0]["payload_bytes"], 30 + 30 + 64);
}
