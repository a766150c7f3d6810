//! TIMELY's sender (Mittal et al., "TIMELY: RTT-based Congestion Control for the
//! Datacenter", SIGCOMM 2015, Algorithm 1): a rate driven by the RTT and its gradient.
//!
//! Once per RTT (on the first ACK past the sequence that was next to send at the previous
//! update, as the HPCC authors' ns-3 TIMELY does), with `rtt` the ACK's RTT sample:
//!
//! ```text
//! rtt_diff = (1 - alpha) rtt_diff + alpha (rtt - prev_rtt)
//! gradient = rtt_diff / minRTT
//! rtt < T_low:          R <- R + delta          (N delta in HAI mode)
//! rtt > T_high:         R <- R (1 - beta (1 - T_high / rtt))
//! gradient <= 0:        R <- R + delta          (N delta in HAI mode)
//! otherwise:            R <- R (1 - beta gradient)
//! ```
//!
//! HAI (hyperactive increase): after 5 increases in a row the step is the larger
//! `rate_hai_bps` (the paper's N = 5 times delta) until the next decrease. R stays within
//! [min rate, line rate]. The first sample only sets prev_rtt.

use super::{
    AckFeedback, CcError, CongestionControl, Time, check_fraction, check_rate, check_rate_range,
};

/// Increases in a row before hyperactive increase (the paper's 5 completions).
const HAI_AFTER: u32 = 5;

/// TIMELY parameters; rates in bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelyParams {
    /// Ceiling of R and the rate a flow starts at.
    pub line_rate_bps: f64,
    /// Floor of R.
    pub min_rate_bps: f64,
    /// EWMA weight alpha of a new RTT difference.
    pub alpha: f64,
    /// Multiplicative decrease factor beta.
    pub beta: f64,
    /// Below T_low the RTT shows no queue: increase whatever the gradient.
    pub t_low: Time,
    /// Above T_high the RTT alone decides a decrease.
    pub t_high: Time,
    /// minRTT, which normalises the gradient.
    pub min_rtt: Time,
    /// delta, the additive step.
    pub rate_ai_bps: f64,
    /// N delta, the step in HAI mode.
    pub rate_hai_bps: f64,
}

impl TimelyParams {
    /// The paper's alpha 0.875, beta 0.8, T_low 50 us, T_high 500 us, minRTT 20 us (also the
    /// HPCC authors' ns-3 defaults). delta is the paper's 10 Mb/s at 10 Gb/s scaled with the
    /// line rate, as the ns-3 runs do (run.py: RATE_AI = line / 1000, HAI = 5 x AI); min rate
    /// 1 Gb/s as there.
    pub fn paper(line_rate_bps: f64) -> TimelyParams {
        let delta = line_rate_bps / 1000.0;
        TimelyParams {
            line_rate_bps,
            min_rate_bps: (1e9f64).min(line_rate_bps),
            alpha: 0.875,
            beta: 0.8,
            t_low: Time::from_micros(50),
            t_high: Time::from_micros(500),
            min_rtt: Time::from_micros(20),
            rate_ai_bps: delta,
            rate_hai_bps: 5.0 * delta,
        }
    }

    /// Checks every parameter can run.
    pub fn validate(&self) -> Result<(), CcError> {
        check_rate_range(self.line_rate_bps, self.min_rate_bps)?;
        check_fraction("alpha", self.alpha)?;
        check_fraction("beta", self.beta)?;
        check_rate("delta", self.rate_ai_bps)?;
        check_rate("HAI step", self.rate_hai_bps)?;
        if self.min_rtt.is_zero() {
            return Err(CcError::Zero { name: "minRTT" });
        }
        if self.t_low > self.t_high {
            return Err(CcError::Invalid("T_low must not exceed T_high".into()));
        }
        Ok(())
    }
}

/// TIMELY's sender state for one QP.
#[derive(Debug, Clone)]
pub struct Timely {
    p: TimelyParams,
    rate: f64,
    prev_rtt: Option<Time>,
    /// The smoothed RTT difference, seconds.
    rtt_diff: f64,
    increases: u32,
    last_update_seq: u64,
    updates: u64,
}

