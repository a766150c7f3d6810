//! The RoCEv2 wire format: every header as a view over bytes plus an owned `Repr`.
//!
//! Nothing in this module panics on any input: constructors check lengths once, after which
//! accessors index freely.

/// Parse and emit errors.
pub mod error;
mod header;

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod builder;
pub mod ce;
pub mod cm;
pub mod cnp;
pub mod decap;
pub mod deth;
pub mod encap;
pub mod ext;
pub mod feth;
pub mod field;
pub mod grh;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod mad;
pub mod ndp;
pub mod opcode;
pub mod packet;
pub mod pause;
pub mod reth;
pub mod sample;

pub use aeth::{Aeth, AethRepr, NakCode, RnrTimer, Syndrome};
pub use atomic_ack_eth::{AtomicAckEth, AtomicAckEthRepr};
pub use atomic_eth::{AtomicEth, AtomicEthRepr};
pub use bth::{Bth, BthRepr};
pub use builder::{RoceHeaders, RoceRepr};
pub use cnp::{Cnp, CnpRepr};
pub use deth::{Deth, DethRepr};
pub use encap::{
    Ecn, EthernetRepr, IpRepr, Ipv4Repr, Ipv6Repr, ROCEV2_UDP_PORT, UdpRepr, VlanTag,
    rxe_connected_udp_src_port, rxe_udp_src_port,
};
pub use error::{Result, WireError};
pub use ext::{ExtHeaders, IbPacketRepr, pad_for};
pub use feth::{Feth, FethRepr};
pub use field::{Msn, PKey, Psn, Qpn};
pub use header::FixedHeader;
pub use ieth::{Ieth, IethRepr};
pub use immdt::{ImmDt, ImmDtRepr};
pub use opcode::{Headers, Opcode, OpcodeInfo, Transport};
pub use packet::{IbPart, Layer, LinkHeader, NotRoce, PacketError, RocePacket};
pub use reth::{Reth, RethRepr};
