//! Replay analysis: what two RoCEv2 transports were doing, rebuilt from a capture in one
//! streaming pass.
//!
//! [`Analyzer::frame`] takes the frames of a capture in order ([`crate::capture`] reads them);
//! [`Analyzer::report`] says what happened, per flow (one direction of traffic to one
//! destination QP): packets and opcodes, retransmitted packets, go-back-N episodes, NAKs and
//! where the lost packet went missing, RNR NAKs and the wait, implied NAKs, messages and MSNs,
//! request-to-ACK round-trip times, goodput over time, CNPs and ECN CE marks with the change of
//! packet spacing that followed, ICRC errors; and the rdma_cm connections that tie QPs
//! together. Per-flow state has a fixed size: memory grows with flows, never with packets.
//!
//! A flow's requests are followed by a [`requester`] state fed with the responses of the
//! reverse flow; the two directions of a connection are paired by the CM handshake when the
//! capture has it, otherwise by the responses' PSNs (see [`Analyzer::reverse_of`]).

pub mod cm;
mod flow;
pub mod report;
mod requester;
pub mod seen;
pub mod sketch;
mod summary;

#[cfg(test)]
mod tests;

use crate::capture::Frame;
use crate::wire::encap::rxe_udp_src_port;
use crate::wire::opcode::op;
use crate::wire::{
    AethRepr, BthRepr, Ecn, FixedHeader, Headers, IpRepr, Opcode, Psn, Qpn, RocePacket, Syndrome,
    Transport,
};

use cm::{CmMessage, CmTracker};
use flow::{FastMap, Flow, FlowKey, addr_bits};
use report::Signal;
pub use report::{InputProblems, Report};
use requester::Response;
pub use requester::Verdict;
use sketch::GoodputClock;

/// Malformed frames described in the report (the rest are only counted).
const MALFORMED_EXAMPLES: usize = 8;
/// Largest frame a snap-length-cut record can claim: a 64 KiB IP packet plus Ethernet, a VLAN
/// tag and an FCS. A longer claim is a corrupt record, not a frame.
const MAX_ORIG_LEN: u32 = 65_535 + 14 + 4 + 4;

/// What one frame was, for per-packet views such as the ladder diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not RoCEv2.
    NotRoce,
    /// Meant for UDP 4791 but not a well-formed RoCEv2 packet.
    Malformed,
    Roce(PacketNote),
}

/// A RoCEv2 packet as the analysis saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketNote {
    /// Index of its flow in [`Report::flows`].
    pub flow: usize,
    pub ts: u64,
    pub opcode: Opcode,
    pub psn: Psn,
    pub syndrome: Option<Syndrome>,
    pub payload_len: u32,
    /// A request whose PSN the flow already carried (the counted definition).
    pub retransmitted: bool,
    /// `None` when the frame was cut before its ICRC.
    pub icrc_ok: Option<bool>,
    pub ecn_ce: bool,
    pub verdict: Verdict,
}

/// The fields of a packet the analysis uses, read once.
struct Fields<'p> {
    ts: u64,
    ip: &'p IpRepr<'p>,
    udp_src_port: u16,
    opcode: Opcode,
    dest_qp: Qpn,
    psn: Psn,
    syndrome: Option<Syndrome>,
    msn: Option<crate::wire::Msn>,
    payload_len: u32,
    /// The payload as captured (cut frames: only what the capture kept).
    payload: &'p [u8],
    icrc_ok: Option<bool>,
    ecn_ce: bool,
}

/// The streaming analyser. Feed it every frame, then ask for the report.
#[derive(Debug, Default)]
pub struct Analyzer {
    flows: Vec<Flow>,
    index: FastMap<FlowKey, u32>,
    /// The flow of the previous packet: consecutive packets usually share one.
    last: Option<(FlowKey, u32)>,
    /// Flows by (source, destination) address, to find a flow's reverse.
    by_hosts: FastMap<(u128, u128), Vec<u32>>,
    /// Flow keys the CM handshake tied together, both ways.
    cm_pairs: FastMap<FlowKey, FlowKey>,
    cm: CmTracker,
    packets: u64,
    roce_packets: u64,
    icrc_errors: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    clock: GoodputClock,
    input: InputProblems,
    /// Reused to pad a snap-length-cut frame back to its length for the slicer.
    scratch: Vec<u8>,
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    /// Analyses the next frame of the capture.
    pub fn frame(&mut self, frame: &Frame<'_>) -> Outcome {
        self.frame_checked(frame, None)
    }

