//! The runtime: a [`Host`] driven over a real [`Device`] by an event loop (mio) with a
//! monotonic clock, and the verbs the commands use (register memory, create and connect QPs,
//! post work requests, wait for completions with a timeout).
//!
//! This is the only place in the stack that reads a clock. One loop turn: take every frame
//! the device has, run the host's due timers, hand the host's output to the device, then
//! sleep in `epoll` until the device's descriptor is readable, the next timer falls due, or
//! the caller's deadline passes. The deadlines are kept on a [`Timer`] the loop polls beside
//! the device, not passed to every `epoll_wait` (see [`crate::io::timer`] for why). With
//! `busy_poll` the loop never sleeps (lowest latency, one core spent), as kernel-bypass
//! stacks do.
//!
//! # Spinning before sleeping
//! By default a loop that has just moved frames keeps polling for [`RuntimeConfig::spin`]
//! (yielding the core between idle turns) before it sleeps, as Linux's NAPI busy polling
//! (`net.core.busy_poll`) does: while traffic flows the next frame is usually a few
//! microseconds away, and a sleep costs both sides far more than that. The sender's core
//! pays for waking the receiver (the wake-up is part of its transmit system call) and every
//! wake of an idle core is slow in a VM, so a sleeping receiver halves the rate a sender
//! reaches (see tests/bench/RESULTS.md). When no frame has moved for `spin`, the loop
//! sleeps in epoll again, so an idle endpoint spends no CPU. A yield that gave the core to
//! another process for half a millisecond or more pauses spinning (as NAPI's busy polling
//! stops when the scheduler wants the CPU): a yielding process waits behind the other for its
//! whole time slice, where a sleeping one is woken ahead of it, and on a contended core
//! spinning took a WRITE stream from 2.8 to 0.7 Gb/s.

use core::time::Duration;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use crate::time;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use thiserror::Error;

mod cm;

use super::connect::{self, QpPath};
use super::host::{Host, HostCmError, HostConfig};
use crate::io::timer::Timer;
use crate::io::{Built, Device, DeviceError};
use crate::transport::{
    Access, CqId, Event, QpInit, RecvWr, SendWr, TransportError, WorkCompletion,
};
use crate::wire::Qpn;

const DEVICE: Token = Token(0);
const TIMER: Token = Token(1);
/// Frames taken from the device per loop turn before the host's output gets a turn, so that
/// a flood of input cannot starve ACKs.
const RX_BATCH: usize = 64;
/// How long to wait before retrying a device that refused a frame (its ring was full).
const TX_RETRY: Duration = Duration::from_micros(50);
/// How often the loop looks whether a [`Runtime::serve_while`] helper has finished.
const WORKER_CHECK: Duration = Duration::from_millis(1);
/// [`RuntimeConfig::spin`]'s default.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);
/// A yield that gave the core away at least this long means another process wants it for
/// whole time slices (a build beside us; a slice is 0.75-3 ms): far longer than a yield that
/// finds nothing else runnable (about a microsecond) or one a kernel worker interrupts. At
/// 20 usec (pausing 20 ms) the pause came on at a load of 3 and took the WRITE stream back to
/// where it was without spinning (5.0 Gb/s against 7.7 spinning regardless); at 500 usec
/// (pausing 2 ms) it kept the gain (8.5) and still kept off the loss beside two busy loops at
/// nice 0 (3.5 Gb/s against 3.6 without spinning, 1.2 spinning regardless).
const SPIN_CONTENDED: Duration = Duration::from_micros(500);
/// How long spinning stays off after a contended yield.
const SPIN_PAUSE: Duration = Duration::from_millis(2);

/// Why a runtime call failed.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The engine refused a verb.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The event loop (mio) failed.
    #[error("event loop: {0}")]
    Poll(#[source] std::io::Error),
    /// A wait ran out.
    #[error("timed out after {after:?} {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was waited for.
        after: Duration,
    },
    /// The peer's address is on none of the host's subnets.
    #[error("{0} is on none of the endpoint's subnets (it reaches only peers on its own link)")]
    NoRoute(IpAddr),
    /// The out-of-band helper thread panicked or hung up.
    #[error("the out-of-band helper thread failed")]
    WorkerFailed,
    /// rdma_cm refused a call.
    #[error("rdma_cm: {0}")]
    Cm(#[from] HostCmError),
}

