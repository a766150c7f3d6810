//! A real peer: frames through a device (TAP, AF_XDP) and its agent over TCP, on the
//! monotonic clock. While a request is out to the agent the device keeps being served: the
//! agent's verbs may make the peer's kernel ask ARP for the tester (rdma_rxe resolves the
//! destination's MAC while modifying a QP to RTR) or send packets that must not be lost.

use core::time::Duration;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::peer::{Peer, PeerError};
use super::proto::{MAX_LINE, MAX_POLL_MS};
use super::station::Station;
use crate::io::Device;
use crate::time;

const DEVICE: Token = Token(0);
const AGENT: Token = Token(1);
/// Frames taken from the device per turn.
const RX_BATCH: usize = 64;
/// How long any one agent request may take beyond its own wait: rdma_rxe in an emulated guest
/// is slow, and a modify to RTR waits for ARP.
const AGENT_GRACE: Duration = Duration::from_secs(30);
/// Frames kept for the suite while it is busy elsewhere; beyond this the oldest go (a peer
/// flooding the tester must not exhaust its memory).
const MAX_INBOX: usize = 16_384;
/// How often a device without a descriptor is looked at.
const NO_FD_POLL: Duration = Duration::from_millis(1);

/// See the module documentation.
pub struct DevicePeer {
    device: Box<dyn Device>,
    station: Station,
    agent: TcpStream,
    agent_addr: SocketAddr,
    agent_buf: Vec<u8>,
    poll: Poll,
    events: Events,
    device_fd: bool,
    origin: Instant,
    inbox: VecDeque<(time::Instant, Vec<u8>)>,
    rx: Vec<u8>,
}

impl std::fmt::Debug for DevicePeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePeer")
            .field("agent", &self.agent_addr)
            .finish_non_exhaustive()
    }
}

