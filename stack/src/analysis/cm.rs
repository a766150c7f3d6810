//! rdma_cm connection establishment as seen on the wire: Communication Management MADs (IBA
//! Vol. 1 chapter 12) sent as UD packets to QP1, the general services interface.
//!
//! The MADs are read with the wire layer's CM types ([`crate::wire::cm`]); of each message
//! only the fields that tie QPs together are kept: the Local and Remote Communication IDs,
//! the QPNs and starting PSNs of REQ and REP (IBA 12.6.5, 12.6.8), the remote QPN of DREQ
//! (12.6.10) and the reason of REJ (12.6.7).

use core::net::IpAddr;

use crate::wire::cm::{CmAttribute, CmMadRepr, CmMessage as WireMessage};
use crate::wire::{Psn, Qpn};

/// The fields of one CM message that matter for tying QPs together, read with the wire
/// layer's CM types ([`crate::wire::cm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmMessage {
    /// Which message.
    pub kind: CmAttribute,
    /// The MAD's transaction ID.
    pub transaction_id: u64,
    /// The sender's communication ID (SIDR: request ID).
    pub local_comm_id: u32,
    /// 0 in a REQ (the peer has not chosen one yet).
    pub remote_comm_id: u32,
    /// REQ/REP: the sender's QP; DREQ: the receiver's QP.
    pub qpn: Option<Qpn>,
    /// REQ/REP: the sender's starting PSN.
    pub start_psn: Option<Psn>,
    /// REQ: the service asked for.
    pub service_id: Option<u64>,
    /// REJ reason (IBA Table 112).
    pub reject_reason: Option<u16>,
}

impl CmMessage {
    /// Reads a CM MAD from a UD payload; `None` for any other MAD or a short one.
    pub fn parse(mad: &[u8]) -> Option<CmMessage> {
        let parsed = CmMadRepr::parse(mad).ok()?;
        let m = &parsed.message;
        Some(CmMessage {
            kind: m.attribute(),
            transaction_id: parsed.header.transaction_id,
            local_comm_id: m.local_comm_id(),
            remote_comm_id: m.remote_comm_id().unwrap_or(0),
            qpn: match m {
                WireMessage::Req(_) | WireMessage::Rep(_) | WireMessage::Dreq(_) => m.qpn(),
                _ => None,
            },
            start_psn: match m {
                WireMessage::Req(r) => Some(r.starting_psn),
                WireMessage::Rep(r) => Some(r.starting_psn),
                _ => None,
            },
            service_id: match m {
                WireMessage::Req(r) => Some(r.service_id),
                _ => None,
            },
            reject_reason: match m {
                WireMessage::Rej(r) => Some(r.reason),
                _ => None,
            },
        })
    }
}

/// One CM message as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    /// Which message.
    pub kind: CmAttribute,
    /// When it was captured (the capture's clock, nanoseconds).
    pub ts: u64,
    /// True when the client (the REQ's sender) sent it.
    pub from_client: bool,
}

/// Where a connection's handshake stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmState {
    /// The REQ was seen.
    Requested,
    /// The REP was seen.
    Replied,
    /// The RTU was seen.
    Established,
    /// A REJ ended it.
    Rejected,
    /// A DREQ was seen.
    Disconnecting,
    /// The DREP was seen.
    Disconnected,
}

impl CmState {
    /// The state's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            CmState::Requested => "REQUESTED",
            CmState::Replied => "REPLIED",
            CmState::Established => "ESTABLISHED",
            CmState::Rejected => "REJECTED",
            CmState::Disconnecting => "DISCONNECTING",
            CmState::Disconnected => "DISCONNECTED",
        }
    }
}

/// Events kept per connection; a handshake has at most six, retries add a few.
const EVENTS_KEPT: usize = 16;

