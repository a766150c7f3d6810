//! `roce analyze --json`: the contract's keys (ARCHITECTURE.md) first, then the details.
//! Times are microseconds since the capture's first frame (`*_us`), `start_time` is that
//! frame's time in seconds since the Unix epoch.

use std::collections::BTreeMap;

use roce::analysis::Report;
use roce::analysis::cm::CmConnection;
use roce::analysis::report::{FlowReport, RequesterReport};
use roce::wire::{Psn, Qpn};
use serde::Serialize;

#[derive(Serialize)]
struct Document<'r> {
    packets: u64,
    roce_packets: u64,
    /// Of which RoCEv1 (EtherType 0x8915).
    roce_v1_packets: u64,
    icrc_errors: u64,
    ip_header_errors: u64,
    flows: Flows<'r>,
    start_time: Option<f64>,
    duration_us: f64,
    goodput_bucket_us: f64,
    connections: Vec<Connection>,
    input: Input,
    /// What `--max-flows` and the rdma_cm tracker's limit left out.
    untracked: Untracked,
    pfc: super::pfc::Pfc,
    /// `roce analyze --live`: the interface, the interval and what it carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<serde_json::Value>,
    /// The frames that were not RoCE, by kind (`IN_VXLAN`, `ARP`, ...).
    not_roce: NotRoce,
}

#[derive(Serialize)]
struct NotRoce {
    frames: u64,
    by_kind: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct Untracked {
    max_flows: usize,
    max_memory_mib: usize,
    flows: u64,
    packets: u64,
    cm_connections: u64,
    /// The RoCEv2 packet after which `--max-memory` was reached, or null.
    memory_full_at: Option<u64>,
}

#[derive(Serialize)]
struct Flow {
    src: String,
    dst: String,
    dest_qp: Qpn,
    packets: u64,
    opcodes: BTreeMap<&'static str, u64>,
    retransmitted_packets: u64,
    naks: BTreeMap<&'static str, u64>,
    rnr_naks: u64,
    cnps: u64,
    ecn_ce: u64,
    payload_bytes: u64,
    index: usize,
    udp_src_port: u16,
    icrc_errors: u64,
    first_us: f64,
    last_us: f64,
    reverse_flow: Option<usize>,
    goodput_bytes: Vec<u64>,
    rate_changes: Vec<RateChange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requester: Option<Requester>,
    priority: u8,
    priority_from: &'static str,
    pfc_stalls: u32,
    pfc_stalled_us: f64,
    /// 1: RoCEv1 (`src`, `dst` are GIDs), 2: RoCEv2.
    roce_version: u8,
}

#[derive(Serialize)]
struct RateChange {
    signal: &'static str,
    at_us: f64,
    gap_before_us: f64,
    gap_after_us: f64,
}

#[derive(Serialize)]
struct Requester {
    messages: BTreeMap<&'static str, u64>,
    message_bytes: u64,
    messages_acknowledged: u64,
    orphan_packets: u64,
    broken_messages: u64,
    highest_psn: Option<Psn>,
    psn_wraps: u64,
    msn_first: Option<u32>,
    msn_last: Option<u32>,
    go_back_n_episodes: u64,
    packets_resent: u64,
    episodes: Vec<Episode>,
    nak_causes: BTreeMap<&'static str, u64>,
    nak_events: Vec<NakEvent>,
    rnr_events: Vec<RnrEvent>,
    implied_naks: u64,
    implied_nak_events: Vec<ImpliedNak>,
    acks_naming_reads: u64,
    ack_naming_read_events: Vec<AckNaming>,
    rtt_us: Option<Rtt>,
}

#[derive(Serialize)]
struct Episode {
    first_psn: Psn,
    trigger: &'static str,
    trigger_us: f64,
    start_us: f64,
    packets_resent: u64,
    time_to_recover_us: Option<f64>,
    interrupted: bool,
}

#[derive(Serialize)]
struct NakEvent {
    at_us: f64,
    psn: Psn,
    nak: &'static str,
    cause: &'static str,
    request: Option<&'static str>,
}

#[derive(Serialize)]
struct RnrEvent {
    at_us: f64,
    psn: Psn,
    min_wait_us: u32,
    waited_us: Option<f64>,
}

#[derive(Serialize)]
struct AckNaming {
    at_us: f64,
    psn: Psn,
    request: &'static str,
}

#[derive(Serialize)]
struct ImpliedNak {
    at_us: f64,
    expected_psn: Psn,
    got_psn: Psn,
}

#[derive(Serialize)]
struct Rtt {
    samples: u64,
    min: f64,
    median: f64,
    p99: f64,
    max: f64,
}

#[derive(Serialize)]
struct Connection {
    client: String,
    server: String,
    client_qpn: Option<Qpn>,
    server_qpn: Option<Qpn>,
    client_comm_id: u32,
    server_comm_id: Option<u32>,
    service_id: Option<String>,
    client_start_psn: Option<Psn>,
    server_start_psn: Option<Psn>,
    state: &'static str,
    reject_reason: Option<u16>,
    events: Vec<CmEvent>,
}

#[derive(Serialize)]
struct CmEvent {
    message: &'static str,
    at_us: f64,
    from: &'static str,
}

#[derive(Serialize)]
struct Input {
    damaged: Option<String>,
    cut_frames: u64,
    malformed_frames: u64,
    malformed_examples: Vec<Malformed>,
}

#[derive(Serialize)]
struct Malformed {
    /// Position in the capture from 0.
    index: u64,
    /// Wireshark's frame number: `index + 1`.
    frame: u64,
    error: String,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Times relative to the capture's start.
struct Clock(u64);

impl Clock {
    fn at(&self, ts: u64) -> f64 {
        us(ts.saturating_sub(self.0))
    }
}

/// The flows, each turned into its document as it is written (a capture of many flows must
/// not hold all their documents at once: issue 14).
struct Flows<'r> {
    flows: &'r [FlowReport],
    clock: Clock,
}

impl Serialize for Flows<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.flows
                .iter()
                .enumerate()
                .map(|(i, f)| flow(i, f, &self.clock)),
        )
    }
}

