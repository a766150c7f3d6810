//! A tournament tree: the earliest of N per-flow deadlines in O(1), one deadline changed in
//! O(log N), no stale entries. Sends, one pending per flow and moved at every rate change, are
//! most of the simulation's events; this keeps them out of the general event heap.

use crate::cc::Time;

#[derive(Debug, Clone)]
pub(super) struct MinTree {
    /// Leaf keys; padding leaves hold `Time::MAX`.
    keys: Vec<Time>,
    /// `winner[n]` is the leaf index with the smallest key below internal node `n` (1-based,
    /// children 2n and 2n + 1); ties go to the lower index, so runs are deterministic.
    winner: Vec<u32>,
    leaves: usize,
}

impl MinTree {
    pub(super) fn new(n: usize) -> MinTree {
        let leaves = n.max(1).next_power_of_two();
        let mut winner = vec![0; leaves];
        // Bottom-up so each node sees its children's winners.
        for node in (1..leaves).rev() {
            winner[node] = if 2 * node >= leaves {
                (2 * node - leaves) as u32
            } else {
                winner[2 * node]
            };
        }
        MinTree {
            keys: vec![Time::MAX; leaves],
            winner,
            leaves,
        }
    }

    /// The leaf with the earliest key, and the key.
    pub(super) fn min(&self) -> (usize, Time) {
        let i = if self.leaves == 1 {
            0
        } else {
            self.winner[1] as usize
        };
        (i, self.keys[i])
    }

    pub(super) fn set(&mut self, leaf: usize, key: Time) {
        self.keys[leaf] = key;
        let mut node = (leaf + self.leaves) / 2;
        while node >= 1 {
            let (l, r) = (self.child(2 * node), self.child(2 * node + 1));
            self.winner[node] = if self.keys[r as usize] < self.keys[l as usize] {
                r
            } else {
                l
            };
            node /= 2;
        }
    }

    fn child(&self, node: usize) -> u32 {
        if node >= self.leaves {
            (node - self.leaves) as u32
        } else {
            self.winner[node]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn tracks_the_minimum_like_a_scan() {
        for n in [1, 2, 3, 10, 17] {
            let mut tree = MinTree::new(n);
            let mut keys = vec![Time::MAX; n];
            let mut rng = Rng::new(n as u64);
            for _ in 0..500 {
                let leaf = rng.below(n as u64) as usize;
                let key = Time::from_picos(rng.below(50));
                tree.set(leaf, key);
                keys[leaf] = key;
                let best = (0..n).min_by_key(|&i| (keys[i], i)).unwrap();
                assert_eq!(tree.min(), (best, keys[best]), "n = {n}");
            }
        }
    }
}
