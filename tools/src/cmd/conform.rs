//! `roce conform PEER`: the wire-level conformance suite against a RoCE peer and its agent.

use std::fmt::Write as _;
use std::io::BufWriter;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use regex::Regex;
use roce::cc::Preset;
use roce::conform::device_peer::DevicePeer;
use roce::conform::proto::DEFAULT_PORT;
use roce::conform::station::Station;
use roce::conform::{
    Check, CheckResult, FrameSink, Outcome, Peer, Report, Timing, VirtualConfig, VirtualPeer,
    registry, run,
};
use roce::endpoint::backend::kernel_neighbour;
use roce::endpoint::{Backend, IpCidr};
use roce::io::pcapng::PcapngWriter;
use roce::time::Instant;
use serde_json::json;

use super::endpoint::{first_ipv4, parse_mac};
// HTML's escapes are XML's: JUnit reports are escaped as `roce view` escapes its page.
use super::view::escape;

/// Runs the conformance checks against the RoCE peer PEER: crafted requests to QPs its agent
/// creates (the peer as responder) and crafted responses to work requests its agent posts (the
/// peer as requester), each judged against its IBA Vol. 1 / Annex A17 rule. Prints one row per
/// check (pass, fail or not applicable, with one line of evidence) and a summary. Exit status:
/// 0 no check failed, 1 a check failed, 2 the suite could not run (or stopped: the agent went
/// away). With --expect, 0 when every result is the expected one and 1 when one differs.
#[derive(Debug, Args)]
#[command(after_help = "\
The peer runs an agent: tools/conform-agent/conform-agent (libibverbs, e.g. rdma_rxe) or
`roce conform-agent` (our endpoint); it listens on TCP 7471. Traffic goes to PEER only, a few
packets per check; every QP and region a check creates on the agent is destroyed after it.

Examples (inside the SoftRoCE lab's namespace, an rxe guest at 10.77.0.11 running the agent):
  roce conform 10.77.0.11 --iface tap:roce0 --ip 10.77.0.2/24
  roce conform 10.77.0.11 --iface tap:roce0 --ip 10.77.0.2/24 --only '^resp\\.dup' --json
  roce conform 10.77.0.11 --iface tap:roce0 --ip 10.77.0.2/24 --junit conform.xml \\
      --pcap-out conform.pcapng      # packet comments name each frame's check
  roce conform --list                # the checks, their rules and titles
  roce conform --in-memory           # the suite against our own endpoint, in this process")]
pub struct ConformArgs {
    /// The peer's RoCE address (and its agent's, unless --agent says otherwise).
    #[arg(required_unless_present_any = ["list", "in_memory"])]
    pub peer: Option<IpAddr>,
    /// The tester's device: tap:NAME (created if absent) or xdp:IFNAME.
    #[arg(
        long = "iface",
        value_name = "BACKEND",
        required_unless_present_any = ["list", "in_memory"]
    )]
    pub iface: Option<Backend>,
    /// The tester's address and subnet (PEER must be on it).
    #[arg(
        long = "ip",
        value_name = "ADDR/PREFIX",
        required_unless_present_any = ["list", "in_memory"]
    )]
    pub ip: Option<IpCidr>,
    /// Runs the suite against our own endpoint in this process, over the in-memory link in
    /// virtual time (DCQCN on): no device, no root, a second or so. What the checks do and
    /// what a conforming peer answers.
    #[arg(long, conflicts_with_all = ["peer", "iface", "ip", "agent"])]
    pub in_memory: bool,
    /// The agent's address (default PEER:7471).
    #[arg(long, value_name = "HOST:PORT")]
    pub agent: Option<String>,
    /// Runs only the checks whose id matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub only: Option<String>,
    /// Lists the checks (id, rule, title) and exits.
    #[arg(long)]
    pub list: bool,
    /// Prints one JSON object instead of the table (progress goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Writes a JUnit XML report (one test case per check) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Writes every frame the suite sent or kept to a pcapng file, each with a packet
    /// comment naming its check.
    #[arg(long, value_name = "FILE")]
    pub pcap_out: Option<PathBuf>,
    /// Compares each result with an expected-results file (lines `ID RESULT  # why`); the
    /// exit status then says whether anything changed.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// The tester's MAC (default: the AF_XDP interface's; behind a TAP 02:00 followed by the
    /// IPv4 address).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub mac: Option<[u8; 6]>,
    /// The longest wait for a response a check expects, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub response_ms: u64,
    /// How long the peer must stay silent where a check expects nothing, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    pub quiet_ms: u64,
}

