//! Per-flow state: one direction of traffic to one QP, (source IP, destination IP, DestQP).
//!
//! A flow starts small (a few hundred bytes: a capture of one-packet flows must not cost
//! kilobytes each, issue 14) and takes on more only as its packets need it: counts for the
//! opcodes and NAK codes it actually carries, goodput buckets once it carries payload, and a
//! requester once it carries requests. Nothing grows with the number of packets beyond the
//! capped lists of `requester.rs`.

use core::hash::{BuildHasherDefault, Hasher};
use core::net::IpAddr;
use std::collections::HashMap;

use super::report::{RateChange, Signal};
use super::requester::{EVENTS_KEPT, Requester};
use super::sketch::{Goodput, SPACING_GAPS, Spacing};
use crate::wire::Qpn;

/// The flow key with both addresses as 128 bits (IPv4 as its IPv4-mapped IPv6 address, the
/// form RoCEv2 GIDs take), so hashing and comparing are a few integer operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FlowKey {
    pub(crate) src: u128,
    pub(crate) dst: u128,
    pub(crate) qp: u32,
}

pub(crate) fn addr_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// A multiply-rotate hasher (the FxHash construction): flow keys are not attacker-chosen
/// in a capture being analysed, and SipHash would cost more than the rest of a packet.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FlowHasher(u64);

impl Hasher for FlowHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FlowHasher>>;
pub(crate) type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<FlowHasher>>;

/// A rate measurement waiting for the packets after its signal.
#[derive(Debug, Clone, Copy)]
struct PendingRate {
    signal: Signal,
    ts: u64,
    before: u64,
    sum: u64,
    gaps: u64,
}

/// Congestion signals aimed at a flow and the spacing change each one caused.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateTracker {
    pending: Option<PendingRate>,
    pub(crate) events: Vec<RateChange>,
}

impl RateTracker {
    /// A CNP or CE mark for this flow; measured unless a measurement is already running.
    pub(crate) fn signal(&mut self, signal: Signal, ts: u64, spacing: &Spacing) {
        if self.pending.is_some() || self.events.len() >= EVENTS_KEPT {
            return;
        }
        if let Some(before) = spacing.mean() {
            self.pending = Some(PendingRate {
                signal,
                ts,
                before,
                sum: 0,
                gaps: 0,
            });
        }
    }

    pub(crate) fn gap(&mut self, gap: u64) {
        let Some(p) = &mut self.pending else {
            return;
        };
        p.sum += gap;
        p.gaps += 1;
        if p.gaps == SPACING_GAPS as u64 {
            self.finish();
        }
    }

    /// Closes a measurement cut short by the end of the capture.
    pub(crate) fn finish(&mut self) {
        if let Some(p) = self.pending.take().filter(|p| p.gaps > 0) {
            self.events.push(RateChange {
                signal: p.signal,
                ts: p.ts,
                gap_before_ns: p.before,
                gap_after_ns: p.sum / p.gaps,
            });
        }
    }
}

/// Counts by a small key (an opcode, a NAK code): the few keys a flow uses inline, a table
/// of all of them once it uses more.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    few: [(u8, u64); FEW],
    used: u8,
    all: Option<Box<[u64; 256]>>,
}

/// Keys counted inline: a flow rarely carries more opcodes than this.
const FEW: usize = 4;

impl Counts {
    #[inline]
    pub(crate) fn add(&mut self, key: u8) {
        if let Some(all) = &mut self.all {
            all[usize::from(key)] += 1;
            return;
        }
        let used = usize::from(self.used);
        if let Some(slot) = self.few[..used].iter_mut().find(|(k, _)| *k == key) {
            slot.1 += 1;
        } else if used < FEW {
            self.few[used] = (key, 1);
            self.used += 1;
        } else {
            let mut all = Box::new([0u64; 256]);
            for &(k, n) in &self.few {
                all[usize::from(k)] = n;
            }
            all[usize::from(key)] += 1;
            self.all = Some(all);
        }
    }

