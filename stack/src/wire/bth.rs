//! Base Transport Header (IBA Vol. 1 9.2; FECN and BECN from IBA congestion control, which
//! RoCEv2 Annex A17.9.3 ties to the IP header's ECN).
//!
//! ```text
//!  byte 0     opcode
//!  byte 1     SE(7) M(6) PadCnt(5..4) TVer(3..0)
//!  bytes 2-3  P_Key
//!  byte 4     FECN(7) BECN(6) Resv6(5..0)      (RoCEv2; all 8 bits masked in the ICRC)
//!  bytes 5-7  DestQP
//!  byte 8     AckReq(7) Resv7(6..0)
//!  bytes 9-11 PSN
//! ```

use super::FixedHeader;
use super::ce::ip_offset;
use super::encap::{
    IP_PROTOCOL_UDP, IPV6_HEADER_LEN, ROCEV2_UDP_PORT, UDP_HEADER_LEN, field_at as at,
    ipv4_header_len,
};
use super::field::{self, FieldInfo, PKey, Psn, Qpn};
use super::header::header_view;
use super::opcode::Opcode;

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACK_REQ: u8 = 0x80;

header_view! {
    /// A view over the 12 bytes of a BTH.
    Bth, BthRepr,
    field_at { OPCODE = 0, FLAGS = 1, PKEY = 2, ECN = 4, DEST_QP = 5, ACK_REQ = 8, PSN = 9 }
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// The operation code: transport and operation.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.bytes()[field_at::OPCODE])
    }
    /// Solicited event: the responder should raise a completion event for this message.
    pub fn solicited(&self) -> bool {
        self.bytes()[field_at::FLAGS] & SE != 0
    }
    /// Migration request (automatic path migration).
    pub fn mig_req(&self) -> bool {
        self.bytes()[field_at::FLAGS] & MIG_REQ != 0
    }
    /// Number of pad bytes (0-3) between the payload and the ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.bytes()[field_at::FLAGS] >> 4) & 0x3
    }
    /// Transport header version; 0 is the only one defined.
    pub fn tver(&self) -> u8 {
        self.bytes()[field_at::FLAGS] & 0x0f
    }
    /// The partition key.
    pub fn pkey(&self) -> PKey {
        PKey(field::read_u16(self.bytes(), field_at::PKEY))
    }
    /// Forward explicit congestion notification (RoCEv2 reuses the IB bit; IP ECN is the usual signal).
    pub fn fecn(&self) -> bool {
        self.bytes()[field_at::ECN] & FECN != 0
    }
    /// Backward explicit congestion notification; set in every CNP.
    pub fn becn(&self) -> bool {
        self.bytes()[field_at::ECN] & BECN != 0
    }
    /// The 6 reserved bits after FECN and BECN.
    pub fn resv6(&self) -> u8 {
        self.bytes()[field_at::ECN] & 0x3f
    }
    /// The destination queue pair.
    pub fn dest_qp(&self) -> Qpn {
        Qpn::new(field::read_u24(self.bytes(), field_at::DEST_QP))
    }
    /// Acknowledge request: the responder must answer this packet (IBA 9.7.5.1.4).
    pub fn ack_req(&self) -> bool {
        self.bytes()[field_at::ACK_REQ] & ACK_REQ != 0
    }
    /// The 7 reserved bits after AckReq.
    pub fn resv7(&self) -> u8 {
        self.bytes()[field_at::ACK_REQ] & 0x7f
    }
    /// The packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(field::read_u24(self.bytes(), field_at::PSN))
    }
}

