//! perftest's `ib_write_bw`, `ib_read_bw`, `ib_send_bw` and `ib_atomic_bw` (4.5-0.17, run
//! with `-x IDX -F`) on our runtime, in either role: the out-of-band dialogue of
//! [`crate::endpoint::oob::perftest`], RC QPs (one, or `-q N`), and perftest's result table.
//!
//! The client posts `iters` operations on each QP keeping at most `tx_depth` outstanding per
//! QP, asking for a completion every `cq_mod` of them (and on the last); it measures
//! bandwidth from the first post to the last completion. For WRITE, READ and atomics the
//! server is passive: it waits in the handshake that follows the test (answering the wire
//! meanwhile) and prints the client's results. For SEND the server keeps receives posted and
//! measures what arrives. With `-b` both sides run the test and print the sum of both (also
//! per size with `-a`, and with `-D` but for SEND, where each side prints its own row).
//!
//! Also as perftest: `-a` runs every size from 2 bytes to 8 MiB (the passive server only
//! needs its buffer that large; SEND servers take part size by size, a handshake before and
//! after each), `-D SECONDS` posts for that long and counts the completions between the
//! margins (a quarter of it in whole seconds at each end; no peak), `--report_gbits` reports Gb/s (10^9
//! bits), and `-A CMP_AND_SWAP` measures compare-and-swap (compare 0, swap 0) instead of
//! fetch-and-add (add 1).

use core::time::Duration;
use std::io::Write;
use std::time::Instant;

use super::{AppError, check, check_mtu, local_gid, peer_addr, random_psn};

mod cm;
mod lat;
mod pace;
use crate::endpoint::cm::RDMA_UDP_QKEY;
use crate::endpoint::connect::QpPath;
use crate::endpoint::oob::perftest::{
    Agreed, BwReport, BwTest, Connected, IbMtu, Keys, Negotiated, Negotiation, Role, Session,
    SysData,
};
use crate::endpoint::oob::{accept, connect, listen};
use crate::endpoint::runtime::Runtime;
use crate::endpoint::runtime::RuntimeError;
use crate::transport::{
    Access, CqId, GRH_LEN, MAX_RD_ATOMIC, Mtu, PdId, QpInit, QpType, RecvWr, SendOp, SendWr,
    SgList, Sge, SrqId, SrqInit, UdDest, WcOpcode, WorkCompletion,
};
use crate::wire::{Qpn, RnrTimer};
pub use lat::{
    LatDurationReport, LatFigures, LatReport, lat_duration_header, lat_duration_row, lat_header,
    lat_report, lat_row,
};
use pace::Pacer;
pub use pace::{RateLimit, RateLimitType, RateUnits};

const LINE: &str =
    "---------------------------------------------------------------------------------------";
/// `MB` in perftest's default report unit (MiB).
const MIB: f64 = 1_048_576.0;
/// Bytes per second in one Gb/s, perftest's `--report_gbits` unit.
const GBIT: f64 = 125_000_000.0;
/// The largest size of `-a` (perftest's `MAX_SIZE`); it runs 2, 4, ... up to this.
pub const MAX_SIZE: u32 = 1 << 23;
/// The most QPs `-q` takes (rxe's default `max_qp` is larger; each QP here is a CQ share,
/// a buffer block and a key message on the out-of-band channel).
pub const MAX_QPS: u32 = 1024;
/// The most memory the test's buffer may take: `-q` QPs of twice the larger of the message
/// and the page each.
const MAX_BUFFER: usize = 1 << 30;

/// `-A`: which atomic `ib_atomic_bw` measures (perftest's `atomicTypesStr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtomicType {
    /// Compare 0, swap 0 (`ATOMIC_SWAP_VALUE`).
    CmpAndSwap,
    /// Add 1 (`ATOMIC_ADD_VALUE`), perftest's default.
    #[default]
    FetchAndAdd,
}

impl AtomicType {
    /// perftest's name, as `-A` takes it and the title prints it.
    pub fn name(self) -> &'static str {
        match self {
            AtomicType::CmpAndSwap => "CMP_AND_SWAP",
            AtomicType::FetchAndAdd => "FETCH_AND_ADD",
        }
    }
}

/// What `roce perf` runs: perftest's options with its spellings.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfOptions {
    /// WRITE, READ, SEND or atomic.
    pub test: BwTest,
    /// The server to connect to; `None` to be the server.
    pub server: Option<String>,
    /// The TCP port of the exchange (`-p`).
    pub port: u16,
    /// Message size; atomics are always 8 bytes.
    pub size: u32,
    /// Operations per run (`-n`).
    pub iters: u32,
    /// Operations outstanding at once (`-t`).
    pub tx_depth: u32,
    /// Receives the SEND server keeps posted.
    pub rx_depth: u32,
    /// Path MTU; `None` for the largest the device carries (perftest: the port's active MTU).
    pub mtu: Option<Mtu>,
    /// The GID index to send from (`-x`).
    pub gid_index: usize,
    /// Longest wait for the peer, including the whole test while the server waits.
    pub timeout: Duration,
    /// `-A`: the atomic of the atomic test.
    pub atomic: AtomicType,
    /// `-a`: every size from 2 bytes to [`MAX_SIZE`] (not with atomics, as perftest).
    pub all_sizes: bool,
    /// `-D`: post for this long instead of `iters` operations (whole seconds, at least 1).
    pub duration: Option<Duration>,
    /// `--report_gbits`: bandwidth in Gb/s instead of MiB/s.
    pub gbits: bool,
    /// `--lat`: the latency test (ib_write_lat, ib_read_lat, ib_atomic_lat) instead of
    /// the bandwidth test.
    pub latency: bool,
    /// `--use-srq`: SEND's receives go to a shared receive queue the QP takes them from.
    pub use_srq: bool,
    /// `-q`: QPs, each running `iters` operations (one SRQ for all with `use_srq`).
    pub num_qps: u32,
    /// `-b`: bidirectional, both sides running the test and printing the sum.
    pub duplex: bool,
    /// `-R`: the dialogue and the test's QP both connected through rdma_cm ([`cm`]).
    pub rdma_cm: bool,
    /// `-T` (with `-R`): the type of service the client's test connections ask rdma_cm for
    /// (not the dialogue's, as perftest); the REQ carries it and both sides' QPs send with
    /// its DSCP.
    pub tos: Option<u8>,
    /// `-u`: the local ACK timeout exponent of the test's QPs, 4.096 us x 2^u (perftest's
    /// default 14, about 67 ms; 0-31, the field's five bits).
    pub qp_timeout: u8,
    /// `-Q`: a completion every this many requests, as asked; `None` takes perftest's
    /// default (100, or 1 above 8 KiB but with `-a`). Either way at most the TX depth.
    pub cq_mod: Option<u32>,
    /// `-c`: the test's QPs' service: RC, UC (WRITE and SEND) or UD (SEND, messages of at
    /// most the path MTU, each receive 40 bytes longer for the GRH), not with `-R`. A UC or
    /// UD receiver has no RNR NAK to hold a sender back, so perftest posts up to
    /// [`UC_MAX_RX`] receives by default: [`PerfOptions::set_connection`].
    pub connection: QpType,
    /// `-s` was given: with `-c UD` a size above the path MTU is then refused, as perftest
    /// refuses it, rather than cut to the MTU (what perftest does to its default size).
    pub size_given: bool,
    /// `--rate_limit` and its companions: the bandwidth test's requester posts in paced
    /// bursts ([`pace`]).
    pub rate_limit: RateLimit,
    /// `-N`: no peak bandwidth (0.00 in its column), as perftest also does on its own
    /// above [`PEAK_MAX_ITERS`] operations per QP.
    pub no_peak: bool,
    /// `-w`: the run fails unless a row this side measured reaches this average bandwidth
    /// (in the table's unit, MB/s or with `--report_gbits` Gb/s).
    pub limit_bw: Option<f64>,
    /// `-y`: the same for the message rate (Mpps).
    pub limit_msgrate: Option<f64>,
    /// `-I`: the largest message to send inline (0 to [`MAX_INLINE`]). Inline sends are a
    /// NIC's way of saving a DMA read; perftest disables them on a device it does not know,
    /// rdma_rxe or this endpoint, and so does this, with perftest's lines.
    pub inline_size: Option<u32>,
    /// `-l`: requests posted as lists of this many (perftest's post list), only the last
    /// of each asking for a completion; 1, the default, posts one at a time.
    pub post_list: u32,
    /// `-e`: completions waited for as events (perftest's completion channel). Our waits
    /// sleep on the device anyway: this changes perftest's header line, its refusal of
    /// `-D`, and keeps the moderation of large messages (as perftest's).
    pub events: bool,
}

/// perftest's largest `-I` (`MAX_INLINE`), and over UD (`MAX_INLINE_UD`).
pub const MAX_INLINE: u32 = 912;
const MAX_INLINE_UD: u32 = 884;

/// perftest measures no peak bandwidth above this many operations per QP (its
/// `force_dependecies`), printing 0.00.
pub const PEAK_MAX_ITERS: u32 = 20_000;

/// perftest's `DEF_QKEY`: the Q_Key of its UD QPs and of every UD message it sends.
pub const DEF_QKEY: u32 = 0x1111_1111;

/// The receives a SEND server keeps posted unless told (`-r`): perftest's default, at least
/// 512.
fn default_rx_depth(test: BwTest) -> u32 {
    test.defaults().rx_depth.max(512)
}

/// perftest's `UC_MAX_RX`: the receives a UC SEND server posts by default (at most `-n`).
pub const UC_MAX_RX: u32 = 16_000;

impl PerfOptions {
    /// The defaults of `test`, perftest's, as client of `server` or as server.
    pub fn new(test: BwTest, server: Option<String>) -> PerfOptions {
        let d = test.defaults();
        PerfOptions {
            test,
            server,
            port: crate::endpoint::oob::perftest::DEFAULT_PORT,
            size: d.size,
            iters: d.iters,
            tx_depth: d.tx_depth,
            rx_depth: default_rx_depth(test),
            mtu: None,
            gid_index: 1,
            timeout: Duration::from_secs(60),
            atomic: AtomicType::FetchAndAdd,
            all_sizes: false,
            duration: None,
            gbits: false,
            latency: false,
            use_srq: false,
            qp_timeout: 14,
            num_qps: 1,
            duplex: false,
            rdma_cm: false,
            tos: None,
            cq_mod: None,
            connection: QpType::Rc,
            size_given: false,
            rate_limit: RateLimit::default(),
            no_peak: false,
            limit_bw: None,
            limit_msgrate: None,
            inline_size: None,
            post_list: 1,
            events: false,
        }
    }

    /// `-c`: the service of the test's QPs. With UC or UD, the default RX depth becomes
    /// [`UC_MAX_RX`] (perftest's `force_dependecies`); an RX depth already changed stays.
    pub fn set_connection(&mut self, connection: QpType) {
        if connection != QpType::Rc && self.rx_depth == default_rx_depth(self.test) {
            self.rx_depth = UC_MAX_RX;
        }
        self.connection = connection;
    }

    /// Whether the peak bandwidth is measured: not with `-N`, nor above
    /// [`PEAK_MAX_ITERS`] operations per QP (duration mode has none either).
    fn measures_peak(&self) -> bool {
        !self.no_peak && self.iters <= PEAK_MAX_ITERS
    }

    /// Bytes per second in one unit of the bandwidth columns.
    fn unit(&self) -> f64 {
        if self.gbits { GBIT } else { MIB }
    }

    /// Whether this side's requests are held to `--rate_limit`: the bandwidth tests' client,
    /// and both sides of `-b` but SEND's (perftest's `run_iter_bi` paces nothing).
    fn paces(&self) -> bool {
        !self.latency
            && (self.server.is_some() || self.duplex)
            && !(self.duplex && self.test == BwTest::Send)
    }

    /// perftest's refusals of combinations it does not run, as one line each ([`run`]
    /// checks too).
    pub fn check(&self) -> Result<(), AppError> {
        let usage = |m: &str| Err(AppError::Usage(m.into()));
        if self.size == 0 || self.iters == 0 || self.tx_depth == 0 || self.rx_depth == 0 {
            return usage("size, iters, tx depth and rx depth must be positive");
        }
        if self.test == BwTest::Atomic && self.all_sizes {
            return usage("message size cannot be changed for atomic tests (-a)");
        }
        if self.all_sizes && self.duration.is_some() {
            return usage("duration mode (-D) does not run on all sizes (-a)");
        }
        if self.duration.is_some_and(|d| d.as_secs() < 1) {
            return usage("the duration (-D) is whole seconds, at least 1");
        }
        if self.use_srq && self.test != BwTest::Send {
            return usage("--use-srq applies to the send test only (its receives)");
        }
        match self.connection {
            QpType::Rc => {}
            QpType::Uc if matches!(self.test, BwTest::Read | BwTest::Atomic) => {
                return usage("UC connection not possible in READ/ATOMIC verbs");
            }
            QpType::Uc if self.rdma_cm => {
                return usage("UC is not supported in librdmacm (-R connects RC QPs)");
            }
            QpType::Ud if self.test != BwTest::Send => {
                return usage("UD connection only possible in SEND verb");
            }
            QpType::Uc | QpType::Ud => {}
        }
        if self.cq_mod == Some(0) {
            return usage("CQ moderation (-Q) must be positive");
        }
        self.rate_limit.check(self)?;
        // A limit below one burst a second, refused here rather than once connected (the
        // peer would see the connection drop): the largest size has the fewest messages a
        // second. Over UD that is the path MTU, known only then: the smallest MTU here
        // refuses nothing a run would take, and the run checks again.
        if self.paces() {
            let largest = largest_size(self, self.size, 256);
            self.rate_limit.pacer(largest, tx_depth(self))?;
        }
        for (limit, flag) in [(self.limit_bw, "-w"), (self.limit_msgrate, "-y")] {
            match limit {
                Some(l) if !(l >= 0.0 && l.is_finite()) => {
                    return usage(&format!(
                        "the limit of {flag} must be a number of at least 0"
                    ));
                }
                Some(_) if self.latency => {
                    return usage(&format!("{flag} is for the bandwidth tests, not --lat"));
                }
                _ => {}
            }
        }
        if self.events && self.duration.is_some() {
            return usage("Duration mode doesn't work with events (-e, -D)");
        }
        if self.post_list == 0 {
            return usage("the post list size (-l) must be positive");
        }
        if self.post_list > 1 {
            if self.latency {
                return usage(
                    "-l is for the bandwidth tests (perftest's latency tests post one at a time)",
                );
            }
            if self.duration.is_none() && !self.iters.is_multiple_of(self.post_list) {
                return usage("Number of iterations must be a multiple of post list size (-l)");
            }
            if self
                .cq_mod
                .is_some_and(|q| q > 0 && !self.post_list.is_multiple_of(q))
            {
                return usage("Post list size must be a multiple of CQ moderation (-l, -Q)");
            }
            if self.post_list > tx_depth(self) {
                return usage(
                    "the post list (-l) must fit the TX depth (-t), or nothing is posted",
                );
            }
        }
        if self.inline_size.is_some_and(|n| n > MAX_INLINE) {
            return usage(&format!(
                "Max inline should be between 0 and {MAX_INLINE} (-I)"
            ));
        }
        if self.qp_timeout > 31 {
            return usage("the QP timeout (-u) is an exponent of 0 to 31");
        }
        if self.size > MAX_SIZE {
            return usage(&format!("message size {} is above {MAX_SIZE}", self.size));
        }
        if !(1..=MAX_QPS).contains(&self.num_qps) {
            return usage(&format!("-q takes 1 to {MAX_QPS} QPs"));
        }
        if self.duplex && self.latency {
            return usage("-b is for the bandwidth tests (perftest's latency tests run no -b)");
        }
        if self.latency && self.num_qps > 1 {
            return usage("--lat runs one QP (perftest's latency tests take no -q)");
        }
        // The most it can take: over UD a path MTU of 4096 and the receive's GRH area.
        let largest = largest_size(self, self.size, 4096) + grh_area(self.connection);
        let per_qp = buffer_per_qp(largest, 4096);
        if per_qp.saturating_mul(self.num_qps as usize) > MAX_BUFFER {
            return usage(&format!(
                "-q {} QPs of {per_qp}-byte buffers pass the {} MiB this test may take",
                self.num_qps,
                MAX_BUFFER >> 20
            ));
        }
        Ok(())
    }
}