fn flow(i: usize, f: &FlowReport, clock: &Clock) -> Flow {
    Flow {
        src: f.src.to_string(),
        dst: f.dst.to_string(),
        dest_qp: f.dest_qp,
        packets: f.packets,
        opcodes: f.opcodes.iter().copied().collect(),
        retransmitted_packets: f.retransmitted_packets,
        naks: f.naks.iter().copied().collect(),
        rnr_naks: f.rnr_naks,
        cnps: f.cnps,
        ecn_ce: f.ecn_ce,
        payload_bytes: f.payload_bytes,
        index: i,
        udp_src_port: f.udp_src_port,
        icrc_errors: f.icrc_errors,
        first_us: clock.at(f.first_ts),
        last_us: clock.at(f.last_ts),
        reverse_flow: f.reverse,
        goodput_bytes: f.goodput.clone(),
        rate_changes: f
            .rate_changes
            .iter()
            .map(|c| RateChange {
                signal: c.signal.name(),
                at_us: clock.at(c.ts),
                gap_before_us: us(c.gap_before_ns),
                gap_after_us: us(c.gap_after_ns),
            })
            .collect(),
        requester: f.requester.as_ref().map(|r| requester(r, clock)),
        priority: f.priority,
        priority_from: super::pfc::priority_from(f.priority_from_pcp),
        pfc_stalls: f.pfc_stalls,
        pfc_stalled_us: us(f.pfc_stalled_ns),
        roce_version: f.roce_version,
    }
}

