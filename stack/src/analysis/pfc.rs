//! PFC (IEEE 802.1Qbb) and 802.3x PAUSE in a capture: who paused whom, on which priority, for
//! how long, and which RoCE flows sat still meanwhile.
//!
//! A pause is in force from its frame until its quanta expire (counted at the link speed
//! given); a later frame for the same port and priority replaces the time left, and a time of
//! zero (XON) ends it at once (802.3 Annex 31B.3.7, 802.1Qbb 36.1.3.3). Each continuous pause
//! of a (source MAC, priority) is an [`Interval`]; an 802.3x PAUSE pauses the whole link,
//! priority `None`. Per source and priority the tracker counts frames, XOFF and XON, the
//! paused time and the longest pause, and finds storms: runs of windows (`storm_window_ns`,
//! aligned to the capture's first frame) in which the priority was paused more than
//! `storm_share` of the time.
//!
//! A capture does not show the topology, so a RoCE flow is said to have *stalled* in a pause
//! when it sent nothing for at least half of the pause (a NIC stops only after the frames
//! already in flight, so a packet or two may follow the XOFF), the pause's priority is the
//! flow's (or it was an 802.3x PAUSE), and the pause did not come from the flow's own sender.
//! Its stalled time is the part of the pause it sent nothing in.
//!
//! Memory is bounded whatever the capture: at most [`MAX_SOURCE_MACS`] pausing MACs are
//! followed (frames from others are counted, and the MACs, up to [`EXCESS_MACS_COUNTED`]),
//! at most [`INTERVALS_KEPT`] intervals and [`STORMS_KEPT`] storms are listed (the rest
//! counted), and the stall check looks back over the last [`RECENT`] pauses only.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::flow::{FastMap, FastSet};
use crate::capture::{Frame, Link};
use crate::wire::encap::ETHERNET_HEADER_LEN;
use crate::wire::pause::{ETHERTYPE_MAC_CONTROL, MacControlRepr, PRIORITIES, quanta_to_ps};

/// Link speed pause quanta are counted at by default (`--link-gbps`).
pub const DEFAULT_LINK_GBPS: u64 = 100;
/// Storm windows by default (`--storm-window-ms`): 10 ms.
pub const DEFAULT_STORM_WINDOW_NS: u64 = 10_000_000;
/// A window is stormy when its priority was paused more than this share of it by default
/// (`--storm-share`).
pub const DEFAULT_STORM_SHARE: f64 = 0.5;
/// Pausing MACs followed; frames from more are counted only.
pub const MAX_SOURCE_MACS: usize = 512;
/// Distinct MACs beyond [`MAX_SOURCE_MACS`] counted exactly; beyond, "at least".
pub const EXCESS_MACS_COUNTED: usize = 1 << 16;
/// Pause intervals listed (for the ladder); later ones are counted only.
pub const INTERVALS_KEPT: usize = 100_000;
/// Storms listed; later ones are counted only.
pub const STORMS_KEPT: usize = 10_000;
/// Finished pauses remembered for the stall check: a flow silent across more pauses than
/// this has its stalls undercounted.
pub const RECENT: usize = 256;

/// The PFC priority of an untagged packet's DSCP: its class selector, DSCP >> 3 (the
/// default `dscp2prio` map of mlx5 NICs in DSCP trust mode: DSCP 26 rides priority 3, the
/// CNPs' DSCP 48 priority 6).
pub const fn dscp_priority(dscp: u8) -> u8 {
    (dscp >> 3) & 7
}

/// How pause times are read and storms found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PfcOptions {
    /// The link rate that turns pause quanta into time (one quantum is 512 bit times).
    pub link_bits_per_sec: u64,
    /// The window storms are judged in.
    pub storm_window_ns: u64,
    /// Share of a window (0 to 1) paused beyond which it is stormy.
    pub storm_share: f64,
}

impl Default for PfcOptions {
    fn default() -> Self {
        PfcOptions {
            link_bits_per_sec: DEFAULT_LINK_GBPS * 1_000_000_000,
            storm_window_ns: DEFAULT_STORM_WINDOW_NS,
            storm_share: DEFAULT_STORM_SHARE,
        }
    }
}

