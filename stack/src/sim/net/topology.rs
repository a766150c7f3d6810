//! Topologies and the fabric built from one: nodes (hosts first, then switches), ports (two
//! per link, one at each end), and each switch's routes: every shortest-path next hop to each
//! host, chosen among by the flow's hash (ECMP).

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use super::NetError;
use super::port::Port;
use super::workload::FlowSpec;
use crate::cc::{Marker, Time};
use crate::rng::Rng;

/// The shape of the network. Every host has one link; `Dumbbell`'s middle link and
/// `LeafSpine`'s leaf-to-spine links run at the fabric rate, the rest at the host rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// `pairs` hosts on a left switch, as many on a right switch, one link between them.
    Dumbbell {
        /// Hosts on each side.
        pairs: u32,
    },
    /// `senders` hosts and one receiver (the last host) on one switch.
    Incast {
        /// Hosts sending to the receiver.
        senders: u32,
    },
    /// Every leaf linked to every spine, `hosts_per_leaf` hosts on each leaf.
    LeafSpine {
        /// Leaf switches.
        leaves: u32,
        /// Spine switches.
        spines: u32,
        /// Hosts on each leaf.
        hosts_per_leaf: u32,
    },
}

/// Hosts are addressed in 16 bits in a packet.
const MAX_HOSTS: u32 = 65_535;
/// The most ECMP next hops the switches' routing tables may hold together (4 bytes each:
/// 128 MiB), so that a large leaf-spine is refused rather than exhausting memory.
const MAX_NEXT_HOPS: u64 = 1 << 25;

impl FromStr for Topology {
    type Err = NetError;

    fn from_str(s: &str) -> Result<Topology, NetError> {
        let bad = || {
            NetError::Config(format!(
                "unknown topology {s:?}: expected dumbbell[:N], incast:N or leafspine:LEAVES,SPINES,HOSTS_PER_LEAF"
            ))
        };
        let (name, args) = s.split_once(':').unwrap_or((s, ""));
        let numbers: Vec<u32> = if args.is_empty() {
            Vec::new()
        } else {
            args.split(',')
                .map(|n| n.trim().parse::<u32>().ok().filter(|&n| n > 0))
                .collect::<Option<_>>()
                .ok_or_else(bad)?
        };
        let topology = match (name, &numbers[..]) {
            ("dumbbell", []) => Topology::Dumbbell { pairs: 2 },
            ("dumbbell", &[pairs]) => Topology::Dumbbell { pairs },
            ("incast", &[senders]) => Topology::Incast { senders },
            ("leafspine", &[leaves, spines, hosts_per_leaf]) => Topology::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
            },
            _ => return Err(bad()),
        };
        let hosts = topology.hosts_u64();
        if hosts > u64::from(MAX_HOSTS) {
            return Err(NetError::Config(format!(
                "topology {s}: {hosts} hosts, at most {MAX_HOSTS}"
            )));
        }
        if let Topology::LeafSpine { leaves, spines, .. } = topology {
            // Each leaf lists every spine as a next hop to every host behind another leaf:
            // the routing tables grow as leaves x hosts x spines, and must stay in memory.
            let next_hops = u64::from(leaves) * hosts * u64::from(spines);
            if next_hops > MAX_NEXT_HOPS {
                return Err(NetError::Config(format!(
                    "topology {s}: its routing tables would hold {next_hops} next hops, at most \
                     {MAX_NEXT_HOPS}; use fewer leaves or spines"
                )));
            }
        }
        Ok(topology)
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Topology::Dumbbell { pairs } => write!(f, "dumbbell:{pairs}"),
            Topology::Incast { senders } => write!(f, "incast:{senders}"),
            Topology::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
            } => write!(f, "leafspine:{leaves},{spines},{hosts_per_leaf}"),
        }
    }
}

impl Topology {
    fn hosts_u64(&self) -> u64 {
        match *self {
            Topology::Dumbbell { pairs } => 2 * u64::from(pairs),
            Topology::Incast { senders } => u64::from(senders) + 1,
            Topology::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => u64::from(leaves) * u64::from(hosts_per_leaf),
        }
    }

