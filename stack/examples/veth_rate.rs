//! Raw frame throughput of the TAP and AF_XDP devices over a veth pair between two network
//! namespaces, beside kernel TCP over the same pair: what an endpoint on these devices can
//! hope for at best. Needs root (namespaces, TAP, AF_XDP).
//!
//! `cargo run --release -p roce --example veth_rate [SECONDS]` creates the namespaces, runs each
//! case (a receiver in one namespace, a sender in the other, each this program again under
//! `ip netns exec`), prints a table and removes the namespaces.
//!
//! - xdp: AF_XDP on `va` -> veth -> AF_XDP on `vb` (XDP program attached in native mode if the
//!   driver allows, every frame redirected). veth MTU 3500: the largest at which veth runs a
//!   single-buffer XDP program natively.
//! - tap: TAP `ta` -> bridge -> veth -> bridge -> TAP `tb`, MTU 4200.
//! - tcp: one kernel TCP connection over the veth (MTU 4200), 64 KiB writes.
//!
//! `tests/bench/veth_bench.sh` runs the two halves in its own namespaces, beside our endpoint
//! and with its frame sizes: `veth_rate recv xdp:IF SECONDS` prints `ready` once its socket
//! is bound, then counts frames for SECONDS from the first and prints `FRAMES BYTES SECONDS`;
//! `veth_rate send xdp:IF SIZE SECONDS [WINDOW]` sends SIZE-byte frames (multi-buffer above a
//! chunk, where the link's MTU allows) as fast as the device takes them, at most WINDOW
//! (default 256) beyond the receiver's credits. Both wait as our endpoint does (see
//! `SpinWaiter`).
//!
//! Latency: `veth_rate pong xdp:IF FRAMES [busy]` prints `ready`, then answers every FRAMES
//! data frames with as many copies of the last; `veth_rate ping xdp:IF SIZE ITERS [FRAMES
//! [TIMEOUT_US|busy]]` sends FRAMES (default 1) SIZE-byte frames and waits for the answer,
//! ITERS times after 100 unmeasured, sleeping in poll(2) with a timeout of TIMEOUT_US
//! (default 5 s), and prints `ITERS iters in S seconds = U usec/iter` as udp_pingpong does.
//! Two frames per turn are an RC ping-pong's ACK and SEND; the timeout shows what a short one
//! costs. `busy` polls instead of sleeping, as our endpoint's `--busy-poll` does: the ceiling
//! of a busy-polling ping-pong on this device.

use std::error::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roce::endpoint::DEFAULT_SPIN;
use roce::io::Device;
use roce::io::tap::TapDevice;
use roce::io::xdp::{XdpConfig, XdpDevice, XdpFilter};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Frames the sender may have sent beyond the receiver's last credit, unless told: so that
/// the sender never runs far ahead of the receive path. Open loop, the sender's core builds
/// most frames only for veth to drop them, its receive softirq starved (measured: 2.2 M
/// 122-byte frames sent in 4 s, 1.6 M of them dropped at veth's ring), which measures the
/// drops, not the device; any reliable protocol, ours too, runs a window. The bench gives
/// the window our endpoint runs (128 messages outstanding: 2048 frames of a 64 KiB WRITE,
/// 128 SENDs).
const WINDOW: u64 = 256;
/// Data frames per credit the receiver sends back (and one whenever it runs dry).
const CREDIT_EVERY: u64 = 32;
/// How long the sender waits for a credit before writing the window off as dropped.
const CREDIT_PATIENCE: Duration = Duration::from_millis(1);
const DATA_ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const CREDIT_ETHERTYPE: [u8; 2] = [0x88, 0xb6];
const SENDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
const RECEIVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

const NS_A: &str = "roce-rate-a";
const NS_B: &str = "roce-rate-b";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "recv" => receive(arg(1), arg(2).parse()?),
        "send" => send(
            arg(1),
            arg(2).parse()?,
            arg(3).parse()?,
            if arg(4).is_empty() {
                WINDOW
            } else {
                arg(4).parse()?
            },
        ),
        "pong" => pong(
            arg(1),
            arg(2).parse()?,
            match arg(3) {
                "" => false,
                "busy" => true,
                other => return Err(format!("pong: {other:?} is not 'busy'").into()),
            },
        ),
        "ping" => ping(
            arg(1),
            arg(2).parse()?,
            arg(3).parse()?,
            if arg(4).is_empty() {
                1
            } else {
                arg(4).parse()?
            },
            match arg(5) {
                "busy" => None,
                "" => Some(Duration::from_secs(5)),
                us => Some(Duration::from_micros(us.parse()?)),
            },
        ),
        "tcp-recv" => tcp_receive(arg(1), arg(2).parse()?),
        "tcp-send" => tcp_send(arg(1), arg(2).parse()?),
        "" => orchestrate(3),
        secs => orchestrate(secs.parse()?),
    }
}

