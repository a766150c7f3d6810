//! `roce gen` as a learner uses it: every lesson writes a capture that `roce analyze` reads
//! back showing what the lesson teaches, the same file every time; bad input is one line.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::roce;

fn generate_all() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gen-tests");
    let out = roce(&["gen", "all", "-o", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// `roce analyze --json` of a lesson.
fn analysed(dir: &Path, lesson: &str) -> Value {
    let path = dir.join(format!("{lesson}.pcapng"));
    let out = roce(&["analyze", "--json", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{lesson}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `roce analyze --json` of a lesson: (A's flow, B's flow), A being the requester.
fn flows(dir: &Path, lesson: &str) -> (Value, Value) {
    let doc = analysed(dir, lesson);
    assert_eq!(doc["icrc_errors"], 0, "{lesson}");
    // Only the PFC lesson has more: B's port's two PFC frames.
    let pfc = if lesson == "pfc" { 2 } else { 0 };
    assert_eq!(
        n(&doc["packets"]),
        n(&doc["roce_packets"]) + pfc,
        "{lesson}: nothing but RoCE"
    );
    let pick = |src: &str| {
        doc["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["src"] == src)
            .cloned()
            .unwrap_or(Value::Null)
    };
    (pick("192.168.77.1"), pick("192.168.77.2"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

#[test]
fn every_lesson_shows_its_point_to_the_analyser() {
    let dir = generate_all();
    let (a, b) = flows(&dir, "write");
    assert_eq!(n(&a["opcodes"]["RC_RDMA_WRITE_MIDDLE"]), 1);
    assert_eq!(n(&b["opcodes"]["RC_ACKNOWLEDGE"]), 1);
    let (a, _) = flows(&dir, "write-imm");
    assert_eq!(n(&a["opcodes"]["RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"]), 1);
    let (a, _) = flows(&dir, "send-imm");
    assert_eq!(n(&a["opcodes"]["RC_SEND_ONLY_WITH_IMMEDIATE"]), 1);
    let (a, _) = flows(&dir, "send-inv");
    assert_eq!(n(&a["opcodes"]["RC_SEND_ONLY_WITH_INVALIDATE"]), 1);
    let (_, b) = flows(&dir, "read");
    assert_eq!(n(&b["opcodes"]["RC_RDMA_READ_RESPONSE_FIRST"]), 1);
    let (a, b) = flows(&dir, "atomics");
    assert_eq!(n(&a["opcodes"]["RC_COMPARE_SWAP"]), 1);
    assert_eq!(n(&b["opcodes"]["RC_ATOMIC_ACKNOWLEDGE"]), 2);
    let (a, b) = flows(&dir, "uc");
    assert_eq!(n(&a["packets"]), 3);
    assert!(b.is_null(), "UC: no acknowledgements");
    let (a, _) = flows(&dir, "ud");
    assert_eq!(n(&a["opcodes"]["UD_SEND_ONLY"]), 1);

    let (a, b) = flows(&dir, "loss-gbn");
    assert_eq!(n(&b["naks"]["PSN_SEQUENCE_ERROR"]), 1);
    assert_eq!(n(&a["retransmitted_packets"]), 6);
    assert_eq!(n(&a["requester"]["go_back_n_episodes"]), 1);
    let (a, b) = flows(&dir, "ack-loss");
    assert_eq!(n(&a["retransmitted_packets"]), 1, "the tail probe");
    assert_eq!(n(&b["opcodes"]["RC_ACKNOWLEDGE"]), 2);
    let (a, b) = flows(&dir, "rnr");
    assert_eq!(n(&b["rnr_naks"]), 1);
    assert_eq!(
        a["requester"]["rnr_events"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        n(&a["retransmitted_packets"]),
        2,
        "the SEND again after the wait"
    );
    let (a, b) = flows(&dir, "read-retry");
    assert_eq!(n(&a["opcodes"]["RC_RDMA_READ_REQUEST"]), 2);
    assert_eq!(n(&a["requester"]["go_back_n_episodes"]), 1);
    assert_eq!(n(&b["opcodes"]["RC_RDMA_READ_RESPONSE_MIDDLE"]), 4);
    let (a, b) = flows(&dir, "atomic-replay");
    assert_eq!(n(&a["retransmitted_packets"]), 1);
    assert_eq!(n(&b["opcodes"]["RC_ATOMIC_ACKNOWLEDGE"]), 2);
    let (a, b) = flows(&dir, "cnp");
    assert!(n(&a["ecn_ce"]) > 0 && n(&b["cnps"]) > 0, "{a}\n{b}");
    assert!(!a["rate_changes"].as_array().unwrap().is_empty());

    // Error NAKs end the exchange: nothing is sent again.
    let (a, b) = flows(&dir, "nak-access");
    assert_eq!(n(&b["naks"]["REMOTE_ACCESS_ERROR"]), 1);
    assert_eq!(n(&a["retransmitted_packets"]), 0);
    let cause = &a["requester"]["nak_events"][0]["cause"];
    assert_eq!(cause, "rejected_by_responder");
    let (a, b) = flows(&dir, "nak-invalid");
    assert_eq!(n(&b["naks"]["INVALID_REQUEST"]), 1);
    assert_eq!(
        n(&a["opcodes"]["RC_SEND_MIDDLE"]),
        1,
        "cut at the 2nd packet"
    );
    // Retry exhaustion: B never answers; A's first try, then the go-back of each of the
    // retry_cnt = 3 local ACK timeouts and one of the fast timer's after each.
    let (a, b) = flows(&dir, "retry-exceeded");
    assert!(b.is_null(), "B never hears A");
    assert_eq!(n(&a["opcodes"]["RC_RDMA_WRITE_FIRST"]), 7);

    // PFC: B's port's XOFF and XON (the two frames that are not RoCE); A's WRITE waits
    // behind them and loses nothing.
    let (a, b) = flows(&dir, "pfc");
    assert_eq!(n(&a["packets"]), 16);
    assert_eq!(n(&a["retransmitted_packets"]), 0);
    assert_eq!(n(&b["opcodes"]["RC_ACKNOWLEDGE"]), 1);

    // rdma_cm: the analyser ties the handshake to the QPs it connected, and the SEND that
    // follows starts at the PSN the REP gave.
    let doc = analysed(&dir, "cm-connect");
    let c = &doc["connections"][0];
    assert_eq!(c["state"], "DISCONNECTED", "{c}");
    let events: Vec<&str> = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["REQ", "REP", "RTU", "DREQ", "DREP"]);
    let rc = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == "192.168.77.1" && f["dest_qp"] == c["server_qpn"])
        .unwrap();
    assert_eq!(n(&rc["opcodes"]["RC_SEND_ONLY"]), 1);
    assert_eq!(
        rc["requester"]["highest_psn"], c["server_start_psn"],
        "{rc}"
    );
    let doc = analysed(&dir, "cm-reject");
    let reasons: Vec<u64> = doc["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| n(&c["reject_reason"]))
        .collect();
    assert_eq!(reasons, [8, 28]);
}

#[test]
fn the_same_lesson_and_seed_give_the_same_file() {
    let write = |name: &str, seed: &str| {
        // An existing file is replaced.
        let path = common::temp_file_in("gen-determinism", name, b"old");
        let out = roce(&[
            "gen",
            "loss-gbn",
            "--seed",
            seed,
            "-o",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success());
        std::fs::read(path).unwrap()
    };
    assert_eq!(write("a.pcapng", "3"), write("b.pcapng", "3"));
    assert_ne!(write("a.pcapng", "3"), write("c.pcapng", "4"));
}

#[test]
fn ipv6_lessons_run_between_the_ipv6_hosts() {
    let path = common::temp_file_in("gen-ipv6", "write6.pcapng", b"");
    let out = roce(&["gen", "write", "--ipv6", "-o", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = roce(&["analyze", "--json", path.to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    let mut hosts: Vec<(String, String)> = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["src"].to_string(), f["dst"].to_string()))
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        [
            ("\"fd00:77::1\"".to_string(), "\"fd00:77::2\"".to_string()),
            ("\"fd00:77::2\"".to_string(), "\"fd00:77::1\"".to_string())
        ]
    );
    assert_eq!(doc["icrc_errors"], 0);
}

#[test]
fn list_help_and_bad_input() {
    let out = roce(&["gen", "--list"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(list.lines().count(), 21, "{list}");
    assert!(list.contains("atomic-replay") && list.contains("cnp"));

    let out = roce(&["gen", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Examples:"));

    let out = roce(&["gen", "nosuch", "-o", "/tmp/never-written.pcapng"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown scenario \"nosuch\""), "{err}");

    let out = roce(&["gen", "write", "-o", "/nonexistent/dir/w.pcapng"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
}
