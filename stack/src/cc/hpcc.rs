//! HPCC's sender (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019,
//! section 3.2 and Algorithm 1): a window computed from the in-band telemetry (INT) that
//! every switch egress writes into the data packet and the receiver echoes in its ACK.
//!
//! Per ACK, for each hop i of the path, from this ACK's record and the previous one:
//!
//! ```text
//! txRate_i = (txBytes_i - txBytes'_i) / (ts_i - ts'_i)
//! u_i      = min(qlen_i, qlen'_i) / (B_i T) + txRate_i / B_i
//! ```
//!
//! The most utilised hop j gives u = u_j and tau = min(ts_j - ts'_j, T); the normalised
//! in-flight estimate is smoothed over one base RTT T: U <- (1 - tau/T) U + (tau/T) u. Then
//!
//! ```text
//! W = W^c / (U / eta) + W_AI   if U >= eta or incStage >= maxStage
//! W = W^c + W_AI               otherwise
//! ```
//!
//! and the sender paces at R = W / T. The reference window W^c takes the new W (and incStage
//! restarts or counts up) only once per RTT: on the first ACK past the sequence that was
//! next to send at the last reference update. The ACKs in between react at once from the same
//! W^c ("fast reaction", section 3.2), so a burst is answered within one ACK, yet the
//! reaction is not compounded. W stays within [min rate x T, line rate x T].
//!
//! As in the authors' ns-3 code (alibaba-edu/High-Precision-Congestion-Control, rdma-hw.cc),
//! U starts at 1 and the first ACK only records the telemetry it carries.

use super::{AckFeedback, CcError, CongestionControl, Time, check_fraction, check_rate_range};

/// The most switch hops a packet records telemetry for (the paper's INT header holds 5).
pub const MAX_INT_HOPS: usize = 5;

/// One switch egress's telemetry, written as the packet leaves it (HPCC section 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IntHop {
    /// When the packet left the egress.
    pub ts: Time,
    /// Bytes the egress port had transmitted in total by then.
    pub tx_bytes: u64,
    /// Bytes queued at the egress port then.
    pub qlen_bytes: u64,
    /// The egress link's rate B, bit/s.
    pub link_bps: f64,
}

/// HPCC parameters; rates in bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpccParams {
    /// The NIC's line rate: W_init = line rate x T, and the ceiling of R.
    pub line_rate_bps: f64,
    /// T, the base RTT of the network (the paper uses one T for all flows).
    pub base_rtt: Time,
    /// eta, the target utilisation.
    pub eta: f64,
    /// maxStage: additive steps before a multiplicative one even below eta.
    pub max_stage: u32,
    /// W_AI, the additive step of the window, bytes.
    pub w_ai_bytes: f64,
    /// The floor of R.
    pub min_rate_bps: f64,
}

impl HpccParams {
    /// The paper's eta = 95 % and maxStage = 5 (section 5.1). W_AI from the authors' ns-3
    /// runs (run.py): an additive rate step of 10 Mb/s per 25 Gb/s of line rate, times T;
    /// min rate 1 Gb/s as there (MIN_RATE).
    pub fn paper(line_rate_bps: f64, base_rtt: Time) -> HpccParams {
        let rate_ai_bps = line_rate_bps / 2500.0;
        HpccParams {
            line_rate_bps,
            base_rtt,
            eta: 0.95,
            max_stage: 5,
            w_ai_bytes: rate_ai_bps * base_rtt.as_secs_f64() / 8.0,
            min_rate_bps: (1e9f64).min(line_rate_bps),
        }
    }

    /// As the authors' ns-3 runs set it (run.py, `--cc hp`): the paper's values but
    /// MI_THRESH 0, so every update takes the multiplicative branch,
    /// W = W^c / (U / eta) + W_AI, growing as fast as it shrinks.
    pub fn ns3(line_rate_bps: f64, base_rtt: Time) -> HpccParams {
        HpccParams {
            max_stage: 0,
            ..HpccParams::paper(line_rate_bps, base_rtt)
        }
    }

