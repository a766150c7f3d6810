//! The host's addresses and its GID table, laid out as rdma_rxe lays out its own.
//!
//! RoCEv2 names a port's addresses by GIDs, 128-bit values that are IPv6 addresses (IBA
//! Annex A17.4.1.1): an IPv4 address appears as the IPv4-mapped `::ffff:a.b.c.d`. rxe fills its
//! table from the netdev's addresses: index 0 is the IPv6 link-local address the kernel
//! derives from the MAC (modified EUI-64, RFC 4291 2.5.1 and Appendix A), then the IPv4
//! address (rxe: index 1), then the global IPv6 addresses. The tools pick one with `-g IDX`
//! (`-x IDX` for perftest), and the GID's family decides whether the QP speaks IPv4 or IPv6.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

/// An address with its prefix length, as `ip addr` shows it: `10.77.0.2/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCidr {
    addr: IpAddr,
    prefix_len: u8,
}

/// Why an address with prefix cannot be a host's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CidrError {
    /// Not of the form ADDR/PREFIX (the text as given).
    #[error("{0:?} is not ADDR/PREFIX (e.g. 10.77.0.2/24 or fd00:77::2/64)")]
    Syntax(String),
    /// The prefix is longer than the address.
    #[error("prefix length {prefix_len} is longer than the {max} bits of {addr}")]
    PrefixTooLong {
        /// The address.
        addr: IpAddr,
        /// The prefix length given.
        prefix_len: u8,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// Unspecified, multicast or broadcast.
    #[error("{0} cannot be a host address (unspecified, multicast or broadcast)")]
    NotUnicast(IpAddr),
}

impl IpCidr {
    /// A host address in a subnet of `prefix_len` bits; addresses no host may have are refused.
    pub fn new(addr: IpAddr, prefix_len: u8) -> Result<IpCidr, CidrError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix_len > max {
            return Err(CidrError::PrefixTooLong {
                addr,
                prefix_len,
                max,
            });
        }
        let broadcast = matches!(addr, IpAddr::V4(a) if a.is_broadcast());
        if addr.is_unspecified() || addr.is_multicast() || broadcast {
            return Err(CidrError::NotUnicast(addr));
        }
        Ok(IpCidr { addr, prefix_len })
    }

    /// The address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length, in bits.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Whether `other` lies on this address's subnet.
    pub fn contains(&self, other: IpAddr) -> bool {
        match (self.addr, other) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix_len));
                let mask = mask.unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix_len));
                let mask = mask.unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpCidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<IpCidr, CidrError> {
        let syntax = || CidrError::Syntax(s.to_owned());
        let (addr, prefix) = s.split_once('/').ok_or_else(syntax)?;
        let addr: IpAddr = addr.parse().map_err(|_| syntax())?;
        let prefix_len: u8 = prefix.parse().map_err(|_| syntax())?;
        IpCidr::new(addr, prefix_len)
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// The IPv6 link-local address of a MAC: `fe80::` and the modified EUI-64 interface
/// identifier (the MAC split by `ff:fe`, universal/local bit inverted; RFC 4291 Appendix A).
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[0] = 0xfe;
    o[1] = 0x80;
    o[8] = mac[0] ^ 0x02;
    o[9..11].copy_from_slice(&mac[1..3]);
    o[11] = 0xff;
    o[12] = 0xfe;
    o[13..16].copy_from_slice(&mac[3..6]);
    Ipv6Addr::from(o)
}

/// The IP address a GID stands for: IPv4 for an IPv4-mapped GID, else the GID itself.
pub fn gid_to_ip(gid: Ipv6Addr) -> IpAddr {
    match gid.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(gid),
    }
}

/// The GID of an IP address (RoCEv2: IPv4 as `::ffff:a.b.c.d`).
pub fn ip_to_gid(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// One GID table entry and the subnet of its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID: the IPv6 address, or the IPv4-mapped form of an IPv4 address.
    pub gid: Ipv6Addr,
    /// The address and its subnet.
    pub cidr: IpCidr,
}

impl GidEntry {
    /// The address the GID stands for.
    pub fn addr(&self) -> IpAddr {
        self.cidr.addr
    }
}

/// The host's addresses in rxe's order (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidTable {
    entries: Vec<GidEntry>,
}

impl GidTable {
    /// The table of a host with `mac` and the addresses `cidrs` (at most one IPv4 address is
    /// kept, as on an rxe netdev with one; IPv6 link-local addresses other than the MAC's
    /// are ignored).
    pub fn new(mac: [u8; 6], cidrs: &[IpCidr]) -> GidTable {
        let ll = link_local(mac);
        let mut entries = vec![GidEntry {
            gid: ll,
            cidr: IpCidr {
                addr: IpAddr::V6(ll),
                prefix_len: 64,
            },
        }];
        if let Some(v4) = cidrs.iter().find(|c| c.addr.is_ipv4()) {
            entries.push(GidEntry {
                gid: ip_to_gid(v4.addr),
                cidr: *v4,
            });
        }
        for c in cidrs {
            let IpAddr::V6(v6) = c.addr else { continue };
            if !is_link_local(v6) && !entries.iter().any(|e| e.gid == v6) {
                entries.push(GidEntry { gid: v6, cidr: *c });
            }
        }
        GidTable { entries }
    }

