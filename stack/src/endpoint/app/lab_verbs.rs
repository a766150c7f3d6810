//! The exchanges of `lab_verbs` (tests/lab/lab_verbs.c) on our runtime, either side, for the
//! operations the standard tools do not make: SEND with Invalidate of a type 2 memory window
//! (`send_inv`), ATOMIC WRITE (`atomic_write`) and FLUSH (`flush`, and `flush_denied`: a FLUSH
//! the region does not grant). The out-of-band exchange is
//! [`crate::endpoint::oob::lab_verbs`]; what each side does and checks is lab_verbs' own:
//!
//! - `send_inv`: the server binds a type 2 window over its first `size` bytes and sends the
//!   window's R_Key; the client WRITEs `size` bytes of 0x5a through it, SENDs `size` bytes of
//!   0x3c with Invalidate of it, then WRITEs 0xa5 through it again, which must complete with
//!   a remote access error. The server's receive must complete with the window's R_Key as
//!   invalidated, and its window must hold the 0x5a bytes, none of the 0xa5 ones.
//! - `atomic_write`: `iters` ATOMIC WRITEs of 0x1122334455667700 + i to the server's word i,
//!   which the server checks.
//! - `flush`: `iters` times an RDMA WRITE of `size` bytes (i + 1 each) to slot i and a FLUSH
//!   (global visibility, that range); the server's region and QP allow FLUSH_GLOBAL; it checks
//!   the data.
//! - `flush_denied`: one WRITE and FLUSH to a region without FLUSH_GLOBAL (the QP allows it):
//!   the FLUSH must complete with a remote access error (IBA 1.5, A19).

use core::time::Duration;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

use super::{AppError, check, check_mtu, local_gid, peer_addr, random_psn, wait_or_stall};
use crate::endpoint::connect::QpPath;
use crate::endpoint::oob::lab_verbs::{ConnInfo, DEFAULT_PORT, LabChannel};
use crate::endpoint::oob::{accept, connect, listen};
use crate::endpoint::runtime::{Runtime, RuntimeError};
use crate::transport::{
    Access, CqId, Mtu, MwBind, MwType, PdId, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WcOpcode,
    WcStatus, WorkCompletion, inc_rkey,
};
use crate::wire::Qpn;
use crate::wire::feth::{placement, selectivity};

/// Where our buffer appears to the peer (any page-aligned address does).
const BUF_VA: u64 = 0x10_0000;

/// The operations of lab_verbs this side speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabOp {
    /// SEND with Invalidate of a type 2 window's R_Key, then a WRITE the peer must refuse.
    SendInv,
    /// ATOMIC WRITE (IBA 1.5) of one 8-byte word each.
    AtomicWrite,
    /// RDMA WRITE then FLUSH (IBA 1.5, global visibility) of each slot.
    Flush,
    /// A FLUSH to a region without flush rights: a remote access error.
    FlushDenied,
}

impl LabOp {
    /// lab_verbs' name of the operation.
    pub const fn name(self) -> &'static str {
        match self {
            LabOp::SendInv => "send_inv",
            LabOp::AtomicWrite => "atomic_write",
            LabOp::Flush => "flush",
            LabOp::FlushDenied => "flush_denied",
        }
    }

    /// Every operation, in lab_verbs' order.
    pub const ALL: [LabOp; 4] = [
        LabOp::SendInv,
        LabOp::AtomicWrite,
        LabOp::Flush,
        LabOp::FlushDenied,
    ];

    /// The rights of the buffer's region.
    fn mr_access(self) -> Access {
        let base = Access::LOCAL_WRITE
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_READ);
        match self {
            LabOp::SendInv => base.union(Access::MW_BIND),
            LabOp::Flush => base.union(Access::FLUSH_GLOBAL),
            LabOp::AtomicWrite | LabOp::FlushDenied => base,
        }
    }

    /// What the peer may do through our QP.
    fn qp_access(self) -> Access {
        let base = Access::LOCAL_WRITE
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_READ);
        match self {
            LabOp::Flush | LabOp::FlushDenied => base.union(Access::FLUSH_GLOBAL),
            LabOp::SendInv | LabOp::AtomicWrite => base,
        }
    }
}

