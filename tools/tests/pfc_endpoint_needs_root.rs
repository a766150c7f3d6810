//! The endpoint on a lossless class, on a real wire: two `roce pingpong`s over TAP devices
//! joined by a Linux bridge in a network namespace this test creates, both with `--vlan 5
//! --pcp 3 --tclass 106`. An AF_PACKET capture on the client's TAP (the kernel's side: what
//! the endpoint put on the wire) checks every RoCE frame carries VLAN 5, priority 3, DSCP 26
//! and ECT(0); a PFC frame pausing priority 3 for 0xffff quanta, written onto the client's
//! link with tcpreplay, holds the client's transmission for the 335.5 ms those quanta last at
//! its --line-gbps 0.1, and the pingpong then completes. Needs root and tcpreplay and fails,
//! never skips, without them; CI runs it explicitly:
//! `cargo test -p roce-tools --locked --test pfc_endpoint_needs_root -- --include-ignored`.
//! A second pair over its own bridge checks CNPs on their own class: a client marking its data
//! CE (`--tclass 107`) draws CNPs from a `--dcqcn mlx5 --cnp-dscp 48 --cnp-pcp 6` server, which
//! go out with priority 6 and DSCP 48 while its data keep priority 3 and DSCP 26.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use roce::capture::live::LiveCapture;
use roce::wire::encap::VlanTag;
use roce::wire::pause::{MacControlRepr, PfcRepr, quanta_to_ps};
use roce::wire::{Ecn, Opcode};
use roce_tests::netns::{Netns, inside, run};

/// Fixed names (CI runs one of these at a time); `i16c` marks them as this test's.
const NS: &str = "roce-i16c-pfc";
const BRIDGE: &str = "i16c-pfcbr";
const SERVER_TAP: &str = "i16c-pfc0";
const CLIENT_TAP: &str = "i16c-pfc1";
/// The client's MAC: `02:00` and its IPv4 address (the endpoint's choice behind a TAP).
const CLIENT_MAC: [u8; 6] = [0x02, 0x00, 10, 99, 0, 2];
const PAUSE_QUANTA: u16 = 0xffff;
const LINE_BITS_PER_SEC: u64 = 100_000_000;

/// The class flags both pingpongs of the PFC test run with.
const CLASS: [&str; 8] = [
    "--vlan", "5", "--pcp", "3", "--tclass", "106", "-n", "20000",
];

/// A running `roce pingpong`, killed if the test ends before it does.
struct Endpoint(Child);

