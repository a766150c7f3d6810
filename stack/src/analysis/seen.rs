//! Which request PSNs a flow has already carried, over a sliding window behind the highest.
//!
//! This is the definition of a retransmitted packet used everywhere in the project's output
//! (and by the golden tests' independent count from tshark, `tests/fixtures/analyze/make.sh`):
//! a request whose PSN was already seen on the flow, among the [`WINDOW`] PSNs at or before
//! the highest seen so far (24-bit serial order, IBA 9.7.1). A PSN further behind than that is
//! a new start (a QP reused with a new initial PSN), never a retransmission; no requester keeps
//! that many packets outstanding. One bit per PSN in the window, but only once the flow's PSNs
//! spread over more than [`SMALL`]: until then 32 bytes hold them (most flows of a capture of
//! many short ones never need more). The window's bits are kept in chunks of [`CHUNK`] PSNs,
//! each allocated when a PSN first falls in it: a flow whose PSNs span a few thousand touches
//! one or two of them, not the whole 8 KiB, whose fresh pages cost more to fault in (once per
//! flow) than the flow's packets cost to analyse. The memory counted is still the whole window
//! ([`SeenWindow::heap_bytes`]), the most it can take.

use crate::wire::Psn;

/// PSNs remembered behind the highest one.
pub const WINDOW: u32 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;
/// PSNs the small form holds, from its base.
pub const SMALL: u32 = 256;
const SMALL_WORDS: usize = (SMALL / 64) as usize;
/// PSNs a chunk of the window holds (256 bytes of bits).
const CHUNK: u32 = 2048;
const CHUNK_WORDS: usize = (CHUNK / 64) as usize;
const CHUNKS: usize = WORDS / CHUNK_WORDS;

/// A chunk of the window, `None` until a PSN falls in it.
type Chunk = Option<Box<[u64; CHUNK_WORDS]>>;

/// The bits: PSNs `base..base + SMALL` by their distance from `base`, or the whole window by
/// `psn % WINDOW` (word `w` in chunk `w / CHUNK_WORDS`).
#[derive(Debug, Clone)]
enum Bits {
    Small {
        base: Psn,
        words: [u64; SMALL_WORDS],
    },
    Window(Box<[Chunk; CHUNKS]>),
}

/// Word `w` of the window, if its chunk was ever needed.
fn word(chunks: &[Chunk; CHUNKS], w: usize) -> Option<&u64> {
    chunks[w / CHUNK_WORDS]
        .as_ref()
        .map(|c| &c[w % CHUNK_WORDS])
}

/// Word `w` of the window, its chunk made if need be.
fn word_mut(chunks: &mut [Chunk; CHUNKS], w: usize) -> &mut u64 {
    let chunk = chunks[w / CHUNK_WORDS].get_or_insert_with(|| Box::new([0; CHUNK_WORDS]));
    &mut chunk[w % CHUNK_WORDS]
}

