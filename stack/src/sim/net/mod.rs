//! A packet-level simulation of a RoCE fabric: hosts and shared-buffer switches on a
//! dumbbell, an incast or a leaf-spine; PFC with hop-by-hop pauses, ECN marking, ECMP; flows
//! from a workload (WebSearch, Hadoop, a CDF file, a list) or long-lived ones; and the
//! stack's own congestion control at the hosts: DCQCN's [`ReactionPoint`] and
//! [`NotificationPoint`], [`Hpcc`] from the switches' in-band telemetry, [`Timely`] from the
//! RTT. It reports flow completion time slowdown by flow size (as the HPCC paper does), PFC
//! pauses and paused time per port, drops, queue-length distributions, link utilisation and
//! Jain fairness.
//!
//! The model, per packet:
//! - a host NIC serves its flows round robin, each paced at its controller's rate (and for
//!   HPCC held to its window); its ACKs, NAKs and CNPs go first;
//! - a switch routes by the destination host and the flow's hash (ECMP over shortest paths),
//!   admits the packet into its shared buffer ([`buffer`]), and queues it at the egress port
//!   by priority; on dequeue it marks CE ([`Marker`], from the bytes left in that queue) and
//!   writes HPCC's telemetry;
//! - a link delivers after serialisation plus the propagation delay; a PFC frame waits only
//!   for the frame on the wire, then pauses the peer's egress for that priority;
//! - the receiver acknowledges every `ack_every` packets (and the last) echoing the send time
//!   and the telemetry, NAKs a gap (go-back-N), and with DCQCN answers CE marks with CNPs.
//!
//! The event core is built for speed: events are 128-bit integers in a 4-ary heap holding one
//! entry per port, link, flow timer and host, not per packet (packets on a link wait in the
//! link's own FIFO, as they leave it in order); packets are 40-byte copies, never allocated;
//! flows live in a slab reused as they finish; results are fixed-size histograms. So memory is
//! bounded by the flows in flight, and a run is deterministic for its seed.
//!
//! [`ReactionPoint`]: crate::cc::ReactionPoint
//! [`NotificationPoint`]: crate::cc::NotificationPoint
//! [`Hpcc`]: crate::cc::Hpcc
//! [`Timely`]: crate::cc::Timely
//! [`Marker`]: crate::cc::Marker

mod buffer;
mod engine;
mod event;
mod flow;
mod host;
mod port;
mod report;
mod stats;
mod switch;
mod topology;
mod workload;

pub use buffer::{Pfc, StaticThresholds};
pub use flow::Control;
pub use report::{
    FctSlowdown, FlowCounts, LinkReport, LongLivedReport, NetReport, PacketCounts, Percentiles,
    PfcReport, PortPfc, PortSeries, QueueReport, Samples, SizeBucket,
};
pub use topology::Topology;
pub use workload::{Cdf, FlowSpec, Workload};

use thiserror::Error;

use crate::cc::{CcError, Marker, Time};
use crate::sim::dcqcn::{HEADER_BYTES, WIRE_OVERHEAD_BYTES};
use crate::wire::encap::{ETHERNET_FCS_LEN, ETHERNET_MIN_FRAME_LEN};
use crate::wire::{AethRepr, CnpRepr, FixedHeader};

/// What a run simulates.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    /// The shape of the network.
    pub topology: Topology,
    /// Host links, bit/s.
    pub host_bps: u64,
    /// Switch-to-switch links, bit/s.
    pub fabric_bps: u64,
    /// Propagation delay of every link.
    pub delay: Time,
    /// The hosts' congestion control.
    pub control: Control,
    /// PFC on the data priority, and its thresholds.
    pub pfc: Pfc,
    /// Each switch's shared buffer, bytes.
    pub buffer_bytes: u64,
    /// The dynamic threshold's alpha: the share of the free buffer one queue may take.
    pub dt_alpha: f64,
    /// ECN marking at the host rate (scaled with each port's rate).
    pub marker: Marker,
    /// Payload bytes per full packet.
    pub payload_bytes: u32,
    /// Which flows run.
    pub workload: Workload,
    /// Simulated time to run.
    pub duration: Time,
    /// Seeds every random choice: the same seed gives the same run.
    pub seed: u64,
    /// The receiver acknowledges every this many in-order packets (and the last).
    pub ack_every: u32,
    /// The requester's retransmission timeout.
    pub rto: Time,
    /// A gap the responder NAKed is NAKed again if still open this long after.
    pub nak_interval: Time,
    /// The notification point's minimum CNP spacing per QP.
    pub cnp_interval: Time,
    /// Spacing of the samples over time.
    pub sample_interval: Time,
    /// Long-lived flows' throughput and fairness are measured over the run's last `window`.
    pub window: Time,
}

