//! Congestion control behind a small sans-IO trait: DCQCN (Zhu et al., "Congestion Control
//! for Large-Scale RDMA Deployments", SIGCOMM 2015), HPCC (Li et al., "HPCC: High Precision
//! Congestion Control", SIGCOMM 2019) and TIMELY (Mittal et al., "TIMELY: RTT-based
//! Congestion Control for the Datacenter", SIGCOMM 2015), and the pieces around them.
//!
//! - [`ReactionPoint`]: DCQCN's sender rate machine (alpha, target and current rate, fast
//!   recovery, additive and hyper increase), driven by CNPs, bytes sent and timers.
//! - [`Hpcc`]: a window from the in-band telemetry ([`IntHop`]) each ACK echoes.
//! - [`Timely`]: a rate from the RTT and its gradient.
//! - [`NotificationPoint`]: the receiver's decision to answer CE-marked packets with a CNP.
//! - [`Pacer`]: the next-send-time limiter the requester obeys at the current rate.
//! - [`Marker`]: the switch's RED-like CE-marking decision from its queue length.
//! - [`fluid`]: the fixed point of the CoNEXT 2016 fluid model, to check simulations against.
//!
//! Nothing here reads a clock: every call takes `now` as a [`Time`].

mod dcqcn;
pub mod fluid;
mod hpcc;
mod marker;
mod np;
mod pacer;
mod time;
mod timely;

pub use dcqcn::{DcqcnParams, Preset, ReactionPoint, Stage};
pub use hpcc::{Hpcc, HpccParams, IntHop, MAX_INT_HOPS};
pub use marker::Marker;
pub use np::{CNP_INTERVAL, NotificationPoint};
pub use pacer::Pacer;
pub use time::{Time, transmission_time};
pub use timely::{Timely, TimelyParams};

use thiserror::Error;

/// A congestion controller as the requester sees it: events in, a sending rate (and for
/// window-based schemes a window) out.
///
/// DCQCN reacts to CNPs, HPCC and TIMELY to ACKs; each ignores the events it has no use for.
pub trait CongestionControl {
    /// The rate the requester must pace its packets at, in bits per second.
    fn rate_bps(&self) -> f64;
    /// The most bytes the requester may have sent and not yet had acknowledged; `None` for a
    /// purely rate-based scheme.
    fn window_bytes(&self) -> Option<u64> {
        None
    }
    /// A CNP for this QP arrived.
    fn on_cnp(&mut self, now: Time);
    /// An ACK for this QP arrived.
    fn on_ack(&mut self, _now: Time, _ack: &AckFeedback<'_>) {}
    /// The requester put `bytes` on the wire for this QP (nothing by default: only a
    /// scheme that counts bytes, as DCQCN's byte counter, needs it).
    fn on_bytes_sent(&mut self, _now: Time, _bytes: u64) {}
    /// Runs every timer due at or before `now`; calling it early or twice does nothing.
    fn on_timer(&mut self, _now: Time) {}
    /// The earliest deadline [`CongestionControl::on_timer`] must be called at, if any (none
    /// by default: an ACK-clocked scheme has no timer).
    fn next_timer(&self) -> Option<Time> {
        None
    }
}

/// What one ACK tells the sender's congestion control.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckFeedback<'a> {
    /// Bytes of the QP's stream acknowledged so far, this ACK included.
    pub acked_bytes: u64,
    /// Bytes the requester had sent when the ACK arrived (its next sequence, in bytes).
    pub sent_bytes: u64,
    /// The round trip of the packet this ACK answers (its send time echoed back), if known.
    pub rtt: Option<Time>,
    /// The in-band telemetry that packet gathered, one record per switch egress in path
    /// order; empty when the switches add none.
    pub int: &'a [IntHop],
}

/// No congestion control: always the line rate, as rdma_rxe behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoControl {
    line_rate_bps: f64,
}

impl NoControl {
    /// Always `line_rate_bps`, which must be a positive finite rate.
    pub fn new(line_rate_bps: f64) -> Result<NoControl, CcError> {
        check_rate("line rate", line_rate_bps)?;
        Ok(NoControl { line_rate_bps })
    }
}

impl CongestionControl for NoControl {
    fn rate_bps(&self) -> f64 {
        self.line_rate_bps
    }
    fn on_cnp(&mut self, _now: Time) {}
}

/// A parameter no controller, marker or simulation can run with.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CcError {
    /// A rate that is not positive and finite.
    #[error("{name} must be a positive finite rate in bit/s, got {value}")]
    Rate {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A fraction outside [0, 1].
    #[error("{name} must lie in [0, 1], got {value}")]
    Fraction {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A period or count that must not be zero.
    #[error("{name} must be positive")]
    Zero {
        /// The parameter.
        name: &'static str,
    },
    /// Parameters that contradict each other.
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn check_rate(name: &'static str, value: f64) -> Result<(), CcError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(CcError::Rate { name, value })
    }
}

/// Checks a line rate and a floor below it, both positive and finite.
pub(crate) fn check_rate_range(line_rate_bps: f64, min_rate_bps: f64) -> Result<(), CcError> {
    check_rate("line rate", line_rate_bps)?;
    check_rate("min rate", min_rate_bps)?;
    if min_rate_bps > line_rate_bps {
        return Err(CcError::Invalid(format!(
            "min rate {min_rate_bps} bit/s exceeds line rate {line_rate_bps} bit/s"
        )));
    }
    Ok(())
}

pub(crate) fn check_fraction(name: &'static str, value: f64) -> Result<(), CcError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(CcError::Fraction { name, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_control_stays_at_line_rate() {
        let mut cc = NoControl::new(40e9).unwrap();
        cc.on_cnp(Time::from_micros(1));
        cc.on_bytes_sent(Time::from_micros(2), 1 << 30);
        cc.on_timer(Time::from_millis(5));
        assert_eq!(cc.rate_bps(), 40e9);
        assert_eq!(cc.next_timer(), None);
        assert!(NoControl::new(0.0).is_err());
        assert!(NoControl::new(f64::NAN).is_err());
    }
}
