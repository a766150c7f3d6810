//! The DCQCN reaction point (the sender, SIGCOMM 2015 section 3.3, Figure 7 of the paper), and
//! its parameter presets.
//!
//! On a CNP: R_T <- R_C, R_C <- R_C (1 - alpha/2), alpha <- (1 - g) alpha + g, and the rate
//! increase timer T and byte counter B both restart. Without a CNP for an alpha period,
//! alpha <- (1 - g) alpha. Each expiry of T and each B bytes sent is an increase event; with t
//! and b the events of each kind since the last cut (this one included):
//! - fast recovery while max(t, b) <= F: R_C <- (R_T + R_C) / 2;
//! - hyper increase once min(t, b) > F: R_T += (min(t, b) - F) R_HAI, then the same average;
//! - additive increase otherwise: R_T += R_AI, then the same average.
//!
//! So each counter gives exactly F fast-recovery steps, which is what the CoNEXT 2016 fluid
//! model's (1 - p)^(F B) and (1 - p)^(F T R_C) factors count. R_C stays within
//! [min rate, line rate] and R_T within line rate. Flows start at line rate with no timer
//! running; once a flow is back at line rate its timers stop, so an idle QP costs no wake-ups
//! (the alpha decays it missed are applied at the next CNP).

use super::{CcError, CongestionControl, Time, check_fraction, check_rate_range};

/// DCQCN reaction-point parameters. Rates in bit/s; every field says its source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    /// Ceiling of R_C and R_T, and the rate a flow starts at: the NIC's line rate.
    pub line_rate_bps: f64,
    /// Floor of R_C.
    pub min_rate_bps: f64,
    /// EWMA gain g of alpha (dimensionless).
    pub g: f64,
    /// alpha before the first CNP (dimensionless, 0..=1).
    pub initial_alpha: f64,
    /// The alpha period: alpha decays once per period without a cut (the paper's K, 55 us).
    pub alpha_period: Time,
    /// The rate increase timer T.
    pub increase_period: Time,
    /// The byte counter B in bytes; 0 disables byte-counter increase events.
    pub byte_counter: u64,
    /// F: fast-recovery steps per counter before additive increase.
    pub fast_recovery_steps: u32,
    /// R_AI: additive increase step of R_T, bit/s.
    pub rate_ai_bps: f64,
    /// R_HAI: hyper increase step of R_T, bit/s.
    pub rate_hai_bps: f64,
    /// At most one cut per this period; CNPs in between are folded into one cut at its end
    /// (mlx5 rate_reduce_monitor_period). Zero: every CNP cuts.
    pub rate_reduce_period: Time,
    /// true: every cut sets R_T <- R_C (the paper). false: only if an increase event happened
    /// since the last cut (mlx5 clamp_tgt_rate = 0, clamp_tgt_rate_after_time_inc = 1).
    pub clamp_target_always: bool,
}

/// The named parameter sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// The SIGCOMM 2015 paper's parameters ([`DcqcnParams::paper`]).
    Paper,
    /// NVIDIA ConnectX's (mlx5) defaults ([`DcqcnParams::mlx5`]).
    Mlx5,
}

impl Preset {
    /// Every preset, in the order the command line lists them.
    pub const ALL: [Preset; 2] = [Preset::Paper, Preset::Mlx5];

    /// The preset's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Paper => "paper",
            Preset::Mlx5 => "mlx5",
        }
    }

    /// The preset called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The preset's parameters for a link of `line_rate_bps`.
    pub fn params(self, line_rate_bps: f64) -> DcqcnParams {
        match self {
            Preset::Paper => DcqcnParams::paper(line_rate_bps),
            Preset::Mlx5 => DcqcnParams::mlx5(line_rate_bps),
        }
    }
}

impl DcqcnParams {
    /// The paper's parameters (SIGCOMM 2015, as listed in docs/congestion.md): g = 1/256,
    /// alpha period 55 us, T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s.
    /// From the authors' ns-3 code (bobzhuyb/ns3-rdma, qbb-net-device.cc):
    /// min rate 100 Mb/s (MinRate) and R_HAI = 10 R_AI (its RateAI 5 / RateHAI 50 Mb/s ratio;
    /// hyper increase needs 5 B = 50 MB without a CNP, so it rarely matters). Initial alpha 1,
    /// as mlx5's initial_alpha_value (ns-3 starts at 0.5).
    pub fn paper(line_rate_bps: f64) -> DcqcnParams {
        DcqcnParams {
            line_rate_bps,
            min_rate_bps: 100e6,
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            alpha_period: Time::from_micros(55),
            increase_period: Time::from_micros(55),
            byte_counter: 10_000_000,
            fast_recovery_steps: 5,
            rate_ai_bps: 40e6,
            rate_hai_bps: 400e6,
            rate_reduce_period: Time::ZERO,
            clamp_target_always: true,
        }
    }

