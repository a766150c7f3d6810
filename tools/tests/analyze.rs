//! `roce analyze` and `roce ladder` as a user runs them: exit codes, the JSON contract, and
//! damaged or cut input, on captures these tests write. The real captures in pcaps/ are
//! checked against tshark in tests/tests/analyze_golden.rs.

use std::path::{Path, PathBuf};
use std::process::Output;

use roce::wire::sample;
use roce_tests::{pcap_bytes, pcap_bytes_snap, pcapng_bytes};
use serde_json::Value;

mod common;
use common::{roce, roce_exit, roce_ok};

/// A file in a directory of the target dir for this test file.
fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    common::temp_file_in("analyze-tests", name, bytes)
}

fn analyze_json(path: &Path) -> (Output, Value) {
    let out = roce(&["analyze", "--json", path.to_str().unwrap()]);
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out, doc)
}

fn sum_of(doc: &Value, key: &str) -> u64 {
    doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[key].as_u64().unwrap())
        .sum()
}

/// A RoCEv2 packet whose IPv4 header checksum is wrong (outside the ICRC) is counted in JSON
/// and named in the text report; the line is absent when there is none.
#[test]
fn ipv4_headers_a_receiver_drops_are_reported() {
    let mut frames = sample::frames(11);
    let good = temp_file("ip_ok.pcap", &pcap_bytes(&frames));
    let v4 = frames
        .iter()
        .position(|f| f[12..14] == [0x08, 0x00])
        .expect("an IPv4 sample");
    frames[v4][14 + 10] ^= 0x5a;
    let bad = temp_file("ip_bad.pcap", &pcap_bytes(&frames));
    let (_, doc) = analyze_json(&bad);
    assert_eq!(
        (&doc["ip_header_errors"], &doc["icrc_errors"]),
        (&1.into(), &0.into())
    );
    let text = |path: &Path| roce_ok(&["analyze", path.to_str().unwrap()]);
    let said = "\n1 RoCEv2 packets with an IPv4 header a receiver drops (a wrong checksum, \
                options or DF clear; Annex A17.3.4)\n";
    assert!(text(&bad).contains(said), "{}", text(&bad));
    assert!(!text(&good).contains("IPv4 header a receiver drops"));
}

#[test]
fn the_contract_keys_add_up() {
    let frames = sample::frames(11);
    for path in [
        temp_file("sample.pcap", &pcap_bytes(&frames)),
        temp_file("sample.pcapng", &pcapng_bytes(&frames)),
    ] {
        let (out, doc) = analyze_json(&path);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(doc["packets"], frames.len());
        assert_eq!(doc["roce_packets"], frames.len());
        assert_eq!(doc["icrc_errors"], 0);
        assert_eq!(doc["ip_header_errors"], 0);
        assert_eq!(sum_of(&doc, "packets"), frames.len() as u64);
        for f in doc["flows"].as_array().unwrap() {
            for key in [
                "src",
                "dst",
                "dest_qp",
                "packets",
                "opcodes",
                "retransmitted_packets",
                "naks",
                "rnr_naks",
                "cnps",
                "ecn_ce",
                "payload_bytes",
            ] {
                assert!(f.get(key).is_some(), "flow lacks {key}: {f}");
            }
            let opcodes: u64 = f["opcodes"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(opcodes, f["packets"].as_u64().unwrap());
        }
        let cnps: u64 = sum_of(&doc, "cnps");
        assert_eq!(cnps, 4, "one CNP frame per family and tagging");
        assert!(sum_of(&doc, "ecn_ce") > 0);
    }
}

#[test]
fn a_damaged_file_is_analysed_up_to_the_damage_and_exits_2() {
    let frames = sample::frames(12);
    let bytes = pcap_bytes(&frames[..10]);
    let path = temp_file("cut-short.pcap", &bytes[..bytes.len() - 7]);
    let (out, doc) = analyze_json(&path);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(doc["packets"], 9);
    assert!(
        doc["input"]["damaged"]
            .as_str()
            .unwrap()
            .contains("cut short")
    );
    let (text, _) = roce_exit(&["analyze", path.to_str().unwrap()], 2);
    assert!(text.contains("input problems"), "{text}");
}

#[test]
fn frames_cut_by_a_snap_length_keep_their_headers_and_exit_3() {
    let frames = sample::frames(13);
    let whole = analyze_json(&temp_file("whole.pcap", &pcap_bytes(&frames))).1;
    let path = temp_file("snap.pcap", &pcap_bytes_snap(&frames, 1, 96));
    let (out, doc) = analyze_json(&path);
    assert_eq!(out.status.code(), Some(3));
    assert!(doc["input"]["cut_frames"].as_u64().unwrap() > 0);
    assert_eq!(doc["icrc_errors"], 0, "a cut ICRC is unknown, not bad");
    for (a, b) in doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .zip(whole["flows"].as_array().unwrap())
    {
        assert_eq!(a["opcodes"], b["opcodes"]);
        assert_eq!(a["payload_bytes"], b["payload_bytes"]);
    }
}

#[test]
fn not_a_capture_is_one_line_and_exit_1() {
    let path = temp_file("text.pcap", b"not a capture at all, just words\n");
    for cmd in [&["analyze"][..], &["ladder", "--svg", "/dev/null"][..]] {
        let mut args = cmd.to_vec();
        args.push(path.to_str().unwrap());
        let out = roce(&args);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("roce: ") && err.contains("not a pcap"),
            "{err}"
        );
    }
}