    /// The entry at `index` (the GID index the tools' `-g` names).
    pub fn get(&self, index: usize) -> Option<&GidEntry> {
        self.entries.get(index)
    }

    /// Every entry, in index order.
    pub fn entries(&self) -> &[GidEntry] {
        &self.entries
    }

    /// The index of `gid`, if the table holds it.
    pub fn index_of(&self, gid: Ipv6Addr) -> Option<usize> {
        self.entries.iter().position(|e| e.gid == gid)
    }

    /// The host's IPv4 address, if it has one.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.entries.iter().find_map(|e| match e.addr() {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
    }

    /// Whether `addr` is one of ours.
    pub fn is_local(&self, addr: IpAddr) -> bool {
        self.entries.iter().any(|e| e.addr() == addr)
    }

    /// The address to send to `dest` from, if `dest` is on one of our links: the IPv4
    /// address, the link-local address for a link-local peer, else the global address whose
    /// subnet holds `dest`. The endpoint does not route: peers off its subnets are unreachable.
    pub fn source_for(&self, dest: IpAddr) -> Option<IpAddr> {
        match dest {
            IpAddr::V6(v6) if is_link_local(v6) => Some(self.entries[0].addr()),
            _ => self
                .entries
                .iter()
                .skip(1)
                .find(|e| e.cidr.contains(dest))
                .map(GidEntry::addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x77, 0x00, 0x0b];

    fn cidr(s: &str) -> IpCidr {
        s.parse().unwrap()
    }

    /// The lab guest 10.77.0.11 prints these three GIDs (tools/softroce-lab.md, LAB-GID lines).
    #[test]
    fn table_matches_rxe_on_the_lab_guest() {
        let t = GidTable::new(MAC, &[cidr("fd00:77::11/64"), cidr("10.77.0.11/24")]);
        let gids: Vec<String> = t.entries().iter().map(|e| e.gid.to_string()).collect();
        assert_eq!(
            gids,
            ["fe80::5054:ff:fe77:b", "::ffff:10.77.0.11", "fd00:77::11"]
        );
        assert_eq!(t.index_of("::ffff:10.77.0.11".parse().unwrap()), Some(1));
        assert_eq!(t.ipv4(), Some(Ipv4Addr::new(10, 77, 0, 11)));
    }

    #[test]
    fn source_addresses_follow_the_destination() {
        let t = GidTable::new(MAC, &[cidr("10.77.0.2/24"), cidr("fd00:77::2/64")]);
        let src = |d: &str| t.source_for(d.parse().unwrap());
        assert_eq!(src("10.77.0.11"), Some("10.77.0.2".parse().unwrap()));
        assert_eq!(src("fd00:77::11"), Some("fd00:77::2".parse().unwrap()));
        assert_eq!(
            src("fe80::1"),
            Some("fe80::5054:ff:fe77:b".parse().unwrap())
        );
        assert_eq!(src("10.78.0.1"), None, "off the subnet");
        assert_eq!(src("fd00:78::1"), None);
        assert!(t.is_local("10.77.0.2".parse().unwrap()));
        assert!(!t.is_local("10.77.0.3".parse().unwrap()));
    }

    #[test]
    fn cidr_parsing_and_errors() {
        assert_eq!(cidr("10.0.0.1/8").to_string(), "10.0.0.1/8");
        assert!(cidr("10.1.2.3/0").contains("192.168.0.1".parse().unwrap()));
        assert!(cidr("10.1.2.3/32").contains("10.1.2.3".parse().unwrap()));
        assert!(!cidr("10.1.2.3/32").contains("10.1.2.4".parse().unwrap()));
        assert!(!cidr("10.1.2.3/8").contains("::1".parse().unwrap()));
        for bad in [
            "10.0.0.1",
            "10.0.0.1/33",
            "x/8",
            "0.0.0.0/8",
            "ff02::1/64",
            "::1/x",
        ] {
            assert!(bad.parse::<IpCidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn gids_and_addresses() {
        let v4: IpAddr = "192.168.1.2".parse().unwrap();
        assert_eq!(gid_to_ip(ip_to_gid(v4)), v4);
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(gid_to_ip(ip_to_gid(v6)), v6);
        assert_eq!(link_local([0; 6]).to_string(), "fe80::200:ff:fe00:0");
    }
}