    /// NVIDIA mlx5 firmware defaults (docs/congestion.md): rpg_time_reset 300 us, rpg_byte_reset
    /// 32767 B, rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s,
    /// rate_reduce_monitor_period 4 us, initial alpha 1, rpg_min_rate 1 Mb/s.
    /// From NVIDIA's "DCQCN parameters" page as encoded by Google's isekai
    /// simulator (rdma_roce_cc_dcqcn.h): dce_tcp_g 1019, i.e. g = 5/1024, applied every
    /// dce_tcp_rtt = 1 us; clamp_tgt_rate 0 with clamp_tgt_rate_after_time_inc 1.
    pub fn mlx5(line_rate_bps: f64) -> DcqcnParams {
        DcqcnParams {
            line_rate_bps,
            min_rate_bps: 1e6,
            g: 5.0 / 1024.0,
            initial_alpha: 1.0,
            alpha_period: Time::from_micros(1),
            increase_period: Time::from_micros(300),
            byte_counter: 32_767,
            fast_recovery_steps: 1,
            rate_ai_bps: 5e6,
            rate_hai_bps: 50e6,
            rate_reduce_period: Time::from_micros(4),
            clamp_target_always: false,
        }
    }

    /// The DCQCN the HPCC authors compare HPCC with in their ns-3 runs
    /// (alibaba-edu/High-Precision-Congestion-Control, simulation/run.py, `--cc dcqcn`):
    /// g = 1/256 applied every 1 us (ALPHA_RESUME_INTERVAL), at most one cut per 4 us
    /// (RATE_DECREASE_INTERVAL), increase timer 300 us (RP_TIMER), no byte counter (their
    /// model has none), F = 1, R_AI 5 Mb/s and R_HAI 50 Mb/s per 25 Gb/s of line rate, min rate
    /// 1 Gb/s (MIN_RATE), R_T clamped only after a timer increase (CLAMP_TARGET_RATE 0).
    pub fn hpcc_ns3(line_rate_bps: f64) -> DcqcnParams {
        let per_25g = line_rate_bps / 25e9;
        DcqcnParams {
            line_rate_bps,
            min_rate_bps: (1e9f64).min(line_rate_bps),
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            alpha_period: Time::from_micros(1),
            increase_period: Time::from_micros(300),
            byte_counter: 0,
            fast_recovery_steps: 1,
            rate_ai_bps: 5e6 * per_25g,
            rate_hai_bps: 50e6 * per_25g,
            rate_reduce_period: Time::from_micros(4),
            clamp_target_always: false,
        }
    }

    /// Checks rates, gains and timers; [`ReactionPoint::new`] refuses what this refuses.
    pub fn validate(&self) -> Result<(), CcError> {
        check_rate_range(self.line_rate_bps, self.min_rate_bps)?;
        check_fraction("g", self.g)?;
        check_fraction("initial alpha", self.initial_alpha)?;
        if !(self.rate_ai_bps.is_finite() && self.rate_ai_bps >= 0.0) {
            return Err(CcError::Rate {
                name: "R_AI",
                value: self.rate_ai_bps,
            });
        }
        if !(self.rate_hai_bps.is_finite() && self.rate_hai_bps >= 0.0) {
            return Err(CcError::Rate {
                name: "R_HAI",
                value: self.rate_hai_bps,
            });
        }
        if self.alpha_period.is_zero() {
            return Err(CcError::Zero {
                name: "alpha period",
            });
        }
        if self.increase_period.is_zero() {
            return Err(CcError::Zero {
                name: "rate increase timer",
            });
        }
        Ok(())
    }
}

/// Where the reaction point is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// At line rate, no timer running (before the first CNP or after full recovery).
    Idle,
    /// After a cut: F timer or byte-counter events raise R_C halfway to R_T.
    FastRecovery,
    /// Past F events on one counter: R_T rises by R_AI each event.
    AdditiveIncrease,
    /// Past F events on both counters: R_T rises by R_HAI each event.
    HyperIncrease,
}

/// DCQCN's sender-side rate machine for one QP.
#[derive(Debug, Clone)]
pub struct ReactionPoint {
    p: DcqcnParams,
    rc: f64,
    rt: f64,
    alpha: f64,
    /// Timers run: a cut happened and R_C or R_T is below line rate.
    reacting: bool,
    last_cut: Option<Time>,
    cut_pending: bool,
    timer_events: u32,
    byte_events: u32,
    bytes: u64,
    next_increase: Time,
    next_alpha: Time,
    cnps: u64,
    cuts: u64,
}

impl ReactionPoint {
    /// A QP at line rate with the initial alpha; invalid parameters are refused.
    pub fn new(params: DcqcnParams) -> Result<ReactionPoint, CcError> {
        params.validate()?;
        Ok(ReactionPoint {
            p: params,
            rc: params.line_rate_bps,
            rt: params.line_rate_bps,
            alpha: params.initial_alpha,
            reacting: false,
            last_cut: None,
            cut_pending: false,
            timer_events: 0,
            byte_events: 0,
            bytes: 0,
            next_increase: Time::ZERO,
            next_alpha: Time::ZERO,
            cnps: 0,
            cuts: 0,
        })
    }

