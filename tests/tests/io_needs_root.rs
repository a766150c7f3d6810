//! Device backends on real kernel interfaces, each inside network namespaces the test creates
//! and removes. They need root and fail (never skip) without it; CI runs them explicitly:
//! `cargo test -p roce-tests --test io_needs_root -- --include-ignored --test-threads=1`.

use std::time::{Duration, Instant};

use roce::io::tap::TapDevice;
use roce::io::xdp::{XdpConfig, XdpDevice, XdpFilter, XdpMode};
use roce::io::{Built, Device, DeviceError};
use roce_tests::netns::{Netns, inside, ip};

const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x77];

/// An ARP request (RFC 826) from `sender` asking who has `target`.
fn arp_request(sender_mac: [u8; 6], sender_ip: [u8; 4], target_ip: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&sender_ip);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target_ip);
    f.resize(60, 0);
    f
}

/// Receives until `want` accepts a frame or `timeout` passes; returns the accepted frame.
fn receive_until(
    dev: &mut impl Device,
    timeout: Duration,
    want: impl Fn(&[u8]) -> bool,
) -> Option<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let mut found = None;
        while dev
            .receive(&mut |f| {
                if found.is_none() && want(f) {
                    found = Some(f.to_vec());
                }
            })
            .expect("receive")
        {}
        if found.is_some() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn is_arp_reply_from(ip: [u8; 4]) -> impl Fn(&[u8]) -> bool {
    move |f| f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2] && f[28..32] == ip
}

#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn tap_exchanges_frames_with_the_kernel_needs_root() {
    let Some(_ns) = inside() else {
        let ns = Netns::create("roce-io-tap");
        ns.rerun("tap_exchanges_frames_with_the_kernel_needs_root");
        return;
    };
    let mut tap = TapDevice::open("rtap0", Some(4200)).expect("open TAP");
    assert_eq!(tap.capabilities().mtu, 4200);
    assert!(!tap.capabilities().icrc_offload);
    assert!(tap.raw_fd().is_some());
    ip(&["addr", "add", "10.77.0.1/24", "dev", "rtap0"]);

    let request = arp_request(OUR_MAC, [10, 77, 0, 2], [10, 77, 0, 1]);
    assert!(tap.transmit(&request).unwrap());
    let reply = receive_until(
        &mut tap,
        Duration::from_secs(3),
        is_arp_reply_from([10, 77, 0, 1]),
    )
    .expect("the kernel answers our ARP request through the TAP");
    assert_eq!(reply[0..6], OUR_MAC);
    assert_eq!(reply[6..12], tap.kernel_mac().unwrap());

    let too_big = vec![0u8; 4200 + 14 + 4 + 1];
    assert!(matches!(
        tap.transmit(&too_big),
        Err(DeviceError::FrameTooLarge { .. })
    ));

    // A second open of the same TAP while it is attached is a clear error, not a hang.
    let err = TapDevice::open("rtap0", None).unwrap_err().to_string();
    assert!(err.contains("rtap0"), "{err}");
}

#[test]
fn tap_refuses_names_the_kernel_cannot_hold() {
    let err = TapDevice::open("a-name-far-too-long-for-linux", None).unwrap_err();
    assert!(err.to_string().contains("invalid interface name"), "{err}");
}

const XDP_NS_A: &str = "roce-io-xa";
const XDP_NS_B: &str = "roce-io-xb";

/// Namespaces A and B joined by veth `xa` (10.78.0.1, in A) <-> `xb` (10.78.0.2, in B); the
/// test body then runs again inside A. Returns false in the parent, true in the child.
fn in_xdp_namespaces(test: &str) -> bool {
    in_xdp_namespaces_with_mtu(test, 1500)
}