impl fmt::Display for LabOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LabOp {
    type Err = String;
    fn from_str(s: &str) -> Result<LabOp, String> {
        LabOp::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| {
                format!("{s:?} is not an operation: send_inv, atomic_write, flush, flush_denied")
            })
    }
}

/// What `roce lab-verbs` runs: lab_verbs' options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabVerbsOptions {
    /// The operation.
    pub op: LabOp,
    /// The server to connect to; `None` to be the server.
    pub server: Option<String>,
    /// The TCP port of the exchange (`-p`).
    pub port: u16,
    /// Operations (`-n`; `send_inv` and `flush_denied` make one).
    pub iters: u32,
    /// Bytes of each WRITE, SEND and FLUSH (`-s`; `atomic_write`: 8).
    pub size: u32,
    /// Path MTU (`-m`).
    pub mtu: Mtu,
    /// The GID index to send from (`-g`).
    pub gid_index: usize,
    /// Longest wait for the peer: TCP connect, each exchange step, each completion.
    pub timeout: Duration,
    /// How long to keep answering after the end, so that the peer's last retransmissions
    /// still find us.
    pub linger: Duration,
}

impl LabVerbsOptions {
    /// lab_verbs' defaults: `-n 5 -s 64 -m 1024 -g 1 -p 18600`.
    pub fn new(op: LabOp, server: Option<String>) -> LabVerbsOptions {
        LabVerbsOptions {
            op,
            server,
            port: DEFAULT_PORT,
            iters: 5,
            size: 64,
            mtu: Mtu::M1024,
            gid_index: 1,
            timeout: Duration::from_secs(60),
            linger: Duration::from_millis(300),
        }
    }

    /// Slots of `size` bytes in the buffer: `send_inv` one behind the window and one for the
    /// receive; `flush_denied` one.
    fn slots(&self) -> u32 {
        match self.op {
            LabOp::SendInv => 2,
            LabOp::FlushDenied => 1,
            LabOp::AtomicWrite | LabOp::Flush => self.iters,
        }
    }

    fn slot_len(&self) -> u32 {
        if self.op == LabOp::AtomicWrite {
            8
        } else {
            self.size
        }
    }
}

/// The value ATOMIC WRITE `i` writes (lab_verbs' `aw_value`).
pub fn aw_value(i: u32) -> u64 {
    0x1122_3344_5566_7700 + u64::from(i)
}

/// The QP, its buffer and its peer, as both roles use them.
struct Side<'a> {
    rt: &'a mut Runtime,
    opts: &'a LabVerbsOptions,
    qpn: Qpn,
    cq: CqId,
    key: u32,
    chan: LabChannel,
    done: u32,
}

impl Side<'_> {
    /// The next completion, which must be `opcode` and a success.
    fn expect(&mut self, what: &str, opcode: WcOpcode) -> Result<WorkCompletion, AppError> {
        let wc = self.next(what)?;
        check(&wc)?;
        if wc.opcode != opcode {
            return Err(AppError::Invalid(format!(
                "{what}: completion of {:?}, expected {opcode:?}",
                wc.opcode
            )));
        }
        self.done += 1;
        Ok(wc)
    }

    /// The next completion, which must be a remote access error; prints `what: STATUS`.
    fn expect_refused(&mut self, what: &str, out: &mut dyn Write) -> Result<(), AppError> {
        let wc = self.next(what)?;
        let _ = writeln!(out, "{what}: {}", wc.status.name());
        if wc.status != WcStatus::RemAccessErr {
            return Err(AppError::Invalid(format!(
                "{what}: completed with {}, expected REM_ACCESS_ERR",
                wc.status.name()
            )));
        }
        Ok(())
    }

    /// The next completion, whatever its status.
    fn next(&mut self, what: &str) -> Result<WorkCompletion, AppError> {
        let done = self.done;
        wait_or_stall(self.rt, self.cq, self.opts.timeout, || {
            format!("waiting for {what} after {done} completions")
        })
    }

    fn post(&mut self, wr_id: u64, op: SendOp, sg: Option<(u64, u32)>) -> Result<(), AppError> {
        let sg_list = sg
            .map(|(addr, length)| {
                vec![Sge {
                    addr,
                    length,
                    lkey: self.key,
                }]
            })
            .unwrap_or_default();
        self.rt
            .post_send(self.qpn, SendWr::new(wr_id, op, sg_list))?;
        Ok(())
    }

    fn buf(&mut self) -> &mut [u8] {
        self.rt.mr_bytes_mut(self.key).unwrap_or_default()
    }

    /// Sends `byte` while the runtime keeps answering the peer.
    fn send_byte(&mut self, byte: u8, step: &'static str) -> Result<(), AppError> {
        let chan = &mut self.chan;
        self.rt.serve_while(|| chan.send_byte(byte, step))??;
        Ok(())
    }

    /// Waits for `byte` while the runtime keeps answering the peer.
    fn expect_byte(&mut self, byte: u8, step: &'static str) -> Result<(), AppError> {
        let chan = &mut self.chan;
        self.rt.serve_while(|| chan.expect_byte(byte, step))??;
        Ok(())
    }
}

