//! Deterministic example packets of every known opcode, for tests, benchmarks, fuzz seeds and
//! the scapy cross-check. Field values come from a seeded RNG: the same seed gives the same
//! bytes on every run.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::aeth::{AethRepr, NakCode, RnrTimer, Syndrome};
use super::atomic_ack_eth::AtomicAckEthRepr;
use super::atomic_eth::AtomicEthRepr;
use super::bth::BthRepr;
use super::builder::RoceRepr;
use super::cnp::CnpRepr;
use super::deth::DethRepr;
use super::encap::{Ecn, EthernetRepr, VlanTag};
use super::ext::{ExtHeaders, IbPacketRepr};
use super::feth::FethRepr;
use super::field::{Msn, PKey, Psn, Qpn};
use super::ieth::IethRepr;
use super::immdt::ImmDtRepr;
use super::opcode::{Headers, Opcode};
use super::reth::RethRepr;
use crate::rng::Rng;

/// Every opcode the opcode table knows (RC, UC, UD and CNP), in numeric order.
pub fn known_opcodes() -> impl Iterator<Item = Opcode> {
    (0..=255u8).map(Opcode).filter(|op| op.is_known())
}

fn u32_of(rng: &mut Rng) -> u32 {
    rng.next_u64() as u32
}

/// A syndrome of each kind in turn: ACK, RNR NAK, and the five NAK codes.
fn syndrome(rng: &mut Rng) -> Syndrome {
    let low = rng.next_u64() as u8 & 0x1f;
    match rng.below(3) {
        0 => Syndrome::Ack { credits: low },
        1 => Syndrome::RnrNak {
            timer: RnrTimer::new(low),
        },
        _ => Syndrome::Nak(NakCode::from_code(low % 5)),
    }
}

/// Extension headers with random contents for `opcode`; `None` for an unknown opcode.
pub fn ext_headers(opcode: Opcode, rng: &mut Rng) -> Option<ExtHeaders> {
    let set = opcode.info()?.headers;
    let has = |h| set.contains(h);
    let mut ext = ExtHeaders::default();
    if has(Headers::DETH) {
        ext.deth = Some(DethRepr {
            qkey: u32_of(rng),
            resv: 0,
            src_qp: Qpn::new(u32_of(rng)),
        });
    }
    if has(Headers::FETH) {
        ext.feth = Some(FethRepr { raw: u32_of(rng) });
    }
    if has(Headers::RETH) {
        ext.reth = Some(RethRepr {
            va: rng.next_u64(),
            rkey: u32_of(rng),
            dma_len: u32_of(rng),
        });
    }
    if has(Headers::ATOMIC_ETH) {
        ext.atomic_eth = Some(AtomicEthRepr {
            va: rng.next_u64() & !7,
            rkey: u32_of(rng),
            swap_add: rng.next_u64(),
            compare: rng.next_u64(),
        });
    }
    if has(Headers::AETH) {
        ext.aeth = Some(AethRepr {
            syndrome: syndrome(rng),
            msn: Msn::new(u32_of(rng)),
        });
    }
    if has(Headers::ATOMIC_ACK_ETH) {
        ext.atomic_ack_eth = Some(AtomicAckEthRepr {
            orig: rng.next_u64(),
        });
    }
    if has(Headers::IMMDT) {
        ext.immdt = Some(ImmDtRepr { imm: u32_of(rng) });
    }
    if has(Headers::IETH) {
        ext.ieth = Some(IethRepr { rkey: u32_of(rng) });
    }
    if has(Headers::CNP) {
        ext.cnp = Some(CnpRepr::default());
    }
    Some(ext)
}

/// Payload length for a packet of `opcode`: none where the opcode carries none, 8 bytes for
/// ATOMIC_WRITE, otherwise `len`.
pub fn payload_len(opcode: Opcode, len: usize) -> usize {
    match opcode.info() {
        Some(info) if !info.payload => 0,
        _ if opcode.low() == super::opcode::op::ATOMIC_WRITE => super::opcode::ATOMIC_WRITE_LEN,
        _ => len,
    }
}

