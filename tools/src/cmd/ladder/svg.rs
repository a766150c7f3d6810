//! The ladder diagram as SVG, written by hand: two lifelines, one slanted arrow per packet.

use std::fmt::Write;

use roce::analysis::{PacketNote, Report};
use roce::wire::{Syndrome, Transport};

use crate::cmd::analyze::text::duration;

/// The diagram's geometry in pixels: two lifelines, one row per packet from `top` down.
struct Layout {
    width: u32,
    /// The lifelines: the flow's source on the left, its destination on the right.
    left_x: u32,
    right_x: u32,
    /// The first row's y, and the distance between rows.
    top: u32,
    row: u32,
    /// How far an arrow drops while it crosses: time passes in flight.
    drop: u32,
}

const LAYOUT: Layout = Layout {
    width: 980,
    left_x: 250,
    right_x: 850,
    top: 110,
    row: 30,
    drop: 16,
};

impl Layout {
    /// The y of row `i`.
    const fn row_y(&self, i: usize) -> u32 {
        self.top + i as u32 * self.row
    }
    /// Half-way between the lifelines, where labels go.
    const fn mid_x(&self) -> u32 {
        (self.left_x + self.right_x) / 2
    }
}

/// How a packet is drawn.
struct Style {
    color: &'static str,
    dashed: bool,
    bold: bool,
    note: String,
}

fn style(n: &PacketNote) -> Style {
    let mut s = Style {
        color: if n.opcode.is_request() {
            "#222222"
        } else {
            "#6b6b6b"
        },
        dashed: false,
        bold: false,
        note: String::new(),
    };
    match n.syndrome {
        Some(Syndrome::Nak(code)) => {
            s.color = "#d11a1a";
            s.bold = true;
            s.note = format!(" NAK {}", code.name());
        }
        Some(Syndrome::RnrNak { timer }) => {
            s.color = "#8e24aa";
            s.bold = true;
            s.note = format!(" RNR NAK (wait >= {} us)", timer.micros());
        }
        _ => {}
    }
    if n.opcode.transport() == Transport::Cnp {
        s.color = "#1f6feb";
        s.bold = true;
    }
    if n.retransmitted || n.verdict.resent {
        s.color = "#e67e00";
        s.bold = true;
        s.note.push_str(if n.retransmitted {
            " (retransmitted)"
        } else {
            " (resent)"
        });
    }
    if n.verdict.implied_nak {
        s.color = "#e67e00";
        s.dashed = true;
        s.note.push_str(" (implies NAK)");
    } else if n.verdict.no_new_data {
        s.note.push_str(" (no new data)");
    }
    if n.ecn_ce {
        s.note.push_str(" [ECN CE]");
    }
    if n.icrc_ok == Some(false) {
        s.color = "#d11a1a";
        s.dashed = true;
        s.note.push_str(" [bad ICRC]");
    }
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Bands drawn at most: a capture pausing more often than this within the drawn packets
/// has its first ones drawn.
const MAX_BANDS: usize = 64;
const PAUSE_COLOR: &str = "c25e00";

/// Where time `ts` falls on the rows' axis: rows are evenly spaced, so time between two rows
/// is placed in proportion between them (clamped half a row beyond the first and last).
fn y_at(rows: &[(u64, PacketNote)], ts: u64) -> f64 {
    let y = |i: usize| f64::from(LAYOUT.row_y(i));
    let half_row = f64::from(LAYOUT.row) / 2.0;
    let after = rows.partition_point(|(_, n)| n.ts <= ts);
    if after == 0 {
        return y(0) - half_row;
    }
    if after == rows.len() {
        let last = rows[after - 1].1.ts;
        return y(after - 1) + if ts > last { half_row } else { 0.0 };
    }
    let (t0, t1) = (rows[after - 1].1.ts, rows[after].1.ts);
    let share = (ts - t0) as f64 / (t1 - t0).max(1) as f64;
    y(after - 1) + share * f64::from(LAYOUT.row)
}

/// The pauses in force between the first and last packet drawn, as shaded bands.
fn pauses(o: &mut String, report: &Report, rows: &[(u64, PacketNote)]) {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return;
    };
    let (from, to) = (first.1.ts, last.1.ts);
    let shown = report
        .pfc
        .intervals
        .iter()
        .filter(|p| p.end_ts >= from && p.start_ts <= to)
        .take(MAX_BANDS);
    for (lane, p) in shown.enumerate() {
        let (top, bottom) = (y_at(rows, p.start_ts), y_at(rows, p.end_ts));
        let height = (bottom - top).max(2.0);
        let what = match p.priority {
            Some(n) => format!("PFC priority {n}"),
            None => "802.3x PAUSE (all priorities)".to_string(),
        };
        let label = format!(
            "{what} paused by {} for {}",
            crate::cmd::decode::explain::mac(p.mac),
            duration(p.end_ts - p.start_ts)
        );
        let bar_x = 200 + (lane % 5) as u32 * 9;
        let left_x = LAYOUT.left_x;
        let _ = writeln!(
            o,
            r##"<g><title>{}</title><rect x="{left_x}" y="{top:.1}" width="{}" height="{height:.1}" fill="#{PAUSE_COLOR}" fill-opacity="0.10"/><rect x="{bar_x}" y="{top:.1}" width="6" height="{height:.1}" fill="#{PAUSE_COLOR}"/><text x="{}" y="{:.1}" fill="#{PAUSE_COLOR}" font-size="11">{}</text></g>"##,
            escape(&label),
            LAYOUT.right_x - left_x,
            left_x + 6,
            top + 11.0,
            escape(&label)
        );
    }
}

