//! Management datagrams (IBA Vol. 1 13.4): the 256-byte messages of the general services
//! interface, sent as UD packets to QP1 with the well-known Q_Key
//! [`DethRepr::GSI_QKEY`](super::DethRepr::GSI_QKEY) (13.5.1). Every
//! MAD starts with the 24-byte common header (13.4.3, Figure 147):
//!
//! ```text
//!  byte 0       BaseVersion (1)
//!  byte 1       MgmtClass (0x07: communication management)
//!  byte 2       ClassVersion (2 for the CM)
//!  byte 3       R (bit 7: a response) | Method (bits 6-0; the CM uses only Send, 0x03)
//!  bytes 4-5    Status
//!  bytes 6-7    ClassSpecific
//!  bytes 8-15   TransactionID: the requester's; responses copy it
//!  bytes 16-17  AttributeID: which message of the class (REQ, REP, ...)
//!  bytes 18-19  Reserved
//!  bytes 20-23  AttributeModifier
//! ```
//!
//! The class's message fills the remaining 232 bytes (the MAD data).

use super::FixedHeader;
use super::cm::FieldInfo;
use super::field::{self, PKey, Psn, Qpn};
use super::header::header_view;
use super::opcode::op;
use super::{BthRepr, DethRepr, ExtHeaders, IbPacketRepr, Opcode, Transport};

/// Size of every MAD on the wire (IBA 13.4.1): the UD payload of a GSI packet.
pub const MAD_LEN: usize = 256;
/// Size of the MAD data that follows the common header.
pub const MAD_DATA_LEN: usize = MAD_LEN - MadHeaderRepr::LEN;
/// The only base version (IBA 13.4.3).
pub const BASE_VERSION: u8 = 1;
/// Management class of communication management (IBA Table 145).
pub const MGMT_CLASS_CM: u8 = 0x07;
/// The CM class version this stack (and Linux's ib_cm) speaks.
pub const CM_CLASS_VERSION: u8 = 2;
/// Method Send: a message that expects no MAD-layer response (IBA Table 147).
pub const METHOD_SEND: u8 = 0x03;

header_view! {
    /// A view over the 24-byte MAD common header.
    MadHeader, MadHeaderRepr,
    field_at {
        BASE_VERSION = 0, MGMT_CLASS = 1, CLASS_VERSION = 2, METHOD = 3, STATUS = 4,
        CLASS_SPECIFIC = 6, TRANSACTION_ID = 8, ATTRIBUTE_ID = 16, RESERVED = 18,
        ATTRIBUTE_MODIFIER = 20,
    }
}

impl<T: AsRef<[u8]>> MadHeader<T> {
    /// Byte 0: the MAD format version.
    pub fn base_version(&self) -> u8 {
        self.bytes()[field_at::BASE_VERSION]
    }
    /// Byte 1: the management class.
    pub fn mgmt_class(&self) -> u8 {
        self.bytes()[field_at::MGMT_CLASS]
    }
    /// Byte 2: the class's version.
    pub fn class_version(&self) -> u8 {
        self.bytes()[field_at::CLASS_VERSION]
    }
    /// The whole byte 3: the response bit and the method.
    pub fn method(&self) -> u8 {
        self.bytes()[field_at::METHOD]
    }
    /// Bytes 4-5: status of a response.
    pub fn status(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::STATUS)
    }
    /// Bytes 6-7: for the class's use.
    pub fn class_specific(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::CLASS_SPECIFIC)
    }
    /// Bytes 8-15: the transaction ID.
    pub fn transaction_id(&self) -> u64 {
        field::read_u64(self.bytes(), field_at::TRANSACTION_ID)
    }
    /// Bytes 16-17: which of the class's attributes (messages).
    pub fn attribute_id(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::ATTRIBUTE_ID)
    }
    /// Bytes 18-19.
    pub fn reserved(&self) -> u16 {
        field::read_u16(self.bytes(), field_at::RESERVED)
    }
    /// Bytes 20-23: the attribute modifier.
    pub fn attribute_modifier(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::ATTRIBUTE_MODIFIER)
    }
}

/// The MAD common header (IBA 13.4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadHeaderRepr {
    /// The MAD format version (1).
    pub base_version: u8,
    /// The management class (0x07 for the CM).
    pub mgmt_class: u8,
    /// The class's version (2 for the CM).
    pub class_version: u8,
    /// Byte 3 as sent: bit 7 says the MAD is a response, bits 6-0 are the method.
    pub method: u8,
    /// Status of a response (0 in requests).
    pub status: u16,
    /// For the class's use (unused by the CM).
    pub class_specific: u16,
    /// Matches responses to requests.
    pub transaction_id: u64,
    /// Which attribute (message) of the class.
    pub attribute_id: u16,
    /// Reserved.
    pub reserved: u16,
    /// Qualifies the attribute (unused by the CM).
    pub attribute_modifier: u32,
}

const fn at(name: &'static str, byte: usize, bit: u32, width: u32, doc: &'static str) -> FieldInfo {
    FieldInfo::new(name, byte, bit, width, doc)
}

