//! ConnectRequest, REQ (IBA Vol. 1 12.6.5, Table 106): the active side asks for a
//! connection to a service, offering its QP, its first PSN, the path to use and its timers.

use core::net::Ipv6Addr;

use super::layout::cm_message;
use crate::wire::field::{PKey, Psn, Qpn};

cm_message! {
    /// A REQ: the active side's ConnectRequest.
    Req, ReqRepr, "REQ";
    /// The sender's handle for this connection; every later message of it carries the ID
    local_comm_id "Local Communication ID": u32 = (0, 0, 32);
    /// Reserved
    reserved_4 "Reserved": u32 = (4, 0, 32);
    /// The service asked for; rdma_cm's IP services are 0x0000000001 | port space | port
    service_id "ServiceID": u64 = (8, 0, 64);
    /// The sending channel adapter's GUID (node GUID)
    local_ca_guid "Local CA GUID": u64 = (16, 0, 64);
    /// Reserved (IBA 1.4's enhanced connection establishment puts a vendor ID here)
    reserved_24 "Reserved": u32 = (24, 0, 32);
    /// Q_Key of the sender's QP (RD only; 0 for RC and UC)
    local_qkey "Local Q_Key": u32 = (28, 0, 32);
    /// The sender's QP: where the passive side's packets go
    local_qpn "Local QPN": Qpn = (32, 0, 24);
    /// READs and atomics the sender accepts outstanding (its responder resources)
    responder_resources "Responder Resources": u8 = (35, 0, 8);
    /// End-to-end context (RD only)
    local_eecn "Local EECN": u32 = (36, 0, 24);
    /// READs and atomics the sender will keep outstanding (its initiator depth)
    initiator_depth "Initiator Depth": u8 = (39, 0, 8);
    /// The passive side's end-to-end context (RD only)
    remote_eecn "Remote EECN": u32 = (40, 0, 24);
    /// How long the passive side may take to answer: 4.096 us x 2^value
    remote_cm_response_timeout "Remote CM Response Timeout": u8 = (43, 0, 5);
    /// 0 RC, 1 UC, 2 RD, 3 extended (see Extended Transport Type)
    transport_service_type "Transport Service Type": u8 = (43, 5, 2);
    /// End-to-end credits are used (RC)
    end_to_end_flow_control "End-to-End Flow Control": bool = (43, 7, 1);
    /// The sender's first PSN: what the passive side's responder expects first
    starting_psn "Starting PSN": Psn = (44, 0, 24);
    /// How long the sender may take to answer a REP: 4.096 us x 2^value
    local_cm_response_timeout "Local CM Response Timeout": u8 = (47, 0, 5);
    /// Transport retries on a local ACK timeout the passive side should use
    retry_count "Retry Count": u8 = (47, 5, 3);
    /// Partition of the connection
    partition_key "Partition Key": PKey = (48, 0, 16);
    /// Path MTU: 1 256, 2 512, 3 1024, 4 2048, 5 4096 bytes
    path_mtu "Path Packet Payload MTU": u8 = (50, 0, 4);
    /// A reliable datagram channel exists (RD only)
    rdc_exists "RDC Exists": bool = (50, 4, 1);
    /// RNR NAK retries the passive side should use (7: forever)
    rnr_retry_count "RNR Retry Count": u8 = (50, 5, 3);
    /// How often the sender resends REQ, and the passive side REP, before giving up
    max_cm_retries "Max CM Retries": u8 = (51, 0, 4);
    /// The sender's QP takes receives from a shared receive queue
    srq "SRQ": bool = (51, 4, 1);
    /// With transport type 3: 1 XRC
    extended_transport_type "Extended Transport Type": u8 = (51, 5, 3);
    /// Sender's LID; 0xFFFF (permissive) on RoCE, where there are no LIDs
    primary_local_lid "Primary Local Port LID": u16 = (52, 0, 16);
    /// Passive side's LID; 0xFFFF on RoCE
    primary_remote_lid "Primary Remote Port LID": u16 = (54, 0, 16);
    /// Sender's GID: on RoCEv2 its IP address (IPv4-mapped for IPv4)
    primary_local_gid "Primary Local Port GID": Ipv6Addr = (56, 0, 128);
    /// Passive side's GID: its IP address
    primary_remote_gid "Primary Remote Port GID": Ipv6Addr = (72, 0, 128);
    /// GRH flow label of the path (rxe derives the UDP source port of RC traffic from it)
    primary_flow_label "Primary Flow Label": u32 = (88, 0, 20);
    /// Reserved
    reserved_90 "Reserved": u8 = (90, 4, 6);
    /// Static rate of the path (IBA Table 215 codes; 0 any)
    primary_packet_rate "Primary Packet Rate": u8 = (91, 2, 6);
    /// GRH traffic class: the IP DSCP and ECN of the connection's packets
    primary_traffic_class "Primary Traffic Class": u8 = (92, 0, 8);
    /// GRH hop limit: the IP TTL of the connection's packets
    primary_hop_limit "Primary Hop Limit": u8 = (93, 0, 8);
    /// Service level
    primary_sl "Primary SL": u8 = (94, 0, 4);
    /// The passive side is on the sender's subnet (no router between)
    primary_subnet_local "Primary Subnet Local": bool = (94, 4, 1);
    /// Reserved
    reserved_94 "Reserved": u8 = (94, 5, 3);
    /// Local ACK timeout for the connection's QPs: 4.096 us x 2^value
    primary_local_ack_timeout "Primary Local ACK Timeout": u8 = (95, 0, 5);
    /// Reserved
    reserved_95 "Reserved": u8 = (95, 5, 3);
    /// Alternate path, for automatic path migration (all zero: none)
    alternate_local_lid "Alternate Local Port LID": u16 = (96, 0, 16);
    /// Alternate path: passive side's LID
    alternate_remote_lid "Alternate Remote Port LID": u16 = (98, 0, 16);
    /// Alternate path: sender's GID
    alternate_local_gid "Alternate Local Port GID": Ipv6Addr = (100, 0, 128);
    /// Alternate path: passive side's GID
    alternate_remote_gid "Alternate Remote Port GID": Ipv6Addr = (116, 0, 128);
    /// Alternate path: flow label
    alternate_flow_label "Alternate Flow Label": u32 = (132, 0, 20);
    /// Reserved
    reserved_134 "Reserved": u8 = (134, 4, 6);
    /// Alternate path: static rate
    alternate_packet_rate "Alternate Packet Rate": u8 = (135, 2, 6);
    /// Alternate path: traffic class
    alternate_traffic_class "Alternate Traffic Class": u8 = (136, 0, 8);
    /// Alternate path: hop limit
    alternate_hop_limit "Alternate Hop Limit": u8 = (137, 0, 8);
    /// Alternate path: service level
    alternate_sl "Alternate SL": u8 = (138, 0, 4);
    /// Alternate path: subnet local
    alternate_subnet_local "Alternate Subnet Local": bool = (138, 4, 1);
    /// Reserved
    reserved_138 "Reserved": u8 = (138, 5, 3);
    /// Alternate path: local ACK timeout
    alternate_local_ack_timeout "Alternate Local ACK Timeout": u8 = (139, 0, 5);
    /// The sender supports symmetric alternate paths
    sap_supported "SAP Supported": bool = (139, 5, 1);
    /// Reserved
    reserved_139 "Reserved": u8 = (139, 6, 2);
    /// The consumer's data; rdma_cm puts its 36-byte IP header (addresses, ports) first
    private_data "Private Data": [u8; 92] = (140, 0, 736);
}

