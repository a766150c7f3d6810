//! The bytes a queued READ response has yet to send, kept when a later request is about to
//! overwrite them: a READ returns memory as it was when it executed (rxe sends the whole
//! READ before it executes the next request; this engine sends READ responses lazily).
//!
//! Only the bytes a request overwrites are copied, so a WRITE costs what it writes, not what
//! the READs it overlaps still have to send. Past [`MAX_SPANS`] separate pieces the rest of
//! the READ is copied once, which bounds both the bookkeeping and the memory: a READ never
//! keeps more than what it has left to send.

use std::collections::BTreeMap;

use crate::transport::mr::{Access, Accessor, MrError, MrTable};

/// Where a READ's bytes come from: its R_Key as its queue pair reaches it.
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    pub mrs: &'a MrTable,
    pub who: Accessor,
    pub key: u32,
}

impl<'a> Source<'a> {
    fn read(&self, va: u64, len: u64) -> Result<&'a [u8], MrError> {
        self.mrs
            .read_remote(self.who, self.key, (va, len), Access::REMOTE_READ)
    }
}

/// Separate pieces kept for one READ before the rest of it is copied whole.
pub(super) const MAX_SPANS: usize = 32;

/// Old bytes of a READ's source, by VA: disjoint spans, each as it was when the READ executed.
#[derive(Debug, Clone, Default)]
pub(super) struct Preserved {
    spans: BTreeMap<u64, Vec<u8>>,
    /// Everything still to send is kept: the region is no longer read.
    whole: bool,
    bytes: usize,
}

impl Preserved {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Pieces held.
    #[cfg(test)]
    pub fn spans(&self) -> usize {
        self.spans.len()
    }

    /// Everything still to send is kept.
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// Keeps the bytes of `[from, to)` not kept yet, from `src` before it changes.
    /// `[start, end)` is what the READ still has to send; `[from, to)` lies inside it.
    pub fn keep(&mut self, src: Source<'_>, (from, to): (u64, u64), (start, end): (u64, u64)) {
        if self.whole || from >= to {
            return;
        }
        let gaps = self.gaps(from, to);
        if self.spans.len() + gaps.len() > MAX_SPANS {
            self.keep_whole(src, start, end);
            return;
        }
        for (a, b) in gaps {
            let Ok(old) = src.read(a, b - a) else {
                // The region went away: the response fails when it is sent.
                continue;
            };
            self.bytes += old.len();
            let left = self
                .spans
                .range_mut(..a)
                .next_back()
                .filter(|(s, v)| **s + v.len() as u64 == a);
            match left {
                Some((_, v)) => v.extend_from_slice(old),
                None => {
                    self.spans.insert(a, old.to_vec());
                }
            }
        }
    }

    /// The parts of `[from, to)` no span holds, in order.
    fn gaps(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let mut gaps = Vec::new();
        let mut at = from;
        let before = self.spans.range(..from).next_back();
        for (&s, v) in before.into_iter().chain(self.spans.range(from..to)) {
            let e = s + v.len() as u64;
            if s > at {
                gaps.push((at, s.min(to)));
            }
            at = at.max(e);
            if at >= to {
                return gaps;
            }
        }
        if at < to {
            gaps.push((at, to));
        }
        gaps
    }

    /// Copies all of `[start, end)` into one span, the kept pieces taking precedence.
    fn keep_whole(&mut self, src: Source<'_>, start: u64, end: u64) {
        let Ok(now) = src.read(start, end - start) else {
            return;
        };
        let mut all = now.to_vec();
        self.overlay(start, &mut all);
        self.spans.clear();
        self.bytes = all.len();
        self.spans.insert(start, all);
        self.whole = true;
    }

    /// Puts the kept bytes of `[va, va + out.len())` over `out`.
    pub fn overlay(&self, va: u64, out: &mut [u8]) {
        let end = va + out.len() as u64;
        let before = self.spans.range(..va).next_back();
        for (&s, v) in before.into_iter().chain(self.spans.range(va..end)) {
            let (a, b) = (s.max(va), (s + v.len() as u64).min(end));
            if a < b {
                out[(a - va) as usize..(b - va) as usize]
                    .copy_from_slice(&v[(a - s) as usize..(b - s) as usize]);
            }
        }
    }

    /// Drops the spans wholly before `va` (already sent).
    pub fn forget_before(&mut self, va: u64) {
        while let Some(entry) = self.spans.first_entry() {
            if *entry.key() + entry.get().len() as u64 > va {
                break;
            }
            self.bytes -= entry.remove().len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::mr::PdId;
    use crate::wire::Qpn;

    const VA: u64 = 0x1000;
    const WHO: Accessor = Accessor {
        pd: PdId::DEFAULT,
        qpn: Qpn::new(0x11),
    };

    fn table(len: usize) -> (MrTable, u32) {
        let mut mrs = MrTable::new(None);
        let data = (0..len).map(|i| i as u8).collect();
        let key = mrs
            .register(PdId::DEFAULT, VA, data, Access::REMOTE_READ)
            .unwrap();
        (mrs, key)
    }

    fn src(mrs: &MrTable, key: u32) -> Source<'_> {
        Source { mrs, who: WHO, key }
    }

    fn scribble(mrs: &mut MrTable, key: u32, va: u64, len: u64) {
        let span = mrs
            .remote(WHO, key, (va, len), Access::NONE)
            .unwrap()
            .unwrap();
        mrs.slice_mut(&span).fill(0xee);
    }

    /// What a READ of `[start, end)` sends after the writes, as of before them.
    fn sent(p: &Preserved, mrs: &MrTable, key: u32, start: u64, end: u64) -> Vec<u8> {
        let mut out = src(mrs, key).read(start, end - start).unwrap().to_vec();
        p.overlay(start, &mut out);
        out
    }

    #[test]
    fn keeps_only_what_is_overwritten() {
        let (mut mrs, key) = table(4096);
        let before = src(&mrs, key).read(VA, 4096).unwrap().to_vec();
        let mut p = Preserved::default();
        let read = (VA + 100, VA + 4000);
        for (a, b) in [
            (VA + 50, VA + 200),
            (VA + 150, VA + 300),
            (VA + 1000, VA + 1001),
        ] {
            let clip = (a.max(read.0), b.min(read.1));
            p.keep(src(&mrs, key), clip, read);
            scribble(&mut mrs, key, a, b - a);
        }
        // [100, 300) merged into one span, [1000, 1001) another: 201 bytes.
        assert_eq!((p.spans(), p.bytes(), p.is_whole()), (2, 201, false));
        assert_eq!(sent(&p, &mrs, key, read.0, read.1), before[100..4000]);
        p.forget_before(VA + 300);
        assert_eq!((p.spans(), p.bytes()), (1, 1));
    }

    #[test]
    fn many_pieces_become_one_copy_of_the_rest() {
        let (mut mrs, key) = table(8192);
        let before = src(&mrs, key).read(VA, 8192).unwrap().to_vec();
        let mut p = Preserved::default();
        let read = (VA, VA + 8192);
        for i in 0..(MAX_SPANS as u64 + 5) {
            let a = VA + 8000 - i * 100;
            p.keep(src(&mrs, key), (a, a + 10), read);
            scribble(&mut mrs, key, a, 10);
        }
        assert!(p.is_whole() && p.spans() == 1 && p.bytes() == 8192);
        assert_eq!(sent(&p, &mrs, key, read.0, read.1), before);
        // Kept whole, later writes cost nothing more.
        p.keep(src(&mrs, key), (VA, VA + 8192), read);
        assert_eq!(p.bytes(), 8192);
    }
}
