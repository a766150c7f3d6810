//! Which request PSNs a flow has already carried, over a sliding window behind the highest.
//!
//! This is the definition of a retransmitted packet used everywhere in the project's output
//! (and by the golden tests' independent count from tshark, `tests/fixtures/analyze/make.sh`):
//! a request whose PSN was already seen on the flow, among the [`WINDOW`] PSNs at or before
//! the highest seen so far (24-bit serial order, IBA 9.7.1). A PSN further behind than that is
//! a new start (a QP reused with a new initial PSN), never a retransmission; no requester keeps
//! that many packets outstanding. One bit per PSN in the window: 8 KiB per flow however long
//! the capture, but only once the flow's PSNs spread over more than [`SMALL`]: until then 32
//! bytes hold them (most flows of a capture of many short ones never need more).

use crate::wire::Psn;

/// PSNs remembered behind the highest one.
pub const WINDOW: u32 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;
/// PSNs the small form holds, from its base.
pub const SMALL: u32 = 256;
const SMALL_WORDS: usize = (SMALL / 64) as usize;

/// The bits: PSNs `base..base + SMALL` by their distance from `base`, or the whole window by
/// `psn % WINDOW`.
#[derive(Debug, Clone)]
enum Bits {
    Small {
        base: Psn,
        words: [u64; SMALL_WORDS],
    },
    Window(Box<[u64; WORDS]>),
}

#[derive(Debug, Clone)]
pub(crate) struct SeenWindow {
    bits: Bits,
    highest: Option<Psn>,
    /// The lowest PSN set since the last restart: every set bit lies from it to `highest`, so
    /// a restart clears only those words (a capture of many short-lived QPs restarts often).
    lowest: Option<Psn>,
    /// Times the highest PSN went past 2^24 - 1 back to 0.
    wraps: u64,
}

impl SeenWindow {
    pub(crate) fn new() -> SeenWindow {
        SeenWindow {
            bits: Bits::Small {
                base: Psn::new(0),
                words: [0; SMALL_WORDS],
            },
            highest: None,
            lowest: None,
            wraps: 0,
        }
    }

    pub(crate) fn highest(&self) -> Option<Psn> {
        self.highest
    }

    pub(crate) fn wraps(&self) -> u64 {
        self.wraps
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self.bits {
            Bits::Small { .. } => 0,
            Bits::Window(_) => WORDS * 8,
        }
    }

