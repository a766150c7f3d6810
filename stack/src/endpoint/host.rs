//! The host: one transport engine on one Ethernet link, sans-IO. It turns the engine's
//! packets into complete RoCEv2 frames (Ethernet, IPv4 or IPv6 by the peer's GID, UDP from
//! the source QP as rxe does, ICRC) and received frames into engine input, after the checks
//! a RoCE NIC makes (addresses, ICRC; IBA Annex A17.4.1 and A17.3.3). It answers and asks ARP
//! and IPv6 neighbour discovery for its addresses, holding frames while a peer's MAC is
//! being resolved.
//!
//! Like the engine it reads no clock: every call takes `now`, so two hosts over an
//! in-memory link run in virtual time, deterministically. The runtime drives one over a
//! real device.

mod gsi;

pub use gsi::HostCmError;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use super::cm::{CmConfig, ConnectionManager, ca_guid_of_mac};
use super::congestion::{CongestionHook, NoCongestionControl};
use super::gid::{GidTable, IpCidr};
use super::neighbor::{Evidence, NeighbourCache, NeighbourConfig, Queued};
use super::resolve::{self, BROADCAST_MAC, Resolution};
use crate::time::Instant;
use crate::transport::{
    DropReason, Engine, MAX_PACKET_LEN, Transmit, TransportConfig, TransportError,
};
use crate::wire::builder::{MAX_UNTAGGED_OVERHEAD, UNTAGGED_IPV4_HEADERS_LEN};
use crate::wire::{
    Bth, BthRepr, CnpRepr, Ecn, ExtHeaders, IbPacketRepr, Opcode, PKey, Psn, Qpn, RoceHeaders,
    RocePacket, RoceRepr, Transport, UdpRepr,
};

/// No ARP or neighbour discovery answer or solicitation is queued while this many frames
/// wait to be sent: a flood of requests, or of addresses to resolve, while the device takes
/// nothing cannot grow the queue (the asker asks again, RFC 826 and RFC 4861 7.2.2; an
/// unsent solicitation is sent again when the entry's retransmission timer fires).
const MAX_WAITING_FOR_ANSWERS: usize = 1024;

/// What a [`Host`] is made with.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// The host's MAC address: frames are sent from it and accepted to it.
    pub mac: [u8; 6],
    /// The host's addresses; the GID table is made from them and the MAC.
    pub addrs: Vec<IpCidr>,
    /// The engine's configuration.
    pub transport: TransportConfig,
    /// The neighbour cache's limits and timers.
    pub neighbour: NeighbourConfig,
    /// The ECN field of every RoCE frame sent: rxe sends Not-ECT; a DCQCN sender ECT(0).
    pub ecn: Ecn,
    /// The DSCP of every RoCE frame sent whose QP's path (a UD message's address handle) gives
    /// no traffic class of its own ([`crate::transport::QpAttrs::traffic_class`], [`crate::transport::UdDest`];
    /// the traffic class's upper six bits, as perftest's
    /// `--tclass` sets them): switches classify by it into a priority, the lossless one for
    /// RoCE. rxe sends 0.
    pub dscp: u8,
    /// The DSCP of the CNPs the notification point sends; `None`: the data's, `dscp`.
    /// RoCE NICs give CNPs a class of their own so that they do not queue behind the
    /// congested data they are about: NVIDIA mlx5 sends them with DSCP 48 unless told
    /// otherwise (`cnp_dscp` in /sys/class/net/IFACE/ecn/roce_np/, firmware CNP_DSCP; the
    /// sources in docs/congestion.md, "The CNP").
    pub cnp_dscp: Option<u8>,
    /// The connection manager behind QP1. The host sets its CA GUID to the MAC's EUI-64 (as
    /// rxe does) and mixes the MAC into its seed, so that two hosts draw different IDs.
    pub cm: CmConfig,
}

