//! Queue pair types, states and attributes, and the rules for modifying them (IBA 10.3,
//! 11.2.4.2; the attribute tables follow `ib_modify_qp_is_ok` in the kernel, which encodes
//! the spec's Table 93).

use std::net::{IpAddr, Ipv4Addr};

use super::mr::Access;
use crate::wire::encap::DEFAULT_TTL;
use crate::wire::{PKey, Psn, Qpn, RnrTimer, Transport};

/// The transport service of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable Connected: acknowledged, retransmitted, READs and atomics.
    Rc,
    /// Unreliable Connected: one peer, no acknowledgements, SEND and WRITE only.
    Uc,
    /// Unreliable Datagram: any peer per message, SEND only, one packet per message.
    Ud,
}

impl QpType {
    /// The transport of its packets' opcodes (and its name: `transport().prefix()`).
    pub const fn transport(self) -> Transport {
        match self {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        }
    }
}

/// The queue pair state machine of IBA 10.3.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created: nothing is sent or received.
    Reset,
    /// Initialised: receives may be posted, nothing moves on the wire yet.
    Init,
    /// Ready to receive: the responder works, the requester does not.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain: no new send work request starts.
    Sqd,
    /// Send queue error (UC and UD only): receives go on, sends are flushed.
    Sqe,
    /// Error: outstanding and new work requests complete flushed.
    Err,
}

/// Path MTU (IBA 9.6.1; `ibv_mtu`): the largest payload of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    M256,
    /// 512 bytes.
    M512,
    /// 1024 bytes.
    M1024,
    /// 2048 bytes.
    M2048,
    /// 4096 bytes, the largest RoCE allows.
    M4096,
}

impl Mtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Mtu::M256 => 256,
            Mtu::M512 => 512,
            Mtu::M1024 => 1024,
            Mtu::M2048 => 2048,
            Mtu::M4096 => 4096,
        }
    }

    /// The MTU of exactly `bytes`, if it is one of the five.
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        match bytes {
            256 => Some(Mtu::M256),
            512 => Some(Mtu::M512),
            1024 => Some(Mtu::M1024),
            2048 => Some(Mtu::M2048),
            4096 => Some(Mtu::M4096),
            _ => None,
        }
    }

    /// The largest IB MTU that fits a link MTU once RoCEv2 headers are taken off
    /// (how rxe picks it: netdev MTU minus 80 bytes).
    pub fn for_link_mtu(link_mtu: u32) -> Option<Mtu> {
        let room = link_mtu.checked_sub(80)?;
        [Mtu::M4096, Mtu::M2048, Mtu::M1024, Mtu::M512, Mtu::M256]
            .into_iter()
            .find(|m| m.bytes() <= room)
    }
}

/// The current attributes of a queue pair (`ibv_qp_attr` as `ibv_query_qp` returns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrs {
    /// Path MTU: the largest payload of one packet.
    pub path_mtu: Mtu,
    /// The PSN of the next request packet this QP sends.
    pub sq_psn: Psn,
    /// The PSN this QP's responder expects next.
    pub rq_psn: Psn,
    /// The connected peer's QP number (RC and UC).
    pub dest_qp: Qpn,
    /// The connected peer's address (RC and UC).
    pub dest_addr: IpAddr,
    /// Local ACK timeout exponent: 4.096 us x 2^timeout, 0 for none (IBA 9.7.6.1.3).
    pub timeout: u8,
    /// Retries after local ACK timeouts before the QP fails (0 to 7).
    pub retry_cnt: u8,
    /// 7 means retry forever.
    pub rnr_retry: u8,
    /// The RNR NAK timer this QP's responder asks for.
    pub min_rnr_timer: RnrTimer,
    /// READs and atomics this requester may have outstanding.
    pub max_rd_atomic: u8,
    /// READs and atomics this responder keeps resources for.
    pub max_dest_rd_atomic: u8,
    /// Which remote operations the responder accepts.
    pub access: Access,
    /// The Q_Key UD requests must carry (UD only).
    pub qkey: u32,
    /// The partition key packets carry and must match.
    pub pkey: PKey,
    /// The GRH flow label of the path (RC, UC): rxe derives the UDP source port from it when
    /// it is non-zero (rdma_cm sets one), from the QPNs otherwise.
    pub flow_label: u32,
    /// The path's traffic class (RC, UC; `ah_attr.grh.traffic_class`): its upper six bits are
    /// the DSCP of the QP's packets (Annex A17 CA17-4, CA17-13). `None`: not set, the host's
    /// DSCP applies. Its ECN bits are not taken: congestion control owns ECN (CA17-5).
    pub traffic_class: Option<u8>,
    /// The path's hop limit (RC, UC; `ah_attr.grh.hop_limit`): the IPv4 TTL or IPv6 hop limit
    /// of the QP's packets (CA17-9, CA17-17).
    pub hop_limit: u8,
}

