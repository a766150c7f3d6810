//! What a check is written against: [`Ctx`] crafts packets with the wire layer's builder and
//! puts them on the wire to the peer, collects the peer's frames for a bounded time, drives
//! the peer through its agent, and records every frame it sends or keeps with the check's
//! name. Whatever a check creates on the agent is torn down when it ends, pass or fail.

use core::time::Duration;
use std::collections::BTreeSet;
use std::net::IpAddr;

use super::peer::{Peer, PeerError};
use super::proto::{self, Completion, PostRecv, PostSend, Reply, Request};
use crate::endpoint::connect::QpPath;
use crate::time::Instant;
use crate::transport::{Access, QpState, QpType};
use crate::wire::encap::{IPV4_HEADER_LEN, field_at, set_ipv4_checksum};
use crate::wire::icrc;
use crate::wire::{
    BthRepr, Ecn, ExtHeaders, IbPacketRepr, IpRepr, NakCode, Opcode, Psn, Qpn, RocePacket,
    RoceRepr, Syndrome, Transport, UdpRepr,
};

/// How long the suite waits. The in-memory peer runs in virtual time, where waiting is free;
/// a real peer (an emulated rdma_rxe guest) needs real margins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The longest wait for a response the check expects.
    pub response: Duration,
    /// How long the peer must stay silent where a check expects nothing.
    pub quiet: Duration,
    /// After the expected responses, how long to look for unexpected ones.
    pub settle: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            response: Duration::from_secs(2),
            quiet: Duration::from_millis(300),
            settle: Duration::from_millis(100),
        }
    }
}

/// Where frames recorded by the suite go (the `--pcap-out` capture).
pub trait FrameSink {
    /// One frame at `at` on the suite's clock, with a comment naming its check.
    fn record(&mut self, at: Instant, frame: &[u8], comment: &str);
}

/// A sink that keeps nothing.
#[derive(Debug, Default)]
pub struct NoCapture;

impl FrameSink for NoCapture {
    fn record(&mut self, _at: Instant, _frame: &[u8], _comment: &str) {}
}

/// What every check knows about the two ends.
#[derive(Debug, Clone)]
pub struct Env {
    /// The tester's MAC and address.
    pub tester_mac: [u8; 6],
    /// The tester's address.
    pub tester_ip: IpAddr,
    /// The peer's MAC.
    pub peer_mac: [u8; 6],
    /// The peer's address.
    pub peer_ip: IpAddr,
    /// The waits.
    pub timing: Timing,
    /// What the agent says it is.
    pub agent: String,
    /// Congestion control at the peer, as the agent reports it (`none`, `dcqcn`).
    pub cc: String,
}

/// A check could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The agent answered ERR: the peer could not be set up as the check needs.
    #[error("the agent refused `{request}`: {reason}")]
    Refused {
        /// The request, shortened.
        request: String,
        /// The agent's message.
        reason: String,
    },
    /// The agent's reply did not follow the protocol.
    #[error("the agent's reply to `{request}` is malformed: {reason}")]
    Protocol {
        /// The request, shortened.
        request: String,
        /// What is wrong.
        reason: String,
    },
    /// The peer or its agent is gone: the suite stops.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

/// A memory region on the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    /// The handle for agent requests.
    pub handle: u32,
    /// Its address, as a RETH names it.
    pub addr: u64,
    /// Its remote key.
    pub rkey: u32,
    /// Its length.
    pub len: u32,
}

/// A frame from the peer to the tester, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxFrame {
    /// When it arrived, on the suite's clock.
    pub at: Instant,
    /// Its 1-based number in the suite's capture.
    pub number: u64,
    /// Its BTH.
    pub bth: BthRepr,
    /// Its extension headers.
    pub ext: ExtHeaders,
    /// Its payload (without pad).
    pub payload: Vec<u8>,
    /// Its pad bytes.
    pub pad: Vec<u8>,
    /// Whether its ICRC matched.
    pub icrc_ok: bool,
    /// What its IPv4 header breaks of the annex's rules, if anything
    /// ([`RocePacket::ipv4_violation`]).
    pub ipv4_violation: Option<&'static str>,
    /// The IP ECN field.
    pub ecn: Ecn,
    /// The IP DSCP.
    pub dscp: u8,
    /// The IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// The sender's address.
    pub src: IpAddr,
    /// The UDP destination port.
    pub udp_dst: u16,
}

