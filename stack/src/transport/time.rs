//! The engine's notion of time: an instant in nanoseconds from an origin the caller chooses.
//!
//! The engine never reads a clock; every input that depends on time carries a `now`. A test
//! harness passes virtual time, the endpoint a monotonic clock. Arithmetic saturates, so no
//! input can overflow.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// An instant, in nanoseconds since the caller's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }

    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(1_000))
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(nanos(d)))
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}us", self.0 / 1_000, self.0 % 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates() {
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO - Time::from_nanos(5), Duration::ZERO);
        assert_eq!(
            Time::from_micros(3) - Time::from_nanos(500),
            Duration::from_nanos(2_500)
        );
        assert_eq!(Time::from_micros(1).to_string(), "1.000us");
    }
}