    fn slot(psn: Psn) -> (usize, u64) {
        let i = psn.value() % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Where `psn` lies in the small form, if it does.
    fn small_slot(base: Psn, psn: Psn) -> Option<(usize, u64)> {
        let off = psn.distance(base);
        (0..SMALL as i32)
            .contains(&off)
            .then(|| ((off / 64) as usize, 1u64 << (off % 64)))
    }

    fn get(&self, psn: Psn) -> bool {
        match &self.bits {
            Bits::Small { base, words } => {
                Self::small_slot(*base, psn).is_some_and(|(w, b)| words[w] & b != 0)
            }
            Bits::Window(bits) => {
                let (w, b) = Self::slot(psn);
                bits[w] & b != 0
            }
        }
    }

    fn set(&mut self, psn: Psn) {
        if let Bits::Small { base, words } = &mut self.bits {
            match Self::small_slot(*base, psn) {
                Some((w, b)) => words[w] |= b,
                None => {
                    self.grow();
                    return self.set(psn);
                }
            }
        } else if let Bits::Window(bits) = &mut self.bits {
            let (w, b) = Self::slot(psn);
            bits[w] |= b;
        }
        if self.lowest.is_none_or(|low| psn < low) {
            self.lowest = Some(psn);
        }
    }

    /// From the small form to the whole window, keeping every bit.
    fn grow(&mut self) {
        let Bits::Small { base, words } = self.bits else {
            return;
        };
        let mut bits = Box::new([0u64; WORDS]);
        for (k, word) in words.iter().enumerate() {
            for bit in 0..64 {
                if word & (1 << bit) != 0 {
                    let (w, b) = Self::slot(base.add((k * 64 + bit) as u32));
                    bits[w] |= b;
                }
            }
        }
        self.bits = Bits::Window(bits);
    }

    fn restart(&mut self, psn: Psn) {
        self.clear();
        if let Bits::Small { base, .. } = &mut self.bits {
            *base = psn;
        }
        self.highest = Some(psn);
        self.lowest = None;
        self.set(psn);
    }

    /// Clears every bit set since the last restart.
    fn clear(&mut self) {
        let bits = match &mut self.bits {
            Bits::Small { words, .. } => {
                *words = [0; SMALL_WORDS];
                return;
            }
            Bits::Window(bits) => bits,
        };
        let (Some(low), Some(high)) = (self.lowest, self.highest) else {
            return;
        };
        let span = high.distance(low);
        if !(0..WINDOW as i32 - 64).contains(&span) {
            bits.fill(0);
            return;
        }
        let (first, _) = Self::slot(low);
        for k in 0..=(span as usize / 64 + 1) {
            bits[(first + k) % WORDS] = 0;
        }
    }

    /// Clears the `count` PSNs after `from` (those entering the window held PSNs WINDOW
    /// older), a word at a time where it can.
    fn clear_after(&mut self, from: Psn, count: u32) {
        let Bits::Window(bits) = &mut self.bits else {
            // The small form holds no PSN WINDOW older than the highest.
            return;
        };
        let mut p = from.next();
        let mut left = count;
        while left > 0 {
            let (w, b) = Self::slot(p);
            let bit = b.trailing_zeros();
            if bit == 0 && left >= 64 {
                bits[w] = 0;
                p = p.add(64);
                left -= 64;
            } else {
                bits[w] &= !b;
                p = p.next();
                left -= 1;
            }
        }
    }

    /// Records `psn`; true if it was already seen within the window (a retransmission).
    pub(crate) fn observe(&mut self, psn: Psn) -> bool {
        let Some(highest) = self.highest else {
            self.restart(psn);
            return false;
        };
        let ahead = psn.distance(highest);
        if ahead > 0 {
            if psn.value() < highest.value() {
                self.wraps += 1;
            }
            if ahead as u32 >= WINDOW {
                self.restart(psn);
                return false;
            }
            self.clear_after(highest, ahead as u32);
            self.highest = Some(psn);
            self.set(psn);
            false
        } else if ahead.unsigned_abs() >= WINDOW {
            self.restart(psn);
            false
        } else {
            let was = self.contains(psn);
            self.set(psn);
            was
        }
    }

    /// True if `psn` was seen and is still within the window.
    pub(crate) fn contains(&self, psn: Psn) -> bool {
        let Some(highest) = self.highest else {
            return false;
        };
        let behind = highest.distance(psn);
        if !(0..WINDOW as i32).contains(&behind) {
            return false;
        }
        self.get(psn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn repeats_are_retransmissions_and_gaps_are_not() {
        let mut w = SeenWindow::new();
        for p in [10, 11, 12, 14] {
            assert!(!w.observe(Psn::new(p)));
        }
        assert!(w.observe(Psn::new(11)), "go back to 11");
        assert!(w.observe(Psn::new(12)));
        assert!(!w.observe(Psn::new(13)), "13 was never seen: a late packet");
        assert!(w.observe(Psn::new(14)));
        assert!(!w.observe(Psn::new(15)));
        assert_eq!(w.highest(), Some(Psn::new(15)));
    }

    #[test]
    fn tracking_crosses_the_24_bit_wrap() {
        let mut w = SeenWindow::new();
        let start = Psn::MAX.sub(3);
        let mut p = start;
        for _ in 0..8 {
            assert!(!w.observe(p));
            p = p.next();
        }
        assert_eq!(w.wraps(), 1);
        assert!(w.observe(Psn::MAX), "2^24-1 is behind 3 after the wrap");
        assert!(w.observe(Psn::new(1)));
        assert!(!w.observe(Psn::new(4)));
    }

    #[test]
    fn far_behind_or_ahead_is_a_new_start() {
        let mut w = SeenWindow::new();
        assert!(!w.observe(Psn::new(5_000_000)));
        assert!(!w.observe(Psn::new(5_000_000 + WINDOW + 3)));
        assert!(!w.contains(Psn::new(5_000_000)));
        assert!(!w.observe(Psn::new(100)), "far behind: a new start");
        assert!(w.observe(Psn::new(100)));
    }

    #[test]
    fn a_few_close_psns_stay_small_and_far_ones_take_the_window() {
        let mut w = SeenWindow::new();
        for p in (1000..1200).chain(1000..1100) {
            w.observe(Psn::new(p));
        }
        assert_eq!(w.heap_bytes(), 0, "200 PSNs fit the small form");
        assert!(w.observe(Psn::new(1150)));
        assert!(!w.observe(Psn::new(1000 + SMALL)));
        assert_eq!(w.heap_bytes(), WORDS * 8);
        assert!(w.observe(Psn::new(1100)), "kept when growing");
        assert!(!w.observe(Psn::new(999)));
    }

    proptest! {
        /// Within the window the bitmap agrees with an exact set of every PSN seen, in both
        /// forms (steps of up to a few hundred make the small form grow now and then).
        #[test]
        fn agrees_with_an_exact_set(start in 0u32..(1 << 24), steps in proptest::collection::vec(-300i32..400, 1..150)) {
            let mut w = SeenWindow::new();
            let mut exact: HashSet<u32> = HashSet::new();
            let mut p = Psn::new(start);
            for s in steps {
                p = if s >= 0 { p.add(s as u32) } else { p.sub(s.unsigned_abs()) };
                let expected = exact.contains(&p.value());
                prop_assert_eq!(w.observe(p), expected);
                exact.insert(p.value());
            }
        }
    }
}