#[test]
fn ladder_draws_one_arrow_per_packet() {
    let frames = sample::frames(14);
    let path = temp_file("ladder.pcap", &pcap_bytes(&frames));
    let svg = temp_file("ladder.svg", b"");
    roce_ok(&[
        "ladder",
        path.to_str().unwrap(),
        "--flow",
        "0",
        "--count",
        "5",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.starts_with("<svg") && doc.trim_end().ends_with("</svg>"));
    let arrows = doc.matches("marker-end=").count();
    assert!((1..=5).contains(&arrows), "{arrows}");
    // Each arrow carries Wireshark's frame number (from 1); sample frame 1 is in flow 0.
    assert!(doc.contains(">#1  +"), "{doc}");
    let ladder = [
        "ladder",
        path.to_str().unwrap(),
        "--flow",
        "9999",
        "--svg",
        svg.to_str().unwrap(),
    ];
    let (_, err) = roce_exit(&ladder, 1);
    assert!(err.contains("no flow 9999"), "{err}");
    // The rows are held until the drawing is written: a bounded number of them.
    for count in ["0", "100001"] {
        let path = path.to_str().unwrap();
        let ladder = [
            "ladder",
            path,
            "--count",
            count,
            "--svg",
            svg.to_str().unwrap(),
        ];
        let (_, err) = roce_exit(&ladder, 1);
        assert!(err.contains("--count must be 1 to 100000"), "{err}");
    }
}

/// Damage and snap-length cuts are told as `analyze` tells them: exit 2 or 3 and one line on
/// stderr (issue 14: ladder said nothing and exited 0; view exited 2 and said nothing); a
/// missing file names its OS error once, a directory says it is one.
#[test]
fn ladder_view_and_analyze_exit_statuses_and_one_line_errors() {
    let frames = sample::frames(15);
    let whole = pcap_bytes(&frames);
    let cut = temp_file("ladder-cut.pcap", &whole[..whole.len() - 9]);
    let snapped = temp_file("ladder-snap.pcap", &pcap_bytes_snap(&frames, 1, 96));
    let svg = temp_file("ladder-status.svg", b"");
    let svg = svg.to_str().unwrap();
    let html = temp_file("ladder-status.html", b"");
    let html = html.to_str().unwrap();
    for (path, code, says) in [(&cut, 2, "cut short"), (&snapped, 3, "snap length")] {
        for args in [
            vec!["ladder", path.to_str().unwrap(), "--svg", svg],
            vec!["analyze", path.to_str().unwrap()],
            vec!["view", path.to_str().unwrap(), "-o", html],
        ] {
            let (_, err) = roce_exit(&args, code);
            assert!(
                err.lines().count() == 1 && err.contains(says),
                "{args:?}: {err}"
            );
        }
    }
    // Damaged before its first frame: nothing to draw, and the damage is why.
    let mut bogus = whole[..24].to_vec();
    bogus.extend_from_slice(&[0; 8]);
    bogus.extend_from_slice(&u32::MAX.to_le_bytes());
    bogus.extend_from_slice(&16u32.to_le_bytes());
    let bogus = temp_file("ladder-bogus.pcap", &bogus);
    let bogus = bogus.to_str().unwrap();
    let (_, err) = roce_exit(&["ladder", bogus, "--svg", svg], 1);
    assert!(
        err.lines().count() == 1 && err.contains("no RoCEv2 packets before the damage"),
        "{err}"
    );
    let (_, err) = roce_exit(&["view", bogus, "-o", html], 2);
    assert!(
        err.lines().count() == 1 && err.contains("damaged capture at byte 24"),
        "{err}"
    );
    let dir = std::env::temp_dir();
    for (path, says) in [
        ("/nonexistent/x.pcap", "No such file or directory"),
        (dir.to_str().unwrap(), "a directory"),
    ] {
        for args in [
            vec!["ladder", path, "--svg", svg],
            vec!["analyze", path],
            vec!["decode", path],
        ] {
            let (_, err) = roce_exit(&args, 1);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert_eq!(err.matches(says).count(), 1, "said once: {err}");
        }
    }
}

#[test]
fn help_has_examples() {
    for cmd in ["analyze", "ladder"] {
        let out = roce(&[cmd, "--help"]);
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            help.contains("Examples:") && help.contains(&format!("roce {cmd} ")),
            "{help}"
        );
    }
}

