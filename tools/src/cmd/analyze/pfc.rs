//! The PFC part of `roce analyze`: the `pfc` JSON object (keys in the contract:
//! ARCHITECTURE.md) and the text report's section. Times in microseconds; `*_us` instants
//! count from the capture's first frame.

use std::fmt::Write as _;

use roce::analysis::Report;
use roce::analysis::pfc::{MAX_SOURCE_MACS, PfcReport};
use serde::Serialize;

use super::text::{count_line, duration};
use crate::cmd::decode::explain::mac;

/// How a flow's priority is found, as the report says it.
pub const PRIORITY_MAP: &str = "802.1Q PCP when tagged, else DSCP >> 3 (mlx5's default dscp2prio)";

#[derive(Serialize)]
pub struct Pfc {
    frames: u64,
    pause_8023x_frames: u64,
    by_source: Vec<Source>,
    storms: Vec<Storm>,
    link_gbps: f64,
    storm_window_ms: f64,
    storm_share: f64,
    priority_map: &'static str,
    stalled_flows: Vec<Stalled>,
    reserved_bits_frames: u64,
    empty_vector_frames: u64,
    other_mac_control_frames: u64,
    truncated_frames: u64,
    storms_not_listed: u64,
    intervals: u64,
    untracked: Untracked,
}

#[derive(Serialize)]
struct Source {
    mac: String,
    /// null for an 802.3x PAUSE (the whole link).
    priority: Option<u8>,
    frames: u64,
    xoff: u64,
    xon: u64,
    paused_us: f64,
    longest_pause_us: f64,
}

#[derive(Serialize)]
struct Storm {
    mac: String,
    priority: Option<u8>,
    start_us: f64,
    end_us: f64,
    windows: u64,
    paused_us: f64,
    max_share: f64,
}

#[derive(Serialize)]
struct Stalled {
    flow: usize,
    src: String,
    dst: String,
    dest_qp: u32,
    priority: u8,
    priority_from: &'static str,
    pauses: u32,
    stalled_us: f64,
}

#[derive(Serialize)]
struct Untracked {
    max_source_macs: usize,
    frames: u64,
    macs: u64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// `pcp` or `dscp`.
pub fn priority_from(from_pcp: bool) -> &'static str {
    if from_pcp { "pcp" } else { "dscp" }
}

pub fn json(r: &Report) -> Pfc {
    let p = &r.pfc;
    let start = r.first_ts.unwrap_or(0);
    let at = |ts: u64| us(ts.saturating_sub(start));
    let options = p.options.unwrap_or_default();
    Pfc {
        frames: p.frames,
        pause_8023x_frames: p.pause_8023x_frames,
        by_source: p
            .by_source
            .iter()
            .map(|s| Source {
                mac: mac(s.mac),
                priority: s.priority,
                frames: s.frames,
                xoff: s.xoff,
                xon: s.xon,
                paused_us: us(s.paused_ns),
                longest_pause_us: us(s.longest_pause_ns),
            })
            .collect(),
        storms: p
            .storms
            .iter()
            .map(|s| Storm {
                mac: mac(s.mac),
                priority: s.priority,
                start_us: at(s.start_ts),
                end_us: at(s.end_ts),
                windows: s.windows,
                paused_us: us(s.paused_ns),
                max_share: s.max_share,
            })
            .collect(),
        link_gbps: options.link_bits_per_sec as f64 / 1e9,
        storm_window_ms: options.storm_window_ns as f64 / 1e6,
        storm_share: options.storm_share,
        priority_map: PRIORITY_MAP,
        stalled_flows: r
            .flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.pfc_stalls > 0)
            .map(|(i, f)| Stalled {
                flow: i,
                src: f.src.to_string(),
                dst: f.dst.to_string(),
                dest_qp: f.dest_qp.value(),
                priority: f.priority,
                priority_from: priority_from(f.priority_from_pcp),
                pauses: f.pfc_stalls,
                stalled_us: us(f.pfc_stalled_ns),
            })
            .collect(),
        reserved_bits_frames: p.reserved_bits_frames,
        empty_vector_frames: p.empty_vector_frames,
        other_mac_control_frames: p.other_mac_control_frames,
        truncated_frames: p.truncated_frames,
        storms_not_listed: p.storms_not_listed,
        intervals: p.intervals.len() as u64 + p.intervals_not_listed,
        untracked: Untracked {
            max_source_macs: MAX_SOURCE_MACS,
            frames: p.untracked_frames,
            macs: p.untracked_macs,
        },
    }
}

fn priority(p: Option<u8>) -> String {
    p.map_or("all (802.3x PAUSE)".to_string(), |p| {
        format!("priority {p}")
    })
}

