//! Kernel UDP ping-pong, the latency baseline of `tests/bench/veth_bench.sh`: what
//! `roce pingpong -s SIZE` is measured against between the same two namespaces. Event driven
//! on both sides, as the pingpong it is compared with: each side sleeps in a blocking
//! `recv` until the other's datagram wakes it.
//!
//! `udp_pingpong pong PORT` prints `ready` once bound, then echoes every datagram back to its
//! sender until an empty one arrives. `udp_pingpong ping HOST:PORT SIZE ITERS` makes 100
//! untimed round trips, then ITERS timed ones of SIZE-byte datagrams, sends the empty
//! datagram that stops the echo, and prints ibv_rc_pingpong's last line
//! (`ITERS iters in S seconds = U usec/iter`). A datagram lost or late by 5 s is an error.

use std::error::Error;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// How long a side waits for the other's datagram before giving up.
const PATIENCE: Duration = Duration::from_secs(5);
/// Round trips before the clock starts (ARP, caches, the scheduler's first placement).
const WARMUP: u32 = 100;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "pong" => pong(arg(1).parse()?),
        "ping" => ping(arg(1), arg(2).parse()?, arg(3).parse()?),
        _ => Err("usage: udp_pingpong pong PORT | ping HOST:PORT SIZE ITERS".into()),
    }
}

fn pong(port: u16) -> Result<()> {
    let socket = UdpSocket::bind(("0.0.0.0", port))?;
    println!("ready");
    let mut buf = vec![0u8; 65536];
    // No timeout before the first datagram: the ping side starts when it likes.
    let (mut len, mut from) = socket.recv_from(&mut buf)?;
    socket.set_read_timeout(Some(PATIENCE))?;
    while len > 0 {
        socket.send_to(&buf[..len], from)?;
        (len, from) = socket
            .recv_from(&mut buf)
            .map_err(|e| format!("waiting for the next ping: {e}"))?;
    }
    Ok(())
}

fn ping(server: &str, size: usize, iters: u32) -> Result<()> {
    if size == 0 || iters == 0 {
        return Err("SIZE and ITERS must be positive".into());
    }
    let socket = UdpSocket::bind(("0.0.0.0", 0))?;
    socket.connect(server)?;
    socket.set_read_timeout(Some(PATIENCE))?;
    let out = vec![0x5au8; size];
    let mut buf = vec![0u8; size + 1];
    let mut round_trip = |i: u32| -> Result<()> {
        socket.send(&out)?;
        let got = socket
            .recv(&mut buf)
            .map_err(|e| format!("round trip {i}: {e}"))?;
        if got != size {
            return Err(format!("round trip {i}: {got} bytes came back, not {size}").into());
        }
        Ok(())
    };
    for i in 0..WARMUP {
        round_trip(i)?;
    }
    let start = Instant::now();
    for i in 0..iters {
        round_trip(i)?;
    }
    let secs = start.elapsed().as_secs_f64();
    socket.send(&[])?;
    println!(
        "{iters} iters in {secs:.2} seconds = {:.2} usec/iter",
        secs * 1e6 / f64::from(iters)
    );
    Ok(())
}
