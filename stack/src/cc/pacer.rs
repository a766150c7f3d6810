//! The requester's rate limiter: a next-send-time pacer. Each packet started at `t` forbids the
//! next before `t + size / rate`, so a flow never exceeds its rate over any two packets, and an
//! idle flow earns no burst credit (DCQCN shapes a QP like the NIC's per-QP rate limiter).

use super::{Time, transmission_time};

/// A next-send-time rate limiter for one flow (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Pacer {
    rate_bps: f64,
    last_start: Option<Time>,
    last_bytes: u64,
    next_send: Time,
}

impl Pacer {
    /// A pacer at `rate_bps`, free to send at once.
    pub fn new(rate_bps: f64) -> Pacer {
        Pacer {
            rate_bps,
            last_start: None,
            last_bytes: 0,
            next_send: Time::ZERO,
        }
    }

    /// The current rate, bit/s.
    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// Applies a new rate to the gap after the last packet too: a CNP slows a flow at once
    /// rather than after the packet already scheduled at the old rate.
    pub fn set_rate(&mut self, rate_bps: f64) {
        self.rate_bps = rate_bps;
        if let Some(start) = self.last_start {
            self.next_send = start + transmission_time(self.last_bytes, rate_bps);
        }
    }

    /// The earliest time the next packet may start.
    pub fn next_send_time(&self) -> Time {
        self.next_send
    }

    /// Whether a packet may start at `now`.
    pub fn can_send(&self, now: Time) -> bool {
        now >= self.next_send
    }

    /// Records a packet of `bytes` started at `now`.
    pub fn on_send(&mut self, now: Time, bytes: u64) {
        self.last_start = Some(now);
        self.last_bytes = bytes;
        self.next_send = now + transmission_time(bytes, self.rate_bps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_packets_at_the_rate() {
        let mut p = Pacer::new(10e9);
        assert!(p.can_send(Time::ZERO));
        p.on_send(Time::ZERO, 1250);
        // 1250 B at 10 Gb/s = 1 us.
        assert_eq!(p.next_send_time(), Time::from_micros(1));
        assert!(!p.can_send(Time::from_nanos(999)));
        assert!(p.can_send(Time::from_micros(1)));
    }

    #[test]
    fn a_rate_change_reschedules_the_pending_gap() {
        let mut p = Pacer::new(10e9);
        p.on_send(Time::ZERO, 1250);
        p.set_rate(5e9);
        assert_eq!(p.next_send_time(), Time::from_micros(2));
        p.set_rate(20e9);
        assert_eq!(p.next_send_time(), Time::from_nanos(500));
    }

    #[test]
    fn no_burst_after_idle_and_zero_rate_blocks() {
        let mut p = Pacer::new(10e9);
        p.on_send(Time::from_millis(1), 1250);
        assert_eq!(
            p.next_send_time(),
            Time::from_millis(1) + Time::from_micros(1)
        );
        p.set_rate(0.0);
        assert_eq!(p.next_send_time(), Time::MAX);
        assert!(!p.can_send(Time::MAX - Time::from_picos(1)));
    }
}
