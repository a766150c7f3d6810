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

use core::time::Duration;
use std::io::Write;
use std::time::Instant;

use super::{
    AppError, Dialogue, PerfOptions, Setup, check, client_op, client_sge, post_receive, recv_wr,
    stalled,
};
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

/// Runs the latency test on a connected setup; returns the client's figures (`None` on a
/// passive READ/atomic server). Ends the out-of-band dialogue as perftest does: READ and
/// atomics close it (the server at once), WRITE just hangs up.
pub(super) fn run(
    rt: &mut Runtime,
    opts: &PerfOptions,
    conn: Dialogue,
    s: &Setup,
    out: &mut dyn Write,
) -> Result<Option<LatReport>, AppError> {
    let client = opts.server.is_some();
    let report = match opts.test {
        BwTest::Write => Some(run_write(rt, opts, s)?),
        BwTest::Read | BwTest::Atomic if client => Some(run_one_at_a_time(rt, opts, s)?),
        BwTest::Read | BwTest::Atomic => None,
        BwTest::Send => Some(run_send(rt, opts, s)?),
    };
    if let Some(r) = &report {
        let _ = write!(out, "{}{}", lat_header(), lat_row(r));
    }
    if opts.test == BwTest::Write {
        // No handshake ends ib_write_lat: the peer's last write is in our buffer, but its
        // acknowledgement may not have left yet, and the peer waits for it. A NIC (or rxe)
        // acknowledges after the process exits; we linger on the wire instead.
        rt.serve_for(LINGER)?;
    } else {
        // The server waits here through the client's whole test.
        conn.close(rt, opts.timeout)?;
    }
    Ok(report)
}

/// `run_iter_lat_write`: write, wait for the peer's, `iters` times each way.
fn run_write(rt: &mut Runtime, opts: &PerfOptions, s: &Setup) -> Result<LatReport, AppError> {
    let client = opts.server.is_some();
    let (op, sge) = (client_op(opts, s), client_sge(s));
    let size = s.size as usize;
    // Our last byte to send, and the peer's last byte as it lands in our receive half.
    let (post_at, poll_at) = (size - 1, s.recv_offset as usize + size - 1);
    let iters = u64::from(opts.iters);
    let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
    let mut posted = Vec::with_capacity(opts.iters as usize);
    while scnt < iters || ccnt < iters || rcnt < iters {
        // The server writes first (perftest: `!(scnt < 1 && machine == SERVER)`).
        if rcnt < iters && (client || scnt >= 1) {
            rcnt += 1;
            wait_for_byte(rt, opts, s.key, poll_at, rcnt as u8, rcnt)?;
        }
        if scnt < iters {
            posted.push(Instant::now());
            scnt += 1;
            if let Some(b) = rt.mr_bytes_mut(s.key).and_then(|m| m.get_mut(post_at)) {
                *b = scnt as u8;
            }
            rt.post_send(s.qpn, SendWr::new(scnt, op, sge.clone()))?;
        }
        if ccnt < iters {
            let wc = rt
                .wait_completion(s.cq, opts.timeout)
                .map_err(|_| stalled(opts, ccnt as u32))?;
            check(&wc)?;
            ccnt += 1;
        }
    }
    Ok(lat_report(s.size, &posted, 2.0))
}

/// `run_iter_lat_send`: receive (the client not before its first send), send, `iters`
/// times each way; receives are posted again while more are to come.
fn run_send(rt: &mut Runtime, opts: &PerfOptions, s: &Setup) -> Result<LatReport, AppError> {
    let client = opts.server.is_some();
    let (op, sge) = (client_op(opts, s), client_sge(s));
    let iters = u64::from(opts.iters);
    let mut recvs_posted = u64::from(opts.rx_depth.min(opts.iters));
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let mut posted = Vec::with_capacity(opts.iters as usize);
    while scnt < iters || rcnt < iters {
        if rcnt < iters && !(client && scnt < 1) {
            let wc = rt
                .wait_completion(s.recv_cq, opts.timeout)
                .map_err(|_| stalled(opts, rcnt as u32))?;
            check(&wc)?;
            rcnt += 1;
            if recvs_posted < iters {
                let at = s.va + s.recv_offset;
                post_receive(rt, s.qpn, s.srq, recv_wr(s.key, at, s.size))?;
                recvs_posted += 1;
            }
        }
        if scnt < iters {
            posted.push(Instant::now());
            scnt += 1;
            let mut wr = SendWr::new(scnt, op, sge.clone());
            wr.signaled = scnt % u64::from(s.cq_mod) == 0 || scnt == iters;
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
    Ok(lat_report(s.size, &posted, 2.0))
}

/// Turns the runtime until byte `at` of region `key` holds `want`.
fn wait_for_byte(
    rt: &mut Runtime,
    opts: &PerfOptions,
    key: u32,
    at: usize,
    want: u8,
    count: u64,
) -> Result<(), AppError> {
    let deadline = Instant::now() + opts.timeout;
    let step = Duration::from_millis(1);
    while rt.mr_bytes(key).and_then(|m| m.get(at)) != Some(&want) {
        if Instant::now() >= deadline {
            return Err(stalled(opts, count.saturating_sub(1) as u32));
        }
        rt.turn(Some(Instant::now() + step))?;
    }
    Ok(())
}

/// `run_iter_lat` (READ, atomics): one operation at a time, each signalled and waited for.
fn run_one_at_a_time(
    rt: &mut Runtime,
    opts: &PerfOptions,
    s: &Setup,
) -> Result<LatReport, AppError> {
    let (op, sge) = (client_op(opts, s), client_sge(s));
    let mut posted = Vec::with_capacity(opts.iters as usize);
    for i in 0..opts.iters {
        posted.push(Instant::now());
        rt.post_send(s.qpn, SendWr::new(u64::from(i), op, sge.clone()))?;
        let wc = rt
            .wait_completion(s.cq, opts.timeout)
            .map_err(|_| stalled(opts, i))?;
        check(&wc)?;
    }
    Ok(lat_report(s.size, &posted, 1.0))
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
