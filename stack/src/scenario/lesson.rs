//! Teaching captures (`roce gen`): short exchanges between two of our hosts, each showing one
//! thing of the RC/UC/UD transports or of DCQCN, made by the real engine and framing over the
//! scenario network, with faults scripted rather than random ("drop the second READ response")
//! so that every capture shows exactly what it teaches.
//!
//! The capture is a mirror port on the link: every frame either host sends, when it leaves the
//! NIC, so a frame the lesson drops is in the capture and never reaches the peer. Frames carry
//! pcapng comments saying what happens to them (dropped, retransmitted, a NAK and why), which
//! Wireshark shows as packet comments.

use core::time::Duration;
use std::cell::RefCell;
use std::rc::Rc;

use thiserror::Error;

use super::net::{
    Bottleneck, CAPTURE_ORIGIN, HOST_PRIORITY, NetConfig, NetError, Network, Side, WireTap,
};
use crate::cc::{CcError, Preset};
use crate::endpoint::Host;
use crate::endpoint::cm::{AcceptParams, CmEvent, ConnId, ConnectParams, ListenParams, init_qp};
use crate::endpoint::connect::{QpPath, connect};
use crate::io::memory::{MAC_A, MAC_B};
use crate::io::pcapng::PcapngWriter;
use crate::rng::Rng;
use crate::time::Instant;
use crate::transport::{
    Access, CqId, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, TransportConfig,
    TransportError, WcStatus, WorkCompletion,
};
use crate::wire::cm::PortSpace;
use crate::wire::pause::{MacControlRepr, PfcRepr, quanta_to_ps};
use crate::wire::{Ecn, NakCode, Psn, Qpn, RnrTimer, RocePacket, Syndrome};

mod script;
mod work;

use script::{Annotator, Drop};
use work::{Landing, Work};

/// One teaching capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lesson {
    /// `write`: an RC RDMA WRITE of three packets and its ACK.
    Write,
    /// `write-imm`: an RC RDMA WRITE with immediate.
    WriteImm,
    /// `send`: an RC SEND of three packets into a posted receive.
    Send,
    /// `send-imm`: an RC SEND with immediate data.
    SendImm,
    /// `send-inv`: an RC SEND with invalidate.
    SendInv,
    /// `read`: an RC RDMA READ and its three responses.
    Read,
    /// `atomics`: COMPARE_SWAP and FETCH_ADD and their atomic acknowledges.
    Atomics,
    /// `uc`: a UC RDMA WRITE, no ACKs.
    Uc,
    /// `ud`: a UD SEND with its DETH.
    Ud,
    /// `loss-gbn`: a lost packet, the sequence error NAK and go-back-N.
    LossGbn,
    /// `ack-loss`: a lost ACK, the timer and a tail probe.
    AckLoss,
    /// `rnr`: a SEND before a receive is posted, the RNR NAK and the retry.
    Rnr,
    /// `read-retry`: a lost READ response and the re-issued READ.
    ReadRetry,
    /// `atomic-replay`: a lost atomic acknowledge answered from the responder's cache.
    AtomicReplay,
    /// `cnp`: CE marks, CNPs and DCQCN's rate cut.
    Cnp,
    /// `nak-access`: a wrong R_Key and the remote access error NAK.
    NakAccess,
    /// `nak-invalid`: a SEND too long for its receive and the invalid request NAK.
    NakInvalid,
    /// `retry-exceeded`: an unreachable peer and the retry counter running out.
    RetryExceeded,
    /// `pfc`: a PFC XOFF and XON stalling a WRITE without loss.
    Pfc,
    /// `cm-connect`: rdma_cm's REQ, REP and RTU, a SEND on the connected QPs, DREQ and DREP.
    CmConnect,
    /// `cm-reject`: REJ for a port nothing listens on, then REJ from the application.
    CmReject,
}

impl Lesson {
    /// Every lesson, in the order `roce gen --list` shows them.
    pub const ALL: [Lesson; 21] = [
        Lesson::Write,
        Lesson::WriteImm,
        Lesson::Send,
        Lesson::SendImm,
        Lesson::SendInv,
        Lesson::Read,
        Lesson::Atomics,
        Lesson::Uc,
        Lesson::Ud,
        Lesson::LossGbn,
        Lesson::AckLoss,
        Lesson::Rnr,
        Lesson::ReadRetry,
        Lesson::AtomicReplay,
        Lesson::Cnp,
        Lesson::NakAccess,
        Lesson::NakInvalid,
        Lesson::RetryExceeded,
        Lesson::Pfc,
        Lesson::CmConnect,
        Lesson::CmReject,
    ];

