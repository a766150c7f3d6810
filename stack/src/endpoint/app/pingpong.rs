//! `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong` (rdma-core 44.0) on our
//! runtime: the same options and defaults, the same out-of-band exchange
//! ([`crate::endpoint::oob::pingpong`]), the same completion loop and the same lines.
//!
//! The loop (`main()` of each tool): one buffer of `size` bytes (UD: 40 more for the GRH)
//! serves both the send and the `rx_depth` receives; the client posts the first SEND; each
//! side posts its next SEND once both its last SEND and a receive have completed, until
//! `iters` of each. Receives are topped up when at most one is left. Both sides print
//! `size * iters * 2` bytes over the elapsed time.

use core::time::Duration;
use std::io::Write;
use std::time::Instant;

use super::{AppError, check, check_mtu, local_gid, peer_addr, random_psn};
use crate::endpoint::connect::QpPath;
use crate::endpoint::oob::pingpong::{Dest, ServerExchange, Tool, UD_QKEY, client_exchange};
use crate::endpoint::oob::{accept, connect, listen};
use crate::endpoint::runtime::Runtime;
use crate::transport::{
    Access, CqId, GRH_LEN, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WorkCompletion,
};
use crate::wire::Qpn;

mod srq;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// Where our buffer appears to the engine (any page-aligned address does).
const BUF_VA: u64 = 0x10_0000;

/// What `roce pingpong` runs: the rdma-core pingpong tools' options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingpongOptions {
    /// Which of the three tools (RC, UC or UD).
    pub tool: Tool,
    /// The server to connect to; `None` to be the server.
    pub server: Option<String>,
    /// The TCP port of the exchange (`-p`).
    pub port: u16,
    /// Message size (`-s`).
    pub size: u32,
    /// Round trips (`-n`).
    pub iters: u32,
    /// Receives kept posted (`-r`).
    pub rx_depth: u32,
    /// Path MTU of RC and UC (ignored by UD, which uses the port's).
    pub mtu: Mtu,
    /// The GID index to send from (`-g`).
    pub gid_index: usize,
    /// Longest wait for the peer: TCP connect and each exchange step, each completion.
    pub timeout: Duration,
    /// How long to keep answering after the last completion, so that the peer's last
    /// retransmissions still find us (the tools' QPs live until they exit).
    pub linger: Duration,
    /// `-c` (`--chk`): the client puts the tools' check pattern in what it sends (a 0 at
    /// the start of every page of the payload) and the server checks it in what it last
    /// received, printing `invalid data in page N` for each page that lacks it.
    pub validate: bool,
    /// `ibv_srq_pingpong` with this many QPs (`--srq`, `-q`): RC only.
    pub srq_qps: Option<u32>,
    /// `-t` (`--ts`, ibv_rc_pingpong only): the CQ stamps completions and the summary adds
    /// the largest, smallest and mean time between successive receive completions, in
    /// clock cycles of our device's 1 GHz clock (nanoseconds). Nothing on the wire changes.
    pub timestamps: bool,
}

/// The tools' `page_size` for `-c` (sysconf(_SC_PAGESIZE) on x86-64 Linux).
const CHECK_PAGE: usize = 4096;

impl PingpongOptions {
    /// The tool's defaults (its `main()`), as a client of `server` or as the server.
    pub fn new(tool: Tool, server: Option<String>) -> PingpongOptions {
        let d = tool.defaults();
        PingpongOptions {
            tool,
            server,
            port: d.port,
            size: d.size,
            iters: d.iters,
            rx_depth: d.rx_depth,
            mtu: d.mtu.and_then(Mtu::from_bytes).unwrap_or(Mtu::M1024),
            gid_index: 1,
            timeout: Duration::from_secs(60),
            linger: Duration::from_millis(300),
            validate: false,
            srq_qps: None,
            timestamps: false,
        }
    }
}

/// What the tools print at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PingpongSummary {
    /// Message size.
    pub size: u32,
    /// Round trips.
    pub iters: u32,
    /// From the first post to the last completion.
    pub elapsed: Duration,
}

