//! Device backends on real kernel interfaces, each inside network namespaces the test creates
//! and removes. They need root and fail (never skip) without it; CI runs them explicitly:
//! `cargo test -p roce-tests --test io_needs_root -- --include-ignored --test-threads=1`.

use std::time::{Duration, Instant};

use roce::io::tap::TapDevice;
use roce::io::{Device, DeviceError};
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
