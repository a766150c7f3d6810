//! Communication management messages (IBA Vol. 1 chapter 12): MADs of class 0x07 that set up
//! and tear down connections between QPs, and resolve service IDs to UD QPs. rdma_cm sends
//! them over RoCEv2 as UD packets to QP1 (Q_Key 0x80010000).
//!
//! Each message is a view plus a `Repr` over the 232 bytes of MAD data after the common
//! header ([`super::mad`]), every field (reserved ones included) declared once with its
//! place, so `parse` then `emit` reproduces every bit. [`CmMadRepr`] is a whole MAD: the
//! header and the message its attribute ID names.

pub mod ip;
pub mod lap;
pub(crate) mod layout;
pub mod release;
pub mod reply;
pub mod req;
pub mod sidr;

pub use ip::{IpCmHeaderRepr, PortSpace, parse_service_id};
pub use lap::{AprRepr, LapRepr};
pub use layout::FieldInfo;
pub use release::{DrepRepr, DreqRepr};
pub use reply::{MraRepr, RejRepr, RepRepr, RtuRepr, message_code};
pub use req::ReqRepr;
pub use sidr::{SidrRepRepr, SidrReqRepr, sidr_status};

use core::time::Duration;

use super::error::{Result, WireError, check_len};
use super::mad::{MAD_DATA_LEN, MAD_LEN, MGMT_CLASS_CM, MadHeaderRepr};
use super::{FixedHeader, Qpn};

/// The CM messages, by MAD attribute ID (IBA 12.6, Table 104).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmAttribute {
    /// ConnectRequest (0x0010).
    Req,
    /// MsgRcptAck (0x0011).
    Mra,
    /// ConnectReject (0x0012).
    Rej,
    /// ConnectReply (0x0013).
    Rep,
    /// ReadyToUse (0x0014).
    Rtu,
    /// DisconnectRequest (0x0015).
    Dreq,
    /// DisconnectReply (0x0016).
    Drep,
    /// ServiceIDResReq (0x0017).
    SidrReq,
    /// ServiceIDResReqResp (0x0018).
    SidrRep,
    /// LoadAlternatePath (0x0019).
    Lap,
    /// AlternatePathResponse (0x001A).
    Apr,
}

impl CmAttribute {
    /// Every CM message, in attribute ID order.
    pub const ALL: [CmAttribute; 11] = [
        CmAttribute::Req,
        CmAttribute::Mra,
        CmAttribute::Rej,
        CmAttribute::Rep,
        CmAttribute::Rtu,
        CmAttribute::Dreq,
        CmAttribute::Drep,
        CmAttribute::SidrReq,
        CmAttribute::SidrRep,
        CmAttribute::Lap,
        CmAttribute::Apr,
    ];

    /// The MAD attribute ID.
    pub const fn id(self) -> u16 {
        0x0010 + self as u16
    }

    /// The message an attribute ID names; `None` for other attributes.
    pub fn from_id(id: u16) -> Option<CmAttribute> {
        CmAttribute::ALL.into_iter().find(|a| a.id() == id)
    }

