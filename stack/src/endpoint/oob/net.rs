//! The TCP side of the exchanges: listening and connecting as the tools do, and reading or
//! writing one whole message at a time before a deadline.
//!
//! The C tools read each message with a single `read()` and fail unless it returns the whole
//! message. We accumulate short reads instead (TCP may split a message), and write each
//! message with one `write_all` so that the peer's single `read()` finds it whole.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::error::OobError;

/// How often a timed `accept` looks for a connection.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// Listens on `port` of every local address, as the tools' servers do (`AI_PASSIVE`): on the
/// IPv6 wildcard, which also takes IPv4 connections on Linux, or on the IPv4 wildcard where
/// IPv6 is unavailable. The standard library sets `SO_REUSEADDR`, as the tools do.
pub fn listen(port: u16) -> Result<TcpListener, OobError> {
    TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))))
        .map_err(|source| OobError::Listen { port, source })
}

/// Waits for one peer. With `timeout` `None` it waits forever, as the tools do.
pub fn accept(listener: &TcpListener, timeout: Option<Duration>) -> Result<TcpStream, OobError> {
    let accept_err = |source| OobError::Accept { source };
    let Some(after) = timeout else {
        return listener.accept().map(|(s, _)| s).map_err(accept_err);
    };
    listener.set_nonblocking(true).map_err(accept_err)?;
    let deadline = Instant::now() + after;
    let accepted = loop {
        match listener.accept() {
            Ok((stream, _)) => break Ok(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    break Err(OobError::AcceptTimeout { after });
                }
                thread::sleep(ACCEPT_POLL);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break Err(accept_err(e)),
        }
    };
    listener.set_nonblocking(false).map_err(accept_err)?;
    let stream = accepted?;
    stream.set_nonblocking(false).map_err(accept_err)?;
    Ok(stream)
}

/// How long a refused or unreachable connection is tried again: a server started a moment
/// after its client (a script starting both, a guest still booting) is common, and the
/// tools' clients, which try once, make every such race a failed run.
const CONNECT_GRACE: Duration = Duration::from_secs(10);

/// Between two attempts of [`connect`].
const CONNECT_RETRY: Duration = Duration::from_millis(200);

/// Connects to the first address of `addr` that answers, as the tools' clients walk the
/// `getaddrinfo` list. A refusal or an unreachable host (nothing listens yet, the host does
/// not answer ARP yet) is tried again every 200 ms for up to [`CONNECT_GRACE`] (and never
/// past `timeout`); any other error, or the last one when time is up, is returned.
pub fn connect<A: ToSocketAddrs + std::fmt::Debug>(
    addr: A,
    timeout: Duration,
) -> Result<TcpStream, OobError> {
    let connect_err = |source| OobError::Connect {
        addr: format!("{addr:?}"),
        source,
    };
    let candidates: Vec<SocketAddr> = addr.to_socket_addrs().map_err(connect_err)?.collect();
    let give_up = Instant::now() + timeout.min(CONNECT_GRACE);
    loop {
        let mut last = io::Error::new(ErrorKind::NotFound, "the name resolves to no address");
        for candidate in &candidates {
            match TcpStream::connect_timeout(candidate, timeout) {
                Ok(stream) => return Ok(stream),
                Err(e) => last = e,
            }
        }
        let again = matches!(
            last.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
        );
        if !again || Instant::now() + CONNECT_RETRY > give_up {
            return Err(connect_err(last));
        }
        thread::sleep(CONNECT_RETRY);
    }
}

/// One connected socket, its messages due before one deadline per exchange: the timeout
/// bounds the whole exchange from [`Channel::new`] or [`Channel::set_timeout`] on, not each
/// `read()`, so a peer dribbling one byte at a time cannot hold it open (issue 14).
#[derive(Debug)]
pub(crate) struct Channel {
    stream: TcpStream,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
}

impl Channel {
    pub(crate) fn new(stream: TcpStream, timeout: Option<Duration>) -> Result<Self, OobError> {
        let mut channel = Channel {
            stream,
            timeout: None,
            deadline: None,
        };
        channel.set_timeout(timeout)?;
        // Each message is answered before the next is sent, so Nagle would only add delay.
        channel
            .stream
            .set_nodelay(true)
            .map_err(|source| OobError::Io {
                step: "configuring the socket",
                source,
            })?;
        Ok(channel)
    }

