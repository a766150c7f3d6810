//! `roce decode` as a user runs it: exit codes, JSON keys and the report of broken input, on
//! the captures in pcaps/ and on captures these tests write.

use std::path::{Path, PathBuf};
use std::process::Output;

use roce::wire::sample;
use roce_tests::{pcap_bytes, pcap_bytes_with_link, pcapng_bytes};
use serde_json::Value;

mod common;
use common::roce;

/// A file in a directory of the target dir for this test file.
fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    common::temp_file_in("decode-tests", name, bytes)
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn decode_json(path: &Path) -> (Output, Vec<Value>) {
    let out = roce(&["decode", "--json", path.to_str().unwrap()]);
    let lines = json_lines(&out);
    (out, lines)
}

#[test]
fn sample_frames_decode_with_every_contract_key() {
    let frames = sample::frames(5);
    let path = temp_file("sample.pcap", &pcap_bytes(&frames));
    let (out, lines) = decode_json(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lines.len(), frames.len());
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["index"], i);
        assert_eq!(line["frame"], i + 1, "Wireshark's number, from 1");
        assert_eq!(line["roce"], true);
        assert_eq!(line["icrc"], "ok", "{line}");
        for key in [
            "src",
            "dst",
            "opcode",
            "opcode_value",
            "dest_qp",
            "psn",
            "ack_req",
            "se",
            "pad",
            "pkey",
            "fecn",
            "becn",
            "ecn",
            "payload_len",
        ] {
            assert!(!line[key].is_null(), "frame {i} lacks {key}: {line}");
        }
    }
    let find = |op: &str| lines.iter().find(|l| l["opcode"] == op).unwrap();
    assert!(find("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE")["reth"]["rkey"].is_u64());
    assert!(find("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE")["immdt"]["imm"].is_u64());
    assert!(find("RC_COMPARE_SWAP")["atomic_eth"]["compare"].is_u64());
    assert!(find("RC_ATOMIC_ACKNOWLEDGE")["atomic_ack_eth"]["orig"].is_u64());
    assert!(find("UD_SEND_ONLY")["deth"]["src_qp"].is_u64());
    assert!(find("RC_SEND_ONLY_WITH_INVALIDATE")["ieth"]["rkey"].is_u64());
    assert!(
        ["ACK", "RNR_NAK", "NAK"]
            .contains(&find("RC_ACKNOWLEDGE")["aeth"]["kind"].as_str().unwrap())
    );
    assert_eq!(find("CNP")["becn"], true);
    assert!(lines.iter().any(|l| l["src"] == "fd00::a"), "IPv6 frames");
    assert!(lines.iter().any(|l| l["ecn"] == "CE"));
}

#[test]
fn pcapng_and_cooked_captures_decode_like_pcap() {
    let frames = sample::frames(6);
    let (_, classic) = decode_json(&temp_file("same.pcap", &pcap_bytes(&frames)));
    let (out, ng) = decode_json(&temp_file("same.pcapng", &pcapng_bytes(&frames)));
    assert!(out.status.success());
    assert_eq!(classic, ng);

    // Raw IP (link type 101): the same packets without their Ethernet headers.
    let ip_only: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            roce::wire::RocePacket::parse(f)
                .unwrap()
                .ip_packet()
                .to_vec()
        })
        .collect();
    let (_, raw) = decode_json(&temp_file("raw.pcap", &pcap_bytes_with_link(&ip_only, 101)));
    // Linux cooked v1 (113): 16-byte header with the protocol in its last two bytes.
    let cooked: Vec<Vec<u8>> = ip_only
        .iter()
        .map(|p| {
            let mut f = vec![0u8; 14];
            f.extend_from_slice(if p[0] >> 4 == 4 {
                &[0x08, 0x00]
            } else {
                &[0x86, 0xdd]
            });
            f.extend_from_slice(p);
            f
        })
        .collect();
    let sll_path = temp_file("sll.pcap", &pcap_bytes_with_link(&cooked, 113));
    let (_, sll) = decode_json(&sll_path);
    let text = String::from_utf8(roce(&["decode", sll_path.to_str().unwrap()]).stdout).unwrap();
    let first = text.split("\n\n").next().unwrap();
    assert!(first.contains("Linux cooked capture header"), "{first}");
    assert!(
        first.contains("bytes 16-35"),
        "IPv4 header counted from the frame: {first}"
    );
    for (a, (b, c)) in classic.iter().zip(raw.iter().zip(&sll)) {
        for key in ["opcode", "psn", "dest_qp", "icrc", "src", "payload_len"] {
            assert_eq!(a[key], b[key]);
            assert_eq!(a[key], c[key]);
        }
    }
}

