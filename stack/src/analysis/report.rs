//! What the analysis found: plain data, ready for a text report or JSON. Times are
//! nanoseconds since the Unix epoch (`*_ts`) or durations in nanoseconds (`*_ns`).

use core::net::IpAddr;

use super::cm::CmConnection;
use crate::wire::{NakCode, Psn, Qpn};

/// The kinds of request message, as the requester posts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    Send,
    Write,
    Read,
    Atomic,
    Flush,
    AtomicWrite,
}

impl MessageKind {
    pub const COUNT: usize = 6;
    pub const ALL: [MessageKind; Self::COUNT] = [
        MessageKind::Send,
        MessageKind::Write,
        MessageKind::Read,
        MessageKind::Atomic,
        MessageKind::Flush,
        MessageKind::AtomicWrite,
    ];

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
    pub const COUNT: usize = 5;
    pub const ALL: [LossCause; Self::COUNT] = [
        LossCause::BeforeCapturePoint,
        LossCause::AfterCapturePoint,
        LossCause::RnrRefused,
        LossCause::Unknown,
        LossCause::Rejected,
    ];

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
    Nak(NakCode),
    RnrNak,
    ImpliedNak,
    /// Nothing on the capture set it off: the local ACK timer expired, or a response was lost
    /// after the capture point (the requester saw a gap the capture did not).
    Unseen,
}

impl Trigger {
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
    pub first_psn: Psn,
    pub trigger: Trigger,
    /// When the trigger arrived (with none seen: the last packet the requester sent before).
    pub trigger_ts: u64,
    /// The first resent packet.
    pub start_ts: u64,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NakEvent {
    pub ts: u64,
    /// The PSN the NAK names (for a sequence error: the one the responder expected).
    pub psn: Psn,
    pub code: NakCode,
    pub cause: LossCause,
    /// The kind of message that PSN belongs to, if the capture showed it.
    pub request: Option<MessageKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RnrEvent {
    pub ts: u64,
    pub psn: Psn,
    /// The minimum wait the responder asked for (RNR timer, IBA Table 45).
    pub min_wait_us: u32,
    /// How long the requester actually waited before retrying that PSN.
    pub wait_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImpliedNak {
    pub ts: u64,
    /// The response PSN the requester was waiting for.
    pub expected: Psn,
    /// The later PSN that arrived instead.
    pub got: Psn,
}

/// What set off a rate measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    Cnp,
    EcnCe,
}

impl Signal {
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
    pub signal: Signal,
    pub ts: u64,
    /// Mean gap between the flow's packets before the signal (up to 16 gaps).
    pub gap_before_ns: u64,
    /// Mean gap over the 16 packets after it (fewer if the flow stopped).
    pub gap_after_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    pub samples: u64,
    pub min_ns: u64,
    pub median_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// The requester behind a flow's requests, with the responses it got on the reverse flow.
#[derive(Debug, Clone, PartialEq)]
pub struct RequesterReport {
    /// Completed request messages by kind (first through last packet seen).
    pub messages: Vec<(MessageKind, u64)>,
    pub message_bytes: u64,
    pub messages_acknowledged: u64,
    pub orphan_packets: u64,
    pub broken_messages: u64,
    pub highest_psn: Option<Psn>,
    pub psn_wraps: u64,
    pub msn_first: Option<u32>,
    pub msn_last: Option<u32>,
    pub episodes: u64,
    pub packets_resent: u64,
    /// The first episodes in detail (the open one last, if the capture ended in it).
    pub episode_list: Vec<Episode>,
    pub nak_events: Vec<NakEvent>,
    pub nak_causes: Vec<(LossCause, u64)>,
    pub rnr_events: Vec<RnrEvent>,
    pub implied_naks: u64,
    pub implied_nak_events: Vec<ImpliedNak>,
    pub rtt: Option<Rtt>,
}

/// One direction of traffic to one QP: (source IP, destination IP, destination QP).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dest_qp: Qpn,
    pub udp_src_port: u16,
    pub packets: u64,
    /// Packets per opcode name, in opcode order.
    pub opcodes: Vec<(&'static str, u64)>,
    pub retransmitted_packets: u64,
    /// NAKs this flow carried, by name (`PSN_SEQUENCE_ERROR`, ...).
    pub naks: Vec<(&'static str, u64)>,
    pub rnr_naks: u64,
    pub cnps: u64,
    pub ecn_ce: u64,
    pub payload_bytes: u64,
    pub icrc_errors: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    /// Index (in [`Report::flows`]) of the reverse flow of the same connection.
    pub reverse: Option<usize>,
    /// New payload bytes per goodput bucket (retransmitted and duplicate data excluded).
    pub goodput: Vec<u64>,
    pub rate_changes: Vec<RateChange>,
    pub requester: Option<RequesterReport>,
    /// The PFC priority its packets ride: the 802.1Q PCP when `priority_from_pcp`, else
    /// the DSCP's (see [`super::pfc::dscp_priority`]).
    pub priority: u8,
    pub priority_from_pcp: bool,
    /// Pauses of its priority it sat through silently (see [`super::pfc`]) and their length.
    pub pfc_stalls: u32,
    pub pfc_stalled_ns: u64,
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

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub packets: u64,
    pub roce_packets: u64,
    pub icrc_errors: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub flows: Vec<FlowReport>,
    pub connections: Vec<CmConnection>,
    /// Width of every flow's goodput buckets.
    pub goodput_bucket_ns: u64,
    pub input: InputProblems,
    /// What the analyser's limits left out.
    pub untracked: Untracked,
    /// The limits in force.
    pub limits: super::Limits,
    /// PAUSE and PFC frames and what they did.
    pub pfc: super::pfc::PfcReport,
}
