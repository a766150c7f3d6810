//! librdmacm's `cmatose` (rdma-core 44, `librdmacm/examples/cmatose.c`, installed as
//! `ucmatose`) on our runtime: several RC connections at once through rdma_cm, port 7471 in
//! the TCP port space, the same options, order of events and output lines, so that either
//! side can be ucmatose on rdma_rxe.
//!
//! - The client connects `-c` connections at once, each QP with `-C` receives of `-S` bytes
//!   posted first (REQ: one READ/atomic each way, retry count 5, RNR retry 0).
//! - The server accepts them (refusing any beyond `-c`), and once all are up SENDs `-C`
//!   messages on each, waits for their completions, then for as many messages back.
//! - The client receives the server's messages, SENDs as many back ("sending replies")
//!   without waiting for their completions, and waits for the server's disconnects; the
//!   server disconnects every connection (DREQ) once all replies are in.
//!
//! cmatose sends whatever its buffers hold and never looks at the bytes; neither do we.
//! Unlike cmatose, a failed completion is an error here rather than ignored.

use core::time::Duration;
use std::io::Write;
use std::net::IpAddr;
use std::time::Instant;

use super::cm_app;
use super::{AppError, check, wait_or_stall};
use crate::endpoint::cm::{AcceptParams, CmEvent, ConnId, ConnectParams, ListenParams};
use crate::endpoint::ids::random_va;
use crate::endpoint::runtime::Runtime;
use crate::transport::{Access, CqId, QpInit, QpType, RecvWr, SendOp, SendWr, Sge};
use crate::wire::Qpn;
use crate::wire::cm::PortSpace;

/// cmatose's default port.
pub const DEFAULT_PORT: u16 = 7471;
/// Most connections one run makes or takes: each holds a QP, two CQs and a buffer.
pub const MAX_CONNECTIONS: u32 = 1024;
/// Largest message (cmatose takes any `int`; one buffer per connection is allocated).
pub const MAX_SIZE: u32 = 1 << 24;
/// Most messages per connection (each a posted receive and a completion queue entry).
pub const MAX_COUNT: u32 = 1 << 16;

/// cmatose's and udaddy's options (both programs keep them in a `struct cmatest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmatestOptions {
    /// `-s`: the server to connect to; `None` runs the server.
    pub server: Option<IpAddr>,
    /// `-b`: the address a server listens on (`None`: any of ours).
    pub bind: Option<IpAddr>,
    /// `-p`.
    pub port: u16,
    /// `-c`: connections.
    pub connections: u32,
    /// `-C`: messages each way on each connection.
    pub count: u32,
    /// `-S`: bytes per message (0: no messages, as cmatose).
    pub size: u32,
    /// Longest wait for the peer: each connection event, each completion.
    pub timeout: Duration,
}

impl CmatestOptions {
    /// cmatose's defaults (udaddy's too, but for its port): one connection, 10 messages
    /// of 100 bytes.
    pub fn new(server: Option<IpAddr>) -> CmatestOptions {
        CmatestOptions {
            server,
            bind: None,
            port: DEFAULT_PORT,
            connections: 1,
            count: 10,
            size: 100,
            timeout: Duration::from_secs(60),
        }
    }

    /// One line for what cmatose would take but we bound.
    pub fn check(&self) -> Result<(), AppError> {
        let bad = |m: String| Err(AppError::Usage(m));
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return bad(format!(
                "connections (-c) must be 1..={MAX_CONNECTIONS}, not {}",
                self.connections
            ));
        }
        if self.count > MAX_COUNT {
            return bad(format!(
                "message count (-C) must be at most {MAX_COUNT}, not {}",
                self.count
            ));
        }
        if self.size > MAX_SIZE {
            return bad(format!(
                "message size (-S) must be at most {MAX_SIZE}, not {}",
                self.size
            ));
        }
        Ok(())
    }

    /// Messages per connection: none when the size is 0 (`create_message`).
    pub(super) fn messages(&self) -> u32 {
        if self.size == 0 { 0 } else { self.count }
    }
}

/// How a run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmatestSummary {
    /// Connections established.
    pub connections: u32,
    /// Messages sent, all connections together.
    pub sent: u64,
    /// Messages received, all connections together.
    pub received: u64,
}

/// One connection's resources (`struct cmatest_node`).
#[derive(Debug)]
struct Node {
    id: ConnId,
    qpn: Qpn,
    send_cq: CqId,
    recv_cq: CqId,
    key: u32,
    va: u64,
    connected: bool,
}

