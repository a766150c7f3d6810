//! perftest's latency tests (`--lat`): ib_write_lat, ib_read_lat and ib_atomic_lat 4.5, run
//! with `-x IDX -F`, either role.
//!
//! - WRITE: both sides write `size` bytes to each other in turn, each waiting until the
//!   last byte of the peer's write (the iteration number, modulo 256) shows in its own
//!   buffer (`run_iter_lat_write`); the server writes first. Every write is signalled.
//! - SEND: both sides keep receives posted; the client sends first, then each side sends
//!   when the peer's SEND has arrived (`run_iter_lat_send`), a completion asked for every
//!   `cq_mod` sends.
//! - READ and atomics: the client posts one at a time and waits for its completion
//!   (`run_iter_lat`); the server is passive.
//!
//! The client's figures are the times between successive posts, halved for WRITE (a round
//! trip holds two writes), sorted, the two largest dropped (`LAT_MEASURE_TAIL`), printed as
//! `print_report_lat` does: t_min, t_max, t_typical (the median), t_avg, t_stdev, and the
//! 99% and 99.9% percentiles, in microseconds.
//!
//! `-a` runs every size from 2 bytes to 8 MiB, a row each under one header; WRITE, READ and
//! atomics go from size to size without a word, ib_send_lat's sides post each size's
//! receives and shake hands first. `-D SECONDS` runs each side on its own clock for that
//! long: a margin of a quarter of it (whole seconds), the sample window, a margin, and
//! `print_report_lat_duration`'s row, the operations completed in the window (SEND: the
//! messages received), the window's time per operation (halved for WRITE and SEND) and
//! operations per second. The side whose time is up stops waiting for the peer.

use core::time::Duration;
use std::io::Write;
use std::time::Instant;

use super::{AppError, Dialogue, PerfOptions, Setup, Test, check, post_receive, recv_wr, stalled};
use crate::endpoint::oob::perftest::BwTest;
use crate::endpoint::runtime::Runtime;
use crate::transport::SendWr;

/// How long the WRITE latency test keeps answering the wire after its last iteration.
const LINGER: Duration = Duration::from_millis(200);

/// perftest drops this many of the largest samples.
const LAT_MEASURE_TAIL: usize = 2;

/// `print_report_lat`'s figures, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatReport {
    /// Message size in bytes.
    pub size: u64,
    /// Operations each side posted.
    pub iters: u64,
    /// The shortest latency.
    pub t_min: f64,
    /// The longest latency.
    pub t_max: f64,
    /// The median.
    pub t_typical: f64,
    /// The mean.
    pub t_avg: f64,
    /// The standard deviation.
    pub t_stdev: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p99_9: f64,
}

/// `RESULT_FMT_LAT`, the line over the row.
pub fn lat_header() -> &'static str {
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
     t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
}

/// `REPORT_FMT_LAT`.
pub fn lat_row(r: &LatReport) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\
         \t\t{:<7.2} \t\t{:<7.2}\n",
        r.size, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p99_9
    )
}

/// The figures of `posted` (the time of each post), as `print_report_lat` computes them:
/// `factor` is 2 for WRITE (two writes per round trip), 1 for READ and atomics.
pub fn lat_report(size: u32, posted: &[Instant], factor: f64) -> LatReport {
    let mut delta: Vec<f64> = posted
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]).as_secs_f64() * 1e6 / factor)
        .collect();
    delta.sort_by(f64::total_cmp);
    let n = delta.len().saturating_sub(LAT_MEASURE_TAIL);
    if n == 0 {
        return LatReport {
            size: u64::from(size),
            iters: posted.len() as u64,
            ..LatReport::default()
        };
    }
    // get_median: the mean of the middle two when (n - 1) is odd.
    let median = if (n - 1) % 2 == 1 {
        (delta[n / 2] + delta[n / 2 - 1]) / 2.0
    } else {
        delta[n / 2]
    };
    let avg = delta[..n].iter().sum::<f64>() / n as f64;
    let var = delta[..n].iter().map(|d| (avg - d).powi(2)).sum::<f64>() / n as f64;
    // perftest indexes the sorted samples at ceil(n x 0.99) (and includes delta[n], the
    // smallest of the dropped tail, as t_max).
    let at = |q: f64| delta[((n as f64 * q).ceil() as usize).min(delta.len() - 1)];
    LatReport {
        size: u64::from(size),
        iters: posted.len() as u64,
        t_min: delta[0],
        t_max: delta[n.min(delta.len() - 1)],
        t_typical: median,
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: at(0.99),
        p99_9: at(0.999),
    }
}

