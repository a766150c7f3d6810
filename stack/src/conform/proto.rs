//! The conformance agent protocol: one line of text per request, one line per reply, over TCP
//! (port 7471 by default). `tools/conform-agent/PROTOCOL.md` is its reference; the C agent on
//! libibverbs (`tools/conform-agent/`) and `roce conform-agent` both serve it, and
//! [`super::device_peer`] speaks it for the suite.
//!
//! A request is a verb followed by `key=value` words separated by one space and ended by a
//! newline; numbers are decimal or `0x` hexadecimal. A reply is `OK` followed by `key=value`
//! words, or `ERR` followed by a message. Unknown verbs or keys, missing keys, values out of
//! range and lines longer than [`MAX_LINE`] are refused with `ERR`: a peer's agent must never
//! guess what a tester meant.

use core::fmt::{self, Write as _};
use std::net::IpAddr;

use thiserror::Error;

use crate::endpoint::connect::QpPath;
use crate::transport::{Access, Mtu, QpState, QpType, WcOpcode, WcStatus};
use crate::wire::encap::DEFAULT_TTL;
use crate::wire::{Psn, Qpn, RnrTimer};

/// The protocol version `hello` reports.
pub const VERSION: u32 = 1;
/// The agent's default TCP port.
pub const DEFAULT_PORT: u16 = 7471;
/// The longest request or reply line, newline excluded.
pub const MAX_LINE: usize = 16 * 1024;
/// The largest memory region an agent registers for a tester.
pub const MAX_MR_LEN: u32 = 1 << 20;
/// The most bytes one `read_mr` returns or one `write_mr` carries.
pub const MAX_IO_LEN: u32 = 4096;
/// The most memory regions and queue pairs one session may hold at once.
pub const MAX_OBJECTS: usize = 64;
/// The longest `poll_cq` wait.
pub const MAX_POLL_MS: u32 = 10_000;
/// The most completions one `poll_cq` returns.
pub const MAX_POLL: u32 = 64;

/// A request or reply the protocol refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ProtoError(pub String);

fn bad(msg: impl Into<String>) -> ProtoError {
    ProtoError(msg.into())
}

/// The operation of a `post_send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data.
    WriteImm,
    /// RDMA READ.
    Read,
    /// ATOMIC compare and swap.
    CompareSwap,
    /// ATOMIC fetch and add.
    FetchAdd,
}

const SEND_KINDS: [(SendKind, &str); 7] = [
    (SendKind::Send, "send"),
    (SendKind::SendImm, "send_imm"),
    (SendKind::Write, "write"),
    (SendKind::WriteImm, "write_imm"),
    (SendKind::Read, "read"),
    (SendKind::CompareSwap, "cas"),
    (SendKind::FetchAdd, "faa"),
];

const QP_TYPES: [(QpType, &str); 3] = [(QpType::Rc, "rc"), (QpType::Uc, "uc"), (QpType::Ud, "ud")];

const QP_STATES: [(QpState, &str); 7] = [
    (QpState::Reset, "RESET"),
    (QpState::Init, "INIT"),
    (QpState::Rtr, "RTR"),
    (QpState::Rts, "RTS"),
    (QpState::Sqd, "SQD"),
    (QpState::Sqe, "SQE"),
    (QpState::Err, "ERR"),
];

const ACCESS_NAMES: [(Access, &str); 4] = [
    (Access::LOCAL_WRITE, "local_write"),
    (Access::REMOTE_WRITE, "remote_write"),
    (Access::REMOTE_READ, "remote_read"),
    (Access::REMOTE_ATOMIC, "remote_atomic"),
];

const WC_OPCODES: [(WcOpcode, &str); 7] = [
    (WcOpcode::Send, "SEND"),
    (WcOpcode::RdmaWrite, "RDMA_WRITE"),
    (WcOpcode::RdmaRead, "RDMA_READ"),
    (WcOpcode::CompSwap, "COMP_SWAP"),
    (WcOpcode::FetchAdd, "FETCH_ADD"),
    (WcOpcode::Recv, "RECV"),
    (WcOpcode::RecvRdmaWithImm, "RECV_RDMA_WITH_IMM"),
];

fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], v: T) -> &'static str {
    table.iter().find(|(t, _)| *t == v).map_or("?", |(_, n)| n)
}

fn lookup<T: Copy>(table: &[(T, &'static str)], s: &str, what: &str) -> Result<T, ProtoError> {
    table
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(s))
        .map(|(t, _)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(_, n)| *n).collect();
            bad(format!("{what} {s:?} is not one of {}", names.join(", ")))
        })
}

/// The protocol name of a QP state (`RTS`, `ERR`...).
pub fn state_name(s: QpState) -> &'static str {
    name_of(&QP_STATES, s)
}

/// Parses a QP state name.
pub fn parse_state(s: &str) -> Result<QpState, ProtoError> {
    lookup(&QP_STATES, s, "state")
}

/// The protocol name of a completion status: `ibv_wc_status` without its `IBV_WC_` prefix.
pub fn status_name(s: WcStatus) -> &'static str {
    s.name()
}