    /// The parameters this reaction point runs with.
    pub fn params(&self) -> &DcqcnParams {
        &self.p
    }
    /// R_T, bit/s.
    pub fn target_rate_bps(&self) -> f64 {
        self.rt
    }
    /// alpha as of the last event (decays missed while idle are applied at the next CNP).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// CNPs received so far.
    pub fn cnps(&self) -> u64 {
        self.cnps
    }
    /// Rate cuts made; fewer than CNPs when a rate-reduce period folds several together.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// The stage of the last increase event (fast recovery right after a cut).
    pub fn stage(&self) -> Stage {
        let f = self.p.fast_recovery_steps;
        let (t, b) = (self.timer_events, self.byte_events);
        if !self.reacting {
            Stage::Idle
        } else if t.max(b) <= f {
            Stage::FastRecovery
        } else if t.min(b) > f {
            Stage::HyperIncrease
        } else {
            Stage::AdditiveIncrease
        }
    }

    fn cut(&mut self, now: Time) {
        if !self.reacting && self.last_cut.is_some() && self.next_alpha <= now {
            // Decays of alpha due while the timers were stopped at line rate.
            let periods = (now - self.next_alpha).as_picos() / self.p.alpha_period.as_picos() + 1;
            let periods = i32::try_from(periods).unwrap_or(i32::MAX);
            self.alpha *= (1.0 - self.p.g).powi(periods);
        }
        if self.p.clamp_target_always || self.timer_events > 0 || self.byte_events > 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.p.min_rate_bps);
        self.alpha = (1.0 - self.p.g) * self.alpha + self.p.g;
        self.next_alpha = now + self.p.alpha_period;
        self.next_increase = now + self.p.increase_period;
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes = 0;
        self.last_cut = Some(now);
        self.cut_pending = false;
        self.reacting = true;
        self.cuts += 1;
    }

    /// One increase event; `timer_events` or `byte_events` already counts it.
    fn increase(&mut self) {
        let f = self.p.fast_recovery_steps;
        let (t, b) = (self.timer_events, self.byte_events);
        if t.max(b) <= f {
            // Fast recovery: R_T stays, R_C closes half the gap.
        } else if t.min(b) > f {
            self.rt += f64::from(t.min(b) - f) * self.p.rate_hai_bps;
        } else {
            self.rt += self.p.rate_ai_bps;
        }
        let line = self.p.line_rate_bps;
        self.rt = self.rt.min(line);
        self.rc = ((self.rt + self.rc) / 2.0).min(line);
        if self.rc >= line && self.rt >= line {
            self.reacting = false;
        }
    }

    fn pending_cut_at(&self) -> Option<Time> {
        match (self.cut_pending, self.last_cut) {
            (true, Some(last)) => Some(last + self.p.rate_reduce_period),
            _ => None,
        }
    }
}

impl CongestionControl for ReactionPoint {
    fn rate_bps(&self) -> f64 {
        self.rc
    }

    fn on_cnp(&mut self, now: Time) {
        self.on_timer(now);
        self.cnps += 1;
        let may_cut = match self.last_cut {
            Some(last) => now >= last + self.p.rate_reduce_period,
            None => true,
        };
        if may_cut {
            self.cut(now);
        } else {
            self.cut_pending = true;
        }
    }

    fn on_bytes_sent(&mut self, now: Time, bytes: u64) {
        self.on_timer(now);
        if !self.reacting || self.p.byte_counter == 0 {
            return;
        }
        self.bytes += bytes;
        while self.reacting && self.bytes >= self.p.byte_counter {
            self.bytes -= self.p.byte_counter;
            self.byte_events += 1;
            self.increase();
        }
    }

    fn on_timer(&mut self, now: Time) {
        // Deadlines are handled in time order, each at its own time, so one late call does
        // what the calls at each deadline would have done.
        loop {
            if let Some(at) = self.pending_cut_at().filter(|&at| at <= now)
                && !(self.reacting && self.next_alpha.min(self.next_increase) < at)
            {
                self.cut(at);
                continue;
            }
            if !self.reacting {
                break;
            }
            if self.next_alpha <= now && self.next_alpha <= self.next_increase {
                self.alpha *= 1.0 - self.p.g;
                self.next_alpha += self.p.alpha_period;
            } else if self.next_increase <= now {
                let at = self.next_increase;
                self.timer_events += 1;
                self.increase();
                self.next_increase = at + self.p.increase_period;
            } else {
                break;
            }
        }
    }

    fn next_timer(&self) -> Option<Time> {
        let running = self
            .reacting
            .then(|| self.next_alpha.min(self.next_increase));
        match (running, self.pending_cut_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests;
