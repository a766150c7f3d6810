//! The IB transport part of a RoCEv2 packet: BTH, the extension headers its opcode calls for,
//! payload and pad, everything the ICRC covers after the UDP header except the ICRC itself.

use super::FixedHeader;
use super::aeth::AethRepr;
use super::atomic_ack_eth::AtomicAckEthRepr;
use super::atomic_eth::AtomicEthRepr;
use super::bth::BthRepr;
use super::cnp::CnpRepr;
use super::deth::DethRepr;
use super::error::{Result, WireError, check_len};
use super::feth::FethRepr;
use super::ieth::IethRepr;
use super::immdt::ImmDtRepr;
use super::opcode::{Headers, Opcode};
use super::reth::RethRepr;

/// The extension headers of one packet; which are present is decided by the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// Datagram ETH: UD requests.
    pub deth: Option<DethRepr>,
    /// Flush ETH: FLUSH requests.
    pub feth: Option<FethRepr>,
    /// RDMA ETH: WRITE and READ requests (the first packet), FLUSH.
    pub reth: Option<RethRepr>,
    /// Atomic ETH: COMPARE_SWAP and FETCH_ADD requests.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// ACK ETH: acknowledgements, NAKs, READ responses (first and last).
    pub aeth: Option<AethRepr>,
    /// Atomic acknowledge ETH: the original value an atomic returns.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data: the last packet of a SEND or WRITE with immediate.
    pub immdt: Option<ImmDtRepr>,
    /// Invalidate ETH: the last packet of a SEND with invalidate.
    pub ieth: Option<IethRepr>,
    /// The 16 reserved bytes of a CNP.
    pub cnp: Option<CnpRepr>,
}

/// Visits each extension header slot in wire order (IBA 9.2: DETH, then FETH before RETH as
/// rxe places it for FLUSH, RETH or AtomicETH, AETH, AtomicAckETH, ImmDt, IETH; the CNP body
/// stands alone). One list drives parse, emit and length so they cannot disagree.
macro_rules! for_each_header {
    ($m:ident) => {
        $m!(deth, DETH, DethRepr);
        $m!(feth, FETH, FethRepr);
        $m!(reth, RETH, RethRepr);
        $m!(atomic_eth, ATOMIC_ETH, AtomicEthRepr);
        $m!(aeth, AETH, AethRepr);
        $m!(atomic_ack_eth, ATOMIC_ACK_ETH, AtomicAckEthRepr);
        $m!(immdt, IMMDT, ImmDtRepr);
        $m!(ieth, IETH, IethRepr);
        $m!(cnp, CNP, CnpRepr);
    };
}

fn headers_of(opcode: Opcode) -> Result<Headers> {
    opcode
        .info()
        .map(|info| info.headers)
        .ok_or(WireError::UnknownOpcode(opcode.value()))
}

impl ExtHeaders {
    /// The most any opcode carries: an AtomicETH (28 bytes; RETH + ImmDt is 20, DETH + ImmDt
    /// 12, FETH + RETH 20).
    pub const MAX_LEN: usize = AtomicEthRepr::LEN;

    /// Total size of the headers `opcode` carries, or an error for an unknown opcode.
    pub fn len_for(opcode: Opcode) -> Result<usize> {
        let set = headers_of(opcode)?;
        let mut len = 0;
        macro_rules! add {
            ($f:ident, $flag:ident, $ty:ty) => {
                if set.contains(Headers::$flag) {
                    len += <$ty>::LEN;
                }
            };
        }
        for_each_header!(add);
        Ok(len)
    }

    /// Total size of the headers present (what [`ExtHeaders::len_for`] gives for an opcode
    /// that calls for exactly these), without consulting the opcode table.
    pub fn len(&self) -> usize {
        let mut len = 0;
        macro_rules! add {
            ($f:ident, $flag:ident, $ty:ty) => {
                if self.$f.is_some() {
                    len += <$ty>::LEN;
                }
            };
        }
        for_each_header!(add);
        len
    }

    /// True if no extension header is present.
    pub fn is_empty(&self) -> bool {
        self.present() == Headers::NONE
    }

