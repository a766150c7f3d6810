//! The unreliable services at the responder: UD checks the Q_Key (IBA 10.2.5) and fills the
//! GRH area of a receive from the IP header (Annex A17.4.5.2), and UC drops a message with a
//! gap silently, reusing its receive (IBA 9.8.3.1).

use core::time::Duration;
use std::net::IpAddr;

use etherparse::{Ipv4HeaderSlice, Ipv6HeaderSlice};

use super::{Conn, Result, Setup, connect, describe_all, fail, pass, pattern, quiet, wcs_text};
use crate::conform::harness::{Ctx, packet};
use crate::conform::suite::{Check, Role, Verdict};
use crate::transport::QpType;
use crate::wire::encap::{GRH_LEN, IP_PROTOCOL_UDP, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use crate::wire::icrc::ICRC_LEN;
use crate::wire::opcode::op;
use crate::wire::{BthRepr, DethRepr, ExtHeaders, FixedHeader, IbPacketRepr, Transport};

/// The Q_Key the agent's UD QPs get (`QpPath::new`).
const QKEY: u32 = 0x1111_1111;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.ud.qkey",
        rule: "IBA 10.2.5, 9.6.1",
        title: "a UD SEND with the wrong Q_Key is dropped; with the right one it is delivered \
                after the 40-byte GRH area",
        role: Role::Responder,
        body: ud_qkey,
    },
    Check {
        id: "resp.ud.grh-area",
        rule: "Annex A17.4.5.2",
        title: "a UD receive's 40-byte GRH area holds the IP header as sent: IPv4 in its \
                second 20 bytes, IPv6 whole",
        role: Role::Responder,
        body: ud_grh_area,
    },
    Check {
        id: "resp.uc.gap-drops-message",
        rule: "IBA 9.8.3.1",
        title: "a UC message with a missing packet is dropped silently; the next message \
                uses the same receive",
        role: Role::Responder,
        body: uc_gap,
    },
];

/// A UD SEND ONLY of `data` to the peer's QP from the tester's, with `qkey`.
fn ud_send<'d>(c: &Conn, qkey: u32, data: &'d [u8]) -> IbPacketRepr<'d> {
    let ext = ExtHeaders {
        deth: Some(DethRepr {
            qkey,
            resv: 0,
            src_qp: c.tq,
        }),
        ..ExtHeaders::default()
    };
    packet(
        Transport::Ud,
        op::SEND_ONLY,
        c.qpn,
        c.epsn,
        ext,
        data,
        false,
    )
}

fn ud_qkey(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.qp_type = QpType::Ud;
    let c = connect(ctx, s)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 1024)?;
    let wrong = pattern(64, 1);
    ctx.send(ud_send(&c, 0x2222_2222, &wrong))?;
    let silence = quiet(ctx)?;
    let wc_wrong = ctx.poll_cq(c.qpn, Duration::ZERO)?;
    let right = pattern(64, 2);
    ctx.send(ud_send(&c, QKEY, &right))?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 40, 64)?;
    let delivered = wcs
        .iter()
        .any(|w| w.wr_id == 1 && w.status == "SUCCESS" && w.byte_len == 40 + 64);
    if silence.is_empty() && wc_wrong.is_empty() && delivered && landed == right {
        pass(
            "Q_Key 0x22222222: dropped, no completion; Q_Key 0x11111111: delivered, 104 B \
              (GRH + 64)",
        )
    } else {
        fail(format!(
            "wrong Q_Key: {} and completions {}; right Q_Key: completions {}, data after the \
             GRH area: {}",
            describe_all(&silence),
            wcs_text(&wc_wrong),
            wcs_text(&wcs),
            landed == right
        ))
    }
}

fn ud_grh_area(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.qp_type = QpType::Ud;
    let c = connect(ctx, s)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 1024)?;
    let data = pattern(64, 3);
    ctx.send(ud_send(&c, QKEY, &data))?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    if !wcs.iter().any(|w| w.wr_id == 1 && w.status == "SUCCESS") {
        return fail(format!("the UD SEND was not received: {}", wcs_text(&wcs)));
    }
    let area = ctx.read_mr(&c.mr, 0, GRH_LEN as u32)?;
    let ip_payload = UDP_HEADER_LEN + BthRepr::LEN + DethRepr::LEN + data.len() + ICRC_LEN;
    let (tester, peer) = (ctx.env().tester_ip, ctx.env().peer_ip);
    let (ok, seen) = match (tester, peer) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            // The IPv4 header in the second half.
            let h = &area[GRH_LEN - IPV4_HEADER_LEN..];
            let ok = Ipv4HeaderSlice::from_slice(h).is_ok_and(|h| {
                h.slice().len() == IPV4_HEADER_LEN
                    && h.protocol().0 == IP_PROTOCOL_UDP
                    && usize::from(h.total_len()) == IPV4_HEADER_LEN + ip_payload
                    && h.source() == src.octets()
                    && h.destination() == dst.octets()
            });
            (ok, format!("bytes 20-39 {h:02x?}"))
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let ok = Ipv6HeaderSlice::from_slice(&area).is_ok_and(|h| {
                h.next_header().0 == IP_PROTOCOL_UDP
                    && usize::from(h.payload_length()) == ip_payload
                    && h.source() == src.octets()
                    && h.destination() == dst.octets()
            });
            (ok, format!("{area:02x?}"))
        }
        _ => return fail("the tester's and the peer's addresses are of different families"),
    };
    let what = if tester.is_ipv4() {
        "the IPv4 header sent (version 4, IHL 5, UDP, its total length and addresses)"
    } else {
        "the IPv6 header sent (next header UDP, its payload length and addresses)"
    };
    if ok {
        pass(format!("the GRH area holds {what}"))
    } else {
        fail(format!("expected {what}; the GRH area: {seen}"))
    }
}

fn uc_gap(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let mut s = Setup::rc();
    s.path.qp_type = QpType::Uc;
    let c = connect(ctx, s)?;
    ctx.post_recv(c.qpn, 1, &c.mr, 0, 4096)?;
    let mtu = c.mtu as usize;
    let none = ExtHeaders::default;
    let uc = |low, psn, data| packet(Transport::Uc, low, c.qpn, psn, none(), data, false);
    let first = pattern(mtu, 1);
    let last = pattern(64, 2);
    ctx.send(uc(op::SEND_FIRST, c.epsn, &first))?;
    // SEND MIDDLE at epsn + 1 is "lost".
    ctx.send(uc(op::SEND_LAST, c.epsn.add(2), &last))?;
    let silence = quiet(ctx)?;
    let wc_gap = ctx.poll_cq(c.qpn, Duration::ZERO)?;
    let next = pattern(100, 3);
    ctx.send(uc(op::SEND_ONLY, c.epsn.add(3), &next))?;
    let t = ctx.env().timing;
    let wcs = ctx.poll_cq(c.qpn, t.response)?;
    let landed = ctx.read_mr(&c.mr, 0, 100)?;
    let reused = wcs
        .iter()
        .any(|w| w.wr_id == 1 && w.status == "SUCCESS" && w.byte_len == 100);
    if silence.is_empty() && wc_gap.is_empty() && reused && landed == next {
        pass(
            "FIRST, (MIDDLE lost), LAST: no completion, no answer; the next SEND ONLY \
              completed in the same receive",
        )
    } else {
        fail(format!(
            "UC message with a gap: {} and completions {}; next message: completions {}, \
             data landed: {}",
            describe_all(&silence),
            wcs_text(&wc_gap),
            wcs_text(&wcs),
            landed == next
        ))
    }
}
