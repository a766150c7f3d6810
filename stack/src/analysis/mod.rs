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
//!
//! What it holds is bounded whatever the capture (issue 14): a flow starts at a few hundred
//! bytes and grows only with what its packets need (`flow.rs`), at most
//! [`Limits::max_flows`] flows are followed (packets of later ones are counted, and the flows
//! too, in [`Untracked`]), finding a reverse flow looks at [`REVERSE_CANDIDATES`] flows at
//! most, and rdma_cm connections are found by an index and capped ([`cm`]). Every step costs
//! the same however many flows or connections came before.

pub mod cm;
mod flow;
pub mod not_roce;
pub mod pfc;
pub mod report;
mod requester;
pub mod seen;
pub mod sketch;
mod summary;

#[cfg(test)]
mod tests;

use core::net::{IpAddr, Ipv6Addr};

use crate::capture::{Frame, FrameError};
use crate::wire::encap::{
    ETHERNET_FCS_LEN, ETHERNET_HEADER_LEN, EthernetRepr, VLAN_TAG_LEN, rxe_udp_src_port,
};
use crate::wire::grh::RoceV1Packet;
use crate::wire::opcode::op;
use crate::wire::{
    AethRepr, BthRepr, Ecn, FixedHeader, Headers, IpRepr, Ipv6Repr, NotRoce, Opcode, PacketError,
    Psn, Qpn, Reth, RocePacket, Syndrome, Transport,
};

use cm::{CmMessage, CmTracker};
use flow::{FastMap, FastSet, Flow, FlowKey, addr_bits};
use report::Signal;
pub use report::{InputProblems, Report, Untracked};
use requester::Response;
pub use requester::Verdict;
use sketch::GoodputClock;

/// Malformed frames described in the report (the rest are only counted).
const MALFORMED_EXAMPLES: usize = 8;
/// Largest frame a snap-length-cut record can claim: a 64 KiB IP packet plus Ethernet, a VLAN
/// tag and an FCS. A longer claim is a corrupt record, not a frame.
const MAX_ORIG_LEN: u32 = 65_535 + (ETHERNET_HEADER_LEN + VLAN_TAG_LEN + ETHERNET_FCS_LEN) as u32;

/// What one frame was, for per-packet views such as the ladder diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not RoCEv2.
    NotRoce,
    /// Meant for UDP 4791 but not a well-formed RoCEv2 packet.
    Malformed,
    /// A RoCEv2 packet of a followed flow, and what the analysis made of it.
    Roce(PacketNote),
    /// RoCEv2, of a flow beyond [`Limits::max_flows`] or after [`Limits::max_bytes`] was
    /// reached: counted, not followed.
    Untracked,
}

/// Flows followed by default (`roce analyze --max-flows`).
pub const DEFAULT_MAX_FLOWS: usize = 500_000;
/// Bytes of flow state held by default (`roce analyze --max-memory`, in MiB): with the
/// report built from it and the rest, the analyser stays under 1 GB.
pub const DEFAULT_MAX_BYTES: usize = 384 << 20;
/// Flows of the other direction looked at, the most recent first, when a response or a CNP
/// needs its flow's reverse (see [`Analyzer::reverse_of`]).
pub const REVERSE_CANDIDATES: usize = 64;
/// Distinct untracked flows counted exactly; beyond, "at least" this many.
const UNTRACKED_COUNTED: usize = 1 << 20;

/// How much the analyser may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Flows followed; the packets of any further flow are counted only.
    pub max_flows: usize,
    /// Bytes of state held (flows, their indexes): once reached, no flow is followed any
    /// further and later packets are counted only.
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_flows: DEFAULT_MAX_FLOWS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Set in a flow key's QP for RoCEv1 flows.
const ROCE_V1_KEY_BIT: u32 = 1 << 31;

/// No flow (the end of an unpaired list).
const NONE: u32 = u32::MAX;

/// The flows one way between two hosts not yet paired with a reverse, oldest to newest,
/// linked through `Flow::unpaired`.
#[derive(Debug, Clone, Copy)]
struct Unpaired {
    oldest: u32,
    newest: u32,
}