/// The text report's PFC section; nothing when the capture held no MAC control frame.
pub fn pfc_text(o: &mut String, r: &Report) {
    let p: &PfcReport = &r.pfc;
    if p.frames + p.pause_8023x_frames + p.other_mac_control_frames + p.truncated_frames == 0 {
        return;
    }
    let options = p.options.unwrap_or_default();
    let start = r.first_ts.unwrap_or(0);
    let at = |ts: u64| format!("+{}", duration(ts.saturating_sub(start)));
    let _ = writeln!(
        o,
        "\nPFC and PAUSE: {} PFC frames, {} 802.3x PAUSE frames (quanta at {} Gb/s)",
        p.frames,
        p.pause_8023x_frames,
        options.link_bits_per_sec as f64 / 1e9
    );
    for s in &p.by_source {
        let _ = writeln!(
            o,
            "  {} {}: {} frames ({} XOFF, {} XON), paused {}, longest {}",
            mac(s.mac),
            priority(s.priority),
            s.frames,
            s.xoff,
            s.xon,
            duration(s.paused_ns),
            duration(s.longest_pause_ns)
        );
    }
    let window = duration(options.storm_window_ns);
    if p.storms.is_empty() {
        let _ = writeln!(
            o,
            "  no pause storm (no {window} window paused more than {:.0} %)",
            options.storm_share * 100.0
        );
    }
    for s in &p.storms {
        let _ = writeln!(
            o,
            "  STORM: {} {} paused {} of {} windows of {window} from {} to {} (at most {:.0} % of a window)",
            mac(s.mac),
            priority(s.priority),
            duration(s.paused_ns),
            s.windows,
            at(s.start_ts),
            at(s.end_ts),
            s.max_share * 100.0
        );
    }
    if p.storms_not_listed > 0 {
        let _ = writeln!(o, "  {} more storms not listed", p.storms_not_listed);
    }
    let stalled: Vec<_> = r
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.pfc_stalls > 0)
        .collect();
    let _ = writeln!(
        o,
        "  flows that sent nothing while their priority was paused ({PRIORITY_MAP}):{}",
        if stalled.is_empty() { " none" } else { "" }
    );
    for (i, f) in stalled {
        let _ = writeln!(
            o,
            "    flow {i} {} -> {} QP {} (priority {} from {}): {} pauses, {}",
            f.src,
            f.dst,
            f.dest_qp,
            f.priority,
            priority_from(f.priority_from_pcp).to_uppercase(),
            f.pfc_stalls,
            duration(f.pfc_stalled_ns)
        );
    }
    count_line(
        o,
        "  ",
        p.reserved_bits_frames,
        "PFC frames with reserved bits set (the enable vector's high byte)",
    );
    count_line(
        o,
        "  ",
        p.empty_vector_frames,
        "PFC frames enabled no priority",
    );
    if p.other_mac_control_frames + p.truncated_frames > 0 {
        let _ = writeln!(
            o,
            "  {} other MAC control frames, {} too short for their opcode",
            p.other_mac_control_frames, p.truncated_frames
        );
    }
    if p.untracked_frames > 0 {
        let _ = writeln!(
            o,
            "  not tracked: {} pause frames from {} MACs beyond the {MAX_SOURCE_MACS} followed",
            p.untracked_frames, p.untracked_macs
        );
    }
}

/// A link speed in Gb/s, as `--link-gbps` takes it.
pub fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(g) if g > 0.0 && g <= 1600.0 => Ok(g),
        _ => Err(format!("{s:?} is not a link speed in Gb/s (0 < G <= 1600)")),
    }
}

fn parse_window_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(ms) if (0.001..=3_600_000.0).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "{s:?} is not a window in milliseconds (0.001 to 3600000)"
        )),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..1.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a share of a window (0 <= X < 1)")),
    }
}

/// How `roce analyze` reads pause frames.
#[derive(Debug, Clone, clap::Args)]
pub struct PfcArgs {
    /// Link speed in Gb/s: a PAUSE or PFC quantum is 512 bit times at it (5.12 ns at 100).
    #[arg(long, value_name = "G", default_value_t = 100.0, value_parser = parse_gbps)]
    pub link_gbps: f64,
    /// PFC storms are looked for in windows this long, counted from the first frame.
    #[arg(long, value_name = "MS", default_value_t = 10.0, value_parser = parse_window_ms)]
    pub storm_window_ms: f64,
    /// A window in which a source's priority was paused more than this share of the time
    /// is stormy; a storm is a run of stormy windows.
    #[arg(long, value_name = "X", default_value_t = 0.5, value_parser = parse_share)]
    pub storm_share: f64,
}

impl PfcArgs {
    pub fn options(&self) -> roce::analysis::pfc::PfcOptions {
        roce::analysis::pfc::PfcOptions {
            link_bits_per_sec: (self.link_gbps * 1e9) as u64,
            storm_window_ns: (self.storm_window_ms * 1e6) as u64,
            storm_share: self.storm_share,
        }
    }
}
