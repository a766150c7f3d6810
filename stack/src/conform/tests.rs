//! Every check against our own endpoint in virtual time (it must pass each one that applies),
//! and the suite's own behaviour: checks that fail on a peer that misbehaves, a peer without
//! congestion control, an agent that disappears.

use super::peer::{Peer, PeerError, Tamper, VirtualConfig, VirtualPeer};
use super::station::Station;
use super::suite::{CheckResult, Outcome, Report, registry, run};
use super::{NoCapture, Timing};
use crate::cc::Preset;
use crate::time::Instant;
use crate::wire::Ecn;
use crate::wire::encap::{
    ETHERNET_HEADER_LEN, ETHERTYPE_IPV4, IPV4_HEADER_LEN, field_at, set_ipv4_checksum,
};

/// Our endpoint as the CI runs it: DCQCN on, so that the congestion checks apply.
fn ours() -> VirtualConfig {
    let mut c = VirtualConfig::new();
    c.dcqcn = Some(Preset::Paper.params(10e9));
    c
}

fn run_ids(peer: &mut dyn Peer, ids: &[&str]) -> Report {
    let checks: Vec<_> = registry()
        .into_iter()
        .filter(|c| ids.contains(&c.id))
        .collect();
    assert_eq!(checks.len(), ids.len(), "unknown check among {ids:?}");
    run(
        peer,
        &checks,
        Timing::default(),
        &mut NoCapture,
        &mut |_| {},
    )
    .expect("the suite runs")
}

fn run_one(id: &str, config: VirtualConfig) -> CheckResult {
    let mut peer = VirtualPeer::new(config);
    run_ids(&mut peer, &[id]).results.remove(0)
}

macro_rules! each_check {
    ($($name:ident => $id:literal,)*) => {
        $(
            #[test]
            fn $name() {
                let r = run_one($id, ours());
                assert_eq!(r.outcome, Outcome::Pass, "{}: {}", r.id, r.evidence);
            }
        )*
        const TESTED: &[&str] = &[$($id),*];
    };
}

each_check! {
    resp_access_write_bad_rkey => "resp.access.write-bad-rkey",
    resp_access_read_bad_rkey => "resp.access.read-bad-rkey",
    resp_access_write_below_region => "resp.access.write-below-region",
    resp_access_write_past_region => "resp.access.write-past-region",
    resp_access_read_past_region => "resp.access.read-past-region",
    resp_access_write_no_mr_right => "resp.access.write-no-mr-right",
    resp_access_read_no_mr_right => "resp.access.read-no-mr-right",
    resp_access_atomic_no_mr_right => "resp.access.atomic-no-mr-right",
    resp_access_qp_no_write => "resp.access.qp-no-write",
    resp_access_error_state => "resp.access.error-state",
    resp_atomic_misaligned => "resp.atomic.misaligned",
    resp_psn_seq_nak => "resp.psn.seq-nak",
    resp_psn_one_nak_per_gap => "resp.psn.one-nak-per-gap",
    resp_psn_resume => "resp.psn.resume",
    resp_psn_wrap => "resp.psn.wrap",
    resp_dup_write => "resp.dup.write",
    resp_dup_send => "resp.dup.send",
    resp_dup_ack_before_read => "resp.dup.ack-before-read",
    resp_dup_read => "resp.dup.read",
    resp_dup_read_resume => "resp.dup.read-resume",
    resp_dup_atomic => "resp.dup.atomic",
    resp_rd_atomic_depth => "resp.rd-atomic.depth",
    resp_rd_atomic_depth_atomic => "resp.rd-atomic.depth-atomic",
    resp_opseq_middle_without_first => "resp.opseq.middle-without-first",
    resp_opseq_last_without_first => "resp.opseq.last-without-first",
    resp_opseq_only_inside_message => "resp.opseq.only-inside-message",
    resp_opseq_send_inside_write => "resp.opseq.send-inside-write",
    resp_opseq_other_transport => "resp.opseq.other-transport",
    resp_len_above_mtu => "resp.len.above-mtu",
    resp_len_first_not_mtu => "resp.len.first-not-mtu",
    resp_len_write_dma_length => "resp.len.write-dma-length",
    resp_len_send_longer_than_receive => "resp.len.send-longer-than-receive",
    resp_len_zero_write_bad_rkey => "resp.len.zero-write-bad-rkey",
    resp_len_zero_read_bad_rkey => "resp.len.zero-read-bad-rkey",
    resp_len_zero_write => "resp.len.zero-write",
    resp_len_zero_read => "resp.len.zero-read",
    resp_rnr_nak => "resp.rnr.nak",
    resp_rnr_retry_succeeds => "resp.rnr.retry-succeeds",
    resp_drop_bad_icrc => "resp.drop.bad-icrc",
    resp_drop_ip_checksum => "resp.drop.ip-checksum",
    resp_ud_grh_area => "resp.ud.grh-area",
    resp_drop_ip_options => "resp.drop.ip-options",
    resp_drop_ip_df_clear => "resp.drop.ip-df-clear",
    resp_drop_ip_version => "resp.drop.ip-version",
    resp_drop_pkey => "resp.drop.pkey",
    resp_drop_tver => "resp.drop.tver",
    resp_drop_unknown_qp => "resp.drop.unknown-qp",
    resp_drop_qp0 => "resp.drop.qp0",
    resp_drop_wrong_source => "resp.drop.wrong-source",
    resp_ud_qkey => "resp.ud.qkey",
    resp_uc_gap_drops_message => "resp.uc.gap-drops-message",
    resp_ack_ackreq => "resp.ack.ackreq",
    resp_ack_coalesced => "resp.ack.coalesced",
    resp_ack_msn_per_message => "resp.ack.msn-per-message",
    resp_cnp_sent => "resp.cnp.sent",
    resp_cnp_format => "resp.cnp.format",
    resp_cnp_pacing => "resp.cnp.pacing",
    req_gbn_from_nak => "req.gbn.from-nak",
    req_ack_coalesced => "req.ack.coalesced",
    req_ack_ghost => "req.ack.ghost",
    req_read_implied_nak => "req.read.implied-nak",
    req_read_ack_not_completion => "req.read.ack-not-completion",
    req_atomic_ack_not_completion => "req.atomic.ack-not-completion",
    req_read_duplicate_response => "req.read.duplicate-response",
    req_read_out_of_order_response => "req.read.out-of-order-response",
    req_rd_atomic_depth => "req.rd-atomic.depth",
    req_nak_remote_access => "req.nak.remote-access",
    req_nak_invalid_request => "req.nak.invalid-request",
    req_rnr_waits_timer => "req.rnr.waits-timer",
    req_rnr_retry_exhausted => "req.rnr.retry-exhausted",
    req_timeout_retransmit => "req.timeout.retransmit",
    req_timeout_retry_exhausted => "req.timeout.retry-exhausted",
    req_psn_wrap => "req.psn.wrap",
    req_wire_segmentation => "req.wire.segmentation",
    req_wire_format => "req.wire.format",
    req_wire_traffic_class => "req.wire.traffic-class",
    req_wire_ud_traffic_class => "req.wire.ud-traffic-class",
    req_wire_hop_limit => "req.wire.hop-limit",
    req_cnp_rate => "req.cnp.rate",
}

