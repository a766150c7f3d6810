//! A deterministic model of an imperfect link, independent of any device: seeded loss,
//! duplication, reordering, delay with jitter, byte corruption and ECN CE marking, either at
//! random or by a congested bottleneck queue.
//!
//! [`FaultyLink`] is a scheduler in virtual time: [`FaultyLink::send`] decides a frame's fate at
//! `now` and [`FaultyLink::poll`] hands frames back in delivery order once their time has come.
//! It reads no clock, so the same seed and the same inputs always give the same deliveries; the
//! transport test harness drives it with virtual time and the io fault middleware with a real
//! clock.
//!
//! Time is the stack's one time base ([`crate::time`]): instants from an origin the caller
//! chooses, delays as [`Duration`]s.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use thiserror::Error;

use crate::rng::Rng;
use crate::time::{Duration, Instant, nanos};
use crate::wire::ce::{CeOutcome, mark_ce};
use crate::wire::encap::ETHERNET_HEADER_LEN;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Delay every delivered frame sees: `base` plus a uniform draw from `[0, jitter]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delay {
    /// Delay every frame sees.
    pub base: Duration,
    /// The largest extra delay drawn on top of `base`.
    pub jitter: Duration,
}

/// How the link sets ECN Congestion Experienced (RFC 3168 section 5) on ECN-capable IP frames.
///
/// Only frames marked ECT(0) or ECT(1) are ever changed: a switch must not set CE on a Not-ECT
/// packet (RFC 3168 section 5), and RoCEv2 CNPs are sent Not-ECT precisely so they are not.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum CeMarking {
    /// No marking.
    #[default]
    Off,
    /// Each ECN-capable frame is marked with this probability.
    Probability(f64),
    /// A bottleneck FIFO that drains at `drain_bits_per_sec`; a frame arriving while more than
    /// `threshold_bytes` wait is marked (the step marking DCQCN's notification point assumes).
    /// Frames also leave the bottleneck at its rate, so a congested link adds queueing delay.
    Queue {
        /// Queue depth above which arriving frames are marked.
        threshold_bytes: u64,
        /// The bottleneck's drain rate.
        drain_bits_per_sec: u64,
    },
}

/// The knobs of the model; probabilities lie in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a delivered frame is delivered a second time, right after the first.
    pub duplicate: f64,
    /// Probability that a frame is held back by `reorder_delay` so later frames overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Duration,
    /// Propagation delay. Jitter alone never reorders: the link stays FIFO for frames that are
    /// not picked for reordering, so `reorder` is the one knob that controls reordering.
    pub delay: Delay,
    /// Probability that one byte after the Ethernet header is changed. Corruption that a link
    /// FCS would catch never reaches an endpoint; what the ICRC exists for is corruption inside
    /// switches, which leaves the Ethernet header routable.
    pub corrupt: f64,
    /// When ECN-capable frames get CE.
    pub ce_mark: CeMarking,
}

impl Default for FaultConfig {
    /// A perfect link; `reorder_delay` is 50 us, long enough for a few frames to overtake at
    /// any rate this stack reaches, so setting `reorder` alone has a visible effect.
    fn default() -> Self {
        FaultConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(50),
            delay: Delay::default(),
            corrupt: 0.0,
            ce_mark: CeMarking::Off,
        }
    }
}

/// A configuration the model cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum FaultError {
    /// A probability outside `[0, 1]`.
    #[error("fault model: {knob} must be a probability in [0, 1], got {value}")]
    NotAProbability {
        /// The knob's field name.
        knob: &'static str,
        /// The value given.
        value: f64,
    },
    /// A queue that never drains would hold frames forever.
    #[error("fault model: a CE-marking queue needs a non-zero drain rate")]
    ZeroDrainRate,
}

impl FaultConfig {
    /// Checks every probability and the queue's drain rate; [`FaultyLink::new`] calls it.
    pub fn validate(&self) -> Result<(), FaultError> {
        let mut knobs = vec![
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ];
        match self.ce_mark {
            CeMarking::Off => {}
            CeMarking::Probability(p) => knobs.push(("ce_mark", p)),
            CeMarking::Queue {
                drain_bits_per_sec, ..
            } => {
                if drain_bits_per_sec == 0 {
                    return Err(FaultError::ZeroDrainRate);
                }
            }
        }
        for (knob, value) in knobs {
            if !(0.0..=1.0).contains(&value) {
                return Err(FaultError::NotAProbability { knob, value });
            }
        }
        Ok(())
    }
}

/// What happened to each frame given to a [`FaultyLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Frames given to [`FaultyLink::send`].
    pub sent: u64,
    /// Frames lost.
    pub dropped: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
    /// Frames held back so later ones overtook them.
    pub reordered: u64,
    /// Frames with one byte changed.
    pub corrupted: u64,
    /// Frames whose ECN field was set to CE.
    pub ce_marked: u64,
    /// Copies handed back by [`FaultyLink::poll`].
    pub delivered: u64,
}

