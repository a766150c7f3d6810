//! The neighbour cache: which MAC each peer IP address is at, and the frames waiting while
//! an address is being resolved (RFC 826; RFC 4861 7.2.2: "queue the packet" while
//! INCOMPLETE, retransmit the solicitation every RetransTimer, give up after
//! MAX_MULTICAST_SOLICIT attempts and drop what waited).
//!
//! What a peer (or anyone on the link) can make it believe is limited (issue 14):
//! - a reply (ARP reply, neighbour advertisement) is taken only for an address we asked
//!   about: one still being resolved, or one being re-checked; unsolicited ones are refused;
//! - a request for one of our addresses teaches the asker's MAC only when we know nothing
//!   of it yet (RFC 826's merge, which lets a server answer a client without asking), or
//!   confirms the MAC we have; it never changes a known MAC;
//! - an entry ages: `reachable` after it was last confirmed it is asked for again (still
//!   used meanwhile, like Linux's STALE/PROBE) and removed if `attempts` solicitations go
//!   unanswered; entries copied from the kernel's table (AF_XDP) are the kernel's to age;
//! - at most `max_entries` addresses are held.
//!
//! A BTreeMap keeps iteration, and so the order of retransmitted solicitations,
//! deterministic.

use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use crate::time::Instant;

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
    /// How long a MAC is used without a confirmation before it is asked for again (Linux:
    /// base_reachable_time, 30 s).
    pub reachable: Duration,
    /// Addresses held at most; a request from a new address finds no room beyond.
    pub max_entries: usize,
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            retransmit: Duration::from_secs(1),
            attempts: 3,
            queue_limit: 256,
            reachable: Duration::from_secs(30),
            max_entries: 1024,
        }
    }
}

/// Where a MAC comes from, which decides whether it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// An ARP reply or neighbour advertisement: taken only if we asked.
    Reply,
    /// A request for one of our addresses, from the address it names as its sender.
    Request,
    /// Another source that keeps its own table (the kernel's): taken, never aged here.
    External,
}

/// Why [`NeighbourCache::learn`] did not take a MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A reply for an address we did not ask about.
    Unsolicited,
    /// A request naming another MAC for an address we know.
    Conflicting,
    /// No room for another address.
    Full,
}

#[derive(Debug)]
enum Entry {
    Reachable {
        mac: [u8; 6],
        /// When the MAC was last confirmed; `None` when another table ages it.
        confirmed: Option<Instant>,
        /// Solicitations sent since it became due for a check (0: not being checked).
        probes: u32,
        /// When the next check or solicitation is due.
        next: Instant,
    },
    Incomplete {
        /// Solicitations sent so far.
        sent: u32,
        next: Instant,
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
    /// The cache holds `max_entries` other addresses: the frame was dropped.
    NoRoom,
}

/// The host's ARP and NDP table: addresses to MACs, with the frames waiting for an answer.
#[derive(Debug, Default)]
pub struct NeighbourCache {
    config: NeighbourConfig,
    entries: BTreeMap<IpAddr, Entry>,
}

impl NeighbourCache {
    /// An empty cache.
    pub fn new(config: NeighbourConfig) -> NeighbourCache {
        NeighbourCache {
            config,
            entries: BTreeMap::new(),
        }
    }

    /// The MAC of `addr`, if it is resolved.
    pub fn lookup(&self, addr: IpAddr) -> Option<[u8; 6]> {
        match self.entries.get(&addr) {
            Some(Entry::Reachable { mac, .. }) => Some(*mac),
            _ => None,
        }
    }

    /// Addresses held, resolved or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no address is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `addr` has an entry, resolved or not.
    pub fn knows(&self, addr: IpAddr) -> bool {
        self.entries.contains_key(&addr)
    }