impl RxFrame {
    /// The BTH PSN.
    pub fn psn(&self) -> Psn {
        self.bth.psn
    }

    /// The low five bits of the opcode (the operation, whatever the transport).
    pub fn op(&self) -> u8 {
        self.bth.opcode.low()
    }

    /// The AETH syndrome, if the frame carries one.
    pub fn syndrome(&self) -> Option<Syndrome> {
        self.ext.aeth.map(|a| a.syndrome)
    }

    /// True for an ACKNOWLEDGE with a positive ACK syndrome.
    pub fn is_ack(&self) -> bool {
        self.op() == crate::wire::opcode::op::ACKNOWLEDGE
            && matches!(self.syndrome(), Some(Syndrome::Ack { .. }))
    }

    /// True for a NAK with `code`.
    pub fn is_nak(&self, code: NakCode) -> bool {
        self.syndrome() == Some(Syndrome::Nak(code))
    }

    /// True for any NAK or RNR NAK.
    pub fn is_any_nak(&self) -> bool {
        matches!(
            self.syndrome(),
            Some(Syndrome::Nak(_) | Syndrome::RnrNak { .. })
        )
    }

    /// The AETH MSN, if any.
    pub fn msn(&self) -> Option<u32> {
        self.ext.aeth.map(|a| a.msn.value())
    }

    /// One line for the evidence: `#12 ACK psn 0x10 msn 1`.
    pub fn describe(&self) -> String {
        let mut s = format!("#{} ", self.number);
        match self.syndrome() {
            Some(Syndrome::Ack { .. }) if self.op() == crate::wire::opcode::op::ACKNOWLEDGE => {
                s.push_str("ACK");
            }
            Some(syn @ (Syndrome::Nak(_) | Syndrome::RnrNak { .. })) => {
                s.push_str(&syn.to_string());
            }
            _ => s.push_str(self.bth.opcode.name()),
        }
        s.push_str(&format!(" psn {:#x}", self.psn().value()));
        if let Some(msn) = self.msn() {
            s.push_str(&format!(" msn {msn}"));
        }
        if !self.payload.is_empty() {
            s.push_str(&format!(" {} B", self.payload.len()));
        }
        if !self.icrc_ok {
            s.push_str(" BAD-ICRC");
        }
        s
    }
}

