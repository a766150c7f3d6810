//! The XDP program that steers frames to our AF_XDP socket, assembled here as eBPF
//! instructions (Documentation/bpf/standardization/instruction-set.rst) so that no compiler
//! and no object file are needed.
//!
//! [`XdpFilter::RoceV2`] redirects only RoCEv2 frames (IPv4 without options or IPv6, UDP
//! destination port 4791, untagged or with one 802.1Q tag) and the PAUSE and PFC frames the
//! endpoint honours, and passes everything else to the kernel, so ARP, and the TCP
//! connection the perftest tools exchange QP numbers over, keep working on the interface.
//! [`XdpFilter::All`] takes every frame.

use std::os::fd::RawFd;

use crate::wire::encap::{self, field_at};

/// Which frames the program redirects to the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpFilter {
    /// IPv4 and IPv6 UDP to port 4791 only; the rest goes to the kernel.
    #[default]
    RoceV2,
    /// Every frame (the interface is given over to the stack).
    All,
}

/// One eBPF instruction, laid out as `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

/// The eBPF registers the program uses (r0-r6 of r0-r10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Reg {
    /// The return value.
    R0,
    /// The context on entry; the helper's first argument (the map).
    R1,
    /// The packet's data pointer; the helper's key (the receive queue index).
    R2,
    /// The packet's data_end; the helper's flags (the action when the slot is empty).
    R3,
    /// The bound a load needs: data plus its length.
    R4,
    /// The field under test.
    R5,
    /// The context, kept across the helper call (callee-saved).
    R6,
}

/// An instruction with registers `dst` and `src`.
const fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: ((src as u8) << 4) | dst as u8,
        off,
        imm,
    }
}

/// An instruction on `dst` and an immediate (src_reg 0).
const fn insn_k(code: u8, dst: Reg, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst as u8,
        off: 0,
        imm,
    }
}

/// An instruction without registers (call, exit, jump always, LD_IMM64's second slot).
const fn insn_no_regs(code: u8, imm: i32) -> Insn {
    Insn {
        code,
        regs: 0,
        off: 0,
        imm,
    }
}

/// The first slot of LD_IMM64 loading map `fd` into `dst` (src_reg PSEUDO_MAP_FD).
const fn ld_map_fd(dst: Reg, fd: i32) -> Insn {
    Insn {
        code: LD_IMM64,
        regs: (PSEUDO_MAP_FD << 4) | dst as u8,
        off: 0,
        imm: fd,
    }
}

// Opcodes: class | size/source | mode/operation.
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const LDX_B: u8 = 0x71; // BPF_LDX | BPF_MEM | BPF_B
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JA: u8 = 0x05;
const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW, two slots
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// src_reg of LD_IMM64 saying the immediate is a map file descriptor.
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

// struct xdp_md offsets.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// Network-order 16-bit constants as a little-endian halfword load sees them.
const fn wire16(v: u16) -> i32 {
    v.swap_bytes() as i32
}
const ETHERTYPE_IPV4: i32 = wire16(encap::ETHERTYPE_IPV4);
const ETHERTYPE_IPV6: i32 = wire16(encap::ETHERTYPE_IPV6);
const ETHERTYPE_VLAN: i32 = wire16(encap::ETHERTYPE_VLAN);
const ETHERTYPE_MAC_CONTROL: i32 = wire16(crate::wire::pause::ETHERTYPE_MAC_CONTROL);
const ROCEV2_PORT: i32 = wire16(encap::ROCEV2_UDP_PORT);
const IPPROTO_UDP: i32 = encap::IP_PROTOCOL_UDP as i32;
/// Header lengths and field offsets as instruction offsets.
const ETH_LEN: i16 = encap::ETHERNET_HEADER_LEN as i16;
const VLAN_ETH_LEN: i16 = ETH_LEN + encap::VLAN_TAG_LEN as i16;
const IPV4_LEN: i16 = encap::IPV4_HEADER_LEN as i16;
const IPV6_LEN: i16 = encap::IPV6_HEADER_LEN as i16;
/// The UDP ports: what the filter reads of the UDP header.
const UDP_PORTS_LEN: i16 = field_at::UDP_DST_PORT as i16 + 2;

