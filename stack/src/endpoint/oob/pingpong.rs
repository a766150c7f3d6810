//! The out-of-band exchange of rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and
//! `ibv_ud_pingpong` (libibverbs/examples, rdma-core 44.0 as in Debian 12; unchanged since).
//!
//! All three use the same code (`pp_client_exch_dest` / `pp_server_exch_dest` in each
//! `*_pingpong.c`, `gid_to_wire_gid` / `wire_gid_to_gid` in `pingpong.c`), over TCP port
//! 18515 by default:
//!
//! ```text
//! client                                    server
//!   connect ------------------------------->  accept
//!   52 bytes "LLLL:QQQQQQ:PPPPPP:GID\0" ---->  read 52; moves its QP to RTR/RTS
//!                                             (UD: creates the address handle)
//!   read 52  <----------------------------- 52 bytes, same layout
//!   "done\0" (5 bytes) -------------------->  read, must return exactly 5 bytes
//!   close; moves its QP to RTR/RTS; posts      close; waits for the first SEND
//!   the first SEND
//! ```
//!
//! The message is `sprintf("%04x:%06x:%06x:%s", lid, qpn, psn, gid)` into
//! `char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"]` and written
//! whole, so it is 51 characters and the terminating NUL. The GID is 32 lowercase hex digits
//! in wire (network) byte order: `gid_to_wire_gid` prints each 32-bit word of the raw GID
//! with `%08x` after `htobe32`, which on any host is the 16 bytes in order.
//!
//! Because the server connects its QP *before* it answers, a server here must make its QP
//! ready to receive (receives posted, RTR) between [`ServerExchange::accept`] and
//! [`ServerExchange::reply`]: the real client sends its first message as soon as it has read
//! the reply. On RoCE the tools need `-g IDX` (rxe: 1 for the IPv4-mapped GID, 0 for the
//! IPv6 link-local one); without it they send an all-zero GID and then fail to reach RTR.

use std::fmt;
use std::net::{Ipv6Addr, TcpStream};
use std::time::Duration;

use super::error::{MalformedMessage, OobError};
use super::net::Channel;
use super::text::{Fields, nul_terminated};
use crate::wire::{Psn, Qpn};

/// The tools' default TCP port (`-p`).
pub const DEFAULT_PORT: u16 = 18515;
/// Length of the address message on the wire, NUL included.
pub const MESSAGE_LEN: usize = 52;
/// What the client sends after reading the server's address: `"done"` with its NUL.
pub const DONE: [u8; 5] = *b"done\0";
/// Length of a GID in its wire text form.
pub const WIRE_GID_LEN: usize = 32;
/// The message layout, as error messages name it.
pub const FORMAT: &str = "LLLL:QQQQQQ:PPPPPP:GID";

/// Q_Key that `ibv_ud_pingpong` gives its QP and puts in every send.
pub const UD_QKEY: u32 = 0x1111_1111;

/// One side's address: what a QP needs to reach the other (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dest {
    /// Port LID; 0 on RoCE.
    pub lid: u16,
    /// The sender's QP number.
    pub qpn: Qpn,
    /// The sender's initial send PSN (the receiver's expected PSN); random 24 bits in the tools.
    pub psn: Psn,
    /// All zero when the tool ran without `-g`.
    pub gid: Ipv6Addr,
}

impl Dest {
    /// The 52 bytes the tools write.
    pub fn to_message(&self) -> [u8; MESSAGE_LEN] {
        let gid = gid_to_wire(&self.gid);
        let gid = core::str::from_utf8(&gid).unwrap_or_default();
        nul_terminated(&format!(
            "{:04x}:{:06x}:{:06x}:{gid}",
            self.lid,
            self.qpn.value(),
            self.psn.value()
        ))
    }

    /// Parses exactly the layout the tools write: 52 bytes, fixed-width hex fields, `:`
    /// separators, NUL last.
    pub fn parse(msg: &[u8]) -> Result<Dest, MalformedMessage> {
        let mut f = Fields::new(msg, MESSAGE_LEN, FORMAT)?;
        let lid = f.hex(4, "LID")? as u16;
        f.expect(b':')?;
        let qpn = Qpn::new(f.hex(6, "QPN")? as u32);
        f.expect(b':')?;
        let psn = Psn::new(f.hex(6, "PSN")? as u32);
        f.expect(b':')?;
        let gid = read_wire_gid(&mut f)?;
        f.expect(0)?;
        Ok(Dest { lid, qpn, psn, gid })
    }
}

