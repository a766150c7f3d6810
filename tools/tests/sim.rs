//! `roce sim dcqcn` as a user runs it: the table, the JSON contract, the SVG, and one clear
//! line for each bad flag. The simulator's behaviour is tested in roce::sim::dcqcn.

use serde_json::Value;

mod common;
use common::roce;

fn json(args: &[&str]) -> Value {
    let mut all = vec!["sim", "dcqcn", "--json"];
    all.extend_from_slice(args);
    common::roce_json(&all)
}

#[test]
fn json_has_rates_over_time_and_the_summary() {
    let doc = json(&[
        "--start-ms",
        "0,2",
        "--duration-ms",
        "20",
        "--window-ms",
        "5",
    ]);
    let samples = doc["sample_times_ms"].as_array().unwrap().len();
    assert_eq!(samples, 200, "every 100 us for 20 ms");
    assert_eq!(doc["queue_bytes"].as_array().unwrap().len(), samples);
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[1]["start_ms"], 2.0);
    for f in flows {
        assert_eq!(f["rate_gbps"].as_array().unwrap().len(), samples);
        assert_eq!(f["throughput_gbps"].as_array().unwrap().len(), samples);
        let rate = f["final_rate_gbps"].as_f64().unwrap();
        assert!(rate > 0.0 && rate <= 40.0, "{rate}");
        assert!(f["mean_rate_gbps"].as_f64().unwrap() > 0.0);
        assert!(f["cnps"].as_u64().unwrap() > 0, "both flows were throttled");
    }
    let jain = doc["jain"].as_f64().unwrap();
    assert!(jain > 0.5 && jain <= 1.0, "{jain}");
    assert!(doc["utilisation"].as_f64().unwrap() > 0.9);
    assert!(doc["queue_mean_bytes"].as_f64().unwrap() >= 0.0);
    assert!(doc["queue_max_bytes"].as_u64().unwrap() <= doc["queue_peak_bytes"].as_u64().unwrap());
    assert_eq!(doc["fluid_fixed_point"]["flows"], 2);
    assert_eq!(doc["preset"], "paper");
}

#[test]
fn runs_are_deterministic_per_seed() {
    let args = ["--flows", "3", "--duration-ms", "5", "--window-ms", "1"];
    assert_eq!(json(&args), json(&args));
    let other: Vec<&str> = args.iter().copied().chain(["--seed", "9"]).collect();
    assert_ne!(json(&args)["marks"], json(&other)["marks"]);
}

#[test]
fn without_control_the_queue_grows() {
    let doc = json(&["--preset", "none", "--duration-ms", "2", "--window-ms", "1"]);
    assert_eq!(doc["cnps"].as_u64(), Some(doc["cnps"].as_u64().unwrap()));
    assert!(doc["queue_peak_bytes"].as_u64().unwrap() > 9_000_000);
    assert!(doc["fluid_fixed_point"].is_null());
    for f in doc["flows"].as_array().unwrap() {
        assert_eq!(f["final_rate_gbps"], 40.0);
    }
}

#[test]
fn the_table_and_the_svg() {
    // An empty file the run must replace.
    let svg = common::temp_file_in("sim-tests", "dcqcn.svg", b"");
    let text = common::roce_ok(&[
        "sim",
        "dcqcn",
        "--flows",
        "2",
        "--duration-ms",
        "10",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    common::assert_contains_all(
        &text,
        &[
            "flow  start ms",
            "final rate Gb/s",
            "Jain's fairness",
            "utilisation",
            "queue mean",
        ],
    );
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.starts_with("<svg"), "{}", &doc[..doc.len().min(80)]);
    assert!(doc.contains("DCQCN rate R_C per flow") && doc.contains("switch queue"));
}

#[test]
fn bad_flags_get_one_line_and_a_failure() {
    for args in [
        &["--preset", "fast"][..],
        &["--flows", "3", "--start-ms", "0,1"],
        &["--pmax", "2"],
        &["--kmin", "300"],
        &["--link-gbps", "0"],
        &["--duration-ms", "-1"],
        &["--flows", "0"],
        &["--payload", "9000"],
        // Beyond the simulated clock's 213 days: refused, not taken as the end of time.
        &["--delay-us", "1e30"],
    ] {
        let mut all = vec!["sim", "dcqcn"];
        all.extend_from_slice(args);
        common::roce_one_line_error(&all);
    }
}

#[test]
fn help_has_examples() {
    let out = roce(&["sim", "dcqcn", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Examples:") && text.contains("--start-ms 0,10,100"),
        "{text}"
    );
}

/// A reader that stops early (`roce sim dcqcn --json | head`) ends the output quietly: exit
/// 0 and nothing on stderr (`println!` panicked: "failed printing to stdout: Broken pipe").
/// A stdout that cannot be written is one line and exit 1. The JSON is about a megabyte,
/// well past what a pipe holds, so the write after the reader left is certain.
#[test]
fn a_closed_pipe_ends_the_output_quietly_and_a_full_disk_is_an_error() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let args = ["sim", "dcqcn", "--json", "--sample-us", "10"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"{");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");

    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("No space left on device"),
        "{err}"
    );
}