    /// Checks every parameter can run.
    pub fn validate(&self) -> Result<(), CcError> {
        check_rate_range(self.line_rate_bps, self.min_rate_bps)?;
        if self.base_rtt.is_zero() {
            return Err(CcError::Zero { name: "base RTT" });
        }
        check_fraction("eta", self.eta)?;
        if self.eta == 0.0 {
            return Err(CcError::Zero { name: "eta" });
        }
        if !(self.w_ai_bytes.is_finite() && self.w_ai_bytes >= 0.0) {
            return Err(CcError::Invalid(format!(
                "W_AI must be a non-negative number of bytes, got {}",
                self.w_ai_bytes
            )));
        }
        Ok(())
    }
}

/// HPCC's sender state for one QP.
#[derive(Debug, Clone)]
pub struct Hpcc {
    p: HpccParams,
    /// T in seconds, and the window bounds in bytes.
    t: f64,
    w_min: f64,
    w_max: f64,
    /// W^c, the reference window, and W, the window in force, bytes.
    wc: f64,
    w: f64,
    /// U, the smoothed normalised in-flight bytes of the most loaded hop.
    u: f64,
    inc_stage: u32,
    last_update_seq: u64,
    /// The telemetry of the previous ACK; `hops == 0` before the first.
    prev: [IntHop; MAX_INT_HOPS],
    hops: usize,
    reference_updates: u64,
}

