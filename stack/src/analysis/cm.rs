//! rdma_cm connection establishment as seen on the wire: Communication Management MADs (IBA
//! Vol. 1 chapter 12) sent as UD packets to QP1, the general services interface.
//!
//! A MAD is 256 bytes: a 24-byte common header (IBA 13.4.3: base version, management class,
//! class version, method, status, class-specific, transaction ID, attribute ID, reserved,
//! attribute modifier) then the message. The CM class is 0x07; its attribute ID names the
//! message (IBA Table 104). Only the fields that tie QPs together are read: the Local and
//! Remote Communication IDs, the QPNs and starting PSNs of REQ and REP (IBA 12.6.5, 12.6.8),
//! the remote QPN of DREQ (12.6.10) and the reason of REJ (12.6.7).

use core::net::IpAddr;

use crate::wire::{Psn, Qpn};

const MAD_HEADER_LEN: usize = 24;
const MGMT_CLASS_CM: u8 = 0x07;

/// The CM messages, by MAD attribute ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmKind {
    Req,
    Mra,
    Rej,
    Rep,
    Rtu,
    Dreq,
    Drep,
    SidrReq,
    SidrRep,
    Lap,
    Apr,
}

impl CmKind {
    fn from_attribute(id: u16) -> Option<CmKind> {
        Some(match id {
            0x0010 => CmKind::Req,
            0x0011 => CmKind::Mra,
            0x0012 => CmKind::Rej,
            0x0013 => CmKind::Rep,
            0x0014 => CmKind::Rtu,
            0x0015 => CmKind::Dreq,
            0x0016 => CmKind::Drep,
            0x0017 => CmKind::SidrReq,
            0x0018 => CmKind::SidrRep,
            0x0019 => CmKind::Lap,
            0x001a => CmKind::Apr,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            CmKind::Req => "REQ",
            CmKind::Mra => "MRA",
            CmKind::Rej => "REJ",
            CmKind::Rep => "REP",
            CmKind::Rtu => "RTU",
            CmKind::Dreq => "DREQ",
            CmKind::Drep => "DREP",
            CmKind::SidrReq => "SIDR_REQ",
            CmKind::SidrRep => "SIDR_REP",
            CmKind::Lap => "LAP",
            CmKind::Apr => "APR",
        }
    }
}

/// The fields of one CM message that matter for tying QPs together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmMessage {
    pub kind: CmKind,
    pub transaction_id: u64,
    pub local_comm_id: u32,
    /// 0 in a REQ (the peer has not chosen one yet).
    pub remote_comm_id: u32,
    /// REQ/REP: the sender's QP; DREQ: the receiver's QP.
    pub qpn: Option<Qpn>,
    pub start_psn: Option<Psn>,
    pub service_id: Option<u64>,
    /// REJ reason (IBA Table 112).
    pub reject_reason: Option<u16>,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from_be_bytes([0, s[0], s[1], s[2]]))
}

impl CmMessage {
    /// Reads a CM MAD from a UD payload; `None` for any other MAD or a short one.
    pub fn parse(mad: &[u8]) -> Option<CmMessage> {
        if mad.len() < MAD_HEADER_LEN + 8 || mad[1] != MGMT_CLASS_CM {
            return None;
        }
        let kind = CmKind::from_attribute(u16::from_be_bytes([mad[16], mad[17]]))?;
        let transaction_id = u64::from_be_bytes(mad[8..16].try_into().ok()?);
        let m = &mad[MAD_HEADER_LEN..];
        let mut msg = CmMessage {
            kind,
            transaction_id,
            local_comm_id: be32(m, 0)?,
            remote_comm_id: be32(m, 4)?,
            qpn: None,
            start_psn: None,
            service_id: None,
            reject_reason: None,
        };
        match kind {
            CmKind::Req => {
                msg.remote_comm_id = 0;
                let sid = m.get(8..16)?;
                msg.service_id = Some(u64::from_be_bytes(sid.try_into().ok()?));
                msg.qpn = be24(m, 32).map(Qpn::new);
                msg.start_psn = be24(m, 44).map(Psn::new);
            }
            CmKind::Rep => {
                msg.qpn = be24(m, 12).map(Qpn::new);
                msg.start_psn = be24(m, 20).map(Psn::new);
            }
            CmKind::Dreq => msg.qpn = be24(m, 8).map(Qpn::new),
            CmKind::Rej => {
                msg.reject_reason = m.get(10..12).map(|r| u16::from_be_bytes([r[0], r[1]]));
            }
            _ => {}
        }
        Some(msg)
    }
}