impl Default for QpAttrs {
    fn default() -> Self {
        QpAttrs {
            path_mtu: Mtu::M1024,
            sq_psn: Psn::new(0),
            rq_psn: Psn::new(0),
            dest_qp: Qpn::new(0),
            dest_addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: RnrTimer::new(12),
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            access: Access::NONE,
            qkey: 0,
            pkey: PKey::DEFAULT,
            flow_label: 0,
            traffic_class: None,
            hop_limit: DEFAULT_TTL,
        }
    }
}

/// A modification: the new state (if any) and the attributes to set (`ibv_modify_qp` with
/// its mask: `Some` fields are in the mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModifyQp {
    /// The state to move to.
    pub state: Option<QpState>,
    /// See [`QpAttrs::path_mtu`].
    pub path_mtu: Option<Mtu>,
    /// See [`QpAttrs::sq_psn`].
    pub sq_psn: Option<Psn>,
    /// See [`QpAttrs::rq_psn`].
    pub rq_psn: Option<Psn>,
    /// See [`QpAttrs::dest_qp`].
    pub dest_qp: Option<Qpn>,
    /// See [`QpAttrs::dest_addr`].
    pub dest_addr: Option<IpAddr>,
    /// See [`QpAttrs::timeout`].
    pub timeout: Option<u8>,
    /// See [`QpAttrs::retry_cnt`].
    pub retry_cnt: Option<u8>,
    /// See [`QpAttrs::rnr_retry`].
    pub rnr_retry: Option<u8>,
    /// See [`QpAttrs::min_rnr_timer`].
    pub min_rnr_timer: Option<RnrTimer>,
    /// See [`QpAttrs::max_rd_atomic`].
    pub max_rd_atomic: Option<u8>,
    /// See [`QpAttrs::max_dest_rd_atomic`].
    pub max_dest_rd_atomic: Option<u8>,
    /// See [`QpAttrs::access`].
    pub access: Option<Access>,
    /// See [`QpAttrs::qkey`].
    pub qkey: Option<u32>,
    /// See [`QpAttrs::pkey`].
    pub pkey: Option<PKey>,
    /// 20 bits (part of the address vector, `ah_attr.grh.flow_label`).
    pub flow_label: Option<u32>,
    /// See [`QpAttrs::traffic_class`] (`ah_attr.grh.traffic_class`).
    pub traffic_class: Option<u8>,
    /// See [`QpAttrs::hop_limit`] (`ah_attr.grh.hop_limit`).
    pub hop_limit: Option<u8>,
}

/// The largest max_rd_atomic / max_dest_rd_atomic accepted (rxe advertises 128; 16 is what
/// mlx5 does and plenty for a software requester).
pub const MAX_RD_ATOMIC: u8 = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Mask(u32);

