//! `roce analyze --live IFACE`: the offline analyser fed from an interface as frames arrive.
//!
//! The same [`Analyzer`] that reads files takes each captured frame; every interval its
//! report so far is compared with the previous one to give per-flow rates (a table on stderr,
//! redrawn in place on a terminal, or one JSON line on stdout), and at the end (the duration
//! reached, SIGINT or SIGTERM) its final report is printed exactly as `roce analyze FILE`
//! prints one.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use roce::analysis::pfc::PfcOptions;
use roce::analysis::{Analyzer, Limits, Report};
use roce::capture::live::{self, KernelCounts, LiveCapture};
use serde_json::json;

use super::{json, text};

/// The longest a wait for frames lasts, so that a signal arriving just before a wait is
/// acted on within this time.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Flows drawn in the table at most (the busiest in the interval first).
const TABLE_FLOWS: usize = 20;

/// What the run is to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub iface: String,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub json: bool,
    pub limits: Limits,
    /// How pause frames are read (`--link-gbps`, storms).
    pub pfc: PfcOptions,
}

/// A flow's counters at the previous interval, by (source, destination, QP).
type FlowKey = (IpAddr, IpAddr, u32);

#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    packets: u64,
    goodput_bytes: u64,
    retransmitted: u64,
    naks: u64,
    cnps: u64,
    ecn_ce: u64,
    pfc_stalls: u64,
}

impl Counters {
    fn of(f: &roce::analysis::report::FlowReport) -> Counters {
        Counters {
            packets: f.packets,
            goodput_bytes: f.goodput.iter().sum(),
            retransmitted: f.retransmitted_packets,
            naks: f.naks.iter().map(|(_, n)| n).sum::<u64>() + f.rnr_naks,
            cnps: f.cnps,
            ecn_ce: f.ecn_ce,
            pfc_stalls: u64::from(f.pfc_stalls),
        }
    }

    fn minus(self, before: Counters) -> Counters {
        Counters {
            packets: self.packets.saturating_sub(before.packets),
            goodput_bytes: self.goodput_bytes.saturating_sub(before.goodput_bytes),
            retransmitted: self.retransmitted.saturating_sub(before.retransmitted),
            naks: self.naks.saturating_sub(before.naks),
            cnps: self.cnps.saturating_sub(before.cnps),
            ecn_ce: self.ecn_ce.saturating_sub(before.ecn_ce),
            pfc_stalls: self.pfc_stalls.saturating_sub(before.pfc_stalls),
        }
    }
}

/// PAUSE and PFC frames the analyser counted (all sources and priorities), for the table's
/// PFC line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pauses {
    /// Frames with a non-zero time (they stop a priority or the link).
    xoff: u64,
    /// Frames with a zero time (they lift pauses).
    xon: u64,
}

impl Pauses {
    fn of(report: &Report) -> Pauses {
        let sources = &report.pfc.by_source;
        Pauses {
            xoff: sources.iter().map(|s| s.xoff).sum(),
            xon: sources.iter().map(|s| s.xon).sum(),
        }
    }
}

/// The interval just ended: when, how long, and the counters it started from.
struct Interval {
    /// When the capture started.
    run_started: Instant,
    number: u64,
    started: Instant,
    frames_before: u64,
    flows_before: HashMap<FlowKey, Counters>,
    pauses_before: Pauses,
}