/// What one side did: its own measurement, and the table it prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfResult {
    /// This side's measurement (the passive WRITE/READ/atomic server measures nothing).
    pub own: Option<BwReport>,
    /// The row printed: ours, or the client's on a passive server.
    pub printed: BwReport,
    /// `--lat`: the latency figures this side printed (none on a passive server; `-a`:
    /// the last size's).
    pub latency: Option<LatReport>,
    /// `--lat -D`: the duration mode's figures this side printed.
    pub latency_duration: Option<LatDurationReport>,
}

/// The header's title, "Post List" in it with `-l` (perftest's `ctx_print_test_info`).
fn title(test: BwTest, atomic: AtomicType, latency: bool, duplex: bool, post_list: u32) -> String {
    let list = if post_list > 1 { "Post List " } else { "" };
    let kind = match (latency, duplex) {
        (true, _) => "Latency".to_string(),
        (false, true) => format!("Bidirectional {list}BW"),
        (false, false) => format!("{list}BW"),
    };
    match test {
        BwTest::Write => format!("RDMA_Write {kind} Test"),
        BwTest::Read => format!("RDMA_Read {kind} Test"),
        BwTest::Send => format!("Send {kind} Test"),
        BwTest::Atomic => format!("Atomic {} {kind} Test", atomic.name()),
    }
}

/// The bandwidth columns' unit as perftest names it.
fn bw_unit(gbits: bool) -> &'static str {
    if gbits { "Gb/sec" } else { "MB/sec" }
}

/// perftest's `RESULT_FMT` (`RESULT_FMT_G` in Gb/s): the line over the rows.
pub fn report_header(gbits: bool) -> String {
    let unit = bw_unit(gbits);
    format!(" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]\n")
}

/// perftest's `REPORT_FMT` row; in Gb/s below 0.1, `REPORT_FMT_EXT` (six decimals).
pub fn report_row(r: &BwReport, gbits: bool) -> String {
    if gbits && r.bw_avg < 0.1 {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}\n",
            r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
        )
    } else {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}\n",
            r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
        )
    }
}

/// One result under its header, and the closing line.
pub fn report_table(r: &BwReport, gbits: bool) -> String {
    format!("{}{}{LINE}\n", report_header(gbits), report_row(r, gbits))
}

/// The QP, its CQ and buffer, and the peer's keys, once connected.
#[derive(Debug, Clone)]
struct Setup {
    qpn: Qpn,
    cq: CqId,
    key: u32,
    /// The buffer's address, drawn per run as a process's heap would be.
    va: u64,
    /// Where in the buffer the peer's writes land: its second half in the WRITE latency
    /// test (perftest's `vaddr` of `buf + BUFF_SIZE`) and where SEND latency receives go,
    /// else 0.
    recv_offset: u64,
    /// Receive completions: `cq` but in the SEND latency test.
    recv_cq: CqId,
    /// `--use-srq`: where receives are posted instead of the QP's own queue.
    srq: Option<SrqId>,
    size: u32,
    /// The largest size of the run ([`largest_size`]).
    largest: u32,
    tx_depth: u32,
    cq_mod: u32,
    /// Every QP (`-q N`), the first being `qpn` above.
    lanes: Vec<Lane>,
    /// UD: the GRH area each receive starts with ([`GRH_LEN`] bytes before the message);
    /// else 0.
    grh: u32,
}

impl Setup {
    /// The sizes the test runs: `-a`'s 2, 4, ... up to [`Setup::largest`] (perftest's
    /// `size_max_pow`), or the one size.
    fn sizes(&self, opts: &PerfOptions) -> Vec<u32> {
        if opts.all_sizes {
            (1..=self.largest.trailing_zeros())
                .map(|e| 1 << e)
                .collect()
        } else {
            vec![self.size]
        }
    }

    /// Whether a QP's request `seq` (from 0) asks for a completion by moderation: every
    /// `cq_mod`-th does.
    fn moderated(&self, seq: u64) -> bool {
        (seq + 1).is_multiple_of(u64::from(self.cq_mod))
    }
}

/// One of the test's QPs: perftest runs `-n` operations on each.
#[derive(Debug, Clone, Copy)]
struct Lane {
    qpn: Qpn,
    /// Its block of the buffer (sends come from here; the peer's writes land here, or
    /// half a block further in the WRITE latency test).
    base: u64,
    peer: Keys,
    /// UD: where its messages go (the peer's QP, perftest's Q_Key).
    ud: Option<UdDest>,
}

/// Runs one bandwidth test as client or server; prints perftest's lines to `out`, those it
/// prints to its standard error too (see [`run_to`]).
pub fn run(
    rt: &mut Runtime,
    opts: &PerfOptions,
    out: &mut dyn Write,
) -> Result<PerfResult, AppError> {
    run_streams(rt, opts, out, None)
}

