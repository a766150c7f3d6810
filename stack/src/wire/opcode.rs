//! BTH opcodes and which extension headers follow each one.
//!
//! The table follows IBA Vol. 1 9.2 and Annex A17 (CNP), and agrees with rdma_rxe's
//! `rxe_opcode.c` for every RC, UC and UD opcode, including SEND_WITH_INVALIDATE, FLUSH and
//! ATOMIC_WRITE. RD and XRC opcodes are named for decoders but their headers are not parsed.

use core::fmt;

/// The transport service selected by an opcode's top three bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Reliable datagram (not carried by RoCEv2 in practice).
    Rd,
    /// Unreliable datagram.
    Ud,
    /// Congestion notification (RoCEv2 CNP, 0x80 block).
    Cnp,
    /// Extended reliable connection.
    Xrc,
    /// Manufacturer-specific (0xC0 and 0xE0 blocks).
    Manufacturer,
}

impl Transport {
    /// The prefix used in opcode names (`RC_`, `UC_`, ...).
    pub const fn prefix(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
            Transport::Xrc => "XRC",
            Transport::Manufacturer => "MANUFACTURER",
        }
    }
}

/// A set of extension headers, in the order they appear after the BTH.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headers(u16);

impl Headers {
    /// No extension header.
    pub const NONE: Headers = Headers(0);
    /// Datagram ETH (UD).
    pub const DETH: Headers = Headers(1 << 0);
    /// RDMA ETH.
    pub const RETH: Headers = Headers(1 << 1);
    /// Atomic ETH.
    pub const ATOMIC_ETH: Headers = Headers(1 << 2);
    /// ACK ETH.
    pub const AETH: Headers = Headers(1 << 3);
    /// Atomic acknowledge ETH.
    pub const ATOMIC_ACK_ETH: Headers = Headers(1 << 4);
    /// Immediate data.
    pub const IMMDT: Headers = Headers(1 << 5);
    /// Invalidate ETH.
    pub const IETH: Headers = Headers(1 << 6);
    /// Flush ETH.
    pub const FETH: Headers = Headers(1 << 7);
    /// The 16 reserved bytes of a RoCEv2 CNP.
    pub const CNP: Headers = Headers(1 << 8);

    /// The headers of both sets.
    pub const fn union(self, other: Headers) -> Headers {
        Headers(self.0 | other.0)
    }

    /// Whether every header of `other` is in this set.
    pub const fn contains(self, other: Headers) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Headers {
    type Output = Headers;
    fn bitor(self, rhs: Headers) -> Headers {
        self.union(rhs)
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Headers, &str); 9] = [
            (Headers::DETH, "DETH"),
            (Headers::RETH, "RETH"),
            (Headers::ATOMIC_ETH, "AtomicETH"),
            (Headers::AETH, "AETH"),
            (Headers::ATOMIC_ACK_ETH, "AtomicAckETH"),
            (Headers::IMMDT, "ImmDt"),
            (Headers::IETH, "IETH"),
            (Headers::FETH, "FETH"),
            (Headers::CNP, "CNP"),
        ];
        let mut list = f.debug_set();
        for (h, name) in NAMES {
            if self.contains(h) {
                list.entry(&format_args!("{name}"));
            }
        }
        list.finish()
    }
}

/// What an opcode carries: its name and headers, and whether it has a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The operation name without the transport prefix, as in ib_pack.h (`SEND_ONLY`).
    pub operation: &'static str,
    /// The extension headers after the BTH, in order.
    pub headers: Headers,
    /// True when data may follow the headers (SEND, WRITE, READ response, ATOMIC_WRITE).
    pub payload: bool,
}

