//! `roce conform-agent`: the conformance agent protocol served by our own endpoint, so that
//! `roce conform` judges our stack as it judges rdma_rxe behind tools/conform-agent.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roce::conform::proto::{DEFAULT_PORT, MAX_LINE};
use roce::conform::server::{AgentServer, Step};
use roce::endpoint::{Backend, IpCidr, Runtime};

use super::endpoint::{OpenEndpoint, open_runtime, parse_mac};

/// The most sessions served at once.
const MAX_SESSIONS: usize = 8;
/// How often the event loop looks at the TCP sockets.
const TICK: Duration = Duration::from_millis(1);

/// Serves the conformance agent protocol (see tools/conform-agent/PROTOCOL.md) with our
/// endpoint: `roce conform` connects on TCP (the host kernel's addresses, port 7471), creates
/// QPs and regions here and sends them RoCE traffic on --iface. Everything a session created is
/// destroyed when it ends. Runs until interrupted (or, with --once, until one session ends).
#[derive(Debug, Args)]
#[command(after_help = "\
Example (inside the SoftRoCE lab's namespace; roce1 a TAP on its bridge):
  roce conform-agent --iface tap:roce1 --ip 10.77.0.3/24 --dcqcn mlx5 --line-gbps 0.1 &
  roce conform 10.77.0.3 --iface tap:roce0 --ip 10.77.0.2/24 --agent 127.0.0.1:7471")]
pub struct ConformAgentArgs {
    /// The device: tap:NAME (created if absent) or xdp:IFNAME.
    #[arg(long = "iface", value_name = "BACKEND")]
    pub iface: Backend,
    /// The endpoint's address and subnet; repeat for IPv4 and IPv6.
    #[arg(long = "ip", value_name = "ADDR/PREFIX", required = true)]
    pub ip: Vec<IpCidr>,
    /// TCP port of the agent.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The endpoint's MAC (default: the AF_XDP interface's; behind a TAP 02:00 followed by
    /// the IPv4 address).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub mac: Option<[u8; 6]>,
    /// Records every frame the endpoint sends and receives.
    #[arg(long, value_name = "FILE")]
    pub pcap_out: Option<std::path::PathBuf>,
    /// DCQCN at this end (paper, mlx5 or off): CE marks answered with CNPs, CNPs obeyed.
    #[arg(long, value_name = "PRESET", default_value = "off")]
    pub dcqcn: String,
    /// The line rate DCQCN starts each QP at, in Gb/s.
    #[arg(long, value_name = "GBPS", default_value_t = 10.0)]
    pub line_gbps: f64,
    /// Exits when the first session ends.
    #[arg(long)]
    pub once: bool,
    /// Polls the device in a tight loop (one busy core): timers and DCQCN's pacing then keep
    /// their exact times, which sleeping in epoll rounds up to whole milliseconds.
    #[arg(long)]
    pub busy_poll: bool,
}

struct Session {
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    input: Vec<u8>,
    output: VecDeque<u8>,
    /// A poll_cq waiting for completions.
    waiting: bool,
    closing: bool,
    requests: u64,
}

pub fn run(args: ConformAgentArgs) -> anyhow::Result<ExitCode> {
    let mut rt = open_runtime(&OpenEndpoint {
        iface: &args.iface,
        ip: &args.ip,
        mac: args.mac,
        pcap_out: args.pcap_out.as_deref(),
        busy_poll: args.busy_poll,
        spin: roce::endpoint::DEFAULT_SPIN,
        dcqcn: &args.dcqcn,
        line_gbps: args.line_gbps,
        tclass: None,
        cnp_dscp: None,
        vlan: roce::io::vlan::TagPolicy::default(),
    })?;
    let listener = listen(args.port)?;
    let cc = if args.dcqcn == "off" { "none" } else { "dcqcn" };
    let mut agent = AgentServer::new("roce", cc);
    let addrs: Vec<String> = args.ip.iter().map(ToString::to_string).collect();
    // The agent's lines are a log: a stdout that went away must not stop it serving.
    let _ = crate::outln!(
        "roce conform-agent: listening on TCP port {}, RoCE at {} on {}, congestion control {cc}",
        args.port,
        addrs.join(" "),
        args.iface
    );
    let mut sessions: Vec<Session> = Vec::new();
    let mut next_id = 1;
    let mut served = 0u64;
    loop {
        let tick = if args.busy_poll { Duration::ZERO } else { TICK };
        rt.turn(Some(Instant::now() + tick))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        accept(&listener, &mut sessions, &mut next_id);
        for s in &mut sessions {
            serve(s, &mut agent, &mut rt);
        }
        let before = sessions.len();
        sessions.retain_mut(|s| {
            if s.closing && s.output.is_empty() {
                agent.close(s.id, rt.host_mut());
                let _ = crate::outln!(
                    "roce conform-agent: session {} from {} ended after {} requests",
                    s.id,
                    s.peer,
                    s.requests
                );
                false
            } else {
                true
            }
        });
        served += (before - sessions.len()) as u64;
        if args.once && served > 0 {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

fn listen(port: u16) -> anyhow::Result<TcpListener> {
    // Both families where the host has IPv6; IPv4 alone otherwise.
    let listener = TcpListener::bind((Ipv6Addr::UNSPECIFIED, port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .with_context(|| format!("listening on TCP port {port}"))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

fn accept(listener: &TcpListener, sessions: &mut Vec<Session>, next_id: &mut u64) {
    while let Ok((stream, peer)) = listener.accept() {
        if sessions.len() >= MAX_SESSIONS || stream.set_nonblocking(true).is_err() {
            let mut s = stream;
            let _ = s.write_all(b"ERR too many sessions\n");
            continue;
        }
        let _ = stream.set_nodelay(true);
        let _ = crate::outln!("roce conform-agent: session {next_id} from {peer}");
        sessions.push(Session {
            id: *next_id,
            stream,
            peer,
            input: Vec::new(),
            output: VecDeque::new(),
            waiting: false,
            closing: false,
            requests: 0,
        });
        *next_id += 1;
    }
}

/// Reads what the session sent, answers complete lines one at a time (a waiting poll first),
/// and writes what is ready.
fn serve(s: &mut Session, agent: &mut AgentServer, rt: &mut Runtime) {
    if !s.closing {
        read(s);
    }
    if s.waiting {
        let t = rt.now();
        match agent.resume(s.id, rt.host_mut(), t) {
            Some(reply) => {
                s.waiting = false;
                queue(s, &reply);
            }
            None => return flush(s),
        }
    }
    while !s.waiting && !s.closing {
        let Some(i) = s.input.iter().position(|&b| b == b'\n') else {
            if s.input.len() > MAX_LINE {
                queue(s, &format!("ERR line longer than {MAX_LINE} bytes"));
                s.closing = true;
            }
            break;
        };
        let line: Vec<u8> = s.input.drain(..=i).collect();
        let text = String::from_utf8_lossy(&line[..i]);
        let text = text.trim_end_matches('\r');
        s.requests += 1;
        let t = rt.now();
        match agent.request(s.id, rt.host_mut(), t, text) {
            Step::Reply(r) => queue(s, &r),
            Step::Wait(_) => s.waiting = true,
            Step::Close(r) => {
                queue(s, &r);
                s.closing = true;
            }
        }
    }
    flush(s);
}

fn read(s: &mut Session) {
    let mut buf = [0u8; 4096];
    loop {
        match s.stream.read(&mut buf) {
            Ok(0) => {
                s.closing = true;
                s.output.clear();
                return;
            }
            Ok(n) => s.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                s.closing = true;
                s.output.clear();
                return;
            }
        }
        if s.input.len() > 2 * MAX_LINE {
            return;
        }
    }
}

fn queue(s: &mut Session, line: &str) {
    s.output.extend(line.as_bytes());
    s.output.push_back(b'\n');
}

fn flush(s: &mut Session) {
    while !s.output.is_empty() {
        let (a, _) = s.output.as_slices();
        match s.stream.write(a) {
            Ok(0) => break,
            Ok(n) => {
                s.output.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                s.output.clear();
                s.closing = true;
                break;
            }
        }
    }
}