impl Mask {
    const PATH_MTU: Mask = Mask(1 << 0);
    const SQ_PSN: Mask = Mask(1 << 1);
    const RQ_PSN: Mask = Mask(1 << 2);
    const DEST_QP: Mask = Mask(1 << 3);
    const DEST_ADDR: Mask = Mask(1 << 4);
    const TIMEOUT: Mask = Mask(1 << 5);
    const RETRY_CNT: Mask = Mask(1 << 6);
    const RNR_RETRY: Mask = Mask(1 << 7);
    const MIN_RNR_TIMER: Mask = Mask(1 << 8);
    const MAX_RD_ATOMIC: Mask = Mask(1 << 9);
    const MAX_DEST_RD_ATOMIC: Mask = Mask(1 << 10);
    const ACCESS: Mask = Mask(1 << 11);
    const QKEY: Mask = Mask(1 << 12);
    const PKEY: Mask = Mask(1 << 13);
    const FLOW_LABEL: Mask = Mask(1 << 14);
    const TRAFFIC_CLASS: Mask = Mask(1 << 15);
    const HOP_LIMIT: Mask = Mask(1 << 16);
    const NONE: Mask = Mask(0);

    const fn or(self, other: Mask) -> Mask {
        Mask(self.0 | other.0)
    }
    const fn has(self, other: Mask) -> bool {
        self.0 & other.0 != 0
    }
}

const NAMES: [(Mask, &str); 17] = [
    (Mask::PATH_MTU, "path_mtu"),
    (Mask::SQ_PSN, "sq_psn"),
    (Mask::RQ_PSN, "rq_psn"),
    (Mask::DEST_QP, "dest_qp"),
    (Mask::DEST_ADDR, "dest_addr"),
    (Mask::TIMEOUT, "timeout"),
    (Mask::RETRY_CNT, "retry_cnt"),
    (Mask::RNR_RETRY, "rnr_retry"),
    (Mask::MIN_RNR_TIMER, "min_rnr_timer"),
    (Mask::MAX_RD_ATOMIC, "max_rd_atomic"),
    (Mask::MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic"),
    (Mask::ACCESS, "access"),
    (Mask::QKEY, "qkey"),
    (Mask::PKEY, "pkey"),
    (Mask::FLOW_LABEL, "flow_label"),
    (Mask::TRAFFIC_CLASS, "traffic_class"),
    (Mask::HOP_LIMIT, "hop_limit"),
];

impl ModifyQp {
    /// Just a state change.
    pub fn to(state: QpState) -> ModifyQp {
        ModifyQp {
            state: Some(state),
            ..ModifyQp::default()
        }
    }

    fn mask(&self) -> Mask {
        let mut m = Mask::NONE;
        let mut add = |present: bool, bit: Mask| {
            if present {
                m = m.or(bit);
            }
        };
        add(self.path_mtu.is_some(), Mask::PATH_MTU);
        add(self.sq_psn.is_some(), Mask::SQ_PSN);
        add(self.rq_psn.is_some(), Mask::RQ_PSN);
        add(self.dest_qp.is_some(), Mask::DEST_QP);
        add(self.dest_addr.is_some(), Mask::DEST_ADDR);
        add(self.timeout.is_some(), Mask::TIMEOUT);
        add(self.retry_cnt.is_some(), Mask::RETRY_CNT);
        add(self.rnr_retry.is_some(), Mask::RNR_RETRY);
        add(self.min_rnr_timer.is_some(), Mask::MIN_RNR_TIMER);
        add(self.max_rd_atomic.is_some(), Mask::MAX_RD_ATOMIC);
        add(self.max_dest_rd_atomic.is_some(), Mask::MAX_DEST_RD_ATOMIC);
        add(self.access.is_some(), Mask::ACCESS);
        add(self.qkey.is_some(), Mask::QKEY);
        add(self.pkey.is_some(), Mask::PKEY);
        add(self.flow_label.is_some(), Mask::FLOW_LABEL);
        add(self.traffic_class.is_some(), Mask::TRAFFIC_CLASS);
        add(self.hop_limit.is_some(), Mask::HOP_LIMIT);
        m
    }

    /// Writes the present attributes into `attrs`.
    pub(crate) fn apply(&self, attrs: &mut QpAttrs) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { attrs.$f = v; } )* };
        }
        set!(
            path_mtu,
            sq_psn,
            rq_psn,
            dest_qp,
            dest_addr,
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            max_rd_atomic,
            max_dest_rd_atomic,
            access,
            qkey,
            pkey,
            flow_label,
            hop_limit
        );
        if self.traffic_class.is_some() {
            attrs.traffic_class = self.traffic_class;
        }
    }

    /// Checks the value ranges of the present attributes.
    fn check_values(&self) -> Result<(), (&'static str, &'static str)> {
        let within = |v: Option<u8>, max: u8| v.is_none_or(|v| v <= max);
        if !within(self.timeout, 31) {
            return Err(("timeout", "is a 5-bit exponent (0..=31)"));
        }
        if !within(self.retry_cnt, 7) {
            return Err(("retry_cnt", "is a 3-bit count (0..=7)"));
        }
        if !within(self.rnr_retry, 7) {
            return Err(("rnr_retry", "is a 3-bit count (0..=7)"));
        }
        if !within(self.max_rd_atomic, MAX_RD_ATOMIC) {
            return Err(("max_rd_atomic", "exceeds the engine's limit"));
        }
        if !within(self.max_dest_rd_atomic, MAX_RD_ATOMIC) {
            return Err(("max_dest_rd_atomic", "exceeds the engine's limit"));
        }
        if self.flow_label.is_some_and(|l| l > 0xf_ffff) {
            return Err(("flow_label", "is 20 bits"));
        }
        Ok(())
    }
}

