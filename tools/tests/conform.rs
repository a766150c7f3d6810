//! `roce conform` as a user runs it, without root: the list, the table, the JSON and JUnit
//! contracts, the capture's packet comments, --expect, and one clear line for each bad input.
//! The suite runs against our own endpoint in memory (--in-memory); against real devices and
//! rdma_rxe it runs in tests/conform/run.sh (root, QEMU), which .ci/run calls.

use roce::capture::CaptureReader;
use serde_json::Value;

mod common;
use common::{roce, temp_file_in};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn list_names_every_check_with_its_rule() {
    let out = roce(&["conform", "--list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() >= 40);
    for line in text.lines() {
        let id = line.split_whitespace().next().unwrap();
        assert!(id.starts_with("resp.") || id.starts_with("req."), "{line}");
        assert!(
            line.contains("IBA ") || line.contains("C9-") || line.contains("Annex A17"),
            "{line}"
        );
    }
    let out = roce(&["conform", "--list", "--json", "--only", "^req\\."]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    assert!(list.len() >= 10);
    assert!(
        list.iter()
            .all(|c| c["id"].as_str().unwrap().starts_with("req.")
                && c["rule"].is_string()
                && c["title"].is_string())
    );
}

#[test]
fn json_follows_the_contract_and_every_check_passes_against_our_endpoint() {
    let out = roce(&["conform", "--in-memory", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["peer"], "192.168.77.1");
    let checks = doc["checks"].as_array().unwrap();
    assert!(checks.len() >= 40);
    for c in checks {
        for key in ["id", "rule", "title", "evidence"] {
            assert!(
                c[key].as_str().is_some_and(|s| !s.is_empty()),
                "{key} of {c}"
            );
        }
        assert_eq!(c["result"], "pass", "{c}");
        assert!(c["frames"].as_array().is_some_and(|f| !f.is_empty()), "{c}");
    }
    let s = &doc["summary"];
    assert_eq!(s["pass"].as_u64(), Some(checks.len() as u64));
    assert_eq!(
        (s["fail"].as_u64(), s["not_applicable"].as_u64()),
        (Some(0), Some(0))
    );
    // Progress goes to stderr, one line per check, so that stdout stays one JSON object.
    assert_eq!(
        stderr(&out).lines().filter(|l| l.starts_with('[')).count(),
        checks.len()
    );
}

#[test]
fn junit_and_the_capture_name_each_check() {
    let xml = temp_file_in("conform", "dup.xml", b"");
    let pcap = temp_file_in("conform", "dup.pcapng", b"");
    let out = roce(&[
        "conform",
        "--in-memory",
        "--only",
        "^resp\\.dup\\.",
        "--junit",
        xml.to_str().unwrap(),
        "--pcap-out",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("resp.dup.atomic") && table.contains("6 passed, 0 failed, 0 not applicable"),
        "{table}"
    );
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(
        junit.contains(
            "<testsuite name=\"roce conform 192.168.77.1\" tests=\"6\" failures=\"0\" skipped=\"0\""
        ),
        "{junit}"
    );
    assert_eq!(
        junit
            .matches("<testcase classname=\"roce.conform.resp\"")
            .count(),
        6
    );
    let mut reader = CaptureReader::open(&pcap).unwrap();
    let mut comments = Vec::new();
    while let Some((_, comment)) = reader.next_frame_commented().unwrap() {
        let comment = comment.expect("every frame has a comment");
        comments.push(String::from_utf8_lossy(comment).into_owned());
    }
    assert!(comments.len() >= 10, "{comments:?}");
    assert!(
        comments.iter().all(|c| c.starts_with("resp.dup.")),
        "{comments:?}"
    );
    assert!(
        comments.iter().any(|c| c.contains(": sent RC_FETCH_ADD")),
        "{comments:?}"
    );
    assert!(
        comments
            .iter()
            .any(|c| c.contains(": received RC_ATOMIC_ACKNOWLEDGE")),
        "{comments:?}"
    );
}

#[test]
fn expect_fails_on_a_changed_result_and_names_it() {
    let good = temp_file_in(
        "conform",
        "good.txt",
        b"# ours\nresp.psn.seq-nak pass\nresp.psn.wrap   pass # why\n",
    );
    let bad = temp_file_in(
        "conform",
        "bad.txt",
        b"resp.psn.seq-nak fail\nresp.psn.wrap pass\n",
    );
    let missing = temp_file_in("conform", "missing.txt", b"resp.psn.wrap pass\n");
    let garbled = temp_file_in("conform", "garbled.txt", b"resp.psn.wrap maybe\n");
    let run = |file: &std::path::Path| {
        roce(&[
            "conform",
            "--in-memory",
            "--only",
            "^resp\\.psn\\.(seq-nak|wrap)$",
            "--expect",
            file.to_str().unwrap(),
        ])
    };
    assert_eq!(run(&good).status.code(), Some(0), "{}", stderr(&run(&good)));
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("changed: resp.psn.seq-nak: expected fail, got pass"),
        "{}",
        stderr(&out)
    );
    let out = run(&missing);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("resp.psn.seq-nak: no expected result recorded"),
        "{}",
        stderr(&out)
    );
    let out = run(&garbled);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("garbled.txt:1: \"maybe\" is not pass, fail or not_applicable"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_is_one_clear_line() {
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["conform", "--only", "(", "--list"],
            1,
            "--only \"(\" is not a regular expression: unclosed group",
        ),
        (
            &["conform", "--only", "^nothing$", "--list"],
            1,
            "matches no check",
        ),
        (
            &[
                "conform",
                "10.0.0.1",
                "--iface",
                "pcap:x.pcap",
                "--ip",
                "10.0.0.2/24",
            ],
            2,
            "--iface must be tap:NAME or xdp:IFNAME",
        ),
        (
            &[
                "conform",
                "10.1.0.1",
                "--iface",
                "tap:x",
                "--ip",
                "10.0.0.2/24",
            ],
            2,
            "10.1.0.1 is not on 10.0.0.2/24",
        ),
        (
            &[
                "conform",
                "10.0.0.1",
                "--iface",
                "tap:x",
                "--ip",
                "10.0.0.2/24",
                "--agent",
                "nowhere",
            ],
            2,
            "--agent \"nowhere\" is not HOST:PORT",
        ),
    ];
    for (args, code, why) in cases {
        let out = roce(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let out = roce(&["conform", "10.0.0.1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--iface <BACKEND>"));
}

#[test]
fn help_shows_examples() {
    for cmd in ["conform", "conform-agent"] {
        let out = roce(&[cmd, "--help"]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Example"), "{cmd}: {text}");
    }
}

/// The results recorded in tests/conform/expected-SIDE.txt, in file order (comments skipped).
fn recorded(side: &str) -> Vec<(String, String)> {
    let path = repo_root().join(format!("tests/conform/expected-{side}.txt"));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_owned(), w[1].to_owned())
        })
        .collect()
}

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// README's table of rdma_rxe's results is what a user reads first: it must list every check,
/// in the suite's order, with the suite's rule, and the results recorded for CI (so that a
/// change to a check or to a recorded result cannot leave the table stale), and each rxe
/// failure must be explained in the list below it.
#[test]
fn readme_table_agrees_with_the_suite_and_the_recorded_results() {
    let out = roce(&["conform", "--list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    let (rxe, ours) = (recorded("rxe"), recorded("roce"));
    let shown = |r: &str| match r {
        "pass" => "pass",
        "fail" => "**fail**",
        "not_applicable" => "n/a",
        other => panic!("recorded result {other:?}"),
    };
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Conformance: `roce conform`")
        .nth(1)
        .expect("README has the conformance section")
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<Vec<&str>> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), list.len(), "README's table has a row per check");
    assert_eq!((rxe.len(), ours.len()), (list.len(), list.len()));
    for (i, check) in list.iter().enumerate() {
        let id = check["id"].as_str().unwrap();
        let want = vec![
            format!("`{id}`"),
            check["rule"].as_str().unwrap().to_owned(),
            shown(&rxe[i].1).to_owned(),
            shown(&ours[i].1).to_owned(),
        ];
        assert_eq!(
            rows[i],
            want,
            "README row {} (recorded {:?} {:?})",
            i + 1,
            rxe[i],
            ours[i]
        );
        assert_eq!(
            (rxe[i].0.as_str(), ours[i].0.as_str()),
            (id, id),
            "file order"
        );
        if rxe[i].1 == "fail" {
            assert!(
                section.contains(&format!("\n- `{id}`: ")),
                "README explains rxe's failure of {id}"
            );
        }
    }
}