impl Hpcc {
    /// A QP starting at line rate with W = W^c = line rate x T.
    pub fn new(params: HpccParams) -> Result<Hpcc, CcError> {
        params.validate()?;
        let t = params.base_rtt.as_secs_f64();
        let w_max = params.line_rate_bps * t / 8.0;
        Ok(Hpcc {
            p: params,
            t,
            w_min: params.min_rate_bps * t / 8.0,
            w_max,
            wc: w_max,
            w: w_max,
            u: 1.0,
            inc_stage: 0,
            last_update_seq: 0,
            prev: [IntHop::default(); MAX_INT_HOPS],
            hops: 0,
            reference_updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &HpccParams {
        &self.p
    }
    /// U, the smoothed utilisation estimate.
    pub fn utilisation(&self) -> f64 {
        self.u
    }
    /// W^c, bytes.
    pub fn reference_window(&self) -> f64 {
        self.wc
    }
    /// W, bytes (unrounded).
    pub fn window(&self) -> f64 {
        self.w
    }
    /// incStage.
    pub fn inc_stage(&self) -> u32 {
        self.inc_stage
    }
    /// Times W^c was updated (once per RTT).
    pub fn reference_updates(&self) -> u64 {
        self.reference_updates
    }

    /// MeasureInflight: updates U from this ACK's telemetry; false if no hop advanced in time.
    fn measure_inflight(&mut self, int: &[IntHop]) -> bool {
        let mut best: Option<(f64, f64)> = None;
        for (now, before) in int.iter().zip(&self.prev) {
            let dt = (now.ts - before.ts).as_secs_f64();
            if dt <= 0.0 || now.link_bps <= 0.0 {
                continue;
            }
            let tx_rate = now.tx_bytes.saturating_sub(before.tx_bytes) as f64 * 8.0 / dt;
            let qlen = now.qlen_bytes.min(before.qlen_bytes) as f64 * 8.0;
            let u = qlen / (now.link_bps * self.t) + tx_rate / now.link_bps;
            if best.is_none_or(|(b, _)| u > b) {
                best = Some((u, dt));
            }
        }
        let Some((u, dt)) = best else {
            return false;
        };
        let tau = dt.min(self.t);
        self.u = (1.0 - tau / self.t) * self.u + tau / self.t * u;
        true
    }

    /// ComputeWind: the new W from U, and W^c too if `update`.
    fn compute_window(&mut self, update: bool) {
        let (w, stage) = if self.u >= self.p.eta || self.inc_stage >= self.p.max_stage {
            (self.wc / (self.u / self.p.eta) + self.p.w_ai_bytes, 0)
        } else {
            (self.wc + self.p.w_ai_bytes, self.inc_stage + 1)
        };
        self.w = w.clamp(self.w_min, self.w_max);
        if update {
            self.wc = self.w;
            self.inc_stage = stage;
            self.reference_updates += 1;
        }
    }

    fn remember(&mut self, int: &[IntHop]) {
        self.hops = int.len().min(MAX_INT_HOPS);
        self.prev[..self.hops].copy_from_slice(&int[..self.hops]);
    }
}

impl CongestionControl for Hpcc {
    fn rate_bps(&self) -> f64 {
        self.w * 8.0 / self.t
    }

    fn window_bytes(&self) -> Option<u64> {
        Some(self.w.round() as u64)
    }

    fn on_cnp(&mut self, _now: Time) {}

    fn on_ack(&mut self, _now: Time, ack: &AckFeedback<'_>) {
        let int = &ack.int[..ack.int.len().min(MAX_INT_HOPS)];
        if int.is_empty() {
            return;
        }
        if self.hops != int.len() {
            // The first ACK, or the path changed: nothing to compare with yet.
            self.remember(int);
            self.last_update_seq = ack.sent_bytes;
            return;
        }
        let update = ack.acked_bytes > self.last_update_seq;
        if self.measure_inflight(int) {
            self.compute_window(update);
        }
        if update {
            self.last_update_seq = ack.sent_bytes;
        }
        self.remember(int);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: f64 = 100e9;

    fn us(n: u64) -> Time {
        Time::from_micros(n)
    }

    /// T = 10 us: W_init = 100 Gb/s x 10 us = 125 000 bytes; W_AI = 40 Mb/s x 10 us = 50 B.
    fn hpcc() -> Hpcc {
        let p = HpccParams::paper(B, us(10));
        assert!((p.w_ai_bytes - 50.0).abs() < 1e-9);
        Hpcc::new(p).unwrap()
    }

    fn hop(ts_us: u64, tx_bytes: u64, qlen_bytes: u64) -> IntHop {
        IntHop {
            ts: us(ts_us),
            tx_bytes,
            qlen_bytes,
            link_bps: B,
        }
    }

    fn ack(cc: &mut Hpcc, acked: u64, sent: u64, int: &[IntHop]) {
        let fb = AckFeedback {
            acked_bytes: acked,
            sent_bytes: sent,
            rtt: None,
            int,
        };
        cc.on_ack(us(0), &fb);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn starts_at_line_rate_with_a_bdp_window() {
        let cc = hpcc();
        assert!(close(cc.rate_bps(), B));
        assert_eq!(cc.window_bytes(), Some(125_000));
        assert_eq!(cc.utilisation(), 1.0);
        let mut bad = HpccParams::paper(B, us(10));
        bad.base_rtt = Time::ZERO;
        assert!(Hpcc::new(bad).is_err());
        bad = HpccParams::paper(B, us(10));
        bad.eta = 1.5;
        assert!(Hpcc::new(bad).is_err());
    }

    /// Algorithm 1 step by step, each value worked out from the paper's formulas.
    #[test]
    fn window_follows_the_papers_formulas() {
        let (t, eta, w_ai) = (10e-6, 0.95, 50.0);
        let mut cc = hpcc();
        // The first ACK only records the telemetry.
        ack(&mut cc, 1_000, 10_000, &[hop(0, 0, 0)]);
        assert_eq!(cc.window_bytes(), Some(125_000));
        assert_eq!(cc.reference_updates(), 0);

        // Past sequence 10 000: a reference update. 25 000 B in 2 us is 100 Gb/s, the
        // previous queue was empty: u = 1, tau = 2 us.
        ack(&mut cc, 11_000, 20_000, &[hop(2, 25_000, 50_000)]);
        let u1 = (1.0 - 2e-6 / t) * 1.0 + 2e-6 / t * 1.0;
        assert!(close(cc.utilisation(), u1));
        let w1 = 125_000.0 / (u1 / eta) + w_ai;
        assert!(close(cc.window(), w1), "{} vs {w1}", cc.window());
        assert!(close(cc.reference_window(), w1));
        assert!(close(cc.rate_bps(), w1 * 8.0 / t));
        assert_eq!(cc.inc_stage(), 0);

        // Not past 20 000: W reacts from the same W^c, which stays. The queue of 50 000 B
        // both times adds 50 000 x 8 / (B T) = 0.4.
        ack(&mut cc, 12_000, 21_000, &[hop(4, 50_000, 50_000)]);
        let u = 50_000.0 * 8.0 / (B * t) + 1.0;
        let u2 = (1.0 - 0.2) * u1 + 0.2 * u;
        assert!(close(cc.utilisation(), u2));
        assert!(close(cc.window(), w1 / (u2 / eta) + w_ai));
        assert!(
            close(cc.reference_window(), w1),
            "W^c waits for the next RTT"
        );
    }

    #[test]
    fn below_eta_it_adds_w_ai_then_multiplies_after_max_stage() {
        // Half the line rate for a whole T each time: u = 0.5 and tau = T, so U = 0.5 at once.
        let mut cc = hpcc();
        cc.wc = 100_000.0;
        cc.w = 100_000.0;
        ack(&mut cc, 0, 0, &[hop(0, 0, 0)]);
        let mut tx = 0;
        let mut wc = 100_000.0;
        for i in 1..=5u64 {
            tx += 62_500;
            ack(&mut cc, i, i, &[hop(10 * i, tx, 0)]);
            assert!(close(cc.utilisation(), 0.5));
            wc += 50.0;
            assert!(close(cc.reference_window(), wc), "step {i}: additive");
            assert_eq!(cc.inc_stage(), i as u32);
        }
        // incStage reached maxStage: multiplicative, W^c / (U / eta) + W_AI, stage reset.
        tx += 62_500;
        ack(&mut cc, 6, 6, &[hop(60, tx, 0)]);
        let expected = (wc / (0.5 / 0.95) + 50.0).min(125_000.0);
        assert!(close(cc.reference_window(), expected));
        assert_eq!(cc.inc_stage(), 0);
    }

    #[test]
    fn the_most_utilised_hop_decides() {
        let mut cc = hpcc();
        let idle = IntHop {
            link_bps: 400e9,
            ..hop(0, 0, 0)
        };
        ack(&mut cc, 0, 0, &[idle, hop(0, 0, 100_000)]);
        // Hop 0 at 400 Gb/s carries 100 Gb/s: u = 0.25; hop 1 full with a standing queue.
        let hop0 = IntHop {
            link_bps: 400e9,
            ..hop(10, 125_000, 0)
        };
        ack(&mut cc, 1, 1, &[hop0, hop(10, 125_000, 100_000)]);
        let u1 = 100_000.0 * 8.0 / (B * 10e-6) + 1.0;
        assert!(close(cc.utilisation(), u1), "{}", cc.utilisation());
    }

    #[test]
    fn stays_within_min_rate_and_line_rate() {
        let mut cc = hpcc();
        ack(&mut cc, 0, 0, &[hop(0, 0, 100_000_000)]);
        ack(&mut cc, 1, 1, &[hop(10, 125_000, 100_000_000)]);
        assert!(cc.rate_bps() >= 1e9 - 1.0);
        assert!(close(cc.rate_bps(), 1e9), "{}", cc.rate_bps());
        let mut cc = hpcc();
        ack(&mut cc, 0, 0, &[hop(0, 0, 0)]);
        ack(&mut cc, 1, 1, &[hop(10, 0, 0)]);
        assert!(
            close(cc.rate_bps(), B),
            "an idle path cannot push past line rate"
        );
    }

    #[test]
    fn acks_without_telemetry_or_time_change_nothing() {
        let mut cc = hpcc();
        ack(&mut cc, 0, 0, &[]);
        ack(&mut cc, 1, 1, &[hop(0, 0, 0)]);
        ack(&mut cc, 2, 2, &[hop(0, 0, 0)]);
        assert_eq!(cc.utilisation(), 1.0);
        assert_eq!(cc.reference_updates(), 0);
    }
}
