//! `roce pingpong` and `roce perf` on bad input: a device that does not exist, no
//! privileges, a peer whose out-of-band message is garbage. Each is one line on stderr
//! starting `roce:` and exit status 1, never a panic. (Interop with rdma_rxe itself runs in
//! tests/interop/run.sh, which needs the QEMU lab.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

mod common;
use common::roce;

/// The one stderr line of a failed run, checked for the things every error line has.
fn one_error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("roce: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    lines[0].to_owned()
}

/// An empty pcap (no frames): a device that needs no privileges. Each caller names its own
/// file: the tests run at once, and one rewriting a file another is opening breaks both.
fn empty_capture(name: &str) -> String {
    // Magic, version 2.4 (two u16s), zone, sigfigs, snap length, link type Ethernet.
    let mut header = Vec::new();
    for word in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    let path = common::temp_file_in("endpoint-tests", &format!("{name}.pcap"), &header);
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_device_that_does_not_exist_is_one_line() {
    let out = roce(&["pingpong", "--iface", "xdp:nosuch0", "--ip", "10.9.0.1/24"]);
    assert!(one_error_line(&out).contains("xdp:nosuch0: no such network interface"));
    let out = roce(&[
        "perf",
        "write",
        "--iface",
        "pcap:/nonexistent/in.pcap",
        "--ip",
        "10.9.0.1/24",
    ]);
    assert!(one_error_line(&out).contains("pcap:/nonexistent/in.pcap"));
}

#[test]
fn a_bad_dcqcn_preset_is_one_line() {
    let pingpong = |extra: &[&str]| {
        let base = ["pingpong", "--iface", "pcap:/x.pcap", "--ip", "10.9.0.1/24"];
        one_error_line(&roce(&[&base[..], extra].concat()))
    };
    // Checked before any device is opened: the missing capture is never mentioned.
    assert!(pingpong(&["--dcqcn", "fast"]).contains("--dcqcn must be paper, mlx5 or off"));
    assert!(pingpong(&["--dcqcn", "paper", "--line-gbps=0"]).contains("--line-gbps"));
}

#[test]
fn bad_class_flags_are_one_line() {
    let pingpong = |extra: &[&str]| {
        let base = ["pingpong", "--iface", "pcap:/x.pcap", "--ip", "10.9.0.1/24"];
        roce(&[&base[..], extra].concat())
    };
    for (flag, value, says) in [
        ("--pcp", "8", "0..=7"),
        ("--vlan", "4095", "0..=4094"),
        ("--tclass", "256", "0..=255"),
        ("--cnp-dscp", "64", "0..=63"),
        ("--cnp-pcp", "8", "0..=7"),
    ] {
        let out = pingpong(&[flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains(says), "{err}");
    }
    // The pause quanta's link speed is checked before any device is opened.
    let out = pingpong(&["--line-gbps", "0"]);
    assert!(one_error_line(&out).contains("--line-gbps must be above 0"));
}

#[test]
fn perftest_flag_combinations_perftest_refuses_are_one_line() {
    let run = |extra: &[&str]| {
        let base = ["perf", "--iface", "pcap:/x.pcap", "--ip", "10.9.0.1/24"];
        roce(&[&base[..], extra].concat())
    };
    let perf = |extra: &[&str]| one_error_line(&run(extra));
    // Checked before any device is opened: the missing capture is never mentioned.
    assert!(perf(&["write", "-A", "CMP_AND_SWAP"]).contains("atomic test only"));
    assert!(perf(&["atomic", "-a"]).contains("cannot be changed for atomic"));
    assert!(perf(&["write", "-a", "-D", "5"]).contains("all sizes"));
    assert!(perf(&["send", "-s", "16777216"]).contains("above 8388608"));
    assert!(perf(&["write", "--lat", "-a", "-D", "3"]).contains("all sizes"));
    assert!(perf(&["write", "--lat", "-b"]).contains("-b"));
    // Refused by clap (usage error, exit 2) with `says` in its message.
    let usage = |extra: &[&str], says: &str| {
        let out = run(extra);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2) && said.contains(says),
            "{said}"
        );
    };
    // perftest's -T is rdma_cm's type of service: without -R it means nothing.
    usage(&["write", "-T", "104", "10.9.0.2"], "--rdma_cm");
    // -e sleeps on completions and --busy-poll never sleeps: refused together, as for
    // pingpong.
    usage(&["send", "-e", "--busy-poll"], "'--busy-poll'");
}