    /// The short name (REQ, REP, ...).
    pub const fn name(self) -> &'static str {
        match self {
            CmAttribute::Req => "REQ",
            CmAttribute::Mra => "MRA",
            CmAttribute::Rej => "REJ",
            CmAttribute::Rep => "REP",
            CmAttribute::Rtu => "RTU",
            CmAttribute::Dreq => "DREQ",
            CmAttribute::Drep => "DREP",
            CmAttribute::SidrReq => "SIDR_REQ",
            CmAttribute::SidrRep => "SIDR_REP",
            CmAttribute::Lap => "LAP",
            CmAttribute::Apr => "APR",
        }
    }

    /// The spec's long name of the message.
    pub const fn long_name(self) -> &'static str {
        match self {
            CmAttribute::Req => "ConnectRequest",
            CmAttribute::Mra => "MsgRcptAck",
            CmAttribute::Rej => "ConnectReject",
            CmAttribute::Rep => "ConnectReply",
            CmAttribute::Rtu => "ReadyToUse",
            CmAttribute::Dreq => "DisconnectRequest",
            CmAttribute::Drep => "DisconnectReply",
            CmAttribute::SidrReq => "ServiceIDResReq",
            CmAttribute::SidrRep => "ServiceIDResReqResp",
            CmAttribute::Lap => "LoadAlternatePath",
            CmAttribute::Apr => "AlternatePathResponse",
        }
    }

    /// The section of IBA Vol. 1 that defines the message.
    pub const fn section(self) -> &'static str {
        match self {
            CmAttribute::Req => "12.6.5",
            CmAttribute::Mra => "12.6.6",
            CmAttribute::Rej => "12.6.7",
            CmAttribute::Rep => "12.6.8",
            CmAttribute::Rtu => "12.6.9",
            CmAttribute::Dreq => "12.6.10",
            CmAttribute::Drep => "12.6.11",
            CmAttribute::SidrReq => "12.11.1",
            CmAttribute::SidrRep => "12.11.2",
            CmAttribute::Lap => "12.8.1",
            CmAttribute::Apr => "12.8.2",
        }
    }

    /// The message's fields in wire order.
    pub const fn fields(self) -> &'static [FieldInfo] {
        match self {
            CmAttribute::Req => ReqRepr::FIELDS,
            CmAttribute::Mra => MraRepr::FIELDS,
            CmAttribute::Rej => RejRepr::FIELDS,
            CmAttribute::Rep => RepRepr::FIELDS,
            CmAttribute::Rtu => RtuRepr::FIELDS,
            CmAttribute::Dreq => DreqRepr::FIELDS,
            CmAttribute::Drep => DrepRepr::FIELDS,
            CmAttribute::SidrReq => SidrReqRepr::FIELDS,
            CmAttribute::SidrRep => SidrRepRepr::FIELDS,
            CmAttribute::Lap => LapRepr::FIELDS,
            CmAttribute::Apr => AprRepr::FIELDS,
        }
    }
}

/// One CM message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CmMessage {
    /// A REQ.
    Req(ReqRepr),
    /// An MRA.
    Mra(MraRepr),
    /// A REJ.
    Rej(RejRepr),
    /// A REP.
    Rep(RepRepr),
    /// An RTU.
    Rtu(RtuRepr),
    /// A DREQ.
    Dreq(DreqRepr),
    /// A DREP.
    Drep(DrepRepr),
    /// A SIDR_REQ.
    SidrReq(SidrReqRepr),
    /// A SIDR_REP.
    SidrRep(SidrRepRepr),
    /// A LAP.
    Lap(LapRepr),
    /// An APR.
    Apr(AprRepr),
}

impl CmMessage {
    /// Reads the message `attribute` names from the 232 bytes of MAD data.
    pub fn parse(attribute: CmAttribute, data: &[u8]) -> Result<CmMessage> {
        Ok(match attribute {
            CmAttribute::Req => CmMessage::Req(ReqRepr::parse(data)?),
            CmAttribute::Mra => CmMessage::Mra(MraRepr::parse(data)?),
            CmAttribute::Rej => CmMessage::Rej(RejRepr::parse(data)?),
            CmAttribute::Rep => CmMessage::Rep(RepRepr::parse(data)?),
            CmAttribute::Rtu => CmMessage::Rtu(RtuRepr::parse(data)?),
            CmAttribute::Dreq => CmMessage::Dreq(DreqRepr::parse(data)?),
            CmAttribute::Drep => CmMessage::Drep(DrepRepr::parse(data)?),
            CmAttribute::SidrReq => CmMessage::SidrReq(SidrReqRepr::parse(data)?),
            CmAttribute::SidrRep => CmMessage::SidrRep(SidrRepRepr::parse(data)?),
            CmAttribute::Lap => CmMessage::Lap(LapRepr::parse(data)?),
            CmAttribute::Apr => CmMessage::Apr(AprRepr::parse(data)?),
        })
    }