    /// As [`Analyzer::frame`], with the frame's [`icrc_check`] already worked out (by another
    /// thread, say) when `icrc` is `Some`.
    pub fn frame_checked(&mut self, frame: &Frame<'_>, icrc: Option<bool>) -> Outcome {
        self.packets += 1;
        let ts = frame.timestamp_ns;
        let start = *self.first_ts.get_or_insert(ts);
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        self.clock.advance(ts.saturating_sub(start));
        if frame.is_cut() {
            return self.cut_frame(frame);
        }
        // Used in place: moving the parsed packet out of its `Result` would copy it with
        // loads wider than the stores that wrote it, a stall on every packet.
        let parsed = frame.roce();
        match &parsed {
            Ok(p) => {
                let icrc_ok = Some(icrc.unwrap_or_else(|| p.icrc_ok()));
                Outcome::Roce(self.packet(fields(p, ts, icrc_ok, p.payload())))
            }
            Err(e) if e.is_not_roce() => Outcome::NotRoce,
            Err(e) => self.malformed(frame.index, e.to_string()),
        }
    }

    /// A frame a snap length cut: padded back to its length with zeros so the slicer reads
    /// its headers; its ICRC and the payload past the cut are unknown.
    fn cut_frame(&mut self, frame: &Frame<'_>) -> Outcome {
        self.input.cut_frames += 1;
        if frame.orig_len > MAX_ORIG_LEN {
            let why = format!("record claims a {}-byte frame", frame.orig_len);
            return self.malformed(frame.index, why);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(frame.data);
        scratch.resize(frame.orig_len as usize, 0);
        let padded = Frame {
            data: &scratch,
            ..*frame
        };
        let outcome = match padded.roce() {
            Ok(p) => {
                let offset = p.payload().as_ptr() as usize - scratch.as_ptr() as usize;
                let kept = frame.data.len().saturating_sub(offset);
                let payload = &p.payload()[..kept.min(p.payload().len())];
                let f = fields(&p, frame.timestamp_ns, None, payload);
                Outcome::Roce(self.packet(f))
            }
            Err(e) if e.is_not_roce() => Outcome::NotRoce,
            Err(e) => self.malformed(frame.index, e.to_string()),
        };
        self.scratch = scratch;
        outcome
    }

    fn malformed(&mut self, index: u64, why: String) -> Outcome {
        self.input.malformed_frames += 1;
        if self.input.malformed_examples.len() < MALFORMED_EXAMPLES {
            self.input.malformed_examples.push((index, why));
        }
        Outcome::Malformed
    }

    /// The capture is damaged; nothing after this can be read.
    pub fn damaged(&mut self, reason: String) {
        self.input.damage = Some(reason);
    }

    fn flow_id(&mut self, f: &Fields<'_>) -> u32 {
        // Straight from the header's addresses: going through `IpAddr` here costs a store
        // the next load cannot forward from, on every packet.
        let (src, dst) = match f.ip {
            IpRepr::V4(v4) => (
                u128::from(v4.src.to_ipv6_mapped()),
                u128::from(v4.dst.to_ipv6_mapped()),
            ),
            IpRepr::V6(v6) => (u128::from(v6.src), u128::from(v6.dst)),
        };
        let key = FlowKey {
            src,
            dst,
            qp: f.dest_qp.value(),
        };
        if let Some((k, id)) = self.last
            && k == key
        {
            return id;
        }
        let id = match self.index.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.flows.len() as u32;
                let (src, dst) = (f.ip.src_addr(), f.ip.dst_addr());
                self.flows
                    .push(Flow::new(src, dst, f.dest_qp, f.udp_src_port, f.ts));
                self.index.insert(key, id);
                self.by_hosts
                    .entry((key.src, key.dst))
                    .or_default()
                    .push(id);
                if let Some(other) = self.cm_pairs.get(&key).and_then(|k| self.index.get(k)) {
                    let other = *other;
                    self.link(id, other);
                }
                id
            }
        };
        self.last = Some((key, id));
        id
    }

    fn link(&mut self, a: u32, b: u32) {
        self.flows[a as usize].reverse = Some(b);
        self.flows[b as usize].reverse = Some(a);
    }

    /// The reverse flow of `id` (same connection, other direction), pairing it if need be.
    ///
    /// Without a CM handshake nothing on the wire names the requester's QP in its requests, so
    /// the candidates are the unpaired flows between the same two hosts the other way. With
    /// more than one, prefer the flow whose requests reached `psn` (the PSN a response
    /// carries is the requester's), then one with an rxe UDP source port that fits (RC
    /// flows of recent kernels use the same port both ways, derived from both QPNs; older
    /// ones derive it from the sender's QPN, this flow's destination QP), then the busiest.
    fn reverse_of(&mut self, id: u32, psn: Option<Psn>) -> Option<u32> {
        let flow = &self.flows[id as usize];
        if flow.reverse.is_some() {
            return flow.reverse;
        }
        let back = (addr_bits(flow.dst), addr_bits(flow.src));
        let ports = [flow.udp_src_port, rxe_udp_src_port(flow.dest_qp)];
        let candidates = self.by_hosts.get(&back)?;
        let best = candidates
            .iter()
            .copied()
            .filter(|&c| self.flows[c as usize].reverse.is_none() && c != id)
            .max_by_key(|&c| {
                let f = &self.flows[c as usize];
                let reached = match (psn, f.requester.as_ref().and_then(|r| r.high())) {
                    (Some(p), Some(h)) => (0..=seen::WINDOW as i32).contains(&h.distance(p)),
                    _ => false,
                };
                (reached, ports.contains(&f.udp_src_port), f.packets)
            })?;
        self.link(id, best);
        Some(best)
    }

    fn packet(&mut self, f: Fields<'_>) -> PacketNote {
        self.roce_packets += 1;
        let id = self.flow_id(&f);
        let since_start = f.ts.saturating_sub(self.first_ts.unwrap_or(f.ts));
        let clock = self.clock;
        let transport_ok = f.icrc_ok != Some(false);
        let flow = &mut self.flows[id as usize];
        flow.packets += 1;
        flow.opcodes[usize::from(f.opcode.value())] += 1;
        flow.payload_bytes += u64::from(f.payload_len);
        flow.last_ts = f.ts;
        if f.icrc_ok == Some(false) {
            flow.icrc_errors += 1;
            self.icrc_errors += 1;
        }
        if let Some(gap) = flow.spacing.packet(f.ts) {
            flow.rate.gap(gap);
        }
        let mut note = PacketNote {
            flow: id as usize,
            ts: f.ts,
            opcode: f.opcode,
            psn: f.psn,
            syndrome: f.syndrome,
            payload_len: f.payload_len,
            retransmitted: false,
            icrc_ok: f.icrc_ok,
            ecn_ce: f.ecn_ce,
            verdict: Verdict::default(),
        };
        if f.ecn_ce {
            flow.ecn_ce += 1;
            let spacing = flow.spacing.clone();
            flow.rate.signal(Signal::EcnCe, f.ts, &spacing);
        }
        let transport = f.opcode.transport();
        let new_data = match transport {
            Transport::Rc | Transport::Uc if f.opcode.is_request() => {
                let requester = flow.requester();
                note.retransmitted = requester.seen.observe(f.psn);
                if note.retransmitted {
                    flow.retransmitted += 1;
                }
                let requester = flow.requester();
                if transport == Transport::Rc && transport_ok {
                    note.verdict = requester.request(f.ts, f.opcode, f.psn, f.payload_len);
                }
                !note.retransmitted
            }
            Transport::Rc => {
                count_aeth(flow, f.syndrome);
                if transport_ok {
                    note.verdict = self.response(id, &f);
                }
                is_read_response(f.opcode) && !note.verdict.implied_nak
            }
            Transport::Cnp => {
                flow.cnps += 1;
                if let Some(target) = self.reverse_of(id, None) {
                    let t = &mut self.flows[target as usize];
                    let spacing = t.spacing.clone();
                    t.rate.signal(Signal::Cnp, f.ts, &spacing);
                }
                false
            }
            Transport::Ud => {
                if f.dest_qp == Qpn::GSI
                    && let Some(m) = CmMessage::parse(f.payload)
                {
                    self.cm_message(&f, &m);
                }
                true
            }
            _ => false,
        };
        if new_data && f.payload_len > 0 {
            let flow = &mut self.flows[id as usize];
            flow.goodput
                .add(clock, since_start, u64::from(f.payload_len));
        }
        note
    }

    /// A response on flow `id` answers the requests of its reverse flow.
    fn response(&mut self, id: u32, f: &Fields<'_>) -> Verdict {
        let kind = match (f.opcode.low(), f.syndrome) {
            (op::ATOMIC_ACKNOWLEDGE, _) => Response::Atomic,
            (op::RDMA_READ_RESPONSE_FIRST..=op::RDMA_READ_RESPONSE_ONLY, _) => {
                Response::Read(f.opcode)
            }
            (_, Some(Syndrome::Ack { .. })) => Response::Ack,
            (_, Some(Syndrome::Nak(code))) => Response::Nak(code),
            (_, Some(Syndrome::RnrNak { timer })) => Response::Rnr {
                min_wait_us: timer.micros(),
            },
            _ => return Verdict::default(),
        };
        let Some(target) = self.reverse_of(id, Some(f.psn)) else {
            return Verdict::default();
        };
        match self.flows[target as usize].requester.as_mut() {
            Some(r) => r.response(f.ts, f.psn, f.msn, kind),
            None => Verdict::default(),
        }
    }

    fn cm_message(&mut self, f: &Fields<'_>, m: &CmMessage) {
        let (src, dst) = (f.ip.src_addr(), f.ip.dst_addr());
        let Some(i) = self.cm.message(src, dst, f.ts, m) else {
            return;
        };
        let Some(c) = self.cm.get(i) else {
            return;
        };
        let (Some(client_qpn), Some(server_qpn)) = (c.client_qpn, c.server_qpn) else {
            return;
        };
        let to_server = FlowKey {
            src: addr_bits(c.client),
            dst: addr_bits(c.server),
            qp: server_qpn.value(),
        };
        let to_client = FlowKey {
            src: to_server.dst,
            dst: to_server.src,
            qp: client_qpn.value(),
        };
        self.cm_pairs.insert(to_server, to_client);
        self.cm_pairs.insert(to_client, to_server);
        if let (Some(&a), Some(&b)) = (self.index.get(&to_server), self.index.get(&to_client)) {
            self.link(a, b);
        }
    }

    /// Everything found so far (the analyser can go on afterwards).
    pub fn report(&self) -> Report {
        summary::report(self)
    }
}

