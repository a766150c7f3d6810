//! `roce perf write|read|send|atomic [SERVER]`: perftest's ib_*_bw, either side.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use roce::endpoint::DEFAULT_SPIN;
use roce::endpoint::app::default_gid_index;
use roce::endpoint::app::perf::{
    self, AtomicType, PerfOptions, RateLimit, RateLimitType, RateUnits,
};
use roce::endpoint::oob::perftest::BwTest;
use roce::transport::{Mtu, QpType};

use super::endpoint::EndpointArgs;
use super::pingpong::parse_mtu;

/// `-A`, spelled as perftest spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AtomicArg {
    #[value(name = "CMP_AND_SWAP")]
    CmpAndSwap,
    #[value(name = "FETCH_AND_ADD")]
    FetchAndAdd,
}

/// `-c`, spelled as perftest spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConnectionArg {
    #[value(name = "RC")]
    Rc,
    #[value(name = "UC")]
    Uc,
    #[value(name = "UD")]
    Ud,
}

/// `--rate_units`, spelled as perftest spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RateUnitsArg {
    /// MiB per second.
    #[value(name = "M")]
    Mebibytes,
    /// Gb per second.
    #[value(name = "g")]
    Gigabits,
    /// Messages per second.
    #[value(name = "p")]
    Packets,
}

/// `--rate_limit_type`, spelled as perftest spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RateLimitTypeArg {
    #[value(name = "SW")]
    Sw,
    #[value(name = "HW")]
    Hw,
    #[value(name = "PP")]
    Pp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestArg {
    Write,
    Read,
    Send,
    Atomic,
}