impl HostConfig {
    /// A host with `mac` and `addrs` and every other setting at its default.
    pub fn new(mac: [u8; 6], addrs: Vec<IpCidr>) -> HostConfig {
        HostConfig {
            mac,
            addrs,
            transport: TransportConfig::default(),
            neighbour: NeighbourConfig::default(),
            ecn: Ecn::NotEct,
            dscp: 0,
            cnp_dscp: None,
            cm: CmConfig::default(),
        }
    }
}

/// Frames dropped, by reason. Each is counted once, at the first check it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drops {
    /// Addressed to another MAC or another IP address.
    pub not_for_us: u64,
    /// Neither RoCEv2, ARP nor neighbour discovery.
    pub not_roce: u64,
    /// Broken headers at any layer (truncated, inconsistent lengths, bad NDP checksum).
    pub malformed: u64,
    /// RoCEv2 frames whose ICRC did not match.
    pub bad_icrc: u64,
    /// RoCEv2 packets with an IPv4 header the annex makes a receiver drop: a wrong header
    /// checksum, options or DF clear ([`RocePacket::ipv4_violation`]).
    pub bad_ip_header: u64,
    /// RoCEv2 packets for a QP the engine does not have.
    pub unknown_qp: u64,
    /// RoCEv2 packets whose P_Key the QP does not hold.
    pub pkey_mismatch: u64,
    /// UD packets whose Q_Key the QP does not hold.
    pub qkey_mismatch: u64,
    /// Dropped by the engine for another reason (wrong transport, wrong source, QP not
    /// ready, no receive posted on UD, unsupported opcode).
    pub engine_other: u64,
    /// Outgoing frames dropped while resolving their next hop (queue full or no answer).
    pub unresolved: u64,
    /// Outgoing packets to an address on none of our subnets (the host does not route).
    pub no_route: u64,
}

impl Drops {
    /// Every drop, whatever the reason.
    pub fn total(&self) -> u64 {
        self.not_for_us
            + self.not_roce
            + self.malformed
            + self.bad_ip_header
            + self.bad_icrc
            + self.unknown_qp
            + self.pkey_mismatch
            + self.qkey_mismatch
            + self.engine_other
            + self.unresolved
            + self.no_route
    }
}

/// What a host did below the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostStats {
    /// Frames the device handed in.
    pub frames_received: u64,
    /// Frames given to the device.
    pub frames_sent: u64,
    /// RoCEv2 frames that passed the host's checks and went to the engine.
    pub roce_received: u64,
    /// RoCEv2 frames sent, CNPs and QP1 included.
    pub roce_sent: u64,
    /// ARP and NDP messages acted on, and sent (requests, answers).
    pub resolution_received: u64,
    /// ARP and NDP messages sent.
    pub resolution_sent: u64,
    /// MACs the neighbour cache refused (replies to nothing we asked, requests naming
    /// another MAC for a known address, new addresses beyond its limit), and requests left
    /// unanswered while [`MAX_WAITING_FOR_ANSWERS`] frames already wait.
    pub resolution_refused: u64,
    /// CE-marked packets for our QPs (marks on packets for no QP of ours are not counted).
    pub ce_received: u64,
    /// CNPs received for our QPs.
    pub cnps_received: u64,
    /// CNPs sent.
    pub cnps_sent: u64,
    /// Frames dropped, by reason.
    pub drops: Drops,
}

/// A CE-marked packet, as much of it as the CNP that answers it needs.
#[derive(Debug, Clone, Copy)]
struct Marked {
    /// Where it came from.
    peer: IpAddr,
    /// The DETH's source QP (UD): the QP the CNP goes to.
    ud_src_qp: Option<Qpn>,
    /// Its P_Key, which the CNP carries (Annex A17.9.3, Figure 6).
    pkey: PKey,
}