    /// How many hosts it has.
    pub fn hosts(&self) -> u32 {
        self.hosts_u64() as u32
    }

    /// Its long-lived flows: dumbbell host i to i + N, incast every sender to the receiver;
    /// none for a leaf-spine.
    pub(super) fn long_lived_pairs(&self) -> Vec<FlowSpec> {
        let flow = |src, dst| FlowSpec {
            src,
            dst,
            size: None,
            start: Time::ZERO,
        };
        match *self {
            Topology::Dumbbell { pairs } => (0..pairs).map(|i| flow(i, pairs + i)).collect(),
            Topology::Incast { senders } => (0..senders).map(|i| flow(i, senders)).collect(),
            Topology::LeafSpine { .. } => Vec::new(),
        }
    }

    /// How many hosts' links the load of a Poisson workload applies to.
    pub(super) fn poisson_senders(&self) -> u32 {
        match *self {
            Topology::Dumbbell { pairs } => pairs,
            // The load is of the receiver's link.
            Topology::Incast { .. } => 1,
            Topology::LeafSpine { .. } => self.hosts(),
        }
    }

    /// A source and destination for a Poisson flow.
    pub(super) fn random_pair(&self, rng: &mut Rng) -> (u32, u32) {
        match *self {
            Topology::Dumbbell { pairs } => {
                let n = u64::from(pairs);
                (rng.below(n) as u32, (n + rng.below(n)) as u32)
            }
            Topology::Incast { senders } => (rng.below(u64::from(senders)) as u32, senders),
            Topology::LeafSpine { .. } => {
                let n = u64::from(self.hosts());
                let src = rng.below(n);
                let dst = (src + 1 + rng.below(n - 1)) % n;
                (src as u32, dst as u32)
            }
        }
    }
}

/// A node's name and its ports.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub name: String,
    pub ports: Vec<u32>,
}

/// A switch's ECMP routes: for host h, `ports[start[h]..start[h + 1]]`.
#[derive(Debug, Clone)]
pub(super) struct Routes {
    start: Vec<u32>,
    ports: Vec<u32>,
}

/// Rates, delay and marking of the links to build.
#[derive(Debug, Clone, Copy)]
pub(super) struct LinkSpec {
    pub host_bps: u64,
    pub fabric_bps: u64,
    pub delay: Time,
    /// Marking at the host rate; scaled with each port's rate.
    pub marker: Marker,
}

/// The built network.
#[derive(Debug)]
pub(super) struct Fabric {
    pub hosts: u32,
    pub nodes: Vec<Node>,
    pub ports: Vec<Port>,
    /// Per switch (node `hosts + i`).
    pub routes: Vec<Routes>,
}

/// The most hops a path may have.
pub(super) const MAX_PATH: usize = 8;

