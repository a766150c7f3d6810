//! The InfiniBand transport headers explained field by field (IBA Vol. 1 chapter 9; RoCEv2
//! Annex A17 for the CNP).

use roce::wire::field::FieldInfo;
use roce::wire::opcode::op;
use roce::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, CnpRepr, DethRepr, ExtHeaders, FethRepr,
    FixedHeader, IethRepr, ImmDtRepr, NakCode, Opcode, Qpn, RethRepr, Syndrome, Transport,
};

use super::section::{Field, Section};

fn flag(b: bool) -> u8 {
    u8::from(b)
}

fn transport_meaning(t: Transport) -> &'static str {
    match t {
        Transport::Rc => "reliable connection: acknowledged, retransmitted, in order",
        Transport::Uc => "unreliable connection: no ACKs, a lost packet loses its message",
        Transport::Ud => "unreliable datagram: single-packet messages to any QP",
        Transport::Cnp => "RoCEv2 congestion notification",
        Transport::Rd => "reliable datagram",
        Transport::Xrc => "extended reliable connection",
        Transport::Manufacturer => "manufacturer specific",
    }
}

/// What the operation bits (the low five) ask for.
fn operation_meaning(opcode: Opcode) -> &'static str {
    if opcode == Opcode::CNP {
        return "slow down: traffic to DestQP met congestion (DCQCN, Annex A17.9.3)";
    }
    match opcode.low() {
        op::SEND_FIRST => "first packet of a multi-packet SEND",
        op::SEND_MIDDLE => "middle packet of a SEND",
        op::SEND_LAST => "last packet of a SEND",
        op::SEND_LAST_WITH_IMMEDIATE => "last packet of a SEND, with immediate data",
        op::SEND_ONLY => "a whole SEND message in one packet",
        op::SEND_ONLY_WITH_IMMEDIATE => "a whole SEND in one packet, with immediate data",
        op::RDMA_WRITE_FIRST => "first packet of an RDMA WRITE (RETH says where)",
        op::RDMA_WRITE_MIDDLE => "middle packet of an RDMA WRITE",
        op::RDMA_WRITE_LAST => "last packet of an RDMA WRITE",
        op::RDMA_WRITE_LAST_WITH_IMMEDIATE => "last packet of an RDMA WRITE, with immediate data",
        op::RDMA_WRITE_ONLY => "a whole RDMA WRITE in one packet",
        op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => "a whole RDMA WRITE in one packet, with immediate",
        op::RDMA_READ_REQUEST => "asks for DMA length bytes of the responder's memory",
        op::RDMA_READ_RESPONSE_FIRST => "first packet of the data an RDMA READ returns",
        op::RDMA_READ_RESPONSE_MIDDLE => "middle packet of RDMA READ data",
        op::RDMA_READ_RESPONSE_LAST => "last packet of RDMA READ data",
        op::RDMA_READ_RESPONSE_ONLY => "all the data of an RDMA READ in one packet",
        op::ACKNOWLEDGE => "the responder's ACK or NAK (see the AETH)",
        op::ATOMIC_ACKNOWLEDGE => "the result of an atomic operation",
        op::COMPARE_SWAP => "atomic compare-and-swap of a remote 64-bit word",
        op::FETCH_ADD => "atomic fetch-and-add on a remote 64-bit word",
        op::SEND_LAST_WITH_INVALIDATE => "last packet of a SEND that invalidates an R_Key",
        op::SEND_ONLY_WITH_INVALIDATE => "a whole SEND that invalidates an R_Key",
        op::FLUSH => "makes earlier RDMA WRITEs visible or persistent",
        op::ATOMIC_WRITE => "writes 8 bytes of remote memory atomically",
        _ => "unknown operation",
    }
}

fn pad_meaning(pad: u8) -> &'static str {
    match pad {
        0 => "no pad: the payload ends on a 4-byte boundary",
        1 => "one pad byte follows the payload",
        2 => "two pad bytes follow the payload",
        _ => "three pad bytes follow the payload",
    }
}