    /// The set of headers present, to compare with what an opcode calls for.
    pub fn present(&self) -> Headers {
        let mut set = Headers::NONE;
        macro_rules! add {
            ($f:ident, $flag:ident, $ty:ty) => {
                if self.$f.is_some() {
                    set = set | Headers::$flag;
                }
            };
        }
        for_each_header!(add);
        set
    }

    /// Parses the headers `opcode` calls for from the start of `buf` (the bytes after the
    /// BTH); returns them and the number of bytes they took.
    pub fn parse(opcode: Opcode, buf: &[u8]) -> Result<(ExtHeaders, usize)> {
        let set = headers_of(opcode)?;
        let mut ext = ExtHeaders::default();
        let mut at = 0;
        macro_rules! take {
            ($f:ident, $flag:ident, $ty:ty) => {
                if set.contains(Headers::$flag) {
                    ext.$f = Some(<$ty>::parse(buf.get(at..).unwrap_or(&[]))?);
                    at += <$ty>::LEN;
                }
            };
        }
        for_each_header!(take);
        Ok((ext, at))
    }

    /// Writes the headers into the start of `buf`; fails unless exactly the headers `opcode`
    /// calls for are present, so that no packet leaves with a header missing or extra.
    pub fn emit(&self, opcode: Opcode, buf: &mut [u8]) -> Result<usize> {
        if self.present() != headers_of(opcode)? {
            return Err(WireError::Malformed {
                header: "extension headers",
                reason: "the headers present differ from those the opcode calls for",
            });
        }
        // The headers present are the opcode's: their length is its length.
        check_len("extension headers", buf, self.len())?;
        let mut at = 0;
        macro_rules! put {
            ($f:ident, $flag:ident, $ty:ty) => {
                if let Some(h) = &self.$f {
                    h.emit_unchecked(&mut buf[at..]);
                    at += <$ty>::LEN;
                }
            };
        }
        for_each_header!(put);
        Ok(at)
    }
}

/// Pad bytes needed to bring a payload to a multiple of four (BTH PadCnt, IBA 9.2.3).
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}

/// BTH, extension headers, payload and pad: what follows the UDP header up to the ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbPacketRepr<'a> {
    /// The base transport header.
    pub bth: BthRepr,
    /// The extension headers the opcode calls for.
    pub ext: ExtHeaders,
    /// The payload, without the pad.
    pub payload: &'a [u8],
}

impl<'a> IbPacketRepr<'a> {
    /// The longest packet (BTH through pad) with at most `payload` bytes of payload: the BTH,
    /// the largest set of extension headers, the payload and its pad, in whole 4-byte words.
    pub const fn max_len(payload: usize) -> usize {
        (BthRepr::LEN + ExtHeaders::MAX_LEN + payload + 3).next_multiple_of(4)
    }

