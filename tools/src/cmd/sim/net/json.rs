//! `roce sim net --json` and `--trace`: the report as JSON (keys fixed by ARCHITECTURE.md:
//! `fct_slowdown` {`p50`, `p95`, `p99`, `by_size`}, `pfc` {`pause_frames`, `paused_us`},
//! `drops`, `events`, `wall_s`, `events_per_s`).

use roce::cc::Time;
use roce::sim::net::{Percentiles, Pfc, TraceEvent, Workload};
use serde_json::{Value, json};

use super::NetRun;

fn us(t: Time) -> f64 {
    t.as_micros_f64()
}

fn percentiles(p: &Percentiles) -> Value {
    json!({
        "flows": p.flows,
        "p50": p.p50,
        "p95": p.p95,
        "p99": p.p99,
        "mean": p.mean,
        "max": p.max,
    })
}

fn workload(w: &Workload) -> Value {
    match w {
        Workload::LongLived => json!({"kind": "long-lived"}),
        Workload::Poisson { cdf, load, until } => json!({
            "kind": "poisson",
            "cdf": cdf.name(),
            "mean_bytes": cdf.mean(),
            "load": load,
            "arrivals_until_ms": until.map(|t| t.as_millis_f64()),
        }),
        Workload::Flows(flows) => json!({"kind": "flows", "flows": flows.len()}),
    }
}

fn gbps(xs: &[f64]) -> Vec<f64> {
    xs.iter().map(|x| x / 1e9).collect()
}

fn fct(run: &NetRun) -> Value {
    let f = &run.report.fct_slowdown;
    let mut v = percentiles(&f.overall);
    v["by_size"] = f
        .by_size
        .iter()
        .map(|b| {
            let mut bucket = percentiles(&b.slowdown);
            bucket["max_bytes"] = json!(b.max_bytes);
            bucket
        })
        .collect();
    v
}

fn pfc(run: &NetRun) -> Value {
    let p = &run.report.pfc;
    json!({
        "pause_frames": p.pause_frames,
        "xoff_frames": p.xoff_frames,
        "xon_frames": p.xon_frames,
        "paused_us": us(p.paused),
        "by_port": p.by_port.iter().map(|p| json!({
            "port": p.port,
            "xoff_sent": p.xoff_sent,
            "xon_sent": p.xon_sent,
            "frames_received": p.frames_received,
            "paused_us": us(p.paused),
        })).collect::<Vec<_>>(),
    })
}

fn samples(run: &NetRun) -> Value {
    let s = &run.report.samples;
    json!({
        "times_ms": s.times.iter().map(|t| t.as_millis_f64()).collect::<Vec<_>>(),
        "flow_throughput_gbps": s.flow_throughput_bps.iter().map(|v| gbps(v)).collect::<Vec<_>>(),
        "flow_rate_gbps": s.flow_rate_bps.iter().map(|v| gbps(v)).collect::<Vec<_>>(),
        "delivered_gbps": gbps(&s.delivered_bps),
        "ports": s.ports.iter().map(|p| json!({
            "port": p.port,
            "queue_bytes": p.queue_bytes,
            "paused": p.paused,
        })).collect::<Vec<_>>(),
    })
}

/// One run as a JSON object.
pub fn run_document(run: &NetRun) -> Value {
    let (cfg, r) = (&run.config, &run.report);
    json!({
        "topology": r.topology,
        "hosts": r.hosts,
        "cc": r.control,
        "preset": run.preset,
        "link_gbps": cfg.host_bps as f64 / 1e9,
        "spine_gbps": cfg.fabric_bps as f64 / 1e9,
        "delay_us": us(cfg.delay),
        "pfc_enabled": cfg.pfc != Pfc::Off,
        "buffer_bytes": cfg.buffer_bytes,
        "kmin_bytes": cfg.marker.kmin_bytes(),
        "kmax_bytes": cfg.marker.kmax_bytes(),
        "pmax": cfg.marker.pmax(),
        "payload_bytes": cfg.payload_bytes,
        "ack_every": cfg.ack_every,
        "workload": workload(&cfg.workload),
        "duration_ms": cfg.duration.as_millis_f64(),
        "seed": cfg.seed,
        "base_rtt_us": us(r.base_rtt),
        "events": r.events,
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "events_per_s": r.events as f64 / run.wall_s.max(1e-9),
        "flows": {
            "started": r.flows.started,
            "finished": r.flows.finished,
            "unfinished": r.flows.unfinished,
            "peak_in_flight": r.flows.peak_in_flight,
        },
        "fct_slowdown": fct(run),
        "pfc": pfc(run),
        "drops": r.drops,
        "packets": {
            "data": r.packets.data,
            "retransmitted": r.packets.retransmitted,
            "acks": r.packets.acks,
            "naks": r.packets.naks,
            "cnps": r.packets.cnps,
            "ecn_marked": r.packets.ecn_marked,
            "timeouts": r.packets.timeouts,
        },
        "links": r.links.iter().map(|l| json!({
            "port": l.port,
            "gbps": l.gbps,
            "utilisation": l.utilisation,
            "peak_queue_bytes": l.peak_queue_bytes,
        })).collect::<Vec<_>>(),
        "queues": r.queues.iter().map(|q| json!({
            "switch": q.switch,
            "p50_bytes": q.p50_bytes,
            "p90_bytes": q.p90_bytes,
            "p99_bytes": q.p99_bytes,
            "max_bytes": q.max_bytes,
            "buffer_peak_bytes": q.buffer_peak_bytes,
            "drops": q.drops,
            "cdf": q.cdf,
        })).collect::<Vec<_>>(),
        "long_lived": r.long_lived.iter().map(|l| json!({
            "src": l.src,
            "dst": l.dst,
            "throughput_gbps": l.throughput_bps / 1e9,
            "final_rate_gbps": l.final_rate_bps / 1e9,
        })).collect::<Vec<_>>(),
        "window_ms": cfg.window.as_millis_f64(),
        "jain": r.jain,
        "samples": samples(run),
    })
}

/// One run: its object; several: `{"runs": [...]}`.
pub fn document(runs: &[NetRun]) -> Value {
    match runs {
        [one] => run_document(one),
        many => json!({ "runs": many.iter().map(run_document).collect::<Vec<_>>() }),
    }
}

/// A trace event as one line of JSON.
pub fn trace_line(cc: &str, event: &TraceEvent) -> Value {
    match event {
        TraceEvent::FlowDone {
            at,
            src,
            dst,
            bytes,
            start,
            fct,
            ideal,
        } => json!({
            "event": "flow", "cc": cc, "t_us": us(*at), "src": src, "dst": dst,
            "bytes": bytes, "start_us": us(*start), "fct_us": us(*fct), "ideal_us": us(*ideal),
            "slowdown": (fct.as_secs_f64() / ideal.as_secs_f64().max(1e-15)).max(1.0),
        }),
        TraceEvent::Pfc {
            at,
            port,
            prio,
            pause,
        } => json!({
            "event": if *pause { "xoff" } else { "xon" }, "cc": cc, "t_us": us(*at),
            "port": port, "prio": prio,
        }),
        TraceEvent::Drop { at, port, src, dst } => json!({
            "event": "drop", "cc": cc, "t_us": us(*at), "port": port, "src": src, "dst": dst,
        }),
    }
}
