use super::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::time::{Duration, Instant};
use crate::wire::Ecn;
use crate::wire::ce::{CeOutcome, ecn, mark_ce};
use crate::wire::encap::internet_checksum;
use crate::wire::{icrc, sample};

/// An IPv4 RC SEND ONLY frame with `payload` bytes, ECT(0).
fn roce_v4(payload: usize) -> Vec<u8> {
    let [a, b] = [1, 2].map(|h| IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)));
    sample::rc_send_only(a, b, payload).unwrap()
}

/// The same packet over IPv6.
fn roce_v6(payload: usize) -> Vec<u8> {
    let [a, b] = [1, 2].map(|h| IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, h)));
    sample::rc_send_only(a, b, payload).unwrap()
}

fn link(config: FaultConfig, seed: u64) -> FaultyLink {
    FaultyLink::new(config, seed).unwrap()
}

/// Sends `n` tagged frames one microsecond apart and drains the link; returns the tags in
/// delivery order with their delivery times.
fn run(link: &mut FaultyLink, n: u32, payload: usize) -> Vec<(u64, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let drain = |link: &mut FaultyLink, now: Instant, out: &mut Vec<_>| {
        while let Some(at) = link.next_delivery().filter(|&at| at <= now) {
            let frame = link.poll(now).unwrap();
            let tag =
                u32::from_be_bytes(frame[frame.len() - 8..frame.len() - 4].try_into().unwrap());
            out.push((at.as_nanos(), tag, frame));
        }
    };
    for i in 0..n {
        let now = Instant::from_micros(u64::from(i));
        drain(link, now, &mut out);
        let mut frame = roce_v4(payload);
        let len = frame.len();
        frame[len - 8..len - 4].copy_from_slice(&i.to_be_bytes());
        icrc::fill(&mut frame[14..]).unwrap();
        link.send(now, frame);
    }
    drain(link, Instant::MAX, &mut out);
    assert_eq!(link.in_flight(), 0);
    out
}

/// `count` successes in `n` trials of probability `p` lie within five standard deviations.
fn assert_binomial(count: u64, n: u64, p: f64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (count as f64 - mean).abs() <= 5.0 * sd,
        "{count} of {n} is not within 5 sd ({sd:.1}) of {mean}"
    );
}

#[test]
fn perfect_link_delivers_everything_in_order_after_the_delay() {
    let mut config = FaultConfig::default();
    config.delay.base = Duration::from_nanos(7_000);
    let mut l = link(config, 1);
    let out = run(&mut l, 100, 16);
    assert_eq!(out.len(), 100);
    for (i, (at, tag, _)) in out.iter().enumerate() {
        assert_eq!((*at, *tag), (i as u64 * 1_000 + 7_000, i as u32));
    }
    let s = l.stats();
    assert_eq!((s.sent, s.delivered, s.dropped), (100, 100, 0));
}

#[test]
fn fault_counts_match_their_probabilities() {
    let config = FaultConfig {
        loss: 0.1,
        duplicate: 0.05,
        reorder: 0.02,
        corrupt: 0.03,
        ce_mark: CeMarking::Probability(0.2),
        ..FaultConfig::default()
    };
    let n = 20_000;
    let mut l = link(config, 42);
    let out = run(&mut l, n, 0);
    let s = *l.stats();
    assert_binomial(s.dropped, n.into(), 0.1);
    let kept = s.sent - s.dropped;
    assert_binomial(s.duplicated, kept, 0.05);
    assert_binomial(s.reordered, kept, 0.02);
    assert_binomial(s.corrupted, kept, 0.03);
    assert_binomial(s.ce_marked, kept, 0.2);
    assert_eq!(s.delivered, kept + s.duplicated);
    assert_eq!(out.len() as u64, s.delivered);

    // What arrived agrees with the counters: bad ICRCs (or broken IPv4 headers) for corrupted
    // frames, CE for marked ones (both copies of a duplicate carry the mark).
    let bad = out.iter().filter(|(_, _, f)| {
        !icrc::verify(&f[14..]).unwrap_or(false) || internet_checksum(&f[14..34]) != 0
    });
    let bad = bad.count() as u64;
    assert!(
        bad <= s.corrupted && bad * 10 >= s.corrupted * 9,
        "{bad} of {}",
        s.corrupted
    );
    let ce = out
        .iter()
        .filter(|(_, _, f)| ecn(f) == Some(Ecn::Ce.bits()))
        .count() as u64;
    assert!(
        ce >= s.ce_marked && ce <= s.ce_marked * 11 / 10,
        "{ce} vs {}",
        s.ce_marked
    );
}

