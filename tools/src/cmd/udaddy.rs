//! `roce udaddy [-s SERVER]`: librdmacm's udaddy, either side, UD through rdma_cm (SIDR).

use std::process::ExitCode;

use clap::Args;
use roce::endpoint::app::udaddy::{self, DEFAULT_PORT};

use super::endpoint::DeviceArgs;
use super::ucmatose::{CmatestArgs, run_program};

/// UD through rdma_cm, as librdmacm's udaddy: the client resolves -c services at once
/// (SIDR_REQ, SIDR_REP in the UDP port space) and SENDs -C messages of -S bytes with
/// immediate data to each; the server answers with a UD QP per request and replies to the
/// QPN in the immediate data with as many. The same options and output lines, so that the
/// other side can be udaddy on rdma_rxe. Messages must fit the path MTU.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce udaddy -s 10.77.0.11 -c 4 --iface tap:roce0 --ip 10.77.0.2/24
      the client of `udaddy -c 4` on the guest: 4 services, 10 messages of 100 bytes
      each way on each
  roce udaddy -c 4 -C 20 -S 1000 --iface tap:roce0 --ip 10.77.0.2/24
      a server for `udaddy -s 10.77.0.2 -c 4 -C 20 -S 1000` on the guest
  roce udaddy -s 10.77.0.11 -t 104 --iface tap:roce0 --ip 10.77.0.2/24
      type of service 104: every UD message of both sides leaves with DSCP 26

A server that is not there answers nothing (or a SIDR_REP with a failure status): one line
after the SIDR_REQ's retries, or one naming the status.")]
pub struct UdaddyArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub test: CmatestArgs,
    /// Port in the UDP port space (udaddy's is fixed at 7174; its -p names the port space).
    #[arg(long = "port", value_name = "PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
}

pub fn run(args: UdaddyArgs) -> anyhow::Result<ExitCode> {
    let mut opts = udaddy::options(None);
    opts.port = args.port;
    run_program("udaddy", &args.device, &args.test, opts, udaddy::run)
}
