//! The page's two plots as inline SVG, drawn in Rust from the whole capture's analysis:
//! goodput of the busiest flows over time, and the packet rate with the ECN CE marks and CNPs
//! that make DCQCN slow a sender down.

use std::fmt::Write as _;

use roce::analysis::Report;

use super::Timeline;
use super::html::escape;
use crate::cmd::analyze::text::duration;

const W: f64 = 560.0;
const H: f64 = 220.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 34.0;
/// Flows drawn in the goodput plot (the busiest by payload).
const FLOWS: usize = 6;
const COLORS: [&str; FLOWS] = [
    "#1f6feb", "#e67e00", "#2da44e", "#8e24aa", "#d11a1a", "#6b6b6b",
];

fn frame(out: &mut String, title: &str, y_label: &str, x_max_ns: u64, y_max: f64) {
    let _ = write!(
        out,
        "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" \
         width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{t}\">\
         <text x=\"{x}\" y=\"16\" class=\"title\" text-anchor=\"middle\">{t}</text>\
         <line x1=\"{LEFT}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" class=\"axis\"/>\
         <line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{b}\" class=\"axis\"/>\
         <text x=\"{LEFT}\" y=\"{lb}\" class=\"tick\">0</text>\
         <text x=\"{r}\" y=\"{lb}\" class=\"tick\" text-anchor=\"end\">{xmax}</text>\
         <text x=\"{x}\" y=\"{lb}\" class=\"tick\" text-anchor=\"middle\">time since the first frame</text>\
         <text x=\"{yl}\" y=\"{ty}\" class=\"tick\" text-anchor=\"end\">{ymax}</text>\
         <text x=\"{yl}\" y=\"{b}\" class=\"tick\" text-anchor=\"end\">0</text>\
         <text x=\"12\" y=\"{mid}\" class=\"tick\" transform=\"rotate(-90 12 {mid})\" text-anchor=\"middle\">{yname}</text>",
        t = escape(title),
        x = (LEFT + W - RIGHT) / 2.0,
        b = H - BOTTOM,
        r = W - RIGHT,
        lb = H - BOTTOM + 16.0,
        xmax = escape(&duration(x_max_ns)),
        yl = LEFT - 4.0,
        ty = TOP + 4.0,
        ymax = short(y_max),
        mid = (TOP + H - BOTTOM) / 2.0,
        yname = escape(y_label),
    );
}

fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn x_of(t_ns: f64, x_max_ns: f64) -> f64 {
    LEFT + (W - LEFT - RIGHT) * (t_ns.min(x_max_ns) / x_max_ns.max(1.0))
}

fn y_of(v: f64, y_max: f64) -> f64 {
    let b = H - BOTTOM;
    b - (b - TOP) * (v / y_max.max(f64::MIN_POSITIVE))
}

/// Goodput (payload bits per second, retransmissions not counted) of the busiest flows.
pub fn goodput(report: &Report, t: &Timeline) -> String {
    let mut busiest: Vec<usize> = (0..t.flow_bytes.len())
        .filter(|&i| t.flow_bytes[i].iter().any(|&b| b > 0))
        .collect();
    busiest.sort_by_key(|&i| (std::cmp::Reverse(report.flows[i].payload_bytes), i));
    busiest.truncate(FLOWS);
    let width_ns = (1u64 << t.shift) as f64;
    let gbps = |bytes: u64| bytes as f64 * 8.0 / width_ns;
    let span = span_ns(report);
    let used = used_bins(span, t);
    let y_max = busiest
        .iter()
        .flat_map(|&i| t.flow_bytes[i][..used].iter().map(|&b| gbps(b)))
        .fold(0.0, f64::max);
    let mut out = String::new();
    frame(
        &mut out,
        "Goodput of the busiest flows",
        "Gb/s",
        span,
        y_max,
    );
    if busiest.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">no payload carried</text>",
            W / 2.0,
            H / 2.0
        );
    }
    for (c, &i) in busiest.iter().enumerate() {
        let points: Vec<String> = t.flow_bytes[i][..used]
            .iter()
            .enumerate()
            .map(|(b, &bytes)| {
                format!(
                    "{:.1},{:.1}",
                    x_of((b as f64 + 0.5) * width_ns, span as f64),
                    y_of(gbps(bytes), y_max)
                )
            })
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{}\"><title>flow {i}</title></polyline>\
             <text x=\"{}\" y=\"{}\" class=\"tick\" fill=\"{}\">flow {i}</text>",
            COLORS[c],
            points.join(" "),
            LEFT + 8.0 + 62.0 * c as f64,
            TOP - 8.0,
            COLORS[c]
        );
    }
    out.push_str("</svg>");
    out
}

fn span_ns(report: &Report) -> u64 {
    report
        .first_ts
        .zip(report.last_ts)
        .map_or(0, |(a, b)| b.saturating_sub(a))
        .max(1)
}

/// Bins the capture's time span covers.
fn used_bins(span: u64, t: &Timeline) -> usize {
    ((span >> t.shift) as usize + 1).min(t.bins.len())
}

/// Packets per second over the whole capture, with the bins that held ECN CE marks (orange)
/// and CNPs (blue) as ticks under the axis.
pub fn timeline(report: &Report, t: &Timeline) -> String {
    let width_ns = (1u64 << t.shift) as f64;
    let span = span_ns(report);
    let used = used_bins(span, t);
    let mpps = |n: u64| n as f64 * 1e3 / width_ns;
    let y_max = t.bins[..used]
        .iter()
        .map(|b| mpps(b[0]))
        .fold(0.0, f64::max);
    let mut out = String::new();
    frame(
        &mut out,
        "Packet rate, ECN CE marks and CNPs",
        "M packets/s",
        span,
        y_max,
    );
    let points: Vec<String> = t.bins[..used]
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "{:.1},{:.1}",
                x_of((i as f64 + 0.5) * width_ns, span as f64),
                y_of(mpps(b[0]), y_max)
            )
        })
        .collect();
    let _ = write!(
        out,
        "<polyline fill=\"none\" stroke=\"#444\" stroke-width=\"1.4\" points=\"{}\"/>",
        points.join(" ")
    );
    let (ce, cnp): (u64, u64) = t.bins.iter().fold((0, 0), |a, b| (a.0 + b[1], a.1 + b[2]));
    for (i, b) in t.bins[..used].iter().enumerate() {
        let x = x_of(i as f64 * width_ns, span as f64);
        let w = (x_of((i + 1) as f64 * width_ns, span as f64) - x).max(1.0);
        for (what, row, color) in [(1, 0.0, "#e67e00"), (2, 7.0, "#1f6feb")] {
            if b[what] > 0 {
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"6\" fill=\"{color}\"><title>{} {}</title></rect>",
                    TOP + 2.0 + row,
                    b[what],
                    if what == 1 { "ECN CE marks" } else { "CNPs" }
                );
            }
        }
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{ce} CE (orange), {cnp} CNPs (blue)</text></svg>",
        W - RIGHT,
        TOP - 8.0
    );
    out
}