/// Access flags as the protocol writes them: `none`, or names joined by commas.
pub fn access_text(a: Access) -> String {
    let names: Vec<&str> = ACCESS_NAMES
        .iter()
        .filter(|(f, _)| a.contains(*f))
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

/// Parses `none`, `all` or a comma-separated list of access names.
pub fn parse_access(s: &str) -> Result<Access, ProtoError> {
    match s {
        "none" => return Ok(Access::NONE),
        "all" => return Ok(Access::ALL),
        _ => {}
    }
    s.split(',').try_fold(Access::NONE, |acc, name| {
        Ok(acc | lookup(&ACCESS_NAMES, name, "access flag")?)
    })
}

/// A UD destination of `post_send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdTarget {
    /// The destination's address.
    pub dest: IpAddr,
    /// Its QP number.
    pub qpn: Qpn,
    /// The Q_Key to send.
    pub qkey: u32,
    /// The address handle's traffic class (`ah_attr.grh.traffic_class`); None: 0, and the
    /// key left out of the request, so that an agent without it still serves.
    pub traffic_class: Option<u8>,
}

/// A `post_recv` request: one SGE, none if `len` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostRecv {
    /// The agent's QP.
    pub qpn: Qpn,
    /// Returned in the completion.
    pub wr_id: u64,
    /// The region's handle.
    pub mr: u32,
    /// Offset of the SGE.
    pub offset: u32,
    /// Length of the SGE.
    pub len: u32,
}

/// A `post_send` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostSend {
    /// The agent's QP.
    pub qpn: Qpn,
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub kind: SendKind,
    /// The local memory region (its handle), offset and length of the one SGE.
    pub mr: u32,
    /// Offset of the SGE in the region.
    pub offset: u32,
    /// Length of the SGE.
    pub len: u32,
    /// RDMA and atomics: the remote address.
    pub remote_addr: u64,
    /// RDMA and atomics: the remote key.
    pub rkey: u32,
    /// Immediate data (send_imm, write_imm).
    pub imm: u32,
    /// Compare and swap: the value compared.
    pub compare: u64,
    /// Compare and swap: the new value; fetch and add: the addend.
    pub swap_add: u64,
    /// UD only.
    pub ud: Option<UdTarget>,
    /// Ask for a completion on success.
    pub signaled: bool,
}

impl PostSend {
    /// A signaled request of `kind` from `len` bytes at `offset` of region `mr`.
    pub fn new(qpn: Qpn, wr_id: u64, kind: SendKind, mr: u32, offset: u32, len: u32) -> Self {
        PostSend {
            qpn,
            wr_id,
            kind,
            mr,
            offset,
            len,
            remote_addr: 0,
            rkey: 0,
            imm: 0,
            compare: 0,
            swap_add: 0,
            ud: None,
            signaled: true,
        }
    }
}

/// One request to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `hello`: the protocol version and what the agent is.
    Hello,
    /// `reg_mr len=N [access=...] [fill=B]`: a zero-filled (or `fill`ed) region.
    RegMr {
        /// Bytes, at most [`MAX_MR_LEN`].
        len: u32,
        /// Access rights.
        access: Access,
        /// The byte every position starts with.
        fill: u8,
    },
    /// `dereg_mr mr=H`.
    DeregMr {
        /// The region's handle.
        mr: u32,
    },
    /// `read_mr mr=H off=N len=N`: bytes of a region, in hex.
    ReadMr {
        /// The region's handle.
        mr: u32,
        /// Offset in the region.
        offset: u32,
        /// Bytes, at most [`MAX_IO_LEN`].
        len: u32,
    },
    /// `write_mr mr=H off=N data=HEX`.
    WriteMr {
        /// The region's handle.
        mr: u32,
        /// Offset in the region.
        offset: u32,
        /// The bytes, at most [`MAX_IO_LEN`].
        data: Vec<u8>,
    },
    /// `create_qp type=rc|uc|ud [send_wr=N] [recv_wr=N]`: a QP in RESET with its own CQ.
    CreateQp {
        /// The transport service.
        qp_type: QpType,
        /// Send queue depth.
        send_wr: u32,
        /// Receive queue depth.
        recv_wr: u32,
    },
    /// `connect_qp qpn=N dest=IP ...`: RESET to RTS, with what INIT, RTR and RTS set (the
    /// attributes of `ibv_modify_qp` ibv_rc_pingpong sets, IBA 11.2.4.2). The path's QP type
    /// is not on the wire: the agent's QP has its own.
    ConnectQp {
        /// The agent's QP.
        qpn: Qpn,
        /// The attributes.
        path: QpPath,
    },
    /// `modify_qp qpn=N state=ERR|RESET`.
    ModifyQp {
        /// The agent's QP.
        qpn: Qpn,
        /// The new state.
        state: QpState,
    },
    /// `query_qp qpn=N`: the QP's state.
    QueryQp {
        /// The agent's QP.
        qpn: Qpn,
    },
    /// `destroy_qp qpn=N`.
    DestroyQp {
        /// The agent's QP.
        qpn: Qpn,
    },
    /// `post_recv qpn=N mr=H off=N len=N wr_id=N`.
    PostRecv(PostRecv),
    /// `post_send qpn=N op=... mr=H off=N len=N ...`.
    PostSend(PostSend),
    /// `poll_cq qpn=N [max=N] [timeout_ms=N]`: completions of the QP's CQ, waiting up to
    /// `timeout_ms` for the first.
    PollCq {
        /// The agent's QP.
        qpn: Qpn,
        /// At most this many, at most [`MAX_POLL`].
        max: u32,
        /// At most [`MAX_POLL_MS`].
        timeout_ms: u32,
    },
    /// `bye`: the agent tears down what the session created and closes.
    Bye,
}

