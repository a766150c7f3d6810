//! 802.1Q tagging as a port on a VLAN does it, for an endpoint whose traffic must ride one
//! priority (the lossless PFC class): every frame sent gets the tag (VLAN ID and PCP), every
//! frame received with that VLAN ID loses it, frames of other VLANs are not ours. With VLAN
//! ID 0 the tag only carries the priority (an 802.1p priority tag, IEEE 802.1Q 9.6).
//! Untagged frames are taken as they are: most NICs take the tag off on receive (VLAN
//! offload) before AF_XDP sees the frame, and PAUSE and PFC frames are never tagged.
//!
//! CNPs may ride a priority of their own, as RoCE NICs send them so that they do not queue
//! behind the congested data they are about (mlx5: `cnp_802p_prio`, see [`TagPolicy`]). This
//! middleware is the one place that decides a sent frame's tag: the host builds every frame
//! untagged.

use crate::time::Instant;
use crate::wire::encap::VlanTag;
use crate::wire::{Bth, Opcode};

use super::{Device, DeviceError};

/// Which 802.1Q tag each frame sent gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TagPolicy {
    /// The tag of every frame sent but CNPs; `None`: they go untagged.
    pub tag: Option<VlanTag>,
    /// The priority (PCP) of CNPs (opcode 0x81, Annex A17.9), in the VLAN of `tag`; without
    /// a `tag`, CNPs alone get a priority tag (VLAN ID 0, IEEE 802.1Q 9.6), which a port
    /// takes as its own VLAN's. `None`: CNPs are tagged as every other frame. NVIDIA mlx5
    /// sends CNPs at priority 6 unless told otherwise (`cnp_802p_prio` in
    /// /sys/class/net/IFACE/ecn/roce_np/, firmware CNP_802P_PRIO; the sources in
    /// docs/congestion.md, "The CNP").
    pub cnp_pcp: Option<u8>,
}

impl TagPolicy {
    /// Every frame sent gets `tag`, CNPs included.
    pub const fn every_frame(tag: VlanTag) -> TagPolicy {
        TagPolicy {
            tag: Some(tag),
            cnp_pcp: None,
        }
    }

    /// The VLAN the port is on: the ID of every tag sent; received frames with it lose it.
    pub fn vid(&self) -> u16 {
        self.tag.map_or(0, |t| t.vid)
    }

    /// Whether no frame gets a tag.
    pub fn tags_nothing(&self) -> bool {
        self.tag.is_none() && self.cnp_pcp.is_none()
    }

    /// The tag of `frame` (an untagged Ethernet frame), `None` to send it untagged.
    pub fn tag_for(&self, frame: &[u8]) -> Option<VlanTag> {
        match self.cnp_pcp {
            Some(pcp) if Bth::of_frame(frame).is_some_and(|b| b.opcode() == Opcode::CNP) => {
                Some(VlanTag {
                    pcp,
                    ..self.tag.unwrap_or_default()
                })
            }
            _ => self.tag,
        }
    }
}

/// A device that tags what it sends as its [`TagPolicy`] says and takes its VLAN's tag off
/// what it receives.
#[derive(Debug)]
pub struct VlanTagging<D> {
    inner: D,
    policy: TagPolicy,
    /// A frame with its tag, on its way out.
    buf: Vec<u8>,
    /// Received frames of another VLAN, dropped.
    other_vlan: u64,
}

impl<D: Device> VlanTagging<D> {
    /// Wraps `inner`: frames sent are tagged by `policy`, received frames of its VLAN lose
    /// their tag.
    pub fn new(inner: D, policy: TagPolicy) -> VlanTagging<D> {
        let room = inner.capabilities().max_frame_len();
        VlanTagging {
            inner,
            policy,
            buf: Vec::with_capacity(room),
            other_vlan: 0,
        }
    }

    /// Received frames dropped as another VLAN's.
    pub fn other_vlan(&self) -> u64 {
        self.other_vlan
    }

