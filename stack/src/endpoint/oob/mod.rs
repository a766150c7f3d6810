//! The out-of-band TCP exchanges of the standard tools, byte for byte, in both roles.
//!
//! Before any RoCE packet flows, the rdma-core example programs and perftest swap QP numbers,
//! PSNs, GIDs (and for perftest, memory keys and addresses) over a plain TCP connection, port
//! 18515 by default. Speaking these exchanges exactly is what lets our endpoint sit on either
//! side of `ibv_rc_pingpong`, `ibv_uc_pingpong`, `ibv_ud_pingpong`, `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw` and `ib_atomic_bw`:
//!
//! - [`pingpong`]: the `ibv_*_pingpong` address message `LLLL:QQQQQQ:PPPPPP:GID` and the
//!   `"done"` that ends it (rdma-core 44.0, Debian 12's `ibverbs-utils`).
//! - [`perftest`]: perftest's version, system-data and MTU exchanges, its key message
//!   (LID, outstanding reads, QPN, PSN, R_Key, VA, GID, SRQN), the repeated handshakes that
//!   synchronise the two sides around the test, the result exchange and the closing
//!   `"done"` (perftest 4.5-0.17, Debian 12's `perftest`, which reports version 6.06).
//! - [`lab_verbs`]: the lab's own verbs program (tests/lab/lab_verbs.c): a packed
//!   `conn_info` each way, then one-byte `R` (ready) and `D` (done) messages.
//!
//! Each module documents the sequence of messages, with sizes, and the C function it mirrors.
//! The exchanges are blocking, each bounded by one deadline (a timeout for the whole
//! exchange, not per read): they run once, before the event loop.
//! A peer's malformed message is an [`OobError::Malformed`] naming the expected layout and the
//! offending byte, never a panic.

mod error;
mod net;
#[cfg(test)]
mod script;
mod text;

pub mod lab_verbs;
pub mod perftest;
pub mod pingpong;

pub use error::{MalformedMessage, OobError};
pub use net::{accept, connect, listen};