/// One completion, as `poll_cq` reports it: `wc=WR_ID:STATUS:OPCODE:BYTE_LEN:IMM` (IMM `-`
/// when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// `ibv_wc_status` name without prefix (`SUCCESS`, `REM_ACCESS_ERR`...).
    pub status: &'static str,
    /// `ibv_wc_opcode` name without prefix (`SEND`, `RECV`...), or `UNKNOWN`; meaningless
    /// unless SUCCESS.
    pub opcode: &'static str,
    /// Bytes moved or received.
    pub byte_len: u32,
    /// Immediate data.
    pub imm: Option<u32>,
}

const STATUS_NAMES: [&str; 22] = [
    "SUCCESS",
    "LOC_LEN_ERR",
    "LOC_QP_OP_ERR",
    "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",
    "WR_FLUSH_ERR",
    "MW_BIND_ERR",
    "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",
    "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR",
    "REM_OP_ERR",
    "RETRY_EXC_ERR",
    "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",
    "INV_EECN_ERR",
    "INV_EEC_STATE_ERR",
    "FATAL_ERR",
    "RESP_TIMEOUT_ERR",
    "GENERAL_ERR",
];

fn intern(table: &[&'static str], s: &str, what: &str) -> Result<&'static str, ProtoError> {
    table
        .iter()
        .find(|n| **n == s)
        .copied()
        .ok_or_else(|| bad(format!("unknown {what} {s:?}")))
}

impl Completion {
    /// The protocol form of an engine completion.
    pub fn from_engine(wr_id: u64, status: WcStatus, opcode: WcOpcode, len: u32) -> Completion {
        Completion {
            wr_id,
            status: status.name(),
            opcode: name_of(&WC_OPCODES, opcode),
            byte_len: len,
            imm: None,
        }
    }

    fn text(&self) -> String {
        let imm = self.imm.map_or("-".to_owned(), |i| format!("{i:#x}"));
        format!(
            "{}:{}:{}:{}:{imm}",
            self.wr_id, self.status, self.opcode, self.byte_len
        )
    }

    fn parse(s: &str) -> Result<Completion, ProtoError> {
        let f: Vec<&str> = s.split(':').collect();
        let [wr_id, status, opcode, len, imm] = f.as_slice() else {
            return Err(bad(format!(
                "completion {s:?} is not WR_ID:STATUS:OPCODE:LEN:IMM"
            )));
        };
        // libibverbs leaves the opcode of an error completion undefined: agents say UNKNOWN.
        let mut opcodes: Vec<&'static str> = WC_OPCODES.iter().map(|(_, n)| *n).collect();
        opcodes.push("UNKNOWN");
        Ok(Completion {
            wr_id: number(wr_id, "wr_id")?,
            status: intern(&STATUS_NAMES, status, "completion status")?,
            opcode: intern(&opcodes, opcode, "completion opcode")?,
            byte_len: narrow(number(len, "byte_len")?, "byte_len")?,
            imm: match *imm {
                "-" => None,
                v => Some(narrow(number(v, "imm")?, "imm")?),
            },
        })
    }
}

/// A successful reply, as typed data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// To `hello`.
    Hello {
        /// Protocol version.
        version: u32,
        /// What serves the protocol (`libibverbs:rxe0`, `roce`...).
        agent: String,
        /// Congestion control at the agent's end: `none` or `dcqcn`.
        cc: String,
    },
    /// To `reg_mr`.
    Mr {
        /// The handle for later requests.
        mr: u32,
        /// The region's address (what a RETH names).
        addr: u64,
        /// Local key.
        lkey: u32,
        /// Remote key.
        rkey: u32,
    },
    /// To `create_qp`.
    Qp {
        /// The QP number, as the wire carries it.
        qpn: Qpn,
    },
    /// To `query_qp`.
    State {
        /// The QP's state.
        state: QpState,
    },
    /// To `read_mr`.
    Data {
        /// The bytes.
        data: Vec<u8>,
    },
    /// To `poll_cq`.
    Completions {
        /// In completion order.
        wcs: Vec<Completion>,
    },
    /// To everything else.
    Done,
}

// ---- the line format ----

/// A parsed line: its first word and its `key=value` words.
#[derive(Debug)]
struct Words<'a> {
    verb: &'a str,
    args: Vec<(&'a str, &'a str)>,
    used: Vec<bool>,
}

