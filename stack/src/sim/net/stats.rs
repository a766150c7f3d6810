//! Fixed-size histograms, so that memory stays bounded by the flows in flight however many
//! flows a run completes: FCT slowdowns in bins 1 % wide, queue lengths (time-weighted) in
//! quarter-octave bins.

/// Slowdown bins: 1.01^i up to about 2e10.
const SLOWDOWN_BINS: usize = 2400;

/// A distribution of slowdowns (>= 1), to within half a percent.
#[derive(Debug, Clone)]
pub(super) struct SlowdownHist {
    bins: Vec<u32>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl SlowdownHist {
    pub(super) fn new() -> SlowdownHist {
        SlowdownHist {
            bins: vec![0; SLOWDOWN_BINS],
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: 0.0,
        }
    }

    pub(super) fn add(&mut self, slowdown: f64) {
        let s = slowdown.max(1.0);
        let i = ((s.ln() / 1.01f64.ln()) as usize).min(SLOWDOWN_BINS - 1);
        self.bins[i] += 1;
        self.count += 1;
        self.sum += s;
        self.min = self.min.min(s);
        self.max = self.max.max(s);
    }

    pub(super) fn count(&self) -> u64 {
        self.count
    }

    pub(super) fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    pub(super) fn max(&self) -> f64 {
        self.max
    }

    /// The value at rank floor(count x p) of the sorted slowdowns, as the HPCC authors'
    /// analysis picks its percentiles; the middle of its bin, within the values seen.
    pub(super) fn quantile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((self.count as f64 * p) as u64).min(self.count - 1);
        let mut seen = 0u64;
        for (i, &n) in self.bins.iter().enumerate() {
            seen += u64::from(n);
            if seen > rank {
                return 1.01f64.powf(i as f64 + 0.5).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// Queue-length bins: 0, then four per power of two.
const QUEUE_BINS: usize = 1 + 64 * 4;

fn queue_bin(bytes: u64) -> usize {
    if bytes == 0 {
        return 0;
    }
    let log = 63 - bytes.leading_zeros() as usize;
    let quarter = if log >= 2 {
        ((bytes >> (log - 2)) & 3) as usize
    } else {
        0
    };
    1 + 4 * log + quarter
}

/// The largest byte count in bin `i`.
fn queue_bin_top(i: usize) -> u64 {
    if i == 0 {
        return 0;
    }
    let (log, quarter) = ((i - 1) / 4, (i - 1) % 4);
    if log < 2 {
        return (2u64 << log) - 1;
    }
    ((4 + quarter as u64 + 1) << (log - 2)) - 1
}

/// The time a set of queues spent at each length.
#[derive(Debug, Clone)]
pub(super) struct QueueHist {
    ps: Vec<u64>,
}

impl QueueHist {
    pub(super) fn new() -> QueueHist {
        QueueHist {
            ps: vec![0; QUEUE_BINS],
        }
    }

    pub(super) fn add(&mut self, bytes: u64, ps: u64) {
        self.ps[queue_bin(bytes)] += ps;
    }

    /// (bytes, share of the time at or below) at each bin that holds any time.
    pub(super) fn cdf(&self) -> Vec<(u64, f64)> {
        let total: u64 = self.ps.iter().sum();
        if total == 0 {
            return Vec::new();
        }
        let mut acc = 0u64;
        self.ps
            .iter()
            .enumerate()
            .filter(|(_, ps)| **ps > 0)
            .map(|(i, &ps)| {
                acc += ps;
                (queue_bin_top(i), acc as f64 / total as f64)
            })
            .collect()
    }

    /// The smallest length the queues were at or below for a share `p` of the time.
    pub(super) fn quantile(&self, p: f64) -> u64 {
        self.cdf()
            .into_iter()
            .find(|&(_, f)| f >= p)
            .map_or(0, |(b, _)| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowdown_percentiles_within_half_a_percent() {
        let mut h = SlowdownHist::new();
        for i in 0..1000 {
            h.add(1.0 + f64::from(i) / 100.0);
        }
        for (p, want) in [(0.5, 6.0), (0.95, 10.5), (0.99, 10.9)] {
            let got = h.quantile(p);
            assert!((got / want - 1.0).abs() < 0.006, "p{p}: {got} vs {want}");
        }
        assert!((h.mean() - 5.995).abs() < 1e-9);
        let mut ones = SlowdownHist::new();
        ones.add(1.0);
        ones.add(0.9);
        assert_eq!(ones.quantile(0.99), 1.0, "clamped to what was seen");
        assert_eq!(SlowdownHist::new().quantile(0.5), 0.0);
    }

    #[test]
    fn queue_bins_cover_every_length() {
        for b in [
            0u64,
            1,
            2,
            3,
            4,
            5,
            7,
            8,
            1000,
            1023,
            1024,
            1_000_000,
            u64::MAX >> 1,
        ] {
            let i = queue_bin(b);
            assert!(b <= queue_bin_top(i), "{b} in bin {i}");
            assert!(i == 0 || b > queue_bin_top(i - 1), "{b} in bin {i}");
        }
        let mut h = QueueHist::new();
        h.add(0, 900);
        h.add(100_000, 100);
        assert_eq!(h.quantile(0.5), 0);
        assert!((100_000..=131_072).contains(&h.quantile(0.95)));
        assert_eq!(h.cdf().last().unwrap().1, 1.0);
    }
}
