//! `ibv_srq_pingpong` (rdma-core 44.0): `num_qp` RC QPs (default 16) whose receives all
//! come from one shared receive queue of `rx_depth` entries.
//!
//! The exchange is the other tools' message, but [`SRQ_MAX_QP`] of them each way whatever
//! the QP count (the slots of missing QPs all zeros), then the client's `"done"`; the
//! server connects every QP between reading and answering. The loop (`main()`): the client
//! posts one SEND on every QP; a QP sends again once both its last SEND and a receive on it
//! have completed, while fewer than `iters` SENDs have completed in all; the SRQ is
//! refilled to `rx_depth` once `num_qp` or fewer receives are left. Both sides stop when
//! `iters` SENDs and `iters` receives have completed, counted over all QPs (a few more
//! SENDs than `iters` may be in flight then, as in the tool), and print the tools' lines.

use std::io::Write;
use std::time::Instant;

use super::{CHECK_PAGE, PingpongOptions, PingpongSummary, RECV_WRID, SEND_WRID, connect_to};
use crate::endpoint::app::{AppError, check_mtu, local_gid, random_psn};
use crate::endpoint::connect::QpPath;
use crate::endpoint::oob::pingpong::{Dest, SRQ_MAX_QP, ServerExchange, client_exchange_many};
use crate::endpoint::oob::{accept, connect, listen};
use crate::endpoint::runtime::{Runtime, RuntimeError};
use crate::transport::{Access, PdId, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, SrqInit};
use crate::wire::Qpn;

/// Where the buffer appears to the engine.
const BUF_VA: u64 = 0x10_0000;

/// `ibv_srq_pingpong`'s refusals, before anything is opened.
pub fn check_options(opts: &PingpongOptions, num_qp: u32) -> Result<(), AppError> {
    if num_qp == 0 || num_qp as usize >= SRQ_MAX_QP {
        return Err(AppError::Usage(format!(
            "num_qp {num_qp} must be from 1 to {}",
            SRQ_MAX_QP - 1
        )));
    }
    if num_qp > opts.rx_depth {
        return Err(AppError::Usage(format!(
            "rx_depth {} is too small for {num_qp} QPs -- must have at least one receive per QP.",
            opts.rx_depth
        )));
    }
    Ok(())
}

/// Runs `ibv_srq_pingpong`'s test with `num_qp` QPs as client or server.
pub fn run(
    rt: &mut Runtime,
    opts: &PingpongOptions,
    num_qp: u32,
    out: &mut dyn Write,
) -> Result<PingpongSummary, AppError> {
    check_options(opts, num_qp)?;
    check_mtu(rt, opts.mtu)?;
    let key = rt.register_mr(BUF_VA, vec![0x7b; opts.size as usize], Access::LOCAL_WRITE)?;
    let cq = rt.create_cq((opts.rx_depth + num_qp) as usize);
    let srq = rt
        .host_mut()
        .engine_mut()
        .create_srq(SrqInit::new(PdId::DEFAULT, opts.rx_depth))
        .map_err(RuntimeError::from)?;
    let sge = vec![Sge {
        addr: BUF_VA,
        length: opts.size,
        lkey: key,
    }];
    let recv = RecvWr::new(RECV_WRID, sge.clone());
    let post_recvs = |rt: &mut Runtime, n: u32| -> Result<(), AppError> {
        for _ in 0..n {
            let posted = rt.host_mut().engine_mut().post_srq_recv(srq, recv.clone());
            posted.map_err(RuntimeError::from)?;
        }
        Ok(())
    };
    post_recvs(rt, opts.rx_depth)?;
    let mut routs = opts.rx_depth;

    let gid = local_gid(rt, opts.gid_index)?;
    let mut qps = Vec::with_capacity(num_qp as usize);
    let mut me = Vec::with_capacity(num_qp as usize);
    for _ in 0..num_qp {
        let mut init = QpInit::new(QpType::Rc, cq);
        init.srq = Some(srq);
        init.max_send_wr = 1;
        init.max_recv_wr = opts.rx_depth;
        let qpn = rt.create_qp(init)?;
        let dest = Dest {
            lid: 0,
            qpn,
            psn: random_psn(),
            gid,
        };
        let mut path = QpPath::new(
            QpType::Rc,
            gid.into(),
            Qpn::new(0),
            dest.psn,
            dest.psn,
            opts.mtu,
        );
        path.access = Access::NONE;
        rt.init_qp(qpn, &path)?;
        let _ = writeln!(out, "  local address:  {dest}");
        qps.push((qpn, path));
        me.push(dest);
    }

    let timeout = Some(opts.timeout);
    let n = num_qp as usize;
    let peers = match &opts.server {
        Some(server) => {
            let target = (server.as_str(), opts.port);
            rt.serve_while(|| {
                let stream = connect(target, opts.timeout)?;
                client_exchange_many(stream, &me, SRQ_MAX_QP, timeout)
            })??
        }
        None => {
            let listener = listen(opts.port)?;
            let exchange = rt.serve_while(|| {
                let stream = accept(&listener, timeout)?;
                ServerExchange::accept_many(stream, n, SRQ_MAX_QP, timeout)
            })??;
            // pp_server_exch_dest connects every QP before answering.
            for ((qpn, path), peer) in qps.iter_mut().zip(exchange.peers()) {
                connect_to(rt, *qpn, path, peer)?;
            }
            rt.serve_while(|| exchange.reply_many(&me))??
        }
    };
    for peer in &peers {
        let _ = writeln!(out, "  remote address: {peer}");
    }
    let client = opts.server.is_some();
    if client {
        for ((qpn, path), peer) in qps.iter_mut().zip(&peers) {
            connect_to(rt, *qpn, path, peer)?;
        }
        if opts.validate
            && let Some(buf) = rt.mr_bytes_mut(key)
        {
            for i in (0..opts.size as usize).step_by(CHECK_PAGE) {
                buf[i] = 0;
            }
        }
    }
    let send = SendWr::new(SEND_WRID, SendOp::Send, sge);
    let mut pending = vec![RECV_WRID; n];
    if client {
        for (i, (qpn, _)) in qps.iter().enumerate() {
            rt.post_send(*qpn, send.clone())?;
            pending[i] |= SEND_WRID;
        }
    }
    let start = Instant::now();
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    while rcnt < opts.iters || scnt < opts.iters {
        let wc = super::next_completion(rt, cq, opts, rcnt, scnt)?;
        let Some(qp) = qps.iter().position(|(qpn, _)| *qpn == wc.qp_num) else {
            return Err(AppError::Invalid(format!(
                "Couldn't find QPN {:06x}",
                wc.qp_num.value()
            )));
        };
        match wc.wr_id {
            SEND_WRID => scnt += 1,
            RECV_WRID => {
                routs -= 1;
                if routs <= num_qp {
                    post_recvs(rt, opts.rx_depth - routs)?;
                    routs = opts.rx_depth;
                }
                rcnt += 1;
            }
            other => return Err(AppError::UnknownWrId(other)),
        }
        pending[qp] &= !wc.wr_id;
        if scnt < opts.iters && pending[qp] == 0 {
            rt.post_send(qps[qp].0, send.clone())?;
            pending[qp] = RECV_WRID | SEND_WRID;
        }
    }
    super::finish(rt, opts, start, (key, 0), "", out)
}
