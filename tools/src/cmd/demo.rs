//! `roce demo`: two RoCEv2 hosts in one process over a faulty, congested in-memory link, RC
//! traffic verified byte for byte, a summary of what happened and a capture.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roce::cc::Preset;
use roce::endpoint::dcqcn::DcqcnReport;
use roce::scenario::{self, CaptureWindow, DemoConfig, Op, Report, Side};
use roce::transport::{Mtu, WcStatus};
use serde_json::json;

/// Run two RoCEv2 hosts in one process and move verified RC traffic between them.
///
/// Host A (192.168.77.1) and host B (192.168.77.2) are joined by an in-memory link in virtual
/// time: 100 Gb/s NICs, 2 us each way, seeded loss and reordering in both directions, and a
/// 50 Gb/s bottleneck queue in front of B that marks ECN CE above 100 KB, answered by DCQCN
/// (B sends CNPs, A lowers its rate). Each host frames its packets itself (Ethernet, IPv4,
/// UDP 4791, ICRC) and finds the other by ARP. On one RC connection
/// A runs RDMA WRITEs and SENDs to B, RDMA READs from B (random lengths up to 256 KiB) and
/// FETCH_ADD / COMPARE_SWAP atomics. Every destination is poisoned before its request and
/// compared with the source after it completes; any difference is an error (exit 1). The run
/// is deterministic: the same flags give the same summary and the same capture.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce demo                          256 MB, 1% loss, 1% reordering, writes demo.pcap
  roce demo --loss 0 --reorder 0     a clean link: no retransmissions
  roce demo --dcqcn off              no congestion control: the queue stays full
  roce demo --size 32 --loss 5 --mtu 1024 --seed 7
  roce demo --json --no-pcap | jq .goodput_gbps
  roce decode demo.pcap | less       read the capture field by field
  tshark -r demo.pcap -Y infiniband  or with Wireshark's dissector")]
pub struct DemoArgs {
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Payload to move with WRITE, SEND and READ, in MB (10^6 bytes).
    #[arg(long, value_name = "MB", default_value_t = 256.0)]
    pub size: f64,
    /// Frames lost in each direction, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub loss: f64,
    /// Frames held back (overtaken by later ones) in each direction, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub reorder: f64,
    /// Seed of the workload and the link's faults.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub mtu: u32,
    /// Rate of the bottleneck in front of host B, in Gb/s (0: no bottleneck, no CE marking).
    #[arg(long, value_name = "GBPS", default_value_t = 50.0)]
    pub bottleneck: f64,
    /// DCQCN parameters: paper (SIGCOMM 2015), mlx5 (NVIDIA firmware defaults) or off.
    #[arg(long, value_name = "PRESET", default_value = "paper")]
    pub dcqcn: String,
    /// Where to write the capture of host B's side of the wire (after the bottleneck).
    #[arg(long, value_name = "FILE", default_value = "demo.pcap")]
    pub pcap: PathBuf,
    /// Write no capture.
    #[arg(long, conflicts_with = "pcap")]
    pub no_pcap: bool,
    /// Frames kept from the start of the run in the capture.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub capture_first: u64,
    /// Frames kept from the end of the run in the capture.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub capture_last: usize,
}

fn percent(name: &str, pct: f64) -> anyhow::Result<f64> {
    anyhow::ensure!(
        (0.0..=100.0).contains(&pct),
        "--{name} must be between 0 and 100, got {pct}"
    );
    Ok(pct / 100.0)
}

