//! Fixed-size summaries that replace per-packet records, so that memory grows with the number
//! of flows and never with the number of packets: a log-scale latency histogram, goodput in
//! time buckets that coarsen as the capture grows, and the recent packet spacing of a flow.

/// Sub-buckets per power of two: quantiles are exact to within 1/16 (about 6%).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A histogram of durations in nanoseconds, HDR-style: 16 linear buckets per power of two.
/// The buckets used are listed while they are few (most flows' round trips fall in a
/// handful), and spread into a table of all of them after [`FEW_BUCKETS`].
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    counts: Counts,
    samples: u64,
    min: u64,
    max: u64,
}

/// Buckets listed before the table of all of them is made.
const FEW_BUCKETS: usize = 32;

#[derive(Debug, Clone)]
enum Counts {
    /// (bucket, count), unsorted.
    Few(Vec<(u16, u32)>),
    All(Box<[u32; BUCKETS]>),
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: Counts::Few(Vec::new()),
            samples: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - SUB_BITS)) as usize & (SUB - 1);
    ((exp - SUB_BITS + 1) as usize) * SUB + sub
}

/// The smallest value that falls in bucket `b`, and the bucket's width.
fn bucket_range(b: usize) -> (u64, u64) {
    if b < SUB {
        return (b as u64, 1);
    }
    let exp = (b / SUB) as u32 + SUB_BITS - 1;
    let width = 1u64 << (exp - SUB_BITS);
    ((1u64 << exp) + (b % SUB) as u64 * width, width)
}

impl LatencyHistogram {
    /// Counts one duration.
    pub fn record(&mut self, ns: u64) {
        let b = bucket_of(ns);
        match &mut self.counts {
            Counts::All(all) => all[b] = all[b].saturating_add(1),
            Counts::Few(few) => match few.iter().position(|(k, _)| usize::from(*k) == b) {
                Some(i) => few[i].1 = few[i].1.saturating_add(1),
                None if few.len() < FEW_BUCKETS => few.push((b as u16, 1)),
                None => {
                    let mut all = Box::new([0u32; BUCKETS]);
                    for &(k, n) in few.iter() {
                        all[usize::from(k)] = n;
                    }
                    all[b] = 1;
                    self.counts = Counts::All(all);
                }
            },
        }
        self.samples += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Durations recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        match &self.counts {
            Counts::Few(few) => few.capacity() * 8,
            Counts::All(_) => BUCKETS * 4,
        }
    }

    /// The `q` quantile (0..=1): the middle of the bucket holding it, clamped to the exact
    /// minimum and maximum. `None` with no samples.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.samples as f64).ceil() as u64).max(1);
        if rank >= self.samples {
            return Some(self.max);
        }
        let counts: Vec<(usize, u32)> = match &self.counts {
            Counts::All(all) => all.iter().copied().enumerate().collect(),
            Counts::Few(few) => {
                let mut sorted: Vec<(usize, u32)> =
                    few.iter().map(|&(b, n)| (usize::from(b), n)).collect();
                sorted.sort_unstable();
                sorted
            }
        };
        let mut seen = 0u64;
        for (b, c) in counts {
            seen += u64::from(c);
            if seen >= rank {
                let (low, width) = bucket_range(b);
                return Some((low + width / 2).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// The shortest duration recorded, if any.
    pub fn min(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.min)
    }

    /// The longest duration recorded, if any.
    pub fn max(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.max)
    }
}

/// Number of goodput buckets per flow.
pub const GOODPUT_BUCKETS: usize = 64;
/// Width of a bucket at the start, as a power of two; it doubles whenever the capture
/// outgrows 64 of them. Powers of two make a bucket index a shift, not a division.
const FIRST_BUCKET_SHIFT: u32 = 17;

/// Bytes per time bucket since the capture's first frame. The bucket width is shared by every
/// flow (the clock lives in [`GoodputClock`]); a flow catches up with a wider width lazily.
#[derive(Debug, Clone)]
pub struct Goodput {
    bytes: [u64; GOODPUT_BUCKETS],
    shift: u32,
}

/// The capture-wide bucket width.
#[derive(Debug, Clone, Copy)]
pub struct GoodputClock {
    shift: u32,
}

impl Default for GoodputClock {
    fn default() -> Self {
        GoodputClock {
            shift: FIRST_BUCKET_SHIFT,
        }
    }
}

impl GoodputClock {
    /// Widens the buckets until `since_start` fits.
    pub fn advance(&mut self, since_start: u64) {
        while since_start >> self.shift >= GOODPUT_BUCKETS as u64 {
            self.shift += 1;
        }
    }

