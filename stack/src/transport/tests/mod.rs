//! The transport's tests, driving engines through [`super::engine_pair`] (quinn's
//! `src/tests/` shape): `basic` (each operation once), `hostile` (a peer that breaks the rules), `verbs` (verbs semantics), `rules`
//! (the spec's rules, packet by packet), `prop` (property tests over lossy links). This file
//! is their shared set-up: a connected pair with memory on each side.

mod basic;
mod flush;
mod hostile;
mod many;
mod memory;
mod prop;
mod rules;
mod srq;
mod verbs;

use core::time::Duration;

use super::engine_pair::{ConnectOptions, Connection, LinkConfig, Pair, Side};
use super::{Access, QpType, RecvWr, SendOp, SendWr, Sge, TransportConfig, WorkCompletion};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wire::IbPacketRepr;

/// Virtual addresses of the regions every side registers.
pub const SRC_VA: u64 = 0x10_0000;
pub const DST_VA: u64 = 0x80_0000;
pub const MEM: usize = 256 * 1024;

/// A connected pair where each side has a source region (random bytes, local only) and a
/// destination region open to every remote operation (random bytes too).
pub struct Setup {
    pub pair: Pair,
    pub conn: Connection,
    pub src_a: u32,
    pub dst_a: u32,
    pub dst_b: u32,
}

impl Setup {
    pub fn new(qp_type: QpType, opts: &ConnectOptions, link: LinkConfig, seed: u64) -> Setup {
        Self::with_config(TransportConfig::default(), qp_type, opts, link, seed)
    }

    pub fn with_config(
        config: TransportConfig,
        qp_type: QpType,
        opts: &ConnectOptions,
        link: LinkConfig,
        seed: u64,
    ) -> Setup {
        let mut pair = Pair::new(config, link, seed).expect("a valid link");
        let conn = pair.connect(qp_type, opts);
        let mut rng = Rng::new(seed ^ 0x5eed);
        let mut random = |n: usize| {
            let mut v = vec![0u8; n];
            rng.fill(&mut v);
            v
        };
        let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let remote = remote | Access::REMOTE_ATOMIC;
        let src_a = pair
            .a
            .register_mr(SRC_VA, random(MEM), Access::NONE)
            .unwrap();
        let dst_a = pair.a.register_mr(DST_VA, random(MEM), remote).unwrap();
        pair.b
            .register_mr(SRC_VA, random(MEM), Access::NONE)
            .unwrap();
        let dst_b = pair.b.register_mr(DST_VA, random(MEM), remote).unwrap();
        Setup {
            pair,
            conn,
            src_a,
            dst_a,
            dst_b,
        }
    }

    pub fn rc() -> Setup {
        Self::new(
            QpType::Rc,
            &ConnectOptions::default(),
            LinkConfig::default(),
            1,
        )
    }

    pub fn src_a(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: SRC_VA + offset,
            length: len,
            lkey: self.src_a,
        }
    }

    pub fn dst_a(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: DST_VA + offset,
            length: len,
            lkey: self.dst_a,
        }
    }

    pub fn dst_b(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: DST_VA + offset,
            length: len,
            lkey: self.dst_b,
        }
    }

    /// A posts `op` gathering `len` bytes from its source region at `offset`.
    pub fn post_a(&mut self, wr_id: u64, op: SendOp, offset: u64, len: u32) {
        let sge = if op.needs_response() {
            self.dst_a(offset, len)
        } else {
            self.src_a(offset, len)
        };
        let wr = SendWr::new(wr_id, op, vec![sge]);
        self.pair.a.post_send(self.conn.qp_a, wr).unwrap();
    }

    /// B posts a receive into its destination region.
    pub fn recv_b(&mut self, wr_id: u64, offset: u64, len: u32) {
        let wr = RecvWr::new(wr_id, vec![self.dst_b(offset, len)]);
        self.pair.b.post_recv(self.conn.qp_b, wr).unwrap();
    }

    pub fn write_op(&self, offset: u64) -> SendOp {
        SendOp::Write {
            remote_addr: DST_VA + offset,
            rkey: self.dst_b,
        }
    }

    pub fn read_op(&self, offset: u64) -> SendOp {
        SendOp::Read {
            remote_addr: DST_VA + offset,
            rkey: self.dst_b,
        }
    }

    /// Runs until A has `n` completions (or 10 virtual seconds pass) and returns them.
    pub fn completions_a(&mut self, n: usize) -> Vec<WorkCompletion> {
        drain(&mut self.pair, n, true, self.conn.cq_a)
    }

    pub fn completions_b(&mut self, n: usize) -> Vec<WorkCompletion> {
        drain(&mut self.pair, n, false, self.conn.cq_b)
    }

    pub fn a_bytes(&self, key: u32) -> &[u8] {
        self.pair.a.mr(key).unwrap().bytes()
    }

    pub fn b_bytes(&self, key: u32) -> &[u8] {
        self.pair.b.mr(key).unwrap().bytes()
    }
}

fn drain(pair: &mut Pair, n: usize, a: bool, cq: super::CqId) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let limit = pair.now() + Duration::from_secs(10);
    pair.run_until(limit, |p| {
        let engine = if a { &mut p.a } else { &mut p.b };
        while let Some(wc) = engine.poll_completion(cq) {
            out.push(wc);
        }
        out.len() >= n
    });
    out
}

/// Drops the first `n` packets `side` sends that `pick` selects.
pub fn drop_first(
    s: &mut Setup,
    side: Side,
    mut n: usize,
    pick: impl Fn(&IbPacketRepr<'_>) -> bool + 'static,
) {
    s.pair.filter = Some(Box::new(move |from, bytes| {
        if from != side || n == 0 {
            return true;
        }
        match IbPacketRepr::parse(bytes) {
            Ok(p) if pick(&p) => {
                n -= 1;
                false
            }
            _ => true,
        }
    }));
}

/// Time far enough ahead for any test to finish.
pub fn later(pair: &Pair, secs: u64) -> Instant {
    pair.now() + Duration::from_secs(secs)
}
