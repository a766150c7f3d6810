//! The congestion point: a switch egress queue's RED-like ECN marking, as DCQCN assumes
//! (SIGCOMM 2015 section 3.1): no marks below Kmin, a probability rising linearly to Pmax at
//! Kmax, every packet above Kmax. Shared by the simulator and the fault-injection middleware.

use super::{CcError, check_fraction};
use crate::rng::Rng;

/// CE-marking thresholds of one queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Marker {
    kmin_bytes: u64,
    kmax_bytes: u64,
    pmax: f64,
}

impl Marker {
    /// `kmin_bytes == kmax_bytes` gives DCTCP-style step marking at that threshold.
    pub fn new(kmin_bytes: u64, kmax_bytes: u64, pmax: f64) -> Result<Marker, CcError> {
        check_fraction("Pmax", pmax)?;
        if kmin_bytes > kmax_bytes {
            return Err(CcError::Invalid(format!(
                "Kmin ({kmin_bytes} B) must not exceed Kmax ({kmax_bytes} B)"
            )));
        }
        Ok(Marker {
            kmin_bytes,
            kmax_bytes,
            pmax,
        })
    }

    /// The paper's switch setting: Kmin 5 KB, Kmax 200 KB, Pmax 1 % (SIGCOMM 2015, sec. 5).
    pub fn paper() -> Marker {
        Marker {
            kmin_bytes: 5_000,
            kmax_bytes: 200_000,
            pmax: 0.01,
        }
    }

    /// Queue depth below which nothing is marked.
    pub fn kmin_bytes(&self) -> u64 {
        self.kmin_bytes
    }
    /// Queue depth from which every packet is marked.
    pub fn kmax_bytes(&self) -> u64 {
        self.kmax_bytes
    }
    /// Marking probability just below Kmax.
    pub fn pmax(&self) -> f64 {
        self.pmax
    }

    /// The marking probability with `queue_bytes` in the queue.
    pub fn probability(&self, queue_bytes: u64) -> f64 {
        if queue_bytes <= self.kmin_bytes {
            0.0
        } else if queue_bytes > self.kmax_bytes {
            1.0
        } else {
            let span = (self.kmax_bytes - self.kmin_bytes) as f64;
            self.pmax * (queue_bytes - self.kmin_bytes) as f64 / span
        }
    }

    /// The inverse of [`Marker::probability`] on the RED slope: the queue length that marks
    /// with probability `p` (at most Kmax).
    pub fn queue_for_probability(&self, p: f64) -> f64 {
        let span = (self.kmax_bytes - self.kmin_bytes) as f64;
        if self.pmax <= 0.0 || p >= self.pmax {
            self.kmax_bytes as f64
        } else {
            self.kmin_bytes as f64 + span * p.max(0.0) / self.pmax
        }
    }

    /// Decides whether the packet now leaving or entering the queue gets CE. Draws from `rng`
    /// only on the RED slope, so runs that never reach Kmin consume no random numbers.
    pub fn mark(&self, queue_bytes: u64, rng: &mut Rng) -> bool {
        let p = self.probability(queue_bytes);
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            rng.chance(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_profile() {
        let m = Marker::paper();
        assert_eq!(m.probability(0), 0.0);
        assert_eq!(m.probability(5_000), 0.0);
        assert!((m.probability(102_500) - 0.005).abs() < 1e-12);
        assert!((m.probability(200_000) - 0.01).abs() < 1e-12);
        assert_eq!(m.probability(200_001), 1.0);
        assert!((m.queue_for_probability(0.005) - 102_500.0).abs() < 1e-6);
    }

    #[test]
    fn step_marking_and_bad_thresholds() {
        let step = Marker::new(10_000, 10_000, 1.0).unwrap();
        assert_eq!(step.probability(10_000), 0.0);
        assert_eq!(step.probability(10_001), 1.0);
        assert!(Marker::new(2, 1, 0.1).is_err());
        assert!(Marker::new(1, 2, 1.5).is_err());
        assert!(Marker::new(1, 2, f64::NAN).is_err());
    }

    #[test]
    fn marks_at_the_configured_rate() {
        let m = Marker::paper();
        let mut rng = Rng::new(1);
        let hits = (0..200_000).filter(|_| m.mark(102_500, &mut rng)).count();
        assert!((800..1_200).contains(&hits), "{hits}");
        assert!(!m.mark(4_000, &mut rng));
        assert!(m.mark(300_000, &mut rng));
    }
}