    /// Writes the message into the first 232 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        match self {
            CmMessage::Req(m) => m.emit(buf),
            CmMessage::Mra(m) => m.emit(buf),
            CmMessage::Rej(m) => m.emit(buf),
            CmMessage::Rep(m) => m.emit(buf),
            CmMessage::Rtu(m) => m.emit(buf),
            CmMessage::Dreq(m) => m.emit(buf),
            CmMessage::Drep(m) => m.emit(buf),
            CmMessage::SidrReq(m) => m.emit(buf),
            CmMessage::SidrRep(m) => m.emit(buf),
            CmMessage::Lap(m) => m.emit(buf),
            CmMessage::Apr(m) => m.emit(buf),
        }
    }

    /// Which message this is.
    pub const fn attribute(&self) -> CmAttribute {
        match self {
            CmMessage::Req(_) => CmAttribute::Req,
            CmMessage::Mra(_) => CmAttribute::Mra,
            CmMessage::Rej(_) => CmAttribute::Rej,
            CmMessage::Rep(_) => CmAttribute::Rep,
            CmMessage::Rtu(_) => CmAttribute::Rtu,
            CmMessage::Dreq(_) => CmAttribute::Dreq,
            CmMessage::Drep(_) => CmAttribute::Drep,
            CmMessage::SidrReq(_) => CmAttribute::SidrReq,
            CmMessage::SidrRep(_) => CmAttribute::SidrRep,
            CmMessage::Lap(_) => CmAttribute::Lap,
            CmMessage::Apr(_) => CmAttribute::Apr,
        }
    }

    /// The sender's communication ID (SIDR: the request ID).
    pub fn local_comm_id(&self) -> u32 {
        match self {
            CmMessage::Req(m) => m.local_comm_id,
            CmMessage::Mra(m) => m.local_comm_id,
            CmMessage::Rej(m) => m.local_comm_id,
            CmMessage::Rep(m) => m.local_comm_id,
            CmMessage::Rtu(m) => m.local_comm_id,
            CmMessage::Dreq(m) => m.local_comm_id,
            CmMessage::Drep(m) => m.local_comm_id,
            CmMessage::SidrReq(m) => m.request_id,
            CmMessage::SidrRep(m) => m.request_id,
            CmMessage::Lap(m) => m.local_comm_id,
            CmMessage::Apr(m) => m.local_comm_id,
        }
    }

    /// The receiver's communication ID; `None` for REQ and the SIDR messages, which have
    /// none.
    pub fn remote_comm_id(&self) -> Option<u32> {
        Some(match self {
            CmMessage::Req(_) | CmMessage::SidrReq(_) | CmMessage::SidrRep(_) => return None,
            CmMessage::Mra(m) => m.remote_comm_id,
            CmMessage::Rej(m) => m.remote_comm_id,
            CmMessage::Rep(m) => m.remote_comm_id,
            CmMessage::Rtu(m) => m.remote_comm_id,
            CmMessage::Dreq(m) => m.remote_comm_id,
            CmMessage::Drep(m) => m.remote_comm_id,
            CmMessage::Lap(m) => m.remote_comm_id,
            CmMessage::Apr(m) => m.remote_comm_id,
        })
    }

    /// The QP a message names: the sender's in REQ and REP, the responder's UD QP in
    /// SIDR_REP, the receiver's in DREQ and LAP.
    pub fn qpn(&self) -> Option<Qpn> {
        match self {
            CmMessage::Req(m) => Some(m.local_qpn),
            CmMessage::Rep(m) => Some(m.local_qpn),
            CmMessage::SidrRep(m) => Some(m.qpn),
            CmMessage::Dreq(m) => Some(m.remote_qpn),
            CmMessage::Lap(m) => Some(m.remote_qpn),
            _ => None,
        }
    }

    /// The service ID of REQ, SIDR_REQ and SIDR_REP.
    pub fn service_id(&self) -> Option<u64> {
        match self {
            CmMessage::Req(m) => Some(m.service_id),
            CmMessage::SidrReq(m) => Some(m.service_id),
            CmMessage::SidrRep(m) => Some(m.service_id),
            _ => None,
        }
    }
}

/// A whole CM MAD: common header and message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CmMadRepr {
    /// The MAD common header.
    pub header: MadHeaderRepr,
    /// The message its attribute ID names.
    pub message: CmMessage,
}