/// A RoCEv2 packet as the analysis saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketNote {
    /// Index of its flow in [`Report::flows`].
    pub flow: usize,
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts: u64,
    /// The BTH opcode.
    pub opcode: Opcode,
    /// The BTH PSN.
    pub psn: Psn,
    /// The AETH syndrome of an acknowledgement or NAK.
    pub syndrome: Option<Syndrome>,
    /// Payload bytes after the headers, before the pad.
    pub payload_len: u32,
    /// A request whose PSN the flow already carried (the counted definition).
    pub retransmitted: bool,
    /// `None` when the frame was cut before its ICRC.
    pub icrc_ok: Option<bool>,
    /// The IP ECN field was CE.
    pub ecn_ce: bool,
    /// What the packet meant to its flow's requester.
    pub verdict: Verdict,
}

/// The fields of a packet the analysis uses, read once.
#[derive(Debug, Clone, Copy)]
struct Fields<'p> {
    ts: u64,
    /// The source and destination addresses as [`FlowKey`] holds them (IPv4 mapped into
    /// IPv6), and whether they were IPv4.
    src: u128,
    dst: u128,
    v4: bool,
    udp_src_port: u16,
    opcode: Opcode,
    dest_qp: Qpn,
    psn: Psn,
    syndrome: Option<Syndrome>,
    msn: Option<crate::wire::Msn>,
    payload_len: u32,
    /// A READ request's DMA length (its RETH's): how many responses it asks for.
    read_len: Option<u32>,
    /// The payload as captured (cut frames: only what the capture kept).
    payload: &'p [u8],
    icrc_ok: Option<bool>,
    /// An IPv4 header the RoCEv2 annex makes a receiver drop the packet for.
    ip_header_bad: bool,
    ecn_ce: bool,
    /// The sender's MAC (zeros without an Ethernet header).
    src_mac: [u8; 6],
    /// The PFC priority the packet rides, and whether it came from an 802.1Q tag.
    priority: (u8, bool),
    /// RoCEv1: the addresses are the GRH's GIDs, and there is no UDP.
    roce_v1: bool,
}

impl Fields<'_> {
    fn src_addr(&self) -> IpAddr {
        addr_from_bits(self.src, self.v4)
    }
    fn dst_addr(&self) -> IpAddr {
        addr_from_bits(self.dst, self.v4)
    }
}

/// An address as [`FlowKey`] holds it, back as it was on the wire.
fn addr_from_bits(bits: u128, v4: bool) -> IpAddr {
    let v6 = Ipv6Addr::from(bits);
    match v6.to_ipv4_mapped() {
        Some(a) if v4 => IpAddr::V4(a),
        _ => IpAddr::V6(v6),
    }
}

/// What [`Analyzer::frame`] works out of a whole RoCEv2 frame before it needs any state: the
/// frame sliced into its layers, the fields the analysis reads, whether its ICRC is right.
/// [`slice_ahead`] makes it (on another thread, say) and [`Analyzer::frame_sliced`] takes it,
/// so that the analysing thread reads nothing of the frame but the payload of an rdma_cm MAD.
#[derive(Debug, Clone, Copy)]
pub struct Sliced {
    fields: Fields<'static>,
    /// Where the payload starts in the frame (its length is `fields.payload_len`).
    payload_at: u32,
}

/// The streaming analyser. Feed it every frame, then ask for the report.
#[derive(Debug, Default)]
pub struct Analyzer {
    flows: Vec<Flow>,
    index: FastMap<FlowKey, u32>,
    /// The flow of the previous packet: consecutive packets usually share one.
    last: Option<(FlowKey, u32)>,
    /// Unpaired flows by (source, destination) address, to find a flow's reverse.
    unpaired: FastMap<(u128, u128), Unpaired>,
    limits: Limits,
    untracked: Untracked,
    /// Hashes of the untracked flows' keys, to count them (up to [`UNTRACKED_COUNTED`]).
    untracked_keys: FastSet<u64>,
    /// Flow keys the CM handshake tied together, both ways.
    cm_pairs: FastMap<FlowKey, FlowKey>,
    cm: CmTracker,
    packets: u64,
    roce_packets: u64,
    /// Of which RoCEv1.
    roce_v1_packets: u64,
    icrc_errors: u64,
    /// RoCEv2 packets whose IPv4 header a receiver drops ([`RocePacket::ipv4_violation`]).
    ip_header_errors: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    clock: GoodputClock,
    input: InputProblems,
    not_roce: not_roce::NotRoceCounts,
    /// Reused to pad a snap-length-cut frame back to its length for the slicer.
    scratch: Vec<u8>,
    /// Candidate flows looked at by [`Analyzer::reverse_of`], all told: the tests hold it
    /// linear in the packets.
    reverse_scans: u64,
    /// [`Flow::bytes`] of every flow, as last counted.
    held: usize,
    pfc: pfc::PfcTracker,
}

