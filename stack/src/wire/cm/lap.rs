//! Alternate path messages (IBA Vol. 1 12.8): LAP loads a new alternate path into an
//! established connection, APR answers it. RoCE has no path migration (Linux's ib_cm ignores
//! both on RoCE ports); they are decoded, never acted on.

use core::net::Ipv6Addr;

use super::layout::cm_message;
use crate::wire::field::Qpn;

cm_message! {
    /// A LAP: LoadAlternatePath (Table 115).
    Lap, LapRepr, "LAP";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// Reserved
    reserved_8 "Reserved": u32 = (8, 0, 32);
    /// The receiver's QP
    remote_qpn "Remote QPN/EECN": Qpn = (12, 0, 24);
    /// How long the receiver may take to answer: 4.096 us x 2^value
    remote_cm_response_timeout "Remote CM Response Timeout": u8 = (15, 0, 5);
    /// Reserved
    reserved_15 "Reserved": u8 = (15, 5, 3);
    /// Reserved
    reserved_16 "Reserved": u32 = (16, 0, 32);
    /// New alternate path: sender's LID
    alternate_local_lid "Alternate Local Port LID": u16 = (20, 0, 16);
    /// New alternate path: receiver's LID
    alternate_remote_lid "Alternate Remote Port LID": u16 = (22, 0, 16);
    /// New alternate path: sender's GID
    alternate_local_gid "Alternate Local Port GID": Ipv6Addr = (24, 0, 128);
    /// New alternate path: receiver's GID
    alternate_remote_gid "Alternate Remote Port GID": Ipv6Addr = (40, 0, 128);
    /// New alternate path: flow label
    alternate_flow_label "Alternate Flow Label": u32 = (56, 0, 20);
    /// Reserved
    reserved_58 "Reserved": u8 = (58, 4, 4);
    /// New alternate path: traffic class
    alternate_traffic_class "Alternate Traffic Class": u8 = (59, 0, 8);
    /// New alternate path: hop limit
    alternate_hop_limit "Alternate Hop Limit": u8 = (60, 0, 8);
    /// Reserved
    reserved_61 "Reserved": u8 = (61, 0, 2);
    /// New alternate path: static rate
    alternate_packet_rate "Alternate Packet Rate": u8 = (61, 2, 6);
    /// New alternate path: service level
    alternate_sl "Alternate SL": u8 = (62, 0, 4);
    /// New alternate path: subnet local
    alternate_subnet_local "Alternate Subnet Local": bool = (62, 4, 1);
    /// Reserved
    reserved_62 "Reserved": u8 = (62, 5, 3);
    /// New alternate path: local ACK timeout
    alternate_local_ack_timeout "Alternate Local ACK Timeout": u8 = (63, 0, 5);
    /// Reserved
    reserved_63 "Reserved": u8 = (63, 5, 3);
    /// The consumer's data
    private_data "Private Data": [u8; 168] = (64, 0, 1344);
}

cm_message! {
    /// An APR: AlternatePathResponse (Table 116).
    Apr, AprRepr, "APR";
    /// The sender's handle for this connection
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// The receiver's handle for this connection
    remote_comm_id "Remote Communication ID": u32 = (4, 0, 32);
    /// Bytes of Additional Information that mean something
    additional_info_length "Additional Information Length": u8 = (8, 0, 8);
    /// 0 the path was loaded; other values say why not (IBA Table 117)
    ap_status "AP Status": u8 = (9, 0, 8);
    /// Reserved
    reserved_10 "Reserved": u16 = (10, 0, 16);
    /// Additional information by status
    additional_info "Additional Information": [u8; 72] = (12, 0, 576);
    /// The consumer's data
    private_data "Private Data": [u8; 148] = (84, 0, 1184);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cm::layout::assert_fields_tile;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn fields_tile_the_message() {
        assert_fields_tile(LapRepr::FIELDS);
        assert_fields_tile(AprRepr::FIELDS);
    }

    mod lap {
        use super::*;
        round_trip_proptest!(LapRepr);
    }
    mod apr {
        use super::*;
        round_trip_proptest!(AprRepr);
    }
}