    /// A packet to send: the BTH's pad count is set from the payload length.
    pub fn new(mut bth: BthRepr, ext: ExtHeaders, payload: &'a [u8]) -> IbPacketRepr<'a> {
        bth.pad_count = pad_for(payload.len());
        IbPacketRepr { bth, ext, payload }
    }

    /// Parses `buf`, which holds BTH through pad and no ICRC. The payload is what lies between
    /// the headers and the `PadCnt` pad bytes.
    pub fn parse(buf: &'a [u8]) -> Result<IbPacketRepr<'a>> {
        let bth = BthRepr::parse(buf)?;
        let after_bth = &buf[BthRepr::LEN..];
        let (ext, ext_len) = ExtHeaders::parse(bth.opcode, after_bth)?;
        let rest = &after_bth[ext_len..];
        let pad = usize::from(bth.pad_count);
        if pad > rest.len() {
            return Err(WireError::Malformed {
                header: "BTH",
                reason: "pad count is larger than what follows the headers",
            });
        }
        Ok(IbPacketRepr {
            bth,
            ext,
            payload: &rest[..rest.len() - pad],
        })
    }

    /// Bytes from the BTH through the pad. The extension headers counted are those present,
    /// which [`IbPacketRepr::emit`] requires to be the opcode's (once per packet built: the
    /// opcode table is consulted there, not here as well).
    pub fn buffer_len(&self) -> usize {
        BthRepr::LEN + self.ext.len() + self.payload.len() + usize::from(self.bth.pad_count)
    }

    /// Writes BTH, headers, payload and zeroed pad into the start of `buf`; returns the length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        check_len("IB packet", buf, len)?;
        self.bth.emit_unchecked(buf);
        let ext_len = self.ext.emit(self.bth.opcode, &mut buf[BthRepr::LEN..])?;
        let start = BthRepr::LEN + ext_len;
        let end = start + self.payload.len();
        buf[start..end].copy_from_slice(self.payload);
        buf[end..len].fill(0);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::aeth::{NakCode, Syndrome};
    use crate::wire::{Msn, Psn, Qpn};
    use proptest::prelude::*;

    fn bth(op: u8) -> BthRepr {
        BthRepr::new(Opcode(op), Qpn::new(0x11), Psn::new(100))
    }

    #[test]
    fn max_len_bounds_every_opcode() {
        let longest = (0..=255u8)
            .filter_map(|op| ExtHeaders::len_for(Opcode(op)).ok())
            .max();
        assert_eq!(longest, Some(ExtHeaders::MAX_LEN));
        assert_eq!(IbPacketRepr::max_len(4096), 12 + 28 + 4096 + 4);
        assert_eq!(IbPacketRepr::max_len(1), 12 + 28 + 4);
    }

    #[test]
    fn write_only_with_immediate_has_reth_then_immdt() {
        let ext = ExtHeaders {
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: 7,
                dma_len: 5,
            }),
            immdt: Some(ImmDtRepr { imm: 0xabcd }),
            ..Default::default()
        };
        let pkt = IbPacketRepr::new(bth(0x0b), ext, b"hello");
        assert_eq!(pkt.bth.pad_count, 3);
        let mut buf = vec![0u8; pkt.buffer_len()];
        assert_eq!(pkt.emit(&mut buf).unwrap(), 12 + 16 + 4 + 5 + 3);
        assert_eq!(&buf[28..32], &[0, 0, 0xab, 0xcd], "ImmDt follows RETH");
        assert_eq!(&buf[32..37], b"hello");
        assert_eq!(IbPacketRepr::parse(&buf).unwrap(), pkt);
    }

    #[test]
    fn nak_has_no_payload() {
        let ext = ExtHeaders {
            aeth: Some(AethRepr {
                syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                msn: Msn::new(3),
            }),
            ..Default::default()
        };
        let pkt = IbPacketRepr::new(bth(0x11), ext, &[]);
        let mut buf = [0u8; 16];
        pkt.emit(&mut buf).unwrap();
        assert_eq!(buf[12], 0x60);
        assert_eq!(IbPacketRepr::parse(&buf).unwrap(), pkt);
    }

    #[test]
    fn mismatched_headers_are_refused() {
        let pkt = IbPacketRepr::new(bth(0x0a), ExtHeaders::default(), b"data");
        let mut buf = [0u8; 64];
        assert!(pkt.emit(&mut buf).is_err(), "WRITE_ONLY without RETH");
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut buf = [0u8; 12];
        bth(0x15).emit(&mut buf).unwrap();
        assert_eq!(
            IbPacketRepr::parse(&buf),
            Err(WireError::UnknownOpcode(0x15))
        );
        bth(0x0a).emit(&mut buf).unwrap();
        assert!(matches!(
            IbPacketRepr::parse(&buf),
            Err(WireError::Truncated { header: "RETH", .. })
        ));
        let mut b = bth(0x04);
        b.pad_count = 3;
        b.emit(&mut buf).unwrap();
        assert!(
            IbPacketRepr::parse(&buf).is_err(),
            "pad longer than the payload"
        );
    }

    proptest! {
        /// Any byte string either fails to parse or re-emits to itself (pad bytes zeroed).
        #[test]
        fn parse_emit_identity(mut raw in proptest::collection::vec(any::<u8>(), 0..96), op in 0u8..0x30) {
            if raw.is_empty() { return Ok(()); }
            raw[0] = op;
            let original = raw.clone();
            if let Ok(pkt) = IbPacketRepr::parse(&original) {
                let pad = usize::from(pkt.bth.pad_count);
                let n = raw.len();
                raw[n - pad..].fill(0);
                let mut out = vec![0u8; pkt.buffer_len()];
                prop_assert_eq!(pkt.emit(&mut out).unwrap(), raw.len());
                prop_assert_eq!(out, raw);
            }
        }
    }
}