/// [`in_xdp_namespaces`] with the veth pair's MTU `mtu`.
fn in_xdp_namespaces_with_mtu(test: &str, mtu: usize) -> bool {
    if inside().is_some() {
        return true;
    }
    let a = Netns::create(XDP_NS_A);
    let b = Netns::create(XDP_NS_B);
    roce_tests::netns::veth(&a, "xa", "10.78.0.1/24", &b, "xb", "10.78.0.2/24", mtu);
    a.rerun(test);
    false
}

fn is_udp_to(port: u16) -> impl Fn(&[u8]) -> bool {
    move |f| {
        f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 17 && f[36..38] == port.to_be_bytes()
    }
}

fn xdp_receives_only_rocev2_and_passes_the_rest(mode: XdpMode, test: &str) {
    if !in_xdp_namespaces(test) {
        return;
    }
    let config = XdpConfig {
        mode,
        ..XdpConfig::default()
    };
    let mut dev = XdpDevice::open("xa", config).expect("open AF_XDP on xa");
    assert_eq!(dev.mode(), mode);
    assert_eq!(dev.capabilities().mtu, 1500);
    let kernel = std::net::UdpSocket::bind("10.78.0.1:4792").unwrap();
    kernel.set_nonblocking(true).unwrap();

    let script = "for i in $(seq 1 20); do printf roce$i > /dev/udp/10.78.0.1/4791; \
                  printf kern$i > /dev/udp/10.78.0.1/4792; done";
    roce_tests::netns::run("ip", &["netns", "exec", XDP_NS_B, "bash", "-c", script]);

    let mut roce = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while roce.len() < 20 && Instant::now() < deadline {
        let mut frames = Vec::new();
        while dev.receive(&mut |f| frames.push(f.to_vec())).unwrap() {}
        for f in frames {
            assert!(
                is_udp_to(4791)(&f),
                "only RoCEv2 reaches the socket: {f:02x?}"
            );
            roce.push(String::from_utf8_lossy(&f[42..]).into_owned());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let expected: Vec<String> = (1..=20).map(|i| format!("roce{i}")).collect();
    assert_eq!(roce, expected);

    let mut buf = [0u8; 64];
    let mut passed = 0;
    while let Ok(n) = kernel.recv(&mut buf) {
        assert!(buf[..n].starts_with(b"kern"));
        passed += 1;
    }
    assert_eq!(passed, 20, "other UDP ports still reach the kernel");
    let stats = dev.statistics().unwrap();
    assert_eq!(stats.rx_dropped, 0);
}

/// Reads a counter of `dev` in namespace `ns` from sysfs.
fn counter(ns: &str, dev: &str, name: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/{name}");
    let out = roce_tests::netns::run("ip", &["netns", "exec", ns, "cat", &path]);
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Sends `count` frames of `len` bytes through `dev` (on `xa`) to a MAC nobody has, which B's
/// kernel counts and drops; returns the packets and bytes `xb` counted meanwhile, which may
/// include a frame of A's kernel (IPv6 neighbour discovery).
fn send_to_nobody(dev: &mut XdpDevice, len: usize, count: u64) -> (u64, u64) {
    let stats = || {
        (
            counter(XDP_NS_B, "xb", "rx_packets"),
            counter(XDP_NS_B, "xb", "rx_bytes"),
        )
    };
    let before = stats();
    let mut frame = vec![0u8; len];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    frame[6..12].copy_from_slice(&dev.capabilities().mac.unwrap());
    frame[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut sent = 0;
    while sent < count {
        if dev.transmit(&frame).unwrap() {
            sent += 1;
        } else {
            dev.flush().unwrap();
        }
    }
    dev.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let after = stats();
    (after.0 - before.0, after.1 - before.1)
}

fn xdp_transmits_and_takes_every_frame(mode: XdpMode, test: &str) {
    if !in_xdp_namespaces(test) {
        return;
    }
    let config = XdpConfig {
        mode,
        filter: XdpFilter::All,
        ..XdpConfig::default()
    };
    let mut dev = XdpDevice::open("xa", config).expect("open AF_XDP on xa");
    let mac = dev.capabilities().mac.unwrap();
    let (received, _) = send_to_nobody(&mut dev, 1514, 5000);
    // The kernel of A may send a frame of its own meanwhile (IPv6 neighbour discovery).
    assert!((5000..5010).contains(&received), "{received}");

    // With every frame redirected, the kernel's ARP reply to our request comes to us.
    let request = arp_request(mac, [10, 78, 0, 1], [10, 78, 0, 2]);
    assert!(dev.transmit(&request).unwrap());
    dev.flush().unwrap();
    let reply = receive_until(
        &mut dev,
        Duration::from_secs(3),
        is_arp_reply_from([10, 78, 0, 2]),
    )
    .expect("B's ARP reply arrives through the AF_XDP socket");
    assert_eq!(reply[0..6], mac);
}

#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_generic_receives_only_rocev2_needs_root() {
    xdp_receives_only_rocev2_and_passes_the_rest(
        XdpMode::Generic,
        "xdp_generic_receives_only_rocev2_needs_root",
    );
}

#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_native_receives_only_rocev2_needs_root() {
    xdp_receives_only_rocev2_and_passes_the_rest(
        XdpMode::Native,
        "xdp_native_receives_only_rocev2_needs_root",
    );
}

#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_generic_transmits_needs_root() {
    xdp_transmits_and_takes_every_frame(XdpMode::Generic, "xdp_generic_transmits_needs_root");
}

#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_native_transmits_needs_root() {
    xdp_transmits_and_takes_every_frame(XdpMode::Native, "xdp_native_transmits_needs_root");
}