    /// Records that `addr` is at `mac` if `evidence` allows it (see the module
    /// documentation). Returns the frames that waited for it, their destination MAC filled
    /// in, in the order they were queued.
    pub fn learn(
        &mut self,
        now: Instant,
        addr: IpAddr,
        mac: [u8; 6],
        evidence: Evidence,
    ) -> Result<VecDeque<Vec<u8>>, Refused> {
        let taken = match (self.entries.get(&addr), evidence) {
            (_, Evidence::External) | (Some(Entry::Incomplete { .. }), _) => true,
            (Some(Entry::Reachable { probes, .. }), Evidence::Reply) => *probes > 0,
            (Some(Entry::Reachable { mac: known, .. }), Evidence::Request) => *known == mac,
            (None, Evidence::Reply) => false,
            (None, Evidence::Request) => self.entries.len() < self.config.max_entries,
        };
        if !taken {
            return Err(match (self.entries.contains_key(&addr), evidence) {
                (false, Evidence::Request) => Refused::Full,
                (_, Evidence::Reply) => Refused::Unsolicited,
                _ => Refused::Conflicting,
            });
        }
        let confirmed = (evidence != Evidence::External).then_some(now);
        let entry = Entry::Reachable {
            mac,
            confirmed,
            probes: 0,
            next: now + self.config.reachable,
        };
        let previous = self.entries.insert(addr, entry);
        let mut released = match previous {
            Some(Entry::Incomplete { queue, .. }) => queue,
            _ => VecDeque::new(),
        };
        for frame in &mut released {
            if let Some(dst) = frame.get_mut(..6) {
                dst.copy_from_slice(&mac);
            }
        }
        Ok(released)
    }