/// The operation-specific low five bits of an opcode (IBA Table 38).
pub mod op {
    /// SEND First.
    pub const SEND_FIRST: u8 = 0x00;
    /// SEND Middle.
    pub const SEND_MIDDLE: u8 = 0x01;
    /// SEND Last.
    pub const SEND_LAST: u8 = 0x02;
    /// SEND Last with Immediate.
    pub const SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    /// SEND Only.
    pub const SEND_ONLY: u8 = 0x04;
    /// SEND Only with Immediate.
    pub const SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    /// RDMA WRITE First.
    pub const RDMA_WRITE_FIRST: u8 = 0x06;
    /// RDMA WRITE Middle.
    pub const RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// RDMA WRITE Last.
    pub const RDMA_WRITE_LAST: u8 = 0x08;
    /// RDMA WRITE Last with Immediate.
    pub const RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    /// RDMA WRITE Only.
    pub const RDMA_WRITE_ONLY: u8 = 0x0a;
    /// RDMA WRITE Only with Immediate.
    pub const RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0b;
    /// RDMA READ Request.
    pub const RDMA_READ_REQUEST: u8 = 0x0c;
    /// RDMA READ response First.
    pub const RDMA_READ_RESPONSE_FIRST: u8 = 0x0d;
    /// RDMA READ response Middle.
    pub const RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    /// RDMA READ response Last.
    pub const RDMA_READ_RESPONSE_LAST: u8 = 0x0f;
    /// RDMA READ response Only.
    pub const RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    /// Acknowledge (ACK, NAK, RNR NAK).
    pub const ACKNOWLEDGE: u8 = 0x11;
    /// ATOMIC Acknowledge.
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// CmpSwap.
    pub const COMPARE_SWAP: u8 = 0x13;
    /// FetchAdd.
    pub const FETCH_ADD: u8 = 0x14;
    /// SEND Last with Invalidate.
    pub const SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    /// SEND Only with Invalidate.
    pub const SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    /// FLUSH (IBA 1.5).
    pub const FLUSH: u8 = 0x1c;
    /// ATOMIC WRITE (IBA 1.5).
    pub const ATOMIC_WRITE: u8 = 0x1d;
}

/// The payload of an ATOMIC WRITE: one 8-byte word (IBA 1.5), whatever its RETH's DMA length.
pub const ATOMIC_WRITE_LEN: usize = 8;

const fn info(operation: &'static str, headers: Headers, payload: bool) -> Option<OpcodeInfo> {
    Some(OpcodeInfo {
        operation,
        headers,
        payload,
    })
}

/// Headers and payload of the low five bits for RC (UC and UD use subsets of it).
const fn rc_info(low: u8) -> Option<OpcodeInfo> {
    use Headers as H;
    match low {
        op::SEND_FIRST => info("SEND_FIRST", H::NONE, true),
        op::SEND_MIDDLE => info("SEND_MIDDLE", H::NONE, true),
        op::SEND_LAST => info("SEND_LAST", H::NONE, true),
        op::SEND_LAST_WITH_IMMEDIATE => info("SEND_LAST_WITH_IMMEDIATE", H::IMMDT, true),
        op::SEND_ONLY => info("SEND_ONLY", H::NONE, true),
        op::SEND_ONLY_WITH_IMMEDIATE => info("SEND_ONLY_WITH_IMMEDIATE", H::IMMDT, true),
        op::RDMA_WRITE_FIRST => info("RDMA_WRITE_FIRST", H::RETH, true),
        op::RDMA_WRITE_MIDDLE => info("RDMA_WRITE_MIDDLE", H::NONE, true),
        op::RDMA_WRITE_LAST => info("RDMA_WRITE_LAST", H::NONE, true),
        op::RDMA_WRITE_LAST_WITH_IMMEDIATE => {
            info("RDMA_WRITE_LAST_WITH_IMMEDIATE", H::IMMDT, true)
        }
        op::RDMA_WRITE_ONLY => info("RDMA_WRITE_ONLY", H::RETH, true),
        op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => info(
            "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            H::RETH.union(H::IMMDT),
            true,
        ),
        op::RDMA_READ_REQUEST => info("RDMA_READ_REQUEST", H::RETH, false),
        op::RDMA_READ_RESPONSE_FIRST => info("RDMA_READ_RESPONSE_FIRST", H::AETH, true),
        op::RDMA_READ_RESPONSE_MIDDLE => info("RDMA_READ_RESPONSE_MIDDLE", H::NONE, true),
        op::RDMA_READ_RESPONSE_LAST => info("RDMA_READ_RESPONSE_LAST", H::AETH, true),
        op::RDMA_READ_RESPONSE_ONLY => info("RDMA_READ_RESPONSE_ONLY", H::AETH, true),
        op::ACKNOWLEDGE => info("ACKNOWLEDGE", H::AETH, false),
        op::ATOMIC_ACKNOWLEDGE => info(
            "ATOMIC_ACKNOWLEDGE",
            H::AETH.union(H::ATOMIC_ACK_ETH),
            false,
        ),
        op::COMPARE_SWAP => info("COMPARE_SWAP", H::ATOMIC_ETH, false),
        op::FETCH_ADD => info("FETCH_ADD", H::ATOMIC_ETH, false),
        op::SEND_LAST_WITH_INVALIDATE => info("SEND_LAST_WITH_INVALIDATE", H::IETH, true),
        op::SEND_ONLY_WITH_INVALIDATE => info("SEND_ONLY_WITH_INVALIDATE", H::IETH, true),
        // FETH precedes RETH (rxe_opcode.c: FETH at BTH_BYTES, RETH after it).
        op::FLUSH => info("FLUSH", H::FETH.union(H::RETH), false),
        // The 8 bytes to write travel as payload (IBA 1.5 9.4.7).
        op::ATOMIC_WRITE => info("ATOMIC_WRITE", H::RETH, true),
        _ => None,
    }
}