/// A MAC control frame's source and destination MAC and body (`None` when it is too short
/// for its opcode); `None` for any other frame. MAC control frames are Ethernet frames,
/// never tagged (802.3 31.5), so a cooked or raw IP capture has none.
pub fn mac_control(frame: &Frame<'_>) -> Option<MacControl> {
    if frame.link != Link::Ethernet {
        return None;
    }
    let data = frame.data;
    let ethertype = u16::from_be_bytes(data.get(12..14)?.try_into().ok()?);
    if ethertype != ETHERTYPE_MAC_CONTROL {
        return None;
    }
    Some(MacControl {
        dst: data[0..6].try_into().ok()?,
        src: data[6..12].try_into().ok()?,
        body: MacControlRepr::parse(&data[ETHERNET_HEADER_LEN..]),
    })
}

/// See [`mac_control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacControl {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC: the port that sent it.
    pub src: [u8; 6],
    /// PAUSE, PFC or another opcode.
    pub body: Option<MacControlRepr>,
}

/// A PAUSE or PFC frame's source MAC and body; `None` for any other frame.
pub fn pause_frame(frame: &Frame<'_>) -> Option<([u8; 6], MacControlRepr)> {
    let c = mac_control(frame)?;
    match c.body? {
        body @ (MacControlRepr::Pause(_) | MacControlRepr::Pfc(_)) => Some((c.src, body)),
        MacControlRepr::Other(_) => None,
    }
}

/// One continuous pause of a port's priority (`None`: an 802.3x PAUSE of the whole link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// The MAC of the port that paused.
    pub mac: [u8; 6],
    /// The priority paused.
    pub priority: Option<u8>,
    /// When the pause began.
    pub start_ts: u64,
    /// When it ended (a resume or its time running out).
    pub end_ts: u64,
}

/// A run of stormy windows of one port's priority.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Storm {
    /// The MAC of the port that paused.
    pub mac: [u8; 6],
    /// The priority paused.
    pub priority: Option<u8>,
    /// Start of its first window and end of its last.
    pub start_ts: u64,
    /// End of its last window.
    pub end_ts: u64,
    /// Stormy windows in the run.
    pub windows: u64,
    /// Paused time within its windows.
    pub paused_ns: u64,
    /// The largest share of one window paused.
    pub max_share: f64,
}

/// What one port did to one priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceReport {
    /// The port's MAC.
    pub mac: [u8; 6],
    /// The priority (`None`: 802.3x PAUSE of the whole link).
    pub priority: Option<u8>,
    /// Pause frames that set this priority's time (PFC: its enable bit was on).
    pub frames: u64,
    /// Of which non-zero times (pause) and zero times (resume).
    pub xoff: u64,
    /// Zero times: resumes.
    pub xon: u64,
    /// Time the priority was paused, all told.
    pub paused_ns: u64,
    /// The longest single pause.
    pub longest_pause_ns: u64,
}

/// The PFC part of the analysis report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PfcReport {
    /// The options the tracker read with (`None` in a default, empty report).
    pub options: Option<PfcOptions>,
    /// PFC frames (opcode 0x0101).
    pub frames: u64,
    /// 802.3x PAUSE frames (opcode 0x0001).
    pub pause_8023x_frames: u64,
    /// Other MAC control opcodes, and MAC control frames too short for their opcode.
    pub other_mac_control_frames: u64,
    /// MAC control frames too short for their opcode.
    pub truncated_frames: u64,
    /// PFC frames whose reserved high byte of the enable vector was not zero.
    pub reserved_bits_frames: u64,
    /// PFC frames that enabled no priority.
    pub empty_vector_frames: u64,
    /// By MAC, then priority (the 802.3x PAUSE, `None`, first).
    pub by_source: Vec<SourceReport>,
    /// The first storms.
    pub storms: Vec<Storm>,
    /// Storms beyond those listed.
    pub storms_not_listed: u64,
    /// The first pause intervals.
    pub intervals: Vec<Interval>,
    /// Intervals beyond those listed.
    pub intervals_not_listed: u64,
    /// Pause frames from MACs beyond [`MAX_SOURCE_MACS`], and how many such MACs.
    pub untracked_frames: u64,
    /// How many MACs that was.
    pub untracked_macs: u64,
}

