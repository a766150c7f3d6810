//! `roce decode` of MAC control frames (EtherType 0x8808): the 802.3x PAUSE (IEEE 802.3
//! Annex 31B) and PFC (IEEE 802.1Qbb clause 36), field by field, each pause time also as time
//! at the link speed given (`--link-gbps`).

use roce::analysis::pfc::MacControl;
use roce::wire::FixedHeader;
use roce::wire::encap::{ETHERNET_HEADER_LEN, ETHERNET_MIN_FRAME_LEN};
use roce::wire::pause::{
    MAC_CONTROL_DST, MacControlRepr, OPCODE_LEN, PRIORITIES, PauseRepr, PfcRepr, quanta_to_ps,
};
use serde::Serialize;

use super::explain::mac;
use super::section::{Field, Section, field};

/// A MAC control frame and the link speed its quanta are read at.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    pub frame: MacControl,
    pub link_bits_per_sec: u64,
    /// Bytes after the parameters (padding to the 60-byte minimum, or an FCS).
    pub pad: usize,
    /// Whether the padding is all zeros, as 802.3 31.4 transmits it.
    pub pad_zero: bool,
}

impl Pause {
    pub fn new(frame: MacControl, data: &[u8], link_bits_per_sec: u64) -> Pause {
        let used = ETHERNET_HEADER_LEN + frame.body.map_or(0, |b| b.buffer_len());
        let rest = data.get(used..).unwrap_or_default();
        Pause {
            frame,
            link_bits_per_sec,
            pad: rest.len(),
            pad_zero: rest.iter().all(|&b| b == 0),
        }
    }

    fn us(&self, quanta: u16) -> f64 {
        quanta_to_ps(quanta, self.link_bits_per_sec) as f64 / 1e6
    }

    fn gbps(&self) -> f64 {
        self.link_bits_per_sec as f64 / 1e9
    }

    /// What a time means for the priority (`None`: the whole link).
    fn action(&self, who: &str, quanta: u16) -> String {
        if quanta == 0 {
            format!("XON: {who} may send again at once")
        } else {
            format!(
                "XOFF: pause {who} for {quanta} quanta = {:.3} us at {} Gb/s",
                self.us(quanta),
                self.gbps()
            )
        }
    }
}

fn enabled_list(pfc: &PfcRepr) -> String {
    let on: Vec<String> = (0..PRIORITIES)
        .filter(|&p| pfc.enabled(p))
        .map(|p| p.to_string())
        .collect();
    if on.is_empty() {
        "none".to_string()
    } else {
        on.join(", ")
    }
}

/// The summary line's description, after the frame number and length.
pub fn summary(p: &Pause) -> String {
    let src = mac(p.frame.src);
    match p.frame.body {
        Some(MacControlRepr::Pfc(pfc)) => {
            let times: Vec<String> = (0..PRIORITIES)
                .filter(|&n| pfc.enabled(n))
                .map(|n| match pfc.quanta[n] {
                    0 => format!("P{n} XON"),
                    q => format!("P{n} XOFF {q} ({:.3} us)", p.us(q)),
                })
                .collect();
            let reserved = if pfc.reserved() != 0 {
                "  RESERVED BITS SET"
            } else {
                ""
            };
            format!(
                "PFC from {src}: {}{reserved}",
                if times.is_empty() {
                    "no priority enabled".to_string()
                } else {
                    times.join(", ")
                }
            )
        }
        Some(MacControlRepr::Pause(pause)) => match pause.quanta {
            0 => format!("802.3x PAUSE from {src}: XON"),
            q => format!(
                "802.3x PAUSE from {src}: XOFF {q} quanta ({:.3} us)",
                p.us(q)
            ),
        },
        Some(MacControlRepr::Other(op)) => {
            format!("MAC control from {src}: opcode {op:#06x} (not flow control)")
        }
        None => format!("MAC control from {src}: truncated, too short for its opcode"),
    }
}

/// The frame's headers, field by field.
pub fn sections(p: &Pause) -> Vec<Section> {
    let f = &p.frame;
    let dst_meaning = if f.dst == MAC_CONTROL_DST {
        "MAC control multicast: the link partner consumes it, bridges never forward it".to_string()
    } else {
        format!(
            "UNEXPECTED: flow control goes to {} (802.3 31B.3.1)",
            mac(MAC_CONTROL_DST)
        )
    };
    let mut out = vec![Section::new(
        "Ethernet II (IEEE 802.3)",
        0,
        ETHERNET_HEADER_LEN,
        vec![
            field((0, 48), "Destination", mac(f.dst), dst_meaning),
            field(
                (48, 48),
                "Source",
                mac(f.src),
                "the port asking its link partner to stop sending",
            ),
            field((96, 16), "EtherType", "0x8808", "MAC control follows"),
        ],
    )];
    let Some(body) = f.body else {
        out.push(Section::new(
            "MAC control: truncated (IEEE 802.3 31.4)",
            ETHERNET_HEADER_LEN,
            0,
            vec![],
        ));
        return out;
    };
    let opcode = match body {
        MacControlRepr::Pause(_) => field((0, 16), "Opcode", "0x0001", "PAUSE (802.3 31B)"),
        MacControlRepr::Pfc(_) => field(
            (0, 16),
            "Opcode",
            "0x0101",
            "PFC: priority-based flow control (802.1Qbb 36.1.3)",
        ),
        MacControlRepr::Other(op) => field(
            (0, 16),
            "Opcode",
            format!("{op:#06x}"),
            "another MAC control opcode, not flow control",
        ),
    };
    let params = ETHERNET_HEADER_LEN + OPCODE_LEN;
    match body {
        MacControlRepr::Pause(pause) => out.push(Section::new(
            "802.3x PAUSE (IEEE 802.3 Annex 31B)",
            ETHERNET_HEADER_LEN,
            OPCODE_LEN + PauseRepr::LEN,
            vec![
                opcode,
                field(
                    (16, 16),
                    "pause_time",
                    pause.quanta,
                    p.action("the whole link (every priority)", pause.quanta),
                ),
            ],
        )),
        MacControlRepr::Pfc(pfc) => out.push(pfc_section(p, &pfc, opcode)),
        MacControlRepr::Other(_) => out.push(Section::new(
            "MAC control (IEEE 802.3 31.4)",
            ETHERNET_HEADER_LEN,
            OPCODE_LEN,
            vec![opcode],
        )),
    }
    let start = params + body.buffer_len() - OPCODE_LEN;
    if p.pad > 0 {
        let what = if start + p.pad > ETHERNET_MIN_FRAME_LEN {
            "padding to the 60-byte minimum (and any FCS)"
        } else {
            "padding to the 60-byte minimum"
        };
        out.push(Section::new(
            format!(
                "Reserved: {} bytes of {what}{}",
                p.pad,
                if p.pad_zero {
                    ", zeros"
                } else {
                    ", NOT ZERO (802.3 31.4 sends zeros)"
                }
            ),
            start,
            p.pad,
            vec![],
        ));
    }
    out
}

