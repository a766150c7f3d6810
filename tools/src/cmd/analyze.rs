//! `roce analyze FILE [--json]`: stateful replay analysis of a capture.

pub mod json;
pub mod live;
pub mod pfc;
pub mod text;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use roce::analysis::pfc::PfcOptions;
use roce::analysis::{Analyzer, Limits, Report, slice_ahead};

/// Exit status when the file is damaged (cut short or corrupt): frames up to the damage
/// were analysed.
pub const EXIT_DAMAGED: u8 = 2;
/// Exit status when some frames were cut by a snap length (their headers were analysed).
pub const EXIT_CUT_FRAMES: u8 = 3;

/// Replay a capture through the two transports' state: what each flow did and why.
///
/// A flow is one direction of traffic to one destination QP (source IP, destination IP,
/// DestQP). For each: packets, opcodes, retransmitted packets (requests whose PSN the flow
/// already carried), NAKs with the cause seen earlier in the capture, RNR NAKs and the wait,
/// implied NAKs, go-back-N episodes and the time to recover, messages and MSNs,
/// request-to-ACK round-trip times, goodput over time, CNPs and ECN CE marks with the
/// change in packet spacing that followed, ICRC errors; and the rdma_cm connections.
///
/// Exit status: 0 analysed; 1 not a capture or unreadable (one line on stderr);
/// 2 the file is damaged (cut short or corrupt): everything before the damage was analysed;
/// 3 some frames were cut by a snap length: their headers were analysed, their ICRCs not.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce analyze pcaps/rc_loss_write.pcap          a readable report
  roce analyze --json pcaps/rc_loss_write.pcap | jq '.flows[] | {src, dst, retransmitted_packets, naks}'
  roce analyze --threads 1 big.pcap              all on one thread (the default reads on one, analyses on another)
  roce analyze --max-flows 10000 --max-memory 256 huge.pcap   follow fewer flows, hold less
  roce analyze --link-gbps 25 --storm-window-ms 1 --storm-share 0.3 pfc.pcap
                                                 PFC pauses at 25 Gb/s, storms by the ms
  sudo roce analyze --live eth1                  a per-flow table every second until Ctrl-C,
                                                 then the same report as for a file
  sudo roce analyze --live eth1 --interval 5 --duration 60 --json > live.jsonl
                                                 one JSON report per 5 s, the final one last

Live mode (--live IFACE) listens on an existing interface through an AF_PACKET ring (needs
CAP_NET_RAW) without taking it over: its traffic flows on, and the promiscuous mode it asks
for ends with it. Every --interval it draws a table of the busiest flows (packets/s,
goodput, retransmissions, NAKs, CNPs, CE marks, PFC stalls) and the PFC/PAUSE frames on
stderr, redrawn in place on a terminal; with --json it prints the report so far as one JSON
line on stdout instead,
with a `live` object (interface, kernel counts, the interval's per-flow rates). It stops after
--duration, or at SIGINT/SIGTERM, and prints the final report (`live.final` true in JSON).

JSON keys: packets, roce_packets, roce_v1_packets, icrc_errors, ip_header_errors (RoCEv2
packets whose IPv4 header a receiver drops: a wrong checksum, options or DF clear), flows[]
with src, dst, dest_qp,
packets, opcodes {name: count}, retransmitted_packets, naks {name: count}, rnr_naks, cnps,
ecn_ce, payload_bytes, roce_version, priority, pfc_stalls, and more (requester, goodput,
rate_changes); connections[]; input; untracked {max_flows, max_memory_mib, flows, packets,
cm_connections, memory_full_at}; pfc {frames, pause_8023x_frames, by_source[] {mac, priority
(null: 802.3x), frames, xoff, xon, paused_us, longest_pause_us}, storms[], stalled_flows[], ...}.")]
pub struct AnalyzeArgs {
    /// The capture to analyse (pcap or pcapng).
    #[arg(required_unless_present = "live", conflicts_with = "live")]
    pub file: Option<PathBuf>,
    /// Analyse what interface IFACE carries, live, instead of a file.
    #[arg(long, value_name = "IFACE")]
    pub live: Option<String>,
    /// Live: seconds between tables (or JSON lines); default 1.
    #[arg(long, value_name = "S", requires = "live", value_parser = parse_seconds)]
    pub interval: Option<Duration>,
    /// Live: stop after this many seconds (default: at SIGINT or SIGTERM).
    #[arg(long, value_name = "S", requires = "live", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
    /// One JSON document for scripts instead of the readable report.
    #[arg(long)]
    pub json: bool,
    /// 2: one thread reads the file's records while another analyses them (the default
    /// where there are two cores or more); 1: both on one thread. The report is the same.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub threads: Option<u8>,
    /// Flows followed at most (about 1 KB each when they are short); the packets of further
    /// flows count in the totals, and the report says how many flows were left out.
    #[arg(long, value_name = "N", default_value_t = roce::analysis::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// MiB of flow state held at most; once reached, later packets count in the totals only
    /// and the report says from which packet on.
    #[arg(long, value_name = "MIB", default_value_t = (roce::analysis::DEFAULT_MAX_BYTES >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub max_memory: u64,
    #[command(flatten)]
    pub pfc: pfc::PfcArgs,
}

/// Two threads where there are two cores or more, else one.
pub fn default_threads() -> u8 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 { 2 } else { 1 }
}