impl ReqRepr {
    /// A REQ with every field zero, to fill in.
    pub fn zeroed() -> ReqRepr {
        use crate::wire::FixedHeader;
        ReqRepr::parse_unchecked(&[0; crate::wire::mad::MAD_DATA_LEN])
    }

    /// True when the REQ describes an alternate path (IBA 12.6.5: a non-zero alternate LID
    /// or GID).
    pub fn has_alternate_path(&self) -> bool {
        self.alternate_local_lid != 0 || !self.alternate_local_gid.is_unspecified()
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
        assert_fields_tile(ReqRepr::FIELDS);
    }

    #[test]
    fn rxe_rping_req() {
        let req = ReqRepr::parse(&crate::wire::cm::tests::rping_mad(1)[24..]).unwrap();
        assert_eq!(req.local_comm_id, 0x0ac5_b23c);
        assert_eq!(
            req.service_id, 0x0000_0000_0106_1c06,
            "RDMA_PS_TCP port 7174"
        );
        assert_eq!(req.local_ca_guid, 0x5054_00ff_fe77_000c);
        assert_eq!(req.local_qpn, Qpn::new(0x11));
        assert_eq!((req.responder_resources, req.initiator_depth), (1, 1));
        assert_eq!(req.remote_cm_response_timeout, 20);
        assert_eq!(req.transport_service_type, 0, "RC");
        assert_eq!(req.starting_psn, Psn::new(0x192d48));
        assert_eq!(req.local_cm_response_timeout, 20);
        assert_eq!((req.retry_count, req.rnr_retry_count), (7, 7));
        assert_eq!(req.partition_key, PKey::DEFAULT);
        assert_eq!(req.path_mtu, 3, "1024 bytes");
        assert_eq!(req.max_cm_retries, 15);
        assert_eq!(req.primary_local_lid, 0xffff);
        assert_eq!(
            req.primary_local_gid,
            "::ffff:10.77.0.12".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            req.primary_remote_gid,
            "::ffff:10.77.0.11".parse::<Ipv6Addr>().unwrap()
        );
        // rdma_cm's flow label for IPv4: (source port * 31 + destination port) & 0xfffff.
        assert_eq!(req.primary_flow_label, (0xdb8c * 31 + 7174) & 0xf_ffff);
        assert_eq!(req.primary_hop_limit, 64);
        assert_eq!(req.primary_local_ack_timeout, 19);
        assert!(!req.has_alternate_path());
        assert_eq!(&req.private_data[..4], &[0x00, 0x40, 0xdb, 0x8c]);
    }

    round_trip_proptest!(ReqRepr);
}