#[test]
fn without_privileges_tap_and_xdp_say_what_they_need() {
    // As root (CI), run the command as nobody; otherwise we already are unprivileged.
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    for iface in ["tap:roce-np0", "xdp:lo"] {
        let args = ["pingpong", "--iface", iface, "--ip", "10.9.0.1/24"];
        let out = if root {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_roce"))
                .args(args)
                .output()
                .expect("setpriv (util-linux) runs")
        } else {
            roce(&args)
        };
        let line = one_error_line(&out);
        assert!(line.contains("permission denied (needs root"), "{line}");
    }
}

/// Runs `roce ARGS 127.0.0.1 -p PORT` against a peer that answers the first out-of-band
/// message with `reply`, and returns roce's error line.
fn against_a_garbage_peer(args: &[&str], reply: &'static [u8]) -> String {
    one_error_line(&run_against_a_garbage_peer(args, reply))
}

fn run_against_a_garbage_peer(args: &[&str], reply: &'static [u8]) -> Output {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let peer = thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = conn.read(&mut buf);
        let _ = conn.write_all(reply);
    });
    let capture = empty_capture(&args.join("-"));
    let iface = format!("pcap:{capture}");
    let common = [
        "--iface",
        &iface,
        "--ip",
        "127.0.0.2/8",
        "-p",
        &port,
        "127.0.0.1",
    ];
    let out = roce(&[args, &common[..]].concat());
    peer.join().unwrap();
    out
}

#[test]
fn a_malformed_out_of_band_message_is_one_line() {
    let garbage = b"this is not a pingpong message at all, not even close....\n";
    let line = against_a_garbage_peer(&["pingpong"], garbage);
    assert!(
        line.contains("peer message is not LLLL:QQQQQQ:PPPPPP:GID"),
        "{line}"
    );
    let line = against_a_garbage_peer(&["perf", "write"], garbage);
    assert!(line.contains("out-of-band exchange"), "{line}");
    let line = against_a_garbage_peer(&["perf", "send"], b"5.60\0");
    assert!(line.contains("out-of-band exchange"), "{line}");
}

#[test]
fn stats_come_before_the_error_on_stderr() {
    let out = run_against_a_garbage_peer(&["pingpong", "--stats"], b"garbage\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("roce: stats: frames received 0, sent 0;")
            && lines[0].ends_with("dropped: none"),
        "{stderr}"
    );
    assert!(lines[1].contains("out-of-band exchange"), "{stderr}");
}

/// rdma_cm's programs: their bounds, `perf -R`'s refusals and a silent peer (a capture with no
/// frames answers nothing) are one line each.
#[test]
fn rdma_cm_programs_refuse_in_one_line() {
    let cap = empty_capture("rdma-cm");
    let dev = ["--iface", &format!("pcap:{cap}"), "--ip", "10.9.0.1/24"];
    let run = |args: &[&str]| one_error_line(&roce(&[args, &dev[..]].concat()));
    assert!(run(&["ucmatose", "-c", "0"]).contains("connections (-c) must be 1..=1024"));
    assert!(run(&["udaddy", "-s", "10.9.0.2", "-C", "70000"]).contains("(-C) must be at most"));
    assert!(run(&["udaddy", "-S", "5000", "-s", "10.9.0.2"]).contains("larger than active mtu"));
    assert!(run(&["perf", "write", "-R", "peer.example"]).contains("IP address"));
    // Nothing answers: the REQ's retries end in one line (a capture replays no REP).
    let line = run(&["ucmatose", "-s", "10.9.0.2", "--timeout", "1"]);
    assert!(line.starts_with("roce: ucmatose: "), "{line}");
}