    /// Starts resolving `addr` with nothing to send yet. True if this is new, so that a
    /// solicitation should go now.
    pub fn start(&mut self, now: Instant, addr: IpAddr) -> bool {
        if self.entries.contains_key(&addr) || self.entries.len() >= self.config.max_entries {
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
    pub fn enqueue(&mut self, now: Instant, addr: IpAddr, frame: Vec<u8>) -> Queued {
        let limit = self.config.queue_limit.max(1);
        let retransmit = self.config.retransmit;
        if !self.entries.contains_key(&addr) && self.entries.len() >= self.config.max_entries {
            return Queued::NoRoom;
        }
        let entry = self
            .entries
            .entry(addr)
            .or_insert_with(|| Entry::Incomplete {
                sent: 0,
                next: now,
                queue: VecDeque::new(),
            });
        match entry {
            Entry::Reachable { .. } => {
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

    /// When the next solicitation or check is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e {
                Entry::Incomplete { next, .. } => Some(*next),
                Entry::Reachable {
                    confirmed: Some(_),
                    next,
                    ..
                } => Some(*next),
                Entry::Reachable { .. } => None,
            })
            .min()
    }

    /// Runs the due retransmissions and checks: calls `solicit` for each address to ask
    /// again, and returns how many frames were dropped for addresses that never answered.
    /// An entry whose check goes unanswered is removed.
    pub fn handle_timeout(&mut self, now: Instant, mut solicit: impl FnMut(IpAddr)) -> usize {
        let mut dropped = 0;
        let config = self.config;
        self.entries.retain(|addr, entry| {
            let (sent, next) = match entry {
                Entry::Reachable {
                    confirmed: None, ..
                } => return true,
                Entry::Reachable { probes, next, .. } => (probes, next),
                Entry::Incomplete { sent, next, .. } => (sent, next),
            };
            if *next > now {
                return true;
            }
            if *sent >= config.attempts {
                if let Entry::Incomplete { queue, .. } = entry {
                    dropped += queue.len();
                }
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
        let t = Instant::from_micros(5);
        assert_eq!(c.enqueue(t, PEER, vec![0; 14]), Queued::Solicit);
        assert_eq!(c.enqueue(t, PEER, vec![1; 14]), Queued::Waiting);
        assert_eq!(c.enqueue(t, PEER, vec![2; 14]), Queued::DroppedOldest);
        assert_eq!(c.lookup(PEER), None);
        let released = c.learn(t, PEER, MAC, Evidence::Reply).unwrap();
        assert_eq!(released.len(), 2);
        assert_eq!(&released[0][..6], &MAC);
        assert_eq!(released[0][6], 1, "the oldest frame was dropped");
        assert_eq!(released[1][6], 2);
        assert_eq!(c.lookup(PEER), Some(MAC));
        assert_eq!(
            c.poll_timeout(),
            Some(t + Duration::from_secs(30)),
            "a check"
        );
    }

    const OTHER: [u8; 6] = [2, 0, 0, 0, 0, 0xe];

    fn secs(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }

    #[test]
    fn replies_are_taken_only_for_addresses_we_asked_about() {
        let mut c = cache(8);
        let t = Instant::ZERO;
        assert_eq!(
            c.learn(t, PEER, MAC, Evidence::Reply),
            Err(Refused::Unsolicited)
        );
        assert_eq!(c.lookup(PEER), None);
        assert!(c.start(t, PEER));
        assert!(c.learn(t, PEER, MAC, Evidence::Reply).is_ok());
        assert_eq!(c.lookup(PEER), Some(MAC));
        // Resolved: another reply, or a request naming another MAC, changes nothing.
        assert_eq!(
            c.learn(t, PEER, OTHER, Evidence::Reply),
            Err(Refused::Unsolicited)
        );
        assert_eq!(
            c.learn(t, PEER, OTHER, Evidence::Request),
            Err(Refused::Conflicting)
        );
        assert_eq!(c.lookup(PEER), Some(MAC));
        assert!(
            c.learn(t, PEER, MAC, Evidence::Request).is_ok(),
            "a confirmation"
        );
    }

    #[test]
    fn a_request_teaches_an_unknown_asker_within_the_limit() {
        let mut c = NeighbourCache::new(NeighbourConfig {
            max_entries: 2,
            ..NeighbourConfig::default()
        });
        let addr = |i: u8| IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, i));
        assert!(
            c.learn(Instant::ZERO, addr(1), MAC, Evidence::Request)
                .is_ok()
        );
        assert!(
            c.learn(Instant::ZERO, addr(2), MAC, Evidence::Request)
                .is_ok()
        );
        assert_eq!(
            c.learn(Instant::ZERO, addr(3), MAC, Evidence::Request),
            Err(Refused::Full)
        );
        assert_eq!((c.len(), c.lookup(addr(3))), (2, None));
    }

    #[test]
    fn entries_age_are_checked_and_expire_unless_answered() {
        let mut c = cache(8);
        c.start(Instant::ZERO, PEER);
        c.learn(Instant::ZERO, PEER, MAC, Evidence::Reply).unwrap();
        assert_eq!(c.poll_timeout(), Some(secs(30)));
        let mut asked = 0;
        c.handle_timeout(secs(30), |_| asked += 1);
        assert_eq!(
            (asked, c.lookup(PEER)),
            (1, Some(MAC)),
            "checked, still used"
        );
        // The answer to the check is a solicited reply: taken, and the clock restarts.
        c.learn(secs(30), PEER, MAC, Evidence::Reply).unwrap();
        assert_eq!(c.poll_timeout(), Some(secs(60)));
        // Unanswered checks: three solicitations, then the entry goes.
        for s in [60, 61, 62] {
            c.handle_timeout(secs(s), |_| asked += 1);
        }
        assert_eq!((asked, c.lookup(PEER)), (4, Some(MAC)));
        c.handle_timeout(secs(63), |_| asked += 1);
        assert_eq!((asked, c.lookup(PEER), c.len()), (4, None, 0));
    }

    #[test]
    fn entries_from_the_kernel_are_not_aged_here() {
        let mut c = cache(8);
        c.learn(Instant::ZERO, PEER, MAC, Evidence::External)
            .unwrap();
        assert_eq!(c.poll_timeout(), None);
        c.handle_timeout(secs(1000), |_| panic!("no solicitation"));
        assert_eq!(c.lookup(PEER), Some(MAC));
    }

    #[test]
    fn retries_then_gives_up() {
        let mut c = cache(8);
        assert_eq!(c.enqueue(Instant::ZERO, PEER, vec![0; 14]), Queued::Solicit);
        let mut asked = 0;
        let second = Instant::ZERO + Duration::from_secs(1);
        assert_eq!(c.poll_timeout(), Some(second));
        assert_eq!(
            c.handle_timeout(Instant::from_micros(10), |_| asked += 1),
            0
        );
        assert_eq!(asked, 0, "not due yet");
        assert_eq!(c.handle_timeout(second, |_| asked += 1), 0);
        let third = second + Duration::from_secs(1);
        assert_eq!(c.handle_timeout(third, |_| asked += 1), 0);
        assert_eq!(asked, 2, "three solicitations in all");
        let dropped = c.handle_timeout(third + Duration::from_secs(1), |_| asked += 1);
        assert_eq!((dropped, asked), (1, 2));
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(
            c.enqueue(Instant::ZERO, PEER, vec![0; 14]),
            Queued::Solicit,
            "starts over"
        );
    }
}
