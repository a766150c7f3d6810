//! Property tests: random RC workloads over a random faulty link. Whatever the faults, every
//! message is delivered exactly once and byte for byte, completions come in posting order
//! with the right status, atomics execute once, and memory changes only where an operation
//! with the right to change it wrote.

use core::time::Duration;

use proptest::prelude::*;

use crate::fault::{CeMarking, Delay, FaultConfig};
use crate::rng::Rng;
use crate::transport::engine_pair::{ConnectOptions, Framing, LinkConfig, Pair};
use crate::transport::{
    Access, Mtu, QpState, QpType, RecvWr, SendOp, SendWr, Sge, TransportConfig, WcOpcode, WcStatus,
    WorkCompletion,
};

/// B's memory open to the requester: WRITE and READ in the first part, atomics after it.
const TARGET_VA: u64 = 0x1000_0000;
const DATA: u64 = 128 * 1024;
const WORDS: u64 = 16;
const TARGET_LEN: usize = (DATA + WORDS * 8) as usize;

#[derive(Debug, Clone)]
enum Op {
    Send(u32),
    Write {
        at: u64,
        len: u32,
    },
    Read {
        at: u64,
        len: u32,
    },
    FetchAdd {
        word: u64,
        add: u64,
    },
    CompareSwap {
        word: u64,
        compare_hit: bool,
        swap: u64,
    },
    /// A WRITE with an R_Key B never issued.
    BadWrite(u32),
}

fn size() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..64, 0u32..5000, 0u32..=65536]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => size().prop_map(Op::Send),
        3 => (size(), any::<u64>()).prop_map(|(len, r)| Op::Write { at: r % (DATA - u64::from(len) + 1), len }),
        2 => (size(), any::<u64>()).prop_map(|(len, r)| Op::Read { at: r % (DATA - u64::from(len) + 1), len }),
        1 => (0..WORDS, any::<u64>()).prop_map(|(word, add)| Op::FetchAdd { word, add }),
        1 => (0..WORDS, any::<bool>(), any::<u64>())
            .prop_map(|(word, compare_hit, swap)| Op::CompareSwap { word, compare_hit, swap }),
    ]
}

fn mtu() -> impl Strategy<Value = Mtu> {
    prop_oneof![
        Just(Mtu::M256),
        Just(Mtu::M512),
        Just(Mtu::M1024),
        Just(Mtu::M2048),
        Just(Mtu::M4096)
    ]
}

fn faults() -> impl Strategy<Value = FaultConfig> {
    (
        0.0..0.2f64,
        0.0..0.05f64,
        0.0..0.1f64,
        0.0..0.02f64,
        0.0..0.1f64,
    )
        .prop_map(|(loss, duplicate, reorder, corrupt, ce_mark)| FaultConfig {
            loss,
            duplicate,
            reorder,
            reorder_delay: Duration::from_nanos(3_000),
            delay: Delay {
                base: Duration::from_nanos(2_000),
                jitter: Duration::from_nanos(500),
            },
            corrupt,
            ce_mark: CeMarking::Probability(ce_mark),
        })
}

fn word(mem: &[u8], w: u64) -> u64 {
    let at = (DATA + w * 8) as usize;
    u64::from_le_bytes(mem[at..at + 8].try_into().unwrap())
}

fn set_word(mem: &mut [u8], w: u64, v: u64) {
    let at = (DATA + w * 8) as usize;
    mem[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The sequential meaning of the workload: B's memory after it, and what each operation
/// returns to A (READ data or an atomic's original value), in posting order.
fn model(ops: &[Op], src: &[u8], mut mem: Vec<u8>) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut returned = Vec::new();
    let mut src_at = 0usize;
    for op in ops {
        match *op {
            Op::Write { at, len } => {
                let (at, len) = (at as usize, len as usize);
                mem[at..at + len].copy_from_slice(&src[src_at..src_at + len]);
                src_at += len;
            }
            Op::Send(len) => src_at += len as usize,
            Op::Read { at, len } => {
                returned.push(mem[at as usize..(at + u64::from(len)) as usize].to_vec())
            }
            Op::FetchAdd { word: w, add } => {
                let old = word(&mem, w);
                set_word(&mut mem, w, old.wrapping_add(add));
                returned.push(old.to_le_bytes().to_vec());
            }
            Op::CompareSwap {
                word: w,
                compare_hit,
                swap,
            } => {
                let old = word(&mem, w);
                if compare_hit {
                    set_word(&mut mem, w, swap);
                }
                returned.push(old.to_le_bytes().to_vec());
            }
            Op::BadWrite(_) => break,
        }
    }
    (mem, returned)
}

struct Run {
    pair: Pair,
    /// B's target and private regions as registered, before anything ran.
    initial: Vec<u8>,
    private: Vec<u8>,
    send_wcs: Vec<WorkCompletion>,
    recv_wcs: Vec<WorkCompletion>,
    keys: Keys,
    qp_a: crate::wire::Qpn,
    qp_b: crate::wire::Qpn,
}

struct Keys {
    src_a: u32,
    land_a: u32,
    target_b: u32,
    recv_b: u32,
    private_b: u32,
}

const SRC_VA: u64 = 0x2000_0000;
const LAND_VA: u64 = 0x3000_0000;
const RECV_VA: u64 = 0x4000_0000;

fn random_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    rng.fill(&mut v);
    v
}

