//! Management datagrams in `roce decode`: the MAD common header and, for communication
//! management (rdma_cm's REQ, REP, RTU, DREQ, ...), every field of the message, walked from
//! the wire layer's one declaration of each message's layout.

use std::net::{IpAddr, Ipv6Addr};

use roce::wire::cm::{
    CmAttribute, CmMadRepr, CmMessage, FieldInfo, IpCmHeaderRepr, cm_time, parse_service_id,
    reject_reason, sidr_status,
};
use roce::wire::mad::{MAD_LEN, MGMT_CLASS_CM, MadHeaderRepr};
use roce::wire::{FixedHeader, Qpn, RocePacket};
use serde::Serialize;

use super::section::{Section, field};

/// The MAD a packet carries: a UD SEND to QP1 with at least a MAD header of payload.
pub fn mad_payload<'a>(p: &RocePacket<'a>) -> Option<&'a [u8]> {
    let gsi = p.bth().dest_qp == Qpn::GSI && p.ext().deth.is_some();
    (gsi && p.payload().len() >= MadHeaderRepr::LEN).then(|| p.payload())
}

/// "CM REQ (ConnectRequest)" for the frame's summary line.
pub fn summary(mad: &[u8]) -> String {
    match CmMadRepr::parse(mad) {
        Ok(m) => {
            let a = m.message.attribute();
            format!("CM {} ({})", a.name(), a.long_name())
        }
        Err(_) => match MadHeaderRepr::parse(mad) {
            Ok(h) => format!(
                "MAD class {:#04x} attribute {:#06x}",
                h.mgmt_class, h.attribute_id
            ),
            Err(_) => "MAD".into(),
        },
    }
}

fn hex_preview(bytes: &[u8]) -> String {
    let shown: String = bytes.iter().take(12).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > 12 {
        format!("{shown}...")
    } else {
        shown
    }
}

fn gid_meaning(doc: &str, gid: Ipv6Addr) -> String {
    match gid.to_ipv4_mapped() {
        Some(v4) => format!("{doc} (IPv4 {v4})"),
        None => doc.to_string(),
    }
}

fn time_meaning(doc: &str, value: u64) -> String {
    let d = cm_time(value as u8);
    format!("{doc}: {d:.2?}")
}

/// Value and meaning of one field, worded for its kind.
fn describe(attr: CmAttribute, f: &FieldInfo, data: &[u8]) -> (String, String) {
    let doc = f.doc.trim();
    if f.name == "Reserved" {
        let v = f.read(data).map_or_else(
            || hex_preview(f.bytes(data).unwrap_or_default()),
            |v| format!("{v:#x}"),
        );
        return (v, "reserved".into());
    }
    if f.width == 128 {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(f.bytes(data).unwrap_or(&[0; 16]));
        let gid = Ipv6Addr::from(octets);
        return (gid.to_string(), gid_meaning(doc, gid));
    }
    let Some(v) = f.read(data) else {
        let bytes = f.bytes(data).unwrap_or_default();
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let value = if used == 0 {
            "zeros".into()
        } else {
            hex_preview(bytes)
        };
        return (
            value,
            format!(
                "{doc} ({} bytes, {used} up to the last non-zero)",
                bytes.len()
            ),
        );
    };
    let value = match (f.name, f.width) {
        (n, _) if n.contains("Communication ID") || n == "Request ID" => format!("{v:#010x}"),
        (n, _) if n.contains("GUID") || n == "ServiceID" => format!("{v:#018x}"),
        (n, _) if n.contains("QPN") || n.contains("EEC") => format!("{v:#08x}"),
        (n, _) if n.contains("Flow Label") => format!("{v:#07x}"),
        ("Partition Key" | "Q_Key" | "Local Q_Key", _) => format!("{v:#x}"),
        _ => v.to_string(),
    };
    let meaning = match f.name {
        "ServiceID" => match parse_service_id(v) {
            Some((space, port)) => {
                format!("IP CM service (Annex A11): {} port {port}", space.name())
            }
            None => doc.to_string(),
        },
        "Path Packet Payload MTU" => match v {
            1..=5 => format!("{} bytes", 128u32 << v),
            _ => "invalid MTU code".into(),
        },
        "Transport Service Type" => match v {
            0 => "RC: reliable connection".into(),
            1 => "UC: unreliable connection".into(),
            2 => "RD: reliable datagram".into(),
            _ => "extended (see Extended Transport Type)".into(),
        },
        "Reason" => format!("{}: {}", reject_reason::name(v as u16), doc),
        "Status" if attr == CmAttribute::SidrRep => sidr_status::name(v as u8).into(),
        "Message REJected" | "Message MRAed" => match v {
            0 => "the REQ".into(),
            1 => "the REP".into(),
            2 => "another message (a LAP)".into(),
            _ => "reserved code".into(),
        },
        n if n.contains("Timeout") || n.contains("ACK Delay") => time_meaning(doc, v),
        _ => doc.to_string(),
    };
    (value, meaning)
}