impl<'a> Words<'a> {
    fn parse(line: &'a str) -> Result<Words<'a>, ProtoError> {
        if line.len() > MAX_LINE {
            return Err(bad(format!(
                "line of {} bytes (at most {MAX_LINE})",
                line.len()
            )));
        }
        let mut parts = line.split(' ').filter(|w| !w.is_empty());
        let verb = parts.next().ok_or_else(|| bad("empty line"))?;
        let mut args = Vec::new();
        for word in parts {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| bad(format!("{word:?} is not key=value")))?;
            if args.iter().any(|(key, _)| *key == k) && k != "wc" {
                return Err(bad(format!("{k} given twice")));
            }
            args.push((k, v));
        }
        let used = vec![false; args.len()];
        Ok(Words { verb, args, used })
    }

    fn get(&mut self, key: &str) -> Option<&'a str> {
        let i = self.args.iter().position(|(k, _)| *k == key)?;
        self.used[i] = true;
        Some(self.args[i].1)
    }

    fn all(&mut self, key: &str) -> Vec<&'a str> {
        let mut out = Vec::new();
        for (i, (k, v)) in self.args.iter().enumerate() {
            if *k == key {
                self.used[i] = true;
                out.push(*v);
            }
        }
        out
    }

    fn req(&mut self, key: &str) -> Result<&'a str, ProtoError> {
        self.get(key)
            .ok_or_else(|| bad(format!("{}: {key}= missing", self.verb)))
    }

    fn num<T: TryFrom<u64>>(&mut self, key: &str) -> Result<T, ProtoError> {
        let v = self.req(key)?;
        narrow(number(v, key)?, key)
    }

    fn num_or<T: TryFrom<u64>>(&mut self, key: &str, default: T) -> Result<T, ProtoError> {
        Ok(self.num_opt(key)?.unwrap_or(default))
    }

    /// An optional number: `None` when the key is absent.
    fn num_opt<T: TryFrom<u64>>(&mut self, key: &str) -> Result<Option<T>, ProtoError> {
        self.get(key)
            .map(|v| narrow(number(v, key)?, key))
            .transpose()
    }

    fn qpn(&mut self, key: &str) -> Result<Qpn, ProtoError> {
        let v: u32 = self.num(key)?;
        Qpn::try_new(v).ok_or_else(|| bad(format!("{key}={v} does not fit 24 bits")))
    }

    fn psn_or(&mut self, key: &str, default: Psn) -> Result<Psn, ProtoError> {
        let v: u32 = self.num_or(key, default.value())?;
        Psn::try_new(v).ok_or_else(|| bad(format!("{key}={v} does not fit 24 bits")))
    }

    fn ip(&mut self, key: &str) -> Result<IpAddr, ProtoError> {
        let v = self.req(key)?;
        v.parse()
            .map_err(|_| bad(format!("{key}={v} is not an IP address")))
    }

    fn flag(&mut self, key: &str, default: bool) -> Result<bool, ProtoError> {
        match self.get(key) {
            None => Ok(default),
            Some("0") => Ok(false),
            Some("1") => Ok(true),
            Some(v) => Err(bad(format!("{key}={v} is not 0 or 1"))),
        }
    }

    /// Fails on any word no field asked for: an agent must not ignore what it does not know.
    fn finish(self) -> Result<(), ProtoError> {
        match self.used.iter().position(|u| !u) {
            Some(i) => Err(bad(format!(
                "{}: unknown key {}",
                self.verb, self.args[i].0
            ))),
            None => Ok(()),
        }
    }
}

fn number(v: &str, key: &str) -> Result<u64, ProtoError> {
    let (digits, radix) = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (v, 10),
    };
    // Digits only: Rust's parser would take a leading '+', C's strtoull spaces and signs.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(bad(format!("{key}={v} is not a number")));
    }
    u64::from_str_radix(digits, radix).map_err(|_| bad(format!("{key}={v} is out of range")))
}

fn narrow<T: TryFrom<u64>>(v: u64, key: &str) -> Result<T, ProtoError> {
    T::try_from(v).map_err(|_| bad(format!("{key}={v} is out of range")))
}

fn bounded(v: u32, max: u32, key: &str) -> Result<u32, ProtoError> {
    if v > max {
        return Err(bad(format!("{key}={v} is above the limit {max}")));
    }
    Ok(v)
}