/// The twelve BTH fields (IBA Vol. 1 9.2; FECN and BECN as RoCEv2 uses them, Annex A17).
pub fn bth_fields(b: &BthRepr) -> Vec<Field> {
    let op = b.opcode;
    let pkey_meaning = format!(
        "partition {:#06x}, {} member{}",
        b.pkey.base(),
        if b.pkey.is_full_member() {
            "full"
        } else {
            "limited"
        },
        if b.pkey.0 == 0xffff {
            " (the default partition)"
        } else {
            ""
        }
    );
    let [
        opcode,
        se,
        m,
        pad,
        tver,
        pkey,
        fecn,
        becn,
        resv6,
        dest_qp,
        ack_req,
        resv7,
        psn,
    ] = &BthRepr::FIELDS;
    vec![
        field(
            opcode,
            format!("{:#04x}", op.value()),
            format!(
                "{op}\nbits 7-5 = {:03b}: {}\nbits 4-0 = {:05b}: {}",
                op.value() >> 5,
                transport_meaning(op.transport()),
                op.low(),
                operation_meaning(op)
            ),
        ),
        field(
            se,
            flag(b.solicited),
            if b.solicited {
                "solicited event: wake the receiver"
            } else {
                "no solicited event"
            },
        ),
        field(m, flag(b.mig_req), m.doc),
        field(pad, b.pad_count, pad_meaning(b.pad_count)),
        field(tver, b.tver, tver.doc),
        field(pkey, format!("{:#06x}", b.pkey.0), pkey_meaning),
        field(fecn, flag(b.fecn), fecn.doc),
        field(becn, flag(b.becn), becn.doc),
        field(resv6, b.resv6, resv6.doc),
        field(
            dest_qp,
            hex24(b.dest_qp.value()),
            match b.dest_qp {
                Qpn::SMI => "QP0, subnet management: a RoCEv2 port has none and a receiver \
                             drops this packet (Annex A17.6, CA17-33)"
                    .to_string(),
                Qpn::GSI => "QP1, the general services QP (communication management)".to_string(),
                qpn => format!("destination queue pair {qpn}"),
            },
        ),
        field(
            ack_req,
            flag(b.ack_req),
            if b.ack_req {
                "AckReq: the responder must acknowledge"
            } else {
                "AckReq clear: an ACK may be coalesced"
            },
        ),
        field(resv7, b.resv7, resv7.doc),
        field(psn, b.psn, psn.doc),
    ]
}

fn nak_meaning(code: NakCode) -> &'static str {
    match code {
        NakCode::PsnSequenceError => "a packet was lost: resend from this PSN",
        NakCode::InvalidRequest => "the request is not allowed or malformed",
        NakCode::RemoteAccessError => "R_Key, bounds or access rights check failed",
        NakCode::RemoteOperationalError => "the responder failed to carry out the request",
        NakCode::InvalidRdRequest => "invalid reliable-datagram request",
        NakCode::Reserved(_) => "reserved code",
    }
}

fn syndrome_meaning(s: Syndrome) -> String {
    match s {
        Syndrome::Ack { credits: 31 } => {
            "ACK (credits 31: no end-to-end credit information)".into()
        }
        Syndrome::Ack { credits } => {
            format!("ACK, credit code {credits} (end-to-end flow control: receive WQEs free)")
        }
        Syndrome::RnrNak { timer } => format!(
            "RNR NAK: receiver not ready (no receive WQE); retry after {} us (code {})",
            timer.micros(),
            timer.code()
        ),
        Syndrome::Nak(code) => format!("NAK {}: {}", code.name(), nak_meaning(code)),
        Syndrome::Reserved(_) => "reserved syndrome".into(),
    }
}

fn hex64(v: u64) -> String {
    format!("{v:#018x}")
}

fn hex24(v: u32) -> String {
    format!("{v:#08x}")
}

fn hex32(v: u32) -> String {
    format!("{v:#010x}")
}

