//! Two hosts joined by the in-memory link (`io::memory`) in virtual time: each host's NIC
//! sends at its line rate, then the link applies the seeded fault model, whose a-to-b
//! direction holds a bottleneck queue that drains more slowly and marks ECN CE above a
//! threshold. One host's side of the wire can be recorded into a bounded capture.
//!
//! A [`Network`] is the library's two-host harness, [`VirtualNet`] (its clock, hosts, devices
//! and link; `net.a`, `net.b` and `net.now()` are the VirtualNet's), plus what the demo and
//! the teaching captures need: NICs that send at a line rate rather than all at once
//! (otherwise a requester's whole window lands in the bottleneck queue in one instant) and
//! honour PAUSE and PFC, a capture point, a tap for scripted faults, and a guard against a
//! run that stops making progress. It steps the VirtualNet with [`Network::step`], one event
//! at a time; the VirtualNet's own `step` and `run_until`, which move every frame at once and
//! know no line rate, are for the endpoint's tests.

use core::time::Duration;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

use super::window::{CaptureSummary, WindowedCapture};
use crate::cc::{CcError, DcqcnParams};
use crate::endpoint::dcqcn::{DcqcnHook, DcqcnMonitor};
use crate::endpoint::virtual_net::VirtualNet;
use crate::endpoint::{Host, HostConfig, IpCidr};
use crate::fault::{CeMarking, Delay, FaultConfig, FaultError, FaultStats};
use crate::io::memory::{MAC_A, MAC_B, MemoryLinkConfig};
use crate::io::pause::{PauseGate, mac_control};
use crate::io::{Device, DeviceError};
use crate::time::Instant;
use crate::transport::TransportConfig;
use crate::wire::Ecn;
use crate::wire::encap::{ETHERNET_FCS_LEN, ETHERNET_PREAMBLE_AND_GAP_LEN};
use crate::wire::pause::MacControlRepr;

/// Host A's address on an IPv4 network (a private /24).
pub const IP_A: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 77, 1));
/// Host B's address on an IPv4 network.
pub const IP_B: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 77, 2));
/// The hosts' addresses on an IPv6 network ([`NetConfig::ipv6`]): a unique local /64.
pub const IP6_A: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1));
/// Host B's IPv6 address.
pub const IP6_B: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2));

/// Bytes a frame occupies on the wire besides itself: FCS 4, preamble 8, inter-frame gap 12.
const WIRE_EXTRA: usize = ETHERNET_FCS_LEN + ETHERNET_PREAMBLE_AND_GAP_LEN;

/// Capture timestamps start here (2025-01-01T00:00:00Z), so the same run always writes the
/// same file.
pub(crate) const CAPTURE_ORIGIN: Instant = Instant::from_nanos(1_735_689_600 * 1_000_000_000);

/// The PFC priority the hosts' frames travel in: they carry no VLAN tag, so a port classes
/// them in its default priority, 0 (IEEE 802.1Q). Deployments give RoCE a lossless priority
/// of its own (3, often) by a tag's PCP or by DSCP; these hosts need neither.
pub const HOST_PRIORITY: usize = 0;

/// After this many steps without virtual time moving, the run is declared stuck.
const MAX_STEPS_WITHOUT_TIME: u32 = 1_000_000;

/// The queue in front of host B's port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bottleneck {
    /// The rate it drains at.
    pub gbps: f64,
    /// Frames arriving while more than this many bytes wait are marked CE.
    pub ce_threshold_bytes: u64,
}

/// The link between the two hosts of [`Network`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetConfig {
    /// Each NIC's line rate; 0 for infinitely fast.
    pub line_gbps: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Probabilities per frame, each direction.
    pub loss: f64,
    /// Probability per frame that it is held back and overtaken, each direction.
    pub reorder: f64,
    /// How long a reordered frame is held back.
    pub reorder_delay: Duration,
    /// A CE-marking queue in front of host B, if any.
    pub bottleneck: Option<Bottleneck>,
    /// Seeds the link's random choices: the same seed gives the same run.
    pub seed: u64,
    /// The link (IP) MTU.
    pub link_mtu: usize,
    /// The hosts speak IPv6 ([`IP6_A`], [`IP6_B`]) instead of IPv4 ([`IP_A`], [`IP_B`]).
    pub ipv6: bool,
}