/// A connection set up by the CM: the client sent the REQ, the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmConnection {
    /// The REQ's sender.
    pub client: IpAddr,
    /// The REQ's receiver.
    pub server: IpAddr,
    /// The client's communication ID.
    pub client_comm_id: u32,
    /// The server's, once it answered.
    pub server_comm_id: Option<u32>,
    /// The service the REQ asked for.
    pub service_id: Option<u64>,
    /// The client's QP (from the REQ).
    pub client_qpn: Option<Qpn>,
    /// The server's QP (from the REP).
    pub server_qpn: Option<Qpn>,
    /// The client's first PSN.
    pub client_start_psn: Option<Psn>,
    /// The server's first PSN.
    pub server_start_psn: Option<Psn>,
    /// Where the handshake stands.
    pub state: CmState,
    /// The REJ's reason, if rejected.
    pub reject_reason: Option<u16>,
    /// The messages seen, in order (at most 16).
    pub events: Vec<CmEvent>,
}

/// Connections tracked at most; REQs for more are counted ([`CmTracker::untracked`]).
pub const MAX_CONNECTIONS: usize = 65_536;

/// The connections of a capture, matched by Communication ID: a connection is known by its
/// client's address and Communication ID, which every later message names (as its Local or
/// its Remote ID), so an index finds it in one step (issue 14: a linear search per message
/// made a capture of 40,000 REQs take seconds).
#[derive(Debug, Default)]
pub struct CmTracker {
    connections: Vec<CmConnection>,
    by_client: std::collections::HashMap<(IpAddr, u32), usize>,
    untracked: u64,
}

impl CmTracker {
    /// Applies a message sent from `src` to `dst` at `ts`. Returns the connection's index when
    /// the message tied both QPs together (a REP, or anything after it).
    pub fn message(&mut self, src: IpAddr, dst: IpAddr, ts: u64, m: &CmMessage) -> Option<usize> {
        if m.kind == CmAttribute::Req {
            let key = (src, m.local_comm_id);
            let existing = self.by_client.get(&key).copied();
            if existing.is_none() && self.connections.len() >= MAX_CONNECTIONS {
                self.untracked += 1;
                return None;
            }
            let i = existing.unwrap_or_else(|| {
                self.by_client.insert(key, self.connections.len());
                self.connections.push(CmConnection {
                    client: src,
                    server: dst,
                    client_comm_id: m.local_comm_id,
                    server_comm_id: None,
                    service_id: m.service_id,
                    client_qpn: m.qpn,
                    server_qpn: None,
                    client_start_psn: m.start_psn,
                    server_start_psn: None,
                    state: CmState::Requested,
                    reject_reason: None,
                    events: Vec::new(),
                });
                self.connections.len() - 1
            });
            self.push_event(i, m.kind, ts, true);
            return None;
        }
        // Every later message names the receiver's Communication ID as its Remote one: the
        // client's when the server sends, the server's (with the client's as its Local) when
        // the client does.
        let from_server = self.by_client.get(&(dst, m.remote_comm_id)).copied();
        let from_client = self
            .by_client
            .get(&(src, m.local_comm_id))
            .copied()
            .filter(|&i| self.connections[i].server_comm_id == Some(m.remote_comm_id));
        let i = from_server.into_iter().chain(from_client).max()?;
        let from_client = self.connections[i].client == src;
        let c = &mut self.connections[i];
        if !from_client && c.server_comm_id.is_none() {
            c.server_comm_id = Some(m.local_comm_id);
        }
        match m.kind {
            CmAttribute::Rep => {
                c.server_qpn = m.qpn;
                c.server_start_psn = m.start_psn;
                c.state = CmState::Replied;
            }
            CmAttribute::Rtu => c.state = CmState::Established,
            CmAttribute::Rej => {
                c.state = CmState::Rejected;
                c.reject_reason = m.reject_reason;
            }
            CmAttribute::Dreq => c.state = CmState::Disconnecting,
            CmAttribute::Drep => c.state = CmState::Disconnected,
            _ => {}
        }
        self.push_event(i, m.kind, ts, from_client);
        let c = &self.connections[i];
        (c.client_qpn.is_some() && c.server_qpn.is_some()).then_some(i)
    }

    fn push_event(&mut self, i: usize, kind: CmAttribute, ts: u64, from_client: bool) {
        let events = &mut self.connections[i].events;
        if events.len() < EVENTS_KEPT {
            events.push(CmEvent {
                kind,
                ts,
                from_client,
            });
        }
    }