/// One RoCE endpoint on one link: see the module documentation.
#[derive(Debug)]
pub struct Host {
    mac: [u8; 6],
    gids: GidTable,
    ecn: Ecn,
    dscp: u8,
    cnp_dscp: u8,
    engine: Engine,
    neighbours: NeighbourCache,
    /// Frames ready to go before any new engine packet: ARP/NDP, released frames, CNPs;
    /// each with whether it is RoCE.
    ready: VecDeque<(Vec<u8>, bool)>,
    congestion: Box<dyn CongestionHook + Send>,
    /// Per local QP, its last CE-marked packet: where to send a CNP the notification point
    /// defers.
    marked_by: HashMap<Qpn, Marked>,
    /// The connection manager whose MADs QP1 carries.
    cm: ConnectionManager,
    /// The next PSN of QP1's sends.
    gsi_psn: Psn,
    stats: HostStats,
    /// RC FLUSH frames carry rdma_rxe's ICRC, and FLUSH frames with it are accepted
    /// ([`Host::set_rxe_flush_icrc`]).
    rxe_flush_icrc: bool,
}

impl Host {
    /// A host with an empty engine, its GID table and its QP1.
    pub fn new(config: HostConfig) -> Host {
        let mac = config.mac;
        let cm = CmConfig {
            ca_guid: ca_guid_of_mac(mac),
            seed: config.cm.seed
                ^ u64::from_be_bytes([0, 0, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]]),
            ..config.cm
        };
        Host {
            mac: config.mac,
            gids: GidTable::new(config.mac, &config.addrs),
            ecn: config.ecn,
            dscp: config.dscp & 0x3f,
            cnp_dscp: config.cnp_dscp.unwrap_or(config.dscp) & 0x3f,
            engine: Engine::new(config.transport),
            neighbours: NeighbourCache::new(config.neighbour),
            ready: VecDeque::new(),
            congestion: Box::new(NoCongestionControl),
            marked_by: HashMap::new(),
            cm: ConnectionManager::new(cm),
            gsi_psn: gsi::GSI_FIRST_PSN,
            stats: HostStats::default(),
            rxe_flush_icrc: false,
        }
    }

    /// Marks the IP ECN field of the data packets sent from now on (ECT(0) for a DCQCN sender;
    /// CNPs and ARP are never ECN-capable).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }

    /// Plugs in congestion control (see [`CongestionHook`]).
    pub fn set_congestion_control(&mut self, hook: Box<dyn CongestionHook + Send>) {
        self.congestion = hook;
    }

    /// The host's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The GID table.
    pub fn gids(&self) -> &GidTable {
        &self.gids
    }

    /// The engine, to read.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, for verbs: registering memory, creating and connecting QPs, posting.
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Destroys QP `qpn` in the engine and forgets where its congestion marks came from.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), TransportError> {
        self.marked_by.remove(&qpn);
        self.engine.destroy_qp(qpn)
    }

    /// QPs whose last congestion mark is remembered (for a CNP deferred to later).
    pub fn marked_qps(&self) -> usize {
        self.marked_by.len()
    }

    /// Addresses the neighbour cache holds, resolved or not.
    pub fn neighbour_count(&self) -> usize {
        self.neighbours.len()
    }

    /// Frames waiting to be sent before the engine's next packet (answers, solicitations,
    /// frames released by a resolution, CNPs).
    pub fn frames_waiting(&self) -> usize {
        self.ready.len()
    }

    /// What the host did so far.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// The buffer [`Host::poll_transmit`] needs for any frame.
    pub const fn max_frame_len() -> usize {
        MAX_PACKET_LEN + MAX_UNTAGGED_OVERHEAD
    }

    /// The peer's MAC, if resolved.
    pub fn neighbour(&self, addr: IpAddr) -> Option<[u8; 6]> {
        self.neighbours.lookup(addr)
    }

    /// Records that `addr` is at `mac` from another source than ARP or NDP (the kernel's
    /// neighbour table, when the kernel owns the interface's address resolution).
    pub fn add_neighbour(&mut self, addr: IpAddr, mac: [u8; 6]) {
        self.learn(Instant::ZERO, addr, mac, Evidence::External);
    }

    /// Starts resolving `addr` ahead of traffic (the first packet then need not wait).
    /// Returns false if `addr` is on none of our subnets.
    pub fn resolve(&mut self, now: Instant, addr: IpAddr) -> bool {
        if self.gids.source_for(addr).is_none() {
            return false;
        }
        if self.neighbours.lookup(addr).is_none() && self.neighbours.start(now, addr) {
            self.solicit(addr);
        }
        true
    }

    // ---- receive ----

    /// Processes one received Ethernet frame (without FCS).
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.stats.frames_received += 1;
        let Some(dst) = frame.get(..6) else {
            self.stats.drops.malformed += 1;
            return;
        };
        if !self.accepts_mac(dst) {
            self.stats.drops.not_for_us += 1;
            return;
        }
        if let Some(resolution) = resolve::parse(frame) {
            match resolution {
                Ok(r) => self.handle_resolution(now, r),
                Err(resolve::Ignored::Other) => self.stats.drops.not_roce += 1,
                Err(resolve::Ignored::Malformed(_)) => self.stats.drops.malformed += 1,
            }
            return;
        }
        let packet = match RocePacket::parse(frame) {
            Ok(p) => p,
            Err(e) if e.is_not_roce() => {
                self.stats.drops.not_roce += 1;
                return;
            }
            Err(_) => {
                self.stats.drops.malformed += 1;
                return;
            }
        };
        if !self.gids.is_local(packet.ip().dst_addr()) {
            self.stats.drops.not_for_us += 1;
            return;
        }
        // Annex A17.3.4 (CA17-24): a receiver drops a packet whose IPv4 header or ICRC
        // breaks the annex's rules. (rxe leaves the IPv4 header to the kernel, which checks
        // its checksum, and accepts DF clear: tests/conform/expected-rxe.txt.)
        if packet.ipv4_violation().is_some() {
            self.stats.drops.bad_ip_header += 1;
            return;
        }
        // So is a packet whose ICRC does not match (rxe's FLUSH ICRC is taken only where
        // asked for).
        let rxe_flush = self.rxe_flush_icrc && packet.icrc_is_rxe_flush();
        if !packet.icrc_ok() && !rxe_flush {
            self.stats.drops.bad_icrc += 1;
            return;
        }
        self.stats.roce_received += 1;
        // The BTH and extension headers, read once from the checked frame for the engine.
        let ib = packet.ib();
        let bth = ib.bth;
        if bth.dest_qp == Qpn::GSI {
            self.handle_gsi(now, &packet);
            return;
        }
        let src = packet.ip().src_addr();
        // Only marks on our QPs are remembered and answered: a CNP for a QP that does not
        // exist tells its sender nothing, and remembering every QPN that marked packets name
        // would grow with whatever arrives.
        if packet.ecn() == Ecn::Ce && self.engine.query_qp(bth.dest_qp).is_ok() {
            self.stats.ce_received += 1;
            let marked = Marked {
                peer: src,
                ud_src_qp: ib.ext.deth.map(|d| d.src_qp),
                pkey: bth.pkey,
            };
            self.marked_by.insert(bth.dest_qp, marked);
            if self.congestion.on_congestion_experienced(now, bth.dest_qp) {
                self.queue_cnp(now, bth.dest_qp, marked);
            }
        }
        let ip_header = &frame[packet.ip_offset()..packet.udp_offset()];
        match self.engine.handle_parsed(now, src, ip_header, &ib) {
            // The first packet on a QP whose REP waits for its RTU establishes it.
            Ok(()) if self.cm.awaits_rtu(bth.dest_qp) => self.cm.qp_active(bth.dest_qp),
            Ok(()) => {}
            Err(DropReason::Cnp) => {
                self.stats.cnps_received += 1;
                self.congestion.on_cnp(now, bth.dest_qp);
            }
            Err(reason) => self.count_engine_drop(reason),
        }
    }

    fn count_engine_drop(&mut self, reason: DropReason) {
        let d = &mut self.stats.drops;
        match reason {
            DropReason::UnknownQp(_) => d.unknown_qp += 1,
            DropReason::PKeyMismatch => d.pkey_mismatch += 1,
            DropReason::QKeyMismatch => d.qkey_mismatch += 1,
            DropReason::Malformed(_) | DropReason::UnsupportedVersion(_) => d.malformed += 1,
            _ => d.engine_other += 1,
        }
    }

    /// Our MAC, broadcast, or the IPv6 multicast groups we are in: all-nodes and the
    /// solicited-node group of each IPv6 address.
    fn accepts_mac(&self, dst: &[u8]) -> bool {
        if dst == self.mac || dst == BROADCAST_MAC {
            return true;
        }
        if dst[..2] != [0x33, 0x33] {
            return false;
        }
        dst[2..] == [0, 0, 0, 1]
            || self.gids.entries().iter().any(|e| match e.addr() {
                IpAddr::V6(v6) => resolve::multicast_mac(resolve::solicited_node(v6)) == dst[..6],
                IpAddr::V4(_) => false,
            })
    }

    fn handle_resolution(&mut self, now: Instant, r: Resolution) {
        self.stats.resolution_received += 1;
        match r {
            Resolution::Request {
                sender,
                sender_mac,
                target,
            } => {
                // RFC 826's merge: a request refreshes the asker's entry, and creates it
                // when it asks for us (RFC 4861 7.2.3 likewise for a solicitation); the
                // cache never lets it change a known MAC (`neighbor.rs`).
                let for_us = self.gids.is_local(target);
                let known = self.neighbours.knows(sender);
                if (for_us || known) && self.gids.source_for(sender).is_some() {
                    self.learn(now, sender, sender_mac, Evidence::Request);
                }
                if for_us {
                    self.answer(target, sender, sender_mac);
                }
            }
            Resolution::Reply { addr, mac } => {
                if self.gids.source_for(addr).is_some() {
                    self.learn(now, addr, mac, Evidence::Reply);
                }
            }
        }
    }

    fn learn(&mut self, now: Instant, addr: IpAddr, mac: [u8; 6], evidence: Evidence) {
        match self.neighbours.learn(now, addr, mac, evidence) {
            Ok(released) => self.ready.extend(released.into_iter().map(|f| (f, true))),
            Err(_) => self.stats.resolution_refused += 1,
        }
    }

    fn answer(&mut self, ours: IpAddr, to: IpAddr, to_mac: [u8; 6]) {
        let frame = match (ours, to) {
            (IpAddr::V4(ours), IpAddr::V4(to)) => resolve::arp_reply(self.mac, ours, to_mac, to),
            (IpAddr::V6(ours), IpAddr::V6(to)) => {
                resolve::neighbour_advertisement(self.mac, ours, to_mac, to)
            }
            _ => return,
        };
        if self.ready.len() >= MAX_WAITING_FOR_ANSWERS {
            self.stats.resolution_refused += 1;
            return;
        }
        self.stats.resolution_sent += 1;
        self.ready.push_back((frame, false));
    }

    /// Queues an ARP request or neighbour solicitation for `addr`.
    fn solicit(&mut self, addr: IpAddr) {
        let frame = match (addr, self.gids.source_for(addr)) {
            (IpAddr::V4(target), Some(IpAddr::V4(src))) => {
                resolve::arp_request(self.mac, src, target)
            }
            (IpAddr::V6(target), Some(IpAddr::V6(src))) => {
                resolve::neighbour_solicitation(self.mac, src, target)
            }
            _ => return,
        };
        if self.ready.len() >= MAX_WAITING_FOR_ANSWERS {
            return;
        }
        self.stats.resolution_sent += 1;
        self.ready.push_back((frame, false));
    }

    /// A CNP to the QP whose traffic was marked (Annex A17.9.3, CA17-44 and its Figure 6):
    /// for a connected QP its peer QP, for UD the DETH's source QP; PSN 0, SE and M clear,
    /// the marked packet's P_Key. BECN set, as NICs send it (the annex does not ask for it).
    fn queue_cnp(&mut self, now: Instant, local: Qpn, marked: Marked) {
        let Marked {
            peer,
            ud_src_qp,
            pkey,
        } = marked;
        let dest_qp = match ud_src_qp {
            Some(q) => q,
            None => match self.engine.query_qp(local) {
                Ok((_, attrs)) => attrs.dest_qp,
                Err(_) => return,
            },
        };
        let mut bth = BthRepr::new(Opcode::CNP, dest_qp, Psn::new(0));
        bth.becn = true;
        bth.pkey = pkey;
        let ext = ExtHeaders {
            cnp: Some(CnpRepr::default()),
            ..ExtHeaders::default()
        };
        let ib = IbPacketRepr::new(bth, ext, &[]);
        let Some(src) = self.gids.source_for(peer) else {
            return;
        };
        let Some(mut repr) = RoceRepr::rxe(self.mac, [0; 6], src, peer, local, ib) else {
            return;
        };
        // The CNP's class: the traffic's it answers unless given its own. Its ECN stays
        // Not-ECT (a CNP is not ECN-capable); the ICRC masks both fields.
        repr = repr.with_dscp(self.cnp_dscp);
        // The CNP takes the flow of the traffic it answers, so that it follows the same path.
        let transport = if ud_src_qp.is_some() {
            Transport::Ud
        } else {
            Transport::Rc
        };
        let flow_label = self.engine.query_qp(local).map_or(0, |(_, a)| a.flow_label);
        repr.udp = udp_for(transport, local, dest_qp, flow_label);
        if let Ok(frame) = repr.to_vec() {
            self.stats.cnps_sent += 1;
            self.route(now, peer, frame);
        }
    }

    /// Sends `frame` (destination MAC still to fill in) to `next_hop`, or queues it.
    fn route(&mut self, now: Instant, next_hop: IpAddr, mut frame: Vec<u8>) {
        match self.neighbours.lookup(next_hop) {
            Some(mac) => {
                frame[..6].copy_from_slice(&mac);
                self.ready.push_back((frame, true));
            }
            None => self.hold(now, next_hop, frame),
        }
    }

    fn hold(&mut self, now: Instant, next_hop: IpAddr, frame: Vec<u8>) {
        match self.neighbours.enqueue(now, next_hop, frame) {
            Queued::Solicit => self.solicit(next_hop),
            Queued::Waiting => {}
            Queued::DroppedOldest | Queued::NoRoom => self.stats.drops.unresolved += 1,
        }
    }

    // ---- transmit ----

    /// Writes the next frame to send into `buf` (at least [`Host::max_frame_len`] bytes)
    /// and returns its length; `None` when nothing is ready now.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        loop {
            if let Some((frame, roce)) = self.ready.pop_front() {
                let Some(dst) = buf.get_mut(..frame.len()) else {
                    continue;
                };
                dst.copy_from_slice(&frame);
                self.stats.frames_sent += 1;
                self.stats.roce_sent += u64::from(roce);
                return Some(frame.len());
            }
            if self.transmit_mads(now) {
                continue;
            }
            let congestion = &self.congestion;
            let may_send = |qpn| congestion.next_send_time(now, qpn).is_none_or(|t| t <= now);
            // The engine writes its packet where an IPv4 frame's headers end, so that it
            // is not copied again when the frame is built around it.
            let packet_buf = buf.get_mut(UNTAGGED_IPV4_HEADERS_LEN..)?;
            let t = self.engine.poll_transmit_gated(now, packet_buf, may_send)?;
            if let Some(n) = self.frame(now, t, buf) {
                self.stats.frames_sent += 1;
                self.stats.roce_sent += 1;
                self.congestion.on_sent(now, t.src_qp, n);
                return Some(n);
            }
        }
    }

    /// Wraps the engine's packet, written in `buf` at [`UNTAGGED_IPV4_HEADERS_LEN`], in its
    /// frame there (an IPv6 packet moves up to make room for the longer header): the frame in
    /// `buf` if the next hop is known, else into the neighbour queue (then `None`).
    fn frame(&mut self, now: Instant, t: Transmit, buf: &mut [u8]) -> Option<usize> {
        let Some(src) = self.gids.source_for(t.dest) else {
            self.stats.drops.no_route += 1;
            return None;
        };
        let at = UNTAGGED_IPV4_HEADERS_LEN;
        // The engine wrote a well-formed packet; only its opcode is needed here (a full parse
        // per packet sent cost more than the field). Without a BTH it cannot be sent.
        let opcode = Bth::new_checked(buf.get(at..at + t.len)?).ok()?.opcode();
        let next_hop = self.neighbours.lookup(t.dest);
        let mut headers =
            RoceHeaders::rxe(self.mac, next_hop.unwrap_or([0; 6]), src, t.dest, t.src_qp)?;
        headers.ip.set_ecn(self.ecn);
        // Annex A17 CA17-4, CA17-9: DSCP and TTL from the QP's address vector (a UD work
        // request's address handle).
        headers
            .ip
            .set_dscp(t.traffic_class.map_or(self.dscp, |tc| tc >> 2));
        headers.ip.set_ttl(t.hop_limit);
        headers.udp = udp_for(opcode.transport(), t.src_qp, t.dest_qp, t.flow_label);
        if buf.len() < headers.frame_len(t.len) {
            return None;
        }
        if headers.len() != at {
            buf.copy_within(at..at + t.len, headers.len());
        }
        let n = headers.emit_around(buf, t.len).ok()?;
        if self.rxe_flush_icrc
            && opcode == Opcode::new(Transport::Rc, crate::wire::opcode::op::FLUSH)
        {
            let ip_len = headers.ip_len(t.len);
            crate::wire::icrc::fill_rxe_flush(&mut buf[n - ip_len..n]).ok()?;
        }
        if next_hop.is_none() {
            self.hold(now, t.dest, buf[..n].to_vec());
            return None;
        }
        Some(n)
    }

    /// Interoperate with rdma_rxe's FLUSH (Linux 6.2 through at least 6.12), whose ICRC
    /// hashes its headers twice ([`crate::wire::icrc::compute_rxe_flush`]): send RC FLUSH
    /// with that ICRC and accept FLUSH frames carrying it (besides the spec's). Off by
    /// default: a peer following the spec drops such FLUSH frames.
    pub fn set_rxe_flush_icrc(&mut self, on: bool) {
        self.rxe_flush_icrc = on;
    }

    // ---- timers ----

    /// The earliest time [`Host::handle_timeout`] has work: the engine's timers, neighbour
    /// retries, congestion control, or the pacing gate reopening.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let pacing = self.congestion.next_release(now).filter(|&t| t > now);
        [
            self.engine.poll_timeout(),
            self.neighbours.poll_timeout(),
            self.congestion.next_timer(),
            self.cm.poll_timeout(),
            pacing,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs every timer due at `now`: the engine's, the connection manager's, the neighbour
    /// cache's and congestion control's.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now, &mut self.engine);
        }
        if self.congestion.next_timer().is_some_and(|t| t <= now) {
            self.congestion.on_timer(now);
        }
        while let Some(qpn) = self.congestion.poll_cnp(now) {
            if self.engine.query_qp(qpn).is_err() {
                self.marked_by.remove(&qpn); // destroyed since the mark
            } else if let Some(&marked) = self.marked_by.get(&qpn) {
                self.queue_cnp(now, qpn, marked);
            }
        }
        let mut ask = Vec::new();
        let dropped = self.neighbours.handle_timeout(now, |addr| ask.push(addr));
        self.stats.drops.unresolved += dropped as u64;
        for addr in ask {
            self.solicit(addr);
        }
    }
}

/// The UDP header rxe gives a QP's packets: RC and UC QPs take the port `rdma_get_udp_sport`
/// derives from the path's flow label (rdma_cm sets one), else from both QPNs, when they
/// reach RTR (shared by both directions of the connection);
/// UD QPs keep the one derived from their own QPN at creation (docs/headers.md, checked against
/// real rxe captures).
fn udp_for(transport: Transport, local: Qpn, remote: Qpn, flow_label: u32) -> UdpRepr {
    match transport {
        Transport::Rc | Transport::Uc => UdpRepr::rxe_connected(flow_label, local, remote),
        _ => UdpRepr::rxe(local),
    }
}
