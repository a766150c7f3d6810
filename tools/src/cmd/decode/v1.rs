//! `roce decode` of RoCEv1 frames (IBA Vol. 1 Annex A16): Ethernet, the GRH, then the same
//! InfiniBand transport headers as RoCEv2, explained field by field.

use std::fmt::Write as _;

use roce::wire::grh::RoceV1Packet;
use roce::wire::icrc::ICRC_LEN;
use roce::wire::{BthRepr, FixedHeader};

use super::explain::{Tail, ecn_meaning, link_sections, tail_sections};
use super::fields::{bth_fields, ext_sections};
use super::section::{Section, field};

const MASKED: &str = "; masked in the ICRC";

/// The summary line's description, after the frame number and length.
pub fn summary(p: &RoceV1Packet<'_>) -> String {
    let bth = p.bth();
    let mut out = String::new();
    let _ = write!(
        out,
        "RoCEv1 {} -> {}  {}  QP {}  PSN {}  ICRC {}",
        p.grh().sgid_addr(),
        p.grh().dgid_addr(),
        bth.opcode,
        bth.dest_qp,
        bth.psn,
        if p.icrc_ok() { "ok" } else { "BAD" }
    );
    out
}

fn grh_section(p: &RoceV1Packet<'_>) -> Section {
    let g = p.grh();
    Section::new(
        "GRH: Global Route Header (IBA Vol. 1 8.3; RoCEv1: Annex A16)",
        p.grh_offset(),
        roce::wire::grh::GrhRepr::LEN,
        vec![
            field(
                (0, 4),
                "IPVer",
                g.ip_version,
                "6: the GRH is laid out like IPv6",
            ),
            field(
                (4, 6),
                "TClass (DSCP)",
                g.dscp(),
                format!("traffic class, high 6 bits: picks the switch queue{MASKED}"),
            ),
            field(
                (10, 2),
                "TClass (ECN)",
                g.ecn().name(),
                format!("{}{MASKED}", ecn_meaning(g.ecn().bits())),
            ),
            field(
                (12, 20),
                "FlowLabel",
                format!("{:#07x}", g.flow_label),
                format!("keeps a flow on one path{MASKED}"),
            ),
            field(
                (32, 16),
                "PayLen",
                g.payload_len,
                "bytes after the GRH, BTH through ICRC",
            ),
            field(
                (48, 8),
                "NxtHdr",
                format!("{:#04x}", g.next_header),
                "0x1B: an IBA transport header (BTH) follows",
            ),
            field((56, 8), "HopLmt", g.hop_limit, format!("hops left{MASKED}")),
            field((64, 128), "SGID", g.sgid_addr(), "the sender's port GID"),
            field((192, 128), "DGID", g.dgid_addr(), "the receiver's port GID"),
        ],
    )
}

/// The whole explanation of one RoCEv1 packet.
pub fn sections(p: &RoceV1Packet<'_>) -> Vec<Section> {
    let mut out = Vec::new();
    link_sections(
        Some(p.eth()),
        roce::wire::encap::ETHERTYPE_ROCE_V1,
        &mut out,
    );
    out.push(grh_section(p));
    out.push(Section::new(
        "BTH: Base Transport Header (IBA Vol. 1 9.2)",
        p.bth_offset(),
        BthRepr::LEN,
        bth_fields(&p.bth()),
    ));
    out.extend(ext_sections(&p.ext(), p.bth_offset() + BthRepr::LEN));
    let end = p.packet_bytes().len();
    tail_sections(
        &Tail {
            ib_end: end - ICRC_LEN,
            payload: p.payload(),
            pad: p.pad(),
            mad: None,
            icrc: p.icrc(),
            computed_icrc: p.computed_icrc(),
            rxe_flush: false,
            icrc_note: "CRC-32 over 8 bytes of 0xFF (the LRH RoCEv1 does not carry), then GRH \
                        through pad with TClass, FlowLabel, HopLmt and all of BTH byte 4 \
                        replaced by ones; sent least-significant byte first",
            annex: "A16",
            packet_len: end,
            trailer_len: p.trailer().len(),
        },
        &mut out,
    );
    out
}
