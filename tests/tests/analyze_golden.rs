//! The analysis of every real capture in pcaps/ agrees with an independent count from
//! tshark's fields (tests/fixtures/analyze/*.json, written by make.sh beside them): per flow,
//! packets, opcodes, retransmitted packets (same definition, counted from tshark's PSN
//! sequence), NAKs by syndrome, RNR NAKs and CNPs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roce::analysis::{Analyzer, Report};
use roce::capture::CaptureReader;
use roce_tests::captures_in;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn analyse(path: &Path) -> Report {
    let mut reader = CaptureReader::open(path).expect("a capture");
    let mut analyzer = Analyzer::new();
    while let Some(frame) = reader.next_frame().expect("an undamaged capture") {
        analyzer.frame(&frame);
    }
    analyzer.report()
}

/// One flow's counts, in the fixture's terms.
fn counts(v: &Value) -> Value {
    serde_json::json!({
        "packets": v["packets"],
        "opcodes": v["opcodes"],
        "retransmitted_packets": v["retransmitted_packets"],
        "naks": v["naks"],
        "rnr_naks": v["rnr_naks"],
        "cnps": v["cnps"],
    })
}

fn ours(r: &Report) -> BTreeMap<(String, String, u64), Value> {
    r.flows
        .iter()
        .map(|f| {
            let map = |l: &[(&str, u64)]| -> BTreeMap<String, u64> {
                l.iter().map(|(n, c)| (n.to_string(), *c)).collect()
            };
            let v = serde_json::json!({
                "packets": f.packets,
                "opcodes": map(&f.opcodes),
                "retransmitted_packets": f.retransmitted_packets,
                "naks": map(&f.naks),
                "rnr_naks": f.rnr_naks,
                "cnps": f.cnps,
            });
            let key = (
                f.src.to_string(),
                f.dst.to_string(),
                u64::from(f.dest_qp.value()),
            );
            (key, v)
        })
        .collect()
}

fn theirs(fixture: &Value) -> BTreeMap<(String, String, u64), Value> {
    fixture["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .map(|f| {
            let key = (
                f["src"].as_str().unwrap().to_string(),
                f["dst"].as_str().unwrap().to_string(),
                f["dest_qp"].as_u64().unwrap(),
            );
            (key, counts(f))
        })
        .collect()
}

#[test]
fn every_capture_agrees_with_tshark() {
    let captures = captures_in(&root().join("pcaps"));
    assert!(!captures.is_empty(), "pcaps/ has no captures");
    let mut retransmitted = 0;
    let mut naks = 0;
    for cap in &captures {
        let stem = cap.file_stem().unwrap().to_str().unwrap();
        let fixture = root()
            .join("tests/fixtures/analyze")
            .join(format!("{stem}.json"));
        let text = std::fs::read_to_string(&fixture).unwrap_or_else(|_| {
            panic!(
                "{stem}: no fixture {}; run tests/fixtures/analyze/make.sh",
                fixture.display()
            )
        });
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let report = analyse(cap);
        assert_eq!(
            report.roce_packets,
            fixture["roce_packets"].as_u64().unwrap(),
            "{stem}"
        );
        assert_eq!(
            report.icrc_errors, 0,
            "{stem}: rxe computes every ICRC right"
        );
        let (ours, theirs) = (ours(&report), theirs(&fixture));
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{stem}: flows"
        );
        for (key, expected) in &theirs {
            assert_eq!(&ours[key], expected, "{stem}: flow {key:?}");
            retransmitted += expected["retransmitted_packets"].as_u64().unwrap();
            naks += expected["naks"].as_object().unwrap().len();
        }
    }
    // The loss captures must be among them, or the interesting counts were never compared.
    assert!(retransmitted > 0, "no capture has retransmissions");
    assert!(naks > 0, "no capture has NAKs");
}