/// A BTH opcode (8 bits). Any byte is representable; [`Opcode::info`] says whether it is known.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

impl Opcode {
    /// RoCEv2 congestion notification packet (Annex A17.9.3, Figure 6).
    pub const CNP: Opcode = Opcode(0x81);

    /// The opcode of operation `low` (an [`op`] constant) on `transport`.
    pub const fn new(transport: Transport, low: u8) -> Opcode {
        let high = match transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Rd => 0x40,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
            Transport::Xrc => 0xa0,
            Transport::Manufacturer => 0xc0,
        };
        Opcode(high | (low & 0x1f))
    }

    /// The byte as on the wire.
    pub const fn value(self) -> u8 {
        self.0
    }

    /// The transport the high three bits name.
    pub const fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Manufacturer,
        }
    }

    /// The operation bits (low five).
    pub const fn low(self) -> u8 {
        self.0 & 0x1f
    }

    /// Headers and payload for the RC, UC, UD and CNP opcodes; `None` for anything else.
    pub const fn info(self) -> Option<OpcodeInfo> {
        let low = self.low();
        match self.transport() {
            Transport::Rc => rc_info(low),
            // UC: SEND and RDMA WRITE only (IBA Table 38).
            Transport::Uc if low <= op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => rc_info(low),
            Transport::Ud => match low {
                op::SEND_ONLY => info("SEND_ONLY", Headers::DETH, true),
                op::SEND_ONLY_WITH_IMMEDIATE => info(
                    "SEND_ONLY_WITH_IMMEDIATE",
                    Headers::DETH.union(Headers::IMMDT),
                    true,
                ),
                _ => None,
            },
            Transport::Cnp if self.0 == Opcode::CNP.0 => info("CNP", Headers::CNP, false),
            _ => None,
        }
    }

    /// Whether the opcode table describes this opcode (RC, UC, UD or CNP).
    pub const fn is_known(self) -> bool {
        self.info().is_some()
    }

    /// Requests travel requester -> responder; responses (READ responses, ACKs) the other way.
    pub const fn is_request(self) -> bool {
        match self.transport() {
            Transport::Rc => !matches!(
                self.low(),
                op::RDMA_READ_RESPONSE_FIRST..=op::ATOMIC_ACKNOWLEDGE
            ),
            Transport::Uc | Transport::Ud => true,
            _ => false,
        }
    }

    /// An RC RDMA READ response (FIRST, MIDDLE, LAST or ONLY): the responses that carry a
    /// READ's data, one PSN each.
    pub const fn is_read_response(self) -> bool {
        matches!(self.transport(), Transport::Rc)
            && matches!(
                self.low(),
                op::RDMA_READ_RESPONSE_FIRST..=op::RDMA_READ_RESPONSE_ONLY
            )
    }

    /// True for the first or only packet of a message (it may carry RETH and starts an MSN).
    pub const fn is_first(self) -> bool {
        matches!(
            self.low(),
            op::SEND_FIRST
                | op::SEND_ONLY
                | op::SEND_ONLY_WITH_IMMEDIATE
                | op::RDMA_WRITE_FIRST
                | op::RDMA_WRITE_ONLY
                | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE
                | op::RDMA_READ_REQUEST
                | op::RDMA_READ_RESPONSE_FIRST
                | op::RDMA_READ_RESPONSE_ONLY
                | op::COMPARE_SWAP
                | op::FETCH_ADD
                | op::SEND_ONLY_WITH_INVALIDATE
                | op::FLUSH
                | op::ATOMIC_WRITE
        )
    }

    /// True for the last or only packet of a message.
    pub const fn is_last(self) -> bool {
        matches!(
            self.low(),
            op::SEND_LAST
                | op::SEND_LAST_WITH_IMMEDIATE
                | op::SEND_ONLY
                | op::SEND_ONLY_WITH_IMMEDIATE
                | op::RDMA_WRITE_LAST
                | op::RDMA_WRITE_LAST_WITH_IMMEDIATE
                | op::RDMA_WRITE_ONLY
                | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE
                | op::RDMA_READ_REQUEST
                | op::RDMA_READ_RESPONSE_LAST
                | op::RDMA_READ_RESPONSE_ONLY
                | op::ACKNOWLEDGE
                | op::ATOMIC_ACKNOWLEDGE
                | op::COMPARE_SWAP
                | op::FETCH_ADD
                | op::SEND_LAST_WITH_INVALIDATE
                | op::SEND_ONLY_WITH_INVALIDATE
                | op::FLUSH
                | op::ATOMIC_WRITE
        )
    }

    /// The project's name for the opcode: transport prefix plus operation (`RC_SEND_ONLY`),
    /// `CNP` for 0x81, `UNKNOWN` otherwise. The `Display` form keeps the value of unknown opcodes.
    pub const fn name(self) -> &'static str {
        match self.info() {
            Some(_) if self.0 == Opcode::CNP.0 => "CNP",
            Some(_) => NAMES[self.0 as usize],
            None => "UNKNOWN",
        }
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:#04x})", self.name(), self.0)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            f.write_str(self.name())
        } else {
            write!(f, "UNKNOWN_{:#04x}", self.0)
        }
    }
}