    /// REQs of connections beyond [`MAX_CONNECTIONS`].
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// Bytes held, roughly.
    pub fn bytes(&self) -> usize {
        self.connections.capacity() * core::mem::size_of::<CmConnection>()
            + self
                .connections
                .iter()
                .map(|c| c.events.capacity() * core::mem::size_of::<CmEvent>())
                .sum::<usize>()
            + self.by_client.capacity() * 40
    }

    /// Every connection seen, in order of their REQs.
    pub fn connections(&self) -> &[CmConnection] {
        &self.connections
    }

    /// Connection `i`.
    pub fn get(&self, i: usize) -> Option<&CmConnection> {
        self.connections.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CM MAD: `attr` at bytes 16-17, then `fields` written at their offsets in the message.
    pub(crate) fn mad(attr: u16, fields: &[(usize, &[u8])]) -> Vec<u8> {
        let header = crate::wire::mad::MadHeaderRepr::cm(attr, 0x1234_5678_9abc_def0);
        let mut m = vec![0u8; 256];
        crate::wire::FixedHeader::emit(&header, &mut m).unwrap();
        for (at, bytes) in fields {
            m[24 + at..24 + at + bytes.len()].copy_from_slice(bytes);
        }
        m
    }

    #[test]
    fn req_rep_rtu_dreq_drep_tie_two_qps() {
        let (client, server): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let req = mad(
            0x10,
            &[
                (0, &7u32.to_be_bytes()),
                (8, &0x0106_0000_0000_4e20u64.to_be_bytes()),
                (32, &[0, 0, 0x11]),
                (44, &[0x12, 0x34, 0x56]),
            ],
        );
        let rep = mad(
            0x13,
            &[
                (0, &9u32.to_be_bytes()),
                (4, &7u32.to_be_bytes()),
                (12, &[0, 0, 0x12]),
                (20, &[0, 0, 5]),
            ],
        );
        let rtu = mad(0x14, &[(0, &7u32.to_be_bytes()), (4, &9u32.to_be_bytes())]);
        let dreq = mad(0x15, &[(0, &9u32.to_be_bytes()), (4, &7u32.to_be_bytes())]);
        let drep = mad(0x16, &[(0, &7u32.to_be_bytes()), (4, &9u32.to_be_bytes())]);
        let mut cm = CmTracker::default();
        let m = CmMessage::parse(&req).unwrap();
        assert_eq!(m.qpn, Some(Qpn::new(0x11)));
        assert_eq!(m.start_psn, Some(Psn::new(0x123456)));
        assert_eq!(m.service_id, Some(0x0106_0000_0000_4e20));
        assert_eq!(cm.message(client, server, 1, &m), None);
        let tied = cm.message(server, client, 2, &CmMessage::parse(&rep).unwrap());
        assert_eq!(tied, Some(0));
        cm.message(client, server, 3, &CmMessage::parse(&rtu).unwrap());
        assert_eq!(cm.connections()[0].state, CmState::Established);
        cm.message(server, client, 4, &CmMessage::parse(&dreq).unwrap());
        cm.message(client, server, 5, &CmMessage::parse(&drep).unwrap());
        let c = &cm.connections()[0];
        assert_eq!(c.state, CmState::Disconnected);
        assert_eq!(
            (c.client_qpn, c.server_qpn),
            (Some(Qpn::new(0x11)), Some(Qpn::new(0x12)))
        );
        assert_eq!(c.server_comm_id, Some(9));
        let kinds: Vec<_> = c
            .events
            .iter()
            .map(|e| (e.kind.name(), e.from_client))
            .collect();
        assert_eq!(
            kinds,
            [
                ("REQ", true),
                ("REP", false),
                ("RTU", true),
                ("DREQ", false),
                ("DREP", true)
            ]
        );
    }

    #[test]
    fn other_mads_and_short_ones_are_not_cm() {
        let mut m = mad(0x10, &[]);
        m[1] = 0x03;
        assert_eq!(CmMessage::parse(&m), None);
        assert_eq!(CmMessage::parse(&mad(0x10, &[])[..30]), None);
        assert_eq!(CmMessage::parse(&mad(0x0001, &[])), None, "ClassPortInfo");
        let rej = CmMessage::parse(&mad(0x12, &[(10, &[0, 28])])).unwrap();
        assert_eq!(rej.reject_reason, Some(28));
    }
}