impl<'a> Bth<&'a [u8]> {
    /// The BTH of a RoCEv2 Ethernet frame (IPv4 or IPv6 after at most one 802.1Q tag, UDP
    /// to port 4791), read in place without parsing the rest: for code that looks at each
    /// frame on its way (the tracer, the VLAN tagger telling CNPs apart). `None` for any
    /// other frame, or one too short to hold the BTH.
    pub fn of_frame(frame: &'a [u8]) -> Option<Bth<&'a [u8]>> {
        let (ip, version) = ip_offset(frame)?;
        let (protocol, ip_len) = if version == 4 {
            (
                *frame.get(ip + at::IPV4_PROTOCOL)?,
                ipv4_header_len(*frame.get(ip + at::IPV4_VERSION_IHL)?),
            )
        } else {
            (*frame.get(ip + at::IPV6_NEXT_HEADER)?, IPV6_HEADER_LEN)
        };
        let udp = frame.get(ip + ip_len..)?;
        let port = udp.get(at::UDP_DST_PORT..at::UDP_DST_PORT + 2)?;
        if protocol != IP_PROTOCOL_UDP || u16::from_be_bytes([port[0], port[1]]) != ROCEV2_UDP_PORT
        {
            return None;
        }
        Bth::new_checked(udp.get(UDP_HEADER_LEN..)?).ok()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    /// Sets the congestion bits; used by ECN-marking middleware and CNP generation.
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        let b = &mut self.bytes_mut()[field_at::ECN];
        *b = (*b & 0x3f) | if fecn { FECN } else { 0 } | if becn { BECN } else { 0 };
    }
    /// Sets the PSN.
    pub fn set_psn(&mut self, psn: Psn) {
        field::write_u24(self.bytes_mut(), field_at::PSN, psn.value());
    }
    /// Sets or clears AckReq.
    pub fn set_ack_req(&mut self, ack_req: bool) {
        let b = &mut self.bytes_mut()[field_at::ACK_REQ];
        *b = (*b & !ACK_REQ) | if ack_req { ACK_REQ } else { 0 };
    }
}

/// The owned form of a BTH. Reserved bits are kept so that re-emitting a parsed header
/// reproduces it byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// The operation code.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub mig_req: bool,
    /// 0..=3; higher bits are dropped on emit.
    pub pad_count: u8,
    /// 0..=15; higher bits are dropped on emit.
    pub tver: u8,
    /// Partition key.
    pub pkey: PKey,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// 6 reserved bits; 0 when sending.
    pub resv6: u8,
    /// Destination queue pair.
    pub dest_qp: Qpn,
    /// Acknowledge request.
    pub ack_req: bool,
    /// 7 reserved bits; 0 when sending.
    pub resv7: u8,
    /// Packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// The fields in wire order (IBA 9.2; FECN and BECN as RoCEv2 uses them, Annex A17), for
    /// decoders; the accessors above read the same bits.
    pub const FIELDS: [FieldInfo; 13] = [
        FieldInfo::new(
            "OpCode",
            field_at::OPCODE,
            0,
            8,
            "transport (bits 7-5) and operation (bits 4-0)",
        ),
        FieldInfo::new("SE", field_at::FLAGS, 0, 1, "solicited event"),
        FieldInfo::new(
            "M",
            field_at::FLAGS,
            1,
            1,
            "MigReq: automatic path migration state",
        ),
        FieldInfo::new(
            "PadCnt",
            field_at::FLAGS,
            2,
            2,
            "pad bytes between the payload and the ICRC",
        ),
        FieldInfo::new(
            "TVer",
            field_at::FLAGS,
            4,
            4,
            "transport header version (0)",
        ),
        FieldInfo::new("P_Key", field_at::PKEY, 0, 16, "partition key"),
        FieldInfo::new(
            "FECN",
            field_at::ECN,
            0,
            1,
            "forward congestion notification; masked in the ICRC",
        ),
        FieldInfo::new(
            "BECN",
            field_at::ECN,
            1,
            1,
            "backward congestion notification (set in a CNP); masked",
        ),
        FieldInfo::new("Resv6", field_at::ECN, 2, 6, "reserved; masked in the ICRC"),
        FieldInfo::new("DestQP", field_at::DEST_QP, 0, 24, "destination queue pair"),
        FieldInfo::new(
            "A",
            field_at::ACK_REQ,
            0,
            1,
            "AckReq: the responder must acknowledge",
        ),
        FieldInfo::new("Resv7", field_at::ACK_REQ, 1, 7, "reserved"),
        FieldInfo::new(
            "PSN",
            field_at::PSN,
            0,
            24,
            "packet sequence number: orders and detects loss (24 bits, wraps)",
        ),
    ];

    /// A header for sending: version 0, default P_Key, no pad, no flags.
    pub fn new(opcode: Opcode, dest_qp: Qpn, psn: Psn) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: PKey::DEFAULT,
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }
}