impl Endpoint {
    fn start(args: &[&str]) -> Endpoint {
        let child = Command::new(env!("CARGO_BIN_EXE_roce"))
            .arg("pingpong")
            .args(args)
            .args(["--timeout", "60"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start roce pingpong");
        Endpoint(child)
    }

    fn finish(mut self, who: &str) -> String {
        let child = std::mem::replace(
            &mut self.0,
            Command::new("true").spawn().expect("spawn true"),
        );
        let out = child.wait_with_output().expect("wait for roce pingpong");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{who}: roce pingpong failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A network namespace `name` holding `taps` joined by `bridge`, all up; the test body runs
/// again inside it (`Netns::rerun`), where the TAPs are.
fn bridged_taps(name: &str, bridge: &str, taps: [&str; 2]) -> Netns {
    let ns = Netns::create(name);
    ns.ip(&["link", "add", bridge, "type", "bridge"]);
    for tap in taps {
        ns.ip(&["tuntap", "add", "mode", "tap", tap]);
        ns.ip(&["link", "set", tap, "master", bridge]);
        ns.ip(&["link", "set", tap, "up"]);
    }
    ns.ip(&["link", "set", bridge, "up"]);
    ns
}

/// A pcap holding one Ethernet frame, for tcpreplay.
fn pcap_of(frame: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("pfc-endpoint-xoff.pcap");
    std::fs::write(&path, roce_tests::pcap_bytes(&[frame.to_vec()])).expect("write pcap");
    path
}

/// What the capture kept of a frame.
struct Seen {
    ts_ns: u64,
    src: [u8; 6],
    pfc: bool,
    /// For RoCE frames: the tag, DSCP and ECN.
    roce: Option<(Option<VlanTag>, u8, Ecn)>,
    /// A CNP, and whether its ICRC holds.
    cnp: Option<bool>,
}

const TEST: &str = "tagged_dscp_frames_and_a_pfc_pause_holding_the_sender_needs_root";

#[test]
#[ignore = "needs root and tcpreplay; .ci/run runs it with --include-ignored"]
fn tagged_dscp_frames_and_a_pfc_pause_holding_the_sender_needs_root() {
    let Some(_) = inside() else {
        let version = Command::new("tcpreplay").arg("--version").output();
        assert!(
            version.is_ok_and(|o| o.status.success()),
            "tcpreplay is missing: apt-get install tcpreplay (this test must not be skipped)"
        );
        bridged_taps(NS, BRIDGE, [SERVER_TAP, CLIENT_TAP]).rerun(TEST);
        return;
    };

    let stop = Arc::new(AtomicBool::new(false));
    let from_client = Arc::new(AtomicUsize::new(0));
    let capture = capture(CLIENT_TAP, CLIENT_MAC, stop.clone(), from_client.clone());

    let server_tap = format!("tap:{SERVER_TAP}");
    let server = Endpoint::start(
        &[
            &["--iface", &server_tap, "--ip", "10.99.0.1/24"],
            &CLASS[..],
        ]
        .concat(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let client_tap = format!("tap:{CLIENT_TAP}");
    let client = Endpoint::start(
        &[
            &["127.0.0.1", "--iface", &client_tap, "--ip", "10.99.0.2/24"][..],
            &["--line-gbps", "0.1"][..],
            &CLASS[..],
        ]
        .concat(),
    );
    // Once RoCE flows, the client's link partner pauses priority 3.
    let started = Instant::now();
    while from_client.load(Ordering::Relaxed) < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no RoCE traffic from the client"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let xoff = MacControlRepr::Pfc(PfcRepr::new(&[(3, PAUSE_QUANTA)])).frame([2, 0, 0, 0, 0, 0xfe]);
    let file = pcap_of(&xoff);
    run(
        "tcpreplay",
        &["--quiet", "-i", CLIENT_TAP, file.to_str().unwrap()],
    );
    let client_out = client.finish("client");
    let server_out = server.finish("server");
    assert!(client_out.contains("20000 iters"), "{client_out}");
    assert!(server_out.contains("20000 iters"), "{server_out}");
    stop.store(true, Ordering::Relaxed);
    let seen = capture.join().expect("capture thread");

    // Every RoCE frame, both ways, as the flags asked: VLAN 5, PCP 3, DSCP 26, ECT(0).
    let roce: Vec<_> = seen.iter().filter_map(|s| s.roce).collect();
    assert!(roce.len() > 40_000, "{} RoCE frames captured", roce.len());
    let want = VlanTag {
        pcp: 3,
        dei: false,
        vid: 5,
    };
    for (tag, dscp, ecn) in &roce {
        assert_eq!((*tag, *dscp, *ecn), (Some(want), 26, Ecn::Ect0));
    }

    // The pause: the client sent nothing from the XOFF's arrival for the time its quanta
    // last at 100 Mb/s (335.5 ms); the capture's times are the kernel's. A frame already on
    // its way may follow the XOFF by a moment, so the silence is looked for around it.
    let pause_ns = quanta_to_ps(PAUSE_QUANTA, LINE_BITS_PER_SEC) / 1000;
    let xoff_at = seen
        .iter()
        .find(|s| s.pfc)
        .map(|s| s.ts_ns)
        .expect("the PFC frame is in the capture");
    let client_ts: Vec<u64> = seen
        .iter()
        .filter(|s| s.src == CLIENT_MAC && s.roce.is_some())
        .map(|s| s.ts_ns)
        .collect();
    let silence = client_ts
        .windows(2)
        .filter(|w| w[1] > xoff_at && w[0] <= xoff_at + 50_000_000)
        .map(|w| w[1] - w[0])
        .max()
        .expect("client frames after the XOFF");
    println!(
        "client silent {} us after the XOFF (pause {} us)",
        silence / 1000,
        pause_ns / 1000
    );
    assert!(
        silence >= pause_ns - 5_000_000,
        "the client's longest silence after the XOFF was {} us, the pause {} us",
        silence / 1000,
        pause_ns / 1000
    );
}

/// Captures on `tap` (the kernel's side: both directions of its endpoint's link) until
/// `stop`, counting the RoCE frames from `mac` as they come.
fn capture(
    tap: &str,
    mac: [u8; 6],
    stop: Arc<AtomicBool>,
    from_client: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<Seen>> {
    let mut live = LiveCapture::open(tap).expect("capture on the endpoint's TAP");
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut keep = |f: &roce::capture::Frame<'_>| {
            let s = seen_of(f);
            if s.src == mac && s.roce.is_some() {
                from_client.fetch_add(1, Ordering::Relaxed);
            }
            seen.push(s);
        };
        while !stop.load(Ordering::Relaxed) {
            live.next_block(Duration::from_millis(50), &mut keep)
                .expect("capture");
        }
        live.drain(&mut keep).expect("capture");
        let counts = live.kernel_counts().expect("kernel counts");
        assert_eq!(counts.dropped, 0, "the capture missed frames");
        seen
    })
}

fn seen_of(f: &roce::capture::Frame<'_>) -> Seen {
    let d = f.data;
    let mut src = [0; 6];
    if d.len() >= 12 {
        src.copy_from_slice(&d[6..12]);
    }
    Seen {
        ts_ns: f.timestamp_ns,
        src,
        pfc: matches!(
            roce::io::pause::mac_control(d),
            Some(MacControlRepr::Pfc(_))
        ),
        roce: f
            .roce()
            .ok()
            .map(|p| (p.eth().and_then(|e| e.vlan), p.ip().dscp(), p.ecn())),
        cnp: f
            .roce()
            .ok()
            .filter(|p| p.opcode() == Opcode::CNP)
            .map(|p| p.icrc_ok()),
    }
}

const CNP_TEST: &str = "cnps_ride_their_own_class_on_the_wire_needs_root";
/// This test's names: `cnp16` marks them.
const CNP_NS: &str = "roce-cnp16";
const CNP_BRIDGE: &str = "cnp16-br";
const CNP_SERVER_TAP: &str = "cnp16-tap0";
const CNP_CLIENT_TAP: &str = "cnp16-tap1";
/// The server's MAC: `02:00` and its IPv4 address.
const CNP_SERVER_MAC: [u8; 6] = [0x02, 0x00, 10, 98, 0, 1];
const CNP_CLIENT_MAC: [u8; 6] = [0x02, 0x00, 10, 98, 0, 2];

/// `--cnp-dscp 48 --cnp-pcp 6`, as mlx5 sends CNPs, on a real wire: every CNP the server
/// answers the client's CE-marked data with carries VLAN 5 priority 6, DSCP 48, Not-ECT and a
/// valid ICRC; the server's data keep priority 3, DSCP 26 and ECT(0).
#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn cnps_ride_their_own_class_on_the_wire_needs_root() {
    let Some(_) = inside() else {
        bridged_taps(CNP_NS, CNP_BRIDGE, [CNP_SERVER_TAP, CNP_CLIENT_TAP]).rerun(CNP_TEST);
        return;
    };

    let stop = Arc::new(AtomicBool::new(false));
    let from_server = Arc::new(AtomicUsize::new(0));
    let capture = capture(CNP_SERVER_TAP, CNP_SERVER_MAC, stop.clone(), from_server);
    let class = ["--vlan", "5", "--pcp", "3", "-n", "500"];
    let server_tap = format!("tap:{CNP_SERVER_TAP}");
    let server = Endpoint::start(
        &[
            &[
                "--iface",
                &server_tap,
                "--ip",
                "10.98.0.1/24",
                "--tclass",
                "104",
            ],
            &["--dcqcn", "mlx5", "--cnp-dscp", "48", "--cnp-pcp", "6"],
            &class[..],
        ]
        .concat(),
    );
    std::thread::sleep(Duration::from_millis(500));
    // Its traffic class byte 107: DSCP 26 and ECN CE, as a congested switch would leave it.
    let client_tap = format!("tap:{CNP_CLIENT_TAP}");
    let client = Endpoint::start(
        &[
            &["127.0.0.1", "--iface", &client_tap, "--ip", "10.98.0.2/24"][..],
            &["--tclass", "107"][..],
            &class[..],
        ]
        .concat(),
    );
    assert!(client.finish("client").contains("500 iters"));
    assert!(server.finish("server").contains("500 iters"));
    stop.store(true, Ordering::Relaxed);
    let seen = capture.join().expect("capture thread");

    let roce = |mac| {
        seen.iter()
            .filter(move |s| s.src == mac)
            .filter_map(|s| s.roce.map(|r| (r, s.cnp)))
    };
    let tag = |pcp| {
        Some(VlanTag {
            pcp,
            dei: false,
            vid: 5,
        })
    };
    let mut cnps = 0;
    for (class, cnp) in roce(CNP_SERVER_MAC) {
        match cnp {
            Some(icrc_ok) => {
                assert!(icrc_ok, "a CNP with a bad ICRC");
                assert_eq!(class, (tag(6), 48, Ecn::NotEct), "a CNP");
                cnps += 1;
            }
            None => assert_eq!(class, (tag(3), 26, Ecn::Ect0), "the server's data"),
        }
    }
    println!("{cnps} CNPs from the server");
    assert!(cnps > 0, "the server sent no CNP for the marked traffic");
    let client: Vec<_> = roce(CNP_CLIENT_MAC).collect();
    assert!(
        client.len() >= 500,
        "{} frames from the client",
        client.len()
    );
    for (class, cnp) in client {
        assert_eq!(
            (class, cnp),
            ((tag(3), 26, Ecn::Ce), None),
            "the client's data"
        );
    }
}

const XDP_TEST: &str = "xdp_steers_tagged_rocev2_and_pause_frames_to_the_socket_needs_root";
const XDP_NS: &str = "roce-i16c-xdp";

/// The AF_XDP program (generic mode, on a veth) hands the socket RoCEv2 with one 802.1Q tag
/// and PFC frames, which the endpoint needs for `--vlan` and for honouring pauses, and still
/// passes a tagged frame to another UDP port to the kernel.
#[test]
#[ignore = "needs root and tcpreplay; .ci/run runs it with --include-ignored"]
fn xdp_steers_tagged_rocev2_and_pause_frames_to_the_socket_needs_root() {
    use roce::io::Device;
    use roce::io::xdp::{XdpConfig, XdpDevice, XdpMode};

    let Some(_) = inside() else {
        let ns = Netns::create(XDP_NS);
        ns.ip(&[
            "link", "add", "i16c-xa", "type", "veth", "peer", "name", "i16c-xb",
        ]);
        for dev in ["i16c-xa", "i16c-xb"] {
            ns.ip(&["link", "set", dev, "up"]);
        }
        ns.rerun(XDP_TEST);
        return;
    };
    let config = XdpConfig {
        mode: XdpMode::Generic,
        ..XdpConfig::default()
    };
    let mut dev = XdpDevice::open("i16c-xa", config).expect("open AF_XDP on i16c-xa");
    let ip = |s: &str| s.parse().unwrap();
    let roce = roce::wire::sample::rc_send_only(ip("10.0.0.2"), ip("10.0.0.1"), 32).unwrap();
    let tag = VlanTag {
        pcp: 3,
        dei: false,
        vid: 5,
    };
    let mut tagged_roce = Vec::new();
    tag.tag(&roce, &mut tagged_roce);
    // The same frame to UDP port 4792: not RoCEv2, the kernel's.
    let mut other = roce.clone();
    other[36..38].copy_from_slice(&4792u16.to_be_bytes());
    let mut tagged_other = Vec::new();
    tag.tag(&other, &mut tagged_other);
    let pfc = MacControlRepr::Pfc(PfcRepr::new(&[(3, 100)])).frame([2, 0, 0, 0, 0, 0xfe]);
    let frames = vec![tagged_roce.clone(), tagged_other, pfc.clone()];
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("xdp-steering.pcap");
    std::fs::write(&file, roce_tests::pcap_bytes(&frames)).expect("write pcap");
    run(
        "tcpreplay",
        &["--quiet", "-i", "i16c-xb", file.to_str().unwrap()],
    );
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < 2 && Instant::now() < deadline {
        while dev.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    while dev.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
    assert_eq!(got, vec![tagged_roce, pfc]);
}
