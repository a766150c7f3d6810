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
use crate::endpoint::cm::{AcceptParams, CmEvent, ConnId, ConnectParams, ListenParams, ListenerId};
use crate::endpoint::ids::random_va;
use crate::endpoint::runtime::Runtime;
use crate::transport::{Access, CqId, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WorkCompletion};
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
    /// `-t`: the client's type of service: cmatose's REQ's traffic class, udaddy's address
    /// handles' (its server answers with the class it received).
    pub tos: Option<u8>,
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
            tos: None,
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

/// What a run of cmatose or udaddy gives.
pub type Outcome = Result<CmatestSummary, AppError>;

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
        let (cq, what) = if recv {
            (n.recv_cq, "receives")
        } else {
            (n.send_cq, "sends")
        };
        let progress = |k| format!("{k} of {messages} {what} on connection {}", n.id.0);
        done += poll_cq(rt, cq, messages, timeout, progress, |_| {})?;
    }
    Ok(done)
}

/// `messages` successful completions on `cq`, each handed to `each`; on a timeout,
/// `progress` says how many had come.
pub(super) fn poll_cq(
    rt: &mut Runtime,
    cq: CqId,
    messages: u32,
    timeout: Duration,
    progress: impl Fn(u32) -> String,
    mut each: impl FnMut(&WorkCompletion),
) -> Result<u64, AppError> {
    for k in 0..messages {
        let wc = wait_or_stall(rt, cq, timeout, || progress(k))?;
        check(&wc)?;
        each(&wc);
    }
    Ok(u64::from(messages))
}

/// Runs cmatose as client (`opts.server` set) or server, its lines to `out`.
pub fn run(rt: &mut Runtime, opts: &CmatestOptions, out: &mut dyn Write) -> Outcome {
    run_side(&CMATOSE, rt, opts, out)
}

const CMATOSE: Program = Program {
    name: "cmatose",
    check: |_, _| Ok(()),
    client,
    server,
};

/// A cmatest program: its name and its two sides.
pub(super) struct Program {
    /// What it calls itself in its lines.
    pub name: &'static str,
    /// What it checks of the options against the runtime once it has started (either side).
    pub check: fn(&Runtime, &CmatestOptions) -> Result<(), AppError>,
    /// The client: runtime, options, the server's address, its output.
    pub client: fn(&mut Runtime, &CmatestOptions, IpAddr, &mut dyn Write) -> Outcome,
    /// The server.
    pub server: fn(&mut Runtime, &CmatestOptions, &mut dyn Write) -> Outcome,
}

/// One side of a cmatest program (cmatose's or udaddy's `main`): the client with
/// `opts.server`, else the server (its `-b` checked first); then the closing lines.
pub(super) fn run_side(
    program: &Program,
    rt: &mut Runtime,
    opts: &CmatestOptions,
    out: &mut dyn Write,
) -> Outcome {
    let name = program.name;
    opts.check()?;
    let summary = match opts.server {
        Some(addr) => {
            say(out, &format!("{name}: starting client"));
            say(out, &format!("{name}: connecting"));
            (program.check)(rt, opts)?;
            (program.client)(rt, opts, addr, out)
        }
        None => {
            say(out, &format!("{name}: starting server"));
            check_bind(rt, opts)?;
            (program.check)(rt, opts)?;
            (program.server)(rt, opts, out)
        }
    }?;
    say(out, "test complete");
    say(out, "return status 0");
    Ok(summary)
}

/// `rdma_listen` on `opts.port` of `port_space`, on `opts.bind` if set.
pub(super) fn listen(
    rt: &mut Runtime,
    opts: &CmatestOptions,
    port_space: PortSpace,
) -> Result<ListenerId, AppError> {
    Ok(rt.cm_listen(ListenParams {
        port_space,
        port: opts.port,
        addr: opts.bind,
    })?)
}

/// `rdma_bind_addr` of a server's `-b`: one of our addresses.
fn check_bind(rt: &Runtime, opts: &CmatestOptions) -> Result<(), AppError> {
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

fn client(rt: &mut Runtime, opts: &CmatestOptions, server: IpAddr, out: &mut dyn Write) -> Outcome {
    let messages = opts.messages();
    let mut nodes = Vec::with_capacity(opts.connections as usize);
    for _ in 0..opts.connections {
        let mut node = Node::new(rt, opts)?;
        let mut params = ConnectParams::rc(server, server, opts.port, node.qpn);
        params.mtu = rt.host().cm().config().max_mtu;
        params.retry_count = 5;
        // cmatose's conn_param leaves it 0: its receives are posted before connecting.
        params.rnr_retry_count = 0;
        params.traffic_class = opts.tos;
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
    settle_each(
        rt,
        nodes,
        |n| n.id,
        opts.timeout,
        |node, event| match event {
            CmEvent::Established { .. } => {
                node.connected = true;
                Ok(true)
            }
            e @ (CmEvent::Rejected { .. } | CmEvent::TimedOut { .. }) => {
                Err(cm_app::connect_error(&e, server, opts.port))
            }
            _ => Ok(false),
        },
    )
}

/// Waits until every node has had an event that `settle` says settles it (true); each
/// event goes to the node `id` says it is about, and one about no node is passed over.
pub(super) fn settle_each<N>(
    rt: &mut Runtime,
    nodes: &mut [N],
    id: impl Fn(&N) -> ConnId,
    timeout: Duration,
    mut settle: impl FnMut(&mut N, CmEvent) -> Result<bool, AppError>,
) -> Result<(), AppError> {
    let mut left = nodes.len();
    while left > 0 {
        let event = rt.wait_cm_event(timeout)?;
        let Some(node) = nodes.iter_mut().find(|n| id(n) == event.id()) else {
            continue;
        };
        if settle(node, event)? {
            left -= 1;
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

fn server(rt: &mut Runtime, opts: &CmatestOptions, out: &mut dyn Write) -> Outcome {
    let listener = listen(rt, opts, PortSpace::Tcp)?;
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
    use super::super::testing::{cmatest_pair, cmatest_refused};
    use super::*;

    /// Our client against our server: four connections, five messages each way on each,
    /// cmatose's lines in cmatose's order on both sides.
    #[test]
    fn four_connections_between_two_runtimes() {
        let seen = cmatest_pair(run, CmatestOptions::new(None), 300, Duration::ZERO);
        assert_eq!(
            seen.client_lines,
            "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\n\
             sending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
        );
        assert_eq!(
            seen.server_lines,
            "cmatose: starting server\ninitiating data transfers\ncompleting sends\n\
             receiving data transfers\ndata transfers complete\ncmatose: disconnecting\n\
             disconnected\ntest complete\nreturn status 0\n"
        );
        assert_eq!(seen.client_rt.host().cm().stats().established, 4);
    }

    #[test]
    fn a_refused_client_and_bad_options_are_one_line() {
        let mut opts = CmatestOptions::new(Some("10.0.0.2".parse().unwrap()));
        opts.connections = 2;
        opts.timeout = Duration::from_secs(10);
        let (e, mut rt) = cmatest_refused(run, &opts);
        assert_eq!(
            e.to_string(),
            "10.0.0.2 port 7471 refused the connection: REJ reason 8 (invalid service ID): \
             nothing listens on that port"
        );
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