/// `--threads 2` (one thread reads, one analyses, the reader checking ICRCs while the
/// analyser is behind) must report and draw exactly what one thread does: on every real
/// capture, on one of many batches made from them, and on that one cut short.
#[test]
fn two_threads_report_what_one_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
    let mut captures = roce_tests::captures_in(&dir);
    assert!(captures.len() >= 20, "the real captures are in pcaps/");
    let frames: Vec<Vec<u8>> = roce_tests::bench::rounds(&dir)
        .unwrap()
        .take(12_000)
        .map(|r| r.unwrap().1)
        .collect();
    let big = pcap_bytes(&frames);
    captures.push(temp_file("many.pcap", &big));
    captures.push(temp_file("many-cut-short.pcap", &big[..big.len() * 2 / 3]));
    for path in &captures {
        let run = |threads: &str| {
            roce(&[
                "analyze",
                "--json",
                "--threads",
                threads,
                path.to_str().unwrap(),
            ])
        };
        let (one, two) = (run("1"), run("2"));
        assert_eq!(one.status.code(), two.status.code(), "{}", path.display());
        assert!(one.status.code().is_some_and(|c| c == 0 || c == 2));
        assert!(!one.stdout.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&one.stdout),
            String::from_utf8_lossy(&two.stdout),
            "{}",
            path.display()
        );
    }
    // The ladder's two passes too: the same drawing from a middle stretch of the big capture.
    let many = captures[captures.len() - 2].to_str().unwrap();
    let draw = |threads: &str| {
        let svg = temp_file(&format!("many-{threads}.svg"), b"");
        roce_ok(&[
            "ladder",
            many,
            "--from",
            "3000",
            "--count",
            "40",
            "--threads",
            threads,
            "--svg",
            svg.to_str().unwrap(),
        ]);
        std::fs::read_to_string(svg).unwrap()
    };
    let (one, two) = (draw("1"), draw("2"));
    assert!(one.matches("marker-end=").count() >= 20);
    assert_eq!(one, two);
    let bad = roce(&["analyze", "--threads", "3", "x.pcap"]);
    assert_eq!(bad.status.code(), Some(2), "clap refuses --threads 3");
}