/// Runs one lab_verbs exchange as client or server; prints lab_verbs' lines to `out`.
pub fn run(rt: &mut Runtime, opts: &LabVerbsOptions, out: &mut dyn Write) -> Result<(), AppError> {
    if !(1..=1000).contains(&opts.iters) || !(1..=1 << 20).contains(&opts.size) {
        return Err(AppError::Usage(
            "-n must be 1..=1000 and -s 1..=1048576 (lab_verbs' limits)".into(),
        ));
    }
    check_mtu(rt, opts.mtu)?;
    let slot = opts.slot_len();
    let buf_len = opts.slots() as usize * slot as usize;
    let key = rt.register_mr(BUF_VA, vec![0; buf_len], opts.op.mr_access())?;
    let cq = rt.create_cq(2 * opts.iters as usize + 8);
    let mut init = QpInit::new(QpType::Rc, cq);
    init.max_send_wr = 2 * opts.iters + 4;
    init.max_recv_wr = opts.iters;
    let qpn = rt.create_qp(init)?;
    let gid = local_gid(rt, opts.gid_index)?;
    let psn = random_psn();
    let mut path = QpPath::new(QpType::Rc, gid.into(), Qpn::new(0), psn, psn, opts.mtu);
    path.access = opts.op.qp_access();
    rt.init_qp(qpn, &path)?;
    let mut me = ConnInfo {
        qpn,
        psn,
        rkey: key,
        addr: BUF_VA,
        gid,
    };
    let server = opts.server.is_none();
    // The server's window is bound once its QP is in RTS, so its conn_info waits for it.
    let window = if server && opts.op == LabOp::SendInv {
        let mw = rt
            .host_mut()
            .engine_mut()
            .alloc_mw(PdId::DEFAULT, MwType::Type2);
        Some(mw.map_err(RuntimeError::from)?)
    } else {
        None
    };
    let timeout = Some(opts.timeout);
    let mut chan = match &opts.server {
        Some(host) => {
            let target = (host.as_str(), opts.port);
            rt.serve_while(|| LabChannel::new(connect(target, opts.timeout)?, timeout))??
        }
        None => {
            let listener = listen(opts.port)?;
            let _ = writeln!(out, "listening on port {}", opts.port);
            rt.serve_while(|| LabChannel::new(accept(&listener, timeout)?, timeout))??
        }
    };
    if window.is_none() {
        rt.serve_while(|| chan.send_info(&me))??;
    }
    let peer = rt.serve_while(|| chan.recv_info())??;
    path.dest = peer_addr(peer.gid)?;
    path.dest_qp = peer.qpn;
    path.rq_psn = peer.psn;
    rt.connect_qp(qpn, &path)?;
    let mut side = Side {
        rt,
        opts,
        qpn,
        cq,
        key,
        chan,
        done: 0,
    };
    if let Some(mw) = window {
        let rkey = inc_rkey(mw);
        let bind = MwBind::new(
            key,
            BUF_VA,
            u64::from(slot),
            Access::REMOTE_WRITE.union(Access::REMOTE_READ),
        );
        side.post(100, SendOp::BindMw { mw, rkey, bind }, None)?;
        side.expect("BIND_MW", WcOpcode::BindMw)?;
        me.rkey = rkey;
        let _ = writeln!(
            out,
            "type 2 window bound: R_Key {rkey:#010x} over {slot} bytes (region's R_Key {key:#010x})"
        );
        let chan = &mut side.chan;
        side.rt.serve_while(|| chan.send_info(&me))??;
    }
    let _ = writeln!(
        out,
        "local QPN {:#08x} PSN {:#08x}, remote QPN {:#08x} PSN {:#08x}",
        qpn.value(),
        psn.value(),
        peer.qpn.value(),
        peer.psn.value()
    );
    if server {
        server_checks(&mut side, me.rkey, out)?;
    } else {
        client_ops(&mut side, &peer, out)?;
    }
    side.rt.serve_for(opts.linger)?;
    Ok(())
}