/// Bytes as lowercase hex digits.
pub fn hex(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> Result<Vec<u8>, ProtoError> {
    if !s.len().is_multiple_of(2) {
        return Err(bad("data= has an odd number of hex digits"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| bad("data= holds a character that is not a hex digit"))
        })
        .collect()
}

impl Request {
    /// Parses one request line (without its newline).
    pub fn parse(line: &str) -> Result<Request, ProtoError> {
        let mut w = Words::parse(line)?;
        let req = match w.verb {
            "hello" => Request::Hello,
            "bye" => Request::Bye,
            "reg_mr" => Request::RegMr {
                len: match w.num("len")? {
                    0 => return Err(bad("len=0: a region needs at least one byte")),
                    len => bounded(len, MAX_MR_LEN, "len")?,
                },
                access: match w.get("access") {
                    Some(a) => parse_access(a)?,
                    None => Access::ALL,
                },
                fill: w.num_or("fill", 0)?,
            },
            "dereg_mr" => Request::DeregMr { mr: w.num("mr")? },
            "read_mr" => Request::ReadMr {
                mr: w.num("mr")?,
                offset: w.num_or("off", 0)?,
                len: bounded(w.num("len")?, MAX_IO_LEN, "len")?,
            },
            "write_mr" => {
                let data = unhex(w.req("data")?)?;
                bounded(data.len() as u32, MAX_IO_LEN, "data length")?;
                Request::WriteMr {
                    mr: w.num("mr")?,
                    offset: w.num_or("off", 0)?,
                    data,
                }
            }
            "create_qp" => Request::CreateQp {
                qp_type: lookup(&QP_TYPES, w.req("type")?, "QP type")?,
                send_wr: bounded(w.num_or("send_wr", 64)?, 1024, "send_wr")?,
                recv_wr: bounded(w.num_or("recv_wr", 64)?, 1024, "recv_wr")?,
            },
            "connect_qp" => Request::ConnectQp {
                qpn: w.qpn("qpn")?,
                path: connect_path(&mut w)?,
            },
            "modify_qp" => Request::ModifyQp {
                qpn: w.qpn("qpn")?,
                state: match parse_state(w.req("state")?)? {
                    s @ (QpState::Err | QpState::Reset) => s,
                    s => {
                        return Err(bad(format!(
                            "modify_qp: state {} needs attributes: use connect_qp",
                            state_name(s)
                        )));
                    }
                },
            },
            "query_qp" => Request::QueryQp { qpn: w.qpn("qpn")? },
            "destroy_qp" => Request::DestroyQp { qpn: w.qpn("qpn")? },
            "post_recv" => Request::PostRecv(PostRecv {
                qpn: w.qpn("qpn")?,
                wr_id: w.num_or("wr_id", 0)?,
                mr: w.num("mr")?,
                offset: w.num_or("off", 0)?,
                len: w.num("len")?,
            }),
            "post_send" => Request::PostSend(post_send(&mut w)?),
            "poll_cq" => Request::PollCq {
                qpn: w.qpn("qpn")?,
                max: bounded(w.num_or("max", 16)?, MAX_POLL, "max")?,
                timeout_ms: bounded(w.num_or("timeout_ms", 0)?, MAX_POLL_MS, "timeout_ms")?,
            },
            verb => return Err(bad(format!("unknown request {verb:?}"))),
        };
        w.finish()?;
        Ok(req)
    }
}

fn connect_path(w: &mut Words<'_>) -> Result<QpPath, ProtoError> {
    let dest = w.ip("dest")?;
    let dest_qpn = match w.get("dest_qpn") {
        Some(v) => {
            let n: u32 = narrow(number(v, "dest_qpn")?, "dest_qpn")?;
            Qpn::try_new(n).ok_or_else(|| bad(format!("dest_qpn={n} does not fit 24 bits")))?
        }
        None => Qpn::new(0),
    };
    let rq_psn = w.psn_or("rq_psn", Psn::new(0))?;
    let sq_psn = w.psn_or("sq_psn", Psn::new(0))?;
    let mtu: u32 = w.num_or("mtu", 1024)?;
    let mtu = Mtu::from_bytes(mtu)
        .ok_or_else(|| bad(format!("mtu={mtu} is not 256, 512, 1024, 2048 or 4096")))?;
    let mut a = QpPath::new(QpType::Rc, dest, dest_qpn, rq_psn, sq_psn, mtu);
    a.access = match w.get("access") {
        Some(acc) => parse_access(acc)?,
        None => Access::ALL,
    };
    a.max_rd_atomic = w.num_or("max_rd_atomic", a.max_rd_atomic)?;
    a.max_dest_rd_atomic = w.num_or("max_dest_rd_atomic", a.max_dest_rd_atomic)?;
    a.timeout = w.num_or("timeout", a.timeout)?;
    a.retry_cnt = w.num_or("retry_cnt", a.retry_cnt)?;
    a.rnr_retry = w.num_or("rnr_retry", a.rnr_retry)?;
    let min_rnr_timer: u8 = w.num_or("min_rnr_timer", a.min_rnr_timer.code())?;
    a.qkey = w.num_or("qkey", a.qkey)?;
    a.traffic_class = w.num_opt("traffic_class")?;
    a.hop_limit = w.num_or("hop_limit", a.hop_limit)?;
    let limits = [
        ("timeout", a.timeout, 31),
        ("retry_cnt", a.retry_cnt, 7),
        ("rnr_retry", a.rnr_retry, 7),
        ("min_rnr_timer", min_rnr_timer, 31),
    ];
    for (key, v, max) in limits {
        if v > max {
            return Err(bad(format!("{key}={v} is above {max}")));
        }
    }
    a.min_rnr_timer = RnrTimer::new(min_rnr_timer);
    Ok(a)
}

fn post_send(w: &mut Words<'_>) -> Result<PostSend, ProtoError> {
    let qpn = w.qpn("qpn")?;
    let kind = lookup(&SEND_KINDS, w.req("op")?, "operation")?;
    let mut p = PostSend::new(
        qpn,
        w.num_or("wr_id", 0)?,
        kind,
        w.num("mr")?,
        w.num_or("off", 0)?,
        w.num("len")?,
    );
    p.remote_addr = w.num_or("remote_addr", 0)?;
    p.rkey = w.num_or("rkey", 0)?;
    p.imm = w.num_or("imm", 0)?;
    p.compare = w.num_or("compare", 0)?;
    p.swap_add = w.num_or("swap_add", 0)?;
    p.signaled = w.flag("signaled", true)?;
    let ud = w
        .args
        .iter()
        .any(|(k, _)| matches!(*k, "dest" | "dest_qpn" | "dest_qkey" | "traffic_class"));
    if ud {
        p.ud = Some(UdTarget {
            dest: w.ip("dest")?,
            qpn: w.qpn("dest_qpn")?,
            qkey: w.num_or("dest_qkey", 0)?,
            traffic_class: w.num_opt("traffic_class")?,
        });
    }
    Ok(p)
}

/// Writes `key=value` words after a verb.
struct Line(String);

impl Line {
    fn new(verb: &str) -> Line {
        Line(verb.to_owned())
    }
    fn kv(mut self, key: &str, value: impl fmt::Display) -> Line {
        let _ = write!(self.0, " {key}={value}");
        self
    }
    fn hex(self, key: &str, value: u64) -> Line {
        self.kv(key, format_args!("{value:#x}"))
    }
    fn kv_if(self, key: &str, value: Option<impl fmt::Display>) -> Line {
        match value {
            Some(v) => self.kv(key, v),
            None => self,
        }
    }
}

impl fmt::Display for Request {
    /// The request line, without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = match self {
            Request::Hello => Line::new("hello"),
            Request::Bye => Line::new("bye"),
            Request::RegMr { len, access, fill } => Line::new("reg_mr")
                .kv("len", len)
                .kv("access", access_text(*access))
                .kv("fill", fill),
            Request::DeregMr { mr } => Line::new("dereg_mr").kv("mr", mr),
            Request::ReadMr { mr, offset, len } => Line::new("read_mr")
                .kv("mr", mr)
                .kv("off", offset)
                .kv("len", len),
            Request::WriteMr { mr, offset, data } => Line::new("write_mr")
                .kv("mr", mr)
                .kv("off", offset)
                .kv("data", hex(data)),
            Request::CreateQp {
                qp_type,
                send_wr,
                recv_wr,
            } => Line::new("create_qp")
                .kv("type", name_of(&QP_TYPES, *qp_type))
                .kv("send_wr", send_wr)
                .kv("recv_wr", recv_wr),
            Request::ConnectQp { qpn, path: a } => Line::new("connect_qp")
                .kv("qpn", qpn)
                .kv("dest", a.dest)
                .kv("dest_qpn", a.dest_qp)
                .hex("rq_psn", a.rq_psn.value().into())
                .hex("sq_psn", a.sq_psn.value().into())
                .kv("mtu", a.mtu.bytes())
                .kv("access", access_text(a.access))
                .kv("max_rd_atomic", a.max_rd_atomic)
                .kv("max_dest_rd_atomic", a.max_dest_rd_atomic)
                .kv("timeout", a.timeout)
                .kv("retry_cnt", a.retry_cnt)
                .kv("rnr_retry", a.rnr_retry)
                .kv("min_rnr_timer", a.min_rnr_timer.code())
                .hex("qkey", a.qkey.into())
                // Only when set, so that an agent older than these keys still connects.
                .kv_if("traffic_class", a.traffic_class)
                .kv_if(
                    "hop_limit",
                    (a.hop_limit != DEFAULT_TTL).then_some(a.hop_limit),
                ),
            Request::ModifyQp { qpn, state } => Line::new("modify_qp")
                .kv("qpn", qpn)
                .kv("state", state_name(*state)),
            Request::QueryQp { qpn } => Line::new("query_qp").kv("qpn", qpn),
            Request::DestroyQp { qpn } => Line::new("destroy_qp").kv("qpn", qpn),
            Request::PostRecv(p) => Line::new("post_recv")
                .kv("qpn", p.qpn)
                .kv("wr_id", p.wr_id)
                .kv("mr", p.mr)
                .kv("off", p.offset)
                .kv("len", p.len),
            Request::PostSend(p) => {
                let mut l = Line::new("post_send")
                    .kv("qpn", p.qpn)
                    .kv("wr_id", p.wr_id)
                    .kv("op", name_of(&SEND_KINDS, p.kind))
                    .kv("mr", p.mr)
                    .kv("off", p.offset)
                    .kv("len", p.len)
                    .hex("remote_addr", p.remote_addr)
                    .hex("rkey", p.rkey.into())
                    .hex("imm", p.imm.into())
                    .hex("compare", p.compare)
                    .hex("swap_add", p.swap_add)
                    .kv("signaled", u8::from(p.signaled));
                if let Some(ud) = p.ud {
                    l = l
                        .kv("dest", ud.dest)
                        .kv("dest_qpn", ud.qpn)
                        .hex("dest_qkey", ud.qkey.into())
                        .kv_if("traffic_class", ud.traffic_class);
                }
                l
            }
            Request::PollCq {
                qpn,
                max,
                timeout_ms,
            } => Line::new("poll_cq")
                .kv("qpn", qpn)
                .kv("max", max)
                .kv("timeout_ms", timeout_ms),
        };
        f.write_str(&line.0)
    }
}