/// The fate [`FaultyLink::send`] chose for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Lost: nothing will be delivered.
    Dropped,
    /// Delivered later, possibly twice and changed.
    Scheduled {
        /// Delivery time of the first copy.
        at: Instant,
        /// 1, or 2 when duplicated.
        copies: u8,
        /// One byte after the Ethernet header was changed.
        corrupted: bool,
        /// The ECN field was set to CE.
        ce_marked: bool,
        /// Held back by the reorder delay.
        reordered: bool,
    },
}

#[derive(Debug)]
struct Pending {
    at: Instant,
    seq: u64,
    frame: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// One direction of a faulty link: frames in at `now`, out in delivery order.
#[derive(Debug)]
pub struct FaultyLink {
    config: FaultConfig,
    rng: Rng,
    queue: BinaryHeap<Reverse<Pending>>,
    /// Tie-breaker so that frames due at the same time leave in the order they were scheduled.
    seq: u64,
    /// Latest delivery time of a frame not picked for reordering: the FIFO floor.
    fifo_until: Instant,
    /// When the bottleneck queue (`CeMarking::Queue`) will have sent everything it holds.
    bottleneck_free_at: Instant,
    stats: FaultStats,
}

impl FaultyLink {
    /// A link with `config` whose random choices follow `seed`; an invalid configuration is
    /// refused.
    pub fn new(config: FaultConfig, seed: u64) -> Result<FaultyLink, FaultError> {
        config.validate()?;
        Ok(FaultyLink {
            config,
            rng: Rng::new(seed),
            queue: BinaryHeap::new(),
            seq: 0,
            fifo_until: Instant::ZERO,
            bottleneck_free_at: Instant::ZERO,
            stats: FaultStats::default(),
        })
    }

    /// The knobs the link runs with.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// What happened to the frames so far.
    pub fn stats(&self) -> &FaultStats {
        &self.stats
    }