#[test]
fn only_reordering_reorders_and_deliveries_come_in_time_order() {
    let jittery = FaultConfig {
        delay: Delay {
            base: Duration::from_nanos(5_000),
            jitter: Duration::from_nanos(20_000),
        },
        ..FaultConfig::default()
    };
    let out = run(&mut link(jittery, 3), 2_000, 0);
    assert!(
        out.windows(2).all(|w| w[0].1 < w[1].1),
        "jitter must not reorder"
    );
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));

    let reordering = FaultConfig {
        reorder: 0.1,
        ..jittery
    };
    let mut l = link(reordering, 3);
    let out = run(&mut l, 2_000, 0);
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    let overtaken = out.windows(2).filter(|w| w[0].1 > w[1].1).count() as u64;
    assert!(overtaken > 0 && overtaken <= l.stats().reordered);
    let mut tags: Vec<u32> = out.iter().map(|o| o.1).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..2_000).collect::<Vec<_>>());
}

#[test]
fn a_duplicate_follows_its_original_and_escapes_its_corruption() {
    let config = FaultConfig {
        duplicate: 1.0,
        corrupt: 1.0,
        ..FaultConfig::default()
    };
    let out = run(&mut link(config, 9), 50, 8);
    assert_eq!(out.len(), 100);
    for pair in out.chunks(2) {
        assert_eq!(pair[0].0, pair[1].0);
        assert!(pair[0].2 != pair[1].2, "the original is corrupted");
        assert!(
            icrc::verify(&pair[1].2[14..]).unwrap(),
            "the copy is intact"
        );
    }
}

#[test]
fn same_seed_same_deliveries_and_other_seeds_differ() {
    let config = FaultConfig {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        corrupt: 0.05,
        delay: Delay {
            base: Duration::from_nanos(1_000),
            jitter: Duration::from_nanos(3_000),
        },
        ce_mark: CeMarking::Probability(0.1),
        ..FaultConfig::default()
    };
    let a = run(&mut link(config, 77), 1_000, 4);
    let b = run(&mut link(config, 77), 1_000, 4);
    let c = run(&mut link(config, 78), 1_000, 4);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn a_knob_does_not_shift_the_random_choices_of_the_others() {
    let lossy = FaultConfig {
        loss: 0.2,
        ..FaultConfig::default()
    };
    let also_corrupt = FaultConfig {
        corrupt: 0.5,
        ..lossy
    };
    // Corruption may hit the tag, so compare delivery times: frame i is sent at i us.
    let kept = |config| -> Vec<u64> {
        run(&mut link(config, 5), 500, 0)
            .iter()
            .map(|o| o.0)
            .collect()
    };
    assert_eq!(kept(lossy), kept(also_corrupt));
}

#[test]
fn a_congested_queue_marks_ce_past_its_threshold_and_drains_at_its_rate() {
    let frame_len = roce_v4(1024).len() as u64; // 1082 bytes
    // One frame per microsecond is 8.66 Gb/s offered; the bottleneck drains 4 Gb/s.
    let config = FaultConfig {
        ce_mark: CeMarking::Queue {
            threshold_bytes: 20_000,
            drain_bits_per_sec: 4_000_000_000,
        },
        ..FaultConfig::default()
    };
    let mut l = link(config, 1);
    let out = run(&mut l, 200, 1024);
    let marked: Vec<bool> = out
        .iter()
        .map(|o| ecn(&o.2) == Some(Ecn::Ce.bits()))
        .collect();
    let first = marked
        .iter()
        .position(|&m| m)
        .expect("the queue never passed its threshold");
    assert!(
        marked[first..].iter().all(|&m| m),
        "once congested, stays congested"
    );
    // The backlog grows by frame_len - 500 bytes per frame: 20000 / 582 -> frame 35 or 36.
    let expected = (20_000 / (frame_len - 500)) as usize;
    assert!(
        (expected..=expected + 1).contains(&first),
        "{first} vs {expected}"
    );
    // Back to back at 4 Gb/s: one frame every frame_len * 2 ns.
    let gaps: Vec<u64> = out.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().all(|&g| g == frame_len * 2), "{gaps:?}");

    // Offered below the drain rate, the queue never builds up.
    let slow = FaultConfig {
        ce_mark: CeMarking::Queue {
            threshold_bytes: 1_500,
            drain_bits_per_sec: 10_000_000_000,
        },
        ..FaultConfig::default()
    };
    let mut l = link(slow, 1);
    run(&mut l, 200, 1024);
    assert_eq!(l.stats().ce_marked, 0);
}

