//! Deterministic discrete-event simulations that run the stack's real protocol code in
//! virtual time.
//!
//! - [`dcqcn`]: N DCQCN senders through one ECN-marking switch queue to one receiver.

pub mod dcqcn;
pub mod net;
