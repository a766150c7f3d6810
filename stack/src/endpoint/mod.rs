//! The endpoint: the only layer with a real clock and real sockets. It drives the transport
//! engine over a device and speaks the out-of-band exchanges of the standard tools.

pub mod oob;