fn execute(ops: &[Op], mtu: Mtu, faults: FaultConfig, seed: u64) -> Run {
    let link = LinkConfig {
        gbps: 25.0,
        faults,
        framing: Framing::Ethernet,
    };
    let config = TransportConfig {
        max_inflight_packets: 64,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(config, link, seed).expect("a valid link");
    let opts = ConnectOptions {
        mtu,
        timeout: 12,
        ..ConnectOptions::default()
    };
    let conn = pair.connect(QpType::Rc, &opts);
    let mut rng = Rng::new(seed);
    let total = |f: fn(&Op) -> u32| ops.iter().map(f).sum::<u32>() as usize + 8;
    let src_len = total(|o| match o {
        Op::Send(l) | Op::Write { len: l, .. } | Op::BadWrite(l) => *l,
        _ => 0,
    });
    let land_len = total(|o| match o {
        Op::Read { len, .. } => *len,
        Op::FetchAdd { .. } | Op::CompareSwap { .. } => 8,
        _ => 0,
    });
    let recv_len = total(|o| if let Op::Send(l) = o { *l } else { 0 });
    let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let keys = Keys {
        src_a: pair
            .a
            .register_mr(SRC_VA, random_bytes(&mut rng, src_len), Access::NONE)
            .unwrap(),
        land_a: pair
            .a
            .register_mr(
                LAND_VA,
                random_bytes(&mut rng, land_len),
                Access::LOCAL_WRITE,
            )
            .unwrap(),
        target_b: pair
            .b
            .register_mr(
                TARGET_VA,
                random_bytes(&mut rng, TARGET_LEN),
                remote | Access::REMOTE_ATOMIC,
            )
            .unwrap(),
        recv_b: pair
            .b
            .register_mr(
                RECV_VA,
                random_bytes(&mut rng, recv_len),
                Access::LOCAL_WRITE,
            )
            .unwrap(),
        private_b: pair
            .b
            .register_mr(
                TARGET_VA + 0x100_0000,
                random_bytes(&mut rng, 4096),
                Access::LOCAL_WRITE,
            )
            .unwrap(),
    };
    let initial = initial_target(&pair, &keys);
    let private = pair.b.mr(keys.private_b).unwrap().bytes().to_vec();
    let src = pair.a.mr(keys.src_a).unwrap().bytes().to_vec();
    let (mut src_at, mut land_at, mut recv_at) = (0u64, 0u64, 0u64);
    for (i, op) in ops.iter().enumerate() {
        let sge = |va: u64, at: &mut u64, len: u32, lkey: u32| {
            let s = Sge {
                addr: va + *at,
                length: len,
                lkey,
            };
            *at += u64::from(len);
            vec![s]
        };
        let wr = match *op {
            Op::Send(len) => {
                let recv = RecvWr::new(i as u64, sge(RECV_VA, &mut recv_at, len, keys.recv_b));
                pair.b.post_recv(conn.qp_b, recv).unwrap();
                SendWr::new(
                    i as u64,
                    SendOp::Send,
                    sge(SRC_VA, &mut src_at, len, keys.src_a),
                )
            }
            Op::Write { at, len } => {
                let op = SendOp::Write {
                    remote_addr: TARGET_VA + at,
                    rkey: keys.target_b,
                };
                SendWr::new(i as u64, op, sge(SRC_VA, &mut src_at, len, keys.src_a))
            }
            Op::BadWrite(len) => {
                let op = SendOp::Write {
                    remote_addr: TARGET_VA,
                    rkey: keys.private_b,
                };
                SendWr::new(
                    i as u64,
                    op,
                    sge(SRC_VA, &mut src_at, len.max(1), keys.src_a),
                )
            }
            Op::Read { at, len } => {
                let op = SendOp::Read {
                    remote_addr: TARGET_VA + at,
                    rkey: keys.target_b,
                };
                SendWr::new(i as u64, op, sge(LAND_VA, &mut land_at, len, keys.land_a))
            }
            Op::FetchAdd { word, add } => {
                let op = SendOp::FetchAdd {
                    remote_addr: TARGET_VA + DATA + word * 8,
                    rkey: keys.target_b,
                    add,
                };
                SendWr::new(i as u64, op, sge(LAND_VA, &mut land_at, 8, keys.land_a))
            }
            Op::CompareSwap {
                word,
                compare_hit,
                swap,
            } => {
                // The compare value is the model's current word when `compare_hit`.
                let current = model(&ops[..i], &src, initial.clone()).0;
                let compare = if compare_hit {
                    self::word(&current, word)
                } else {
                    !self::word(&current, word)
                };
                let op = SendOp::CompareSwap {
                    remote_addr: TARGET_VA + DATA + word * 8,
                    rkey: keys.target_b,
                    compare,
                    swap,
                };
                SendWr::new(i as u64, op, sge(LAND_VA, &mut land_at, 8, keys.land_a))
            }
        };
        let mut wr = wr;
        wr.fence = fenced(ops, i);
        pair.a.post_send(conn.qp_a, wr).unwrap();
    }
    let sends = ops.iter().filter(|o| matches!(o, Op::Send(_))).count();
    let (mut send_wcs, mut recv_wcs) = (Vec::new(), Vec::new());
    let limit = pair.now() + Duration::from_secs(30);
    pair.run_until(limit, |p| {
        while let Some(wc) = p.a.poll_completion(conn.cq_a) {
            send_wcs.push(wc);
        }
        while let Some(wc) = p.b.poll_completion(conn.cq_b) {
            recv_wcs.push(wc);
        }
        send_wcs.len() >= ops.len() && recv_wcs.len() >= sends
    });
    Run {
        pair,
        initial,
        private,
        send_wcs,
        recv_wcs,
        keys,
        qp_a: conn.qp_a,
        qp_b: conn.qp_b,
    }
}

/// B's target memory as registered (the model starts from it).
fn initial_target(pair: &Pair, keys: &Keys) -> Vec<u8> {
    pair.b.mr(keys.target_b).unwrap().bytes().to_vec()
}

/// A READ may be executed again after later requests ran (when its response is lost), so a
/// request that overwrites what an earlier READ reads is fenced (IBA 10.8.3.3), as an
/// application must do for the READ to see the memory of its place in the order.
fn fenced(ops: &[Op], i: usize) -> bool {
    let range = |op: &Op| match *op {
        Op::Write { at, len } => Some((at, at + u64::from(len))),
        Op::FetchAdd { word, .. } | Op::CompareSwap { word, .. } => {
            Some((DATA + word * 8, DATA + word * 8 + 8))
        }
        _ => None,
    };
    let Some((start, end)) = range(&ops[i]) else {
        return false;
    };
    ops[..i].iter().any(|op| match *op {
        Op::Read { at, len } => at < end && start < at + u64::from(len),
        _ => false,
    })
}

impl Op {
    fn needs_response(&self) -> bool {
        matches!(
            self,
            Op::Read { .. } | Op::FetchAdd { .. } | Op::CompareSwap { .. }
        )
    }
}

fn expected_opcode(op: &Op) -> WcOpcode {
    match op {
        Op::Send(_) => WcOpcode::Send,
        Op::Write { .. } | Op::BadWrite(_) => WcOpcode::RdmaWrite,
        Op::Read { .. } => WcOpcode::RdmaRead,
        Op::FetchAdd { .. } => WcOpcode::FetchAdd,
        Op::CompareSwap { .. } => WcOpcode::CompSwap,
    }
}

/// Checks a run against the model; `fails_at` is the index of a BadWrite, if any.
fn check(ops: &[Op], run: &Run, fails_at: Option<usize>) -> Result<(), TestCaseError> {
    let a = &run.pair.a;
    let b = &run.pair.b;
    let src = a.mr(run.keys.src_a).unwrap().bytes();
    let done = fails_at.unwrap_or(ops.len());
    let (target, returned) = model(&ops[..done], src, run.initial.clone());

    // Completions in posting order, with the right status and opcode: successes, then one
    // error, then flushes. The error is the NAK's, unless the NAK or a response before it was
    // lost: the responder is in ERR after its NAK and answers nothing more, so the oldest
    // request without an answer fails with RETRY_EXC_ERR, as on rxe and hardware.
    prop_assert_eq!(run.send_wcs.len(), ops.len(), "stats {:?}", a.stats());
    let failed = run
        .send_wcs
        .iter()
        .position(|wc| wc.status != WcStatus::Success);
    for (i, (wc, op)) in run.send_wcs.iter().zip(ops).enumerate() {
        prop_assert_eq!(wc.wr_id, i as u64);
        let status = match (fails_at, failed) {
            // The NAK, or the last response before it, can be lost for good.
            (Some(k), Some(e)) if i == e && e <= k && wc.status == WcStatus::RetryExcErr => {
                WcStatus::RetryExcErr
            }
            (Some(k), Some(e)) if i == e && e == k => WcStatus::RemAccessErr,
            (Some(_), Some(e)) if i > e => WcStatus::WrFlushErr,
            _ => WcStatus::Success,
        };
        prop_assert_eq!(wc.status, status, "op {} {:?}", i, op);
        prop_assert_eq!(wc.opcode, expected_opcode(op));
    }

    // B's memory is exactly the model's: every WRITE and atomic landed once, nothing else.
    prop_assert!(
        b.mr(run.keys.target_b).unwrap().bytes() == &target[..],
        "target memory differs"
    );
    let land = a.mr(run.keys.land_a).unwrap().bytes();
    let mut at = 0;
    let answered = ops.iter().enumerate().filter(|(_, op)| op.needs_response());
    for ((i, _), r) in answered.zip(&returned) {
        if run.send_wcs[i].status == WcStatus::Success {
            prop_assert!(
                land[at..at + r.len()] == r[..],
                "READ or atomic result differs at {}",
                at
            );
        }
        at += r.len();
    }

    // Each SEND arrived once, in order, byte for byte, into its own receive.
    let recv = b.mr(run.keys.recv_b).unwrap().bytes();
    let (mut src_at, mut recv_at, mut k) = (0usize, 0usize, 0usize);
    for (i, op) in ops.iter().enumerate().take(done) {
        match *op {
            Op::Send(len) => {
                let len = len as usize;
                let wc = run
                    .recv_wcs
                    .get(k)
                    .ok_or_else(|| TestCaseError::fail("receive missing"))?;
                prop_assert_eq!(
                    (wc.wr_id, wc.status, wc.byte_len),
                    (i as u64, WcStatus::Success, len as u32)
                );
                prop_assert!(recv[recv_at..recv_at + len] == src[src_at..src_at + len]);
                src_at += len;
                recv_at += len;
                k += 1;
            }
            Op::Write { len, .. } => src_at += len as usize,
            _ => {}
        }
    }
    if fails_at.is_some() {
        prop_assert!(
            run.recv_wcs[k..]
                .iter()
                .all(|wc| wc.status == WcStatus::WrFlushErr)
        );
        prop_assert_eq!(a.query_qp(run.qp_a).unwrap().0, QpState::Err);
        prop_assert_eq!(b.query_qp(run.qp_b).unwrap().0, QpState::Err);
    } else {
        prop_assert_eq!(run.recv_wcs.len(), k, "no receive completed twice");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn rc_workloads_survive_any_faults(
        ops in proptest::collection::vec(op(), 1..14),
        mtu in mtu(),
        faults in faults(),
        seed in any::<u64>(),
    ) {
        let run = execute(&ops, mtu, faults, seed);
        check(&ops, &run, None)?;
        let b = &run.pair.b;
        prop_assert!(b.mr(run.keys.private_b).unwrap().bytes() == &run.private[..]);
    }

    #[test]
    fn a_bad_rkey_fails_that_request_and_flushes_the_rest(
        mut ops in proptest::collection::vec(op(), 1..10),
        at in any::<prop::sample::Index>(),
        len in size(),
        faults in faults(),
        seed in any::<u64>(),
    ) {
        let k = at.index(ops.len() + 1);
        ops.insert(k, Op::BadWrite(len));
        let run = execute(&ops, Mtu::M1024, faults, seed);
        check(&ops, &run, Some(k))?;
        prop_assert!(run.pair.b.mr(run.keys.private_b).unwrap().bytes() == &run.private[..],
            "a region without REMOTE_WRITE was written");
    }
}
