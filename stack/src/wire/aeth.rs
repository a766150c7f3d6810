//! ACK Extended Transport Header (IBA Vol. 1 9.3.5): the responder's verdict on a request.
//!
//! ```text
//!  byte 0     syndrome: Resv(7) | kind(6..5): 00 ACK, 01 RNR NAK, 10 reserved, 11 NAK | value(4..0)
//!  bytes 1-3  MSN, the responder's count of completed request messages
//! ```

use core::fmt;

use super::FixedHeader;
use super::field::{self, FieldInfo, Msn};
use super::header::header_view;

header_view! {
    /// A view over the 4 bytes of an AETH.
    Aeth, AethRepr,
    field_at { SYNDROME = 0, MSN = 1 }
}

impl<T: AsRef<[u8]>> Aeth<T> {
    /// The syndrome: ACK, RNR NAK or NAK, and its argument.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.bytes()[field_at::SYNDROME])
    }
    /// The message sequence number: messages the responder has completed.
    pub fn msn(&self) -> Msn {
        Msn::new(field::read_u24(self.bytes(), field_at::MSN))
    }
}

/// NAK codes (IBA Table 48), in the AETH syndrome's low five bits when the kind is NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// The PSN is later than expected: a packet was lost (go back to the expected PSN).
    PsnSequenceError,
    /// Unsupported or malformed request (bad opcode, length, sequence).
    InvalidRequest,
    /// R_Key, bounds or access rights check failed.
    RemoteAccessError,
    /// The responder could not complete the request for a reason of its own.
    RemoteOperationalError,
    /// Reliable-datagram only.
    InvalidRdRequest,
    /// Codes 5-31 are reserved.
    Reserved(u8),
}

impl NakCode {
    /// The NAK code of a syndrome's low 5 bits.
    pub const fn from_code(code: u8) -> NakCode {
        match code & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            other => NakCode::Reserved(other),
        }
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1f,
        }
    }

    /// The project's name for the code (docs/aeth.md), as `roce decode` and `analyze` print it.
    pub const fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN_SEQUENCE_ERROR",
            NakCode::InvalidRequest => "INVALID_REQUEST",
            NakCode::RemoteAccessError => "REMOTE_ACCESS_ERROR",
            NakCode::RemoteOperationalError => "REMOTE_OPERATIONAL_ERROR",
            NakCode::InvalidRdRequest => "INVALID_RD_REQUEST",
            NakCode::Reserved(_) => "RESERVED",
        }
    }
}

/// The RNR NAK's minimum wait before the requester retries (IBA Table 45), a 5-bit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RnrTimer(u8);

/// Table 45 in microseconds; code 0 is the longest wait, not the shortest.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

impl RnrTimer {
    /// The timer of a 5-bit code (higher bits dropped).
    pub const fn new(code: u8) -> RnrTimer {
        RnrTimer(code & 0x1f)
    }
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }
    /// The minimum wait the code stands for, in microseconds (IBA Table 45).
    pub const fn micros(self) -> u32 {
        RNR_TIMER_US[self.0 as usize]
    }
    /// The smallest code whose wait is at least `us` microseconds (code 0 if none is).
    pub fn at_least_micros(us: u32) -> RnrTimer {
        (1..32)
            .find(|&c| RNR_TIMER_US[c] >= us)
            .map_or(RnrTimer(0), |c| RnrTimer(c as u8))
    }
}

/// The AETH syndrome, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with the end-to-end credit count (31 = no credit information).
    Ack {
        /// The credit count.
        credits: u8,
    },
    /// Receiver not ready: no receive WQE was posted; retry after the timer.
    RnrNak {
        /// How long the requester must wait at least.
        timer: RnrTimer,
    },
    /// Negative acknowledgement with its code.
    Nak(NakCode),
    /// Bit 7 set or kind 10: reserved encodings, kept verbatim.
    Reserved(u8),
}

impl Syndrome {
    /// Credit count meaning "invalid / no flow-control information" (rxe always sends it).
    pub const UNLIMITED_CREDITS: u8 = 0x1f;

    /// Decodes the AETH's syndrome byte (IBA 9.3.5, Table 44).
    pub const fn from_byte(b: u8) -> Syndrome {
        if b & 0x80 != 0 {
            return Syndrome::Reserved(b);
        }
        match (b >> 5) & 0x3 {
            0b00 => Syndrome::Ack { credits: b & 0x1f },
            0b01 => Syndrome::RnrNak {
                timer: RnrTimer::new(b),
            },
            0b11 => Syndrome::Nak(NakCode::from_code(b)),
            _ => Syndrome::Reserved(b),
        }
    }

