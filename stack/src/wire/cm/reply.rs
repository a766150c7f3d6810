//! The answers of connection establishment (IBA Vol. 1 12.6.6-12.6.9): REP accepts a REQ,
//! RTU confirms the REP, REJ refuses either, MRA asks for more time.

use super::layout::cm_message;
use crate::wire::field::{Psn, Qpn};

cm_message! {
    /// A REP: the passive side's ConnectReply (Table 110).
    Rep, RepRepr, "REP";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The REQ sender's Local Communication ID
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// Q_Key of the sender's QP (RD only)
    local_qkey "Local Q_Key": u32 = (8, 0, 32);
    /// The sender's QP: where the active side's packets go
    local_qpn "Local QPN": Qpn = (12, 0, 24);
    /// Reserved (a vendor ID byte with IBA 1.4's enhanced connection establishment)
    reserved_15 "Reserved": u8 = (15, 0, 8);
    /// End-to-end context (RD only)
    local_eecn "Local EE Context Number": u32 = (16, 0, 24);
    /// Reserved (vendor ID byte)
    reserved_19 "Reserved": u8 = (19, 0, 8);
    /// The sender's first PSN: what the active side's responder expects first
    starting_psn "Starting PSN": Psn = (20, 0, 24);
    /// Reserved (vendor ID byte)
    reserved_23 "Reserved": u8 = (23, 0, 8);
    /// READs and atomics the sender accepts outstanding
    responder_resources "Responder Resources": u8 = (24, 0, 8);
    /// READs and atomics the sender will keep outstanding
    initiator_depth "Initiator Depth": u8 = (25, 0, 8);
    /// How long the sender's adapter may take to ACK: 4.096 us x 2^value
    target_ack_delay "Target ACK Delay": u8 = (26, 0, 5);
    /// 0 the alternate path is accepted, 1 rejected, 2 not supported
    failover_accepted "Failover Accepted": u8 = (26, 5, 2);
    /// End-to-end credits are used
    end_to_end_flow_control "End-to-End Flow Control": bool = (26, 7, 1);
    /// RNR NAK retries the active side should use (7: forever)
    rnr_retry_count "RNR Retry Count": u8 = (27, 0, 3);
    /// The sender's QP takes receives from a shared receive queue
    srq "SRQ": bool = (27, 3, 1);
    /// Reserved
    reserved_27 "Reserved": u8 = (27, 4, 4);
    /// The sending channel adapter's GUID
    local_ca_guid "Local CA GUID": u64 = (28, 0, 64);
    /// The consumer's data (rdma_accept's private data)
    private_data "Private Data": [u8; 196] = (36, 0, 1568);
}

cm_message! {
    /// An RTU: ReadyToUse, the active side's confirmation of a REP (Table 111).
    Rtu, RtuRepr, "RTU";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// The consumer's data
    private_data "Private Data": [u8; 224] = (8, 0, 1792);
}

cm_message! {
    /// A REJ: a refused REQ or REP (Table 108).
    Rej, RejRepr, "REJ";
    /// The sender's handle (0 when it refuses a REQ it kept no state for)
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle: the Local Communication ID of the refused message
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// What is refused: 0 a REQ, 1 a REP, 2 another message
    message_rejected "Message REJected": u8 = (8, 0, 2);
    /// Reserved
    reserved_8 "Reserved": u8 = (8, 2, 6);
    /// Bytes of Additional Rejection Information that mean something
    reject_info_length "Reject Info Length": u8 = (9, 0, 7);
    /// Reserved
    reserved_9 "Reserved": u8 = (9, 7, 1);
    /// Why (IBA Table 112): 8 invalid service ID (nothing listens), 28 consumer reject...
    reason "Reason": u16 = (10, 0, 16);
    /// Additional Rejection Information, by reason (a GID, a timeout's CA GUID...)
    ari "ARI": [u8; 72] = (12, 0, 576);
    /// The consumer's data (rdma_reject's private data)
    private_data "Private Data": [u8; 148] = (84, 0, 1184);
}

cm_message! {
    /// An MRA: Message Receipt Acknowledgement, "more time needed" (Table 107).
    Mra, MraRepr, "MRA";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// What is acknowledged: 0 a REQ, 1 a REP, 2 a LAP
    message_mraed "Message MRAed": u8 = (8, 0, 2);
    /// Reserved
    reserved_8 "Reserved": u8 = (8, 2, 6);
    /// How long the answer may still take: 4.096 us x 2^value
    service_timeout "Service Timeout": u8 = (9, 0, 5);
    /// Reserved
    reserved_9 "Reserved": u8 = (9, 5, 3);
    /// The consumer's data
    private_data "Private Data": [u8; 222] = (10, 0, 1776);
}

/// The "Message REJected" / "Message MRAed" codes (IBA Tables 107, 108).
pub mod message_code {
    /// The REQ.
    pub const REQ: u8 = 0;
    /// The REP.
    pub const REP: u8 = 1;
    /// Another message (a LAP, or anything after the REP).
    pub const OTHER: u8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FixedHeader;
    use crate::wire::cm::layout::assert_fields_tile;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn fields_tile_the_message() {
        for fields in [
            RepRepr::FIELDS,
            RtuRepr::FIELDS,
            RejRepr::FIELDS,
            MraRepr::FIELDS,
        ] {
            assert_fields_tile(fields);
        }
    }

    #[test]
    fn rxe_rping_rep_and_rtu() {
        let rep = RepRepr::parse(&crate::wire::cm::tests::rping_mad(2)[24..]).unwrap();
        assert_eq!(
            (rep.local_comm_id, rep.remote_comm_id),
            (0xdf89_8eb1, 0x0ac5_b23c)
        );
        assert_eq!(rep.local_qpn, Qpn::new(0x11));
        assert_eq!(rep.starting_psn, Psn::new(0x21c74b));
        assert_eq!((rep.responder_resources, rep.initiator_depth), (1, 1));
        assert_eq!(rep.target_ack_delay, 15);
        assert_eq!(rep.rnr_retry_count, 7);
        assert_eq!(rep.local_ca_guid, 0x5054_00ff_fe77_000b);
        let rtu = RtuRepr::parse(&crate::wire::cm::tests::rping_mad(3)[24..]).unwrap();
        assert_eq!(
            (rtu.local_comm_id, rtu.remote_comm_id),
            (0x0ac5_b23c, 0xdf89_8eb1)
        );
    }

    mod rep {
        use super::*;
        round_trip_proptest!(RepRepr);
    }
    mod rtu {
        use super::*;
        round_trip_proptest!(RtuRepr);
    }
    mod rej {
        use super::*;
        round_trip_proptest!(RejRepr);
    }
    mod mra {
        use super::*;
        round_trip_proptest!(MraRepr);
    }
}