/// The client's operations, then `D` both ways.
fn client_ops(side: &mut Side<'_>, peer: &ConnInfo, out: &mut dyn Write) -> Result<(), AppError> {
    let opts = side.opts;
    let (rkey, raddr, size) = (peer.rkey, peer.addr, opts.size);
    side.expect_byte(b'R', "waiting for the server's 'R'")?;
    match opts.op {
        LabOp::SendInv => {
            let (first, second) = side.buf().split_at_mut(size as usize);
            first.fill(0x5a);
            second.fill(0x3c);
            let write = SendOp::Write {
                remote_addr: raddr,
                rkey,
            };
            side.post(1, write, Some((BUF_VA, size)))?;
            side.expect("RDMA_WRITE through the window", WcOpcode::RdmaWrite)?;
            let inv = SendOp::SendWithInv { rkey };
            side.post(2, inv, Some((BUF_VA + u64::from(size), size)))?;
            side.expect("SEND_WITH_INV", WcOpcode::Send)?;
            side.buf()[..size as usize].fill(0xa5);
            side.post(3, write, Some((BUF_VA, size)))?;
            let what = format!("RDMA_WRITE with R_Key {rkey:#010x} after SEND_WITH_INV");
            side.expect_refused(&what, out)?;
            let _ = writeln!(
                out,
                "WRITE, SEND_WITH_INV of R_Key {rkey:#010x}, WRITE refused: as expected"
            );
        }
        LabOp::AtomicWrite => {
            for i in 0..opts.iters {
                let op = SendOp::AtomicWrite {
                    remote_addr: raddr + 8 * u64::from(i),
                    rkey,
                    value: aw_value(i),
                };
                side.post(u64::from(i), op, None)?;
            }
            for _ in 0..opts.iters {
                side.expect("ATOMIC_WRITE", WcOpcode::AtomicWrite)?;
            }
            let _ = writeln!(out, "{} ATOMIC_WRITE work requests completed", opts.iters);
        }
        LabOp::Flush | LabOp::FlushDenied => {
            let slots = opts.slots();
            for (i, b) in side.buf().iter_mut().enumerate() {
                *b = (i / size as usize + 1) as u8;
            }
            for i in 0..slots {
                let at = raddr + u64::from(i) * u64::from(size);
                let local = BUF_VA + u64::from(i) * u64::from(size);
                let write = SendOp::Write {
                    remote_addr: at,
                    rkey,
                };
                side.post(2 * u64::from(i), write, Some((local, size)))?;
                let flush = SendOp::Flush {
                    remote_addr: at,
                    rkey,
                    len: size,
                    placement: placement::GLOBAL,
                    selectivity: selectivity::RANGE,
                };
                side.post(2 * u64::from(i) + 1, flush, None)?;
            }
            for _ in 0..slots {
                side.expect("RDMA_WRITE", WcOpcode::RdmaWrite)?;
                if opts.op == LabOp::Flush {
                    side.expect("FLUSH", WcOpcode::Flush)?;
                    continue;
                }
                side.expect_refused("FLUSH to a region without IBV_ACCESS_FLUSH_GLOBAL", out)?;
            }
            if opts.op == LabOp::Flush {
                let _ = writeln!(
                    out,
                    "{} RDMA_WRITE + FLUSH (global visibility) pairs completed",
                    opts.iters
                );
            }
        }
    }
    side.send_byte(b'D', "sending 'D'")?;
    side.expect_byte(b'D', "waiting for the server's 'D'")
}