/// How the event loop runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Never sleep: poll the device in a tight loop, yielding the core between idle turns.
    pub busy_poll: bool,
    /// After a turn that received or sent frames, keep polling this long (yielding the core
    /// between idle turns) before sleeping in epoll; zero sleeps as soon as a turn finds
    /// nothing to do. See the module's documentation.
    pub spin: Duration,
    /// Take IPv4 neighbours from the kernel's table for this interface (AF_XDP, where the
    /// kernel keeps ARP; see [`super::backend::kernel_neighbour`]).
    pub kernel_neighbours: Option<String>,
    /// A turn whose received frames completed work returns before sending, so that what
    /// the caller posts in answer leaves with the ACKs in one batch: one kick here, one
    /// wake-up of the peer, instead of two of each per exchange. Only for callers that
    /// turn the loop again right after each completion (a ping-pong), since the ACKs wait
    /// for that turn. See [`Runtime::set_coalesce_replies`].
    pub coalesce_replies: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            busy_poll: false,
            spin: DEFAULT_SPIN,
            kernel_neighbours: None,
            coalesce_replies: false,
        }
    }
}

/// A host on a device, with a clock and an event loop.
pub struct Runtime {
    host: Host,
    device: Box<dyn Device>,
    poll: Poll,
    events: Events,
    /// The device's descriptor, if it has one: in the poll set only while the loop may sleep
    /// on it (see [`Runtime::arm`]).
    device_fd: Option<RawFd>,
    /// Whether `device_fd` is in the poll set now.
    armed: bool,
    /// Wakes the loop at the next deadline while it sleeps on the device.
    timer: Timer,
    origin: Instant,
    /// When the last turn began (its one clock read).
    turn_began: Instant,
    config: RuntimeConfig,
    tx_buf: Vec<u8>,
    /// A frame in `tx_buf` the device had no room for.
    tx_pending: Option<usize>,
    /// Until when idle turns poll instead of sleeping: [`RuntimeConfig::spin`] after the
    /// last turn that moved frames.
    spin_until: Option<Instant>,
    /// Until when no spin starts: a yield found the core wanted by another process.
    spin_paused_until: Option<Instant>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("host", &self.host)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime for `host` on `device`; a real endpoint draws unguessable QPNs and keys
    /// unless `host` fixed their seed.
    pub fn new(
        device: Box<dyn Device>,
        mut host: HostConfig,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        // A real endpoint hands out QPNs and R_Keys an off-path sender cannot guess, unless
        // the caller fixed them (see `ids.rs`).
        if host.transport.id_seed.is_none() {
            host.transport.id_seed = Some(super::ids::draw());
        }
        // Communication IDs and starting PSNs likewise (a peer must not guess them either).
        host.cm.seed ^= super::ids::draw();
        // The connection manager offers (and accepts) at most the path MTU the device carries.
        if let Some(mtu) = crate::transport::Mtu::for_link_mtu(device.capabilities().mtu as u32) {
            host.cm.max_mtu = mtu;
        }
        let poll = Poll::new().map_err(RuntimeError::Poll)?;
        let device_fd = device.raw_fd();
        let timer = Timer::new().map_err(RuntimeError::Poll)?;
        poll.registry()
            .register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)
            .map_err(RuntimeError::Poll)?;
        let origin = Instant::now();
        Ok(Runtime {
            host: Host::new(host),
            device,
            poll,
            events: Events::with_capacity(16),
            device_fd,
            armed: false,
            timer,
            origin,
            turn_began: origin,
            config,
            tx_buf: vec![0; Host::max_frame_len()],
            tx_pending: None,
            spin_until: None,
            spin_paused_until: None,
        })
    }

    /// Time since the runtime started, as the engine counts it.
    pub fn now(&self) -> time::Instant {
        self.time_at(Instant::now())
    }

    /// `wall` as the engine counts time.
    fn time_at(&self, wall: Instant) -> time::Instant {
        time::Instant::from_nanos(
            u64::try_from(wall.saturating_duration_since(self.origin).as_nanos())
                .unwrap_or(u64::MAX),
        )
    }

    /// The host, to read.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The host, for what the runtime does not wrap.
    pub fn host_mut(&mut self) -> &mut Host {
        &mut self.host
    }

    // ---- verbs ----

    /// Registers `data` at `va` with `access` (`ibv_reg_mr`) and returns its key.
    pub fn register_mr(
        &mut self,
        va: u64,
        data: Vec<u8>,
        access: Access,
    ) -> Result<u32, RuntimeError> {
        Ok(self.host.engine_mut().register_mr(va, data, access)?)
    }

    /// The bytes of the region with `key`.
    pub fn mr_bytes(&self, key: u32) -> Option<&[u8]> {
        self.host.engine().mr(key).map(|m| m.bytes())
    }

    /// The bytes of the region with `key`, to write.
    pub fn mr_bytes_mut(&mut self, key: u32) -> Option<&mut [u8]> {
        self.host.engine_mut().mr_mut(key).map(|m| m.bytes_mut())
    }

    /// A completion queue of `capacity` entries.
    pub fn create_cq(&mut self, capacity: usize) -> CqId {
        self.host.engine_mut().create_cq(capacity)
    }

    /// A completion queue whose completions carry when the engine queued them, in
    /// nanoseconds of [`Runtime::now`] (`ibv_create_cq_ex` with
    /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`).
    pub fn create_cq_with_timestamps(&mut self, capacity: usize) -> CqId {
        self.host.engine_mut().create_cq_with_timestamps(capacity)
    }

    /// A queue pair (`ibv_create_qp`).
    pub fn create_qp(&mut self, init: QpInit) -> Result<Qpn, RuntimeError> {
        Ok(self.host.engine_mut().create_qp(init)?)
    }

    /// RESET -> INIT, so that receives can be posted before the peer is known.
    pub fn init_qp(&mut self, qpn: Qpn, path: &QpPath) -> Result<(), RuntimeError> {
        Ok(connect::to_init(self.host.engine_mut(), qpn, path)?)
    }

    /// INIT -> RTR -> RTS towards `path.dest`, and starts resolving the peer's MAC so that
    /// the first packet does not wait for it (UD: `path.dest` is the first peer).
    pub fn connect_qp(&mut self, qpn: Qpn, path: &QpPath) -> Result<(), RuntimeError> {
        self.kernel_neighbour(path.dest);
        let now = self.now();
        if !self.host.resolve(now, path.dest) {
            return Err(RuntimeError::NoRoute(path.dest));
        }
        Ok(connect::to_rts(self.host.engine_mut(), qpn, path)?)
    }

    /// Posts a send work request (`ibv_post_send`).
    pub fn post_send(&mut self, qpn: Qpn, wr: SendWr) -> Result<(), RuntimeError> {
        Ok(self.host.engine_mut().post_send(qpn, wr)?)
    }

    /// Posts a receive work request (`ibv_post_recv`).
    pub fn post_recv(&mut self, qpn: Qpn, wr: RecvWr) -> Result<(), RuntimeError> {
        Ok(self.host.engine_mut().post_recv(qpn, wr)?)
    }

    /// The oldest completion of `cq`, without waiting.
    pub fn poll_cq(&mut self, cq: CqId) -> Option<WorkCompletion> {
        self.host.engine_mut().poll_completion(cq)
    }

    /// Waits up to `timeout` for a completion on `cq`.
    pub fn wait_completion(
        &mut self,
        cq: CqId,
        timeout: Duration,
    ) -> Result<WorkCompletion, RuntimeError> {
        // A completion already waiting needs no clock read (one per message otherwise).
        if let Some(wc) = self.poll_cq(cq) {
            return Ok(wc);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(wc) = self.poll_cq(cq) {
                return Ok(wc);
            }
            // The clock as the last turn read it: a turn that slept until `deadline` is
            // followed by one that reads it at or after `deadline` without sleeping again.
            if self.turn_began >= deadline {
                return Err(RuntimeError::Timeout {
                    what: "waiting for a completion".into(),
                    after: timeout,
                });
            }
            self.turn(Some(deadline))?;
        }
    }

    /// Waits until `addr`'s MAC is known (ARP / neighbour discovery), up to `timeout`.
    pub fn resolve(&mut self, addr: IpAddr, timeout: Duration) -> Result<[u8; 6], RuntimeError> {
        let deadline = Instant::now() + timeout;
        self.kernel_neighbour(addr);
        let now = self.now();
        if !self.host.resolve(now, addr) {
            return Err(RuntimeError::NoRoute(addr));
        }
        loop {
            if let Some(mac) = self.host.neighbour(addr) {
                return Ok(mac);
            }
            if Instant::now() >= deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("resolving the MAC address of {addr}"),
                    after: timeout,
                });
            }
            let now = self.now();
            self.host.resolve(now, addr);
            self.turn(Some(deadline))?;
        }
    }

    /// Copies `addr`'s entry from the kernel's neighbour table, where configured.
    fn kernel_neighbour(&mut self, addr: IpAddr) {
        let (Some(ifname), IpAddr::V4(v4)) = (&self.config.kernel_neighbours, addr) else {
            return;
        };
        if let Some(mac) = super::backend::kernel_neighbour(ifname, v4) {
            self.host.add_neighbour(addr, mac);
        }
    }

    /// Keeps the endpoint running (answering, acknowledging, retransmitting) for `period`,
    /// or until the device closes (the far end of an in-memory link went away, a capture
    /// ended): then there is nothing left to answer.
    pub fn serve_for(&mut self, period: Duration) -> Result<(), RuntimeError> {
        let deadline = Instant::now() + period;
        while Instant::now() < deadline {
            match self.turn(Some(deadline)) {
                Ok(()) => {}
                Err(RuntimeError::Device(DeviceError::Closed { .. })) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Runs `work` (a blocking out-of-band exchange) on a helper thread while the loop keeps
    /// answering the wire: a peer may ARP, send, or retransmit while we wait on TCP, and a
    /// perftest server must acknowledge the client's traffic from inside a TCP handshake.
    pub fn serve_while<T: Send>(
        &mut self,
        work: impl FnOnce() -> T + Send,
    ) -> Result<T, RuntimeError> {
        std::thread::scope(|scope| {
            let worker = scope.spawn(work);
            while !worker.is_finished() {
                match self.turn(Some(Instant::now() + WORKER_CHECK)) {
                    Ok(()) => {}
                    // Nothing is left to answer on a closed device; the exchange may still
                    // end well (the peer finished and left the in-memory link).
                    Err(RuntimeError::Device(DeviceError::Closed { .. })) => break,
                    Err(e) => return Err(e),
                }
            }
            worker.join().map_err(|_| RuntimeError::WorkerFailed)
        })
    }

    /// Switches [`RuntimeConfig::coalesce_replies`]; a ping-pong's loop turns on it.
    pub fn set_coalesce_replies(&mut self, on: bool) {
        self.config.coalesce_replies = on;
    }

    /// What the device offers (its MTU bounds the path MTU).
    pub fn capabilities(&self) -> crate::io::Capabilities {
        self.device.capabilities()
    }

    /// The next asynchronous event, such as a QP entering the error state.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.host.engine_mut().poll_event()
    }

    // ---- the loop ----

    /// One turn of the event loop; sleeps at most until `deadline`.
    pub fn turn(&mut self, deadline: Option<Instant>) -> Result<(), RuntimeError> {
        // One clock read for the whole turn (receiving, timers, sending, spinning): reading it
        // at each step was five reads a turn, 9% of a 64-byte SEND client's user time.
        let wall = Instant::now();
        self.turn_began = wall;
        let now = self.time_at(wall);
        let waiting = self.host.engine().completions_waiting();
        let received = self.receive(now)?;
        let mut busy = received;
        if self.host.poll_timeout(now).is_some_and(|t| t <= now) {
            self.host.handle_timeout(now);
            busy = true;
        }
        if self.config.coalesce_replies && self.host.engine().completions_waiting() > waiting {
            // The caller answers the completion and turns again: the ACKs go then, with
            // the answer.
            self.traffic_seen_at(wall);
            return Ok(());
        }
        let (blocked, sent) = match self.transmit(now)? {
            Transmitted::Some => (false, true),
            Transmitted::None => (false, false),
            Transmitted::Blocked => (true, false),
        };
        if received || sent {
            // Timers alone do not count: a retransmission into silence is no sign that
            // the next frame is near.
            self.traffic_seen_at(wall);
        }
        if self.config.busy_poll || self.spin_until.is_some() {
            self.disarm()?;
        }
        if busy || sent {
            return Ok(());
        }
        if self.config.busy_poll {
            // An idle turn hands the core to whatever else is runnable (the peer's process,
            // the softirq thread carrying its frames) and comes straight back: spinning on
            // through a whole time slice holds off the very work it waits for wherever
            // cores are shared (a spin without the yield took a ping-pong from 21 to 145
            // usec at a load of 7).
            std::thread::yield_now();
            return Ok(());
        }
        if let Some(until) = self.spin_until {
            // The turn began a few microseconds before the yield, against SPIN_CONTENDED's 500.
            if wall < until {
                std::thread::yield_now();
                if wall.elapsed() >= SPIN_CONTENDED {
                    // Another process wanted this core and ran. A spinning process that
                    // yields waits behind it for its whole slice, where a sleeping one is
                    // woken ahead of it: sleep while the core is contended, as NAPI's busy
                    // polling stops when the scheduler wants the CPU (need_resched).
                    self.spin_until = None;
                    self.spin_paused_until = Some(Instant::now() + SPIN_PAUSE);
                }
                return Ok(());
            }
            self.spin_until = None;
        }
        self.sleep(deadline, blocked)
    }

    /// [`Runtime::traffic_seen_at`] now.
    #[cfg(test)]
    fn traffic_seen(&mut self) {
        self.traffic_seen_at(Instant::now());
    }

    /// Starts (or extends) the spin after a turn that moved frames at `now`, unless spinning
    /// is paused because the core was contended.
    fn traffic_seen_at(&mut self, now: Instant) {
        if self.config.spin.is_zero() {
            return;
        }
        if self.spin_paused_until.is_some_and(|t| now < t) {
            return;
        }
        self.spin_paused_until = None;
        self.spin_until = Some(now + self.config.spin);
    }

    /// Moves received frames into the host. True if there were any.
    fn receive(&mut self, now: time::Instant) -> Result<bool, RuntimeError> {
        let mut any = false;
        for _ in 0..RX_BATCH {
            let host = &mut self.host;
            match self
                .device
                .receive(&mut |frame| host.handle_frame(now, frame))
            {
                Ok(true) => any = true,
                Ok(false) => break,
                // The peer's last frames arrived and then it left: what they completed is
                // the caller's to poll before it hears of the closing, on the next turn,
                // when nothing is left to receive.
                Err(DeviceError::Closed { .. }) if any => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(any)
    }

    /// Builds the host's frames straight into the device's transmit buffers where it lends
    /// them (AF_XDP: into the UMEM), else in `tx_buf`.
    fn transmit(&mut self, now: time::Instant) -> Result<Transmitted, RuntimeError> {
        let mut sent = false;
        loop {
            let held = match self.tx_pending.take() {
                Some(len) => (!self.device.transmit(&self.tx_buf[..len])?).then_some(len),
                None => {
                    let host = &mut self.host;
                    match self
                        .device
                        .transmit_built(&mut self.tx_buf, &mut |buf| host.poll_transmit(now, buf))?
                    {
                        Built::Sent => None,
                        Built::Nothing => break,
                        Built::Held(len) => Some(len),
                    }
                }
            };
            if let Some(len) = held {
                self.tx_pending = Some(len);
                self.device.flush()?;
                return Ok(Transmitted::Blocked);
            }
            sent = true;
        }
        self.device.flush()?;
        Ok(if sent {
            Transmitted::Some
        } else {
            Transmitted::None
        })
    }

    /// Puts the device's descriptor in the poll set, before a sleep. A frame that came
    /// meanwhile is not missed: adding a ready descriptor makes the next `epoll_wait` return.
    fn arm(&mut self) -> Result<(), RuntimeError> {
        if let (Some(fd), false) = (self.device_fd, self.armed) {
            self.poll
                .registry()
                .register(&mut SourceFd(&fd), DEVICE, Interest::READABLE)
                .map_err(RuntimeError::Poll)?;
            self.armed = true;
        }
        Ok(())
    }

    /// Takes the device's descriptor out of the poll set while the loop polls instead of
    /// sleeping (spinning after traffic, busy polling). In the set, every frame the socket
    /// receives, and every frame it sends, has the kernel walk the socket's wait queue to
    /// queue an epoll event nobody waits for: for AF_XDP over veth that walk ran per frame
    /// in the sending process's system call, 10% of a 64-byte SEND client's CPU (`perf
    /// record`: `sock_def_readable` and `sock_wfree` taking the wait queue's lock). With the
    /// wait queue empty the kernel skips it.
    fn disarm(&mut self) -> Result<(), RuntimeError> {
        if let (Some(fd), true) = (self.device_fd, self.armed) {
            self.poll
                .registry()
                .deregister(&mut SourceFd(&fd))
                .map_err(RuntimeError::Poll)?;
            self.armed = false;
        }
        Ok(())
    }

    fn sleep(&mut self, deadline: Option<Instant>, blocked: bool) -> Result<(), RuntimeError> {
        let now = self.now();
        let mut wake = [
            self.host.poll_timeout(now).map(|t| t.saturating_since(now)),
            deadline.map(|d| d.saturating_duration_since(Instant::now())),
            blocked.then_some(TX_RETRY),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(due) = self.device.next_wakeup() {
            let clock_now = crate::io::Clock::now(&crate::io::SystemClock::new());
            let until = due.saturating_since(clock_now);
            wake = Some(wake.map_or(until, |w| w.min(until)));
        }
        if self.device_fd.is_none() {
            // A device without a descriptor (a capture file) has input whenever asked.
            return Ok(());
        }
        self.arm()?;
        // Due now: a look at the device without sleeping. Otherwise the timer holds the
        // deadline and epoll_wait gets none.
        let timeout = match wake {
            Some(w) if w.is_zero() => Some(w),
            Some(w) => {
                self.timer.arm_within(w).map_err(RuntimeError::Poll)?;
                None
            }
            None => None,
        };
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(RuntimeError::Poll(e)),
        }
        if self.events.iter().any(|e| e.token() == TIMER) {
            self.timer.expired();
        }
        Ok(())
    }
}