    /// The syndrome byte.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | timer.code(),
            Syndrome::Nak(code) => 0x60 | code.code(),
            Syndrome::Reserved(b) => b,
        }
    }

    /// `ACK`, `RNR_NAK`, `NAK` or `RESERVED`: the `kind` of `roce decode --json`.
    pub const fn kind(self) -> &'static str {
        match self {
            Syndrome::Ack { .. } => "ACK",
            Syndrome::RnrNak { .. } => "RNR_NAK",
            Syndrome::Nak(_) => "NAK",
            Syndrome::Reserved(_) => "RESERVED",
        }
    }

    /// The low five bits: credits, RNR timer code or NAK code.
    pub const fn code(self) -> u8 {
        self.to_byte() & 0x1f
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Syndrome::Ack { credits } => write!(f, "ACK (credits {credits})"),
            Syndrome::RnrNak { timer } => write!(f, "RNR NAK (wait {} us)", timer.micros()),
            Syndrome::Nak(code) => write!(f, "NAK {}", code.name()),
            Syndrome::Reserved(b) => write!(f, "reserved syndrome {b:#04x}"),
        }
    }
}

/// The owned form of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number.
    pub msn: Msn,
}

impl AethRepr {
    /// A plain ACK as rxe sends it: no credit information.
    pub const fn ack(msn: Msn) -> AethRepr {
        AethRepr {
            syndrome: Syndrome::Ack {
                credits: Syndrome::UNLIMITED_CREDITS,
            },
            msn,
        }
    }
}

impl AethRepr {
    /// The fields in wire order (IBA 9.3.5), for decoders.
    pub const FIELDS: [FieldInfo; 2] = [
        FieldInfo::new(
            "Syndrome",
            field_at::SYNDROME,
            0,
            8,
            "ACK, RNR NAK or NAK, and its credit count, timer or code",
        ),
        FieldInfo::new(
            "MSN",
            field_at::MSN,
            0,
            24,
            "message sequence number: requests the responder completed",
        ),
    ];
}

impl FixedHeader for AethRepr {
    const NAME: &'static str = "AETH";
    const LEN: usize = 4;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Aeth { buffer: buf };
        AethRepr {
            syndrome: v.syndrome(),
            msn: v.msn(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        buf[field_at::SYNDROME] = self.syndrome.to_byte();
        field::write_u24(buf, field_at::MSN, self.msn.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::{fields_proptest, round_trip_proptest};

    #[test]
    fn syndromes() {
        assert_eq!(Syndrome::from_byte(0x1f), Syndrome::Ack { credits: 31 });
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x62).to_string(),
            "NAK REMOTE_ACCESS_ERROR"
        );
        let rnr = Syndrome::from_byte(0x2e);
        assert_eq!(rnr.kind(), "RNR_NAK");
        assert_eq!(rnr.code(), 14);
        assert_eq!(Syndrome::from_byte(0x40), Syndrome::Reserved(0x40));
        assert_eq!(Syndrome::from_byte(0x9f), Syndrome::Reserved(0x9f));
        assert_eq!(
            Syndrome::from_byte(0x65),
            Syndrome::Nak(NakCode::Reserved(5))
        );
    }

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b);
        }
    }

    #[test]
    fn rnr_timer_table() {
        assert_eq!(RnrTimer::new(0).micros(), 655_360);
        assert_eq!(RnrTimer::new(14).micros(), 1_280);
        assert_eq!(RnrTimer::new(25).micros(), 61_440);
        assert_eq!(RnrTimer::new(31).micros(), 491_520);
        assert_eq!(RnrTimer::at_least_micros(1_000).code(), 14);
        assert_eq!(RnrTimer::at_least_micros(10).code(), 1);
        assert_eq!(RnrTimer::at_least_micros(1_000_000).code(), 0);
    }

    #[test]
    fn fixture() {
        let bytes = [0x1f, 0x00, 0x01, 0x02];
        let repr = AethRepr::parse(&bytes).unwrap();
        assert_eq!(repr, AethRepr::ack(Msn::new(0x102)));
        let mut out = [0u8; 4];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    round_trip_proptest!(AethRepr);

    fields_proptest!(AethRepr, |r: &AethRepr| vec![
        u64::from(r.syndrome.to_byte()),
        u64::from(r.msn.value())
    ]);
}
