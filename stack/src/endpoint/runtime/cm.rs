//! rdma_cm on a runtime: the connection manager calls of [`Host`](super::Host) with the
//! runtime's clock, and a blocking wait for its next event, the loop answering the wire
//! meanwhile (what `rdma_get_cm_event` does for an rdma_cm application).

use core::time::Duration;
use std::time::Instant;

use super::{Runtime, RuntimeError};
use crate::endpoint::cm::{
    AcceptParams, CmEvent, ConnId, ConnectParams, ListenParams, ListenerId, SidrParams, SidrReply,
    init_qp,
};
use crate::transport::QpType;
use crate::wire::Qpn;

impl Runtime {
    /// Moves a new QP to INIT as `rdma_create_qp` does (every remote access; UD QPs with
    /// rdma_cm's Q_Key), so that receives can be posted before connecting.
    pub fn cm_init_qp(&mut self, qpn: Qpn, qp_type: QpType) -> Result<(), RuntimeError> {
        let engine = self.host.engine_mut();
        init_qp(engine, qpn, qp_type).map_err(|e| RuntimeError::Cm(e.into()))
    }

    /// Listens on a port (`rdma_listen`).
    pub fn cm_listen(&mut self, params: ListenParams) -> Result<ListenerId, RuntimeError> {
        Ok(self.host.cm_listen(params)?)
    }

    /// Connects a QP to a server (`rdma_connect`); wait for `Established`, `Rejected` or
    /// `TimedOut` with [`Runtime::wait_cm_event`].
    pub fn cm_connect(&mut self, params: ConnectParams) -> Result<ConnId, RuntimeError> {
        self.kernel_neighbour(params.dest);
        let now = self.now();
        Ok(self.host.cm_connect(now, params)?)
    }

    /// Accepts a connect request (`rdma_accept`); `Established` follows the client's RTU.
    pub fn cm_accept(&mut self, id: ConnId, params: AcceptParams) -> Result<(), RuntimeError> {
        let now = self.now();
        Ok(self.host.cm_accept(now, id, params)?)
    }

    /// Refuses a connect request (`rdma_reject`).
    pub fn cm_reject(&mut self, id: ConnId, private_data: &[u8]) -> Result<(), RuntimeError> {
        let now = self.now();
        Ok(self.host.cm_reject(now, id, private_data)?)
    }

    /// Closes a connection (`rdma_disconnect`); `Disconnected` follows.
    pub fn cm_disconnect(&mut self, id: ConnId) -> Result<(), RuntimeError> {
        let now = self.now();
        Ok(self.host.cm_disconnect(now, id)?)
    }

    /// Resolves a UD service (SIDR); `SidrResolved`, `SidrFailed` or `TimedOut` follows.
    pub fn cm_resolve(&mut self, params: SidrParams) -> Result<ConnId, RuntimeError> {
        self.kernel_neighbour(params.dest);
        let now = self.now();
        Ok(self.host.cm_resolve(now, params)?)
    }

    /// Answers a SIDR request with our UD QP and Q_Key.
    pub fn cm_sidr_reply(&mut self, id: ConnId, reply: &SidrReply) -> Result<(), RuntimeError> {
        let now = self.now();
        Ok(self.host.cm_sidr_reply(now, id, reply)?)
    }

    /// Waits up to `timeout` for the next connection manager event, answering the wire
    /// meanwhile.
    pub fn wait_cm_event(&mut self, timeout: Duration) -> Result<CmEvent, RuntimeError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.host.poll_cm_event() {
                return Ok(e);
            }
            if Instant::now() >= deadline {
                return Err(RuntimeError::Timeout {
                    what: "waiting for a connection manager event".into(),
                    after: timeout,
                });
            }
            self.turn(Some(deadline))?;
        }
    }
}