impl Analyzer {
    /// An analyser with the default limits.
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    /// An analyser that holds at most what `limits` allow.
    pub fn with_limits(limits: Limits) -> Analyzer {
        Analyzer {
            limits,
            ..Analyzer::default()
        }
    }

    /// Reads pause times and finds PFC storms as `options` say (the default: 100 Gb/s,
    /// 10 ms windows, half of a window).
    pub fn with_pfc(mut self, options: pfc::PfcOptions) -> Analyzer {
        self.pfc = pfc::PfcTracker::new(options);
        self
    }

    /// Bytes the analyser's state takes, roughly (flows, their indexes, rdma_cm
    /// connections), counted afresh.
    pub fn state_bytes(&self) -> usize {
        self.flows.iter().map(Flow::bytes).sum::<usize>() + self.index_bytes() + self.cm.bytes()
    }

    /// Bytes held beside the flows themselves: the room left in the flow list, the indexes.
    fn index_bytes(&self) -> usize {
        let entry = core::mem::size_of::<(FlowKey, u32)>() + 8;
        (self.flows.capacity() - self.flows.len()) * core::mem::size_of::<Flow>()
            + self.index.capacity() * entry
            + self.unpaired.capacity() * 48
            + self.cm_pairs.capacity() * 2 * entry
            + self.untracked_keys.capacity() * 16
    }

    /// What the flows and their indexes hold, kept up to date packet by packet (what
    /// [`Limits::max_bytes`] bounds; the rdma_cm tracker has its own cap).
    pub fn held_bytes(&self) -> usize {
        self.held + self.index_bytes()
    }

    /// What one more flow would add: itself, and the flow list and index grown if full.
    fn new_flow_bytes(&self) -> usize {
        let flow = core::mem::size_of::<Flow>();
        let entry = core::mem::size_of::<(FlowKey, u32)>() + 8;
        let list = if self.flows.len() == self.flows.capacity() {
            self.flows.capacity().max(4) * flow
        } else {
            0
        };
        let index = if self.index.len() == self.index.capacity() {
            self.index.capacity().max(4) * entry
        } else {
            0
        };
        flow + list + index
    }

    /// Counts again what flow `id` holds.
    fn recount(&mut self, id: u32) {
        let flow = &mut self.flows[id as usize];
        let now = flow.bytes();
        self.held = self.held + now - flow.held;
        flow.held = now;
    }

    /// Flows followed so far.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Analyses the next frame of the capture.
    pub fn frame(&mut self, frame: &Frame<'_>) -> Outcome {
        self.frame_sliced(frame, None)
    }

    /// As [`Analyzer::frame`], with what [`slice_ahead`] made of the frame (on another
    /// thread, say) when `ahead` is `Some`.
    pub fn frame_sliced(&mut self, frame: &Frame<'_>, ahead: Option<Sliced>) -> Outcome {
        self.packets += 1;
        let ts = frame.timestamp_ns;
        let start = *self.first_ts.get_or_insert(ts);
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        self.clock.advance(ts.saturating_sub(start));
        self.pfc.advance(ts);
        if let Some(sliced) = ahead {
            let mut f: Fields<'_> = sliced.fields;
            let at = sliced.payload_at as usize;
            f.payload = frame
                .data
                .get(at..at + f.payload_len as usize)
                .unwrap_or_default();
            return self.packet(f);
        }
        if frame.is_cut() {
            return self.cut_frame(frame);
        }
        // A link type not read holds neither RoCE nor pause frames.
        let Some(link) = frame.link_header() else {
            return self.not_roce(frame);
        };
        // Used in place, and sliced straight into a `Result` of the slicer's own error type
        // (`Frame::roce` wraps it in another, which copies the whole packet): moving the
        // parsed packet out of its `Result` would copy it with loads wider than the stores
        // that wrote it, a stall on every packet.
        let parsed = RocePacket::parse_link(frame.data, link);
        match &parsed {
            Ok(p) => self.packet(fields(p, ts, Some(p.icrc_ok()), p.payload())),
            Err(e) if e.is_not_roce() => {
                if let Some(c) = pfc::mac_control(frame) {
                    self.pfc.mac_control(ts, &c);
                } else if let PacketError::NotRoce(NotRoce::RoceV1 { grh, eth }) = e {
                    return self.roce_v1(frame, (*grh, *eth), None);
                }
                self.not_roce(frame)
            }
            Err(e) => self.malformed(frame.index, e.to_string()),
        }
    }

