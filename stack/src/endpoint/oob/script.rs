//! Test peers that replay a C tool's side of an exchange byte for byte.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};

/// One step of a scripted peer.
#[derive(Debug)]
pub(crate) enum Step {
    /// Read exactly these bytes from us.
    Expect(Vec<u8>),
    /// Write these bytes to us.
    Send(Vec<u8>),
    /// Read until we close, requiring exactly these bytes.
    ExpectEnd(Vec<u8>),
}

pub(crate) fn play(mut stream: TcpStream, script: Vec<Step>) {
    for step in script {
        match step {
            Step::Expect(want) => {
                let mut got = vec![0u8; want.len()];
                stream.read_exact(&mut got).unwrap();
                assert_eq!(
                    got.escape_ascii().to_string(),
                    want.escape_ascii().to_string()
                );
            }
            Step::Send(bytes) => stream.write_all(&bytes).unwrap(),
            Step::ExpectEnd(want) => {
                let mut rest = Vec::new();
                stream.read_to_end(&mut rest).unwrap();
                assert_eq!(
                    rest.escape_ascii().to_string(),
                    want.escape_ascii().to_string()
                );
            }
        }
    }
}

/// A scripted server on an ephemeral loopback port, serving one connection per script.
pub(crate) fn server(scripts: Vec<Vec<Step>>) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = thread::spawn(move || {
        for script in scripts {
            play(listener.accept().unwrap().0, script);
        }
    });
    (addr, peer)
}

/// A listener for us, and a scripted client making one connection per script to it.
pub(crate) fn client(scripts: Vec<Vec<Step>>) -> (TcpListener, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = thread::spawn(move || {
        for script in scripts {
            play(TcpStream::connect(addr).unwrap(), script);
        }
    });
    (listener, peer)
}
