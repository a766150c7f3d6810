//! perftest's out-of-band exchange (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_atomic_bw` without `-R`), as in perftest 4.5-0.17, the version Debian 12 ships
//! (package `perftest` 4.5+0.17-1; the binaries report version "6.06"). Later releases keep
//! these messages, add variants for mlx5 DC, and (from 6.28, only when both sides announce
//! 6.28 or later) a binary device-attribute negotiation; announcing 6.06 avoids the latter.
//!
//! Learned from `src/perftest_communication.c` (`ethernet_client_connect`,
//! `ethernet_server_connect`, `exchange_versions`, `check_sys_data`, `check_mtu`,
//! `ctx_hand_shake`, `ethernet_write_keys`, `ethernet_read_keys`, `ctx_xchg_data_ethernet`,
//! `xchg_bw_reports`, `ctx_check_gid_compatibility`, `ctx_close_connection`) and the `main()`
//! of `write_bw.c`, `read_bw.c`, `atomic_bw.c`, `send_bw.c`.
//!
//! Every exchange is symmetric: the client writes its message and then reads the server's;
//! the server reads first and then writes. Each message is one `write()` of a fixed size that
//! the peer reads with one `read()` of that size. The TCP connection is IPv4 only in
//! perftest (`AF_INET`), port 18515 by default. For one RC QP, half duplex:
//!
//! | step | bytes each way | content |
//! |------|----------------|---------|
//! | version | 16 | `"6.06"` and NULs (`char version[16]`); refused if the peer's `atof` < 5.70 |
//! | sys data | 4, then 4 | cycle buffer (page size, 4096), then cache line size (64), as big-endian `int`; each side keeps the larger |
//! | MTU | 2 | `"%d"` of the `ibv_mtu` code (1 = 256 … 5 = 4096) and a NUL; each side keeps the smaller |
//! | keys #1 | 108 | [`Keys`] (59 without a GID, never on RoCE); then the GID-type check, then QPs to RTR/RTS |
//! | syncs | 108 each | the same keys again: 2 for write/read/atomic, 3 for send (the last after the server posted its receives) |
//! | test | | RoCE traffic; the write/read/atomic server is passive and already waits in the next sync |
//! | sync | 108 | write/read/atomic only: the client arrives when its test is done |
//! | results | 8 × 5 | write/read/atomic only: size, iterations, peak BW, average BW, message rate, big-endian `u64`/`f64` each; the server prints the client's |
//! | close sync | 108 | the same keys again |
//! | done | 5 | `"done\0"` from both sides, not read by perftest; then close |
//!
//! The server's result message carries whatever its never-filled report struct held
//! (perftest sends uninitialised memory there): only the client's results mean anything.
//! `ib_write_bw` also sleeps a second after connecting; nothing on the wire shows it.

use std::fmt;
use std::net::Ipv6Addr;

use super::error::{MalformedMessage, OobError};
use super::text::{Fields, nul_terminated};
use crate::wire::{Psn, Qpn};

mod session;

pub use session::{
    Agreed, Carrier, Connected, Negotiated, Negotiation, Role, Session, exchange_reports_over,
    negotiate_over,
};

/// perftest's default TCP port (`-p`).
pub const DEFAULT_PORT: u16 = 18515;
/// The version string Debian 12's perftest sends.
pub const VERSION: &str = "6.06";
/// `MAX_VERSION`: the version is sent as a 16-byte, NUL-padded `char` array.
pub const VERSION_LEN: usize = 16;
/// `KEY_MSG_SIZE`: the key message without a GID, NUL included.
pub const KEY_MSG_LEN: usize = 59;
/// `KEY_MSG_SIZE_GID`: the key message with a GID, NUL included.
pub const KEY_MSG_GID_LEN: usize = 108;
/// What each side writes when closing: `"done"` with its NUL.
pub const DONE: [u8; 5] = *b"done\0";
/// Q_Key perftest uses for UD (`DEF_QKEY`).
pub const QKEY: u32 = 0x1111_1111;

const KEY_FORMAT: &str = "LLLL:OOOO:QQQQQQ:PPPPPP:RRRRRRRR:VVVVVVVVVVVVVVVV:SSSSSSSS";
const KEY_FORMAT_GID: &str = "LLLL:OOOO:QQQQQQ:PPPPPP:RRRRRRRR:VVVVVVVVVVVVVVVV:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:GG:SSSSSSSS:";

