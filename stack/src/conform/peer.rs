//! What the suite needs of a peer: a wire to it and its agent. [`VirtualPeer`] is our own
//! endpoint in the same process, on a perfect link in virtual time (the tests run every check
//! against it, deterministically and fast); [`super::device_peer::DevicePeer`] is a real device
//! and an agent over TCP.

use std::collections::VecDeque;

use thiserror::Error;

use super::server::{AgentServer, Step};
use super::station::Station;
use crate::endpoint::{Host, HostConfig, IpCidr};
use crate::time::Instant;
use crate::transport::TransportConfig;

/// Why the suite lost its peer.
#[derive(Debug, Error)]
pub enum PeerError {
    /// The device failed.
    #[error("device: {0}")]
    Device(String),
    /// The agent's connection failed or closed.
    #[error("the agent at {addr} is gone: {why}")]
    AgentGone {
        /// The agent's address.
        addr: String,
        /// What happened.
        why: String,
    },
    /// The agent did not answer in time.
    #[error("the agent at {addr} did not answer {request:?} within {secs} s")]
    AgentTimeout {
        /// The agent's address.
        addr: String,
        /// The request.
        request: String,
        /// How long the suite waited.
        secs: u64,
    },
    /// The in-memory peer stopped making progress (a bug in the peer or the suite).
    #[error("the peer is stuck at {0}")]
    Stuck(Instant),
}

/// A peer under test: frames both ways, its agent, and a clock.
pub trait Peer {
    /// Instant on the suite's clock (monotonic; virtual for the in-memory peer).
    fn now(&self) -> Instant;
    /// The tester's side of the link.
    fn station(&self) -> &Station;
    /// Puts `frame` on the wire to the peer.
    fn transmit(&mut self, frame: &[u8]) -> Result<(), PeerError>;
    /// The next frame from the wire that is not ARP or neighbour discovery (the station
    /// answers those), with the time it arrived, waiting until `deadline` at most.
    fn receive(&mut self, deadline: Instant) -> Result<Option<(Instant, Vec<u8>)>, PeerError>;
    /// Sends one request line to the agent and returns its reply line; the wire is served
    /// meanwhile (frames are kept for [`Peer::receive`]).
    fn agent(&mut self, line: &str) -> Result<String, PeerError>;
    /// Resolves the peer's MAC, waiting until `deadline`.
    fn resolve_peer(&mut self, deadline: Instant) -> Result<Option<[u8; 6]>, PeerError>;
}

/// Changes or drops a frame the in-memory peer sends (false: drop), to test the checks on a
/// peer that misbehaves.
pub type Tamper = Box<dyn FnMut(&mut Vec<u8>) -> bool + Send>;

/// How the in-memory peer and its tester are set up.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualConfig {
    /// The peer: our endpoint.
    pub peer: HostConfig,
    /// The tester's MAC and address.
    pub tester_mac: [u8; 6],
    /// The tester's address.
    pub tester: IpCidr,
    /// DCQCN parameters at the peer (a notification and reaction point), or none.
    pub dcqcn: Option<crate::cc::DcqcnParams>,
    /// The spacing of the peer's CNPs to one QP when `dcqcn` is set: DCQCN's 50 us unless
    /// a test wants a peer that paces them otherwise.
    pub cnp_interval: crate::cc::Time,
}

impl VirtualConfig {
    /// The peer at 192.168.77.1 and the tester at 192.168.77.2 on a /24, the engine's defaults.
    pub fn new() -> VirtualConfig {
        let peer = IpCidr::new(crate::scenario::IP_A, 24).expect("a unicast address");
        let tester = IpCidr::new(crate::scenario::IP_B, 24).expect("a unicast address");
        let mut host = HostConfig::new(crate::io::memory::MAC_A, vec![peer]);
        host.transport = TransportConfig::default();
        VirtualConfig {
            peer: host,
            tester_mac: crate::io::memory::MAC_B,
            tester,
            dcqcn: None,
            cnp_interval: crate::cc::CNP_INTERVAL,
        }
    }
}

impl Default for VirtualConfig {
    fn default() -> Self {
        VirtualConfig::new()
    }
}

/// After this many turns without time moving, the peer is declared stuck.
const MAX_STILL_TURNS: u32 = 100_000;

/// Our endpoint as the peer, with the agent served in-process, in virtual time.
pub struct VirtualPeer {
    peer: Host,
    agent: AgentServer,
    station: Station,
    now: Instant,
    inbox: VecDeque<(Instant, Vec<u8>)>,
    buf: Vec<u8>,
    tamper: Option<Tamper>,
    still: u32,
}