/// `--max-flows` and `--max-memory`: what is left out is counted and said, in both formats,
/// and exit status stays 0 (the capture is fine; the analysis chose to stop following).
#[test]
fn the_limits_say_what_they_left_out() {
    let frames: Vec<Vec<u8>> = roce_tests::hostile::one_packet_flows(300)
        .map(|(_, f)| f)
        .collect();
    let path = temp_file("flows.pcap", &pcap_bytes(&frames));
    let path = path.to_str().unwrap();
    let out = roce(&["analyze", "--json", "--max-flows", "100", path]);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["flows"].as_array().unwrap().len(), 100);
    assert_eq!(doc["roce_packets"], 300);
    let u = &doc["untracked"];
    assert_eq!(
        (
            &u["max_flows"],
            &u["flows"],
            &u["packets"],
            &u["cm_connections"]
        ),
        (&100.into(), &200.into(), &200.into(), &0.into())
    );
    assert!(u["memory_full_at"].is_null());
    let text = roce(&["analyze", "--max-flows", "100", path]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("not tracked: 200 flows beyond --max-flows 100"),
        "{text}"
    );
    assert!(text.contains("not tracked: 200 packets in all"), "{text}");
    let whole = roce(&["analyze", path]);
    assert!(
        !String::from_utf8(whole.stdout)
            .unwrap()
            .contains("not tracked")
    );

    let out = roce(&["analyze", "--max-memory", "0", path]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--max-memory"), "{err}");
}

/// `--live`: a missing interface and missing privileges are one line each; the live flags
/// go with --live only.
#[test]
fn live_errors_are_one_line() {
    let err = common::roce_one_line_error(&["analyze", "--live", "nosuch0"]);
    assert!(err.contains("nosuch0: no such network interface"), "{err}");
    let err = common::roce_one_line_error(&["analyze", "--interval", "2", "x.pcap"]);
    assert!(
        err.contains("--interval and --duration go with --live"),
        "{err}"
    );
    // As root (CI), run as nobody; otherwise we already are unprivileged.
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout
        == b"0\n";
    let out = if root {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_roce"))
            .args(["analyze", "--live", "lo"])
            .output()
            .expect("setpriv (util-linux) runs")
    } else {
        roce(&["analyze", "--live", "lo"])
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "roce: lo: capturing needs CAP_NET_RAW (run as root)"
    );
}

/// A capture with no RoCE says what it held instead, in text and in JSON's `not_roce`.
#[test]
fn no_roce_is_explained_by_what_the_capture_held() {
    use roce::wire::decap::wrap::{Wrapping, wrap};
    let mut arp = sample::frames(3).remove(0);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let vxlan_arp = wrap(&arp, Wrapping::Vxlan, 0).unwrap();
    let mut frames = vec![vxlan_arp; 1180];
    frames.extend(vec![arp; 20]);
    let path = temp_file("no-roce.pcap", &pcap_bytes(&frames));
    let text = String::from_utf8(roce(&["analyze", path.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.contains(
            "0 RoCE frames: 1,200 frames, of which 1,180 VXLAN with non-RoCE inner frames, 20 ARP"
        ),
        "{text}"
    );
    let (out, doc) = analyze_json(&path);
    assert!(out.status.success());
    assert_eq!(
        doc["not_roce"],
        serde_json::json!({"frames": 1200, "by_kind": {"IN_VXLAN": 1180, "ARP": 20}})
    );
    // With RoCE too, the rest is still broken down.
    let mut mixed = sample::frames(3);
    mixed.push(frames[0].clone());
    let path = temp_file("mixed.pcap", &pcap_bytes(&mixed));
    let text = String::from_utf8(roce(&["analyze", path.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.contains("not RoCE: 1 frame: 1 VXLAN with non-RoCE inner frames"),
        "{text}"
    );
}

/// The goodput of a READ is its data once, whatever the responder sent again: 20 READs of
/// 8192 bytes (`ib_read_bw -n 20 -s 8192` on rxe), at 5% loss with 546 responses where 160
/// carry the data, and without loss.
#[test]
fn read_goodput_is_the_data_read_once() {
    for (capture, reads, size) in [("rc_loss_read.pcap", 20, 8192), ("rc_read.pcap", 5, 4096)] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../pcaps")
            .join(capture);
        let (out, doc) = analyze_json(&path);
        assert_eq!(out.status.code(), Some(0), "{capture}");
        let goodput: u64 = doc["flows"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| f["goodput_bytes"].as_array().unwrap())
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(goodput, reads * size, "{capture}");
        // The ladder says which responses brought nothing new, as the view does.
        let svg = temp_file(&format!("{capture}.svg"), b"");
        let path = path.to_str().unwrap();
        roce_ok(&[
            "ladder",
            path,
            "--flow",
            "0",
            "--count",
            "700",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        let doc = std::fs::read_to_string(&svg).unwrap();
        assert_eq!(doc.contains("(no new data)"), reads == 20, "{capture}");
    }
}