impl Node {
    /// `init_node` and `post_recvs`: the QP (INIT, so that receives can be posted), its
    /// two CQs, the message buffer and `messages` receives.
    fn new(rt: &mut Runtime, opts: &CmatestOptions) -> Result<Node, AppError> {
        let messages = opts.messages();
        let cqe = messages.max(1) as usize;
        let send_cq = rt.create_cq(cqe);
        let recv_cq = rt.create_cq(cqe);
        let mut init = QpInit::new(QpType::Rc, send_cq);
        init.recv_cq = recv_cq;
        init.max_send_wr = cqe as u32;
        init.max_recv_wr = cqe as u32;
        let qpn = rt.create_qp(init)?;
        rt.cm_init_qp(qpn, QpType::Rc)?;
        let len = opts.size.max(1);
        let va = random_va(len as usize);
        let key = rt.register_mr(va, vec![0; len as usize], Access::LOCAL_WRITE)?;
        let node = Node {
            id: ConnId(0),
            qpn,
            send_cq,
            recv_cq,
            key,
            va,
            connected: false,
        };
        for _ in 0..messages {
            rt.post_recv(qpn, RecvWr::new(0, node.sge(opts.size)))?;
        }
        Ok(node)
    }

    fn sge(&self, size: u32) -> Vec<Sge> {
        vec![Sge {
            addr: self.va,
            length: size,
            lkey: self.key,
        }]
    }

    /// `post_sends`: `messages` SENDs, each signalled (`sq_sig_all`).
    fn post_sends(&self, rt: &mut Runtime, messages: u32, size: u32) -> Result<(), AppError> {
        if !self.connected {
            return Ok(());
        }
        for i in 0..messages {
            let wr = SendWr::new(u64::from(i), SendOp::Send, self.sge(size));
            rt.post_send(self.qpn, wr)?;
        }
        Ok(())
    }
}

/// `poll_cqs`: `messages` completions from each connected node's send or receive queue.
fn poll_cqs(
    rt: &mut Runtime,
    nodes: &[Node],
    recv: bool,
    messages: u32,
    timeout: Duration,
) -> Result<u64, AppError> {
    let mut done = 0;
    for n in nodes.iter().filter(|n| n.connected) {
        let cq = if recv { n.recv_cq } else { n.send_cq };
        for k in 0..messages {
            let wc = wait_or_stall(rt, cq, timeout, || {
                format!(
                    "{k} of {messages} {} on connection {}",
                    if recv { "receives" } else { "sends" },
                    n.id.0
                )
            })?;
            check(&wc)?;
            done += 1;
        }
    }
    Ok(done)
}

/// Runs cmatose as client (`opts.server` set) or server, its lines to `out`.
pub fn run(
    rt: &mut Runtime,
    opts: &CmatestOptions,
    out: &mut dyn Write,
) -> Result<CmatestSummary, AppError> {
    run_side(rt, opts, out, client, server)
}

/// One side of a cmatest program (cmatose's or udaddy's `main`): the client with
/// `opts.server`, else the server; then the closing lines.
pub(super) fn run_side(
    rt: &mut Runtime,
    opts: &CmatestOptions,
    out: &mut dyn Write,
    client: Client,
    server: Server,
) -> Result<CmatestSummary, AppError> {
    opts.check()?;
    let summary = match opts.server {
        Some(addr) => client(rt, opts, addr, out),
        None => server(rt, opts, out),
    }?;
    say(out, "test complete");
    say(out, "return status 0");
    Ok(summary)
}

/// A program's client side: runtime, options, the server's address, its output.
pub(super) type Client =
    fn(&mut Runtime, &CmatestOptions, IpAddr, &mut dyn Write) -> Result<CmatestSummary, AppError>;
/// A program's server side.
pub(super) type Server =
    fn(&mut Runtime, &CmatestOptions, &mut dyn Write) -> Result<CmatestSummary, AppError>;

/// `rdma_bind_addr` of a server's `-b`: one of our addresses.
pub(super) fn check_bind(rt: &Runtime, opts: &CmatestOptions) -> Result<(), AppError> {
    if let Some(addr) = opts.bind
        && !rt.host().gids().is_local(addr)
    {
        return Err(AppError::Usage(format!(
            "bind address failed: {addr} is not an address of this endpoint"
        )));
    }
    Ok(())
}

