//! `roce decode --json`: one JSON object per frame, with the keys ARCHITECTURE.md fixes.

use roce::wire::decap::HeaderKind;
use roce::wire::grh::RoceV1Packet;
use roce::wire::{BthRepr, ExtHeaders, RocePacket, Syndrome};
use std::collections::BTreeMap;

use serde::Serialize;

use super::Dissected;

#[derive(Serialize)]
struct Line<'a> {
    /// Position in the capture from 0.
    index: usize,
    /// Wireshark's frame number: `index + 1`.
    frame: usize,
    roce: bool,
    /// The outer layers, outermost first (absent for damage in the file).
    #[serde(skip_serializing_if = "Option::is_none")]
    encap: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    packet: Option<Packet>,
    /// PFC, 802.3x PAUSE or another MAC control frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    mac_control: Option<super::pause::PauseJson>,
}

#[derive(Serialize, Default)]
struct Packet {
    /// 1: RoCEv1 (GRH over Ethernet), 2: RoCEv2.
    roce_version: u8,
    src: String,
    dst: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan: Option<u16>,
    ecn: &'static str,
    dscp: u8,
    ttl: u8,
    /// RoCEv2 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    udp_src_port: Option<u16>,
    /// RoCEv1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    grh: Option<Grh>,
    opcode: &'static str,
    opcode_value: u8,
    dest_qp: u32,
    psn: u32,
    ack_req: bool,
    se: bool,
    pad: u8,
    pkey: u16,
    fecn: bool,
    becn: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    deth: Option<Deth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    feth: Option<Feth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reth: Option<Reth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    atomic_eth: Option<AtomicEth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aeth: Option<Aeth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    atomic_ack_eth: Option<AtomicAckEth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    immdt: Option<ImmDt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ieth: Option<Ieth>,
    payload_len: usize,
    icrc: &'static str,
    /// Only when `icrc` is "bad": what it carried and what it should be.
    #[serde(skip_serializing_if = "Option::is_none")]
    icrc_received: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icrc_computed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_checksum: Option<&'static str>,
    /// A communication management MAD to QP1 (rdma_cm's REQ, REP, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    cm: Option<super::mad::CmJson>,
    /// Why a MAD to QP1 is not a CM message (another class, truncated...).
    #[serde(skip_serializing_if = "Option::is_none")]
    mad_error: Option<String>,
    /// For an encapsulated packet, each outer header the wire layer declares fields for
    /// (tags, cooked headers, tunnels), outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    outer_headers: Vec<OuterHeader>,
}

#[derive(Serialize)]
struct OuterHeader {
    header: &'static str,
    /// Where it starts in the frame.
    offset: usize,
    /// A tag's TPID (0x8100, 0x88a8, 0x9100): the EtherType before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    tpid: Option<u16>,
    /// Field name (as the decoder's explanation names it; a repeated name gets " 2") to its
    /// value.
    fields: BTreeMap<String, u64>,
}

fn outer_headers(p: &RocePacket<'_>) -> Vec<OuterHeader> {
    if p.encap().is_empty() {
        return Vec::new();
    }
    let frame = p.packet_bytes();
    p.link_headers()
        .iter()
        .filter_map(|h| {
            let bytes = &frame[h.start..h.start + h.len];
            let declared = super::outer::declared_fields(h.kind, bytes)?;
            let mut fields = BTreeMap::new();
            for f in &declared {
                let Some(v) = f.read(bytes) else { continue };
                let mut name = f.name.to_string();
                if fields.contains_key(&name) {
                    name.push_str(" 2");
                }
                fields.insert(name, v);
            }
            Some(OuterHeader {
                header: super::outer::header_name(h.kind),
                offset: h.start,
                tpid: match h.kind {
                    HeaderKind::Tag { tpid } => Some(tpid),
                    _ => None,
                },
                fields,
            })
        })
        .collect()
}

#[derive(Serialize)]
struct Grh {
    traffic_class: u8,
    flow_label: u32,
    hop_limit: u8,
    payload_len: u16,
}
#[derive(Serialize)]
struct Deth {
    qkey: u32,
    src_qp: u32,
}
#[derive(Serialize)]
struct Feth {
    raw: u32,
}
#[derive(Serialize)]
struct Reth {
    va: u64,
    rkey: u32,
    dma_len: u32,
}
#[derive(Serialize)]
struct AtomicEth {
    va: u64,
    rkey: u32,
    swap_add: u64,
    compare: u64,
}
#[derive(Serialize)]
struct Aeth {
    /// ACK, RNR_NAK, NAK or RESERVED.
    kind: &'static str,
    /// The syndrome's low five bits: credits, RNR timer code or NAK code.
    code: u8,
    /// The NAK's name (`PSN_SEQUENCE_ERROR`, ...), for NAKs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    nak: Option<&'static str>,
    msn: u32,
}
#[derive(Serialize)]
struct AtomicAckEth {
    orig: u64,
}
#[derive(Serialize)]
struct ImmDt {
    imm: u32,
}
#[derive(Serialize)]
struct Ieth {
    rkey: u32,
}