    /// Starts a new exchange that must end within `timeout`. `None` waits forever; a zero
    /// duration is treated as "forever" too, as the socket layer cannot express it.
    pub(crate) fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), OobError> {
        let timeout = timeout.filter(|t| !t.is_zero());
        self.timeout = timeout;
        self.deadline = timeout.map(|t| Instant::now() + t);
        Ok(())
    }

    /// Points the socket's timeouts at what is left before the deadline.
    fn arm(&mut self, step: &'static str) -> Result<(), OobError> {
        let (Some(deadline), Some(after)) = (self.deadline, self.timeout) else {
            return self.set_socket_timeouts(None);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(OobError::Timeout { step, after });
        }
        self.set_socket_timeouts(Some(left))
    }

    fn set_socket_timeouts(&self, timeout: Option<Duration>) -> Result<(), OobError> {
        for result in [
            self.stream.set_read_timeout(timeout),
            self.stream.set_write_timeout(timeout),
        ] {
            result.map_err(|source| OobError::Io {
                step: "configuring the socket timeout",
                source,
            })?;
        }
        Ok(())
    }

    pub(crate) fn send(&mut self, msg: &[u8], step: &'static str) -> Result<(), OobError> {
        let mut sent = 0;
        while sent < msg.len() {
            self.arm(step)?;
            match self.stream.write(&msg[sent..]) {
                Ok(0) => {
                    let source = io::Error::new(ErrorKind::WriteZero, "the peer takes no more");
                    return Err(OobError::Io { step, source });
                }
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => return Err(self.map_io(step, source)),
            }
        }
        Ok(())
    }

    /// Fills `buf` exactly.
    pub(crate) fn recv(&mut self, buf: &mut [u8], step: &'static str) -> Result<(), OobError> {
        let mut got = 0;
        while got < buf.len() {
            self.arm(step)?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(OobError::Closed {
                        step,
                        got,
                        expected: buf.len(),
                    });
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => return Err(self.map_io(step, source)),
            }
        }
        Ok(())
    }

    fn map_io(&self, step: &'static str, source: io::Error) -> OobError {
        match (source.kind(), self.timeout) {
            (ErrorKind::WouldBlock | ErrorKind::TimedOut, Some(after)) => {
                OobError::Timeout { step, after }
            }
            _ => OobError::Io { step, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_times_out_without_a_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let err = accept(&listener, Some(Duration::from_millis(30))).unwrap_err();
        assert!(matches!(err, OobError::AcceptTimeout { .. }), "{err}");
    }

    #[test]
    fn recv_reports_how_much_arrived_before_the_peer_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"abc").unwrap();
        });
        let stream = accept(&listener, Some(Duration::from_secs(5))).unwrap();
        let mut channel = Channel::new(stream, Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 8];
        let err = channel.recv(&mut buf, "reading").unwrap_err();
        peer.join().unwrap();
        assert!(
            matches!(
                err,
                OobError::Closed {
                    got: 3,
                    expected: 8,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn recv_times_out_on_a_silent_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).unwrap();
        let stream = accept(&listener, Some(Duration::from_secs(5))).unwrap();
        let mut channel = Channel::new(stream, Some(Duration::from_millis(30))).unwrap();
        let err = channel.recv(&mut [0u8; 4], "waiting").unwrap_err();
        assert!(matches!(err, OobError::Timeout { .. }), "{err}");
    }

    /// One byte every 30 ms never lets a 150 ms read timeout expire, but the exchange as a
    /// whole must end within the timeout (the old per-read timeout let a peer hold a
    /// `--timeout 3` server for 17 s).
    #[test]
    fn a_dribbling_peer_meets_one_deadline_for_the_exchange() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for _ in 0..16 {
                if s.write_all(b"x").is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(30));
            }
        });
        let stream = accept(&listener, Some(Duration::from_secs(5))).unwrap();
        let mut channel = Channel::new(stream, Some(Duration::from_millis(150))).unwrap();
        let err = channel.recv(&mut [0u8; 16], "reading").unwrap_err();
        assert!(matches!(err, OobError::Timeout { .. }), "{err}");
        drop(channel);
        peer.join().unwrap();
    }

    #[test]
    fn connect_to_a_closed_port_is_an_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = connect(("127.0.0.1", port), Duration::from_millis(500)).unwrap_err();
        assert!(matches!(err, OobError::Connect { .. }), "{err}");
    }

    #[test]
    fn connect_waits_for_a_server_that_starts_late() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
            listener.accept().map(|_| ())
        });
        let stream = connect(("127.0.0.1", port), Duration::from_secs(5));
        assert!(stream.is_ok(), "{stream:?}");
        server.join().unwrap().unwrap();
    }
}
