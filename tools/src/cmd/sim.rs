//! `roce sim dcqcn [...]`: the DCQCN simulator (roce::sim::dcqcn) from the command line.

mod json;
mod net;
mod svg;
mod text;

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use roce::cc::fluid::{self, FixedPoint};
use roce::cc::{Marker, Preset, Time};
use roce::sim::dcqcn::{Control, SimConfig, SimReport, run as simulate};

/// Simulations that run the stack's real protocol code in virtual time.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (each subcommand's --help has more):
  roce sim dcqcn --flows 4 --svg rates.svg          four DCQCN senders into one ECN queue
  roce sim net --topology incast:8 --cc dcqcn,none  an 8-to-1 incast, with and without DCQCN")]
pub struct SimArgs {
    #[command(subcommand)]
    pub which: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    Dcqcn(DcqcnArgs),
    Net(Box<net::NetArgs>),
}

/// Simulate DCQCN: N senders through one ECN-marking switch queue to one receiver.
///
/// Each sender runs the stack's DCQCN reaction point and pacer, the switch marks CE with RED
/// (Kmin, Kmax, Pmax) as packets leave its queue, and the receiver's notification point sends
/// CNPs that reach the senders after the feedback delay. Every sender's line rate is the
/// bottleneck's; flows start at line rate and never run dry. Rates count wire bytes
/// (payload, headers, preamble and gap). Runs are deterministic for a given --seed.
///
/// The switch marks as the paper's (Kmin 5 KB, Kmax 200 KB, Pmax 0.01) unless --kmin, --kmax
/// or --pmax say otherwise.
///
/// Fairness, utilisation and the queue are measured over the last --window-ms; the
/// CoNEXT 2016 fluid model's fixed point for the flows running at the end is shown beside the
/// mean queue.
#[derive(Debug, Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "\
Examples:
  roce sim dcqcn                                      two flows on 40 Gb/s for 100 ms
  roce sim dcqcn --start-ms 0,10,100 --duration-ms 200 --svg join.svg
                                                      two flows, then a third joins
  roce sim dcqcn --flows 10 --link-gbps 100 --json | jq '.jain, .queue_mean_bytes'
  roce sim dcqcn --flows 4 --preset mlx5 --kmin 50 --kmax 400 --pmax 0.1
  roce sim dcqcn --flows 2 --preset none              no congestion control: the queue grows"
)]
pub struct DcqcnArgs {
    /// Number of flows (default: one per --start-ms entry, else 2).
    #[arg(long, value_name = "N")]
    pub flows: Option<usize>,
    /// Bottleneck and sender line rate, Gb/s.
    #[arg(long, value_name = "G", default_value_t = 40.0)]
    pub link_gbps: f64,
    /// Simulated time, ms.
    #[arg(long, value_name = "T", default_value_t = 100.0)]
    pub duration_ms: f64,
    /// Feedback delay, us: from a marked packet leaving the switch to its CNP reaching the
    /// sender (the whole loop but queueing).
    #[arg(long, value_name = "D", default_value_t = 4.0)]
    pub delay_us: f64,
    /// Parameter set of the senders: paper (SIGCOMM 2015), mlx5 (NVIDIA firmware defaults),
    /// or none (no congestion control, always line rate).
    #[arg(long, value_name = "P", default_value = "paper")]
    pub preset: String,
    /// Start time of each flow, ms, comma-separated (default: all at 0).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub start_ms: Vec<f64>,
    #[command(flatten)]
    pub marking: Marking,
    /// Seed of the switch's marking decisions.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Payload bytes per packet (an IB MTU: at most 4096).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub payload: u32,
    /// Spacing of the rate and queue samples, us.
    #[arg(long, value_name = "US", default_value_t = 100.0)]
    pub sample_us: f64,
    /// The summary covers the run's last W ms.
    #[arg(long, value_name = "W", default_value_t = 10.0)]
    pub window_ms: f64,
    /// One JSON document instead of the table: samples over time and the summary.
    #[arg(long)]
    pub json: bool,
    /// Also draw the rates per flow and the queue over time into this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    match args.which {
        SimCommand::Dcqcn(args) => dcqcn(args),
        SimCommand::Net(args) => net::run(*args),
    }
}

/// The switches' RED marking (Kmin, Kmax, Pmax), as both simulators take it; each command's
/// help gives its defaults.
#[derive(Debug, Args)]
pub struct Marking {
    /// RED marking starts above this queue length, KB (1 KB = 1000 B).
    #[arg(long, value_name = "KB")]
    pub kmin: Option<f64>,
    /// RED marks every packet above this queue length, KB.
    #[arg(long, value_name = "KB")]
    pub kmax: Option<f64>,
    /// RED marking probability at Kmax, 0 to 1.
    #[arg(long, value_name = "P")]
    pub pmax: Option<f64>,
}