/// One section per extension header present, from `start` in the frame, in wire order.
pub fn ext_sections(ext: &ExtHeaders, mut start: usize) -> Vec<Section> {
    let mut out = Vec::new();
    let mut push = |title: &str, len: usize, fields: Vec<Field>| {
        out.push(Section::new(title, start, len, fields));
        start += len;
    };
    if let Some(h) = ext.deth {
        push(
            "DETH: Datagram Extended Transport Header (IBA Vol. 1 9.3.2)",
            h.buffer_len(),
            {
                let [qkey, resv, src_qp] = &DethRepr::FIELDS;
                vec![
                    field(qkey, hex32(h.qkey), qkey.doc),
                    field(resv, h.resv, resv.doc),
                    field(src_qp, hex24(h.src_qp.value()), src_qp.doc),
                ]
            },
        );
    }
    if let Some(h) = ext.feth {
        push(
            "FETH: FLUSH Extended Transport Header (IBA Vol. 1 9.3.9)",
            h.buffer_len(),
            {
                let [resv, level, placement] = &FethRepr::FIELDS;
                vec![
                    field(resv, h.raw >> 6, resv.doc),
                    field(level, h.selectivity_level(), level.doc),
                    field(placement, h.placement_type(), placement.doc),
                ]
            },
        );
    }
    if let Some(h) = ext.reth {
        push(
            "RETH: RDMA Extended Transport Header (IBA Vol. 1 9.3.3)",
            h.buffer_len(),
            {
                let [va, rkey, dma_len] = &RethRepr::FIELDS;
                vec![
                    field(va, hex64(h.va), va.doc),
                    field(rkey, hex32(h.rkey), rkey.doc),
                    field(dma_len, h.dma_len, dma_len.doc),
                ]
            },
        );
    }
    if let Some(h) = ext.atomic_eth {
        push(
            "AtomicETH: Atomic Extended Transport Header (IBA Vol. 1 9.3.4)",
            h.buffer_len(),
            {
                let [va, rkey, swap_add, compare] = &AtomicEthRepr::FIELDS;
                vec![
                    field(va, hex64(h.va), va.doc),
                    field(rkey, hex32(h.rkey), rkey.doc),
                    field(swap_add, hex64(h.swap_add), swap_add.doc),
                    field(compare, hex64(h.compare), compare.doc),
                ]
            },
        );
    }
    if let Some(h) = ext.aeth {
        push(
            "AETH: ACK Extended Transport Header (IBA Vol. 1 9.3.5)",
            h.buffer_len(),
            {
                let [syndrome, msn] = &AethRepr::FIELDS;
                vec![
                    field(
                        syndrome,
                        format!("{:#04x}", h.syndrome.to_byte()),
                        syndrome_meaning(h.syndrome),
                    ),
                    field(msn, h.msn, msn.doc),
                ]
            },
        );
    }
    if let Some(h) = ext.atomic_ack_eth {
        push(
            "AtomicAckETH: Atomic Acknowledge ETH (IBA Vol. 1 9.3.6)",
            h.buffer_len(),
            {
                let [orig] = &AtomicAckEthRepr::FIELDS;
                vec![field(orig, hex64(h.orig), orig.doc)]
            },
        );
    }
    if let Some(h) = ext.immdt {
        push(
            "ImmDt: Immediate Data Extended Transport Header (IBA Vol. 1 9.3.7)",
            h.buffer_len(),
            {
                let [imm] = &ImmDtRepr::FIELDS;
                vec![field(imm, hex32(h.imm), imm.doc)]
            },
        );
    }
    if let Some(h) = ext.ieth {
        push(
            "IETH: Invalidate Extended Transport Header (IBA Vol. 1 9.3.8)",
            h.buffer_len(),
            {
                let [rkey] = &IethRepr::FIELDS;
                vec![field(rkey, hex32(h.rkey), rkey.doc)]
            },
        );
    }
    if let Some(h) = ext.cnp {
        let zero = h.reserved.iter().all(|&b| b == 0);
        push("CNP body (IBA Annex A17.9.3)", h.buffer_len(), {
            let [reserved] = &CnpRepr::FIELDS;
            let value = if zero {
                "16 zero bytes"
            } else {
                "16 bytes, not all zero"
            };
            vec![field(reserved, value, reserved.doc)]
        });
    }
    out
}

/// A field where the wire layer declares it (its bits and the spec's name), with its value
/// and what that value means.
fn field(at: &FieldInfo, value: impl ToString, meaning: impl ToString) -> Field {
    super::section::field((at.first_bit(), at.width as usize), at.name, value, meaning)
}