/// `RESULT_FMT_LAT_DUR`, the line over the row in duration mode (`-D`).
pub fn lat_duration_header() -> &'static str {
    " #bytes        #iterations       t_avg[usec]    tps average\n"
}

/// `print_report_lat_duration`'s figures: the operations of the sample window (from one
/// margin after the start to one margin before the end) and what they make.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatDurationReport {
    /// Message size in bytes.
    pub size: u64,
    /// Operations completed (WRITE, READ, atomics) or received (SEND) in the window.
    pub iters: u64,
    /// The window's time per operation in microseconds, halved for WRITE and SEND.
    pub t_avg: f64,
    /// Operations per second.
    pub tps: f64,
}

/// `REPORT_FMT_LAT_DUR`.
pub fn lat_duration_row(r: &LatDurationReport) -> String {
    format!(
        " {:<7}       {}            {:<7.2}        {:<7.2}\n",
        r.size, r.iters, r.t_avg, r.tps
    )
}

/// What one side's latency test printed: a row per size (`-a`: the last is kept).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatFigures {
    /// `-n` iterations: `print_report_lat`'s figures.
    pub iterations: Option<LatReport>,
    /// `-D`: `print_report_lat_duration`'s.
    pub duration: Option<LatDurationReport>,
}

/// perftest's duration mode (`catch_alarm`): a margin of `duration / 4` whole seconds,
/// the sample window, a margin, the end. Operations count when they complete inside the
/// window; the window's length is the time they are divided by.
#[derive(Debug, Clone, Copy)]
struct Phases {
    sample_from: Instant,
    sample_to: Instant,
    end: Instant,
}

impl Phases {
    fn new(duration: Duration) -> Phases {
        let start = Instant::now();
        let margin = super::margin(duration);
        Phases {
            sample_from: start + margin,
            sample_to: start + duration - margin,
            end: start + duration,
        }
    }

    fn sampling(&self, now: Instant) -> bool {
        self.sample_from <= now && now < self.sample_to
    }
}

/// One size's run: `-n` iterations (the time of each post kept) or `-D` (the operations
/// completed inside the window counted).
#[derive(Debug)]
struct Run {
    iters: u64,
    phases: Option<Phases>,
    posted: Vec<Instant>,
    sampled: u64,
}

impl Run {
    fn new(opts: &PerfOptions) -> Run {
        let timed = opts.duration.map(Phases::new);
        Run {
            iters: u64::from(opts.iters),
            phases: timed,
            posted: Vec::with_capacity(if timed.is_some() {
                0
            } else {
                opts.iters as usize
            }),
            sampled: 0,
        }
    }

    /// Whether a count of `n` asks for more: below `-n`, or before the end of `-D`.
    fn more(&self, n: u64) -> bool {
        match self.phases {
            Some(p) => Instant::now() < p.end,
            None => n < self.iters,
        }
    }

    fn timed(&self) -> bool {
        self.phases.is_some()
    }

    /// When `-D` ends.
    fn end(&self) -> Option<Instant> {
        self.phases.map(|p| p.end)
    }

    /// An operation is about to be posted.
    fn post(&mut self) {
        if !self.timed() {
            self.posted.push(Instant::now());
        }
    }

    /// An operation completed (SEND: a message arrived).
    fn completed(&mut self) {
        if self.phases.is_some_and(|p| p.sampling(Instant::now())) {
            self.sampled += 1;
        }
    }

    /// The figures: `factor` is 2 for WRITE and SEND (two messages per round trip), 1 for
    /// READ and atomics.
    fn figures(self, size: u32, factor: f64) -> LatFigures {
        match self.phases {
            None => LatFigures {
                iterations: Some(lat_report(size, &self.posted, factor)),
                duration: None,
            },
            Some(p) => {
                let secs = p
                    .sample_to
                    .saturating_duration_since(p.sample_from)
                    .as_secs_f64();
                let n = self.sampled as f64;
                LatFigures {
                    iterations: None,
                    duration: Some(LatDurationReport {
                        size: u64::from(size),
                        iters: self.sampled,
                        t_avg: secs * 1e6 / factor / n,
                        tps: n / secs,
                    }),
                }
            }
        }
    }
}