/// One QP's parameters as perftest exchanges them (`struct pingpong_dest`), printed with
/// `KEY_PRINT_FMT_GID` = `"%04x:%04x:%06x:%06x:%08x:%016llx:"` + sixteen `"%02x:"` +
/// `"%08x:"`, or without the GID bytes and trailing colon (`KEY_PRINT_FMT`).
///
/// The form is chosen by each side from its *own* GID index (`ctx_hand_shake` copies it to
/// the remote's): on Ethernet perftest always has one, so RoCE peers always send 108 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Keys {
    /// Port LID; 0 on RoCE.
    pub lid: u16,
    /// Outstanding RDMA reads/atomics this side accepts as responder: 1 for write and send
    /// tests, the device's `max_qp_rd_atom` (rxe: 128) for read and atomic tests. The peer
    /// uses it as its initiator depth (`max_rd_atomic = dest->out_reads`).
    pub out_reads: u16,
    /// The side's QP number.
    pub qpn: Qpn,
    /// Initial PSN, random 24 bits (`lrand48() & 0xffffff`).
    pub psn: Psn,
    /// The R_Key of the region the peer may use.
    pub rkey: u32,
    /// Start of the region the peer may write, read or update.
    pub vaddr: u64,
    /// `None` for the GID-less form (InfiniBand without `-x`).
    pub gid: Option<Ipv6Addr>,
    /// SRQ number for XRC/DC; 0 otherwise.
    pub srqn: u32,
}

/// Which key message a side sends and expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyForm {
    /// `KEY_MSG_LEN` bytes: LID, out_reads, QPN, PSN, R_Key, address, SRQN.
    WithoutGid,
    /// `KEY_MSG_GID_LEN` bytes: the same and the GID (RoCE).
    WithGid,
}

impl KeyForm {
    /// The message's length in bytes.
    pub const fn message_len(self) -> usize {
        match self {
            KeyForm::WithoutGid => KEY_MSG_LEN,
            KeyForm::WithGid => KEY_MSG_GID_LEN,
        }
    }
}

impl Keys {
    /// The form these keys are sent in: with a GID if they have one.
    pub const fn form(&self) -> KeyForm {
        if self.gid.is_some() {
            KeyForm::WithGid
        } else {
            KeyForm::WithoutGid
        }
    }

    /// The bytes `ethernet_write_keys` writes: 59 or 108, NUL last.
    pub fn to_message(&self) -> Vec<u8> {
        let mut text = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn.value(),
            self.psn.value(),
            self.rkey,
            self.vaddr
        );
        match self.gid {
            Some(gid) => {
                for byte in gid.octets() {
                    text.push_str(&format!("{byte:02x}:"));
                }
                text.push_str(&format!("{:08x}:", self.srqn));
                nul_terminated::<KEY_MSG_GID_LEN>(&text).to_vec()
            }
            None => {
                text.push_str(&format!("{:08x}", self.srqn));
                nul_terminated::<KEY_MSG_LEN>(&text).to_vec()
            }
        }
    }

    /// Parses a key message of the given form, requiring every field at its offset.
    pub fn parse(msg: &[u8], form: KeyForm) -> Result<Keys, MalformedMessage> {
        let format = match form {
            KeyForm::WithoutGid => KEY_FORMAT,
            KeyForm::WithGid => KEY_FORMAT_GID,
        };
        let mut f = Fields::new(msg, form.message_len(), format)?;
        let mut field = |width, name| -> Result<u64, MalformedMessage> {
            let value = f.hex(width, name)?;
            f.expect(b':')?;
            Ok(value)
        };
        let lid = field(4, "LID")? as u16;
        let out_reads = field(4, "out_reads")? as u16;
        let qpn = Qpn::new(field(6, "QPN")? as u32);
        let psn = Psn::new(field(6, "PSN")? as u32);
        let rkey = field(8, "R_Key")? as u32;
        let vaddr = field(16, "VA")?;
        let gid = match form {
            KeyForm::WithGid => {
                let mut gid = [0u8; 16];
                for byte in &mut gid {
                    *byte = field(2, "GID")? as u8;
                }
                Some(Ipv6Addr::from(gid))
            }
            KeyForm::WithoutGid => None,
        };
        let srqn = f.hex(8, "SRQN")? as u32;
        if gid.is_some() {
            f.expect(b':')?;
        }
        f.expect(0)?;
        Ok(Keys {
            lid,
            out_reads,
            qpn,
            psn,
            rkey,
            vaddr,
            gid,
            srqn,
        })
    }

    /// What `ctx_print_pingpong_data` prints for these keys (the address line, and the GID
    /// line when there is a GID), for `side` "local" or "remote". Its `%#0Nx` conversions
    /// print a zero without the `0x`, and the GID bytes are in decimal.
    pub fn print_lines(&self, side: &str, test: BwTest) -> String {
        let mut line = format!(
            " {side} address: LID {} QPN {} PSN {}",
            c_alt_hex(self.lid.into(), 4),
            c_alt_hex(self.qpn.value().into(), 6),
            c_alt_hex(self.psn.value().into(), 6)
        );
        if test == BwTest::Read {
            line.push_str(&format!(" OUT {}", c_alt_hex(self.out_reads.into(), 4)));
        }
        if matches!(test, BwTest::Read | BwTest::Write) {
            line.push_str(&format!(
                " RKey {} VAddr {}",
                c_alt_hex(self.rkey.into(), 8),
                c_alt_hex(self.vaddr, 16)
            ));
        }
        line.push('\n');
        if let Some(gid) = self.gid {
            let bytes: Vec<String> = gid.octets().iter().map(|b| format!("{b:02}")).collect();
            line.push_str(&format!(" GID: {}\n", bytes.join(":")));
        }
        line
    }
}

