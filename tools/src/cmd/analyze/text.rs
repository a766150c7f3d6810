//! The readable report of `roce analyze`.

use std::fmt::Write;
use std::path::Path;

use roce::analysis::Report;
use roce::analysis::cm::CmConnection;
use roce::analysis::report::{FlowReport, RequesterReport};

/// Events listed per flow in the text report (JSON has all the analysis kept).
const LISTED: usize = 8;

/// A duration for people: ns, us, ms or s with three significant digits.
pub fn duration(ns: u64) -> String {
    let v = ns as f64;
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.3} us", v / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", v / 1e6),
        _ => format!("{:.3} s", v / 1e9),
    }
}

fn bytes(n: u64) -> String {
    match n {
        0..10_000 => format!("{n} B"),
        10_000..10_000_000 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
    }
}

fn list(items: &[(&'static str, u64)]) -> String {
    let parts: Vec<String> = items.iter().map(|(n, c)| format!("{n} {c}")).collect();
    parts.join(", ")
}

/// Goodput buckets as a bar of eighth-blocks, scaled to the busiest bucket.
fn sparkline(buckets: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = buckets.iter().copied().max().unwrap_or(0).max(1);
    buckets
        .iter()
        .map(|&b| match b {
            0 => ' ',
            _ => BARS[((b * 7).div_ceil(max)) as usize],
        })
        .collect()
}

fn mbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return 0.0;
    }
    bytes as f64 * 8.0 * 1e3 / ns as f64
}

pub fn render(file: &Path, r: &Report) -> String {
    let start = r.first_ts.unwrap_or(0);
    let at = |ts: u64| format!("+{}", duration(ts.saturating_sub(start)));
    let span = r.last_ts.unwrap_or(start).saturating_sub(start);
    let mut o = String::new();
    let v1 = if r.roce_v1_packets > 0 {
        format!(", {} RoCEv1", r.roce_v1_packets)
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "{}: {} frames, {} RoCEv2{v1}, {} flows, over {}",
        file.display(),
        r.packets,
        r.roce_packets - r.roce_v1_packets,
        r.flows.len(),
        duration(span)
    );
    let _ = writeln!(o, "ICRC errors: {}", r.icrc_errors);
    count_line(
        &mut o,
        "",
        r.ip_header_errors,
        "RoCEv2 packets with an IPv4 header a receiver drops (a wrong checksum, options or DF \
         clear; Annex A17.3.4)",
    );
    not_roce(&mut o, r);
    for (i, f) in r.flows.iter().enumerate() {
        flow(&mut o, i, f, r, &at);
    }
    if !r.connections.is_empty() {
        let _ = writeln!(o, "\nrdma_cm connections");
        for c in &r.connections {
            connection(&mut o, c, &at);
        }
    }
    super::pfc::pfc_text(&mut o, r);
    input(&mut o, r);
    o
}

