//! Honouring PAUSE and PFC as a NIC's transmitter does (IEEE 802.3 Annex 31B; 802.1Qbb): the
//! [`PauseGate`] that says until when each priority may not send, and [`PauseHonouring`],
//! the middleware that puts it in front of any device.
//!
//! A link partner whose receive buffer fills sends a MAC control frame: an 802.3x PAUSE stops
//! the whole link, a PFC frame stops the priorities its enable vector names. Each gives a time
//! in quanta (512 bit times at the link's speed) that replaces whatever was left of an earlier
//! pause; a time of zero lifts it (XON). The MAC consumes these frames: the host above never
//! sees them. RoCE rides a priority of its own so that a congested switch pauses it rather
//! than dropping its frames (the lossless class); frames of other priorities flow on.

use crate::time::{Duration, Instant};
use crate::wire::encap::{ETHERNET_HEADER_LEN, VlanTag};
use crate::wire::pause::{ETHERTYPE_MAC_CONTROL, MacControlRepr, PRIORITIES, quanta_to_ps};
use crate::wire::{NotRoce, PacketError, RocePacket};

use super::{Built, Clock, Device, DeviceError, transmit_from};

/// Until when each of the eight priorities is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseGate {
    link_bits_per_sec: u64,
    until: [Instant; PRIORITIES],
}

impl PauseGate {
    /// A gate for a link of `link_bits_per_sec` (the speed pause quanta are counted at).
    pub fn new(link_bits_per_sec: u64) -> PauseGate {
        PauseGate {
            link_bits_per_sec,
            until: [Instant::ZERO; PRIORITIES],
        }
    }

    /// Takes a PAUSE or PFC frame's body that arrived at `now`: a PAUSE's time applies to
    /// every priority, a PFC frame's to the priorities it enables; each replaces the time
    /// left, zero lifting the pause. Other MAC control opcodes change nothing.
    pub fn honour(&mut self, body: &MacControlRepr, now: Instant) {
        let after = |quanta: u16| {
            let ps = quanta_to_ps(quanta, self.link_bits_per_sec);
            now + Duration::from_nanos(ps.div_ceil(1000))
        };
        match body {
            MacControlRepr::Pause(p) => self.until = [after(p.quanta); PRIORITIES],
            MacControlRepr::Pfc(p) => {
                for prio in (0..PRIORITIES).filter(|&prio| p.enabled(prio)) {
                    self.until[prio] = after(p.quanta[prio]);
                }
            }
            MacControlRepr::Other(_) => {}
        }
    }

    /// Until when `priority` may not send (a time past when it may).
    pub fn paused_until(&self, priority: usize) -> Instant {
        self.until.get(priority).copied().unwrap_or(Instant::ZERO)
    }

    /// True while `priority` may not send at `now`.
    pub fn is_paused(&self, priority: usize, now: Instant) -> bool {
        self.paused_until(priority) > now
    }

    /// The first time after `now` a paused priority may send again.
    pub fn next_resume(&self, now: Instant) -> Option<Instant> {
        self.until.iter().copied().filter(|&t| t > now).min()
    }
}

/// The body of a MAC control frame (EtherType 0x8808, never tagged), as the wire slicer
/// finds it; `None` for any other frame.
pub fn mac_control(frame: &[u8]) -> Option<MacControlRepr> {
    match RocePacket::parse(frame) {
        Err(PacketError::NotRoce(NotRoce::EtherType(ETHERTYPE_MAC_CONTROL))) => frame
            .get(ETHERNET_HEADER_LEN..)
            .and_then(MacControlRepr::parse),
        _ => None,
    }
}

/// The priority a frame travels in: its 802.1Q tag's PCP, 0 untagged (802.1Q's default
/// priority for a port that does not classify by DSCP).
pub fn priority_of(frame: &[u8]) -> usize {
    VlanTag::of_frame(frame).map_or(0, |t| usize::from(t.pcp))
}

/// A device whose transmitter honours the PAUSE and PFC frames it receives: a frame of a
/// paused priority is refused (`transmit` returns `Ok(false)`, as for a full ring, and the
/// caller keeps it) until the pause ends or an XON lifts it; the MAC control frames are taken
/// out of the received stream. [`Device::next_wakeup`] says when a pause ends.
#[derive(Debug)]
pub struct PauseHonouring<D, C> {
    inner: D,
    clock: C,
    gate: PauseGate,
    /// Transmissions refused because their priority was paused.
    held: u64,
    /// PAUSE and PFC frames received.
    pause_frames: u64,
}