fn packet(p: &RocePacket<'_>) -> Packet {
    let (cm, mad_error) = match super::mad::mad_payload(p).map(super::mad::json) {
        Some(Ok(cm)) => (Some(cm), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    Packet {
        roce_version: 2,
        src: p.ip().src_addr().to_string(),
        dst: p.ip().dst_addr().to_string(),
        vlan: p.vlan().map(|v| v.vid),
        outer_headers: outer_headers(p),
        ecn: p.ecn().name(),
        dscp: p.ip().dscp(),
        ttl: p.ip().ttl(),
        udp_src_port: Some(p.udp().src_port),
        ip_checksum: (!p.ip_checksum_ok()).then_some("bad"),
        cm,
        mad_error,
        ..transport(
            &p.bth(),
            &p.ext(),
            p.payload().len(),
            (p.icrc(), p.computed_icrc()),
        )
    }
}

fn packet_v1(p: &RoceV1Packet<'_>) -> Packet {
    let g = p.grh();
    Packet {
        roce_version: 1,
        src: g.sgid_addr().to_string(),
        dst: g.dgid_addr().to_string(),
        vlan: p.eth().vlan.map(|v| v.vid),
        ecn: g.ecn().name(),
        dscp: g.dscp(),
        ttl: g.hop_limit,
        grh: Some(Grh {
            traffic_class: g.traffic_class,
            flow_label: g.flow_label,
            hop_limit: g.hop_limit,
            payload_len: g.payload_len,
        }),
        ..transport(
            &p.bth(),
            &p.ext(),
            p.payload().len(),
            (p.icrc(), p.computed_icrc()),
        )
    }
}

/// The keys of the InfiniBand transport headers and the ICRC (received, computed), the same
/// over RoCEv1 and RoCEv2.
fn transport(bth: &BthRepr, ext: &ExtHeaders, payload_len: usize, icrc: (u32, u32)) -> Packet {
    let icrc_ok = icrc.0 == icrc.1;
    Packet {
        opcode: bth.opcode.name(),
        opcode_value: bth.opcode.value(),
        dest_qp: bth.dest_qp.value(),
        psn: bth.psn.value(),
        ack_req: bth.ack_req,
        se: bth.solicited,
        pad: bth.pad_count,
        pkey: bth.pkey.0,
        fecn: bth.fecn,
        becn: bth.becn,
        deth: ext.deth.map(|h| Deth {
            qkey: h.qkey,
            src_qp: h.src_qp.value(),
        }),
        feth: ext.feth.map(|h| Feth { raw: h.raw }),
        reth: ext.reth.map(|h| Reth {
            va: h.va,
            rkey: h.rkey,
            dma_len: h.dma_len,
        }),
        atomic_eth: ext.atomic_eth.map(|h| AtomicEth {
            va: h.va,
            rkey: h.rkey,
            swap_add: h.swap_add,
            compare: h.compare,
        }),
        aeth: ext.aeth.map(|h| Aeth {
            kind: h.syndrome.kind(),
            code: h.syndrome.code(),
            nak: match h.syndrome {
                Syndrome::Nak(code) => Some(code.name()),
                _ => None,
            },
            msn: h.msn.value(),
        }),
        atomic_ack_eth: ext.atomic_ack_eth.map(|h| AtomicAckEth { orig: h.orig }),
        immdt: ext.immdt.map(|h| ImmDt { imm: h.imm }),
        ieth: ext.ieth.map(|h| Ieth { rkey: h.rkey }),
        payload_len,
        icrc: if icrc_ok { "ok" } else { "bad" },
        icrc_received: (!icrc_ok).then(|| format!("{:#010x}", icrc.0)),
        icrc_computed: (!icrc_ok).then(|| format!("{:#010x}", icrc.1)),
        ..Packet::default()
    }
}

/// The JSON line for frame `index`.
pub fn frame(index: usize, dissected: &Dissected<'_>) -> String {
    serde_json::to_string(&line(index, dissected)).unwrap_or_else(|e| {
        format!(
            "{{\"index\":{index},\"frame\":{},\"error\":\"{e}\"}}",
            index + 1
        )
    })
}

/// The object of frame `index`'s JSON line, for `roce view`'s tables.
pub fn value(index: usize, dissected: &Dissected<'_>) -> serde_json::Value {
    serde_json::to_value(line(index, dissected)).unwrap_or_default()
}

fn line<'a>(index: usize, dissected: &'a Dissected<'_>) -> Line<'a> {
    let encap = Some(dissected.encap().iter().map(|k| k.name()).collect());
    match dissected {
        Dissected::Roce(p) => Line {
            index,
            frame: index + 1,
            roce: true,
            encap,
            error: None,
            packet: Some(packet(p)),
            mac_control: None,
        },
        Dissected::RoceV1(p) => Line {
            index,
            frame: index + 1,
            roce: true,
            encap,
            error: None,
            packet: Some(packet_v1(p)),
            mac_control: None,
        },
        Dissected::MacControl(p) => Line {
            index,
            frame: index + 1,
            roce: false,
            encap,
            error: None,
            packet: None,
            mac_control: Some(super::pause::json(p)),
        },
        Dissected::NotRoce(why, _) => Line {
            index,
            frame: index + 1,
            roce: false,
            encap,
            error: Some(why),
            packet: None,
            mac_control: None,
        },
        Dissected::Broken(why, _) => Line {
            index,
            frame: index + 1,
            roce: true,
            encap,
            error: Some(why),
            packet: None,
            mac_control: None,
        },
    }
}

/// The JSON line for damage in the capture file at frame `index`.
pub fn damaged(index: usize, reason: &str) -> String {
    let line = Line {
        index,
        frame: index + 1,
        roce: false,
        encap: None,
        error: Some(reason),
        packet: None,
        mac_control: None,
    };
    serde_json::to_string(&line).unwrap_or_default()
}
