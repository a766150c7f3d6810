//! `roce demo`'s scenario, shared with the integration tests and benchmarks: two hosts
//! ([`crate::endpoint::Host`]) in one process, joined by the in-memory link in virtual time
//! with seeded loss, reordering and a congested bottleneck that marks ECN CE, with DCQCN
//! reacting to it, run an RC workload of WRITEs, SENDs, READs and atomics, every byte of which
//! is verified.
//!
//! The run is deterministic: the same [`DemoConfig`] always gives the same [`Report`] and the
//! same capture. It reads no clock; callers time it if they want wall-clock figures.

pub mod lesson;
mod net;
mod traffic;
mod window;

use core::time::Duration;
use std::io::Write;

use thiserror::Error;

use crate::cc::{CcError, Preset};
use crate::endpoint::HostStats;
use crate::endpoint::dcqcn::{DcqcnMonitor, DcqcnReport};
use crate::fault::FaultStats;
use crate::time::Instant;
use crate::transport::{Mtu, Stats, TransportConfig};

pub use net::{Bottleneck, IP_A, IP_B, IP6_A, IP6_B, NetConfig, NetError, Network, Side, WireTap};
pub use traffic::{Op, OpCounts, Traffic, TrafficConfig, TrafficError, qp_path};
pub use window::{CaptureSummary, CaptureWindow, WindowedCapture};

/// Everything a demo run depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemoConfig {
    /// The workload and its verification.
    pub traffic: TrafficConfig,
    /// The link between the two hosts.
    pub net: NetConfig,
    /// The queue pairs' path MTU.
    pub mtu: Mtu,
    /// Both engines' configuration.
    pub transport: TransportConfig,
    /// DCQCN on both hosts with these parameters (at the NICs' line rate), or none.
    pub dcqcn: Option<Preset>,
    /// Which frames go into the capture.
    pub capture: CaptureWindow,
    /// Whose side of the wire the capture shows: B's by default, after the bottleneck, where
    /// CE marks, gaps left by loss and B's ACKs, NAKs and READ responses are all visible.
    pub capture_side: Side,
    /// The run fails if it has not finished by this virtual time.
    pub time_limit: Duration,
}

impl Default for DemoConfig {
    /// 256 MiB over a 100 Gb/s link with 2 us of delay, 1% loss and 1% reordering each way,
    /// a 50 Gb/s bottleneck in front of host B marking CE above 100 KB, and DCQCN with the
    /// paper's parameters.
    fn default() -> Self {
        DemoConfig {
            traffic: TrafficConfig::default(),
            net: NetConfig {
                line_gbps: 100.0,
                delay: Duration::from_micros(2),
                loss: 0.01,
                reorder: 0.01,
                reorder_delay: Duration::from_micros(5),
                bottleneck: Some(Bottleneck {
                    gbps: 50.0,
                    ce_threshold_bytes: 100_000,
                }),
                seed: 1,
                link_mtu: 4200,
                ipv6: false,
            },
            mtu: Mtu::M4096,
            transport: TransportConfig::default(),
            dcqcn: Some(Preset::Paper),
            capture: CaptureWindow::default(),
            capture_side: Side::B,
            time_limit: Duration::from_secs(60),
        }
    }
}

impl DemoConfig {
    /// Sets the seed of the workload and of the link together.
    pub fn with_seed(mut self, seed: u64) -> DemoConfig {
        self.traffic.seed = seed;
        self.net.seed = seed;
        self
    }
}

