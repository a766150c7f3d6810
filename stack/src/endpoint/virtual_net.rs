//! Two hosts over an in-memory link in virtual time: the library's one two-host harness.
//! Time jumps from one event to the next (a frame falling due on the link, a host timer), so
//! a run is fast and, with a seeded link, reproducible. The endpoint's tests step it as it
//! is, every frame moving at once; `scenario::net::Network`, on which `roce demo` and
//! `roce gen` run, is a `VirtualNet` whose NICs send at a line rate and honour PAUSE and PFC,
//! with a capture and a tap on the wire, and steps it its own way.

use core::time::Duration;

use super::host::{Host, HostConfig};
use crate::fault::FaultError;
use crate::io::memory::{self, MemoryDevice, MemoryLinkConfig};
use crate::io::{Clock, Device, DeviceError, VirtualClock};
use crate::time::Instant;

/// Hosts `a` and `b` joined by a [`memory::pair`] link.
#[derive(Debug)]
pub struct VirtualNet {
    /// The virtual time both hosts and the link share.
    pub clock: VirtualClock,
    /// Host A.
    pub a: Host,
    /// Host B.
    pub b: Host,
    pub(crate) dev_a: MemoryDevice,
    pub(crate) dev_b: MemoryDevice,
    /// Room for one frame a host sends.
    pub(crate) buf: Vec<u8>,
}

impl VirtualNet {
    /// Builds the link and two hosts; each host's MAC is taken from its end of the link
    /// (whatever the configs say).
    pub fn new(
        link: MemoryLinkConfig,
        mut a: HostConfig,
        mut b: HostConfig,
    ) -> Result<VirtualNet, FaultError> {
        let clock = VirtualClock::new(Instant::ZERO);
        let (dev_a, dev_b) = memory::pair(link, clock.clone())?;
        a.mac = dev_a.capabilities().mac.unwrap_or(memory::MAC_A);
        b.mac = dev_b.capabilities().mac.unwrap_or(memory::MAC_B);
        Ok(VirtualNet {
            clock,
            a: Host::new(a),
            b: Host::new(b),
            dev_a,
            dev_b,
            buf: vec![0; Host::max_frame_len()],
        })
    }

    /// The virtual time reached.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Both hosts at once (`a`, `b`), for work that touches both.
    pub fn hosts_mut(&mut self) -> (&mut Host, &mut Host) {
        (&mut self.a, &mut self.b)
    }

    /// The two devices, for their link statistics.
    pub fn devices(&self) -> (&MemoryDevice, &MemoryDevice) {
        (&self.dev_a, &self.dev_b)
    }

    /// Moves every frame that can move now: received frames into the hosts, due timers,
    /// then each host's output onto the link. Returns true if anything moved.
    pub fn step(&mut self) -> Result<bool, DeviceError> {
        let now = self.now();
        let mut moved = false;
        for (host, dev) in [
            (&mut self.a, &mut self.dev_a),
            (&mut self.b, &mut self.dev_b),
        ] {
            while dev.receive(&mut |f| host.handle_frame(now, f))? {
                moved = true;
            }
            fire_due_timer(host, now);
            while let Some(n) = host.poll_transmit(now, &mut self.buf) {
                dev.transmit(&self.buf[..n])?;
                moved = true;
            }
        }
        Ok(moved)
    }

    /// Fires each host's timer that is due at the time reached, A's first.
    pub fn fire_due_timers(&mut self) {
        let now = self.now();
        fire_due_timer(&mut self.a, now);
        fire_due_timer(&mut self.b, now);
    }

    /// The next time something is due, on the link or in a host.
    pub fn next_event(&self) -> Option<Instant> {
        let now = self.now();
        [
            self.a.poll_timeout(now),
            self.b.poll_timeout(now),
            self.dev_a.next_wakeup(),
            self.dev_b.next_wakeup(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs until `done` holds (returns true), nothing is left to happen (false), or
    /// `limit` of virtual time passes (false).
    pub fn run_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut VirtualNet) -> bool,
    ) -> Result<bool, DeviceError> {
        let end = self.now() + limit;
        loop {
            while self.step()? {}
            if done(self) {
                return Ok(true);
            }
            match self.next_event() {
                Some(t) if t <= end => {
                    self.clock
                        .advance_to(t.max(self.clock.now() + Duration::from_nanos(1)));
                }
                _ => return Ok(false),
            }
        }
    }
}

/// Fires `host`'s timer if it is due at `now`.
fn fire_due_timer(host: &mut Host, now: Instant) {
    if host.poll_timeout(now).is_some_and(|t| t <= now) {
        host.handle_timeout(now);
    }
}
