//! perftest's software rate limiter (`--rate_limit`, `--rate_units`, `--rate_limit_type`,
//! `--burst_size`; `run_iter_bw` in perftest_resources.c): the requester posts bursts of
//! `--burst_size` requests (default: the TX depth), one burst every `1 / (pps / burst)`
//! seconds, where the rate in packets per second comes from the limit in the units asked
//! for and the message size. Only the bandwidth tests' requester is paced, as perftest's:
//! its latency tests and the bidirectional SEND test (`run_iter_bi`) never look at it.
//!
//! A hardware limit (perftest's default type when only `--rate_limit` is given) is a
//! static rate in the QP's address vector that a RoCE port does not take: perftest then
//! falls back to the software limiter with a line saying so, and fails if `HW` was asked
//! for by name. Its default type first takes only the InfiniBand static rates (the text
//! of `--rate_limit` among 2.5, 5, 10, ... 300, whatever the units), no packets per second
//! and no rdma_cm. This endpoint does the same; packet pacing (`PP`) needs NIC support it
//! does not have and is refused.

use core::time::Duration;
use std::time::Instant;

use super::{AppError, BwTest, PerfOptions};

/// The InfiniBand static rates in Gb/s (perftest's `RATE_VALUES`, `enum ibv_rate`): the
/// only limits its default (hardware) limiter takes.
const IB_STATIC_RATES: [f64; 17] = [
    2.5, 5.0, 10.0, 14.0, 20.0, 25.0, 30.0, 40.0, 56.0, 60.0, 80.0, 100.0, 112.0, 120.0, 168.0,
    200.0, 300.0,
];

/// `--rate_units`: what `--rate_limit` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateUnits {
    /// `M`: MiB per second (perftest's `MEGA_BYTE_PS`, 2^20 bytes).
    MebibytesPerSec,
    /// `g`: Gb per second (10^9 bits), perftest's default.
    #[default]
    GigabitsPerSec,
    /// `p`: messages ("packets") per second.
    PacketsPerSec,
}

/// `--rate_limit_type`: how the limit is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateLimitType {
    /// Not named: perftest's HW, which on a RoCE port falls back to SW.
    #[default]
    Unnamed,
    /// `SW`: the requester paces its posts.
    Software,
    /// `HW`: the QP's static rate (an InfiniBand link's; refused here, as perftest fails
    /// on RoCE when HW is asked for by name).
    Hardware,
    /// `PP`: packet pacing of the NIC (refused: no such hardware).
    PacketPacing,
}

/// perftest's rate limiter options.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RateLimit {
    /// `--rate_limit`: the limit, in `units`; `None` when not asked for.
    pub rate: Option<f64>,
    /// `--rate_units`.
    pub units: RateUnits,
    /// `--rate_limit_type`.
    pub kind: RateLimitType,
    /// `--burst_size`: requests per burst; `None` for the TX depth.
    pub burst: Option<u32>,
}

impl RateLimit {
    /// Whether the requester is paced at all.
    fn active(&self) -> bool {
        self.rate.is_some() || self.kind != RateLimitType::Unnamed
    }

    /// perftest's refusals, as one line each.
    pub(super) fn check(&self, opts: &PerfOptions) -> Result<(), AppError> {
        let usage = |m: &str| Err(AppError::Usage(m.into()));
        if self.burst.is_some() && !self.active() {
            return usage("Can't enable burst mode when rate limiter is off (--burst_size)");
        }
        if self.burst == Some(0) {
            return usage("the burst size (--burst_size) must be positive");
        }
        if !self.active() {
            return Ok(());
        }
        let rate = match self.rate {
            Some(r) if r.is_finite() && r > 0.0 => r,
            Some(_) => return usage("Rate limit must be a positive number (--rate_limit)"),
            None => {
                return usage("a rate limiter type needs a rate: add --rate_limit=<limit>");
            }
        };
        match self.kind {
            RateLimitType::Unnamed if self.units == RateUnits::PacketsPerSec => usage(
                "pps rate limit units is not supported when setting HW rate limit \
                 (perftest's default type): add --rate_limit_type=SW",
            ),
            RateLimitType::Unnamed if opts.rdma_cm => usage(
                "HW rate limit (perftest's default type) isn't supported with rdma_cm (-R): \
                 add --rate_limit_type=SW",
            ),
            RateLimitType::Unnamed if !IB_STATIC_RATES.contains(&rate) => usage(
                "Unknown rate limit value: perftest's default HW limiter takes an InfiniBand \
                 static rate (2.5, 5, 10, 14, 20, 25, 30, 40, 56, 60, 80, 100, 112, 120, 168, \
                 200 or 300); add --rate_limit_type=SW for any other",
            ),
            RateLimitType::Hardware => usage(
                "The QP failed to accept HW rate limit (a RoCE port has no static rate): use --rate_limit_type=SW",
            ),
            RateLimitType::PacketPacing => usage(
                "Packet pacing (PP) is a NIC feature this endpoint does not have: use --rate_limit_type=SW",
            ),
            RateLimitType::Software
                if opts.latency
                    || opts.test == BwTest::Atomic
                    || (opts.test == BwTest::Send && opts.duplex) =>
            {
                usage(
                    "SW Rate limiter cann't be executed on non-BW, ATOMIC or bidirectional SEND tests",
                )
            }
            RateLimitType::Software | RateLimitType::Unnamed => Ok(()),
        }
    }

