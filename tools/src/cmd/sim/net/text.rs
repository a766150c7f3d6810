//! The readable summary of `roce sim net`.

use std::fmt::Write;

use roce::cc::Time;
use roce::sim::net::{Pfc, Workload};

use super::NetRun;

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} KB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

fn dur(t: Time) -> String {
    let us = t.as_micros_f64();
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} us")
    }
}

fn header(out: &mut String, run: &NetRun) {
    let cfg = &run.config;
    let pfc = match cfg.pfc {
        Pfc::Off => "PFC off".to_string(),
        Pfc::Dynamic => format!("PFC on (dynamic thresholds, alpha {})", cfg.dt_alpha),
        Pfc::Fixed(t) => format!(
            "PFC on (XOFF {} KB, XON {} KB)",
            t.xoff / 1000,
            t.xon / 1000
        ),
    };
    let _ = writeln!(
        out,
        "roce sim net: {} ({} hosts), {} Gb/s host links, {} Gb/s fabric, {} per link; {pfc}; \
         buffer {} KB per switch",
        run.report.topology,
        run.report.hosts,
        cfg.host_bps as f64 / 1e9,
        cfg.fabric_bps as f64 / 1e9,
        dur(cfg.delay),
        cfg.buffer_bytes / 1000
    );
    let flows = match &cfg.workload {
        Workload::LongLived => "the topology's long-lived flows".to_string(),
        Workload::Poisson { cdf, load, .. } => format!(
            "{} flow sizes (mean {:.0} KB) at {:.0}% load",
            cdf.name(),
            cdf.mean() / 1e3,
            load * 100.0
        ),
        Workload::Flows(f) => format!("{} listed flows", f.len()),
    };
    let _ = writeln!(
        out,
        "{flows}; {} simulated, seed {}, {} B payloads, an ACK every {} packet{}",
        dur(cfg.duration),
        cfg.seed,
        cfg.payload_bytes,
        cfg.ack_every,
        if cfg.ack_every == 1 { "" } else { "s" }
    );
}

