//! librdmacm's `udaddy` (rdma-core 44, `librdmacm/examples/udaddy.c`) on our runtime: UD
//! through rdma_cm, each "connection" a service ID resolution (SIDR_REQ, SIDR_REP) on port
//! 7174 of the UDP port space, the same options, order and output lines, so that either
//! side can be udaddy on rdma_rxe.
//!
//! - The client resolves `-c` services at once, each UD QP with `-C` receives posted first
//!   (`-S` bytes and the 40-byte GRH), then SENDs `-C` messages with immediate data (its
//!   QPN) on each, unsignalled, to the QPN and Q_Key of the SIDR_REP, and waits for as many
//!   back.
//! - The server answers each SIDR_REQ with a new UD QP (Q_Key 0x01234567, rdma_cm's), waits
//!   for `-C` messages on each, and replies to the QPN in the first one's immediate data
//!   with as many, signalled, waiting for their completions.
//!
//! Nothing is disconnected: UD has no connection. Messages must fit the path MTU.

use core::time::Duration;
use std::io::Write;
use std::net::IpAddr;

use super::cm_app;
use super::cmatose::{
    CmatestOptions, CmatestSummary, Outcome, Program, listen, poll_cq, run_side, say, settle_each,
};
use super::{AppError, random_psn};
use crate::endpoint::cm::{CmEvent, ConnId, RDMA_UDP_QKEY, SidrParams, SidrReply};
use crate::endpoint::connect::{QpPath, connect};
use crate::endpoint::ids::random_va;
use crate::endpoint::runtime::Runtime;
use crate::endpoint::runtime::RuntimeError;
use crate::transport::{
    Access, CqId, GRH_LEN, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdDest,
};
use crate::wire::cm::PortSpace;
use crate::wire::{Psn, Qpn};

/// udaddy's port (fixed; its `-p` chooses the port space).
pub const DEFAULT_PORT: u16 = 7174;

/// udaddy's defaults: cmatose's but for the port.
pub fn options(server: Option<IpAddr>) -> CmatestOptions {
    let mut o = CmatestOptions::new(server);
    o.port = DEFAULT_PORT;
    o
}

/// One service's UD QP, its CQ (sends and receives), its buffer (GRH room first) and where
/// its messages go.
#[derive(Debug)]
struct Node {
    id: ConnId,
    qpn: Qpn,
    cq: CqId,
    key: u32,
    va: u64,
    dest: Option<UdDest>,
}

impl Node {
    /// `init_node` and `post_recvs`.
    fn new(rt: &mut Runtime, opts: &CmatestOptions) -> Result<Node, AppError> {
        let messages = opts.messages();
        let cq = rt.create_cq(2 * messages.max(1) as usize);
        let mut init = QpInit::new(QpType::Ud, cq);
        init.max_send_wr = messages.max(1);
        init.max_recv_wr = messages.max(1);
        let qpn = rt.create_qp(init)?;
        // librdmacm's `ucma_init_ud_qp`: a UD QP goes to RTS at once, with rdma_cm's Q_Key.
        let mut path = QpPath::new(
            QpType::Ud,
            IpAddr::from([0, 0, 0, 0]),
            Qpn::new(0),
            Psn::new(0),
            random_psn(),
            Mtu::M1024,
        );
        path.qkey = RDMA_UDP_QKEY;
        connect(rt.host_mut().engine_mut(), qpn, &path).map_err(RuntimeError::from)?;
        let len = opts.size as usize + GRH_LEN;
        let va = random_va(len);
        let key = rt.register_mr(va, vec![0; len], Access::LOCAL_WRITE)?;
        for _ in 0..messages {
            let sge = vec![Sge {
                addr: va,
                length: len as u32,
                lkey: key,
            }];
            rt.post_recv(qpn, RecvWr::new(0, sge))?;
        }
        Ok(Node {
            id: ConnId(0),
            qpn,
            cq,
            key,
            va,
            dest: None,
        })
    }

    /// `post_sends`: `messages` SENDs with our QPN as immediate data.
    fn post_sends(
        &self,
        rt: &mut Runtime,
        messages: u32,
        size: u32,
        signaled: bool,
    ) -> Result<(), AppError> {
        let Some(dest) = self.dest else {
            return Ok(());
        };
        for i in 0..messages {
            let sge = vec![Sge {
                addr: self.va + GRH_LEN as u64,
                length: size,
                lkey: self.key,
            }];
            let imm = self.qpn.value();
            let mut wr = SendWr::new(u64::from(i), SendOp::SendWithImm { imm }, sge);
            wr.signaled = signaled;
            wr.ud = Some(dest);
            rt.post_send(self.qpn, wr)?;
        }
        Ok(())
    }
}