impl PingpongSummary {
    /// `"%lld bytes in %.2f seconds = %.2f Mbit/sec"` and `"%d iters in %.2f seconds =
    /// %.2f usec/iter"`, with the tools' arithmetic (bytes both ways, microseconds).
    pub fn lines(&self) -> String {
        let usec = (self.elapsed.as_nanos() as f64 / 1000.0).max(1.0);
        let bytes = u64::from(self.size) * u64::from(self.iters) * 2;
        format!(
            "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec\n\
             {} iters in {:.2} seconds = {:.2} usec/iter\n",
            usec / 1e6,
            bytes as f64 * 8.0 / usec,
            self.iters,
            usec / 1e6,
            usec / f64::from(self.iters.max(1)),
        )
    }
}

fn qp_type(tool: Tool) -> QpType {
    match tool {
        Tool::RcPingpong => QpType::Rc,
        Tool::UcPingpong => QpType::Uc,
        Tool::UdPingpong => QpType::Ud,
    }
}

/// Runs one pingpong as client or server; prints the tool's lines to `out`.
pub fn run(
    rt: &mut Runtime,
    opts: &PingpongOptions,
    out: &mut dyn Write,
) -> Result<PingpongSummary, AppError> {
    let qp_type = qp_type(opts.tool);
    let ud = qp_type == QpType::Ud;
    if let Some(num_qp) = opts.srq_qps {
        if opts.tool != Tool::RcPingpong {
            return Err(AppError::Usage(
                "--srq is ibv_srq_pingpong, which runs RC QPs only".into(),
            ));
        }
        if opts.iters == 0 || opts.size == 0 {
            return Err(AppError::Usage("size and iters must be positive".into()));
        }
        if opts.timestamps {
            return Err(AppError::Usage(
                "-t is ibv_rc_pingpong's (ibv_srq_pingpong takes no -t)".into(),
            ));
        }
        return srq::run(rt, opts, num_qp, out);
    }
    if opts.timestamps && opts.tool != Tool::RcPingpong {
        return Err(AppError::Usage(
            "-t is ibv_rc_pingpong's (ibv_uc_pingpong and ibv_ud_pingpong take no -t)".into(),
        ));
    }
    if opts.iters == 0 || opts.size == 0 || opts.rx_depth < 2 {
        return Err(AppError::Usage(
            "size and iters must be positive and rx_depth at least 2".into(),
        ));
    }
    let port_mtu = Mtu::for_link_mtu(rt.capabilities().mtu as u32).unwrap_or(Mtu::M256);
    if ud && opts.size > port_mtu.bytes() {
        return Err(AppError::Usage(format!(
            "Requested size larger than port MTU ({})",
            port_mtu.bytes()
        )));
    }
    if !ud {
        check_mtu(rt, opts.mtu)?;
    }
    // ibv_ud_pingpong reserves the GRH's bytes before the payload in its buffer: receives
    // land the GRH there (for RoCEv2 over IPv4, the IPv4 header in its last 20 bytes), so a
    // receive of `size` payload bytes completes with `size + GRH_LEN` bytes.
    let grh = if ud { GRH_LEN as u32 } else { 0 };
    let buf_len = (opts.size + grh) as usize;
    let key = rt.register_mr(BUF_VA, vec![0x7b; buf_len], Access::LOCAL_WRITE)?;
    let cq = if opts.timestamps {
        rt.create_cq_with_timestamps(opts.rx_depth as usize + 1)
    } else {
        rt.create_cq(opts.rx_depth as usize + 1)
    };
    let mut init = QpInit::new(qp_type, cq);
    init.max_send_wr = 1;
    init.max_recv_wr = opts.rx_depth;
    let qpn = rt.create_qp(init)?;

    let gid = local_gid(rt, opts.gid_index)?;
    let me = Dest {
        lid: 0,
        qpn,
        psn: random_psn(),
        gid,
    };
    let mut path = QpPath::new(qp_type, gid.into(), Qpn::new(0), me.psn, me.psn, opts.mtu);
    path.access = Access::NONE;
    path.qkey = UD_QKEY;
    rt.init_qp(qpn, &path)?;
    let recv = RecvWr::new(
        RECV_WRID,
        vec![Sge {
            addr: BUF_VA,
            length: opts.size + grh,
            lkey: key,
        }],
    );
    for _ in 0..opts.rx_depth {
        rt.post_recv(qpn, recv.clone())?;
    }
    let mut routs = opts.rx_depth;

    let sep = if ud { ":" } else { "," };
    let local = me.to_string().replacen(", GID", &format!("{sep} GID"), 1);
    let _ = writeln!(out, "  local address:  {local}");
    let peer = exchange(rt, opts, &me, &mut path)?;
    let _ = writeln!(out, "  remote address: {peer}");
    if opts.server.is_some() {
        connect_to(rt, qpn, &mut path, &peer)?;
    }

    let mut send = SendWr::new(
        SEND_WRID,
        SendOp::Send,
        vec![Sge {
            addr: BUF_VA + u64::from(grh),
            length: opts.size,
            lkey: key,
        }],
    );
    if ud {
        send.ud = Some(UdDest::new(path.dest, peer.qpn, UD_QKEY));
    }
    if opts.validate && opts.server.is_some() {
        // `i / page_size % sizeof(char)`: 0 at each page's first byte.
        if let Some(buf) = rt.mr_bytes_mut(key) {
            for i in (0..opts.size as usize).step_by(CHECK_PAGE) {
                buf[grh as usize + i] = 0;
            }
        }
    }
    let mut pending = RECV_WRID;
    if opts.server.is_some() {
        rt.post_send(qpn, send.clone())?;
        pending |= SEND_WRID;
    }
    // Each completion is answered at once and the loop turns again: our ACK of the peer's
    // SEND leaves with our next SEND.
    rt.set_coalesce_replies(true);
    let start = Instant::now();
    let mut ts = ReceiveGaps::default();
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    while rcnt < opts.iters || scnt < opts.iters {
        let wc = next_completion(rt, cq, opts, rcnt, scnt)?;
        match wc.wr_id {
            SEND_WRID => scnt += 1,
            RECV_WRID => {
                routs -= 1;
                if routs <= 1 {
                    while routs < opts.rx_depth {
                        rt.post_recv(qpn, recv.clone())?;
                        routs += 1;
                    }
                }
                rcnt += 1;
                if let Some(at) = wc.completion_ts {
                    ts.record(at);
                }
            }
            other => return Err(AppError::UnknownWrId(other)),
        }
        pending &= !wc.wr_id;
        if scnt < opts.iters && pending == 0 {
            rt.post_send(qpn, send.clone())?;
            pending = RECV_WRID | SEND_WRID;
        }
    }
    rt.set_coalesce_replies(false);
    finish(rt, opts, start, (key, grh as usize), &ts.lines(), out)
}