/// `n` with thousands separated by commas: 12,000.
/// `{prefix}{n} {what}` on a line of its own, unless `n` is 0.
pub fn count_line(o: &mut String, prefix: &str, n: u64, what: &str) {
    if n > 0 {
        let _ = writeln!(o, "{prefix}{n} {what}");
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn frames(n: u64) -> String {
    match n {
        1 => "1 frame".into(),
        n => format!("{} frames", thousands(n)),
    }
}

/// What the capture held besides RoCE: "0 RoCE frames: 12,000 frames, of which 11,800 VXLAN
/// with non-RoCE inner frames, 200 ARP" when there is no RoCE at all, the same breakdown
/// after "not RoCE:" otherwise.
fn not_roce(o: &mut String, r: &Report) {
    let n = &r.not_roce;
    let malformed = r.input.malformed_frames;
    if n.frames == 0 && (r.roce_packets > 0 || malformed == 0) {
        return;
    }
    let mut parts: Vec<String> = n
        .largest_first()
        .iter()
        .map(|(k, c)| format!("{} {}", thousands(*c), k.describe()))
        .collect();
    if r.roce_packets == 0 {
        if malformed > 0 {
            parts.push(format!(
                "{} malformed (see input problems)",
                thousands(malformed)
            ));
        }
        let _ = writeln!(
            o,
            "0 RoCE frames: {}, of which {}",
            frames(r.packets),
            parts.join(", ")
        );
    } else {
        let _ = writeln!(o, "not RoCE: {}: {}", frames(n.frames), parts.join(", "));
    }
}

fn flow(o: &mut String, i: usize, f: &FlowReport, r: &Report, at: &dyn Fn(u64) -> String) {
    let reverse = f
        .reverse
        .map_or(String::new(), |r| format!("  (reverse: flow {r})"));
    let v1 = if f.roce_version == 1 {
        "  RoCEv1 (GIDs)"
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "\nflow {i}: {} -> {}  QP {:#08x}{v1}{reverse}",
        f.src,
        f.dst,
        f.dest_qp.value()
    );
    let _ = writeln!(
        o,
        "  {} packets, {} payload, {} retransmitted; NAKs: {}; RNR NAKs {}; CNPs {}; ECN CE {}{}",
        f.packets,
        bytes(f.payload_bytes),
        f.retransmitted_packets,
        if f.naks.is_empty() {
            "none".to_string()
        } else {
            list(&f.naks)
        },
        f.rnr_naks,
        f.cnps,
        f.ecn_ce,
        if f.icrc_errors > 0 {
            format!("; ICRC errors {}", f.icrc_errors)
        } else {
            String::new()
        }
    );
    let _ = writeln!(o, "  opcodes: {}", list(&f.opcodes));
    if let Some(req) = &f.requester {
        requester(o, req, at);
    }
    let total: u64 = f.goodput.iter().sum();
    if total > 0 {
        let peak = f.goodput.iter().copied().max().unwrap_or(0);
        let _ = writeln!(
            o,
            "  goodput: {:.1} Mb/s mean, {:.1} Mb/s peak per {} [{}]",
            mbps(total, f.last_ts.saturating_sub(f.first_ts)),
            mbps(peak, r.goodput_bucket_ns),
            duration(r.goodput_bucket_ns),
            sparkline(&f.goodput)
        );
    }
    for c in f.rate_changes.iter().take(LISTED) {
        let ratio = c.gap_after_ns as f64 / c.gap_before_ns.max(1) as f64;
        let _ = writeln!(
            o,
            "  {} at {}: packet spacing {} -> {} ({ratio:.2}x)",
            c.signal.name(),
            at(c.ts),
            duration(c.gap_before_ns),
            duration(c.gap_after_ns)
        );
    }
}

fn requester(o: &mut String, r: &RequesterReport, at: &dyn Fn(u64) -> String) {
    let messages: Vec<_> = r.messages.iter().map(|(k, n)| (k.name(), *n)).collect();
    let _ = writeln!(
        o,
        "  requester: messages {} ({}), {} acknowledged; highest PSN {}{}{}",
        if messages.is_empty() {
            "none".to_string()
        } else {
            list(&messages)
        },
        bytes(r.message_bytes),
        r.messages_acknowledged,
        r.highest_psn
            .map_or("-".to_string(), |p| p.value().to_string()),
        if r.psn_wraps > 0 {
            format!(" after {} wraps", r.psn_wraps)
        } else {
            String::new()
        },
        match (r.msn_first, r.msn_last) {
            (Some(a), Some(b)) => format!("; responder MSN {a} .. {b}"),
            _ => String::new(),
        }
    );
    if r.orphan_packets + r.broken_messages > 0 {
        let _ = writeln!(
            o,
            "    {} packets continue a message whose start was not captured; {} messages broken off",
            r.orphan_packets, r.broken_messages
        );
    }
    if let Some(t) = r.rtt {
        let _ = writeln!(
            o,
            "    request-to-ACK RTT: median {}, p99 {} (min {}, max {}, {} samples)",
            duration(t.median_ns),
            duration(t.p99_ns),
            duration(t.min_ns),
            duration(t.max_ns),
            t.samples
        );
    }
    if r.episodes > 0 {
        let _ = writeln!(
            o,
            "    go-back-N: {} episodes, {} packets resent",
            r.episodes, r.packets_resent
        );
        for e in r.episode_list.iter().take(LISTED) {
            let recovered = match e.time_to_recover_ns() {
                Some(t) => format!("recovered {} after the trigger", duration(t)),
                None if e.interrupted => "went back again before recovering".to_string(),
                None => "not recovered by the end of the capture".to_string(),
            };
            let _ = writeln!(
                o,
                "      from PSN {} at {} after {} ({} later): {} packets resent, {recovered}",
                e.first_psn,
                at(e.start_ts),
                e.trigger.name(),
                duration(e.start_ts.saturating_sub(e.trigger_ts)),
                e.packets_resent
            );
        }
    }
    for e in r.nak_events.iter().take(LISTED) {
        let request = e
            .request
            .map_or(String::new(), |k| format!(" ({} request)", k.name()));
        let _ = writeln!(
            o,
            "    NAK {} for PSN {}{request} at {}: {}",
            e.code.name(),
            e.psn,
            at(e.ts),
            e.cause.describe()
        );
    }
    for e in r.rnr_events.iter().take(LISTED) {
        let waited = e.wait_ns.map_or("no retry seen".to_string(), |w| {
            format!("retried after {}", duration(w))
        });
        let _ = writeln!(
            o,
            "    RNR NAK for PSN {} at {}: wait at least {}, {waited}",
            e.psn,
            at(e.ts),
            duration(u64::from(e.min_wait_us) * 1000)
        );
    }
    if r.implied_naks > 0 {
        let _ = writeln!(o, "    implied NAKs: {}", r.implied_naks);
        for e in r.implied_nak_events.iter().take(LISTED) {
            let _ = writeln!(
                o,
                "      at {}: expected response PSN {}, got {}",
                at(e.ts),
                e.expected,
                e.got
            );
        }
    }
    if r.acks_naming_reads > 0 {
        let _ = writeln!(
            o,
            "    ACKs naming a READ or atomic: {} (only their responses answer them: a requester \
             whose response was lost may complete the request with no data, as rxe's does)",
            r.acks_naming_reads
        );
        for e in r.ack_naming_read_events.iter().take(LISTED) {
            let _ = writeln!(
                o,
                "      at {}: ACK PSN {} ({} request)",
                at(e.ts),
                e.psn,
                e.request.name()
            );
        }
    }
}

fn connection(o: &mut String, c: &CmConnection, at: &dyn Fn(u64) -> String) {
    let qpn =
        |q: Option<roce::wire::Qpn>| q.map_or("?".to_string(), |q| format!("{:#08x}", q.value()));
    let events: Vec<String> = c
        .events
        .iter()
        .map(|e| format!("{} {}", e.kind.name(), at(e.ts)))
        .collect();
    let _ = writeln!(
        o,
        "  {} QP {} <-> {} QP {}: {}{}; {}",
        c.client,
        qpn(c.client_qpn),
        c.server,
        qpn(c.server_qpn),
        c.state.name(),
        c.reject_reason
            .map_or(String::new(), |r| format!(" (reason {r})")),
        events.join(", ")
    );
}

fn input(o: &mut String, r: &Report) {
    let u = &r.untracked;
    if u.any() {
        o.push('\n');
    }
    if u.flows > 0 {
        let also = if u.memory_full_at.is_some() {
            " or new after --max-memory was reached"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "not tracked: {} flows beyond --max-flows {}{also}",
            u.flows, r.limits.max_flows
        );
    }
    if let Some(at) = u.memory_full_at {
        let _ = writeln!(
            o,
            "not tracked: every packet after RoCEv2 packet {at}, when the analysis reached \
             --max-memory {} MiB",
            r.limits.max_bytes >> 20
        );
    }
    let tracker = roce::analysis::cm::MAX_CONNECTIONS;
    count_line(
        o,
        "not tracked: ",
        u.packets,
        "packets in all, counted in the totals only",
    );
    count_line(
        o,
        "not tracked: ",
        u.cm_connections,
        &format!("rdma_cm connections beyond the tracker's {tracker}"),
    );
    let p = &r.input;
    if !p.any() {
        return;
    }
    let _ = writeln!(o, "\ninput problems");
    if let Some(d) = &p.damage {
        let _ = writeln!(o, "  {d}; frames after it were not analysed");
    }
    count_line(
        o,
        "  ",
        p.cut_frames,
        "frames cut by the capture's snap length: headers analysed, ICRC not checked",
    );
    count_line(
        o,
        "  ",
        p.malformed_frames,
        "malformed RoCEv2 frames (or broken encapsulations)",
    );
    for (i, why) in &p.malformed_examples {
        // Wireshark's frame numbers, from 1.
        let _ = writeln!(o, "    frame {}: {why}", i + 1);
    }
}