fn open(backend: &str) -> Result<Box<dyn Device>> {
    match backend.split_once(':') {
        Some(("xdp", ifname)) => Ok(Box::new(open_xdp(backend, ifname)?)),
        Some(("tap", name)) => Ok(Box::new(TapDevice::open(name, None)?)),
        _ => Err(format!("unknown backend {backend:?}").into()),
    }
}

fn open_xdp(backend: &str, ifname: &str) -> Result<XdpDevice> {
    let config = XdpConfig {
        filter: XdpFilter::All,
        ..XdpConfig::default()
    };
    // The kernel frees an AF_XDP socket a while after its process exits (the bench
    // runs this right after our endpoint on the same interfaces): wait for the queue.
    let give_up = Instant::now() + Duration::from_secs(10);
    let dev = loop {
        match XdpDevice::open(ifname, config) {
            Err(e) if e.to_string().contains("busy") && Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other?,
        }
    };
    eprintln!("{backend}: XDP mode {:?}", dev.mode());
    Ok(dev)
}

/// Counts frames for `secs` seconds from the first one; prints `frames bytes seconds` (and on
/// stderr, for AF_XDP, the kernel's counters of frames dropped because we were too slow).
fn receive(backend: &str, secs: f64) -> Result<()> {
    match backend.split_once(':') {
        Some(("xdp", ifname)) => count(backend, open_xdp(backend, ifname)?, secs, |d| {
            d.statistics().ok().map(|s| {
                format!(
                    "rx_dropped {} rx_ring_full {} rx_fill_ring_empty_descs {}",
                    s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs
                )
            })
        }),
        _ => count(backend, open(backend)?, secs, |_| None),
    }
}

fn count<D: Device>(
    backend: &str,
    mut dev: D,
    secs: f64,
    stats: impl Fn(&D) -> Option<String>,
) -> Result<()> {
    // Waits as our endpoint does: polling a moment after traffic, out of epoll's set, then
    // sleeping in it (see `SpinWaiter`).
    let mut waiter = SpinWaiter::new(&dev)?;
    println!("ready");
    std::io::stdout().flush()?;
    let (mut frames, mut bytes) = (0u64, 0u64);
    // Every data frame since the socket opened, and how many of them the sender has heard of.
    let (mut seen, mut credited) = (0u64, 0u64);
    let mut start = None;
    let give_up = Instant::now() + Duration::from_secs_f64(secs + 10.0);
    loop {
        let got = dev.receive(&mut |f| {
            if f.get(12..14) == Some(&DATA_ETHERTYPE) {
                frames += 1;
                bytes += f.len() as u64;
                seen += 1;
            }
        })?;
        if seen - credited >= CREDIT_EVERY || (!got && seen > credited) {
            if dev.transmit(&credit_frame(seen))? {
                credited = seen;
            }
            dev.flush()?;
        }
        if got {
            waiter.traffic()?;
        } else {
            waiter.idle(Duration::from_millis(10))?;
        }
        let now = Instant::now();
        if got && start.is_none() {
            start = Some(now);
            (frames, bytes) = (0, 0);
        }
        match start {
            Some(t) if now - t >= Duration::from_secs_f64(secs) => {
                println!("{frames} {bytes} {}", (now - t).as_secs_f64());
                if let Some(stats) = stats(&dev) {
                    eprintln!("{backend}: {stats}");
                }
                return Ok(());
            }
            None if now > give_up => return Err("no frame arrived".into()),
            _ => {}
        }
    }
}

/// A poll(2) set that wakes when `dev` has a frame.
fn waiter(dev: &dyn Device) -> Result<(mio::Poll, mio::Events)> {
    let poll = mio::Poll::new()?;
    let fd = dev.raw_fd().ok_or("the device has no descriptor")?;
    poll.registry().register(
        &mut mio::unix::SourceFd(&fd),
        mio::Token(0),
        mio::Interest::READABLE,
    )?;
    Ok((poll, mio::Events::with_capacity(8)))
}

