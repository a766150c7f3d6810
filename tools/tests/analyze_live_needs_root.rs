//! `roce analyze --live` on a real interface: every capture in pcaps/ is replayed with
//! tcpreplay onto one end of a veth pair inside a network namespace this test creates, while
//! `roce analyze --live` listens on the other end; the live final report must equal the
//! offline report of the same file. Needs root and tcpreplay (Debian package `tcpreplay`)
//! and fails, never skips, without them; CI runs it explicitly:
//! `cargo test -p roce-tools --locked --test analyze_live_needs_root -- --include-ignored`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roce_tests::netns::{Netns, run};
use serde_json::Value;

mod common;
use common::roce_json;

/// Fixed names (CI runs one of these at a time); `i16c` marks them as this test's.
const NS: &str = "roce-i16c-live";
const SENDER: &str = "i16c-live0";
const LISTENER: &str = "i16c-live1";

/// Removes what depends on when frames were captured rather than what they were: times
/// (`*_us`, `start_time`), goodput per time bucket and the rate changes found in packet
/// spacing. tcpreplay sends at top speed and the kernel stamps frames on arrival, so these
/// differ from the file's by design; everything else (frames, flows, packets, bytes, opcodes,
/// PSNs, retransmissions, NAKs and their causes, RNR NAKs, CNPs, CE marks, messages, episodes'
/// packet counts, CM connections) comes from the frames alone and must be identical.
fn strip_timing(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| {
                !(k.ends_with("_us")
                    || k.ends_with("_ns")
                    || k == "start_time"
                    || k == "goodput_bytes"
                    || k == "rate_changes"
                    || k == "live")
            });
            map.values_mut().for_each(strip_timing);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_timing),
        _ => {}
    }
}

/// `roce analyze --live --json` on the listening end, a JSON line every 50 ms.
fn live_json() -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", NS, env!("CARGO_BIN_EXE_roce")])
        .args([
            "analyze",
            "--live",
            LISTENER,
            "--interval",
            "0.05",
            "--json",
        ]);
    cmd
}