/// A link MTU above what one 4096-byte chunk holds: frames come and go as chains of
/// descriptors (AF_XDP multi-buffer), whole, so that RoCE's path MTU can be 4096.
#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_native_carries_frames_larger_than_a_chunk_needs_root() {
    let test = "xdp_native_carries_frames_larger_than_a_chunk_needs_root";
    if !in_xdp_namespaces_with_mtu(test, 4200) {
        return;
    }
    let config = XdpConfig {
        mode: XdpMode::Native,
        ..XdpConfig::default()
    };
    let mut dev = XdpDevice::open("xa", config).expect("open AF_XDP on xa");
    assert!(
        dev.multi_buffer(),
        "the kernel has XDP_USE_SG (6.6 or later)"
    );
    assert_eq!(dev.capabilities().mtu, 4200);

    // 4000 bytes of UDP payload (tr writes at most 4096 at once): one 4042-byte frame, more
    // than a chunk less its headroom (3840).
    let script = "printf '%4000s' | tr ' ' x > /dev/udp/10.78.0.1/4791";
    roce_tests::netns::run("ip", &["netns", "exec", XDP_NS_B, "bash", "-c", script]);
    let frame = receive_until(&mut dev, Duration::from_secs(3), is_udp_to(4791))
        .expect("the large datagram reaches the socket");
    assert_eq!(frame.len(), 14 + 20 + 8 + 4000);
    assert!(frame[42..].iter().all(|&b| b == b'x'), "joined in order");

    let len = 4096 + 78;
    let (packets, bytes) = send_to_nobody(&mut dev, len, 1000);
    assert!((1000..1010).contains(&packets), "{packets}");
    assert!(bytes >= 1000 * len as u64, "each frame whole: {bytes}");
}

