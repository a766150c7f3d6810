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

/// A runtime over `device` (the in-memory link, or middleware around it) whose QPNs and
/// R_Keys are drawn from `seed`.
pub fn runtime_seeded(device: impl Device + 'static, addr: &str, seed: u64) -> Runtime {
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

/// cmatose's or udaddy's `run`.
pub type CmatestRun = fn(
    &mut Runtime,
    &super::cmatose::CmatestOptions,
    &mut dyn std::io::Write,
) -> Result<super::cmatose::CmatestSummary, super::AppError>;

/// What [`cmatest_pair`] saw: each side's lines, and the client's runtime.
pub struct CmatestPair {
    pub client_lines: String,
    pub server_lines: String,
    pub client_rt: Runtime,
}

/// Runs `run` as server (10.0.0.2, lingering `linger` after it returns) and, once the
/// server has said its first line (it listens right after), as client (10.0.0.1) over the
/// in-memory link: `opts` but for four connections, five messages of `size` bytes each way
/// on each. Both sides must count 4 connections and 20 messages each way.
pub fn cmatest_pair(
    run: CmatestRun,
    opts: super::cmatose::CmatestOptions,
    size: u32,
    linger: std::time::Duration,
) -> CmatestPair {
    let opts = super::cmatose::CmatestOptions {
        connections: 4,
        count: 5,
        size,
        timeout: std::time::Duration::from_secs(20),
        ..opts
    };
    let (a, b) = crate::io::memory::pair(
        crate::io::memory::MemoryLinkConfig::default(),
        crate::io::SystemClock::new(),
    )
    .unwrap();
    let server_opts = opts.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let mut rt = runtime(b, "10.0.0.2/24");
        let summary = run(&mut rt, &server_opts, &mut Lines(tx)).unwrap();
        rt.serve_for(linger).unwrap();
        summary
    });
    let first = rx.recv().unwrap();
    let mut client_rt = runtime(a, "10.0.0.1/24");
    let client_opts = super::cmatose::CmatestOptions {
        server: Some("10.0.0.2".parse().unwrap()),
        ..opts
    };
    let mut out = Vec::new();
    let client = run(&mut client_rt, &client_opts, &mut out).unwrap();
    let want = super::cmatose::CmatestSummary {
        connections: 4,
        sent: 20,
        received: 20,
    };
    assert_eq!(client, want);
    assert_eq!(server.join().unwrap(), want);
    CmatestPair {
        client_lines: String::from_utf8(out).unwrap(),
        server_lines: [first].into_iter().chain(rx.try_iter()).collect(),
        client_rt,
    }
}

/// Runs `run` as client (10.0.0.1) with `opts` against a runtime at 10.0.0.2 that runs no
/// program for 3 s; its error, and the client's runtime for more runs.
pub fn cmatest_refused(
    run: CmatestRun,
    opts: &super::cmatose::CmatestOptions,
) -> (super::AppError, Runtime) {
    let (a, b) = crate::io::memory::pair(
        crate::io::memory::MemoryLinkConfig::default(),
        crate::io::SystemClock::new(),
    )
    .unwrap();
    let peer = std::thread::spawn(move || {
        let mut rt = runtime(b, "10.0.0.2/24");
        let _ = rt.serve_for(std::time::Duration::from_secs(3));
    });
    let mut rt = runtime(a, "10.0.0.1/24");
    let e = run(&mut rt, opts, &mut Vec::new()).unwrap_err();
    peer.join().unwrap();
    (e, rt)
}
