//! `roce lab-verbs OP [SERVER]`: the lab's lab_verbs program (tests/lab/lab_verbs.c), either
//! side: SEND with Invalidate of a memory window, ATOMIC WRITE and FLUSH.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use roce::endpoint::app::default_gid_index;
use roce::endpoint::app::lab_verbs::{self, LabOp, LabVerbsOptions};
use roce::transport::Mtu;

use super::endpoint::DeviceArgs;
use super::pingpong::parse_mtu;

/// Run one of lab_verbs' exchanges (the lab's own RC verbs program, tests/lab/lab_verbs.c)
/// with lab_verbs or another roce on the other side: the same operations, out-of-band
/// exchange (TCP, port 18600) and checks. OP is send_inv (SEND with Invalidate of a type 2
/// memory window's R_Key, then a WRITE through it that must be refused), atomic_write
/// (ATOMIC WRITE of 8 bytes each, checked at the server), flush (WRITE then FLUSH with global
/// visibility, data checked at the server) or flush_denied (a FLUSH to a region without
/// flush rights: a remote access error). Without SERVER, waits for a client.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest of the trixie lab guest:
ROCE_LAB_GUEST=trixie tools/softroce-lab peer ...):
  roce lab-verbs atomic_write 10.77.0.11 --iface tap:roce0 --ip 10.77.0.2/24 -n 8
      the client of `lab_verbs server atomic_write -n 8` on the guest
  roce lab-verbs send_inv --iface tap:roce0 --ip 10.77.0.2/24 -s 2000
      a server for `lab_verbs client send_inv 10.77.0.1 -s 2000` on the guest (TCP
      reaches us through the namespace's kernel address; RoCE goes to our GID)
  roce lab-verbs flush 10.77.0.11 --rxe-flush-icrc --iface tap:roce0 --ip 10.77.0.2/24
      FLUSH against rdma_rxe 6.2-6.12, whose FLUSH ICRC differs from the spec's

Exit status 0 when every operation completed as the exchange expects and every check
passed; otherwise one line says which step failed.")]
pub struct LabVerbsArgs {
    /// The operation: send_inv, atomic_write, flush or flush_denied.
    #[arg(value_name = "OP")]
    pub op: LabOp,
    /// The server to connect to (TCP); without it, be the server.
    pub server: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = roce::endpoint::oob::lab_verbs::DEFAULT_PORT)]
    pub port: u16,
    /// Operations: ATOMIC WRITEs, or WRITE + FLUSH pairs (send_inv and flush_denied make one),
    /// 1..=1000.
    #[arg(short = 'n', long, default_value_t = 5)]
    pub iters: u32,
    /// Bytes of each WRITE, SEND and FLUSH, 1..=1048576 (atomic_write: 8 each).
    #[arg(short = 's', long, default_value_t = 64)]
    pub size: u32,
    /// Local GID index (default: 1, the IPv4-mapped GID, if there is an IPv4 address).
    #[arg(short = 'g', long = "gid-idx", value_name = "GIDX")]
    pub gid_index: Option<usize>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long, value_parser = parse_mtu, default_value = "1024")]
    pub mtu: Mtu,
    /// Send RC FLUSH with the ICRC rdma_rxe (Linux 6.2 to at least 6.12) computes, and
    /// accept FLUSH frames carrying it: rxe's opcode table gives FLUSH no payload offset, so
    /// its ICRC hashes BTH, FETH and RETH twice, and it drops a FLUSH with the spec's ICRC
    /// (ours otherwise drops its FLUSH, counted as bad ICRC in --stats).
    #[arg(long)]
    pub rxe_flush_icrc: bool,
}

pub fn run(args: LabVerbsArgs) -> anyhow::Result<ExitCode> {
    let mut rt = args.device.open()?;
    rt.host_mut().set_rxe_flush_icrc(args.rxe_flush_icrc);
    let mut opts = LabVerbsOptions::new(args.op, args.server.clone());
    opts.port = args.port;
    opts.iters = args.iters;
    opts.size = args.size;
    opts.mtu = args.mtu;
    opts.gid_index = args.gid_index.unwrap_or_else(|| default_gid_index(&rt));
    opts.timeout = args.device.timeout();
    let stdout = std::io::stdout();
    let result = lab_verbs::run(&mut rt, &opts, &mut stdout.lock());
    let _ = stdout.lock().flush();
    args.device.print_stats(&rt);
    result.map_err(|e| anyhow::anyhow!("lab-verbs {}: {e}", args.op))?;
    Ok(ExitCode::SUCCESS)
}