/// Frames built straight into the UMEM (`transmit_built` lends a free transmit slot, which
/// still holds an earlier frame) leave exactly as frames copied in by `transmit`: every size
/// from the minimum to a two-chunk chain, thousands of them so that every slot is reused,
/// all arriving whole and in order at a second AF_XDP socket.
#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_native_lent_umem_sends_what_copying_sends_needs_root() {
    let test = "xdp_native_lent_umem_sends_what_copying_sends_needs_root";
    if !in_xdp_namespaces_with_mtu(test, 4200) {
        return;
    }
    // A second pair with both ends in this namespace: one process holds both sockets.
    ip(&[
        "link", "add", "xc", "mtu", "4200", "type", "veth", "peer", "name", "xd", "mtu", "4200",
    ]);
    ip(&["link", "set", "xc", "up"]);
    ip(&["link", "set", "xd", "up"]);
    let config = XdpConfig {
        mode: XdpMode::Native,
        filter: XdpFilter::All,
        ..XdpConfig::default()
    };
    let mut tx = XdpDevice::open("xc", config).expect("open AF_XDP on xc");
    let mut rx = XdpDevice::open("xd", config).expect("open AF_XDP on xd");
    let (src, dst) = (
        tx.capabilities().mac.unwrap(),
        rx.capabilities().mac.unwrap(),
    );
    let sizes = [60, 1514, 4096, 4097, 4174, 122, 4218];
    let frame = |i: usize| {
        let mut f = vec![(i * 7) as u8; sizes[i % sizes.len()]];
        f[..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&src);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        f[14..22].copy_from_slice(&(i as u64).to_be_bytes());
        f
    };
    let mut got = Vec::new();
    let drain = |rx: &mut XdpDevice, got: &mut Vec<Vec<u8>>| {
        while rx
            .receive(&mut |f| {
                if f[12..14] == [0x88, 0xb5] {
                    got.push(f.to_vec());
                }
            })
            .unwrap()
        {}
    };
    // The endpoint's frame buffer: a little over 4 KiB, lent as one two-chunk slot.
    let mut scratch = vec![0u8; 4218 + 4];
    let count = 6000;
    for i in 0..count {
        let f = frame(i);
        loop {
            let built = if i % 3 == 0 {
                let ok = tx.transmit(&f).unwrap();
                if ok {
                    Built::Sent
                } else {
                    Built::Held(f.len())
                }
            } else {
                tx.transmit_built(&mut scratch, &mut |buf| {
                    buf[..f.len()].copy_from_slice(&f);
                    Some(f.len())
                })
                .unwrap()
            };
            match built {
                Built::Sent => break,
                Built::Held(len) => assert_eq!(&scratch[..len], &f[..]),
                Built::Nothing => unreachable!("the builder always has a frame"),
            }
            tx.flush().unwrap();
            drain(&mut rx, &mut got);
        }
        if i % 16 == 15 {
            tx.flush().unwrap();
            drain(&mut rx, &mut got);
        }
    }
    tx.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.len() < count && Instant::now() < deadline {
        drain(&mut rx, &mut got);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got.len(), count, "{:?}", rx.statistics().unwrap());
    for (i, f) in got.iter().enumerate() {
        assert!(*f == frame(i), "frame {i} of {} bytes differs", f.len());
    }
    assert_eq!(
        tx.transmit_built(&mut scratch, &mut |_| None).unwrap(),
        Built::Nothing
    );
}

/// A queue held by a live AF_XDP socket is refused with one clear error; once that socket is
/// closed the queue can be bound again at once, although the kernel frees the socket a moment
/// later (the bind waits out the brief EBUSY).
#[test]
#[ignore = "needs root; .ci/run runs it with --include-ignored"]
fn xdp_queue_busy_then_free_again_needs_root() {
    let test = "xdp_queue_busy_then_free_again_needs_root";
    if !in_xdp_namespaces(test) {
        return;
    }
    let config = XdpConfig {
        mode: XdpMode::Native,
        ..XdpConfig::default()
    };
    let first = XdpDevice::open("xa", config).expect("open AF_XDP on xa");
    let err = XdpDevice::open("xa", config).expect_err("the queue is taken");
    assert!(err.to_string().contains("the queue is busy"), "{err}");
    drop(first);
    for round in 0..3 {
        let dev = XdpDevice::open("xa", config);
        assert!(dev.is_ok(), "round {round}: {:?}", dev.err());
    }
}
