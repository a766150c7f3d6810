//! `roce view FILE [-o OUT.html] [--flow N] [--from FRAME --count N]`: one self-contained HTML
//! page to browse a capture: the flows as `roce analyze` sees them, plots, the rdma_cm
//! exchange, a ladder of one flow and its reverse, and each frame explained as `roce decode`
//! explains it.

mod html;
// `roce conform --junit` escapes its XML with the same function.
pub(crate) use html::escape;
mod model;
mod plots;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use roce::analysis::pfc::{PfcOptions, PfcTracker, pause_frame};
use roce::analysis::{Analyzer, InputProblems, Outcome, PacketNote, Report};
use roce::capture::Frame;
use roce::wire::pause::MacControlRepr;
use roce::wire::{Syndrome, Transport};
use serde::Serialize;

use super::decode::Dissected;
use model::{Details, Tables};

/// Frames whose details a page holds unless `--count` says otherwise.
pub const DEFAULT_COUNT: u64 = 20_000;
/// The most frames one page may hold: about 1 KB each keeps the page under 100 MB.
pub const MAX_COUNT: u64 = 100_000;

/// Write a browsable HTML view of a capture: flows, plots, a ladder diagram, every frame explained.
///
/// The page is one file with its script and style inline: it fetches nothing and opens in any
/// browser, offline. It shows the flows as `roce analyze` reports them (click one to draw it),
/// goodput and the rate / ECN CE / CNP timeline of the whole capture, the rdma_cm connections,
/// and a ladder diagram of the selected flow and its reverse: time, Wireshark's frame numbers
/// (from 1), opcodes and PSNs; retransmissions, NAKs with their cause, RNR waits, CE marks and
/// CNPs highlighted, PFC and PAUSE pauses as bands across the time they lasted. Click a
/// frame (or move with the arrow keys) to see its headers field by field, as `roce decode`
/// explains them and with the keys of `roce decode --json`, and its bytes with the chosen
/// field highlighted. Keys: Up/Down or j/k move, +/- zoom, g goes to a frame.
///
/// A page holds the details of up to --count frames (a page of the capture, or of one flow's
/// exchange with --flow); the flows and plots always cover the whole capture. A damaged
/// capture is shown up to the damage with a banner saying where it is (exit 2); frames cut by
/// a snap length are flagged (exit 3); either is also said in one line on stderr.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce view pcaps/rc_loss_write.pcap                 writes pcaps/rc_loss_write.html
  roce view cap.pcapng -o cap.html --flow 2          the page draws flow 2 first
  roce view big.pcap --from 500001 --count 20000     frames 500001-520000 in detail
  roce gen loss-gbn -o loss.pcapng --view            a lesson and its view (loss.html)

DOM for scripts: every frame drawn is an element with data-frame=\"N\" (N from 1) and
data-flow=\"F\"; the selected frame's explanation is in #frame-details, its decode --json
keys and values in rows with data-key and data-value (JSON text).")]
pub struct ViewArgs {
    /// The capture (pcap or pcapng).
    pub file: PathBuf,
    /// Where to write the page (default: FILE with the extension .html).
    #[arg(short = 'o', long = "output", value_name = "OUT.html")]
    pub output: Option<PathBuf>,
    /// The flow (its number in `roce analyze`) drawn first; the page holds its exchange (the
    /// flow and its reverse) rather than every frame.
    #[arg(long, value_name = "N")]
    pub flow: Option<usize>,
    /// First frame of the page (Wireshark's number, from 1).
    #[arg(long, value_name = "FRAME", default_value_t = 1)]
    pub from: u64,
    /// Frames in the page (at most 100000).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_COUNT)]
    pub count: u64,
    /// Link speed in Gb/s: a PAUSE or PFC quantum is 512 bit times at it.
    #[arg(long, value_name = "G", default_value_t = 100.0, value_parser = super::analyze::pfc::parse_gbps)]
    pub link_gbps: f64,
}

/// A link speed: positive and at most 1.6 Tb/s.
/// Bits of a ladder row's kind, read by the page's script.
mod kind {
    pub const REQUEST: u32 = 1;
    pub const RETRANSMITTED: u32 = 2;
    pub const NAK: u32 = 4;
    pub const RNR_NAK: u32 = 8;
    pub const CNP: u32 = 16;
    pub const ECN_CE: u32 = 32;
    pub const IMPLIED_NAK: u32 = 64;
    pub const BAD_ICRC: u32 = 128;
    pub const RESENT: u32 = 256;
    pub const MALFORMED: u32 = 512;
    pub const NOT_ROCE: u32 = 1024;
    pub const PAUSE: u32 = 2048;
}