    /// The lesson's name on the command line and in its file name.
    pub const fn name(self) -> &'static str {
        match self {
            Lesson::Write => "write",
            Lesson::WriteImm => "write-imm",
            Lesson::Send => "send",
            Lesson::SendImm => "send-imm",
            Lesson::SendInv => "send-inv",
            Lesson::Read => "read",
            Lesson::Atomics => "atomics",
            Lesson::Uc => "uc",
            Lesson::Ud => "ud",
            Lesson::LossGbn => "loss-gbn",
            Lesson::AckLoss => "ack-loss",
            Lesson::Rnr => "rnr",
            Lesson::ReadRetry => "read-retry",
            Lesson::AtomicReplay => "atomic-replay",
            Lesson::Cnp => "cnp",
            Lesson::NakAccess => "nak-access",
            Lesson::NakInvalid => "nak-invalid",
            Lesson::RetryExceeded => "retry-exceeded",
            Lesson::Pfc => "pfc",
            Lesson::CmConnect => "cm-connect",
            Lesson::CmReject => "cm-reject",
        }
    }

    /// What the capture shows, in one line.
    pub const fn summary(self) -> &'static str {
        match self {
            Lesson::Write => {
                "RC RDMA WRITE of 3000 bytes: FIRST, MIDDLE, LAST with a RETH, one ACK"
            }
            Lesson::WriteImm => {
                "RC RDMA WRITE with immediate: the ImmDt in the last packet consumes a receive at B"
            }
            Lesson::Send => "RC SEND of 2500 bytes into a posted receive: FIRST, MIDDLE, LAST, ACK",
            Lesson::SendImm => "RC SEND with immediate data (ImmDt header), and its ACK",
            Lesson::SendInv => {
                "RC SEND with invalidate: the IETH names an R_Key B invalidates on completion"
            }
            Lesson::Read => {
                "RC RDMA READ of 3000 bytes: one request, READ RESPONSE FIRST/MIDDLE/LAST with AETH"
            }
            Lesson::Atomics => {
                "RC COMPARE_SWAP then FETCH_ADD on 8 bytes at B: AtomicETH, ATOMIC ACKNOWLEDGE with the old value"
            }
            Lesson::Uc => "UC RDMA WRITE of 3000 bytes: the same packets as RC, and no ACKs at all",
            Lesson::Ud => "UD SEND of 500 bytes: DETH with Q_Key and source QP, no ACK",
            Lesson::LossGbn => {
                "the 3rd packet of an 8-packet WRITE is lost: NAK (PSN sequence error), go-back-N from it"
            }
            Lesson::AckLoss => {
                "the ACK of a WRITE is lost: the requester's timer fires and a tail probe brings a new ACK"
            }
            Lesson::Rnr => {
                "SEND before B posted a receive: RNR NAK, the requester waits the RNR timer and retries"
            }
            Lesson::ReadRetry => {
                "the 2nd READ response is lost: the requester re-issues the READ from the missing PSN"
            }
            Lesson::AtomicReplay => {
                "the ATOMIC ACKNOWLEDGE is lost: the FETCH_ADD is resent and answered from B's reply cache, not executed twice"
            }
            Lesson::Cnp => {
                "a 4 Gb/s bottleneck marks CE: B sends CNPs, A's DCQCN cuts its rate, packets spread out"
            }
            Lesson::NakAccess => {
                "a WRITE with a wrong R_Key: B answers NAK REMOTE_ACCESS_ERROR, A's request completes in error (REM_ACCESS_ERR) and its QP stops"
            }
            Lesson::NakInvalid => {
                "a 2500-byte SEND into a 1024-byte receive: B answers NAK INVALID_REQUEST, both sides complete in error (REM_INV_REQ_ERR at A, LOC_LEN_ERR at B)"
            }
            Lesson::RetryExceeded => {
                "B is unreachable: A's timers probe with the WRITE's last packet, then send its first alone, twice per local ACK timeout (1 ms) while nothing answers, until retry_cnt (3) timeouts are spent; then the WRITE completes with RETRY_EXC_ERR"
            }
            Lesson::Pfc => {
                "B's port sends PFC XOFF in the middle of a 16-packet WRITE: A's NIC stops for 150 us until XON; the WRITE stalls, nothing is lost or resent"
            }
            Lesson::CmConnect => {
                "rdma_cm connects A's RC QP to B's service 7174: REQ, REP, RTU on QP1 (the QPNs and PSNs the QPs then use), a SEND, then DREQ and DREP"
            }
            Lesson::CmReject => {
                "rdma_cm refusals: a REQ for port 7175 where nothing listens gets REJ reason 8 (invalid service ID); B's application refuses the next: REJ reason 28 (consumer defined)"
            }
        }
    }

    /// The lessons about rdma_cm's messages on QP1 rather than the transport.
    pub const fn is_cm(self) -> bool {
        matches!(self, Lesson::CmConnect | Lesson::CmReject)
    }

    /// The lesson called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Lesson> {
        Lesson::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// How to make a lesson's capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenOptions {
    /// Picks the PSNs and the payload bytes; the same seed gives the same file.
    pub seed: u64,
    /// Path MTU of the connection.
    pub mtu: Mtu,
    /// The hosts speak IPv6 instead of IPv4.
    pub ipv6: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            seed: 1,
            mtu: Mtu::M1024,
            ipv6: false,
        }
    }
}