/// A bandwidth test with perftest's ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw on
/// the other side (run there with `-x 1 -F`), or another roce: perftest's out-of-band
/// dialogue over TCP, RC QPs (one, or -q N), and its result table; with --lat the latency
/// test against ib_write_lat, ib_read_lat or ib_atomic_lat. Without SERVER, waits for a
/// client.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (inside the lab's namespace, the peer an rxe guest at 10.77.0.11):
  roce perf write --iface tap:roce0 --ip 10.77.0.2/24 -n 200 10.77.0.11
      the client of `ib_write_bw -x 1 -F -n 200` running on the guest
  roce perf read --iface tap:roce0 --ip 10.77.0.2/24 -s 8192
      a server for `ib_read_bw -x 1 -F -s 8192 10.77.0.1` (TCP reaches us through the
      namespace's kernel address)
  roce perf write --iface tap:roce0 --ip 10.77.0.2/24 -a -n 20 10.77.0.11
      every size from 2 bytes to 8 MiB, against `ib_write_bw -x 1 -F -a -n 20`
  roce perf write --lat --iface tap:roce0 --ip 10.77.0.2/24 -n 1000 10.77.0.11
      the client of `ib_write_lat -x 1 -F -n 1000`: t_min, t_max, t_typical, t_avg,
      t_stdev and the 99% and 99.9% percentiles
  roce perf send --lat -a --iface tap:roce0 --ip 10.77.0.2/24 -n 100 10.77.0.11
      against `ib_send_lat -x 1 -F -a -n 100`: a latency row per size, 2 bytes to 8 MiB
  roce perf read --lat -D 10 --iface tap:roce0 --ip 10.77.0.2/24 10.77.0.11
      against `ib_read_lat -x 1 -F -D 10`: the READs of the middle 6 s, t_avg and tps
  roce perf write -R --iface tap:roce0 --ip 10.77.0.2/24 -n 200 10.77.0.11
      the client of `ib_write_bw -R -x 1 -F -n 200`: connected through rdma_cm, no TCP
  roce perf send -R --iface tap:roce0 --ip 10.77.0.2/24
      a server for `ib_send_bw -R -x 1 -F 10.77.0.2` (the guest connects to our address)
  roce perf atomic --iface tap:roce0 --ip 10.77.0.2/24 -A CMP_AND_SWAP -D 5 --report_gbits 10.77.0.11
      compare-and-swap for 5 seconds, against `ib_atomic_bw -x 1 -F -A CMP_AND_SWAP -D 5`
  roce perf send --iface tap:roce0 --ip 10.77.0.2/24 -s 64 -n 100000 -Q 32 10.77.0.11
      64-byte SENDs, a completion every 32 (perftest's -Q; default 100), against
      `ib_send_bw -x 1 -F -s 64 -n 100000 -Q 32`
  roce perf send --iface tap:roce0 --ip 10.77.0.2/24 -c UC -n 10000 10.77.0.11
      SENDs over UC QPs, against `ib_send_bw -x 1 -F -c UC -n 10000`
  roce perf send --lat --iface tap:roce0 --ip 10.77.0.2/24 -c UD -s 1024 10.77.0.11
      UD SEND ping-pong of 1 KiB messages, against `ib_send_lat -x 1 -F -c UD -s 1024`
  roce perf send -R -c UD --iface tap:roce0 --ip 10.77.0.2/24 -a -n 100 10.77.0.11
      UD SENDs of 2 bytes up to the path MTU, the QP resolved through rdma_cm (SIDR),
      against `ib_send_bw -R -x 1 -F -c UD -a -n 100`
  roce perf send --iface tap:roce0 --ip 10.77.0.2/24 -c UC -s 4096 -n 1000 --rate_limit 4 --rate_units M --rate_limit_type SW --burst_size 8 10.77.0.11
      1000 UC SENDs of 4 KiB at 4 MiB/s (bursts of 8, 128 a second), which an emulated
      guest's `ib_send_bw -x 1 -F -c UC -s 4096 -n 1000` takes whole (at full rate it
      loses most of them)
  roce perf write --iface tap:roce0 --ip 10.77.0.2/24 -s 16384 -n 200 -l 4 10.77.0.11
      WRITEs posted in lists of 4, a completion each list, against
      `ib_write_bw -x 1 -F -s 16384 -n 200 -l 4` (-e likewise, as ib_send_bw -e)
  roce perf write --iface tap:roce0 --ip 10.77.0.2/24 -q 4 -b -n 100 10.77.0.11
      four QPs, both directions at once, against `ib_write_bw -x 1 -F -q 4 -b -n 100`
  roce perf write --iface xdp:eth1 --ip 10.0.0.5/24 --tclass 106 --vlan 100 --pcp 3 --line-gbps 100 10.0.0.7
      on the lossless class: DSCP 26 (ECT(0)) in VLAN 100 priority 3, as `ib_write_bw -x 1 -F
      --tclass 106` on a port of that VLAN; PFC frames pausing priority 3 stop it for their
      quanta at 100 Gb/s")]
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
    /// A completion every N requests (perftest's CQ moderation; default 100, or 1 above 8
    /// KiB but with -a; at most -t).
    #[arg(short = 'Q', long = "cq-mod", value_name = "N")]
    pub cq_mod: Option<u32>,
    /// Receives the send server keeps posted (default 512).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Path MTU (default: the largest the device carries; the peers agree on the smaller).
    #[arg(short = 'm', long, value_parser = parse_mtu)]
    pub mtu: Option<Mtu>,
    /// The latency test instead: ib_write_lat, ib_send_lat, ib_read_lat or ib_atomic_lat
    /// on the other side (default size 2, as perftest), printing perftest's latency table;
    /// with -a a row per size, with -D its duration row (iterations, t_avg, tps).
    #[arg(long = "lat")]
    pub lat: bool,
    /// SEND's receives through a shared receive queue (perftest's --use-srq; --use_srq
    /// too).
    #[arg(long = "use-srq", alias = "use_srq")]
    pub use_srq: bool,
    /// QPs, each running -n operations (perftest's -q; both sides give the same N).
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub num_qps: Option<u32>,
    /// Bidirectional: both sides run the test and print the sum of both (perftest's -b;
    /// both sides give it); with -a a summed row per size; with -D SEND prints each
    /// side's own row (its sends and receives in the window), as perftest does.
    #[arg(short = 'b', long = "bidirectional")]
    pub duplex: bool,
    /// Every size from 2 bytes to 8 MiB, a row each (perftest's -a; not with atomics).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Run for SECONDS instead of -n operations, counting what completes between margins
    /// of a quarter of it, in whole seconds (perftest's -D; not with -a).
    #[arg(short = 'D', long = "duration", value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub duration: Option<u32>,
    /// Bandwidth in Gb/s instead of MB/s (MB = 2^20 bytes).
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// The atomic operation of `atomic` (perftest's -A).
    #[arg(short = 'A', long = "atomic_type", value_enum, value_name = "TYPE")]
    pub atomic_type: Option<AtomicArg>,
    /// Service level 0-15 (perftest's -S). Accepted and checked, with nothing on the wire:
    /// RoCEv2 frames have no LRH to carry an SL, and rdma_rxe ignores the address
    /// handle's SL too (a NIC may map it to a VLAN priority).
    #[arg(short = 'S', long = "sl", value_name = "SL",
          value_parser = clap::value_parser!(u8).range(0..=15))]
    pub sl: Option<u8>,
    /// perftest's rdma_cm mode: the dialogue over an RC connection rdma_cm sets up on the
    /// port (18515; no TCP) and the test's QP connected through rdma_cm too, against
    /// `ib_*_bw -R` (also with -b and -q N, a connection per QP) or `ib_*_lat -R`
    /// (--lat). SERVER must be an IP address.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Type of service of the client's rdma_cm test connections (perftest's -T, with -R
    /// only; the dialogue's connection keeps 0): the REQ's traffic class, whose upper six
    /// bits become the DSCP of both sides' test QPs.
    #[arg(short = 'T', long = "tos", value_name = "TOS", requires = "rdma_cm")]
    pub tos: Option<u8>,
    /// Local ACK timeout of the test's QPs, 4.096 us x 2^TIMEOUT (perftest's -u; default
    /// 14, about 67 ms). With -R the QP takes rdma_cm's, 14.
    #[arg(short = 'u', long = "qp-timeout", value_name = "TIMEOUT",
          value_parser = clap::value_parser!(u8).range(0..=31))]
    pub qp_timeout: Option<u8>,
    /// The service of the test's QPs (perftest's -c): RC; UC for write and send (no READs or
    /// atomics, as perftest; not with -R); UD for send, one message per packet (the default
    /// size becomes the path MTU, a larger -s is refused, -a stops at the MTU, as perftest;
    /// with -R each QP is resolved by SIDR). UC and UD have no RNR NAK to hold a sender
    /// back: the send server posts up to 16000 receives unless -r says otherwise, as
    /// perftest.
    #[arg(
        short = 'c',
        long = "connection",
        value_enum,
        value_name = "TYPE",
        default_value = "RC"
    )]
    pub connection: ConnectionArg,
    /// perftest's software rate limiter: the requester of a bandwidth test sends at most
    /// RATE (in --rate_units), in bursts of --burst_size messages (default: -t) spaced
    /// evenly; a UC or UD sender is held to what its receiver takes. Without
    /// --rate_limit_type, perftest's HW default takes only an InfiniBand static rate
    /// (2.5, 5, 10, ... 300) and then falls back to SW on a RoCE port, saying so.
    #[arg(long = "rate_limit", value_name = "RATE")]
    pub rate_limit: Option<f64>,
    /// The units of --rate_limit: M (MiB/s), g (Gb/s, the default) or p (messages/s).
    #[arg(long = "rate_units", value_enum, value_name = "UNITS")]
    pub rate_units: Option<RateUnitsArg>,
    /// SW paces the posts (not the latency tests, atomics or -b send, as perftest); HW
    /// (a QP static rate) and PP (NIC packet pacing) are refused: a software endpoint on
    /// a RoCE port has neither.
    #[arg(long = "rate_limit_type", value_enum, value_name = "TYPE")]
    pub rate_limit_type: Option<RateLimitTypeArg>,
    /// Messages per burst of the rate limiter (default: the TX depth).
    #[arg(long = "burst_size", value_name = "N")]
    pub burst_size: Option<u32>,
    /// No peak bandwidth: 0.00 in its column (perftest's -N; it also measures none above
    /// 20,000 operations per QP, and neither does this).
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// Fail (exit 1) unless the average bandwidth reaches VALUE in the table's unit
    /// (perftest's -w; with -a, unless one size reaches it).
    #[arg(short = 'w', long = "limit_bw", value_name = "VALUE")]
    pub limit_bw: Option<f64>,
    /// Fail (exit 1) unless the message rate reaches VALUE Mpps (perftest's -y; its own
    /// check only runs with -w as well, this one always does).
    #[arg(short = 'y', long = "limit_msgrate", value_name = "VALUE")]
    pub limit_msgrate: Option<f64>,
    /// Accepted for perftest compatibility (no CPU frequency check is ever made).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Largest message to send inline, 0 to 912 (perftest's -I): accepted and disabled, as
    /// perftest disables it on a device it does not know (rdma_rxe, this one), saying so.
    #[arg(short = 'I', long = "inline_size", value_name = "SIZE")]
    pub inline_size: Option<u32>,
    /// Post requests in lists of N, a completion at the end of each (perftest's -l; the
    /// iterations a multiple of N, the CQ moderation N unless -Q divides it).
    #[arg(short = 'l', long = "post_list", value_name = "N")]
    pub post_list: Option<u32>,
    /// Wait for completions asleep, as perftest's -e waits on a completion channel: no
    /// spinning after traffic unless --spin asks for it; nothing on the wire differs. Not
    /// with -D, as perftest, nor with --busy-poll, which never sleeps (as `pingpong -e`).
    #[arg(short = 'e', long = "events", conflicts_with = "busy_poll")]
    pub events: bool,
}