#[test]
fn every_check_has_its_test_and_a_rule() {
    let checks = registry();
    let mut ids: Vec<&str> = checks.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    let mut tested = TESTED.to_vec();
    tested.sort_unstable();
    assert_eq!(ids, tested);
    ids.dedup();
    assert_eq!(ids.len(), checks.len(), "check ids are unique");
    assert!(checks.len() >= 40);
    for c in &checks {
        assert!(
            c.rule.starts_with("IBA ")
                || c.rule.starts_with("C9-")
                || c.rule.starts_with("Annex A17"),
            "{}",
            c.id
        );
        assert!(!c.title.is_empty());
    }
}

#[test]
fn the_whole_suite_passes_against_our_endpoint_in_one_session() {
    let mut peer = VirtualPeer::new(ours());
    let checks = registry();
    let mut frames = 0;
    let mut seen = 0;
    let report = run(
        &mut peer,
        &checks,
        Timing::default(),
        &mut Counter(&mut frames),
        &mut |_| seen += 1,
    )
    .expect("the suite runs");
    let failed: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.outcome != Outcome::Pass)
        .map(|r| format!("{}: {}", r.id, r.evidence))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(seen, checks.len());
    assert_eq!(report.aborted, None);
    // Every recorded frame belongs to exactly one check, numbered in order.
    let numbers: Vec<u64> = report
        .results
        .iter()
        .flat_map(|r| r.frames.iter().copied())
        .collect();
    assert_eq!(numbers, (1..=frames).collect::<Vec<_>>());
    // Everything the checks created was torn down: no QP is left of the ~70 they made.
    let left: Vec<u32> = (0x11..0x400)
        .filter(|&q| {
            peer.host()
                .engine()
                .query_qp(crate::wire::Qpn::new(q))
                .is_ok()
        })
        .collect();
    assert!(left.is_empty(), "QPs left behind: {left:?}");
}

struct Counter<'a>(&'a mut u64);

impl super::FrameSink for Counter<'_> {
    fn record(&mut self, _at: Instant, _frame: &[u8], comment: &str) {
        assert!(
            comment.contains(": sent ") || comment.contains(": received "),
            "{comment}"
        );
        *self.0 += 1;
    }
}

