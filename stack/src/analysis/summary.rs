//! Turns the analyser's state into a [`Report`].

use super::Analyzer;
use super::flow::Flow;
use super::report::{FlowReport, LossCause, MessageKind, Report, RequesterReport, Rtt};
use super::requester::Requester;
use super::sketch::GoodputClock;
use crate::wire::{NakCode, Opcode};

fn capture_ns(a: &Analyzer) -> u64 {
    match (a.first_ts, a.last_ts) {
        (Some(f), Some(l)) => l.saturating_sub(f),
        _ => 0,
    }
}

/// The report of `a`'s flows, each dropped as soon as its report is made (a capture of many
/// flows must not need their state and their reports at once).
pub(super) fn into_report(mut a: Analyzer) -> Report {
    let flows = std::mem::take(&mut a.flows);
    a.index = Default::default();
    a.unpaired = Default::default();
    a.untracked_keys = Default::default();
    let (clock, capture_ns) = (a.clock, capture_ns(&a));
    Report {
        flows: flows
            .into_iter()
            .map(|f| flow(&f, clock, capture_ns))
            .collect(),
        ..report(&a)
    }
}

pub(super) fn report(a: &Analyzer) -> Report {
    let capture_ns = capture_ns(a);
    Report {
        packets: a.packets,
        roce_packets: a.roce_packets,
        roce_v1_packets: a.roce_v1_packets,
        icrc_errors: a.icrc_errors,
        ip_header_errors: a.ip_header_errors,
        first_ts: a.first_ts,
        last_ts: a.last_ts,
        flows: a
            .flows
            .iter()
            .map(|f| flow(f, a.clock, capture_ns))
            .collect(),
        connections: a.cm.connections().to_vec(),
        goodput_bucket_ns: a.clock.width_ns(),
        input: a.input.clone(),
        not_roce: a.not_roce.clone(),
        untracked: super::Untracked {
            cm_connections: a.cm.untracked(),
            ..a.untracked
        },
        limits: a.limits,
        pfc: a.pfc.report(),
    }
}

fn flow(f: &Flow, clock: GoodputClock, capture_ns: u64) -> FlowReport {
    let opcodes = f
        .opcodes
        .iter()
        .into_iter()
        .map(|(op, n)| (Opcode(op).name(), n))
        .collect();
    let naks = f
        .naks
        .iter()
        .into_iter()
        .map(|(code, n)| (NakCode::from_code(code).name(), n))
        .collect();
    let mut rate = f.rate.clone();
    rate.finish();
    FlowReport {
        src: f.src,
        dst: f.dst,
        dest_qp: f.dest_qp,
        udp_src_port: f.udp_src_port,
        packets: f.packets,
        opcodes,
        retransmitted_packets: f.retransmitted,
        naks,
        rnr_naks: f.rnr_naks,
        cnps: f.cnps,
        ecn_ce: f.ecn_ce,
        payload_bytes: f.payload_bytes,
        icrc_errors: f.icrc_errors,
        first_ts: f.first_ts,
        last_ts: f.last_ts,
        reverse: f.reverse.map(|r| r as usize),
        goodput: f
            .goodput
            .as_deref()
            .cloned()
            .unwrap_or_default()
            .buckets(clock, capture_ns),
        rate_changes: rate.events,
        requester: f.requester.as_deref().map(requester),
        priority: f.priority.0,
        priority_from_pcp: f.priority.1,
        pfc_stalls: f.pfc_stalls,
        pfc_stalled_ns: f.pfc_stalled_ns,
        roce_version: if f.roce_v1 { 1 } else { 2 },
    }
}

fn requester(r: &Requester) -> RequesterReport {
    let mut episode_list = r.episodes.clone();
    if let Some(open) = r.open_episode() {
        episode_list.push(*open);
    }
    let rtt = match (
        r.rtt.min(),
        r.rtt.quantile(0.5),
        r.rtt.quantile(0.99),
        r.rtt.max(),
    ) {
        (Some(min_ns), Some(median_ns), Some(p99_ns), Some(max_ns)) => Some(Rtt {
            samples: r.rtt.samples(),
            min_ns,
            median_ns,
            p99_ns,
            max_ns,
        }),
        _ => None,
    };
    RequesterReport {
        messages: MessageKind::ALL
            .iter()
            .map(|&k| (k, r.messages[k as usize]))
            .filter(|(_, n)| *n > 0)
            .collect(),
        message_bytes: r.message_bytes,
        messages_acknowledged: r.messages_acked,
        orphan_packets: r.orphan_packets,
        broken_messages: r.broken_messages,
        highest_psn: r.seen.highest(),
        psn_wraps: r.seen.wraps(),
        msn_first: r.msn_first.map(|m| m.value()),
        msn_last: r.msn_last.map(|m| m.value()),
        episodes: r.episode_count,
        packets_resent: r.packets_resent,
        episode_list,
        nak_events: r.nak_events.clone(),
        nak_causes: LossCause::ALL
            .iter()
            .map(|&c| (c, r.nak_causes[c as usize]))
            .filter(|(_, n)| *n > 0)
            .collect(),
        rnr_events: r.rnr_events.clone(),
        implied_naks: r.implied_count,
        implied_nak_events: r.implied.clone(),
        acks_naming_reads: r.acks_naming_count,
        ack_naming_read_events: r.acks_naming.clone(),
        rtt,
    }
}