    /// A RoCEv1 frame (EtherType 0x8915): followed as a flow between its GIDs, apart from
    /// any RoCEv2 flow between the same addresses.
    ///
    /// `cut` is the number of bytes a snap length kept of a frame padded back to its length
    /// with zeros: its ICRC is unknown and its payload only what was kept.
    fn roce_v1(
        &mut self,
        frame: &Frame<'_>,
        (grh, eth): (usize, EthernetRepr),
        cut: Option<usize>,
    ) -> Outcome {
        let p = match RoceV1Packet::parse_at(frame.data, eth, grh) {
            Ok(p) => p,
            Err(e) => return self.malformed(frame.index, format!("RoCEv1: {e}")),
        };
        self.roce_v1_packets += 1;
        let g = p.grh();
        let ip = IpRepr::V6(Ipv6Repr {
            src: g.sgid_addr(),
            dst: g.dgid_addr(),
            dscp: g.dscp(),
            ecn: g.ecn(),
            flow_label: g.flow_label,
            hop_limit: g.hop_limit,
        });
        let payload = match cut {
            Some(kept) => {
                let offset = p.payload().as_ptr() as usize - frame.data.as_ptr() as usize;
                &p.payload()[..kept.saturating_sub(offset).min(p.payload().len())]
            }
            None => p.payload(),
        };
        let ib = Ib {
            bytes: p.packet_bytes(),
            bth_at: p.bth_offset(),
            payload_len: p.payload().len() as u32,
            eth: Some(p.eth()),
            vlan: p.eth().vlan,
            roce_v1: true,
        };
        let checks = Checks {
            icrc_ok: cut.is_none().then(|| p.icrc_ok()),
            ip_header_bad: false,
        };
        self.packet(ib.fields(frame.timestamp_ns, &ip, 0, checks, payload))
    }

    /// Counts a frame that is not RoCE by what it is.
    #[cold]
    fn not_roce(&mut self, frame: &Frame<'_>) -> Outcome {
        if let Some(kind) = not_roce::NotRoceKind::of(frame) {
            self.not_roce.count(kind);
        }
        Outcome::NotRoce
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
                self.packet(f)
            }
            Err(FrameError::Packet(PacketError::NotRoce(NotRoce::RoceV1 { grh, eth }))) => {
                self.roce_v1(&padded, (grh, eth), Some(frame.data.len()))
            }
            Err(e) if e.is_not_roce() => {
                // The body as captured: a PFC frame cut short counts as truncated.
                if let Some(c) = pfc::mac_control(frame) {
                    self.pfc.mac_control(frame.timestamp_ns, &c);
                }
                self.not_roce(&padded)
            }
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

    /// The flow of `f`'s packet, made if need be; `None` past [`Limits::max_flows`].
    fn flow_id(&mut self, f: &Fields<'_>) -> Option<u32> {
        let key = FlowKey {
            src: f.src,
            dst: f.dst,
            // QPNs are 24 bits: the top bit keeps RoCEv1 flows apart from RoCEv2 ones.
            qp: f.dest_qp.value() | if f.roce_v1 { ROCE_V1_KEY_BIT } else { 0 },
        };
        if self.untracked.memory_full_at.is_some() {
            let known = self.index.contains_key(&key);
            return self.not_followed(key, known);
        }
        if let Some((k, id)) = self.last
            && k == key
        {
            return Some(id);
        }
        let id = match self.index.get(&key) {
            Some(&id) => id,
            None if self.flows.len() >= self.limits.max_flows => {
                return self.not_followed(key, false);
            }
            None if self.held_bytes() + self.new_flow_bytes() > self.limits.max_bytes => {
                self.untracked.memory_full_at = Some(self.roce_packets);
                return self.not_followed(key, false);
            }
            None => {
                let id = self.flows.len() as u32;
                let (src, dst) = (f.src_addr(), f.dst_addr());
                let mut flow = Flow::new(src, dst, f.dest_qp, f.udp_src_port, f.ts);
                flow.src_mac = f.src_mac;
                flow.priority = f.priority;
                flow.pfc_seen = self.pfc.finished();
                flow.roce_v1 = f.roce_v1;
                self.flows.push(flow);
                self.index.insert(key, id);
                self.list_unpaired(id, (key.src, key.dst));
                if let Some(other) = self.cm_pairs.get(&key).and_then(|k| self.index.get(k)) {
                    let other = *other;
                    self.link(id, other);
                }
                id
            }
        };
        self.last = Some((key, id));
        Some(id)
    }

