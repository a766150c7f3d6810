//! The general services interface (IBA Vol. 1 13.5): QP1 of the host, the UD QP every CM
//! MAD is sent to and from. It takes UD SENDs with the well-known Q_Key 0x80010000 and a
//! P_Key of our partition (13.5.1, 10.9.3), hands their MADs to the connection manager, and
//! sends the manager's MADs as UD SENDs from QP1 to the peer's QP1, one PSN after another,
//! AckReq set and the UDP source port rxe gives QP1 (as rdma_rxe sends them).
//!
//! Also here: the connection manager calls of the host (`cm_*`), which fill in what only the
//! host knows (our address towards the peer, the engine, the GID table).

use std::net::IpAddr;

use super::Host;
use crate::endpoint::cm::{
    AcceptParams, CmError, CmEvent, ConnId, ConnectParams, ConnectionManager, ListenParams,
    ListenerId, SidrParams, SidrReply,
};
use crate::time::Instant;
use crate::wire::mad::{MAD_LEN, gsi_packet};
use crate::wire::opcode::op;
use crate::wire::{DethRepr, IpRepr, Opcode, Psn, Qpn, RocePacket, RoceRepr, Transport};

/// Why the host refused a call to its connection manager.
#[derive(Debug, thiserror::Error)]
pub enum HostCmError {
    /// The connection manager refused the call.
    #[error(transparent)]
    Cm(#[from] CmError),
    /// The peer's address is on none of the host's subnets.
    #[error("{0} is on none of the endpoint's subnets (it reaches only peers on its own link)")]
    NoRoute(IpAddr),
}

impl Host {
    /// A packet for QP1: checked as the GSI checks (UD SEND of a whole MAD, the GSI Q_Key, our
    /// partition), then given to the connection manager.
    pub(super) fn handle_gsi(&mut self, now: Instant, packet: &RocePacket<'_>) {
        let bth = packet.bth();
        let drops = &mut self.stats.drops;
        let Some(deth) = packet.ext().deth else {
            drops.malformed += 1;
            return;
        };
        if bth.opcode != Opcode::new(Transport::Ud, op::SEND_ONLY) {
            drops.malformed += 1;
            return;
        }
        if deth.qkey != DethRepr::GSI_QKEY {
            drops.qkey_mismatch += 1;
            return;
        }
        if !bth.pkey.matches(self.cm.config().pkey) {
            drops.pkey_mismatch += 1;
            return;
        }
        let mad = packet.payload();
        if mad.len() < MAD_LEN {
            drops.malformed += 1;
            return;
        }
        let from = packet.ip().src_addr();
        // An answer made from the MAD alone goes with its class over IPv6 (see
        // `ConnectionManager::answer_class`).
        let class = match packet.ip() {
            IpRepr::V6(h) => Some(h.dscp << 2),
            IpRepr::V4(_) => None,
        };
        self.cm.handle_mad(
            now,
            from,
            class,
            &mad[..MAD_LEN],
            &self.gids,
            &mut self.engine,
        );
    }

    /// Frames the connection manager's MADs; true if any went out or was queued.
    pub(super) fn transmit_mads(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(o) = self.cm.poll_transmit() {
            any = true;
            let Some(src) = self.gids.source_for(o.dest) else {
                self.stats.drops.no_route += 1;
                continue;
            };
            let ib = gsi_packet(self.gsi_psn, self.cm.config().pkey, &o.mad);
            self.gsi_psn = self.gsi_psn.next();
            let Some(mut repr) = RoceRepr::rxe(self.mac, [0; 6], src, o.dest, Qpn::GSI, ib) else {
                continue;
            };
            // The connection's class (Annex A17 CA17-4), as Linux's CM sends its MADs with
            // the connection's address vector; the ECN bits are congestion control's.
            if let Some(class) = o.traffic_class {
                repr = repr.with_dscp(class >> 2);
            }
            if let Ok(frame) = repr.to_vec() {
                self.route(now, o.dest, frame);
            }
        }
        any
    }

    /// The connection manager, to read its state and counters.
    pub fn cm(&self) -> &ConnectionManager {
        &self.cm
    }

    /// Listens on a port (`rdma_listen`).
    pub fn cm_listen(&mut self, params: ListenParams) -> Result<ListenerId, HostCmError> {
        Ok(self.cm.listen(params)?)
    }

    /// Stops listening.
    pub fn cm_stop_listening(&mut self, id: ListenerId) {
        self.cm.stop_listening(id);
    }

    /// Connects QP `params.qpn` to a server (`rdma_connect`); `params.src` is replaced by our
    /// address towards the server, whose MAC starts being resolved.
    pub fn cm_connect(
        &mut self,
        now: Instant,
        mut params: ConnectParams,
    ) -> Result<ConnId, HostCmError> {
        params.src = self.source_towards(now, params.dest)?;
        Ok(self.cm.connect(now, params, &mut self.engine)?)
    }

    /// Accepts a connect request (`rdma_accept`).
    pub fn cm_accept(
        &mut self,
        now: Instant,
        id: ConnId,
        params: AcceptParams,
    ) -> Result<(), HostCmError> {
        Ok(self.cm.accept(now, id, params, &mut self.engine)?)
    }

    /// Refuses a connect request (`rdma_reject`).
    pub fn cm_reject(
        &mut self,
        now: Instant,
        id: ConnId,
        private_data: &[u8],
    ) -> Result<(), HostCmError> {
        Ok(self.cm.reject(now, id, private_data)?)
    }

    /// Closes a connection (`rdma_disconnect`).
    pub fn cm_disconnect(&mut self, now: Instant, id: ConnId) -> Result<(), HostCmError> {
        Ok(self.cm.disconnect(now, id, &mut self.engine)?)
    }

    /// Forgets a connection (`rdma_destroy_id`), closing it first if it is up.
    pub fn cm_destroy(&mut self, now: Instant, id: ConnId) {
        self.cm.destroy(now, id, &mut self.engine);
    }

    /// Resolves a UD service of a server (SIDR; rdma_cm's UDP port space).
    pub fn cm_resolve(
        &mut self,
        now: Instant,
        mut params: SidrParams,
    ) -> Result<ConnId, HostCmError> {
        params.src = self.source_towards(now, params.dest)?;
        Ok(self.cm.resolve(now, params)?)
    }

    /// Our address towards `dest` (a peer on one of our subnets), whose MAC starts being
    /// resolved so that the first MAD does not wait for it.
    fn source_towards(&mut self, now: Instant, dest: IpAddr) -> Result<IpAddr, HostCmError> {
        let src = self
            .gids
            .source_for(dest)
            .ok_or(HostCmError::NoRoute(dest))?;
        self.resolve(now, dest);
        Ok(src)
    }

    /// Answers a SIDR request with our UD QP and Q_Key.
    pub fn cm_sidr_reply(
        &mut self,
        now: Instant,
        id: ConnId,
        reply: &SidrReply,
    ) -> Result<(), HostCmError> {
        Ok(self.cm.sidr_reply(now, id, reply)?)
    }

    /// Refuses a SIDR request.
    pub fn cm_sidr_reject(&mut self, now: Instant, id: ConnId) -> Result<(), HostCmError> {
        Ok(self.cm.sidr_reject(now, id)?)
    }

    /// The next connection manager event.
    pub fn poll_cm_event(&mut self) -> Option<CmEvent> {
        self.cm.poll_event()
    }
}

/// The first PSN of QP1's sends (rxe starts its QPs at 0).
pub(super) const GSI_FIRST_PSN: Psn = Psn::new(0);
