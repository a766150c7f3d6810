//! `roce ladder FILE [--flow F] [--from N --count M] --svg OUT`: a sequence (ladder) diagram
//! of the exchange between two endpoints, hand-written SVG.

mod svg;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use roce::analysis::pfc::PfcOptions;
use roce::analysis::{Analyzer, Outcome, PacketNote, Sliced, slice_ahead};
use roce::capture::Frame;

/// Draw the packets between two endpoints as a ladder diagram (SVG).
///
/// The exchange is flow F (see `roce analyze`; by default the flow with the most packets)
/// together with its reverse flow: two vertical lines, one arrow per packet with its opcode
/// and PSN, time and Wireshark's frame number (from 1) on the left. Retransmitted requests are orange, NAKs red, RNR NAKs purple,
/// responses that imply a NAK dashed, CNPs blue, ECN CE marked packets and bad ICRCs
/// flagged; PFC and 802.3x PAUSE pauses in force meanwhile are shaded bands along the time
/// axis, labelled with the priority, the pausing MAC and how long they lasted.
///
/// Exit status: 0 drawn; 1 not a capture, unreadable, or nothing to draw (one line on
/// stderr); 2 the file is damaged: the frames before the damage were drawn; 3 some frames
/// were cut by a snap length (their headers were drawn, their ICRCs not checked).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce ladder pcaps/rc_loss_write.pcap --svg ladder.svg
  roce ladder pcaps/rc_loss_write.pcap --flow 2 --from 40 --count 30 --svg loss.svg
  roce gen pfc -o pfc.pcap && roce ladder pfc.pcap --svg pfc.svg   the PFC pause as a band")]
pub struct LadderArgs {
    /// The capture (pcap or pcapng).
    pub file: PathBuf,
    /// The flow (its number in `roce analyze`); its reverse flow is drawn too.
    #[arg(long)]
    pub flow: Option<usize>,
    /// First packet of the exchange to draw, counted from 0.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// How many packets to draw (at most 100000: the rows are held until the drawing is
    /// written, and an SVG of more arrows than that is no longer readable).
    #[arg(long, default_value_t = 40)]
    pub count: u64,
    /// Where to write the SVG.
    #[arg(long)]
    pub svg: PathBuf,
    /// As for `roce analyze`: 2 reads records on one thread and analyses on another (the
    /// default where there are two cores or more), 1 does both on one. The drawing is the same.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub threads: Option<u8>,
    /// Link speed in Gb/s at which PAUSE and PFC quanta (512 bit times) last: the pauses
    /// in force are drawn as shaded bands across the time they lasted.
    #[arg(long, value_name = "G", default_value_t = 100.0,
          value_parser = super::analyze::pfc::parse_gbps)]
    pub link_gbps: f64,
}

/// The most packets one drawing holds (as many as a page of `roce view` details).
const MAX_COUNT: u64 = super::view::MAX_COUNT;

pub fn run(args: LadderArgs) -> anyhow::Result<ExitCode> {
    if args.count == 0 || args.count > MAX_COUNT {
        bail!("--count must be 1 to {MAX_COUNT}");
    }
    let threads = args.threads.unwrap_or_else(super::analyze::default_threads);
    let pfc = PfcOptions {
        link_bits_per_sec: (args.link_gbps * 1e9) as u64,
        ..PfcOptions::default()
    };
    let report = super::analyze::analyse_with(&args.file, threads, Default::default(), pfc)?;
    let flow = match args.flow {
        Some(f) if f < report.flows.len() => f,
        Some(f) => bail!(
            "{}: no flow {f} (the capture has {} flows; see roce analyze)",
            args.file.display(),
            report.flows.len()
        ),
        None => (0..report.flows.len())
            .min_by_key(|&i| std::cmp::Reverse(report.flows[i].packets))
            .with_context(|| match &report.input.damage {
                // Nothing to draw because the file is damaged before any RoCE frame: say so.
                Some(damage) => format!(
                    "{}: no RoCEv2 packets before the damage: {damage}",
                    args.file.display()
                ),
                None => format!("{}: no RoCEv2 packets", args.file.display()),
            })?,
    };
    let reverse = report.flows[flow].reverse;
    // The analysis is deterministic: a second pass gives the same flow numbers, and every
    // packet is annotated with the state of the whole capture before it.
    let mut analyzer = Analyzer::new().with_pfc(pfc);
    let mut seen = 0u64;
    let mut rows: Vec<(u64, PacketNote)> = Vec::new();
    let mut each = |frame: &Frame<'_>, sliced: Option<Sliced>| {
        if let Outcome::Roce(note) = analyzer.frame_sliced(frame, sliced)
            && (note.flow == flow || Some(note.flow) == reverse)
        {
            if seen >= args.from && rows.len() < args.count as usize {
                // Wireshark's frame number, from 1, so an arrow can be found there.
                rows.push((frame.index + 1, note));
            }
            seen += 1;
        }
    };
    if threads >= 2 {
        super::replay_split(&args.file, slice_ahead, each)?;
    } else {
        super::replay(&args.file, |frame| each(frame, None))?;
    }
    if rows.is_empty() {
        bail!(
            "{}: flow {flow} and its reverse have {seen} packets, none from packet {}",
            args.file.display(),
            args.from
        );
    }
    let doc = svg::ladder(&report, flow, args.from, &rows);
    std::fs::write(&args.svg, doc)
        .with_context(|| format!("cannot write {}", args.svg.display()))?;
    Ok(super::analyze::input_status(&args.file, &report.input))
}