    /// Counts a packet not followed, and its flow when it is not one followed (`known`).
    fn not_followed(&mut self, key: FlowKey, known: bool) -> Option<u32> {
        self.untracked.packets += 1;
        if !known && self.untracked_keys.len() < UNTRACKED_COUNTED {
            use core::hash::BuildHasher;
            let hash = core::hash::BuildHasherDefault::<flow::FlowHasher>::default().hash_one(key);
            if self.untracked_keys.insert(hash) {
                self.untracked.flows += 1;
            }
        }
        None
    }

    /// Appends a new flow to the unpaired list of its hosts.
    fn list_unpaired(&mut self, id: u32, hosts: (u128, u128)) {
        let list = self.unpaired.entry(hosts).or_insert(Unpaired {
            oldest: NONE,
            newest: NONE,
        });
        let newest = list.newest;
        list.newest = id;
        if newest == NONE {
            list.oldest = id;
        } else {
            self.flows[newest as usize].unpaired.1 = id;
        }
        self.flows[id as usize].unpaired = (newest, NONE);
    }

    /// Takes a flow off its unpaired list (it found its reverse).
    fn unlist(&mut self, id: u32) {
        let flow = &self.flows[id as usize];
        if flow.reverse.is_some() {
            return; // already off
        }
        let (before, after) = flow.unpaired;
        let hosts = (addr_bits(flow.src), addr_bits(flow.dst));
        if before != NONE {
            self.flows[before as usize].unpaired.1 = after;
        }
        if after != NONE {
            self.flows[after as usize].unpaired.0 = before;
        }
        if let Some(list) = self.unpaired.get_mut(&hosts) {
            if list.oldest == id {
                list.oldest = after;
            }
            if list.newest == id {
                list.newest = before;
            }
        }
    }

    fn link(&mut self, a: u32, b: u32) {
        self.unlist(a);
        self.unlist(b);
        self.flows[a as usize].reverse = Some(b);
        self.flows[b as usize].reverse = Some(a);
    }

