//! The exchange of `lab_verbs` (tests/lab/lab_verbs.c), the lab's own RC verbs program for
//! what the standard tools cannot make: SEND with Invalidate of a memory window, ATOMIC WRITE
//! and FLUSH.
//!
//! One TCP connection (port 18600 by default). Each side sends one [`ConnInfo`] of 36 bytes,
//! packed, integers big-endian: QPN (4), PSN (4), R_Key (4), VA (8), GID (16, as
//! `ibv_query_gid` gives it). The client sends first; the server sends first too, except when
//! it binds a window (`send_inv`): then it reads the client's, connects its QP, binds, and
//! answers with the window's R_Key. Then single bytes: the server sends `R` when it is ready
//! for the client's operations; the client sends `D` when they have all completed; the
//! server checks its memory and answers `D`.

use std::net::{Ipv6Addr, TcpStream};
use std::time::Duration;

use super::error::{MalformedMessage, OobError};
use super::net::Channel;
use crate::wire::{Psn, Qpn};

/// lab_verbs' default TCP port.
pub const DEFAULT_PORT: u16 = 18600;

/// Bytes of [`ConnInfo`] on the wire.
pub const CONN_INFO_LEN: usize = 36;

/// The layout in error messages.
const FORMAT: &str = "lab_verbs' conn_info (QPN, PSN, R_Key: 4 bytes; VA: 8; GID: 16; big-endian)";

/// `struct conn_info` of lab_verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// The sender's QP.
    pub qpn: Qpn,
    /// Its first PSN.
    pub psn: Psn,
    /// The R_Key of its buffer (or of the window bound over it).
    pub rkey: u32,
    /// The buffer's virtual address.
    pub addr: u64,
    /// Its GID.
    pub gid: Ipv6Addr,
}

impl ConnInfo {
    /// The 36 bytes lab_verbs sends.
    pub fn to_bytes(&self) -> [u8; CONN_INFO_LEN] {
        let mut b = [0u8; CONN_INFO_LEN];
        b[0..4].copy_from_slice(&self.qpn.value().to_be_bytes());
        b[4..8].copy_from_slice(&self.psn.value().to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..20].copy_from_slice(&self.addr.to_be_bytes());
        b[20..36].copy_from_slice(&self.gid.octets());
        b
    }

    /// Parses the 36 bytes; the QPN and PSN must fit their 24 bits.
    pub fn parse(msg: &[u8; CONN_INFO_LEN]) -> Result<ConnInfo, MalformedMessage> {
        let word = |at: usize| u32::from_be_bytes([msg[at], msg[at + 1], msg[at + 2], msg[at + 3]]);
        let (qpn, psn) = (word(0), word(4));
        for (name, v) in [("QPN", qpn), ("PSN", psn)] {
            if v > 0xff_ffff {
                return Err(MalformedMessage::new(
                    FORMAT,
                    msg,
                    format!("{name} {v:#x} does not fit 24 bits"),
                ));
            }
        }
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&msg[12..20]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&msg[20..36]);
        Ok(ConnInfo {
            qpn: Qpn::new(qpn),
            psn: Psn::new(psn),
            rkey: word(8),
            addr: u64::from_be_bytes(addr),
            gid: Ipv6Addr::from(gid),
        })
    }
}

/// The connection to the peer lab_verbs, each step before the timeout.
#[derive(Debug)]
pub struct LabChannel {
    channel: Channel,
    timeout: Option<Duration>,
}

impl LabChannel {
    /// Wraps a connected socket; each later step has `timeout` from its start.
    pub fn new(stream: TcpStream, timeout: Option<Duration>) -> Result<LabChannel, OobError> {
        Ok(LabChannel {
            channel: Channel::new(stream, timeout)?,
            timeout,
        })
    }

    /// The channel, its deadline `timeout` from now.
    fn step(&mut self) -> Result<&mut Channel, OobError> {
        self.channel.set_timeout(self.timeout)?;
        Ok(&mut self.channel)
    }

    /// Sends our conn_info.
    pub fn send_info(&mut self, info: &ConnInfo) -> Result<(), OobError> {
        self.step()?.send(&info.to_bytes(), "sending our conn_info")
    }

    /// Reads the peer's conn_info.
    pub fn recv_info(&mut self) -> Result<ConnInfo, OobError> {
        let mut msg = [0u8; CONN_INFO_LEN];
        self.step()?
            .recv(&mut msg, "reading the peer's conn_info")?;
        Ok(ConnInfo::parse(&msg)?)
    }

    /// Sends one of the protocol's bytes (`R`, `D`).
    pub fn send_byte(&mut self, byte: u8, step: &'static str) -> Result<(), OobError> {
        self.step()?.send(&[byte], step)
    }

    /// Reads one byte, which must be `byte`.
    pub fn expect_byte(&mut self, byte: u8, step: &'static str) -> Result<(), OobError> {
        let mut got = [0u8; 1];
        self.step()?.recv(&mut got, step)?;
        if got[0] != byte {
            let format = if byte == b'R' {
                "'R' (ready)"
            } else {
                "'D' (done)"
            };
            return Err(
                MalformedMessage::new(format, &got, format!("{step}: another byte")).into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_info_round_trips_in_lab_verbs_layout() {
        let info = ConnInfo {
            qpn: Qpn::new(0x11),
            psn: Psn::new(0xabcdef),
            rkey: 0x0800_0108,
            addr: 0x55bc_1bd1_2000,
            gid: "::ffff:10.77.0.11".parse().unwrap(),
        };
        let b = info.to_bytes();
        assert_eq!(&b[..12], &[0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, 8, 0, 1, 8]);
        assert_eq!(&b[12..20], &[0, 0, 0x55, 0xbc, 0x1b, 0xd1, 0x20, 0]);
        assert_eq!(&b[30..], &[0xff, 0xff, 10, 77, 0, 11][..]);
        assert_eq!(ConnInfo::parse(&b).unwrap(), info);
    }

    #[test]
    fn a_qpn_beyond_24_bits_is_malformed() {
        let mut b = [0u8; CONN_INFO_LEN];
        b[0] = 1;
        let e = ConnInfo::parse(&b).unwrap_err().to_string();
        assert!(e.contains("QPN 0x1000000 does not fit 24 bits"), "{e}");
    }
}