fn one(out: &mut String, run: &NetRun) {
    let r = &run.report;
    let cfg = &run.config;
    let preset = run.preset.map(|p| format!(" ({p})")).unwrap_or_default();
    let _ = writeln!(
        out,
        "\n== {}{preset}: {} events in {:.2} s wall, {:.2} s CPU ({:.1} M events/s); ECN Kmin {} KB, \
         Kmax {} KB, Pmax {}",
        r.control,
        r.events,
        run.wall_s,
        run.cpu_s,
        r.events as f64 / run.wall_s.max(1e-9) / 1e6,
        cfg.marker.kmin_bytes() / 1000,
        cfg.marker.kmax_bytes() / 1000,
        cfg.marker.pmax()
    );
    let f = &r.flows;
    if f.started > r.long_lived.len() as u64 {
        let o = &r.fct_slowdown.overall;
        let _ = writeln!(
            out,
            "flows: {} started, {} finished, {} unfinished at the end (at most {} at once)",
            f.started, f.finished, f.unfinished, f.peak_in_flight
        );
        let _ = writeln!(
            out,
            "FCT slowdown over {} flows: p50 {:.2}, p95 {:.2}, p99 {:.2}, mean {:.2}, max {:.2}",
            o.flows, o.p50, o.p95, o.p99, o.mean, o.max
        );
        if !r.fct_slowdown.by_size.is_empty() {
            let _ = writeln!(
                out,
                "  {:>10}  {:>6}  {:>8}  {:>8}  {:>8}",
                "size up to", "flows", "p50", "p95", "p99"
            );
            for b in &r.fct_slowdown.by_size {
                let s = &b.slowdown;
                let _ = writeln!(
                    out,
                    "  {:>10}  {:>6}  {:>8.2}  {:>8.2}  {:>8.2}",
                    size(b.max_bytes),
                    s.flows,
                    s.p50,
                    s.p95,
                    s.p99
                );
            }
        }
    }
    let p = &r.pfc;
    let _ = writeln!(
        out,
        "PFC: {} frames ({} XOFF, {} XON), {} paused over all ports",
        p.pause_frames,
        p.xoff_frames,
        p.xon_frames,
        dur(p.paused)
    );
    for port in p.by_port.iter().filter(|p| !p.paused.is_zero()).take(6) {
        let _ = writeln!(
            out,
            "  {:<20} paused {:>10} ({:.1}% of the run), {} PFC frames received",
            port.port,
            dur(port.paused),
            100.0 * port.paused.as_secs_f64() / r.duration.as_secs_f64(),
            port.frames_received
        );
    }
    let k = &r.packets;
    let _ = writeln!(
        out,
        "drops: {}; data packets {} ({} retransmitted), ACKs {}, NAKs {}, CNPs {}, CE-marked {}, \
         timeouts {}",
        r.drops, k.data, k.retransmitted, k.acks, k.naks, k.cnps, k.ecn_marked, k.timeouts
    );
    if let Some(busiest) = r
        .links
        .iter()
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
    {
        let mean = r.links.iter().map(|l| l.utilisation).sum::<f64>() / r.links.len() as f64;
        let _ = writeln!(
            out,
            "links: mean utilisation {:.1}%, busiest {} at {:.1}%",
            100.0 * mean,
            busiest.port,
            100.0 * busiest.utilisation
        );
    }
    let _ = writeln!(
        out,
        "egress queues per switch (share of port time): p50 / p90 / p99 / max, buffer peak"
    );
    for q in &r.queues {
        let _ = writeln!(
            out,
            "  {:<8} {} / {} / {} / {}, {}{}",
            q.switch,
            size(q.p50_bytes),
            size(q.p90_bytes),
            size(q.p99_bytes),
            size(q.max_bytes),
            size(q.buffer_peak_bytes),
            if q.drops > 0 {
                format!(", {} drops", q.drops)
            } else {
                String::new()
            }
        );
    }
    if !r.long_lived.is_empty() {
        let _ = writeln!(
            out,
            "long-lived flows, throughput over the last {}:",
            dur(cfg.window.min(cfg.duration))
        );
        for l in &r.long_lived {
            let _ = writeln!(
                out,
                "  h{}->h{}  {:7.2} Gb/s  (rate at the end {:.2} Gb/s)",
                l.src,
                l.dst,
                l.throughput_bps / 1e9,
                l.final_rate_bps / 1e9
            );
        }
        if let Some(j) = r.jain {
            let _ = writeln!(out, "Jain's fairness: {j:.4}");
        }
    }
}

/// p99 slowdown per size bucket, one column per controller.
fn comparison(out: &mut String, runs: &[NetRun]) {
    let Some(first) = runs.first() else {
        return;
    };
    if first.report.fct_slowdown.by_size.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "\np99 FCT slowdown by flow size\n  {:>10}",
        "size up to"
    );
    for run in runs {
        let _ = write!(out, "  {:>8}", run.report.control);
    }
    let _ = writeln!(out);
    for (i, b) in first.report.fct_slowdown.by_size.iter().enumerate() {
        let _ = write!(out, "  {:>10}", size(b.max_bytes));
        for run in runs {
            let p99 = run
                .report
                .fct_slowdown
                .by_size
                .get(i)
                .map_or(0.0, |b| b.slowdown.p99);
            let _ = write!(out, "  {p99:>8.2}");
        }
        let _ = writeln!(out);
    }
}

pub fn summary(runs: &[NetRun]) -> String {
    let mut out = String::new();
    if let Some(first) = runs.first() {
        header(&mut out, first);
    }
    for run in runs {
        one(&mut out, run);
    }
    if runs.len() > 1 {
        comparison(&mut out, runs);
    }
    out
}