/// The JSON lines of a running `roce analyze --live --json`, as they come.
struct Listener {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Listener {
    fn start() -> Listener {
        let mut child = live_json()
            .stdout(Stdio::piped())
            .spawn()
            .expect("start roce analyze --live");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("read roce's stdout");
                let doc = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                if tx.send(doc).is_err() {
                    break;
                }
            }
        });
        Listener { child, lines }
    }

    fn next(&self, within: Duration) -> Option<Value> {
        self.lines.recv_timeout(within).ok()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replay_and_compare(file: &Path) {
    let name = file.display().to_string();
    let mut offline = roce_json(&["analyze", "--json", &name]);
    let frames = offline["packets"].as_u64().unwrap();

    let mut listener = Listener::start();
    // The first interval line says the ring is open and bound: frames sent now are seen.
    let first = listener
        .next(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("{name}: roce analyze --live printed no interval report"));
    assert_eq!(first["live"]["final"], false, "{name}: {first}");
    assert_eq!(
        first["packets"], 0,
        "{name}: frames before the replay: {first}"
    );

    run(
        "ip",
        &[
            "netns",
            "exec",
            NS,
            "tcpreplay",
            "--quiet",
            "--topspeed",
            "-i",
            SENDER,
            &name,
        ],
    );
    // Interval reports until every frame is in, then a clean stop by SIGTERM.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let line = listener
            .next(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{name}: roce analyze --live stopped reporting"));
        assert_eq!(line["live"]["final"], false, "{name}: {line}");
        let seen = line["packets"].as_u64().unwrap();
        assert!(seen <= frames, "{name}: {seen} frames seen, {frames} sent");
        if seen == frames {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {seen} of {frames} frames"
        );
    }
    run("kill", &["-TERM", &listener.child.id().to_string()]);
    let mut last = None;
    while let Some(line) = listener.next(Duration::from_secs(5)) {
        last = Some(line);
    }
    let status = listener.child.wait().expect("roce exits");
    assert!(
        status.success(),
        "{name}: roce analyze --live exited {status}"
    );
    let mut live = last.unwrap_or_else(|| panic!("{name}: no final report"));
    assert_eq!(live["live"]["final"], true, "{name}: {live}");
    assert_eq!(live["live"]["kernel_dropped"], 0, "{name}: {live}");
    assert_eq!(live["live"]["kernel_frames"], frames, "{name}: {live}");

    strip_timing(&mut offline);
    strip_timing(&mut live);
    assert_eq!(
        live,
        offline,
        "{name}: the live report differs from the offline one\nlive:    {}\noffline: {}",
        serde_json::to_string(&live).unwrap(),
        serde_json::to_string(&offline).unwrap()
    );
}

#[test]
#[ignore = "needs root and tcpreplay; .ci/run runs it with --include-ignored"]
fn live_analysis_of_replayed_captures_matches_offline_needs_root() {
    let version = Command::new("tcpreplay").arg("--version").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "tcpreplay is missing: apt-get install tcpreplay (this test must not be skipped)"
    );
    let ns = Netns::create(NS);
    // 9000 bytes: the captures' largest frames (4096-byte RoCE MTU) must pass the veth.
    ns.ip(&[
        "link", "add", SENDER, "mtu", "9000", "type", "veth", "peer", "name", LISTENER, "mtu",
        "9000",
    ]);
    for dev in [SENDER, LISTENER] {
        // No IPv6: the kernel would send router solicitations of its own onto the link.
        run(
            "ip",
            &[
                "netns",
                "exec",
                NS,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ],
        );
        ns.ip(&["link", "set", dev, "up"]);
    }

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
    let captures = roce_tests::captures_in(&dir);
    assert!(
        captures.len() >= 20,
        "pcaps/ holds {} captures",
        captures.len()
    );
    let mut replayed = 0;
    for file in &captures {
        // An interface carries Ethernet: captures of another link type (Linux cooked, raw
        // IP) cannot be put on a veth as they are, and are named here, not replayed.
        let header = std::fs::read(file).expect("read capture");
        let ethernet = header.len() >= 24
            && (header.starts_with(&[0xd4, 0xc3, 0xb2, 0xa1])
                || header.starts_with(&[0x4d, 0x3c, 0xb2, 0xa1]))
            && header[20..24] == [1, 0, 0, 0];
        if !ethernet {
            println!(
                "not replayed (not a little-endian Ethernet pcap): {}",
                file.display()
            );
            continue;
        }
        replay_and_compare(file);
        replayed += 1;
    }
    println!(
        "{replayed} of {} captures replayed and matched",
        captures.len()
    );
    assert!(replayed >= 20, "only {replayed} captures replayed");

    // A reader that leaves (`| head -n 1`) ends the watch quietly: exit 0, nothing on
    // stderr (it exited 1 with "Broken pipe").
    let mut child = live_json()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start roce analyze --live");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .expect("read the first JSON line");
    assert!(first.starts_with('{'), "{first}");
    let started = Instant::now();
    while child.try_wait().expect("wait for roce").is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("roce analyze --live went on for 10 s after its reader left");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("roce exits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");

    // The interface going away ends the capture with the report so far, then an error.
    let mut listener = Listener::start();
    listener
        .next(Duration::from_secs(10))
        .expect("roce analyze --live printed no interval report");
    ns.ip(&["link", "del", SENDER]);
    let mut last = None;
    while let Some(line) = listener.next(Duration::from_secs(5)) {
        last = Some(line);
    }
    let last = last.expect("a final report after the interface went away");
    assert_eq!(last["live"]["final"], true, "{last}");
    let status = listener.child.wait().expect("roce exits");
    assert_eq!(status.code(), Some(1), "the interface went away: {status}");
    drop(ns);
}