/// `sizeof(struct pingpong_dest)` on x86-64: what `-R`'s handshakes SEND (`rdma_write_keys`).
pub const KEYS_BINARY_LEN: usize = 56;

impl Keys {
    /// The binary form perftest SENDs over its rdma_cm connection (`-R`, `rdma_write_keys`
    /// with `HAVE_ENDIAN`): `struct pingpong_dest` with big-endian fields, `lid`,
    /// `out_reads`, `qpn`, `psn`, `rkey` as 32 bits at 0, 4, 8, 12, 16, `vaddr` at 24 (after
    /// 4 bytes of alignment), the raw GID at 32, `srqn` at 48 and `gid_index` at 52.
    pub fn to_binary(&self, gid_index: u32) -> [u8; KEYS_BINARY_LEN] {
        let mut m = [0u8; KEYS_BINARY_LEN];
        m[0..4].copy_from_slice(&u32::from(self.lid).to_be_bytes());
        m[4..8].copy_from_slice(&u32::from(self.out_reads).to_be_bytes());
        m[8..12].copy_from_slice(&self.qpn.value().to_be_bytes());
        m[12..16].copy_from_slice(&self.psn.value().to_be_bytes());
        m[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid.unwrap_or(Ipv6Addr::UNSPECIFIED).octets());
        m[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        m[52..56].copy_from_slice(&gid_index.to_be_bytes());
        m
    }

    /// What `rdma_read_keys` takes from the binary form: every field but `srqn` (perftest
    /// leaves it out), the QPN and PSN cut to their 24 bits; the padding and `gid_index`
    /// are ignored, as perftest ignores them.
    pub fn parse_binary(msg: &[u8]) -> Result<Keys, MalformedMessage> {
        let Some(m) = msg.get(..KEYS_BINARY_LEN) else {
            return Err(MalformedMessage::new(
                "struct pingpong_dest",
                msg,
                format!("{} bytes, not {KEYS_BINARY_LEN}", msg.len()),
            ));
        };
        let word = |at: usize| u32::from_be_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
        let mut va = [0u8; 8];
        va.copy_from_slice(&m[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&m[32..48]);
        Ok(Keys {
            lid: word(0) as u16,
            out_reads: word(4) as u16,
            qpn: Qpn::new(word(8) & 0xff_ffff),
            psn: Psn::new(word(12) & 0xff_ffff),
            rkey: word(16),
            vaddr: u64::from_be_bytes(va),
            gid: Some(Ipv6Addr::from(gid)),
            srqn: 0,
        })
    }
}

impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = self.to_message();
        f.write_str(&String::from_utf8_lossy(
            msg.strip_suffix(&[0]).unwrap_or(&msg),
        ))
    }
}

/// C's `%#0{width}x`: zero-padded to `width` including the `0x`, which a zero value lacks.
fn c_alt_hex(value: u64, width: usize) -> String {
    if value == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{value:#0width$x}")
    }
}

/// `ipv6_addr_v4mapped` in perftest_communication.c: `::ffff:a.b.c.d`, or the IPv4-encoded
/// multicast form `ff0e::ffff:a.b.c.d`.
pub fn is_v4_mapped(gid: &Ipv6Addr) -> bool {
    let o = gid.octets();
    let mapped_tail = o[4..12] == [0, 0, 0, 0, 0, 0, 0xff, 0xff];
    mapped_tail && (o[..4] == [0; 4] || o[..4] == [0xff, 0x0e, 0, 0])
}