impl DemoArgs {
    fn config(&self) -> anyhow::Result<DemoConfig> {
        let mut c = DemoConfig::default().with_seed(self.seed);
        anyhow::ensure!(
            self.size > 0.0 && self.size <= 1e6,
            "--size must be a positive number of MB up to 1000000, got {}",
            self.size
        );
        c.traffic.total_bytes = (self.size * 1e6) as u64;
        c.net.loss = percent("loss", self.loss)?;
        c.net.reorder = percent("reorder", self.reorder)?;
        c.mtu = Mtu::from_bytes(self.mtu).with_context(|| {
            format!(
                "--mtu must be 256, 512, 1024, 2048 or 4096, got {}",
                self.mtu
            )
        })?;
        anyhow::ensure!(
            self.bottleneck >= 0.0 && self.bottleneck.is_finite(),
            "--bottleneck must be a rate in Gb/s, got {}",
            self.bottleneck
        );
        match (&mut c.net.bottleneck, self.bottleneck) {
            (b, 0.0) => *b = None,
            (Some(b), gbps) => b.gbps = gbps,
            (None, _) => {}
        }
        c.dcqcn = match self.dcqcn.as_str() {
            "off" => None,
            name => Some(
                Preset::from_name(name)
                    .with_context(|| format!("--dcqcn must be paper, mlx5 or off, got {name}"))?,
            ),
        };
        c.capture = CaptureWindow {
            first: self.capture_first,
            last: self.capture_last,
        };
        // Loss makes a run longer in virtual time; the limit only catches a stuck one.
        c.time_limit = Duration::from_secs(600);
        Ok(c)
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let capture = if args.no_pcap {
        None
    } else {
        let file = File::create(&args.pcap)
            .with_context(|| format!("{}: cannot create", args.pcap.display()))?;
        Some(BufWriter::new(file))
    };
    let started = Instant::now();
    let (report, _) = scenario::run(&config, capture).map_err(|e| {
        // A connection that ran out of retries did so on the link the flags asked for: say which.
        if matches!(
            &e,
            scenario::DemoError::Traffic(scenario::TrafficError::Completion {
                status: WcStatus::RetryExcErr,
                ..
            })
        ) {
            anyhow::anyhow!(
                "{e} (the link lost or held up a packet through every retry: --loss {}%, \
                 --reorder {}%, --bottleneck {} Gb/s)",
                args.loss,
                args.reorder,
                args.bottleneck
            )
        } else {
            e.into()
        }
    })?;
    let wall = started.elapsed();
    let pcap = (!args.no_pcap).then_some(&args.pcap);
    if args.json {
        crate::outln!("{}", to_json(&report, wall, pcap))?;
    } else {
        crate::out!("{}", summary(&report, wall, pcap))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn summary(r: &Report, wall: Duration, pcap: Option<&PathBuf>) -> String {
    let c = &r.config;
    let (a, b) = (&r.a, &r.b);
    let mut s = String::new();
    let mut line = |text: String| {
        s.push_str(&text);
        s.push('\n');
    };
    line(format!(
        "roce demo: host A {} -> host B {}, one RC connection, path MTU {}, seed {}",
        scenario::IP_A,
        scenario::IP_B,
        c.mtu.bytes(),
        c.traffic.seed
    ));
    let bottleneck = match c.net.bottleneck {
        Some(bn) => format!(
            "; bottleneck {} Gb/s before B marks CE above {} KB",
            bn.gbps,
            bn.ce_threshold_bytes / 1000
        ),
        None => String::new(),
    };
    line(format!(
        "link: {} Gb/s, {} us each way, loss {}%, reordering {}% each direction{bottleneck}",
        c.net.line_gbps,
        c.net.delay.as_micros(),
        c.net.loss * 100.0,
        c.net.reorder * 100.0
    ));
    line(String::new());
    line("traffic (A requests, B responds):".into());
    for op in Op::ALL {
        let bytes = match op {
            Op::FetchAdd | Op::CompareSwap => "  8-byte words".to_owned(),
            _ => format!("{:>10.1} MB", mb(r.ops.bytes(op))),
        };
        line(format!(
            "  {:<13} {:>7} messages {bytes}",
            op.name(),
            r.ops.messages(op)
        ));
    }
    line(format!(
        "  {:<13} {:>7} messages {:>10.1} MB   every byte verified: OK",
        "total",
        r.ops.total_messages(),
        mb(r.ops.total_bytes())
    ));
    line(String::new());
    let (ab, ba) = (&r.link_a_to_b, &r.link_b_to_a);
    line(format!(
        "packets:     A sent {}, B sent {}; the link dropped {} and {} (A->B, B->A), held back {} and {}",
        a.packets_sent, b.packets_sent, ab.dropped, ba.dropped, ab.reordered, ba.reordered
    ));
    line(format!(
        "recovery:    {} packets retransmitted ({:.1}% of A's), {} go-back-N restarts, {} tail probes, {} fast retransmit timeouts, {} local ACK timeouts",
        r.retransmitted_packets(),
        pct(a.retransmitted_packets, a.packets_sent),
        a.rewinds,
        a.probes,
        a.fast_retransmits,
        a.local_ack_timeouts
    ));
    line(format!(
        "NAKs:        PSN_SEQUENCE_ERROR {} by B ({} received by A); RNR {} by B ({} received); other {}; implied NAKs {}; duplicate requests at B {}",
        b.seq_naks_sent,
        a.naks_received,
        b.rnr_naks_sent,
        a.rnr_naks_received,
        b.error_naks_sent,
        a.implied_naks,
        b.duplicate_requests
    ));
    line(format!(
        "congestion:  the bottleneck marked {} frames CE ({:.1}% of A->B); {}",
        ab.ce_marked,
        pct(ab.ce_marked, ab.sent),
        match &r.dcqcn_a {
            Some(_) => format!(
                "B sent {} CNPs, {} reached A",
                r.host_b.cnps_sent, r.host_a.cnps_received
            ),
            None => "no congestion control: no CNPs, A's rate is not reduced".into(),
        }
    ));
    if let (Some(d), Some(preset)) = (&r.dcqcn_a, c.dcqcn) {
        line(format!(
            "DCQCN:       A's rate ({} parameters) was cut {} times, to {:.1} Gb/s at the lowest; {:.1} Gb/s on average, {:.1} Gb/s at the end",
            preset.name(),
            d.rate_cuts,
            d.min_rate_bps / 1e9,
            d.mean_rate_bps() / 1e9,
            d.rate_bps / 1e9
        ));
    }
    line(format!(
        "goodput:     {:.2} Gb/s over {:.2} ms of virtual time; {:.2} Gb/s of wall time ({:.2} s)",
        r.goodput_gbps(),
        r.elapsed.as_secs_f64() * 1e3,
        scenario::gbps(r.ops.total_bytes(), wall),
        wall.as_secs_f64()
    ));
    if let (Some(path), Some(cap)) = (pcap, r.capture) {
        let window = if cap.skipped > 0 {
            format!(
                "the first {} and last {} of {} frames",
                c.capture.first,
                cap.written.saturating_sub(c.capture.first),
                cap.seen
            )
        } else {
            format!("all {} frames", cap.seen)
        };
        line(format!(
            "capture:     {}: {window} on host {}'s side of the wire (roce decode {0}; tshark -r {0} -Y infiniband)",
            path.display(),
            if c.capture_side == Side::A { "A" } else { "B" }
        ));
    }
    s
}

fn to_json(r: &Report, wall: Duration, pcap: Option<&PathBuf>) -> serde_json::Value {
    let c = &r.config;
    let (a, b) = (&r.a, &r.b);
    let ops: serde_json::Map<_, _> = Op::ALL
        .into_iter()
        .map(|op| {
            let v = json!({"messages": r.ops.messages(op), "bytes": r.ops.bytes(op)});
            (op.name().to_owned(), v)
        })
        .collect();
    let link = |f: &roce::fault::FaultStats| {
        json!({"sent": f.sent, "dropped": f.dropped, "reordered": f.reordered,
               "ce_marked": f.ce_marked, "delivered": f.delivered})
    };
    json!({
        "config": {
            "bytes": c.traffic.total_bytes, "mtu": c.mtu.bytes(), "seed": c.traffic.seed,
            "loss": c.net.loss, "reorder": c.net.reorder, "line_gbps": c.net.line_gbps,
            "bottleneck_gbps": c.net.bottleneck.map(|b| b.gbps),
            "ce_threshold_bytes": c.net.bottleneck.map(|b| b.ce_threshold_bytes),
        },
        "verified": true,
        "operations": ops,
        "messages": r.ops.total_messages(),
        "bytes": r.ops.total_bytes(),
        "packets_sent": {"a": a.packets_sent, "b": b.packets_sent},
        "link": {"a_to_b": link(&r.link_a_to_b), "b_to_a": link(&r.link_b_to_a)},
        "retransmitted_packets": r.retransmitted_packets(),
        "rewinds": a.rewinds,
        "probes": a.probes,
        "fast_retransmits": a.fast_retransmits,
        "local_ack_timeouts": a.local_ack_timeouts,
        "naks_sent": {
            "PSN_SEQUENCE_ERROR": b.seq_naks_sent,
            "RNR": b.rnr_naks_sent,
            "other": b.error_naks_sent,
        },
        "naks_received": a.naks_received,
        "rnr_naks_received": a.rnr_naks_received,
        "implied_naks": a.implied_naks,
        "duplicate_requests": b.duplicate_requests,
        "ce_received": r.host_b.ce_received + r.host_a.ce_received,
        "cnps_sent": r.host_b.cnps_sent + r.host_a.cnps_sent,
        "cnps_received": r.host_a.cnps_received + r.host_b.cnps_received,
        "dcqcn": c.dcqcn.map(|p| p.name()),
        "dcqcn_a": r.dcqcn_a.as_ref().map(dcqcn_json),
        "icrc_errors": r.host_a.drops.bad_icrc + r.host_b.drops.bad_icrc,
        "frames_dropped_by_hosts": r.host_a.drops.total() + r.host_b.drops.total(),
        "virtual_seconds": r.elapsed.as_secs_f64(),
        "wall_seconds": wall.as_secs_f64(),
        "goodput_gbps": r.goodput_gbps(),
        "wall_goodput_gbps": scenario::gbps(r.ops.total_bytes(), wall),
        "pcap": pcap.map(|p| p.display().to_string()),
        "capture": r.capture.map(|cap| json!({
            "frames_seen": cap.seen, "frames_written": cap.written, "frames_skipped": cap.skipped,
        })),
    })
}

fn dcqcn_json(d: &DcqcnReport) -> serde_json::Value {
    json!({
        "cnps_received": d.cnps_received, "rate_cuts": d.rate_cuts,
        "rate_gbps": d.rate_bps / 1e9, "min_rate_gbps": d.min_rate_bps / 1e9,
        "mean_rate_gbps": d.mean_rate_bps() / 1e9,
    })
}