/// Why the network could not be built or run.
#[derive(Debug, Error)]
pub enum NetError {
    /// The fault model's configuration is invalid.
    #[error(transparent)]
    Fault(#[from] FaultError),
    /// A device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The capture could not be written.
    #[error("writing the capture: {0}")]
    Capture(#[from] std::io::Error),
    /// Virtual time stopped moving: the steps taken and the time.
    #[error("no progress: {0} steps at virtual time {1} without time moving")]
    Stuck(u32, Instant),
}

/// One of the two hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Host A (the requester of the demo).
    A,
    /// Host B.
    B,
}

impl Side {
    /// The other host.
    pub const fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// A mirror port on the link between the hosts: sees every frame either host puts on the
/// wire, when it leaves the NIC, and decides whether the link carries it on (a scripted
/// fault, applied before the seeded fault model).
pub trait WireTap {
    /// The frame `from` sent at `at`; false to drop it.
    fn on_frame(&mut self, at: Instant, from: Side, frame: &[u8]) -> bool;
    /// The frame arriving at host `to` at `at`, after the link's delay, queue and marking.
    fn on_arrival(&mut self, _at: Instant, _to: Side, _frame: &[u8]) {}
}

/// Two hosts in one process, on in-memory devices joined by a link in virtual time, with
/// NICs that honour PAUSE and PFC, a fault model, an optional CE-marking bottleneck, and a
/// capture of the wire.
pub struct Network<W: Write> {
    net: VirtualNet,
    wire_free: [Instant; 2],
    /// Each NIC's transmitter: a PAUSE, or a PFC frame for [`HOST_PRIORITY`], from its link
    /// partner holds it (IEEE 802.3 Annex 31B, 802.1Qbb), as the endpoint's devices are held.
    pause: [PauseGate; 2],
    line_gbps: f64,
    capture: Option<WindowedCapture<W>>,
    capture_side: Side,
    tap: Option<Box<dyn WireTap>>,
    steps_at_now: u32,
    last_now: Instant,
    /// Host A's and host B's addresses.
    addrs: [IpAddr; 2],
}

impl<W: Write> std::fmt::Debug for Network<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("now", &self.now())
            .field("a", self.net.a.stats())
            .field("b", self.net.b.stats())
            .finish_non_exhaustive()
    }
}

impl<W: Write> core::ops::Deref for Network<W> {
    type Target = VirtualNet;

    fn deref(&self) -> &VirtualNet {
        &self.net
    }
}

impl<W: Write> core::ops::DerefMut for Network<W> {
    fn deref_mut(&mut self) -> &mut VirtualNet {
        &mut self.net
    }
}

/// The a-to-b direction's marking: a queue draining at the bottleneck's rate, marking CE
/// above its threshold.
fn ce_marking(bottleneck: Option<Bottleneck>) -> CeMarking {
    match bottleneck {
        Some(b) => CeMarking::Queue {
            threshold_bytes: b.ce_threshold_bytes,
            drain_bits_per_sec: (b.gbps * 1e9) as u64,
        },
        None => CeMarking::Off,
    }
}

impl<W: Write> Network<W> {
    /// Hosts A and B on one /24, sending ECT(0) as DCQCN-capable NICs do, so that the
    /// bottleneck can mark CE instead of dropping (RFC 3168, Annex A17.9). `capture` records
    /// what `capture_side` sends and receives.
    pub fn new(
        config: &NetConfig,
        transport: TransportConfig,
        capture: Option<WindowedCapture<W>>,
        capture_side: Side,
    ) -> Result<Network<W>, NetError> {
        let base = FaultConfig {
            loss: config.loss,
            reorder: config.reorder,
            reorder_delay: config.reorder_delay,
            delay: Delay {
                base: config.delay,
                jitter: Duration::ZERO,
            },
            ..FaultConfig::default()
        };
        let a_to_b = FaultConfig {
            ce_mark: ce_marking(config.bottleneck),
            ..base
        };
        let link = MemoryLinkConfig {
            mtu: config.link_mtu,
            a_to_b,
            b_to_a: base,
            seed: config.seed,
        };
        let (addrs, prefix) = if config.ipv6 {
            ([IP6_A, IP6_B], 64)
        } else {
            ([IP_A, IP_B], 24)
        };
        let host = |mac, ip| {
            let addr = IpCidr::new(ip, prefix).expect("a /24 or /64 is a valid prefix");
            let mut c = HostConfig::new(mac, vec![addr]);
            c.transport = transport;
            c.ecn = Ecn::Ect0;
            // Each side's comm IDs, transaction IDs and PSNs of rdma_cm from the seed.
            c.cm.seed = config.seed ^ u64::from(mac[5]) << 56;
            c
        };
        Ok(Network {
            net: VirtualNet::new(link, host(MAC_A, addrs[0]), host(MAC_B, addrs[1]))?,
            wire_free: [Instant::ZERO; 2],
            pause: [PauseGate::new((config.line_gbps * 1e9) as u64); 2],
            line_gbps: config.line_gbps,
            capture,
            capture_side,
            tap: None,
            steps_at_now: 0,
            last_now: Instant::ZERO,
            addrs,
        })
    }

