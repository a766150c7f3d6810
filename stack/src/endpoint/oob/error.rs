//! Errors of the out-of-band exchanges: a peer's bad message, and what went wrong on the socket.

use std::io;
use std::net::Ipv6Addr;
use std::time::Duration;

use thiserror::Error;

/// Longest excerpt of a bad message quoted in an error, so that a hostile peer cannot make
/// the error line arbitrarily long.
const QUOTE_LIMIT: usize = 160;

/// A message from the peer that does not have the exact layout the tool emits.
///
/// `got` is the message as received, escaped so that it prints on one line (`\0` for the
/// terminating NUL, `\xNN` for other non-printable bytes).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("peer message is not {format} (got \"{got}\"): {reason}")]
pub struct MalformedMessage {
    /// The expected layout, e.g. `LLLL:QQQQQQ:PPPPPP:GID`.
    pub format: &'static str,
    /// The message as received, escaped.
    pub got: String,
    /// What exactly was wrong, with the byte offset where it helps.
    pub reason: String,
}

impl MalformedMessage {
    pub(crate) fn new(format: &'static str, msg: &[u8], reason: String) -> Self {
        let quoted = &msg[..msg.len().min(QUOTE_LIMIT)];
        let mut got = escape(quoted);
        if msg.len() > QUOTE_LIMIT {
            got.push_str("...");
        }
        MalformedMessage {
            format,
            got,
            reason,
        }
    }
}

/// Bytes as printable text: `\0` for NUL (which ends every message of the tools), Rust's
/// ASCII escapes for other non-printable bytes.
pub(crate) fn escape(bytes: &[u8]) -> String {
    bytes
        .split(|&b| b == 0)
        .map(|part| part.escape_ascii().to_string())
        .collect::<Vec<_>>()
        .join("\\0")
}

/// Why an out-of-band exchange failed.
///
/// `step` names what was being sent or awaited, in the tool's own terms (for example
/// "reading the peer's address"), so that the error line alone says where the dialogue broke.
#[derive(Debug, Error)]
pub enum OobError {
    /// The server could not listen.
    #[error("cannot listen on TCP port {port}: {source}")]
    Listen {
        /// The TCP port.
        port: u16,
        /// The OS error.
        source: io::Error,
    },
    /// No client connected in time.
    #[error("no peer connected within {after:?}")]
    AcceptTimeout {
        /// How long the server waited.
        after: Duration,
    },
    /// Accepting the client failed.
    #[error("accepting the peer's connection: {source}")]
    Accept {
        /// The OS error.
        source: io::Error,
    },
    /// The client could not reach the server.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The server as given.
        addr: String,
        /// The OS error.
        source: io::Error,
    },
    /// The peer did not answer a step in time.
    #[error("{step}: no answer within {after:?}")]
    Timeout {
        /// The step.
        step: &'static str,
        /// How long was waited.
        after: Duration,
    },
    /// The peer closed the connection in the middle of a message.
    #[error("{step}: peer closed the connection after {got} of {expected} bytes")]
    Closed {
        /// The step.
        step: &'static str,
        /// Bytes received.
        got: usize,
        /// Bytes the message has.
        expected: usize,
    },
    /// Reading or writing the socket failed.
    #[error("{step}: {source}")]
    Io {
        /// The step.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The peer's message does not parse.
    #[error(transparent)]
    Malformed(#[from] MalformedMessage),
    /// perftest refuses peers older than 5.70 (`check_version_compatibility`); so do we, since
    /// the sizes of later messages depend on the peer's version.
    #[error("peer perftest version \"{0}\" is older than 5.70 and speaks another exchange")]
    IncompatibleVersion(String),
    /// perftest's `ctx_check_gid_compatibility`: one side's GID is IPv4-mapped, the other's not.
    #[error(
        "GID types differ: local GID {local} and remote GID {remote} are not both IPv4-mapped or both IPv6 (choose GID indexes of the same IP version)"
    )]
    GidTypeMismatch {
        /// Our GID.
        local: Ipv6Addr,
        /// The peer's GID.
        remote: Ipv6Addr,
    },
    /// perftest re-sends the same keys at every handshake; different ones mean the two sides
    /// no longer agree on where a message starts.
    #[error("peer sent different keys in a later handshake (first {first}, now {now})")]
    KeysChanged {
        /// The keys of the first handshake.
        first: String,
        /// The keys of this one.
        now: String,
    },
    /// ibv_srq_pingpong's peer filled a different number of address slots than we have QPs.
    #[error(
        "the peer has {theirs} QPs and we have {ours}: both sides need the same -q (ibv_srq_pingpong's default is 16)"
    )]
    QpCount {
        /// Our QPs.
        ours: usize,
        /// The slots the peer filled.
        theirs: usize,
    },
}