/// A conditional or plain jump to a label, resolved once the program is laid out.
enum Item {
    Insn(Insn),
    /// A jump whose offset is filled in when `to` is laid out.
    Jump {
        insn: Insn,
        to: Label,
    },
    Label(Label),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Ipv6,
    Vlan,
    VlanIpv6,
    Redirect,
    Pass,
}

/// The program for `filter`, redirecting into the XSKMAP `map_fd` at the receive queue's
/// index (falling back to XDP_PASS when that slot is empty).
pub fn program(map_fd: RawFd, filter: XdpFilter) -> Vec<Insn> {
    use Item::{Insn as I, Jump, Label as L};
    use Reg::*;
    let jne = |reg, imm, to| Jump {
        insn: insn_k(JNE_K, reg, imm),
        to,
    };
    // Packet bytes up to data + `len` must exist before any load from them (the verifier
    // insists, and short frames are simply passed).
    let need = |len: i32| {
        [
            I(insn(MOV64_X, R4, R2, 0, 0)),
            I(insn_k(ADD64_K, R4, len)),
            Jump {
                insn: insn(JGT_X, R4, R3, 0, 0),
                to: Label::Pass,
            },
        ]
    };
    let ja = |to| Jump {
        insn: insn_no_regs(JA, 0),
        to,
    };
    let jeq = |reg, imm, to| Jump {
        insn: insn_k(JEQ_K, reg, imm),
        to,
    };
    // The checks of an IP header at `l3`, `len` bytes long with its protocol (next header)
    // byte at `protocol`, carrying UDP to 4791; a mismatch passes the frame, a match falls
    // through.
    let udp_4791 = |l3: i16, protocol: usize, len: usize| {
        let at = |off: usize| l3 + off as i16;
        [
            I(insn(LDX_B, R5, R2, at(protocol), 0)),
            jne(R5, IPPROTO_UDP, Label::Pass),
            I(insn(LDX_H, R5, R2, at(len + field_at::UDP_DST_PORT), 0)),
            jne(R5, ROCEV2_PORT, Label::Pass),
        ]
    };
    let ipv4 = |l3: i16| {
        [
            // Version 4, IHL 5: RoCEv2 senders use no IP options.
            I(insn(LDX_B, R5, R2, l3, 0)),
            jne(R5, encap::IPV4_VERSION_IHL_NO_OPTIONS.into(), Label::Pass),
        ]
        .into_iter()
        .chain(udp_4791(
            l3,
            field_at::IPV4_PROTOCOL,
            encap::IPV4_HEADER_LEN,
        ))
    };
    let ipv6 = |l3: i16| udp_4791(l3, field_at::IPV6_NEXT_HEADER, encap::IPV6_HEADER_LEN);
    let mut items = Vec::new();
    if filter == XdpFilter::RoceV2 {
        items.extend([
            I(insn(MOV64_X, R6, R1, 0, 0)),
            I(insn(LDX_W, R2, R6, MD_DATA, 0)),
            I(insn(LDX_W, R3, R6, MD_DATA_END, 0)),
        ]);
        // IPv4: Ethernet 14 + IPv4 20 + the UDP ports (PAUSE and PFC frames are 60 bytes).
        items.extend(need((ETH_LEN + IPV4_LEN + UDP_PORTS_LEN).into()));
        items.extend([
            I(insn(LDX_H, R5, R2, field_at::ETHERTYPE as i16, 0)),
            // PAUSE and PFC: the endpoint's transmitter honours them (io::pause); the kernel
            // would only drop them.
            jeq(R5, ETHERTYPE_MAC_CONTROL, Label::Redirect),
            jeq(R5, ETHERTYPE_VLAN, Label::Vlan),
            jeq(R5, ETHERTYPE_IPV6, Label::Ipv6),
            jne(R5, ETHERTYPE_IPV4, Label::Pass),
        ]);
        items.extend(ipv4(ETH_LEN));
        items.extend([ja(Label::Redirect), L(Label::Ipv6)]);
        items.extend(need((ETH_LEN + IPV6_LEN + UDP_PORTS_LEN).into()));
        items.extend(ipv6(ETH_LEN));
        // One 802.1Q tag (an endpoint on a VLAN or a priority, `--vlan`, `--pcp`), where the
        // NIC left it in the frame.
        items.extend([ja(Label::Redirect), L(Label::Vlan)]);
        items.extend(need((VLAN_ETH_LEN + IPV4_LEN + UDP_PORTS_LEN).into()));
        items.extend([
            I(insn(
                LDX_H,
                R5,
                R2,
                VLAN_ETH_LEN - ETH_LEN + field_at::ETHERTYPE as i16,
                0,
            )),
            jeq(R5, ETHERTYPE_IPV6, Label::VlanIpv6),
            jne(R5, ETHERTYPE_IPV4, Label::Pass),
        ]);
        items.extend(ipv4(VLAN_ETH_LEN));
        items.extend([ja(Label::Redirect), L(Label::VlanIpv6)]);
        items.extend(need((VLAN_ETH_LEN + IPV6_LEN + UDP_PORTS_LEN).into()));
        items.extend(ipv6(VLAN_ETH_LEN));
    } else {
        items.push(I(insn(MOV64_X, R6, R1, 0, 0)));
    }
    items.extend([
        L(Label::Redirect),
        I(insn(LDX_W, R2, R6, MD_RX_QUEUE_INDEX, 0)),
        I(ld_map_fd(R1, map_fd)),
        I(insn_no_regs(0, 0)),
        I(insn_k(MOV64_K, R3, XDP_PASS)),
        I(insn_no_regs(CALL, HELPER_REDIRECT_MAP)),
        I(insn_no_regs(EXIT, 0)),
    ]);
    // The verifier refuses unreachable instructions, so the pass block only when jumped to.
    if filter == XdpFilter::RoceV2 {
        items.extend([
            L(Label::Pass),
            I(insn_k(MOV64_K, R0, XDP_PASS)),
            I(insn_no_regs(EXIT, 0)),
        ]);
    }
    assemble(&items)
}

