//! The fixed point of DCQCN's fluid model (Zhu, Ghobadi, Misra, Padhye, "ECN or Delay:
//! Lessons Learnt from Analysis of DCQCN and TIMELY", CoNEXT 2016, section 3), used to check
//! what a simulation settles at.
//!
//! For N flows through one bottleneck of capacity C, rates in packets/s, p the marking
//! probability of the queue, tau the NP's CNP interval, tau' the alpha period, T the increase
//! timer, B the byte counter in packets, F the fast-recovery steps:
//!
//! ```text
//! dalpha/dt = g/tau' ((1 - (1-p)^(tau' R_C)) - alpha)
//! dR_T/dt   = -(R_T - R_C)/tau a + R_AI R_C (c_B b + c_T d)
//! dR_C/dt   = -R_C alpha/(2 tau) a + (R_T - R_C)/2 R_C (b + d)
//! dq/dt     = N R_C - C
//! a = 1 - (1-p)^(tau R_C)         probability of a CNP in a CNP interval
//! b = p / ((1-p)^(-B) - 1)        byte-counter events per packet
//! d = p / ((1-p)^(-T R_C) - 1)    timer events per packet
//! c_B = (1-p)^(F B), c_T = (1-p)^(F T R_C)   share of events past fast recovery
//! ```
//!
//! At the fixed point dq/dt = 0 gives R_C = C/N; dalpha/dt = 0 gives alpha = 1 - (1-p)^(tau' R_C);
//! dR_C/dt = 0 gives R_T - R_C = alpha a / (tau (b + d)); substituting into dR_T/dt = 0:
//!
//! ```text
//! alpha(p) a(p)^2 = tau^2 R_AI R_C (b + d)(c_B b + c_T d)
//! ```
//!
//! The left side rises from 0 with p and the right side falls, so the root p* is unique; it
//! is found by bisection. For small p it is close to the paper's closed form
//! p* ~ (R_AI / (tau' R_C^2) (1/B + 1/(T R_C))^2)^(1/3). The queue then sits where RED marks
//! with p*: q* = Kmin + (Kmax - Kmin) p*/Pmax. Hyper increase is not in the model (it needs
//! F B bytes without a mark), nor is the rate-reduce period.

use super::{DcqcnParams, Marker, Time};

/// The fluid model's equilibrium for `flows` identical flows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedPoint {
    /// R_C* = C/N, bit/s.
    pub rate_bps: f64,
    /// R_T*, bit/s.
    pub target_rate_bps: f64,
    /// alpha*, DCQCN's congestion estimate at the fixed point.
    pub alpha: f64,
    /// The marking probability p*.
    pub p: f64,
    /// p* from the closed-form small-p approximation.
    pub p_approx: f64,
    /// The queue length where RED marks with p*; Kmax if p* is beyond Pmax.
    pub queue_bytes: f64,
}

/// The fixed point for `flows` flows of `packet_bytes`-byte packets sharing `link_bps`, with
/// CNPs at most every `cnp_interval`. None if there are no flows or a rate is not positive.
pub fn fixed_point(
    params: &DcqcnParams,
    marker: &Marker,
    link_bps: f64,
    flows: u32,
    packet_bytes: u64,
    cnp_interval: Time,
) -> Option<FixedPoint> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if flows == 0 || packet_bytes == 0 || !positive(link_bps) || !positive(params.rate_ai_bps) {
        return None;
    }
    let bits = packet_bytes as f64 * 8.0;
    let r = link_bps / f64::from(flows) / bits;
    let r_ai = params.rate_ai_bps / bits;
    let tau = cnp_interval.as_secs_f64();
    let tau_a = params.alpha_period.as_secs_f64();
    let t = params.increase_period.as_secs_f64();
    let f = f64::from(params.fast_recovery_steps);
    // B = 0 disables the byte counter: no byte events at all.
    let b_pkts =
        (params.byte_counter > 0).then(|| params.byte_counter as f64 / packet_bytes as f64);

    // Everything as a function of ln(1 - p), so tiny p keeps its precision.
    let terms = |p: f64| {
        let l = (-p).ln_1p();
        let a = -(tau * r * l).exp_m1();
        let alpha = -(tau_a * r * l).exp_m1();
        let (b, c_b) = match b_pkts {
            Some(bp) => (p / (-bp * l).exp_m1(), (f * bp * l).exp()),
            None => (0.0, 0.0),
        };
        let d = p / (-t * r * l).exp_m1();
        let c_t = (f * t * r * l).exp();
        (a, alpha, b, c_b, d, c_t)
    };
    let balance = |p: f64| {
        let (a, alpha, b, c_b, d, c_t) = terms(p);
        alpha * a * a - tau * tau * r_ai * r * (b + d) * (c_b * b + c_t * d)
    };
    let (mut lo, mut hi) = (1e-15_f64, 1.0 - 1e-12);
    if balance(hi) < 0.0 {
        return None;
    }
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if balance(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let p = (lo * hi).sqrt();
    let (a, alpha, b, _, d, _) = terms(p);
    let gap = alpha * a / (tau * (b + d));
    let inv_b = b_pkts.map_or(0.0, |bp| 1.0 / bp);
    let p_approx = (r_ai / (tau_a * r * r) * (inv_b + 1.0 / (t * r)).powi(2)).cbrt();
    Some(FixedPoint {
        rate_bps: r * bits,
        target_rate_bps: (r + gap) * bits,
        alpha,
        p,
        p_approx,
        queue_bytes: marker.queue_for_probability(p),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper_fp(link_gbps: f64, flows: u32) -> FixedPoint {
        let params = DcqcnParams::paper(link_gbps * 1e9);
        let np = Time::from_micros(50);
        fixed_point(&params, &Marker::paper(), link_gbps * 1e9, flows, 1106, np).unwrap()
    }

    #[test]
    fn solves_the_balance_and_matches_the_closed_form_for_small_p() {
        let fp = paper_fp(40.0, 2);
        assert!((fp.rate_bps - 20e9).abs() < 1.0);
        assert!(fp.p > 0.0 && fp.p < 0.01);
        // The closed form drops the (1-p)^(F T R_C) factors: it overestimates p a little.
        assert!(fp.p_approx > fp.p && fp.p_approx < 1.3 * fp.p, "{fp:?}");
        assert!(fp.target_rate_bps > fp.rate_bps);
        // More flows, smaller rates: more marking is needed to hold them, the queue grows.
        let ten = paper_fp(40.0, 10);
        assert!(ten.p > fp.p && ten.queue_bytes > fp.queue_bytes);
        assert!(
            ten.queue_bytes > 5_000.0 && ten.queue_bytes < 200_000.0,
            "{ten:?}"
        );
    }

    #[test]
    fn refuses_degenerate_inputs() {
        let params = DcqcnParams::paper(40e9);
        let np = Time::from_micros(50);
        assert!(fixed_point(&params, &Marker::paper(), 40e9, 0, 1106, np).is_none());
        assert!(fixed_point(&params, &Marker::paper(), 0.0, 2, 1106, np).is_none());
        assert!(fixed_point(&params, &Marker::paper(), 40e9, 2, 0, np).is_none());
    }
}