impl CmMadRepr {
    /// A CM MAD as Linux's ib_cm sends it: method Send, class version 2, `transaction_id`.
    pub fn new(transaction_id: u64, message: CmMessage) -> CmMadRepr {
        CmMadRepr {
            header: MadHeaderRepr::cm(message.attribute().id(), transaction_id),
            message,
        }
    }

    /// Reads a CM MAD from a UD payload of at least 256 bytes (anything after belongs to the
    /// pad). Fails on a short MAD, another management class, or an attribute ID that is not
    /// a CM message (the class version is the receiver's to judge).
    pub fn parse(mad: &[u8]) -> Result<CmMadRepr> {
        check_len("CM MAD", mad, MAD_LEN)?;
        let header = MadHeaderRepr::parse(mad)?;
        if header.mgmt_class != MGMT_CLASS_CM {
            return Err(WireError::Malformed {
                header: "CM MAD",
                reason: "management class is not communication management (0x07)",
            });
        }
        let attribute = CmAttribute::from_id(header.attribute_id).ok_or(WireError::Malformed {
            header: "CM MAD",
            reason: "attribute ID names no CM message",
        })?;
        let message = CmMessage::parse(attribute, &mad[MadHeaderRepr::LEN..MAD_LEN])?;
        Ok(CmMadRepr { header, message })
    }

    /// Writes the 256-byte MAD into `buf`. The header's attribute ID is written as it is:
    /// keep it the message's (as [`CmMadRepr::new`] does).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_len("CM MAD", buf, MAD_LEN)?;
        self.header.emit(buf)?;
        self.message
            .emit(&mut buf[MadHeaderRepr::LEN..MadHeaderRepr::LEN + MAD_DATA_LEN])
    }

    /// Size on the wire: always a whole MAD.
    pub const fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    /// The MAD as a new 256-byte vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = vec![0; MAD_LEN];
        // The buffer is MAD_LEN long, the only way emit can fail.
        let _ = self.emit(&mut buf);
        buf
    }
}

/// A CM time field (response timeouts, service timeout, ACK timeouts): 4.096 us x 2^value
/// (IBA 12.7.4), capped at value 31 as the fields are 5 bits wide.
pub fn cm_time(value: u8) -> Duration {
    Duration::from_nanos(4096u64 << value.min(31))
}

/// The REJ reasons of IBA 12.6.7 (Table 112), as Linux's `enum ib_cm_rej_reason` numbers
/// them.
pub mod reject_reason {
    /// No QP available.
    pub const NO_QP: u16 = 1;
    /// No resources.
    pub const NO_RESOURCES: u16 = 3;
    /// The REQ's sender gave up (retries exhausted); ARI holds its CA GUID.
    pub const TIMEOUT: u16 = 4;
    /// Unsupported request.
    pub const UNSUPPORTED: u16 = 5;
    /// A message named a communication ID the receiver does not know.
    pub const INVALID_COMM_ID: u16 = 6;
    /// No listener for the REQ's service ID (rdma_cm: nothing listens on that port).
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// The transport service type is not offered.
    pub const INVALID_TRANSPORT_TYPE: u16 = 9;
    /// The REQ's QP is still in an old connection's time-wait.
    pub const STALE_CONN: u16 = 10;
    /// The primary remote GID is not ours.
    pub const INVALID_GID: u16 = 12;
    /// The path MTU cannot be used.
    pub const INVALID_MTU: u16 = 26;
    /// The consumer refused (rdma_reject, or no QP left in its backlog).
    pub const CONSUMER_DEFINED: u16 = 28;
    /// The class version is not supported; ARI holds the highest supported.
    pub const INVALID_CLASS_VERSION: u16 = 31;

