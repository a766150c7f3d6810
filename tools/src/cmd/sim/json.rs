//! `roce sim dcqcn --json`: one document with the samples over time and the summary.

use roce::sim::dcqcn::SimSummary;
use serde::Serialize;

use super::Run;

#[derive(Serialize)]
pub struct Document {
    pub link_gbps: f64,
    pub preset: String,
    pub duration_ms: f64,
    pub delay_us: f64,
    pub seed: u64,
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
    pub payload_bytes: u32,
    pub wire_bytes: u64,
    pub window_ms: f64,
    /// Sample times, ms; every per-sample array below has one entry per time.
    pub sample_times_ms: Vec<f64>,
    pub queue_bytes: Vec<u64>,
    /// Largest queue in each sample interval.
    pub queue_interval_max_bytes: Vec<u64>,
    pub flows: Vec<Flow>,
    /// jain through queue_max_bytes over the last `window_ms`, then totals over the whole run.
    #[serde(flatten)]
    pub summary: SimSummary,
    pub fluid_fixed_point: Option<FixedPoint>,
}

#[derive(Serialize)]
pub struct Flow {
    pub start_ms: f64,
    /// The sender's DCQCN rate R_C at each sample time (0 before it starts).
    pub rate_gbps: Vec<f64>,
    /// Delivered through the bottleneck in each sample interval.
    pub throughput_gbps: Vec<f64>,
    pub final_rate_gbps: f64,
    /// Mean delivered throughput over the last `window_ms`.
    pub mean_rate_gbps: f64,
    pub packets: u64,
    pub marked: u64,
    pub cnps: u64,
}

#[derive(Serialize)]
pub struct FixedPoint {
    pub flows: usize,
    pub rate_gbps: f64,
    pub p: f64,
    pub alpha: f64,
    pub queue_bytes: f64,
}

fn gbps(xs: &[f64]) -> Vec<f64> {
    xs.iter().map(|x| x / 1e9).collect()
}

pub fn document(run: &Run) -> Document {
    let (cfg, r) = (&run.config, &run.report);
    let running = cfg
        .flow_starts
        .iter()
        .filter(|&&s| s < cfg.duration)
        .count();
    Document {
        link_gbps: cfg.link_bps as f64 / 1e9,
        preset: run.preset.clone(),
        duration_ms: cfg.duration.as_millis_f64(),
        delay_us: cfg.feedback_delay.as_micros_f64(),
        seed: cfg.seed,
        kmin_bytes: cfg.marker.kmin_bytes(),
        kmax_bytes: cfg.marker.kmax_bytes(),
        pmax: cfg.marker.pmax(),
        payload_bytes: cfg.payload_bytes,
        wire_bytes: cfg.wire_bytes(),
        window_ms: cfg.window.as_millis_f64(),
        sample_times_ms: r.sample_times.iter().map(|t| t.as_millis_f64()).collect(),
        queue_bytes: r.queue_bytes.clone(),
        queue_interval_max_bytes: r.queue_max_bytes.clone(),
        flows: r
            .flows
            .iter()
            .map(|f| Flow {
                start_ms: f.start.as_millis_f64(),
                rate_gbps: gbps(&f.rate_bps),
                throughput_gbps: gbps(&f.throughput_bps),
                final_rate_gbps: f.final_rate_bps / 1e9,
                mean_rate_gbps: f.window_mean_bps / 1e9,
                packets: f.packets,
                marked: f.marked,
                cnps: f.cnps,
            })
            .collect(),
        summary: r.summary,
        fluid_fixed_point: run.fixed_point.map(|fp| FixedPoint {
            flows: running,
            rate_gbps: fp.rate_bps / 1e9,
            p: fp.p,
            alpha: fp.alpha,
            queue_bytes: fp.queue_bytes,
        }),
    }
}