impl fmt::Display for Dest {
    /// As the tools print an address: `LID 0x0000, QPN 0x000011, PSN 0x3a5c1f, GID ::ffff:…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
            self.lid,
            self.qpn.value(),
            self.psn.value(),
            self.gid
        )
    }
}

/// `gid_to_wire_gid`: each 32-bit word of the GID printed `%08x` after `htobe32`. Printing a
/// big-endian word most-significant digit first is printing its bytes in memory order, so
/// the result is the 16 bytes in order as 32 lowercase hex digits, on any host.
pub fn gid_to_wire(gid: &Ipv6Addr) -> [u8; WIRE_GID_LEN] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; WIRE_GID_LEN];
    for (pair, byte) in out.chunks_exact_mut(2).zip(gid.octets()) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    out
}

/// `wire_gid_to_gid`, strictly: 32 hex digits, nothing else.
pub fn wire_to_gid(wire: &[u8]) -> Result<Ipv6Addr, MalformedMessage> {
    read_wire_gid(&mut Fields::new(
        wire,
        WIRE_GID_LEN,
        "32 hex digits of a GID",
    )?)
}

/// Four `%08x` words, each the big-endian value of 4 GID bytes (`sscanf("%x")` + `be32toh`).
fn read_wire_gid(f: &mut Fields<'_>) -> Result<Ipv6Addr, MalformedMessage> {
    let mut gid = [0u8; 16];
    for word in gid.chunks_exact_mut(4) {
        word.copy_from_slice(&(f.hex(8, "GID")? as u32).to_be_bytes());
    }
    Ok(Ipv6Addr::from(gid))
}

/// The client's side: sends `local`, reads the server's address, sends `"done\0"`, closes.
/// Move the QP to RTR/RTS with the result afterwards, as the tools do.
pub fn client_exchange(
    stream: TcpStream,
    local: &Dest,
    timeout: Option<Duration>,
) -> Result<Dest, OobError> {
    let peers = client_exchange_many(stream, std::slice::from_ref(local), 1, timeout)?;
    Ok(peers[0])
}

/// `ibv_srq_pingpong`'s `MAX_QP`: it always sends this many address messages, those of
/// QPs it does not have all zeros (`memset(my_dest, 0, ...)`), and reads as many.
pub const SRQ_MAX_QP: usize = 256;

/// The message of a slot no QP fills: what `sprintf` makes of a zeroed `pingpong_dest`.
fn empty_slot() -> Dest {
    Dest {
        lid: 0,
        qpn: Qpn::new(0),
        psn: Psn::new(0),
        gid: Ipv6Addr::UNSPECIFIED,
    }
}

/// Our messages for `slots` slots: `local` first, then empty ones.
fn messages(local: &[Dest], slots: usize) -> Vec<u8> {
    let empty = empty_slot();
    (0..slots)
        .flat_map(|i| local.get(i).unwrap_or(&empty).to_message())
        .collect()
}

/// Reads `slots` address messages and keeps the first `wanted`. With several slots, exactly
/// the first `wanted` must name a QP (QPN 0 marks an empty slot): the peer runs as many
/// QPs as we do.
fn read_dests(
    channel: &mut Channel,
    slots: usize,
    wanted: usize,
    step: &'static str,
) -> Result<Vec<Dest>, OobError> {
    let mut peers = Vec::with_capacity(wanted);
    let mut theirs = 0;
    for i in 0..slots {
        let mut msg = [0u8; MESSAGE_LEN];
        channel.recv(&mut msg, step)?;
        let dest = Dest::parse(&msg)?;
        if dest.qpn.value() != 0 {
            theirs += 1;
        }
        if i < wanted {
            peers.push(dest);
        }
    }
    if slots > 1 && (theirs != wanted || peers.iter().any(|d| d.qpn.value() == 0)) {
        return Err(OobError::QpCount {
            ours: wanted,
            theirs,
        });
    }
    Ok(peers)
}

/// [`client_exchange`] for `local.len()` QPs in `slots` messages each way
/// (`ibv_srq_pingpong`: [`SRQ_MAX_QP`]; the other tools: 1).
pub fn client_exchange_many(
    stream: TcpStream,
    local: &[Dest],
    slots: usize,
    timeout: Option<Duration>,
) -> Result<Vec<Dest>, OobError> {
    let mut channel = Channel::new(stream, timeout)?;
    channel.send(&messages(local, slots), "sending our addresses")?;
    let remote = read_dests(
        &mut channel,
        slots,
        local.len(),
        "reading the server's address",
    )?;
    channel.send(&DONE, "sending \"done\"")?;
    Ok(remote)
}