/// [`run`], with the lines perftest prints to its standard error on `err`: the UD message
/// size cut to the MTU, the rate limiter's fallback to SW and its burst size.
pub fn run_to(
    rt: &mut Runtime,
    opts: &PerfOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<PerfResult, AppError> {
    run_streams(rt, opts, out, Some(err))
}

fn run_streams(
    rt: &mut Runtime,
    opts: &PerfOptions,
    out: &mut dyn Write,
    err: Option<&mut dyn Write>,
) -> Result<PerfResult, AppError> {
    opts.check()?;
    let size = if opts.test == BwTest::Atomic {
        8
    } else {
        opts.size
    };
    let (mut conn, mut s) = setup(rt, opts, size, out, err)?;
    if opts.latency {
        let figures = lat::run(rt, opts, conn, &mut s, out)?;
        let _ = writeln!(out, "{LINE}");
        let printed = BwReport {
            size: u64::from(s.size),
            iters: u64::from(opts.iters),
            ..BwReport::default()
        };
        return Ok(PerfResult {
            own: None,
            printed,
            latency: figures.iterations,
            latency_duration: figures.duration,
        });
    }
    let mut verdict = Verdict::default();
    if opts.duplex {
        let r = run_duplex(rt, opts, conn, &mut s, out, &mut verdict)?;
        verdict.check(opts)?;
        return Ok(r);
    }
    let own = match (opts.server.is_some(), opts.test) {
        _ if opts.all_sizes => run_all_sizes(rt, opts, &mut conn, &mut s, out, &mut verdict)?,
        (true, _) => Some(Test::new(opts, &s).client(rt)?),
        (false, BwTest::Send) => Some(Test::new(opts, &s).send_server(rt)?),
        (false, _) => None,
    };
    let mine = own.unwrap_or(BwReport {
        size: u64::from(s.size),
        iters: u64::from(opts.iters),
        ..BwReport::default()
    });
    // A passive server waits through the whole test.
    let wait = opts.timeout + opts.duration.unwrap_or_default();
    let peer = conn.finish(rt, opts.test, &mine, wait)?;
    let printed = own.or(peer).unwrap_or(mine);
    let _ = match own {
        // Its rows are out already, one per size.
        Some(_) if opts.all_sizes => writeln!(out, "{LINE}"),
        _ => write!(out, "{}", report_table(&printed, opts.gbits)),
    };
    if let (Some(r), false) = (&own, opts.all_sizes) {
        verdict.note(opts, r);
    }
    verdict.check(opts)?;
    Ok(PerfResult {
        own,
        printed,
        latency: None,
        latency_duration: None,
    })
}

/// perftest's `-w` / `-y` verdict over the rows this side measured and printed: each limit
/// passes if any row reaches it (perftest ORs the rows of `-a`).
#[derive(Debug, Default)]
struct Verdict {
    rows: bool,
    bw: bool,
    msg_rate: bool,
}

impl Verdict {
    fn note(&mut self, opts: &PerfOptions, r: &BwReport) {
        self.rows = true;
        self.bw |= opts.limit_bw.is_none_or(|l| r.bw_avg >= l);
        self.msg_rate |= opts.limit_msgrate.is_none_or(|l| r.msg_rate >= l);
    }

    /// perftest's errors (exit 1) when a limit was not reached; none without a row (a
    /// passive server measures nothing).
    fn check(&self, opts: &PerfOptions) -> Result<(), AppError> {
        let unit = bw_unit(opts.gbits);
        match (self.rows, opts.limit_bw, opts.limit_msgrate) {
            (true, Some(l), _) if !self.bw => Err(AppError::Invalid(format!(
                "Error: BW result is below bw limit ({l} {unit}, -w)"
            ))),
            (true, _, Some(l)) if !self.msg_rate => Err(AppError::Invalid(format!(
                "Error: Msg rate is below msg_rate limit ({l} Mpps, -y)"
            ))),
            _ => Ok(()),
        }
    }
}

/// `-b`: both sides run the test at once, as perftest's bidirectional tests. WRITE, READ
/// and atomics shake hands once more and then both run `run_iter_bw`; SEND runs
/// `run_iter_bi` on both (the server sends from its first arrival on). Neither side is
/// passive: each measures its own requests, the two swap results, and each prints the sum
/// of both (`print_full_bw_report` with the remote report), its own size and count.
///
/// With `-a`, per size: SEND posts its receives and shakes hands, runs, swaps the results
/// and shakes hands again; the others shake hands, run, shake hands (perftest 4.6 and
/// later, as the 6.06 peers are) and swap. With `-D` each side posts on its own clock
/// ([`Window`]); SEND swaps nothing then and each side prints its own row, which counts
/// its sends and receives in the window (`run_iter_bi`'s `iters`).
fn run_duplex(
    rt: &mut Runtime,
    opts: &PerfOptions,
    mut conn: Dialogue,
    s: &mut Setup,
    out: &mut dyn Write,
    verdict: &mut Verdict,
) -> Result<PerfResult, AppError> {
    let send = opts.test == BwTest::Send;
    // The peer may still be finishing its half.
    let wait = opts.timeout + opts.duration.unwrap_or_default();
    if opts.all_sizes {
        let _ = write!(out, "{}", report_header(opts.gbits));
    }
    let mut last = None;
    for size in s.sizes(opts) {
        s.size = size;
        let mine = if send {
            if opts.all_sizes {
                post_receives(rt, opts, s)?;
                conn.sync(rt)?;
            }
            Test::new(opts, s).bidirectional_send(rt)?
        } else {
            conn.sync(rt)?;
            let mine = Test::new(opts, s).client(rt)?;
            if opts.all_sizes {
                conn.sync(rt)?;
            }
            mine
        };
        let printed = if send && opts.duration.is_some() {
            mine
        } else {
            let theirs = conn.exchange_reports(rt, &mine, wait)?;
            BwReport {
                bw_peak: mine.bw_peak + theirs.bw_peak,
                bw_avg: mine.bw_avg + theirs.bw_avg,
                msg_rate: mine.msg_rate + theirs.msg_rate,
                ..mine
            }
        };
        if send && opts.all_sizes {
            conn.sync(rt)?;
        }
        let _ = match opts.all_sizes {
            true => write!(out, "{}", report_row(&printed, opts.gbits)),
            false => write!(out, "{}", report_table(&printed, opts.gbits)),
        };
        verdict.note(opts, &printed);
        let _ = out.flush();
        last = Some((mine, printed));
    }
    if opts.all_sizes {
        let _ = writeln!(out, "{LINE}");
    }
    conn.close(rt, wait)?;
    let (mine, printed) = last.unwrap_or_default();
    Ok(PerfResult {
        own: Some(mine),
        printed,
        latency: None,
        latency_duration: None,
    })
}

/// Posts each QP's receives (or the SRQ's) for the next size of `-a`: `-r`, at most `-n`.
fn post_receives(rt: &mut Runtime, opts: &PerfOptions, s: &Setup) -> Result<(), AppError> {
    let queues = if s.srq.is_some() { 1 } else { s.lanes.len() };
    for lane in 0..queues {
        for _ in 0..opts.rx_depth.min(opts.iters) {
            post_lane_receive(rt, s, lane)?;
        }
    }
    Ok(())
}

/// `-a`: every size from 2 bytes to [`MAX_SIZE`] (UD: to the MTU), a row each. The client of
/// WRITE and READ runs them back to back; SEND's two sides post, handshake, run and handshake
/// again per size (ib_send_bw's `RUN_ALL`). Returns the last size's figures (`None` on a passive
/// server, which learns the client's at the end).
fn run_all_sizes(
    rt: &mut Runtime,
    opts: &PerfOptions,
    conn: &mut Dialogue,
    s: &mut Setup,
    out: &mut dyn Write,
    verdict: &mut Verdict,
) -> Result<Option<BwReport>, AppError> {
    let client = opts.server.is_some();
    let send = opts.test == BwTest::Send;
    if !client && !send {
        return Ok(None);
    }
    let _ = write!(out, "{}", report_header(opts.gbits));
    let mut last = None;
    for size in s.sizes(opts) {
        s.size = size;
        let r = if send {
            if !client {
                post_receives(rt, opts, s)?;
            }
            conn.sync(rt)?;
            let test = Test::new(opts, s);
            let r = if client {
                test.client(rt)?
            } else {
                test.send_server(rt)?
            };
            conn.sync(rt)?;
            r
        } else {
            Test::new(opts, s).client(rt)?
        };
        let _ = write!(out, "{}", report_row(&r, opts.gbits));
        let _ = out.flush();
        verdict.note(opts, &r);
        last = Some(r);
    }
    Ok(last)
}

/// The dialogue up to the first traffic: TCP, negotiation, buffer and QP, keys, header
/// lines, QP connection and the syncs before the test.
fn setup(
    rt: &mut Runtime,
    opts: &PerfOptions,
    size: u32,
    out: &mut dyn Write,
    mut err: Option<&mut dyn Write>,
) -> Result<(Dialogue, Setup), AppError> {
    if opts.post_list > 1 && opts.cq_mod.is_none() {
        // perftest's, as it parses its options.
        let _ = writeln!(
            out,
            "{LINE}\nPost List requested - CQ moderation will be the size of the post list"
        );
    }
    inline_lines(opts, out, &mut err);
    let link_mtu = Mtu::for_link_mtu(rt.capabilities().mtu as u32).unwrap_or(Mtu::M256);
    let mtu = opts.mtu.unwrap_or(link_mtu);
    check_mtu(rt, mtu)?;
    // perftest refuses a UD size asked for above its MTU before it connects.
    if opts.connection == QpType::Ud && opts.size_given && !opts.all_sizes && size > mtu.bytes() {
        return Err(AppError::Usage(format!(
            "Max message size in UD cannot be greater than MTU ({} bytes)",
            mtu.bytes()
        )));
    }
    let local = Negotiation {
        sys: SysData::default(),
        mtu: IbMtu::from_bytes(mtu.bytes()).unwrap_or(IbMtu::Mtu1024),
    };
    if opts.rdma_cm && opts.server.is_none() {
        // perftest's banner before it waits for the client (`FULL_VERBOSITY`).
        let stars = "************************************";
        let _ = writeln!(
            out,
            "\n{stars}\n* Waiting for client to connect... *\n{stars}"
        );
        let _ = out.flush();
    }
    let (mut opening, agreed) = open(rt, opts, &local)?;
    let mtu = Mtu::from_bytes(agreed.mtu.bytes()).unwrap_or(Mtu::M1024);
    // A UD message is one packet: perftest takes the MTU instead of its default size, and
    // -a stops there.
    let ud = opts.connection == QpType::Ud;
    let size = if ud && (size > mtu.bytes() || opts.all_sizes) {
        let _ = writeln!(
            stderr(out, &mut err),
            " Max msg size in UD is MTU {}\n Changing to this MTU",
            mtu.bytes()
        );
        mtu.bytes()
    } else {
        size
    };
    let grh = grh_area(opts.connection);

    // perftest's buffer: per QP, twice the larger of the message (-a: the largest) and the
    // cycle buffer; QP i's block starts at i times that.
    let largest = largest_size(opts, size, mtu.bytes());
    let per_qp = buffer_per_qp(largest + grh, agreed.sys.cycle_buffer);
    let n_qps = opts.num_qps as usize;
    let va = super::super::ids::random_va(per_qp * n_qps);
    let key = rt.register_mr(va, vec![0; per_qp * n_qps], Access::ALL)?;
    let recv_offset = if opts.latency && matches!(opts.test, BwTest::Write | BwTest::Send) {
        (per_qp / 2) as u64
    } else {
        0
    };
    let tx_depth = tx_depth(opts);
    // Moderation is off for large messages unless asked for, but not with -a (perftest
    // cannot change it between sizes) nor -e (perftest's events); never beyond the TX
    // depth (force_dependecies).
    let large = size > 8192 && !opts.all_sizes && !opts.events;
    // A post list (-l) asks for a completion at the end of each (perftest sets the
    // moderation to its size unless -Q says otherwise).
    let cq_mod = match opts.cq_mod {
        Some(q) => q,
        None if opts.post_list > 1 => opts.post_list,
        None if large => 1,
        None => 100,
    }
    .min(tx_depth);
    // One CQ for every QP, as perftest's.
    let cq = rt.create_cq(n_qps * (tx_depth + opts.rx_depth) as usize);
    let mut init = QpInit::new(opts.connection, cq);
    // ib_send_lat waits on receives and sends apart.
    let lat_send = opts.latency && opts.test == BwTest::Send;
    if lat_send {
        init.recv_cq = rt.create_cq(opts.rx_depth as usize);
    }
    let recv_cq = init.recv_cq;
    let srq = if opts.use_srq {
        let srq_init = SrqInit::new(PdId::DEFAULT, opts.rx_depth);
        let id = rt.host_mut().engine_mut().create_srq(srq_init);
        Some(id.map_err(RuntimeError::from)?)
    } else {
        None
    };
    init.srq = srq;
    init.max_send_wr = tx_depth;
    init.max_recv_wr = opts.rx_depth;
    // Responder resources for READs and atomics; 1 elsewhere, as perftest advertises.
    let out_reads = match opts.test {
        BwTest::Read | BwTest::Atomic => MAX_RD_ATOMIC,
        BwTest::Write | BwTest::Send => 1,
    };
    let gid = local_gid(rt, opts.gid_index)?;
    // With -a, receives are posted size by size (`run_all_sizes`).
    // Both sides of ib_send_lat receive.
    let receiving = (opts.server.is_none() || opts.latency || opts.duplex)
        && opts.test == BwTest::Send
        && !opts.all_sizes;
    let mut paths = Vec::with_capacity(n_qps);
    let mut keys = Vec::with_capacity(n_qps);
    for i in 0..n_qps {
        let qpn = rt.create_qp(init)?;
        let psn = random_psn();
        let mut path = QpPath::new(opts.connection, gid.into(), Qpn::new(0), psn, psn, mtu);
        path.access = Access::ALL;
        path.max_dest_rd_atomic = out_reads;
        path.min_rnr_timer = RnrTimer::new(12);
        path.timeout = opts.qp_timeout;
        match opening {
            Opening::Tcp(_) => {
                path.qkey = DEF_QKEY;
                rt.init_qp(qpn, &path)?;
            }
            // librdmacm's `ucma_init_ud_qp`: a UD QP goes to RTS at once, with rdma_cm's
            // Q_Key, before it is resolved.
            Opening::Cm(_) if ud => {
                path.qkey = RDMA_UDP_QKEY;
                rt.init_qp(qpn, &path)?;
                let engine = rt.host_mut().engine_mut();
                crate::endpoint::connect::to_rts(engine, qpn, &path).map_err(RuntimeError::from)?;
            }
            Opening::Cm(_) => {}
        }
        let base = va + (i * per_qp) as u64;
        paths.push((qpn, path));
        keys.push(Keys {
            lid: 0,
            out_reads: u16::from(out_reads),
            qpn,
            psn,
            rkey: key,
            vaddr: base + recv_offset,
            gid: Some(gid),
            srqn: 0,
        });
    }
    // -R -c UD: where each QP sends, from rdma_cm (none on a server that only receives).
    let mut resolved = Vec::new();
    if let Opening::Cm(d) = &mut opening {
        if ud {
            let lanes: Vec<cm::UdLane> = (paths.iter().enumerate())
                .map(|(i, (qpn, _))| cm::UdLane {
                    qpn: *qpn,
                    cq,
                    recv_cq,
                    key,
                    va,
                    addr: va + (i * per_qp) as u64,
                })
                .collect();
            resolved = d.resolve_data(rt, &lanes, opts.latency || opts.duplex)?;
        } else {
            // rdma_cm takes the QPs to RTS here, one connection each.
            let qpns: Vec<Qpn> = paths.iter().map(|(qpn, _)| *qpn).collect();
            d.connect_data(rt, &qpns, out_reads, mtu)?;
        }
    }
    if receiving {
        let posted = match opts.duration {
            Some(_) => opts.rx_depth,
            None => opts.rx_depth.min(opts.iters),
        };
        // An SRQ is filled once, for every QP.
        let queues = if srq.is_some() { 1 } else { n_qps };
        for (i, (qpn, _)) in paths.iter().enumerate().take(queues) {
            let base = va + (i * per_qp) as u64;
            for _ in 0..posted {
                post_receive(rt, *qpn, srq, recv_wr(key, base + recv_offset, size + grh))?;
            }
        }
    }
    let mut conn = match opening {
        Opening::Tcp(negotiated) => {
            Dialogue::Tcp(rt.serve_while(move || negotiated.exchange_all_keys(keys))??)
        }
        Opening::Cm(mut d) => {
            d.exchange_keys(rt, keys)?;
            Dialogue::Cm(Box::new(d))
        }
    };
    // The latency tests but ib_send_lat shake hands once more before connecting.
    if opts.latency && !lat_send {
        conn.sync(rt)?;
    }
    let header = Header {
        opts,
        tx_depth,
        cq_mod,
        mtu,
        out_reads,
    };
    let mut lines = String::new();
    if large && opts.cq_mod.is_some() && cq_mod > 1 {
        // perftest's warning, from its parser, when -Q asked for it: the moderation hides
        // when each large message completed (not -l's own).
        lines.push_str(&format!(
            "{LINE}\nWarning: Large message requested and CQ moderation enabled\n\
             Warning: It can lead to inaccurate results\n"
        ));
    }
    // The rate limiter's lines: perftest's standard error, or in their place after the
    // warning with one stream.
    let rate_lines = opts.rate_limit.lines(tx_depth);
    match &mut err {
        Some(e) => {
            let _ = write!(e, "{rate_lines}");
        }
        None => lines.push_str(&rate_lines),
    }
    lines.push_str(&header.lines());
    for keys in conn.locals() {
        lines.push_str(&keys.print_lines("local", opts.test));
    }
    for keys in conn.peers() {
        lines.push_str(&keys.print_lines("remote", opts.test));
    }
    let _ = writeln!(out, "{lines}{LINE}");
    let mut lanes = Vec::with_capacity(n_qps);
    for (i, ((qpn, mut path), peer)) in paths.into_iter().zip(conn.peers()).enumerate() {
        path.dest = peer_addr(peer.gid.unwrap_or(std::net::Ipv6Addr::UNSPECIFIED))?;
        let ud_dest = match &conn {
            _ if !ud => None,
            Dialogue::Tcp(_) => Some(UdDest::new(path.dest, peer.qpn, DEF_QKEY)),
            Dialogue::Cm(_) => resolved.get(i).copied().flatten(),
        };
        path.dest_qp = peer.qpn;
        path.rq_psn = peer.psn;
        path.max_rd_atomic = peer.out_reads.clamp(1, u16::from(MAX_RD_ATOMIC)) as u8;
        // rdma_cm moved the QP to RTS already, with the PSNs of the REQ and REP.
        if let Dialogue::Tcp(_) = conn {
            rt.connect_qp(qpn, &path)?;
        }
        lanes.push(Lane {
            qpn,
            base: va + (i * per_qp) as u64,
            peer: *peer,
            ud: ud_dest,
        });
    }
    // -a's SEND takes its last handshake before each size.
    let last = !(opts.all_sizes && opts.test == BwTest::Send);
    syncs_after_connect(rt, &mut conn, opts.test, last)?;
    let setup = Setup {
        qpn: lanes[0].qpn,
        cq,
        key,
        va,
        recv_offset,
        recv_cq,
        srq,
        size,
        largest,
        tx_depth,
        cq_mod,
        lanes,
        grh,
    };
    Ok((conn, setup))
}

/// perftest's handshakes between connecting the QPs and the test: after the round that
/// prints the remote side (one per QP), one more (write, read, atomic); send has one before
/// that round too, and its last follows the server's posting of its receives (`last`: -a
/// posts and shakes hands per size instead). With one QP: [`BwTest::syncs_after_connect`].
fn syncs_after_connect(
    rt: &mut Runtime,
    conn: &mut Dialogue,
    test: BwTest,
    last: bool,
) -> Result<(), AppError> {
    if test == BwTest::Send {
        conn.sync(rt)?;
    }
    conn.sync_each(rt)?;
    if last { conn.sync(rt) } else { Ok(()) }
}

/// perftest's lines about inline sends, before anything else: `-I` above the UD maximum is
/// cut to it, then inline sends are disabled on a device perftest does not know (rxe, ours)
/// when asked for, or for READ and atomics (which set the size to 0 first, so it is never
/// perftest's "default" there).
fn inline_lines(opts: &PerfOptions, out: &mut dyn Write, err: &mut Option<&mut dyn Write>) {
    let read_or_atomic = matches!(opts.test, BwTest::Read | BwTest::Atomic);
    if opts.connection == QpType::Ud && opts.inline_size.is_some_and(|n| n > MAX_INLINE_UD) {
        let _ = writeln!(out, "{LINE}");
        let _ = writeln!(
            stderr(out, err),
            "Setting inline size to {MAX_INLINE_UD} (Max inline size in UD)"
        );
    }
    if opts.inline_size.is_some() || read_or_atomic {
        let _ = writeln!(out, "{LINE}");
        let _ = writeln!(
            stderr(out, err),
            "Device not recognized to implement inline feature. Disabling it"
        );
    }
}

/// Where perftest's standard error lines go: `err`, or with `out`'s when there is none.
fn stderr<'a>(out: &'a mut dyn Write, err: &'a mut Option<&mut dyn Write>) -> &'a mut dyn Write {
    match err {
        Some(e) => *e,
        None => out,
    }
}

/// Requests outstanding per QP at most: `-t`, or fewer when the run has fewer (duration
/// mode has no count to stay under).
fn tx_depth(opts: &PerfOptions) -> u32 {
    match opts.duration {
        Some(_) => opts.tx_depth,
        None => opts.tx_depth.min(opts.iters),
    }
}

/// The largest message of a run of `size` over a path MTU of `mtu`: with `-a`
/// [`MAX_SIZE`], or the MTU over UD (a UD message is one packet).
fn largest_size(opts: &PerfOptions, size: u32, mtu: u32) -> u32 {
    match opts.all_sizes {
        true if opts.connection == QpType::Ud => mtu,
        true => MAX_SIZE,
        false => size,
    }
}

/// The GRH area a receive of `connection` starts with: [`GRH_LEN`] bytes over UD, else
/// none.
fn grh_area(connection: QpType) -> u32 {
    if connection == QpType::Ud {
        GRH_LEN as u32
    } else {
        0
    }
}

/// Bytes of buffer per QP: twice the larger of the largest message (UD: with its receive's
/// GRH area, perftest's `SIZE`) and the cycle buffer, as perftest's `BUFF_SIZE` times two.
fn buffer_per_qp(largest: u32, cycle_buffer: u32) -> usize {
    2 * (largest as usize).max(cycle_buffer as usize)
}

/// The dialogue before the keys: negotiated over TCP, or over `-R`'s rdma_cm connection.
enum Opening {
    Tcp(Negotiated),
    Cm(cm::CmDialogue),
}

/// Connects the dialogue (TCP or rdma_cm) and agrees on versions, system data and MTU.
fn open(
    rt: &mut Runtime,
    opts: &PerfOptions,
    local: &Negotiation,
) -> Result<(Opening, Agreed), AppError> {
    if opts.rdma_cm {
        let mut d = cm::CmDialogue::open(rt, opts)?;
        let agreed = d.negotiate(rt, local)?;
        return Ok((Opening::Cm(d), agreed));
    }
    let timeout = Some(opts.timeout);
    let session = match &opts.server {
        Some(server) => rt.serve_while(|| {
            let stream = connect((server.as_str(), opts.port), opts.timeout)?;
            Session::new(stream, Role::Client, timeout)
        })??,
        None => {
            let listener = listen(opts.port)?;
            rt.serve_while(|| {
                let stream = accept(&listener, timeout)?;
                Session::new(stream, Role::Server, timeout)
            })??
        }
    };
    let local = *local;
    let (negotiated, agreed) = rt.serve_while(move || session.negotiate(&local))??;
    Ok((Opening::Tcp(negotiated), agreed))
}

/// The dialogue once the keys are swapped: syncs, results and the close.
pub(super) enum Dialogue {
    Tcp(Connected),
    Cm(Box<cm::CmDialogue>),
}

impl Dialogue {
    /// Our keys, one per QP.
    fn locals(&self) -> &[Keys] {
        match self {
            Dialogue::Tcp(c) => c.locals(),
            Dialogue::Cm(d) => d.locals(),
        }
    }

    /// The peer's keys, in the order of [`Dialogue::locals`].
    fn peers(&self) -> &[Keys] {
        match self {
            Dialogue::Tcp(c) => c.peers(),
            Dialogue::Cm(d) => d.peers(),
        }
    }

    /// perftest's barrier, one key handshake.
    fn sync(&mut self, rt: &mut Runtime) -> Result<(), AppError> {
        match self {
            Dialogue::Tcp(c) => Ok(rt.serve_while(|| c.sync())??),
            Dialogue::Cm(d) => d.sync(rt),
        }
    }

    /// One handshake per QP ([`Connected::sync_each`]).
    fn sync_each(&mut self, rt: &mut Runtime) -> Result<(), AppError> {
        match self {
            Dialogue::Tcp(c) => Ok(rt.serve_while(|| c.sync_each())??),
            Dialogue::Cm(d) => d.sync_each(rt),
        }
    }

    /// `-b`: the results swapped (the peer's returned); `wait` bounds the wait.
    fn exchange_reports(
        &mut self,
        rt: &mut Runtime,
        mine: &BwReport,
        wait: Duration,
    ) -> Result<BwReport, AppError> {
        match self {
            Dialogue::Tcp(c) => {
                c.set_timeout(Some(wait))?;
                Ok(rt.serve_while(|| c.exchange_reports(mine))??)
            }
            Dialogue::Cm(d) => d.exchange_reports(rt, mine),
        }
    }

    /// Everything after the test ([`Connected::finish`]); `wait` bounds the first wait.
    fn finish(
        self,
        rt: &mut Runtime,
        test: BwTest,
        mine: &BwReport,
        wait: Duration,
    ) -> Result<Option<BwReport>, AppError> {
        match self {
            Dialogue::Tcp(mut c) => {
                c.set_timeout(Some(wait))?;
                let mine = *mine;
                Ok(rt.serve_while(move || c.finish(test, &mine))??)
            }
            Dialogue::Cm(d) => d.finish(rt, test, mine, wait),
        }
    }

    /// The closing sync alone (the latency tests, `-b`); `wait` bounds it.
    fn close(self, rt: &mut Runtime, wait: Duration) -> Result<(), AppError> {
        match self {
            Dialogue::Tcp(mut c) => {
                c.set_timeout(Some(wait))?;
                Ok(rt.serve_while(move || c.close())??)
            }
            Dialogue::Cm(d) => d.close(rt, wait),
        }
    }

    /// No closing sync (ib_write_lat): TCP just hangs up, `-R` tears its connections down.
    fn hang_up(self, rt: &mut Runtime) -> Result<(), AppError> {
        match self {
            Dialogue::Tcp(_) => Ok(()),
            Dialogue::Cm(d) => d.hang_up(rt),
        }
    }
}

/// A receive on the QP's own queue, or on its SRQ (`--use_srq`).
fn post_receive(
    rt: &mut Runtime,
    qpn: Qpn,
    srq: Option<SrqId>,
    wr: RecvWr,
) -> Result<(), AppError> {
    match srq {
        Some(id) => {
            let posted = rt.host_mut().engine_mut().post_srq_recv(id, wr);
            Ok(posted.map_err(RuntimeError::from)?)
        }
        None => Ok(rt.post_recv(qpn, wr)?),
    }
}

fn recv_wr(key: u32, va: u64, size: u32) -> RecvWr {
    RecvWr::new(
        0,
        Sge {
            addr: va,
            length: size,
            lkey: key,
        },
    )
}

/// perftest's parameter block, as much of it as applies.
struct Header<'a> {
    opts: &'a PerfOptions,
    tx_depth: u32,
    cq_mod: u32,
    mtu: Mtu,
    out_reads: u8,
}