/// Whether a whole RoCEv2 frame's ICRC is right; `None` for a frame cut by a snap length or
/// not RoCEv2. This is the costly part of [`Analyzer::frame`] that needs no state, so it can
/// be worked out ahead, on another thread, and given to [`Analyzer::frame_checked`].
pub fn icrc_check(frame: &Frame<'_>) -> Option<bool> {
    if frame.is_cut() {
        return None;
    }
    frame.roce().ok().map(|p| p.icrc_ok())
}

fn is_read_response(opcode: Opcode) -> bool {
    (op::RDMA_READ_RESPONSE_FIRST..=op::RDMA_READ_RESPONSE_ONLY).contains(&opcode.low())
}

fn count_aeth(flow: &mut Flow, syndrome: Option<Syndrome>) {
    match syndrome {
        Some(Syndrome::Nak(code)) => flow.naks[usize::from(code.code())] += 1,
        Some(Syndrome::RnrNak { .. }) => flow.rnr_naks += 1,
        _ => {}
    }
}

fn fields<'p>(
    p: &'p RocePacket<'_>,
    ts: u64,
    icrc_ok: Option<bool>,
    payload: &'p [u8],
) -> Fields<'p> {
    let bth = p.bth();
    // Every opcode that carries an AETH carries it first, right after the BTH (IBA 9.2:
    // ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, READ responses), so only those four bytes are read.
    let aeth = bth
        .opcode
        .info()
        .filter(|i| i.headers.contains(Headers::AETH))
        .and_then(|_| p.packet_bytes().get(p.bth_offset() + BthRepr::LEN..))
        .and_then(|b| AethRepr::parse(b).ok());
    Fields {
        ts,
        ip: p.ip(),
        udp_src_port: p.udp().src_port,
        opcode: bth.opcode,
        dest_qp: bth.dest_qp,
        psn: bth.psn,
        syndrome: aeth.map(|a| a.syndrome),
        msn: aeth.map(|a| a.msn),
        payload_len: p.payload().len() as u32,
        payload,
        icrc_ok,
        ecn_ce: p.ecn() == Ecn::Ce,
    }
}