    /// The address of host `side`.
    pub fn addr(&self, side: Side) -> IpAddr {
        match side {
            Side::A => self.addrs[0],
            Side::B => self.addrs[1],
        }
    }

    /// The host on `side`.
    pub fn host(&mut self, side: Side) -> &mut Host {
        match side {
            Side::A => &mut self.net.a,
            Side::B => &mut self.net.b,
        }
    }

    /// Runs DCQCN with `params` on both hosts (every QP starts at `params`' line rate), and
    /// returns what each host's reaction points do, A's then B's.
    pub fn set_dcqcn(&mut self, params: DcqcnParams) -> Result<[DcqcnMonitor; 2], CcError> {
        let (hook_a, monitor_a) = DcqcnHook::new(params)?;
        let (hook_b, monitor_b) = DcqcnHook::new(params)?;
        self.net.a.set_congestion_control(Box::new(hook_a));
        self.net.b.set_congestion_control(Box::new(hook_b));
        Ok([monitor_a, monitor_b])
    }

    /// Puts a bottleneck in front of host B's port, or takes it away (`None`), for the
    /// frames A sends from now on: congestion that starts or ends mid-run.
    pub fn set_bottleneck(&mut self, bottleneck: Option<Bottleneck>) -> Result<(), NetError> {
        let mut faults = self.net.dev_a.sent_faults();
        faults.ce_mark = ce_marking(bottleneck);
        Ok(self.net.dev_a.set_sent_faults(faults)?)
    }

    /// Puts `tap` on the link (see [`WireTap`]), replacing any earlier one.
    pub fn set_tap(&mut self, tap: Box<dyn WireTap>) {
        self.tap = Some(tap);
    }

    /// Host `from`'s port sends a MAC control frame (a PAUSE or PFC `body`) to its link
    /// partner, as a port does when its receive buffer passes a threshold: the tap and the
    /// capture see it like any frame; the NIC at the other end honours it and its host never
    /// sees it. Sent only if `from`'s wire is free now: false, and nothing sent, while a
    /// frame is on it (the caller tries again at [`Network::wire_free`]).
    pub fn send_mac_control(
        &mut self,
        from: Side,
        body: &MacControlRepr,
    ) -> Result<bool, NetError> {
        let mac = match from {
            Side::A => MAC_A,
            Side::B => MAC_B,
        };
        let frame = body.frame(mac);
        let i = from as usize;
        let at = self.now();
        if self.wire_free[i] > at {
            return Ok(false);
        }
        if from == self.capture_side
            && let Some(capture) = &mut self.capture
        {
            capture.record(CAPTURE_ORIGIN + (at - Instant::ZERO), &frame)?;
        }
        let carried = self
            .tap
            .as_mut()
            .is_none_or(|t| t.on_frame(at, from, &frame));
        if carried {
            let dev = match from {
                Side::A => &mut self.net.dev_a,
                Side::B => &mut self.net.dev_b,
            };
            // The in-memory link always has room.
            dev.transmit(&frame)?;
        }
        self.wire_free[i] = at + self.serialization(frame.len());
        Ok(true)
    }

    /// When host `side`'s wire is done with the frame it is sending (a time past if idle).
    pub fn wire_free(&self, side: Side) -> Instant {
        self.wire_free[side as usize]
    }

    /// Until when host `side`'s NIC is paused (a time past if it is not).
    pub fn paused_until(&self, side: Side) -> Instant {
        self.pause[side as usize].paused_until(HOST_PRIORITY)
    }