    /// The lines perftest prints about the limiter before the test: the fallback from its
    /// default type, the burst size it takes.
    pub(super) fn lines(&self, tx_depth: u32) -> String {
        match self.kind {
            _ if self.rate.is_none() => String::new(),
            RateLimitType::Unnamed => {
                "The QP failed to accept HW rate limit, providing SW rate limit\n".into()
            }
            RateLimitType::Software if self.burst.is_none() => {
                format!(" Setting burst size to tx depth = {tx_depth}\n")
            }
            _ => String::new(),
        }
    }

    /// The pacer of a run of `size`-byte messages at most `tx_depth` outstanding; `None`
    /// when unpaced (the latency tests and bidirectional SEND never are, as perftest's
    /// own loops for them ignore the limiter).
    pub(super) fn pacer(&self, size: u32, tx_depth: u32) -> Result<Option<Pacer>, AppError> {
        let Some(rate) = self.rate else {
            return Ok(None);
        };
        let size = f64::from(size.max(1));
        let pps = match self.units {
            RateUnits::MebibytesPerSec => rate / size * 1_048_576.0,
            RateUnits::GigabitsPerSec => rate / (size * 8.0) * 1e9,
            RateUnits::PacketsPerSec => rate,
        };
        let burst = self.burst.unwrap_or(tx_depth).max(1);
        // perftest divides in integers: a rate below one burst a second would never send
        // again there; refused here instead.
        let bursts = (pps as u64) / u64::from(burst);
        if bursts == 0 {
            return Err(AppError::Usage(format!(
                "a rate limit of {pps:.0} messages/s of {size} bytes is below one burst of \
                 {burst} a second: lower --burst_size or raise --rate_limit"
            )));
        }
        Ok(Some(Pacer {
            burst,
            gap: Duration::from_secs_f64(1.0 / bursts as f64),
            next: None,
            left: 0,
        }))
    }
}

/// Bursts of `burst` posts, each burst starting at least `gap` after the previous one.
#[derive(Debug, Clone)]
pub(super) struct Pacer {
    burst: u32,
    gap: Duration,
    /// When the next burst may start.
    next: Option<Instant>,
    /// Posts left in the current burst.
    left: u32,
}

impl Pacer {
    /// Whether a request may be posted at `now`: within a burst, or starting the next one
    /// once its gap is over.
    pub fn may_post(&mut self, now: Instant) -> bool {
        if self.left == 0 {
            if self.next.is_some_and(|t| now < t) {
                return false;
            }
            self.next = Some(now + self.gap);
            self.left = self.burst;
        }
        true
    }

    /// One request posted.
    pub fn posted(&mut self) {
        self.left = self.left.saturating_sub(1);
    }

