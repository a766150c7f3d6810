//! `roce decode` of communication management MADs: the real rdma_rxe rping capture as a
//! golden file (every CM message, field by field, and the JSON `cm` object), and MADs built
//! here (a REJ, a MAD of another class, a truncated one).

use std::net::IpAddr;
use std::path::PathBuf;

use roce::wire::cm::{CmMadRepr, CmMessage, RejRepr, reject_reason};
use roce::wire::mad::gsi_packet;
use roce::wire::{FixedHeader, PKey, Psn, Qpn, RoceRepr};
use roce_tests::pcap_bytes;
use serde_json::Value;

mod common;
use common::roce;

const RPING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../pcaps/rdma_cm_rping.pcap");

fn decode(path: &str, json: bool) -> String {
    let mut args = vec!["decode", path];
    if json {
        args.push("--json");
    }
    let out = roce(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn cm_objects(path: &str) -> Vec<(usize, Value)> {
    decode(path, true)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("cm").is_some())
        .map(|v| (v["index"].as_u64().unwrap() as usize, v["cm"].clone()))
        .collect()
}

#[test]
fn rping_capture_cm_json_is_golden() {
    let cm = cm_objects(RPING);
    let messages: Vec<_> = cm
        .iter()
        .map(|(i, c)| (*i, c["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        messages,
        [
            (0, "REQ"),
            (1, "REP"),
            (2, "RTU"),
            (39, "DREQ"),
            (40, "DREP")
        ]
    );
    let (client_id, server_id) = (0x0ac5_b23c_u64, 0xdf89_8eb1_u64);
    for (_, c) in &cm {
        assert_eq!(c["transaction_id"], 0x0000_0002_3cb2_c50a_u64, "{c}");
        assert_eq!(c["class_version"], 2);
    }
    let req = &cm[0].1;
    assert_eq!(req["attribute_id"], 0x10);
    assert_eq!(req["local_comm_id"], client_id);
    assert!(
        req.get("remote_comm_id").is_none(),
        "a REQ names no remote ID"
    );
    assert_eq!(req["service_id"], 0x0106_1c06_u64);
    assert_eq!(
        (req["port_space"].as_str(), req["port"].as_u64()),
        (Some("RDMA_PS_TCP"), Some(7174))
    );
    assert_eq!(
        (req["local_qpn"].as_u64(), req["starting_psn"].as_u64()),
        (Some(0x11), Some(0x192d48))
    );
    assert_eq!(req["path_mtu"], 1024);
    assert_eq!(req["ip"]["src"], "10.77.0.12");
    assert_eq!(req["ip"]["dst"], "10.77.0.11");
    assert_eq!(req["ip"]["src_port"], 0xdb8c);
    let rep = &cm[1].1;
    assert_eq!(
        (
            rep["local_comm_id"].as_u64(),
            rep["remote_comm_id"].as_u64()
        ),
        (Some(server_id), Some(client_id))
    );
    assert_eq!(
        (rep["local_qpn"].as_u64(), rep["starting_psn"].as_u64()),
        (Some(0x11), Some(0x21c74b))
    );
    let rtu = &cm[2].1;
    assert_eq!(
        (
            rtu["local_comm_id"].as_u64(),
            rtu["remote_comm_id"].as_u64()
        ),
        (Some(client_id), Some(server_id))
    );
    let dreq = &cm[3].1;
    assert_eq!(dreq["remote_qpn"], 0x11);
    let drep = &cm[4].1;
    assert_eq!(
        (
            drep["local_comm_id"].as_u64(),
            drep["remote_comm_id"].as_u64()
        ),
        (Some(server_id), Some(client_id))
    );
}

#[test]
fn rping_capture_explains_every_cm_field() {
    let text = decode(RPING, false);
    assert!(
        text.contains("PSN 0  ICRC ok  CM REQ (ConnectRequest)"),
        "summary line names the message"
    );
    let req: String = text
        .split("CM REQ: ConnectRequest (IBA Vol. 1 12.6.5)")
        .nth(1)
        .unwrap()
        .split("\n  ICRC")
        .next()
        .unwrap()
        .into();
    for field in roce::wire::cm::ReqRepr::FIELDS {
        assert!(req.contains(field.name), "REQ field {} missing", field.name);
    }
    for expected in [
        "0x0000000001061c06   IP CM service (Annex A11): RDMA_PS_TCP port 7174",
        "Primary Flow Label",
        "0xab1fa",
        "::ffff:10.77.0.12",
        "1024 bytes",
        "IP CM private data header (IBA Vol. 1 Annex A11; Linux cma_hdr)",
        "56204",
    ] {
        assert!(
            req.contains(expected),
            "{expected:?} not in the REQ's explanation:\n{req}"
        );
    }
    for (message, section) in [
        ("REP: ConnectReply", "12.6.8"),
        ("RTU: ReadyToUse", "12.6.9"),
        ("DREQ: DisconnectRequest", "12.6.10"),
        ("DREP: DisconnectReply", "12.6.11"),
    ] {
        assert!(
            text.contains(&format!("CM {message} (IBA Vol. 1 {section})")),
            "{message}"
        );
    }
}

/// A UD SEND to QP1 carrying `mad`, as rxe frames it.
fn gsi_frame(mad: &[u8]) -> Vec<u8> {
    let ib = gsi_packet(Psn::new(3), PKey::DEFAULT, mad);
    let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    RoceRepr::rxe([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], a, b, Qpn::GSI, ib)
        .unwrap()
        .to_vec()
        .unwrap()
}

fn capture(name: &str, frames: &[Vec<u8>]) -> PathBuf {
    common::temp_file_in("decode-cm-tests", name, &pcap_bytes(frames))
}

#[test]
fn rej_other_classes_and_truncated_mads() {
    let mut rej = RejRepr::parse(&[0u8; 232]).unwrap();
    rej.remote_comm_id = 0x1234;
    rej.reason = reject_reason::INVALID_SERVICE_ID;
    let rej = CmMadRepr::new(7, CmMessage::Rej(rej)).to_vec();
    let mut sa = rej.clone();
    sa[1] = 0x03; // subnet administration
    let path = capture(
        "mads.pcap",
        &[gsi_frame(&rej), gsi_frame(&sa), gsi_frame(&rej[..100])],
    );
    let lines: Vec<Value> = decode(path.to_str().unwrap(), true)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cm = &lines[0]["cm"];
    assert_eq!(cm["message"], "REJ");
    assert_eq!(cm["reject_reason"], 8);
    assert_eq!(cm["reject_reason_name"], "invalid service ID");
    assert_eq!(cm["remote_comm_id"], 0x1234);
    for line in &lines[1..] {
        assert!(line.get("cm").is_none(), "{line}");
        assert!(line["mad_error"].is_string(), "{line}");
    }
    let text = decode(path.to_str().unwrap(), false);
    assert!(text.contains("invalid service ID"), "{text}");
    assert!(text.contains("MAD class 0x03 attribute 0x0012"), "{text}");
    assert!(text.contains("subnet administration"), "{text}");
}
