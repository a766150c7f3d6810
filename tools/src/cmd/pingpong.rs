//! `roce pingpong [SERVER]`: ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong, either side.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use roce::endpoint::app::default_gid_index;
use roce::endpoint::app::pingpong::{self, PingpongOptions};
use roce::endpoint::oob::pingpong::Tool;
use roce::transport::Mtu;

use super::endpoint::EndpointArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Rc,
    Uc,
    Ud,
}

/// Ping-pong SENDs with an rdma-core pingpong tool (or another roce): the same options,
/// out-of-band exchange over TCP and summary lines as ibv_rc_pingpong (--transport uc / ud:
/// as ibv_uc_pingpong / ibv_ud_pingpong). Without SERVER, waits for a client.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 -n 100 10.77.0.11
      the client of `ibv_rc_pingpong -g 1 -n 100` running on the guest
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 --transport ud -s 512
      a server for `ibv_ud_pingpong -g 1 -s 512 10.77.0.1` (TCP reaches us through the
      namespace's kernel address; RoCE goes to our GID)
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 --ip fd00:77::2/64 -g 2 10.77.0.11
      RoCEv2 over IPv6 (the peer runs with -g 2)
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 --vlan 5 --pcp 3 --tclass 106 10.77.0.11
      every frame tagged VLAN 5 priority 3, RoCE with DSCP 26 and ECT(0); a PFC XOFF for
      priority 3 (or an 802.3x PAUSE) holds sending for its quanta at --line-gbps, XON
      resumes
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 --srq -q 4 -n 200 10.77.0.11
      the client of `ibv_srq_pingpong -g 1 -q 4 -n 200`: four RC QPs, one SRQ
  roce pingpong --iface tap:roce0 --ip 10.77.0.2/24 -t -n 100 10.77.0.11
      as `ibv_rc_pingpong -t`: the receive completions' clock-cycle gaps after the summary")]
pub struct PingpongArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Local GID index (default: 1, the IPv4-mapped GID, if there is an IPv4 address).
    #[arg(short = 'g', long = "gid-idx", value_name = "GIDX")]
    pub gid_index: Option<usize>,
    /// Message size (default 4096; UD 1024).
    #[arg(short = 's', long)]
    pub size: Option<u32>,
    /// Round trips (default 1000).
    #[arg(short = 'n', long)]
    pub iters: Option<u32>,
    /// Receives kept posted (default 500).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Path MTU of RC/UC: 256, 512, 1024, 2048 or 4096 (default 1024).
    #[arg(short = 'm', long, value_parser = parse_mtu)]
    pub mtu: Option<Mtu>,
    /// Transport service.
    #[arg(long, value_enum, default_value_t = TransportArg::Rc)]
    pub transport: TransportArg,
    /// Validate the received buffer, as the tools' -c/--chk: the client sends a 0 at the
    /// start of every 4096-byte page, the server checks it in the last message received.
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
    /// ibv_srq_pingpong: several RC QPs whose receives all come from one shared receive
    /// queue, and its exchange (256 address messages each way).
    #[arg(long)]
    pub srq: bool,
    /// QPs of --srq (ibv_srq_pingpong's -q; default 16, below 256, at most -r).
    #[arg(short = 'q', long = "num-qp", value_name = "N", requires = "srq")]
    pub num_qp: Option<u32>,
    /// Wait for completions asleep, as the tools' -e waits on a completion channel. Our
    /// waits always sleep on the device until a frame or a timer is due (unless
    /// --busy-poll); nothing on the wire differs.
    #[arg(short = 'e', long = "events", conflicts_with = "busy_poll")]
    pub events: bool,
    /// Service level 0-15 (the tools' -l). Accepted and checked, with nothing on the wire:
    /// RoCEv2 frames have no LRH to carry an SL, and rdma_rxe ignores the address
    /// handle's SL too.
    #[arg(short = 'l', long = "sl", value_name = "SL",
          value_parser = clap::value_parser!(u8).range(0..=15))]
    pub sl: Option<u8>,
    /// Completion timestamps, as ibv_rc_pingpong's -t/--ts (RC only; the peer need not
    /// give it): after the summary, the largest, smallest and mean time between successive
    /// receive completions, in cycles of our device clock (1 GHz: nanoseconds).
    #[arg(short = 't', long = "ts")]
    pub ts: bool,
}

/// ibv_srq_pingpong's default `-q`.
const SRQ_DEFAULT_QPS: u32 = 16;

pub fn parse_mtu(s: &str) -> Result<Mtu, String> {
    s.parse()
        .ok()
        .and_then(Mtu::from_bytes)
        .ok_or_else(|| format!("{s:?} is not an IB MTU (256, 512, 1024, 2048, 4096)"))
}

pub fn run(args: PingpongArgs) -> anyhow::Result<ExitCode> {
    let tool = match args.transport {
        TransportArg::Rc => Tool::RcPingpong,
        TransportArg::Uc => Tool::UcPingpong,
        TransportArg::Ud => Tool::UdPingpong,
    };
    // One message at a time: sleep as soon as nothing is left to do (see --spin).
    let mut rt = args.endpoint.open_spinning(Duration::ZERO)?;
    let mut opts = PingpongOptions::new(tool, args.endpoint.server.clone());
    opts.gid_index = args.gid_index.unwrap_or_else(|| default_gid_index(&rt));
    opts.size = args.size.unwrap_or(opts.size);
    opts.iters = args.iters.unwrap_or(opts.iters);
    opts.port = args.endpoint.port.unwrap_or(opts.port);
    opts.rx_depth = args.rx_depth.unwrap_or(opts.rx_depth);
    opts.mtu = args.mtu.unwrap_or(opts.mtu);
    opts.timeout = args.endpoint.timeout();
    opts.validate = args.chk;
    opts.timestamps = args.ts;
    if args.srq {
        if args.transport != TransportArg::Rc {
            anyhow::bail!("--srq is ibv_srq_pingpong, which runs RC QPs only");
        }
        opts.srq_qps = Some(args.num_qp.unwrap_or(SRQ_DEFAULT_QPS));
    }
    let stdout = std::io::stdout();
    let result = pingpong::run(&mut rt, &opts, &mut stdout.lock());
    let _ = stdout.lock().flush();
    args.endpoint.print_stats(&rt);
    // One line: the error's message already holds its cause.
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}