    /// The current width of a goodput bucket.
    pub fn width_ns(&self) -> u64 {
        1 << self.shift
    }
}

impl Default for Goodput {
    fn default() -> Self {
        Goodput {
            bytes: [0; GOODPUT_BUCKETS],
            shift: FIRST_BUCKET_SHIFT,
        }
    }
}

impl Goodput {
    fn catch_up(&mut self, clock: GoodputClock) {
        while self.shift < clock.shift {
            for i in 0..GOODPUT_BUCKETS / 2 {
                self.bytes[i] = self.bytes[2 * i] + self.bytes[2 * i + 1];
            }
            self.bytes[GOODPUT_BUCKETS / 2..].fill(0);
            self.shift += 1;
        }
    }

    /// Adds `bytes` at `since_start` (the clock has already advanced past it).
    pub fn add(&mut self, clock: GoodputClock, since_start: u64, bytes: u64) {
        self.catch_up(clock);
        let i = ((since_start >> self.shift) as usize).min(GOODPUT_BUCKETS - 1);
        self.bytes[i] += bytes;
    }

    /// Bytes per bucket at the clock's width, up to the last bucket the capture reached.
    pub fn buckets(&self, clock: GoodputClock, capture_ns: u64) -> Vec<u64> {
        let mut g = self.clone();
        g.catch_up(clock);
        let used = ((capture_ns >> clock.shift) as usize + 1).min(GOODPUT_BUCKETS);
        g.bytes[..used].to_vec()
    }
}

/// Gaps averaged before and after a congestion signal.
pub const SPACING_GAPS: usize = 16;

/// The last few inter-packet gaps of a flow.
#[derive(Debug, Clone, Default)]
pub struct Spacing {
    last_ts: Option<u64>,
    gaps: [u64; SPACING_GAPS],
    next: usize,
    filled: usize,
}

impl Spacing {
    /// Records a packet at `ts`; returns the gap since the previous one.
    pub fn packet(&mut self, ts: u64) -> Option<u64> {
        let gap = self.last_ts.map(|last| ts.saturating_sub(last));
        self.last_ts = Some(ts);
        if let Some(g) = gap {
            self.gaps[self.next] = g;
            self.next = (self.next + 1) % SPACING_GAPS;
            self.filled = (self.filled + 1).min(SPACING_GAPS);
        }
        gap
    }

    /// Mean of the recorded gaps, if any.
    pub fn mean(&self) -> Option<u64> {
        (self.filled > 0).then(|| self.gaps[..self.filled].iter().sum::<u64>() / self.filled as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last && b < BUCKETS, "{v}");
            let (low, width) = bucket_range(b);
            assert!(low <= v && v - low < width, "{v}: {low} + {width}");
            last = b;
        }
    }

    #[test]
    fn quantiles_are_within_one_sixteenth() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let median = h.quantile(0.5).unwrap() as f64;
        assert!(
            (median - 500_000.0).abs() / 500_000.0 < 1.0 / 16.0,
            "{median}"
        );
        let p99 = h.quantile(0.99).unwrap() as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 1.0 / 16.0, "{p99}");
        assert_eq!(h.quantile(1.0), Some(1_000_000));
        assert_eq!(h.min(), Some(1000));
    }

    /// Few buckets listed or all of them in a table: the same quantiles.
    #[test]
    fn a_wide_spread_moves_to_the_table_with_the_same_answers() {
        let mut few = LatencyHistogram::default();
        for v in [900u64, 1000, 1000, 5000, 77, 1 << 30] {
            few.record(v);
        }
        assert!(few.heap_bytes() <= FEW_BUCKETS * 8);
        let mut table = few.clone();
        if let Counts::Few(list) = &table.counts {
            let mut all = Box::new([0u32; BUCKETS]);
            for &(b, n) in list {
                all[usize::from(b)] = n;
            }
            table.counts = Counts::All(all);
        }
        for q in [0.0, 0.2, 0.5, 0.7, 0.99, 1.0] {
            assert_eq!(few.quantile(q), table.quantile(q), "q {q}");
        }
        for e in 0..40 {
            few.record(1 << e);
        }
        assert_eq!(few.heap_bytes(), BUCKETS * 4, "spread into the table");
        assert_eq!(few.samples(), 46);
    }

    #[test]
    fn goodput_buckets_widen_and_keep_every_byte() {
        let mut clock = GoodputClock::default();
        let mut g = Goodput::default();
        let mut total = 0;
        for i in 0..10_000u64 {
            let t = i * 100_000;
            clock.advance(t);
            g.add(clock, t, i);
            total += i;
        }
        let buckets = g.buckets(clock, 9_999 * 100_000);
        assert!(buckets.len() <= GOODPUT_BUCKETS);
        assert_eq!(buckets.iter().sum::<u64>(), total);
        assert!(clock.width_ns() * GOODPUT_BUCKETS as u64 > 9_999 * 100_000);
    }

    #[test]
    fn spacing_is_the_mean_of_recent_gaps() {
        let mut s = Spacing::default();
        assert_eq!(s.packet(100), None);
        for i in 1..=40 {
            s.packet(100 + i * 10);
        }
        assert_eq!(s.mean(), Some(10));
        s.packet(100 + 40 * 10 + 170);
        assert_eq!(s.mean(), Some(10 + 160 / 16));
    }
}
