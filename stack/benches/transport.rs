//! RC WRITE goodput between two engines in one thread (issue 4): 64 KiB messages, 16
//! outstanding, path MTU 4096 and 1024, over `transport::pair` (the project's fault model).
//!
//! `cargo bench -p roce --bench transport`
//!
//! Criterion measures CPU time per batch of messages on a link of unlimited rate, so the
//! figure is Gb/s per core: "ib" carries the engines' packets alone, "eth" builds and checks
//! whole frames (Ethernet, IPv4, UDP, ICRC) as a host would. Each runs lossless and with 2%
//! random loss in both directions. Afterwards one table puts the medians side by side with
//! the share of goodput kept under loss, and adds the same ratio in virtual time over 100 and
//! 25 Gb/s links with 2 us of delay each way (deterministic: the protocol's efficiency,
//! independent of the CPU). Target: >= 60% kept at 2% loss (rdma_rxe keeps about 12%).
//!
//! Go-back-N bounds the virtual-time ratio: the responder discards everything after a gap
//! (IBA 9.7.5.2.2), so each loss costs what was sent in the round trip before its NAK came
//! back, about one bandwidth-delay product B in packets, and at most 1 / (1 + p B) of the
//! link carries new data. 100 Gb/s with 2 us each way holds B ~ 14 packets of 4096 bytes
//! (at most ~78% kept) but B ~ 55 of 1024 bytes (at most ~48%).

mod common;

use std::time::Duration;

use common::{CpuTime, median_ns};
use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use roce::fault::Delay;
use roce::time::Instant;
use roce::transport::engine_pair::{ConnectOptions, Connection, Framing, LinkConfig, Pair};
use roce::transport::{Access, Mtu, QpType, SendOp, SendWr, Sge, Stats, TransportConfig, WcStatus};

const MSG: u32 = 64 * 1024;
const OUTSTANDING: u64 = 16;
/// Messages per measured batch: 8 MiB.
const BATCH: u64 = 128;
const LOSS: f64 = 0.02;
const SRC_VA: u64 = 0x1000_0000;
const DST_VA: u64 = 0x2000_0000;

/// A connected pair with a source region on A and a destination region on B.
struct Bench {
    pair: Pair,
    conn: Connection,
    src: u32,
    dst: u32,
}

fn link(gbps: f64, delay_ns: u64, loss: f64, framing: Framing) -> LinkConfig {
    let mut link = LinkConfig::lossy(loss);
    link.gbps = gbps;
    link.faults.delay = Delay {
        base: Duration::from_nanos(delay_ns),
        jitter: Duration::ZERO,
    };
    link.framing = framing;
    link
}