/// ibv_rc_pingpong's `struct ts_params`: the gaps between successive receive completions'
/// timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveGaps {
    max: u64,
    min: u64,
    total: u64,
    prev: Option<u64>,
    gaps: u32,
}

impl Default for ReceiveGaps {
    fn default() -> Self {
        // The tool starts its minimum at 0xffffffff.
        ReceiveGaps {
            max: 0,
            min: 0xffff_ffff,
            total: 0,
            prev: None,
            gaps: 0,
        }
    }
}

impl ReceiveGaps {
    /// A receive completion stamped `at`. Our clock's mask is all ones, so the tool's
    /// wrap-around arithmetic is a wrapping subtraction.
    pub fn record(&mut self, at: u64) {
        if let Some(prev) = self.prev {
            let delta = at.wrapping_sub(prev);
            self.max = self.max.max(delta);
            self.min = self.min.min(delta);
            self.total = self.total.wrapping_add(delta);
            self.gaps += 1;
        }
        self.prev = Some(at);
    }

    /// The tool's three lines after the summary; none without a gap measured (fewer than
    /// two receives, or no `-t`).
    pub fn lines(&self) -> String {
        if self.gaps == 0 {
            return String::new();
        }
        format!(
            "Max receive completion clock cycles = {}\n\
             Min receive completion clock cycles = {}\n\
             Average receive completion clock cycles = {:.6}\n",
            self.max,
            self.min,
            self.total as f64 / f64::from(self.gaps)
        )
    }
}