/// Why a demo run failed.
#[derive(Debug, Error)]
pub enum DemoError {
    /// The network could not be built or run.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The DCQCN parameters are invalid.
    #[error("DCQCN: {0}")]
    Dcqcn(#[from] CcError),
    /// A transfer failed or its bytes did not verify.
    #[error("verification failed: {0}")]
    Traffic(#[from] TrafficError),
    /// Nothing was left to happen while work was outstanding.
    #[error("the link went idle with work outstanding at virtual time {0}")]
    Idle(Instant),
    /// The run exceeded its virtual time limit.
    #[error("not finished after {0:?} of virtual time")]
    TimeLimit(Duration),
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The configuration the run used.
    pub config: DemoConfig,
    /// Verified messages and bytes per operation.
    pub ops: OpCounts,
    /// Virtual time from the first packet to the last completion.
    pub elapsed: Duration,
    /// Transport counters of host A (the requester) and host B (the responder).
    pub a: Stats,
    /// Transport counters of host B.
    pub b: Stats,
    /// What each host saw below the transport (frames, ICRC drops, CE marks, CNPs).
    pub host_a: HostStats,
    /// What host B saw below the transport.
    pub host_b: HostStats,
    /// What DCQCN did on each host, when on.
    pub dcqcn_a: Option<DcqcnReport>,
    /// What DCQCN did on host B.
    pub dcqcn_b: Option<DcqcnReport>,
    /// What the link did from A to B.
    pub link_a_to_b: FaultStats,
    /// What the link did from B to A.
    pub link_b_to_a: FaultStats,
    /// What the capture holds, if one was written.
    pub capture: Option<CaptureSummary>,
}

impl Report {
    /// Verified payload bits per second of virtual time, in Gb/s.
    pub fn goodput_gbps(&self) -> f64 {
        gbps(self.ops.total_bytes(), self.elapsed)
    }

    /// Request and response packets sent again (go-back-N and probes, both hosts).
    pub fn retransmitted_packets(&self) -> u64 {
        self.a.retransmitted_packets + self.b.retransmitted_packets
    }
}

/// Payload bytes over a duration, in Gb/s.
pub fn gbps(bytes: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}

/// The demo's workload set up between the network's hosts: A requests, B responds.
fn demo_traffic<W: Write>(
    net: &mut Network<W>,
    config: &DemoConfig,
) -> Result<Traffic, TrafficError> {
    let addrs = [net.addr(Side::A), net.addr(Side::B)];
    let (a, b) = net.hosts_mut();
    Traffic::new(
        config.traffic,
        config.mtu,
        a.engine_mut(),
        b.engine_mut(),
        addrs,
    )
}

/// Runs the demo; `capture` receives a pcap of one host's side of the wire, bounded by
/// `config.capture`.
pub fn run<W: Write>(
    config: &DemoConfig,
    capture: Option<W>,
) -> Result<(Report, Option<W>), DemoError> {
    let capture = capture
        .map(|w| WindowedCapture::new(w, config.capture))
        .transpose()
        .map_err(NetError::Capture)?;
    let mut net = Network::new(&config.net, config.transport, capture, config.capture_side)?;
    let monitors = match config.dcqcn {
        Some(preset) => net
            .set_dcqcn(preset.params(config.net.line_gbps * 1e9))?
            .map(Some),
        None => [None, None],
    };
    let mut traffic = demo_traffic(&mut net, config)?;
    let limit = Instant::ZERO + config.time_limit;
    loop {
        let now = net.now();
        let (a, b) = net.hosts_mut();
        traffic.pump(now, a.engine_mut(), b.engine_mut())?;
        if traffic.finished() {
            break;
        }
        if !net.step(traffic.next_wakeup())? {
            return Err(DemoError::Idle(net.now()));
        }
        if net.now() > limit {
            return Err(DemoError::TimeLimit(config.time_limit));
        }
    }
    traffic.verify_end(net.b.engine())?;
    let (link_a_to_b, link_b_to_a) = net.link_stats();
    let mut report = Report {
        config: *config,
        ops: traffic.done,
        elapsed: net.now() - Instant::ZERO,
        a: *net.a.engine().stats(),
        b: *net.b.engine().stats(),
        host_a: *net.a.stats(),
        host_b: *net.b.stats(),
        dcqcn_a: monitors[0].as_ref().map(DcqcnMonitor::report),
        dcqcn_b: monitors[1].as_ref().map(DcqcnMonitor::report),
        link_a_to_b,
        link_b_to_a,
        capture: None,
    };
    let finished = net.finish()?;
    let out = finished.map(|(summary, w)| {
        report.capture = Some(summary);
        w
    });
    Ok((report, out))
}

#[cfg(test)]
mod tests;