/// Full names of every known opcode, indexed by value, so that `name` needs no allocation.
static NAMES: [&str; 256] = {
    let mut names = [""; 256];
    let mut i = 0;
    while i < 256 {
        names[i] = full_name(i as u8);
        i += 1;
    }
    names
};

const fn full_name(v: u8) -> &'static str {
    macro_rules! names {
        ($($value:literal => $name:literal,)*) => {
            match v { $($value => $name,)* _ => "" }
        };
    }
    names! {
        0x00 => "RC_SEND_FIRST", 0x01 => "RC_SEND_MIDDLE", 0x02 => "RC_SEND_LAST",
        0x03 => "RC_SEND_LAST_WITH_IMMEDIATE", 0x04 => "RC_SEND_ONLY",
        0x05 => "RC_SEND_ONLY_WITH_IMMEDIATE", 0x06 => "RC_RDMA_WRITE_FIRST",
        0x07 => "RC_RDMA_WRITE_MIDDLE", 0x08 => "RC_RDMA_WRITE_LAST",
        0x09 => "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0a => "RC_RDMA_WRITE_ONLY",
        0x0b => "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0c => "RC_RDMA_READ_REQUEST",
        0x0d => "RC_RDMA_READ_RESPONSE_FIRST", 0x0e => "RC_RDMA_READ_RESPONSE_MIDDLE",
        0x0f => "RC_RDMA_READ_RESPONSE_LAST", 0x10 => "RC_RDMA_READ_RESPONSE_ONLY",
        0x11 => "RC_ACKNOWLEDGE", 0x12 => "RC_ATOMIC_ACKNOWLEDGE", 0x13 => "RC_COMPARE_SWAP",
        0x14 => "RC_FETCH_ADD", 0x16 => "RC_SEND_LAST_WITH_INVALIDATE",
        0x17 => "RC_SEND_ONLY_WITH_INVALIDATE", 0x1c => "RC_FLUSH", 0x1d => "RC_ATOMIC_WRITE",
        0x20 => "UC_SEND_FIRST", 0x21 => "UC_SEND_MIDDLE", 0x22 => "UC_SEND_LAST",
        0x23 => "UC_SEND_LAST_WITH_IMMEDIATE", 0x24 => "UC_SEND_ONLY",
        0x25 => "UC_SEND_ONLY_WITH_IMMEDIATE", 0x26 => "UC_RDMA_WRITE_FIRST",
        0x27 => "UC_RDMA_WRITE_MIDDLE", 0x28 => "UC_RDMA_WRITE_LAST",
        0x29 => "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x2a => "UC_RDMA_WRITE_ONLY",
        0x2b => "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        0x64 => "UD_SEND_ONLY", 0x65 => "UD_SEND_ONLY_WITH_IMMEDIATE",
        0x81 => "CNP",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_ib_pack() {
        assert_eq!(Opcode(0x04).name(), "RC_SEND_ONLY");
        assert_eq!(Opcode(0x64).name(), "UD_SEND_ONLY");
        assert_eq!(Opcode(0x2b).name(), "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");
        assert_eq!(Opcode(0x0e).name(), "RC_RDMA_READ_RESPONSE_MIDDLE");
        assert_eq!(Opcode(0x81).name(), "CNP");
        assert_eq!(Opcode(0x15).name(), "UNKNOWN");
        assert_eq!(
            Opcode(0x2c).to_string(),
            "UNKNOWN_0x2c",
            "UC has no RDMA READ"
        );
    }

    #[test]
    fn every_known_opcode_has_a_name_ending_in_its_operation() {
        for v in 0..=255u8 {
            let op = Opcode(v);
            match op.info() {
                Some(info) => assert!(op.name().ends_with(info.operation), "{op:?}"),
                None => assert_eq!(full_name(v), "", "{v:#x} named but not in the table"),
            }
        }
    }

    #[test]
    fn known_opcode_count() {
        // RC 25 (0x00-0x14, 0x16, 0x17, 0x1c, 0x1d), UC 12, UD 2, CNP 1.
        let count = (0..=255u8).filter(|&v| Opcode(v).is_known()).count();
        assert_eq!(count, 25 + 12 + 2 + 1);
    }

    #[test]
    fn headers_per_opcode_follow_rxe() {
        let h = |v: u8| Opcode(v).info().unwrap().headers;
        assert_eq!(h(0x0b), Headers::RETH | Headers::IMMDT);
        assert_eq!(h(0x12), Headers::AETH | Headers::ATOMIC_ACK_ETH);
        assert_eq!(h(0x65), Headers::DETH | Headers::IMMDT);
        assert_eq!(h(0x1c), Headers::FETH | Headers::RETH);
        assert_eq!(h(0x0e), Headers::NONE);
        assert!(
            !Opcode(0x0c).info().unwrap().payload,
            "READ request carries no data"
        );
    }

    #[test]
    fn request_and_boundaries() {
        assert!(Opcode(0x0c).is_request());
        assert!(!Opcode(0x11).is_request());
        assert!(Opcode(0x0d).is_read_response() && Opcode(0x10).is_read_response());
        assert!(!Opcode(0x11).is_read_response() && !Opcode(0x0c).is_read_response());
        assert!(!Opcode(0x2d).is_read_response(), "UC has no READ");
        assert!(!Opcode(0x0f).is_request());
        assert!(Opcode(0x06).is_first() && !Opcode(0x06).is_last());
        assert!(Opcode(0x0a).is_first() && Opcode(0x0a).is_last());
        assert!(!Opcode(0x01).is_first() && !Opcode(0x01).is_last());
    }
}
