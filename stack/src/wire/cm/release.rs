//! Connection release (IBA Vol. 1 12.6.10-12.6.11): either side sends DREQ, the other
//! answers DREP; both then wait out the time-wait before forgetting the connection.

use super::layout::cm_message;
use crate::wire::field::Qpn;

cm_message! {
    /// A DREQ: DisconnectRequest (Table 112).
    Dreq, DreqRepr, "DREQ";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// The receiver's QP (or EE context): a DREQ naming another QP is ignored
    remote_qpn "Remote QPN/EECN": Qpn = (8, 0, 24);
    /// Reserved
    reserved_11 "Reserved": u8 = (11, 0, 8);
    /// The consumer's data
    private_data "Private Data": [u8; 220] = (12, 0, 1760);
}

cm_message! {
    /// A DREP: DisconnectReply (Table 113).
    Drep, DrepRepr, "DREP";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// The consumer's data
    private_data "Private Data": [u8; 224] = (8, 0, 1792);
}

impl DreqRepr {
    /// A DREQ of connection `local_comm_id` to the peer's `remote_comm_id` and QP, no data.
    pub fn new(local_comm_id: u32, remote_comm_id: u32, remote_qpn: Qpn) -> DreqRepr {
        DreqRepr {
            local_comm_id,
            remote_comm_id,
            remote_qpn,
            reserved_11: 0,
            private_data: [0; 220],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FixedHeader;
    use crate::wire::cm::layout::assert_fields_tile;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn fields_tile_the_message() {
        assert_fields_tile(DreqRepr::FIELDS);
        assert_fields_tile(DrepRepr::FIELDS);
    }

    #[test]
    fn rxe_rping_dreq_drep() {
        let dreq = DreqRepr::parse(&crate::wire::cm::tests::rping_mad(40)[24..]).unwrap();
        assert_eq!(
            (dreq.local_comm_id, dreq.remote_comm_id),
            (0x0ac5_b23c, 0xdf89_8eb1)
        );
        assert_eq!(dreq.remote_qpn, Qpn::new(0x11));
        let drep = DrepRepr::parse(&crate::wire::cm::tests::rping_mad(41)[24..]).unwrap();
        assert_eq!(
            (drep.local_comm_id, drep.remote_comm_id),
            (0xdf89_8eb1, 0x0ac5_b23c)
        );
    }

    mod dreq {
        use super::*;
        round_trip_proptest!(DreqRepr);
    }
    mod drep {
        use super::*;
        round_trip_proptest!(DrepRepr);
    }
}