    /// The device wrapped.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: Device> Device for VlanTagging<D> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        let VlanTagging {
            inner,
            policy,
            buf,
            other_vlan,
        } = self;
        let vid = policy.vid();
        inner.receive(&mut |frame| match VlanTag::of_frame(frame) {
            Some(t) if t.vid == vid => {
                VlanTag::untag(frame, buf);
                consume(buf);
            }
            None => consume(frame),
            Some(_) => *other_vlan += 1,
        })
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        if VlanTag::of_frame(frame).is_some() {
            return self.inner.transmit(frame);
        }
        match self.policy.tag_for(frame) {
            Some(tag) => {
                tag.tag(frame, &mut self.buf);
                self.inner.transmit(&self.buf)
            }
            None => self.inner.transmit(frame),
        }
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.inner.next_wakeup()
    }

    // The MTU is the IP packet's: a tagged frame is 4 bytes longer, which
    // Capabilities::max_frame_len allows for.
    forward_to_inner!(capabilities, raw_fd);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::VirtualClock;
    use crate::io::memory::{MemoryLinkConfig, pair};
    use crate::wire::sample;

    #[test]
    fn frames_go_out_tagged_and_come_in_untagged() {
        let (a, mut b) = pair(MemoryLinkConfig::default(), VirtualClock::default()).unwrap();
        let tag = VlanTag {
            pcp: 3,
            dei: false,
            vid: 100,
        };
        let mut a = VlanTagging::new(a, TagPolicy::every_frame(tag));
        let ip = |s: &str| s.parse().unwrap();
        let frame = sample::rc_send_only(ip("10.0.0.1"), ip("10.0.0.2"), 16).unwrap();
        assert!(a.transmit(&frame).unwrap());
        let mut got = Vec::new();
        while b.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        let mut tagged = Vec::new();
        tag.tag(&frame, &mut tagged);
        assert_eq!(got, vec![tagged.clone()]);
        // Back: our VLAN's tag comes off; untagged frames (a NIC that stripped the tag) pass;
        // another VLAN's frames are not ours.
        let mut other = Vec::new();
        VlanTag {
            pcp: 3,
            dei: false,
            vid: 200,
        }
        .tag(&frame, &mut other);
        for f in [&tagged, &frame, &other] {
            assert!(b.transmit(f).unwrap());
        }
        let mut got = Vec::new();
        while a.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        assert_eq!(got, vec![frame.clone(), frame.clone()]);
        assert_eq!(a.other_vlan(), 1);
        // A frame already tagged goes as it is.
        assert!(a.transmit(&other).unwrap());
        let mut got = Vec::new();
        while b.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        assert_eq!(got, vec![other]);
    }

    /// The tag `policy` gives `frame`, as it leaves a [`VlanTagging`] (the frame itself
    /// unchanged under it).
    fn sent_with(policy: TagPolicy, frame: &[u8]) -> Option<VlanTag> {
        let (a, mut b) = pair(MemoryLinkConfig::default(), VirtualClock::default()).unwrap();
        let mut a = VlanTagging::new(a, policy);
        assert!(a.transmit(frame).unwrap());
        let mut got = Vec::new();
        while b.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        assert_eq!(got.len(), 1);
        let mut untagged = Vec::new();
        VlanTag::untag(&got[0], &mut untagged);
        assert_eq!(untagged, frame);
        VlanTag::of_frame(&got[0])
    }

    #[test]
    fn cnps_take_their_own_priority_when_asked() {
        let ip = |s: &str| s.parse().unwrap();
        let data = sample::rc_send_only(ip("10.0.0.1"), ip("10.0.0.2"), 16).unwrap();
        let cnps: Vec<_> = sample::frames(1)
            .into_iter()
            .filter(|f| VlanTag::of_frame(f).is_none())
            .filter(|f| Bth::of_frame(f).is_some_and(|b| b.opcode() == Opcode::CNP))
            .collect();
        assert_eq!(cnps.len(), 2, "an IPv4 and an IPv6 CNP");
        let data_tag = VlanTag {
            pcp: 3,
            dei: false,
            vid: 5,
        };
        let own = TagPolicy {
            tag: Some(data_tag),
            cnp_pcp: Some(6),
        };
        let cnps_only = TagPolicy {
            tag: None,
            cnp_pcp: Some(6),
        };
        for cnp in &cnps {
            // By default a CNP rides the tag of the data.
            assert_eq!(
                sent_with(TagPolicy::every_frame(data_tag), cnp),
                Some(data_tag)
            );
            // Its own priority, in the same VLAN; the data keep theirs.
            let cnp_tag = VlanTag { pcp: 6, ..data_tag };
            assert_eq!(sent_with(own, cnp), Some(cnp_tag));
            assert_eq!(sent_with(own, &data), Some(data_tag));
            // No tag for the data: CNPs alone go priority-tagged.
            let priority_tag = VlanTag {
                pcp: 6,
                dei: false,
                vid: 0,
            };
            assert_eq!(sent_with(cnps_only, cnp), Some(priority_tag));
            assert_eq!(sent_with(cnps_only, &data), None);
        }
        assert!(cnps_only.vid() == 0 && !cnps_only.tags_nothing());
        assert!(TagPolicy::default().tags_nothing());

        // A port tagging CNPs only is on VLAN 0: priority-tagged frames lose their tag,
        // other VLANs' frames are not its.
        let (a, mut b) = pair(MemoryLinkConfig::default(), VirtualClock::default()).unwrap();
        let mut a = VlanTagging::new(a, cnps_only);
        let mut priority_tagged = Vec::new();
        VlanTag {
            pcp: 6,
            dei: false,
            vid: 0,
        }
        .tag(&data, &mut priority_tagged);
        let mut other = Vec::new();
        data_tag.tag(&data, &mut other);
        for f in [&priority_tagged, &other, &data] {
            assert!(b.transmit(f).unwrap());
        }
        let mut got = Vec::new();
        while a.receive(&mut |f| got.push(f.to_vec())).unwrap() {}
        assert_eq!(got, vec![data.clone(), data.clone()]);
        assert_eq!(a.other_vlan(), 1);
    }
}
