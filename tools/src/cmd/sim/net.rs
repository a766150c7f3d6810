//! `roce sim net [...]`: the fabric simulator (roce::sim::net) from the command line.

mod json;
mod svg;
mod text;

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use cpu_time::ThreadTime;
use indicatif::{ProgressBar, ProgressStyle};
use roce::cc::{DcqcnParams, HpccParams, Marker, Preset, Time, TimelyParams};
use roce::sim::net::{
    Cdf, Control, FlowSpec, NetConfig, NetReport, Observer, Pfc, StaticThresholds, Topology,
    TraceEvent, Workload, run as simulate,
};

use super::{Marking, time};

/// Simulate a RoCE fabric: PFC, ECN, ECMP, workloads; DCQCN, HPCC or TIMELY at the hosts.
///
/// Hosts and shared-buffer switches on a dumbbell, an incast or a leaf-spine. Switches queue
/// per port and priority, admit into a shared buffer with dynamic thresholds, pause their
/// upstream with PFC (hop by hop) or drop when it is off, mark ECN (RED: Kmin, Kmax, Pmax)
/// and write HPCC's in-band telemetry; routes are ECMP by flow hash. Hosts run the stack's own
/// congestion control (DCQCN's reaction and notification points, HPCC, TIMELY), go-back-N on
/// loss, and ACK every --ack-every packets.
///
/// Flows: the topology's long-lived ones (dumbbell host i to N+i, incast every sender to the
/// receiver), a workload (websearch, hadoop or a CDF file of `SIZE CDF%` lines) with Poisson
/// arrivals at --load, or --flows SRC-DST[:SIZE][@START],... (hosts numbered from 0).
///
/// Reported: FCT slowdown (FCT over the FCT alone on an idle network) at p50/p95/p99 overall
/// and per flow-size bucket (5 % of the workload's flows each, as the HPCC paper), PFC pause
/// frames and paused time per port, drops, queue-length distribution per switch, link
/// utilisation, long-lived flows' throughput and Jain fairness. Several --cc values run one
/// after the other on the same flows and are compared. Deterministic for a --seed.
#[derive(Debug, Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "\
Examples:
  roce sim net --topology incast:2 --link-gbps 40 --cc dcqcn --duration-ms 1000 --ack-every 256
                                              the DCQCN paper's 2:1 incast for a second
  roce sim net --topology incast:8 --cc none --pfc off --duration-ms 5
                                              no PFC, no congestion control: drops
  roce sim net --topology leafspine:4,4,16 --spine-gbps 400 --workload websearch --load 0.3 \\
      --cc dcqcn,hpcc,timely --preset mlx5 --duration-ms 50 --svg fct.svg
                                              FCT slowdown by flow size, three controllers
  roce sim net --topology leafspine:3,1,4 --link-gbps 40 --spine-gbps 100 \\
      --flows 0-9,1-9,4-9,8-9,2-5 --cc none,dcqcn --svg victim.svg
                                              PFC's victim flow (2-5), with and without DCQCN
  roce sim net --topology dumbbell:4 --workload hadoop --load 0.5 --json | jq .fct_slowdown"
)]
pub struct NetArgs {
    /// dumbbell[:N] (N hosts each side), incast:N (N senders, one receiver) or
    /// leafspine:LEAVES,SPINES,HOSTS_PER_LEAF.
    #[arg(long, value_name = "T")]
    pub topology: String,
    /// Host link rate, Gb/s.
    #[arg(long, value_name = "G", default_value_t = 100.0)]
    pub link_gbps: f64,
    /// Switch-to-switch link rate, Gb/s (default: the host link rate).
    #[arg(long, value_name = "G")]
    pub spine_gbps: Option<f64>,
    /// Propagation delay of every link, us.
    #[arg(long, value_name = "D", default_value_t = 1.0)]
    pub delay_us: f64,
    /// Congestion control at the hosts: dcqcn, hpcc, timely or none; a comma-separated list
    /// runs each on the same flows and compares them.
    #[arg(long, value_name = "CC", default_value = "dcqcn")]
    pub cc: String,
    /// Parameters: paper (each controller's paper, the default), mlx5 (DCQCN as NVIDIA's
    /// firmware defaults it; the others as their papers) or ns3 (DCQCN and HPCC as the HPCC
    /// authors' ns-3 runs set them). TIMELY's paper and ns-3 settings are the same.
    #[arg(long, value_name = "P")]
    pub preset: Option<String>,
    /// PFC on the data priority: on or off (off: a full buffer drops).
    #[arg(long, value_name = "on|off", default_value = "on")]
    pub pfc: String,
    /// Fixed PFC XOFF threshold per ingress queue, KB (default: dynamic, alpha x free buffer).
    #[arg(long, value_name = "KB")]
    pub xoff: Option<f64>,
    /// Fixed PFC XON threshold per ingress queue, KB (with --xoff).
    #[arg(long, value_name = "KB")]
    pub xon: Option<f64>,
    /// Shared buffer per switch, KB (default 320 KB per Gb/s of host link: 32 MB at 100 Gb/s,
    /// as the HPCC runs).
    #[arg(long, value_name = "KB")]
    pub buffer_kb: Option<f64>,
    /// Dynamic threshold alpha: the share of the free buffer one queue may hold.
    #[arg(long, value_name = "A", default_value_t = 0.125)]
    pub dt_alpha: f64,
    /// ECN marking at the host link rate, scaled with each port's rate (default: Kmin 5 KB,
    /// Kmax 200 KB, Pmax 0.01 with DCQCN's paper preset; else 100 KB and 400 KB per 25 Gb/s
    /// and 0.2, as the HPCC runs).
    #[command(flatten)]
    pub marking: Marking,
    /// Flow sizes: websearch, hadoop, or a CDF file (`SIZE CDF` lines, CDF in percent).
    #[arg(long, value_name = "W")]
    pub workload: Option<String>,
    /// Offered load of the workload: the share of each host link (0 < load <= 1).
    #[arg(long, value_name = "X")]
    pub load: Option<f64>,
    /// Workload flows start until this time, ms (default: the whole run), leaving the rest of
    /// the run for them to finish.
    #[arg(long, value_name = "T")]
    pub arrivals_ms: Option<f64>,
    /// Explicit flows: SRC-DST[:SIZE][@START],... e.g. 0-8,1-8:10M@2ms (no SIZE: to the end).
    #[arg(long, value_name = "SPEC")]
    pub flows: Option<String>,
    /// Simulated time, ms.
    #[arg(long, value_name = "T", default_value_t = 10.0)]
    pub duration_ms: f64,
    /// Seed of the workload and of the switches' marking.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Payload bytes per packet (an IB MTU: at most 4096).
    #[arg(long, value_name = "BYTES", default_value_t = 1000)]
    pub payload: u32,
    /// The receiver ACKs every N in-order packets (and a flow's last).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub ack_every: u32,
    /// Retransmission timeout, us.
    #[arg(long, value_name = "US", default_value_t = 4000.0)]
    pub rto_us: f64,
    /// A gap the receiver NAKed is NAKed again if still open this long after, us.
    #[arg(long, value_name = "US", default_value_t = 500.0)]
    pub nak_us: f64,
    /// DCQCN's notification point sends a QP at most one CNP per this interval, us (default
    /// 50, the paper's; 4 with --preset ns3, whose receivers flag every marked packet's ACK
    /// and whose senders cut at most every 4 us).
    #[arg(long, value_name = "US")]
    pub cnp_us: Option<f64>,
    /// Spacing of the samples over time, us (default: the run / 500).
    #[arg(long, value_name = "US")]
    pub sample_us: Option<f64>,
    /// Long-lived flows' throughput and fairness over the run's last W ms (default: half).
    #[arg(long, value_name = "W")]
    pub window_ms: Option<f64>,
    /// One JSON document (an object, or {"runs": [...]} for several --cc).
    #[arg(long)]
    pub json: bool,
    /// Draw rates, queues, pauses and FCT slowdown by size into this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write flow completions, PFC frames and drops to this file, one JSON object a line.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// One run and what the outputs need besides the report.
pub struct NetRun {
    pub config: NetConfig,
    pub report: NetReport,
    pub preset: Option<&'static str>,
    pub wall_s: f64,
    pub cpu_s: f64,
}

pub fn run(args: NetArgs) -> anyhow::Result<ExitCode> {
    let controls = parse_controls(&args)?;
    let base = config(&args)?;
    let mut trace = match &args.trace {
        Some(path) => {
            Some(BufWriter::new(File::create(path).with_context(|| {
                format!("cannot create {}", path.display())
            })?))
        }
        None => None,
    };
    let mut runs = Vec::new();
    for (name, preset) in controls {
        let mut cfg = base.clone();
        cfg.control = control(&cfg, name, preset)?;
        if name == "dcqcn" && preset == Some("paper") {
            // The paper's marking goes with the paper's parameters.
            cfg.marker = args.marking.marker(Marker::paper())?;
        }
        let mut observer = CliObserver::new(name, &cfg, trace.as_mut());
        let wall = Instant::now();
        let cpu = ThreadTime::now();
        let report = simulate(&cfg, &mut observer)?;
        let (cpu_s, wall_s) = (cpu.elapsed().as_secs_f64(), wall.elapsed().as_secs_f64());
        observer.finish()?;
        runs.push(NetRun {
            config: cfg,
            report,
            preset,
            wall_s,
            cpu_s,
        });
    }
    if let Some(mut t) = trace {
        t.flush().context("cannot write the trace")?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, svg::plot(&runs)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&json::document(&runs))?)?;
    } else {
        crate::out!("{}", text::summary(&runs))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The controllers to run, each with its preset name.
fn parse_controls(args: &NetArgs) -> anyhow::Result<Vec<(&'static str, Option<&'static str>)>> {
    let dcqcn_preset = match args.preset.as_deref() {
        None => "paper",
        Some("ns3") => "ns3",
        Some(name) => match Preset::from_name(name) {
            Some(p) => p.name(),
            None => bail!("--preset must be paper, mlx5 or ns3, got {name:?}"),
        },
    };
    let mut out = Vec::new();
    for name in args.cc.split(',').map(str::trim) {
        let entry = match name {
            "dcqcn" => ("dcqcn", Some(dcqcn_preset)),
            "hpcc" if dcqcn_preset == "ns3" => ("hpcc", Some("ns3")),
            "hpcc" => ("hpcc", Some("paper")),
            "timely" => ("timely", Some("paper")),
            "none" => ("none", None),
            other => bail!("--cc must be dcqcn, hpcc, timely or none (or a list), got {other:?}"),
        };
        if out.contains(&entry) {
            bail!("--cc lists {name} twice");
        }
        out.push(entry);
    }
    Ok(out)
}

fn control(cfg: &NetConfig, name: &str, preset: Option<&str>) -> anyhow::Result<Control> {
    let line = cfg.host_bps as f64;
    Ok(match name {
        "dcqcn" => Control::Dcqcn(match preset.and_then(Preset::from_name) {
            Some(p) => p.params(line),
            None if preset == Some("ns3") => DcqcnParams::hpcc_ns3(line),
            None => DcqcnParams::paper(line),
        }),
        "hpcc" if preset == Some("ns3") => Control::Hpcc(HpccParams::ns3(line, cfg.max_base_rtt())),
        "hpcc" => Control::Hpcc(HpccParams::paper(line, cfg.max_base_rtt())),
        "timely" => Control::Timely(TimelyParams::paper(line)),
        _ => Control::None,
    })
}

fn gbps(flag: &str, value: f64) -> anyhow::Result<u64> {
    if !(value.is_finite() && value > 0.0 && value <= 10_000.0) {
        bail!("{flag} must be above 0 and at most 10000, got {value}");
    }
    Ok((value * 1e9).round() as u64)
}

fn kbytes(flag: &str, value: f64) -> anyhow::Result<u64> {
    if !(value.is_finite() && (0.0..=1e9).contains(&value)) {
        bail!("{flag} must be a size in KB, got {value}");
    }
    Ok((value * 1e3).round() as u64)
}

fn config(args: &NetArgs) -> anyhow::Result<NetConfig> {
    let topology: Topology = args.topology.parse()?;
    let host_bps = gbps("--link-gbps", args.link_gbps)?;
    let mut cfg = NetConfig::new(topology, 1);
    let per_25g = host_bps as f64 / 25e9;
    cfg.host_bps = host_bps;
    cfg.fabric_bps = match args.spine_gbps {
        Some(g) => gbps("--spine-gbps", g)?,
        None => host_bps,
    };
    cfg.buffer_bytes = match args.buffer_kb {
        Some(kb) => kbytes("--buffer-kb", kb)?,
        None => (host_bps as f64 / 1e9 * 320_000.0) as u64,
    };
    let us = Time::from_micros(1);
    let ms = Time::from_millis(1);
    cfg.delay = time("--delay-us", args.delay_us, us)?;
    cfg.pfc = match (args.pfc.as_str(), args.xoff, args.xon) {
        ("off", None, None) => Pfc::Off,
        ("off", _, _) => bail!("--xoff and --xon need --pfc on"),
        ("on", None, None) => Pfc::Dynamic,
        ("on", Some(xoff), Some(xon)) => Pfc::Fixed(StaticThresholds {
            xoff: kbytes("--xoff", xoff)?,
            xon: kbytes("--xon", xon)?,
        }),
        ("on", _, _) => bail!("--xoff and --xon go together"),
        (other, _, _) => bail!("--pfc must be on or off, got {other:?}"),
    };
    if !(args.dt_alpha.is_finite() && args.dt_alpha > 0.0 && args.dt_alpha <= 64.0) {
        bail!(
            "--dt-alpha must be above 0 and at most 64, got {}",
            args.dt_alpha
        );
    }
    cfg.dt_alpha = args.dt_alpha;
    let hpcc_runs = Marker::new(
        (100_000.0 * per_25g) as u64,
        (400_000.0 * per_25g) as u64,
        0.2,
    )
    .unwrap_or(Marker::paper());
    cfg.marker = args.marking.marker(hpcc_runs)?;
    cfg.payload_bytes = args.payload;
    cfg.workload = workload(args)?;
    cfg.duration = time("--duration-ms", args.duration_ms, ms)?;
    if let Workload::Poisson { until, .. } = &mut cfg.workload {
        *until = match args.arrivals_ms {
            Some(t) => Some(time("--arrivals-ms", t, ms)?),
            None => None,
        };
    } else if args.arrivals_ms.is_some() {
        bail!("--arrivals-ms needs --workload");
    }
    cfg.seed = args.seed;
    cfg.ack_every = args.ack_every;
    cfg.rto = time("--rto-us", args.rto_us, us)?;
    cfg.nak_interval = time("--nak-us", args.nak_us, us)?;
    let cnp_us = match (args.cnp_us, args.preset.as_deref()) {
        (Some(v), _) => v,
        (None, Some("ns3")) => 4.0,
        (None, _) => 50.0,
    };
    cfg.cnp_interval = time("--cnp-us", cnp_us, us)?;
    cfg.sample_interval = match args.sample_us {
        Some(s) => time("--sample-us", s, us)?,
        None => Time::from_picos((cfg.duration.as_picos() / 500).max(1)),
    };
    cfg.window = match args.window_ms {
        Some(w) => time("--window-ms", w.min(args.duration_ms), ms)?,
        None => Time::from_picos((cfg.duration.as_picos() / 2).max(1)),
    };
    Ok(cfg)
}

fn workload(args: &NetArgs) -> anyhow::Result<Workload> {
    match (&args.workload, &args.flows, args.load) {
        (Some(_), Some(_), _) => bail!("--workload and --flows exclude each other"),
        (None, Some(spec), None) => Ok(Workload::Flows(FlowSpec::parse_list(spec)?)),
        (None, Some(_), Some(_)) => bail!("--load goes with --workload, not --flows"),
        (None, None, Some(_)) => bail!("--load needs --workload"),
        (None, None, None) => Ok(Workload::LongLived),
        (Some(name), None, load) => {
            let cdf = match Cdf::builtin(name) {
                Some(cdf) => cdf,
                None => {
                    let text = std::fs::read_to_string(name).with_context(|| {
                        format!("--workload {name}: not websearch or hadoop, and cannot read it as a CDF file")
                    })?;
                    Cdf::parse(name, &text)?
                }
            };
            let Some(load) = load else {
                bail!("--workload needs --load (the share of each host link, e.g. 0.3)");
            };
            Ok(Workload::Poisson {
                cdf,
                load,
                until: None,
            })
        }
    }
}

/// Progress on stderr (when it is a terminal) and the trace file.
struct CliObserver<'a> {
    cc: &'static str,
    bar: ProgressBar,
    trace: Option<&'a mut BufWriter<File>>,
    error: Option<std::io::Error>,
}

impl<'a> CliObserver<'a> {
    fn new(cc: &'static str, cfg: &NetConfig, trace: Option<&'a mut BufWriter<File>>) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(cfg.duration.as_micros_f64() as u64);
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix} {bar:40} {pos}/{len} us simulated, {elapsed} elapsed, eta {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_prefix(cc);
            bar
        } else {
            ProgressBar::hidden()
        };
        CliObserver {
            cc,
            bar,
            trace,
            error: None,
        }
    }

    fn finish(self) -> anyhow::Result<()> {
        self.bar.finish_and_clear();
        match self.error {
            Some(e) => Err(anyhow::Error::new(e).context("cannot write the trace")),
            None => Ok(()),
        }
    }
}

impl Observer for CliObserver<'_> {
    fn progress(&mut self, now: Time, _end: Time) {
        self.bar.set_position(now.as_micros_f64() as u64);
    }

    fn wants_trace(&self) -> bool {
        self.trace.is_some()
    }

    fn trace(&mut self, event: TraceEvent) {
        let Some(out) = self.trace.as_mut() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let line = json::trace_line(self.cc, &event);
        if let Err(e) = writeln!(out, "{line}") {
            self.error = Some(e);
        }
    }
}