impl<D: Device, C: Clock> PauseHonouring<D, C> {
    /// Wraps `inner`, a link of `link_bits_per_sec`, with `clock` telling the time.
    pub fn new(inner: D, clock: C, link_bits_per_sec: u64) -> PauseHonouring<D, C> {
        PauseHonouring {
            inner,
            clock,
            gate: PauseGate::new(link_bits_per_sec),
            held: 0,
            pause_frames: 0,
        }
    }

    /// The pause state of each priority.
    pub fn gate(&self) -> &PauseGate {
        &self.gate
    }

    /// Transmissions refused because their priority was paused.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// PAUSE and PFC frames received (and honoured where they named a priority).
    pub fn pause_frames(&self) -> u64 {
        self.pause_frames
    }

    /// The device wrapped.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: Device, C: Clock> Device for PauseHonouring<D, C> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        let PauseHonouring {
            inner,
            clock,
            gate,
            pause_frames,
            ..
        } = self;
        inner.receive(&mut |frame| match mac_control(frame) {
            Some(body) => {
                *pause_frames += 1;
                gate.honour(&body, clock.now());
            }
            None => consume(frame),
        })
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        if self.gate.is_paused(priority_of(frame), self.clock.now()) {
            self.held += 1;
            return Ok(false);
        }
        self.inner.transmit(frame)
    }

    /// While no priority is paused no frame can be held: the inner device's buffer is lent
    /// straight through (AF_XDP's UMEM). Otherwise the frame is built in `scratch`, where a
    /// paused one waits.
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        if self.gate.next_resume(self.clock.now()).is_some() {
            return transmit_from(self, scratch, build);
        }
        self.inner.transmit_built(scratch, build)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let resume = self.gate.next_resume(self.clock.now());
        [self.inner.next_wakeup(), resume]
            .into_iter()
            .flatten()
            .min()
    }

    forward_to_inner!(capabilities, raw_fd);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::VirtualClock;
    use crate::io::memory::{MAC_B, MemoryLinkConfig, pair};
    use crate::wire::encap::VlanTag;
    use crate::wire::pause::{PauseRepr, PfcRepr};
    use crate::wire::sample;

    const TEN_GBPS: u64 = 10_000_000_000;

    fn pfc(times: &[(usize, u16)]) -> MacControlRepr {
        MacControlRepr::Pfc(PfcRepr::new(times))
    }

    fn at_us(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn the_gate_pauses_each_priority_for_its_quanta() {
        let now = at_us(10);
        let mut gate = PauseGate::new(TEN_GBPS);
        // 1000 quanta of 51.2 ns at 10 Gb/s, for priority 3 alone.
        gate.honour(&pfc(&[(3, 1000)]), now);
        assert_eq!(gate.paused_until(3), now + Duration::from_nanos(51_200));
        assert!(gate.is_paused(3, now + Duration::from_nanos(51_199)));
        assert!(!gate.is_paused(3, now + Duration::from_nanos(51_200)));
        assert!((0..8).filter(|&p| p != 3).all(|p| !gate.is_paused(p, now)));
        assert_eq!(
            gate.next_resume(now),
            Some(now + Duration::from_nanos(51_200))
        );
        // A later frame replaces the time left; zero (XON) lifts it at once.
        gate.honour(&pfc(&[(3, 10)]), now);
        assert_eq!(gate.paused_until(3), now + Duration::from_nanos(512));
        gate.honour(&pfc(&[(3, 0)]), now);
        assert!(!gate.is_paused(3, now));
        assert_eq!(gate.next_resume(now), None);
        // 802.3x PAUSE stops every priority; at 100 Gb/s a quantum is 5.12 ns.
        let mut fast = PauseGate::new(100 * 1_000_000_000);
        fast.honour(&MacControlRepr::Pause(PauseRepr { quanta: 2 }), now);
        assert!((0..8).all(|p| fast.paused_until(p) == now + Duration::from_nanos(11)));
        // Another MAC control opcode and out-of-range priorities change nothing.
        fast.honour(&MacControlRepr::Other(0x0002), now + Duration::from_secs(1));
        assert_eq!(fast.paused_until(9), Instant::ZERO);
    }

    #[test]
    fn mac_control_and_priority_are_read_from_whole_frames() {
        let pause = MacControlRepr::Pause(PauseRepr { quanta: 7 });
        let frame = pause.frame(MAC_B);
        assert_eq!(mac_control(&frame), Some(pause));
        assert_eq!(mac_control(&frame[..13]), None);
        let a = "10.0.0.1".parse().unwrap();
        let roce = sample::rc_send_only(a, "10.0.0.2".parse().unwrap(), 8).unwrap();
        assert_eq!(mac_control(&roce), None);
        assert_eq!(priority_of(&roce), 0);
        let mut tagged = Vec::new();
        VlanTag {
            pcp: 5,
            dei: false,
            vid: 100,
        }
        .tag(&roce, &mut tagged);
        assert_eq!(priority_of(&tagged), 5);
    }

    /// A sender on priority 3 behind the middleware, over an in-memory link on virtual time:
    /// PFC XOFF for priority 3 holds its frames for exactly the quanta given, another
    /// priority's pause does not, and XON releases them at once.
    #[test]
    fn the_middleware_holds_transmission_while_paused() {
        let clock = VirtualClock::new(at_us(0));
        let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
        let mut a = PauseHonouring::new(a, clock.clone(), TEN_GBPS);
        let a_ip = "10.0.0.1".parse().unwrap();
        let roce = sample::rc_send_only(a_ip, "10.0.0.2".parse().unwrap(), 64).unwrap();
        let mut frame = Vec::new();
        VlanTag {
            pcp: 3,
            dei: false,
            vid: 7,
        }
        .tag(&roce, &mut frame);
        let untagged_arp = {
            let mut f = roce.clone();
            f[12..14].copy_from_slice(&[0x08, 0x06]);
            f
        };
        let received = |dev: &mut PauseHonouring<_, _>| {
            let mut n = 0;
            while dev.receive(&mut |_| n += 1).unwrap() {}
            n
        };
        let delivered = |b: &mut crate::io::memory::MemoryDevice| {
            let mut n = 0;
            while b.receive(&mut |_| n += 1).unwrap() {}
            n
        };

        // B pauses priority 3 for 0xffff quanta (3.355 ms at 10 Gb/s) and priority 5 too.
        assert!(
            b.transmit(&pfc(&[(3, 0xffff), (5, 1)]).frame(MAC_B))
                .unwrap()
        );
        assert_eq!(
            received(&mut a),
            0,
            "the pause frame is the MAC's, not the host's"
        );
        assert_eq!(a.pause_frames(), 1);
        assert!(!a.transmit(&frame).unwrap(), "priority 3 is paused");
        // Priority 0 (untagged) is not.
        assert!(a.transmit(&untagged_arp).unwrap());
        assert_eq!(delivered(&mut b), 1);
        let end = at_us(0) + Duration::from_nanos(quanta_to_ps(0xffff, TEN_GBPS).div_ceil(1000));
        assert_eq!(a.next_wakeup(), Some(at_us(0) + Duration::from_nanos(52)));
        clock.advance_to(end - Duration::from_nanos(1));
        assert_eq!(a.next_wakeup(), Some(end));
        assert!(
            !a.transmit(&frame).unwrap(),
            "still paused 1 ns before the end"
        );
        clock.advance_to(end);
        assert!(a.transmit(&frame).unwrap(), "the pause has run out");
        assert_eq!(a.held(), 2);

        // XOFF again, then XON: sending resumes at XON's arrival, not at the quanta's end.
        assert!(b.transmit(&pfc(&[(3, 0xffff)]).frame(MAC_B)).unwrap());
        received(&mut a);
        assert!(!a.transmit(&frame).unwrap());
        clock.advance_to(end + Duration::from_micros(100));
        assert!(b.transmit(&pfc(&[(3, 0)]).frame(MAC_B)).unwrap());
        received(&mut a);
        assert!(a.transmit(&frame).unwrap());
        assert_eq!(a.next_wakeup(), None);
        assert_eq!(delivered(&mut b), 2);
    }
}