#[test]
fn broken_frames_are_reported_and_decoding_goes_on() {
    let good = sample::frames(8).swap_remove(4);
    let mut bad_icrc = good.clone();
    let n = bad_icrc.len();
    bad_icrc[n - 1] ^= 0xff;
    let mut unknown_opcode = good.clone();
    unknown_opcode[42] = 0x15;
    let mut lying_length = good.clone();
    lying_length[16..18].copy_from_slice(&2000u16.to_be_bytes());
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let frames = vec![
        good.clone(),
        bad_icrc,
        good[..30].to_vec(),
        unknown_opcode,
        lying_length,
        arp,
        vec![],
        good.clone(),
    ];
    let path = temp_file("broken.pcap", &pcap_bytes(&frames));
    let (out, lines) = decode_json(&path);
    assert!(out.status.success());
    assert_eq!(lines.len(), 8, "one line per frame");
    assert_eq!(lines[0]["icrc"], "ok");
    assert_eq!(lines[1]["icrc"], "bad");
    assert!(lines[1]["icrc_computed"].is_string());
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("IPv4: truncated")
    );
    assert_eq!(lines[3]["roce"], true);
    assert!(
        lines[3]["error"]
            .as_str()
            .unwrap()
            .contains("unknown opcode 0x15")
    );
    assert!(
        lines[4]["error"]
            .as_str()
            .unwrap()
            .contains("total length says 2000")
    );
    assert_eq!(lines[5]["roce"], false);
    assert!(lines[5]["error"].as_str().unwrap().contains("0x0806"));
    assert!(
        lines[6]["error"]
            .as_str()
            .unwrap()
            .contains("Ethernet: truncated")
    );
    assert_eq!(lines[7]["icrc"], "ok");

    let text = roce(&["decode", path.to_str().unwrap()]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("ICRC BAD"));
    assert!(text.contains("WRONG: should be 0x"));
    assert!(text.contains("malformed RoCEv2: BTH: unknown opcode 0x15"));
    // Frames are numbered as Wireshark numbers them, from 1.
    assert!(text.starts_with("#1  "), "{text}");
    assert!(text.contains("\n#8  ") && !text.contains("\n#0  "));
}

#[test]
fn a_truncated_capture_decodes_up_to_the_cut() {
    let frames = sample::frames(9);
    let bytes = pcap_bytes(&frames[..3]);
    let path = temp_file("cut.pcap", &bytes[..bytes.len() - 10]);
    let (out, lines) = decode_json(&path);
    assert_eq!(out.status.code(), Some(2), "damage is exit 2");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert!(
        err.lines().count() == 1 && err.contains("cut short"),
        "{err}"
    );
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["icrc"], "ok");
    assert_eq!(lines[2]["roce"], false);
    assert_eq!(lines[2]["frame"], 3);
    assert!(
        lines[2]["error"].as_str().unwrap().contains("cut short"),
        "{}",
        lines[2]
    );

    // A record header claiming 3 GB.
    let mut bytes = pcap_bytes(&frames[..2]);
    let second = 24 + 16 + frames[0].len();
    bytes[second + 8..second + 12].copy_from_slice(&0xc000_0000u32.to_le_bytes());
    let (out, lines) = decode_json(&temp_file("huge.pcap", &bytes));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(lines.len(), 2);
    assert!(lines[1]["error"].is_string());
}