impl Header<'_> {
    fn lines(&self) -> String {
        let o = self.opts;
        // -e: perftest's line after the title, the device's name and completion vector 0.
        let events = if o.events {
            " Test with events. Using roce_comp0\n"
        } else {
            ""
        };
        let mut s = format!(
            "{LINE}\n                    {}\n{events} \
             Dual-port       : OFF\t\tDevice         : roce\n \
             Number of qps   : {}\t\tTransport type : IB\n \
             Connection type : {}\t\tUsing SRQ      : {}\n",
            title(o.test, o.atomic, o.latency, o.duplex, o.post_list),
            o.num_qps,
            o.connection.transport().prefix(),
            if o.use_srq { "ON" } else { "OFF" }
        );
        // perftest 4.5 built without PCIe relaxed ordering support says "Unsupported" (a
        // software device has no PCIe); rdma_rxe has no ibv_wr_* API, so its "OFF".
        s.push_str(" PCIe relax order: Unsupported\n ibv_wr* API     : OFF\n");
        // ctx_print_test_info: a sender's TX depth, a receiver's RX depth; -b both.
        if o.server.is_some() || o.duplex {
            s.push_str(&format!(" TX depth        : {}\n", self.tx_depth));
        }
        if o.post_list > 1 {
            s.push_str(&format!(" Post List       : {}\n", o.post_list));
        }
        if o.test == BwTest::Send && (o.server.is_none() || o.duplex) {
            s.push_str(&format!(" RX depth        : {}\n", o.rx_depth));
        }
        if !o.latency {
            s.push_str(&format!(" CQ Moderation   : {}\n", self.cq_mod));
        }
        s.push_str(&format!(
            " Mtu             : {}[B]\n Link type       : Ethernet\n GID index       : {}\n",
            self.mtu.bytes(),
            o.gid_index
        ));
        // ctx_print_test_info: READ and atomics show their outstanding reads instead of the
        // inline size.
        if matches!(o.test, BwTest::Read | BwTest::Atomic) {
            s.push_str(&format!(" Outstand reads  : {}\n", self.out_reads));
        } else {
            s.push_str(" Max inline data : 0[B]\n");
        }
        let (qps, method) = if o.rdma_cm {
            ("ON", "rdma_cm")
        } else {
            ("OFF", "Ethernet")
        };
        s.push_str(&format!(
            " rdma_cm QPs\t : {qps}\n Data ex. method : {method}\n{LINE}\n"
        ));
        s
    }
}

fn stalled(opts: &PerfOptions, done: u32) -> AppError {
    AppError::Stalled {
        after: opts.timeout,
        progress: format!("{done} of {} operations complete", opts.iters),
    }
}

/// perftest's peak: the shortest time per message over any run of messages `i..=j`,
/// `(tcompleted[j] - tposted[i]) / (j - i + 1)`.
///
/// perftest tries every pair, quadratic in the messages (seconds of CPU after a long run).
/// Here it is the smallest slope from a point `(i, tposted[i])` to a point
/// `(j + 1, tcompleted[j])` with `i <= j`: for each `j` the best `i` is where the line from
/// the completion touches the upper convex hull of the posts so far, found by binary search
/// along the hull, so the whole is `O(n log n)` and exact (integer nanoseconds, slopes
/// compared by cross-multiplying).
fn peak_delta(posted: &[Instant], completed: &[Instant]) -> Duration {
    let Some(origin) = posted.first() else {
        return Duration::MAX;
    };
    let ns = |t: &Instant| t.saturating_duration_since(*origin).as_nanos() as i128;
    let mut hull: Vec<Point> = Vec::new();
    // The best run so far as (time, messages).
    let mut best: Option<(i128, i128)> = None;
    for (j, (post, done)) in posted.iter().zip(completed).enumerate() {
        let a = (j as i128, ns(post));
        while let [.., o, m] = hull[..] {
            if cross(o, m, a) < 0 {
                break;
            }
            hull.pop();
        }
        hull.push(a);
        let b = (j as i128 + 1, ns(done));
        // The first hull vertex whose next edge is no steeper than its line to `b`.
        let (mut lo, mut hi) = (0, hull.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if slope_le(hull[mid], hull[mid + 1], hull[mid], b) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let run = (b.1 - hull[lo].1, b.0 - hull[lo].0);
        if best.is_none_or(|(t, n)| run.0 * n < t * run.1) {
            best = Some(run);
        }
    }
    match best {
        Some((t, n)) => Duration::from_nanos((t.max(0) / n) as u64),
        None => Duration::MAX,
    }
}

/// (message index, nanoseconds).
type Point = (i128, i128);

/// Twice the signed area of `o`, `a`, `b`: positive when they turn counter-clockwise.
fn cross(o: Point, a: Point, b: Point) -> i128 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

/// Slope of `p -> q` <= slope of `r -> s` (both going right).
fn slope_le(p: Point, q: Point, r: Point, s: Point) -> bool {
    (q.1 - p.1) * (s.0 - r.0) <= (s.1 - r.1) * (q.0 - p.0)
}

/// The figures of `posted.len()` messages of `size` bytes: the average from the first post
/// to the last completion, and the peak of [`peak_delta`], bandwidth in `unit`s (bytes per
/// second) of [`PerfOptions::unit`].
fn report(size: u32, posted: &[Instant], completed: &[Instant], unit: f64, peak: bool) -> BwReport {
    let (Some(first), Some(last)) = (posted.first(), completed.last()) else {
        return BwReport::default();
    };
    let secs = last
        .saturating_duration_since(*first)
        .as_secs_f64()
        .max(1e-9);
    let iters = completed.len() as f64;
    let bw_peak = match peak {
        true => f64::from(size) / peak_delta(posted, completed).as_secs_f64().max(1e-9) / unit,
        false => 0.0,
    };
    BwReport {
        size: u64::from(size),
        iters: completed.len() as u64,
        bw_peak,
        bw_avg: f64::from(size) * iters / secs / unit,
        msg_rate: iters / secs / 1e6,
    }
}

/// The work request of the test towards `peer`'s buffer.
fn lane_op(opts: &PerfOptions, peer: &Keys) -> SendOp {
    let (addr, rkey) = (peer.vaddr, peer.rkey);
    match opts.test {
        BwTest::Write => SendOp::Write {
            remote_addr: addr,
            rkey,
        },
        BwTest::Read => SendOp::Read {
            remote_addr: addr,
            rkey,
        },
        BwTest::Send => SendOp::Send,
        BwTest::Atomic => match opts.atomic {
            AtomicType::FetchAndAdd => SendOp::FetchAdd {
                remote_addr: addr,
                rkey,
                add: 1,
            },
            AtomicType::CmpAndSwap => SendOp::CompareSwap {
                remote_addr: addr,
                rkey,
                compare: 0,
                swap: 0,
            },
        },
    }
}

fn lane_sge(s: &Setup, addr: u64) -> SgList {
    SgList::from(Sge {
        addr,
        length: s.size,
        lkey: s.key,
    })
}

/// A work request's id: its QP's index in the high half, its number on that QP in the
/// low half (one QP: just the number).
fn wr_id(lane: usize, seq: u64) -> u64 {
    ((lane as u64) << 32) | (seq & 0xffff_ffff)
}

/// What a completion stands for: its QP's index and how many of that QP's requests are
/// done with it, every unsignaled one before it included (IBA 10.8.3).
fn completed_upto(wc_id: u64) -> (usize, u64) {
    ((wc_id >> 32) as usize, (wc_id & 0xffff_ffff) + 1)
}

/// Each QP's count of posted and completed operations, and the totals.
#[derive(Debug)]
struct Counts {
    posted: Vec<u64>,
    completed: Vec<u64>,
    total_posted: u64,
    total_completed: u64,
}

impl Counts {
    fn new(lanes: usize) -> Counts {
        Counts {
            posted: vec![0; lanes],
            completed: vec![0; lanes],
            total_posted: 0,
            total_completed: 0,
        }
    }

    /// Notes a completion; returns how many operations it completed.
    fn complete(&mut self, wc_id: u64) -> u64 {
        let (lane, upto) = completed_upto(wc_id);
        let Some(done) = self.completed.get_mut(lane) else {
            return 0;
        };
        let upto = upto.min(self.posted[lane]);
        let new = upto.saturating_sub(*done);
        *done += new;
        self.total_completed += new;
        new
    }
}

/// Each QP's work request and scatter list.
fn lane_ops(opts: &PerfOptions, s: &Setup) -> Vec<(SendOp, SgList)> {
    s.lanes
        .iter()
        .map(|l| (lane_op(opts, &l.peer), lane_sge(s, l.base)))
        .collect()
}

/// One size's test on the connected QPs: the options, the setup, and each QP's work
/// request and scatter list (the latency tests post on the first QP alone).
struct Test<'a> {
    opts: &'a PerfOptions,
    s: &'a Setup,
    ops: Vec<(SendOp, SgList)>,
}