/// The frames of the page, one column per property (compact in JSON).
#[derive(Debug, Default, Serialize)]
struct Rows {
    /// Frame number, from 1.
    n: Vec<u64>,
    /// Microseconds since the capture's first frame.
    t: Vec<f64>,
    /// Flow index, -1 for frames that belong to none.
    fl: Vec<i64>,
    /// [`kind`] bits.
    k: Vec<u32>,
    /// Label (string index): opcode and PSN.
    lab: Vec<u32>,
    /// Short note for the ladder (string index, -1: none): NAK code, RNR wait, retransmitted...
    note: Vec<i64>,
    /// What the analysis says about the frame, in sentences (string index, -1: nothing).
    why: Vec<i64>,
    /// PSN, -1 for none.
    psn: Vec<i64>,
    /// Pause frames: [row, source MAC (string index)], drawn in the ladder of a flow to or
    /// from that MAC.
    pf: Vec<(usize, u32)>,
    /// The Ethernet source and destination MACs (string indices) of each flow in the page.
    fm: BTreeMap<usize, (u32, u32)>,
    #[serde(skip)]
    ts: Vec<u64>,
    #[serde(skip)]
    notes: Vec<Option<PacketNote>>,
}

/// Everything the script needs, serialised into the page.
#[derive(Serialize)]
struct Data<'a> {
    file: &'a str,
    frames_total: u64,
    page_from: u64,
    page_to: u64,
    page_flow: Option<usize>,
    initial_flow: Option<usize>,
    rows: &'a Rows,
    /// Brackets between two frames: [from frame, to frame, kind, text].
    spans: &'a [(u64, u64, &'static str, u32)],
    /// PAUSE and PFC pauses in force during the page: [start us, end us, priority (-1: the
    /// whole link, 802.3x), label, what (strings)].
    pauses: &'a [(f64, f64, i64, u32, u32)],
    details: &'a [Details],
    tables: &'a Tables,
    /// `roce analyze --json` of the whole capture.
    analysis: serde_json::Value,
}

/// Counts per time bin over the whole capture, for the plots.
#[derive(Debug)]
pub struct Timeline {
    /// [packets, ECN CE marks, CNPs] per bin.
    pub bins: Vec<[u64; 3]>,
    /// Payload bytes per bin of each of the first [`Timeline::FLOWS`] flows, not counting
    /// retransmitted packets: goodput.
    pub flow_bytes: Vec<Vec<u64>>,
    /// Bin width is 2^shift nanoseconds; it doubles when the capture outgrows the bins.
    pub shift: u32,
}

impl Timeline {
    pub const BINS: usize = 200;
    /// Flows followed for the goodput plot (the plot draws the busiest of them).
    pub const FLOWS: usize = 64;

    fn new() -> Timeline {
        Timeline {
            bins: vec![[0; 3]; Self::BINS],
            flow_bytes: Vec::new(),
            shift: 10,
        }
    }