pub(super) fn say(out: &mut dyn Write, line: &str) {
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn client(
    rt: &mut Runtime,
    opts: &CmatestOptions,
    server: IpAddr,
    out: &mut dyn Write,
) -> Result<CmatestSummary, AppError> {
    say(out, "cmatose: starting client");
    say(out, "cmatose: connecting");
    let messages = opts.messages();
    let mut nodes = Vec::with_capacity(opts.connections as usize);
    for _ in 0..opts.connections {
        let mut node = Node::new(rt, opts)?;
        let mut params = ConnectParams::rc(server, server, opts.port, node.qpn);
        params.mtu = rt.host().cm().config().max_mtu;
        params.retry_count = 5;
        // cmatose's conn_param leaves it 0: its receives are posted before connecting.
        params.rnr_retry_count = 0;
        node.id = rt.cm_connect(params)?;
        nodes.push(node);
    }
    connect_events(rt, &mut nodes, opts, server)?;
    let (mut sent, mut received) = (0, 0);
    if messages > 0 {
        say(out, "receiving data transfers");
        received = poll_cqs(rt, &nodes, true, messages, opts.timeout)?;
        say(out, "sending replies");
        for n in &nodes {
            n.post_sends(rt, messages, opts.size)?;
            sent += u64::from(messages);
        }
        say(out, "data transfers complete");
    }
    // The server disconnects once it has every reply.
    disconnect_events(rt, &mut nodes, opts.timeout)?;
    Ok(CmatestSummary {
        connections: opts.connections,
        sent,
        received,
    })
}

/// `connect_events` on the client: every connection established, or the first failure's
/// one line.
fn connect_events(
    rt: &mut Runtime,
    nodes: &mut [Node],
    opts: &CmatestOptions,
    server: IpAddr,
) -> Result<(), AppError> {
    let mut left = nodes.len();
    while left > 0 {
        let event = rt.wait_cm_event(opts.timeout)?;
        let Some(node) = nodes.iter_mut().find(|n| n.id == event.id()) else {
            continue;
        };
        match event {
            CmEvent::Established { .. } => {
                node.connected = true;
                left -= 1;
            }
            e @ (CmEvent::Rejected { .. } | CmEvent::TimedOut { .. }) => {
                return Err(cm_app::connect_error(&e, server, opts.port));
            }
            _ => {}
        }
    }
    Ok(())
}

/// `disconnect_events`: waits until every connected node saw its disconnect (our CM
/// answers the peer's DREQ itself, as `rdma_disconnect` in cmatose's handler does).
fn disconnect_events(
    rt: &mut Runtime,
    nodes: &mut [Node],
    timeout: Duration,
) -> Result<(), AppError> {
    let deadline = Instant::now() + timeout;
    while nodes.iter().any(|n| n.connected) {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = rt.wait_cm_event(left).map_err(|_| AppError::Stalled {
            after: timeout,
            progress: format!(
                "{} of {} connections still up, waiting for the disconnects",
                nodes.iter().filter(|n| n.connected).count(),
                nodes.len()
            ),
        })?;
        if let CmEvent::Disconnected { id } = event {
            for n in nodes.iter_mut().filter(|n| n.id == id) {
                n.connected = false;
            }
        }
    }
    Ok(())
}

fn server(
    rt: &mut Runtime,
    opts: &CmatestOptions,
    out: &mut dyn Write,
) -> Result<CmatestSummary, AppError> {
    say(out, "cmatose: starting server");
    check_bind(rt, opts)?;
    let listener = rt.cm_listen(ListenParams {
        port_space: PortSpace::Tcp,
        port: opts.port,
        addr: opts.bind,
    })?;
    let messages = opts.messages();
    let mut nodes: Vec<Node> = Vec::with_capacity(opts.connections as usize);
    // `connect_events`: a connection counts when it is established (or failed).
    let mut left = opts.connections;
    while left > 0 {
        match rt.wait_cm_event(opts.timeout)? {
            CmEvent::ConnectRequest { id, .. } if nodes.len() == opts.connections as usize => {
                say(out, "cmatose: failing connection request");
                rt.cm_reject(id, &[])?;
            }
            CmEvent::ConnectRequest { id, .. } => {
                let mut node = Node::new(rt, opts)?;
                node.id = id;
                let mut accept = AcceptParams::new(node.qpn);
                accept.responder_resources = 1;
                accept.initiator_depth = 1;
                rt.cm_accept(id, accept)?;
                nodes.push(node);
            }
            CmEvent::Established { id, .. } => {
                for n in nodes.iter_mut().filter(|n| n.id == id) {
                    n.connected = true;
                    left -= 1;
                }
            }
            CmEvent::Rejected { id, reason, .. } if nodes.iter().any(|n| n.id == id) => {
                say(
                    out,
                    &format!("cmatose: event: RDMA_CM_EVENT_REJECTED, error: {reason}"),
                );
                left -= 1;
            }
            CmEvent::TimedOut { id, .. } if nodes.iter().any(|n| n.id == id) => {
                say(
                    out,
                    "cmatose: event: RDMA_CM_EVENT_CONNECT_ERROR, error: -110",
                );
                left -= 1;
            }
            _ => {}
        }
    }
    rt.host_mut().cm_stop_listening(listener);
    let (mut sent, mut received) = (0, 0);
    if messages > 0 {
        say(out, "initiating data transfers");
        for n in &nodes {
            n.post_sends(rt, messages, opts.size)?;
        }
        say(out, "completing sends");
        sent = poll_cqs(rt, &nodes, false, messages, opts.timeout)?;
        say(out, "receiving data transfers");
        received = poll_cqs(rt, &nodes, true, messages, opts.timeout)?;
        say(out, "data transfers complete");
    }
    say(out, "cmatose: disconnecting");
    for n in nodes.iter().filter(|n| n.connected) {
        rt.cm_disconnect(n.id)?;
    }
    disconnect_events(rt, &mut nodes, opts.timeout)?;
    say(out, "disconnected");
    let connections = nodes.len() as u32;
    Ok(CmatestSummary {
        connections,
        sent,
        received,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Lines, runtime};
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryLinkConfig};
    use std::sync::mpsc;

    /// Our client against our server: four connections, five messages each way on each,
    /// cmatose's lines in cmatose's order on both sides.
    #[test]
    fn four_connections_between_two_runtimes() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut opts = CmatestOptions::new(None);
        opts.connections = 4;
        opts.count = 5;
        opts.size = 300;
        opts.timeout = Duration::from_secs(20);
        let server_opts = opts.clone();
        let (tx, rx) = mpsc::channel();
        let server = std::thread::spawn(move || {
            let mut rt = runtime(b, "10.0.0.2/24");
            run(&mut rt, &server_opts, &mut Lines(tx)).unwrap()
        });
        // The server listens right after its first line.
        let first = rx.recv().unwrap();
        let mut rt = runtime(a, "10.0.0.1/24");
        opts.server = Some("10.0.0.2".parse().unwrap());
        let mut out = Vec::new();
        let client = run(&mut rt, &opts, &mut out).unwrap();
        let want = CmatestSummary {
            connections: 4,
            sent: 20,
            received: 20,
        };
        assert_eq!(client, want);
        assert_eq!(server.join().unwrap(), want);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\n\
             sending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
        );
        let server_out: String = [first].into_iter().chain(rx.try_iter()).collect();
        assert_eq!(
            server_out,
            "cmatose: starting server\ninitiating data transfers\ncompleting sends\n\
             receiving data transfers\ndata transfers complete\ncmatose: disconnecting\n\
             disconnected\ntest complete\nreturn status 0\n"
        );
        assert_eq!(rt.host().cm().stats().established, 4);
    }

    #[test]
    fn a_refused_client_and_bad_options_are_one_line() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let peer = std::thread::spawn(move || {
            let mut rt = runtime(b, "10.0.0.2/24");
            let _ = rt.serve_for(Duration::from_secs(3));
        });
        let mut rt = runtime(a, "10.0.0.1/24");
        let mut opts = CmatestOptions::new(Some("10.0.0.2".parse().unwrap()));
        opts.connections = 2;
        opts.timeout = Duration::from_secs(10);
        let e = run(&mut rt, &opts, &mut Vec::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.2 port 7471 refused the connection: REJ reason 8 (invalid service ID): \
             nothing listens on that port"
        );
        peer.join().unwrap();
        for bad in [
            CmatestOptions {
                connections: 0,
                ..opts.clone()
            },
            CmatestOptions {
                count: MAX_COUNT + 1,
                ..opts.clone()
            },
            CmatestOptions {
                size: MAX_SIZE + 1,
                ..opts.clone()
            },
        ] {
            let e = run(&mut rt, &bad, &mut Vec::new()).unwrap_err();
            assert!(matches!(e, AppError::Usage(_)), "{e}");
        }
    }
}