impl<'a> Test<'a> {
    fn new(opts: &'a PerfOptions, s: &'a Setup) -> Test<'a> {
        Test {
            opts,
            s,
            ops: lane_ops(opts, s),
        }
    }

    /// The requester's side: `-n` operations per QP, or for `-D`.
    fn client(&self, rt: &mut Runtime) -> Result<BwReport, AppError> {
        match self.opts.duration {
            Some(d) => self.client_for(rt, d),
            None => self.iters(rt, None),
        }
    }

    /// `-b` SEND: sends and receives, `-n` per QP each way, or for `-D`.
    fn bidirectional_send(&self, rt: &mut Runtime) -> Result<BwReport, AppError> {
        match self.opts.duration {
            Some(d) => self.bidirectional_send_for(rt, d),
            None => self.iters(rt, Some(Receives::new(self.opts, self.s))),
        }
    }

    /// The SEND server: `-n` messages per QP received, or for `-D`.
    fn send_server(&self, rt: &mut Runtime) -> Result<BwReport, AppError> {
        match self.opts.duration {
            Some(d) => self.send_server_for(rt, d),
            None => self.send_server_iters(rt),
        }
    }

    /// One pass over the QPs, posting on each while it has fewer than `tx_depth` outstanding
    /// and `next(qp, seq)` says it posts its request `seq` (`Some`, and whether that asks for a
    /// completion); the time of each post is kept in `posted_at` when given.
    ///
    /// A `pacer` (`--rate_limit`) holds posts back between its bursts.
    fn post_round(
        &self,
        rt: &mut Runtime,
        n: &mut Counts,
        mut next: impl FnMut(usize, u64) -> Option<bool>,
        mut posted_at: Option<&mut Vec<Instant>>,
        mut pacer: Option<&mut Pacer>,
    ) -> Result<(), AppError> {
        // Posting only queues (nothing leaves before the next poll): a round's requests
        // start together, and one clock read stamps them all (one per request was 4% of a
        // 64-byte SEND client's user time).
        let mut round_start = None;
        // -l: a whole list at a time, when the TX depth has room for all of it (perftest's
        // run_iter_bw), the pacer asked once a list.
        let list = u64::from(self.opts.post_list);
        for (i, lane) in self.s.lanes.iter().enumerate() {
            loop {
                let seq = n.posted[i];
                // A list starts only with room for all of it, and is then posted whole.
                let outstanding = n.posted[i] - n.completed[i];
                if seq.is_multiple_of(list) && outstanding + list > u64::from(self.s.tx_depth) {
                    break;
                }
                // The pacer before `next`, whose answer marks the request as posted (the
                // last signaled one of -D): a burst may so start with nothing left to post,
                // which only delays no one.
                if seq.is_multiple_of(list)
                    && let Some(p) = pacer.as_deref_mut()
                    && !p.may_post(*round_start.get_or_insert_with(Instant::now))
                {
                    return Ok(());
                }
                let Some(signaled) = next(i, seq) else {
                    break;
                };
                if let Some(p) = pacer.as_deref_mut() {
                    p.posted();
                }
                let (op, sge) = &self.ops[i];
                let mut wr = SendWr::new(wr_id(i, seq), *op, sge.clone());
                wr.signaled = signaled;
                wr.ud = lane.ud;
                rt.post_send(lane.qpn, wr)?;
                if let Some(at) = posted_at.as_deref_mut() {
                    at.push(*round_start.get_or_insert_with(Instant::now));
                }
                n.posted[i] += 1;
                n.total_posted += 1;
            }
        }
        Ok(())
    }

    /// Posts `iters` operations on each QP, at most `tx_depth` outstanding per QP, a
    /// completion every `cq_mod` (perftest's `run_iter_bw`: a pass over the QPs posting what
    /// each may, then one poll of the shared CQ). Measured over this side's requests.
    ///
    /// With `recv`, `-b` SEND (perftest's `run_iter_bi`): the same sends while taking the
    /// peer's SENDs into the receives posted at setup, reposting each until every QP has had
    /// `iters`; ends when both counts are complete. The server starts sending only once the
    /// client's first SEND has arrived.
    fn iters(&self, rt: &mut Runtime, mut recv: Option<Receives>) -> Result<BwReport, AppError> {
        let (opts, s) = (self.opts, self.s);
        let iters = u64::from(opts.iters);
        let total = iters * s.lanes.len() as u64;
        let mut posted_at = Vec::with_capacity(total as usize);
        let mut completed_at = Vec::with_capacity(total as usize);
        let mut n = Counts::new(s.lanes.len());
        let mut sending = recv.is_none() || opts.server.is_some();
        // perftest's run_iter_bi (-b SEND) paces nothing.
        let mut pacer = match recv {
            None => opts.rate_limit.pacer(s.size, s.tx_depth)?,
            Some(_) => None,
        };
        let received = |recv: &Option<Receives>| recv.as_ref().map(|r| r.received);
        while n.total_completed < total || received(&recv).is_some_and(|r| r < total) {
            if sending {
                let next =
                    |_, seq: u64| (seq < iters).then(|| s.moderated(seq) || seq + 1 == iters);
                self.post_round(rt, &mut n, next, Some(&mut posted_at), pacer.as_mut())?;
            }
            let done = n.total_completed + received(&recv).unwrap_or(0);
            let Some(wc) = self.next_completion(rt, pacer.as_ref(), done)? else {
                continue;
            };
            check(&wc)?;
            match &mut recv {
                Some(r) if wc.opcode == WcOpcode::Recv => {
                    sending = true;
                    r.arrived(rt, s, wc.qp_num)?;
                }
                _ => {
                    n.complete(wc.wr_id);
                    completed_at.resize(n.total_completed as usize, Instant::now());
                }
            }
        }
        let peak = opts.measures_peak();
        Ok(report(s.size, &posted_at, &completed_at, opts.unit(), peak))
    }

    /// The next completion on the test's CQ, waiting at most `-t`'s timeout (a stall,
    /// `done` operations in); between a `pacer`'s bursts only until the next may start
    /// (`None` then, to post it).
    fn next_completion(
        &self,
        rt: &mut Runtime,
        pacer: Option<&Pacer>,
        done: u64,
    ) -> Result<Option<WorkCompletion>, AppError> {
        let opts = self.opts;
        let gap = pacer.and_then(|p| p.gap_left(Instant::now()));
        match rt.wait_completion(self.s.cq, gap.unwrap_or(opts.timeout).min(opts.timeout)) {
            Ok(wc) => Ok(Some(wc)),
            Err(RuntimeError::Timeout { .. }) if gap.is_some_and(|g| g < opts.timeout) => Ok(None),
            Err(_) => Err(stalled(opts, done as u32)),
        }
    }

    /// `-D`: posts for `duration`, at most `tx_depth` outstanding per QP, a completion every
    /// `cq_mod`, and counts the operations completed between the margins ([`Window`]); each
    /// QP's last request is signalled so that all are reaped before the end. No peak, as
    /// perftest's `noPeak`.
    fn client_for(&self, rt: &mut Runtime, duration: Duration) -> Result<BwReport, AppError> {
        let (opts, s) = (self.opts, self.s);
        let mut window = Window::new(duration);
        let mut n = Counts::new(s.lanes.len());
        let mut last_signaled = vec![true; s.lanes.len()];
        let mut pacer = opts.rate_limit.pacer(s.size, s.tx_depth)?;
        loop {
            let stopped = window.ended(Instant::now());
            let next = |i: usize, seq| {
                (!stopped || !last_signaled[i]).then(|| {
                    last_signaled[i] = stopped || s.moderated(seq);
                    last_signaled[i]
                })
            };
            self.post_round(rt, &mut n, next, None, pacer.as_mut())?;
            if stopped && n.total_completed == n.total_posted {
                break;
            }
            let Some(wc) = self.next_completion(rt, pacer.as_ref(), n.total_completed)? else {
                continue;
            };
            check(&wc)?;
            n.complete(wc.wr_id);
            window.note(Instant::now(), n.total_completed);
        }
        Ok(window.report(s.size, opts.unit()))
    }

    /// `-b -D` SEND (`run_iter_bi` in duration mode): sends and receives for `duration`,
    /// reposting every receive; the client's clock starts at once, the server's (and its
    /// sending) at the first arrival. Counts the messages received and the sends completed
    /// inside [`Window`]; whatever is outstanding at the end is left, as perftest leaves it.
    fn bidirectional_send_for(
        &self,
        rt: &mut Runtime,
        duration: Duration,
    ) -> Result<BwReport, AppError> {
        let (opts, s) = (self.opts, self.s);
        let mut window = opts.server.is_some().then(|| Window::new(duration));
        let mut n = Counts::new(s.lanes.len());
        let mut recv = Receives::new(opts, s);
        loop {
            let wait = match &window {
                Some(w) if w.ended(Instant::now()) => break,
                Some(w) => (w.start + duration).saturating_duration_since(Instant::now()),
                None => opts.timeout,
            };
            if window.is_some() {
                self.post_round(rt, &mut n, |_, seq| Some(s.moderated(seq)), None, None)?;
            }
            let wc = match rt.wait_completion(s.cq, wait) {
                Ok(wc) => wc,
                // The top of the loop sees whether the time is up.
                Err(_) if window.is_some() => continue,
                Err(_) => return Err(stalled(opts, 0)),
            };
            check(&wc)?;
            if wc.opcode == WcOpcode::Recv {
                window.get_or_insert_with(|| Window::new(duration));
                recv.arrived(rt, s, wc.qp_num)?;
            } else {
                n.complete(wc.wr_id);
            }
            if let Some(w) = &mut window {
                w.note(Instant::now(), recv.received + n.total_completed);
            }
        }
        let w = window.unwrap_or_else(|| Window::new(duration));
        Ok(w.report(s.size, opts.unit()))
    }
}

/// perftest's default margin of `-D` (`duration / 4` in whole seconds, as its `int`s
/// divide), at each end of the run: what completes inside them is not counted.
fn margin(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs() / 4)
}

/// `-D`'s measurement, as perftest's `catch_alarm` takes it: the operations completed after
/// the first margin and before the last ([`margin`]), over the time between.
#[derive(Debug)]
struct Window {
    start: Instant,
    duration: Duration,
    /// Operations completed so far, and those of them inside the window.
    seen: u64,
    counted: u64,
}

impl Window {
    fn new(duration: Duration) -> Window {
        Window {
            start: Instant::now(),
            duration,
            seen: 0,
            counted: 0,
        }
    }

    /// The test's time is up.
    fn ended(&self, now: Instant) -> bool {
        now >= self.start + self.duration
    }

    /// `count` operations have completed by `now`.
    fn note(&mut self, now: Instant, count: u64) {
        let margin = margin(self.duration);
        let new = count.saturating_sub(self.seen);
        self.seen = self.seen.max(count);
        if now >= self.start + margin && now < self.start + self.duration - margin {
            self.counted += new;
        }
    }

    fn report(&self, size: u32, unit: f64) -> BwReport {
        let window = self.duration - 2 * margin(self.duration);
        let secs = window.as_secs_f64().max(1e-9);
        let n = self.counted as f64;
        BwReport {
            size: u64::from(size),
            iters: self.counted,
            bw_peak: 0.0,
            bw_avg: f64::from(size) * n / secs / unit,
            msg_rate: n / secs / 1e6,
        }
    }
}

/// How long the `-D` SEND server waits for stragglers after its time is up.
const QUIET: Duration = Duration::from_millis(200);

impl Test<'_> {
    /// `-D` on the SEND server: receives (reposting each) for `duration` on its own clock,
    /// measured as [`Window`] does, then reaps what is still in flight until the link has been
    /// quiet for [`QUIET`], so that no SEND of the client meets an empty receive queue.
    fn send_server_for(&self, rt: &mut Runtime, duration: Duration) -> Result<BwReport, AppError> {
        let (opts, s) = (self.opts, self.s);
        let mut window = Window::new(duration);
        let mut recv = Receives::new(opts, s);
        let mut last_arrival = Instant::now();
        loop {
            let now = Instant::now();
            let wait = if window.ended(now) {
                QUIET
            } else {
                (window.start + duration)
                    .saturating_duration_since(now)
                    .max(QUIET)
            };
            match rt.wait_completion(s.cq, wait) {
                Ok(wc) => {
                    check(&wc)?;
                    recv.arrived(rt, s, wc.qp_num)?;
                    last_arrival = Instant::now();
                    window.note(last_arrival, recv.received);
                }
                Err(_) if window.ended(Instant::now()) => break,
                Err(_) if last_arrival.elapsed() > opts.timeout => {
                    return Err(stalled(opts, recv.received as u32));
                }
                Err(_) => window.note(Instant::now(), recv.received),
            }
        }
        Ok(window.report(s.size, opts.unit()))
    }

    /// Receives `iters` SENDs, keeping receives posted. Timed as ib_send_bw's server times
    /// itself: from the first receive completion to the last, with no peak (perftest's server
    /// records only those two instants and prints a peak of 0.00). Timing each message from the
    /// previous arrival instead would make a peak of two completions polled a few nanoseconds
    /// apart: hundreds of GB/s.
    fn send_server_iters(&self, rt: &mut Runtime) -> Result<BwReport, AppError> {
        let (opts, s) = (self.opts, self.s);
        let total = u64::from(opts.iters) * s.lanes.len() as u64;
        let mut recv = Receives::new(opts, s);
        let mut first = None;
        let mut last = Instant::now();
        while recv.received < total {
            let wc = rt
                .wait_completion(s.cq, opts.timeout)
                .map_err(|_| stalled(opts, recv.received as u32))?;
            check(&wc)?;
            // The clock is read at the first and the last message only, as perftest's
            // (a read per message was 2% of this side's CPU, `perf record`).
            if first.is_none() || recv.received + 1 == total {
                last = Instant::now();
                first.get_or_insert(last);
            }
            recv.arrived(rt, s, wc.qp_num)?;
        }
        let received = recv.received;
        let secs = last
            .saturating_duration_since(first.unwrap_or(last))
            .as_secs_f64()
            .max(1e-9);
        let n = received as f64;
        Ok(BwReport {
            size: u64::from(s.size),
            iters: received,
            bw_peak: 0.0,
            bw_avg: f64::from(s.size) * n / secs / opts.unit(),
            msg_rate: n / secs / 1e6,
        })
    }
}

/// The receive queues of a side that takes SENDs (the one SRQ, or each QP's): the messages
/// that arrived, and each queue's receive posted again after each arrival until it has had
/// its share of `iters` per QP (`-D`: always).
#[derive(Debug)]
struct Receives {
    received: u64,
    /// Receives posted so far on each queue, and the most each takes.
    posted: Vec<u64>,
    per_queue: u64,
}

impl Receives {
    /// The queues as [`setup`] (or `-a`'s [`post_receives`]) filled them.
    fn new(opts: &PerfOptions, s: &Setup) -> Receives {
        let iters = u64::from(opts.iters);
        let (queues, per_queue) = match s.srq {
            Some(_) => (1, iters * s.lanes.len() as u64),
            None => (s.lanes.len(), iters),
        };
        Receives {
            received: 0,
            posted: vec![u64::from(opts.rx_depth).min(iters); queues],
            per_queue: match opts.duration {
                Some(_) => u64::MAX,
                None => per_queue,
            },
        }
    }

    /// A message arrived on QP `qpn`: counted, and its queue's receive posted again if the
    /// queue is to take more.
    fn arrived(&mut self, rt: &mut Runtime, s: &Setup, qpn: Qpn) -> Result<(), AppError> {
        self.received += 1;
        let lane = recv_lane(s, qpn);
        if self.posted[lane] < self.per_queue {
            post_lane_receive(rt, s, lane)?;
            self.posted[lane] += 1;
        }
        Ok(())
    }
}

/// Which QP's receive a completion on `qpn` consumed: its index, or 0 with an SRQ (one
/// queue for all).
fn recv_lane(s: &Setup, qpn: Qpn) -> usize {
    match s.srq {
        Some(_) => 0,
        None => s.lanes.iter().position(|l| l.qpn == qpn).unwrap_or(0),
    }
}