    /// The bin of a time, widening the bins until it fits.
    fn bin(&mut self, since_start_ns: u64) -> usize {
        let mut bin = (since_start_ns >> self.shift) as usize;
        while bin >= Self::BINS {
            fn halve<T: Copy + Default>(v: &mut [T], add: impl Fn(T, T) -> T) {
                let n = v.len() / 2;
                for i in 0..n {
                    v[i] = add(v[2 * i], v[2 * i + 1]);
                }
                v[n..].fill(T::default());
            }
            halve(&mut self.bins, |a, b| {
                [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
            });
            for f in &mut self.flow_bytes {
                halve(f, |a, b| a + b);
            }
            self.shift += 1;
            bin = (since_start_ns >> self.shift) as usize;
        }
        bin
    }

    fn packet(&mut self, since_start_ns: u64, note: Option<&PacketNote>) {
        let bin = self.bin(since_start_ns);
        self.bins[bin][0] += 1;
        let Some(n) = note else { return };
        self.bins[bin][1] += u64::from(n.ecn_ce);
        self.bins[bin][2] += u64::from(n.opcode.transport() == Transport::Cnp);
        if n.flow < Self::FLOWS && !n.retransmitted && n.payload_len > 0 {
            if self.flow_bytes.len() <= n.flow {
                self.flow_bytes.resize(n.flow + 1, vec![0; Self::BINS]);
            }
            self.flow_bytes[n.flow][bin] += u64::from(n.payload_len);
        }
    }
}

/// Which frames the page holds.
struct PageRule {
    from: u64,
    count: u64,
    flow: Option<usize>,
    /// The flow's reverse, once known.
    reverse: Option<usize>,
}

pub fn run(args: ViewArgs) -> anyhow::Result<ExitCode> {
    if args.count == 0 || args.count > MAX_COUNT {
        bail!("--count must be 1 to {MAX_COUNT}: a page holds the details of that many frames");
    }
    if args.from == 0 {
        bail!("--from counts frames from 1, as Wireshark does");
    }
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| args.file.with_extension("html"));
    let view = build(&args)?;
    std::fs::write(&output, &view.html)
        .with_context(|| format!("cannot write {}", output.display()))?;
    crate::outln!(
        "roce view: wrote {} ({} bytes; {})",
        output.display(),
        view.html.len(),
        view.summary
    )?;
    // Damage and cut frames are said on stderr as `roce analyze` and `roce ladder` say them
    // (the page's banner is not seen from a script or a terminal).
    Ok(super::analyze::input_status(&args.file, &view.input))
}

/// A finished page.
pub struct View {
    pub html: String,
    /// One line for the terminal: what the page holds.
    pub summary: String,
    /// What was wrong with the file: where it is damaged, frames cut by a snap length.
    pub input: InputProblems,
}

