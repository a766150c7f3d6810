//! The user-space work of one RC ping-pong round trip, without a kernel or a clock in the
//! way: what issue 15's round-trip targets leave for it. On the veth bench the device's raw
//! ping-pong (two frames each way, busy polling) takes 0.42-0.46 of kernel UDP's round
//! trip, so "at most 0.5" leaves 0.5-1.3 usec per round trip for all of RoCE's work on both
//! sides (tests/bench/RESULTS.md, 2026-12-07); the real endpoint adds 2.2-3.0 usec there.
//! This bench measures that work alone and repeatably, so that a change to it can be judged
//! without the veth bench's noise (and counted exactly under `valgrind --tool=callgrind`).
//!
//! `cargo bench -p roce --bench roundtrip`; for instruction counts,
//! `valgrind --tool=callgrind target/release/deps/roundtrip-<hash> --count 20000` (the
//! binary cargo bench built; the difference between two counts is the round trips' cost:
//! 27,100 instructions a round trip on 2026-12-07).
//!
//! Two hosts over the in-memory link (`VirtualNet`, no delay, no loss), one RC QP each,
//! exchange 64-byte SENDs as ibv_rc_pingpong does: each side keeps receives posted and
//! sends its next message once its previous SEND is acknowledged and the peer's has
//! arrived, so every round trip moves four frames (a SEND and an ACK each way), each
//! built with its headers and ICRC, received, sliced, checked and completed. The CPU time
//! of one round trip covers both hosts' work and the link's (a queue of frames: the only
//! part a real endpoint does not have; a real endpoint has the device and the runtime's
//! loop instead).

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{CpuTime, cpu_criterion, final_summary, median_ns};
use criterion::{Criterion, criterion_group};
use roce::endpoint::connect::{QpPath, connect};
use roce::endpoint::virtual_net::VirtualNet;
use roce::endpoint::{Host, HostConfig};
use roce::io::memory::MemoryLinkConfig;
use roce::transport::{
    Access, CqId, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus,
};
use roce::wire::{Psn, Qpn};

const VA: u64 = 0x10_0000;
const SIZE: u32 = 64;
/// Receives posted at the start and topped up as they are used (ibv_rc_pingpong's -r).
const RX_DEPTH: u32 = 500;

/// One host's QP, its CQ and region, and where it is in the exchange.
struct Side {
    qpn: Qpn,
    cq: CqId,
    key: u32,
    /// Receives posted and not yet completed.
    posted: u32,
    /// Its last SEND is not yet acknowledged.
    sending: bool,
    /// The peer's last SEND has arrived (its reply is owed).
    received: bool,
}

impl Side {
    fn new(host: &mut Host) -> Side {
        let e = host.engine_mut();
        let cq = e.create_cq(4 * RX_DEPTH as usize);
        let qpn = e.create_qp(QpInit::new(QpType::Rc, cq)).expect("a QP");
        let key = e
            .register_mr(VA, vec![0; 2 * SIZE as usize], Access::LOCAL_WRITE)
            .expect("a region");
        Side {
            qpn,
            cq,
            key,
            posted: 0,
            sending: false,
            received: false,
        }
    }

    fn sge(&self, at: u64) -> Sge {
        Sge {
            addr: VA + at,
            length: SIZE,
            lkey: self.key,
        }
    }

    fn post_receives(&mut self, host: &mut Host) {
        while self.posted < RX_DEPTH {
            let wr = RecvWr::new(0, self.sge(u64::from(SIZE)));
            host.engine_mut()
                .post_recv(self.qpn, wr)
                .expect("a receive");
            self.posted += 1;
        }
    }

    fn send(&mut self, host: &mut Host) {
        let wr = SendWr::new(1, SendOp::Send, self.sge(0));
        host.engine_mut().post_send(self.qpn, wr).expect("a SEND");
        self.sending = true;
        self.received = false;
    }

