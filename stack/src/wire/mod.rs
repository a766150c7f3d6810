//! The RoCEv2 wire format: every header as a view over bytes plus an owned `Repr`.
//!
//! Nothing in this module panics on any input: constructors check lengths once, after which
//! accessors index freely.

pub mod error;
mod header;

pub mod bth;
pub mod field;
pub mod opcode;

pub use bth::{Bth, BthRepr};
pub use error::{Result, WireError};
pub use field::{Msn, PKey, Psn, Qpn};
pub use header::FixedHeader;
pub use opcode::{Headers, Opcode, OpcodeInfo, Transport};