pub fn run_cmd(args: ConformArgs) -> anyhow::Result<ExitCode> {
    let checks = select(args.only.as_deref())?;
    if args.list {
        list(&checks, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let expected = args.expect.as_deref().map(read_expected).transpose()?;
    if args.in_memory {
        let mut config = VirtualConfig::new();
        config.dcqcn = Some(Preset::Paper.params(10e9));
        let mut peer = VirtualPeer::new(config);
        let peer_ip = peer.station().peer();
        let header = format!("our endpoint in memory ({peer_ip}), virtual time");
        return match run_with(&args, &checks, &mut peer, Timing::default(), &header) {
            Ok(report) => finish(&args, &checks, peer_ip, &report, expected.as_ref()),
            Err(e) => {
                eprintln!("roce: conform: {}", super::error_line(&e));
                Ok(ExitCode::from(2))
            }
        };
    }
    let (Some(peer_ip), Some(iface), Some(ip)) = (args.peer, &args.iface, args.ip) else {
        bail!("PEER, --iface and --ip are required");
    };
    match run_suite(&args, &checks, peer_ip, iface, ip) {
        Ok(report) => finish(&args, &checks, peer_ip, &report, expected.as_ref()),
        Err(e) => {
            eprintln!("roce: conform: {}", super::error_line(&e));
            Ok(ExitCode::from(2))
        }
    }
}

fn select(only: Option<&str>) -> anyhow::Result<Vec<Check>> {
    let all = registry();
    let Some(pattern) = only else {
        return Ok(all);
    };
    let re = Regex::new(pattern).map_err(|e| {
        // The regex crate's message draws the pattern over several lines: keep its last.
        let why = e.to_string();
        let why = why
            .lines()
            .last()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_owned();
        anyhow::anyhow!("--only {pattern:?} is not a regular expression: {why}")
    })?;
    let picked: Vec<Check> = all.into_iter().filter(|c| re.is_match(c.id)).collect();
    if picked.is_empty() {
        bail!("--only {pattern:?} matches no check (see roce conform --list)");
    }
    Ok(picked)
}

fn list(checks: &[Check], json: bool) -> anyhow::Result<()> {
    if json {
        let v: Vec<_> = checks
            .iter()
            .map(|c| json!({"id": c.id, "rule": c.rule, "title": c.title}))
            .collect();
        return crate::outln!("{}", serde_json::Value::Array(v));
    }
    for c in checks {
        crate::outln!("{:<36} {:<26} {}", c.id, c.rule, c.title)?;
    }
    Ok(())
}

fn agent_addr(args: &ConformArgs, peer: IpAddr) -> anyhow::Result<SocketAddr> {
    match &args.agent {
        None => Ok(SocketAddr::new(peer, DEFAULT_PORT)),
        Some(a) => a
            .to_socket_addrs()
            .with_context(|| format!("--agent {a:?} is not HOST:PORT"))?
            .next()
            .with_context(|| format!("--agent {a:?} resolves to no address")),
    }
}

fn run_suite(
    args: &ConformArgs,
    checks: &[Check],
    peer_ip: IpAddr,
    iface: &Backend,
    ip: IpCidr,
) -> anyhow::Result<Report> {
    if matches!(iface, Backend::Pcap(_)) {
        bail!("--iface must be tap:NAME or xdp:IFNAME: the suite talks to a live peer");
    }
    if !ip.contains(peer_ip) {
        bail!("{peer_ip} is not on {ip}: the tester reaches only peers on its own link");
    }
    let agent = agent_addr(args, peer_ip)?;
    let device = iface.open(None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mac = args
        .mac
        .or(device.capabilities().mac)
        .unwrap_or_else(|| Backend::host_mac(first_ipv4(&[ip])));
    let station = Station::new(mac, ip, peer_ip);
    let device_name = iface.to_string();
    let mut peer = DevicePeer::connect(device, station, agent, Duration::from_secs(10))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let (Some(ifname), IpAddr::V4(v4)) = (iface.kernel_neighbours(), peer_ip)
        && let Some(peer_mac) = kernel_neighbour(ifname, v4)
    {
        peer.station_mut().add_peer_mac(peer_mac);
    }
    let timing = Timing {
        response: Duration::from_millis(args.response_ms),
        quiet: Duration::from_millis(args.quiet_ms),
        settle: Duration::from_millis(args.quiet_ms / 3),
    };
    let header = format!(
        "{peer_ip} (agent {agent}) from {} on {device_name}",
        ip.addr()
    );
    run_with(args, checks, &mut peer, timing, &header)
}

/// Runs `checks` against `peer`, printing a row per check as it ends (or, with --json, a
/// progress line on stderr), and writing the capture.
fn run_with(
    args: &ConformArgs,
    checks: &[Check],
    peer: &mut dyn Peer,
    timing: Timing,
    header: &str,
) -> anyhow::Result<Report> {
    let mut sink: Box<dyn FrameSink> = match &args.pcap_out {
        Some(path) => Box::new(PcapngSink::create(path)?),
        None => Box::new(roce::conform::NoCapture),
    };
    let json = args.json;
    let total = checks.len();
    let mut done = 0;
    if !json {
        crate::outln!("roce conform: {total} checks against {header}")?;
        crate::outln!("{:<36} {:<26} {:<15} EVIDENCE", "CHECK", "RULE", "RESULT")?;
    }
    let mut progress = |r: &CheckResult| {
        done += 1;
        if json {
            eprintln!("[{done}/{total}] {} {}", r.id, r.outcome.name());
        } else {
            // A row that cannot be written does not stop the run: the summary's write
            // reports a failing stdout.
            let _ = crate::outln!(
                "{:<36} {:<26} {:<15} {}",
                r.id,
                r.rule,
                r.outcome.name(),
                r.evidence
            );
        }
    };
    let report = run(peer, checks, timing, sink.as_mut(), &mut progress)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    drop(sink);
    Ok(report)
}

fn finish(
    args: &ConformArgs,
    checks: &[Check],
    peer: IpAddr,
    report: &Report,
    expected: Option<&Vec<(String, String)>>,
) -> anyhow::Result<ExitCode> {
    let (pass, fail, na) = (
        report.count(Outcome::Pass),
        report.count(Outcome::Fail),
        report.count(Outcome::NotApplicable),
    );
    if args.json {
        crate::outln!("{}", to_json(peer, report))?;
    } else {
        crate::outln!(
            "roce conform: {pass} passed, {fail} failed, {na} not applicable ({} checks; agent {}, congestion control {})",
            checks.len(),
            report.agent,
            report.cc
        )?;
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, to_junit(peer, report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(why) = &report.aborted {
        eprintln!("roce: conform: the suite stopped: {why}");
        return Ok(ExitCode::from(2));
    }
    if let Some(expected) = expected {
        let diffs = differences(report, expected);
        for d in &diffs {
            eprintln!("roce: conform: changed: {d}");
        }
        eprintln!(
            "roce conform: {} results as expected, {} changed ({})",
            report.results.len() - diffs.len(),
            diffs.len(),
            args.expect
                .as_deref()
                .map_or(String::new(), |p| p.display().to_string())
        );
        return Ok(if diffs.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    Ok(if fail == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn to_json(peer: IpAddr, report: &Report) -> serde_json::Value {
    let checks: Vec<_> = report
        .results
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "rule": r.rule,
                "title": r.title,
                "result": r.outcome.name(),
                "evidence": r.evidence,
                "frames": r.frames,
                "elapsed_ms": r.elapsed.as_secs_f64() * 1e3,
            })
        })
        .collect();
    json!({
        "peer": peer.to_string(),
        "agent": report.agent,
        "cc": report.cc,
        "checks": checks,
        "summary": {
            "pass": report.count(Outcome::Pass),
            "fail": report.count(Outcome::Fail),
            "not_applicable": report.count(Outcome::NotApplicable),
        },
        "aborted": report.aborted,
    })
}

fn to_junit(peer: IpAddr, report: &Report) -> String {
    let total: f64 = report.results.iter().map(|r| r.elapsed.as_secs_f64()).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuite name=\"roce conform {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{total:.3}\">",
        escape(&peer.to_string()),
        report.results.len(),
        report.count(Outcome::Fail),
        report.count(Outcome::NotApplicable)
    );
    for r in &report.results {
        let class = r.id.split('.').next().unwrap_or("conform");
        let _ = write!(
            x,
            "  <testcase classname=\"roce.conform.{class}\" name=\"{}\" time=\"{:.3}\">",
            escape(r.id),
            r.elapsed.as_secs_f64()
        );
        let detail = escape(&format!("{} ({}): {}", r.title, r.rule, r.evidence));
        match r.outcome {
            Outcome::Pass => {
                let _ = write!(x, "<system-out>{detail}</system-out>");
            }
            Outcome::Fail => {
                let _ = write!(
                    x,
                    "<failure message=\"{}\">{detail}</failure>",
                    escape(&r.evidence)
                );
            }
            Outcome::NotApplicable => {
                let _ = write!(x, "<skipped message=\"{}\"/>", escape(&r.evidence));
            }
        }
        x.push_str("</testcase>\n");
    }
    x.push_str("</testsuite>\n");
    x
}

/// Reads `ID RESULT  # why` lines; blank lines and `#` comments are skipped.
fn read_expected(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [id, result] = words.as_slice() else {
            bail!(
                "{}:{}: expected `ID RESULT`, got {line:?}",
                path.display(),
                n + 1
            );
        };
        if !["pass", "fail", "not_applicable"].contains(result) {
            bail!(
                "{}:{}: {result:?} is not pass, fail or not_applicable",
                path.display(),
                n + 1
            );
        }
        out.push(((*id).to_owned(), (*result).to_owned()));
    }
    Ok(out)
}

fn differences(report: &Report, expected: &[(String, String)]) -> Vec<String> {
    let mut diffs = Vec::new();
    for r in &report.results {
        match expected.iter().find(|(id, _)| id == r.id) {
            Some((_, want)) if want == r.outcome.name() => {}
            Some((_, want)) => diffs.push(format!(
                "{}: expected {want}, got {} ({})",
                r.id,
                r.outcome.name(),
                r.evidence
            )),
            None => diffs.push(format!(
                "{}: no expected result recorded, got {} ({})",
                r.id,
                r.outcome.name(),
                r.evidence
            )),
        }
    }
    diffs
}

/// The `--pcap-out` capture: pcapng with a comment per frame, on the wall clock.
struct PcapngSink {
    writer: PcapngWriter<BufWriter<std::fs::File>>,
    origin_ns: u64,
    path: PathBuf,
    failed: bool,
}

impl PcapngSink {
    fn create(path: &Path) -> anyhow::Result<PcapngSink> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let writer = PcapngWriter::new(BufWriter::new(file), "roce conform")
            .with_context(|| format!("writing {}", path.display()))?;
        let origin_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(0));
        Ok(PcapngSink {
            writer,
            origin_ns,
            path: path.to_owned(),
            failed: false,
        })
    }
}

impl FrameSink for PcapngSink {
    fn record(&mut self, at: Instant, frame: &[u8], comment: &str) {
        if self.failed {
            return;
        }
        let t = Instant::from_nanos(self.origin_ns.saturating_add(at.as_nanos()));
        if let Err(e) = self.writer.write_frame(t, frame, Some(comment)) {
            eprintln!("roce: conform: writing {}: {e}", self.path.display());
            self.failed = true;
        }
    }
}

impl Drop for PcapngSink {
    fn drop(&mut self) {
        let _ = self.writer.flush();
    }
}
