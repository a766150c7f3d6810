//! The tester's presence on the link: its MAC and address, answering ARP and neighbour
//! discovery for them and resolving the peer's MAC, so that the peer can send to the tester's
//! made-up queue pairs. It is a [`Host`] with no queue pairs: the same resolution code as the
//! endpoint, and nothing that could answer a RoCE packet behind the checks' backs.

use std::net::IpAddr;

use crate::endpoint::resolve;
use crate::endpoint::{Host, HostConfig, IpCidr};
use crate::time::Instant;

/// See the module documentation.
#[derive(Debug)]
pub struct Station {
    host: Host,
    ip: IpAddr,
    peer: IpAddr,
    buf: Vec<u8>,
}

impl Station {
    /// A station at `mac` and `addr` that talks to `peer`.
    pub fn new(mac: [u8; 6], addr: IpCidr, peer: IpAddr) -> Station {
        Station {
            host: Host::new(HostConfig::new(mac, vec![addr])),
            ip: addr.addr(),
            peer,
            buf: vec![0; Host::max_frame_len()],
        }
    }

    /// The tester's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.host.mac()
    }

    /// The tester's address.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The peer's address.
    pub fn peer(&self) -> IpAddr {
        self.peer
    }

    /// The peer's MAC, once resolved.
    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        self.host.neighbour(self.peer)
    }

    /// Records the peer's MAC learnt elsewhere (the kernel's neighbour table, on AF_XDP where
    /// the kernel keeps ARP).
    pub fn add_peer_mac(&mut self, mac: [u8; 6]) {
        self.host.add_neighbour(self.peer, mac);
    }

    /// Asks for the peer's MAC (again). False if the peer is on none of the tester's subnets.
    pub fn resolve(&mut self, now: Instant) -> bool {
        self.host.resolve(now, self.peer)
    }

    /// Takes a received frame: ARP and neighbour discovery are the station's (true); anything
    /// else is for the caller (false).
    pub fn on_frame(&mut self, now: Instant, frame: &[u8]) -> bool {
        if resolve::parse(frame).is_none() {
            return false;
        }
        self.host.handle_frame(now, frame);
        true
    }

    /// The next frame the station wants to send (an answer, a question).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let n = self.host.poll_transmit(now, &mut self.buf)?;
        Some(self.buf[..n].to_vec())
    }

    /// When the station next has work (a resolution to retry).
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.host.poll_timeout(now)
    }

    /// Runs the station's due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.host.handle_timeout(now);
    }
}