/// One receive for QP `lane` (or the SRQ) into its block of the buffer.
fn post_lane_receive(rt: &mut Runtime, s: &Setup, lane: usize) -> Result<(), AppError> {
    let l = &s.lanes[lane];
    post_receive(
        rt,
        l.qpn,
        s.srq,
        recv_wr(s.key, l.base + s.recv_offset, s.size + s.grh),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{free_port, runtime, runtime_seeded, wait_for_listener};
    use super::*;
    use crate::io::SystemClock;
    use crate::io::memory::{self, MemoryLinkConfig};
    use std::thread;

    /// perftest's own way: every pair.
    fn peak_every_pair(posted: &[Instant], completed: &[Instant]) -> Duration {
        let mut best = Duration::MAX;
        for (i, start) in posted.iter().enumerate() {
            for (k, end) in completed[i..].iter().enumerate() {
                let run = end.saturating_duration_since(*start).as_nanos() / (k as u128 + 1);
                best = best.min(Duration::from_nanos(run as u64));
            }
        }
        best
    }

    proptest::proptest! {
        #[test]
        fn peak_is_perftests_every_pair_minimum(
            gaps in proptest::collection::vec((0u64..5_000, 0u64..20_000), 1..80),
        ) {
            // Posts in order; each completion after its post and the previous completion.
            let t0 = Instant::now();
            let (mut posted, mut completed) = (Vec::new(), Vec::new());
            let (mut post, mut done) = (0, 0);
            for (gap, latency) in gaps {
                post += gap;
                done = (post + latency).max(done);
                posted.push(t0 + Duration::from_nanos(post));
                completed.push(t0 + Duration::from_nanos(done));
            }
            let fast = peak_delta(&posted, &completed);
            let slow = peak_every_pair(&posted, &completed);
            // Whole nanoseconds rounded down either way, and rounding down keeps the order.
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    /// One test, the client's QPNs and keys drawn from `seed`.
    fn perf_seeded(test: BwTest, size: u32, seed: u64) -> (PerfResult, PerfResult, String) {
        perf_with(options(test, size), seed)
    }

    fn options(test: BwTest, size: u32) -> PerfOptions {
        let mut opts = PerfOptions::new(test, None);
        opts.size = size;
        opts.iters = 300;
        opts.tx_depth = 32;
        opts.rx_depth = 64;
        opts.timeout = Duration::from_secs(20);
        // Nothing is lost on the in-memory link, so an ACK timeout only ever means a side
        // was not scheduled: about 1 s each, 8 of them, lets a loaded machine starve a
        // thread for seconds where perftest's 67 ms failed RETRY_EXC_ERR now and then.
        opts.qp_timeout = 18;
        opts
    }

    /// Our client against our server, both with `opts`; the client's output.
    fn perf_with(opts: PerfOptions, seed: u64) -> (PerfResult, PerfResult, String) {
        let (client, server, out, _) = perf_both(opts, seed);
        (client, server, out)
    }

    /// Our client against our server, both with `opts`; both sides' output.
    fn perf_both(opts: PerfOptions, seed: u64) -> (PerfResult, PerfResult, String, String) {
        let (client, server, out, server_out, _, _) = perf_run(opts, seed);
        (client, server, out, server_out)
    }

    /// Our client against our server over the in-memory link, both with `opts`, the
    /// client's QPNs and keys drawn from `seed`; the dialogue over TCP on loopback, or with
    /// `-R` over rdma_cm (no TCP at all). Both results, both sides' output and the
    /// connections each side established through rdma_cm.
    fn perf_run(
        mut opts: PerfOptions,
        seed: u64,
    ) -> (PerfResult, PerfResult, String, String, [u64; 2], String) {
        let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        if !opts.rdma_cm {
            opts.port = free_port();
        }
        let server_opts = opts.clone();
        let server = thread::spawn(move || {
            let mut rt = runtime(b, "10.0.0.2/24");
            let mut out = Vec::new();
            let r = run(&mut rt, &server_opts, &mut out).unwrap();
            let cm = *rt.host().cm().stats();
            assert_eq!(cm.rejects_sent, 0, "{:?}", server_opts.test);
            (r, String::from_utf8(out).unwrap(), cm.established)
        });
        let server_addr = if opts.rdma_cm {
            "10.0.0.2"
        } else {
            wait_for_listener(opts.port);
            "127.0.0.1"
        };
        let mut rt = runtime_seeded(a, "10.0.0.1/24", seed);
        opts.server = Some(server_addr.into());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let client = run_to(&mut rt, &opts, &mut out, &mut err)
            .unwrap_or_else(|e| panic!("{:?} lat {}: {e:?}", opts.test, opts.latency));
        let (server, server_out, server_established) = server.join().unwrap();
        let established = [rt.host().cm().stats().established, server_established];
        let out = String::from_utf8(out).unwrap();
        let err = String::from_utf8(err).unwrap();
        (client, server, out, server_out, established, err)
    }

    /// The connections each side establishes through rdma_cm: with -R the dialogue's and
    /// one per QP, else none.
    fn cm_connections(opts: &PerfOptions) -> [u64; 2] {
        let n = if opts.rdma_cm {
            1 + u64::from(opts.num_qps)
        } else {
            0
        };
        [n, n]
    }

    /// perftest's lines on how the QPs connect and the dialogue runs: through rdma_cm with
    /// -R, else over TCP ("Ethernet").
    fn assert_connection_lines(out: &str, rdma_cm: bool) {
        let (qps, method) = if rdma_cm {
            ("ON", "rdma_cm")
        } else {
            ("OFF", "Ethernet")
        };
        let lines = format!("rdma_cm QPs\t : {qps}\n Data ex. method : {method}\n");
        assert!(out.contains(&lines), "{out}");
    }

    /// Every test, the dialogue over TCP, and with -R over its own rdma_cm connection, the
    /// test QP connected by rdma_cm too (no TCP at all).
    #[test]
    fn every_test_between_two_runtimes() {
        for rdma_cm in [false, true] {
            for (test, size) in [
                (BwTest::Write, 5000),
                (BwTest::Read, 3000),
                (BwTest::Send, 2000),
                (BwTest::Atomic, 8),
            ] {
                let mut opts = options(test, size);
                opts.rdma_cm = rdma_cm;
                let (client, server, out, server_out, established, _) = perf_run(opts.clone(), 1);
                let own = client.own.unwrap();
                assert_eq!((own.size, own.iters), (u64::from(size), 300), "{test:?}");
                assert!(
                    own.bw_avg > 0.0 && own.bw_peak >= own.bw_avg * 0.99,
                    "{own:?}"
                );
                assert!(
                    out.contains(&title(test, AtomicType::FetchAndAdd, false, false, 1)),
                    "{out}"
                );
                assert!(out.contains(" #bytes     #iterations"), "{out}");
                assert_connection_lines(&out, rdma_cm);
                assert_connection_lines(&server_out, rdma_cm);
                if test == BwTest::Send {
                    // As ib_send_bw's server: first to last arrival, no peak.
                    let theirs = server.own.unwrap();
                    assert_eq!(theirs.iters, 300);
                    assert!(theirs.bw_avg > 0.0 && theirs.bw_peak == 0.0, "{theirs:?}");
                } else {
                    assert_eq!(server.own, None, "passive server");
                    assert_eq!(
                        server.printed, own,
                        "the server prints the client's results"
                    );
                }
                assert_eq!(established, cm_connections(&opts), "{test:?}");
            }
        }
    }

    /// `-c UC`: WRITE and SEND, bandwidth and latency, over UC QPs; `-c UD`: SEND, its size
    /// cut to the path MTU as perftest does. The SEND server posts every receive of the run
    /// at once (perftest's `UC_MAX_RX` default), as nothing holds a UC or UD sender back.
    #[test]
    fn uc_and_ud_between_two_runtimes() {
        let cases = [
            (QpType::Uc, BwTest::Write),
            (QpType::Uc, BwTest::Send),
            (QpType::Ud, BwTest::Send),
        ];
        for latency in [false, true] {
            for (connection, test) in cases {
                let mut opts = options(test, if latency { 2 } else { 4000 });
                opts.rx_depth = PerfOptions::new(test, None).rx_depth;
                opts.set_connection(connection);
                assert_eq!((opts.connection, opts.rx_depth), (connection, UC_MAX_RX));
                if latency {
                    opts.latency = true;
                    opts.tx_depth = 1;
                }
                let (client, server, out, server_out, _, _) = perf_run(opts, 3);
                let name = connection.transport().prefix();
                for o in [&out, &server_out] {
                    assert!(o.contains(&format!("Connection type : {name}")), "{o}");
                    // Next, perftest 4.5's two lines for a device like rdma_rxe.
                    let next = " PCIe relax order: Unsupported\n ibv_wr* API     : OFF\n";
                    assert!(o.contains(&format!("SRQ      : OFF\n{next}")), "{o}");
                }
                if connection == QpType::Ud && !latency {
                    // 4000 bytes on the in-memory link's path MTU of 4096: kept.
                    assert_eq!(client.own.map(|r| r.size), Some(4000));
                }
                if connection == QpType::Ud && latency {
                    // perftest's default bandwidth size, 65536, is cut to the MTU; the same
                    // size asked for with -s is refused.
                    let mut big = options(test, 65536);
                    big.set_connection(QpType::Ud);
                    let (client, _, out, _, _, err) = perf_run(big.clone(), 4);
                    assert_eq!(client.own.map(|r| r.size), Some(4096));
                    // On perftest's standard error, as its.
                    assert!(err.contains(" Max msg size in UD is MTU 4096\n"), "{err}");
                    assert!(!out.contains("Max msg size"), "{out}");
                    big.size_given = true;
                    let (a, _b) =
                        memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
                    let mut rt = runtime(a, "10.0.0.1/24");
                    let e = run(&mut rt, &big, &mut Vec::new()).unwrap_err();
                    assert!(e.to_string().contains("cannot be greater than MTU"), "{e}");
                }
                if latency {
                    assert_eq!(client.latency.map(|l| l.iters), Some(300), "{test:?}");
                } else {
                    assert_eq!(client.own.map(|r| r.iters), Some(300), "{test:?}");
                    if test == BwTest::Send {
                        assert_eq!(server.own.map(|r| r.iters), Some(300), "receives");
                    }
                }
            }
        }
    }

    /// -R -c UD: each test QP resolved by SIDR on the UDP port space (perftest's
    /// RDMA_PS_UDP ids), no connection to establish or close beyond the dialogue's; the
    /// latency test and -b, where the server sends too, learn the client's QP from its
    /// SEND with immediate; -q 2 resolves each QP.
    #[test]
    fn ud_over_rdma_cm() {
        for (latency, duplex, qps) in [
            (false, false, 1),
            (true, false, 1),
            (false, true, 1),
            (false, false, 2),
        ] {
            let mut opts = options(BwTest::Send, 1024);
            opts.set_connection(QpType::Ud);
            opts.rdma_cm = true;
            opts.num_qps = qps;
            opts.duplex = duplex;
            opts.latency = latency;
            if latency {
                opts.tx_depth = 1;
            }
            let (client, server, out, server_out, established, _) = perf_run(opts.clone(), 7);
            let case = format!("lat {latency} -b {duplex} -q {qps}");
            // The dialogue's RC connection alone is established, on each side.
            assert_eq!(established, [1, 1], "{case}");
            for o in [&out, &server_out] {
                assert_connection_lines(o, true);
                assert!(o.contains("Connection type : UD"), "{case}\n{o}");
            }
            if latency {
                assert_eq!(client.latency.map(|l| l.iters), Some(300), "{case}");
            } else {
                // Each QP runs -n (perftest's report counts them all).
                let all = 300 * u64::from(qps);
                assert_eq!(client.own.map(|r| r.iters), Some(all), "{case}");
                assert_eq!(server.own.map(|r| r.iters), Some(all), "{case}");
            }
        }
    }

    /// --rate_limit: the requester posts bursts of --burst_size, one per gap (3000
    /// messages/s in bursts of 10: 300 bursts a second), so its message rate stays at
    /// the limit (300 messages span 29 gaps: 3103/s at most, with no time for the last
    /// burst's completions); -D paced the same way.
    #[test]
    fn rate_limit_paces_the_requester() {
        for (test, connection, duration) in [
            (BwTest::Write, QpType::Rc, None),
            (BwTest::Send, QpType::Ud, None),
            (BwTest::Write, QpType::Uc, Some(Duration::from_secs(2))),
        ] {
            let mut opts = options(test, 64);
            opts.set_connection(connection);
            opts.rate_limit = RateLimit {
                rate: Some(3000.0),
                units: RateUnits::PacketsPerSec,
                kind: RateLimitType::Software,
                burst: Some(10),
            };
            opts.duration = duration;
            let (client, _, out) = perf_with(opts, 21);
            let own = client.own.unwrap();
            let case = format!("{test:?} {connection:?} {duration:?}");
            assert!(
                own.msg_rate > 0.0 && own.msg_rate <= 0.0032,
                "{case}: {own:?}"
            );
            // perftest's line only when the burst size is the TX depth.
            assert!(!out.contains("Setting burst size"), "{out}");
        }
    }

    /// -l: lists of requests, the moderation their size unless -Q says otherwise, "Post
    /// List" in the title and the header; refused where perftest refuses it (iterations not
    /// a multiple, -Q not dividing it) and where it would post nothing (beyond the TX depth)
    /// or is not perftest's (the latency tests).
    #[test]
    fn post_list() {
        for test in [BwTest::Write, BwTest::Send] {
            let mut opts = options(test, 64);
            opts.post_list = 4;
            let (client, server, out, server_out, _, _) = perf_run(opts, 10);
            assert_eq!(client.own.map(|r| r.iters), Some(300), "{test:?}");
            if test == BwTest::Send {
                assert_eq!(server.own.map(|r| r.iters), Some(300), "receives");
            }
            assert!(out.contains(&title(test, AtomicType::FetchAndAdd, false, false, 4)));
            assert!(out.contains(" Post List BW Test\n"), "{out}");
            assert!(
                out.contains(" Post List       : 4\n CQ Moderation   : 4\n"),
                "{out}"
            );
            assert!(out.contains(
                "Post List requested - CQ moderation will be the size of the post list\n"
            ));
            assert!(
                server_out.contains(" Post List       : 4\n"),
                "{server_out}"
            );
        }
        let refused = |f: &dyn Fn(&mut PerfOptions)| {
            let mut opts = options(BwTest::Write, 64);
            opts.post_list = 4;
            f(&mut opts);
            opts.check().unwrap_err().to_string()
        };
        assert!(refused(&|o| o.iters = 302).contains("multiple of post list size"));
        assert!(refused(&|o| o.cq_mod = Some(3)).contains("multiple of CQ moderation"));
        assert!(refused(&|o| o.latency = true).contains("bandwidth tests"));
        assert!(refused(&|o| o.tx_depth = 2).contains("TX depth"));
        assert!(refused(&|o| o.post_list = 0).contains("positive"));
    }

    /// -e: perftest's line after the title, the moderation kept for large messages (no
    /// warning), -D refused.
    #[test]
    fn events() {
        let mut opts = options(BwTest::Write, 16384);
        opts.events = true;
        let (client, _, out, server_out, _, _) = perf_run(opts.clone(), 11);
        assert_eq!(client.own.map(|r| r.iters), Some(300));
        for o in [&out, &server_out] {
            assert!(
                o.contains(" BW Test\n Test with events. Using roce_comp0\n Dual-port"),
                "{o}"
            );
        }
        assert!(out.contains(" CQ Moderation   : 32\n"), "{out}");
        opts.events = false;
        let (_, _, out, _, _, _) = perf_run(opts.clone(), 12);
        assert!(out.contains(" CQ Moderation   : 1\n"), "{out}");
        opts.events = true;
        opts.duration = Some(Duration::from_secs(2));
        let e = opts.check().unwrap_err().to_string();
        assert!(e.contains("Duration mode doesn't work with events"), "{e}");
    }

    /// -I is taken (0 to 912) and disabled with perftest's lines on its standard error, as
    /// perftest disables it on rdma_rxe; READ and atomics say so even without -I, as
    /// perftest's do there; over UD above 884 it is first cut to that.
    #[test]
    fn inline_size_is_disabled_as_perftest_does() {
        let mut opts = options(BwTest::Write, 64);
        opts.inline_size = Some(913);
        let e = opts.check().unwrap_err().to_string();
        assert!(e.contains("Max inline should be between 0 and 912"), "{e}");
        const DISABLED: &str = "Device not recognized to implement inline feature. Disabling it\n";
        for (test, connection, inline, says) in [
            (BwTest::Write, QpType::Rc, None, ""),
            (BwTest::Write, QpType::Rc, Some(64), DISABLED),
            (BwTest::Read, QpType::Rc, None, DISABLED),
            (
                BwTest::Send,
                QpType::Ud,
                Some(900),
                "Setting inline size to 884 (Max inline size in UD)\n\
                 Device not recognized to implement inline feature. Disabling it\n",
            ),
        ] {
            let mut opts = options(test, 64);
            opts.set_connection(connection);
            opts.inline_size = inline;
            let (_, _, out, _, _, err) = perf_run(opts, 9);
            let case = format!("{test:?} {connection:?} -I {inline:?}");
            assert_eq!(err, says, "{case}");
            // One line of dashes on standard output before each, then the header's.
            let lines = says.lines().count();
            assert!(
                out.starts_with(&format!("{LINE}\n").repeat(lines + 1)),
                "{case}: {out}"
            );
            assert!(
                out.contains(" Max inline data : 0[B]") != (test == BwTest::Read),
                "{case}"
            );
        }
    }

    /// A rate limit below one burst a second is refused before anything connects, on the
    /// side that paces (the client; both sides of -b but SEND's), for the run's largest
    /// size (-a: 8 MiB); the side that only answers takes it.
    #[test]
    fn rate_limit_below_one_burst_refused_up_front() {
        // 1 MiB/s of 64 KiB messages: 16 a second, bursts of the TX depth (32): none.
        let mut client = options(BwTest::Write, 65536);
        client.server = Some("192.0.2.1".into());
        client.rate_limit = RateLimit {
            rate: Some(1.0),
            units: RateUnits::MebibytesPerSec,
            kind: RateLimitType::Software,
            burst: None,
        };
        let refused = |o: &PerfOptions| o.check().unwrap_err().to_string();
        assert!(
            refused(&client).contains("below one burst"),
            "{}",
            refused(&client)
        );
        let mut server = client.clone();
        server.server = None;
        assert!(server.check().is_ok());
        server.duplex = true;
        assert!(refused(&server).contains("below one burst"));
        // Bursts of 16: one a second.
        client.rate_limit.burst = Some(16);
        assert!(client.check().is_ok());
        // -a: 8 MiB messages, an eighth of one a second.
        client.size = 2;
        client.all_sizes = true;
        client.rate_limit.burst = Some(1);
        assert!(refused(&client).contains("below one burst"));
        client.all_sizes = false;
        assert!(client.check().is_ok());
    }

    /// -N and above 20,000 operations: no peak (0.00); -w/-y: the run fails once it is
    /// over unless a row reaches the limit (-a: any row), and a passive server, which
    /// measured nothing, never fails.
    #[test]
    fn no_peak_and_limits() {
        let mut opts = options(BwTest::Write, 64);
        opts.no_peak = true;
        let (client, _, out) = perf_with(opts.clone(), 31);
        let own = client.own.unwrap();
        assert!(own.bw_peak == 0.0 && own.bw_avg > 0.0, "{own:?}");
        assert!(out.contains(" 64         300              0.00 "), "{out}");
        opts.no_peak = false;
        opts.iters = PEAK_MAX_ITERS + 1;
        assert!(!opts.measures_peak());
        opts.iters = PEAK_MAX_ITERS;
        assert!(opts.measures_peak());

        for (test, all_sizes) in [(BwTest::Write, false), (BwTest::Send, true)] {
            let mut opts = options(test, 64);
            opts.all_sizes = all_sizes;
            opts.iters = 5;
            // Reached: a bandwidth of 0 and a rate of 0 always are.
            (opts.limit_bw, opts.limit_msgrate) = (Some(0.0), Some(0.0));
            let (client, ..) = perf_with(opts.clone(), 32);
            assert!(client.own.is_some());
            for (bw, rate, says) in [
                (Some(1e9), None, "below bw limit"),
                (None, Some(1e9), "below msg_rate"),
            ] {
                (opts.limit_bw, opts.limit_msgrate) = (bw, rate);
                let (a, b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
                let mut server_opts = opts.clone();
                server_opts.port = free_port();
                let port = server_opts.port;
                let server = thread::spawn(move || {
                    let mut rt = runtime(b, "10.0.0.2/24");
                    run(&mut rt, &server_opts, &mut Vec::new()).map(|_| ())
                });
                wait_for_listener(port);
                let mut rt = runtime(a, "10.0.0.1/24");
                let mut client_opts = opts.clone();
                (client_opts.port, client_opts.server) = (port, Some("127.0.0.1".into()));
                let e = run(&mut rt, &client_opts, &mut Vec::new()).unwrap_err();
                assert!(e.to_string().contains(says), "{e}");
                // The SEND server measured its rows and fails too; WRITE's did not.
                let server = server.join().unwrap();
                assert_eq!(server.is_err(), test == BwTest::Send, "{test:?} {server:?}");
            }
        }
        let mut lat = options(BwTest::Write, 2);
        (lat.latency, lat.limit_bw) = (true, Some(1.0));
        assert!(lat.check().unwrap_err().to_string().contains("not --lat"));
        lat.latency = false;
        lat.limit_msgrate = Some(-1.0);
        assert!(lat.check().unwrap_err().to_string().contains("at least 0"));
    }

    #[test]
    fn rdma_cm_mode_refuses_what_it_does_not_run() {
        let (a, _b) = memory::pair(MemoryLinkConfig::default(), SystemClock::new()).unwrap();
        let mut rt = runtime(a, "10.0.0.1/24");
        let mut o = options(BwTest::Write, 64);
        o.rdma_cm = true;
        o.server = Some("server.example".into());
        let e = run(&mut rt, &o, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("IP address"), "{e}");
    }

    /// QPN, R_Key and VA of the "local address" line.
    fn local_keys(out: &str) -> (u64, u64, u64) {
        let line = out.lines().find(|l| l.contains("local address")).unwrap();
        let after = |word: &str| {
            let at = line.find(word).unwrap() + word.len();
            let hex = line[at..].split_whitespace().next().unwrap();
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
        };
        (after("QPN"), after("RKey"), after("VAddr"))
    }

    /// What an off-path sender must guess to land a WRITE is drawn per run, not QPN 0x11,
    /// R_Key 0x1 and a fixed VA (issue 14).
    #[test]
    fn qpn_rkey_and_va_are_drawn_per_run() {
        let (_, _, one) = perf_seeded(BwTest::Write, 64, 11);
        let (_, _, two) = perf_seeded(BwTest::Write, 64, 22);
        let (one, two) = (local_keys(&one), local_keys(&two));
        assert!(
            one.0 != 0x11 && one.1 != 0x1 && one.2 != 0x20_0000,
            "{one:x?}"
        );
        assert!(
            one.0 != two.0 && one.1 != two.1 && one.2 != two.2,
            "{one:x?} {two:x?}"
        );
    }

    #[test]
    fn table_matches_perftest_report_fmt() {
        let r = BwReport {
            size: 8192,
            iters: 20,
            bw_peak: 0.83,
            bw_avg: 0.62,
            msg_rate: 0.000079,
        };
        assert_eq!(
            report_table(&r, false).lines().nth(1).unwrap(),
            " 8192       20               0.83               0.62   \t\t   0.000079"
        );
        // Gb/s below 0.1: REPORT_FMT_EXT's six decimals.
        let slow = BwReport {
            bw_peak: 0.083,
            bw_avg: 0.062,
            ..r
        };
        let table = report_table(&slow, true);
        assert!(
            table.starts_with(" #bytes     #iterations    BW peak[Gb/sec]"),
            "{table}"
        );
        assert_eq!(
            table.lines().nth(1).unwrap(),
            " 8192       20           0.083000            0.062000            0.000079"
        );
        assert_eq!(report_row(&r, true), report_row(&r, false));
    }

    /// -a: the client prints a row per size, 2 to 8 MiB; the passive WRITE server prints
    /// the last; SEND's server measures each size itself.
    #[test]
    fn all_sizes_run_every_power_of_two() {
        for test in [BwTest::Write, BwTest::Send] {
            let mut opts = options(test, 65536);
            opts.all_sizes = true;
            opts.iters = 3;
            let (client, server, out) = perf_with(opts, 3);
            let sizes: Vec<u64> = out
                .lines()
                .skip_while(|l| !l.starts_with(" #bytes"))
                .skip(1)
                .map_while(|l| l.split_whitespace().next()?.parse().ok())
                .collect();
            let want: Vec<u64> = (1..=23).map(|e| 1 << e).collect();
            assert_eq!(sizes, want, "{test:?}\n{out}");
            assert_eq!(client.own.unwrap().size, u64::from(MAX_SIZE));
            assert_eq!(server.printed.size, u64::from(MAX_SIZE), "{test:?}");
            assert_eq!(server.own.is_some(), test == BwTest::Send);
        }
    }

    /// -c UD -a: a UD message is one packet, so the sizes stop at the path MTU (4096 on
    /// the in-memory link), as perftest's `size_max_pow`, after its two lines; bandwidth
    /// and latency, each side its rows.
    #[test]
    fn ud_all_sizes_stop_at_the_mtu() {
        let want: Vec<u64> = (1..=12).map(|e| 1 << e).collect();
        for latency in [false, true] {
            let mut opts = options(BwTest::Send, 65536);
            opts.set_connection(QpType::Ud);
            opts.all_sizes = true;
            opts.size_given = true;
            opts.iters = 5;
            opts.latency = latency;
            if latency {
                opts.tx_depth = 1;
            }
            let (client, server, out, server_out, _, err) = perf_run(opts, 13);
            let header = if latency {
                " #bytes #iterations"
            } else {
                " #bytes"
            };
            for o in [&out, &server_out] {
                assert_eq!(row_sizes(o, header), want, "{o}");
            }
            // The client's on its standard error (as perftest's), the server's with the rest
            // (`run`, one stream).
            for o in [&err, &server_out] {
                assert!(o.contains(" Max msg size in UD is MTU 4096\n"), "{o}");
            }
            if latency {
                assert_eq!(client.latency.map(|l| (l.size, l.iters)), Some((4096, 5)));
            } else {
                assert_eq!(client.own.map(|r| (r.size, r.iters)), Some((4096, 5)));
                assert_eq!(server.own.map(|r| (r.size, r.iters)), Some((4096, 5)));
            }
        }
    }

    /// -D: operations counted in the middle half, no peak, reported in Gb/s when asked;
    /// compare-and-swap runs as the atomic.
    #[test]
    fn duration_mode_counts_the_middle_of_the_run() {
        for test in [BwTest::Write, BwTest::Send, BwTest::Atomic] {
            let mut opts = options(test, 4096);
            opts.duration = Some(Duration::from_secs(1));
            opts.gbits = true;
            opts.atomic = AtomicType::CmpAndSwap;
            let (client, server, out) = perf_with(opts, 4);
            let own = client.own.unwrap();
            assert!(own.iters > 0 && own.bw_avg > 0.0, "{test:?} {own:?}");
            assert_eq!(own.bw_peak, 0.0);
            assert!(out.contains("BW average[Gb/sec]"), "{out}");
            if test == BwTest::Atomic {
                assert!(out.contains("Atomic CMP_AND_SWAP BW Test"), "{out}");
            }
            if test == BwTest::Send {
                assert!(server.own.unwrap().iters > 0);
            } else {
                assert_eq!(server.printed, own);
            }
        }
    }

    /// --lat: WRITE and SEND ping-pong (both sides measure), READ and atomics one at a
    /// time (the server passive); perftest's latency table. With -R (one outstanding) both
    /// connections are made and released, the WRITE test's without a closing sync.
    #[test]
    fn latency_tests_between_two_runtimes() {
        for (rdma_cm, tx_depth, iters) in [(false, 32, 200), (true, 1, 100)] {
            for test in [BwTest::Write, BwTest::Send, BwTest::Read, BwTest::Atomic] {
                let mut opts = options(test, 64);
                opts.latency = true;
                opts.rdma_cm = rdma_cm;
                opts.tx_depth = tx_depth;
                opts.iters = iters;
                let (client, server, out, server_out, established, _) = perf_run(opts.clone(), 5);
                let lat = client.latency.unwrap();
                assert_eq!(
                    (lat.size, lat.iters),
                    (
                        if test == BwTest::Atomic { 8 } else { 64 },
                        u64::from(iters)
                    )
                );
                assert!(
                    lat.t_min > 0.0 && lat.t_min <= lat.t_typical && lat.t_typical <= lat.t_max,
                    "{test:?} {lat:?}"
                );
                assert!(out.contains(" #bytes #iterations    t_min[usec]"), "{out}");
                assert!(
                    out.contains(&title(test, AtomicType::FetchAndAdd, true, false, 1)),
                    "{out}"
                );
                assert!(!out.contains("CQ Moderation"), "{out}");
                assert_connection_lines(&out, rdma_cm);
                let both = matches!(test, BwTest::Write | BwTest::Send);
                assert_eq!(server.latency.is_some(), both, "{test:?}\n{server_out}");
                assert_eq!(established, cm_connections(&opts), "{test:?}");
            }
        }
    }

    /// The sizes of the rows under the first line starting with `header`.
    fn row_sizes(out: &str, header: &str) -> Vec<u64> {
        out.lines()
            .skip_while(|l| !l.starts_with(header))
            .skip(1)
            .map_while(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    /// --lat -a: a row per size from 2 bytes to 8 MiB under one header, on both sides of
    /// WRITE and SEND (SEND shaking hands before each size), on READ's client.
    #[test]
    fn latency_all_sizes_print_a_row_per_size() {
        let want: Vec<u64> = (1..=23).map(|e| 1 << e).collect();
        for test in [BwTest::Write, BwTest::Send, BwTest::Read] {
            let mut opts = options(test, 2);
            opts.latency = true;
            opts.all_sizes = true;
            opts.tx_depth = 1;
            opts.iters = 4;
            let (client, server, out, server_out) = perf_both(opts, 12);
            assert_eq!(
                row_sizes(&out, " #bytes #iterations"),
                want,
                "{test:?}\n{out}"
            );
            assert_eq!(out.matches(" #bytes").count(), 1, "{out}");
            let lat = client.latency.unwrap();
            assert_eq!((lat.size, lat.iters), (u64::from(MAX_SIZE), 4), "{test:?}");
            assert!(lat.t_min > 0.0, "{lat:?}");
            if test == BwTest::Read {
                assert!(server.latency.is_none() && !server_out.contains(" #bytes"));
            } else {
                let rows = row_sizes(&server_out, " #bytes #iterations");
                assert_eq!(rows, want, "{test:?}\n{server_out}");
            }
        }
    }

    /// --lat -D: print_report_lat_duration's header and row on each measuring side: the
    /// operations counted in the window and the window's time per operation (halved for
    /// WRITE and SEND), which multiply back to the window.
    #[test]
    fn latency_duration_counts_the_window() {
        for test in [BwTest::Write, BwTest::Send, BwTest::Read, BwTest::Atomic] {
            let mut opts = options(test, 64);
            opts.latency = true;
            opts.tx_depth = 1;
            opts.duration = Some(Duration::from_secs(1));
            let (client, server, out, server_out) = perf_both(opts, 13);
            assert!(
                out.contains(" #bytes        #iterations       t_avg[usec]    tps average\n"),
                "{out}"
            );
            assert!(!out.contains("t_min"), "{out}");
            let r = client.latency_duration.unwrap();
            assert!(client.latency.is_none());
            assert!(r.iters > 0, "{test:?} {r:?}");
            let factor = if matches!(test, BwTest::Write | BwTest::Send) {
                2.0
            } else {
                1.0
            };
            // -D 1: margins of 0 whole seconds, a window of 1 s.
            assert!(
                (r.t_avg * factor * r.iters as f64 - 1e6).abs() < 1.0,
                "{r:?}"
            );
            assert!((r.tps - r.iters as f64).abs() < 1e-6, "{r:?}");
            let row = lat_duration_row(&r);
            assert!(out.contains(&row), "{out}");
            let both = matches!(test, BwTest::Write | BwTest::Send);
            assert_eq!(
                server.latency_duration.is_some(),
                both,
                "{test:?}\n{server_out}"
            );
        }
    }

    #[test]
    fn duration_margins_are_whole_quarter_seconds() {
        assert_eq!(margin(Duration::from_secs(5)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(8)), Duration::from_secs(2));
        assert_eq!(margin(Duration::from_secs(3)), Duration::ZERO);
        let r = LatDurationReport {
            size: 2,
            iters: 41234,
            t_avg: 24.25,
            tps: 20617.0,
        };
        assert_eq!(
            lat_duration_row(&r),
            " 2             41234            24.25          20617.00\n"
        );
    }

    /// --use-srq: SEND's receives come from a shared receive queue, bandwidth and latency.
    #[test]
    fn send_through_a_shared_receive_queue() {
        for latency in [false, true] {
            let mut opts = options(BwTest::Send, 1000);
            opts.use_srq = true;
            opts.latency = latency;
            opts.iters = 200;
            let (client, server, out) = perf_with(opts, 6);
            assert!(out.contains("Using SRQ      : ON"), "{out}");
            if latency {
                assert_eq!(server.latency.unwrap().iters, 200);
            } else {
                assert_eq!(server.own.unwrap().iters, 200);
                assert_eq!(client.own.unwrap().iters, 200);
            }
        }
    }

    /// -q: every QP runs -n operations (the row counts them all), each QP's keys are
    /// exchanged and printed, and the SEND server takes what arrives on each; with -R one
    /// rdma_cm connection per QP besides the dialogue's.
    #[test]
    fn many_qps_run_iters_each() {
        for (test, srq, rdma_cm) in [
            (BwTest::Write, false, false),
            (BwTest::Send, false, false),
            (BwTest::Send, true, false),
            (BwTest::Read, false, false),
            (BwTest::Write, false, true),
            (BwTest::Send, false, true),
            (BwTest::Read, false, true),
        ] {
            let mut opts = options(test, 2048);
            opts.num_qps = 3;
            opts.iters = 100;
            opts.use_srq = srq;
            opts.rdma_cm = rdma_cm;
            let (client, server, out, server_out, established, _) = perf_run(opts.clone(), 7);
            assert_eq!(client.own.unwrap().iters, 300, "{test:?}\n{out}");
            assert!(out.contains("Number of qps   : 3"), "{out}");
            assert_eq!(out.matches("local address").count(), 3, "{out}");
            assert_eq!(out.matches("remote address").count(), 3, "{out}");
            let qpns: std::collections::HashSet<&str> = out
                .lines()
                .filter(|l| l.contains("local address"))
                .map(|l| l.split_whitespace().nth(5).unwrap())
                .collect();
            assert_eq!(qpns.len(), 3, "three QPs: {out}");
            assert_eq!(server.printed.iters, 300, "{test:?}\n{server_out}");
            assert_eq!(established, cm_connections(&opts), "{test:?}");
        }
    }

    /// -Q: the moderation asked for, at most the TX depth, in the header; above 8 KiB with
    /// perftest's warning; every message still arrives.
    #[test]
    fn cq_moderation_as_asked() {
        for (size, q, shown, warned) in [
            (64, Some(8), 8, false),
            (64, Some(1000), 32, false),
            (64, None, 32, false),
            (16384, None, 1, false),
            (16384, Some(4), 4, true),
        ] {
            let mut opts = options(BwTest::Send, size);
            opts.cq_mod = q;
            opts.iters = 100;
            let (client, server, out) = perf_with(opts, 3);
            assert_eq!(client.own.unwrap().iters, 100, "{q:?}\n{out}");
            assert_eq!(server.printed.iters, 100, "{q:?}");
            assert!(
                out.contains(&format!(" CQ Moderation   : {shown}\n")),
                "{q:?}\n{out}"
            );
            assert_eq!(out.contains("CQ moderation enabled"), warned, "{out}");
        }
    }

    /// -b: both sides run the test, measure their own half, and print the sum of both;
    /// with -q too, and with -R (the results swapped over the dialogue's connection).
    #[test]
    fn bidirectional_sums_both_sides() {
        for (test, qps, rdma_cm) in [
            (BwTest::Write, 1, false),
            (BwTest::Send, 1, false),
            (BwTest::Send, 2, false),
            (BwTest::Read, 2, false),
            (BwTest::Atomic, 1, false),
            (BwTest::Write, 1, true),
            (BwTest::Send, 1, true),
        ] {
            let mut opts = options(test, 4096);
            opts.duplex = true;
            opts.num_qps = qps;
            opts.iters = 100;
            opts.rdma_cm = rdma_cm;
            let (client, server, out, _, established, _) = perf_run(opts.clone(), 8);
            let (mine, theirs) = (client.own.unwrap(), server.own.unwrap());
            assert_eq!(
                (mine.iters, theirs.iters),
                (100 * u64::from(qps), 100 * u64::from(qps))
            );
            assert!(mine.bw_avg > 0.0 && theirs.bw_avg > 0.0, "{test:?}");
            assert!((client.printed.bw_avg - (mine.bw_avg + theirs.bw_avg)).abs() < 1e-9);
            assert!((server.printed.bw_avg - (mine.bw_avg + theirs.bw_avg)).abs() < 1e-9);
            assert!((server.printed.msg_rate - (mine.msg_rate + theirs.msg_rate)).abs() < 1e-9);
            assert!(out.contains("Bidirectional BW Test"), "{out}");
            assert!(out.contains(" TX depth"), "{out}");
            assert_eq!(out.contains(" RX depth"), test == BwTest::Send, "{out}");
            assert_eq!(established, cm_connections(&opts), "{test:?}");
        }
    }

    /// -b -a: a row per size on both sides under one header, each the sum of both sides'
    /// figures (SEND posting and shaking hands around each size).
    #[test]
    fn bidirectional_all_sizes_sum_each_size() {
        let want: Vec<u64> = (1..=23).map(|e| 1 << e).collect();
        for test in [BwTest::Write, BwTest::Send] {
            let mut opts = options(test, 4096);
            opts.duplex = true;
            opts.all_sizes = true;
            opts.iters = 3;
            let (client, server, out, server_out) = perf_both(opts, 14);
            for o in [&out, &server_out] {
                assert_eq!(
                    row_sizes(o, " #bytes     #iterations"),
                    want,
                    "{test:?}\n{o}"
                );
                assert_eq!(o.matches(" #bytes").count(), 1, "{o}");
                assert!(o.contains("Bidirectional BW Test"), "{o}");
            }
            let (mine, theirs) = (client.own.unwrap(), server.own.unwrap());
            assert_eq!((mine.size, theirs.size), (1 << 23, 1 << 23));
            assert_eq!((mine.iters, theirs.iters), (3, 3));
            assert!((client.printed.bw_avg - (mine.bw_avg + theirs.bw_avg)).abs() < 1e-9);
            assert!((server.printed.bw_avg - client.printed.bw_avg).abs() < 1e-9);
        }
    }

    /// -b -D: WRITE swaps the results and each side prints the sum; SEND swaps nothing
    /// and each side prints its own row, which counts its sends and receives in the window
    /// (run_iter_bi's iters), so about twice one direction's messages.
    #[test]
    fn bidirectional_duration_mode() {
        for test in [BwTest::Write, BwTest::Send] {
            let mut opts = options(test, 4096);
            opts.duplex = true;
            opts.duration = Some(Duration::from_secs(1));
            let (client, server, out, server_out) = perf_both(opts, 15);
            let (mine, theirs) = (client.own.unwrap(), server.own.unwrap());
            assert!(
                mine.iters > 0 && theirs.iters > 0,
                "{test:?} {mine:?} {theirs:?}"
            );
            assert_eq!((mine.bw_peak, theirs.bw_peak), (0.0, 0.0));
            // -D 1: margins of 0 whole seconds, a window of 1 s.
            assert!(
                (mine.msg_rate * 1e6 - mine.iters as f64).abs() < 1e-6,
                "{mine:?}"
            );
            if test == BwTest::Write {
                assert!((client.printed.bw_avg - (mine.bw_avg + theirs.bw_avg)).abs() < 1e-9);
                assert!((server.printed.bw_avg - client.printed.bw_avg).abs() < 1e-9);
            } else {
                assert_eq!((client.printed, server.printed), (mine, theirs));
                assert!(out.contains(&report_row(&mine, false)), "{out}");
                assert!(
                    server_out.contains(&report_row(&theirs, false)),
                    "{server_out}"
                );
            }
        }
    }

    #[test]
    fn qp_counts_beyond_the_limits_are_refused() {
        let mut o = options(BwTest::Write, 65536);
        o.num_qps = 0;
        assert!(matches!(o.check(), Err(AppError::Usage(m)) if m.contains("-q")));
        o.num_qps = MAX_QPS + 1;
        assert!(matches!(o.check(), Err(AppError::Usage(m)) if m.contains("-q")));
        o.num_qps = 512;
        o.size = MAX_SIZE;
        assert!(matches!(o.check(), Err(AppError::Usage(m)) if m.contains("MiB")));
        o.size = 65536;
        assert!(o.check().is_ok());
        o.latency = true;
        o.num_qps = 2;
        assert!(matches!(o.check(), Err(AppError::Usage(m)) if m.contains("--lat")));
        o.num_qps = 1;
        o.duplex = true;
        assert!(matches!(o.check(), Err(AppError::Usage(m)) if m.contains("-b")));
    }

    #[test]
    fn compare_and_swap_swaps_zero_for_zero() {
        let peer = Keys {
            lid: 0,
            out_reads: 1,
            qpn: Qpn::new(2),
            psn: crate::wire::Psn::new(0),
            rkey: 7,
            vaddr: 0x1000,
            gid: None,
            srqn: 0,
        };
        let mut opts = PerfOptions::new(BwTest::Atomic, None);
        opts.atomic = AtomicType::CmpAndSwap;
        let cas = SendOp::CompareSwap {
            remote_addr: 0x1000,
            rkey: 7,
            compare: 0,
            swap: 0,
        };
        assert_eq!(lane_op(&opts, &peer), cas);
        opts.atomic = AtomicType::FetchAndAdd;
        assert!(matches!(
            lane_op(&opts, &peer),
            SendOp::FetchAdd { add: 1, .. }
        ));
    }

    #[test]
    fn combinations_perftest_refuses_are_one_line_errors() {
        let refused = |f: &dyn Fn(&mut PerfOptions)| {
            let mut o = options(BwTest::Atomic, 8);
            f(&mut o);
            match o.check() {
                Err(AppError::Usage(m)) => m,
                other => panic!("{other:?}"),
            }
        };
        assert!(refused(&|o| o.all_sizes = true).contains("atomic"));
        let m = refused(&|o| {
            o.test = BwTest::Write;
            o.all_sizes = true;
            o.duration = Some(Duration::from_secs(2));
        });
        assert!(m.contains("-D") && m.contains("-a"), "{m}");
        assert!(refused(&|o| o.duration = Some(Duration::ZERO)).contains("at least 1"));
        assert!(
            refused(&|o| {
                o.test = BwTest::Write;
                o.size = MAX_SIZE + 1;
            })
            .contains("above")
        );
        assert!(refused(&|o| o.iters = 0).contains("positive"));
        assert!(refused(&|o| o.qp_timeout = 32).contains("0 to 31"));
        assert!(refused(&|o| o.cq_mod = Some(0)).contains("-Q"));
        assert!(refused(&|o| o.use_srq = true).contains("send test only"));
        // -c: UC without READs, atomics or rdma_cm; UD with SEND alone.
        for (connection, test, rdma_cm, says) in [
            (
                QpType::Uc,
                BwTest::Read,
                false,
                "UC connection not possible",
            ),
            (
                QpType::Uc,
                BwTest::Atomic,
                false,
                "UC connection not possible",
            ),
            (
                QpType::Uc,
                BwTest::Send,
                true,
                "UC is not supported in librdmacm",
            ),
            (
                QpType::Ud,
                BwTest::Write,
                false,
                "UD connection only possible in SEND",
            ),
        ] {
            let m = refused(&|o| {
                (o.connection, o.test) = (connection, test);
                o.rdma_cm = rdma_cm;
            });
            assert!(m.contains(says), "{m}");
        }
        // The latency tests run -a and -D (not both, as no perftest test does).
        let m = refused(&|o| {
            o.test = BwTest::Write;
            o.latency = true;
            o.all_sizes = true;
            o.duration = Some(Duration::from_secs(2));
        });
        assert!(m.contains("-D") && m.contains("-a"), "{m}");
        for test in [BwTest::Write, BwTest::Send, BwTest::Read] {
            let mut o = options(test, 2);
            o.latency = true;
            o.all_sizes = true;
            assert!(o.check().is_ok());
            o.all_sizes = false;
            o.duration = Some(Duration::from_secs(3));
            assert!(o.check().is_ok());
        }
        assert!(options(BwTest::Write, 8).check().is_ok());
    }
}
