//! `roce view` as a user runs it: the page it writes holds what `roce analyze` and `roce
//! decode --json` say, pages and flows pick the frames, bad input gives a page that says what
//! is wrong. (What a browser makes of the page: tests/browser/view_needs_browser.py.)

use std::path::{Path, PathBuf};

use roce::wire::sample;
use roce_tests::pcap_bytes;
use serde_json::Value;

mod common;
use common::roce;

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    common::temp_file_in("view-tests", name, bytes)
}

fn pcap(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pcaps")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// Runs `roce view ARGS -o OUT` and returns (exit code, page, the page's data).
fn view(out_name: &str, args: &[&str]) -> (Option<i32>, String, Value) {
    let out = temp_file(out_name, b"");
    let mut all = vec!["view"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let run = roce(&all);
    let page = std::fs::read_to_string(&out).unwrap_or_default();
    let data = page
        .split_once("<script type=\"application/json\" id=\"view-data\">")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map_or(Value::Null, |(json, _)| serde_json::from_str(json).unwrap());
    assert!(
        run.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    (run.status.code(), page, data)
}

fn numbers(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn the_page_holds_every_frame_with_decode_json_keys_and_analyze_flows() {
    let cap = pcap("rc_rnr_nak.pcap");
    let (code, page, data) = view("rnr.html", &[&cap]);
    assert_eq!(code, Some(0));
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("id=\"frame-details\""));
    // Self-contained: nothing to fetch.
    for remote in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!page.contains(remote), "{remote}");
    }
    let decoded: Vec<Value> = String::from_utf8(roce(&["decode", "--json", &cap]).stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let frames = numbers(&data["rows"]["n"]);
    assert_eq!(frames, (1..=decoded.len() as u64).collect::<Vec<_>>());
    // Each frame's pairs are decode --json's keys and values.
    let s = data["tables"]["s"].as_array().unwrap();
    let pairs = data["tables"]["p"].as_array().unwrap();
    for (i, d) in data["details"].as_array().unwrap().iter().enumerate() {
        let mut shown = serde_json::Map::new();
        for p in d[6].as_array().unwrap() {
            let kv = &pairs[p.as_u64().unwrap() as usize];
            let key = s[kv[0].as_u64().unwrap() as usize].as_str().unwrap();
            let value = s[kv[1].as_u64().unwrap() as usize].as_str().unwrap();
            shown.insert(key.to_owned(), serde_json::from_str(value).unwrap());
        }
        let mut want = serde_json::Map::new();
        flatten("", &decoded[i], &mut want);
        assert_eq!(shown, want, "frame {}", i + 1);
    }
    let analysis: Value =
        serde_json::from_slice(&roce(&["analyze", "--json", &cap]).stdout).unwrap();
    assert_eq!(data["analysis"], analysis);
    // RNR NAKs: each is noted, and bracketed to the retry it asked for.
    let rnr = data["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[2] == "rnr")
        .count();
    assert_eq!(
        rnr as u64,
        analysis["flows"][1]["rnr_naks"].as_u64().unwrap()
    );
}

fn flatten(prefix: &str, v: &Value, out: &mut serde_json::Map<String, Value>) {
    for (k, v) in v.as_object().unwrap() {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if v.is_object() {
            flatten(&key, v, out);
        } else {
            out.insert(key, v.clone());
        }
    }
}

#[test]
fn from_count_and_flow_pick_the_page() {
    let cap = pcap("rdma_cm_rping.pcap");
    let (code, _, data) = view("page.html", &[&cap, "--from", "5", "--count", "7"]);
    assert_eq!(code, Some(0));
    assert_eq!(numbers(&data["rows"]["n"]), (5..=11).collect::<Vec<_>>());
    let (_, _, data) = view("flow.html", &[&cap, "--flow", "2"]);
    let reverse = data["analysis"]["flows"][2]["reverse_flow"].as_i64();
    for f in data["rows"]["fl"].as_array().unwrap() {
        assert!(f.as_i64() == Some(2) || f.as_i64() == reverse, "{f}");
    }
    assert_eq!(data["initial_flow"], 2);
    // The rdma_cm exchange, its messages linked to their frames.
    let (_, page, _) = view("cm.html", &[&cap]);
    assert!(page.contains("rdma_cm exchange"));
    assert_eq!(
        page.matches("data-goto=").count(),
        5,
        "REQ REP RTU DREQ DREP, each linked"
    );
    let (code, ..) = view("bad.html", &[&cap, "--flow", "99"]);
    assert_eq!(code, Some(1));
    let (code, ..) = view("bad.html", &[&cap, "--count", "0"]);
    assert_eq!(code, Some(1));
    let (code, ..) = view("bad.html", &[&cap, "--from", "0"]);
    assert_eq!(code, Some(1));
    // Past the last frame: nothing to show in detail is an error, as in roce ladder.
    let (code, ..) = view("bad.html", &[&cap, "--from", "100000"]);
    assert_eq!(code, Some(1));
    let (code, ..) = view("bad.html", &[&cap, "--flow", "0", "--from", "100000"]);
    assert_eq!(code, Some(1));
}

#[test]
fn bad_input_gives_a_page_that_says_what_is_wrong() {
    let frames = sample::frames(6);
    let bytes = pcap_bytes(&frames);
    let cut = temp_file("cut.pcap", &bytes[..bytes.len() - 7]);
    let (code, page, data) = view("cut.html", &[cut.to_str().unwrap()]);
    assert_eq!(code, Some(2), "damaged: as roce analyze");
    assert!(page.contains("class=\"banner damage\""));
    assert!(page.contains("damaged capture at byte"));
    assert_eq!(numbers(&data["rows"]["n"]).len(), frames.len() - 1);

    for (name, bytes) in [("header.pcap", &bytes[..24]), ("zero.pcap", &[][..])] {
        let empty = temp_file(name, bytes);
        let (code, page, _) = view("empty.html", &[empty.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{name}");
        assert!(page.contains("no frames"), "{name}: {page}");
        assert!(page.contains("id=\"frame-details\""));
    }

    let nasty = temp_file("<b>&\"x'.pcap", &bytes);
    let (_, page, _) = view("nasty.html", &[nasty.to_str().unwrap()]);
    assert!(page.contains("&lt;b&gt;&amp;&quot;x&#39;.pcap"));
    assert!(!page.contains("<b>&"));

    // A packet comment with markup in it reaches the page as data, never as markup.
    let mut w = roce::io::pcapng::PcapngWriter::new(Vec::new(), "test").unwrap();
    w.write_frame(
        roce::time::Instant::from_nanos(1),
        &frames[0],
        Some("</script><img src=x onerror=alert(1)>"),
    )
    .unwrap();
    let commented = temp_file("comment.pcapng", &w.into_inner());
    let (_, page, data) = view("comment.html", &[commented.to_str().unwrap()]);
    assert!(!page.contains("<img") && !page.contains("</script><"));
    let strings = data["tables"]["s"].as_array().unwrap();
    let comment = data["details"][0][1].as_u64().unwrap() as usize;
    assert_eq!(strings[comment], "</script><img src=x onerror=alert(1)>");

    // A RoCEv2 packet whose IPv4 header a receiver drops is named, as roce analyze does.
    let mut bad_ip = sample::frames(11);
    let v4 = bad_ip
        .iter()
        .position(|f| f[12..14] == [0x08, 0x00])
        .expect("an IPv4 sample");
    bad_ip[v4][14 + 10] ^= 0x5a; // the header checksum
    let file = temp_file("ip.pcap", &pcap_bytes(&bad_ip));
    let (code, page, _) = view("ip.html", &[file.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        page.contains("<div class=\"banner ip-header\">1 RoCEv2 packets carry an IPv4 header"),
        "{page}"
    );
    let (_, page, _) = view("ip-ok.html", &[&pcap("rc_rnr_nak.pcap")]);
    assert!(!page.contains("banner ip-header"));

    let not = temp_file("not.pcap", b"this is not a capture file at all");
    let (code, ..) = view("not.html", &[not.to_str().unwrap()]);
    assert_eq!(code, Some(1));
}

#[test]
fn lesson_comments_and_views_from_gen() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view-gen");
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("rnr.pcapng");
    let out = roce(&["gen", "rnr", "-o", cap.to_str().unwrap(), "--view"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.join("rnr.html")).unwrap();
    assert!(
        page.contains("RNR NAK for PSN"),
        "the pcapng comments are in the page"
    );

    // gen --view reads pause quanta at the lessons' 10 Gb/s: XOFF's 65535 quanta would last
    // 3.36 ms, the XON ends the band after 150 us.
    let cap = dir.join("pfc.pcapng");
    let out = roce(&["gen", "pfc", "-o", cap.to_str().unwrap(), "--view"]);
    assert!(out.status.success());
    let page = std::fs::read_to_string(dir.join("pfc.html")).unwrap();
    let data: Value = page
        .split_once("id=\"view-data\">")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map(|(json, _)| serde_json::from_str(json).unwrap())
        .unwrap();
    let bands = data["pauses"].as_array().unwrap();
    assert_eq!(bands.len(), 1, "{bands:?}");
    let lasted = bands[0][1].as_f64().unwrap() - bands[0][0].as_f64().unwrap();
    assert!((lasted - 150.0).abs() < 1e-6, "{lasted}");
    assert_eq!(bands[0][2], 0, "priority 0");
    // XOFF and XON are rows from B's MAC, which the ladder draws with the flows to and from it.
    let strings = data["tables"]["s"].as_array().unwrap();
    let text = |v: &Value| strings[v.as_u64().unwrap() as usize].as_str().unwrap();
    let rows = &data["rows"];
    let pauses: Vec<(u64, &str, &str)> = rows["pf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let row = p[0].as_u64().unwrap() as usize;
            (
                rows["n"][row].as_u64().unwrap(),
                text(&rows["lab"][row]),
                text(&p[1]),
            )
        })
        .collect();
    assert_eq!(
        pauses,
        [
            (5, "PFC priority 0 XOFF 65535 quanta", "02:00:00:00:00:0b"),
            (8, "PFC priority 0 XON", "02:00:00:00:00:0b")
        ]
    );
    assert_eq!(
        text(&rows["fm"]["0"][1]),
        "02:00:00:00:00:0b",
        "flow 0 goes to B"
    );
}

#[test]
fn help_has_an_example() {
    let out = roce(&["view", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("data-frame"));
}

#[test]
fn pauses_in_force_are_bands_on_the_time_axis() {
    use roce::io::pcap::PcapWriter;
    use roce::time::Instant;
    use roce::wire::pause::{MacControlRepr, PauseRepr, PfcRepr};
    use roce::wire::{BthRepr, ExtHeaders, IbPacketRepr, Opcode, Psn, Qpn, RoceRepr};
    const T0: u64 = 1_700_000_000_000_000_000;
    let (x, h) = ([2, 0, 0, 0, 0, 0x0a], [2, 0, 0, 0, 0, 0x01]);
    let send = |psn: u32| {
        let ib = IbPacketRepr::new(
            BthRepr::new(Opcode(0x04), Qpn::new(0x11), Psn::new(psn)),
            ExtHeaders::default(),
            &[7; 8],
        );
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        RoceRepr::rxe(h, x, a, b, Qpn::new(0x12), ib)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let pfc = |prio: usize, q: u16| MacControlRepr::Pfc(PfcRepr::new(&[(prio, q)])).frame(x);
    let at = |ns: u64, data: Vec<u8>| (Instant::from_nanos(T0 + ns), data);
    // At 100 Gb/s 1000 quanta are 5120 ns.
    let records = vec![
        at(0, send(1)),
        at(1_000, pfc(3, 1000)), // priority 3 paused from 1 us to 6.12 us
        at(8_000, send(2)),
        at(10_000, pfc(3, 1000)),
        at(12_000, pfc(3, 0)), // XON: paused 10 us to 12 us
        at(
            20_000,
            MacControlRepr::Pause(PauseRepr { quanta: 2000 }).frame(x),
        ),
        at(40_000, send(3)),
    ];
    let mut pcap = PcapWriter::new(Vec::new()).unwrap();
    for (t, frame) in &records {
        pcap.write_frame(*t, frame).unwrap();
    }
    let cap = temp_file("pauses.pcap", &pcap.into_inner());
    let (code, page, data) = view("pauses.html", &[cap.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let bands: Vec<(f64, f64, i64)> = data["pauses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b[0].as_f64().unwrap(),
                b[1].as_f64().unwrap(),
                b[2].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bands,
        vec![(1.0, 6.12, 3), (10.0, 12.0, 3), (20.0, 30.24, -1)],
        "{page:.0}"
    );
    // The pause frames are rows of the page, explained as decode explains them.
    let kinds = data["rows"]["k"].as_array().unwrap();
    assert_eq!(kinds.iter().filter(|k| k.as_u64() == Some(2048)).count(), 4);
    // Read at 10 Gb/s the same quanta last ten times longer: the first pause is refreshed at
    // 10 us before it lapses and runs on to the XON; the PAUSE lasts 102.4 us.
    let (_, _, data) = view(
        "pauses10.html",
        &[cap.to_str().unwrap(), "--link-gbps", "10"],
    );
    let bands = data["pauses"].as_array().unwrap();
    assert_eq!(bands.len(), 2);
    assert_eq!(
        (bands[0][0].as_f64(), bands[0][1].as_f64()),
        (Some(1.0), Some(12.0))
    );
    assert_eq!(
        (bands[1][0].as_f64(), bands[1][1].as_f64()),
        (Some(20.0), Some(122.4))
    );
}

/// A READ response that brings nothing new (dropped out of order, or sent again) says so,
/// so that a learner sees why the requester goes back while data keeps coming.
#[test]
fn read_responses_without_new_data_are_tagged() {
    let cap = pcap("rc_loss_read.pcap");
    let (code, page, _) = view("loss_read.html", &[&cap]);
    assert_eq!(code, Some(0));
    assert!(page.contains("\"no new data\""), "no short tag");
    assert!(page.contains("no new data: past the PSN the requester expects"));
    let (_, page, _) = view("read.html", &[&pcap("rc_read.pcap")]);
    assert!(
        !page.contains("no new data"),
        "nothing is sent twice without loss"
    );
}