#[test]
fn ce_marking_keeps_ipv4_checksum_and_icrc_valid() {
    for mut frame in [roce_v4(100), roce_v6(100)] {
        assert_eq!(mark_ce(&mut frame), CeOutcome::Marked);
        assert_eq!(ecn(&frame), Some(Ecn::Ce.bits()));
        assert!(icrc::verify(&frame[14..]).unwrap());
        if frame[14] >> 4 == 4 {
            assert_eq!(internet_checksum(&frame[14..34]), 0);
        }
        assert_eq!(mark_ce(&mut frame), CeOutcome::AlreadyCe);
    }
}

#[test]
fn ce_marking_leaves_not_ect_short_and_non_ip_frames_alone() {
    let mut not_ect = roce_v4(0);
    not_ect[15] &= !Ecn::Ce.bits(); // CE sets both bits of the field
    let before = not_ect.clone();
    assert_eq!(mark_ce(&mut not_ect), CeOutcome::NotEct);
    assert_eq!(not_ect, before);

    let mut arp = roce_v4(0);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(mark_ce(&mut arp), CeOutcome::NotIp);
    for len in 0..34 {
        let mut short = roce_v4(0)[..len].to_vec();
        assert_ne!(mark_ce(&mut short), CeOutcome::Marked, "length {len}");
    }

    let mut tagged = roce_v4(0);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    assert_eq!(mark_ce(&mut tagged), CeOutcome::Marked);
    assert!(icrc::verify(&tagged[18..]).unwrap());
}

#[test]
fn corruption_and_marking_never_panic_on_tiny_frames() {
    let config = FaultConfig {
        corrupt: 1.0,
        ce_mark: CeMarking::Probability(1.0),
        ..FaultConfig::default()
    };
    let mut l = link(config, 2);
    for len in 0..40 {
        l.send(Instant::ZERO, vec![0x08; len]);
    }
    let mut n = 0;
    while l.poll(Instant::ZERO).is_some() {
        n += 1;
    }
    assert_eq!(n, 40);
}

#[test]
fn invalid_configurations_are_refused() {
    let bad = FaultConfig {
        loss: 1.5,
        ..FaultConfig::default()
    };
    assert_eq!(
        FaultyLink::new(bad, 0).unwrap_err(),
        FaultError::NotAProbability {
            knob: "loss",
            value: 1.5
        }
    );
    let nan = FaultConfig {
        ce_mark: CeMarking::Probability(f64::NAN),
        ..FaultConfig::default()
    };
    assert!(FaultyLink::new(nan, 0).is_err());
    let stalled = FaultConfig {
        ce_mark: CeMarking::Queue {
            threshold_bytes: 0,
            drain_bits_per_sec: 0,
        },
        ..FaultConfig::default()
    };
    assert_eq!(
        FaultyLink::new(stalled, 0).unwrap_err(),
        FaultError::ZeroDrainRate
    );
}
