//! What the analysis found: plain data, ready for a text report or JSON. Times are
//! nanoseconds since the Unix epoch (`*_ts`) or durations in nanoseconds (`*_ns`).

use core::net::IpAddr;

use super::cm::CmConnection;
use crate::wire::{NakCode, Psn, Qpn};

/// The kinds of request message, as the requester posts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// SEND (with immediate or invalidate).
    Send,
    /// RDMA WRITE (with immediate).
    Write,
    /// RDMA READ.
    Read,
    /// COMPARE_SWAP or FETCH_ADD.
    Atomic,
    /// FLUSH.
    Flush,
    /// ATOMIC WRITE.
    AtomicWrite,
}

impl MessageKind {
    /// The number of kinds, the length of per-kind arrays.
    pub const COUNT: usize = 6;
    /// Every kind, in the order reports list them.
    pub const ALL: [MessageKind; Self::COUNT] = [
        MessageKind::Send,
        MessageKind::Write,
        MessageKind::Read,
        MessageKind::Atomic,
        MessageKind::Flush,
        MessageKind::AtomicWrite,
    ];

    /// The name reports and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::Send => "SEND",
            MessageKind::Write => "RDMA_WRITE",
            MessageKind::Read => "RDMA_READ",
            MessageKind::Atomic => "ATOMIC",
            MessageKind::Flush => "FLUSH",
            MessageKind::AtomicWrite => "ATOMIC_WRITE",
        }
    }
}

/// Why the responder sent a NAK: for a PSN sequence error, where the packet it expected went
/// missing, judged from what the capture saw before the NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossCause {
    /// The packet with that PSN never appeared: lost before the capture point.
    BeforeCapturePoint,
    /// The packet was captured, so it was lost between the capture point and the responder.
    AfterCapturePoint,
    /// The packet was not lost: the responder had refused that PSN with an RNR NAK and the
    /// requester sent on regardless.
    RnrRefused,
    /// The PSN lies beyond anything the requester was seen to send.
    Unknown,
    /// Not a loss: the responder refused the request (access, invalid or operational error).
    Rejected,
}

impl LossCause {
    /// The number of causes, the length of per-cause arrays.
    pub const COUNT: usize = 5;
    /// Every cause, in the order reports list them.
    pub const ALL: [LossCause; Self::COUNT] = [
        LossCause::BeforeCapturePoint,
        LossCause::AfterCapturePoint,
        LossCause::RnrRefused,
        LossCause::Unknown,
        LossCause::Rejected,
    ];

    /// The name JSON uses.
    pub fn name(self) -> &'static str {
        match self {
            LossCause::BeforeCapturePoint => "lost_before_capture_point",
            LossCause::AfterCapturePoint => "lost_after_capture_point",
            LossCause::RnrRefused => "refused_earlier_by_rnr_nak",
            LossCause::Unknown => "unknown",
            LossCause::Rejected => "rejected_by_responder",
        }
    }

    /// A sentence for people.
    pub fn describe(self) -> &'static str {
        match self {
            LossCause::BeforeCapturePoint => {
                "the packet never appeared in the capture: lost before the capture point"
            }
            LossCause::AfterCapturePoint => {
                "the packet was captured: lost between the capture point and the responder"
            }
            LossCause::RnrRefused => {
                "not a loss: the responder had refused this PSN with an RNR NAK"
            }
            LossCause::Unknown => "beyond anything the requester was seen to send",
            LossCause::Rejected => "the responder rejected the request",
        }
    }
}

/// What made the requester go back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A NAK with this code.
    Nak(NakCode),
    /// An RNR NAK.
    RnrNak,
    /// A response that skipped an outstanding READ or atomic (an implied NAK).
    ImpliedNak,
    /// Nothing on the capture set it off: the local ACK timer expired, or a response was lost
    /// after the capture point (the requester saw a gap the capture did not).
    Unseen,
}

impl Trigger {
    /// The name reports and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Nak(code) => code.name(),
            Trigger::RnrNak => "RNR_NAK",
            Trigger::ImpliedNak => "IMPLIED_NAK",
            Trigger::Unseen => "TIMEOUT_OR_UNSEEN_LOSS",
        }
    }
}

/// A go-back-N episode: the requester resent from `first_psn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    /// The PSN it went back to.
    pub first_psn: Psn,
    /// What set it off.
    pub trigger: Trigger,
    /// When the trigger arrived (with none seen: the last packet the requester sent before).
    pub trigger_ts: u64,
    /// The first resent packet.
    pub start_ts: u64,
    /// Packets sent again in the episode.
    pub packets_resent: u64,
    /// When the requester got past what it had sent before the episode (a new PSN sent, or
    /// a response reaching it); `None` if the capture ended first.
    pub recovered_ts: Option<u64>,
    /// The requester went back again before recovering (a new episode follows).
    pub interrupted: bool,
}

impl Episode {
    /// From the trigger to recovery.
    pub fn time_to_recover_ns(&self) -> Option<u64> {
        self.recovered_ts.map(|r| r.saturating_sub(self.trigger_ts))
    }
}

