//! `roce decode FILE [--json]`: one entry per frame of a pcap or pcapng capture.

pub(crate) mod explain;
mod fields;
pub(crate) mod json;
pub(crate) mod mad;
mod outer;
pub(crate) mod pause;
pub(crate) mod section;
pub(crate) mod v1;

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roce::analysis::pfc::{DEFAULT_LINK_GBPS, mac_control};
use roce::capture::{CaptureError, Frame, FrameError};
use roce::wire::RocePacket;
use roce::wire::decap::Encap;
use roce::wire::grh::RoceV1Packet;
use roce::wire::{NotRoce, PacketError};

const DEFAULT_LINK_BITS_PER_SEC: u64 = DEFAULT_LINK_GBPS * 1_000_000_000;

/// What a frame turned out to be.
#[derive(Debug)]
// One lives at a time, on the stack, while its frame is printed: boxing would cost more.
#[allow(clippy::large_enum_variant)]
pub enum Dissected<'a> {
    Roce(RocePacket<'a>),
    /// RoCEv1: the InfiniBand GRH over Ethernet (EtherType 0x8915).
    RoceV1(RoceV1Packet<'a>),
    /// Not a RoCEv2 frame (another protocol, or a link type we do not read), inside these
    /// outer layers.
    NotRoce(String, Encap),
    /// A MAC control frame: PFC, 802.3x PAUSE or another opcode.
    MacControl(pause::Pause),
    /// Addressed to UDP port 4791 but not a well-formed RoCEv2 packet, cut before we could
    /// tell, or an outer layer that is broken or nested too deep.
    Broken(String, Encap),
}

impl<'a> Dissected<'a> {
    pub fn of(frame: &Frame<'a>) -> Dissected<'a> {
        Self::at_link_speed(frame, DEFAULT_LINK_BITS_PER_SEC)
    }

    /// As [`Dissected::of`], pause quanta read at `link_bits_per_sec`.
    pub fn at_link_speed(frame: &Frame<'a>, link_bits_per_sec: u64) -> Dissected<'a> {
        let Some(link) = frame.link_header() else {
            return Dissected::NotRoce(
                FrameError::UnsupportedLink(frame.link.number()).to_string(),
                Encap::default(),
            );
        };
        match RocePacket::parse_outer(frame.data, link) {
            (_, Ok(p)) => Dissected::Roce(p),
            (encap, Err(e)) if e.is_not_roce() => match mac_control(frame) {
                Some(c) => {
                    Dissected::MacControl(pause::Pause::new(c, frame.data, link_bits_per_sec))
                }
                None => match e {
                    PacketError::NotRoce(NotRoce::RoceV1 { grh, eth }) => {
                        match RoceV1Packet::parse_at(frame.data, eth, grh) {
                            Ok(p) => Dissected::RoceV1(p),
                            Err(e) => Dissected::Broken(format!("RoCEv1: {e}"), encap),
                        }
                    }
                    e => Dissected::NotRoce(e.to_string(), encap),
                },
            },
            // A snap length is the usual reason for a truncated packet: say so.
            (encap, Err(e)) if frame.is_cut() => Dissected::Broken(
                format!(
                    "{e} (the capture kept only {} of the frame's {} bytes)",
                    frame.data.len(),
                    frame.orig_len
                ),
                encap,
            ),
            (encap, Err(e)) => Dissected::Broken(e.to_string(), encap),
        }
    }

    /// The outer layers the frame was found inside, outermost first.
    pub fn encap(&self) -> Encap {
        match self {
            Dissected::Roce(p) => p.encap(),
            Dissected::NotRoce(_, e) | Dissected::Broken(_, e) => *e,
            Dissected::MacControl(_) | Dissected::RoceV1(_) => Encap::default(),
        }
    }
}

/// Decode every frame of a capture: each RoCEv2 header field by field, or JSON lines.
///
/// Reads pcap and pcapng files with Ethernet, Linux cooked (SLL, SLL2) or raw IP link types,
/// and RoCE inside 802.1Q and QinQ tags, VXLAN, Geneve, GRE and ERSPAN I/II/III, nested up to
/// 8 outer layers; each outer layer is explained like the other headers. RoCEv1 frames
/// (EtherType 0x8915: GRH, BTH, ..., ICRC) and PFC / 802.3x PAUSE frames are explained too.
/// Frames are numbered from 1, as Wireshark numbers them (JSON: `frame`; `index` counts from
/// 0). Frames that are not RoCEv2, or are malformed (truncated, lying lengths, unknown opcode,
/// bad ICRC), are reported and decoding goes on; a damaged capture is decoded up to the
/// damage.
///
/// Exit status: 0 decoded; 1 not a capture or unreadable (one line on stderr); 2 the file is
/// damaged (cut short, corrupt, or truncated while read): every frame before the damage was
/// decoded, and one line on stderr says where.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce decode pcaps/rc_send_only.pcap          explain every header of every frame
  roce decode --json pcaps/rc_rnr_nak.pcap     one JSON object per frame
  roce decode --json cap.pcapng | jq 'select(.icrc == \"bad\")'
  roce decode --link-gbps 25 pfc.pcap           PFC pause times at 25 Gb/s

JSON keys: index (from 0), frame (from 1, as Wireshark), roce, encap (the outer layers,
outermost first: VLAN, QINQ, SLL, SLL2, VXLAN, GENEVE, GRE, ERSPAN_I, ERSPAN_II, ERSPAN_III,
an ERSPAN before the GRE that carries it; [] for a plain frame); for RoCE frames roce_version
(1: RoCEv1, src and dst are the GRH's GIDs and a grh object has traffic_class, flow_label,
hop_limit, payload_len; 2: RoCEv2), src, dst (the inner, RoCE addresses), outer_headers when
encapsulated ([{header, offset, tpid, fields}]: each tag, cooked header and tunnel header's
fields by their names),
opcode, opcode_value, dest_qp, psn, ack_req, se, pad, pkey, fecn, becn, ecn, the extension
headers present (reth, aeth, atomic_eth, atomic_ack_eth, deth, immdt, ieth, feth),
payload_len, icrc (\"ok\"/\"bad\"); for communication management MADs to QP1 (rdma_cm)
a cm object: message (REQ, REP, RTU, REJ, DREQ, ...), attribute_id, transaction_id,
local_comm_id, remote_comm_id, service_id, port_space and port, local_qpn / remote_qpn /
qpn, starting_psn, reject_reason and its name; error when the frame is not RoCEv2 or is malformed;
for MAC control frames (PFC, 802.3x PAUSE) a mac_control object: kind (PFC, PAUSE, OTHER,
TRUNCATED), opcode, src_mac, dst_mac, link_gbps; PFC: class_enable_vector, enabled_priorities,
reserved, reserved_bits_set, quanta [8], time_us [8]; PAUSE: pause_quanta, pause_time_us;
pad_bytes, pad_zero.")]
pub struct DecodeArgs {
    /// The capture to decode (pcap or pcapng).
    pub file: PathBuf,
    /// One JSON object per line instead of the annotated explanation.
    #[arg(long)]
    pub json: bool,
    /// Link speed in Gb/s at which PAUSE and PFC quanta (512 bit times) are shown as time.
    #[arg(long, value_name = "G", default_value_t = 100.0,
          value_parser = super::analyze::pfc::parse_gbps)]
    pub link_gbps: f64,
}

/// The decoder's output for one frame: a JSON line or the annotated explanation, each ending
/// in a newline.
pub fn describe(frame: &Frame<'_>, json: bool, link_bits_per_sec: u64) -> String {
    let dissected = Dissected::at_link_speed(frame, link_bits_per_sec);
    let index = frame.index as usize;
    if json {
        json::frame(index, &dissected) + "\n"
    } else {
        explain::frame(index, frame.data.len(), &dissected) + "\n"
    }
}

pub fn run(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut reader = super::open_capture(&args.file)?;
    let link_bits_per_sec = (args.link_gbps * 1e9) as u64;
    let mut write_err = None;
    let mut damaged = None;
    while write_err.is_none() {
        let text = match reader.next_frame() {
            Ok(Some(frame)) => describe(&frame, args.json, link_bits_per_sec),
            Ok(None) => break,
            Err(e @ CaptureError::Damaged { .. }) => {
                damaged = Some(e.to_string());
                let CaptureError::Damaged { frame, reason, .. } = e else {
                    break;
                };
                let index = frame as usize;
                if args.json {
                    json::damaged(index, &reason) + "\n"
                } else {
                    format!(
                        "#{}  damaged capture: {reason}; nothing after this is readable\n",
                        index + 1
                    )
                }
            }
            Err(e) => return Err(e.into()),
        };
        if let Err(e) = out.write_all(text.as_bytes()) {
            write_err = Some(e);
        }
    }
    super::reader_left(write_err.map_or_else(|| out.flush(), Err))?;
    Ok(match damaged {
        Some(damage) => {
            eprintln!("roce: {}: {damage}", args.file.display());
            ExitCode::from(super::analyze::EXIT_DAMAGED)
        }
        None => ExitCode::SUCCESS,
    })
}
