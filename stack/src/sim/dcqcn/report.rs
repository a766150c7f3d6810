//! What a DCQCN simulation measured: samples over time and the summary of its last window.

use super::SimConfig;
use crate::cc::Time;

/// One flow's measurements. Rates in bit/s of wire bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    /// When the flow started.
    pub start: Time,
    /// The controller's rate R_C at each sample time (0 before the flow starts).
    pub rate_bps: Vec<f64>,
    /// Throughput delivered through the bottleneck during each sample interval.
    pub throughput_bps: Vec<f64>,
    /// R_C at the end of the run.
    pub final_rate_bps: f64,
    /// Mean delivered throughput over the summary window.
    pub window_mean_bps: f64,
    /// Packets it sent.
    pub packets: u64,
    /// Its packets the switch marked CE.
    pub marked: u64,
    /// CNPs it received.
    pub cnps: u64,
}

impl FlowReport {
    pub(super) fn new(start: Time) -> FlowReport {
        FlowReport {
            start,
            rate_bps: Vec::new(),
            throughput_bps: Vec::new(),
            final_rate_bps: 0.0,
            window_mean_bps: 0.0,
            packets: 0,
            marked: 0,
            cnps: 0,
        }
    }
}

/// Everything a DCQCN simulation measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    /// The bottleneck's rate, bit/s.
    pub link_bps: u64,
    /// Simulated time run.
    pub duration: Time,
    /// The summary window at the end of the run.
    pub window: Time,
    /// When each sample was taken.
    pub sample_times: Vec<Time>,
    /// Queue length at each sample time, bytes.
    pub queue_bytes: Vec<u64>,
    /// Largest queue length within each sample interval, bytes.
    pub queue_max_bytes: Vec<u64>,
    /// Per flow, in start order.
    pub flows: Vec<FlowReport>,
    /// The window's fairness, utilisation and queue, and the run's totals.
    pub summary: SimSummary,
    pub(super) window_queue_area: f64,
}

/// What a DCQCN run sums up to: over the summary window, how fairly and fully the flows used
/// the link and how long the queue was; over the whole run, the totals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SimSummary {
    /// Jain's fairness index of the flows' window mean throughputs.
    pub jain: f64,
    /// Delivered wire bytes over the window, as a share of the link's capacity.
    pub utilisation: f64,
    /// Time-weighted mean queue length over the window, bytes.
    pub queue_mean_bytes: f64,
    /// Largest queue length within the window, bytes.
    #[cfg_attr(feature = "serde", serde(rename = "queue_max_bytes"))]
    pub window_queue_max: u64,
    /// Largest queue length of the whole run, bytes.
    pub queue_peak_bytes: u64,
    /// Packets sent by all flows.
    pub packets: u64,
    /// Packets marked CE.
    pub marks: u64,
    /// CNPs sent.
    pub cnps: u64,
    /// Packets dropped at the full switch buffer.
    pub drops: u64,
    /// Events processed: sends, departures, CC timers, CNP arrivals, samples.
    pub events: u64,
}

impl SimReport {
    pub(super) fn new(cfg: &SimConfig, samples: usize) -> SimReport {
        SimReport {
            link_bps: cfg.link_bps,
            duration: cfg.duration,
            window: cfg.window,
            sample_times: Vec::with_capacity(samples),
            queue_bytes: Vec::with_capacity(samples),
            queue_max_bytes: Vec::with_capacity(samples),
            flows: Vec::with_capacity(cfg.flow_starts.len()),
            summary: SimSummary::default(),
            window_queue_area: 0.0,
        }
    }

    pub(super) fn summarise(&mut self, cfg: &SimConfig) {
        let means: Vec<f64> = self
            .flows
            .iter()
            .filter(|f| f.start < cfg.duration)
            .map(|f| f.window_mean_bps)
            .collect();
        self.summary.jain = jain_index(&means);
        self.summary.utilisation = means.iter().sum::<f64>() / cfg.link_bps as f64;
        self.summary.queue_mean_bytes = self.window_queue_area / cfg.window.as_picos() as f64;
    }

    /// Indices of the samples taken in `[from, to]`.
    fn sample_range(&self, from: Time, to: Time) -> std::ops::Range<usize> {
        let lo = self.sample_times.partition_point(|&t| t < from);
        let hi = self.sample_times.partition_point(|&t| t <= to);
        lo..hi.max(lo)
    }

    /// Mean throughput of `flow` over the samples taken in `[from, to]`, bit/s.
    pub fn mean_throughput(&self, flow: usize, from: Time, to: Time) -> f64 {
        let r = self.sample_range(from, to);
        mean(&self.flows[flow].throughput_bps[r])
    }

    /// Coefficient of variation (standard deviation / mean) of `flow`'s rate R_C over the
    /// samples taken in `[from, to]`: how much the controller still swings.
    pub fn rate_cv(&self, flow: usize, from: Time, to: Time) -> f64 {
        let r = self.sample_range(from, to);
        cv(&self.flows[flow].rate_bps[r])
    }

    /// Coefficient of variation of the flows' summed rate R_C over the samples taken in
    /// `[from, to]`: flows swinging together (a sustained oscillation of the loop) show here,
    /// independent cuts of single flows largely cancel.
    pub fn aggregate_rate_cv(&self, from: Time, to: Time) -> f64 {
        let sums: Vec<f64> = self
            .sample_range(from, to)
            .map(|i| self.flows.iter().map(|f| f.rate_bps[i]).sum())
            .collect();
        cv(&sums)
    }

    /// Mean of the sampled queue lengths in `[from, to]`, bytes.
    pub fn mean_queue(&self, from: Time, to: Time) -> f64 {
        let r = self.sample_range(from, to);
        let xs: Vec<f64> = self.queue_bytes[r].iter().map(|&q| q as f64).collect();
        mean(&xs)
    }
}

fn cv(xs: &[f64]) -> f64 {
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len().max(1) as f64;
    if m > 0.0 {
        var.sqrt() / m
    } else {
        f64::INFINITY
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one takes
/// everything. 0 for no flows or no traffic.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq > 0.0 {
        sum * sum / (xs.len() as f64 * sq)
    } else {
        0.0
    }
}