/// The version message: `version` NUL-padded to 16 bytes, as `strncpy` leaves it.
pub fn version_message(version: &str) -> [u8; VERSION_LEN] {
    nul_terminated(version)
}

/// The peer's version string, and whether perftest would accept it.
///
/// Only the text before the first NUL counts (perftest reads it with `atof`). We require it
/// to be `digits.digits`, as every perftest release writes it, and at least 5.70, the oldest
/// peer perftest 6.06 talks to; the sizes of later messages depend on it.
pub fn parse_version(msg: &[u8]) -> Result<String, OobError> {
    let bad = |reason: &str| {
        MalformedMessage::new("a NUL-terminated version \"N.NN\"", msg, reason.into())
    };
    if msg.len() != VERSION_LEN {
        return Err(bad(&format!("{} bytes, expected {VERSION_LEN}", msg.len())).into());
    }
    let end = msg
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| bad("no NUL in 16 bytes"))?;
    let text = core::str::from_utf8(&msg[..end]).map_err(|_| bad("not ASCII"))?;
    let well_formed = text.split_once('.').is_some_and(|(major, minor)| {
        [major, minor]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    });
    let value: f64 = match text.parse() {
        Ok(value) if well_formed => value,
        _ => return Err(bad("the version is not digits.digits").into()),
    };
    if value < 5.70 {
        return Err(OobError::IncompatibleVersion(text.to_owned()));
    }
    Ok(text.to_owned())
}

/// `check_sys_data`: the buffer geometry both sides must share, each side keeping the larger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SysData {
    /// Bytes of buffer each QP cycles through (the page size, `sysconf(_SC_PAGESIZE)`): small
    /// messages go to successive cache-line-aligned addresses inside it.
    pub cycle_buffer: u32,
    /// Alignment step between those addresses (`coherency_line_size`, usually 64).
    pub cache_line_size: u32,
}

impl Default for SysData {
    fn default() -> Self {
        SysData {
            cycle_buffer: 4096,
            cache_line_size: 64,
        }
    }
}

/// Largest value accepted from a peer for either field: perftest allocates buffers from it,
/// and no page or cache line is larger.
const SYS_DATA_LIMIT: u32 = 1 << 24;

impl SysData {
    /// Each side's value in the 4-byte big-endian form of `hton_int`.
    pub fn to_messages(&self) -> [[u8; 4]; 2] {
        [
            self.cycle_buffer.to_be_bytes(),
            self.cache_line_size.to_be_bytes(),
        ]
    }

    /// The peer's values, which must be powers of two no larger than 16 MiB.
    pub fn from_messages(
        cycle_buffer: [u8; 4],
        cache_line_size: [u8; 4],
    ) -> Result<Self, MalformedMessage> {
        let check = |bytes: [u8; 4], what: &str| {
            let value = u32::from_be_bytes(bytes);
            if value.is_power_of_two() && value <= SYS_DATA_LIMIT {
                Ok(value)
            } else {
                Err(MalformedMessage::new(
                    "a big-endian power of two",
                    &bytes,
                    format!("{what} {value} is not a power of two up to {SYS_DATA_LIMIT}"),
                ))
            }
        };
        Ok(SysData {
            cycle_buffer: check(cycle_buffer, "cycle buffer")?,
            cache_line_size: check(cache_line_size, "cache line size")?,
        })
    }

    /// What both sides end up using.
    pub fn max(self, other: SysData) -> SysData {
        SysData {
            cycle_buffer: self.cycle_buffer.max(other.cycle_buffer),
            cache_line_size: self.cache_line_size.max(other.cache_line_size),
        }
    }
}