/// The largest run: a bound on the work (and the time) one call may take.
const MAX_PACKETS: f64 = 4e10;
/// Samples kept for the report: 200 MB at most.
const MAX_SAMPLE_VALUES: u64 = 25_000_000;
/// The extra bytes HPCC's telemetry adds to a data packet (the paper's 42 for 5 hops).
pub const INT_BYTES: u32 = 42;
/// A PFC frame on the wire: a minimum Ethernet frame and its FCS, plus preamble and gap.
pub const PAUSE_WIRE_BYTES: u32 =
    (ETHERNET_MIN_FRAME_LEN + ETHERNET_FCS_LEN) as u32 + WIRE_OVERHEAD_BYTES;

impl NetConfig {
    /// A run of `topology` with no congestion control, PFC on with dynamic thresholds, 1000-byte
    /// payloads (as the HPCC experiments), 1 us links, a buffer of 320 KB per Gb/s of host link
    /// (the HPCC runs' 32 MB at 100 Gb/s), DT alpha 1/8, marking as the HPCC runs (Kmin 100 KB
    /// and Kmax 400 KB per 25 Gb/s, Pmax 0.2), per-packet ACKs, NAKs repeated after 500 us
    /// (the HPCC authors' ns-3 default), a 4 ms retransmission timeout (long enough that PFC
    /// pauses do not fire it), 10 ms, seed 1.
    pub fn new(topology: Topology, host_gbps: u64) -> NetConfig {
        let host_bps = host_gbps.saturating_mul(1_000_000_000);
        let per_25g = host_bps as f64 / 25e9;
        NetConfig {
            topology,
            host_bps,
            fabric_bps: host_bps,
            delay: Time::from_micros(1),
            control: Control::None,
            pfc: Pfc::Dynamic,
            buffer_bytes: (host_bps as f64 / 1e9 * 320_000.0) as u64,
            dt_alpha: 0.125,
            marker: Marker::new(
                (100_000.0 * per_25g) as u64,
                (400_000.0 * per_25g) as u64,
                0.2,
            )
            .unwrap_or(Marker::paper()),
            payload_bytes: 1000,
            workload: Workload::LongLived,
            duration: Time::from_millis(10),
            seed: 1,
            ack_every: 1,
            rto: Time::from_millis(4),
            nak_interval: Time::from_micros(500),
            cnp_interval: crate::cc::CNP_INTERVAL,
            sample_interval: Time::from_micros(20),
            window: Time::from_millis(10),
        }
    }

    /// Wire bytes of a data packet carrying `payload` bytes.
    pub fn data_wire_bytes(&self, payload: u32) -> u32 {
        let int = if matches!(self.control, Control::Hpcc(_)) {
            INT_BYTES
        } else {
            0
        };
        payload + HEADER_BYTES + WIRE_OVERHEAD_BYTES + int
    }

    /// Wire bytes of an ACK or NAK (BTH + AETH), with the telemetry it echoes for HPCC.
    pub fn ack_wire_bytes(&self) -> u32 {
        self.data_wire_bytes(AethRepr::LEN as u32)
    }

    /// Wire bytes of a CNP.
    pub fn cnp_wire_bytes(&self) -> u32 {
        CnpRepr::LEN as u32 + HEADER_BYTES + WIRE_OVERHEAD_BYTES
    }

    /// The longest base RTT between two hosts: a full packet there and its ACK back on an
    /// idle network (HPCC's T; the ns-3 runs use the largest, GLOBAL_T).
    pub fn max_base_rtt(&self) -> Time {
        engine::max_base_rtt(self)
    }