    /// Takes this side's completions; true once both its SEND is acknowledged and the
    /// peer's has arrived, as ibv_rc_pingpong waits for before its next SEND.
    fn poll(&mut self, host: &mut Host) -> bool {
        while let Some(wc) = host.engine_mut().poll_completion(self.cq) {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            match wc.opcode {
                WcOpcode::Send => self.sending = false,
                WcOpcode::Recv => {
                    self.posted -= 1;
                    self.received = true;
                }
                other => panic!("unexpected completion {other:?}"),
            }
        }
        if self.posted <= 1 {
            self.post_receives(host);
        }
        !self.sending && self.received
    }
}

struct Exchange {
    net: VirtualNet,
    a: Side,
    b: Side,
}

impl Exchange {
    /// Connected, addresses resolved, receives posted, and a first round trip made.
    fn new() -> Exchange {
        let config = |addr: &str| HostConfig::new([0; 6], vec![addr.parse().expect("a CIDR")]);
        let mut net = VirtualNet::new(
            MemoryLinkConfig::default(),
            config("10.0.0.1/24"),
            config("10.0.0.2/24"),
        )
        .expect("a link");
        let mut a = Side::new(&mut net.a);
        let mut b = Side::new(&mut net.b);
        let addr = |host: &Host| host.gids().get(1).expect("the IPv4 GID").addr();
        let (addr_a, addr_b) = (addr(&net.a), addr(&net.b));
        let path = |dest, dest_qp, rq, sq| {
            QpPath::new(
                QpType::Rc,
                dest,
                dest_qp,
                Psn::new(rq),
                Psn::new(sq),
                Mtu::M1024,
            )
        };
        connect(net.a.engine_mut(), a.qpn, &path(addr_b, b.qpn, 200, 100)).expect("A");
        connect(net.b.engine_mut(), b.qpn, &path(addr_a, a.qpn, 100, 200)).expect("B");
        a.post_receives(&mut net.a);
        b.post_receives(&mut net.b);
        let mut x = Exchange { net, a, b };
        x.round_trips(1);
        x
    }

    /// `n` round trips: A sends, B answers once A's SEND arrived (and its own previous one
    /// was acknowledged), A's next goes once B's answer arrived and A's SEND was ACKed.
    fn round_trips(&mut self, n: u64) {
        let (a, b) = (&mut self.a, &mut self.b);
        for _ in 0..n {
            a.send(&mut self.net.a);
            until(&mut self.net, |net| b.poll(&mut net.b));
            b.send(&mut self.net.b);
            until(&mut self.net, |net| a.poll(&mut net.a));
        }
        black_box(&self.net);
    }
}

/// Moves frames and timers on `net` until `done` holds. Nothing is lost on this link: an
/// exchange that stops short of it is a bug in the exchange.
fn until(net: &mut VirtualNet, done: impl FnMut(&mut VirtualNet) -> bool) {
    let reached = net
        .run_until(Duration::from_secs(1), done)
        .expect("the link");
    assert!(reached, "the exchange stalled");
}

fn roundtrip(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("roundtrip");
    group.bench_function("rc_send_64", |bench| {
        let mut x = Exchange::new();
        bench.iter_custom(|iters| {
            let start = cpu_time::ThreadTime::now();
            x.round_trips(iters);
            start.elapsed()
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = cpu_criterion(3);
    targets = roundtrip
}

fn main() {
    // `--count N` (outside criterion): N round trips and nothing else, for
    // `valgrind --tool=callgrind`, whose instruction counts repeat exactly from run to run.
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--count") {
        let Some(n) = args.get(at + 1).and_then(|v| v.parse::<u64>().ok()) else {
            eprintln!("roundtrip: --count takes a number of round trips");
            std::process::exit(2);
        };
        let mut x = Exchange::new();
        x.round_trips(n);
        println!("{n} round trips");
        return;
    }
    benches();
    let dir = final_summary();
    if let Some(ns) = median_ns(&dir, "roundtrip/rc_send_64") {
        println!(
            "RC ping-pong, 64-byte SENDs: {:.2} usec of CPU per round trip (both hosts and the \
             link), {:.2} per side",
            ns / 1e3,
            ns / 2e3
        );
    }
}
