//! librdmacm's `rping` (rdma-core 44, `librdmacm/examples/rping.c`) on our runtime: the same
//! options and defaults, connection through rdma_cm (RDMA_PS_TCP, port 7174), and the same
//! ping loop, so that either side can be rping on rdma_rxe:
//!
//! - the client SENDs the address, R_Key and length of its source buffer;
//! - the server RDMA READs the ping data from it, then SENDs "go ahead";
//! - the client SENDs the address of its sink buffer;
//! - the server RDMA WRITEs the data (up to its NUL) into it, then SENDs "go ahead";
//! - with `-V` the client compares source and sink, with `-v` each side prints the data.
//!
//! The buffer information is `struct rping_rdma_info`: a big-endian 64-bit address, 32-bit
//! R_Key and 32-bit length. After `-C` pings the client disconnects (DREQ); the server ends
//! when it sees the disconnect.

use core::time::Duration;
use std::io::Write;
use std::net::IpAddr;

use super::cm_app::{self, Next};
use super::{AppError, check};
use crate::endpoint::cm::{AcceptParams, CmEvent, ConnectParams, ListenParams};
use crate::endpoint::ids::random_va;
use crate::endpoint::runtime::Runtime;
use crate::transport::{
    Access, CqId, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use crate::wire::Qpn;
use crate::wire::cm::PortSpace;

/// rping's default port.
pub const DEFAULT_PORT: u16 = 7174;
/// Smallest ping: room for "rdma-ping-2147483647: " and the NUL (`RPING_MIN_BUFSIZE`).
pub const MIN_SIZE: u32 = 26;
/// Largest ping (`RPING_BUFSIZE - 1`).
pub const MAX_SIZE: u32 = 64 * 1024 - 1;
/// `sizeof(struct rping_rdma_info)`.
const INFO_LEN: u32 = 16;
/// The server's sink takes any ping a client may send.
const SERVER_BUF: u32 = 64 * 1024;

/// How long a server keeps answering after the client's disconnect.
const LINGER: Duration = Duration::from_millis(300);

const SEND_WRID: u64 = 1;
const RDMA_WRID: u64 = 2;
const RECV_WRID: u64 = 3;

/// rping's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpingOptions {
    /// `-s` (true) or `-c`.
    pub server: bool,
    /// `-a`: the server to connect to, or the address a server binds to (unspecified: any).
    pub addr: IpAddr,
    /// `-p`.
    pub port: u16,
    /// `-C`: pings; 0 pings until interrupted.
    pub count: u32,
    /// `-S`: bytes per ping, 26..=65535.
    pub size: u32,
    /// `-v`: print each ping's data.
    pub verbose: bool,
    /// `-V`: compare what came back with what was sent.
    pub validate: bool,
    /// Longest wait for the peer: connecting, each step of a ping.
    pub timeout: Duration,
}

impl RpingOptions {
    /// rping's defaults for a client of `addr` (`server` false) or a server on `addr`.
    pub fn new(server: bool, addr: IpAddr) -> RpingOptions {
        RpingOptions {
            server,
            addr,
            port: DEFAULT_PORT,
            count: 0,
            size: 64,
            verbose: false,
            validate: false,
            timeout: Duration::from_secs(60),
        }
    }
}

/// How a run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpingSummary {
    /// Pings completed.
    pub pings: u32,
}

/// A registered buffer.
#[derive(Debug, Clone, Copy)]
struct Buf {
    va: u64,
    key: u32,
    len: u32,
}

impl Buf {
    fn new(rt: &mut Runtime, len: u32, access: Access) -> Result<Buf, AppError> {
        let va = random_va(len as usize);
        let key = rt.register_mr(va, vec![0; len as usize], access)?;
        Ok(Buf { va, key, len })
    }

    fn sge(&self, len: u32) -> Vec<Sge> {
        vec![Sge {
            addr: self.va,
            length: len,
            lkey: self.key,
        }]
    }
}

/// The QP and buffers of one side (`rping_setup_qp`, `rping_setup_buffers`).
#[derive(Debug)]
struct Side {
    cq: CqId,
    qpn: Qpn,
    recv: Buf,
    send: Buf,
    rdma: Buf,
    /// The client's source buffer.
    start: Option<Buf>,
}

