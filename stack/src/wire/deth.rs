//! Datagram Extended Transport Header (IBA Vol. 1 9.3.2): UD addressing, after the BTH.
//!
//! ```text
//!  bytes 0-3  Q_Key (a request whose Q_Key differs from the QP's is silently dropped)
//!  byte 4     reserved
//!  bytes 5-7  source QP
//! ```

use super::FixedHeader;
use super::field::{self, FieldInfo, Qpn};
use super::header::header_view;

header_view! {
    /// A view over the 8 bytes of a DETH.
    Deth, DethRepr,
    field_at { QKEY = 0, RESV = 4, SRC_QP = 5 }
}

impl<T: AsRef<[u8]>> Deth<T> {
    /// The Q_Key the destination QP must hold (or the controlled-Q_Key form).
    pub fn qkey(&self) -> u32 {
        field::read_u32(self.bytes(), field_at::QKEY)
    }
    /// The reserved byte before the source QP.
    pub fn resv(&self) -> u8 {
        self.bytes()[field_at::RESV]
    }
    /// The sending queue pair.
    pub fn src_qp(&self) -> Qpn {
        Qpn::new(field::read_u24(self.bytes(), field_at::SRC_QP))
    }
}

/// The owned form of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    /// Q_Key.
    pub qkey: u32,
    /// Reserved byte; 0 when sending.
    pub resv: u8,
    /// Source queue pair.
    pub src_qp: Qpn,
}

impl DethRepr {
    /// Q_Keys with the high bit set are controlled: only privileged consumers may send them
    /// (IBA 10.2.4); QP1 uses the well-known 0x80010000.
    pub const GSI_QKEY: u32 = 0x8001_0000;

    /// The fields in wire order (IBA 9.3.2), for decoders.
    pub const FIELDS: [FieldInfo; 3] = [
        FieldInfo::new(
            "Q_Key",
            field_at::QKEY,
            0,
            32,
            "the receiving UD QP drops packets whose Q_Key differs",
        ),
        FieldInfo::new("Reserved", field_at::RESV, 0, 8, "reserved"),
        FieldInfo::new(
            "SrcQP",
            field_at::SRC_QP,
            0,
            24,
            "the sending QP: replies go there",
        ),
    ];
}

impl FixedHeader for DethRepr {
    const NAME: &'static str = "DETH";
    const LEN: usize = 8;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Deth { buffer: buf };
        DethRepr {
            qkey: v.qkey(),
            resv: v.resv(),
            src_qp: v.src_qp(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u32(buf, field_at::QKEY, self.qkey);
        buf[field_at::RESV] = self.resv;
        field::write_u24(buf, field_at::SRC_QP, self.src_qp.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn fixture() {
        let bytes = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x12];
        let repr = DethRepr::parse(&bytes).unwrap();
        assert_eq!(repr.qkey, 0x1111_1111, "ibv_ud_pingpong's Q_Key");
        assert_eq!(repr.src_qp, Qpn::new(0x12));
    }

    round_trip_proptest!(DethRepr);

    fields_proptest!(DethRepr, |r: &DethRepr| vec![
        u64::from(r.qkey),
        u64::from(r.resv),
        u64::from(r.src_qp.value())
    ]);
}
