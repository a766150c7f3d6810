//! Every lesson generates a small, valid, deterministic capture that shows its point.

use std::io::Cursor;

use super::*;
use crate::capture::CaptureReader;
use crate::scenario::{IP_A, IP6_A, IP6_B};
use crate::wire::encap::ETHERNET_HEADER_LEN;

/// A PFC frame's time for the hosts' priority, `None` for any other frame.
fn pfc_time(frame: &[u8]) -> Option<u16> {
    match MacControlRepr::parse(frame.get(ETHERNET_HEADER_LEN..)?)? {
        MacControlRepr::Pfc(p) if p.enabled(HOST_PRIORITY) => Some(p.quanta[HOST_PRIORITY]),
        _ => None,
    }
}

/// Each frame of a lesson's capture: (from A, opcode name, ICRC ok); B's port's PFC frames
/// are "PFC" from B.
fn frames(g: &Generated) -> Vec<(bool, &'static str, bool)> {
    let mut r = CaptureReader::new(Cursor::new(g.pcapng.clone())).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        if pfc_time(f.data).is_some() && f.data[6..12] == MAC_B {
            out.push((false, "PFC", true));
            continue;
        }
        let p = f.roce().expect("every frame is RoCEv2 or B's PFC");
        let from_a = [IP_A, IP6_A].contains(&p.ip().src_addr());
        out.push((from_a, p.opcode().name(), p.icrc_ok()));
    }
    out
}

fn count(frames: &[(bool, &str, bool)], from_a: bool, name: &str) -> usize {
    frames
        .iter()
        .filter(|f| f.0 == from_a && f.1 == name)
        .count()
}

#[test]
fn every_lesson_is_small_valid_and_deterministic() {
    for lesson in Lesson::ALL {
        let g = generate(lesson, &GenOptions::default()).unwrap();
        let f = frames(&g);
        assert_eq!(f.len() as u64, g.frames, "{lesson:?}");
        assert!(
            (1..=1000).contains(&f.len()),
            "{lesson:?}: {} frames",
            f.len()
        );
        assert!(f.iter().all(|x| x.2), "{lesson:?}: every ICRC is right");
        let again = generate(lesson, &GenOptions::default()).unwrap();
        assert_eq!(g, again, "{lesson:?}: same seed, same file");
        let other = generate(
            lesson,
            &GenOptions {
                seed: 2,
                ..GenOptions::default()
            },
        )
        .unwrap();
        assert_ne!(g.pcapng, other.pcapng, "{lesson:?}: the seed matters");
    }
}

#[test]
fn each_lesson_shows_what_it_teaches() {
    let run = |l| {
        let g = generate(l, &GenOptions::default()).unwrap();
        let f = frames(&g);
        (g, f)
    };
    let (g, f) = run(Lesson::Write);
    assert_eq!(g.dropped, 0);
    for name in [
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST",
    ] {
        assert_eq!(count(&f, true, name), 1, "{name}");
    }
    assert_eq!(count(&f, false, "RC_ACKNOWLEDGE"), 1);

    let (_, f) = run(Lesson::Uc);
    assert_eq!(count(&f, true, "UC_RDMA_WRITE_FIRST"), 1);
    assert!(f.iter().all(|x| x.0), "UC: nothing comes back");

    let (_, f) = run(Lesson::Ud);
    assert_eq!(f, [(true, "UD_SEND_ONLY", true)]);

    let (g, f) = run(Lesson::LossGbn);
    assert_eq!(g.dropped, 1);
    // 8 packets, the 3rd lost: the 4th..8th arrive out of sequence, one NAK, then 6 resent.
    let writes = [
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST",
    ];
    let sent: usize = writes.iter().map(|n| count(&f, true, n)).sum();
    assert_eq!(sent, 8 + 6, "{f:?}");

    let (g, f) = run(Lesson::ReadRetry);
    assert_eq!(g.dropped, 1);
    assert_eq!(
        count(&f, true, "RC_RDMA_READ_REQUEST"),
        2,
        "the READ is re-issued once"
    );

    let (g, f) = run(Lesson::AtomicReplay);
    assert_eq!(g.dropped, 1);
    assert_eq!(count(&f, true, "RC_FETCH_ADD"), 2);
    assert_eq!(count(&f, false, "RC_ATOMIC_ACKNOWLEDGE"), 2);

    let (_, f) = run(Lesson::Rnr);
    assert_eq!(
        count(&f, true, "RC_SEND_LAST"),
        2,
        "sent, RNR NAKed, sent again: {f:?}"
    );

    let (_, f) = run(Lesson::Cnp);
    assert!(count(&f, false, "CNP") >= 2, "{f:?}");

    let (g, f) = run(Lesson::Pfc);
    assert_eq!(g.dropped, 0);
    assert_eq!(count(&f, false, "PFC"), 2);
    assert_eq!(
        count(&f, true, "RC_RDMA_WRITE_MIDDLE"),
        14,
        "nothing resent"
    );
    assert_eq!(count(&f, false, "RC_ACKNOWLEDGE"), 1, "and no NAK");
}