impl Side {
    fn new(rt: &mut Runtime, server: bool, size: u32) -> Result<Side, AppError> {
        let cq = rt.create_cq(32);
        let mut init = QpInit::new(QpType::Rc, cq);
        init.max_send_wr = 16;
        init.max_recv_wr = 2;
        let qpn = rt.create_qp(init)?;
        rt.cm_init_qp(qpn, QpType::Rc)?;
        let remote = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let side = Side {
            cq,
            qpn,
            recv: Buf::new(rt, INFO_LEN, Access::LOCAL_WRITE)?,
            send: Buf::new(rt, INFO_LEN, Access::NONE)?,
            rdma: Buf::new(rt, if server { SERVER_BUF } else { size }, remote)?,
            start: if server {
                None
            } else {
                Some(Buf::new(rt, size, remote)?)
            },
        };
        Ok(side)
    }

    fn post_recv(&self, rt: &mut Runtime) -> Result<(), AppError> {
        let wr = RecvWr::new(RECV_WRID, self.recv.sge(INFO_LEN));
        Ok(rt.post_recv(self.qpn, wr)?)
    }

    /// SENDs `send`'s 16 bytes (the buffer information, or a server's "go ahead").
    fn post_send(&self, rt: &mut Runtime) -> Result<(), AppError> {
        let wr = SendWr::new(SEND_WRID, SendOp::Send, self.send.sge(INFO_LEN));
        Ok(rt.post_send(self.qpn, wr)?)
    }

    /// `rping_format_send`: tells the peer where `buf` is.
    fn format_send(&self, rt: &mut Runtime, buf: Buf, size: u32) {
        let mut info = [0u8; INFO_LEN as usize];
        info[..8].copy_from_slice(&buf.va.to_be_bytes());
        info[8..12].copy_from_slice(&buf.key.to_be_bytes());
        info[12..].copy_from_slice(&size.to_be_bytes());
        if let Some(b) = rt.mr_bytes_mut(self.send.key) {
            b.copy_from_slice(&info);
        }
    }

    /// The peer's buffer information from our receive buffer.
    fn received_info(&self, rt: &Runtime) -> (u64, u32, u32) {
        let b = rt.mr_bytes(self.recv.key).unwrap_or(&[0; 16]);
        let word = |at: usize, n: usize| {
            b[at..at + n]
                .iter()
                .fold(0u64, |a, &x| a << 8 | u64::from(x))
        };
        (word(0, 8), word(8, 4) as u32, word(12, 4) as u32)
    }
}

/// What a side waits for next.
enum Wait {
    Recv,
    Rdma,
}

/// Waits for the receive or RDMA completion the protocol expects next; SEND completions pass,
/// a disconnect ends the wait with `Ok(false)`.
fn wait(rt: &mut Runtime, side: &Side, what: Wait, timeout: Duration) -> Result<bool, AppError> {
    loop {
        match cm_app::next(rt, side.cq, timeout)? {
            Next::Cm(CmEvent::Disconnected { .. }) => return Ok(false),
            Next::Cm(_) => {}
            Next::Completion(wc) => {
                if wc.status == WcStatus::WrFlushErr {
                    continue;
                }
                check(&wc)?;
                match (&what, wc.wr_id) {
                    (_, SEND_WRID) => {}
                    (Wait::Recv, RECV_WRID) => {
                        check_info(&wc)?;
                        side.post_recv(rt)?;
                        return Ok(true);
                    }
                    (Wait::Rdma, RDMA_WRID) => return Ok(true),
                    _ => return Err(AppError::UnknownWrId(wc.wr_id)),
                }
            }
        }
    }
}

/// Every message of the protocol is a `struct rping_rdma_info`.
fn check_info(wc: &WorkCompletion) -> Result<(), AppError> {
    if wc.opcode != WcOpcode::Recv || wc.byte_len != INFO_LEN {
        return Err(AppError::Usage(format!(
            "Received bogus data, size {}",
            wc.byte_len
        )));
    }
    Ok(())
}

/// Runs rping as client or server; the ping data goes to `out` with `-v`, rping's notes
/// (a server's "server DISCONNECT EVENT...") to `err`.
pub fn run(
    rt: &mut Runtime,
    opts: &RpingOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<RpingSummary, AppError> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&opts.size) {
        return Err(AppError::Usage(format!(
            "Invalid size {} (valid range is {MIN_SIZE} to {})",
            opts.size,
            MAX_SIZE + 1
        )));
    }
    if opts.server {
        server(rt, opts, out, err)
    } else {
        client(rt, opts, out)
    }
}