/// The server's side: ready, the peer's operations, the checks of our memory, `D`.
fn server_checks(side: &mut Side<'_>, rkey: u32, out: &mut dyn Write) -> Result<(), AppError> {
    let opts = side.opts;
    let size = opts.size as usize;
    if opts.op == LabOp::SendInv {
        let sge = Sge {
            addr: BUF_VA + size as u64,
            length: opts.size,
            lkey: side.key,
        };
        side.rt.post_recv(side.qpn, RecvWr::new(7, vec![sge]))?;
        side.send_byte(b'R', "sending 'R'")?;
        let wc = side.expect("the receive of SEND_WITH_INV", WcOpcode::Recv)?;
        if wc.invalidated_rkey != Some(rkey) || wc.byte_len != opts.size {
            return Err(AppError::Invalid(format!(
                "receive: {} bytes, invalidated R_Key {:?}; expected {} bytes and {rkey:#010x}",
                wc.byte_len, wc.invalidated_rkey, opts.size
            )));
        }
        let _ = writeln!(out, "receive completed, invalidated R_Key {rkey:#010x}");
        side.expect_byte(b'D', "waiting for the client's 'D'")?;
        let buf = side.buf();
        if let Some(i) = (0..size).find(|&i| buf[i] != 0x5a || buf[size + i] != 0x3c) {
            let landed = if buf[i] == 0xa5 {
                ": the WRITE after the invalidation landed"
            } else {
                ""
            };
            return Err(AppError::Invalid(format!(
                "byte {i}: {:#04x} (window) / {:#04x} (receive), expected 0x5a / 0x3c{landed}",
                buf[i],
                buf[size + i]
            )));
        }
        let _ = writeln!(
            out,
            "window holds the first WRITE's bytes, none of the refused one's"
        );
    } else {
        side.send_byte(b'R', "sending 'R'")?;
        side.expect_byte(b'D', "waiting for the client's 'D'")?;
        let buf = side.buf();
        if opts.op == LabOp::AtomicWrite {
            for (i, word) in (0..opts.iters).zip(buf.chunks_exact(8)) {
                let mut v = [0u8; 8];
                v.copy_from_slice(word);
                // ATOMIC WRITE carries the requester's bytes as they are in its memory.
                let v = u64::from_le_bytes(v);
                if v != aw_value(i) {
                    return Err(AppError::Invalid(format!(
                        "word {i} is {v:#018x}, expected {:#018x}",
                        aw_value(i)
                    )));
                }
            }
            let _ = writeln!(
                out,
                "{} words written by ATOMIC_WRITE, each as expected",
                opts.iters
            );
        } else {
            if let Some(i) = (0..buf.len()).find(|&i| buf[i] != (i / size + 1) as u8) {
                return Err(AppError::Invalid(format!(
                    "byte {i} differs from what the client wrote"
                )));
            }
            let _ = writeln!(
                out,
                "{} slots written and flushed, data as expected",
                opts.slots()
            );
        }
    }
    side.send_byte(b'D', "sending 'D'")
}