/// Several frames in one line of evidence.
pub fn describe_all(frames: &[RxFrame]) -> String {
    if frames.is_empty() {
        return "nothing".to_owned();
    }
    let shown: Vec<String> = frames.iter().take(8).map(RxFrame::describe).collect();
    let more = frames.len().saturating_sub(8);
    if more > 0 {
        format!("{} (+{more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// How to put a packet on the wire beyond its IB headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wire {
    /// The IP ECN field (CE to play a congested switch).
    pub ecn: Option<Ecn>,
    /// Flip the ICRC's bits.
    pub corrupt_icrc: bool,
    /// Claim another source address (on the tester's subnet).
    pub src: Option<IpAddr>,
    /// Break a rule the RoCEv2 annex sets for the IPv4 header (IPv4 only).
    pub ipv4: Option<Ipv4Fault>,
}

/// An IPv4 header the RoCEv2 annex does not allow (A17.3.1.1), with the ICRC right for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv4Fault {
    /// A wrong header checksum (the ICRC does not cover it).
    BadChecksum,
    /// Four bytes of options (NOP, NOP, NOP, end): IHL 6, where CA17-3 asks for 5.
    Options,
    /// DF clear, where CA17-7 asks for it set.
    DontFragmentClear,
    /// IP version 6 in the IPv4 header of an IPv4 frame (CA17-27 drops it), the header
    /// checksum and the ICRC computed for the bytes so sent.
    Version6,
}

/// The context of one running check: see the module documentation.
pub struct Ctx<'a> {
    peer: &'a mut dyn Peer,
    env: &'a Env,
    sink: &'a mut dyn FrameSink,
    id: &'static str,
    numbers: &'a mut u64,
    frames: Vec<u64>,
    tester_qpns: BTreeSet<u32>,
    next_qpn: Qpn,
    qps: Vec<Qpn>,
    mrs: Vec<u32>,
    any_cnp: bool,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("check", &self.id)
            .finish_non_exhaustive()
    }
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        peer: &'a mut dyn Peer,
        env: &'a Env,
        sink: &'a mut dyn FrameSink,
        id: &'static str,
        numbers: &'a mut u64,
        first_qpn: Qpn,
    ) -> Ctx<'a> {
        Ctx {
            peer,
            env,
            sink,
            id,
            numbers,
            frames: Vec::new(),
            tester_qpns: BTreeSet::new(),
            next_qpn: first_qpn,
            qps: Vec::new(),
            mrs: Vec::new(),
            any_cnp: false,
        }
    }

    /// Keeps every CNP from the peer, whatever QP it names, so that a misaddressed one shows.
    pub fn watch_all_cnps(&mut self) {
        self.any_cnp = true;
    }

    /// The suite's view of both ends.
    pub fn env(&self) -> &Env {
        self.env
    }

    /// Now, on the suite's clock.
    pub fn now(&self) -> Instant {
        self.peer.now()
    }

    /// The frame numbers this check recorded.
    pub(crate) fn into_frames(self) -> Vec<u64> {
        self.frames
    }

    /// A queue pair number for the tester's side of a connection: frames to it are this
    /// check's.
    pub fn tester_qpn(&mut self) -> Qpn {
        let q = self.next_qpn;
        self.next_qpn = Qpn::new(q.value() + 1);
        self.tester_qpns.insert(q.value());
        q
    }

    fn record(&mut self, at: Instant, frame: &[u8], what: &str) -> u64 {
        *self.numbers += 1;
        let n = *self.numbers;
        self.frames.push(n);
        let comment = format!("{}: {what}", self.id);
        self.sink.record(at, frame, &comment);
        n
    }

    // ---- the wire ----

    /// Sends `ib` from the tester to the peer as a RoCEv2 frame.
    pub fn send(&mut self, ib: IbPacketRepr<'_>) -> Result<u64, CheckError> {
        self.send_with(ib, Wire::default())
    }

    /// Sends `ib` with the changes `wire` asks for.
    pub fn send_with(&mut self, ib: IbPacketRepr<'_>, wire: Wire) -> Result<u64, CheckError> {
        let env = self.env;
        let src = wire.src.unwrap_or(env.tester_ip);
        let Some(mut repr) = RoceRepr::rxe(
            env.tester_mac,
            env.peer_mac,
            src,
            env.peer_ip,
            Qpn::new(0),
            ib,
        ) else {
            return Err(CheckError::Protocol {
                request: "a frame".into(),
                reason: "the tester's and the peer's addresses are of different families".into(),
            });
        };
        // One UDP source port per tester QP, as a connected QP of rxe would use.
        let local = Qpn::new(self.tester_qpns.iter().next().copied().unwrap_or(0));
        repr.udp = UdpRepr::rxe_connected(0, local, ib.bth.dest_qp);
        if let Some(ecn) = wire.ecn {
            repr = repr.with_ecn(ecn);
        }
        if let IpRepr::V4(h) = &mut repr.ip {
            match wire.ipv4 {
                Some(Ipv4Fault::Options) => h.options = &[1, 1, 1, 0],
                Some(Ipv4Fault::DontFragmentClear) => h.dont_fragment = false,
                Some(Ipv4Fault::BadChecksum | Ipv4Fault::Version6) | None => {}
            }
        }
        let mut frame = repr.to_vec().map_err(|e| CheckError::Protocol {
            request: "a frame".into(),
            reason: format!("cannot build it: {e}"),
        })?;
        let ip_at = repr.eth.map_or(0, |e| e.header_len());
        if wire.ipv4 == Some(Ipv4Fault::BadChecksum) {
            frame[ip_at + field_at::IPV4_CHECKSUM] ^= 0x5a;
        }
        if wire.ipv4 == Some(Ipv4Fault::Version6) {
            frame[ip_at] = 0x60 | (frame[ip_at] & 0x0f);
            set_ipv4_checksum(&mut frame[ip_at..ip_at + IPV4_HEADER_LEN]);
            icrc::fill_as_ipv4(&mut frame[ip_at..]).map_err(|e| CheckError::Protocol {
                request: "a frame".into(),
                reason: format!("cannot fill its ICRC: {e}"),
            })?;
        }
        if wire.corrupt_icrc
            && let Some(last) = frame.last_mut()
        {
            *last ^= 0xff;
        }
        // The suite's one network rule: frames go to the peer and nowhere else (read from
        // what they were built from: a frame with a wrong IP version does not parse).
        debug_assert_eq!(repr.ip.dst_addr(), env.peer_ip);
        let at = self.now();
        let what = format!(
            "sent {} psn {:#x}",
            ib.bth.opcode.name(),
            ib.bth.psn.value()
        );
        let n = self.record(at, &frame, &what);
        self.peer.transmit(&frame)?;
        Ok(n)
    }

    /// The next frame from the peer to one of this check's tester QPs, waiting up to
    /// `timeout`. Frames for other QPs (a previous check's) and other traffic are skipped.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<RxFrame>, CheckError> {
        let deadline = self.now() + timeout;
        loop {
            let Some((at, frame)) = self.peer.receive(deadline)? else {
                return Ok(None);
            };
            if let Some(rx) = self.accept(at, &frame) {
                return Ok(Some(rx));
            }
        }
    }

    fn accept(&mut self, at: Instant, frame: &[u8]) -> Option<RxFrame> {
        let p = RocePacket::parse(frame).ok()?;
        if p.ip().src_addr() != self.env.peer_ip || p.ip().dst_addr() != self.env.tester_ip {
            return None;
        }
        let bth = p.bth();
        let cnp = self.any_cnp && bth.opcode == Opcode::CNP;
        if !cnp && !self.tester_qpns.contains(&bth.dest_qp.value()) {
            return None;
        }
        let mut rx = RxFrame {
            at,
            number: 0,
            bth,
            ext: p.ext(),
            payload: p.payload().to_vec(),
            pad: p.pad().to_vec(),
            icrc_ok: p.icrc_ok(),
            ipv4_violation: p.ipv4_violation(),
            ecn: p.ecn(),
            dscp: p.ip().dscp(),
            ttl: p.ip().ttl(),
            src: p.ip().src_addr(),
            udp_dst: p.udp().dst_port,
        };
        let what = rx.describe();
        let what = what.split_once(' ').map_or(what.as_str(), |(_, rest)| rest);
        rx.number = self.record(at, frame, &format!("received {what}"));
        Some(rx)
    }

    /// Everything the peer sends this check for `window`.
    pub fn collect(&mut self, window: Duration) -> Result<Vec<RxFrame>, CheckError> {
        self.collect_until(window, Duration::ZERO, |_| false)
    }

    /// Frames until `done` says the expected ones are in (then `settle` more time for
    /// anything unexpected) or `timeout` passes.
    pub fn collect_until(
        &mut self,
        timeout: Duration,
        settle: Duration,
        mut done: impl FnMut(&[RxFrame]) -> bool,
    ) -> Result<Vec<RxFrame>, CheckError> {
        let mut out = Vec::new();
        let mut deadline = self.now() + timeout;
        let mut settled = false;
        loop {
            let left = deadline.saturating_since(self.now());
            if left.is_zero() {
                return Ok(out);
            }
            match self.recv(left)? {
                Some(f) => out.push(f),
                None => return Ok(out),
            }
            if !settled && done(&out) {
                settled = true;
                deadline = self.now() + settle;
            }
        }
    }

    /// The frames of the next `timeout` until the first for which `want` holds, inclusive.
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        mut want: impl FnMut(&RxFrame) -> bool,
    ) -> Result<(Vec<RxFrame>, Option<RxFrame>), CheckError> {
        let deadline = self.now() + timeout;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_since(self.now());
            match self.recv(left)? {
                Some(f) if want(&f) => return Ok((before, Some(f))),
                Some(f) => before.push(f),
                None => return Ok((before, None)),
            }
        }
    }

    // ---- the agent ----

    fn call(&mut self, req: &Request) -> Result<Reply, CheckError> {
        let line = req.to_string();
        let short = || line.chars().take(100).collect::<String>();
        let reply = self.peer.agent(&line)?;
        match Reply::parse(req, &reply) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(reason)) => Err(CheckError::Refused {
                request: short(),
                reason,
            }),
            Err(e) => Err(CheckError::Protocol {
                request: short(),
                reason: e.to_string(),
            }),
        }
    }

    fn unexpected(&self, req: &Request) -> CheckError {
        CheckError::Protocol {
            request: req.to_string(),
            reason: "a reply of the wrong kind".into(),
        }
    }

    /// Registers `len` bytes of `fill` on the peer.
    pub fn reg_mr(&mut self, len: u32, access: Access, fill: u8) -> Result<Mr, CheckError> {
        let req = Request::RegMr { len, access, fill };
        match self.call(&req)? {
            Reply::Mr { mr, addr, rkey, .. } => {
                self.mrs.push(mr);
                Ok(Mr {
                    handle: mr,
                    addr,
                    rkey,
                    len,
                })
            }
            _ => Err(self.unexpected(&req)),
        }
    }

    /// Reads `len` bytes at `offset` of a region.
    pub fn read_mr(&mut self, mr: &Mr, offset: u32, len: u32) -> Result<Vec<u8>, CheckError> {
        let req = Request::ReadMr {
            mr: mr.handle,
            offset,
            len,
        };
        match self.call(&req)? {
            Reply::Data { data } => Ok(data),
            _ => Err(self.unexpected(&req)),
        }
    }

    /// Writes `data` at `offset` of a region.
    pub fn write_mr(&mut self, mr: &Mr, offset: u32, data: &[u8]) -> Result<(), CheckError> {
        self.call(&Request::WriteMr {
            mr: mr.handle,
            offset,
            data: data.to_vec(),
        })
        .map(drop)
    }

    /// Creates a QP of `qp_type` on the peer.
    pub fn create_qp(&mut self, qp_type: QpType) -> Result<Qpn, CheckError> {
        let req = Request::CreateQp {
            qp_type,
            send_wr: 64,
            recv_wr: 64,
        };
        match self.call(&req)? {
            Reply::Qp { qpn } => {
                self.qps.push(qpn);
                Ok(qpn)
            }
            _ => Err(self.unexpected(&req)),
        }
    }

    /// Brings a peer QP to RTS.
    pub fn connect_qp(&mut self, qpn: Qpn, path: QpPath) -> Result<(), CheckError> {
        self.call(&Request::ConnectQp { qpn, path }).map(drop)
    }

    /// Moves a peer QP to ERR or RESET.
    pub fn modify_qp(&mut self, qpn: Qpn, state: QpState) -> Result<(), CheckError> {
        self.call(&Request::ModifyQp { qpn, state }).map(drop)
    }

    /// The state of a peer QP.
    pub fn query_qp(&mut self, qpn: Qpn) -> Result<QpState, CheckError> {
        let req = Request::QueryQp { qpn };
        match self.call(&req)? {
            Reply::State { state } => Ok(state),
            _ => Err(self.unexpected(&req)),
        }
    }

    /// Posts a receive of `len` bytes at `offset` of `mr`.
    pub fn post_recv(
        &mut self,
        qpn: Qpn,
        wr_id: u64,
        mr: &Mr,
        offset: u32,
        len: u32,
    ) -> Result<(), CheckError> {
        let mr = mr.handle;
        let req = PostRecv {
            qpn,
            wr_id,
            mr,
            offset,
            len,
        };
        self.call(&Request::PostRecv(req)).map(drop)
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, wr: PostSend) -> Result<(), CheckError> {
        self.call(&Request::PostSend(wr)).map(drop)
    }

    /// Completions of a peer QP, waiting up to `timeout` for the first (bounded by the
    /// protocol's longest wait).
    pub fn poll_cq(&mut self, qpn: Qpn, timeout: Duration) -> Result<Vec<Completion>, CheckError> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let req = Request::PollCq {
            qpn,
            max: proto::MAX_POLL,
            timeout_ms: ms.min(proto::MAX_POLL_MS),
        };
        match self.call(&req)? {
            Reply::Completions { wcs } => Ok(wcs),
            _ => Err(self.unexpected(&req)),
        }
    }

    /// Destroys what the check created on the agent (errors other than a lost peer ignored:
    /// a QP may already be gone).
    pub(crate) fn teardown(&mut self) -> Result<(), PeerError> {
        for qpn in std::mem::take(&mut self.qps) {
            match self.call(&Request::DestroyQp { qpn }) {
                Err(CheckError::Peer(e)) => return Err(e),
                _ => continue,
            }
        }
        for mr in std::mem::take(&mut self.mrs) {
            match self.call(&Request::DeregMr { mr }) {
                Err(CheckError::Peer(e)) => return Err(e),
                _ => continue,
            }
        }
        Ok(())
    }
}

/// A packet of `transport` whose opcode is `low` (the operation, IBA 9.2.1), its pad count
/// set from the payload.
pub fn packet<'p>(
    transport: Transport,
    low: u8,
    dest_qp: Qpn,
    psn: Psn,
    ext: ExtHeaders,
    payload: &'p [u8],
    ack_req: bool,
) -> IbPacketRepr<'p> {
    let mut bth = BthRepr::new(Opcode::new(transport, low), dest_qp, psn);
    bth.ack_req = ack_req;
    IbPacketRepr::new(bth, ext, payload)
}