impl std::fmt::Debug for VirtualPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualPeer")
            .field("now", &self.now)
            .field("peer", self.peer.stats())
            .finish_non_exhaustive()
    }
}

/// The one agent session of the in-memory peer.
const SESSION: u64 = 1;

impl VirtualPeer {
    /// A peer set up as `config` says.
    pub fn new(config: VirtualConfig) -> VirtualPeer {
        let peer_ip = config.peer.addrs[0].addr();
        let mut peer = Host::new(config.peer);
        let cc = match config.dcqcn {
            Some(params) => match crate::endpoint::dcqcn::DcqcnHook::new(params) {
                Ok((hook, _)) => {
                    peer.set_ecn(crate::wire::Ecn::Ect0);
                    let hook = hook.with_cnp_interval(config.cnp_interval);
                    peer.set_congestion_control(Box::new(hook));
                    "dcqcn"
                }
                Err(_) => "none",
            },
            None => "none",
        };
        VirtualPeer {
            peer,
            agent: AgentServer::new("roce/in-memory", cc),
            station: Station::new(config.tester_mac, config.tester, peer_ip),
            now: Instant::ZERO,
            inbox: VecDeque::new(),
            buf: vec![0; Host::max_frame_len()],
            tamper: None,
            still: 0,
        }
    }

    /// Changes or drops each frame the peer sends from now on.
    pub fn set_tamper(&mut self, tamper: Tamper) {
        self.tamper = Some(tamper);
    }

    /// The peer's host, for tests.
    pub fn host(&self) -> &Host {
        &self.peer
    }

    /// Moves frames between the peer and the station until neither has anything to say.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(n) = self.peer.poll_transmit(self.now, &mut self.buf) {
                moved = true;
                let mut frame = self.buf[..n].to_vec();
                if let Some(t) = &mut self.tamper
                    && !t(&mut frame)
                {
                    continue;
                }
                if !self.station.on_frame(self.now, &frame) {
                    self.inbox.push_back((self.now, frame));
                }
            }
            while let Some(frame) = self.station.poll_transmit(self.now) {
                moved = true;
                self.peer.handle_frame(self.now, &frame);
            }
            if !moved {
                return;
            }
        }
    }

    /// Runs the next timer due by `deadline`; false (time moved to `deadline`) if none is.
    fn advance(&mut self, deadline: Instant) -> Result<bool, PeerError> {
        let next = [
            self.peer.poll_timeout(self.now),
            self.station.poll_timeout(self.now),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) if t <= deadline => {
                if t <= self.now {
                    self.still += 1;
                    if self.still > MAX_STILL_TURNS {
                        return Err(PeerError::Stuck(self.now));
                    }
                } else {
                    self.still = 0;
                    self.now = t;
                }
                self.peer.handle_timeout(self.now);
                self.station.handle_timeout(self.now);
                Ok(true)
            }
            _ => {
                self.now = self.now.max(deadline);
                Ok(false)
            }
        }
    }
}

impl Peer for VirtualPeer {
    fn now(&self) -> Instant {
        self.now
    }

    fn station(&self) -> &Station {
        &self.station
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<(), PeerError> {
        self.peer.handle_frame(self.now, frame);
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(Instant, Vec<u8>)>, PeerError> {
        loop {
            self.pump();
            if let Some(f) = self.inbox.pop_front() {
                return Ok(Some(f));
            }
            if !self.advance(deadline)? {
                self.pump();
                return Ok(self.inbox.pop_front());
            }
        }
    }

    fn agent(&mut self, line: &str) -> Result<String, PeerError> {
        let deadline = match self.agent.request(SESSION, &mut self.peer, self.now, line) {
            Step::Reply(r) | Step::Close(r) => {
                self.pump();
                return Ok(r);
            }
            Step::Wait(deadline) => deadline,
        };
        loop {
            self.pump();
            if let Some(r) = self.agent.resume(SESSION, &mut self.peer, self.now) {
                return Ok(r);
            }
            if !self.advance(deadline)? && self.now >= deadline {
                let r = self.agent.resume(SESSION, &mut self.peer, self.now);
                return Ok(r.unwrap_or_else(|| "ERR poll did not end".into()));
            }
        }
    }

    fn resolve_peer(&mut self, deadline: Instant) -> Result<Option<[u8; 6]>, PeerError> {
        let now = self.now;
        self.station.resolve(now);
        while self.station.peer_mac().is_none() {
            self.pump();
            if self.station.peer_mac().is_some() || !self.advance(deadline)? {
                break;
            }
        }
        Ok(self.station.peer_mac())
    }
}