impl Reply {
    /// The reply line, without its newline.
    pub fn to_line(&self) -> String {
        let line = match self {
            Reply::Hello { version, agent, cc } => Line::new("OK")
                .kv("version", version)
                .kv("agent", agent)
                .kv("cc", cc),
            Reply::Mr {
                mr,
                addr,
                lkey,
                rkey,
            } => Line::new("OK")
                .kv("mr", mr)
                .hex("addr", *addr)
                .hex("lkey", (*lkey).into())
                .hex("rkey", (*rkey).into()),
            Reply::Qp { qpn } => Line::new("OK").kv("qpn", qpn),
            Reply::State { state } => Line::new("OK").kv("state", state_name(*state)),
            Reply::Data { data } => Line::new("OK").kv("data", hex(data)),
            Reply::Completions { wcs } => {
                let mut l = Line::new("OK").kv("n", wcs.len());
                for wc in wcs {
                    l = l.kv("wc", wc.text());
                }
                l
            }
            Reply::Done => Line::new("OK"),
        };
        line.0
    }

    /// Parses the reply to `request`: `Err` for a malformed line, `Ok(Err(message))` for the
    /// agent's `ERR`.
    pub fn parse(request: &Request, line: &str) -> Result<Result<Reply, String>, ProtoError> {
        if let Some(msg) = line.strip_prefix("ERR") {
            return Ok(Err(msg.trim().to_owned()));
        }
        let mut w = Words::parse(line)?;
        if w.verb != "OK" {
            return Err(bad(format!("reply {line:?} is neither OK nor ERR")));
        }
        let reply = match request {
            Request::Hello => Reply::Hello {
                version: w.num("version")?,
                agent: w.req("agent")?.to_owned(),
                cc: w.get("cc").unwrap_or("none").to_owned(),
            },
            Request::RegMr { .. } => Reply::Mr {
                mr: w.num("mr")?,
                addr: w.num("addr")?,
                lkey: w.num("lkey")?,
                rkey: w.num("rkey")?,
            },
            Request::CreateQp { .. } => Reply::Qp { qpn: w.qpn("qpn")? },
            Request::QueryQp { .. } => Reply::State {
                state: parse_state(w.req("state")?)?,
            },
            Request::ReadMr { .. } => Reply::Data {
                data: unhex(w.req("data")?)?,
            },
            Request::PollCq { .. } => {
                let n: usize = w.num("n")?;
                let wcs = w
                    .all("wc")
                    .into_iter()
                    .map(Completion::parse)
                    .collect::<Result<Vec<_>, _>>()?;
                if wcs.len() != n {
                    return Err(bad(format!("n={n} but {} completions", wcs.len())));
                }
                Reply::Completions { wcs }
            }
            _ => Reply::Done,
        };
        // Replies may grow keys in later versions; a client ignores what it does not need.
        Ok(Ok(reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn every_request_round_trips() {
        let dest = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2));
        let mut send = PostSend::new(Qpn::new(17), 9, SendKind::FetchAdd, 1, 8, 8);
        send.remote_addr = 0x1000;
        send.rkey = 0x1234;
        send.swap_add = 5;
        let mut ud = PostSend::new(Qpn::new(18), 1, SendKind::SendImm, 2, 0, 64);
        ud.imm = 0xdead_beef;
        ud.signaled = false;
        ud.ud = Some(UdTarget {
            dest,
            qpn: Qpn::new(0x100),
            qkey: 0x1111_1111,
            traffic_class: None,
        });
        let mut ud_class = ud;
        ud_class.ud = ud.ud.map(|t| UdTarget {
            traffic_class: Some(0x68),
            ..t
        });
        let mut path = QpPath::new(
            QpType::Rc,
            dest,
            Qpn::new(0x1000),
            Psn::new(0xff_fffe),
            Psn::new(5),
            Mtu::M2048,
        );
        path.access = Access::LOCAL_WRITE | Access::REMOTE_READ;
        path.min_rnr_timer = RnrTimer::new(3);
        let mut av = path;
        av.traffic_class = Some(0x68);
        av.hop_limit = 9;
        let all = [
            Request::Hello,
            Request::Bye,
            Request::RegMr {
                len: 4096,
                access: Access::LOCAL_WRITE,
                fill: 0xab,
            },
            Request::DeregMr { mr: 3 },
            Request::ReadMr {
                mr: 1,
                offset: 16,
                len: 32,
            },
            Request::WriteMr {
                mr: 1,
                offset: 2,
                data: vec![0, 1, 0xfe],
            },
            Request::CreateQp {
                qp_type: QpType::Uc,
                send_wr: 8,
                recv_wr: 16,
            },
            Request::ConnectQp {
                qpn: Qpn::new(17),
                path,
            },
            Request::ConnectQp {
                qpn: Qpn::new(18),
                path: av,
            },
            Request::ModifyQp {
                qpn: Qpn::new(17),
                state: QpState::Err,
            },
            Request::QueryQp { qpn: Qpn::new(17) },
            Request::DestroyQp { qpn: Qpn::new(17) },
            Request::PostRecv(PostRecv {
                qpn: Qpn::new(17),
                wr_id: 4,
                mr: 1,
                offset: 0,
                len: 64,
            }),
            Request::PostSend(send),
            Request::PostSend(ud),
            Request::PostSend(ud_class),
            Request::PollCq {
                qpn: Qpn::new(17),
                max: 4,
                timeout_ms: 100,
            },
        ];
        for req in all {
            let line = req.to_string();
            assert_eq!(Request::parse(&line), Ok(req.clone()), "{line}");
        }
    }

    #[test]
    fn replies_round_trip() {
        let wcs = vec![
            Completion::from_engine(7, WcStatus::Success, WcOpcode::Recv, 64),
            Completion {
                imm: Some(0x1234),
                ..Completion::from_engine(8, WcStatus::RemAccessErr, WcOpcode::RdmaWrite, 0)
            },
        ];
        let cases = [
            (
                Request::PollCq {
                    qpn: Qpn::new(1),
                    max: 2,
                    timeout_ms: 0,
                },
                Reply::Completions { wcs },
            ),
            (
                Request::QueryQp { qpn: Qpn::new(1) },
                Reply::State {
                    state: QpState::Rts,
                },
            ),
            (
                Request::ReadMr {
                    mr: 1,
                    offset: 0,
                    len: 3,
                },
                Reply::Data {
                    data: vec![1, 2, 255],
                },
            ),
            (
                Request::RegMr {
                    len: 8,
                    access: Access::ALL,
                    fill: 0,
                },
                Reply::Mr {
                    mr: 1,
                    addr: 0x7f00_0000_1000,
                    lkey: 0x100,
                    rkey: 0x100,
                },
            ),
            (
                Request::Hello,
                Reply::Hello {
                    version: VERSION,
                    agent: "roce".into(),
                    cc: "dcqcn".into(),
                },
            ),
        ];
        for (req, reply) in cases {
            let line = reply.to_line();
            assert_eq!(Reply::parse(&req, &line), Ok(Ok(reply)), "{line}");
        }
        assert_eq!(
            Reply::parse(&Request::Hello, "ERR no such thing"),
            Ok(Err("no such thing".into()))
        );
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("fly qpn=1", "unknown request"),
            ("query_qp", "qpn= missing"),
            ("query_qp qpn=1 color=red", "unknown key color"),
            ("query_qp qpn=1 qpn=2", "twice"),
            ("query_qp qpn=0x1000000", "24 bits"),
            ("query_qp qpn=-1", "not a number"),
            ("query_qp qpn=+1", "not a number"),
            ("query_qp qpn=18446744073709551616", "out of range"),
            ("reg_mr len=0", "at least one byte"),
            ("reg_mr len=8 access=", "access flag"),
            ("query_qp qpn=0x", "not a number"),
            ("query_qp qpn", "not key=value"),
            ("reg_mr len=99999999", "limit"),
            ("reg_mr len=8 access=remote_fly", "access flag"),
            ("write_mr mr=1 data=abc", "odd"),
            ("write_mr mr=1 data=zz", "hex digit"),
            ("create_qp type=rd", "QP type"),
            ("connect_qp qpn=1 dest=nowhere", "IP address"),
            ("connect_qp qpn=1 dest=10.0.0.1 mtu=1500", "mtu"),
            ("connect_qp qpn=1 dest=10.0.0.1 retry_cnt=8", "above 7"),
            ("connect_qp qpn=1 dest=10.0.0.1 timeout=300", "out of range"),
            (
                "connect_qp qpn=1 dest=10.0.0.1 traffic_class=256",
                "out of range",
            ),
            ("connect_qp qpn=1 dest=10.0.0.1 hop_limit=-1", "number"),
            ("modify_qp qpn=1 state=RTS", "connect_qp"),
            ("post_send qpn=1 op=jump mr=1 len=1", "operation"),
            ("post_send qpn=1 op=send mr=1 len=1 signaled=2", "0 or 1"),
            ("poll_cq qpn=1 timeout_ms=60000", "limit"),
        ];
        for (line, why) in cases {
            let err = Request::parse(line).unwrap_err();
            assert!(err.0.contains(why), "{line:?}: {err}");
        }
        let long = format!("hello {}", "x".repeat(MAX_LINE));
        assert!(Request::parse(&long).is_err());
    }
}