impl MadHeaderRepr {
    /// The header's fields in wire order (IBA Figure 147), for decoders.
    pub const FIELDS: &'static [FieldInfo] = &[
        at(
            "BaseVersion",
            field_at::BASE_VERSION,
            0,
            8,
            "MAD format version (1)",
        ),
        at(
            "MgmtClass",
            field_at::MGMT_CLASS,
            0,
            8,
            "the management class",
        ),
        at(
            "ClassVersion",
            field_at::CLASS_VERSION,
            0,
            8,
            "the class's message version (CM: 2)",
        ),
        at("R", field_at::METHOD, 0, 1, "1 in a response"),
        at(
            "Method",
            field_at::METHOD,
            1,
            7,
            "what to do with the attribute",
        ),
        at("Status", field_at::STATUS, 0, 16, "0: no error"),
        at(
            "ClassSpecific",
            field_at::CLASS_SPECIFIC,
            0,
            16,
            "for the class's use (unused by the CM)",
        ),
        at(
            "TransactionID",
            field_at::TRANSACTION_ID,
            0,
            64,
            "the requester's; responses copy it",
        ),
        at(
            "AttributeID",
            field_at::ATTRIBUTE_ID,
            0,
            16,
            "which of the class's messages",
        ),
        at("Reserved", field_at::RESERVED, 0, 16, "reserved"),
        at(
            "AttributeModifier",
            field_at::ATTRIBUTE_MODIFIER,
            0,
            32,
            "qualifies the attribute (CM: ECE options)",
        ),
    ];

    /// The header of a CM message: base version 1, class 0x07 version 2, method Send.
    pub const fn cm(attribute_id: u16, transaction_id: u64) -> MadHeaderRepr {
        MadHeaderRepr {
            base_version: BASE_VERSION,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            transaction_id,
            attribute_id,
            reserved: 0,
            attribute_modifier: 0,
        }
    }

    /// True when the R bit marks this MAD as a response to a request.
    pub const fn is_response(&self) -> bool {
        self.method & 0x80 != 0
    }

    /// The method without the response bit.
    pub const fn method_number(&self) -> u8 {
        self.method & 0x7f
    }

    /// The spec's name of the method (IBA Table 147), or `None` for one it does not define.
    pub const fn method_name(&self) -> Option<&'static str> {
        Some(match self.method {
            0x01 => "Get",
            0x02 => "Set",
            0x03 => "Send",
            0x05 => "Trap",
            0x06 => "Report",
            0x07 => "TrapRepress",
            0x81 => "GetResp",
            0x86 => "ReportResp",
            _ => return None,
        })
    }

    /// The spec's name of the management class (IBA Table 145), or `None`.
    pub const fn class_name(&self) -> Option<&'static str> {
        Some(match self.mgmt_class {
            0x01 | 0x81 => "subnet management",
            0x03 => "subnet administration",
            0x04 => "performance management",
            0x05 => "baseboard management",
            0x06 => "device management",
            0x07 => "communication management",
            0x08 => "SNMP tunneling",
            0x10 => "application specific (IP over IB)",
            _ => return None,
        })
    }
}

impl FixedHeader for MadHeaderRepr {
    const NAME: &'static str = "MAD";
    const LEN: usize = 24;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = MadHeader { buffer: buf };
        MadHeaderRepr {
            base_version: v.base_version(),
            mgmt_class: v.mgmt_class(),
            class_version: v.class_version(),
            method: v.method(),
            status: v.status(),
            class_specific: v.class_specific(),
            transaction_id: v.transaction_id(),
            attribute_id: v.attribute_id(),
            reserved: v.reserved(),
            attribute_modifier: v.attribute_modifier(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[field_at::BASE_VERSION] = self.base_version;
        buf[field_at::MGMT_CLASS] = self.mgmt_class;
        buf[field_at::CLASS_VERSION] = self.class_version;
        buf[field_at::METHOD] = self.method;
        field::write_u16(buf, field_at::STATUS, self.status);
        field::write_u16(buf, field_at::CLASS_SPECIFIC, self.class_specific);
        field::write_u64(buf, field_at::TRANSACTION_ID, self.transaction_id);
        field::write_u16(buf, field_at::ATTRIBUTE_ID, self.attribute_id);
        field::write_u16(buf, field_at::RESERVED, self.reserved);
        field::write_u32(buf, field_at::ATTRIBUTE_MODIFIER, self.attribute_modifier);
    }
}

/// The IB packet that carries `mad` from QP1 to QP1 (IBA 13.5.1): a UD SEND_ONLY with
/// AckReq set (as rxe sends them), partition `pkey`, and a DETH with the GSI Q_Key.
pub fn gsi_packet(psn: Psn, pkey: PKey, mad: &[u8]) -> IbPacketRepr<'_> {
    let mut bth = BthRepr::new(Opcode::new(Transport::Ud, op::SEND_ONLY), Qpn::GSI, psn);
    bth.ack_req = true;
    bth.pkey = pkey;
    let ext = ExtHeaders {
        deth: Some(DethRepr {
            qkey: DethRepr::GSI_QKEY,
            resv: 0,
            src_qp: Qpn::GSI,
        }),
        ..ExtHeaders::default()
    };
    IbPacketRepr::new(bth, ext, mad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn rping_req_header() {
        // pcaps/rdma_cm_rping.pcap, frame 1: the MAD header of rxe's ConnectRequest.
        let bytes = [
            0x01, 0x07, 0x02, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x3c, 0xb2, 0xc5, 0x0a, 0x00, 0x10,
            0, 0, 0, 0, 0, 0,
        ];
        let h = MadHeaderRepr::parse(&bytes).unwrap();
        assert_eq!(h, MadHeaderRepr::cm(0x0010, 0x0000_0002_3cb2_c50a));
        assert_eq!(h.method_name(), Some("Send"));
        assert!(!h.is_response());
        assert_eq!(h.class_name(), Some("communication management"));
    }

    #[test]
    fn fields_tile_the_header() {
        crate::wire::cm::layout::assert_fields_tile_len(MadHeaderRepr::FIELDS, MadHeaderRepr::LEN);
    }

    round_trip_proptest!(MadHeaderRepr);
}
