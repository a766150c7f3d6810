//! `roce sim net --svg FILE`: for each run, the long-lived flows' throughput (or everything
//! delivered), the busiest queues and the most paused ports over time; then FCT slowdown by
//! flow size, every run on the same axes.

use anyhow::anyhow;
use plotters::prelude::*;

use super::super::svg::{Area, Drawn, labelled_line, legend, panel};
use super::NetRun;
use roce::sim::net::PortSeries;

const WIDTH: u32 = 1000;
const PANEL: u32 = 320;
/// Series drawn per panel at most (the busiest).
const LINES: usize = 6;

/// What one panel shows.
enum Panel<'a> {
    Throughput(&'a NetRun),
    Queues(&'a NetRun),
    Pauses(&'a NetRun),
    Fct(&'a [NetRun], Pct),
}

#[derive(Clone, Copy)]
enum Pct {
    P95,
    P99,
}

fn panels(runs: &[NetRun]) -> Vec<Panel<'_>> {
    let mut out = Vec::new();
    let several = runs.len() > 1;
    for run in runs {
        let r = &run.report;
        // With several runs of a workload, the FCT panels compare them; alone, show it all.
        if !several || !r.long_lived.is_empty() {
            out.push(Panel::Throughput(run));
        }
        if !several
            && r.samples
                .ports
                .iter()
                .any(|p| p.queue_bytes.iter().any(|&q| q > 0))
        {
            out.push(Panel::Queues(run));
        }
        if !r.pfc.paused.is_zero() && (!several || !r.long_lived.is_empty()) {
            out.push(Panel::Pauses(run));
        }
    }
    let fct = runs.iter().any(|r| {
        r.report
            .fct_slowdown
            .by_size
            .iter()
            .any(|b| b.slowdown.flows > 0)
    });
    if fct {
        out.push(Panel::Fct(runs, Pct::P99));
        // The HPCC paper's Figure 11 plots the 95th percentile.
        out.push(Panel::Fct(runs, Pct::P95));
    }
    out
}

pub fn plot(runs: &[NetRun]) -> anyhow::Result<String> {
    let panels = panels(runs);
    let mut doc = String::new();
    {
        let height = PANEL * panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut doc, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("svg: {e}"))?;
        let areas = root.split_evenly((panels.len().max(1), 1));
        for (panel, area) in panels.iter().zip(&areas) {
            draw(panel, area).map_err(|e| anyhow!("svg: {e}"))?;
        }
        root.present().map_err(|e| anyhow!("svg: {e}"))?;
    }
    Ok(doc)
}

fn draw(panel: &Panel<'_>, area: &Area<'_>) -> Drawn {
    match panel {
        Panel::Throughput(run) => throughput(run, area),
        Panel::Queues(run) => queues(run, area),
        Panel::Pauses(run) => pauses(run, area),
        Panel::Fct(runs, pct) => fct(runs, *pct, area),
    }
}

fn times(run: &NetRun) -> Vec<f64> {
    run.report
        .samples
        .times
        .iter()
        .map(|t| t.as_millis_f64())
        .collect()
}

fn label(run: &NetRun) -> String {
    match run.preset {
        Some(p) if run.report.control == "dcqcn" => format!("{} ({p})", run.report.control),
        _ => run.report.control.to_string(),
    }
}

fn throughput(run: &NetRun, area: &Area<'_>) -> Drawn {
    let r = &run.report;
    let t = times(run);
    let end = run.config.duration.as_millis_f64();
    let top = run.config.host_bps as f64 / 1e9 * 1.1;
    if r.long_lived.is_empty() {
        let peak = r.samples.delivered_bps.iter().copied().fold(0.0, f64::max) / 1e9;
        let caption = format!("{}: throughput delivered, all flows", label(run));
        let mut chart = panel(area, &caption, "Gb/s", end, peak * 1.1 + 1.0)?;
        let points = t
            .iter()
            .zip(&r.samples.delivered_bps)
            .map(|(&x, y)| (x, y / 1e9));
        chart.draw_series(LineSeries::new(points, BLUE.stroke_width(1)))?;
        return Ok(());
    }
    let caption = format!("{}: throughput of each long-lived flow", label(run));
    let mut chart = panel(area, &caption, "Gb/s", end, top)?;
    for (i, (flow, series)) in r
        .long_lived
        .iter()
        .zip(&r.samples.flow_throughput_bps)
        .enumerate()
        .take(2 * LINES)
    {
        let points = t.iter().zip(series).map(|(&x, y)| (x, y / 1e9));
        labelled_line(
            &mut chart,
            points,
            colour(i),
            format!("h{}->h{}", flow.src, flow.dst),
        )?;
    }
    legend(&mut chart)
}

fn queues(run: &NetRun, area: &Area<'_>) -> Drawn {
    let caption = format!(
        "{}: busiest egress queues (largest in each interval)",
        label(run)
    );
    // Queues that held a few packets at most are not worth a line; the deepest first.
    let series = |p: &PortSeries| p.queue_bytes.iter().map(|&q| q as f64 / 1e3).collect();
    let lines = busiest(run, series, |kb| kb.iter().any(|&q| q >= 3.0), max);
    let peak = lines.first().map_or(0.0, |(_, kb)| max(kb));
    port_lines(run, area, &caption, "queue (KB)", peak * 1.1 + 1.0, &lines)
}

fn pauses(run: &NetRun, area: &Area<'_>) -> Drawn {
    let caption = format!(
        "{}: PFC, share of each interval a port was paused",
        label(run)
    );
    // The longest paused first.
    let series = |p: &PortSeries| p.paused.iter().map(|&x| 100.0 * f64::from(x)).collect();
    let total = |pct: &[f64]| pct.iter().sum::<f64>();
    let lines = busiest(run, series, |pct| pct.iter().any(|&x| x > 0.0), total);
    port_lines(run, area, &caption, "paused (%)", 105.0, &lines)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}

/// Each port's `series` that `keep` accepts, the highest `rank` first, [`LINES`] at most.
fn busiest(
    run: &NetRun,
    series: impl Fn(&PortSeries) -> Vec<f64>,
    keep: impl Fn(&[f64]) -> bool,
    rank: impl Fn(&[f64]) -> f64,
) -> Vec<(&str, Vec<f64>)> {
    let mut lines: Vec<_> = run
        .report
        .samples
        .ports
        .iter()
        .map(|p| (p.port.as_str(), series(p)))
        .filter(|(_, values)| keep(values))
        .collect();
    lines.sort_by(|a, b| rank(&b.1).total_cmp(&rank(&a.1)));
    lines.truncate(LINES);
    lines
}

/// A panel of one line per port over the run's sample times.
fn port_lines(
    run: &NetRun,
    area: &Area<'_>,
    caption: &str,
    y_desc: &str,
    top: f64,
    lines: &[(&str, Vec<f64>)],
) -> Drawn {
    let t = times(run);
    let end = run.config.duration.as_millis_f64();
    let mut chart = panel(area, caption, y_desc, end, top)?;
    for (i, (port, values)) in lines.iter().enumerate() {
        let points = t.iter().copied().zip(values.iter().copied());
        labelled_line(&mut chart, points, colour(i), port.to_string())?;
    }
    legend(&mut chart)
}

/// 3.3K, 1.5M, 30M: one decimal below ten, none above.
fn size_label(bytes: u64) -> String {
    let short = |v: f64, unit: &str| {
        if v < 10.0 && v.fract() >= 0.05 {
            format!("{v:.1}{unit}")
        } else {
            format!("{v:.0}{unit}")
        }
    };
    match bytes {
        b if b >= 1_000_000 => short(b as f64 / 1e6, "M"),
        b if b >= 1_000 => short(b as f64 / 1e3, "K"),
        b => format!("{b}"),
    }
}

/// Distinct colours for a few series (Palette99's third is a pale yellow).
const COLOURS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBAColor {
    COLOURS[i % COLOURS.len()].to_rgba()
}

/// p99 (or p95) FCT slowdown per size bucket, buckets evenly spaced as the HPCC paper's
/// Figure 11 draws them, slowdown on a log scale.
fn fct(runs: &[NetRun], pct: Pct, area: &Area<'_>) -> Drawn {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    let bounds: Vec<u64> = first
        .report
        .fct_slowdown
        .by_size
        .iter()
        .map(|b| b.max_bytes)
        .collect();
    let pick = |s: &roce::sim::net::Percentiles| match pct {
        Pct::P95 => s.p95,
        Pct::P99 => s.p99,
    };
    let top = runs
        .iter()
        .flat_map(|r| {
            r.report
                .fct_slowdown
                .by_size
                .iter()
                .map(|b| pick(&b.slowdown))
        })
        .fold(1.0, f64::max);
    let name = match pct {
        Pct::P95 => "p95",
        Pct::P99 => "p99",
    };
    let caption = format!("{name} FCT slowdown by flow size (5% of the flows per point)");
    let n = bounds.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5..n - 0.5, (1.0..top * 4.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("flow size (bytes, up to)")
        .y_desc(format!("{name} slowdown"))
        .x_labels(bounds.len().max(2))
        .light_line_style(WHITE.mix(0.0))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                bounds
                    .get(i as usize)
                    .map(|&b| size_label(b))
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()?;
    for (k, run) in runs.iter().enumerate() {
        let colour = colour(k);
        let points: Vec<(f64, f64)> = run
            .report
            .fct_slowdown
            .by_size
            .iter()
            .enumerate()
            .filter(|(_, b)| b.slowdown.flows > 0)
            .map(|(i, b)| (i as f64, pick(&b.slowdown).max(1.0)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(label(run))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
