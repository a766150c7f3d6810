//! What the analyser holds and how much work a packet costs, on captures shaped to cost the
//! most (issue 14): many one-packet flows, floods of CNPs that look for a reverse flow, and
//! floods of rdma_cm connections.

use super::*;
use crate::analysis::cm::{CmMessage, CmTracker, MAX_CONNECTIONS};
use crate::wire::cm::CmAttribute;

/// `n` flows of one empty SEND each, from `a` to QPs 0x100.. of `b`.
fn one_packet_flows(s: &mut Scenario, a: Host, b: Host, n: u32) {
    for i in 0..n {
        s.send(a, host(b.ip_last(), 0x100 + i), op::SEND_ONLY, i, None, 0)
            .wait(1);
    }
}

impl Host {
    fn ip_last(self) -> u8 {
        match self.ip {
            IpAddr::V4(v4) => v4.octets()[3],
            IpAddr::V6(v6) => v6.octets()[15],
        }
    }
}

#[test]
fn a_one_packet_flow_holds_under_two_kilobytes() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    one_packet_flows(&mut s, a, b, 5000);
    let mut analyzer = Analyzer::new();
    s.feed(&mut analyzer);
    assert_eq!(analyzer.flows(), 5000);
    let per_flow = analyzer.state_bytes() / 5000;
    // 200,000 such flows must fit well inside 1 GB: the old 17 KB each took 3.35 GB. Now
    // about 1.2 KB (the flow and its requester) and the room of the growing indexes.
    assert!(per_flow < 2048, "{per_flow} bytes per flow");
    assert_eq!(
        analyzer.held_bytes(),
        analyzer.state_bytes(),
        "kept up to date"
    );
}

#[test]
fn flows_past_the_limit_are_counted_not_followed() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    one_packet_flows(&mut s, a, b, 1500);
    // Packets again for flows 1200..1500 (untracked) and 0..10 (tracked).
    for i in (1200..1500).chain(0..10) {
        s.send(a, host(2, 0x100 + i), op::SEND_ONLY, i + 1, None, 0);
    }
    let mut analyzer = Analyzer::with_limits(Limits {
        max_flows: 1000,
        ..Limits::default()
    });
    s.feed(&mut analyzer);
    let r = analyzer.report();
    assert_eq!(r.flows.len(), 1000);
    assert_eq!(r.limits.max_flows, 1000);
    assert_eq!(
        r.untracked,
        Untracked {
            flows: 500,
            packets: 800,
            cm_connections: 0,
            memory_full_at: None,
        }
    );
    assert_eq!(r.roce_packets, 1810, "the totals count every packet");
    let followed: u64 = r.flows.iter().map(|f| f.packets).sum();
    assert_eq!(followed, 1010);
}

#[test]
fn at_the_memory_limit_every_later_packet_is_counted_only() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    // Flows that grow: PSNs far apart take the whole window of seen PSNs (8 KiB).
    for i in 0..200 {
        let to = host(2, 0x100 + i);
        s.send(a, to, op::SEND_ONLY, 0, None, 0);
        s.send(a, to, op::SEND_ONLY, 1000, None, 0).wait(1);
    }
    // Ten more packets, to the first ten flows' QPs (200 flows in all).
    one_packet_flows(&mut s, a, b, 10);
    let max_bytes = 1 << 20;
    let mut analyzer = Analyzer::with_limits(Limits {
        max_bytes,
        ..Limits::default()
    });
    s.feed(&mut analyzer);
    let r = analyzer.report();
    let at = r.untracked.memory_full_at.expect("the limit was reached");
    assert!((200..400).contains(&at), "at packet {at}");
    assert_eq!(r.untracked.packets, 410 - at);
    assert_eq!(
        r.untracked.flows as usize,
        200 - r.flows.len(),
        "every flow never followed is counted"
    );
    assert_eq!(r.roce_packets, 410);
    let held = analyzer.state_bytes();
    // Over by at most what one packet added.
    assert!(held < max_bytes + (16 << 10), "{held} bytes held");
    assert_eq!(analyzer.held_bytes(), held);
}