/// Waiting for a device as our endpoint's runtime does (`--spin`, default
/// [`DEFAULT_SPIN`]): for that long after traffic it polls, yielding the core between idle
/// turns, with the descriptor out of epoll's set; only then does it join the set and sleep.
/// In the set, every frame the socket receives or sends has the kernel walk the socket's wait
/// queue in the sending process's system call (for AF_XDP over veth, per frame). Our endpoint
/// skips that walk while it polls, so the ceiling it is measured against skips it too.
struct SpinWaiter {
    poll: mio::Poll,
    events: mio::Events,
    fd: std::os::fd::RawFd,
    armed: bool,
    last_traffic: Instant,
}

impl SpinWaiter {
    fn new(dev: &dyn Device) -> Result<SpinWaiter> {
        Ok(SpinWaiter {
            poll: mio::Poll::new()?,
            events: mio::Events::with_capacity(8),
            fd: dev.raw_fd().ok_or("the device has no descriptor")?,
            armed: false,
            last_traffic: Instant::now(),
        })
    }

    /// Frames moved: poll for the next ones, out of epoll's set.
    fn traffic(&mut self) -> Result<()> {
        self.last_traffic = Instant::now();
        if self.armed {
            self.poll
                .registry()
                .deregister(&mut mio::unix::SourceFd(&self.fd))?;
            self.armed = false;
        }
        Ok(())
    }

    /// Nothing to do: yield the core while traffic is recent, else sleep until the device is
    /// readable or `timeout` passes (a descriptor that is readable already when it joins the
    /// set wakes the sleep at once, so nothing is missed).
    fn idle(&mut self, timeout: Duration) -> Result<()> {
        if self.last_traffic.elapsed() < DEFAULT_SPIN {
            std::thread::yield_now();
            return Ok(());
        }
        if !self.armed {
            self.poll.registry().register(
                &mut mio::unix::SourceFd(&self.fd),
                mio::Token(0),
                mio::Interest::READABLE,
            )?;
            self.armed = true;
        }
        self.poll.poll(&mut self.events, Some(timeout))?;
        Ok(())
    }
}

/// The receiver's credit: how many data frames it has taken, in a minimal Ethernet frame.
fn credit_frame(seen: u64) -> [u8; 60] {
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&SENDER_MAC);
    frame[6..12].copy_from_slice(&RECEIVER_MAC);
    frame[12..14].copy_from_slice(&CREDIT_ETHERTYPE);
    frame[14..22].copy_from_slice(&seen.to_be_bytes());
    frame
}

/// Sends `size`-byte frames as fast as the device takes them for `secs` seconds, at most
/// `window` beyond the receiver's last credit.
fn send(backend: &str, size: usize, secs: f64, window: u64) -> Result<()> {
    if window == 0 {
        return Err("the window must be at least one frame".into());
    }
    let mut dev = open(backend)?;
    let mut waiter = SpinWaiter::new(&dev)?;
    let mut frame = vec![0x5a; size];
    frame[..6].copy_from_slice(&RECEIVER_MAC);
    frame[6..12].copy_from_slice(&SENDER_MAC);
    frame[12..14].copy_from_slice(&DATA_ETHERTYPE);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let (mut sent, mut acked, mut written_off) = (0u64, 0u64, 0u64);
    let mut last_credit = Instant::now();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let before = sent;
        while sent - acked < window && dev.transmit(&frame)? {
            sent += 1;
        }
        dev.flush()?;
        if sent > before {
            waiter.traffic()?;
        }
        while dev.receive(&mut |f| {
            if f.get(12..14) == Some(&CREDIT_ETHERTYPE) {
                let mut count = [0u8; 8];
                count.copy_from_slice(&f[14..22]);
                acked = acked.max(u64::from_be_bytes(count).min(sent));
                last_credit = now;
            }
        })? {}
        if sent - acked >= window {
            if now - last_credit > CREDIT_PATIENCE {
                // Frames the receiver dropped (or its credits lost): stop waiting for them.
                written_off += sent - acked;
                acked = sent;
                last_credit = now;
            } else {
                waiter.idle(CREDIT_PATIENCE)?;
            }
        }
    }
    eprintln!(
        "{backend}: sent {sent} frames of {size} bytes in {secs} s, {written_off} never credited"
    );
    Ok(())
}

