//! `roce sim net` as a user runs it: the JSON contract, the table, several controllers at
//! once, the SVG and the trace, and one clear line for each bad input. The simulator's
//! behaviour is tested in roce::sim::net.

use serde_json::Value;

mod common;
use common::roce;

fn json(args: &[&str]) -> Value {
    let mut all = vec!["sim", "net", "--json"];
    all.extend_from_slice(args);
    common::roce_json(&all)
}

#[test]
fn json_has_the_contracts_keys() {
    let doc = json(&[
        "--topology",
        "leafspine:2,2,4",
        "--workload",
        "websearch",
        "--load",
        "0.5",
        "--duration-ms",
        "4",
        "--preset",
        "ns3",
    ]);
    let fct = &doc["fct_slowdown"];
    for key in ["p50", "p95", "p99"] {
        let v = fct[key].as_f64().unwrap();
        assert!(v >= 1.0, "{key}: {v}");
    }
    let buckets = fct["by_size"].as_array().unwrap();
    assert_eq!(buckets.len(), 20);
    assert_eq!(buckets[0]["max_bytes"], 3333);
    assert!(buckets.iter().any(|b| b["flows"].as_u64().unwrap() > 0));
    assert!(doc["pfc"]["pause_frames"].as_u64().is_some());
    assert!(doc["pfc"]["paused_us"].as_f64().is_some());
    assert_eq!(doc["drops"], 0);
    let events = doc["events"].as_u64().unwrap();
    let wall = doc["wall_s"].as_f64().unwrap();
    let rate = doc["events_per_s"].as_f64().unwrap();
    assert!(events > 10_000 && wall > 0.0);
    assert!((rate * wall / events as f64 - 1.0).abs() < 1e-6);
    assert_eq!(doc["cc"], "dcqcn");
    assert_eq!(doc["preset"], "ns3");
    assert_eq!(doc["hosts"], 8);
    assert!(doc["flows"]["finished"].as_u64().unwrap() > 0);
    assert_eq!(doc["queues"].as_array().unwrap().len(), 4);
    assert!(doc["samples"]["times_ms"].as_array().unwrap().len() >= 499);
}

#[test]
fn several_controllers_see_the_same_flows() {
    let doc = json(&[
        "--topology",
        "dumbbell:4",
        "--workload",
        "hadoop",
        "--load",
        "0.4",
        "--duration-ms",
        "3",
        "--arrivals-ms",
        "2",
        "--cc",
        "dcqcn,hpcc,timely,none",
    ]);
    let runs = doc["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["cc"].as_str().unwrap()).collect();
    assert_eq!(names, ["dcqcn", "hpcc", "timely", "none"]);
    let started: Vec<u64> = runs
        .iter()
        .map(|r| r["flows"]["started"].as_u64().unwrap())
        .collect();
    assert!(started[0] > 20 && started.iter().all(|&s| s == started[0]));
}

#[test]
fn long_lived_flows_fairness_and_pauses() {
    let doc = json(&[
        "--topology",
        "incast:4",
        "--link-gbps",
        "40",
        "--cc",
        "none",
        "--duration-ms",
        "4",
    ]);
    let flows = doc["long_lived"].as_array().unwrap();
    assert_eq!(flows.len(), 4);
    let total: f64 = flows
        .iter()
        .map(|f| f["throughput_gbps"].as_f64().unwrap())
        .sum();
    assert!(total > 36.0 && total <= 40.01, "{total}");
    assert!(doc["jain"].as_f64().unwrap() > 0.95);
    assert!(doc["pfc"]["pause_frames"].as_u64().unwrap() > 0);
    let by_port = doc["pfc"]["by_port"].as_array().unwrap();
    assert!(by_port.iter().any(|p| p["port"] == "h0->tor"));
}

#[test]
fn the_table_the_svg_and_the_trace() {
    let svg = common::temp_file_in("sim-net-tests", "victim.svg", b"");
    let trace = common::temp_file_in("sim-net-tests", "trace.jsonl", b"");
    let text = common::roce_ok(&[
        "sim",
        "net",
        "--topology",
        "leafspine:3,1,4",
        "--link-gbps",
        "40",
        "--spine-gbps",
        "100",
        "--flows",
        "0-11,1-11,8-11,9-11,2-5,3-6:500K@0.5ms",
        "--cc",
        "none,dcqcn",
        "--duration-ms",
        "6",
        "--svg",
        svg.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    common::assert_contains_all(
        &text,
        &[
            "== none",
            "== dcqcn (paper)",
            "PFC:",
            "long-lived flows",
            "h2->h5",
            "Jain's fairness",
            "FCT slowdown over 1 flows",
            "egress queues per switch",
        ],
    );
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.starts_with("<svg"), "{}", &doc[..doc.len().min(80)]);
    for caption in [
        "none: throughput of each long-lived flow",
        "none: PFC, share of each interval a port was paused",
        "p99 FCT slowdown by flow size",
    ] {
        assert!(doc.contains(caption), "{caption:?} missing from the SVG");
    }
    let lines: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds = |k: &str| lines.iter().filter(|l| l["event"] == k).count();
    assert_eq!(kinds("flow"), 2, "the 500 KB flow, under each controller");
    assert!(kinds("xoff") > 0 && kinds("xon") > 0);
    assert!(
        lines
            .iter()
            .all(|l| l["cc"] == "none" || l["cc"] == "dcqcn")
    );
}

#[test]
fn bad_input_gets_one_line_and_a_failure() {
    let cdf = common::temp_file_in(
        "sim-net-tests",
        "bad.cdf",
        b"0 0\n1000 60\n500 80\n2000 100\n",
    );
    let cdf = cdf.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--topology", "ring:4"], "unknown topology"),
        (&["--topology", "leafspine:2,2"], "unknown topology"),
        (
            &["--topology", "leafspine:200,200,300"],
            "routing tables would hold",
        ),
        (
            &["--topology", "incast:2", "--workload", cdf, "--load", "0.3"],
            "not monotone",
        ),
        (
            &[
                "--topology",
                "incast:2",
                "--workload",
                "websearch",
                "--load",
                "1.5",
            ],
            "at most 1",
        ),
        (
            &["--topology", "incast:2", "--buffer-kb", "1"],
            "smaller than one packet",
        ),
        (
            &[
                "--topology",
                "incast:2",
                "--workload",
                "nosuch.cdf",
                "--load",
                "0.3",
            ],
            "nosuch.cdf",
        ),
        (
            &["--topology", "incast:2", "--workload", "websearch"],
            "--load",
        ),
        (&["--topology", "incast:2", "--cc", "bbr"], "--cc"),
        (&["--topology", "incast:2", "--pfc", "maybe"], "--pfc"),
        (&["--topology", "incast:2", "--xoff", "100"], "--xon"),
        (
            &["--topology", "incast:2", "--flows", "0-9"],
            "hosts are 0 to 2",
        ),
        (&["--topology", "incast:2", "--preset", "fast"], "--preset"),
        (&["--topology", "leafspine:2,1,2"], "--workload or --flows"),
        (
            &["--topology", "incast:2", "--link-gbps", "0"],
            "--link-gbps",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["sim", "net"];
        all.extend_from_slice(args);
        let err = common::roce_one_line_error(&all);
        assert!(err.contains(needle), "{args:?}: {err} lacks {needle:?}");
    }
}

#[test]
fn help_has_examples() {
    let out = roce(&["sim", "net", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Examples:") && text.contains("--topology incast:2 --link-gbps 40"),
        "{text}"
    );
}