impl Fabric {
    pub(super) fn build(topology: Topology, spec: LinkSpec) -> Fabric {
        let hosts = topology.hosts();
        let mut names: Vec<String> = (0..hosts).map(|h| format!("h{h}")).collect();
        // Links as (a, b, fabric?) between node indices; switches numbered after the hosts.
        let mut links = Vec::new();
        match topology {
            Topology::Dumbbell { pairs } => {
                names.extend(["left".to_string(), "right".to_string()]);
                let (left, right) = (hosts, hosts + 1);
                for h in 0..hosts {
                    links.push((h, if h < pairs { left } else { right }, false));
                }
                links.push((left, right, true));
            }
            Topology::Incast { .. } => {
                names.push("tor".to_string());
                links.extend((0..hosts).map(|h| (h, hosts, false)));
            }
            Topology::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
            } => {
                names.extend((0..leaves).map(|l| format!("leaf{l}")));
                names.extend((0..spines).map(|s| format!("spine{s}")));
                for h in 0..hosts {
                    links.push((h, hosts + h / hosts_per_leaf, false));
                }
                for l in 0..leaves {
                    for s in 0..spines {
                        links.push((hosts + l, hosts + leaves + s, true));
                    }
                }
            }
        }
        let mut nodes: Vec<Node> = names
            .into_iter()
            .map(|name| Node {
                name,
                ports: Vec::new(),
            })
            .collect();
        let mut ports = Vec::with_capacity(2 * links.len());
        for (a, b, fabric) in links {
            let bps = if fabric {
                spec.fabric_bps
            } else {
                spec.host_bps
            };
            let marker = scaled(spec.marker, bps, spec.host_bps);
            let (pa, pb) = (ports.len() as u32, ports.len() as u32 + 1);
            for (node, peer) in [(a, pb), (b, pa)] {
                let local = nodes[node as usize].ports.len() as u16;
                let mut port = Port::new(node, local, bps, spec.delay, marker);
                port.peer = peer;
                nodes[node as usize].ports.push(ports.len() as u32);
                ports.push(port);
            }
        }
        let mut fabric = Fabric {
            hosts,
            nodes,
            ports,
            routes: Vec::new(),
        };
        fabric.routes = fabric.shortest_paths();
        fabric
    }

    /// For each switch and host, every port on a shortest path to it (breadth-first from
    /// each host).
    fn shortest_paths(&self) -> Vec<Routes> {
        let n = self.nodes.len();
        let switches = n - self.hosts as usize;
        let mut routes = vec![
            Routes {
                start: vec![0],
                ports: Vec::new(),
            };
            switches
        ];
        let mut dist = vec![u32::MAX; n];
        let mut queue = VecDeque::new();
        for h in 0..self.hosts as usize {
            dist.fill(u32::MAX);
            dist[h] = 0;
            queue.push_back(h);
            while let Some(v) = queue.pop_front() {
                // Hosts do not forward.
                if v != h && v < self.hosts as usize {
                    continue;
                }
                for &p in &self.nodes[v].ports {
                    let w = self.ports[self.ports[p as usize].peer as usize].node as usize;
                    if dist[w] == u32::MAX {
                        dist[w] = dist[v] + 1;
                        queue.push_back(w);
                    }
                }
            }
            for (s, r) in routes.iter_mut().enumerate() {
                let node = self.hosts as usize + s;
                for &p in &self.nodes[node].ports {
                    let w = self.ports[self.ports[p as usize].peer as usize].node as usize;
                    if dist[node] != u32::MAX && dist[w].wrapping_add(1) == dist[node] {
                        r.ports.push(p);
                    }
                }
                r.start.push(r.ports.len() as u32);
            }
        }
        routes
    }

    /// True if node `n` is a host.
    pub(super) fn is_host(&self, node: u32) -> bool {
        node < self.hosts
    }

    /// The port a switch sends a packet for host `dst` out of.
    #[inline]
    pub(super) fn route(&self, switch_node: u32, dst: u16, hash: u32) -> u32 {
        let r = &self.routes[(switch_node - self.hosts) as usize];
        let (a, b) = (r.start[usize::from(dst)], r.start[usize::from(dst) + 1]);
        // hash * n / 2^32 picks one of the n next hops evenly, without a division.
        let pick = (u64::from(hash) * u64::from(b - a)) >> 32;
        r.ports[(a as u64 + pick) as usize]
    }

    /// The ports a packet from `src` to `dst` with `hash` leaves, in order.
    pub(super) fn path(&self, src: u32, dst: u32, hash: u32) -> Vec<u32> {
        let mut path = Vec::with_capacity(MAX_PATH);
        let mut port = self.nodes[src as usize].ports[0];
        loop {
            path.push(port);
            let node = self.ports[self.ports[port as usize].peer as usize].node;
            if self.is_host(node) || path.len() >= MAX_PATH {
                return path;
            }
            port = self.route(node, dst as u16, hash);
        }
    }

    /// `a->b` for the link a port sends on.
    pub(super) fn port_name(&self, port: u32) -> String {
        let p = &self.ports[port as usize];
        let peer = self.ports[p.peer as usize].node;
        format!(
            "{}->{}",
            self.nodes[p.node as usize].name, self.nodes[peer as usize].name
        )
    }

    /// True if every host can reach every other.
    #[cfg(test)]
    pub(super) fn connected(&self) -> bool {
        (0..self.hosts).all(|src| {
            (0..self.hosts).filter(|&d| d != src).all(|dst| {
                let path = self.path(src, dst, 0);
                let last = *path.last().expect("a host has a port");
                self.ports[self.ports[last as usize].peer as usize].node == dst
            })
        })
    }
}