/// Runs the latency test on a connected setup: a row per size (`-a`) or one, of the `-n`
/// table or `-D`'s; returns the last row's figures (none on a passive READ/atomic server).
/// Ends the out-of-band dialogue as perftest does: READ, atomics and SEND close it (the
/// passive server at once, waiting there through the client's test), WRITE just hangs up.
pub(super) fn run(
    rt: &mut Runtime,
    opts: &PerfOptions,
    mut conn: Dialogue,
    s: &mut Setup,
    out: &mut dyn Write,
) -> Result<LatFigures, AppError> {
    let client = opts.server.is_some();
    let mut last = LatFigures::default();
    if client || matches!(opts.test, BwTest::Write | BwTest::Send) {
        let header = match opts.duration {
            Some(_) => lat_duration_header(),
            None => lat_header(),
        };
        let _ = write!(out, "{header}");
        for size in s.sizes(opts) {
            s.size = size;
            if opts.all_sizes && opts.test == BwTest::Send {
                // ib_send_lat posts each size's receives, then shakes hands.
                for _ in 0..opts.rx_depth.min(opts.iters) {
                    let at = s.va + s.recv_offset;
                    post_receive(rt, s.qpn, s.srq, recv_wr(s.key, at, size + s.grh))?;
                }
                conn.sync(rt)?;
            }
            let mut run = Run::new(opts);
            let test = Test::new(opts, s);
            let factor = match opts.test {
                BwTest::Write => {
                    test.lat_write(rt, &mut run)?;
                    2.0
                }
                BwTest::Send => {
                    test.lat_send(rt, &mut run)?;
                    2.0
                }
                BwTest::Read | BwTest::Atomic => {
                    test.lat_one_at_a_time(rt, &mut run)?;
                    1.0
                }
            };
            last = run.figures(size, factor);
            let row = match (&last.iterations, &last.duration) {
                (Some(r), _) => lat_row(r),
                (_, Some(r)) => lat_duration_row(r),
                _ => String::new(),
            };
            let _ = write!(out, "{row}");
            let _ = out.flush();
        }
    }
    if opts.test == BwTest::Write {
        // No handshake ends ib_write_lat: the peer's last write is in our buffer, but its
        // acknowledgement may not have left yet, and the peer waits for it. A NIC (or rxe)
        // acknowledges after the process exits; we linger on the wire instead.
        rt.serve_for(LINGER)?;
        conn.hang_up(rt)?;
    } else {
        // The passive server waits here through the client's whole test.
        conn.close(rt, opts.timeout + opts.duration.unwrap_or_default())?;
    }
    Ok(last)
}

/// The latency loops, each on the first QP.
impl Test<'_> {
    /// `run_iter_lat_write`: write, wait for the peer's, `iters` times each way (or until
    /// `-D` ends, the writes completed inside its window counted).
    fn lat_write(&self, rt: &mut Runtime, run: &mut Run) -> Result<(), AppError> {
        let (opts, s, client) = (self.opts, self.s, self.opts.server.is_some());
        let (op, sge) = &self.ops[0];
        let size = s.size as usize;
        // Our last byte to send, and the peer's last byte as it lands in our receive half.
        let (post_at, poll_at) = (size - 1, s.recv_offset as usize + size - 1);
        let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
        while run.more(scnt) || run.more(ccnt) || run.more(rcnt) {
            // The server writes first (perftest: `!(scnt < 1 && machine == SERVER)`).
            if run.more(rcnt) && (client || scnt >= 1) {
                rcnt += 1;
                if !wait_for_byte(rt, opts, (s.key, poll_at), rcnt as u8, rcnt, run.end())? {
                    break;
                }
            }
            if run.more(scnt) {
                run.post();
                scnt += 1;
                if let Some(b) = rt.mr_bytes_mut(s.key).and_then(|m| m.get_mut(post_at)) {
                    *b = scnt as u8;
                }
                rt.post_send(s.qpn, SendWr::new(scnt, *op, sge.clone()))?;
            }
            if run.more(ccnt) {
                let wc = rt
                    .wait_completion(s.cq, opts.timeout)
                    .map_err(|_| stalled(opts, ccnt as u32))?;
                check(&wc)?;
                ccnt += 1;
                run.completed();
            }
        }
        Ok(())
    }

    /// `run_iter_lat_send`: receive (the client not before its first send), send, `iters`
    /// times each way (or until `-D` ends, the messages received inside its window counted);
    /// receives are posted again while more are to come.
    fn lat_send(&self, rt: &mut Runtime, run: &mut Run) -> Result<(), AppError> {
        let (opts, s, client) = (self.opts, self.s, self.opts.server.is_some());
        let (op, sge) = &self.ops[0];
        let iters = u64::from(opts.iters);
        let mut recvs_posted = u64::from(opts.rx_depth.min(opts.iters));
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        while run.more(scnt) || run.more(rcnt) {
            if run.more(rcnt) && !(client && scnt < 1) {
                let Some(wc) = wait_before_end(rt, opts, s.recv_cq, run.end(), rcnt)? else {
                    break;
                };
                check(&wc)?;
                rcnt += 1;
                run.completed();
                if run.timed() || recvs_posted < iters {
                    let at = s.va + s.recv_offset;
                    post_receive(rt, s.qpn, s.srq, recv_wr(s.key, at, s.size + s.grh))?;
                    recvs_posted += 1;
                }
            }
            if run.more(scnt) {
                run.post();
                scnt += 1;
                let mut wr = SendWr::new(scnt, *op, sge.clone());
                wr.ud = s.lanes[0].ud;
                wr.signaled =
                    scnt.is_multiple_of(u64::from(s.cq_mod)) || (!run.timed() && scnt == iters);
                let signaled = wr.signaled;
                rt.post_send(s.qpn, wr)?;
                if signaled {
                    let wc = rt
                        .wait_completion(s.cq, opts.timeout)
                        .map_err(|_| stalled(opts, scnt as u32))?;
                    check(&wc)?;
                }
            }
        }
        Ok(())
    }

    /// `run_iter_lat` (READ, atomics): one operation at a time, each signalled and waited for
    /// (`-D`: until it ends, those completed inside its window counted).
    fn lat_one_at_a_time(&self, rt: &mut Runtime, run: &mut Run) -> Result<(), AppError> {
        let (opts, s) = (self.opts, self.s);
        let (op, sge) = &self.ops[0];
        let mut scnt = 0u64;
        while run.more(scnt) {
            run.post();
            rt.post_send(s.qpn, SendWr::new(scnt, *op, sge.clone()))?;
            scnt += 1;
            let wc = rt
                .wait_completion(s.cq, opts.timeout)
                .map_err(|_| stalled(opts, scnt as u32 - 1))?;
            check(&wc)?;
            run.completed();
        }
        Ok(())
    }
}

