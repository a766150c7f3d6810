//! Virtual time for the sans-IO congestion control and its simulators: picoseconds, used
//! inside `cc` and by the simulators built on it (`sim`); the rest of the stack counts
//! nanoseconds ([`crate::time::Instant`]) and meets this type only through the two `From`
//! conversions below.
//!
//! Picoseconds, because a 1 KB packet lasts 87 ns at 100 Gb/s: whole nanoseconds would round
//! every serialisation time by up to 0.6 %, and a simulated link would drift from its rate.
//! A `u64` of picoseconds spans 213 days from the origin the caller chooses; arithmetic
//! saturates instead of wrapping, so no input can panic.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

const PS_PER_NS: u64 = 1_000;
const PS_PER_US: u64 = 1_000_000;
const PS_PER_MS: u64 = 1_000_000_000;
const PS_PER_S: f64 = 1e12;

/// A point in time, or a span of time, in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The origin, or no time at all.
    pub const ZERO: Time = Time(0);
    /// The latest time there is; arithmetic saturates here.
    pub const MAX: Time = Time(u64::MAX);

    /// `ps` picoseconds.
    pub const fn from_picos(ps: u64) -> Time {
        Time(ps)
    }
    /// `ns` nanoseconds (saturating).
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns.saturating_mul(PS_PER_NS))
    }
    /// `us` microseconds (saturating).
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(PS_PER_US))
    }
    /// `ms` milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(PS_PER_MS))
    }
    /// Rounds to the nearest picosecond; negative and NaN give zero, too large gives `MAX`.
    pub fn from_secs_f64(s: f64) -> Time {
        // `as` saturates and maps NaN to 0; adding 0.5 rounds without a libm call, which
        // matters in the pacer's per-packet path.
        Time((s * PS_PER_S + 0.5) as u64)
    }
    /// Picoseconds.
    pub const fn as_picos(self) -> u64 {
        self.0
    }
    /// Whole nanoseconds, rounded down.
    pub const fn as_nanos(self) -> u64 {
        self.0 / PS_PER_NS
    }
    /// Whole nanoseconds, rounded up: a deadline handed to a nanosecond clock must not come
    /// before it is due, or its owner would wake, find nothing to do, and ask again.
    pub const fn as_nanos_ceil(self) -> u64 {
        self.0.div_ceil(PS_PER_NS)
    }
    /// Seconds, as a float for rates and reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S
    }
    /// Microseconds, as a float for reports.
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }
    /// Milliseconds, as a float for reports.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / PS_PER_MS as f64
    }
    /// `self - other`, or zero if `other` is later.
    pub const fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
    /// Whether this is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, other: Time) -> Time {
        Time(self.0.saturating_add(other.0))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, other: Time) {
        *self = *self + other;
    }
}

/// Saturates at zero: a span cannot be negative.
impl Sub for Time {
    type Output = Time;
    fn sub(self, other: Time) -> Time {
        self.saturating_sub(other)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} us", self.as_micros_f64())
    }
}

/// The stack's nanosecond time base ([`crate::time`]), as the endpoint passes `now` to
/// congestion control. This pair of conversions is the only place picoseconds meet it.
impl From<crate::time::Instant> for Time {
    fn from(t: crate::time::Instant) -> Time {
        Time::from_nanos(t.as_nanos())
    }
}

/// A congestion-control deadline on the stack's clock: rounded up (see `as_nanos_ceil`).
impl From<Time> for crate::time::Instant {
    fn from(t: Time) -> crate::time::Instant {
        crate::time::Instant::from_nanos(t.as_nanos_ceil())
    }
}

/// How long `bytes` take on a wire running at `rate_bps`; `MAX` if the rate is not positive.
pub fn transmission_time(bytes: u64, rate_bps: f64) -> Time {
    if rate_bps > 0.0 {
        Time::from_secs_f64(bytes as f64 * 8.0 / rate_bps)
    } else {
        Time::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_saturation() {
        assert_eq!(Time::from_micros(55).as_nanos(), 55_000);
        assert_eq!(Time::from_millis(1), Time::from_micros(1000));
        assert_eq!(Time::MAX + Time::from_nanos(1), Time::MAX);
        assert_eq!(Time::ZERO - Time::from_nanos(1), Time::ZERO);
        assert_eq!(Time::from_nanos(u64::MAX), Time::MAX);
        assert_eq!(Time::from_secs_f64(f64::NAN), Time::ZERO);
        assert_eq!(Time::from_secs_f64(-1.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(1e300), Time::MAX);
    }

    #[test]
    fn converts_to_and_from_the_engine_clock() {
        let engine = crate::time::Instant::from_nanos(1_234);
        assert_eq!(Time::from(engine), Time::from_nanos(1_234));
        let due = Time::from_picos(1_234_001);
        assert_eq!(
            crate::time::Instant::from(due).as_nanos(),
            1_235,
            "never early"
        );
        assert_eq!(Time::MAX.as_nanos_ceil(), u64::MAX / 1_000 + 1);
    }

    #[test]
    fn serialisation_is_exact_at_common_rates() {
        // 1106 wire bytes at 100 Gb/s: 88.48 ns, which whole nanoseconds could not hold.
        assert_eq!(transmission_time(1106, 100e9), Time::from_picos(88_480));
        assert_eq!(transmission_time(1106, 40e9), Time::from_picos(221_200));
        assert_eq!(transmission_time(1, 0.0), Time::MAX);
        assert_eq!(transmission_time(1, f64::NAN), Time::MAX);
    }
}
