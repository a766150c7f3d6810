//! Engine-wide knobs, counters, asynchronous events, and the description of a packet to send.

use core::time::Duration;
use std::net::IpAddr;

use super::attrs::Mtu;
use super::srq::SrqId;
use crate::wire::{IbPacketRepr, Qpn};

/// How the engine's requesters pace themselves and recover from loss. None of these is on
/// the wire: any peer that follows the spec (rdma_rxe included) interoperates with any value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportConfig {
    /// Largest number of request PSNs an RC requester has unacknowledged. Go-back-N resends
    /// everything sent after a lost packet, so what is in flight is what one loss costs.
    pub max_inflight_packets: u32,
    /// The in-flight window shrinks towards this after losses and grows back towards the
    /// maximum while none occur (see `completer.rs`); equal to the maximum for a fixed window.
    pub min_inflight_packets: u32,
    /// An RC requester sets AckReq at least every this many packets (rxe: 64), besides the
    /// last packet of every message, so that ACKs open the window and reveal losses early.
    pub ack_req_every: u32,
    /// The floor of the fast retransmit timer (see `completer.rs`): how long a requester waits
    /// without progress before probing the tail or going back to the first unacknowledged PSN
    /// on its own, well before the spec's local ACK timeout.
    pub min_fast_rto: Duration,
    /// The fast retransmit timer before the first round-trip sample.
    pub initial_fast_rto: Duration,
    /// The MTU of UD queue pairs (the port's; connected QPs have their own path MTU).
    pub port_mtu: Mtu,
    /// Atomic results a responder keeps to replay to duplicate atomic requests (at least
    /// max_dest_rd_atomic is kept whatever this says).
    pub atomic_results: usize,
    /// Largest number of send or receive work requests a queue pair accepts.
    pub max_qp_wr: u32,
    /// Largest number of scatter/gather entries in one work request.
    pub max_sge: usize,
    /// Seeds the first QPN and the key byte of every R_Key the engine hands out, so that an
    /// off-path sender cannot guess them (rxe draws its key bytes at random). `None` numbers
    /// them as rxe's first run does (QPN 17 upwards, key bytes counting from 1), which keeps
    /// tests and captures reproducible; the endpoint's tools seed it per run.
    pub id_seed: Option<u64>,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            max_inflight_packets: 128,
            min_inflight_packets: 16,
            ack_req_every: 16,
            min_fast_rto: Duration::from_micros(20),
            initial_fast_rto: Duration::from_millis(1),
            port_mtu: Mtu::M4096,
            atomic_results: 16,
            max_qp_wr: 16_384,
            max_sge: 32,
            id_seed: None,
        }
    }
}

/// Counts of what the engine did, for summaries and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Packets handed out by `poll_transmit`.
    pub packets_sent: u64,
    /// Packets given to `handle_packet`.
    pub packets_received: u64,
    /// Request packets sent again (go-back-N, probes): the cost of loss.
    pub retransmitted_packets: u64,
    /// Times a requester went back to an earlier PSN (NAK, implied NAK, timers).
    pub rewinds: u64,
    /// Tail-loss probes sent.
    pub probes: u64,
    /// Expirations of the spec's local ACK timeout (each costs one retry).
    pub local_ack_timeouts: u64,
    /// Expirations of the fast retransmit timer that went back to the first unacked PSN.
    pub fast_retransmits: u64,
    /// Implied NAKs: a response to a later request showed an earlier one lost (IBA 9.7.5.1.2).
    pub implied_naks: u64,
    /// ACKs received (including those coalesced).
    pub acks_received: u64,
    /// NAKs received, RNR NAKs excluded.
    pub naks_received: u64,
    /// RNR NAKs received.
    pub rnr_naks_received: u64,
    /// ACKs sent by responders.
    pub acks_sent: u64,
    /// PSN sequence error NAKs sent.
    pub seq_naks_sent: u64,
    /// Invalid request, remote access and remote operational error NAKs sent.
    pub error_naks_sent: u64,
    /// RNR NAKs sent: a SEND found no receive posted.
    pub rnr_naks_sent: u64,
    /// Request packets with a PSN before the expected one.
    pub duplicate_requests: u64,
    /// Duplicate READs and atomics dropped: not among the remembered ones, not a part of
    /// the READ remembered at their PSN, or no room for another response.
    pub duplicates_dropped: u64,
    /// Request packets with a PSN after the expected one (dropped).
    pub out_of_sequence: u64,
    /// Responses that matched nothing outstanding (stale or duplicate).
    pub stale_responses: u64,
    /// Packets dropped before reaching a queue pair's protocol (see `DropReason`).
    pub dropped: u64,
    /// CNPs received (congestion control acts on them).
    pub cnps_received: u64,
    /// Payload bytes delivered into memory by the responder (SEND and WRITE) or completer
    /// (READ responses): the goodput numerator.
    pub payload_bytes_delivered: u64,
}

/// An asynchronous event (IBA 11.6.3): something the application learns besides completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The queue pair entered the error state.
    QpFatal {
        /// The queue pair.
        qpn: Qpn,
    },
    /// A queue pair in SQD has nothing outstanding.
    SqDrained {
        /// The queue pair.
        qpn: Qpn,
    },
    /// A shared receive queue fell below its armed limit (which is now disarmed).
    SrqLimitReached {
        /// The shared receive queue.
        srq: SrqId,
    },
    /// A queue pair attached to a shared receive queue entered the error state and will
    /// consume no more of its receives (IBA 11.6.3.1, `IBV_EVENT_QP_LAST_WQE_REACHED`).
    QpLastWqeReached {
        /// The queue pair.
        qpn: Qpn,
    },
}

/// A packet `poll_transmit` wrote: BTH through pad, no ICRC. The endpoint adds Ethernet, IP,
/// UDP (source port from `src_qp`) and the ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The destination IP address.
    pub dest: IpAddr,
    /// The destination QP (the BTH's DestQP).
    pub dest_qp: Qpn,
    /// The sending QP.
    pub src_qp: Qpn,
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
    /// The path's flow label (RC, UC): it picks the UDP source port when not 0.
    pub flow_label: u32,
    /// The traffic class of the QP's path or of the UD work request's address handle: its
    /// upper six bits are the packet's DSCP. `None`: the host's.
    pub traffic_class: Option<u8>,
    /// The hop limit of that path or address handle: the packet's TTL.
    pub hop_limit: u8,
}

/// A buffer of this size holds any packet the engine writes: BTH, the largest extension
/// header set, a payload of the largest path MTU (4096) and pad.
pub const MAX_PACKET_LEN: usize = IbPacketRepr::max_len(Mtu::M4096.bytes() as usize);
