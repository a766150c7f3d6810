//! `roce sim dcqcn --svg FILE`: the rates per flow (top) and the switch queue (bottom) over
//! time, drawn with plotters' SVG backend.

use anyhow::anyhow;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::Run;

const WIDTH: u32 = 1000;
const PANEL: u32 = 380;

pub fn plot(run: &Run) -> anyhow::Result<String> {
    let mut doc = String::new();
    {
        let root = SVGBackend::with_string(&mut doc, (WIDTH, 2 * PANEL)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("svg: {e}"))?;
        let (top, bottom) = root.split_vertically(PANEL);
        rates(run, &top).map_err(|e| anyhow!("svg: {e}"))?;
        queue(run, &bottom).map_err(|e| anyhow!("svg: {e}"))?;
        root.present().map_err(|e| anyhow!("svg: {e}"))?;
    }
    Ok(doc)
}

pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
pub(super) type Drawn = Result<(), Box<dyn std::error::Error>>;
pub(super) type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel with time (ms) across and `y_desc` up to `top`.
pub(super) fn panel<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    y_desc: &str,
    end_ms: f64,
    top: f64,
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..end_ms, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// One line of `chart` in `colour`, named `label` in the legend.
pub(super) fn labelled_line(
    chart: &mut Chart<'_, '_>,
    points: impl IntoIterator<Item = (f64, f64)>,
    colour: RGBAColor,
    label: String,
) -> Drawn {
    chart
        .draw_series(LineSeries::new(points, colour.stroke_width(1)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
    Ok(())
}

pub(super) fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Drawn {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

fn times_ms(run: &Run) -> Vec<f64> {
    let mut t: Vec<f64> = vec![0.0];
    t.extend(run.report.sample_times.iter().map(|t| t.as_millis_f64()));
    t
}

fn rates(run: &Run, area: &Area<'_>) -> Drawn {
    let t = times_ms(run);
    let end = run.config.duration.as_millis_f64();
    let top = run.config.link_bps as f64 / 1e9 * 1.05;
    let mut chart = panel(area, "DCQCN rate R_C per flow", "rate (Gb/s)", end, top)?;
    for (i, flow) in run.report.flows.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        // Every flow starts at line rate, so the line begins there (or at 0 if not started).
        let first = if flow.start.is_zero() {
            run.config.link_bps as f64
        } else {
            0.0
        };
        let points = t
            .iter()
            .zip(std::iter::once(first).chain(flow.rate_bps.iter().copied()))
            .map(|(&x, y)| (x, y / 1e9));
        labelled_line(&mut chart, points, colour, format!("flow {i}"))?;
    }
    legend(&mut chart)
}

fn queue(run: &Run, area: &Area<'_>) -> Drawn {
    let t = times_ms(run);
    let end = run.config.duration.as_millis_f64();
    let kb = |b: u64| b as f64 / 1e3;
    let marker = &run.config.marker;
    let peak = run
        .report
        .queue_max_bytes
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let top = kb(peak.max(marker.kmax_bytes())) * 1.1 + 1.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "switch queue (largest in each sample interval)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..end, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("queue (KB)")
        .draw()?;
    let points = t
        .iter()
        .zip(std::iter::once(0).chain(run.report.queue_max_bytes.iter().copied()))
        .map(|(&x, q)| (x, kb(q)));
    chart
        .draw_series(LineSeries::new(points, BLUE.stroke_width(1)))?
        .label("queue")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
    for (name, bytes, colour) in [
        ("Kmin", marker.kmin_bytes(), GREEN),
        ("Kmax", marker.kmax_bytes(), RED),
    ] {
        let y = kb(bytes);
        chart
            .draw_series(LineSeries::new(vec![(0.0, y), (end, y)], colour.mix(0.6)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
    }
    legend(&mut chart)
}
