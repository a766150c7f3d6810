//! The endpoint: the only layer with a real clock and real sockets. It drives the transport
//! engine over a device and speaks the out-of-band exchanges of the standard tools.
//!
//! - [`host`]: the sans-IO [`Host`]: one engine on one Ethernet link, with the GID table
//!   ([`gid`]), ARP and neighbour discovery ([`resolve`], [`neighbor`]) and the congestion
//!   control seam ([`congestion`]); its QP1, the general services interface, carries the
//!   MADs of the sans-IO connection manager ([`cm`]: rdma_cm's REQ/REP/RTU/REJ/MRA/DREQ/DREP
//!   and SIDR, driving QPs to RTS).
//! - [`runtime`]: a host on a real device ([`backend`]) with a clock and an event loop, and
//!   the verbs the commands use, rdma_cm's calls included (`cm_listen`, `cm_connect`,
//!   `cm_accept`, `wait_cm_event`...).
//! - [`oob`]: the out-of-band TCP exchanges of ibv_*_pingpong and perftest.

pub mod app;
pub mod backend;
pub mod cm;
pub mod congestion;
pub mod connect;
pub mod dcqcn;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod gid;
pub mod host;
pub mod ids;
pub mod neighbor;
pub mod oob;
pub mod resolve;
pub mod runtime;
pub mod virtual_net;

pub use backend::Backend;
pub use gid::{GidTable, IpCidr};
pub use host::{Drops, Host, HostConfig, HostStats};
pub use runtime::{DEFAULT_SPIN, Runtime, RuntimeConfig, RuntimeError};

#[cfg(test)]
mod tests;