/// A NAK the responder sent, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NakEvent {
    /// When it was captured.
    pub ts: u64,
    /// The PSN the NAK names (for a sequence error: the one the responder expected).
    pub psn: Psn,
    /// The NAK's code.
    pub code: NakCode,
    /// Where the missing packet went, or that none was missing.
    pub cause: LossCause,
    /// The kind of message that PSN belongs to, if the capture showed it.
    pub request: Option<MessageKind>,
}

/// An RNR NAK the responder sent, and the requester's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RnrEvent {
    /// When it was captured.
    pub ts: u64,
    /// The PSN it refused.
    pub psn: Psn,
    /// The minimum wait the responder asked for (RNR timer, IBA Table 45).
    pub min_wait_us: u32,
    /// How long the requester actually waited before retrying that PSN.
    pub wait_ns: Option<u64>,
}

/// A response that skipped the one the requester was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImpliedNak {
    /// When it was captured.
    pub ts: u64,
    /// The response PSN the requester was waiting for.
    pub expected: Psn,
    /// The later PSN that arrived instead.
    pub got: Psn,
}

/// A plain ACK whose PSN is that of a READ, atomic, FLUSH or ATOMIC WRITE request. Only
/// their responses answer these; a requester whose response was lost may take such an ACK
/// for the request's completion, with no data (rxe's completer does). rxe's responder stopped
/// sending them in 2018 (it re-acknowledges a duplicate at the last SEND or WRITE instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckNamingResponse {
    /// When it was captured.
    pub ts: u64,
    /// The PSN it names.
    pub psn: Psn,
    /// The request that PSN belongs to.
    pub request: MessageKind,
}

/// What set off a rate measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// A congestion notification packet on the reverse flow.
    Cnp,
    /// A packet of the flow itself marked CE.
    EcnCe,
}

impl Signal {
    /// The name reports and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Cnp => "CNP",
            Signal::EcnCe => "ECN_CE",
        }
    }
}

/// The packet spacing of a flow just before and just after a congestion signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateChange {
    /// Which signal.
    pub signal: Signal,
    /// When it was captured.
    pub ts: u64,
    /// Mean gap between the flow's packets before the signal (up to 16 gaps).
    pub gap_before_ns: u64,
    /// Mean gap over the 16 packets after it (fewer if the flow stopped).
    pub gap_after_ns: u64,
}

/// Round-trip times from a message's last request packet to the response answering it
/// (messages never resent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    /// Round trips measured.
    pub samples: u64,
    /// The shortest.
    pub min_ns: u64,
    /// The median (within the histogram's 6 %).
    pub median_ns: u64,
    /// The 99th percentile (within 6 %).
    pub p99_ns: u64,
    /// The longest.
    pub max_ns: u64,
}

/// The requester behind a flow's requests, with the responses it got on the reverse flow.
#[derive(Debug, Clone, PartialEq)]
pub struct RequesterReport {
    /// Completed request messages by kind (first through last packet seen).
    pub messages: Vec<(MessageKind, u64)>,
    /// Payload bytes of those messages.
    pub message_bytes: u64,
    /// Messages a response acknowledged.
    pub messages_acknowledged: u64,
    /// Packets continuing a message whose start the capture did not show.
    pub orphan_packets: u64,
    /// Messages abandoned before their last packet (a new one began).
    pub broken_messages: u64,
    /// The highest request PSN seen, in the 2^24 window's order.
    pub highest_psn: Option<Psn>,
    /// Times the request PSN wrapped past 2^24.
    pub psn_wraps: u64,
    /// The first MSN the responses carried.
    pub msn_first: Option<u32>,
    /// The last MSN the responses carried.
    pub msn_last: Option<u32>,
    /// Go-back-N episodes.
    pub episodes: u64,
    /// Packets resent in them.
    pub packets_resent: u64,
    /// The first episodes in detail (the open one last, if the capture ended in it).
    pub episode_list: Vec<Episode>,
    /// The first NAKs in detail.
    pub nak_events: Vec<NakEvent>,
    /// NAKs by cause.
    pub nak_causes: Vec<(LossCause, u64)>,
    /// The first RNR NAKs in detail.
    pub rnr_events: Vec<RnrEvent>,
    /// Implied NAKs.
    pub implied_naks: u64,
    /// The first implied NAKs in detail.
    pub implied_nak_events: Vec<ImpliedNak>,
    /// ACKs naming the PSN of a request only its response answers (see [`AckNamingResponse`]).
    pub acks_naming_reads: u64,
    /// The first of them in detail.
    pub ack_naming_read_events: Vec<AckNamingResponse>,
    /// Round-trip times, if any response could be matched.
    pub rtt: Option<Rtt>,
}