    fn validate(&self) -> Result<(), NetError> {
        let bad = |s: String| Err(NetError::Config(s));
        if self.host_bps == 0 || self.fabric_bps == 0 {
            return bad("link rates must be positive".into());
        }
        if self.payload_bytes == 0 || self.payload_bytes > 4096 {
            return bad(format!(
                "the payload must be 1 to 4096 bytes (an IB MTU), got {}",
                self.payload_bytes
            ));
        }
        let packet = u64::from(self.data_wire_bytes(self.payload_bytes));
        if self.buffer_bytes < packet {
            return bad(format!(
                "the switch buffer ({} B) is smaller than one packet ({packet} B on the wire)",
                self.buffer_bytes
            ));
        }
        if !(self.dt_alpha.is_finite() && self.dt_alpha > 0.0) {
            return bad(format!(
                "the DT alpha must be positive, got {}",
                self.dt_alpha
            ));
        }
        if let Pfc::Fixed(t) = self.pfc
            && t.xon >= t.xoff
        {
            return bad(format!(
                "XON ({} B) must be below XOFF ({} B)",
                t.xon, t.xoff
            ));
        }
        if self.duration.is_zero() || self.sample_interval.is_zero() || self.window.is_zero() {
            return bad("the duration, sample interval and window must be positive".into());
        }
        if self.ack_every == 0 {
            return bad("ACKs must go every 1 or more packets".into());
        }
        if self.rto.is_zero() || self.nak_interval.is_zero() {
            return bad("the retransmission timeout and NAK interval must be positive".into());
        }
        let hosts = self.topology.hosts();
        let host_seconds = f64::from(hosts) * self.duration.as_secs_f64();
        if host_seconds * self.host_bps as f64 / (8.0 * packet as f64) > MAX_PACKETS {
            return bad("too long: the hosts could send over 4e10 packets; shorten the run".into());
        }
        let per_flow = self.duration.as_secs_f64() * self.host_bps as f64 / (8.0 * packet as f64);
        if per_flow >= f64::from(flow::ENDLESS) {
            return bad("too long: a flow's PSNs would wrap; shorten the run".into());
        }
        match &self.workload {
            Workload::LongLived => {
                if matches!(self.topology, Topology::LeafSpine { .. }) {
                    return bad("a leaf-spine has no long-lived flows of its own: give --workload or --flows".into());
                }
            }
            Workload::Poisson { load, .. } => {
                if !(load.is_finite() && *load > 0.0 && *load <= 1.0) {
                    return Err(NetError::Workload(format!(
                        "the load must be above 0 and at most 1, got {load}"
                    )));
                }
            }
            Workload::Flows(flows) => {
                if flows.is_empty() {
                    return Err(NetError::Workload("--flows lists no flow".into()));
                }
                for (i, f) in flows.iter().enumerate() {
                    if f.src >= hosts || f.dst >= hosts || f.src == f.dst {
                        return Err(NetError::Workload(format!(
                            "flow {} ({}-{}): hosts are 0 to {} and a flow needs two",
                            i + 1,
                            f.src,
                            f.dst,
                            hosts - 1
                        )));
                    }
                    if f.size.is_some_and(|s| {
                        s.div_ceil(u64::from(self.payload_bytes)) >= u64::from(flow::ENDLESS)
                    }) {
                        return Err(NetError::Workload(format!("flow {} is too large", i + 1)));
                    }
                }
            }
        }
        let samples = self.duration.as_picos() / self.sample_interval.as_picos();
        if samples > 1_000_000 {
            return bad("too many samples: raise the sample interval".into());
        }
        if let Control::Dcqcn(p) = &self.control
            && p.line_rate_bps != self.host_bps as f64
        {
            return bad("the DCQCN line rate must equal the host link rate".into());
        }
        Ok(())
    }
}

/// Why a run cannot start.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetError {
    /// The network or a parameter.
    #[error("{0}")]
    Config(String),
    /// The flows: a CDF, a load, a flow list.
    #[error("workload: {0}")]
    Workload(String),
    /// The congestion controller's parameters.
    #[error(transparent)]
    Cc(#[from] CcError),
}

/// Something worth a line in a trace file.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// A flow's last byte was acknowledged.
    FlowDone {
        /// When.
        at: Time,
        /// The sending host.
        src: u32,
        /// The receiving host.
        dst: u32,
        /// The flow's size.
        bytes: u64,
        /// When it started.
        start: Time,
        /// Its flow completion time.
        fct: Time,
        /// Its completion time alone on an idle network.
        ideal: Time,
    },
    /// A switch sent a PFC frame (XOFF, or XON when `pause` is false) on a port.
    Pfc {
        /// When.
        at: Time,
        /// `switch->neighbour`.
        port: String,
        /// The priority paused or resumed.
        prio: u8,
        /// XOFF (true) or XON (false).
        pause: bool,
    },
    /// A switch dropped a packet.
    Drop {
        /// When.
        at: Time,
        /// The egress it was bound for, `switch->neighbour`.
        port: String,
        /// The packet's sending host.
        src: u32,
        /// The packet's receiving host.
        dst: u32,
    },
}

/// What a run tells its caller as it goes.
pub trait Observer {
    /// Called every few hundred thousand events with the simulated time.
    fn progress(&mut self, _now: Time, _end: Time) {}
    /// True if [`Observer::trace`] wants the events (they cost a formatted string each).
    fn wants_trace(&self) -> bool {
        false
    }
    /// A trace event.
    fn trace(&mut self, _event: TraceEvent) {}
}

/// Nothing to observe.
impl Observer for () {}

/// Runs the simulation.
pub fn run(config: &NetConfig, observer: &mut dyn Observer) -> Result<NetReport, NetError> {
    config.validate()?;
    let sim = engine::Sim::new(config, observer)?;
    let samples = config.duration.as_picos() / config.sample_interval.as_picos();
    if samples.saturating_mul(sim.series()) > MAX_SAMPLE_VALUES {
        return Err(NetError::Config(
            "too many samples for this network: raise the sample interval".into(),
        ));
    }
    Ok(sim.run())
}

#[cfg(test)]
mod tests;