/// `n` requests from `a` on `n` QPs of `b`, then `n` CNPs from `b` to `n` other QPs of `a`
/// (an ICRC broken on each when `bad_icrc`).
fn cnp_flood(n: u32, bad_icrc: bool) -> (Analyzer, Report) {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    for i in 0..n {
        s.send(
            host(1, 0x100 + i),
            host(2, 0x100 + i),
            op::SEND_ONLY,
            7,
            None,
            8,
        );
    }
    for i in 0..n {
        s.send(host(2, 0x9000 + i), host(1, 0x9000 + i), 0x81, 0, None, 0);
        if bad_icrc {
            let last = s.frames.last_mut().unwrap();
            let end = last.1.len() - 1;
            last.1[end] ^= 0xff;
        }
        s.wait(1);
    }
    let _ = (a, b);
    let mut analyzer = Analyzer::new();
    s.feed(&mut analyzer);
    let r = analyzer.report();
    (analyzer, r)
}

#[test]
fn a_cnp_flood_costs_a_bounded_scan_per_cnp() {
    let n = 2000;
    let (analyzer, r) = cnp_flood(n, false);
    let cnp_flows: Vec<_> = r.flows.iter().filter(|f| f.cnps > 0).collect();
    assert_eq!(cnp_flows.len(), n as usize);
    assert!(
        cnp_flows.iter().all(|f| f.reverse.is_some()),
        "each CNP still finds a flow it may be about"
    );
    // Scanning every unpaired flow would look at about n^2 / 2 = 2,000,000.
    let bound = u64::from(n) * REVERSE_CANDIDATES as u64;
    assert!(
        analyzer.reverse_scans <= bound,
        "{} flows looked at for {n} CNPs",
        analyzer.reverse_scans
    );
}

#[test]
fn a_cnp_with_a_bad_icrc_pairs_nothing() {
    let (analyzer, r) = cnp_flood(50, true);
    assert_eq!(r.icrc_errors, 50);
    assert!(r.flows.iter().all(|f| f.reverse.is_none()));
    assert_eq!(analyzer.reverse_scans, 0);
}

fn cm(kind: CmAttribute, local: u32, remote: u32, qpn: u32) -> CmMessage {
    CmMessage {
        kind,
        transaction_id: u64::from(local),
        local_comm_id: local,
        remote_comm_id: remote,
        qpn: Some(Qpn::new(qpn)),
        start_psn: Some(Psn::new(0)),
        service_id: None,
        reject_reason: None,
    }
}

#[test]
fn rdma_cm_connections_are_indexed_and_capped() {
    let (client, server) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
    let n = MAX_CONNECTIONS as u32 + 100;
    let mut t = CmTracker::default();
    for i in 0..n {
        t.message(
            client,
            server,
            1,
            &cm(CmAttribute::Req, 0x1000 + i, 0, 0x100 + i),
        );
    }
    // Answers in reverse order: each must find its own REQ, not the latest one.
    for i in (0..n).rev() {
        let tied = t.message(
            server,
            client,
            2,
            &cm(CmAttribute::Rep, 0x8000_0000 + i, 0x1000 + i, 0x20_0000 + i),
        );
        assert_eq!(tied, (i < MAX_CONNECTIONS as u32).then_some(i as usize));
    }
    for i in [0, 7, MAX_CONNECTIONS as u32 - 1] {
        let rtu = cm(CmAttribute::Rtu, 0x1000 + i, 0x8000_0000 + i, 0);
        t.message(client, server, 3, &rtu);
    }
    assert_eq!(t.connections().len(), MAX_CONNECTIONS);
    assert_eq!(t.untracked(), 100);
    let c = &t.connections()[7];
    assert_eq!(c.server_comm_id, Some(0x8000_0007));
    assert_eq!(c.server_qpn, Some(Qpn::new(0x20_0007)));
    assert_eq!(c.state, crate::analysis::cm::CmState::Established);
    assert_eq!(
        t.connections()[8].state,
        crate::analysis::cm::CmState::Replied
    );
}

#[test]
fn the_report_made_while_giving_up_the_state_is_the_same() {
    let (a, b) = (host(1, 0x11), host(2, 0x12));
    let mut s = Scenario::default();
    s.write(a, b, [0, 1, 3, 2, 3], 0, 3).ack(b, a, 3);
    one_packet_flows(&mut s, a, b, 20);
    let mut analyzer = Analyzer::new();
    s.feed(&mut analyzer);
    assert_eq!(
        analyzer.held_bytes(),
        analyzer.state_bytes(),
        "what answers fed to the reverse flow is counted too"
    );
    let report = analyzer.report();
    assert!(
        report
            .flows
            .iter()
            .any(|f| f.requester.is_some() && !f.goodput.is_empty())
    );
    assert_eq!(analyzer.into_report(), report);
}
