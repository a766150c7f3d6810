//! 802.1Q tagging as a port on a VLAN does it, for an endpoint whose traffic must ride one
//! priority (the lossless PFC class): every frame sent gets the tag (VLAN ID and PCP), every
//! frame received with that VLAN ID loses it, frames of other VLANs are not ours. With VLAN
//! ID 0 the tag only carries the priority (an 802.1p priority tag, IEEE 802.1Q 9.6).
//! Untagged frames are taken as they are: most NICs take the tag off on receive (VLAN
//! offload) before AF_XDP sees the frame, and PAUSE and PFC frames are never tagged.

use crate::time::Instant;
use crate::wire::encap::VlanTag;

use super::{Device, DeviceError};

/// A device that tags what it sends with `tag` and takes that tag off what it receives.
#[derive(Debug)]
pub struct VlanTagging<D> {
    inner: D,
    tag: VlanTag,
    /// A frame with its tag, on its way out.
    buf: Vec<u8>,
    /// Received frames of another VLAN, dropped.
    other_vlan: u64,
}

impl<D: Device> VlanTagging<D> {
    /// Wraps `inner`: frames sent get `tag`, received frames of its VLAN lose it.
    pub fn new(inner: D, tag: VlanTag) -> VlanTagging<D> {
        let room = inner.capabilities().max_frame_len();
        VlanTagging {
            inner,
            tag,
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
            tag,
            buf,
            other_vlan,
        } = self;
        inner.receive(&mut |frame| match VlanTag::of_frame(frame) {
            Some(t) if t.vid == tag.vid => {
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
        self.tag.tag(frame, &mut self.buf);
        self.inner.transmit(&self.buf)
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
        let mut a = VlanTagging::new(a, tag);
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
}