/// `verify_test_params`: a UD message fits the path MTU.
fn check_size(rt: &Runtime, opts: &CmatestOptions) -> Result<(), AppError> {
    let mtu = Mtu::for_link_mtu(rt.capabilities().mtu as u32).unwrap_or(Mtu::M256);
    if opts.messages() > 0 && opts.size > mtu.bytes() {
        return Err(AppError::Usage(format!(
            "message_size {} is larger than active mtu {}",
            opts.size,
            mtu.bytes()
        )));
    }
    Ok(())
}

/// `poll_cqs`: `messages` completions from each node; the server learns where to reply
/// from the first (`create_reply_ah`, `ibv_create_ah_from_wc`: the sender's address and
/// traffic class, the QPN in its immediate data, our own Q_Key).
fn poll_cqs(
    rt: &mut Runtime,
    nodes: &mut [Node],
    messages: u32,
    timeout: Duration,
) -> Result<u64, AppError> {
    let mut done = 0;
    for n in nodes.iter_mut() {
        let qpn = n.qpn;
        let progress = |k| format!("{k} of {messages} completions on QP {qpn}");
        let mut first = None;
        done += poll_cq(rt, n.cq, messages, timeout, progress, |wc| {
            if first.is_none()
                && let (Some(addr), Some(imm)) = (wc.src_addr, wc.imm_data)
            {
                first = Some((addr, Qpn::new(imm & 0xff_ffff)));
            }
        })?;
        if n.dest.is_none()
            && let Some((addr, remote_qpn)) = first
        {
            // The GRH area of the receive buffer (every message lands there, all from the
            // same sender) gives the address handle its traffic class.
            let area = rt.mr_bytes(n.key).and_then(|b| b.get(..GRH_LEN));
            n.dest = area
                .and_then(|a| UdDest::reply_to(a, remote_qpn, RDMA_UDP_QKEY))
                .or(Some(UdDest::new(addr, remote_qpn, RDMA_UDP_QKEY)));
        }
    }
    Ok(done)
}

/// Runs udaddy as client (`opts.server` set) or server, its lines to `out`.
pub fn run(rt: &mut Runtime, opts: &CmatestOptions, out: &mut dyn Write) -> Outcome {
    run_side(&UDADDY, rt, opts, out)
}

const UDADDY: Program = Program {
    name: "udaddy",
    check: check_size,
    client,
    server,
};

fn client(rt: &mut Runtime, opts: &CmatestOptions, server: IpAddr, out: &mut dyn Write) -> Outcome {
    let messages = opts.messages();
    let mut nodes = Vec::with_capacity(opts.connections as usize);
    for _ in 0..opts.connections {
        let mut node = Node::new(rt, opts)?;
        node.id = rt.cm_resolve(SidrParams {
            dest: server,
            src: server,
            port: opts.port,
            private_data: Vec::new(),
            traffic_class: opts.tos,
        })?;
        nodes.push(node);
    }
    settle_each(
        rt,
        &mut nodes,
        |n| n.id,
        opts.timeout,
        |node, event| match event {
            CmEvent::SidrResolved { qpn, qkey, .. } => {
                // The address handle of the resolved route: rdma_cm gives it the TOS.
                node.dest = Some(UdDest {
                    traffic_class: opts.tos,
                    ..UdDest::new(server, qpn, qkey)
                });
                Ok(true)
            }
            e @ (CmEvent::SidrFailed { .. } | CmEvent::TimedOut { .. }) => {
                Err(cm_app::connect_error(&e, server, opts.port))
            }
            _ => Ok(false),
        },
    )?;
    let (mut sent, mut received) = (0, 0);
    if messages > 0 {
        say(out, "initiating data transfers");
        for n in &nodes {
            n.post_sends(rt, messages, opts.size, false)?;
            sent += u64::from(messages);
        }
        say(out, "receiving data transfers");
        received = poll_cqs(rt, &mut nodes, messages, opts.timeout)?;
        say(out, "data transfers complete");
    }
    Ok(CmatestSummary {
        connections: opts.connections,
        sent,
        received,
    })
}

