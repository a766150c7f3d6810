//! Packets a responder must drop without a word (IBA 9.6.1, Annex A17.3.4, A17.6): a bad ICRC,
//! an IPv4 header the RoCEv2 annex does not allow, a P_Key of another partition, an
//! unsupported transport version, an unknown destination QP or QP0, or a source that is not
//! the connected peer.
//! Each is followed by a valid request at the same PSN, which must be ACKed: the dropped
//! packet changed nothing.

use std::net::IpAddr;

use super::{Conn, Result, describe_all, fail, pass, pattern, quiet, rc, reth, until};
use crate::conform::harness::{Ctx, Ipv4Fault, Wire, packet};
use crate::conform::suite::{Check, Role, Verdict};
use crate::wire::Transport;
use crate::wire::opcode::op;
use crate::wire::{IbPacketRepr, PKey, Qpn};

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "resp.drop.bad-icrc",
        rule: "Annex A17.3.3, A17.3.4",
        title: "a request with a bad ICRC is dropped silently and changes nothing",
        role: Role::Responder,
        body: bad_icrc,
    },
    Check {
        id: "resp.drop.ip-checksum",
        rule: "Annex A17.3.1.1, A17.3.4",
        title: "a request whose IPv4 header checksum is wrong (its ICRC right) is dropped \
                silently",
        role: Role::Responder,
        body: ip_checksum,
    },
    Check {
        id: "resp.drop.ip-options",
        rule: "Annex A17.3.4 (CA17-3, CA17-24)",
        title: "a request with IPv4 options (IHL 6, its ICRC right) is dropped silently",
        role: Role::Responder,
        body: ip_options,
    },
    Check {
        id: "resp.drop.ip-df-clear",
        rule: "Annex A17.3.4 (CA17-7, CA17-24)",
        title: "a request with IPv4 DF clear (its ICRC right) is dropped silently",
        role: Role::Responder,
        body: ip_df_clear,
    },
    Check {
        id: "resp.drop.ip-version",
        rule: "Annex A17.4.4.1 (CA17-27)",
        title: "a request in an IPv4 frame whose IP version field says 6 (its header checksum \
                and ICRC right) is dropped silently",
        role: Role::Responder,
        body: ip_version,
    },
    Check {
        id: "resp.drop.pkey",
        rule: "IBA 9.6.1.1, 10.9.3",
        title: "a request with a P_Key of another partition is dropped silently",
        role: Role::Responder,
        body: wrong_pkey,
    },
    Check {
        id: "resp.drop.tver",
        rule: "IBA 9.2, 9.6.1",
        title: "a request with a transport header version other than 0 is dropped silently",
        role: Role::Responder,
        body: wrong_tver,
    },
    Check {
        id: "resp.drop.unknown-qp",
        rule: "IBA 9.6.1",
        title: "a request to a QP that does not exist is dropped silently",
        role: Role::Responder,
        body: unknown_qp,
    },
    Check {
        id: "resp.drop.qp0",
        rule: "Annex A17.6 (CA17-33), A17.5.8",
        title: "a request to QP0, which a RoCEv2 port does not have, is dropped silently",
        role: Role::Responder,
        body: qp0,
    },
    Check {
        id: "resp.drop.wrong-source",
        rule: "IBA 9.6.1, 10.2.4",
        title: "a request to an RC QP from an address other than its connected peer's is \
                dropped silently",
        role: Role::Responder,
        body: wrong_source,
    },
];

/// A WRITE of 64 bytes at offset 0 and the expected PSN, as sent after the bad packet.
fn write_at_epsn<'d>(c: &Conn, data: &'d [u8]) -> IbPacketRepr<'d> {
    let ext = reth(c.mr.addr, c.mr.rkey, data.len() as u32);
    packet(
        Transport::Rc,
        op::RDMA_WRITE_ONLY,
        c.qpn,
        c.epsn,
        ext,
        data,
        true,
    )
}

