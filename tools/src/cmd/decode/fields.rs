//! The InfiniBand transport headers explained field by field (IBA Vol. 1 chapter 9; RoCEv2
//! Annex A17 for the CNP).

use roce::wire::opcode::op;
use roce::wire::{BthRepr, ExtHeaders, FixedHeader, NakCode, Opcode, Syndrome, Transport};

use super::explain::{Field, Section, field};

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
        return "slow down: traffic to DestQP met congestion (DCQCN, Annex A17.9)";
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
    vec![
        field(
            (0, 8),
            "OpCode",
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
            (8, 1),
            "SE",
            flag(b.solicited),
            if b.solicited {
                "solicited event: wake the receiver"
            } else {
                "no solicited event"
            },
        ),
        field(
            (9, 1),
            "M",
            flag(b.mig_req),
            "MigReq: automatic path migration state",
        ),
        field((10, 2), "PadCnt", b.pad_count, pad_meaning(b.pad_count)),
        field((12, 4), "TVer", b.tver, "transport header version (0)"),
        field(
            (16, 16),
            "P_Key",
            format!("{:#06x}", b.pkey.0),
            pkey_meaning,
        ),
        field(
            (32, 1),
            "FECN",
            flag(b.fecn),
            "forward congestion notification; masked in the ICRC",
        ),
        field(
            (33, 1),
            "BECN",
            flag(b.becn),
            "backward congestion notification (set in a CNP); masked",
        ),
        field((34, 6), "Resv6", b.resv6, "reserved; masked in the ICRC"),
        field(
            (40, 24),
            "DestQP",
            hex24(b.dest_qp.value()),
            format!("destination queue pair {}", b.dest_qp),
        ),
        field(
            (64, 1),
            "A",
            flag(b.ack_req),
            if b.ack_req {
                "AckReq: the responder must acknowledge"
            } else {
                "AckReq clear: an ACK may be coalesced"
            },
        ),
        field((65, 7), "Resv7", b.resv7, "reserved"),
        field(
            (72, 24),
            "PSN",
            b.psn,
            "packet sequence number: orders and detects loss (24 bits, wraps)",
        ),
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
            vec![
                field(
                    (0, 32),
                    "Q_Key",
                    hex32(h.qkey),
                    "the receiving UD QP drops packets whose Q_Key differs",
                ),
                field((32, 8), "Reserved", h.resv, "reserved"),
                field(
                    (40, 24),
                    "SrcQP",
                    hex24(h.src_qp.value()),
                    "the sending QP: replies go there",
                ),
            ],
        );
    }
    if let Some(h) = ext.feth {
        push(
            "FETH: FLUSH Extended Transport Header (IBA Vol. 1 9.3.9)",
            h.buffer_len(),
            vec![
                field((0, 26), "Reserved", h.raw >> 6, "reserved"),
                field(
                    (26, 2),
                    "SelectivityLevel",
                    h.selectivity_level(),
                    "0: the RETH's range; 1: the whole memory region",
                ),
                field(
                    (28, 4),
                    "PlacementType",
                    h.placement_type(),
                    "bit 0: global visibility; bit 1: persistence",
                ),
            ],
        );
    }
    if let Some(h) = ext.reth {
        push(
            "RETH: RDMA Extended Transport Header (IBA Vol. 1 9.3.3)",
            h.buffer_len(),
            vec![
                field(
                    (0, 64),
                    "VA",
                    hex64(h.va),
                    "virtual address in the responder's memory region",
                ),
                field(
                    (64, 32),
                    "R_Key",
                    hex32(h.rkey),
                    "remote key that grants access to that region",
                ),
                field(
                    (96, 32),
                    "DMA Length",
                    h.dma_len,
                    "bytes of the whole operation, not of this packet",
                ),
            ],
        );
    }
    if let Some(h) = ext.atomic_eth {
        push(
            "AtomicETH: Atomic Extended Transport Header (IBA Vol. 1 9.3.4)",
            h.buffer_len(),
            vec![
                field(
                    (0, 64),
                    "VA",
                    hex64(h.va),
                    "address of the 8-byte-aligned remote word",
                ),
                field(
                    (64, 32),
                    "R_Key",
                    hex32(h.rkey),
                    "remote key that grants access to it",
                ),
                field(
                    (96, 64),
                    "Swap/Add Data",
                    hex64(h.swap_add),
                    "value to swap in (COMPARE_SWAP) or add (FETCH_ADD)",
                ),
                field(
                    (160, 64),
                    "Compare Data",
                    hex64(h.compare),
                    "COMPARE_SWAP swaps only if the word equals this",
                ),
            ],
        );
    }
    if let Some(h) = ext.aeth {
        push(
            "AETH: ACK Extended Transport Header (IBA Vol. 1 9.3.5)",
            h.buffer_len(),
            vec![
                field(
                    (0, 8),
                    "Syndrome",
                    format!("{:#04x}", h.syndrome.to_byte()),
                    syndrome_meaning(h.syndrome),
                ),
                field(
                    (8, 24),
                    "MSN",
                    h.msn,
                    "message sequence number: requests the responder completed",
                ),
            ],
        );
    }
    if let Some(h) = ext.atomic_ack_eth {
        push(
            "AtomicAckETH: Atomic Acknowledge ETH (IBA Vol. 1 9.3.6)",
            h.buffer_len(),
            vec![field(
                (0, 64),
                "Orig Remote Data",
                hex64(h.orig),
                "the word's value before the atomic operation",
            )],
        );
    }
    if let Some(h) = ext.immdt {
        push(
            "ImmDt: Immediate Data Extended Transport Header (IBA Vol. 1 9.3.7)",
            h.buffer_len(),
            vec![field(
                (0, 32),
                "Immediate Data",
                hex32(h.imm),
                "handed to the receiver in its completion",
            )],
        );
    }
    if let Some(h) = ext.ieth {
        push(
            "IETH: Invalidate Extended Transport Header (IBA Vol. 1 9.3.8)",
            h.buffer_len(),
            vec![field(
                (0, 32),
                "R_Key",
                hex32(h.rkey),
                "the responder invalidates this remote key",
            )],
        );
    }
    if let Some(h) = ext.cnp {
        let zero = h.reserved.iter().all(|&b| b == 0);
        push(
            "CNP body (IBA Annex A17.9.2)",
            h.buffer_len(),
            vec![field(
                (0, 128),
                "Reserved",
                if zero {
                    "16 zero bytes".to_string()
                } else {
                    "16 bytes, not all zero".to_string()
                },
                "reserved; the receiver ignores them",
            )],
        );
    }
    out
}