/// The marking thresholds at `host_bps`, scaled to a port running at `bps` (as the HPCC
/// authors' runs set Kmin and Kmax in proportion to each link's rate).
fn scaled(m: Marker, bps: u64, host_bps: u64) -> Marker {
    let f = bps as f64 / host_bps as f64;
    let k = |b: u64| (b as f64 * f).round() as u64;
    Marker::new(k(m.kmin_bytes()), k(m.kmax_bytes()), m.pmax()).unwrap_or(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LinkSpec {
        LinkSpec {
            host_bps: 100_000_000_000,
            fabric_bps: 400_000_000_000,
            delay: Time::from_micros(1),
            marker: Marker::paper(),
        }
    }

    #[test]
    fn parses_each_topology_and_rejects_the_rest() {
        assert_eq!(
            "dumbbell".parse::<Topology>().unwrap(),
            Topology::Dumbbell { pairs: 2 }
        );
        assert_eq!("incast:2".parse::<Topology>().unwrap().hosts(), 3);
        let ls: Topology = "leafspine:4,4,16".parse().unwrap();
        assert_eq!(ls.hosts(), 64);
        assert_eq!(ls.to_string(), "leafspine:4,4,16");
        for bad in [
            "ring",
            "incast",
            "incast:0",
            "leafspine:4,4",
            "incast:x",
            "leafspine:999,1,999",
        ] {
            let err = bad.parse::<Topology>().unwrap_err().to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains("topology"), "{err}");
        }
    }

    #[test]
    fn leaf_spine_routes_by_shortest_paths_with_ecmp() {
        let t: Topology = "leafspine:4,4,16".parse().unwrap();
        let f = Fabric::build(t, spec());
        assert_eq!(f.nodes.len(), 64 + 8);
        assert_eq!(f.ports.len(), 2 * (64 + 16));
        assert!(f.connected());
        // Same leaf: host, leaf, host.
        assert_eq!(f.path(0, 5, 7).len(), 2);
        // Across leaves: four hops, and the spine depends on the hash.
        let spines: std::collections::BTreeSet<u32> = (0..16u32)
            .map(|i| f.path(0, 40, i * (u32::MAX / 16))[1])
            .collect();
        assert_eq!(spines.len(), 4, "every spine is used");
        assert_eq!(f.path(0, 40, 3).len(), 4);
        let up = f.path(0, 40, 3)[1];
        assert_eq!(f.ports[up as usize].bps, 400_000_000_000);
        assert_eq!(
            f.ports[up as usize].marker.kmin_bytes(),
            20_000,
            "scaled with the rate"
        );
        assert_eq!(f.port_name(f.path(0, 40, 3)[0]), "h0->leaf0");
    }

    #[test]
    fn dumbbell_and_incast() {
        let f = Fabric::build(Topology::Dumbbell { pairs: 3 }, spec());
        assert!(f.connected());
        assert_eq!(f.path(0, 3, 0).len(), 3);
        assert_eq!(f.path(0, 1, 0).len(), 2);
        let f = Fabric::build(Topology::Incast { senders: 2 }, spec());
        assert!(f.connected());
        assert_eq!(f.nodes[3].name, "tor");
        assert_eq!(Topology::Incast { senders: 2 }.long_lived_pairs().len(), 2);
    }
}