#[test]
fn not_a_capture_is_one_line_and_a_failure() {
    for (name, bytes) in [
        (
            "garbage.pcap",
            b"this is not a capture, just text\n".to_vec(),
        ),
        ("empty.pcap", vec![]),
        ("short.pcap", vec![0xd4, 0xc3, 0xb2]),
    ] {
        let path = temp_file(name, &bytes);
        let out = roce(&["decode", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("roce: "), "{err}");
    }
    let out = roce(&["decode", "/nonexistent/file.pcap"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("cannot open")
    );
}

#[test]
fn help_has_examples() {
    let out = roce(&["decode", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Examples:") && help.contains("roce decode --json"));
    let out = roce(&["--help"]);
    assert!(String::from_utf8(out.stdout).unwrap().contains("decode"));
}

/// Every real capture in pcaps/ decodes with exit 0, every RoCE frame's ICRC verifies.
#[test]
fn pcaps_decode() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
    let captures = roce_tests::captures_in(&dir);
    assert!(!captures.is_empty(), "no captures in {}", dir.display());
    for path in captures {
        let (out, lines) = decode_json(&path);
        assert!(out.status.success(), "{}", path.display());
        assert!(!lines.is_empty(), "{}", path.display());
        for line in lines.iter().filter(|l| l["roce"] == true) {
            assert_eq!(line["icrc"], "ok", "{}: {line}", path.display());
        }
        let text = roce(&["decode", path.to_str().unwrap()]);
        assert!(text.status.success(), "{}", path.display());
    }
}

/// Every way of wrapping a capture: `encap` names the outer layers outermost first, the rest
/// of each JSON object is the plain capture's, and the explanation has a section per outer
/// header, in frame order, before the RoCE packet's own.
#[test]
fn encapsulated_frames_decode_as_the_plain_ones_with_their_layers() {
    use roce::wire::decap::wrap::Wrapping;
    let plain_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps/rc_send_only.pcap");
    let (_, plain) = decode_json(&plain_path);
    for how in Wrapping::ALL {
        let bytes = roce_tests::wrap::wrap_capture(&plain_path, how);
        let path = temp_file(&format!("wrapped-{}.pcap", how.name()), &bytes);
        let (out, lines) = decode_json(&path);
        assert!(out.status.success(), "{}", how.name());
        let names: Vec<&str> = how.encap().iter().map(|k| k.name()).collect();
        for (a, b) in plain.iter().zip(&lines) {
            assert_eq!(b["encap"], serde_json::json!(names), "{}", how.name());
            assert_eq!(a["encap"], serde_json::json!([]));
            let mut a = a.as_object().unwrap().clone();
            let mut b = b.as_object().unwrap().clone();
            for key in ["encap", "vlan", "outer_headers"] {
                a.remove(key);
                b.remove(key);
            }
            assert_eq!(a, b, "{}", how.name());
        }
        let text = String::from_utf8(roce(&["decode", path.to_str().unwrap()]).stdout).unwrap();
        let first = text.split("\n\n").next().unwrap();
        let titles = [
            ("vxlan", "VXLAN (RFC 7348)"),
            ("geneve", "Geneve (RFC 8926)"),
            ("gre_teb", "GRE: generic routing encapsulation"),
            ("erspan2", "ERSPAN type II"),
            ("erspan3", "ERSPAN type III (draft"),
            (
                "erspan3_platform",
                "ERSPAN type III platform-specific subheader",
            ),
            ("sll", "Linux cooked capture header (LINKTYPE_LINUX_SLL;"),
            ("sll2", "LINKTYPE_LINUX_SLL2"),
            ("sll_vlan", "802.1Q VLAN tag"),
            ("qinq", "802.1ad service tag (QinQ), after TPID 0x88a8"),
            ("qinq9100", "after TPID 0x9100"),
            ("vlan", "802.1Q VLAN tag"),
        ];
        let (_, title) = titles.iter().find(|(n, _)| *n == how.name()).unwrap();
        assert!(first.contains(title), "{}: {first}", how.name());
        assert!(first.find(title) < first.find("BTH:"), "{first}");
    }
}

/// A VXLAN header with no frame after it, a GRE-in-GRE loop past the depth limit and a
/// tunnel of ARP: one line each, decoding goes on, exit 0.
#[test]
fn broken_and_foreign_encapsulations_are_reported_per_frame() {
    use roce::wire::decap::wrap::{Wrapping, wrap};
    let plain = sample::frames(3).remove(0);
    let mut empty_vxlan = wrap(&plain, Wrapping::Vxlan, 0).unwrap();
    empty_vxlan.truncate(14 + 20 + 8 + 8);
    empty_vxlan[16..18].copy_from_slice(&36u16.to_be_bytes());
    empty_vxlan[38..40].copy_from_slice(&16u16.to_be_bytes());
    let mut deep = plain.clone();
    for _ in 0..9 {
        deep = wrap(&deep, Wrapping::GreTeb, 0).unwrap();
    }
    let mut arp = plain.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let arp = wrap(&arp, Wrapping::Vxlan, 0).unwrap();
    let frames = vec![empty_vxlan, deep, arp, plain];
    let path = temp_file("broken-encap.pcap", &pcap_bytes(&frames));
    let (out, lines) = decode_json(&path);
    assert!(out.status.success());
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["encap"], serde_json::json!(["VXLAN"]));
    assert_eq!(
        lines[0]["error"],
        "Ethernet: truncated, 14 bytes needed but 0 present"
    );
    assert_eq!(lines[1]["error"], "encapsulated more than 8 layers deep");
    assert_eq!(lines[2]["roce"], false);
    assert_eq!(lines[2]["encap"], serde_json::json!(["VXLAN"]));
    assert_eq!(lines[3]["roce"], true);
    let text = String::from_utf8(roce(&["decode", path.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.contains("#3  ") && text.contains("in VXLAN: not RoCEv2: EtherType 0x0806"),
        "{text}"
    );
}

/// An RC FLUSH as rdma_rxe 6.12 sent it in the lab (raw IP): its ICRC is not the spec's, and
/// the explanation says whose it is.
#[test]
fn rxe_flush_icrc_is_named_as_rxes() {
    let ip = "45000040663f40004011bfbd0a4d000c0a4d000bc12112b7002c00001c00ffff0000001180e02178\
              00000001000055bc1bd12000000002f3000007d0302e2bb5";
    let bytes: Vec<u8> = (0..ip.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&ip[i..i + 2], 16).unwrap())
        .collect();
    let path = temp_file("rxe_flush.pcap", &pcap_bytes_with_link(&[bytes], 101));
    let (out, lines) = decode_json(&path);
    assert!(out.status.success());
    assert_eq!(lines[0]["opcode"], "RC_FLUSH");
    assert_eq!(lines[0]["icrc"], "bad");
    let text = roce(&["decode", path.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("WRONG: should be 0xad62d6f5; it is rdma_rxe's FLUSH ICRC"),
        "{text}"
    );
    assert!(
        text.contains("FETH: FLUSH Extended Transport Header"),
        "{text}"
    );
}

/// An IPv4 header the RoCEv2 annex forbids (options, DF clear, a wrong checksum), its ICRC
/// right: decode says what is wrong with each field and that a receiver drops the packet.
#[test]
fn ipv4_fields_roce_forbids_are_named() {
    use roce::wire::{BthRepr, ExtHeaders, IbPacketRepr, IpRepr, Opcode, Psn, Qpn, RoceRepr};
    let bth = BthRepr::new(Opcode(0x04), Qpn::new(0x12), Psn::new(7));
    let ib = IbPacketRepr::new(bth, ExtHeaders::default(), &[1, 2, 3, 4]);
    let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let mut repr = RoceRepr::rxe(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        a,
        b,
        Qpn::new(0x11),
        ib,
    )
    .unwrap();
    let IpRepr::V4(h) = &mut repr.ip else {
        unreachable!("an IPv4 pair")
    };
    h.options = &[1, 1, 1, 0];
    h.dont_fragment = false;
    let mut frame = repr.to_vec().unwrap();
    frame[14 + 10] ^= 0x5a; // the header checksum, which the ICRC masks
    let path = temp_file("ipv4_forbidden.pcap", &pcap_bytes(&[frame]));
    let (out, lines) = decode_json(&path);
    assert!(out.status.success());
    assert_eq!(
        (&lines[0]["icrc"], &lines[0]["ip_checksum"]),
        (&"ok".into(), &"bad".into())
    );
    let text = String::from_utf8(roce(&["decode", path.to_str().unwrap()]).stdout).unwrap();
    for said in [
        "header is 24 bytes: RoCEv2 allows no options (IHL 5, Annex A17 CA17-3)",
        "clear, where RoCEv2 sets it (Annex A17 CA17-7): a receiver drops this packet",
        "WRONG: a receiver drops this packet",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
}

/// A packet to QP0: decode says a RoCEv2 port has none and a receiver drops it (CA17-33);
/// QP1 is named for what it is. The UDP checksum is judged against the annex's advice.
#[test]
fn qp0_qp1_and_the_udp_checksum_are_explained() {
    use roce::wire::{BthRepr, ExtHeaders, IbPacketRepr, Opcode, Psn, Qpn, RoceRepr};
    let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let frames: Vec<Vec<u8>> = [Qpn::SMI, Qpn::GSI, Qpn::new(0x12)]
        .into_iter()
        .map(|qpn| {
            let bth = BthRepr::new(Opcode(0x04), qpn, Psn::new(7));
            let ib = IbPacketRepr::new(bth, ExtHeaders::default(), &[1, 2, 3, 4]);
            let mac = |n| [2, 0, 0, 0, 0, n];
            let repr = RoceRepr::rxe(mac(1), mac(2), a, b, Qpn::new(0x11), ib).unwrap();
            repr.to_vec().unwrap()
        })
        .collect();
    let mut frames = frames;
    frames[2][14 + 20 + 6] = 0x12; // a UDP checksum, which the ICRC masks
    let path = temp_file("qp0.pcap", &pcap_bytes(&frames));
    let text = String::from_utf8(roce(&["decode", path.to_str().unwrap()]).stdout).unwrap();
    let drops = "QP0, subnet management: a RoCEv2 port has none and a receiver drops this \
                 packet (Annex A17.6, CA17-33)";
    assert_eq!(text.matches(drops).count(), 1, "{text}");
    assert_eq!(text.matches("QP1, the general services QP").count(), 1);
    assert!(text.contains("destination queue pair 18"), "{text}");
    assert_eq!(
        text.matches("none, as the annex recommends (A17.3.2.4)")
            .count(),
        2
    );
    assert_eq!(
        text.matches("set, where the annex recommends 0 (A17.3.2.4)")
            .count(),
        1
    );
    assert_eq!(text.matches("ICRC ok").count(), 3, "{text}");
}