/// One CM message as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    pub kind: CmKind,
    pub ts: u64,
    /// True when the client (the REQ's sender) sent it.
    pub from_client: bool,
}

/// Where a connection's handshake stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmState {
    Requested,
    Replied,
    Established,
    Rejected,
    Disconnecting,
    Disconnected,
}

impl CmState {
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
    pub client: IpAddr,
    pub server: IpAddr,
    pub client_comm_id: u32,
    pub server_comm_id: Option<u32>,
    pub service_id: Option<u64>,
    pub client_qpn: Option<Qpn>,
    pub server_qpn: Option<Qpn>,
    pub client_start_psn: Option<Psn>,
    pub server_start_psn: Option<Psn>,
    pub state: CmState,
    pub reject_reason: Option<u16>,
    pub events: Vec<CmEvent>,
}

/// The connections of a capture, matched by Communication ID.
#[derive(Debug, Default)]
pub struct CmTracker {
    connections: Vec<CmConnection>,
}

impl CmTracker {
    /// Applies a message sent from `src` to `dst` at `ts`. Returns the connection's index when
    /// the message tied both QPs together (a REP, or anything after it).
    pub fn message(&mut self, src: IpAddr, dst: IpAddr, ts: u64, m: &CmMessage) -> Option<usize> {
        if m.kind == CmKind::Req {
            let existing = self
                .connections
                .iter()
                .position(|c| c.client == src && c.client_comm_id == m.local_comm_id);
            let i = existing.unwrap_or_else(|| {
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
        // Every later message names the receiver's Communication ID as its Remote one.
        let i = self.connections.iter().rposition(|c| {
            (c.client == dst && c.client_comm_id == m.remote_comm_id)
                || (c.client == src
                    && c.client_comm_id == m.local_comm_id
                    && c.server_comm_id == Some(m.remote_comm_id))
        })?;
        let from_client = self.connections[i].client == src;
        let c = &mut self.connections[i];
        if !from_client && c.server_comm_id.is_none() {
            c.server_comm_id = Some(m.local_comm_id);
        }
        match m.kind {
            CmKind::Rep => {
                c.server_qpn = m.qpn;
                c.server_start_psn = m.start_psn;
                c.state = CmState::Replied;
            }
            CmKind::Rtu => c.state = CmState::Established,
            CmKind::Rej => {
                c.state = CmState::Rejected;
                c.reject_reason = m.reject_reason;
            }
            CmKind::Dreq => c.state = CmState::Disconnecting,
            CmKind::Drep => c.state = CmState::Disconnected,
            _ => {}
        }
        self.push_event(i, m.kind, ts, from_client);
        let c = &self.connections[i];
        (c.client_qpn.is_some() && c.server_qpn.is_some()).then_some(i)
    }

    fn push_event(&mut self, i: usize, kind: CmKind, ts: u64, from_client: bool) {
        let events = &mut self.connections[i].events;
        if events.len() < EVENTS_KEPT {
            events.push(CmEvent {
                kind,
                ts,
                from_client,
            });
        }
    }

    pub fn connections(&self) -> &[CmConnection] {
        &self.connections
    }

    pub fn get(&self, i: usize) -> Option<&CmConnection> {
        self.connections.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CM MAD: `attr` at bytes 16-17, then `fields` written at their offsets in the message.
    pub(crate) fn mad(attr: u16, fields: &[(usize, &[u8])]) -> Vec<u8> {
        let mut m = vec![0u8; 256];
        m[0] = 1;
        m[1] = MGMT_CLASS_CM;
        m[2] = 2;
        m[3] = 0x03;
        m[8..16].copy_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        for (at, bytes) in fields {
            m[MAD_HEADER_LEN + at..MAD_HEADER_LEN + at + bytes.len()].copy_from_slice(bytes);
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
