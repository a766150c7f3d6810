//! The layers a RoCE packet can be captured inside, and what the slicer
//! ([`super::packet`]) records of them: switch mirror ports (ERSPAN over GRE), overlays (VXLAN,
//! Geneve, GRE carrying Ethernet or IP), 802.1Q and QinQ tags, and the Linux cooked headers of
//! `tcpdump -i any`. Each header is a wire type of its own module; the slicer walks them,
//! outermost first, up to [`MAX_DEPTH`] layers.

pub mod erspan;
pub mod geneve;
pub mod gre;
pub mod sll;
pub mod vlan;
pub mod vxlan;
pub mod wrap;

use core::fmt;

/// Outer layers the slicer goes through before it calls a frame too deeply encapsulated:
/// real captures need three or four (SLL, a tag, ERSPAN's two), and a bound keeps a crafted
/// GRE-in-GRE frame from costing more than a few steps.
pub const MAX_DEPTH: usize = 8;

/// One outer layer, as `roce decode --json` names it in `encap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum OuterKind {
    /// An 802.1Q tag (TPID 0x8100).
    Vlan = 1,
    /// A service tag (TPID 0x88A8, or 0x9100).
    QinQ,
    /// Linux cooked capture header, v1.
    Sll,
    /// Linux cooked capture header, v2.
    Sll2,
    /// VXLAN (UDP 4789).
    Vxlan,
    /// Geneve (UDP 6081).
    Geneve,
    /// GRE (IP protocol 47).
    Gre,
    /// GRE protocol 0x88BE without a sequence number: no ERSPAN header.
    ErspanI,
    /// ERSPAN type II: GRE protocol 0x88BE with a sequence number.
    ErspanII,
    /// ERSPAN type III: GRE protocol 0x22EB.
    ErspanIII,
}

impl OuterKind {
    const ALL: [OuterKind; 10] = [
        OuterKind::Vlan,
        OuterKind::QinQ,
        OuterKind::Sll,
        OuterKind::Sll2,
        OuterKind::Vxlan,
        OuterKind::Geneve,
        OuterKind::Gre,
        OuterKind::ErspanI,
        OuterKind::ErspanII,
        OuterKind::ErspanIII,
    ];

    /// The name in `roce decode --json`'s `encap`.
    pub const fn name(self) -> &'static str {
        match self {
            OuterKind::Vlan => "VLAN",
            OuterKind::QinQ => "QINQ",
            OuterKind::Sll => "SLL",
            OuterKind::Sll2 => "SLL2",
            OuterKind::Vxlan => "VXLAN",
            OuterKind::Geneve => "GENEVE",
            OuterKind::Gre => "GRE",
            OuterKind::ErspanI => "ERSPAN_I",
            OuterKind::ErspanII => "ERSPAN_II",
            OuterKind::ErspanIII => "ERSPAN_III",
        }
    }

    /// A tunnel carries whole frames or packets over a network (as tags and cooked headers
    /// do not): what a non-RoCE frame inside one is reported as.
    pub const fn is_tunnel(self) -> bool {
        !matches!(
            self,
            OuterKind::Vlan | OuterKind::QinQ | OuterKind::Sll | OuterKind::Sll2
        )
    }

    fn from_nibble(n: u32) -> OuterKind {
        OuterKind::ALL[(n as usize).saturating_sub(1).min(OuterKind::ALL.len() - 1)]
    }
}

impl fmt::Display for OuterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OuterKind::Vlan => "802.1Q VLAN",
            OuterKind::QinQ => "QinQ service tag",
            OuterKind::Sll => "Linux cooked header",
            OuterKind::Sll2 => "Linux cooked v2 header",
            OuterKind::Vxlan => "VXLAN",
            OuterKind::Geneve => "Geneve",
            OuterKind::Gre => "GRE",
            OuterKind::ErspanI => "ERSPAN I",
            OuterKind::ErspanII => "ERSPAN II",
            OuterKind::ErspanIII => "ERSPAN III",
        })
    }
}