/// The next completion of `cq`, which must be a success, within the timeout.
fn next_completion(
    rt: &mut Runtime,
    cq: CqId,
    opts: &PingpongOptions,
    rcnt: u32,
    scnt: u32,
) -> Result<WorkCompletion, AppError> {
    let wc = rt
        .wait_completion(cq, opts.timeout)
        .map_err(|_| AppError::Stalled {
            after: opts.timeout,
            progress: format!("{rcnt} receives and {scnt} sends of {}", opts.iters),
        })?;
    check(&wc)?;
    Ok(wc)
}

/// The tools' end: the summary lines and `more` (`-t`'s); with -c, the server's check of
/// the last message received (the payload at `offset` in region `key`); the linger.
fn finish(
    rt: &mut Runtime,
    opts: &PingpongOptions,
    start: Instant,
    (key, offset): (u32, usize),
    more: &str,
    out: &mut dyn Write,
) -> Result<PingpongSummary, AppError> {
    let summary = PingpongSummary {
        size: opts.size,
        iters: opts.iters,
        elapsed: start.elapsed(),
    };
    let _ = write!(out, "{}{more}", summary.lines());
    let mut invalid = 0;
    if opts.validate && opts.server.is_none() {
        let buf = rt.mr_bytes(key).unwrap_or(&[]);
        for (page, i) in (0..opts.size as usize).step_by(CHECK_PAGE).enumerate() {
            if buf.get(offset + i) != Some(&0) {
                let _ = writeln!(out, "invalid data in page {page}");
                invalid += 1;
            }
        }
    }
    rt.serve_for(opts.linger)?;
    if invalid > 0 {
        return Err(AppError::Invalid(format!(
            "-c: {invalid} page(s) of the received buffer lacked the check pattern"
        )));
    }
    Ok(summary)
}

/// The out-of-band exchange. A server connects its QP between reading the client's address
/// and answering, as `pp_server_exch_dest` does; a client connects afterwards.
fn exchange(
    rt: &mut Runtime,
    opts: &PingpongOptions,
    me: &Dest,
    path: &mut QpPath,
) -> Result<Dest, AppError> {
    let timeout = Some(opts.timeout);
    match &opts.server {
        Some(server) => {
            let target = (server.as_str(), opts.port);
            let peer = rt.serve_while(|| {
                let stream = connect(target, opts.timeout)?;
                client_exchange(stream, me, timeout)
            })??;
            Ok(peer)
        }
        None => {
            let listener = listen(opts.port)?;
            let exchange = rt.serve_while(|| {
                let stream = accept(&listener, timeout)?;
                ServerExchange::accept(stream, timeout)
            })??;
            let peer = *exchange.peer();
            connect_to(rt, me.qpn, path, &peer)?;
            rt.serve_while(|| exchange.reply(me))??;
            Ok(peer)
        }
    }
}