#[derive(Debug, Clone, Default)]
struct Source {
    mac: [u8; 6],
    priority: Option<u8>,
    frames: u64,
    xoff: u64,
    xon: u64,
    paused_ns: u64,
    longest_ns: u64,
    /// The pause in force: (start, when it lapses).
    open: Option<(u64, u64)>,
    /// The storm window last added to, and the paused time in it.
    window: u64,
    window_paused: u64,
    storm: Option<Storm>,
}

/// A finished pause, for the stall check.
#[derive(Debug, Clone, Copy)]
struct Recent {
    seq: u64,
    interval: Interval,
}

/// Follows the pauses of a capture's frames, in order.
#[derive(Debug, Clone, Default)]
pub struct PfcTracker {
    options: PfcOptions,
    /// The capture's first frame: storm windows count from it.
    base: Option<u64>,
    sources: Vec<Source>,
    index: FastMap<([u8; 6], Option<u8>), u32>,
    macs: FastSet<[u8; 6]>,
    excess_macs: FastSet<[u8; 6]>,
    /// When open pauses lapse, (until, source); stale entries are skipped.
    lapses: BinaryHeap<Reverse<(u64, u32)>>,
    recent: Vec<Recent>,
    /// Pauses finished so far: the sequence number of the next one.
    finished: u64,
    report: PfcReport,
    /// Keep no interval list (the stall check and figures do not need it).
    forget_intervals: bool,
}

impl PfcTracker {
    /// A tracker that reads pause times and storms as `options` say.
    pub fn new(options: PfcOptions) -> PfcTracker {
        PfcTracker {
            options,
            ..PfcTracker::default()
        }
    }

    /// The options it reads with.
    pub fn options(&self) -> PfcOptions {
        self.options
    }

    /// Any frame of the capture at `ts`, in order: pauses that lapsed by then end.
    #[inline]
    pub fn advance(&mut self, ts: u64) {
        self.base.get_or_insert(ts);
        while let Some(&Reverse((until, id))) = self.lapses.peek()
            && until <= ts
        {
            self.lapses.pop();
            let s = &self.sources[id as usize];
            if let Some((start, u)) = s.open
                && u == until
            {
                self.sources[id as usize].open = None;
                self.finish(id, start, until);
            }
        }
    }

    /// A MAC control frame at `ts` (after [`PfcTracker::advance`] to `ts`).
    pub fn mac_control(&mut self, ts: u64, c: &MacControl) {
        match c.body {
            Some(body @ (MacControlRepr::Pause(_) | MacControlRepr::Pfc(_))) => {
                self.frame(ts, c.src, &body)
            }
            Some(MacControlRepr::Other(_)) => self.report.other_mac_control_frames += 1,
            None => self.report.truncated_frames += 1,
        }
    }

    /// A PAUSE or PFC frame from `src` at `ts`.
    pub fn frame(&mut self, ts: u64, src: [u8; 6], body: &MacControlRepr) {
        self.advance(ts);
        match body {
            MacControlRepr::Pause(_) => self.report.pause_8023x_frames += 1,
            MacControlRepr::Pfc(p) => {
                self.report.frames += 1;
                if p.reserved() != 0 {
                    self.report.reserved_bits_frames += 1;
                }
                if p.enable_vector & 0xff == 0 {
                    self.report.empty_vector_frames += 1;
                }
            }
            MacControlRepr::Other(_) => return,
        }
        if !self.macs.contains(&src) {
            if self.macs.len() >= MAX_SOURCE_MACS {
                self.report.untracked_frames += 1;
                if self.excess_macs.len() < EXCESS_MACS_COUNTED && self.excess_macs.insert(src) {
                    self.report.untracked_macs += 1;
                }
                return;
            }
            self.macs.insert(src);
        }
        match body {
            MacControlRepr::Pause(p) => self.set(ts, src, None, p.quanta),
            MacControlRepr::Pfc(p) => {
                for n in (0..PRIORITIES).filter(|&n| p.enabled(n)) {
                    self.set(ts, src, Some(n as u8), p.quanta[n]);
                }
            }
            MacControlRepr::Other(_) => {}
        }
    }