/// The page for a capture file (`args.output` is not used).
pub fn build(args: &ViewArgs) -> anyhow::Result<View> {
    let name = args.file.file_name().map_or_else(
        || args.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    // A zero-byte file is an empty capture to a person looking at it.
    if std::fs::metadata(&args.file).is_ok_and(|m| m.len() == 0) {
        return Ok(empty(
            &name,
            "the file is empty: it holds no capture and no frames",
        ));
    }
    let mut rule = PageRule {
        from: args.from,
        count: args.count,
        flow: args.flow,
        reverse: None,
    };
    if let Some(flow) = args.flow {
        // Flow numbers and pairs come from the whole analysis: a first pass finds them (the
        // analysis is deterministic, so the second pass numbers flows the same way).
        let report = super::analyze::analyse(
            &args.file,
            super::analyze::default_threads(),
            Default::default(),
        )?;
        let Some(f) = report.flows.get(flow) else {
            bail!(
                "{}: no flow {flow} (the capture has {} flows; see roce analyze)",
                args.file.display(),
                report.flows.len()
            );
        };
        rule.reverse = f.reverse;
    }
    let link_bits_per_sec = (args.link_gbps * 1e9) as u64;
    let mut pauses = PfcTracker::new(PfcOptions {
        link_bits_per_sec,
        ..PfcOptions::default()
    });
    let mut analyzer = Analyzer::new();
    let mut tables = Tables::default();
    let mut rows = Rows::default();
    let mut details = Vec::new();
    let mut timeline = Timeline::new();
    let mut first_ts = None;
    let damage = super::replay_commented(&args.file, |frame, comment| {
        let outcome = analyzer.frame(frame);
        let start = *first_ts.get_or_insert(frame.timestamp_ns);
        let since = frame.timestamp_ns.saturating_sub(start);
        match &outcome {
            Outcome::Roce(n) => timeline.packet(since, Some(n)),
            _ => timeline.packet(since, None),
        }
        // The pauses in force while the page's frames flew (those over before it are let go).
        let pause = match outcome {
            Outcome::NotRoce => pause_frame(frame),
            _ => None,
        };
        if let Some((src, body)) = &pause
            && (rows.n.len() as u64) < rule.count
        {
            pauses.frame(frame.timestamp_ns, *src, body);
        }
        if rows.n.is_empty() {
            pauses.forget_before(frame.timestamp_ns);
        }
        if in_page(&rule, frame.index + 1, &outcome, rows.n.len() as u64) {
            let comment = comment.map(String::from_utf8_lossy);
            push_row(
                &mut rows,
                &mut details,
                &mut tables,
                frame,
                outcome,
                pause,
                comment.as_deref(),
            );
        }
    })?;
    if let Some(reason) = &damage {
        analyzer.damaged(reason.clone());
    }
    let report = analyzer.report();
    let start = report.first_ts.unwrap_or(0);
    // Microseconds to the nanosecond: enough for any gap a ladder shows.
    rows.t = rows
        .ts
        .iter()
        .map(|&ts| ts.saturating_sub(start) as f64 / 1e3)
        .collect();
    annotate(&report, &mut rows, &mut tables);
    let spans = spans(&report, &rows, &mut tables);
    let pauses: Vec<(f64, f64, i64, u32, u32)> = pauses
        .into_report()
        .intervals
        .into_iter()
        .map(|p| {
            let us = |ts: u64| ts.saturating_sub(start) as f64 / 1e3;
            let lasted = super::analyze::text::duration(p.end_ts.saturating_sub(p.start_ts));
            let (label, what) = match p.priority {
                Some(n) => (
                    format!("PFC priority {n} paused {lasted}"),
                    format!("PFC pause of priority {n}"),
                ),
                None => (
                    format!("PAUSE {lasted}"),
                    "802.3x PAUSE of the whole link".to_string(),
                ),
            };
            let text = format!(
                "{what} by {}: {lasted}",
                crate::cmd::decode::explain::mac(p.mac)
            );
            (
                us(p.start_ts),
                us(p.end_ts),
                p.priority.map_or(-1, i64::from),
                tables.string(&label),
                tables.string(&text),
            )
        })
        .collect();
    if rows.n.is_empty() && report.packets > 0 {
        // As `roce ladder`: a page with no frame in detail is not what was asked for.
        match args.flow {
            Some(f) => bail!(
                "{}: flow {f} and its reverse have no frames from frame {}",
                args.file.display(),
                args.from
            ),
            None => bail!(
                "{}: --from {} is past the last frame (the capture has {} frames)",
                args.file.display(),
                args.from,
                report.packets
            ),
        }
    }
    let initial_flow = args.flow.or_else(|| busiest_flow(&rows, &report));
    let page_from = rows.n.first().copied().unwrap_or(0);
    let page_to = rows.n.last().copied().unwrap_or(0);
    let data = Data {
        file: &name,
        frames_total: report.packets,
        page_from,
        page_to,
        page_flow: args.flow,
        initial_flow,
        rows: &rows,
        spans: &spans,
        pauses: &pauses,
        details: &details,
        tables: &tables,
        analysis: serde_json::from_str(&super::analyze::json::render(&report)?)?,
    };
    let summary = if report.packets == 0 {
        "the capture has no frames".to_string()
    } else {
        format!(
            "{} flows; frames {page_from}-{page_to} of {} in detail",
            report.flows.len(),
            report.packets
        )
    };
    let frames: Vec<(u64, u64)> = rows
        .ts
        .iter()
        .copied()
        .zip(rows.n.iter().copied())
        .collect();
    let html = html::page(
        &name,
        &report,
        &timeline,
        &serde_json::to_string(&data)?,
        &frames,
    );
    Ok(View {
        html,
        summary,
        input: report.input,
    })
}

/// The page of a file with no frames.
fn empty(name: &str, why: &str) -> View {
    let report = Analyzer::new().report();
    View {
        html: html::empty_page(name, why, &report),
        summary: why.to_string(),
        input: InputProblems::default(),
    }
}

/// Whether frame `number` belongs in the page, `held` frames being in it already.
fn in_page(rule: &PageRule, number: u64, outcome: &Outcome, held: u64) -> bool {
    if number < rule.from || held >= rule.count {
        return false;
    }
    match rule.flow {
        None => true,
        Some(f) => match outcome {
            Outcome::Roce(n) => n.flow == f || Some(n.flow) == rule.reverse,
            _ => false,
        },
    }
}

fn push_row(
    rows: &mut Rows,
    details: &mut Vec<Details>,
    tables: &mut Tables,
    frame: &Frame<'_>,
    outcome: Outcome,
    pause: Option<([u8; 6], MacControlRepr)>,
    comment: Option<&str>,
) {
    let dissected = Dissected::of(frame);
    let mut mac = |m| tables.string(&crate::cmd::decode::explain::mac(m));
    if let (Outcome::Roce(n), Dissected::Roce(p)) = (&outcome, &dissected)
        && let Some(eth) = p.eth()
        && !rows.fm.contains_key(&n.flow)
    {
        let macs = (mac(eth.src), mac(eth.dst));
        rows.fm.insert(n.flow, macs);
    }
    if let Some((src, _)) = &pause {
        let src = mac(*src);
        rows.pf.push((rows.n.len(), src));
    }
    details.push(tables.details(frame.index as usize, frame.data, &dissected, comment));
    // A management datagram (rdma_cm) says which message it is, as decode's summary does.
    let mad = match &dissected {
        Dissected::Roce(p) => crate::cmd::decode::mad::mad_payload(p)
            .map(|m| format!("  {}", crate::cmd::decode::mad::summary(m))),
        _ => None,
    };
    rows.n.push(frame.index + 1);
    rows.ts.push(frame.timestamp_ns);
    let (flow, k, label, psn, note) = match outcome {
        Outcome::Roce(n) => {
            let mut k = 0;
            if n.opcode.is_request() {
                k |= kind::REQUEST;
            }
            if n.retransmitted {
                k |= kind::RETRANSMITTED;
            }
            if n.verdict.resent {
                k |= kind::RESENT;
            }
            if n.verdict.implied_nak {
                k |= kind::IMPLIED_NAK;
            }
            match n.syndrome {
                Some(Syndrome::Nak(_)) => k |= kind::NAK,
                Some(Syndrome::RnrNak { .. }) => k |= kind::RNR_NAK,
                _ => {}
            }
            if n.opcode.transport() == Transport::Cnp {
                k |= kind::CNP;
            }
            if n.ecn_ce {
                k |= kind::ECN_CE;
            }
            if n.icrc_ok == Some(false) {
                k |= kind::BAD_ICRC;
            }
            let label = format!(
                "{} PSN {}{}",
                n.opcode.name(),
                n.psn.value(),
                mad.as_deref().unwrap_or_default()
            );
            (n.flow as i64, k, label, i64::from(n.psn.value()), Some(n))
        }
        Outcome::Malformed => (-1, kind::MALFORMED, "malformed RoCEv2".into(), -1, None),
        Outcome::NotRoce => match pause {
            Some((_, body)) => (-1, kind::PAUSE, pause_label(&body), -1, None),
            None => (-1, kind::NOT_ROCE, "not RoCEv2".into(), -1, None),
        },
        Outcome::Untracked => (
            -1,
            kind::NOT_ROCE,
            "RoCEv2 of a flow beyond the analyser's flow limit".into(),
            -1,
            None,
        ),
    };
    rows.fl.push(flow);
    rows.k.push(k);
    rows.lab.push(tables.string(&label));
    rows.psn.push(psn);
    rows.notes.push(note);
}

/// Each row's note, from what the whole analysis knows: a NAK's cause, an RNR NAK's wait.
fn annotate(report: &Report, rows: &mut Rows, tables: &mut Tables) {
    let mut naks = HashMap::new();
    let mut rnrs = HashMap::new();
    for f in &report.flows {
        let Some(r) = &f.requester else { continue };
        for e in &r.nak_events {
            naks.insert((e.ts, e.psn.value()), e.cause.describe());
        }
        for e in &r.rnr_events {
            let waited = e.wait_ns.map_or(String::new(), |w| {
                format!(", waited {}", super::analyze::text::duration(w))
            });
            rnrs.insert(
                (e.ts, e.psn.value()),
                format!("RNR NAK: retry after >= {} us{waited}", e.min_wait_us),
            );
        }
    }
    for i in 0..rows.n.len() {
        let Some(n) = rows.notes[i] else {
            rows.note.push(-1);
            rows.why.push(-1);
            continue;
        };
        let key = (rows.ts[i], n.psn.value());
        // (short, for the ladder; long, for the details panel)
        let mut parts: Vec<(String, String)> = Vec::new();
        match n.syndrome {
            Some(Syndrome::Nak(code)) => parts.push((
                format!("NAK {}", code.name()),
                match naks.get(&key) {
                    Some(cause) => format!("NAK {}: {cause}", code.name()),
                    None => format!("NAK {}", code.name()),
                },
            )),
            Some(Syndrome::RnrNak { timer }) => parts.push((
                format!("RNR NAK, wait >= {} us", timer.micros()),
                rnrs.get(&key)
                    .cloned()
                    .unwrap_or_else(|| format!("RNR NAK: retry after >= {} us", timer.micros())),
            )),
            _ => {}
        }
        let mut tag = |short: &str, long: &str| parts.push((short.into(), long.into()));
        if n.retransmitted {
            tag(
                "retransmitted",
                "retransmitted: the flow carried this PSN before",
            );
        } else if n.verdict.resent {
            tag("resent", "resent: at or below the highest PSN already used");
        }
        if n.verdict.implied_nak {
            tag(
                "implies NAK",
                "implies a NAK: a response skipped PSNs the requester is owed",
            );
        } else if n.verdict.no_new_data {
            tag(
                "no new data",
                "no new data: past the PSN the requester expects (it drops this), or a \
                 response it already has",
            );
        }
        if n.opcode.transport() == Transport::Cnp {
            tag(
                "CNP",
                "CNP: the receiver saw ECN CE and asks this QP's sender to slow down",
            );
        }
        if n.ecn_ce {
            tag(
                "ECN CE",
                "ECN CE: a congested queue marked this packet on its way",
            );
        }
        if n.icrc_ok == Some(false) {
            tag("bad ICRC", "bad ICRC: the receiver drops this packet");
        }
        if parts.is_empty() {
            rows.note.push(-1);
            rows.why.push(-1);
        } else {
            let short: Vec<&str> = parts.iter().map(|p| p.0.as_str()).collect();
            let long: Vec<&str> = parts.iter().map(|p| p.1.as_str()).collect();
            rows.note.push(i64::from(tables.string(&short.join(", "))));
            rows.why.push(i64::from(tables.string(&long.join("; "))));
        }
    }
}

/// Brackets a learner wants drawn: from an RNR NAK to the retry it asked for, from a NAK to
/// the first packet sent again.
fn spans(report: &Report, rows: &Rows, tables: &mut Tables) -> Vec<(u64, u64, &'static str, u32)> {
    let mut out = Vec::new();
    for i in 0..rows.n.len() {
        let Some(n) = rows.notes[i] else { continue };
        let (what, text) = match n.syndrome {
            Some(Syndrome::RnrNak { .. }) => ("rnr", "waited"),
            Some(Syndrome::Nak(_)) => ("nak", "resent after"),
            _ => continue,
        };
        let Some(requests) = report.flows.get(n.flow).and_then(|f| f.reverse) else {
            continue;
        };
        let again = (i + 1..rows.n.len()).find(|&j| {
            rows.notes[j]
                .is_some_and(|m| m.flow == requests && m.opcode.is_request() && m.psn == n.psn)
        });
        if let Some(j) = again {
            let waited = super::analyze::text::duration(rows.ts[j].saturating_sub(rows.ts[i]));
            let label = tables.string(&format!("{text} {waited}"));
            out.push((rows.n[i], rows.n[j], what, label));
        }
    }
    out
}

/// The flow with the most frames in the page.
fn busiest_flow(rows: &Rows, report: &Report) -> Option<usize> {
    let mut counts = vec![0u64; report.flows.len()];
    for &f in &rows.fl {
        if let Ok(f) = usize::try_from(f)
            && let Some(c) = counts.get_mut(f)
        {
            *c += 1;
        }
    }
    (0..counts.len())
        .filter(|&i| counts[i] > 0)
        .min_by_key(|&i| (std::cmp::Reverse(counts[i]), i))
}

/// Where `roce gen --view` writes a lesson's page: beside its capture.
pub fn beside(capture: &Path) -> PathBuf {
    capture.with_extension("html")
}

/// A pause frame's row label: what it paused (XOFF: a time, XON: zero) and for how many quanta.
fn pause_label(body: &MacControlRepr) -> String {
    let time = |q: u16| match q {
        0 => "XON".to_string(),
        q => format!("XOFF {q} quanta"),
    };
    match body {
        MacControlRepr::Pause(p) => format!("PAUSE {}", time(p.quanta)),
        MacControlRepr::Pfc(p) => {
            let prios: Vec<String> = (0..roce::wire::pause::PRIORITIES)
                .filter(|&n| p.enabled(n))
                .map(|n| format!("priority {n} {}", time(p.quanta[n])))
                .collect();
            format!("PFC {}", prios.join(", "))
        }
        MacControlRepr::Other(code) => format!("MAC control {code:#06x}"),
    }
}
