//! Kernel TCP goodput, the baseline of `tests/bench/veth_bench.sh`: the same bytes an RC
//! WRITE test moves (COUNT messages of SIZE bytes), over one TCP connection.
//!
//! `tcp_goodput recv PORT` accepts one connection, reads until it closes and prints
//! `BYTES SECONDS` (from the first byte to the last); `tcp_goodput send HOST:PORT SIZE COUNT`
//! writes COUNT buffers of SIZE bytes.

use std::error::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "recv" => receive(arg(1).parse()?),
        "send" => send(arg(1), arg(2).parse()?, arg(3).parse()?),
        _ => Err("usage: tcp_goodput recv PORT | send HOST:PORT SIZE COUNT".into()),
    }
}

fn receive(port: u16) -> Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", port))?;
    let (mut stream, _) = listener.accept()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = stream.read(&mut buf)? as u64;
    let start = Instant::now();
    loop {
        match stream.read(&mut buf)? {
            0 => break,
            n => total += n as u64,
        }
    }
    println!("{total} {:.6}", start.elapsed().as_secs_f64());
    Ok(())
}

fn send(addr: &str, size: usize, count: u64) -> Result<()> {
    let mut stream = TcpStream::connect(addr)?;
    let buf = vec![0x5au8; size];
    for _ in 0..count {
        stream.write_all(&buf)?;
    }
    Ok(())
}