/// Runs the analyser over a whole capture, on `threads` threads (1 or 2).
pub fn analyse(file: &std::path::Path, threads: u8, limits: Limits) -> anyhow::Result<Report> {
    analyse_with(file, threads, limits, PfcOptions::default())
}

/// As [`analyse`], pause frames read as `pfc` says.
pub fn analyse_with(
    file: &std::path::Path,
    threads: u8,
    limits: Limits,
    pfc: PfcOptions,
) -> anyhow::Result<Report> {
    let mut analyzer = Analyzer::with_limits(limits).with_pfc(pfc);
    let damage = if threads >= 2 {
        super::replay_split(file, slice_ahead, |frame, sliced| {
            analyzer.frame_sliced(frame, sliced);
        })?
    } else {
        super::replay(file, |frame| {
            analyzer.frame(frame);
        })?
    };
    if let Some(reason) = damage {
        analyzer.damaged(reason);
    }
    Ok(analyzer.into_report())
}

/// Seconds as a decimal number, from a millisecond to a year.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.001..=31_536_000.0).contains(&secs) {
        return Err(format!("{s} s is out of range (0.001 to 31536000)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits {
        max_flows: args.max_flows,
        max_bytes: usize::try_from(args.max_memory << 20).unwrap_or(usize::MAX),
    };
    if args.live.is_none() && (args.interval.is_some() || args.duration.is_some()) {
        anyhow::bail!("--interval and --duration go with --live IFACE");
    }
    let Some(file) = args.file else {
        // clap requires one of the two.
        let iface = args.live.unwrap_or_default();
        return live::run(live::Options {
            iface,
            interval: args.interval.unwrap_or(Duration::from_secs(1)),
            duration: args.duration,
            json: args.json,
            limits,
            pfc: args.pfc.options(),
        });
    };
    let report = analyse_with(
        &file,
        args.threads.unwrap_or_else(default_threads),
        limits,
        args.pfc.options(),
    )?;
    let mut stdout = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let written = if args.json {
        // Streamed: the document of a capture of many flows is never held whole.
        json::write(&report, &mut stdout)
            .map_err(io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
    } else {
        stdout.write_all(text::render(&file, &report).as_bytes())
    };
    super::reader_left(written.and_then(|()| stdout.flush()))?;
    Ok(input_status(&file, &report.input))
}

/// The exit status for what the input was like, with one line on stderr when it was not
/// whole: 2 damaged, 3 frames cut by a snap length, else 0 (`analyze` and `ladder`).
pub fn input_status(file: &std::path::Path, input: &roce::analysis::InputProblems) -> ExitCode {
    if let Some(damage) = &input.damage {
        eprintln!(
            "roce: {}: {damage}; frames after it were not read",
            file.display()
        );
        ExitCode::from(EXIT_DAMAGED)
    } else if input.cut_frames > 0 {
        eprintln!(
            "roce: {}: {} frames were cut by a snap length (their headers were read, their \
             ICRCs could not be checked)",
            file.display(),
            input.cut_frames
        );
        ExitCode::from(EXIT_CUT_FRAMES)
    } else {
        ExitCode::SUCCESS
    }
}