impl DevicePeer {
    /// Connects to the agent at `agent` (waiting up to `connect_timeout`) and serves `device`
    /// with `station`.
    pub fn connect(
        device: Box<dyn Device>,
        station: Station,
        agent: SocketAddr,
        connect_timeout: Duration,
    ) -> Result<DevicePeer, PeerError> {
        let gone = |why: String| PeerError::AgentGone {
            addr: agent.to_string(),
            why,
        };
        let stream = std::net::TcpStream::connect_timeout(&agent, connect_timeout)
            .map_err(|e| gone(format!("cannot connect: {e}")))?;
        stream
            .set_nonblocking(true)
            .map_err(|e| gone(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let mut stream = TcpStream::from_std(stream);
        let poll = Poll::new().map_err(|e| PeerError::Device(e.to_string()))?;
        poll.registry()
            .register(&mut stream, AGENT, Interest::READABLE)
            .map_err(|e| PeerError::Device(e.to_string()))?;
        let mut device_fd = false;
        if let Some(fd) = device.raw_fd() {
            poll.registry()
                .register(&mut SourceFd(&fd), DEVICE, Interest::READABLE)
                .map_err(|e| PeerError::Device(e.to_string()))?;
            device_fd = true;
        }
        let mtu = device.capabilities().max_frame_len();
        Ok(DevicePeer {
            device,
            station,
            agent: stream,
            agent_addr: agent,
            agent_buf: Vec::new(),
            poll,
            events: Events::with_capacity(8),
            device_fd,
            origin: Instant::now(),
            inbox: VecDeque::new(),
            rx: vec![0; mtu.max(9216)],
        })
    }

    /// The tester's side of the link.
    pub fn station_mut(&mut self) -> &mut Station {
        &mut self.station
    }

    fn gone(&self, why: impl Into<String>) -> PeerError {
        PeerError::AgentGone {
            addr: self.agent_addr.to_string(),
            why: why.into(),
        }
    }

    fn to_instant(&self, t: time::Instant) -> Instant {
        self.origin + Duration::from_nanos(t.as_nanos())
    }

    /// Takes what the device has, answers ARP, sends what the station wants to send.
    fn serve(&mut self) -> Result<(), PeerError> {
        let now = self.now();
        for _ in 0..RX_BATCH {
            match self.device.receive_into(&mut self.rx) {
                Ok(Some(n)) => {
                    if !self.station.on_frame(now, &self.rx[..n]) {
                        if self.inbox.len() >= MAX_INBOX {
                            self.inbox.pop_front();
                        }
                        // Stamped one by one: a batch read late still shows its spacing as
                        // well as the reads allow.
                        let at = self.now();
                        self.inbox.push_back((at, self.rx[..n].to_vec()));
                    }
                }
                Ok(None) => break,
                Err(crate::io::DeviceError::BufferTooSmall { .. }) => continue,
                Err(e) => return Err(PeerError::Device(e.to_string())),
            }
        }
        if self.station.poll_timeout(now).is_some_and(|t| t <= now) {
            self.station.handle_timeout(now);
        }
        while let Some(frame) = self.station.poll_transmit(now) {
            self.send_frame(&frame)?;
        }
        Ok(())
    }

    fn send_frame(&mut self, frame: &[u8]) -> Result<(), PeerError> {
        let err = |e: crate::io::DeviceError| PeerError::Device(e.to_string());
        for _ in 0..1000 {
            if self.device.transmit(frame).map_err(err)? {
                return self.device.flush().map_err(err);
            }
            self.device.flush().map_err(err)?;
            std::thread::sleep(Duration::from_micros(50));
        }
        Err(PeerError::Device("the device accepts no frame".into()))
    }

    /// Sleeps until the device or the agent has something, or `deadline`.
    fn wait(&mut self, deadline: Instant) -> Result<(), PeerError> {
        let now = Instant::now();
        let mut wake = deadline.saturating_duration_since(now);
        if let Some(t) = self.station.poll_timeout(self.now()) {
            wake = wake.min(self.to_instant(t).saturating_duration_since(now));
        }
        if !self.device_fd {
            wake = wake.min(NO_FD_POLL);
        }
        match self.poll.poll(&mut self.events, Some(wake)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(PeerError::Device(format!("event loop: {e}"))),
        }
    }

    /// A whole reply line, if one has arrived.
    fn read_line(&mut self) -> Result<Option<String>, PeerError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(i) = self.agent_buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.agent_buf.drain(..=i).collect();
                let text = String::from_utf8_lossy(&line[..i]);
                return Ok(Some(text.trim_end_matches('\r').to_owned()));
            }
            if self.agent_buf.len() > MAX_LINE + 2 {
                return Err(self.gone("a reply line longer than the protocol allows"));
            }
            match self.agent.read(&mut chunk) {
                Ok(0) => return Err(self.gone("it closed the connection")),
                Ok(n) => self.agent_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.gone(e.to_string())),
            }
        }
    }

    fn write_all(&mut self, mut data: &[u8], deadline: Instant) -> Result<(), PeerError> {
        while !data.is_empty() {
            match self.agent.write(data) {
                Ok(0) => return Err(self.gone("it closed the connection")),
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(self.gone("it stopped reading"));
                    }
                    self.serve()?;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.gone(e.to_string())),
            }
        }
        Ok(())
    }
}

impl Peer for DevicePeer {
    fn now(&self) -> time::Instant {
        time::Instant::from_nanos(
            u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX),
        )
    }

    fn station(&self) -> &Station {
        &self.station
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<(), PeerError> {
        self.send_frame(frame)
    }

    fn receive(
        &mut self,
        deadline: time::Instant,
    ) -> Result<Option<(time::Instant, Vec<u8>)>, PeerError> {
        let until = self.to_instant(deadline);
        loop {
            self.serve()?;
            if let Some(f) = self.inbox.pop_front() {
                return Ok(Some(f));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            self.wait(until)?;
        }
    }

    fn agent(&mut self, line: &str) -> Result<String, PeerError> {
        let limit = AGENT_GRACE + Duration::from_millis(MAX_POLL_MS.into());
        let deadline = Instant::now() + limit;
        let mut out = line.as_bytes().to_vec();
        out.push(b'\n');
        self.write_all(&out, deadline)?;
        loop {
            if let Some(reply) = self.read_line()? {
                return Ok(reply);
            }
            self.serve()?;
            if Instant::now() >= deadline {
                return Err(PeerError::AgentTimeout {
                    addr: self.agent_addr.to_string(),
                    request: line.chars().take(80).collect(),
                    secs: limit.as_secs(),
                });
            }
            self.wait(deadline)?;
        }
    }

    fn resolve_peer(&mut self, deadline: time::Instant) -> Result<Option<[u8; 6]>, PeerError> {
        let now = self.now();
        self.station.resolve(now);
        let until = self.to_instant(deadline);
        while self.station.peer_mac().is_none() && Instant::now() < until {
            self.serve()?;
            if self.station.peer_mac().is_none() {
                self.wait(until)?;
            }
        }
        Ok(self.station.peer_mac())
    }
}