#[cfg(test)]
mod tests {
    use super::super::testing::{free_port, runtime, wait_for_listener};
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryLinkConfig};
    use std::thread;

    type Side = Result<String, (AppError, String)>;

    /// Our client against our server over the in-memory link, TCP over loopback.
    fn exchange(op: LabOp, iters: u32, size: u32) -> (Side, Side) {
        exchange_icrc(op, iters, size, (false, false), Duration::from_secs(20))
    }

    /// [`exchange`], each side sending (and accepting) rxe's FLUSH ICRC as `rxe_icrc` says.
    fn exchange_icrc(
        op: LabOp,
        iters: u32,
        size: u32,
        rxe_icrc: (bool, bool),
        timeout: Duration,
    ) -> (Side, Side) {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let port = free_port();
        let mut opts = LabVerbsOptions::new(op, None);
        opts.port = port;
        opts.iters = iters;
        opts.size = size;
        opts.timeout = timeout;
        opts.linger = Duration::from_millis(100);
        let server_opts = opts.clone();
        let side = |rt: &mut Runtime, o: &LabVerbsOptions, rxe: bool| {
            rt.host_mut().set_rxe_flush_icrc(rxe);
            let mut out = Vec::new();
            let r = run(rt, o, &mut out);
            let out = String::from_utf8(out).unwrap();
            r.map(|()| out.clone()).map_err(|e| (e, out))
        };
        let server =
            thread::spawn(move || side(&mut runtime(b, "10.0.0.2/24"), &server_opts, rxe_icrc.1));
        wait_for_listener(port);
        opts.server = Some("127.0.0.1".into());
        let client = side(&mut runtime(a, "10.0.0.1/24"), &opts, rxe_icrc.0);
        (client, server.join().unwrap())
    }

    /// Both ends on rxe's FLUSH ICRC agree, as two rxe do; one end alone drops the other's
    /// FLUSH as a bad ICRC, so the FLUSH (wr_id 1) runs out of retries.
    #[test]
    fn rxe_flush_icrc_works_only_when_both_ends_use_it() {
        let (client, server) =
            exchange_icrc(LabOp::Flush, 2, 100, (true, true), Duration::from_secs(20));
        assert!(client.unwrap().contains("2 RDMA_WRITE + FLUSH"));
        assert!(server.is_ok());
        let (client, _) =
            exchange_icrc(LabOp::Flush, 1, 100, (true, false), Duration::from_secs(2));
        let (e, _) = client.unwrap_err();
        assert!(
            e.to_string().contains("RETRY_EXC_ERR (12) for wr_id 1"),
            "{e}"
        );
    }

    #[test]
    fn atomic_write_lands_each_word_at_the_server() {
        let (client, server) = exchange(LabOp::AtomicWrite, 6, 64);
        assert!(
            client
                .unwrap()
                .contains("6 ATOMIC_WRITE work requests completed")
        );
        assert!(server.unwrap().contains("6 words written by ATOMIC_WRITE"));
    }

    #[test]
    fn flush_after_each_write_completes_and_the_data_is_there() {
        let (client, server) = exchange(LabOp::Flush, 3, 3000);
        assert!(client.unwrap().contains("3 RDMA_WRITE + FLUSH"));
        assert!(server.unwrap().contains("3 slots written and flushed"));
    }

    #[test]
    fn flush_without_flush_rights_is_a_remote_access_error() {
        let (client, server) = exchange(LabOp::FlushDenied, 5, 100);
        let out = client.unwrap();
        assert!(out.contains("FLUSH_GLOBAL: REM_ACCESS_ERR"), "{out}");
        assert!(server.unwrap().contains("1 slots written and flushed"));
    }

    #[test]
    fn send_with_invalidate_kills_the_window_for_the_next_write() {
        let (client, server) = exchange(LabOp::SendInv, 1, 1500);
        let out = client.unwrap();
        assert!(out.contains("after SEND_WITH_INV: REM_ACCESS_ERR"), "{out}");
        let out = server.unwrap();
        assert!(out.contains("type 2 window bound"), "{out}");
        assert!(out.contains("invalidated R_Key"), "{out}");
        assert!(out.contains("none of the refused one's"), "{out}");
    }

    #[test]
    fn options_beyond_lab_verbs_limits_are_refused_in_one_line() {
        let (a, _b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut opts = LabVerbsOptions::new(LabOp::Flush, None);
        opts.iters = 0;
        let e = run(&mut runtime(a, "10.0.0.1/24"), &opts, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("-n must be 1..=1000"), "{e}");
        assert_eq!("flush".parse::<LabOp>(), Ok(LabOp::Flush));
        assert!(
            "fetch_add"
                .parse::<LabOp>()
                .unwrap_err()
                .contains("not an operation")
        );
    }
}