fn connect_to(rt: &mut Runtime, qpn: Qpn, path: &mut QpPath, peer: &Dest) -> Result<(), AppError> {
    path.dest = peer_addr(peer.gid)?;
    path.dest_qp = peer.qpn;
    path.rq_psn = peer.psn;
    rt.connect_qp(qpn, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{free_port, runtime, wait_for_listener};
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryLinkConfig};
    use std::thread;

    /// Our client against our server over the in-memory link, TCP over loopback.
    fn pingpong(tool: Tool, size: u32) -> (String, String) {
        let (client, server) = pingpong_checked(tool, size, (false, false));
        let (summary, out) = client.unwrap();
        assert_eq!(summary.iters, 50);
        (out, server.unwrap().1)
    }

    type Side = Result<(PingpongSummary, String), (AppError, String)>;

    /// Client and server, `-c` on each as `chk` says; each side's result and output.
    fn pingpong_checked(tool: Tool, size: u32, chk: (bool, bool)) -> (Side, Side) {
        pingpong_srq(tool, size, chk, None)
    }

    /// [`pingpong_checked`], as ibv_srq_pingpong with `srq_qps` QPs when given.
    fn pingpong_srq(
        tool: Tool,
        size: u32,
        chk: (bool, bool),
        srq_qps: Option<u32>,
    ) -> (Side, Side) {
        let mut opts = PingpongOptions::new(tool, None);
        opts.size = size;
        opts.iters = 50;
        opts.rx_depth = 8;
        opts.timeout = Duration::from_secs(20);
        // Long enough that a loaded machine still lets the last ACK or message out.
        opts.linger = Duration::from_millis(100);
        opts.srq_qps = srq_qps;
        let mut server_opts = opts.clone();
        server_opts.validate = chk.1;
        opts.validate = chk.0;
        pingpong_pair(opts, server_opts)
    }

    /// Our client with `opts` against our server with `server_opts` (the port and the
    /// server's address are filled in).
    fn pingpong_pair(mut opts: PingpongOptions, mut server_opts: PingpongOptions) -> (Side, Side) {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let port = free_port();
        (opts.port, server_opts.port) = (port, port);
        let side = |rt: &mut Runtime, o: &PingpongOptions| {
            let mut out = Vec::new();
            let r = run(rt, o, &mut out);
            let out = String::from_utf8(out).unwrap();
            r.map(|s| (s, out.clone())).map_err(|e| (e, out))
        };
        let server = thread::spawn(move || side(&mut runtime(b, "10.0.0.2/24"), &server_opts));
        wait_for_listener(port);
        opts.server = Some("127.0.0.1".into());
        let client = side(&mut runtime(a, "10.0.0.1/24"), &opts);
        (client, server.join().unwrap())
    }

    /// -t on one side only (it changes nothing on the wire): that side prints the gaps
    /// between its receive completions after the summary, in nanoseconds of the runtime's
    /// clock, which the elapsed time bounds; the other side prints none.
    #[test]
    fn ts_prints_receive_completion_gaps() {
        for client_ts in [true, false] {
            let mut opts = PingpongOptions::new(Tool::RcPingpong, None);
            opts.size = 256;
            opts.iters = 50;
            opts.rx_depth = 8;
            opts.timeout = Duration::from_secs(20);
            opts.linger = Duration::from_millis(100);
            let mut server_opts = opts.clone();
            opts.timestamps = client_ts;
            server_opts.timestamps = !client_ts;
            let (client, server) = pingpong_pair(opts, server_opts);
            let (with, without) = if client_ts {
                (client.unwrap(), server.unwrap())
            } else {
                (server.unwrap(), client.unwrap())
            };
            assert!(!without.1.contains("clock cycles"), "{}", without.1);
            let (summary, out) = with;
            let lines: Vec<&str> = out.lines().collect();
            let at = lines.iter().position(|l| l.contains("usec/iter")).unwrap();
            let value = |i: usize, name: &str| -> f64 {
                let line = lines[at + i];
                let prefix = format!("{name} receive completion clock cycles = ");
                assert!(line.starts_with(&prefix), "{out}");
                line[prefix.len()..].parse().unwrap()
            };
            let (max, min, avg) = (value(1, "Max"), value(2, "Min"), value(3, "Average"));
            assert_eq!(lines.len(), at + 4, "{out}");
            assert!(
                lines[at + 3].split('.').nth(1).unwrap().len() == 6,
                "%f: {out}"
            );
            assert!(0.0 < min && min <= avg && avg <= max, "{out}");
            // 49 gaps, all inside the timed loop (the first receive may precede it by
            // less than one round trip).
            let elapsed = summary.elapsed.as_nanos() as f64;
            assert!(
                avg * 49.0 <= elapsed + max,
                "{avg} x 49 vs {elapsed} ns: {out}"
            );
        }
    }

    #[test]
    fn receive_gaps_are_ts_params_arithmetic() {
        let mut g = ReceiveGaps::default();
        g.record(1000);
        assert_eq!(g.lines(), "", "one receive: no gap, no lines");
        for at in [1300, 1400, 2000] {
            g.record(at);
        }
        assert_eq!(
            g.lines(),
            "Max receive completion clock cycles = 600\n\
             Min receive completion clock cycles = 100\n\
             Average receive completion clock cycles = 333.333333\n"
        );
        // A clock that wrapped (mask all ones).
        let mut g = ReceiveGaps::default();
        g.record(u64::MAX - 1);
        g.record(3);
        assert!(
            g.lines()
                .starts_with("Max receive completion clock cycles = 5\n")
        );
    }

    #[test]
    fn ts_is_rc_pingpong_s_only() {
        let (a, _b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut rt = runtime(a, "10.0.0.1/24");
        for (tool, srq) in [
            (Tool::UdPingpong, None),
            (Tool::UcPingpong, None),
            (Tool::RcPingpong, Some(2)),
        ] {
            let mut opts = PingpongOptions::new(tool, None);
            opts.timestamps = true;
            opts.srq_qps = srq;
            match run(&mut rt, &opts, &mut Vec::new()) {
                Err(AppError::Usage(m)) => assert!(m.contains("-t is ibv_rc_pingpong's"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    }

    /// --srq: ibv_srq_pingpong's several QPs on one SRQ, each side printing every QP's
    /// address; 50 round trips in all; -c through it too.
    #[test]
    fn srq_pingpong_runs_several_qps_on_one_srq() {
        let (client, server) = pingpong_srq(Tool::RcPingpong, 5000, (true, true), Some(3));
        let (summary, out) = client.unwrap();
        assert_eq!(summary.iters, 50);
        assert_eq!(out.matches("local address").count(), 3, "{out}");
        assert_eq!(out.matches("remote address").count(), 3, "{out}");
        let (_, server_out) = server.unwrap();
        assert!(server_out.contains("50 iters in"), "{server_out}");
        assert!(!server_out.contains("invalid data"), "{server_out}");
    }

    #[test]
    fn srq_pingpong_refuses_what_the_tool_refuses() {
        let mut opts = PingpongOptions::new(Tool::RcPingpong, None);
        opts.rx_depth = 4;
        let refused = |n| match srq::check_options(&opts, n) {
            Err(AppError::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(refused(5).contains("rx_depth 4 is too small for 5 QPs"));
        assert!(refused(0).contains("1 to 255"));
        assert!(refused(256).contains("1 to 255"));
        assert!(srq::check_options(&opts, 4).is_ok());
    }

    /// -c: the client's pattern (a 0 at each page) passes the server's check; without it
    /// the tools' 0x7b fill fails it, page by page, and the server says so.
    #[test]
    fn chk_validates_the_received_buffer() {
        for tool in [Tool::RcPingpong, Tool::UdPingpong] {
            let size = if tool == Tool::UdPingpong {
                1024
            } else {
                10_000
            };
            let (client, server) = pingpong_checked(tool, size, (true, true));
            assert!(
                client.is_ok() && server.is_ok(),
                "{tool:?} {client:?} {server:?}"
            );
            assert!(!server.unwrap().1.contains("invalid data"));
            let (client, server) = pingpong_checked(tool, size, (false, true));
            assert!(client.is_ok(), "{client:?}");
            let (err, out) = server.unwrap_err();
            let pages = size.div_ceil(4096);
            for page in 0..pages {
                assert!(
                    out.contains(&format!("invalid data in page {page}\n")),
                    "{out}"
                );
            }
            assert!(
                err.to_string().contains(&format!("{pages} page(s)")),
                "{err}"
            );
        }
    }

    #[test]
    fn rc_uc_ud_between_two_runtimes() {
        for (tool, size) in [
            (Tool::RcPingpong, 3000),
            (Tool::UcPingpong, 100),
            (Tool::UdPingpong, 1000),
        ] {
            let (client, server) = pingpong(tool, size);
            let bytes = format!("{} bytes in ", size * 50 * 2);
            for out in [&client, &server] {
                assert!(out.contains(&bytes), "{tool:?}: {out}");
                assert!(out.contains("50 iters in "), "{out}");
                assert!(out.contains("GID ::ffff:10.0.0."), "{out}");
            }
            let sep = if tool == Tool::UdPingpong { ':' } else { ',' };
            assert!(
                client.contains("  local address:  LID 0x0000, QPN 0x")
                    && client.contains(", PSN 0x"),
                "{client}"
            );
            assert!(
                client.contains(&format!("{sep} GID ::ffff:10.0.0.1")),
                "{client}"
            );
        }
    }

    /// A UD QP at RTS on `rt`, its CQ, and a receive posted into a buffer of `len` bytes.
    fn ud_qp(rt: &mut Runtime, len: u32) -> (Qpn, crate::transport::CqId, u32) {
        let key = rt
            .register_mr(BUF_VA, vec![0; len as usize], Access::LOCAL_WRITE)
            .unwrap();
        let cq = rt.create_cq(4);
        let qpn = rt.create_qp(QpInit::new(QpType::Ud, cq)).unwrap();
        let gid = local_gid(rt, 0).unwrap();
        let psn = random_psn();
        let mut path = QpPath::new(QpType::Ud, gid.into(), Qpn::new(0), psn, psn, Mtu::M1024);
        path.qkey = UD_QKEY;
        rt.init_qp(qpn, &path).unwrap();
        rt.connect_qp(qpn, &path).unwrap();
        let sge = vec![Sge {
            addr: BUF_VA,
            length: len,
            lkey: key,
        }];
        rt.post_recv(qpn, RecvWr::new(RECV_WRID, sge)).unwrap();
        (qpn, cq, key)
    }

    /// A message that reaches the link as its sender leaves still completes the receive:
    /// the runtime hands over what arrived before it reports the link closed. Under load the
    /// UD pingpong server's linger could end before the client read its last message, and
    /// the client then stalled at "49 receives and 50 sends of 50".
    #[test]
    fn a_message_sent_as_the_peer_leaves_is_received() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut rx = runtime(a, "10.0.0.1/24");
        let mut tx = runtime(b, "10.0.0.2/24");
        let len = 64 + GRH_LEN as u32;
        let (rx_qpn, rx_cq, _) = ud_qp(&mut rx, len);
        let (tx_qpn, tx_cq, key) = ud_qp(&mut tx, len);
        let to: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        // The sender learns the receiver's MAC, the two taking turns on one thread.
        for _ in 0..100 {
            if tx.resolve(to, Duration::ZERO).is_ok() {
                break;
            }
            tx.turn(Some(Instant::now())).unwrap();
            rx.turn(Some(Instant::now())).unwrap();
        }
        let mut send = SendWr::new(
            SEND_WRID,
            SendOp::Send,
            vec![Sge {
                addr: BUF_VA,
                length: 64,
                lkey: key,
            }],
        );
        send.ud = Some(UdDest::new(to, rx_qpn, UD_QKEY));
        tx.post_send(tx_qpn, send).unwrap();
        let sent = tx.wait_completion(tx_cq, Duration::from_secs(5)).unwrap();
        assert_eq!(sent.wr_id, SEND_WRID);
        drop(tx);
        let wc = rx
            .wait_completion(rx_cq, Duration::from_secs(5))
            .expect("the message that was on the link when its sender left");
        assert_eq!((wc.wr_id, wc.byte_len), (RECV_WRID, len));
        // Then the link is reported closed.
        assert!(rx.wait_completion(rx_cq, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn summary_lines_use_the_tools_arithmetic() {
        let s = PingpongSummary {
            size: 4096,
            iters: 1000,
            elapsed: Duration::from_millis(50),
        };
        assert_eq!(
            s.lines(),
            "8192000 bytes in 0.05 seconds = 1310.72 Mbit/sec\n\
             1000 iters in 0.05 seconds = 50.00 usec/iter\n"
        );
    }
}