fn setup(mtu: Mtu, link: LinkConfig) -> Bench {
    let mut pair = Pair::new(TransportConfig::default(), link, 7).expect("a valid link");
    let opts = ConnectOptions {
        mtu,
        ..ConnectOptions::default()
    };
    let conn = pair.connect(QpType::Rc, &opts);
    let region = (MSG as usize) * OUTSTANDING as usize;
    let src = pair
        .a
        .register_mr(SRC_VA, vec![0x5a; region], Access::NONE)
        .expect("register");
    let dst = pair
        .b
        .register_mr(
            DST_VA,
            vec![0; region],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .expect("register");
    Bench {
        pair,
        conn,
        src,
        dst,
    }
}

/// Moves `messages` WRITEs through, `OUTSTANDING` at a time; returns A's counters.
fn run(b: &mut Bench, messages: u64) -> Stats {
    let (mut posted, mut done) = (0, 0);
    while done < messages {
        while posted < messages && posted < done + OUTSTANDING {
            let slot = (posted % OUTSTANDING) * u64::from(MSG);
            let op = SendOp::Write {
                remote_addr: DST_VA + slot,
                rkey: b.dst,
            };
            let sge = Sge {
                addr: SRC_VA + slot,
                length: MSG,
                lkey: b.src,
            };
            let wr = SendWr::new(posted, op, vec![sge]);
            b.pair.a.post_send(b.conn.qp_a, wr).expect("post");
            posted += 1;
        }
        assert!(b.pair.step(), "the pair went idle with work outstanding");
        while let Some(wc) = b.pair.a.poll_completion(b.conn.cq_a) {
            assert_eq!(wc.status, WcStatus::Success);
            done += 1;
        }
    }
    *b.pair.a.stats()
}

const MTUS: [(Mtu, &str); 2] = [(Mtu::M4096, "mtu4096"), (Mtu::M1024, "mtu1024")];
const FRAMINGS: [(Framing, &str); 2] = [(Framing::Ib, "ib"), (Framing::Ethernet, "eth")];
const LOSSES: [(f64, &str); 2] = [(0.0, "lossless"), (LOSS, "loss2")];

fn rc_write(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("rc_write");
    group.throughput(Throughput::Bytes(BATCH * u64::from(MSG)));
    group.sample_size(10);
    for (framing, f) in FRAMINGS {
        for (mtu, m) in MTUS {
            for (loss, l) in LOSSES {
                group.bench_function(format!("{f}_{m}_{l}"), |bench| {
                    bench.iter_batched(
                        || setup(mtu, link(0.0, 0, loss, framing)),
                        |mut b| run(&mut b, BATCH),
                        BatchSize::PerIteration,
                    )
                });
            }
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::cpu_criterion(4);
    targets = rc_write
}

fn gbps(bytes: u64, ns: f64) -> f64 {
    bytes as f64 * 8.0 / ns
}

/// Virtual-time goodput and A's counters of `messages` WRITEs over a `gbps` link with 2 us of
/// delay each way.
fn virtual_goodput(mtu: Mtu, gbps_link: f64, loss: f64, messages: u64) -> (f64, Stats) {
    let mut b = setup(mtu, link(gbps_link, 2_000, loss, Framing::Ib));
    let stats = run(&mut b, messages);
    let ns = (b.pair.now() - Instant::ZERO).as_nanos() as f64;
    (gbps(messages * u64::from(MSG), ns), stats)
}

fn main() {
    benches();
    let dir = common::final_summary();
    let bytes = BATCH * u64::from(MSG);
    println!(
        "\nRC WRITE {} KiB x {OUTSTANDING} outstanding, two engines in one thread, CPU time (median):",
        MSG / 1024
    );
    for (_, f) in FRAMINGS {
        for (_, m) in MTUS {
            let [clean, lossy] =
                LOSSES.map(|(_, l)| median_ns(&dir, &format!("rc_write/{f}_{m}_{l}")));
            if let (Some(clean), Some(lossy)) = (clean, lossy) {
                println!(
                    "  {f:3} {m}: lossless {:6.2} Gb/s per core, 2% loss {:6.2} Gb/s: {:3.0}% kept",
                    gbps(bytes, clean),
                    gbps(bytes, lossy),
                    100.0 * clean / lossy
                );
            }
        }
    }
    println!("Virtual time, 2 us each way, 2000 messages (deterministic):");
    for (rate, (mtu, m)) in [100.0, 25.0].into_iter().flat_map(|r| MTUS.map(|m| (r, m))) {
        let (clean, _) = virtual_goodput(mtu, rate, 0.0, 2000);
        let (lossy, s) = virtual_goodput(mtu, rate, LOSS, 2000);
        println!(
            "  {rate:3} Gb/s {m}: lossless {clean:6.2} Gb/s, 2% loss {lossy:6.2} Gb/s: {:3.0}% kept \
             (target >= 60%; retransmitted {:.1}% of packets, {} go-back-N, {} fast retransmits, {} ACK timeouts)",
            100.0 * lossy / clean,
            100.0 * s.retransmitted_packets as f64 / s.packets_sent.max(1) as f64,
            s.rewinds,
            s.fast_retransmits,
            s.local_ack_timeouts
        );
    }
}
