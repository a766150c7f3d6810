//! The stack's one time base: an [`Instant`] in nanoseconds from an origin the caller chooses,
//! and [`Duration`] (core's) for spans between instants.
//!
//! Nothing below the endpoint reads a clock: the transport engine, the fault model, the
//! devices and the hosts take every `now` as an [`Instant`]. A test harness passes virtual
//! time, the endpoint a monotonic clock, the io layer's `SystemClock` (feature `io`) nanoseconds
//! since the Unix epoch (so that capture timestamps are dates). Arithmetic saturates, so no
//! input can overflow or panic. Congestion control counts picoseconds inside `cc` and meets
//! this time base through one conversion there ([`crate::cc::Time`]).

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

pub use core::time::Duration;

/// An instant, in nanoseconds since the caller's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);
    /// The latest instant; adding to it stays there.
    pub const MAX: Instant = Instant(u64::MAX);

    /// `ns` nanoseconds after the origin.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    /// `us` microseconds after the origin.
    pub const fn from_micros(us: u64) -> Instant {
        Instant(us.saturating_mul(1_000))
    }

    /// `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Instant {
        Instant(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// Whole nanoseconds of `d`, saturating at `u64::MAX` (584 years).
pub const fn nanos(d: Duration) -> u64 {
    let ns = d.as_nanos();
    if ns > u64::MAX as u128 {
        u64::MAX
    } else {
        ns as u64
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(nanos(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// Saturates at the origin.
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(nanos(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}us", self.0 / 1_000, self.0 % 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Instant::from_nanos(5), Duration::ZERO);
        assert_eq!(
            Instant::from_nanos(5) - Duration::from_secs(1),
            Instant::ZERO
        );
        assert_eq!(
            Instant::from_micros(3) - Instant::from_nanos(500),
            Duration::from_nanos(2_500)
        );
        assert_eq!(Instant::from_millis(2), Instant::from_micros(2_000));
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(Instant::from_micros(1).to_string(), "1.000us");
    }
}
