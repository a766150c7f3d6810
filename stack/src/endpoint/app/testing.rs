//! Test fixtures (not tests) for the programs' inline tests: runtimes over the in-memory link,
//! their out-of-band exchange over loopback TCP.

use crate::endpoint::{HostConfig, Runtime, RuntimeConfig};
use crate::io::Device;
use crate::io::memory::MemoryDevice;

/// A runtime whose QPNs and R_Keys are drawn from a seed made of its address.
pub fn runtime(device: MemoryDevice, addr: &str) -> Runtime {
    let seed = addr
        .bytes()
        .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b));
    runtime_seeded(device, addr, seed)
}

/// A runtime whose QPNs and R_Keys are drawn from `seed`.
pub fn runtime_seeded(device: MemoryDevice, addr: &str, seed: u64) -> Runtime {
    let mac = device.capabilities().mac.unwrap_or_default();
    let mut host = HostConfig::new(mac, vec![addr.parse().unwrap()]);
    host.transport.id_seed = Some(seed);
    Runtime::new(Box::new(device), host, RuntimeConfig::default()).unwrap()
}

/// A TCP port that was free a moment ago, and never handed to another test of this process:
/// the kernel may give a port it just released to the next bind, and two tests running at
/// once on one port connect each other's clients and servers.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Waits until something listens on TCP `port`, so that a client thread never races its server
/// thread's `listen` (a fixed sleep loses that race on a loaded machine). Reads /proc/net/tcp{,6}
/// rather than probing, because a probe connection would be taken as the client by the server.
pub fn wait_for_listener(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let needle = format!(":{port:04X} ");
    loop {
        // The listener binds [::] where it can, else 0.0.0.0.
        let table = ["/proc/net/tcp", "/proc/net/tcp6"]
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .concat();
        let listening = table
            .lines()
            .filter(|line| !line.trim_start().starts_with("sl"))
            .any(|line| {
                let mut cols = line.split_whitespace();
                let local = cols.nth(1).unwrap_or("");
                let state = cols.nth(1).unwrap_or("");
                format!("{local} ").ends_with(&needle) && state == "0A"
            });
        if listening {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on port {port} after 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A writer that passes what is written to a channel, so that a test sees a server
/// thread's lines as they come (its "listening" line first).
pub struct Lines(pub std::sync::mpsc::Sender<String>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
