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

use std::error::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roce::io::Device;
use roce::io::tap::TapDevice;
use roce::io::xdp::{XdpConfig, XdpDevice, XdpFilter};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const NS_A: &str = "roce-rate-a";
const NS_B: &str = "roce-rate-b";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "recv" => receive(arg(1), arg(2).parse()?),
        "send" => send(arg(1), arg(2).parse()?, arg(3).parse()?),
        "tcp-recv" => tcp_receive(arg(1), arg(2).parse()?),
        "tcp-send" => tcp_send(arg(1), arg(2).parse()?),
        "" => orchestrate(3),
        secs => orchestrate(secs.parse()?),
    }
}

fn open(backend: &str) -> Result<Box<dyn Device>> {
    match backend.split_once(':') {
        Some(("xdp", ifname)) => {
            let config = XdpConfig {
                filter: XdpFilter::All,
                ..XdpConfig::default()
            };
            let dev = XdpDevice::open(ifname, config)?;
            eprintln!("{backend}: XDP mode {:?}", dev.mode());
            Ok(Box::new(dev))
        }
        Some(("tap", name)) => Ok(Box::new(TapDevice::open(name, None)?)),
        _ => Err(format!("unknown backend {backend:?}").into()),
    }
}

/// Counts frames for `secs` seconds from the first one; prints `frames bytes seconds`.
fn receive(backend: &str, secs: f64) -> Result<()> {
    let mut dev = open(backend)?;
    // Sleep in poll(2) while the device is empty rather than spin: on a shared machine a
    // spinning receiver takes the CPU the sender and the kernel's softirq need.
    let mut poll = mio::Poll::new()?;
    let fd = dev.raw_fd().ok_or("the device has no descriptor")?;
    let mut source = mio::unix::SourceFd(&fd);
    poll.registry()
        .register(&mut source, mio::Token(0), mio::Interest::READABLE)?;
    let mut events = mio::Events::with_capacity(8);
    println!("ready");
    std::io::stdout().flush()?;
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut start = None;
    let give_up = Instant::now() + Duration::from_secs_f64(secs + 10.0);
    loop {
        let got = dev.receive(&mut |f| {
            frames += 1;
            bytes += f.len() as u64;
        })?;
        if !got {
            poll.poll(&mut events, Some(Duration::from_millis(10)))?;
        }
        let now = Instant::now();
        if got && start.is_none() {
            start = Some(now);
            (frames, bytes) = (0, 0);
        }
        match start {
            Some(t) if now - t >= Duration::from_secs_f64(secs) => {
                println!("{frames} {bytes} {}", (now - t).as_secs_f64());
                return Ok(());
            }
            None if now > give_up => return Err("no frame arrived".into()),
            _ => {}
        }
    }
}

/// Sends `size`-byte frames as fast as the device takes them for `secs` seconds.
fn send(backend: &str, size: usize, secs: f64) -> Result<()> {
    let mut dev = open(backend)?;
    let mut frame = vec![0x5a; size];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xbb]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while Instant::now() < end {
        for _ in 0..64 {
            if dev.transmit(&frame)? {
                sent += 1;
            }
        }
        dev.flush()?;
    }
    eprintln!("{backend}: sent {sent} frames of {size} bytes in {secs} s");
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
