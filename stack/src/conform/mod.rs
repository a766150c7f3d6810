//! `roce conform`: a wire-level conformance suite that tells where a RoCE peer breaks the
//! protocol.
//!
//! The suite plays the other end of a connection with crafted packets (the wire layer's
//! builder) and judges the peer's answers against IBA Vol. 1 and its RoCEv2 Annex A17: each
//! [`Check`] names its rule, says pass, fail or not applicable, and gives one line of evidence
//! and the numbers of its frames in the capture. The peer side is driven by an agent that
//! speaks [`proto`] over TCP: `tools/conform-agent/` (C, libibverbs) on the peer's host, or
//! `roce conform-agent`, which serves it with our own endpoint ([`server`]).
//!
//! - [`harness`]: what a check is written against ([`Ctx`]).
//! - [`peer`]: the peer as the suite sees it; [`VirtualPeer`] is our endpoint in virtual
//!   time (every check has a test against it), [`device_peer`] a real device and agent.
//! - [`suite`]: the registry and the runner.

pub mod device_peer;
pub mod harness;
pub mod peer;
pub mod proto;
pub mod server;
pub mod station;
pub mod suite;

mod checks;
#[cfg(test)]
mod tests;

pub use harness::{Ctx, FrameSink, NoCapture, Timing};
pub use peer::{Peer, PeerError, VirtualConfig, VirtualPeer};
pub use suite::{Check, CheckResult, Outcome, Report, Role, SuiteError, Verdict, registry, run};