impl Marking {
    /// The marker, each threshold not given taken from `default`.
    pub fn marker(&self, default: Marker) -> anyhow::Result<Marker> {
        let kb = |flag: &str, v: Option<f64>, default: u64| -> anyhow::Result<u64> {
            match v {
                None => Ok(default),
                Some(v) if v.is_finite() && (0.0..=1e9).contains(&v) => {
                    Ok((v * 1e3).round() as u64)
                }
                Some(v) => bail!("{flag} must be a queue length in KB, got {v}"),
            }
        };
        Marker::new(
            kb("--kmin", self.kmin, default.kmin_bytes())?,
            kb("--kmax", self.kmax, default.kmax_bytes())?,
            self.pmax.unwrap_or(default.pmax()),
        )
        .map_err(|e| anyhow::anyhow!("marking: {e}"))
    }
}

/// What a run needs besides the simulator's report, for the outputs.
pub struct Run {
    pub preset: String,
    pub config: SimConfig,
    pub report: SimReport,
    /// The fluid model's equilibrium for the flows running at the end (DCQCN presets only).
    pub fixed_point: Option<FixedPoint>,
}

fn dcqcn(args: DcqcnArgs) -> anyhow::Result<ExitCode> {
    let config = config(&args)?;
    let report = simulate(&config)?;
    let running = config
        .flow_starts
        .iter()
        .filter(|&&s| s < config.duration)
        .count();
    let fixed_point = match config.control {
        Control::Dcqcn(params) => fluid::fixed_point(
            &params,
            &config.marker,
            config.link_bps as f64,
            u32::try_from(running).unwrap_or(u32::MAX),
            config.wire_bytes(),
            config.cnp_interval,
        ),
        Control::None => None,
    };
    let run = Run {
        preset: args.preset.clone(),
        config,
        report,
        fixed_point,
    };
    if let Some(path) = &args.svg {
        std::fs::write(path, svg::plot(&run)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&json::document(&run))?)?;
    } else {
        crate::out!("{}", text::summary(&run))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A positive finite number of `unit`s as a time, or an error naming the flag.
fn time(flag: &str, value: f64, unit: Time) -> anyhow::Result<Time> {
    if !(value.is_finite() && value >= 0.0) {
        bail!("{flag} must be a non-negative number, got {value}");
    }
    let secs = value * unit.as_secs_f64();
    // The simulated clock counts picoseconds in 64 bits (213 days): beyond that a time
    // would silently become the end of time.
    if secs >= Time::MAX.as_secs_f64() {
        bail!(
            "{flag} {value:e} is beyond the simulated clock, which ends after {:.0} days",
            Time::MAX.as_secs_f64() / 86_400.0
        );
    }
    let t = Time::from_secs_f64(secs);
    if value > 0.0 && t.is_zero() {
        bail!("{flag} {value} is below a picosecond");
    }
    Ok(t)
}

fn config(args: &DcqcnArgs) -> anyhow::Result<SimConfig> {
    let flows = match (args.flows, args.start_ms.len()) {
        (Some(n), 0) => n,
        (Some(n), listed) if n != listed => {
            bail!("--start-ms lists {listed} start times but --flows is {n}")
        }
        (_, 0) => 2,
        (_, listed) => listed,
    };
    if !(1..=10_000).contains(&flows) {
        bail!("--flows must be between 1 and 10000, got {flows}");
    }
    if !(args.link_gbps.is_finite() && args.link_gbps > 0.0 && args.link_gbps <= 10_000.0) {
        bail!(
            "--link-gbps must be above 0 and at most 10000, got {}",
            args.link_gbps
        );
    }
    let link_bps = (args.link_gbps * 1e9).round() as u64;
    let control = match args.preset.as_str() {
        "none" => Control::None,
        name => match Preset::from_name(name) {
            Some(p) => Control::Dcqcn(p.params(link_bps as f64)),
            None => bail!("--preset must be paper, mlx5 or none, got {name:?}"),
        },
    };
    let marker = args.marking.marker(Marker::paper())?;
    let ms = Time::from_millis(1);
    let flow_starts = if args.start_ms.is_empty() {
        vec![Time::ZERO; flows]
    } else {
        args.start_ms
            .iter()
            .map(|&s| time("--start-ms", s, ms))
            .collect::<anyhow::Result<_>>()?
    };
    let duration = time("--duration-ms", args.duration_ms, ms)?;
    let window = time("--window-ms", args.window_ms.min(args.duration_ms), ms)?;
    let mut config = SimConfig::paper(flows, 1);
    config.link_bps = link_bps;
    config.control = control;
    config.marker = marker;
    config.flow_starts = flow_starts;
    config.duration = duration;
    config.window = window;
    config.feedback_delay = time("--delay-us", args.delay_us, Time::from_micros(1))?;
    config.payload_bytes = args.payload;
    config.seed = args.seed;
    config.sample_interval = time("--sample-us", args.sample_us, Time::from_micros(1))?;
    Ok(config)
}