#[test]
fn without_congestion_control_the_cnp_checks_do_not_apply() {
    let mut peer = VirtualPeer::new(VirtualConfig::new());
    let report = run_ids(
        &mut peer,
        &[
            "resp.cnp.sent",
            "resp.cnp.format",
            "resp.cnp.pacing",
            "req.cnp.rate",
        ],
    );
    for r in &report.results {
        assert_eq!(
            r.outcome,
            Outcome::NotApplicable,
            "{}: {}",
            r.id,
            r.evidence
        );
    }
}

/// A peer whose frames are changed on the way out.
fn tampered(tamper: Tamper) -> VirtualPeer {
    let mut peer = VirtualPeer::new(ours());
    peer.set_tamper(tamper);
    peer
}

/// The AETH syndrome byte of a frame (IPv4, no VLAN: Ethernet 14, IP 20, UDP 8, BTH 12).
const AETH_AT: usize = 14 + 20 + 8 + 12;

fn refill_icrc(frame: &mut [u8]) {
    let _ = crate::wire::icrc::fill(&mut frame[14..]);
}

#[test]
fn a_peer_that_never_naks_fails_the_nak_checks() {
    let mut peer = tampered(Box::new(|f: &mut Vec<u8>| {
        !(f.len() > AETH_AT && f[AETH_AT - 12] == 0x11 && f[AETH_AT] & 0x60 == 0x60)
    }));
    let report = run_ids(
        &mut peer,
        &[
            "resp.psn.seq-nak",
            "resp.access.write-bad-rkey",
            "resp.ack.ackreq",
        ],
    );
    let outcomes: Vec<_> = report.results.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Fail, Outcome::Fail, Outcome::Pass],
        "{report:#?}"
    );
}

#[test]
fn a_peer_that_miscounts_its_msn_fails() {
    let mut peer = tampered(Box::new(|f: &mut Vec<u8>| {
        if f.len() > AETH_AT + 4 && f[AETH_AT - 12] == 0x11 {
            f[AETH_AT + 3] = f[AETH_AT + 3].wrapping_add(1);
            refill_icrc(f);
        }
        true
    }));
    let report = run_ids(
        &mut peer,
        &[
            "resp.ack.ackreq",
            "resp.ack.msn-per-message",
            "resp.dup.write",
        ],
    );
    for r in &report.results {
        assert_eq!(r.outcome, Outcome::Fail, "{}: {}", r.id, r.evidence);
    }
}

#[test]
fn a_peer_with_a_broken_icrc_fails_the_format_check() {
    let mut peer = tampered(Box::new(|f: &mut Vec<u8>| {
        if let Some(b) = f.last_mut() {
            *b ^= 1;
        }
        true
    }));
    let r = run_ids(&mut peer, &["req.wire.format"]).results.remove(0);
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.evidence);
    assert!(r.evidence.contains("bad ICRC"), "{}", r.evidence);
}

/// A requester whose IPv4 header breaks the annex fails the format check, by name: a wrong
/// header checksum, and CE set by the sender itself (checksum mended; the ICRC masks both).
#[test]
fn a_peer_with_a_bad_ipv4_header_fails_the_format_check() {
    /// Changes the IPv4 header (and what follows) of a frame the peer sends.
    type HeaderEdit = fn(&mut [u8]);
    let cases: [(HeaderEdit, &str); 2] = [
        (
            |ip| ip[field_at::IPV4_CHECKSUM] ^= 0x5a,
            "the IPv4 header checksum is wrong",
        ),
        (
            |ip| {
                ip[1] |= Ecn::Ce.bits();
                set_ipv4_checksum(&mut ip[..IPV4_HEADER_LEN]);
            },
            "IP ECN not allowed",
        ),
    ];
    for (tamper, said) in cases {
        let mut peer = tampered(Box::new(move |f: &mut Vec<u8>| {
            let ip = ETHERNET_HEADER_LEN;
            if f.len() > ip + IPV4_HEADER_LEN && f[12..ip] == ETHERTYPE_IPV4.to_be_bytes() {
                tamper(&mut f[ip..]);
            }
            true
        }));
        let r = run_ids(&mut peer, &["req.wire.format"]).results.remove(0);
        assert_eq!(r.outcome, Outcome::Fail, "{}", r.evidence);
        assert!(r.evidence.contains(said), "{said}: {}", r.evidence);
        assert!(!r.evidence.contains("bad ICRC"), "{}", r.evidence);
    }
}

/// The in-memory peer, watched: the agent requests it saw, and an agent that disappears
/// after `left` requests (if set).
struct Spy {
    inner: VirtualPeer,
    lines: Vec<String>,
    left: Option<u32>,
}

