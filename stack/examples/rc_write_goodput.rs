//! RC WRITE goodput between two engines in one process, lossless and under random loss.
//!
//! `cargo run --release -p roce --example rc_write_goodput [-- LOSS_PERCENT [MESSAGES]]`
//!
//! Prints the goodput of the two engines alone, handing packets to each other in one thread
//! without a link model; then, lossless and lossy, the payload goodput per wall-clock second
//! of this one thread (both engines and the simulated link included) and per virtual second
//! of the simulated link, plus how many packets were sent again.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use roce::transport::engine_pair::{ADDR_A, ADDR_B, ConnectOptions, Framing, LinkConfig, Pair};
use roce::transport::{
    Access, Engine, MAX_PACKET_LEN, Mtu, QpType, SendOp, SendWr, Sge, TransportConfig,
};

const MSG: u32 = 64 * 1024;
const OUTSTANDING: usize = 16;

struct Run {
    wall: Duration,
    virtual_time: Duration,
    bytes: u64,
    sent: u64,
    retransmitted: u64,
}

fn run(loss: f64, messages: usize, gbps: f64, delay: u64, framing: Framing) -> Run {
    let mut link = LinkConfig::lossy(loss);
    link.gbps = gbps;
    link.faults.delay.base = Duration::from_nanos(delay);
    link.framing = framing;
    let mut pair = Pair::new(TransportConfig::default(), link, 7).expect("a valid link");
    let opts = ConnectOptions {
        mtu: Mtu::M4096,
        ..ConnectOptions::default()
    };
    let conn = pair.connect(QpType::Rc, &opts);
    let region = (MSG as usize) * OUTSTANDING;
    let src = pair
        .a
        .register_mr(0x1000_0000, vec![0x5a; region], Access::NONE)
        .unwrap();
    let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let dst = pair
        .b
        .register_mr(0x2000_0000, vec![0; region], remote)
        .unwrap();
    let post = |pair: &mut Pair, i: usize| {
        let slot = (i % OUTSTANDING) as u64 * u64::from(MSG);
        let op = SendOp::Write {
            remote_addr: 0x2000_0000 + slot,
            rkey: dst,
        };
        let sge = Sge {
            addr: 0x1000_0000 + slot,
            length: MSG,
            lkey: src,
        };
        pair.a
            .post_send(conn.qp_a, SendWr::new(i as u64, op, vec![sge]))
            .unwrap();
    };
    for i in 0..OUTSTANDING.min(messages) {
        post(&mut pair, i);
    }
    let (mut posted, mut done) = (OUTSTANDING.min(messages), 0);
    let start = Instant::now();
    while done < messages {
        if !pair.step() {
            break;
        }
        while let Some(wc) = pair.a.poll_completion(conn.cq_a) {
            assert_eq!(
                wc.status,
                roce::transport::WcStatus::Success,
                "{wc:?} {:?}",
                pair.a.stats()
            );
            done += 1;
            if posted < messages {
                post(&mut pair, posted);
                posted += 1;
            }
        }
    }
    Run {
        wall: start.elapsed(),
        virtual_time: pair.now() - roce::time::Instant::ZERO,
        bytes: done as u64 * u64::from(MSG),
        sent: pair.a.stats().packets_sent,
        retransmitted: pair.a.stats().retransmitted_packets,
    }
}

/// Moves every packet one engine can send to the other, reusing buffers.
fn exchange(from: &mut Engine, to: &mut Engine, src: std::net::IpAddr, pool: &mut Vec<Vec<u8>>) {
    let mut queue = VecDeque::new();
    loop {
        let mut buf = pool.pop().unwrap_or_else(|| vec![0; MAX_PACKET_LEN]);
        match from.poll_transmit(roce::time::Instant::ZERO, &mut buf) {
            Some(t) => queue.push_back((buf, t.len)),
            None => {
                pool.push(buf);
                break;
            }
        }
    }
    for (buf, len) in queue {
        let _ = to.handle_packet(roce::time::Instant::ZERO, src, &buf[..len]);
        pool.push(buf);
    }
}

/// The two engines alone: no link model, no timers, packets handed over in batches.
fn engines_only(messages: usize) -> f64 {
    let mut pair = Pair::new(TransportConfig::default(), LinkConfig::new(), 1).unwrap();
    let opts = ConnectOptions {
        mtu: Mtu::M4096,
        ..ConnectOptions::default()
    };
    let conn = pair.connect(QpType::Rc, &opts);
    let (a, b) = (&mut pair.a, &mut pair.b);
    let region = MSG as usize * OUTSTANDING;
    let src = a.register_mr(0, vec![1; region], Access::NONE).unwrap();
    let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let dst = b.register_mr(0, vec![0; region], remote).unwrap();
    let (mut posted, mut done, mut pool) = (0, 0, Vec::new());
    let start = Instant::now();
    while done < messages {
        while posted < messages && posted < done + OUTSTANDING {
            let slot = (posted % OUTSTANDING) as u64 * u64::from(MSG);
            let op = SendOp::Write {
                remote_addr: slot,
                rkey: dst,
            };
            let sge = Sge {
                addr: slot,
                length: MSG,
                lkey: src,
            };
            a.post_send(conn.qp_a, SendWr::new(posted as u64, op, vec![sge]))
                .unwrap();
            posted += 1;
        }
        exchange(a, b, ADDR_A, &mut pool);
        exchange(b, a, ADDR_B, &mut pool);
        while a.poll_completion(conn.cq_a).is_some() {
            done += 1;
        }
    }
    gbps(done as u64 * u64::from(MSG), start.elapsed())
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
}

fn main() {
    let mut args = std::env::args().skip(1);
    let loss: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2.0) / 100.0;
    let messages: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    println!(
        "RC WRITE {} KiB x {messages}, MTU 4096, {OUTSTANDING} outstanding",
        MSG / 1024
    );
    println!("engines only, lossless: {:.2} Gb/s", engines_only(messages));
    for (label, gb, delay, framing) in [
        (
            "100 Gb/s link, 2 us, IB packets only",
            100.0,
            2_000,
            Framing::Ib,
        ),
        (
            "100 Gb/s link, 2 us, Ethernet frames with ICRC",
            100.0,
            2_000,
            Framing::Ethernet,
        ),
        (
            "infinitely fast link, no delay, IB packets only",
            0.0,
            0,
            Framing::Ib,
        ),
        (
            "infinitely fast link, 2 us, IB packets only",
            0.0,
            2_000,
            Framing::Ib,
        ),
    ] {
        let base = run(0.0, messages, gb, delay, framing);
        let lossy = run(loss, messages, gb, delay, framing);
        println!("{label}:");
        for (name, r) in [("lossless", &base), ("lossy", &lossy)] {
            println!(
                "  {name:9} wall {:7.2} Gb/s  virtual {:8.2} Gb/s  packets {} (retransmitted {:.2}%)",
                gbps(r.bytes, r.wall),
                gbps(r.bytes, r.virtual_time),
                r.sent,
                100.0 * r.retransmitted as f64 / r.sent.max(1) as f64
            );
        }
        println!(
            "  kept under {:.1}% loss: wall {:.0}%, virtual {:.0}%",
            loss * 100.0,
            100.0 * gbps(lossy.bytes, lossy.wall) / gbps(base.bytes, base.wall),
            100.0 * gbps(lossy.bytes, lossy.virtual_time) / gbps(base.bytes, base.virtual_time)
        );
    }
}