/// The BTH of a packet of `opcode` with random QPN, PSN and flags; a CNP gets PSN 0 and clear
/// SE and M as Annex A17.9.3 prescribes, BECN as NICs send it, and the default P_Key (that
/// of the packet it answers, in the annex).
pub fn bth(opcode: Opcode, rng: &mut Rng) -> BthRepr {
    let mut bth = BthRepr::new(opcode, Qpn::new(u32_of(rng)), Psn::new(u32_of(rng)));
    if opcode == Opcode::CNP {
        bth.becn = true;
        bth.psn = Psn::new(0);
        return bth;
    }
    let flags = rng.next_u64();
    bth.solicited = flags & 1 != 0;
    bth.ack_req = flags & 2 != 0;
    bth.fecn = flags & 4 != 0;
    bth.becn = flags & 8 != 0;
    bth.pkey = if flags & 16 != 0 {
        PKey::DEFAULT
    } else {
        PKey(flags as u16 >> 5)
    };
    bth
}

/// One frame per known opcode, address family (IPv4, IPv6) and tagging (none, 802.1Q), with
/// payload lengths that give every pad count and every ECN codepoint.
pub fn frames(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let v4 = |a: u8| IpAddr::V4(Ipv4Addr::new(192, 168, 122, a));
    let v6 = |a: u16| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, a));
    let mut n = 0usize;
    for opcode in known_opcodes() {
        for (src, dst) in [(v4(10), v4(11)), (v6(10), v6(11))] {
            for vlan in [false, true] {
                n += 1;
                let Some(ext) = ext_headers(opcode, &mut rng) else {
                    continue;
                };
                let mut payload = vec![0u8; payload_len(opcode, n * 37 % 1000)];
                rng.fill(&mut payload);
                let ib = IbPacketRepr::new(bth(opcode, &mut rng), ext, &payload);
                let src_qpn = Qpn::new(u32_of(&mut rng));
                let mac = |last: u8| [0x52, 0x54, 0x00, 0x12, 0x34, last];
                let Some(mut repr) = RoceRepr::rxe(mac(1), mac(2), src, dst, src_qpn, ib) else {
                    continue;
                };
                repr.ip.set_ecn(Ecn::from_bits(n as u8));
                repr.ip.set_dscp((n % 64) as u8);
                if let (true, Some(eth)) = (vlan, &mut repr.eth) {
                    eth.vlan = Some(VlanTag {
                        pcp: (n % 8) as u8,
                        dei: false,
                        vid: (n % 4095 + 1) as u16,
                    });
                }
                if let Ok(frame) = repr.to_vec() {
                    out.push(frame);
                }
            }
        }
    }
    out
}

/// RoCEv1 frames (GRH over Ethernet): one per known opcode but the CNP, untagged and 802.1Q-tagged in
/// turn, with every pad count and traffic class.
pub fn roce_v1_frames(seed: u64) -> Vec<Vec<u8>> {
    use super::grh::{GrhRepr, RoceV1Repr};
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let gid = |a: u16| Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe12, a);
    // The CNP is RoCEv2's (Annex A17).
    for (n, opcode) in known_opcodes().filter(|&o| o != Opcode::CNP).enumerate() {
        let Some(ext) = ext_headers(opcode, &mut rng) else {
            continue;
        };
        let mut payload = vec![0u8; payload_len(opcode, n * 37 % 1000)];
        rng.fill(&mut payload);
        let ib = IbPacketRepr::new(bth(opcode, &mut rng), ext, &payload);
        let mut grh = GrhRepr::new(gid(0x3401), gid(0x3402));
        grh.traffic_class = (n * 7) as u8;
        grh.flow_label = u32_of(&mut rng) & 0xf_ffff;
        let mut eth = EthernetRepr::new(
            [0x52, 0x54, 0, 0x12, 0x34, 1],
            [0x52, 0x54, 0, 0x12, 0x34, 2],
        );
        if n % 2 == 1 {
            eth.vlan = Some(VlanTag {
                pcp: (n % 8) as u8,
                dei: false,
                vid: (n % 4095 + 1) as u16,
            });
        }
        if let Ok(frame) = (RoceV1Repr { eth, grh, ib }).to_vec() {
            out.push(frame);
        }
    }
    out
}

