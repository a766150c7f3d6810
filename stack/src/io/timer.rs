//! The event loop's timer: a timerfd(2) the loop sleeps on beside the device, armed only when
//! a deadline comes earlier than the one it holds.
//!
//! # Why not epoll_wait's timeout
//! A timeout passed to every `epoll_wait` arms a kernel timer on entry and cancels it on a
//! wake-up. When it is the CPU's earliest timer (a retransmission deadline a millisecond
//! away, sooner than the next tick) both reprogram the local APIC timer, which in a virtual
//! machine is a trap to the hypervisor each time. A ping-pong sleeps once per message, so it
//! paid that twice per message: measured with raw AF_XDP frames over veth (stack/examples/
//! veth_rate.rs `ping`), a 900 us poll timeout took the round trip from 32 to 51 usec (median
//! of 11 runs), a 50 ms one left it at 26. The engine's deadlines move later with every
//! packet sent (the retransmission timer restarts), so a timer kept armed at the earliest of
//! them is set once per expiry instead of once per sleep; an expiry that finds nothing due
//! costs one loop turn.
//!
//! Deadlines keep `epoll_wait`'s precision: the timeout rounded up to a whole millisecond.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

#[allow(unsafe_code)]
mod sys;

/// A monotonic timer with a descriptor that becomes readable when it expires.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
    /// When the armed timer expires, if it is armed and has not been seen to expire.
    armed: Option<Instant>,
}

impl Timer {
    /// A disarmed timer (non-blocking, close-on-exec).
    pub fn new() -> std::io::Result<Timer> {
        Ok(Timer {
            fd: sys::create()?,
            armed: None,
        })
    }

    /// Makes the timer expire at most `timeout` from now (rounded up to a whole
    /// millisecond): re-armed only if it is not armed to expire by then already.
    /// A zero timeout is the caller's to handle (it disarms a timerfd).
    pub fn arm_within(&mut self, timeout: Duration) -> std::io::Result<()> {
        let now = Instant::now();
        let timeout = round_up_to_millis(timeout).max(Duration::from_millis(1));
        let due = now + timeout;
        if self.armed.is_some_and(|armed| armed > now && armed <= due) {
            return Ok(());
        }
        sys::set(&self.fd, timeout)?;
        self.armed = Some(due);
        Ok(())
    }

    /// After the loop saw the descriptor readable: reads the expiry count (so that the
    /// descriptor is quiet again) and forgets the expired deadline.
    pub fn expired(&mut self) {
        // Nothing to do on failure (EAGAIN: an expiry already read): the next arm sets it.
        let _ = sys::read_expirations(&self.fd);
        if self.armed.is_some_and(|armed| armed <= Instant::now()) {
            self.armed = None;
        }
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// `epoll_wait`'s rounding of a timeout: up to the next whole millisecond.
fn round_up_to_millis(d: Duration) -> Duration {
    let ms = d.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(round_up_to_millis(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            round_up_to_millis(Duration::from_nanos(1)),
            Duration::from_millis(1)
        );
        assert_eq!(
            round_up_to_millis(Duration::from_micros(1500)),
            Duration::from_millis(2)
        );
        assert_eq!(
            round_up_to_millis(Duration::from_millis(7)),
            Duration::from_millis(7)
        );
    }

    /// Armed once for a run of later deadlines, re-armed for an earlier one, readable when
    /// it expires, and armed again after.
    #[test]
    fn rearms_only_for_an_earlier_deadline() {
        let mut t = Timer::new().unwrap();
        t.arm_within(Duration::from_millis(50)).unwrap();
        let first = t.armed.unwrap();
        t.arm_within(Duration::from_millis(80)).unwrap();
        assert_eq!(t.armed, Some(first), "a later deadline keeps the armed one");
        t.arm_within(Duration::from_millis(2)).unwrap();
        let early = t.armed.unwrap();
        assert!(early < first, "an earlier deadline re-arms");
        let mut fds = [libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        assert!(!sys::poll_readable(&mut fds, 0));
        assert!(sys::poll_readable(&mut fds, 1000), "the timer expires");
        t.expired();
        assert_eq!(t.armed, None);
        assert!(
            !sys::poll_readable(&mut fds, 0),
            "reading the count quiets it"
        );
        t.arm_within(Duration::from_millis(1)).unwrap();
        assert!(t.armed.is_some());
        assert!(sys::poll_readable(&mut fds, 1000));
    }
}
