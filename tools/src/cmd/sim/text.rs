//! The readable summary of a DCQCN simulation.

use std::fmt::Write;

use roce::sim::dcqcn::Control;

use super::Run;

fn gbps(bps: f64) -> f64 {
    bps / 1e9
}

fn kb(bytes: f64) -> f64 {
    bytes / 1e3
}

pub fn summary(run: &Run) -> String {
    let (cfg, r) = (&run.config, &run.report);
    let window_ms = cfg.window.as_millis_f64();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "DCQCN simulation: {} flow{}, {} Gb/s bottleneck, preset {}, {} ms, feedback delay {} us, seed {}",
        cfg.flow_starts.len(),
        if cfg.flow_starts.len() == 1 { "" } else { "s" },
        gbps(cfg.link_bps as f64),
        run.preset,
        cfg.duration.as_millis_f64(),
        cfg.feedback_delay.as_micros_f64(),
        cfg.seed,
    );
    let _ = writeln!(
        out,
        "switch: RED Kmin {} KB, Kmax {} KB, Pmax {}; packets {} B payload, {} B on the wire",
        kb(cfg.marker.kmin_bytes() as f64),
        kb(cfg.marker.kmax_bytes() as f64),
        cfg.marker.pmax(),
        cfg.payload_bytes,
        cfg.wire_bytes(),
    );
    let _ = writeln!(out);
    let mean_header = format!("mean last {window_ms} ms");
    let _ = writeln!(
        out,
        "{:>4}  {:>8}  {:>15}  {:>w$}  {:>8}  {:>6}",
        "flow",
        "start ms",
        "final rate Gb/s",
        format!("{mean_header} Gb/s"),
        "CE marks",
        "CNPs",
        w = mean_header.len() + 5,
    );
    for (i, f) in r.flows.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>4}  {:>8.1}  {:>15.2}  {:>w$.2}  {:>8}  {:>6}",
            i,
            f.start.as_millis_f64(),
            gbps(f.final_rate_bps),
            gbps(f.window_mean_bps),
            f.marked,
            f.cnps,
            w = mean_header.len() + 5,
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "last {window_ms} ms: Jain's fairness {:.4}, utilisation {:.1} %, queue mean {:.1} KB, max {:.1} KB",
        r.summary.jain,
        100.0 * r.summary.utilisation,
        kb(r.summary.queue_mean_bytes),
        kb(r.summary.window_queue_max as f64),
    );
    let _ = writeln!(
        out,
        "queue peak of the run: {:.1} KB",
        kb(r.summary.queue_peak_bytes as f64)
    );
    if let Some(fp) = &run.fixed_point {
        let running = cfg
            .flow_starts
            .iter()
            .filter(|&&s| s < cfg.duration)
            .count();
        let _ = writeln!(
            out,
            "fluid-model fixed point for {running} flows: {:.2} Gb/s each, marking p* {:.5}, queue {:.1} KB",
            gbps(fp.rate_bps),
            fp.p,
            kb(fp.queue_bytes),
        );
    } else if matches!(cfg.control, Control::None) {
        let _ = writeln!(out, "no congestion control: senders stay at line rate");
    }
    let _ = writeln!(
        out,
        "totals: {} packets, {} CE marks, {} CNPs, {} drops, {} events",
        r.summary.packets, r.summary.marks, r.summary.cnps, r.summary.drops, r.summary.events
    );
    out
}