/// The next completion of `cq`, or `None` if `end` (`-D`'s) comes first.
fn wait_before_end(
    rt: &mut Runtime,
    opts: &PerfOptions,
    cq: crate::transport::CqId,
    end: Option<Instant>,
    count: u64,
) -> Result<Option<crate::transport::WorkCompletion>, AppError> {
    let Some(end) = end else {
        let wc = rt
            .wait_completion(cq, opts.timeout)
            .map_err(|_| stalled(opts, count as u32))?;
        return Ok(Some(wc));
    };
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        if let Ok(wc) = rt.wait_completion(cq, left.min(opts.timeout)) {
            return Ok(Some(wc));
        }
    }
}

/// Turns the runtime until byte `at` of region `key` holds `want`: true, or false if
/// `end` (`-D`'s) comes first.
fn wait_for_byte(
    rt: &mut Runtime,
    opts: &PerfOptions,
    (key, at): (u32, usize),
    want: u8,
    count: u64,
    end: Option<Instant>,
) -> Result<bool, AppError> {
    let deadline = Instant::now() + opts.timeout;
    let step = Duration::from_millis(1);
    while rt.mr_bytes(key).and_then(|m| m.get(at)) != Some(&want) {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            return Ok(false);
        }
        if end.is_none() && now >= deadline {
            return Err(stalled(opts, count.saturating_sub(1) as u32));
        }
        rt.turn(Some(now + step))?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_print_report_lats() {
        // Posts 10 us apart except one 100 us gap and one 50 us gap: the two largest are
        // dropped, so t_max is the largest left... plus perftest's delta[n].
        let t0 = Instant::now();
        let gaps = [10u64, 10, 10, 100, 10, 12, 50, 10, 10, 14];
        let mut t = t0;
        let mut posted = vec![t];
        for g in gaps {
            t += Duration::from_micros(g);
            posted.push(t);
        }
        let r = lat_report(2, &posted, 2.0);
        // Halved: 5, 5, 5, 5, 5, 5, 6, 7 | 25, 50 (dropped); n = 8.
        assert_eq!((r.size, r.iters), (2, 11));
        assert!((r.t_min - 5.0).abs() < 1e-9, "{r:?}");
        assert!((r.t_typical - 5.0).abs() < 1e-9, "{r:?}");
        assert!((r.t_avg - 43.0 / 8.0).abs() < 1e-9, "{r:?}");
        assert!((r.t_max - 25.0).abs() < 1e-9, "delta[n] {r:?}");
        assert!((r.p99 - 25.0).abs() < 1e-9, "{r:?}");
        let row = lat_row(&r);
        assert!(row.starts_with(" 2       11          5.00"), "{row:?}");
    }
}