fn pfc_section(p: &Pause, pfc: &PfcRepr, opcode: Field) -> Section {
    let reserved = pfc.reserved();
    let mut fields = vec![
        opcode,
        field(
            (16, 8),
            "Reserved",
            format!("{reserved:#04x}"),
            if reserved == 0 {
                "zero, as it must be"
            } else {
                "SET: reserved bits must be zero (802.1Qbb 36.1.3.2); ignored"
            },
        ),
        field(
            (24, 8),
            "Class-enable vector",
            format!(
                "{:#04x} ({:08b})",
                pfc.enable_vector & 0xff,
                pfc.enable_vector & 0xff
            ),
            format!(
                "bit n on: time[n] applies; priorities enabled: {}",
                enabled_list(pfc)
            ),
        ),
    ];
    for (n, name) in TIME_NAMES.iter().enumerate() {
        let q = pfc.quanta[n];
        let meaning = if pfc.enabled(n) {
            p.action(&format!("priority {n}"), q)
        } else if q == 0 {
            format!("priority {n} not enabled: ignored")
        } else {
            format!("priority {n} not enabled: ignored (non-zero, {q} quanta)")
        };
        fields.push(field((32 + 16 * n, 16), name, q, meaning));
    }
    Section::new(
        "PFC: priority-based flow control (IEEE 802.1Qbb 36.1.3)",
        ETHERNET_HEADER_LEN,
        OPCODE_LEN + PfcRepr::LEN,
        fields,
    )
}

const TIME_NAMES: [&str; PRIORITIES] = [
    "time[0]", "time[1]", "time[2]", "time[3]", "time[4]", "time[5]", "time[6]", "time[7]",
];

/// `mac_control` in `roce decode --json`.
#[derive(Serialize)]
pub struct PauseJson {
    /// `PFC`, `PAUSE`, `OTHER` or `TRUNCATED`.
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    opcode: Option<u16>,
    src_mac: String,
    dst_mac: String,
    link_gbps: f64,
    /// PFC: the low byte of the enable vector, the priorities it enables, and the reserved
    /// high byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    class_enable_vector: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled_priorities: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reserved: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reserved_bits_set: Option<bool>,
    /// PFC: the eight times in quanta, and in microseconds at `link_gbps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    quanta: Option<Vec<u16>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_us: Option<Vec<f64>>,
    /// PAUSE: its one time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pause_quanta: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause_time_us: Option<f64>,
    pad_bytes: usize,
    pad_zero: bool,
}

pub fn json(p: &Pause) -> PauseJson {
    let f = &p.frame;
    let mut j = PauseJson {
        kind: "TRUNCATED",
        opcode: None,
        src_mac: mac(f.src),
        dst_mac: mac(f.dst),
        link_gbps: p.gbps(),
        class_enable_vector: None,
        enabled_priorities: None,
        reserved: None,
        reserved_bits_set: None,
        quanta: None,
        time_us: None,
        pause_quanta: None,
        pause_time_us: None,
        pad_bytes: p.pad,
        pad_zero: p.pad_zero,
    };
    match f.body {
        Some(MacControlRepr::Pfc(pfc)) => {
            j.kind = "PFC";
            j.opcode = Some(0x0101);
            j.class_enable_vector = Some(pfc.enable_vector as u8);
            j.enabled_priorities = Some((0..PRIORITIES).filter(|&n| pfc.enabled(n)).collect());
            j.reserved = Some(pfc.reserved());
            j.reserved_bits_set = Some(pfc.reserved() != 0);
            j.quanta = Some(pfc.quanta.to_vec());
            j.time_us = Some(pfc.quanta.iter().map(|&q| p.us(q)).collect());
        }
        Some(MacControlRepr::Pause(pause)) => {
            j.kind = "PAUSE";
            j.opcode = Some(0x0001);
            j.pause_quanta = Some(pause.quanta);
            j.pause_time_us = Some(p.us(pause.quanta));
        }
        Some(MacControlRepr::Other(op)) => {
            j.kind = "OTHER";
            j.opcode = Some(op);
        }
        None => {}
    }
    j
}