    /// (key, count) for every key counted, in key order.
    pub(crate) fn iter(&self) -> Vec<(u8, u64)> {
        let mut out: Vec<(u8, u64)> = match &self.all {
            Some(all) => (0..=255u8)
                .zip(all.iter().copied())
                .filter(|&(_, n)| n > 0)
                .collect(),
            None => self.few[..usize::from(self.used)].to_vec(),
        };
        out.sort_unstable();
        out
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.all.as_ref().map_or(0, |_| 256 * 8)
    }
}

#[derive(Debug)]
pub(crate) struct Flow {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) dest_qp: Qpn,
    pub(crate) udp_src_port: u16,
    pub(crate) packets: u64,
    pub(crate) opcodes: Counts,
    pub(crate) retransmitted: u64,
    /// NAKs by code (0-31).
    pub(crate) naks: Counts,
    pub(crate) rnr_naks: u64,
    pub(crate) cnps: u64,
    pub(crate) ecn_ce: u64,
    pub(crate) payload_bytes: u64,
    pub(crate) icrc_errors: u64,
    pub(crate) first_ts: u64,
    pub(crate) last_ts: u64,
    pub(crate) reverse: Option<u32>,
    /// While unpaired: the flows before and after it in its hosts' unpaired list.
    pub(crate) unpaired: (u32, u32),
    /// The requester whose requests this flow carries (RC and UC).
    pub(crate) requester: Option<Box<Requester>>,
    /// From the first payload byte on.
    pub(crate) goodput: Option<Box<Goodput>>,
    pub(crate) spacing: Spacing,
    pub(crate) rate: RateTracker,
    /// [`Flow::bytes`] as last counted (`Analyzer::recount`).
    pub(crate) held: usize,
    /// The sender's MAC, to tell its own pauses from those aimed at it.
    pub(crate) src_mac: [u8; 6],
    /// PFC priority, and whether an 802.1Q tag said so (else the DSCP).
    pub(crate) priority: (u8, bool),
    /// Pauses finished when its last packet was seen (`PfcTracker::finished`).
    pub(crate) pfc_seen: u64,
    /// Pauses of its priority it sat through silently, and their length.
    pub(crate) pfc_stalls: u32,
    pub(crate) pfc_stalled_ns: u64,
    /// A RoCEv1 flow: its addresses are GIDs.
    pub(crate) roce_v1: bool,
}

impl Flow {
    pub(crate) fn new(src: IpAddr, dst: IpAddr, dest_qp: Qpn, udp_src_port: u16, ts: u64) -> Flow {
        Flow {
            src,
            dst,
            dest_qp,
            udp_src_port,
            packets: 0,
            opcodes: Counts::default(),
            retransmitted: 0,
            naks: Counts::default(),
            rnr_naks: 0,
            cnps: 0,
            ecn_ce: 0,
            payload_bytes: 0,
            icrc_errors: 0,
            first_ts: ts,
            last_ts: ts,
            reverse: None,
            unpaired: (u32::MAX, u32::MAX),
            requester: None,
            goodput: None,
            spacing: Spacing::default(),
            rate: RateTracker::default(),
            held: 0,
            src_mac: [0; 6],
            priority: (0, false),
            pfc_seen: 0,
            pfc_stalls: 0,
            pfc_stalled_ns: 0,
            roce_v1: false,
        }
    }

    pub(crate) fn requester(&mut self) -> &mut Requester {
        self.requester
            .get_or_insert_with(|| Box::new(Requester::new()))
    }

    /// Bytes this flow holds, on the heap included (for limits and tests).
    pub(crate) fn bytes(&self) -> usize {
        core::mem::size_of::<Flow>()
            + self.opcodes.heap_bytes()
            + self.naks.heap_bytes()
            + self
                .goodput
                .as_ref()
                .map_or(0, |_| core::mem::size_of::<Goodput>())
            + self.rate.events.capacity() * core::mem::size_of::<RateChange>()
            + self.requester.as_ref().map_or(0, |r| r.bytes())
    }
}