    /// The reason's meaning, as Linux's `ibcm_reject_msg` words it.
    pub const fn name(reason: u16) -> &'static str {
        match reason {
            1 => "no QP",
            2 => "no EEC",
            3 => "no resources",
            4 => "timeout",
            5 => "unsupported",
            6 => "invalid comm ID",
            7 => "invalid comm instance",
            8 => "invalid service ID",
            9 => "invalid transport type",
            10 => "stale conn",
            11 => "RDC not exist",
            12 => "invalid GID",
            13 => "invalid LID",
            14 => "invalid SL",
            15 => "invalid traffic class",
            16 => "invalid hop limit",
            17 => "invalid packet rate",
            18 => "invalid alt GID",
            19 => "invalid alt LID",
            20 => "invalid alt SL",
            21 => "invalid alt traffic class",
            22 => "invalid alt hop limit",
            23 => "invalid alt packet rate",
            24 => "port CM redirect",
            25 => "port redirect",
            26 => "invalid MTU",
            27 => "insufficient resp resources",
            28 => "consumer defined",
            29 => "invalid RNR retry",
            30 => "duplicate local comm ID",
            31 => "invalid class version",
            32 => "invalid flow label",
            33 => "invalid alt flow label",
            35 => "vendor option is not supported",
            _ => "unrecognized reason",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::RocePacket;

    /// The MAD of frame `frame` (1-based) of pcaps/rdma_cm_rping.pcap, a real rdma_rxe
    /// capture of rping.
    pub(crate) fn rping_mad(frame: usize) -> Vec<u8> {
        let pcap = include_bytes!("../../../../pcaps/rdma_cm_rping.pcap");
        let mut at = 24;
        for n in 1.. {
            let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
            let data = &pcap[at + 16..at + 16 + len];
            at += 16 + len;
            if n == frame {
                return RocePacket::parse(data).unwrap().payload().to_vec();
            }
        }
        unreachable!()
    }

    #[test]
    fn every_mad_of_rping_parses_and_re_emits_byte_for_byte() {
        let expected = [
            (1, CmAttribute::Req),
            (2, CmAttribute::Rep),
            (3, CmAttribute::Rtu),
            (40, CmAttribute::Dreq),
            (41, CmAttribute::Drep),
        ];
        for (frame, attribute) in expected {
            let mad = rping_mad(frame);
            let parsed = CmMadRepr::parse(&mad).unwrap();
            assert_eq!(parsed.message.attribute(), attribute);
            assert_eq!(parsed.header.transaction_id, 0x0000_0002_3cb2_c50a);
            assert_eq!(parsed.to_vec(), mad, "frame {frame}");
        }
    }

    #[test]
    fn attribute_ids_and_names() {
        assert_eq!(CmAttribute::Req.id(), 0x10);
        assert_eq!(CmAttribute::Apr.id(), 0x1a);
        assert_eq!(CmAttribute::from_id(0x18), Some(CmAttribute::SidrRep));
        assert_eq!(
            CmAttribute::from_id(0x01),
            None,
            "ClassPortInfo is not a message"
        );
        for a in CmAttribute::ALL {
            assert_eq!(CmAttribute::from_id(a.id()), Some(a));
            assert!(!a.fields().is_empty());
        }
        assert_eq!(reject_reason::name(8), "invalid service ID");
        assert_eq!(cm_time(20), Duration::from_nanos(4096 << 20));
    }

    #[test]
    fn bad_mads_are_errors() {
        let mad = rping_mad(1);
        assert!(CmMadRepr::parse(&mad[..255]).is_err(), "truncated");
        let mut other = mad.clone();
        other[1] = 0x03;
        assert!(CmMadRepr::parse(&other).is_err(), "subnet administration");
        let mut unknown = mad.clone();
        unknown[16..18].copy_from_slice(&0x0001u16.to_be_bytes());
        assert!(CmMadRepr::parse(&unknown).is_err(), "ClassPortInfo");
        let mut version = mad;
        version[2] = 1;
        assert!(
            CmMadRepr::parse(&version).is_ok(),
            "versions are the receiver's call"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_emit_identity(attr in 0x10u16..=0x1a, mut raw in proptest::collection::vec(
                proptest::prelude::any::<u8>(), MAD_LEN..MAD_LEN + 8)) {
            raw[1] = MGMT_CLASS_CM;
            raw[16..18].copy_from_slice(&attr.to_be_bytes());
            let parsed = CmMadRepr::parse(&raw).unwrap();
            proptest::prop_assert_eq!(&parsed.to_vec()[..], &raw[..MAD_LEN]);
            proptest::prop_assert_eq!(CmMadRepr::parse(&parsed.to_vec()).unwrap(), parsed);
        }
    }
}