fn assemble(items: &[Item]) -> Vec<Insn> {
    let mut at = Vec::new();
    let mut pc = 0i16;
    for item in items {
        match item {
            Item::Label(label) => at.push((*label, pc)),
            _ => pc += 1,
        }
    }
    let target = |label: Label| {
        at.iter()
            .find(|(l, _)| *l == label)
            .map_or(0, |(_, pc)| *pc)
    };
    let mut out = Vec::new();
    for item in items {
        match *item {
            Item::Insn(i) => out.push(i),
            Item::Jump { insn, to } => {
                let off = target(to) - (out.len() as i16 + 1);
                out.push(Insn { off, ..insn });
            }
            Item::Label(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels_and_every_path_exits() {
        for filter in [XdpFilter::RoceV2, XdpFilter::All] {
            let prog = program(7, filter);
            for (pc, i) in prog.iter().enumerate() {
                if matches!(i.code, JGT_X | JEQ_K | JNE_K | JA) {
                    let to = pc as i64 + 1 + i64::from(i.off);
                    assert!((0..prog.len() as i64).contains(&to), "{pc}: {i:?}");
                }
            }
            assert_eq!(prog.last().unwrap().code, EXIT);
            let map = prog.iter().position(|i| i.code == LD_IMM64).unwrap();
            assert_eq!(
                (prog[map].imm, prog[map].regs),
                (7, (PSEUDO_MAP_FD << 4) | Reg::R1 as u8)
            );
        }
        // The IPv4 port check falls through to the redirect block; mismatches go to pass.
        let prog = program(3, XdpFilter::RoceV2);
        let pass = prog.len() - 2;
        let port_check = prog
            .iter()
            .rposition(|i| i.code == JNE_K && i.imm == ROCEV2_PORT)
            .unwrap();
        assert_eq!(
            port_check as i64 + 1 + i64::from(prog[port_check].off),
            pass as i64
        );
    }

    #[test]
    fn constants_are_in_wire_order() {
        assert_eq!(
            u16::from_le_bytes(4791u16.to_be_bytes()) as i32,
            ROCEV2_PORT
        );
        assert_eq!(ETHERTYPE_IPV4, 0x0008);
    }
}
