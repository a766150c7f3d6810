//! The bodies of the endpoint's fuzz targets (`fuzz/fuzz_targets/oob.rs`, `neighbours.rs`);
//! the property tests below run them on random bytes.
//!
//! - [`oob`]: every out-of-band message parser (ibv_*_pingpong's address, perftest's
//!   version, system data, MTU, keys in both forms and results): no panic, and whatever
//!   parses re-emits to bytes that parse to the same value.
//! - [`neighbours`]: a host fed ARP and neighbour discovery frames (raw, or built around its
//!   own addresses so that the fuzzer reaches the cache quickly), with resolutions started
//!   and timers run in between: no panic, and what the host holds stays bounded (addresses in
//!   the neighbour cache, frames waiting) whatever arrives.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::host::{Host, HostConfig};
use super::neighbor::NeighbourConfig;
use super::oob::perftest::{BwReport, IbMtu, KeyForm, Keys, SysData, parse_version};
use super::oob::pingpong::Dest;
use super::resolve;
use crate::time::Instant;

/// Runs every out-of-band parser on `data`.
pub fn oob(data: &[u8]) {
    if let Ok(d) = Dest::parse(data) {
        assert_eq!(Dest::parse(&d.to_message()), Ok(d), "address round trip");
    }
    for form in [KeyForm::WithoutGid, KeyForm::WithGid] {
        if let Ok(k) = Keys::parse(data, form) {
            let again = Keys::parse(&k.to_message(), form);
            assert_eq!(again, Ok(k), "keys round trip");
        }
    }
    let _ = parse_version(data);
    if let Ok(mtu) = IbMtu::parse(data) {
        assert_eq!(IbMtu::parse(&mtu.to_message()), Ok(mtu));
    }
    let word = |at: usize| -> [u8; 4] {
        let mut w = [0u8; 4];
        for (i, b) in w.iter_mut().enumerate() {
            *b = data.get(at + i).copied().unwrap_or(0);
        }
        w
    };
    if let Ok(sys) = SysData::from_messages(word(0), word(4)) {
        let [a, b] = sys.to_messages();
        assert_eq!(SysData::from_messages(a, b), Ok(sys));
    }
    let mut report = [[0u8; 8]; 5];
    for (i, m) in report.iter_mut().enumerate() {
        m[..4].copy_from_slice(&word(8 * i));
        m[4..].copy_from_slice(&word(8 * i + 4));
    }
    let r = BwReport::from_messages(report);
    assert_eq!(r.to_messages(), report, "results re-emit bit for bit");
}

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// The fuzzed host's neighbour cache limit, small so that the fuzzer reaches it.
const MAX_ENTRIES: usize = 16;

/// Feeds `data` to a host as ARP/NDP traffic; see the module documentation. Returns how
/// many addresses the cache held at most.
pub fn neighbours(data: &[u8]) -> usize {
    let ours4 = Ipv4Addr::new(10, 0, 0, 1);
    let ours6: Ipv6Addr = "fd00::1".parse().unwrap_or(Ipv6Addr::LOCALHOST);
    let mut config = HostConfig::new(
        MAC,
        ["10.0.0.1/24", "fd00::1/64"]
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect(),
    );
    config.neighbour = NeighbourConfig {
        max_entries: MAX_ENTRIES,
        queue_limit: 4,
        ..NeighbourConfig::default()
    };
    let mut host = Host::new(config);
    let mut buf = vec![0u8; Host::max_frame_len()];
    let mut now = Instant::ZERO;
    let mut rest = data;
    let mut most = 0;
    while let Some((&head, tail)) = rest.split_first() {
        let take = usize::from(head & 0x3f).min(tail.len());
        let (body, next) = tail.split_at(take);
        rest = next;
        let byte = |i: usize| body.get(i).copied().unwrap_or(0);
        let mac = [2, 0, 0, 0, byte(1), byte(2)];
        let v4 = Ipv4Addr::new(10, 0, 0, byte(0));
        let v6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(byte(0)));
        let frame = match head >> 6 {
            0 => body.to_vec(),
            1 if byte(3) & 1 == 0 => resolve::arp_request(mac, v4, ours4),
            1 => resolve::neighbour_solicitation(mac, v6, ours6),
            2 if byte(3) & 1 == 0 => resolve::arp_reply(mac, v4, MAC, ours4),
            2 => resolve::neighbour_advertisement(mac, v6, MAC, ours6),
            _ => {
                // Ask about an address, let time pass, send what waits.
                let addr = if byte(3) & 1 == 0 {
                    IpAddr::V4(v4)
                } else {
                    IpAddr::V6(v6)
                };
                host.resolve(now, addr);
                now += core::time::Duration::from_millis(u64::from(byte(4)) * 250);
                host.handle_timeout(now);
                if byte(5) & 1 == 0 {
                    while host.poll_transmit(now, &mut buf).is_some() {}
                }
                Vec::new()
            }
        };
        if !frame.is_empty() {
            host.handle_frame(now, &frame);
        }
        most = most.max(host.neighbour_count());
        assert!(
            host.neighbour_count() <= MAX_ENTRIES,
            "the neighbour cache grows: {}",
            host.neighbour_count()
        );
        assert!(
            host.frames_waiting() <= 1024 + MAX_ENTRIES,
            "frames waiting grow: {}",
            host.frames_waiting()
        );
    }
    most
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn neighbour_traffic_stays_bounded(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            super::neighbours(&data);
        }

        #[test]
        fn oob_parsers_round_trip(data in proptest::collection::vec(any::<u8>(), 0..128)) {
            super::oob(&data);
        }

        #[test]
        fn neighbour_state_stays_bounded(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
            super::neighbours(&data);
        }
    }

    /// Well-formed messages round trip through the body (it is not stopped at the first
    /// check): the tools' bytes from the unit tests of `oob`.
    #[test]
    fn real_messages_reach_the_round_trips() {
        let keys = b"0000:0080:000011:3a5c1f:00001234:00005555deadb000:00000000";
        super::oob(&keys[..]);
        let mut with_nul = keys.to_vec();
        with_nul.push(0);
        let form = super::KeyForm::WithoutGid;
        assert!(super::Keys::parse(&with_nul, form).is_ok());
        super::oob(&with_nul);
        super::oob(b"3\0");
    }

    /// Requests from many addresses fill the cache to its limit and no further.
    #[test]
    fn a_request_flood_fills_the_cache_to_its_limit() {
        let mut input = Vec::new();
        for i in 0..200u8 {
            input.extend_from_slice(&[0x40 | 6, i, i, 7, 0, 0, 0]);
        }
        assert_eq!(super::neighbours(&input), super::MAX_ENTRIES);
    }

    /// Addresses to resolve, one after another, time passing and the device taking
    /// nothing: the solicitations and their retransmissions once piled up past every bound
    /// ("frames waiting grow: 1050", found by the neighbours fuzz target).
    #[test]
    fn solicitations_for_many_addresses_do_not_pile_up() {
        let mut data = Vec::new();
        for i in 0..2000u32 {
            // Ask about 10.0.0.x, let a second pass, do not send.
            data.extend_from_slice(&[0xc0 | 6, (i % 250) as u8 + 2, 0, 0, 0, 4, 1]);
        }
        super::neighbours(&data);
    }
}