/// The diagram of `rows` (frame number from 1, packet), packets of flow `flow` (left to right)
/// and its reverse.
pub fn ladder(report: &Report, flow: usize, from: u64, rows: &[(u64, PacketNote)]) -> String {
    let f = &report.flows[flow];
    let reverse = f.reverse.map(|r| &report.flows[r]);
    let left_qp = reverse.map_or("?".to_string(), |r| format!("{:#x}", r.dest_qp.value()));
    let height = LAYOUT.row_y(rows.len()) + 90;
    let width = LAYOUT.width;
    let start = report.first_ts.unwrap_or(0);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<defs>{}</defs>"#,
        ["222222", "6b6b6b", "d11a1a", "8e24aa", "1f6feb", "e67e00"]
            .iter()
            .map(|c| format!(
                r##"<marker id="a{c}" markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#{c}"/></marker>"##
            ))
            .collect::<String>()
    );
    let title = format!(
        "flow {flow} and its reverse: packets {from}..{} of the exchange",
        from + rows.len() as u64 - 1
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        width / 2,
        escape(&title)
    );
    for (x, ip, qp) in [
        (LAYOUT.left_x, f.src.to_string(), left_qp),
        (
            LAYOUT.right_x,
            f.dst.to_string(),
            format!("{:#x}", f.dest_qp.value()),
        ),
    ] {
        let _ = writeln!(
            o,
            r#"<text x="{x}" y="60" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            escape(&ip)
        );
        let _ = writeln!(
            o,
            r#"<text x="{x}" y="78" text-anchor="middle">QP {qp}</text>"#
        );
        let _ = writeln!(
            o,
            r##"<line x1="{x}" y1="88" x2="{x}" y2="{}" stroke="#999" stroke-width="2"/>"##,
            height - 70
        );
    }
    let _ = writeln!(o, r##"<text x="10" y="78" fill="#555">frame  time</text>"##);
    pauses(&mut o, report, rows);
    for (i, (number, n)) in rows.iter().enumerate() {
        let y = LAYOUT.row_y(i);
        let (x1, x2) = if n.flow == flow {
            (LAYOUT.left_x, LAYOUT.right_x)
        } else {
            (LAYOUT.right_x, LAYOUT.left_x)
        };
        let s = style(n);
        let color = &s.color[1..];
        let _ = writeln!(
            o,
            r##"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{}" stroke="#{color}" stroke-width="{}"{} marker-end="url(#a{color})"/>"##,
            y + LAYOUT.drop,
            if s.bold { 2.2 } else { 1.2 },
            if s.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            }
        );
        let label = format!("{} PSN {}{}", n.opcode.name(), n.psn, s.note);
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#{color}"{}>{}</text>"##,
            LAYOUT.mid_x(),
            y - 4,
            if s.bold { r#" font-weight="bold""# } else { "" },
            escape(&label)
        );
        let _ = writeln!(
            o,
            r##"<text x="10" y="{}" fill="#555">#{number}  +{}</text>"##,
            y + 4,
            escape(&duration(n.ts.saturating_sub(start)))
        );
    }
    let legend_y = height - 40;
    let mut x = 20;
    for (color, text) in [
        ("222222", "request"),
        ("6b6b6b", "response"),
        ("e67e00", "retransmitted / implies NAK (dashed)"),
        ("d11a1a", "NAK / bad ICRC"),
        ("8e24aa", "RNR NAK"),
        ("1f6feb", "CNP"),
        (PAUSE_COLOR, "PFC / PAUSE in force (band)"),
    ] {
        let _ = writeln!(
            o,
            r##"<line x1="{x}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="#{color}" stroke-width="3"/>"##,
            x + 24
        );
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" fill="#{color}">{text}</text>"##,
            x + 30,
            legend_y + 4
        );
        x += 36 + 7 * text.len() as u32 + 20;
    }
    o.push_str("</svg>\n");
    o
}