/// A lesson's capture and what went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The pcapng file.
    pub pcapng: Vec<u8>,
    /// Frames in the capture.
    pub frames: u64,
    /// Frames the script dropped.
    pub dropped: u64,
}

/// Why a lesson's capture could not be made.
#[derive(Debug, Error)]
pub enum GenError {
    /// The two hosts' network failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// A verb of the script was refused.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The DCQCN parameters are invalid.
    #[error("DCQCN: {0}")]
    Dcqcn(#[from] CcError),
    /// The capture could not be written.
    #[error("writing the capture: {0}")]
    Capture(#[from] std::io::Error),
    /// The exchange did not go as the lesson says it does.
    #[error("lesson {lesson}: {what}")]
    Failed {
        /// The lesson's name.
        lesson: &'static str,
        /// What went otherwise.
        what: String,
    },
}

/// Makes `lesson`'s capture.
pub fn generate(lesson: Lesson, opts: &GenOptions) -> Result<Generated, GenError> {
    let mut run = Run::new(lesson, opts)?;
    run.play()?;
    // The network holds the other handle on the tap: once it is gone the tap is ours alone.
    let Run { net, tap, .. } = run;
    drop(net);
    let tap = Rc::into_inner(tap)
        .ok_or_else(|| GenError::Failed {
            lesson: lesson.name(),
            what: "the capture is still shared".to_owned(),
        })?
        .into_inner();
    if let Some(e) = tap.error {
        return Err(GenError::Capture(e));
    }
    Ok(Generated {
        pcapng: tap.writer.into_inner(),
        frames: tap.frames,
        dropped: tap.dropped,
    })
}

const VA_A: u64 = 0x1_0000;
const VA_B: u64 = 0x8_0000;
const REGION: usize = 16 * 1024;
const Q_KEY: u32 = 0x1111_1111;
/// B's 8-byte atomic target, and its value before the lesson.
const ATOMIC_AT: u64 = VA_B + 8192;
const ATOMIC_START: u64 = 0x0000_0000_0000_002a;
/// Each host's line rate.
const LINE_GBPS: f64 = 10.0;
/// The port B's service listens on in the rdma_cm lessons (rping's).
const CM_PORT: u16 = 7174;
/// A lesson that has not finished by then failed.
const TIME_LIMIT: Duration = Duration::from_millis(100);

/// One side's queue pair, completion queue and region.
#[derive(Debug, Clone, Copy)]
struct End {
    qpn: Qpn,
    cq: CqId,
    key: u32,
}

/// The mirror port: records every frame with its comment, applies the drop script.
struct Tap {
    writer: PcapngWriter<Vec<u8>>,
    first_comment: Option<String>,
    /// Record frames where they arrive (after the link's queue and CE marking) rather than
    /// where they leave: the CNP lesson shows the marks.
    at_arrival: bool,
    script: Vec<Drop>,
    annotator: Annotator,
    /// A comment for the next frame each side sends (A's, B's), from the lesson's script.
    next_note: [Option<String>; 2],
    frames: u64,
    /// Frames each side sent (A's, B's).
    sent: [u64; 2],
    dropped: u64,
    error: Option<std::io::Error>,
}

/// Shares the tap between the network (which calls it) and the run (which reads it after).
struct SharedTap(Rc<RefCell<Tap>>);

impl WireTap for SharedTap {
    fn on_frame(&mut self, at: Instant, from: Side, frame: &[u8]) -> bool {
        let mut tap = self.0.borrow_mut();
        if tap.at_arrival {
            return true;
        }
        tap.record(at, from, frame)
    }

    fn on_arrival(&mut self, at: Instant, to: Side, frame: &[u8]) {
        let mut tap = self.0.borrow_mut();
        if tap.at_arrival {
            tap.record(at, to.peer(), frame);
        }
    }
}

impl Tap {
    /// Writes the frame `from` sent, seen at `at`, with its comment; false if the script
    /// drops it.
    fn record(&mut self, at: Instant, from: Side, frame: &[u8]) -> bool {
        let packet = RocePacket::parse(frame).ok();
        let mut drop = false;
        if let Some(p) = &packet {
            // Every rule counts every frame, so that each one's `nth` means what it says.
            for rule in &mut self.script {
                drop |= rule.matches(from, p.opcode());
            }
        }
        let mut notes: Vec<String> = self.first_comment.take().into_iter().collect();
        notes.extend(self.next_note[from as usize].take());
        if let Some(p) = &packet {
            notes.extend(self.annotator.note(self.frames + 1, from, p));
        }
        if drop {
            self.dropped += 1;
            notes.push(
                "DROPPED by the switch after this capture point: the peer never sees it".to_owned(),
            );
        }
        let comment = (!notes.is_empty()).then(|| notes.join("; "));
        self.frames += 1;
        self.sent[from as usize] += 1;
        let at = CAPTURE_ORIGIN + (at - Instant::ZERO);
        if let Err(e) = self.writer.write_frame(at, frame, comment.as_deref()) {
            self.error.get_or_insert(e);
        }
        !drop
    }
}

struct Run {
    lesson: Lesson,
    net: Network<Vec<u8>>,
    tap: Rc<RefCell<Tap>>,
    a: End,
    b: End,
}

impl Run {
    fn new(lesson: Lesson, opts: &GenOptions) -> Result<Run, GenError> {
        let cnp = lesson == Lesson::Cnp;
        let net_config = NetConfig {
            line_gbps: LINE_GBPS,
            delay: Duration::from_micros(2),
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            bottleneck: cnp.then_some(Bottleneck {
                gbps: 4.0,
                ce_threshold_bytes: 20_000,
            }),
            seed: opts.seed,
            link_mtu: 4200,
            ipv6: opts.ipv6,
        };
        let mut net = Network::new(&net_config, TransportConfig::default(), None, Side::A)?;
        if cnp {
            net.set_dcqcn(Preset::Paper.params(net_config.line_gbps * 1e9))?;
        } else {
            // As rdma_rxe sends: not ECN-capable.
            net.a.set_ecn(Ecn::NotEct);
            net.b.set_ecn(Ecn::NotEct);
        }
        let (ip_a, ip_b) = (net.addr(Side::A), net.addr(Side::B));
        net.a.add_neighbour(ip_b, MAC_B);
        net.b.add_neighbour(ip_a, MAC_A);
        let mut rng = Rng::new(opts.seed);
        let qp_type = match lesson {
            Lesson::Uc => QpType::Uc,
            Lesson::Ud => QpType::Ud,
            _ => QpType::Rc,
        };
        let a = setup(&mut net.a, qp_type, VA_A, &mut rng)?;
        let b = setup(&mut net.b, qp_type, VA_B, &mut rng)?;
        let b_atomic = net.b.engine_mut().mr_mut(b.key).map(|mr| mr.bytes_mut());
        if let Some(bytes) = b_atomic {
            let at = (ATOMIC_AT - VA_B) as usize;
            bytes[at..at + 8].copy_from_slice(&ATOMIC_START.to_ne_bytes());
        }
        let (psn_a, psn_b) = (
            Psn::new(rng.below(1 << 24) as u32),
            Psn::new(rng.below(1 << 24) as u32),
        );
        let path = |dest, dest_qp, rq_psn, sq_psn| {
            let mut p = QpPath::new(qp_type, dest, dest_qp, rq_psn, sq_psn, opts.mtu);
            p.access = Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC;
            p.qkey = Q_KEY;
            // A short RNR wait (0.32 ms, code 10) keeps the rnr lesson small.
            p.min_rnr_timer = RnrTimer::new(10);
            if lesson == Lesson::RetryExceeded {
                // A local ACK timeout of 4.096 us x 2^8 = 1.05 ms (IBA 9.7.6.1.3), 3 retries.
                p.timeout = 8;
                p.retry_cnt = 3;
            }
            p
        };
        // The CM lessons' QPs are connected by rdma_cm, from the REQ and REP.
        if !lesson.is_cm() {
            connect(net.a.engine_mut(), a.qpn, &path(ip_b, b.qpn, psn_b, psn_a))?;
            connect(net.b.engine_mut(), b.qpn, &path(ip_a, a.qpn, psn_a, psn_b))?;
        }
        let tap = Rc::new(RefCell::new(Tap {
            writer: PcapngWriter::new(Vec::new(), concat!("roce gen ", env!("CARGO_PKG_VERSION")))?,
            first_comment: Some(format!(
                "roce gen {}: {}{}",
                lesson.name(),
                lesson.summary(),
                if opts.ipv6 {
                    ". Over IPv6 the UDP checksum is 0, as rdma_rxe and RoCE NICs send it \
                     (RFC 8200 asks for one; Wireshark flags it): the ICRC covers the packet"
                } else {
                    ""
                }
            )),
            at_arrival: cnp,
            script: script::drops(lesson),
            annotator: Annotator::new(opts.mtu.bytes()),
            next_note: [None, None],
            frames: 0,
            sent: [0, 0],
            dropped: 0,
            error: None,
        }));
        net.set_tap(Box::new(SharedTap(tap.clone())));
        Ok(Run {
            lesson,
            net,
            tap,
            a,
            b,
        })
    }

    fn failed(&self, what: impl Into<String>) -> GenError {
        GenError::Failed {
            lesson: self.lesson.name(),
            what: what.into(),
        }
    }

    /// Posts the lesson's work, runs until its completions arrived (and the link is quiet),
    /// and checks the outcome.
    fn play(&mut self) -> Result<(), GenError> {
        let (a, b) = (self.a, self.b);
        let addr_b = self.net.addr(Side::B);
        if self.lesson.is_cm() {
            return self.play_cm();
        }
        let Some(work) = work::plan(self.lesson, a, b, addr_b, &mut self.net.b)? else {
            return self.play_cnp();
        };
        let Work {
            sends,
            recvs,
            want_a,
            want_b,
            mut late_recv,
            lands,
            status_a,
            status_b,
        } = work;
        for r in recvs {
            self.net.b.engine_mut().post_recv(b.qpn, r)?;
        }
        for s in sends {
            self.net.a.engine_mut().post_send(a.qpn, s)?;
        }
        let mut done_a = Vec::new();
        let mut done_b = Vec::new();
        let mut pauses = (self.lesson == Lesson::Pfc).then(PauseScript::default);
        let limit = Instant::ZERO + TIME_LIMIT;
        loop {
            let pause_wake = match &mut pauses {
                Some(p) => p.poll(&mut self.net, &self.tap)?,
                None => None,
            };
            if let Some((at, _)) = &late_recv
                && self.net.now() >= *at
                && let Some((_, r)) = late_recv.take()
            {
                self.net.b.engine_mut().post_recv(b.qpn, r)?;
            }
            collect(&mut self.net.a, a.cq, &mut done_a);
            collect(&mut self.net.b, b.cq, &mut done_b);
            let paused = pauses.as_ref().is_some_and(|p| !p.done());
            if done_a.len() >= want_a && done_b.len() >= want_b && late_recv.is_none() && !paused {
                break;
            }
            let wake = late_recv
                .as_ref()
                .map(|(t, _)| *t)
                .into_iter()
                .chain(pause_wake)
                .filter(|&t| t > self.net.now())
                .min();
            if !self.net.step(wake)? || self.net.now() > limit {
                return Err(self.failed(format!(
                    "stopped with {} of {want_a} completions at A and {} of {want_b} at B",
                    done_a.len(),
                    done_b.len()
                )));
            }
        }
        // Let trailing acknowledgements go out, then stop before idle timers.
        let quiet = self.net.now() + Duration::from_micros(20);
        while self.net.now() < quiet && self.net.step(Some(quiet))? {}
        // The lesson's completions have the status it teaches (an error lesson's request
        // fails; the rest succeed).
        let statuses = done_a
            .iter()
            .map(|wc| (wc, status_a))
            .chain(done_b.iter().map(|wc| (wc, status_b)));
        for (wc, want) in statuses {
            if wc.status != want {
                return Err(self.failed(format!(
                    "work request {} completed with {:?}, not {want:?}",
                    wc.wr_id, wc.status
                )));
            }
        }
        self.check_atomics()?;
        if let Some(p) = &pauses {
            p.check().map_err(|what| self.failed(what))?;
        }
        lands.map_or(Ok(()), |l| self.check_landing(l))
    }

    /// The lesson's data arrived whole: the bytes it carried equal those it came from.
    fn check_landing(&self, l: Landing) -> Result<(), GenError> {
        let region = |host: &Host, end: End| {
            host.engine()
                .mr(end.key)
                .map(|mr| mr.bytes().to_vec())
                .unwrap_or_default()
        };
        let (a, b) = (region(&self.net.a, self.a), region(&self.net.b, self.b));
        let (from, to) = if l.a_to_b { (&a, &b) } else { (&b, &a) };
        let sent = from.get(l.from_at..l.from_at + l.len);
        let landed = to.get(l.to_at..l.to_at + l.len);
        match (sent, landed) {
            (Some(s), Some(d)) if s == d => Ok(()),
            (Some(s), Some(d)) => {
                let at = s.iter().zip(d).position(|(x, y)| x != y).unwrap_or(0);
                Err(self.failed(format!(
                    "the {} bytes carried differ from their source at byte {at}",
                    l.len
                )))
            }
            _ => Err(self.failed("a region is smaller than the lesson's data")),
        }
    }

    /// Atomics ran exactly once: B's word moved from its start value as the lesson says.
    fn check_atomics(&self) -> Result<(), GenError> {
        let want = match self.lesson {
            Lesson::Atomics => 0x100 + 5,
            Lesson::AtomicReplay => ATOMIC_START + 5,
            _ => return Ok(()),
        };
        let at = (ATOMIC_AT - VA_B) as usize;
        let word = self
            .net
            .b
            .engine()
            .mr(self.b.key)
            .and_then(|mr| mr.bytes().get(at..at + 8))
            .and_then(|w| w.try_into().ok())
            .map(u64::from_ne_bytes);
        match word {
            Some(w) if w == want => Ok(()),
            other => Err(self.failed(format!("atomic target is {other:x?}, expected {want:#x}"))),
        }
    }

    /// The rdma_cm lessons: A the active side, B the passive one on port [`CM_PORT`].
    fn play_cm(&mut self) -> Result<(), GenError> {
        let (a, b) = (self.a, self.b);
        let (ip_a, ip_b) = (self.net.addr(Side::A), self.net.addr(Side::B));
        let listen = ListenParams {
            port_space: PortSpace::Tcp,
            port: CM_PORT,
            addr: None,
        };
        self.net
            .b
            .cm_listen(listen)
            .map_err(|e| self.failed(e.to_string()))?;
        let connect = |port| {
            let mut p = ConnectParams::rc(ip_a, ip_b, port, a.qpn);
            p.mtu = Mtu::M1024;
            p
        };
        if self.lesson == Lesson::CmReject {
            self.note(
                Side::A,
                "REQ for port 7175 (service ID 0x0000000001061c07: port space TCP, 0x106, and the \
                 port): nothing listens there",
            );
            self.cm_connect(connect(CM_PORT + 1))?;
            self.note(
                Side::B,
                "REJ reason 8, invalid service ID: B's CM answers for it",
            );
            self.cm_wait(Side::A, "A's REJ", |e| {
                matches!(e, CmEvent::Rejected { .. })
            })?;
            self.note(Side::A, "REQ for port 7174, where B's application listens");
            self.cm_connect(connect(CM_PORT))?;
            let id = self.cm_request()?;
            self.note(
                Side::B,
                "REJ reason 28, consumer defined: B's application said no (rdma_reject)",
            );
            let now = self.net.now();
            self.net
                .b
                .cm_reject(now, id, &[])
                .map_err(|e| self.failed(e.to_string()))?;
            return self.cm_wait(
                Side::A,
                "A's REJ",
                |e| matches!(e, CmEvent::Rejected { reason, .. } if *reason == 28),
            );
        }
        self.note(
            Side::A,
            "REQ: A's QPN and starting PSN, the service (port 7174), the path; the private \
             data starts with rdma_cm's IP header (addresses and ports)",
        );
        let id_a = self.cm_connect(connect(CM_PORT))?;
        let id_b = self.cm_request()?;
        // rdma_create_qp: INIT, so that the receive can be posted before accepting.
        init_qp(self.net.b.engine_mut(), b.qpn, QpType::Rc)
            .map_err(|e| self.failed(e.to_string()))?;
        self.net.b.engine_mut().post_recv(
            b.qpn,
            RecvWr::new(
                1,
                vec![Sge {
                    addr: VA_B,
                    length: 64,
                    lkey: b.key,
                }],
            ),
        )?;
        self.note(
            Side::B,
            "REP: B's QPN and starting PSN; B's QP is ready (RTR, RTS) with A's",
        );
        let now = self.net.now();
        self.net
            .b
            .cm_accept(now, id_b, AcceptParams::new(b.qpn))
            .map_err(|e| self.failed(e.to_string()))?;
        self.note(
            Side::A,
            "RTU: A's QP is ready; B's connection is established",
        );
        self.cm_wait(Side::A, "A's connection", |e| {
            matches!(e, CmEvent::Established { .. })
        })?;
        self.cm_wait(Side::B, "B's connection", |e| {
            matches!(e, CmEvent::Established { .. })
        })?;
        let wr = SendWr::new(
            1,
            SendOp::Send,
            vec![Sge {
                addr: VA_A,
                length: 64,
                lkey: a.key,
            }],
        );
        self.note(
            Side::A,
            "the connection's first SEND: to B's QPN from the REP, at the starting PSN the REP \
             gave (the PSN B's responder expects)",
        );
        self.net.a.engine_mut().post_send(a.qpn, wr)?;
        let mut done = Vec::new();
        while done.len() < 2 {
            collect(&mut self.net.a, a.cq, &mut done);
            collect(&mut self.net.b, b.cq, &mut done);
            if done.len() >= 2 {
                break;
            }
            if !self.net.step(None)? || self.net.now() > Instant::ZERO + TIME_LIMIT {
                return Err(self.failed("the SEND did not complete at both ends"));
            }
        }
        if let Some(wc) = done.iter().find(|wc| wc.status != WcStatus::Success) {
            return Err(self.failed(format!("the SEND completed with {:?}", wc.status)));
        }
        self.note(Side::A, "DREQ: A closes the connection (rdma_disconnect)");
        let now = self.net.now();
        self.net
            .a
            .cm_disconnect(now, id_a)
            .map_err(|e| self.failed(e.to_string()))?;
        self.note(
            Side::B,
            "DREP: B's QP goes to the error state, the connection is closed",
        );
        self.cm_wait(Side::A, "A's disconnect", |e| {
            matches!(e, CmEvent::Disconnected { .. })
        })
    }

    /// A comment for the next frame `side` sends.
    fn note(&mut self, side: Side, text: &str) {
        self.tap.borrow_mut().next_note[side as usize] = Some(text.to_owned());
    }

    fn cm_connect(&mut self, params: ConnectParams) -> Result<ConnId, GenError> {
        let now = self.net.now();
        self.net
            .a
            .cm_connect(now, params)
            .map_err(|e| self.failed(e.to_string()))
    }

    /// Runs until B's CM has a connect request.
    fn cm_request(&mut self) -> Result<ConnId, GenError> {
        let mut id = None;
        self.cm_wait(Side::B, "B's connect request", |e| match e {
            CmEvent::ConnectRequest { id: got, .. } => {
                id = Some(*got);
                true
            }
            _ => false,
        })?;
        id.ok_or_else(|| self.failed("no connect request"))
    }

    /// Runs until `side`'s CM gives an event `want` takes.
    fn cm_wait(
        &mut self,
        side: Side,
        what: &str,
        mut want: impl FnMut(&CmEvent) -> bool,
    ) -> Result<(), GenError> {
        let limit = Instant::ZERO + TIME_LIMIT;
        loop {
            let host = match side {
                Side::A => &mut self.net.a,
                Side::B => &mut self.net.b,
            };
            while let Some(e) = host.poll_cm_event() {
                if want(&e) {
                    return Ok(());
                }
            }
            if !self.net.step(None)? || self.net.now() > limit {
                return Err(self.failed(format!("no {what}")));
            }
        }
    }

    /// DCQCN: A writes 16 KiB messages back to back for 1 ms through the marking bottleneck.
    fn play_cnp(&mut self) -> Result<(), GenError> {
        let (a, b) = (self.a, self.b);
        let end = Instant::ZERO + Duration::from_micros(1000);
        let mut next_id = 0;
        let mut outstanding = 0usize;
        let mut done = Vec::new();
        while self.net.now() < end {
            collect(&mut self.net.a, a.cq, &mut done);
            outstanding -= done.drain(..).count().min(outstanding);
            while outstanding < 4 {
                next_id += 1;
                let wr = SendWr::new(
                    next_id,
                    SendOp::Write {
                        remote_addr: VA_B,
                        rkey: b.key,
                    },
                    vec![Sge {
                        addr: VA_A,
                        length: REGION as u32,
                        lkey: a.key,
                    }],
                );
                self.net.a.engine_mut().post_send(a.qpn, wr)?;
                outstanding += 1;
            }
            if !self.net.step(Some(end))? {
                return Err(self.failed("the link went idle"));
            }
        }
        Ok(())
    }
}

/// The PFC lesson's script: B's port pauses A's priority once A has sent
/// [`PauseScript::AFTER`] frames, and lifts the pause [`PauseScript::STALL`] later.
#[derive(Debug, Default)]
struct PauseScript {
    /// When B sent XOFF.
    xoff: Option<Instant>,
    /// A's frames sent when XOFF took hold of A's NIC.
    held: Option<u64>,
    /// A's frames sent when B sent XON.
    xon: Option<u64>,
}

impl PauseScript {
    /// A's frames before B's buffer passes its XOFF threshold.
    const AFTER: u64 = 4;
    /// How long B's buffer takes to drain below its XON threshold.
    const STALL: Duration = Duration::from_micros(150);
    /// XOFF's time: the most there is (3.36 ms at 10 Gb/s), as switches send it, lifted by
    /// an XON rather than left to run out.
    const XOFF_QUANTA: u16 = 0xffff;

    /// Sends what is due now; the next time something is due.
    fn poll<W: std::io::Write>(
        &mut self,
        net: &mut Network<W>,
        tap: &Rc<RefCell<Tap>>,
    ) -> Result<Option<Instant>, GenError> {
        let now = net.now();
        let a_sent = tap.borrow().sent[Side::A as usize];
        if self.held.is_none() && net.paused_until(Side::A) > now {
            self.held = Some(a_sent);
        }
        // A MAC control frame waits for the frame on B's wire.
        let wire = net.wire_free(Side::B);
        if wire > now {
            return Ok(Some(wire));
        }
        match (self.xoff, self.xon) {
            (None, _) if a_sent >= Self::AFTER => {
                tap.borrow_mut().next_note[Side::B as usize] = Some(format!(
                    "PFC XOFF from B's port: priority {HOST_PRIORITY} paused for {} quanta \
                     ({:.2} ms at {LINE_GBPS} Gb/s): B's receive buffer for that priority passed its XOFF \
                     threshold. The hosts' frames carry no VLAN tag, so they travel in the \
                     port's default priority, {HOST_PRIORITY} (deployments give RoCE a lossless \
                     priority of its own, often 3). A's NIC stops sending on it when this \
                     arrives; what A sent before then still comes, into the headroom the \
                     buffer keeps for it: nothing is dropped",
                    Self::XOFF_QUANTA,
                    quanta_to_ps(Self::XOFF_QUANTA, (LINE_GBPS * 1e9) as u64) as f64 / 1e9
                ));
                let pfc = PfcRepr::new(&[(HOST_PRIORITY, Self::XOFF_QUANTA)]);
                let sent = net.send_mac_control(Side::B, &MacControlRepr::Pfc(pfc))?;
                debug_assert!(sent, "B's wire is free");
                self.xoff = Some(now);
                Ok(Some(now + Self::STALL))
            }
            (Some(at), None) if now >= at + Self::STALL => {
                let mut t = tap.borrow_mut();
                t.next_note[Side::B as usize] = Some(format!(
                    "PFC XON from B's port: time 0 for priority {HOST_PRIORITY} lifts the pause \
                     (B's buffer drained below its XON threshold); A's NIC sends again when \
                     this arrives"
                ));
                t.next_note[Side::A as usize] = Some(format!(
                    "A's NIC held this frame while priority {HOST_PRIORITY} was paused ({} us \
                     from XOFF to XON): the WRITE stalled, but nothing was lost, so nothing is \
                     resent and no NAK is needed",
                    Self::STALL.as_micros()
                ));
                self.xon = Some(a_sent);
                drop(t);
                let pfc = PfcRepr::new(&[(HOST_PRIORITY, 0)]);
                let sent = net.send_mac_control(Side::B, &MacControlRepr::Pfc(pfc))?;
                debug_assert!(sent, "B's wire is free");
                Ok(None)
            }
            (Some(at), None) => Ok(Some(at + Self::STALL)),
            _ => Ok(None),
        }
    }

    /// Both frames went out.
    fn done(&self) -> bool {
        self.xon.is_some()
    }

    /// The pause held A: XOFF reached A's NIC before XON was sent, and A sent nothing from
    /// then until XON.
    fn check(&self) -> Result<(), String> {
        match (self.held, self.xon) {
            (Some(held), Some(xon)) if held == xon => Ok(()),
            (Some(held), Some(xon)) => Err(format!("A sent {} frames while paused", xon - held)),
            (None, _) => Err("XOFF never held A's NIC".into()),
            (_, None) => Err("XON was never sent".into()),
        }
    }
}

/// A QP of `qp_type` with a CQ and a region at `va` filled with seeded bytes.
fn setup(host: &mut Host, qp_type: QpType, va: u64, rng: &mut Rng) -> Result<End, GenError> {
    let e = host.engine_mut();
    let cq = e.create_cq(256);
    let qpn = e.create_qp(QpInit::new(qp_type, cq))?;
    let mut bytes = vec![0u8; REGION];
    rng.fill(&mut bytes);
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let key = e.register_mr(va, bytes, access)?;
    Ok(End { qpn, cq, key })
}

fn collect(host: &mut Host, cq: CqId, into: &mut Vec<WorkCompletion>) {
    while let Some(wc) = host.engine_mut().poll_completion(cq) {
        into.push(wc);
    }
}

/// The AETH's meaning for a comment on a packet with PSN `psn`; `None` for a plain ACK.
/// `sent` is the frame (from 1) that first carried the request with that PSN, if any did.
pub(crate) fn syndrome_text(s: Syndrome, psn: Psn, sent: Option<u64>) -> Option<String> {
    let psn = psn.value();
    let at = sent.map_or(String::new(), |n| format!(" (frame {n})"));
    match s {
        Syndrome::Ack { .. } => None,
        Syndrome::RnrNak { timer } => Some(format!(
            "RNR NAK for PSN {psn}{at}: no receive posted; the requester waits {} us and resends it",
            timer.micros()
        )),
        Syndrome::Nak(NakCode::PsnSequenceError) => Some(format!(
            "NAK PSN_SEQUENCE_ERROR: the responder expects PSN {psn}{at}; the requester goes back to it"
        )),
        Syndrome::Nak(code) => {
            let why = match code {
                NakCode::RemoteAccessError => "the R_Key, bounds or access rights do not allow it",
                NakCode::InvalidRequest => {
                    "the request is not allowed or malformed (a SEND longer than its receive, say)"
                }
                NakCode::RemoteOperationalError => "the responder failed to carry it out",
                _ => "a fatal error",
            };
            Some(format!(
                "NAK {}: the responder refuses PSN {psn}{at}: {why}; not retried: the request \
                 completes in error and the QP moves to the error state (IBA 9.9.3.1)",
                code.name()
            ))
        }
        Syndrome::Reserved(b) => Some(format!("reserved AETH syndrome {b:#04x}")),
    }
}

#[cfg(test)]
mod tests;