impl FixedHeader for BthRepr {
    const NAME: &'static str = "BTH";
    const LEN: usize = 12;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let b = Bth { buffer: buf };
        BthRepr {
            opcode: b.opcode(),
            solicited: b.solicited(),
            mig_req: b.mig_req(),
            pad_count: b.pad_count(),
            tver: b.tver(),
            pkey: b.pkey(),
            fecn: b.fecn(),
            becn: b.becn(),
            resv6: b.resv6(),
            dest_qp: b.dest_qp(),
            ack_req: b.ack_req(),
            resv7: b.resv7(),
            psn: b.psn(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        buf[field_at::OPCODE] = self.opcode.value();
        buf[field_at::FLAGS] = flag(self.solicited, SE)
            | flag(self.mig_req, MIG_REQ)
            | (self.pad_count & 0x3) << 4
            | (self.tver & 0x0f);
        field::write_u16(buf, field_at::PKEY, self.pkey.0);
        buf[field_at::ECN] = flag(self.fecn, FECN) | flag(self.becn, BECN) | (self.resv6 & 0x3f);
        field::write_u24(buf, field_at::DEST_QP, self.dest_qp.value());
        buf[field_at::ACK_REQ] = flag(self.ack_req, ACK_REQ) | (self.resv7 & 0x7f);
        field::write_u24(buf, field_at::PSN, self.psn.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    /// An RC SEND_ONLY from an rxe capture: SE=0, M=0, pad 2, P_Key 0xffff, QP 0x11, AckReq, PSN 0x9a2b3c.
    const SEND_ONLY: [u8; 12] = [
        0x04, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x9a, 0x2b, 0x3c,
    ];

    /// The BTH found in place is the one the full parser finds, in every sample frame
    /// (IPv4 and IPv6, tagged and untagged, every opcode); other frames have none.
    #[test]
    fn of_frame_finds_what_the_parser_finds() {
        for frame in crate::wire::sample::frames(7) {
            let parsed = crate::wire::RocePacket::parse(&frame).unwrap();
            let bth = Bth::of_frame(&frame).expect("a RoCEv2 frame");
            assert_eq!(
                (bth.opcode(), bth.psn()),
                (parsed.opcode(), parsed.bth().psn)
            );
        }
        for frame in crate::wire::sample::mac_control_frames() {
            assert!(Bth::of_frame(&frame).is_none());
        }
        let mut other_port = crate::wire::sample::frames(7).remove(0);
        other_port[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&4792u16.to_be_bytes());
        assert!(Bth::of_frame(&other_port).is_none());
        for len in 0..14 + 20 + 8 + 12 {
            assert!(Bth::of_frame(&other_port[..len]).is_none(), "{len} bytes");
        }
    }

    #[test]
    fn parses_fields() {
        let bth = Bth::new_checked(&SEND_ONLY[..]).unwrap();
        assert_eq!(bth.opcode().name(), "RC_SEND_ONLY");
        assert_eq!(bth.pad_count(), 2);
        assert_eq!(bth.tver(), 0);
        assert_eq!(bth.pkey(), PKey::DEFAULT);
        assert!(!bth.fecn() && !bth.becn());
        assert_eq!(bth.dest_qp(), Qpn::new(0x11));
        assert!(bth.ack_req());
        assert_eq!(bth.psn(), Psn::new(0x9a_2b3c));
    }

    #[test]
    fn emits_fixture() {
        let mut repr = BthRepr::new(Opcode(0x04), Qpn::new(0x11), Psn::new(0x9a_2b3c));
        repr.pad_count = 2;
        repr.ack_req = true;
        let mut out = [0u8; 12];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, SEND_ONLY);
    }

    #[test]
    fn short_buffer_is_an_error() {
        assert!(Bth::new_checked(&SEND_ONLY[..11]).is_err());
        assert!(BthRepr::parse(&[]).is_err());
        assert!(
            BthRepr::new(Opcode(0), Qpn::new(0), Psn::new(0))
                .emit(&mut [0; 3])
                .is_err()
        );
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut bytes = SEND_ONLY;
        let mut bth = Bth::new_checked(&mut bytes[..]).unwrap();
        bth.set_fecn_becn(false, true);
        bth.set_ack_req(false);
        bth.set_psn(Psn::new(7));
        assert_eq!(
            bytes,
            [0x04, 0x20, 0xff, 0xff, 0x40, 0, 0, 0x11, 0x00, 0, 0, 7]
        );
    }

    round_trip_proptest!(BthRepr);

    fields_proptest!(BthRepr, |r: &BthRepr| vec![
        u64::from(r.opcode.value()),
        u64::from(r.solicited),
        u64::from(r.mig_req),
        u64::from(r.pad_count),
        u64::from(r.tver),
        u64::from(r.pkey.0),
        u64::from(r.fecn),
        u64::from(r.becn),
        u64::from(r.resv6),
        u64::from(r.dest_qp.value()),
        u64::from(r.ack_req),
        u64::from(r.resv7),
        u64::from(r.psn.value())
    ]);
}