fn server(rt: &mut Runtime, opts: &CmatestOptions, out: &mut dyn Write) -> Outcome {
    let listener = listen(rt, opts, PortSpace::Udp)?;
    let messages = opts.messages();
    let mut nodes: Vec<Node> = Vec::with_capacity(opts.connections as usize);
    while nodes.len() < opts.connections as usize {
        if let CmEvent::SidrRequest { id, .. } = rt.wait_cm_event(opts.timeout)? {
            let mut node = Node::new(rt, opts)?;
            node.id = id;
            rt.cm_sidr_reply(id, &SidrReply::new(node.qpn, RDMA_UDP_QKEY))?;
            nodes.push(node);
        }
    }
    rt.host_mut().cm_stop_listening(listener);
    let (mut sent, mut received) = (0, 0);
    if messages > 0 {
        say(out, "receiving data transfers");
        received = poll_cqs(rt, &mut nodes, messages, opts.timeout)?;
        say(out, "sending replies");
        for n in &nodes {
            n.post_sends(rt, messages, opts.size, true)?;
        }
        sent = poll_cqs(rt, &mut nodes, messages, opts.timeout)?;
        say(out, "data transfers complete");
    }
    Ok(CmatestSummary {
        connections: nodes.len() as u32,
        sent,
        received,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Lines, cmatest_pair, cmatest_refused, runtime, runtime_seeded};
    use super::*;
    use crate::io::memory::{self, MemoryDevice, MemoryLinkConfig};
    use crate::io::{Capabilities, Device, DeviceError, SystemClock};
    use crate::time::Instant as LinkInstant;
    use crate::wire::RocePacket;
    use crate::wire::opcode::Transport;
    use std::sync::{Arc, Mutex};

    /// What a UD frame was: sent by us, a connection manager MAD (to QP1), its DSCP.
    type Seen = (bool, bool, u8);

    /// The in-memory link, noting every UD frame it carries either way.
    struct UdDscps {
        inner: MemoryDevice,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    fn note(seen: &Mutex<Vec<Seen>>, sent: bool, frame: &[u8]) {
        if let Ok(p) = RocePacket::parse(frame)
            && p.bth().opcode.transport() == Transport::Ud
        {
            let mad = p.bth().dest_qp == Qpn::GSI;
            seen.lock().unwrap().push((sent, mad, p.ip().dscp()));
        }
    }

    impl Device for UdDscps {
        fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
            let seen = &self.seen;
            self.inner.receive(&mut |f| {
                note(seen, false, f);
                consume(f)
            })
        }

        fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
            note(&self.seen, true, frame);
            self.inner.transmit(frame)
        }

        fn capabilities(&self) -> Capabilities {
            self.inner.capabilities()
        }

        fn next_wakeup(&self) -> Option<LinkInstant> {
            self.inner.next_wakeup()
        }
    }

    /// `-t 104` on the client: its SIDR_REQ and messages leave with DSCP 26, and the server,
    /// which was given no type of service, answers each message with the class it came with
    /// (udaddy's `create_reply_ah`), so that every UD message both ways carries DSCP 26; the
    /// SIDR_REP, made from the request alone, goes with DSCP 0 as Linux's over IPv4.
    #[test]
    fn the_clients_type_of_service_marks_both_ways() {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut opts = options(None);
        opts.timeout = Duration::from_secs(20);
        let server_opts = opts.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let mut rt = runtime(b, "10.0.0.2/24");
            let summary = run(&mut rt, &server_opts, &mut Lines(tx)).unwrap();
            rt.serve_for(Duration::from_secs(1)).unwrap();
            summary
        });
        rx.recv().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let device = UdDscps {
            inner: a,
            seen: seen.clone(),
        };
        let mut rt = runtime_seeded(device, "10.0.0.1/24", 1);
        opts.server = Some("10.0.0.2".parse().unwrap());
        opts.tos = Some(104);
        let summary = run(&mut rt, &opts, &mut Vec::new()).unwrap();
        assert_eq!((summary.sent, summary.received), (10, 10));
        assert_eq!(server.join().unwrap().sent, 10);
        let seen = seen.lock().unwrap();
        for sent in [true, false] {
            let dscps: Vec<u8> = seen
                .iter()
                .filter(|s| s.0 == sent && !s.1)
                .map(|s| s.2)
                .collect();
            assert_eq!(dscps, [26; 10], "sent by us: {sent}");
        }
        let mads: Vec<(bool, u8)> = seen.iter().filter(|s| s.1).map(|s| (s.0, s.2)).collect();
        assert_eq!(mads, [(true, 26), (false, 0)], "SIDR_REQ, SIDR_REP");
    }

    /// Our client against our server: four services resolved, five messages each way on
    /// each, udaddy's lines in udaddy's order.
    #[test]
    fn four_services_between_two_runtimes() {
        // udaddy's server exits once its replies are sent; rxe's wire stays up after.
        let seen = cmatest_pair(run, options(None), 500, Duration::from_secs(1));
        assert_eq!(
            seen.client_lines,
            "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\n\
             receiving data transfers\ndata transfers complete\ntest complete\n\
             return status 0\n"
        );
        assert_eq!(
            seen.server_lines,
            "udaddy: starting server\nreceiving data transfers\nsending replies\n\
             data transfers complete\ntest complete\nreturn status 0\n"
        );
    }

    #[test]
    fn a_message_above_the_mtu_and_no_server_are_one_line() {
        let mut opts = options(Some("10.0.0.2".parse().unwrap()));
        opts.timeout = Duration::from_secs(10);
        let (e, mut rt) = cmatest_refused(run, &opts);
        assert!(
            e.to_string().starts_with("10.0.0.2 port 7174 refused"),
            "{e}"
        );
        opts.size = 5000;
        let e = run(&mut rt, &opts, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("larger than active mtu"), "{e}");
    }
}