/// The first byte after the Ethernet header of the frame that ends a ping-pong.
const LAST_PING: u8 = 0xff;
/// Pings sent before the clock starts.
const PING_WARMUP: u32 = 100;

/// Answers every `frames` data frames with `frames` copies of the last, until one of them
/// says it was the last.
fn pong(backend: &str, frames: usize, busy: bool) -> Result<()> {
    if frames == 0 {
        return Err("FRAMES must be at least 1".into());
    }
    let mut dev = open(backend)?;
    let mut wait = PingWait::new(&*dev, (!busy).then_some(CREDIT_PATIENCE * 5000))?;
    println!("ready");
    std::io::stdout().flush()?;
    let (mut got, mut last) = (0, false);
    let mut answer = Vec::new();
    // Until the last turn is answered: its frames may come in more than one receive.
    loop {
        while dev.receive(&mut |f| {
            if f.get(12..14) == Some(&DATA_ETHERTYPE) {
                got += 1;
                last |= f.get(14) == Some(&LAST_PING);
                answer.clear();
                answer.extend_from_slice(f);
            }
        })? {}
        if got < frames {
            wait.idle()?;
            continue;
        }
        got = 0;
        answer[..6].copy_from_slice(&SENDER_MAC);
        answer[6..12].copy_from_slice(&RECEIVER_MAC);
        for _ in 0..frames {
            dev.transmit(&answer)?;
        }
        dev.flush()?;
        if last {
            return Ok(());
        }
    }
}

/// How a ping-pong side waits for its answer: sleeping in poll(2) for at most a timeout at
/// a time, or busy polling as our endpoint's `--busy-poll` does (the descriptor in no epoll
/// set, the core yielded between idle turns).
enum PingWait {
    Sleep(mio::Poll, mio::Events, Duration),
    Busy,
}

impl PingWait {
    fn new(dev: &dyn Device, timeout: Option<Duration>) -> Result<PingWait> {
        Ok(match timeout {
            Some(t) => {
                let (poll, events) = waiter(dev)?;
                PingWait::Sleep(poll, events, t)
            }
            None => PingWait::Busy,
        })
    }

    fn idle(&mut self) -> Result<()> {
        match self {
            PingWait::Sleep(poll, events, t) => poll.poll(events, Some(*t))?,
            PingWait::Busy => std::thread::yield_now(),
        }
        Ok(())
    }
}