/// Clears word `w` of the window (nothing to do in a chunk never needed).
fn clear_word(chunks: &mut [Chunk; CHUNKS], w: usize) {
    if let Some(c) = &mut chunks[w / CHUNK_WORDS] {
        c[w % CHUNK_WORDS] = 0;
    }
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

    /// Heap bytes held, counting the window whole (chunks are made as PSNs need them, so
    /// this is the most it takes: what `--max-memory` bounds).
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
            Bits::Window(chunks) => {
                let (w, b) = Self::slot(psn);
                word(chunks, w).is_some_and(|word| word & b != 0)
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
        } else if let Bits::Window(chunks) = &mut self.bits {
            let (w, b) = Self::slot(psn);
            *word_mut(chunks, w) |= b;
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
        let mut chunks: Box<[Chunk; CHUNKS]> = Box::default();
        for (k, bits) in words.iter().enumerate() {
            for bit in 0..64 {
                if bits & (1 << bit) != 0 {
                    let (w, b) = Self::slot(base.add((k * 64 + bit) as u32));
                    *word_mut(&mut chunks, w) |= b;
                }
            }
        }
        self.bits = Bits::Window(chunks);
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
        let chunks = match &mut self.bits {
            Bits::Small { words, .. } => {
                *words = [0; SMALL_WORDS];
                return;
            }
            Bits::Window(chunks) => chunks,
        };
        let (Some(low), Some(high)) = (self.lowest, self.highest) else {
            return;
        };
        let span = high.distance(low);
        if !(0..WINDOW as i32 - 64).contains(&span) {
            for c in chunks.iter_mut().flatten() {
                c.fill(0);
            }
            return;
        }
        let (first, _) = Self::slot(low);
        for k in 0..=(span as usize / 64 + 1) {
            clear_word(chunks, (first + k) % WORDS);
        }
    }

    /// Clears the `count` PSNs after `from` (those entering the window held PSNs WINDOW
    /// older), a word at a time where it can.
    fn clear_after(&mut self, from: Psn, count: u32) {
        let Bits::Window(chunks) = &mut self.bits else {
            // The small form holds no PSN WINDOW older than the highest.
            return;
        };
        let mut p = from.next();
        let mut left = count;
        while left > 0 {
            let (w, b) = Self::slot(p);
            let bit = b.trailing_zeros();
            if bit == 0 && left >= 64 {
                clear_word(chunks, w);
                p = p.add(64);
                left -= 64;
            } else {
                if let Some(c) = &mut chunks[w / CHUNK_WORDS] {
                    c[w % CHUNK_WORDS] &= !b;
                }
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

    /// Chunks of the window made so far.
    fn chunks_made(w: &SeenWindow) -> usize {
        match &w.bits {
            Bits::Small { .. } => 0,
            Bits::Window(chunks) => chunks.iter().flatten().count(),
        }
    }

    #[test]
    fn the_window_makes_only_the_chunks_its_psns_fall_in() {
        let mut w = SeenWindow::new();
        // 1,000 PSNs across a chunk boundary (2048): two chunks of the 32.
        for p in 1500..2500 {
            assert!(!w.observe(Psn::new(p)));
        }
        assert_eq!(chunks_made(&w), 2);
        assert_eq!(
            w.heap_bytes(),
            WORDS * 8,
            "counted whole: the most it takes"
        );
        assert!(w.observe(Psn::new(1600)));
        // Far ahead within the window: the chunks in between are skipped, not made.
        assert!(!w.observe(Psn::new(2500 + 40_000)));
        assert_eq!(chunks_made(&w), 3);
        assert!(w.observe(Psn::new(2000)), "still within the window");
        assert!(!w.observe(Psn::new(2600)), "never seen");
        // Past the window the old PSNs are forgotten though their chunks stay.
        assert!(!w.observe(Psn::new(1500 + WINDOW + 100)));
        assert!(
            !w.observe(Psn::new(1500 + WINDOW + 50)),
            "its bit was cleared"
        );
    }

    proptest! {
        /// As below, with steps that cross many chunks and leave some never made, and an
        /// exact set that forgets what slid out of the window.
        #[test]
        fn agrees_with_an_exact_set_across_chunks(start in 0u32..(1 << 24), steps in proptest::collection::vec(-5000i32..9000, 1..150)) {
            let mut w = SeenWindow::new();
            let mut exact: HashSet<u32> = HashSet::new();
            let mut highest: Option<Psn> = None;
            let mut p = Psn::new(start);
            let window = WINDOW as i32;
            for s in steps {
                p = if s >= 0 { p.add(s as u32) } else { p.sub(s.unsigned_abs()) };
                let ahead = highest.map(|h| p.distance(h));
                let expected = match ahead {
                    Some(a) if a <= 0 && a > -window => exact.contains(&p.value()),
                    _ => false,
                };
                prop_assert_eq!(w.observe(p), expected);
                match ahead {
                    Some(a) if a > 0 && a < window => highest = Some(p),
                    Some(a) if a <= 0 && a > -window => {}
                    _ => {
                        exact.clear();
                        highest = Some(p);
                    }
                }
                let h = highest.unwrap_or(p);
                exact.retain(|&q| (0..window).contains(&h.distance(Psn::new(q))));
                exact.insert(p.value());
            }
        }

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