    /// The reverse flow of `id` (same connection, other direction), pairing it if need be.
    ///
    /// Without a CM handshake nothing on the wire names the requester's QP in its requests, so
    /// the candidates are the unpaired flows between the same two hosts the other way: the
    /// [`REVERSE_CANDIDATES`] most recent of them, so that a capture of many unpaired flows
    /// costs a bounded scan per packet (issue 14: every CNP rescanned them all). With more
    /// than one, prefer the flow whose requests reached `psn` (the PSN a response carries is
    /// the requester's), then one with an rxe UDP source port that fits (RC flows of recent
    /// kernels use the same port both ways, derived from both QPNs; older ones derive it
    /// from the sender's QPN, this flow's destination QP), then the busiest, then the newest.
    fn reverse_of(&mut self, id: u32, psn: Option<Psn>) -> Option<u32> {
        let flow = &self.flows[id as usize];
        if flow.reverse.is_some() {
            return flow.reverse;
        }
        let back = (addr_bits(flow.dst), addr_bits(flow.src));
        let ports = [flow.udp_src_port, rxe_udp_src_port(flow.dest_qp)];
        let mut candidates = [NONE; REVERSE_CANDIDATES];
        let mut found = 0;
        let mut c = self.unpaired.get(&back)?.newest;
        while c != NONE && found < REVERSE_CANDIDATES {
            self.reverse_scans += 1;
            if c != id {
                candidates[found] = c;
                found += 1;
            }
            c = self.flows[c as usize].unpaired.0;
        }
        // Oldest first, so that among equals the newest wins, as it did over the whole list.
        candidates[..found].reverse();
        let best = candidates[..found].iter().copied().max_by_key(|&c| {
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

    fn packet(&mut self, f: Fields<'_>) -> Outcome {
        self.roce_packets += 1;
        if f.icrc_ok == Some(false) {
            self.icrc_errors += 1;
        }
        if f.ip_header_bad {
            self.ip_header_errors += 1;
        }
        let Some(id) = self.flow_id(&f) else {
            return Outcome::Untracked;
        };
        // Responses and CNPs feed the reverse flow's state as well.
        let answers = match f.opcode.transport() {
            Transport::Rc => !f.opcode.is_request(),
            Transport::Cnp => true,
            _ => false,
        };
        let note = self.follow(id, f);
        self.recount(id);
        if answers && let Some(r) = self.flows[id as usize].reverse {
            self.recount(r);
        }
        if self.held_bytes() >= self.limits.max_bytes {
            self.untracked.memory_full_at = Some(self.roce_packets);
        }
        Outcome::Roce(note)
    }

    /// Packet `f` of flow `id`, followed.
    fn follow(&mut self, id: u32, f: Fields<'_>) -> PacketNote {
        let since_start = f.ts.saturating_sub(self.first_ts.unwrap_or(f.ts));
        let clock = self.clock;
        let transport_ok = f.icrc_ok != Some(false);
        let flow = &mut self.flows[id as usize];
        flow.packets += 1;
        flow.opcodes.add(f.opcode.value());
        flow.payload_bytes += u64::from(f.payload_len);
        if flow.pfc_seen != self.pfc.finished() {
            let (n, ns) = self.pfc.stalls(
                flow.pfc_seen,
                flow.priority.0,
                flow.src_mac,
                flow.last_ts,
                f.ts,
            );
            flow.pfc_stalls += n;
            flow.pfc_stalled_ns += ns;
            flow.pfc_seen = self.pfc.finished();
        }
        flow.last_ts = f.ts;
        if f.icrc_ok == Some(false) {
            flow.icrc_errors += 1;
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
                    note.verdict =
                        requester.request(f.ts, f.opcode, f.psn, f.payload_len, f.read_len);
                }
                !note.retransmitted
            }
            Transport::Rc => {
                count_aeth(flow, f.syndrome);
                if transport_ok {
                    note.verdict = self.response(id, &f);
                }
                f.opcode.is_read_response() && !note.verdict.no_new_data
            }
            Transport::Cnp => {
                flow.cnps += 1;
                // A CNP whose ICRC is bad may not be one: it pairs nothing.
                let target = transport_ok.then(|| self.reverse_of(id, None)).flatten();
                if let Some(target) = target {
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
            flow.goodput.get_or_insert_with(Box::default).add(
                clock,
                since_start,
                u64::from(f.payload_len),
            );
        }
        note
    }

    /// A response on flow `id` answers the requests of its reverse flow.
    fn response(&mut self, id: u32, f: &Fields<'_>) -> Verdict {
        let kind = match (f.opcode.low(), f.syndrome) {
            (op::ATOMIC_ACKNOWLEDGE, _) => Response::Atomic,
            (op::RDMA_READ_RESPONSE_FIRST..=op::RDMA_READ_RESPONSE_ONLY, _) => Response::Read {
                opcode: f.opcode,
                payload_len: f.payload_len,
            },
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
        let (src, dst) = (f.src_addr(), f.dst_addr());
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

    /// Everything found, the analyser's state given up flow by flow as the report is made
    /// (the same report as [`Analyzer::report`], with less memory at its peak).
    pub fn into_report(self) -> Report {
        summary::into_report(self)
    }
}

/// The part of [`Analyzer::frame`] that needs no state, for a whole RoCEv2 frame: slicing
/// it, reading its fields, checking its ICRC (the costly part). `None` for a frame cut by a
/// snap length or not a well-formed RoCEv2 frame, which [`Analyzer::frame_sliced`] then
/// reads itself.
pub fn slice_ahead(frame: &Frame<'_>) -> Option<Sliced> {
    if frame.is_cut() {
        return None;
    }
    // Not through `Frame::roce`, and used in place rather than moved out of its `Result`
    // (`.ok()` copies the whole packet), as in `Analyzer::frame_sliced`.
    let parsed = RocePacket::parse_link(frame.data, frame.link_header()?);
    let Ok(p) = &parsed else {
        return None;
    };
    let payload_at = p.payload().as_ptr() as usize - frame.data.as_ptr() as usize;
    Some(Sliced {
        fields: fields(p, frame.timestamp_ns, Some(p.icrc_ok()), &[]),
        payload_at: payload_at as u32,
    })
}

fn count_aeth(flow: &mut Flow, syndrome: Option<Syndrome>) {
    match syndrome {
        Some(Syndrome::Nak(code)) => flow.naks.add(code.code()),
        Some(Syndrome::RnrNak { .. }) => flow.rnr_naks += 1,
        _ => {}
    }
}

/// The fields of RoCEv2 packet `p`; `payload` is what the analysis may read of its payload.
fn fields<'q>(p: &RocePacket<'_>, ts: u64, icrc_ok: Option<bool>, payload: &'q [u8]) -> Fields<'q> {
    let ib = Ib {
        bytes: p.packet_bytes(),
        bth_at: p.bth_offset(),
        payload_len: p.payload().len() as u32,
        eth: p.eth(),
        vlan: p.vlan(),
        roce_v1: false,
    };
    let checks = Checks {
        icrc_ok,
        ip_header_bad: p.ipv4_violation().is_some(),
    };
    ib.fields(ts, p.ip(), p.udp().src_port, checks, payload)
}

/// What the receiver's checks made of a packet: its ICRC (None: cut off, unknown) and
/// whether its IPv4 header is one the annex makes a receiver drop.
#[derive(Debug, Clone, Copy)]
struct Checks {
    icrc_ok: Option<bool>,
    ip_header_bad: bool,
}

/// What [`Fields`] are read from in a RoCEv2 or a RoCEv1 packet.
struct Ib<'p> {
    /// The frame through the ICRC.
    bytes: &'p [u8],
    bth_at: usize,
    payload_len: u32,
    eth: Option<&'p crate::wire::EthernetRepr>,
    /// The tag nearest the IP header or GRH, also under a Linux cooked header.
    vlan: Option<crate::wire::VlanTag>,
    roce_v1: bool,
}

impl Ib<'_> {
    fn fields<'q>(
        &self,
        ts: u64,
        ip: &IpRepr<'_>,
        udp_src_port: u16,
        checks: Checks,
        payload: &'q [u8],
    ) -> Fields<'q> {
        let bth = BthRepr::parse_unchecked(&self.bytes[self.bth_at..]);
        // Every opcode that carries an AETH carries it first, right after the BTH (IBA 9.2:
        // ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, READ responses), so only those four bytes are read.
        let aeth = bth
            .opcode
            .info()
            .filter(|i| i.headers.contains(Headers::AETH))
            .and_then(|_| self.bytes.get(self.bth_at + BthRepr::LEN..))
            .and_then(|b| AethRepr::parse(b).ok());
        // A READ request's RETH comes first after the BTH (IBA 9.2); only RC has them here.
        let read_len = (bth.opcode == Opcode::new(Transport::Rc, op::RDMA_READ_REQUEST))
            .then(|| self.bytes.get(self.bth_at + BthRepr::LEN..))
            .flatten()
            .and_then(|b| Reth::new_checked(b).ok())
            .map(|r| r.dma_len());
        let priority = match self.vlan {
            Some(tag) => (tag.pcp & 7, true),
            None => (pfc::dscp_priority(ip.dscp()), false),
        };
        // Straight from the header's addresses: going through `IpAddr` here costs a store
        // the next load cannot forward from, on every packet.
        let (src, dst, v4) = match ip {
            IpRepr::V4(v4) => (
                u128::from(v4.src.to_ipv6_mapped()),
                u128::from(v4.dst.to_ipv6_mapped()),
                true,
            ),
            IpRepr::V6(v6) => (u128::from(v6.src), u128::from(v6.dst), false),
        };
        Fields {
            ts,
            src,
            dst,
            v4,
            udp_src_port,
            opcode: bth.opcode,
            dest_qp: bth.dest_qp,
            psn: bth.psn,
            syndrome: aeth.map(|a| a.syndrome),
            msn: aeth.map(|a| a.msn),
            payload_len: self.payload_len,
            read_len,
            payload,
            icrc_ok: checks.icrc_ok,
            ip_header_bad: checks.ip_header_bad,
            ecn_ce: ip.ecn() == Ecn::Ce,
            src_mac: self.eth.map_or([0; 6], |e| e.src),
            priority,
            roce_v1: self.roce_v1,
        }
    }
}