/// Sends `bad` (with `wire`), expects silence and an untouched region, then a valid WRITE
/// at the same PSN must be ACKed.
fn dropped(
    ctx: &mut Ctx<'_>,
    c: &Conn,
    what: &str,
    bad: IbPacketRepr<'_>,
    wire: Wire,
) -> Result<Verdict> {
    ctx.send_with(bad, wire)?;
    let silence = quiet(ctx)?;
    let mem = ctx.read_mr(&c.mr, 0, 64)?;
    let good = pattern(64, 9);
    c.write(ctx, c.epsn, 64, &good)?;
    let after = until(ctx, |f| f.is_ack() || f.is_any_nak())?;
    let landed = ctx.read_mr(&c.mr, 64, 64)?;
    let acked = after
        .first()
        .is_some_and(|f| f.is_ack() && f.psn() == c.epsn);
    if silence.is_empty() && mem.iter().all(|&b| b == 0) && acked && landed == good {
        pass(format!(
            "{what}: no answer, nothing written; then a valid WRITE: {}",
            describe_all(&after)
        ))
    } else {
        fail(format!(
            "{what}: {}; written: {}; then a valid WRITE at the same PSN: {}",
            describe_all(&silence),
            mem.iter().any(|&b| b != 0),
            describe_all(&after)
        ))
    }
}

fn bad_icrc(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 1);
    let bad = write_at_epsn(&c, &data);
    let wire = Wire {
        corrupt_icrc: true,
        ..Wire::default()
    };
    dropped(ctx, &c, "WRITE with its ICRC inverted", bad, wire)
}

/// A WRITE whose IPv4 header breaks the annex in the way `fault` says; not applicable to a
/// peer reached over IPv6.
fn bad_ipv4(ctx: &mut Ctx<'_>, fault: Ipv4Fault, what: &str) -> Result<Verdict> {
    if ctx.env().peer_ip.is_ipv6() {
        return Ok(Verdict::NotApplicable(
            "the peer is reached over IPv6, which has none of these IPv4 fields".into(),
        ));
    }
    let c = rc(ctx)?;
    let data = pattern(64, 5);
    let bad = write_at_epsn(&c, &data);
    let wire = Wire {
        ipv4: Some(fault),
        ..Wire::default()
    };
    dropped(ctx, &c, what, bad, wire)
}

fn ip_checksum(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    bad_ipv4(
        ctx,
        Ipv4Fault::BadChecksum,
        "WRITE with a wrong IPv4 header checksum",
    )
}

fn ip_options(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    bad_ipv4(
        ctx,
        Ipv4Fault::Options,
        "WRITE with 4 bytes of IPv4 options (IHL 6)",
    )
}

fn ip_df_clear(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    bad_ipv4(
        ctx,
        Ipv4Fault::DontFragmentClear,
        "WRITE with IPv4 DF clear",
    )
}

fn ip_version(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    bad_ipv4(
        ctx,
        Ipv4Fault::Version6,
        "WRITE in an IPv4 frame with IP version 6",
    )
}

fn wrong_pkey(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 2);
    let mut bad = write_at_epsn(&c, &data);
    bad.bth.pkey = PKey(0x8001);
    dropped(
        ctx,
        &c,
        "WRITE with P_Key 0x8001 (QP's partition 0xffff)",
        bad,
        Wire::default(),
    )
}

fn wrong_tver(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 3);
    let mut bad = write_at_epsn(&c, &data);
    bad.bth.tver = 1;
    dropped(ctx, &c, "WRITE with TVer 1", bad, Wire::default())
}

fn unknown_qp(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 4);
    let mut bad = write_at_epsn(&c, &data);
    bad.bth.dest_qp = Qpn::new(0xff_fffe);
    dropped(ctx, &c, "WRITE to QP 0xfffffe", bad, Wire::default())
}

fn qp0(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 6);
    let mut bad = write_at_epsn(&c, &data);
    bad.bth.dest_qp = Qpn::SMI;
    dropped(ctx, &c, "WRITE to QP0", bad, Wire::default())
}

/// An address on the tester's subnet that no lab host uses: the tester's with the top bit of
/// its last byte flipped.
fn other_address(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mut o = v4.octets();
            o[3] ^= 0x80;
            IpAddr::from(o)
        }
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[15] ^= 0x80;
            IpAddr::from(o)
        }
    }
}

fn wrong_source(ctx: &mut Ctx<'_>) -> Result<Verdict> {
    let c = rc(ctx)?;
    let data = pattern(64, 5);
    let bad = write_at_epsn(&c, &data);
    let src = other_address(ctx.env().tester_ip);
    let wire = Wire {
        src: Some(src),
        ..Wire::default()
    };
    dropped(ctx, &c, &format!("WRITE from {src}"), bad, wire)
}
