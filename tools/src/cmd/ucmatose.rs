//! `roce ucmatose [-s SERVER]`: librdmacm's cmatose, either side, several RC connections
//! at once through rdma_cm.

use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;

use clap::Args;
use roce::endpoint::Runtime;
use roce::endpoint::app::AppError;
use roce::endpoint::app::cmatose::{self, CmatestOptions, CmatestSummary, DEFAULT_PORT};

use super::endpoint::DeviceArgs;

/// Several RC connections at once through rdma_cm, as librdmacm's cmatose (ucmatose): the
/// client connects -c connections, the server SENDs -C messages of -S bytes on each, the
/// client SENDs as many back, the server disconnects them all. The same options, events
/// and output lines, so that the other side can be ucmatose on rdma_rxe.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce ucmatose -s 10.77.0.11 -c 4 --iface tap:roce0 --ip 10.77.0.2/24
      the client of `ucmatose -c 4` on the guest: 4 connections, 10 messages of 100
      bytes each way on each
  roce ucmatose -c 4 -C 20 -S 1000 --iface tap:roce0 --ip 10.77.0.2/24
      a server for `ucmatose -s 10.77.0.2 -c 4 -C 20 -S 1000` on the guest
  roce ucmatose -s 10.77.0.11 -t 104 --iface tap:roce0 --ip 10.77.0.2/24
      a client asking for type of service 104 (DSCP 26): the REQ carries it, and both
      sides send their data with it

A refused connection (nothing listens on the port) ends with one line naming the REJ's
reason; a silent peer with one line after the retries the REQ advertised.")]
pub struct UcmatoseArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub test: CmatestArgs,
    /// Port (TCP port space).
    #[arg(short = 'p', value_name = "PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
}

/// The flags cmatose and udaddy share.
#[derive(Debug, Args)]
pub struct CmatestArgs {
    /// The server's address; without it, be the server.
    #[arg(short = 's', value_name = "SERVER")]
    pub server: Option<IpAddr>,
    /// The address a server listens on (default: any of ours).
    #[arg(short = 'b', value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Connections (udaddy: services resolved), 1..=1024.
    #[arg(short = 'c', value_name = "CONNECTIONS", default_value_t = 1)]
    pub connections: u32,
    /// Messages each way on each connection.
    #[arg(short = 'C', value_name = "COUNT", default_value_t = 10)]
    pub count: u32,
    /// Bytes per message (0: no messages; udaddy: at most the path MTU).
    #[arg(short = 'S', value_name = "SIZE", default_value_t = 100)]
    pub size: u32,
    /// The client's type of service (rdma_cm's TOS option, as their -t), whose upper six bits
    /// become a DSCP. ucmatose: the REQ's traffic class, taken by both QPs' paths. udaddy:
    /// the traffic class of the client's address handles; the server answers each service
    /// with the class its first message came with (`ibv_create_ah_from_wc`).
    #[arg(short = 't', value_name = "TOS")]
    pub tos: Option<u8>,
}

/// Runs `program` (`name` in its error line) with `args` over `port`: options checked before
/// any device is opened, its lines on stdout, the counters after.
pub fn run_program(
    name: &str,
    device: &DeviceArgs,
    args: &CmatestArgs,
    mut opts: CmatestOptions,
    program: fn(&mut Runtime, &CmatestOptions, &mut dyn Write) -> Result<CmatestSummary, AppError>,
) -> anyhow::Result<ExitCode> {
    opts.server = args.server;
    opts.bind = args.bind;
    opts.connections = args.connections;
    opts.count = args.count;
    opts.size = args.size;
    opts.tos = args.tos;
    opts.timeout = device.timeout();
    opts.check().map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let mut rt = device.open()?;
    let stdout = std::io::stdout();
    let result = program(&mut rt, &opts, &mut stdout.lock());
    let _ = stdout.lock().flush();
    device.print_stats(&rt);
    result.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: UcmatoseArgs) -> anyhow::Result<ExitCode> {
    let mut opts = CmatestOptions::new(None);
    opts.port = args.port;
    run_program("ucmatose", &args.device, &args.test, opts, cmatose::run)
}
