//! roce: a pure-software RoCEv2 stack.
//!
//! Layers, each knowing only the ones before it:
//! - [`wire`]: views over bytes and owned `Repr`s for every RoCEv2 header, the ICRC, and the
//!   Ethernet / IP / UDP encapsulation.
//! - [`endpoint`]: real clock and sockets; the out-of-band TCP exchanges of the rdma-core tools.
//! - [`transport`]: the sans-IO RC, UC and UD engine: memory regions, completion queues,
//!   queue pairs, retransmission; and [`transport::pair`], two engines over a simulated link.
//! - [`cc`]: sans-IO congestion control: DCQCN reaction and notification points, pacing, ECN
//!   marking.
//! - [`sim`]: deterministic simulations running the real protocol code, such as DCQCN's.
//! - [`scenario`]: `roce demo`'s two hosts over the in-memory link, shared with tests and
//!   benchmarks.
#![deny(unsafe_code)]

pub mod analysis;
pub mod capture;
pub mod cc;
pub mod conform;
pub mod endpoint;
pub mod fault;
pub mod io;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod time;
pub mod transport;
pub mod wire;