/// The sections of a MAD starting at byte `start` of the frame.
pub fn sections(mad: &[u8], start: usize, out: &mut Vec<Section>) {
    let Ok(h) = MadHeaderRepr::parse(mad) else {
        return;
    };
    let class = h.class_name().unwrap_or("unknown class");
    let method = h.method_name().unwrap_or("unknown method");
    let cm = CmMadRepr::parse(mad).ok();
    let attr = cm.as_ref().map(|m| m.message.attribute());
    let attr_meaning = match attr {
        Some(a) => format!("{}: {}", a.name(), a.long_name()),
        None if h.mgmt_class == MGMT_CLASS_CM => "not a CM message".into(),
        None => "attribute of another class".into(),
    };
    let fields = MadHeaderRepr::FIELDS
        .iter()
        .map(|f| {
            let v = f.read(mad).unwrap_or_default();
            let (value, meaning) = match f.name {
                "MgmtClass" => (format!("{v:#04x}"), class.to_string()),
                "Method" => (format!("{v:#04x}"), format!("{method}: {}", f.doc)),
                "AttributeID" => (format!("{v:#06x}"), attr_meaning.clone()),
                "TransactionID" => (
                    format!("{v:#018x}"),
                    format!(
                        "{}; Linux's CM reuses its REQ's for the whole connection",
                        f.doc
                    ),
                ),
                "Status" | "ClassSpecific" => (format!("{v:#06x}"), f.doc.to_string()),
                _ => (v.to_string(), f.doc.to_string()),
            };
            field((f.first_bit(), f.width as usize), f.name, value, meaning)
        })
        .collect();
    out.push(Section::new(
        "MAD common header (IBA Vol. 1 13.4.3)",
        start,
        MadHeaderRepr::LEN,
        fields,
    ));
    let data_start = start + MadHeaderRepr::LEN;
    let data = &mad[MadHeaderRepr::LEN..mad.len().min(MAD_LEN)];
    let Some(cm) = cm else {
        out.push(Section::new(
            format!("MAD data: {} bytes", data.len()),
            data_start,
            data.len(),
            vec![field(
                (0, data.len() * 8),
                "Data",
                hex_preview(data),
                "not decoded",
            )],
        ));
        return;
    };
    let a = cm.message.attribute();
    let fields = a
        .fields()
        .iter()
        .map(|f| {
            let (value, meaning) = describe(a, f, data);
            field((f.first_bit(), f.width as usize), f.name, value, meaning)
        })
        .collect();
    out.push(Section::new(
        format!(
            "CM {}: {} (IBA Vol. 1 {})",
            a.name(),
            a.long_name(),
            a.section()
        ),
        data_start,
        data.len(),
        fields,
    ));
    if let Some((offset, h)) = ip_cm_header(&cm.message) {
        out.push(ip_cm_section(&h, data_start + offset));
    }
}

/// The IP CM header at the start of a REQ's or SIDR_REQ's private data, when the service ID
/// is an IP CM one; with its offset in the message.
fn ip_cm_header(m: &CmMessage) -> Option<(usize, IpCmHeaderRepr)> {
    let (offset, private) = match m {
        CmMessage::Req(r) => (140, &r.private_data[..]),
        CmMessage::SidrReq(r) => (16, &r.private_data[..]),
        _ => return None,
    };
    parse_service_id(m.service_id()?)?;
    Some((offset, IpCmHeaderRepr::parse(private).ok()?))
}

fn addr_text(addr: Option<IpAddr>, raw: &[u8; 16]) -> String {
    addr.map_or_else(|| hex_preview(raw), |a| a.to_string())
}