/// Path MTU as libibverbs' `enum ibv_mtu`, which is what perftest sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        128 << self as u32
    }

    /// The MTU of exactly `bytes`, if it is one of the five.
    pub const fn from_bytes(bytes: u32) -> Option<IbMtu> {
        Some(match bytes {
            256 => IbMtu::Mtu256,
            512 => IbMtu::Mtu512,
            1024 => IbMtu::Mtu1024,
            2048 => IbMtu::Mtu2048,
            4096 => IbMtu::Mtu4096,
            _ => return None,
        })
    }

    /// `sprintf(cur, "%d", curr_mtu)`, of which perftest sends the first 2 bytes.
    pub const fn to_message(self) -> [u8; 2] {
        [b'0' + self as u8, 0]
    }

    /// Reads the peer's MTU message: a digit 1-5 and a NUL.
    pub fn parse(msg: &[u8]) -> Result<IbMtu, MalformedMessage> {
        let bad = |reason: &str| {
            MalformedMessage::new("an ibv_mtu digit 1-5 and a NUL", msg, reason.into())
        };
        match msg {
            [digit @ b'1'..=b'5', 0] => Ok(match digit - b'0' {
                1 => IbMtu::Mtu256,
                2 => IbMtu::Mtu512,
                3 => IbMtu::Mtu1024,
                4 => IbMtu::Mtu2048,
                _ => IbMtu::Mtu4096,
            }),
            [_, _] => Err(bad("not a digit 1-5 followed by a NUL")),
            _ => Err(bad(&format!("{} bytes, expected 2", msg.len()))),
        }
    }
}

/// One side's results (`struct bw_report_data`), as `xchg_bw_reports` sends them: five
/// separate 8-byte exchanges (for peers >= 5.33; `report_per_port` adds four more, off by
/// default). Doubles are byte-swapped like integers, so every field is big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// MB/s with MB = 2^20 bytes, as perftest's default `MBS` format.
    pub bw_peak: f64,
    /// Average bandwidth, in the same unit.
    pub bw_avg: f64,
    /// Millions of messages per second.
    pub msg_rate: f64,
}

impl BwReport {
    /// The five big-endian 8-byte messages, in order.
    pub fn to_messages(&self) -> [[u8; 8]; 5] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak.to_bits().to_be_bytes(),
            self.bw_avg.to_bits().to_be_bytes(),
            self.msg_rate.to_bits().to_be_bytes(),
        ]
    }

    /// Any 64 bits are some value, so this cannot fail (and perftest's server does send
    /// arbitrary bits).
    pub fn from_messages(m: [[u8; 8]; 5]) -> BwReport {
        BwReport {
            size: u64::from_be_bytes(m[0]),
            iters: u64::from_be_bytes(m[1]),
            bw_peak: f64::from_bits(u64::from_be_bytes(m[2])),
            bw_avg: f64::from_bits(u64::from_be_bytes(m[3])),
            msg_rate: f64::from_bits(u64::from_be_bytes(m[4])),
        }
    }
}

/// The four bandwidth tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BwTest {
    /// ib_write_bw.
    Write,
    /// ib_read_bw.
    Read,
    /// ib_send_bw.
    Send,
    /// ib_atomic_bw.
    Atomic,
}

/// A test's defaults after perftest's `force_dependecies`, for one RC QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwDefaults {
    /// `-s`; atomics are always 8 bytes.
    pub size: u32,
    /// `-n`.
    pub iters: u32,
    /// `-t`: send queue depth of the client.
    pub tx_depth: u32,
    /// Receives the send-test server keeps posted (`-r`); 1 elsewhere (unused).
    pub rx_depth: u32,
    /// Completions are requested every `cq_mod` sends; moderation is off (1) above 8 KiB.
    pub cq_mod: u32,
    /// `out_reads` in the key message; `None` means the device's `max_qp_rd_atom` (rxe: 128).
    pub out_reads: Option<u16>,
}

impl BwTest {
    /// perftest's defaults for this test.
    pub const fn defaults(self) -> BwDefaults {
        let (size, iters, rx_depth, cq_mod, out_reads) = match self {
            BwTest::Write => (65536, 5000, 1, 1, Some(1)),
            BwTest::Read => (65536, 1000, 1, 1, None),
            BwTest::Send => (65536, 1000, 512, 1, Some(1)),
            BwTest::Atomic => (8, 1000, 1, 100, None),
        };
        BwDefaults {
            size,
            iters,
            tx_depth: 128,
            rx_depth,
            cq_mod,
            out_reads,
        }
    }

    /// Handshakes between connecting the QP and the first work request. For send the last
    /// one follows the server's posting of its receives, so no send meets an empty queue.
    pub const fn syncs_after_connect(self) -> usize {
        match self {
            BwTest::Send => 3,
            _ => 2,
        }
    }

    /// Whether the client's results go to the server (half-duplex write, read and atomic;
    /// `ib_send_bw`'s server measures and prints its own).
    pub const fn exchanges_reports(self) -> bool {
        !matches!(self, BwTest::Send)
    }
}

#[cfg(test)]
mod tests;