    /// Changes the knobs for frames sent from now on (a test turning congestion on or off
    /// mid-run); frames already on the link keep their fate and delivery time, and the
    /// bottleneck's backlog keeps draining at the old rate.
    pub fn set_config(&mut self, config: FaultConfig) -> Result<(), FaultError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Frames scheduled and not yet handed back by [`poll`](Self::poll).
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Decides the fate of `frame`, entering the link at `now`, and schedules its deliveries.
    ///
    /// Draws from the RNG in a fixed order whatever the configuration, so that turning one knob
    /// does not change the random choices of the others for the same seed.
    pub fn send(&mut self, now: Instant, mut frame: Vec<u8>) -> Fate {
        self.stats.sent += 1;
        let lost = self.rng.chance(self.config.loss);
        let duplicated = self.rng.chance(self.config.duplicate);
        let reordered = self.rng.chance(self.config.reorder);
        let corrupt = self.rng.chance(self.config.corrupt);
        let corrupt_pick = self.rng.next_u64();
        let ce_random = self.rng.next_f64();
        let jitter = match nanos(self.config.delay.jitter) {
            0 => 0,
            j => self.rng.below(j.saturating_add(1)),
        };
        if lost {
            self.stats.dropped += 1;
            return Fate::Dropped;
        }

        let (leaves_bottleneck, congested) = self.bottleneck(now, frame.len());
        let want_ce = match self.config.ce_mark {
            CeMarking::Off => false,
            CeMarking::Probability(p) => ce_random < p,
            CeMarking::Queue { .. } => congested,
        };
        let ce_marked = want_ce && mark_ce(&mut frame) == CeOutcome::Marked;
        if ce_marked {
            self.stats.ce_marked += 1;
        }

        let mut at = leaves_bottleneck + self.config.delay.base + Duration::from_nanos(jitter);
        if reordered {
            at += self.config.reorder_delay;
            self.stats.reordered += 1;
        } else {
            at = at.max(self.fifo_until);
            self.fifo_until = at;
        }

        // The duplicate is the copy a switch sent twice, taken before any later corruption.
        let copy = duplicated.then(|| frame.clone());
        let corrupted = corrupt && corrupt_byte(&mut frame, corrupt_pick);
        if corrupted {
            self.stats.corrupted += 1;
        }
        self.schedule(at, frame);
        let copies = match copy {
            Some(copy) => {
                self.stats.duplicated += 1;
                self.schedule(at, copy);
                2
            }
            None => 1,
        };
        Fate::Scheduled {
            at,
            copies,
            corrupted,
            ce_marked,
            reordered,
        }
    }

    /// The earliest time at which [`poll`](Self::poll) will return a frame.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse(p)| p.at)
    }

    /// The next frame due at or before `now`, in delivery order.
    pub fn poll(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_delivery()? > now {
            return None;
        }
        let Reverse(pending) = self.queue.pop()?;
        self.stats.delivered += 1;
        Some(pending.frame)
    }

    fn schedule(&mut self, at: Instant, frame: Vec<u8>) {
        self.seq += 1;
        self.queue.push(Reverse(Pending {
            at,
            seq: self.seq,
            frame,
        }));
    }

    /// When a frame of `len` bytes arriving at `now` leaves the bottleneck, and whether more
    /// than the marking threshold was waiting ahead of it.
    fn bottleneck(&mut self, now: Instant, len: usize) -> (Instant, bool) {
        let CeMarking::Queue {
            threshold_bytes,
            drain_bits_per_sec,
        } = self.config.ce_mark
        else {
            return (now, false);
        };
        let rate = u128::from(drain_bits_per_sec);
        let waiting_ns = (self.bottleneck_free_at - now).as_nanos();
        let backlog_bytes = waiting_ns * rate / (8 * NANOS_PER_SEC);
        let serialization = (len as u128 * 8 * NANOS_PER_SEC).div_ceil(rate);
        let start = now.max(self.bottleneck_free_at);
        let leaves = start + Duration::from_nanos(u64::try_from(serialization).unwrap_or(u64::MAX));
        self.bottleneck_free_at = leaves;
        (leaves, backlog_bytes > u128::from(threshold_bytes))
    }
}

/// Changes one byte after the Ethernet header (or anywhere in a frame too short to have one);
/// `pick` chooses the byte and the non-zero XOR mask. False for an empty frame.
fn corrupt_byte(frame: &mut [u8], pick: u64) -> bool {
    let start = if frame.len() > ETHERNET_HEADER_LEN {
        ETHERNET_HEADER_LEN
    } else {
        0
    };
    let span = (frame.len() - start) as u64;
    if span == 0 {
        return false;
    }
    let index = start + ((pick >> 8) % span) as usize;
    let mask = (pick as u8).max(1);
    frame[index] ^= mask;
    true
}

#[cfg(test)]
mod tests;