/// The attributes a transition requires and those it allows besides.
fn rules(qp_type: QpType, from: QpState, to: QpState) -> Option<(Mask, Mask)> {
    use QpState::*;
    use QpType::*;
    let connected = qp_type != Ud;
    let path = Mask::DEST_ADDR
        .or(Mask::PATH_MTU)
        .or(Mask::DEST_QP)
        .or(Mask::RQ_PSN);
    let rc_timers = Mask::TIMEOUT
        .or(Mask::RETRY_CNT)
        .or(Mask::RNR_RETRY)
        .or(Mask::MAX_RD_ATOMIC);
    let key = if connected { Mask::ACCESS } else { Mask::QKEY };
    // The address vector's GRH parts, optional where the path is given.
    let grh = Mask::FLOW_LABEL.or(Mask::TRAFFIC_CLASS).or(Mask::HOP_LIMIT);
    let rts_optional = match qp_type {
        Rc => Mask::ACCESS.or(Mask::MIN_RNR_TIMER),
        Uc => Mask::ACCESS,
        Ud => Mask::QKEY,
    };
    Some(match (from, to) {
        (_, Reset) | (_, Err) => (Mask::NONE, Mask::NONE),
        (Reset, Init) => (key, Mask::PKEY),
        (Init, Init) => (Mask::NONE, key.or(Mask::PKEY)),
        (Init, Rtr) => match qp_type {
            Rc => (
                path.or(Mask::MAX_DEST_RD_ATOMIC).or(Mask::MIN_RNR_TIMER),
                Mask::ACCESS.or(Mask::PKEY).or(grh),
            ),
            Uc => (path, Mask::ACCESS.or(Mask::PKEY).or(grh)),
            Ud => (Mask::NONE, Mask::QKEY.or(Mask::PKEY)),
        },
        (Rtr, Rts) => match qp_type {
            Rc => (Mask::SQ_PSN.or(rc_timers), rts_optional),
            Uc | Ud => (Mask::SQ_PSN, rts_optional),
        },
        (Rts, Rts) | (Sqd, Rts) => (Mask::NONE, rts_optional),
        (Rts, Sqd) => (Mask::NONE, Mask::NONE),
        (Sqd, Sqd) => (
            Mask::NONE,
            match qp_type {
                Rc => rts_optional.or(rc_timers).or(Mask::MAX_DEST_RD_ATOMIC),
                _ => rts_optional,
            },
        ),
        (Sqe, Rts) if qp_type == Uc => (Mask::NONE, Mask::ACCESS),
        (Sqe, Rts) if qp_type == Ud => (Mask::NONE, Mask::QKEY),
        _ => return None,
    })
}