    /// Between bursts: how long until the next may start (zero once it may: the requester
    /// must then post it rather than wait for a completion, which unsignaled requests may
    /// never bring).
    pub fn gap_left(&self, now: Instant) -> Option<Duration> {
        match (self.left, self.next) {
            (0, Some(t)) => Some(t.saturating_duration_since(now)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rate: f64, units: RateUnits, burst: Option<u32>) -> RateLimit {
        RateLimit {
            rate: Some(rate),
            units,
            kind: RateLimitType::Software,
            burst,
        }
    }

    /// perftest's arithmetic: packets per second from the units and the size, bursts per
    /// second in whole numbers, the gap their inverse.
    #[test]
    fn gap_between_bursts_from_the_units() {
        let cases = [
            // 1 Gb/s of 1000-byte messages: 125,000 pps, bursts of 125: 1000 a second.
            (
                limit(1.0, RateUnits::GigabitsPerSec, Some(125)),
                1000,
                1_000_000,
            ),
            // 4 MiB/s of 4096-byte messages: 1024 pps, bursts of 128 (the TX depth): 8.
            (
                limit(4.0, RateUnits::MebibytesPerSec, None),
                4096,
                125_000_000,
            ),
            // 3000 pps, bursts of 10: 300 a second, 3.333 ms apart.
            (
                limit(3000.0, RateUnits::PacketsPerSec, Some(10)),
                64,
                3_333_333,
            ),
        ];
        for (l, size, gap_ns) in cases {
            let p = l.pacer(size, 128).unwrap().unwrap();
            assert_eq!(p.gap.as_nanos(), gap_ns, "{l:?}");
        }
        let e = limit(10.0, RateUnits::PacketsPerSec, Some(20)).pacer(64, 128);
        assert!(e.unwrap_err().to_string().contains("below one burst"));
        assert!(RateLimit::default().pacer(64, 128).unwrap().is_none());
    }

    /// A burst posts `burst` requests, then nothing until the gap since its start is over.
    #[test]
    fn bursts_wait_out_the_gap() {
        let mut p = limit(3000.0, RateUnits::PacketsPerSec, Some(10))
            .pacer(64, 128)
            .unwrap()
            .unwrap();
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(p.may_post(t0));
            p.posted();
        }
        assert!(!p.may_post(t0 + Duration::from_millis(3)));
        assert_eq!(
            p.gap_left(t0 + Duration::from_millis(3)),
            Some(p.gap - Duration::from_millis(3))
        );
        // The gap over but the next burst not started: nothing to wait for.
        assert_eq!(p.gap_left(t0 + p.gap * 2), Some(Duration::ZERO));
        assert!(p.may_post(t0 + p.gap));
        assert_eq!(p.gap_left(t0 + p.gap), None);
    }

    #[test]
    fn refusals_are_one_line() {
        let opts = PerfOptions::new(BwTest::Write, None);
        let refused = |l: RateLimit, o: &PerfOptions| l.check(o).unwrap_err().to_string();
        let burst_alone = RateLimit {
            burst: Some(4),
            ..RateLimit::default()
        };
        assert!(refused(burst_alone, &opts).contains("rate limiter is off"));
        let mut sw = limit(1.0, RateUnits::GigabitsPerSec, None);
        assert!(sw.check(&opts).is_ok());
        for (kind, says) in [
            (RateLimitType::Hardware, "HW rate limit"),
            (RateLimitType::PacketPacing, "Packet pacing"),
        ] {
            assert!(refused(RateLimit { kind, ..sw }, &opts).contains(says));
        }
        let mut lat = opts.clone();
        lat.latency = true;
        assert!(refused(sw, &lat).contains("non-BW"));
        // Unnamed (perftest's HW default) takes a static rate, then falls back to SW
        // anywhere, as perftest's does, saying so.
        sw.kind = RateLimitType::Unnamed;
        assert!(refused(sw, &lat).contains("Unknown rate limit value"));
        sw.rate = Some(2.5);
        assert!(sw.check(&lat).is_ok());
        assert!(sw.lines(128).contains("providing SW rate limit"));
        let mut cm = opts.clone();
        cm.rdma_cm = true;
        assert!(refused(sw, &cm).contains("rdma_cm"));
        sw.units = RateUnits::PacketsPerSec;
        assert!(refused(sw, &opts).contains("pps"));
        sw.units = RateUnits::MebibytesPerSec;
        assert!(sw.check(&opts).is_ok());
        sw.kind = RateLimitType::Software;
        assert_eq!(sw.lines(64), " Setting burst size to tx depth = 64\n");
        sw.rate = Some(-1.0);
        assert!(refused(sw, &opts).contains("positive"));
        let type_alone = RateLimit {
            kind: RateLimitType::Software,
            ..RateLimit::default()
        };
        assert!(refused(type_alone, &opts).contains("needs a rate"));
        assert!(
            refused(
                RateLimit {
                    burst: Some(0),
                    ..limit(1.0, RateUnits::PacketsPerSec, None)
                },
                &opts
            )
            .contains("positive")
        );
    }
}
