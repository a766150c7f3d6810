//! The neighbour cache: which MAC each peer IP address is at, and the frames waiting while
//! an address is being resolved (RFC 826; RFC 4861 7.2.2: "queue the packet" while
//! INCOMPLETE, retransmit the solicitation every RetransTimer, give up after
//! MAX_MULTICAST_SOLICIT attempts and drop what waited).
//!
//! Entries never expire: the endpoint lives for one test or benchmark, and any ARP or NDP
//! message from a peer refreshes its entry. A BTreeMap keeps iteration, and so the order
//! of retransmitted solicitations, deterministic.

use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use crate::transport::Time;

/// How resolution is retried and how much waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighbourConfig {
    /// Between solicitations (RFC 4861 RETRANS_TIMER: 1 s; Linux ARP: 1 s).
    pub retransmit: Duration,
    /// Solicitations before giving up (RFC 4861 MAX_MULTICAST_SOLICIT: 3).
    pub attempts: u32,
    /// Frames kept per unresolved address; older ones are dropped first. RC recovers
    /// what is dropped here by retransmission.
    pub queue_limit: usize,
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            retransmit: Duration::from_secs(1),
            attempts: 3,
            queue_limit: 256,
        }
    }
}

#[derive(Debug)]
enum Entry {
    Reachable([u8; 6]),
    Incomplete {
        /// Solicitations sent so far.
        sent: u32,
        next: Time,
        /// Complete frames whose destination MAC is still to be filled in.
        queue: VecDeque<Vec<u8>>,
    },
}

/// What [`NeighbourCache::enqueue`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// The first frame for this address: send a solicitation now.
    Solicit,
    /// Resolution is under way already.
    Waiting,
    /// The queue was full: the oldest frame was dropped to make room.
    DroppedOldest,
}

#[derive(Debug, Default)]
pub struct NeighbourCache {
    config: NeighbourConfig,
    entries: BTreeMap<IpAddr, Entry>,
}

impl NeighbourCache {
    pub fn new(config: NeighbourConfig) -> NeighbourCache {
        NeighbourCache {
            config,
            entries: BTreeMap::new(),
        }
    }

    pub fn lookup(&self, addr: IpAddr) -> Option<[u8; 6]> {
        match self.entries.get(&addr) {
            Some(Entry::Reachable(mac)) => Some(*mac),
            _ => None,
        }
    }

    /// Whether `addr` has an entry, resolved or not.
    pub fn knows(&self, addr: IpAddr) -> bool {
        self.entries.contains_key(&addr)
    }

    /// Records that `addr` is at `mac`. Returns the frames that waited for it, their
    /// destination MAC filled in, in the order they were queued.
    pub fn learn(&mut self, addr: IpAddr, mac: [u8; 6]) -> VecDeque<Vec<u8>> {
        let previous = self.entries.insert(addr, Entry::Reachable(mac));
        let mut released = match previous {
            Some(Entry::Incomplete { queue, .. }) => queue,
            _ => VecDeque::new(),
        };
        for frame in &mut released {
            if let Some(dst) = frame.get_mut(..6) {
                dst.copy_from_slice(&mac);
            }
        }
        released
    }

    /// Starts resolving `addr` with nothing to send yet. True if this is new, so that a
    /// solicitation should go now.
    pub fn start(&mut self, now: Time, addr: IpAddr) -> bool {
        if self.entries.contains_key(&addr) {
            return false;
        }
        let entry = Entry::Incomplete {
            sent: 1,
            next: now + self.config.retransmit,
            queue: VecDeque::new(),
        };
        self.entries.insert(addr, entry);
        true
    }