/// The bytes of ping `n`: "rdma-ping-N: " then letters from `start` on ('A'..='z'
/// cycling), NUL-terminated (`rping_test_client`).
pub fn ping_data(n: u32, start: u8, size: usize) -> Vec<u8> {
    let mut data = format!("rdma-ping-{n}: ").into_bytes();
    data.truncate(size);
    let mut c = start;
    while data.len() < size {
        data.push(c);
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = data.last_mut() {
        *last = 0;
    }
    data
}

/// The NUL-terminated string at the start of `bytes`, as `printf("%s")` shows it.
fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn client(
    rt: &mut Runtime,
    opts: &RpingOptions,
    out: &mut dyn Write,
) -> Result<RpingSummary, AppError> {
    let side = Side::new(rt, false, opts.size)?;
    let start = side.start.unwrap_or(side.rdma);
    side.post_recv(rt)?;
    let mut params = ConnectParams::rc(opts.addr, opts.addr, opts.port, side.qpn);
    params.mtu = rt.host().cm().config().max_mtu;
    let id = rt.cm_connect(params)?;
    cm_app::wait_established(rt, id, opts.addr, opts.port, opts.timeout)?;
    let mut letter = 65u8;
    let mut pings = 0;
    while opts.count == 0 || pings < opts.count {
        let data = ping_data(pings, letter, opts.size as usize);
        letter = if letter >= 122 { 65 } else { letter + 1 };
        if let Some(b) = rt.mr_bytes_mut(start.key) {
            b.copy_from_slice(&data);
        }
        let gone = || {
            AppError::Usage(format!(
                "the server disconnected after {pings} of {} pings",
                opts.count
            ))
        };
        // The source buffer; the server READs it and says go ahead.
        side.format_send(rt, start, opts.size);
        side.post_send(rt)?;
        if !wait(rt, &side, Wait::Recv, opts.timeout)? {
            return Err(gone());
        }
        // The sink buffer; the server WRITEs into it and says go ahead.
        side.format_send(rt, side.rdma, opts.size);
        side.post_send(rt)?;
        if !wait(rt, &side, Wait::Recv, opts.timeout)? {
            return Err(gone());
        }
        let sink = rt
            .mr_bytes(side.rdma.key)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if opts.validate && sink != data {
            return Err(AppError::Usage("data mismatch!".into()));
        }
        if opts.verbose {
            let _ = writeln!(out, "ping data: {}", c_str(&sink));
        }
        pings += 1;
    }
    cm_app::disconnect(rt, id, opts.timeout)?;
    Ok(RpingSummary { pings })
}

fn server(
    rt: &mut Runtime,
    opts: &RpingOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<RpingSummary, AppError> {
    let addr = if opts.addr.is_unspecified() {
        None
    } else if rt.host().gids().is_local(opts.addr) {
        Some(opts.addr)
    } else {
        return Err(AppError::Usage(format!(
            "rdma_bind_addr: {} is not an address of this endpoint",
            opts.addr
        )));
    };
    rt.cm_listen(ListenParams {
        port_space: PortSpace::Tcp,
        port: opts.port,
        addr,
    })?;
    let _ = writeln!(
        err,
        "roce rping: server listening on {} port {}",
        opts.addr, opts.port
    );
    let (id, request) = loop {
        if let CmEvent::ConnectRequest { id, request } = rt.wait_cm_event(opts.timeout)? {
            break (id, request);
        }
    };
    let side = Side::new(rt, true, opts.size)?;
    side.post_recv(rt)?;
    rt.cm_accept(id, AcceptParams::new(side.qpn))?;
    let _ = request;
    let mut pings = 0;
    loop {
        // The client's source buffer, or its disconnect.
        if !wait(rt, &side, Wait::Recv, opts.timeout)? {
            break;
        }
        let (va, rkey, len) = side.received_info(rt);
        let len = len.min(side.rdma.len);
        let read = SendOp::Read {
            remote_addr: va,
            rkey,
        };
        rt.post_send(side.qpn, SendWr::new(RDMA_WRID, read, side.rdma.sge(len)))?;
        if !wait(rt, &side, Wait::Rdma, opts.timeout)? {
            break;
        }
        let data = rt
            .mr_bytes(side.rdma.key)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if opts.verbose {
            let _ = writeln!(out, "server ping data: {}", c_str(&data));
        }
        side.post_send(rt)?;
        // The client's sink buffer.
        if !wait(rt, &side, Wait::Recv, opts.timeout)? {
            break;
        }
        let (va, rkey, _) = side.received_info(rt);
        let strlen = data.iter().position(|&b| b == 0).unwrap_or(data.len() - 1);
        let write = SendOp::Write {
            remote_addr: va,
            rkey,
        };
        let wr = SendWr::new(RDMA_WRID, write, side.rdma.sge(strlen as u32 + 1));
        rt.post_send(side.qpn, wr)?;
        if !wait(rt, &side, Wait::Rdma, opts.timeout)? {
            break;
        }
        side.post_send(rt)?;
        pings += 1;
    }
    let _ = writeln!(err, "server DISCONNECT EVENT...");
    // Answer a repeated DREQ (our DREP lost) for a moment, as the kernel would.
    rt.serve_for(LINGER)?;
    Ok(RpingSummary { pings })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Lines, runtime};
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryLinkConfig};
    use std::sync::mpsc;

    /// Our rping client against our rping server over the in-memory link.
    #[test]
    fn client_and_server_ping_with_validation() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut opts = RpingOptions::new(true, "0.0.0.0".parse().unwrap());
        opts.count = 5;
        opts.size = 100;
        opts.verbose = true;
        opts.validate = true;
        opts.timeout = Duration::from_secs(20);
        let server_opts = opts.clone();
        let (tx, rx) = mpsc::channel();
        let server = std::thread::spawn(move || {
            let mut rt = runtime(b, "10.0.0.2/24");
            let (mut out, mut err) = (Vec::new(), Lines(tx));
            let summary = run(&mut rt, &server_opts, &mut out, &mut err).unwrap();
            (summary, String::from_utf8(out).unwrap())
        });
        assert!(rx.recv().unwrap().contains("listening"));
        let mut rt = runtime(a, "10.0.0.1/24");
        opts.server = false;
        opts.addr = "10.0.0.2".parse().unwrap();
        let mut out = Vec::new();
        let summary = run(&mut rt, &opts, &mut out, &mut std::io::sink()).unwrap();
        assert_eq!(summary.pings, 5);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().count(), 5);
        assert!(
            out.starts_with("ping data: rdma-ping-0: ABCDEFGHIJ"),
            "{out}"
        );
        assert!(out.contains("ping data: rdma-ping-4: EFGH"), "{out}");
        let (server_summary, server_out) = server.join().unwrap();
        assert_eq!(server_summary.pings, 5);
        assert!(
            server_out.contains("server ping data: rdma-ping-3: DEFG"),
            "{server_out}"
        );
        let notes: String = rx.try_iter().collect();
        assert!(notes.contains("server DISCONNECT EVENT..."), "{notes}");
    }

    #[test]
    fn a_client_without_a_server_gets_the_rej_and_one_line() {
        let (a, _b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let peer = std::thread::spawn(move || {
            // A host that answers ARP and MADs but listens on nothing.
            let mut rt = runtime(_b, "10.0.0.2/24");
            let _ = rt.serve_for(Duration::from_secs(3));
        });
        let mut rt = runtime(a, "10.0.0.1/24");
        let mut opts = RpingOptions::new(false, "10.0.0.2".parse().unwrap());
        opts.timeout = Duration::from_secs(10);
        let e = run(&mut rt, &opts, &mut Vec::new(), &mut Vec::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.2 port 7174 refused the connection: REJ reason 8 (invalid service ID): \
             nothing listens on that port"
        );
        peer.join().unwrap();
        let mut small = opts.clone();
        small.size = 25;
        assert!(run(&mut rt, &small, &mut Vec::new(), &mut Vec::new()).is_err());
    }

    #[test]
    fn ping_data_is_rpings() {
        let d = ping_data(0, 65, 26);
        assert_eq!(&d[..], b"rdma-ping-0: ABCDEFGHIJKL\0");
        let d = ping_data(7, 121, 20);
        assert_eq!(&d[..], b"rdma-ping-7: yzABCD\0");
        assert_eq!(c_str(&d), "rdma-ping-7: yzABCD");
    }
}