/// The outer layers of a packet, outermost first, in 4 bits each: small enough to ride in
/// every sliced packet at no cost. An ERSPAN layer is listed before the GRE that carries it
/// (`["ERSPAN_III", "GRE"]`): the mirror session is what the operator set up, GRE its carrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Encap {
    kinds: u32,
    len: u8,
}

/// The frame has more than [`MAX_DEPTH`] outer layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep;

impl Encap {
    /// How many outer layers.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True for a plain frame.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds the next layer in; fails past [`MAX_DEPTH`].
    #[inline]
    pub fn push(&mut self, kind: OuterKind) -> Result<(), TooDeep> {
        if self.len() >= MAX_DEPTH {
            return Err(TooDeep);
        }
        self.kinds |= (kind as u32) << (4 * self.len);
        self.len += 1;
        Ok(())
    }

    /// The layer `i` (0: outermost).
    pub fn get(&self, i: usize) -> Option<OuterKind> {
        (i < self.len()).then(|| OuterKind::from_nibble((self.kinds >> (4 * i)) & 0xf))
    }

    /// The layers, outermost first.
    pub fn iter(&self) -> impl Iterator<Item = OuterKind> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The outermost tunnel (not a tag or cooked header), if any.
    pub fn outermost_tunnel(&self) -> Option<OuterKind> {
        self.iter().find(|k| k.is_tunnel())
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, k) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" / ")?;
            }
            f.write_str(k.name())?;
        }
        Ok(())
    }
}

/// Which header the slicer met, for decoders that show every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    /// An Ethernet II header.
    Ethernet,
    /// A tag, after its TPID (which ends the header before it).
    Tag {
        /// The TPID that announced the tag.
        tpid: u16,
    },
    /// A Linux cooked header.
    Sll,
    /// A Linux cooked v2 header.
    Sll2,
    /// An IPv4 header with its options.
    Ipv4,
    /// The fixed IPv6 header.
    Ipv6,
    /// A UDP header.
    Udp,
    /// VXLAN (UDP 4789).
    Vxlan,
    /// The fixed part and its options.
    Geneve,
    /// GRE (IP protocol 47).
    Gre,
    /// ERSPAN type II: GRE protocol 0x88BE with a sequence number.
    ErspanII,
    /// ERSPAN type III: GRE protocol 0x22EB.
    ErspanIII,
    /// ERSPAN III's platform-specific subheader.
    ErspanPlatform,
}

/// A header the slicer met: what, where in the frame, how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Which header.
    pub kind: HeaderKind,
    /// Its first byte in the frame.
    pub start: usize,
    /// Its length in bytes.
    pub len: usize,
}

/// What the slicer tells about each header it walks through: nothing on the hot path (`()`),
/// every header for a decoder (`Vec<Header>`).
pub trait Trace {
    /// Called for each header the slicer walks through, in frame order.
    fn header(&mut self, kind: HeaderKind, start: usize, len: usize);
}

impl Trace for () {
    #[inline(always)]
    fn header(&mut self, _: HeaderKind, _: usize, _: usize) {}
}

impl Trace for Vec<Header> {
    fn header(&mut self, kind: HeaderKind, start: usize, len: usize) {
        self.push(Header { kind, start, len });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encap_keeps_order_and_bounds_depth() {
        let mut e = Encap::default();
        assert!(e.is_empty() && e.outermost_tunnel().is_none());
        for k in OuterKind::ALL.iter().take(MAX_DEPTH) {
            e.push(*k).unwrap();
        }
        assert_eq!(e.push(OuterKind::Gre), Err(TooDeep));
        let names: Vec<_> = e.iter().map(OuterKind::name).collect();
        assert_eq!(
            names,
            [
                "VLAN", "QINQ", "SLL", "SLL2", "VXLAN", "GENEVE", "GRE", "ERSPAN_I"
            ]
        );
        assert_eq!(e.outermost_tunnel(), Some(OuterKind::Vxlan));
        let mut e = Encap::default();
        e.push(OuterKind::ErspanIII).unwrap();
        e.push(OuterKind::Gre).unwrap();
        assert_eq!(e.to_string(), "ERSPAN_III / GRE");
    }
}