fn ip_cm_section(h: &IpCmHeaderRepr, start: usize) -> Section {
    Section::new(
        "IP CM private data header (IBA Vol. 1 Annex A11; Linux cma_hdr)",
        start,
        IpCmHeaderRepr::LEN,
        vec![
            field((0, 4), "MajV", h.version >> 4, "major version (0)"),
            field((4, 4), "MinV", h.version & 0xf, "minor version (0)"),
            field((8, 4), "IPV", h.ip_version, "IP version of both addresses"),
            field((12, 4), "Reserved", h.reserved, "reserved"),
            field((16, 16), "Source Port", h.src_port, "the client's port"),
            field(
                (32, 128),
                "Source IP",
                addr_text(h.src_addr(), &h.src),
                "the client's address",
            ),
            field(
                (160, 128),
                "Destination IP",
                addr_text(h.dst_addr(), &h.dst),
                "the server's address (the one rdma_connect named)",
            ),
        ],
    )
}

/// The `cm` object of `roce decode --json`.
#[derive(Debug, Serialize)]
pub struct CmJson {
    message: &'static str,
    attribute_id: u16,
    transaction_id: u64,
    class_version: u8,
    local_comm_id: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_comm_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    port_space: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    /// The sender's QP (REQ, REP).
    #[serde(skip_serializing_if = "Option::is_none")]
    local_qpn: Option<u32>,
    /// The receiver's QP (DREQ, LAP).
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_qpn: Option<u32>,
    /// The UD QP a SIDR_REP resolved the service to.
    #[serde(skip_serializing_if = "Option::is_none")]
    qpn: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qkey: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    starting_psn: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_mtu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reject_reason: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reject_reason_name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sidr_status: Option<u8>,
    /// Client and server addresses from the IP CM header of a REQ or SIDR_REQ.
    #[serde(skip_serializing_if = "Option::is_none")]
    ip: Option<IpJson>,
}

#[derive(Debug, Serialize)]
struct IpJson {
    src: String,
    src_port: u16,
    dst: String,
}

/// The `cm` object for a MAD, or why it is not a CM message.
pub fn json(mad: &[u8]) -> Result<CmJson, String> {
    let cm = CmMadRepr::parse(mad).map_err(|e| e.to_string())?;
    let m = &cm.message;
    let space = m.service_id().and_then(parse_service_id);
    let mut j = CmJson {
        message: m.attribute().name(),
        attribute_id: cm.header.attribute_id,
        transaction_id: cm.header.transaction_id,
        class_version: cm.header.class_version,
        local_comm_id: m.local_comm_id(),
        remote_comm_id: m.remote_comm_id(),
        service_id: m.service_id(),
        port_space: space.map(|(s, _)| s.name()),
        port: space.map(|(_, p)| p),
        local_qpn: None,
        remote_qpn: None,
        qpn: None,
        qkey: None,
        starting_psn: None,
        path_mtu: None,
        reject_reason: None,
        reject_reason_name: None,
        sidr_status: None,
        ip: ip_cm_header(m).map(|(_, h)| IpJson {
            src: addr_text(h.src_addr(), &h.src),
            src_port: h.src_port,
            dst: addr_text(h.dst_addr(), &h.dst),
        }),
    };
    match m {
        CmMessage::Req(r) => {
            j.local_qpn = Some(r.local_qpn.value());
            j.starting_psn = Some(r.starting_psn.value());
            j.path_mtu = (1..=5).contains(&r.path_mtu).then(|| 128 << r.path_mtu);
        }
        CmMessage::Rep(r) => {
            j.local_qpn = Some(r.local_qpn.value());
            j.starting_psn = Some(r.starting_psn.value());
        }
        CmMessage::Dreq(r) => j.remote_qpn = Some(r.remote_qpn.value()),
        CmMessage::Lap(r) => j.remote_qpn = Some(r.remote_qpn.value()),
        CmMessage::Rej(r) => {
            j.reject_reason = Some(r.reason);
            j.reject_reason_name = Some(reject_reason::name(r.reason));
        }
        CmMessage::SidrRep(r) => {
            j.qpn = Some(r.qpn.value());
            j.qkey = Some(r.qkey);
            j.sidr_status = Some(r.status);
        }
        _ => {}
    }
    Ok(j)
}
