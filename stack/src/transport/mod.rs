//! The transport layer: a sans-IO, deterministic engine for the RC, UC and UD services of
//! IBA Vol. 1 chapters 9-11, as RoCEv2 carries them.
//!
//! [`Engine`] holds memory regions, completion queues and queue pairs. Its inputs are work
//! requests ([`Engine::post_send`], [`Engine::post_recv`]), received packets
//! ([`Engine::handle_packet`]) and timer expiry ([`Engine::handle_timeout`]), each with an
//! explicit `now`; its outputs are packets ([`Engine::poll_transmit`]), the next deadline
//! ([`Engine::poll_timeout`]), completions and events. It reads no clock, opens no socket,
//! spawns no thread and draws no random number.
//!
//! Inside a queue pair the spec's three roles each have a file: the requester
//! (`requester.rs`) segments work requests into packets, the completer (`completer.rs`)
//! processes ACKs, NAKs and responses and runs the retransmission timers, the responder
//! (`responder.rs`) checks and executes requests and queues their responses.

mod completer;
mod config;
mod cq;
mod engine;
mod error;
mod mr;
mod qp;
mod queue_pair;
mod requester;
mod responder;
mod time;
mod wr;

pub mod fuzzing;
pub mod pair;

pub use completer::local_ack_timeout;
pub use config::{Event, MAX_PACKET_LEN, Stats, Transmit, TransportConfig};
pub use cq::{CompletionQueue, CqId, WcOpcode, WcStatus, WorkCompletion};
pub use engine::Engine;
pub use error::{DropReason, TransportError};
pub use mr::{Access, MemoryRegion, MrError};
pub use qp::{MAX_RD_ATOMIC, ModifyQp, Mtu, QpAttrs, QpState, QpType};
pub use queue_pair::QpInit;
pub use responder::GRH_LEN;
pub use time::Time;
pub use wr::{RecvWr, SendOp, SendWr, Sge, UdDest};

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests_basic;
#[cfg(test)]
mod tests_prop;
#[cfg(test)]
mod tests_rules;
#[cfg(test)]
mod tests_verbs;