pub fn run(args: PerfArgs) -> anyhow::Result<ExitCode> {
    let test = match args.test {
        TestArg::Write => BwTest::Write,
        TestArg::Read => BwTest::Read,
        TestArg::Send => BwTest::Send,
        TestArg::Atomic => BwTest::Atomic,
    };
    if args.atomic_type.is_some() && test != BwTest::Atomic {
        anyhow::bail!("-A/--atomic_type applies to the atomic test only");
    }
    let mut opts = PerfOptions::new(test, args.endpoint.server.clone());
    opts.latency = args.lat;
    opts.use_srq = args.use_srq;
    opts.num_qps = args.num_qps.unwrap_or(opts.num_qps);
    opts.duplex = args.duplex;
    opts.rdma_cm = args.rdma_cm;
    opts.tos = args.tos;
    opts.qp_timeout = args.qp_timeout.unwrap_or(opts.qp_timeout);
    opts.cq_mod = args.cq_mod;
    opts.set_connection(match args.connection {
        ConnectionArg::Rc => QpType::Rc,
        ConnectionArg::Uc => QpType::Uc,
        ConnectionArg::Ud => QpType::Ud,
    });
    if args.lat {
        // perftest's DEF_SIZE_LAT and one operation at a time.
        opts.size = 2;
        opts.tx_depth = 1;
    }
    opts.size = args.size.unwrap_or(opts.size);
    opts.size_given = args.size.is_some();
    opts.iters = args.iters.unwrap_or(opts.iters);
    opts.port = args.endpoint.port.unwrap_or(opts.port);
    opts.tx_depth = args.tx_depth.unwrap_or(opts.tx_depth);
    opts.rx_depth = args.rx_depth.unwrap_or(opts.rx_depth);
    opts.mtu = args.mtu;
    opts.timeout = args.endpoint.timeout();
    opts.all_sizes = args.all;
    opts.duration = args.duration.map(|s| Duration::from_secs(s.into()));
    opts.gbits = args.report_gbits;
    opts.no_peak = args.no_peak;
    opts.limit_bw = args.limit_bw;
    opts.limit_msgrate = args.limit_msgrate;
    opts.inline_size = args.inline_size;
    opts.post_list = args.post_list.unwrap_or(opts.post_list);
    opts.events = args.events;
    opts.rate_limit = RateLimit {
        rate: args.rate_limit,
        units: match args.rate_units {
            Some(RateUnitsArg::Mebibytes) => RateUnits::MebibytesPerSec,
            Some(RateUnitsArg::Gigabits) | None => RateUnits::GigabitsPerSec,
            Some(RateUnitsArg::Packets) => RateUnits::PacketsPerSec,
        },
        kind: match args.rate_limit_type {
            None => RateLimitType::Unnamed,
            Some(RateLimitTypeArg::Sw) => RateLimitType::Software,
            Some(RateLimitTypeArg::Hw) => RateLimitType::Hardware,
            Some(RateLimitTypeArg::Pp) => RateLimitType::PacketPacing,
        },
        burst: args.burst_size,
    };
    opts.atomic = match args.atomic_type {
        Some(AtomicArg::CmpAndSwap) => AtomicType::CmpAndSwap,
        Some(AtomicArg::FetchAndAdd) | None => AtomicType::FetchAndAdd,
    };
    // Before any device is opened.
    opts.check().map_err(|e| anyhow::anyhow!("{e}"))?;
    // A latency test sends one message at a time: it sleeps as soon as nothing is left to
    // do (see --spin).
    let mut rt = args.endpoint.open_spinning(if args.lat || args.events {
        Duration::ZERO
    } else {
        DEFAULT_SPIN
    })?;
    opts.gid_index = args.gid_index.unwrap_or_else(|| default_gid_index(&rt));
    let stdout = std::io::stdout();
    // The lines perftest writes to its standard error go to ours.
    let result = perf::run_to(
        &mut rt,
        &opts,
        &mut stdout.lock(),
        &mut std::io::stderr().lock(),
    );
    let _ = stdout.lock().flush();
    args.endpoint.print_stats(&rt);
    // One line: the error's message already holds its cause.
    result.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}