/// MAC control frames: 802.3x PAUSE (XOFF and XON), PFC with assorted enable vectors and
/// times (one with the reserved byte set), and another opcode.
pub fn mac_control_frames() -> Vec<Vec<u8>> {
    use super::pause::{MacControlRepr, PauseRepr, PfcRepr};
    let src = [0x52, 0x54, 0, 0x12, 0x34, 9];
    let mut reserved = PfcRepr::new(&[(5, 0x1234)]);
    reserved.enable_vector |= 0x8000;
    [
        MacControlRepr::Pause(PauseRepr { quanta: 0xffff }),
        MacControlRepr::Pause(PauseRepr { quanta: 0 }),
        MacControlRepr::Pfc(PfcRepr::new(&[(3, 0xffff)])),
        MacControlRepr::Pfc(PfcRepr::new(&[(3, 0)])),
        MacControlRepr::Pfc(PfcRepr::new(&[(0, 1), (1, 2), (6, 300), (7, 0)])),
        MacControlRepr::Pfc(reserved),
        MacControlRepr::Other(0x0003),
    ]
    .iter()
    .map(|c| c.frame(src))
    .collect()
}

/// An Ethernet frame carrying an RC SEND ONLY to QP 0x11 with `payload` zero bytes from `src`
/// to `dst`, marked ECT(0), ICRC filled: the plain data frame that device and link tests pass
/// around. `None` if the addresses are of different families.
pub fn rc_send_only(src: IpAddr, dst: IpAddr, payload: usize) -> Option<Vec<u8>> {
    let zeros = vec![0u8; payload];
    let opcode = Opcode::new(super::opcode::Transport::Rc, super::opcode::op::SEND_ONLY);
    let bth = BthRepr::new(opcode, Qpn::new(0x11), Psn::new(0));
    let ib = IbPacketRepr::new(bth, ExtHeaders::default(), &zeros);
    let mac = |last: u8| [0x02, 0, 0, 0, 0, last];
    let repr = RoceRepr::rxe(mac(1), mac(2), src, dst, Qpn::new(0x11), ib)?.with_ecn(Ecn::Ect0);
    repr.to_vec().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::RocePacket;

    #[test]
    fn every_opcode_family_and_pad_is_covered() {
        let frames = frames(1);
        assert_eq!(frames.len(), known_opcodes().count() * 4);
        let mut pads = [0usize; 4];
        for frame in &frames {
            let pkt = RocePacket::parse(frame).unwrap();
            assert!(pkt.icrc_ok());
            pads[usize::from(pkt.bth().pad_count)] += 1;
        }
        assert!(pads.iter().all(|&n| n > 0), "pad counts seen: {pads:?}");
        assert_eq!(frames, super::frames(1), "deterministic");
        let v1 = roce_v1_frames(1);
        assert_eq!(v1.len(), known_opcodes().count() - 1);
        for frame in &v1 {
            let p = crate::wire::grh::RoceV1Packet::parse(frame).unwrap();
            assert!(p.icrc_ok());
            assert_eq!(&p.repr().to_vec().unwrap(), frame);
        }
        for frame in mac_control_frames() {
            let body = crate::wire::pause::MacControlRepr::parse(&frame[14..]).unwrap();
            assert_eq!(body.frame(frame[6..12].try_into().unwrap()), frame);
        }
    }
}