enum Transmitted {
    Some,
    None,
    Blocked,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryDevice, MemoryLinkConfig};

    fn runtime(device: MemoryDevice, addr: &str, spin: Duration) -> Runtime {
        let mac = device.capabilities().mac.unwrap_or_default();
        let host = HostConfig::new(mac, vec![addr.parse().unwrap()]);
        let config = RuntimeConfig {
            spin,
            ..RuntimeConfig::default()
        };
        Runtime::new(Box::new(device), host, config).unwrap()
    }

    /// Sending and receiving frames start the spin, a turn with nothing to do does not, and a
    /// zero spin never starts.
    #[test]
    fn traffic_starts_the_spin_and_a_zero_spin_never_does() {
        for spin in [Duration::ZERO, Duration::from_secs(600)] {
            let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
            let mut ra = runtime(a, "10.0.0.1/24", spin);
            let mut rb = runtime(b, "10.0.0.2/24", spin);
            ra.turn(Some(Instant::now())).unwrap();
            rb.turn(Some(Instant::now())).unwrap();
            assert_eq!((ra.spin_until, rb.spin_until), (None, None), "idle");
            let now = ra.now();
            assert!(ra.host.resolve(now, "10.0.0.2".parse().unwrap()));
            ra.turn(Some(Instant::now())).unwrap();
            assert_eq!(
                ra.spin_until.is_some(),
                !spin.is_zero(),
                "sent an ARP request"
            );
            rb.turn(Some(Instant::now())).unwrap();
            assert_eq!(rb.spin_until.is_some(), !spin.is_zero(), "received it");
        }
    }

    /// While spinning is paused (a yield found the core contended) traffic starts no spin;
    /// once the pause is over it does again.
    #[test]
    fn a_paused_spin_starts_again_after_the_pause() {
        let (a, _b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut rt = runtime(a, "10.0.0.1/24", Duration::from_secs(600));
        rt.spin_paused_until = Some(Instant::now() + Duration::from_secs(600));
        rt.traffic_seen();
        assert_eq!(rt.spin_until, None);
        rt.spin_paused_until = Some(Instant::now());
        rt.traffic_seen();
        assert!(rt.spin_until.is_some());
        assert_eq!(rt.spin_paused_until, None);
    }

    /// A device with a descriptor: frames travel as datagrams over a Unix socket pair.
    struct SocketDevice(std::os::unix::net::UnixDatagram);

    impl Device for SocketDevice {
        fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
            let mut buf = [0u8; 2048];
            match self.0.recv(&mut buf) {
                Ok(n) => {
                    consume(&buf[..n]);
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(DeviceError::os("socket", "recv", e)),
            }
        }
        fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
            self.0
                .send(frame)
                .map(|_| true)
                .map_err(|e| DeviceError::os("socket", "send", e))
        }
        fn capabilities(&self) -> crate::io::Capabilities {
            crate::io::Capabilities {
                mtu: 1500,
                icrc_offload: false,
                mac: Some(memory::MAC_A),
            }
        }
        fn raw_fd(&self) -> Option<RawFd> {
            Some(self.0.as_raw_fd())
        }
    }

    /// While the loop spins it keeps the device's descriptor out of the poll set; the sleep
    /// after puts it back and wakes at once for a frame that arrived meanwhile, not at its
    /// deadline.
    #[test]
    fn the_device_leaves_the_poll_set_while_spinning_and_no_frame_is_missed() {
        let (ours, peer) = std::os::unix::net::UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let host = HostConfig::new(memory::MAC_A, vec!["10.0.0.1/24".parse().unwrap()]);
        let config = RuntimeConfig {
            spin: Duration::from_secs(600),
            ..RuntimeConfig::default()
        };
        let mut rt = Runtime::new(Box::new(SocketDevice(ours)), host, config).unwrap();
        let now = rt.now();
        assert!(rt.host.resolve(now, "10.0.0.2".parse().unwrap()));
        rt.turn(Some(Instant::now())).unwrap();
        assert!(
            rt.spin_until.is_some() && !rt.armed,
            "spinning, out of the poll set"
        );
        let mut request = [0u8; 2048];
        let n = peer.recv(&mut request).unwrap();
        assert_eq!(&request[12..14], &[0x08, 0x06], "the ARP request went out");

        // A frame arrives while the loop is out of the poll set; the next sleep sees it.
        peer.send(&request[..n]).unwrap();
        let start = Instant::now();
        rt.sleep(Some(start + Duration::from_secs(5)), false)
            .unwrap();
        assert!(rt.armed);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "woke for the waiting frame, not at the deadline: {:?}",
            start.elapsed()
        );
        let received = rt.host.stats().frames_received;
        rt.turn(Some(Instant::now())).unwrap();
        assert_eq!(rt.host.stats().frames_received, received + 1);
    }
}
