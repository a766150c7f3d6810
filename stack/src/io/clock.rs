//! Where the io layer gets `now` for time-stamping captures and timing fault injection.
//!
//! Real devices use [`SystemClock`]; in-process links and tests use [`VirtualClock`], which only
//! moves when told, so that runs are reproducible.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::time::{Duration, Instant};

/// Where devices and middleware read the time: the system clock over real devices, a
/// [`VirtualClock`] in tests.
pub trait Clock {
    /// The time since the Unix epoch (or since an origin the clock documents); never goes
    /// backwards.
    fn now(&self) -> Instant;
}

/// Wall-clock time read once, advanced by the monotonic clock: capture timestamps are real
/// dates while a step of the system clock cannot make time go backwards.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: std::time::Instant,
    origin_since_epoch: Instant,
}

impl SystemClock {
    /// The clock, anchored to the wall clock now.
    pub fn new() -> SystemClock {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        SystemClock {
            origin: std::time::Instant::now(),
            origin_since_epoch: Instant::from_nanos(u64::try_from(since_epoch).unwrap_or(u64::MAX)),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        self.origin_since_epoch + self.origin.elapsed()
    }
}

/// Time that moves only when told; clones share it, so one test can drive every device.
#[derive(Clone, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    /// A clock standing at `start`.
    pub fn new(start: Instant) -> VirtualClock {
        VirtualClock(Arc::new(AtomicU64::new(start.as_nanos())))
    }

    /// Moves time forward to `t`; an earlier `t` is ignored, as time never goes backwards.
    pub fn advance_to(&self, t: Instant) {
        self.0.fetch_max(t.as_nanos(), Ordering::Relaxed);
    }

    /// Moves time forward by `dt`.
    pub fn advance_by(&self, dt: Duration) {
        self.0.fetch_add(crate::time::nanos(dt), Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VirtualClock({} ns)", self.now().as_nanos())
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
}
