//! `roce rping -s|-c -a ADDR`: librdmacm's rping, either side, connecting through rdma_cm.

use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;

use clap::Args;
use roce::endpoint::app::rping::{self, DEFAULT_PORT, RpingOptions};

use super::endpoint::DeviceArgs;

/// Ping with rping's protocol over an rdma_cm connection (RC): the client SENDs its buffer's
/// address, the server RDMA READs the ping data and RDMA WRITEs it back; the same options and
/// output as librdmacm's rping, so that the other side can be rping on rdma_rxe.
#[derive(Debug, Args)]
// rping's -V validates the ping data, as librdmacm's does: `roce rping` gives up the -V of
// --version (clap's debug assertions panicked on the clash; release builds listed both).
#[command(
    disable_version_flag = true,
    after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce rping -c -a 10.77.0.11 -C 10 -S 200 -V -v --iface tap:roce0 --ip 10.77.0.2/24
      the client of `rping -s -a 10.77.0.11` on the guest
  roce rping -s -a 0.0.0.0 --iface tap:roce0 --ip 10.77.0.2/24
      a server for `rping -c -a 10.77.0.2 -C 10` on the guest (any of our addresses)
  roce rping -c -a fd00:77::11 -C 5 --iface tap:roce0 --ip 10.77.0.2/24 --ip fd00:77::2/64
      over IPv6

A refused connection (nothing listens on the port) ends with one line naming the REJ's
reason; a silent peer with one line after the retries the REQ advertised."
)]
pub struct RpingArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Server side.
    #[arg(
        short = 's',
        conflicts_with = "client",
        required_unless_present = "client"
    )]
    pub server: bool,
    /// Client side.
    #[arg(short = 'c')]
    pub client: bool,
    /// The server's address (client); the address to listen on (server; 0.0.0.0 or :: for
    /// any of ours, the default).
    #[arg(short = 'a', value_name = "ADDR")]
    pub addr: Option<IpAddr>,
    /// Port.
    #[arg(short = 'p', value_name = "PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Ping count; 0 pings until interrupted.
    #[arg(short = 'C', value_name = "COUNT", default_value_t = 0)]
    pub count: u32,
    /// Ping data size, 26..=65535 bytes.
    #[arg(short = 'S', value_name = "SIZE", default_value_t = 64)]
    pub size: u32,
    /// Display ping data to stdout.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Validate ping data.
    #[arg(short = 'V')]
    pub validate: bool,
    /// Debug printfs (accepted for compatibility; RUST_LOG=debug shows the stack's own).
    #[arg(short = 'd')]
    pub debug: bool,
}

pub fn run(args: RpingArgs) -> anyhow::Result<ExitCode> {
    let addr = match (args.addr, args.server) {
        (Some(a), _) => a,
        (None, true) => IpAddr::from([0, 0, 0, 0]),
        (None, false) => anyhow::bail!("rping: a client needs the server's address (-a ADDR)"),
    };
    let mut rt = args.device.open()?;
    let mut opts = RpingOptions::new(args.server, addr);
    opts.port = args.port;
    opts.count = args.count;
    opts.size = args.size;
    opts.verbose = args.verbose;
    opts.validate = args.validate;
    opts.timeout = args.device.timeout();
    let stdout = std::io::stdout();
    let result = rping::run(&mut rt, &opts, &mut stdout.lock(), &mut std::io::stderr());
    let _ = stdout.lock().flush();
    args.device.print_stats(&rt);
    result.map_err(|e| anyhow::anyhow!("rping: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