    /// Queues `frame` (a whole Ethernet frame) until `addr` is resolved.
    pub fn enqueue(&mut self, now: Time, addr: IpAddr, frame: Vec<u8>) -> Queued {
        let limit = self.config.queue_limit.max(1);
        let retransmit = self.config.retransmit;
        let entry = self
            .entries
            .entry(addr)
            .or_insert_with(|| Entry::Incomplete {
                sent: 0,
                next: now,
                queue: VecDeque::new(),
            });
        match entry {
            Entry::Reachable(_) => {
                // The caller looked up first; keep the frame rather than lose it.
                *entry = Entry::Incomplete {
                    sent: 1,
                    next: now + retransmit,
                    queue: VecDeque::from([frame]),
                };
                Queued::Solicit
            }
            Entry::Incomplete { sent, next, queue } => {
                let dropped = queue.len() >= limit;
                if dropped {
                    queue.pop_front();
                }
                queue.push_back(frame);
                if *sent == 0 {
                    *sent = 1;
                    *next = now + retransmit;
                    Queued::Solicit
                } else if dropped {
                    Queued::DroppedOldest
                } else {
                    Queued::Waiting
                }
            }
        }
    }

    /// When the next solicitation is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.entries
            .values()
            .filter_map(|e| match e {
                Entry::Incomplete { next, .. } => Some(*next),
                Entry::Reachable(_) => None,
            })
            .min()
    }

    /// Runs the due retransmissions: calls `solicit` for each address to ask again, and
    /// returns how many frames were dropped for addresses that never answered.
    pub fn handle_timeout(&mut self, now: Time, mut solicit: impl FnMut(IpAddr)) -> usize {
        let mut dropped = 0;
        let config = self.config;
        self.entries.retain(|addr, entry| {
            let Entry::Incomplete { sent, next, queue } = entry else {
                return true;
            };
            if *next > now {
                return true;
            }
            if *sent >= config.attempts {
                dropped += queue.len();
                return false;
            }
            *sent += 1;
            *next = now + config.retransmit;
            solicit(*addr);
            true
        });
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn cache(limit: usize) -> NeighbourCache {
        NeighbourCache::new(NeighbourConfig {
            queue_limit: limit,
            ..NeighbourConfig::default()
        })
    }

    #[test]
    fn queues_until_learned_then_fills_the_mac() {
        let mut c = cache(2);
        let t = Time::from_micros(5);
        assert_eq!(c.enqueue(t, PEER, vec![0; 14]), Queued::Solicit);
        assert_eq!(c.enqueue(t, PEER, vec![1; 14]), Queued::Waiting);
        assert_eq!(c.enqueue(t, PEER, vec![2; 14]), Queued::DroppedOldest);
        assert_eq!(c.lookup(PEER), None);
        let released = c.learn(PEER, MAC);
        assert_eq!(released.len(), 2);
        assert_eq!(&released[0][..6], &MAC);
        assert_eq!(released[0][6], 1, "the oldest frame was dropped");
        assert_eq!(released[1][6], 2);
        assert_eq!(c.lookup(PEER), Some(MAC));
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn retries_then_gives_up() {
        let mut c = cache(8);
        assert_eq!(c.enqueue(Time::ZERO, PEER, vec![0; 14]), Queued::Solicit);
        let mut asked = 0;
        let second = Time::ZERO + Duration::from_secs(1);
        assert_eq!(c.poll_timeout(), Some(second));
        assert_eq!(c.handle_timeout(Time::from_micros(10), |_| asked += 1), 0);
        assert_eq!(asked, 0, "not due yet");
        assert_eq!(c.handle_timeout(second, |_| asked += 1), 0);
        let third = second + Duration::from_secs(1);
        assert_eq!(c.handle_timeout(third, |_| asked += 1), 0);
        assert_eq!(asked, 2, "three solicitations in all");
        let dropped = c.handle_timeout(third + Duration::from_secs(1), |_| asked += 1);
        assert_eq!((dropped, asked), (1, 2));
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(
            c.enqueue(Time::ZERO, PEER, vec![0; 14]),
            Queued::Solicit,
            "starts over"
        );
    }
}
