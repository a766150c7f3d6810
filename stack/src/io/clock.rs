//! Where the io layer gets `now` for time-stamping captures and timing fault injection.
//!
//! Real devices use [`SystemClock`]; in-process links and tests use [`VirtualClock`], which only
//! moves when told, so that runs are reproducible.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::fault::Nanos;

pub trait Clock {
    /// Nanoseconds since the Unix epoch (or since an origin the clock documents); never goes
    /// backwards.
    fn now(&self) -> Nanos;
}

/// Wall-clock time read once, advanced by the monotonic clock: capture timestamps are real
/// dates while a step of the system clock cannot make time go backwards.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
    origin_since_epoch: Nanos,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        SystemClock {
            origin: Instant::now(),
            origin_since_epoch: u64::try_from(since_epoch).unwrap_or(u64::MAX),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Nanos {
        let elapsed = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.origin_since_epoch.saturating_add(elapsed)
    }
}

/// Time that moves only when told; clones share it, so one test can drive every device.
#[derive(Clone, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    pub fn new(start: Nanos) -> VirtualClock {
        VirtualClock(Arc::new(AtomicU64::new(start)))
    }

    /// Moves time forward to `t`; an earlier `t` is ignored, as time never goes backwards.
    pub fn advance_to(&self, t: Nanos) {
        self.0.fetch_max(t, Ordering::Relaxed);
    }

    pub fn advance_by(&self, dt: Nanos) {
        self.0.fetch_add(dt, Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Nanos {
        self.0.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VirtualClock({} ns)", self.now())
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Nanos {
        (**self).now()
    }
}
