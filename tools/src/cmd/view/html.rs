//! The page itself: the parts drawn once in Rust (header, banners, flows table, plots, the
//! rdma_cm exchange), the data for the ladder and the frame details, and the inline script and
//! style. Every string that came from the capture goes through [`escape`] (text) or
//! [`script_json`] (data), so no byte of a capture can end up as markup.

use std::fmt::Write as _;

use roce::analysis::Report;
use roce::analysis::report::FlowReport;

use super::Timeline;
use super::plots;
use crate::cmd::analyze::text::duration;

const STYLE: &str = include_str!("view.css");
const SCRIPT: &str = include_str!("view.js");

/// `s` as HTML text or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON made safe inside a `<script>` element: `<`, `>` and `&` only ever occur inside JSON
/// strings, where their `\u` escapes mean the same, so `</script>` cannot appear.
pub fn script_json(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn head(out: &mut String, name: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"roce view {}\">\n\
         <title>roce view: {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        escape(name)
    );
}

/// The page of a file with no frames.
pub fn empty_page(name: &str, why: &str, _report: &Report) -> String {
    let mut out = String::new();
    head(&mut out, name);
    let _ = write!(
        out,
        "<header><h1>roce view <span class=\"file\">{}</span></h1></header>\n\
         <div class=\"banner empty\" id=\"banner\">Nothing to show: {}.</div>\n\
         <div id=\"frame-details\" class=\"details\">No frames.</div>\n</body>\n</html>\n",
        escape(name),
        escape(why)
    );
    out
}

/// The whole page. `data` is the JSON the script reads; `frames` is (time, frame number) of
/// every frame in the page, to link the rdma_cm events to their frames.
pub fn page(
    name: &str,
    report: &Report,
    timeline: &Timeline,
    data: &str,
    frames: &[(u64, u64)],
) -> String {
    let mut out = String::new();
    head(&mut out, name);
    let span = match (report.first_ts, report.last_ts) {
        (Some(a), Some(b)) => duration(b.saturating_sub(a)),
        _ => "no time".into(),
    };
    let _ = writeln!(
        out,
        "<header><h1>roce view <span class=\"file\">{}</span></h1>\
         <p class=\"sub\">{} frames, {} RoCEv2, {} flows, over {}; \
         <span id=\"page-range\"></span></p></header>",
        escape(name),
        report.packets,
        report.roce_packets,
        report.flows.len(),
        escape(&span)
    );
    banners(&mut out, report);
    out.push_str("<section id=\"flows\"><h2>Flows</h2>");
    flows_table(&mut out, report);
    out.push_str("</section>\n");
    let _ = writeln!(
        out,
        "<section id=\"plots\"><h2>Over time</h2><div class=\"plots\">{}{}</div></section>",
        plots::goodput(report, timeline),
        plots::timeline(report, timeline)
    );
    cm(&mut out, report, frames);
    out.push_str(
        "<main id=\"workspace\">\
         <section id=\"ladder-pane\" aria-label=\"ladder diagram\">\
         <div class=\"toolbar\"><label>flow <select id=\"flow-select\"></select></label>\
         <button id=\"zoom-out\" title=\"less space per frame (-)\">&minus;</button>\
         <button id=\"zoom-in\" title=\"more space per frame (+)\">+</button>\
         <label>frame <input id=\"goto\" type=\"number\" min=\"1\" size=\"8\" title=\"go to frame (g)\"></label>\
         <span id=\"ladder-count\"></span></div>\
         <div class=\"legend\"><span class=\"k-req\">request</span><span class=\"k-resp\">response</span>\
         <span class=\"k-retx\">retransmitted</span><span class=\"k-nak\">NAK</span>\
         <span class=\"k-rnr\">RNR NAK</span><span class=\"k-cnp\">CNP</span>\
         <span class=\"k-ce\">ECN CE</span><span class=\"k-bad\">bad ICRC</span>\
         <span class=\"k-pause\">PFC / PAUSE in force</span></div>\
         <div id=\"ladder-head\"></div>\
         <div id=\"ladder\" tabindex=\"0\"><div id=\"ladder-space\"><svg id=\"ladder-svg\" \
         xmlns=\"http://www.w3.org/2000/svg\"></svg></div></div></section>\
         <aside id=\"frame-details\" class=\"details\" aria-live=\"polite\">\
         Click a frame in the ladder, or press Down.</aside></main>\n",
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"view-data\">{}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        script_json(data)
    );
    out
}