/// The server's side, in two steps so that the QPs can be connected in between.
#[derive(Debug)]
pub struct ServerExchange {
    channel: Channel,
    peers: Vec<Dest>,
    slots: usize,
}

impl ServerExchange {
    /// Reads the client's address from a freshly accepted connection.
    pub fn accept(stream: TcpStream, timeout: Option<Duration>) -> Result<Self, OobError> {
        ServerExchange::accept_many(stream, 1, 1, timeout)
    }

    /// Reads `slots` address messages, keeping the first `qps` (see
    /// [`client_exchange_many`]).
    pub fn accept_many(
        stream: TcpStream,
        qps: usize,
        slots: usize,
        timeout: Option<Duration>,
    ) -> Result<Self, OobError> {
        let mut channel = Channel::new(stream, timeout)?;
        let peers = read_dests(&mut channel, slots, qps, "reading the client's address")?;
        Ok(ServerExchange {
            channel,
            peers,
            slots,
        })
    }

    /// The client's address, to connect the QP with before replying.
    pub fn peer(&self) -> &Dest {
        &self.peers[0]
    }

    /// Every QP's client address, in order.
    pub fn peers(&self) -> &[Dest] {
        &self.peers
    }

    /// Sends `local` and waits for the client's `"done\0"`; returns the client's address.
    pub fn reply(self, local: &Dest) -> Result<Dest, OobError> {
        let peers = self.reply_many(std::slice::from_ref(local))?;
        Ok(peers[0])
    }

    /// Sends every QP's address (in as many slots as were read) and waits for `"done\0"`.
    pub fn reply_many(mut self, local: &[Dest]) -> Result<Vec<Dest>, OobError> {
        self.channel
            .send(&messages(local, self.slots), "sending our address")?;
        let mut done = [0u8; DONE.len()];
        self.channel
            .recv(&mut done, "waiting for the client's \"done\"")?;
        if done != DONE {
            return Err(MalformedMessage::new(
                "done\\0",
                &done,
                "the client's last message must be \"done\" and a NUL".into(),
            )
            .into());
        }
        Ok(self.peers)
    }
}

/// Which of the three tools; they differ only in defaults and in what the QP does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// ibv_rc_pingpong.
    RcPingpong,
    /// ibv_uc_pingpong.
    UcPingpong,
    /// ibv_ud_pingpong.
    UdPingpong,
}

/// A tool's defaults, from its `main()` (not its usage text, which is wrong for UD's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// `-p`: the TCP port of the exchange.
    pub port: u16,
    /// `-s`: payload bytes per message.
    pub size: u32,
    /// `-n`: round trips.
    pub iters: u32,
    /// `-r`: receives kept posted.
    pub rx_depth: u32,
    /// `-m`: path MTU in bytes; `None` for UD, which only checks `size` against the port MTU.
    pub mtu: Option<u32>,
}

