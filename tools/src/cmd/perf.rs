//! `roce perf write|read|send|atomic [SERVER]`: perftest's ib_*_bw, either side.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use roce::endpoint::app::default_gid_index;
use roce::endpoint::app::perf::{self, PerfOptions};
use roce::endpoint::oob::perftest::BwTest;
use roce::transport::Mtu;

use super::endpoint::EndpointArgs;
use super::pingpong::parse_mtu;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestArg {
    Write,
    Read,
    Send,
    Atomic,
}

/// A bandwidth test with perftest's ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw on
/// the other side (run there with `-x 1 -F`), or another roce: perftest's out-of-band
/// dialogue over TCP, one RC QP, and its result table. Without SERVER, waits for a client.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce perf write --iface tap:roce0 --ip 10.77.0.2/24 -n 200 10.77.0.11
      the client of `ib_write_bw -x 1 -F -n 200` running on the guest
  roce perf read --iface tap:roce0 --ip 10.77.0.2/24 -s 8192
      a server for `ib_read_bw -x 1 -F -s 8192 10.77.0.1` (TCP reaches us through the
      namespace's kernel address)")]
pub struct PerfArgs {
    /// The operation measured.
    #[arg(value_enum)]
    pub test: TestArg,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Local GID index, perftest's -x (default: 1, the IPv4-mapped GID).
    #[arg(short = 'x', long = "gid-index", value_name = "GIDX")]
    pub gid_index: Option<usize>,
    /// Message size (default 65536; atomics always 8).
    #[arg(short = 's', long)]
    pub size: Option<u32>,
    /// Operations (default 5000 for write, 1000 otherwise).
    #[arg(short = 'n', long)]
    pub iters: Option<u32>,
    /// Operations outstanding (default 128).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receives the send server keeps posted (default 512).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Path MTU (default: the largest the device carries; the peers agree on the smaller).
    #[arg(short = 'm', long, value_parser = parse_mtu)]
    pub mtu: Option<Mtu>,
    /// Accepted for perftest compatibility (no CPU frequency check is ever made).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
}

pub fn run(args: PerfArgs) -> anyhow::Result<ExitCode> {
    let test = match args.test {
        TestArg::Write => BwTest::Write,
        TestArg::Read => BwTest::Read,
        TestArg::Send => BwTest::Send,
        TestArg::Atomic => BwTest::Atomic,
    };
    let mut rt = args.endpoint.open()?;
    let mut opts = PerfOptions::new(test, args.endpoint.server.clone());
    opts.gid_index = args.gid_index.unwrap_or_else(|| default_gid_index(&rt));
    opts.size = args.size.unwrap_or(opts.size);
    opts.iters = args.iters.unwrap_or(opts.iters);
    opts.port = args.endpoint.port.unwrap_or(opts.port);
    opts.tx_depth = args.tx_depth.unwrap_or(opts.tx_depth);
    opts.rx_depth = args.rx_depth.unwrap_or(opts.rx_depth);
    opts.mtu = args.mtu;
    opts.timeout = args.endpoint.timeout();
    let stdout = std::io::stdout();
    let result = perf::run(&mut rt, &opts, &mut stdout.lock());
    let _ = stdout.lock().flush();
    args.endpoint.print_stats(&rt);
    // One line: the error's message already holds its cause.
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}