    fn source(&mut self, mac: [u8; 6], priority: Option<u8>) -> u32 {
        let next = self.sources.len() as u32;
        let id = *self.index.entry((mac, priority)).or_insert(next);
        if id == next {
            self.sources.push(Source {
                mac,
                priority,
                ..Source::default()
            });
        }
        id
    }

    fn set(&mut self, ts: u64, mac: [u8; 6], priority: Option<u8>, quanta: u16) {
        let id = self.source(mac, priority);
        let s = &mut self.sources[id as usize];
        s.frames += 1;
        if quanta == 0 {
            s.xon += 1;
            if let Some((start, _)) = s.open.take() {
                self.finish(id, start, ts);
            }
            return;
        }
        s.xoff += 1;
        let until = ts + quanta_to_ps(quanta, self.options.link_bits_per_sec).div_ceil(1000);
        let start = s.open.map_or(ts, |(start, _)| start);
        s.open = Some((start, until));
        self.lapses.push(Reverse((until, id)));
        // Stale entries (pauses extended or ended early) are dropped now and then, so the
        // heap stays near one entry per source.
        if self.lapses.len() > 4 * self.sources.len() + 64 {
            let sources = &self.sources;
            let live: Vec<_> = self
                .lapses
                .drain()
                .filter(|Reverse((u, i))| sources[*i as usize].open.is_some_and(|o| o.1 == *u))
                .collect();
            self.lapses = live.into();
        }
    }

    /// The pause of source `id` from `start` to `end` is over.
    fn finish(&mut self, id: u32, start: u64, end: u64) {
        let options = self.options;
        let base = self.base.unwrap_or(start);
        let s = &mut self.sources[id as usize];
        let lasted = end.saturating_sub(start);
        s.paused_ns += lasted;
        s.longest_ns = s.longest_ns.max(lasted);
        let interval = Interval {
            mac: s.mac,
            priority: s.priority,
            start_ts: start,
            end_ts: end,
        };
        let storms = &mut self.report;
        add_to_windows(s, start, end, base, &options, storms);
        let recent = Recent {
            seq: self.finished,
            interval,
        };
        if self.recent.len() < RECENT {
            self.recent.push(recent);
        } else {
            self.recent[(self.finished % RECENT as u64) as usize] = recent;
        }
        self.finished += 1;
        if self.forget_intervals || self.report.intervals.len() >= INTERVALS_KEPT {
            self.report.intervals_not_listed += 1;
        } else {
            self.report.intervals.push(interval);
        }
    }

    /// Pauses finished so far (a flow remembers it to ask [`PfcTracker::stalls`] later).
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// The pauses finished since `since` (a [`PfcTracker::finished`] count) that a flow of
    /// `priority`, sent by `sender`, stalled in, silent between its packets at `prev_ts` and
    /// `ts`: how many, and how long it was silent in them.
    pub fn stalls(
        &self,
        since: u64,
        priority: u8,
        sender: [u8; 6],
        prev_ts: u64,
        ts: u64,
    ) -> (u32, u64) {
        let from = since.max(self.finished.saturating_sub(RECENT as u64));
        let (mut n, mut ns) = (0, 0);
        for seq in from..self.finished {
            let r = &self.recent[(seq % RECENT as u64) as usize];
            let i = &r.interval;
            if r.seq == seq && i.priority.is_none_or(|p| p == priority) && i.mac != sender {
                let silent = i.end_ts.min(ts).saturating_sub(i.start_ts.max(prev_ts));
                if silent > 0 && silent * 2 >= i.end_ts - i.start_ts {
                    n += 1;
                    ns += silent;
                }
            }
        }
        (n, ns)
    }

