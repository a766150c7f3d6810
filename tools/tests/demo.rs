//! `roce demo` as a user runs it: exit status, the summary, `--json`, and the capture, every
//! frame of which must parse with a good ICRC.

use roce::capture::CaptureReader;
use roce::wire::RocePacket;
use serde_json::Value;

mod common;
use common::roce;

#[test]
fn demo_exits_zero_and_writes_a_valid_capture() {
    // An empty file where the capture goes: the demo must replace it.
    let pcap = common::temp_file_in("demo-tests", "demo.pcap", b"");
    let args = ["demo", "--size", "4", "--loss", "2", "--pcap"];
    let out = roce(&[&args[..], &[pcap.to_str().unwrap()]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "every byte verified: OK",
        "RDMA_READ",
        "retransmitted",
        "CNPs",
        "goodput",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    let mut reader = CaptureReader::open(&pcap).unwrap();
    let mut roce_frames = 0;
    while let Some(frame) = reader.next_frame().unwrap() {
        if frame.data.get(12..14) == Some(&[0x08, 0x06]) {
            continue;
        }
        let p =
            RocePacket::parse(frame.data).unwrap_or_else(|e| panic!("frame {}: {e}", frame.index));
        assert!(p.icrc_ok(), "frame {}: bad ICRC", frame.index);
        roce_frames += 1;
    }
    assert!(roce_frames > 100, "{roce_frames} RoCE frames");
}

#[test]
fn json_says_what_happened() {
    let out = roce(&["demo", "--json", "--no-pcap", "--size", "2", "--seed", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["verified"], true);
    assert!(v["bytes"].as_u64().unwrap() >= 2_000_000);
    assert!(v["retransmitted_packets"].as_u64().unwrap() > 0);
    assert!(v["operations"]["SEND"]["messages"].as_u64().unwrap() > 0);
    assert!(v["goodput_gbps"].as_f64().unwrap() > 0.0);
    assert_eq!(v["pcap"], Value::Null);
}

#[test]
fn bad_flags_are_one_clear_line() {
    for args in [
        &["demo", "--mtu", "1500"][..],
        &["demo", "--loss", "120"],
        &["demo", "--dcqcn", "fast"],
        &["demo", "--size", "0"],
    ] {
        let out = roce(args);
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("roce: "), "{err}");
    }
}

/// Every frame lost: the connection gives up, and the one line says why, once. It said
/// "queue pair 0x11 entered the error state" twice (the error and its source), and not
/// which work request failed with which status, nor that the link's settings were why.
#[test]
fn a_link_that_loses_everything_fails_in_one_line_that_says_why() {
    let out = roce(&["demo", "--no-pcap", "--size", "1", "--loss", "100"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("roce: verification failed: ")
            && err.contains("completed with RETRY_EXC_ERR")
            && err.contains("--loss 100%"),
        "{err}"
    );
    assert_eq!(err.matches("RETRY_EXC_ERR").count(), 1, "{err}");
}