/// `iters` round trips of `frames` frames each way, waiting as `timeout` says while the
/// answer is not in (None: busy polling).
fn ping(
    backend: &str,
    size: usize,
    iters: u32,
    frames: usize,
    timeout: Option<Duration>,
) -> Result<()> {
    if frames == 0 || iters == 0 || size < 15 {
        return Err("FRAMES and ITERS must be positive, SIZE at least 15".into());
    }
    let mut dev = open(backend)?;
    let mut wait = PingWait::new(&*dev, timeout)?;
    let mut frame = vec![0x5a; size];
    frame[..6].copy_from_slice(&RECEIVER_MAC);
    frame[6..12].copy_from_slice(&SENDER_MAC);
    frame[12..14].copy_from_slice(&DATA_ETHERTYPE);
    let mut start = Instant::now();
    let give_up = CREDIT_PATIENCE * 5000;
    for i in 0..PING_WARMUP + iters {
        if i == PING_WARMUP {
            start = Instant::now();
        }
        if i + 1 == PING_WARMUP + iters {
            frame[14] = LAST_PING;
        }
        for _ in 0..frames {
            dev.transmit(&frame)?;
        }
        dev.flush()?;
        let (mut got, asked) = (0, Instant::now());
        while got < frames {
            let any = dev.receive(&mut |f| {
                if f.get(12..14) == Some(&DATA_ETHERTYPE) {
                    got += 1;
                }
            })?;
            if !any {
                if asked.elapsed() > give_up {
                    return Err(format!("round trip {i}: no answer").into());
                }
                wait.idle()?;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{iters} iters in {secs:.2} seconds = {:.2} usec/iter",
        secs * 1e6 / f64::from(iters)
    );
    Ok(())
}

fn tcp_receive(bind: &str, secs: f64) -> Result<()> {
    let listener = TcpListener::bind(bind)?;
    println!("ready");
    std::io::stdout().flush()?;
    let (mut stream, _) = listener.accept()?;
    let mut buf = vec![0u8; 1 << 16];
    let start = Instant::now();
    let mut bytes = 0u64;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        match stream.read(&mut buf)? {
            0 => break,
            n => bytes += n as u64,
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!("{} {bytes} {elapsed}", bytes / (1 << 16));
    Ok(())
}

fn tcp_send(addr: &str, secs: f64) -> Result<()> {
    let mut stream = TcpStream::connect(addr)?;
    let buf = vec![0x5au8; 1 << 16];
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        if stream.write_all(&buf).is_err() {
            break; // the receiver finished and closed
        }
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        return Err(format!("ip {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

/// Two namespaces joined by veth `va` <-> `vb`; removed on drop.
struct Lab;

impl Lab {
    fn new(mtu: usize, taps: bool) -> Result<Lab> {
        for ns in [NS_A, NS_B] {
            let _ = ip(&["netns", "del", ns]);
            ip(&["netns", "add", ns])?;
        }
        let lab = Lab;
        let mtu = mtu.to_string();
        ip(&[
            "link", "add", "va", "netns", NS_A, "mtu", &mtu, "type", "veth", "peer", "name", "vb",
            "netns", NS_B, "mtu", &mtu,
        ])?;
        for (ns, veth, tap, addr) in [
            (NS_A, "va", "ta", "10.79.0.1/24"),
            (NS_B, "vb", "tb", "10.79.0.2/24"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", veth])?;
            ip(&["-n", ns, "link", "set", veth, "up"])?;
            if taps {
                ip(&["-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"])?;
                ip(&[
                    "-n", ns, "link", "add", "br0", "mtu", &mtu, "type", "bridge",
                ])?;
                for port in [veth, tap] {
                    ip(&["-n", ns, "link", "set", port, "mtu", &mtu, "master", "br0"])?;
                }
                ip(&["-n", ns, "link", "set", "br0", "up"])?;
            }
        }
        Ok(lab)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [NS_A, NS_B] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn spawn_in(ns: &str, args: &[&str]) -> Result<Child> {
    let exe = std::env::current_exe()?;
    Ok(Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Runs a receiver in B and a sender in A; returns (frames/s, Gb/s) seen by the receiver.
fn run_case(recv: &[&str], send: &[&str]) -> Result<(f64, f64)> {
    let mut receiver = spawn_in(NS_B, recv)?;
    let mut out = receiver.stdout.take().ok_or("no receiver stdout")?;
    let mut ready = [0u8; 6];
    out.read_exact(&mut ready)?;
    let sender = spawn_in(NS_A, send)?.wait_with_output()?;
    let mut line = String::new();
    out.read_to_string(&mut line)?;
    receiver.wait()?;
    if !sender.status.success() {
        return Err(format!("sender {send:?} failed").into());
    }
    let fields: Vec<f64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()?;
    let [frames, bytes, secs] = fields[..] else {
        return Err(format!("receiver printed {line:?}").into());
    };
    Ok((frames / secs, bytes * 8.0 / secs / 1e9))
}

fn orchestrate(secs: u32) -> Result<()> {
    let (run_for, send_for) = (secs.to_string(), (secs + 2).to_string());
    println!("| path | frame bytes | frames/s | Gb/s |");
    println!("|---|---|---|---|");
    let report = |path: &str, size: &str, (fps, gbps): (f64, f64)| {
        println!("| {path} | {size} | {fps:.0} | {gbps:.2} |");
    };
    {
        let _lab = Lab::new(3500, false)?;
        for size in ["64", "3514"] {
            let r = run_case(
                &["recv", "xdp:vb", &run_for],
                &["send", "xdp:va", size, &send_for],
            )?;
            report("AF_XDP -> veth -> AF_XDP", size, r);
        }
    }
    {
        let _lab = Lab::new(4200, true)?;
        for size in ["64", "4096"] {
            let r = run_case(
                &["recv", "tap:tb", &run_for],
                &["send", "tap:ta", size, &send_for],
            )?;
            report("TAP -> bridge -> veth -> bridge -> TAP", size, r);
        }
    }
    {
        let _lab = Lab::new(4200, false)?;
        let r = run_case(
            &["tcp-recv", "10.79.0.2:5201", &run_for],
            &["tcp-send", "10.79.0.2:5201", &send_for],
        )?;
        report(
            "kernel TCP over veth (MTU 4200), goodput, 64 KiB writes",
            "-",
            (f64::NAN, r.1),
        );
    }
    Ok(())
}