    /// Drops the listed pauses over before `ts` (`roce view` draws only its page's).
    pub fn forget_before(&mut self, ts: u64) {
        self.report.intervals.retain(|i| i.end_ts > ts);
    }

    /// Lists no intervals from now on (only counts them).
    pub fn without_intervals(mut self) -> PfcTracker {
        self.forget_intervals = true;
        self
    }

    /// Everything found: pauses still in force end where they lapse.
    pub fn report(&self) -> PfcReport {
        self.clone().into_report()
    }

    /// The report, consuming the tracker; pauses still in force count until their time runs out.
    pub fn into_report(mut self) -> PfcReport {
        let open: Vec<(u32, u64, u64)> = (0..self.sources.len() as u32)
            .filter_map(|id| {
                let (start, until) = self.sources[id as usize].open.take()?;
                Some((id, start, until))
            })
            .collect();
        for (id, start, until) in open {
            self.finish(id, start, until);
        }
        let (options, base) = (self.options, self.base.unwrap_or(0));
        let report = &mut self.report;
        for s in &mut self.sources {
            close_window(s, u64::MAX, base, &options, report);
        }
        self.sources.sort_by_key(|s| (s.mac, s.priority));
        report.by_source = self
            .sources
            .iter()
            .map(|s| SourceReport {
                mac: s.mac,
                priority: s.priority,
                frames: s.frames,
                xoff: s.xoff,
                xon: s.xon,
                paused_ns: s.paused_ns,
                longest_pause_ns: s.longest_ns,
            })
            .collect();
        report
            .storms
            .sort_by_key(|s| (s.start_ts, s.mac, s.priority));
        report
            .intervals
            .sort_by_key(|i| (i.start_ts, i.mac, i.priority));
        report.options = Some(options);
        self.report
    }
}

/// Adds the pause `start..end` to its source's storm windows, closing those it passes.
fn add_to_windows(
    s: &mut Source,
    start: u64,
    end: u64,
    base: u64,
    options: &PfcOptions,
    report: &mut PfcReport,
) {
    let width = options.storm_window_ns.max(1);
    let mut t = start.max(base);
    while t < end {
        let window = (t - base) / width;
        if window != s.window {
            close_window(s, window, base, options, report);
        }
        let upto = end.min(base.saturating_add((window + 1).saturating_mul(width)));
        s.window_paused += upto - t;
        t = upto;
    }
}

/// Judges the source's current window, now that `next` is the window being filled.
fn close_window(
    s: &mut Source,
    next: u64,
    base: u64,
    options: &PfcOptions,
    report: &mut PfcReport,
) {
    let width = options.storm_window_ns.max(1);
    if s.window_paused > 0 {
        let share = s.window_paused as f64 / width as f64;
        if share > options.storm_share {
            let window_start = base + s.window * width;
            match &mut s.storm {
                Some(storm) if storm.end_ts == window_start => {
                    storm.end_ts += width;
                    storm.windows += 1;
                    storm.paused_ns += s.window_paused;
                    storm.max_share = storm.max_share.max(share);
                }
                _ => {
                    end_storm(s, report);
                    s.storm = Some(Storm {
                        mac: s.mac,
                        priority: s.priority,
                        start_ts: window_start,
                        end_ts: window_start + width,
                        windows: 1,
                        paused_ns: s.window_paused,
                        max_share: share,
                    });
                }
            }
        } else {
            end_storm(s, report);
        }
    }
    // A storm lasts only through consecutive stormy windows.
    if next > s.window + 1 || s.window_paused == 0 {
        end_storm(s, report);
    }
    s.window = next;
    s.window_paused = 0;
}

/// Lists the source's storm.
fn end_storm(s: &mut Source, report: &mut PfcReport) {
    if let Some(storm) = s.storm.take() {
        if report.storms.len() < STORMS_KEPT {
            report.storms.push(storm);
        } else {
            report.storms_not_listed += 1;
        }
    }
}
