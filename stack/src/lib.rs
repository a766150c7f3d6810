//! roce: a pure-software RoCEv2 stack.
//!
//! Layers from the bottom up, each importing only layers listed before it (tests aside):
//! - [`rng`]: the seeded random number generator behind every deterministic choice.
//! - [`time`]: the one time base, [`time::Instant`] in nanoseconds and core's `Duration`.
//! - [`wire`]: views over bytes and owned `Repr`s for every RoCEv2 header, the ICRC, the
//!   Ethernet / IP / UDP encapsulation and the frame builder; seeded sample packets.
//! - [`fault`]: a deterministic model of an imperfect link (loss, duplication, reordering,
//!   delay, corruption, ECN CE marking) in virtual time.
//! - [`cc`]: sans-IO congestion control: DCQCN reaction and notification points, HPCC,
//!   TIMELY, pacing, ECN marking.
//! - [`transport`]: the sans-IO RC, UC and UD engine: memory regions, completion queues,
//!   queue pairs, retransmission; and [`transport::engine_pair`], two engines over the fault
//!   model's link.
//! - [`sim`]: deterministic simulations running the real congestion control code: DCQCN's
//!   single bottleneck and a packet-level fabric.
//!
//! With feature `io`:
#![cfg_attr(
    feature = "io",
    doc = "- [`capture`]: the one pcap/pcapng reader, mapped or streamed.
- [`io`]: the `Device` trait and its backends (TAP, AF_XDP, pcap, in-memory) and
  middleware (faults, pcap writer, tracer).
- [`endpoint`]: the sans-IO host on a device, ARP and the GID table, rdma_cm, the only
  real clock and sockets, the out-of-band TCP exchanges of the rdma-core tools.
- [`analysis`]: replay analysis of captures, per flow, in one streaming pass.
- [`scenario`]: `roce demo`'s and `roce gen`'s two hosts over the in-memory link in virtual
  time, shared with tests and benchmarks.
- [`conform`]: the conformance suite, its agent protocol and peers."
)]
#![cfg_attr(
    not(feature = "io"),
    doc = "`capture`, `io`, `endpoint`, `analysis`, `scenario` and `conform` (not in this build)."
)]
//!
//! Feature `io` (default) builds `capture` and `io` and the layers above them; without it
//! (`default-features = false`) the crate is the protocol alone, for embedding: `rng`,
//! `time`, `wire`, `fault`, `cc`, `transport` and `sim`, without mio, libc and pcap-parser.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Module docs name private items on purpose, for readers of the source; they resolve under
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

#[cfg(feature = "io")]
pub mod analysis;
#[cfg(feature = "io")]
pub mod capture;
pub mod cc;
#[cfg(feature = "io")]
pub mod conform;
#[cfg(feature = "io")]
pub mod endpoint;
pub mod fault;
#[cfg(feature = "io")]
pub mod io;
pub mod rng;
#[cfg(feature = "io")]
pub mod scenario;
pub mod sim;
pub mod time;
pub mod transport;
pub mod wire;