    /// What the link did to the frames each side sent: `(a_to_b, b_to_a)`.
    pub fn link_stats(&self) -> (FaultStats, FaultStats) {
        (self.net.dev_a.sent_stats(), self.net.dev_b.sent_stats())
    }

    /// Sends what the NICs may send now, moves time to the next event (a frame due, a timer,
    /// a wire becoming free, or the caller's `wake`) and handles it. False when nothing is
    /// left to happen.
    pub fn step(&mut self, wake: Option<Instant>) -> Result<bool, NetError> {
        self.transmit()?;
        let now = self.now();
        let wires = self
            .wire_free
            .into_iter()
            .chain(self.pause.map(|g| g.paused_until(HOST_PRIORITY)))
            .filter(|&t| t > now);
        let next = self
            .net
            .next_event()
            .into_iter()
            .chain(wires)
            .chain(wake)
            .min();
        let Some(next) = next else {
            return Ok(false);
        };
        self.net.clock.advance_to(next);
        let now = self.now();
        if now == self.last_now {
            self.steps_at_now += 1;
            if self.steps_at_now > MAX_STEPS_WITHOUT_TIME {
                return Err(NetError::Stuck(self.steps_at_now, now));
            }
        } else {
            self.steps_at_now = 0;
            self.last_now = now;
        }
        self.deliver()?;
        self.net.fire_due_timers();
        Ok(true)
    }

    /// Flushes the capture and says what it holds.
    pub fn finish(self) -> Result<Option<(CaptureSummary, W)>, NetError> {
        Ok(self.capture.map(WindowedCapture::finish).transpose()?)
    }

    fn serialization(&self, frame_len: usize) -> Duration {
        if self.line_gbps <= 0.0 {
            return Duration::ZERO;
        }
        let bits = ((frame_len + WIRE_EXTRA) * 8) as f64;
        Duration::from_nanos((bits / self.line_gbps).ceil() as u64)
    }

    fn transmit(&mut self) -> Result<(), NetError> {
        let now = self.now();
        for side in [Side::A, Side::B] {
            let i = side as usize;
            while self.wire_free[i] <= now && !self.pause[i].is_paused(HOST_PRIORITY, now) {
                let Network {
                    net, capture, tap, ..
                } = self;
                let VirtualNet {
                    a,
                    b,
                    dev_a,
                    dev_b,
                    buf,
                    ..
                } = net;
                let (host, dev) = match side {
                    Side::A => (a, dev_a),
                    Side::B => (b, dev_b),
                };
                let Some(len) = host.poll_transmit(now, buf) else {
                    break;
                };
                let frame = &buf[..len];
                if side == self.capture_side
                    && let Some(capture) = capture
                {
                    capture.record(CAPTURE_ORIGIN + (now - Instant::ZERO), frame)?;
                }
                let carried = tap.as_mut().is_none_or(|t| t.on_frame(now, side, frame));
                if carried {
                    // The in-memory link always has room.
                    dev.transmit(frame)?;
                }
                self.wire_free[i] = now + self.serialization(len);
            }
        }
        Ok(())
    }

    fn deliver(&mut self) -> Result<(), NetError> {
        let now = self.now();
        let at = CAPTURE_ORIGIN + (now - Instant::ZERO);
        let mut capture_error = None;
        let Network {
            net,
            capture,
            capture_side,
            tap,
            pause,
            ..
        } = self;
        let VirtualNet {
            a, b, dev_a, dev_b, ..
        } = net;
        let [paused_a, paused_b] = pause;
        for (side, host, dev, paused) in
            [(Side::A, a, dev_a, paused_a), (Side::B, b, dev_b, paused_b)]
        {
            let mut capture = capture.as_mut().filter(|_| side == *capture_side);
            while dev.receive(&mut |frame| {
                if let Some(tap) = tap.as_mut() {
                    tap.on_arrival(now, side, frame);
                }
                if let Some(capture) = capture.as_deref_mut()
                    && let Err(e) = capture.record(at, frame)
                {
                    capture_error.get_or_insert(e);
                }
                // The MAC takes flow control frames for itself.
                match mac_control(frame) {
                    Some(body) => paused.honour(&body, now),
                    None => host.handle_frame(now, frame),
                }
            })? {}
        }
        match capture_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}