impl Spy {
    fn new(left: Option<u32>) -> Spy {
        Spy {
            inner: VirtualPeer::new(ours()),
            lines: Vec::new(),
            left,
        }
    }
}

impl Peer for Spy {
    fn now(&self) -> Instant {
        self.inner.now()
    }
    fn station(&self) -> &Station {
        self.inner.station()
    }
    fn transmit(&mut self, frame: &[u8]) -> Result<(), PeerError> {
        self.inner.transmit(frame)
    }
    fn receive(&mut self, deadline: Instant) -> Result<Option<(Instant, Vec<u8>)>, PeerError> {
        self.inner.receive(deadline)
    }
    fn agent(&mut self, line: &str) -> Result<String, PeerError> {
        match &mut self.left {
            Some(0) => {
                return Err(PeerError::AgentGone {
                    addr: "10.0.0.1:7471".into(),
                    why: "it closed the connection".into(),
                });
            }
            Some(n) => *n -= 1,
            None => {}
        }
        let reply = self.inner.agent(line)?;
        self.lines.push(format!("{line} -> {reply}"));
        Ok(reply)
    }
    fn resolve_peer(&mut self, deadline: Instant) -> Result<Option<[u8; 6]>, PeerError> {
        self.inner.resolve_peer(deadline)
    }
}

#[test]
fn an_agent_that_disappears_leaves_a_clear_error_for_the_checks_left() {
    let mut peer = Spy::new(Some(30));
    let ids = [
        "resp.psn.seq-nak",
        "resp.dup.write",
        "resp.dup.send",
        "resp.dup.read",
        "resp.ack.ackreq",
        "resp.rnr.nak",
    ];
    let report = run_ids(&mut peer, &ids);
    let why = report.aborted.clone().expect("the suite stopped");
    assert!(
        why.contains("10.0.0.1:7471") && why.contains("closed"),
        "{why}"
    );
    assert_eq!(report.results.len(), ids.len());
    let last = report.results.last().unwrap();
    assert_eq!(last.outcome, Outcome::Fail);
    assert!(
        last.evidence
            .starts_with("not run: the agent at 10.0.0.1:7471 is gone"),
        "{}",
        last.evidence
    );
    assert_eq!(report.results[0].outcome, Outcome::Pass);
}

#[test]
fn each_check_destroys_what_it_created_before_the_next_begins() {
    let mut peer = Spy::new(None);
    let checks = registry();
    run(
        &mut peer,
        &checks,
        Timing::default(),
        &mut NoCapture,
        &mut |_| {},
    )
    .unwrap();
    let (mut qps, mut mrs) = (0i32, 0i32);
    for line in &peer.lines {
        let ok = line.contains(" -> OK");
        match line.split(' ').next() {
            Some("create_qp") if ok => qps += 1,
            Some("destroy_qp") if ok => qps -= 1,
            Some("reg_mr") if ok => mrs += 1,
            Some("dereg_mr") if ok => mrs -= 1,
            // A new check starts with nothing left over from the one before.
            Some("hello") | Some("bye") => assert_eq!((qps, mrs), (0, 0), "{line}"),
            _ => {}
        }
        assert!(qps <= 3 && mrs <= 3, "objects pile up: {line}");
    }
    assert_eq!((qps, mrs), (0, 0));
    assert!(peer.lines.last().is_some_and(|l| l.starts_with("bye")));
}

#[test]
fn the_rate_check_passes_with_either_preset_at_any_line_rate() {
    // mlx5's timers recover within a millisecond at a low line rate (as CI runs the agent).
    for (preset, gbps) in [
        (Preset::Mlx5, 0.1),
        (Preset::Paper, 1.0),
        (Preset::Mlx5, 25.0),
    ] {
        let mut c = VirtualConfig::new();
        c.dcqcn = Some(preset.params(gbps * 1e9));
        let r = run_one("req.cnp.rate", c);
        assert_eq!(
            r.outcome,
            Outcome::Pass,
            "{preset:?} at {gbps} Gb/s: {}",
            r.evidence
        );
    }
}

#[test]
fn a_peer_that_answers_each_marked_packet_with_a_cnp_fails_the_pacing_check() {
    // A notification point spacing CNPs by 1 ns: one per marked packet.
    let mut c = ours();
    c.cnp_interval = crate::cc::Time::from_nanos(1);
    let r = run_one("resp.cnp.pacing", c);
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.evidence);
    assert!(
        r.evidence.contains("at most 1 at one per 50 us"),
        "{}",
        r.evidence
    );
    // And ours, pacing at 50 us, passes with its one deferred CNP after the first.
    let r = run_one("resp.cnp.pacing", ours());
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.evidence);
}