#[test]
fn pfc_pause_holds_the_sender_from_xoff_to_xon() {
    let g = generate(Lesson::Pfc, &GenOptions::default()).unwrap();
    let mut r = CaptureReader::new(Cursor::new(g.pcapng.clone())).unwrap();
    let (mut xoff, mut xon, mut a_sent) = (None, None, Vec::new());
    while let Some(f) = r.next_frame().unwrap() {
        match pfc_time(f.data) {
            Some(0) => xon = Some(f.timestamp_ns),
            Some(q) => {
                assert_eq!(q, 0xffff);
                xoff = Some(f.timestamp_ns);
            }
            None if f.data[6..12] == MAC_A => a_sent.push(f.timestamp_ns),
            None => {}
        }
    }
    let (xoff, xon) = (xoff.unwrap(), xon.unwrap());
    assert_eq!(xon - xoff, 150_000, "XON 150 us after XOFF");
    // Each reaches A's NIC one link delay (2 us) after B sent it: from then until XON
    // arrives A sends nothing, and it sends again as soon as XON arrives.
    let (held, lifted) = (xoff + 2_000, xon + 2_000);
    assert!(
        a_sent.iter().all(|&t| t < held || t >= lifted),
        "{a_sent:?}"
    );
    assert!(a_sent.iter().any(|&t| t > xoff && t < held), "in flight");
    assert_eq!(a_sent.iter().find(|&&t| t >= held), Some(&lifted));
}

#[test]
fn over_ipv6_every_lesson_is_the_same_exchange() {
    let v6 = GenOptions {
        ipv6: true,
        ..GenOptions::default()
    };
    for lesson in Lesson::ALL {
        let g = generate(lesson, &v6).unwrap();
        let mut r = CaptureReader::new(Cursor::new(g.pcapng.clone())).unwrap();
        while let Some(f) = r.next_frame().unwrap() {
            if pfc_time(f.data).is_some() {
                continue;
            }
            let p = f.roce().unwrap();
            let hosts = [p.ip().src_addr(), p.ip().dst_addr()];
            assert!(
                hosts == [IP6_A, IP6_B] || hosts == [IP6_B, IP6_A],
                "{lesson:?}: {hosts:?}"
            );
            assert!(p.icrc_ok(), "{lesson:?}");
        }
        if lesson == Lesson::Cnp {
            // Frames are 20 bytes longer: the congested queue marks other ones.
            assert!(count(&frames(&g), false, "CNP") >= 2);
            continue;
        }
        let v4 = generate(lesson, &GenOptions::default()).unwrap();
        let ops = |g: &Generated| -> Vec<(bool, &str)> {
            frames(g).into_iter().map(|f| (f.0, f.1)).collect()
        };
        assert_eq!(ops(&g), ops(&v4), "{lesson:?}");
        assert_eq!(g.dropped, v4.dropped, "{lesson:?}");
    }
}

/// The numbers that follow each `marker` in the capture's comments.
fn numbers_after(g: &Generated, marker: &str) -> Vec<u64> {
    let text = String::from_utf8_lossy(&g.pcapng);
    text.match_indices(marker)
        .map(|(at, _)| {
            let digits: String = text[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap()
        })
        .collect()
}

#[test]
fn comments_name_frames_as_wireshark_numbers_them() {
    let g = generate(Lesson::LossGbn, &GenOptions::default()).unwrap();
    let mut psn_of = Vec::new();
    let mut r = CaptureReader::new(Cursor::new(g.pcapng.clone())).unwrap();
    while let Some(f) = r.next_frame().unwrap() {
        psn_of.push(f.roce().unwrap().bth().psn.value());
    }
    // Frame N (from 1) is psn_of[N - 1].
    let retransmitted = numbers_after(&g, "retransmission of PSN ");
    let first = numbers_after(&g, ", first sent in frame ");
    assert!(!first.is_empty() && first.len() == retransmitted.len());
    for (psn, frame) in retransmitted.iter().zip(&first) {
        assert_eq!(psn_of[*frame as usize - 1], *psn as u32, "frame {frame}");
    }
    // The NAK names the frame the switch dropped.
    let naked = numbers_after(&g, "expects PSN ");
    let nak_frame = numbers_after(&g, (naked[0].to_string() + " (frame ").as_str());
    assert_eq!(psn_of[nak_frame[0] as usize - 1], naked[0] as u32);
    assert_eq!(
        first[0], nak_frame[0],
        "the first one resent is the one lost"
    );
}