pub fn run(opts: Options) -> anyhow::Result<ExitCode> {
    let mut capture = LiveCapture::open(&opts.iface)?;
    live::catch_stop_signals().context("catching SIGINT and SIGTERM")?;
    let mut analyzer = Analyzer::with_limits(opts.limits).with_pfc(opts.pfc);
    let start = Instant::now();
    let end = opts.duration.map(|d| start + d);
    let mut interval = Interval {
        run_started: start,
        number: 0,
        started: start,
        frames_before: 0,
        flows_before: HashMap::new(),
        pauses_before: Pauses::default(),
    };
    let mut next_tick = start + opts.interval;
    let tty = io::stderr().is_terminal();
    let mut failed = None;
    let mut last_counts = KernelCounts::default();
    let mut stdout = io::stdout().lock();
    let mut reader_gone = false;
    loop {
        if live::stop_requested() {
            break;
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if now >= next_tick {
            let report = analyzer.report();
            let counts = capture.kernel_counts().unwrap_or(last_counts);
            last_counts = counts;
            let shown = show(&opts, &report, &mut interval, now, counts, tty);
            if opts.json {
                let written = json::write_line(&report, shown, &mut stdout)
                    .map_err(io::Error::from)
                    .and_then(|()| stdout.write_all(b"\n"))
                    .and_then(|()| stdout.flush());
                // The reader left (`| head -n 3`): the watch ends quietly.
                if crate::cmd::reader_left(written)? {
                    reader_gone = true;
                    break;
                }
            }
            // Ticks stay on the grid of the start; a slow tick skips, never bunches up.
            while next_tick <= now {
                next_tick += opts.interval;
            }
        }
        let until = end.map_or(next_tick, |e| e.min(next_tick));
        let wait = until
            .saturating_duration_since(Instant::now())
            .min(MAX_WAIT);
        if let Err(e) = capture.next_block(wait, |frame| {
            analyzer.frame(frame);
        }) {
            // The report so far is still worth having; the error follows it.
            failed = Some(e);
            break;
        }
    }
    if failed.is_none() {
        // Frames that arrived before the stop belong to the capture.
        if let Err(e) = capture.drain(|frame| {
            analyzer.frame(frame);
        }) {
            failed = Some(e);
        }
    }
    let counts = capture.kernel_counts().unwrap_or(last_counts);
    let report = analyzer.into_report();
    let name = format!("{} (live)", opts.iface);
    let mut write_final = || -> io::Result<()> {
        if opts.json {
            let elapsed = start.elapsed().as_secs_f64();
            json::write_line(
                &report,
                live_object(&opts, None, elapsed, counts),
                &mut stdout,
            )?;
            stdout.write_all(b"\n")?;
        } else {
            stdout.write_all(text::render(Path::new(&name), &report).as_bytes())?;
            writeln!(
                stdout,
                "\nkernel: {} frames seen on {}, {} dropped (the ring was full)",
                counts.received, opts.iface, counts.dropped
            )?;
        }
        stdout.flush()
    };
    if !reader_gone {
        crate::cmd::reader_left(write_final())?;
    }
    if counts.dropped > 0 {
        eprintln!(
            "roce: {}: the kernel dropped {} frames the analysis never saw (the ring was full)",
            opts.iface, counts.dropped
        );
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The `live` object of a JSON line: the interface, which report this is, and the kernel's
/// counts; `interval` (per-flow rates) is there for interval reports, null for the final one.
fn live_object(
    opts: &Options,
    interval: Option<serde_json::Value>,
    elapsed_s: f64,
    counts: KernelCounts,
) -> serde_json::Value {
    json!({
        "iface": opts.iface,
        "final": interval.is_none(),
        "elapsed_s": elapsed_s,
        "kernel_frames": counts.received,
        "kernel_dropped": counts.dropped,
        "interval": interval,
    })
}

/// Ends an interval: draws the table (text mode) and returns the `live` object for its JSON
/// line.
fn show(
    opts: &Options,
    report: &Report,
    iv: &mut Interval,
    now: Instant,
    counts: KernelCounts,
    tty: bool,
) -> serde_json::Value {
    let pauses = Pauses::of(report);
    let secs = now.duration_since(iv.started).as_secs_f64().max(1e-9);
    let mut rows = Vec::with_capacity(report.flows.len());
    let mut flows_now = HashMap::with_capacity(report.flows.len());
    for (i, f) in report.flows.iter().enumerate() {
        let key = (f.src, f.dst, f.dest_qp.value());
        let c = Counters::of(f);
        let d = c.minus(iv.flows_before.get(&key).copied().unwrap_or_default());
        flows_now.insert(key, c);
        rows.push((i, f, d));
    }
    let frames = report.packets.saturating_sub(iv.frames_before);
    let new_pauses = Pauses {
        xoff: pauses.xoff - iv.pauses_before.xoff,
        xon: pauses.xon - iv.pauses_before.xon,
    };
    rows.sort_by(|a, b| b.2.packets.cmp(&a.2.packets).then(a.0.cmp(&b.0)));
    let flows_json: Vec<_> = rows
        .iter()
        .filter(|r| r.2.packets > 0)
        .map(|(i, f, d)| {
            json!({
                "flow": i, "src": f.src.to_string(), "dst": f.dst.to_string(),
                "dest_qp": f.dest_qp.value(),
                "packets": d.packets,
                "packets_per_s": d.packets as f64 / secs,
                "goodput_mbps": d.goodput_bytes as f64 * 8.0 / secs / 1e6,
                "retransmitted_packets": d.retransmitted, "naks": d.naks,
                "cnps": d.cnps, "ecn_ce": d.ecn_ce, "pfc_stalls": d.pfc_stalls,
            })
        })
        .collect();
    if !opts.json {
        let mut o = String::new();
        if tty {
            // Home and clear: the table is redrawn in place.
            o.push_str("\x1b[H\x1b[2J");
        }
        let _ = writeln!(
            o,
            "{}: {:.1} s, {} frames ({:.0}/s), {} RoCE, {} flows; kernel dropped {}",
            opts.iface,
            now.duration_since(iv.run_started).as_secs_f64(),
            report.packets,
            frames as f64 / secs,
            report.roce_packets,
            report.flows.len(),
            counts.dropped
        );
        let _ = writeln!(
            o,
            "{:>5}  {:<42} {:>8} {:>10} {:>12} {:>6} {:>5} {:>5} {:>6} {:>10}",
            "flow",
            "src -> dst",
            "QP",
            "pkt/s",
            "goodput Mb/s",
            "retx",
            "NAKs",
            "CNPs",
            "CE",
            "PFC stalls"
        );
        for (i, f, d) in rows.iter().filter(|r| r.2.packets > 0).take(TABLE_FLOWS) {
            let _ = writeln!(
                o,
                "{:>5}  {:<42} {:#08x} {:>10.0} {:>12.1} {:>6} {:>5} {:>5} {:>6} {:>10}",
                i,
                format!("{} -> {}", f.src, f.dst),
                f.dest_qp.value(),
                d.packets as f64 / secs,
                d.goodput_bytes as f64 * 8.0 / secs / 1e6,
                d.retransmitted,
                d.naks,
                d.cnps,
                d.ecn_ce,
                d.pfc_stalls
            );
        }
        let busy = rows.iter().filter(|r| r.2.packets > 0).count();
        if busy > TABLE_FLOWS {
            let _ = writeln!(o, "  ... and {} more busy flows", busy - TABLE_FLOWS);
        }
        let _ = writeln!(
            o,
            "PFC/PAUSE frames: {} XOFF, {} XON this interval ({} XOFF, {} XON in all)",
            new_pauses.xoff, new_pauses.xon, pauses.xoff, pauses.xon
        );
        if !tty {
            o.push('\n');
        }
        let mut err = io::stderr().lock();
        let _ = err.write_all(o.as_bytes());
        let _ = err.flush();
    }
    iv.number += 1;
    let elapsed = now.duration_since(iv.started);
    let value = json!({
        "number": iv.number,
        "seconds": elapsed.as_secs_f64(),
        "frames": frames,
        "pfc_xoff_frames": new_pauses.xoff,
        "pfc_xon_frames": new_pauses.xon,
        "flows": flows_json,
    });
    iv.started = now;
    iv.frames_before = report.packets;
    iv.flows_before = flows_now;
    iv.pauses_before = pauses;
    let total = now.duration_since(iv.run_started).as_secs_f64();
    live_object(opts, Some(value), total, counts)
}