impl Timely {
    /// A QP starting at line rate.
    pub fn new(params: TimelyParams) -> Result<Timely, CcError> {
        params.validate()?;
        Ok(Timely {
            p: params,
            rate: params.line_rate_bps,
            prev_rtt: None,
            rtt_diff: 0.0,
            increases: 0,
            last_update_seq: 0,
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &TimelyParams {
        &self.p
    }
    /// The smoothed RTT difference, seconds.
    pub fn rtt_diff_secs(&self) -> f64 {
        self.rtt_diff
    }
    /// Rate updates made.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    fn update(&mut self, rtt: Time) {
        let Some(prev) = self.prev_rtt.replace(rtt) else {
            return;
        };
        self.updates += 1;
        let new_diff = rtt.as_secs_f64() - prev.as_secs_f64();
        self.rtt_diff = (1.0 - self.p.alpha) * self.rtt_diff + self.p.alpha * new_diff;
        let gradient = self.rtt_diff / self.p.min_rtt.as_secs_f64();
        let factor = if rtt < self.p.t_low {
            None
        } else if rtt > self.p.t_high {
            let t_high = self.p.t_high.as_secs_f64();
            Some(1.0 - self.p.beta * (1.0 - t_high / rtt.as_secs_f64()))
        } else if gradient <= 0.0 {
            None
        } else {
            Some((1.0 - self.p.beta * gradient).max(0.0))
        };
        let rate = match factor {
            None => {
                let step = if self.increases >= HAI_AFTER {
                    self.p.rate_hai_bps
                } else {
                    self.p.rate_ai_bps
                };
                self.increases += 1;
                self.rate + step
            }
            Some(f) => {
                self.increases = 0;
                self.rate * f
            }
        };
        self.rate = rate.clamp(self.p.min_rate_bps, self.p.line_rate_bps);
    }
}

impl CongestionControl for Timely {
    fn rate_bps(&self) -> f64 {
        self.rate
    }

    fn on_cnp(&mut self, _now: Time) {}

    fn on_ack(&mut self, _now: Time, ack: &AckFeedback<'_>) {
        let Some(rtt) = ack.rtt else {
            return;
        };
        if self.prev_rtt.is_some() && ack.acked_bytes <= self.last_update_seq {
            return;
        }
        self.update(rtt);
        self.last_update_seq = ack.sent_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: f64 = 100e9;

    fn us(n: u64) -> Time {
        Time::from_micros(n)
    }

    /// Feeds an ACK that is always past the last update.
    fn sample(cc: &mut Timely, seq: &mut u64, rtt: Time) {
        *seq += 1;
        let fb = AckFeedback {
            acked_bytes: *seq,
            sent_bytes: *seq,
            rtt: Some(rtt),
            int: &[],
        };
        cc.on_ack(us(0), &fb);
    }

    fn timely_at(rate: f64) -> Timely {
        let mut cc = Timely::new(TimelyParams::paper(LINE)).unwrap();
        cc.rate = rate;
        cc
    }

    #[test]
    fn below_t_low_it_adds_delta_then_hai() {
        let mut cc = timely_at(50e9);
        let mut seq = 0;
        sample(&mut cc, &mut seq, us(10));
        assert_eq!(cc.rate_bps(), 50e9, "the first sample only sets prev_rtt");
        for i in 1..=5 {
            sample(&mut cc, &mut seq, us(10 + i));
            assert!((cc.rate_bps() - (50e9 + i as f64 * 100e6)).abs() < 1.0);
        }
        sample(&mut cc, &mut seq, us(20));
        assert!(
            (cc.rate_bps() - (50.5e9 + 500e6)).abs() < 1.0,
            "HAI: 5 delta"
        );
    }

    #[test]
    fn above_t_high_the_rtt_alone_cuts() {
        let mut cc = timely_at(50e9);
        let mut seq = 0;
        sample(&mut cc, &mut seq, us(600));
        sample(&mut cc, &mut seq, us(1000));
        let expected = 50e9 * (1.0 - 0.8 * (1.0 - 500.0 / 1000.0));
        assert!((cc.rate_bps() - expected).abs() < 1.0);
    }

    #[test]
    fn between_the_thresholds_the_gradient_decides() {
        let mut cc = timely_at(50e9);
        let mut seq = 0;
        sample(&mut cc, &mut seq, us(100));
        // RTT up 5 us: rtt_diff = 0.875 x 5 us, gradient = 4.375 / 20.
        sample(&mut cc, &mut seq, us(105));
        let gradient = 0.875 * 5.0 / 20.0;
        assert!((cc.rtt_diff_secs() - 0.875 * 5e-6).abs() < 1e-15);
        let after_cut = 50e9 * (1.0 - 0.8 * gradient);
        assert!((cc.rate_bps() - after_cut).abs() < 1.0);
        // RTT down 10 us: rtt_diff = 0.125 x 4.375 - 0.875 x 10 < 0, an increase.
        sample(&mut cc, &mut seq, us(95));
        assert!((cc.rate_bps() - (after_cut + 100e6)).abs() < 1.0);
    }

    #[test]
    fn once_per_rtt_and_within_bounds() {
        let mut cc = timely_at(50e9);
        let fb = |acked, rtt| AckFeedback {
            acked_bytes: acked,
            sent_bytes: 1_000,
            rtt: Some(us(rtt)),
            int: &[],
        };
        cc.on_ack(us(0), &fb(1, 100));
        cc.on_ack(us(0), &fb(500, 400));
        assert_eq!(cc.updates(), 0, "not past sequence 1000 yet");
        cc.on_ack(us(0), &fb(1_001, 100_000));
        assert_eq!(cc.updates(), 1);
        assert!(cc.rate_bps() >= 1e9);
        let mut fast = timely_at(LINE);
        let mut seq = 0;
        sample(&mut fast, &mut seq, us(5));
        sample(&mut fast, &mut seq, us(5));
        assert_eq!(fast.rate_bps(), LINE);
        assert!(
            Timely::new(TimelyParams {
                beta: 2.0,
                ..TimelyParams::paper(LINE)
            })
            .is_err()
        );
    }
}