fn requester(r: &RequesterReport, clock: &Clock) -> Requester {
    Requester {
        messages: r.messages.iter().map(|(k, n)| (k.name(), *n)).collect(),
        message_bytes: r.message_bytes,
        messages_acknowledged: r.messages_acknowledged,
        orphan_packets: r.orphan_packets,
        broken_messages: r.broken_messages,
        highest_psn: r.highest_psn,
        psn_wraps: r.psn_wraps,
        msn_first: r.msn_first,
        msn_last: r.msn_last,
        go_back_n_episodes: r.episodes,
        packets_resent: r.packets_resent,
        episodes: r
            .episode_list
            .iter()
            .map(|e| Episode {
                first_psn: e.first_psn,
                trigger: e.trigger.name(),
                trigger_us: clock.at(e.trigger_ts),
                start_us: clock.at(e.start_ts),
                packets_resent: e.packets_resent,
                time_to_recover_us: e.time_to_recover_ns().map(us),
                interrupted: e.interrupted,
            })
            .collect(),
        nak_causes: r.nak_causes.iter().map(|(c, n)| (c.name(), *n)).collect(),
        nak_events: r
            .nak_events
            .iter()
            .map(|e| NakEvent {
                at_us: clock.at(e.ts),
                psn: e.psn,
                nak: e.code.name(),
                cause: e.cause.name(),
                request: e.request.map(|k| k.name()),
            })
            .collect(),
        rnr_events: r
            .rnr_events
            .iter()
            .map(|e| RnrEvent {
                at_us: clock.at(e.ts),
                psn: e.psn,
                min_wait_us: e.min_wait_us,
                waited_us: e.wait_ns.map(us),
            })
            .collect(),
        implied_naks: r.implied_naks,
        implied_nak_events: r
            .implied_nak_events
            .iter()
            .map(|e| ImpliedNak {
                at_us: clock.at(e.ts),
                expected_psn: e.expected,
                got_psn: e.got,
            })
            .collect(),
        acks_naming_reads: r.acks_naming_reads,
        ack_naming_read_events: r
            .ack_naming_read_events
            .iter()
            .map(|e| AckNaming {
                at_us: clock.at(e.ts),
                psn: e.psn,
                request: e.request.name(),
            })
            .collect(),
        rtt_us: r.rtt.map(|t| Rtt {
            samples: t.samples,
            min: us(t.min_ns),
            median: us(t.median_ns),
            p99: us(t.p99_ns),
            max: us(t.max_ns),
        }),
    }
}

fn connection(c: &CmConnection, clock: &Clock) -> Connection {
    Connection {
        client: c.client.to_string(),
        server: c.server.to_string(),
        client_qpn: c.client_qpn,
        server_qpn: c.server_qpn,
        client_comm_id: c.client_comm_id,
        server_comm_id: c.server_comm_id,
        service_id: c.service_id.map(|s| format!("{s:#018x}")),
        client_start_psn: c.client_start_psn,
        server_start_psn: c.server_start_psn,
        state: c.state.name(),
        reject_reason: c.reject_reason,
        events: c
            .events
            .iter()
            .map(|e| CmEvent {
                message: e.kind.name(),
                at_us: clock.at(e.ts),
                from: if e.from_client { "client" } else { "server" },
            })
            .collect(),
    }
}

/// The report as one pretty-printed JSON document.
pub fn render(r: &Report) -> serde_json::Result<String> {
    let mut out = Vec::new();
    write(r, &mut out)?;
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Writes the report as one pretty-printed JSON document to `w`, a flow at a time.
pub fn write(r: &Report, w: impl std::io::Write) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Pretty::default());
    document(r).serialize(&mut ser)
}

/// Levels of indent [`Pretty`] writes from [`LINE`] in one go (the report nests 6 deep).
const LINE_LEVELS: usize = 32;
/// A comma, a line break and [`LINE_LEVELS`] indents of two spaces.
const LINE: [u8; 2 + 2 * LINE_LEVELS] = {
    let mut line = [b' '; 2 + 2 * LINE_LEVELS];
    line[0] = b',';
    line[1] = b'\n';
    line
};