/// One direction of traffic to one QP: (source IP, destination IP, destination QP).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    /// The source IP address.
    pub src: IpAddr,
    /// The destination IP address.
    pub dst: IpAddr,
    /// The BTH DestQP.
    pub dest_qp: Qpn,
    /// The UDP source port of its first packet (rxe derives it from the QPs).
    pub udp_src_port: u16,
    /// RoCEv2 packets.
    pub packets: u64,
    /// Packets per opcode name, in opcode order.
    pub opcodes: Vec<(&'static str, u64)>,
    /// Requests whose PSN the flow already carried.
    pub retransmitted_packets: u64,
    /// NAKs this flow carried, by name (`PSN_SEQUENCE_ERROR`, ...).
    pub naks: Vec<(&'static str, u64)>,
    /// RNR NAKs this flow carried.
    pub rnr_naks: u64,
    /// CNPs this flow carried.
    pub cnps: u64,
    /// Packets with ECN CE.
    pub ecn_ce: u64,
    /// Payload bytes, retransmissions included.
    pub payload_bytes: u64,
    /// Packets whose ICRC did not match.
    pub icrc_errors: u64,
    /// Its first packet's capture time.
    pub first_ts: u64,
    /// Its last packet's capture time.
    pub last_ts: u64,
    /// Index (in [`Report::flows`]) of the reverse flow of the same connection.
    pub reverse: Option<usize>,
    /// New payload bytes per goodput bucket (retransmitted and duplicate data excluded).
    pub goodput: Vec<u64>,
    /// Packet spacing around each congestion signal.
    pub rate_changes: Vec<RateChange>,
    /// The requester's state, for flows that carry requests.
    pub requester: Option<RequesterReport>,
    /// The PFC priority its packets ride: the 802.1Q PCP when `priority_from_pcp`, else
    /// the DSCP's (see [`super::pfc::dscp_priority`]).
    pub priority: u8,
    /// Whether `priority` came from a VLAN tag's PCP (true) or the DSCP (false).
    pub priority_from_pcp: bool,
    /// Pauses of its priority it sat through silently (see [`super::pfc`]) and their length.
    pub pfc_stalls: u32,
    /// Their total length.
    pub pfc_stalled_ns: u64,
    /// 1 for a RoCEv1 flow (its `src` and `dst` are the GRH's GIDs), 2 for RoCEv2.
    pub roce_version: u8,
}

/// Problems with the input file itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputProblems {
    /// The file is damaged here: nothing after it could be read.
    pub damage: Option<String>,
    /// Frames shorter than on the wire (a snap length); their headers were still analysed.
    pub cut_frames: u64,
    /// Frames for UDP port 4791 that are not well-formed RoCEv2.
    pub malformed_frames: u64,
    /// The first few malformed frames: (frame index, why).
    pub malformed_examples: Vec<(u64, String)>,
}

impl InputProblems {
    /// True when the input had any problem.
    pub fn any(&self) -> bool {
        self.damage.is_some() || self.cut_frames > 0 || self.malformed_frames > 0
    }
}

/// What the analyser counted but did not follow, because of its limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Untracked {
    /// Flows not followed: beyond `--max-flows`, or new after `--max-memory` was reached
    /// (exact up to 2^20, at least that many beyond).
    pub flows: u64,
    /// Their packets.
    pub packets: u64,
    /// rdma_cm connections beyond the tracker's limit.
    pub cm_connections: u64,
    /// The RoCEv2 packet (counted from 1) after which the state reached `--max-memory`:
    /// every later packet is counted only.
    pub memory_full_at: Option<u64>,
}

impl Untracked {
    /// True when something was not followed.
    pub fn any(&self) -> bool {
        self.flows > 0 || self.cm_connections > 0 || self.memory_full_at.is_some()
    }
}

/// Everything the analysis found in one capture.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Frames read.
    pub packets: u64,
    /// RoCE packets, RoCEv1 included.
    pub roce_packets: u64,
    /// Of which RoCEv1 (EtherType 0x8915).
    pub roce_v1_packets: u64,
    /// RoCE packets whose ICRC did not match.
    pub icrc_errors: u64,
    /// RoCEv2 packets whose IPv4 header a receiver drops (Annex A17.3.4: a wrong checksum,
    /// options or DF clear), whatever their ICRC.
    pub ip_header_errors: u64,
    /// The first frame's capture time.
    pub first_ts: Option<u64>,
    /// The last frame's capture time.
    pub last_ts: Option<u64>,
    /// Every followed flow, in order of first appearance.
    pub flows: Vec<FlowReport>,
    /// rdma_cm connections seen on QP1.
    pub connections: Vec<CmConnection>,
    /// Width of every flow's goodput buckets.
    pub goodput_bucket_ns: u64,
    /// Problems with the file itself.
    pub input: InputProblems,
    /// The frames that were not RoCE, by kind.
    pub not_roce: super::not_roce::NotRoceCounts,
    /// What the analyser's limits left out.
    pub untracked: Untracked,
    /// The limits in force.
    pub limits: super::Limits,
    /// PAUSE and PFC frames and what they did.
    pub pfc: super::pfc::PfcReport,
}
