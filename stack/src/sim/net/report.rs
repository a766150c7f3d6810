//! What a network simulation measured.

use crate::cc::Time;

/// Slowdown percentiles of a set of flows (FCT over the FCT alone on an idle network,
/// at least 1), to within half a percent.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Percentiles {
    /// Flows counted.
    pub flows: u64,
    /// Median slowdown.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean slowdown.
    pub mean: f64,
    /// Largest slowdown.
    pub max: f64,
}

/// The flows up to `max_bytes` (and above the previous bucket's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeBucket {
    /// The largest flow size in the bucket, bytes.
    pub max_bytes: u64,
    /// Slowdown of the bucket's flows.
    pub slowdown: Percentiles,
}

/// FCT slowdown over all finished flows, and per flow-size bucket (5 % of the workload's
/// flows each, as the HPCC paper's Figure 11 groups them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FctSlowdown {
    /// Slowdown of every finished flow.
    pub overall: Percentiles,
    /// Per size bucket, smallest first.
    pub by_size: Vec<SizeBucket>,
}

/// How many flows started, finished and were still running at the end.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FlowCounts {
    /// Flows that started.
    pub started: u64,
    /// Flows whose last byte was acknowledged.
    pub finished: u64,
    /// Flows still running at the end.
    pub unfinished: u64,
    /// Largest number in flight at once.
    pub peak_in_flight: u64,
    /// Flow states allocated, each reused once its flow finishes: memory follows the flows
    /// in flight, not the flows simulated.
    pub slots: u64,
}

/// Packets by kind.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PacketCounts {
    /// Data packets put on the wire by the hosts, retransmissions included.
    pub data: u64,
    /// Data packets sent again.
    pub retransmitted: u64,
    /// ACKs sent.
    pub acks: u64,
    /// NAKs sent.
    pub naks: u64,
    /// CNPs sent.
    pub cnps: u64,
    /// Data packets a switch marked CE.
    pub ecn_marked: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// One port's PFC: frames its switch sent upstream, and the pauses its own egress took.
#[derive(Debug, Clone, PartialEq)]
pub struct PortPfc {
    /// `node->neighbour`: the link this port sends on.
    pub port: String,
    /// XOFF frames this port's switch sent to the neighbour.
    pub xoff_sent: u64,
    /// XON frames sent.
    pub xon_sent: u64,
    /// PFC frames received from the neighbour.
    pub frames_received: u64,
    /// Time this port's egress was paused by the neighbour.
    pub paused: Time,
}

/// PFC over the whole fabric.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PfcReport {
    /// XOFF and XON frames sent.
    pub pause_frames: u64,
    /// XOFF frames sent.
    pub xoff_frames: u64,
    /// XON frames sent.
    pub xon_frames: u64,
    /// Paused time summed over every port.
    pub paused: Time,
    /// Every port that sent or received a PFC frame, most paused first.
    pub by_port: Vec<PortPfc>,
}

/// One direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkReport {
    /// `node->neighbour`.
    pub port: String,
    /// The link's rate.
    pub gbps: f64,
    /// Wire bytes sent over what the link could carry in the run.
    pub utilisation: f64,
    /// Largest egress queue, bytes.
    pub peak_queue_bytes: u64,
}

/// A switch's egress queue lengths: the share of port-time at or below each length.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueReport {
    /// The switch's name.
    pub switch: String,
    /// Median egress queue, bytes.
    pub p50_bytes: u64,
    /// 90th percentile.
    pub p90_bytes: u64,
    /// 99th percentile.
    pub p99_bytes: u64,
    /// Largest.
    pub max_bytes: u64,
    /// Most bytes its buffer held at once.
    pub buffer_peak_bytes: u64,
    /// Packets dropped at its full buffer.
    pub drops: u64,
    /// (bytes, share of time at or below), the length an upper bound within a quarter octave.
    pub cdf: Vec<(u64, f64)>,
}

/// A long-lived flow.
#[derive(Debug, Clone, PartialEq)]
pub struct LongLivedReport {
    /// The sending host.
    pub src: u32,
    /// The receiving host.
    pub dst: u32,
    /// Wire bytes delivered in order over the summary window, per second.
    pub throughput_bps: f64,
    /// The controller's rate at the end.
    pub final_rate_bps: f64,
}

/// A port's queue and pause over time.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSeries {
    /// `node->neighbour`.
    pub port: String,
    /// Largest queue in each sample interval, bytes.
    pub queue_bytes: Vec<u64>,
    /// Share of each sample interval its egress was paused.
    pub paused: Vec<f32>,
}

/// Samples over time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Samples {
    /// When each sample was taken.
    pub times: Vec<Time>,
    /// Per long-lived flow: wire bytes delivered in order in each interval, per second.
    pub flow_throughput_bps: Vec<Vec<f64>>,
    /// Per long-lived flow: its controller's rate at each sample.
    pub flow_rate_bps: Vec<Vec<f64>>,
    /// All flows together: wire bytes delivered in order per second.
    pub delivered_bps: Vec<f64>,
    /// Every switch port that queued, and every port that was paused.
    pub ports: Vec<PortSeries>,
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct NetReport {
    /// The topology as given on the command line.
    pub topology: String,
    /// The congestion control's name.
    pub control: &'static str,
    /// Hosts in the network.
    pub hosts: u32,
    /// Simulated time run.
    pub duration: Time,
    /// HPCC's T: the longest base RTT.
    pub base_rtt: Time,
    /// Events processed.
    pub events: u64,
    /// Flows started, finished and unfinished.
    pub flows: FlowCounts,
    /// Flow completion time over the ideal, overall and by size.
    pub fct_slowdown: FctSlowdown,
    /// Pause frames and paused time.
    pub pfc: PfcReport,
    /// Packets dropped by the switches.
    pub drops: u64,
    /// Packets by kind.
    pub packets: PacketCounts,
    /// Every link direction that carried traffic.
    pub links: Vec<LinkReport>,
    /// Per switch.
    pub queues: Vec<QueueReport>,
    /// Per long-lived flow.
    pub long_lived: Vec<LongLivedReport>,
    /// Jain's index of the throughputs of the long-lived flows to the receiver most of them
    /// share (all of them if none share one), if there are two or more.
    pub jain: Option<f64>,
    /// Queue, pause and throughput series.
    pub samples: Samples,
}

/// Jain's fairness index: (sum x)^2 / (n sum x^2).
pub(super) fn jain(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    Some(if squares == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * squares)
    })
}
