//! Runtimes over the in-memory link for the programs' tests: two endpoints in one process,
//! their out-of-band exchange over loopback TCP.

use crate::endpoint::{HostConfig, Runtime, RuntimeConfig};
use crate::io::Device;
use crate::io::memory::MemoryDevice;

pub fn runtime(device: MemoryDevice, addr: &str) -> Runtime {
    let mac = device.capabilities().mac.unwrap_or_default();
    let host = HostConfig::new(mac, vec![addr.parse().unwrap()]);
    Runtime::new(Box::new(device), host, RuntimeConfig::default()).unwrap()
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