/// `serde_json`'s pretty printer (`PrettyFormatter`, two spaces), byte for byte, in fewer
/// writes: it writes a line break and then each level of indent on its own, and on a capture
/// of many flows indent is most of the report's 2 MB (goodput buckets 8 levels deep), so that
/// most of the time writing the report went to small writes. Here the comma, the break and
/// the indent of a line are one write.
#[derive(Debug, Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    /// Starts a line of the current depth: `,` unless `first`, a break, the indent.
    fn line<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        let from = usize::from(first);
        if self.depth <= LINE_LEVELS {
            return w.write_all(&LINE[from..2 + 2 * self.depth]);
        }
        w.write_all(&LINE[from..2])?;
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(w, true)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Writes the report as one JSON document on one line (no newline at its end): the JSON
/// lines of `roce analyze --live --json`.
pub fn write_line(
    r: &Report,
    live: serde_json::Value,
    w: impl std::io::Write,
) -> serde_json::Result<()> {
    let mut doc = document(r);
    doc.live = Some(live);
    serde_json::to_writer(w, &doc)
}

fn document(r: &Report) -> Document<'_> {
    let clock = Clock(r.first_ts.unwrap_or(0));
    Document {
        packets: r.packets,
        roce_packets: r.roce_packets,
        roce_v1_packets: r.roce_v1_packets,
        icrc_errors: r.icrc_errors,
        ip_header_errors: r.ip_header_errors,
        flows: Flows {
            flows: &r.flows,
            clock: Clock(clock.0),
        },
        start_time: r.first_ts.map(|t| t as f64 / 1e9),
        duration_us: r.last_ts.map_or(0.0, |l| clock.at(l)),
        goodput_bucket_us: us(r.goodput_bucket_ns),
        connections: r
            .connections
            .iter()
            .map(|c| connection(c, &clock))
            .collect(),
        not_roce: NotRoce {
            frames: r.not_roce.frames,
            by_kind: r
                .not_roce
                .by_kind
                .iter()
                .map(|(k, n)| (k.name(), *n))
                .collect(),
        },
        input: Input {
            damaged: r.input.damage.clone(),
            cut_frames: r.input.cut_frames,
            malformed_frames: r.input.malformed_frames,
            malformed_examples: r
                .input
                .malformed_examples
                .iter()
                .map(|(index, error)| Malformed {
                    index: *index,
                    frame: index + 1,
                    error: error.clone(),
                })
                .collect(),
        },
        untracked: Untracked {
            max_flows: r.limits.max_flows,
            max_memory_mib: r.limits.max_bytes >> 20,
            flows: r.untracked.flows,
            packets: r.untracked.packets,
            cm_connections: r.untracked.cm_connections,
            memory_full_at: r.untracked.memory_full_at,
        },
        pfc: super::pfc::json(r),
        live: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `value` through [`Pretty`].
    fn pretty(value: &impl Serialize) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Pretty::default());
        value.serialize(&mut ser).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn pretty_writes_what_serde_json_writes() {
        let mut deep = serde_json::json!([1, {}, []]);
        for i in 0..40 {
            deep = serde_json::json!({ "level": i, "inner": [deep, [], {}], "s": "a\"b\n" });
        }
        let values = [
            serde_json::json!(null),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!({ "a": [], "b": {}, "c": [[], [{}], { "d": [1, 2.5, "x"] }] }),
            deep,
        ];
        for v in &values {
            assert_eq!(pretty(v), serde_json::to_string_pretty(v).unwrap());
        }
    }

    #[test]
    fn the_report_is_what_serde_json_writes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps");
        let mut compared = 0;
        for entry in std::fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "pcap") {
                continue;
            }
            let report = super::super::analyse(&path, 1, Default::default()).unwrap();
            let doc = document(&report);
            assert_eq!(
                render(&report).unwrap(),
                serde_json::to_string_pretty(&doc).unwrap()
            );
            compared += 1;
        }
        assert!(compared >= 20, "the captures in pcaps/: {compared}");
    }
}