impl Tool {
    /// The tool's defaults.
    pub const fn defaults(self) -> Defaults {
        let (size, mtu) = match self {
            Tool::RcPingpong | Tool::UcPingpong => (4096, Some(1024)),
            // ud_pingpong.c: `size = 1024` although its usage says "default 2048".
            Tool::UdPingpong => (1024, None),
        };
        Defaults {
            port: DEFAULT_PORT,
            size,
            iters: 1000,
            rx_depth: 500,
            mtu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::script::{self, Step::*};
    use super::super::{accept, connect};
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, TcpListener};
    use std::thread;

    const T: Option<Duration> = Some(Duration::from_secs(10));

    /// What `ibv_rc_pingpong -g 1` on rxe over 192.168.122.10 writes for QPN 0x11, PSN 0x3a5c1f,
    /// from the format string "%04x:%06x:%06x:%s" and gid_to_wire_gid.
    const FIXTURE: &[u8; 52] = b"0000:000011:3a5c1f:00000000000000000000ffffc0a87a0a\0";

    fn fixture_dest() -> Dest {
        Dest {
            lid: 0,
            qpn: Qpn::new(0x11),
            psn: Psn::new(0x3a_5c1f),
            gid: Ipv4Addr::new(192, 168, 122, 10).to_ipv6_mapped(),
        }
    }

    fn link_local() -> Dest {
        Dest {
            lid: 0,
            qpn: Qpn::new(0xab_cdef),
            psn: Psn::new(0xff_ffff),
            gid: "fe80::5054:ff:fe12:3456".parse().unwrap(),
        }
    }

    #[test]
    fn emits_the_tools_bytes() {
        assert_eq!(&fixture_dest().to_message(), FIXTURE);
        assert_eq!(
            &link_local().to_message(),
            b"0000:abcdef:ffffff:fe80000000000000505400fffe123456\0"
        );
    }

    #[test]
    fn parses_the_tools_bytes() {
        assert_eq!(Dest::parse(FIXTURE).unwrap(), fixture_dest());
        let upper = FIXTURE.to_ascii_uppercase();
        assert_eq!(Dest::parse(&upper).unwrap(), fixture_dest());
    }

    #[test]
    fn gid_wire_form_is_the_bytes_in_order() {
        let gid: Ipv6Addr = "fe80::1:2:3:4".parse().unwrap();
        assert_eq!(&gid_to_wire(&gid), b"fe800000000000000001000200030004");
        assert_eq!(wire_to_gid(&gid_to_wire(&gid)).unwrap(), gid);
        assert!(wire_to_gid(b"fe80").is_err());
    }

    #[test]
    fn display_matches_the_tools_address_line() {
        assert_eq!(
            fixture_dest().to_string(),
            "LID 0x0000, QPN 0x000011, PSN 0x3a5c1f, GID ::ffff:192.168.122.10"
        );
    }

    fn reason(msg: &[u8]) -> String {
        Dest::parse(msg).unwrap_err().reason
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        assert_eq!(reason(&FIXTURE[..51]), "51 bytes, expected 52");
        let mut long = FIXTURE.to_vec();
        long.push(0);
        assert_eq!(reason(&long), "53 bytes, expected 52");
        let mut bad = *FIXTURE;
        bad[7] = b'g';
        assert_eq!(reason(&bad), "QPN: byte 7 is 'g', not a hex digit");
        let mut bad = *FIXTURE;
        bad[4] = b'-';
        assert_eq!(reason(&bad), "byte 4 is '-', expected ':'");
        let mut bad = *FIXTURE;
        bad[51] = b'0';
        assert_eq!(reason(&bad), "byte 51 is '0', expected '\\0'");
        // A LID wider than %04x shifts every later field.
        let wide = b"10000:000011:3a5c1f:0000000000000000000ffffc0a87a0a\0";
        assert_eq!(reason(wide), "byte 4 is '0', expected ':'");
        let err = Dest::parse(b"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "peer message is not LLLL:QQQQQQ:PPPPPP:GID (got \"\"): 0 bytes, expected 52"
        );
    }

    proptest! {
        #[test]
        fn round_trip(lid: u16, qpn in 0u32..1 << 24, psn in 0u32..1 << 24, gid: [u8; 16]) {
            let dest = Dest { lid, qpn: Qpn::new(qpn), psn: Psn::new(psn), gid: gid.into() };
            prop_assert_eq!(Dest::parse(&dest.to_message()).unwrap(), dest);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Dest::parse(&bytes);
        }
    }

    #[test]
    fn loopback_client_and_server() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let stream = accept(&listener, T).unwrap();
            let exchange = ServerExchange::accept(stream, T).unwrap();
            assert_eq!(*exchange.peer(), fixture_dest());
            exchange.reply(&link_local()).unwrap()
        });
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let from_server = client_exchange(stream, &fixture_dest(), T).unwrap();
        assert_eq!(from_server, link_local());
        assert_eq!(server.join().unwrap(), fixture_dest());
    }

    /// The server's reply for these tests, written by hand from "%04x:%06x:%06x:%s".
    const REPLY: &[u8; 52] = b"0000:abcdef:ffffff:fe80000000000000505400fffe123456\0";

    /// Our client against a peer that plays the C server (`pp_server_exch_dest`) byte for byte.
    #[test]
    fn client_speaks_the_tools_sequence() {
        let (addr, c_server) = script::server(vec![vec![
            Expect(FIXTURE.to_vec()),
            Send(REPLY.to_vec()),
            ExpectEnd(DONE.to_vec()),
        ]]);
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let remote = client_exchange(stream, &fixture_dest(), T).unwrap();
        assert_eq!(remote, link_local());
        c_server.join().unwrap();
    }

    /// Our server against a peer that plays the C client (`pp_client_exch_dest`).
    #[test]
    fn server_speaks_the_tools_sequence() {
        let (listener, c_client) = script::client(vec![vec![
            Send(FIXTURE.to_vec()),
            Expect(REPLY.to_vec()),
            Send(b"done\0".to_vec()),
            ExpectEnd(Vec::new()),
        ]]);
        let exchange = ServerExchange::accept(accept(&listener, T).unwrap(), T).unwrap();
        assert_eq!(*exchange.peer(), fixture_dest());
        assert_eq!(exchange.reply(&link_local()).unwrap(), fixture_dest());
        c_client.join().unwrap();
    }

    /// ibv_srq_pingpong's form: 256 messages each way, the missing QPs' slots all zeros.
    const EMPTY: &[u8; 52] = b"0000:000000:000000:00000000000000000000000000000000\0";

    fn srq_slots(first: &[u8; 52], qps: usize) -> Vec<u8> {
        let mut all = Vec::new();
        for i in 0..SRQ_MAX_QP {
            all.extend_from_slice(if i < qps { first } else { EMPTY });
        }
        all
    }

    /// Our server against a peer playing ibv_srq_pingpong's client with two QPs, then one
    /// with a single QP where we run two: the counts must agree.
    #[test]
    fn srq_server_speaks_256_slots_and_checks_the_qp_count() {
        let (listener, c_client) = script::client(vec![
            vec![
                Send(srq_slots(FIXTURE, 2)),
                Expect(srq_slots(REPLY, 2)),
                Send(b"done\0".to_vec()),
                ExpectEnd(Vec::new()),
            ],
            vec![Send(srq_slots(FIXTURE, 1))],
        ]);
        let stream = accept(&listener, T).unwrap();
        let exchange = ServerExchange::accept_many(stream, 2, SRQ_MAX_QP, T).unwrap();
        assert_eq!(exchange.peers(), &[fixture_dest(), fixture_dest()]);
        let ours = [link_local(), link_local()];
        assert_eq!(exchange.reply_many(&ours).unwrap().len(), 2);
        let stream = accept(&listener, T).unwrap();
        let err = ServerExchange::accept_many(stream, 2, SRQ_MAX_QP, T).unwrap_err();
        assert!(
            matches!(err, OobError::QpCount { ours: 2, theirs: 1 }),
            "{err}"
        );
        c_client.join().unwrap();
    }

    #[test]
    fn srq_client_speaks_256_slots() {
        let (addr, c_server) = script::server(vec![vec![
            Expect(srq_slots(FIXTURE, 3)),
            Send(srq_slots(REPLY, 3)),
            ExpectEnd(DONE.to_vec()),
        ]]);
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let ours = [fixture_dest(); 3];
        let remote = client_exchange_many(stream, &ours, SRQ_MAX_QP, T).unwrap();
        assert_eq!(remote, vec![link_local(); 3]);
        c_server.join().unwrap();
    }

    #[test]
    fn server_rejects_a_malformed_address_and_a_wrong_done() {
        let (listener, c_client) = script::client(vec![
            vec![Send(vec![b'x'; 52])],
            vec![
                Send(FIXTURE.to_vec()),
                Expect(REPLY.to_vec()),
                Send(b"nope\0".to_vec()),
            ],
        ]);
        let err = ServerExchange::accept(accept(&listener, T).unwrap(), T).unwrap_err();
        assert!(matches!(err, OobError::Malformed(_)), "{err}");
        let exchange = ServerExchange::accept(accept(&listener, T).unwrap(), T).unwrap();
        let err = exchange.reply(&link_local()).unwrap_err();
        assert!(err.to_string().contains("\"nope\\0\""), "{err}");
        c_client.join().unwrap();
    }

    #[test]
    fn client_reports_a_server_that_hangs_up() {
        let (addr, c_server) = script::server(vec![vec![
            Expect(FIXTURE.to_vec()),
            Send(REPLY[..20].to_vec()),
        ]]);
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let err = client_exchange(stream, &fixture_dest(), T).unwrap_err();
        c_server.join().unwrap();
        let closed_early = matches!(
            err,
            OobError::Closed {
                got: 20,
                expected: 52,
                ..
            }
        );
        assert!(closed_early, "{err}");
    }

    #[test]
    fn defaults_follow_the_sources() {
        assert_eq!(Tool::RcPingpong.defaults().size, 4096);
        assert_eq!(Tool::UcPingpong.defaults().mtu, Some(1024));
        assert_eq!(Tool::UdPingpong.defaults().size, 1024);
        assert_eq!(Tool::UdPingpong.defaults().mtu, None);
    }
}
