//! Bringing a queue pair from RESET to RTS with what the out-of-band exchange delivered,
//! as the tools' `pp_connect_ctx` and perftest's `ctx_connect` do (IBA 10.3.1, 11.2.4.2):
//! INIT with access rights (RC/UC) or the Q_Key (UD), RTR with the path, RTS with the send
//! PSN and the RC timers.

use std::net::IpAddr;

use crate::transport::{Access, Engine, ModifyQp, Mtu, QpState, QpType, TransportError};
use crate::wire::encap::DEFAULT_TTL;
use crate::wire::{Psn, Qpn, RnrTimer};

/// Everything needed to connect one QP to its peer (UD: only the PSN and Q_Key matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpPath {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// The peer's address (from its GID).
    pub dest: IpAddr,
    /// The peer's QP number.
    pub dest_qp: Qpn,
    /// The peer's first PSN: what our responder expects.
    pub rq_psn: Psn,
    /// Our first PSN, as told to the peer.
    pub sq_psn: Psn,
    /// Path MTU.
    pub mtu: Mtu,
    /// What the peer may do to our memory through this QP.
    pub access: Access,
    /// READs and atomics we may have outstanding (the peer's responder resources).
    pub max_rd_atomic: u8,
    /// READs and atomics we accept outstanding.
    pub max_dest_rd_atomic: u8,
    /// Local ACK timeout exponent (4.096 us x 2^timeout).
    pub timeout: u8,
    /// Retries after local ACK timeouts.
    pub retry_cnt: u8,
    /// Retries after RNR NAKs (7: forever).
    pub rnr_retry: u8,
    /// The RNR NAK timer our responder asks for.
    pub min_rnr_timer: RnrTimer,
    /// The Q_Key (UD).
    pub qkey: u32,
    /// The path's GRH flow label (0: none; rxe then derives the UDP port from the QPNs).
    pub flow_label: u32,
    /// The path's traffic class, whose upper six bits become the DSCP of the QP's packets
    /// (`None`: the host's DSCP; see [`QpAttrs::traffic_class`]).
    ///
    /// [`QpAttrs::traffic_class`]: crate::transport::QpAttrs::traffic_class
    pub traffic_class: Option<u8>,
    /// The path's hop limit: the TTL of the QP's packets (64, as ibv_rc_pingpong sets it).
    pub hop_limit: u8,
}

impl QpPath {
    /// The values ibv_rc_pingpong uses: timeout 14, retry 7, RNR retry 7, min RNR timer 12,
    /// one outstanding READ/atomic each way.
    pub fn new(
        qp_type: QpType,
        dest: IpAddr,
        dest_qp: Qpn,
        rq_psn: Psn,
        sq_psn: Psn,
        mtu: Mtu,
    ) -> QpPath {
        QpPath {
            qp_type,
            dest,
            dest_qp,
            rq_psn,
            sq_psn,
            mtu,
            access: Access::LOCAL_WRITE,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: RnrTimer::new(12),
            qkey: 0x1111_1111,
            flow_label: 0,
            traffic_class: None,
            hop_limit: DEFAULT_TTL,
        }
    }
}

/// RESET -> INIT. Receives may be posted from here on.
pub fn to_init(engine: &mut Engine, qpn: Qpn, path: &QpPath) -> Result<(), TransportError> {
    let qp_type = path.qp_type;
    let mut m = ModifyQp::to(QpState::Init);
    if qp_type == QpType::Ud {
        m.qkey = Some(path.qkey);
    } else {
        m.access = Some(path.access);
    }
    engine.modify_qp(qpn, &m)
}

/// INIT -> RTR -> RTS.
pub fn to_rts(engine: &mut Engine, qpn: Qpn, path: &QpPath) -> Result<(), TransportError> {
    let qp_type = path.qp_type;
    let mut rtr = ModifyQp::to(QpState::Rtr);
    if qp_type != QpType::Ud {
        rtr.dest_addr = Some(path.dest);
        rtr.path_mtu = Some(path.mtu);
        rtr.dest_qp = Some(path.dest_qp);
        rtr.rq_psn = Some(path.rq_psn);
        rtr.flow_label = (path.flow_label != 0).then_some(path.flow_label);
        rtr.traffic_class = path.traffic_class;
        rtr.hop_limit = Some(path.hop_limit);
    }
    if qp_type == QpType::Rc {
        rtr.max_dest_rd_atomic = Some(path.max_dest_rd_atomic);
        rtr.min_rnr_timer = Some(path.min_rnr_timer);
    }
    engine.modify_qp(qpn, &rtr)?;
    let mut rts = ModifyQp::to(QpState::Rts);
    rts.sq_psn = Some(path.sq_psn);
    if qp_type == QpType::Rc {
        rts.timeout = Some(path.timeout);
        rts.retry_cnt = Some(path.retry_cnt);
        rts.rnr_retry = Some(path.rnr_retry);
        rts.max_rd_atomic = Some(path.max_rd_atomic);
    }
    engine.modify_qp(qpn, &rts)
}

/// RESET -> INIT -> RTR -> RTS in one go.
pub fn connect(engine: &mut Engine, qpn: Qpn, path: &QpPath) -> Result<(), TransportError> {
    to_init(engine, qpn, path)?;
    to_rts(engine, qpn, path)
}