/// Why a modification is refused: a transition the spec does not allow, or an attribute
/// missing, not allowed, or out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModifyError {
    Transition(QpState),
    Attr(&'static str, &'static str),
}

/// Checks `modify` against the current state, as `ib_modify_qp_is_ok` does.
pub(crate) fn check_modify(
    qp_type: QpType,
    current: QpState,
    modify: &ModifyQp,
) -> Result<QpState, ModifyError> {
    let to = modify.state.unwrap_or(current);
    let (required, optional) = rules(qp_type, current, to).ok_or(ModifyError::Transition(to))?;
    let given = modify.mask();
    for (bit, name) in NAMES {
        if required.has(bit) && !given.has(bit) {
            return Err(ModifyError::Attr(name, "is required by this transition"));
        }
        if given.has(bit) && !required.has(bit) && !optional.has(bit) {
            return Err(ModifyError::Attr(name, "cannot be set in this transition"));
        }
    }
    modify
        .check_values()
        .map_err(|(a, r)| ModifyError::Attr(a, r))?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtr() -> ModifyQp {
        ModifyQp {
            state: Some(QpState::Rtr),
            path_mtu: Some(Mtu::M1024),
            dest_qp: Some(Qpn::new(0x12)),
            dest_addr: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
            rq_psn: Some(Psn::new(0)),
            max_dest_rd_atomic: Some(4),
            min_rnr_timer: Some(RnrTimer::new(12)),
            ..ModifyQp::default()
        }
    }

    #[test]
    fn rc_path_to_rtr_needs_every_path_attribute() {
        assert_eq!(
            check_modify(QpType::Rc, QpState::Init, &rtr()),
            Ok(QpState::Rtr)
        );
        let mut missing = rtr();
        missing.dest_qp = None;
        assert_eq!(
            check_modify(QpType::Rc, QpState::Init, &missing),
            Err(ModifyError::Attr(
                "dest_qp",
                "is required by this transition"
            ))
        );
        let mut extra = rtr();
        extra.sq_psn = Some(Psn::new(1));
        assert!(matches!(
            check_modify(QpType::Rc, QpState::Init, &extra),
            Err(ModifyError::Attr("sq_psn", _))
        ));
    }

    #[test]
    fn transitions() {
        assert_eq!(
            check_modify(QpType::Rc, QpState::Reset, &ModifyQp::to(QpState::Rts)),
            Err(ModifyError::Transition(QpState::Rts))
        );
        assert!(check_modify(QpType::Rc, QpState::Rts, &ModifyQp::to(QpState::Err)).is_ok());
        assert!(check_modify(QpType::Ud, QpState::Sqe, &ModifyQp::to(QpState::Rts)).is_ok());
        assert!(check_modify(QpType::Rc, QpState::Sqe, &ModifyQp::to(QpState::Rts)).is_err());
        let ud_init = ModifyQp {
            qkey: Some(0x1111),
            ..ModifyQp::to(QpState::Init)
        };
        assert!(check_modify(QpType::Ud, QpState::Reset, &ud_init).is_ok());
    }

    #[test]
    fn value_ranges() {
        let m = ModifyQp {
            state: Some(QpState::Rts),
            sq_psn: Some(Psn::new(0)),
            timeout: Some(32),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(1),
            ..ModifyQp::default()
        };
        assert!(matches!(
            check_modify(QpType::Rc, QpState::Rtr, &m),
            Err(ModifyError::Attr("timeout", _))
        ));
    }

    #[test]
    fn mtu_for_link() {
        assert_eq!(Mtu::for_link_mtu(1500), Some(Mtu::M1024));
        assert_eq!(Mtu::for_link_mtu(9000), Some(Mtu::M4096));
        assert_eq!(Mtu::for_link_mtu(300), None);
    }
}