fn banners(out: &mut String, report: &Report) {
    let p = &report.input;
    if report.packets == 0 {
        out.push_str(
            "<div class=\"banner empty\" id=\"banner\">The capture has no frames.</div>\n",
        );
    }
    if let Some(d) = &p.damage {
        let _ = writeln!(
            out,
            "<div class=\"banner damage\" id=\"banner\">Damaged capture: {}. \
             Everything before the damage is shown; nothing after it could be read.</div>",
            escape(d)
        );
    }
    if p.cut_frames > 0 {
        let _ = writeln!(
            out,
            "<div class=\"banner cut\">{} frames were cut by the capture's snap length: \
             their headers are shown, their ICRCs could not be checked.</div>",
            p.cut_frames
        );
    }
    if p.malformed_frames > 0 {
        let list: Vec<String> = p
            .malformed_examples
            .iter()
            .map(|(i, why)| format!("frame {}: {}", i + 1, escape(why)))
            .collect();
        let _ = writeln!(
            out,
            "<div class=\"banner malformed\">{} malformed RoCEv2 frames ({})</div>",
            p.malformed_frames,
            list.join("; ")
        );
    }
    if report.ip_header_errors > 0 {
        let _ = writeln!(
            out,
            "<div class=\"banner ip-header\">{} RoCEv2 packets carry an IPv4 header a receiver \
             drops (a wrong checksum, options or DF clear; Annex A17.3.4). The flows still \
             follow them: rdma_rxe executes those with DF clear, drops the others.</div>",
            report.ip_header_errors
        );
    }
}

fn naks(f: &FlowReport) -> String {
    let mut parts: Vec<String> = f.naks.iter().map(|(n, c)| format!("{c} {n}")).collect();
    if f.rnr_naks > 0 {
        parts.push(format!("{} RNR", f.rnr_naks));
    }
    parts.join(", ")
}

fn flows_table(out: &mut String, report: &Report) {
    if report.flows.is_empty() {
        out.push_str("<p>No RoCEv2 flows.</p>");
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table class=\"flows\"><thead><tr><th>flow</th><th>source</th>\
         <th>destination</th><th>dest QP</th><th>reverse</th><th>packets</th>\
         <th>retransmitted</th><th>NAKs</th><th>CNPs</th><th>ECN CE</th><th>payload bytes</th>\
         <th>RTT median</th><th>ICRC errors</th></tr></thead><tbody>",
    );
    for (i, f) in report.flows.iter().enumerate() {
        let rtt = f
            .requester
            .as_ref()
            .and_then(|r| r.rtt.as_ref())
            .map_or(String::new(), |r| duration(r.median_ns));
        let _ = write!(
            out,
            "<tr data-flow-row=\"{i}\" tabindex=\"0\" title=\"draw this flow\"><td>{i}</td><td>{}</td><td>{}</td>\
             <td>{:#x}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.src.to_string()),
            escape(&f.dst.to_string()),
            f.dest_qp.value(),
            f.reverse.map_or("-".to_string(), |r| r.to_string()),
            f.packets,
            f.retransmitted_packets,
            escape(&naks(f)),
            f.cnps,
            f.ecn_ce,
            f.payload_bytes,
            escape(&rtt),
            f.icrc_errors
        );
    }
    out.push_str("</tbody></table></div>");
}

/// The rdma_cm connections and their messages, each linked to its frame when the page has it.
fn cm(out: &mut String, report: &Report, frames: &[(u64, u64)]) {
    if report.connections.is_empty() {
        return;
    }
    let start = report.first_ts.unwrap_or(0);
    out.push_str("<section id=\"cm\"><h2>rdma_cm exchange</h2><div class=\"scroll\"><table class=\"cm\"><thead><tr><th>client</th><th>server</th><th>state</th><th>messages</th></tr></thead><tbody>");
    for c in &report.connections {
        let qp = |q: Option<roce::wire::Qpn>| q.map_or("?".into(), |q| format!("{:#x}", q.value()));
        let events: Vec<String> = c
            .events
            .iter()
            .map(|e| {
                let arrow = if e.from_client { "&rarr;" } else { "&larr;" };
                let at = duration(e.ts.saturating_sub(start));
                let frame = frames.iter().find(|(ts, _)| *ts == e.ts).map(|f| f.1);
                let text = format!("{arrow} {} at +{}", escape(e.kind.name()), escape(&at));
                match frame {
                    Some(n) => format!(
                        "<a href=\"#\" class=\"goto\" data-goto=\"{n}\">{text} (frame {n})</a>"
                    ),
                    None => text,
                }
            })
            .collect();
        let _ = write!(
            out,
            "<tr><td>{} QP {}</td><td>{} QP {}</td><td>{}{}</td><td>{}</td></tr>",
            escape(&c.client.to_string()),
            qp(c.client_qpn),
            escape(&c.server.to_string()),
            qp(c.server_qpn),
            escape(c.state.name()),
            c.reject_reason
                .map_or(String::new(), |r| format!(" (reject reason {r})")),
            events.join("<br>")
        );
    }
    out.push_str("</tbody></table></div></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_and_data_cannot_escape() {
        let nasty = "<script>alert('x')</script> & \"q\"";
        let e = escape(nasty);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
        let json = serde_json::to_string(&serde_json::json!({ "c": nasty })).unwrap();
        let safe = script_json(&json);
        assert!(!safe.contains("</script"));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(
            back["c"], nasty,
            "the escapes mean the same to a JSON parser"
        );
    }
}
