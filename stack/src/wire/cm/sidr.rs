//! Service ID resolution (IBA Vol. 1 12.11): a UD client asks which QP and Q_Key serve a
//! service ID; no connection results, so no communication IDs, only a request ID.

use super::layout::cm_message;
use crate::wire::field::{PKey, Qpn};

cm_message! {
    /// A SIDR_REQ: ServiceIDResolutionRequest (Table 119).
    SidrReq, SidrReqRepr, "SIDR_REQ";
    /// The sender's handle, echoed by the SIDR_REP
    request_id "Request ID": u32 = (0, 0, 32);
    /// Partition the requester will send in
    partition_key "Partition Key": PKey = (4, 0, 16);
    /// Reserved
    reserved_6 "Reserved": u16 = (6, 0, 16);
    /// The service asked for; rdma_cm's UDP port space is 0x0000000001 11 port
    service_id "ServiceID": u64 = (8, 0, 64);
    /// The consumer's data; rdma_cm puts its 36-byte IP header first
    private_data "Private Data": [u8; 216] = (16, 0, 1728);
}

cm_message! {
    /// A SIDR_REP: ServiceIDResolutionResponse (Table 120).
    SidrRep, SidrRepRepr, "SIDR_REP";
    /// The SIDR_REQ's Request ID
    request_id "Request ID": u32 = (0, 0, 32);
    /// 0 valid, 1 service ID not supported, 2 rejected, 3 no QP, 4 redirect, 5 bad class version
    status "Status": u8 = (4, 0, 8);
    /// Bytes of Additional Information that mean something
    additional_info_length "Additional Information Length": u8 = (5, 0, 8);
    /// Reserved
    reserved_6 "Reserved": u16 = (6, 0, 16);
    /// The UD QP serving the service
    qpn "QPN": Qpn = (8, 0, 24);
    /// Reserved
    reserved_11 "Reserved": u8 = (11, 0, 8);
    /// The service ID resolved
    service_id "ServiceID": u64 = (12, 0, 64);
    /// The Q_Key to send to that QP with
    qkey "Q_Key": u32 = (20, 0, 32);
    /// Class port information on a redirect; the supported version on status 5
    additional_info "Additional Information": [u8; 72] = (24, 0, 576);
    /// The consumer's data
    private_data "Private Data": [u8; 136] = (96, 0, 1088);
}

/// SIDR_REP status codes (IBA Table 120).
pub mod sidr_status {
    /// The QPN and Q_Key are valid.
    pub const VALID: u8 = 0;
    /// No service with that ID.
    pub const SERVICE_ID_NOT_SUPPORTED: u8 = 1;
    /// The service refused the requester.
    pub const REJECTED: u8 = 2;
    /// No QP available.
    pub const NO_QP: u8 = 3;
    /// Ask elsewhere (Additional Information says where).
    pub const REDIRECT: u8 = 4;
    /// The class version of the SIDR_REQ is not supported.
    pub const UNSUPPORTED_VERSION: u8 = 5;

    /// The status's meaning, for messages.
    pub const fn name(status: u8) -> &'static str {
        match status {
            VALID => "valid",
            SERVICE_ID_NOT_SUPPORTED => "service ID not supported",
            REJECTED => "rejected by the service",
            NO_QP => "no QP available",
            REDIRECT => "redirected",
            UNSUPPORTED_VERSION => "class version not supported",
            _ => "unknown status",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cm::layout::assert_fields_tile;
    use crate::wire::header::round_trip_proptest;

    #[test]
    fn fields_tile_the_message() {
        assert_fields_tile(SidrReqRepr::FIELDS);
        assert_fields_tile(SidrRepRepr::FIELDS);
    }

    mod req {
        use super::*;
        round_trip_proptest!(SidrReqRepr);
    }
    mod rep {
        use super::*;
        round_trip_proptest!(SidrRepRepr);
    }
}
