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
//!
//! Frames of other priorities flow on here too: a NIC's transmitter keeps a queue per
//! priority, so that a CNP on a priority of its own (`--cnp-pcp`, mlx5's 6) is not stuck
//! behind the paused data it is about. [`PauseHonouring`] keeps the frames of a paused
//! priority in that priority's queue, up to [`WAITING_BYTES`] each, and sends them in order
//! when the pause ends.

use std::collections::VecDeque;

use crate::time::{Duration, Instant};
use crate::wire::encap::{ETHERNET_HEADER_LEN, ETHERTYPE_VLAN, VlanTag};
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

    /// Whether any priority has ever been paused: until then no time needs reading to know
    /// that none is.
    pub fn ever_paused(&self) -> bool {
        self.until.iter().any(|&t| t != Instant::ZERO)
    }
}

/// The body of a MAC control frame (EtherType 0x8808, never tagged), as the wire slicer
/// finds it; `None` for any other frame.
pub fn mac_control(frame: &[u8]) -> Option<MacControlRepr> {
    // Every frame a device receives comes through here, and the host slices the RoCE ones
    // next: most frames are told apart by their EtherType instead of being sliced twice (a
    // 64-byte SEND client spent a tenth of its user time slicing ACKs). A MAC control frame
    // carries 0x8808 there (it is link-local: never forwarded, so never inside another
    // packet); tagged frames go on to the slicer as before.
    let ethertype = frame.get(ETHERNET_HEADER_LEN - 2..ETHERNET_HEADER_LEN)?;
    let ethertype = u16::from_be_bytes([ethertype[0], ethertype[1]]);
    if ethertype != ETHERTYPE_MAC_CONTROL && ethertype != ETHERTYPE_VLAN {
        return None;
    }
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

/// Bytes of frames a paused priority keeps waiting before the transmitter refuses more of
/// them. An RC queue pair has at most `max_inflight_packets` (128) packets unacknowledged,
/// 512 KiB of 4 KiB packets, so one sender's window fits; more than that and the transmitter
/// refuses the priority's frames as a full ring does, which holds up every priority behind
/// them until the pause ends, as before queues per priority.
pub const WAITING_BYTES: usize = 1 << 20;

/// A device whose transmitter honours the PAUSE and PFC frames it receives: a frame of a
/// paused priority waits in its priority's queue (at most [`WAITING_BYTES`]; beyond that it
/// is refused, `transmit` returning `Ok(false)` as for a full ring, and the caller keeps it)
/// until the pause ends or an XON lifts it, while other priorities' frames go on; the MAC
/// control frames are taken out of the received stream. [`Device::next_wakeup`] says when a
/// pause ends.
#[derive(Debug)]
pub struct PauseHonouring<D, C> {
    inner: D,
    clock: C,
    gate: PauseGate,
    /// Per priority, frames waiting for a pause to end (or for room in the inner device's
    /// ring after it ended), oldest first, and their bytes.
    waiting: [VecDeque<Vec<u8>>; PRIORITIES],
    waiting_bytes: [usize; PRIORITIES],
    /// Frames waiting, all priorities: while none does, sending costs what it did without
    /// the queues (no look at the clock for them on the hot path).
    waiting_frames: usize,
    /// Transmissions that met a paused priority (or frames waiting before them): kept
    /// waiting, or refused when their priority's queue was full.
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
            waiting: Default::default(),
            waiting_bytes: [0; PRIORITIES],
            waiting_frames: 0,
            held: 0,
            pause_frames: 0,
        }
    }

    /// The time, on a link that has seen a pause; `None` (and no clock read: one per frame
    /// was 5% of a 64-byte SEND client's user time) on one that never has, where nothing is
    /// paused.
    fn now_if_ever_paused(&self) -> Option<Instant> {
        self.gate.ever_paused().then(|| self.clock.now())
    }

    /// Sends the waiting frames of every priority no longer paused, oldest first, while the
    /// inner device takes them.
    fn release(&mut self) -> Result<(), DeviceError> {
        if self.waiting_frames == 0 {
            return Ok(());
        }
        let now = self.clock.now();
        for prio in 0..PRIORITIES {
            if self.gate.is_paused(prio, now) {
                continue;
            }
            while let Some(frame) = self.waiting[prio].front() {
                if !self.inner.transmit(frame)? {
                    return Ok(());
                }
                self.waiting_bytes[prio] -= frame.len();
                self.waiting[prio].pop_front();
                self.waiting_frames -= 1;
            }
        }
        Ok(())
    }

    /// The pause state of each priority.
    pub fn gate(&self) -> &PauseGate {
        &self.gate
    }

    /// Transmissions that met a paused priority: kept waiting, or refused when its queue was
    /// full.
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
        self.release()?;
        let prio = priority_of(frame);
        // Behind its priority's waiting frames even once the pause is over: a priority's
        // frames leave in the order they came.
        let paused = self
            .now_if_ever_paused()
            .is_some_and(|now| self.gate.is_paused(prio, now));
        if paused || !self.waiting[prio].is_empty() {
            self.held += 1;
            if self.waiting_bytes[prio] + frame.len() > WAITING_BYTES {
                return Ok(false);
            }
            self.waiting_bytes[prio] += frame.len();
            self.waiting[prio].push_back(frame.to_vec());
            self.waiting_frames += 1;
            return Ok(true);
        }
        self.inner.transmit(frame)
    }

    /// While no priority is paused and no frame waits, the inner device's buffer is lent
    /// straight through (AF_XDP's UMEM). Otherwise the frame is built in `scratch`, from
    /// where a paused one is kept.
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        self.release()?;
        let paused = self
            .now_if_ever_paused()
            .is_some_and(|now| self.gate.next_resume(now).is_some());
        if self.waiting_frames > 0 || paused {
            return transmit_from(self, scratch, build);
        }
        self.inner.transmit_built(scratch, build)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.release()?;
        self.inner.flush()
    }

    /// When a pause ends; now, while frames of a priority no longer paused still wait (the
    /// inner device's ring was full), so that the caller comes back to send them.
    fn next_wakeup(&self) -> Option<Instant> {
        let now = self.clock.now();
        let stuck = (self.waiting_frames > 0
            && (0..PRIORITIES)
                .any(|prio| !self.waiting[prio].is_empty() && !self.gate.is_paused(prio, now)))
        .then_some(now);
        [self.inner.next_wakeup(), self.gate.next_resume(now), stuck]
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

    /// `roce`'s RC SEND ONLY of `len` payload bytes from A to B, tagged VLAN 7 priority `pcp`.
    fn tagged(pcp: u8, len: usize) -> Vec<u8> {
        let roce = sample::rc_send_only(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            len,
        )
        .unwrap();
        let mut frame = Vec::new();
        VlanTag {
            pcp,
            dei: false,
            vid: 7,
        }
        .tag(&roce, &mut frame);
        frame
    }

    fn received<D: Device, C: Clock>(dev: &mut PauseHonouring<D, C>) -> usize {
        let mut n = 0;
        while dev.receive(&mut |_| n += 1).unwrap() {}
        n
    }

    /// The frames B has received, in order.
    fn delivered(b: &mut crate::io::memory::MemoryDevice) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        while b.receive(&mut |f| frames.push(f.to_vec())).unwrap() {}
        frames
    }

    /// A sender on priority 3 behind the middleware, over an in-memory link on virtual time:
    /// PFC XOFF for priority 3 keeps its frames waiting for exactly the quanta given, in
    /// order, another priority's pause does not, and XON releases them at once.
    #[test]
    fn the_middleware_holds_transmission_while_paused() {
        let clock = VirtualClock::new(at_us(0));
        let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
        let mut a = PauseHonouring::new(a, clock.clone(), TEN_GBPS);
        let (first, second, third) = (tagged(3, 64), tagged(3, 65), tagged(3, 66));
        let untagged_arp = {
            let mut f =
                sample::rc_send_only("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 64)
                    .unwrap();
            f[12..14].copy_from_slice(&[0x08, 0x06]);
            f
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
        assert!(
            a.transmit(&first).unwrap(),
            "taken, to wait for the pause's end"
        );
        // Priority 0 (untagged) is not paused and goes at once, past the waiting frame.
        assert!(a.transmit(&untagged_arp).unwrap());
        assert_eq!(delivered(&mut b), vec![untagged_arp.clone()]);
        let end = at_us(0) + Duration::from_nanos(quanta_to_ps(0xffff, TEN_GBPS).div_ceil(1000));
        assert_eq!(a.next_wakeup(), Some(at_us(0) + Duration::from_nanos(52)));
        clock.advance_to(end - Duration::from_nanos(1));
        assert_eq!(a.next_wakeup(), Some(end));
        assert!(a.transmit(&second).unwrap());
        a.flush().unwrap();
        assert!(
            delivered(&mut b).is_empty(),
            "still paused 1 ns before the end"
        );
        clock.advance_to(end);
        assert!(a.transmit(&third).unwrap(), "the pause has run out");
        assert_eq!(
            delivered(&mut b),
            vec![first.clone(), second.clone(), third.clone()],
            "the waiting frames first, in order"
        );
        assert_eq!(a.held(), 2);

        // XOFF again, then XON: sending resumes at XON's arrival, not at the quanta's end.
        assert!(b.transmit(&pfc(&[(3, 0xffff)]).frame(MAC_B)).unwrap());
        received(&mut a);
        assert!(a.transmit(&first).unwrap());
        a.flush().unwrap();
        assert!(delivered(&mut b).is_empty());
        clock.advance_to(end + Duration::from_micros(100));
        assert!(b.transmit(&pfc(&[(3, 0)]).frame(MAC_B)).unwrap());
        received(&mut a);
        assert_eq!(
            a.next_wakeup(),
            Some(clock.now()),
            "XON: a frame waits, to be sent now"
        );
        a.flush().unwrap();
        assert_eq!(delivered(&mut b), vec![first]);
        assert_eq!(a.next_wakeup(), None, "nothing paused, nothing waits");
    }

    /// A CNP on priority 6 (`--cnp-pcp 6`) leaves while the data's priority 3 is paused, as
    /// from a NIC's queue per priority, and does not overtake nor get overtaken within its
    /// own priority.
    #[test]
    fn another_priority_is_not_held_up_by_a_paused_one() {
        let clock = VirtualClock::new(at_us(0));
        let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
        let mut a = PauseHonouring::new(a, clock.clone(), TEN_GBPS);
        assert!(b.transmit(&pfc(&[(3, 0xffff)]).frame(MAC_B)).unwrap());
        received(&mut a);
        let data: Vec<Vec<u8>> = (0..10).map(|i| tagged(3, 64 + i)).collect();
        let cnps = [tagged(6, 16), tagged(6, 17)];
        for d in &data[..5] {
            assert!(a.transmit(d).unwrap());
        }
        assert!(a.transmit(&cnps[0]).unwrap());
        for d in &data[5..] {
            assert!(a.transmit(d).unwrap());
        }
        assert!(a.transmit(&cnps[1]).unwrap());
        assert_eq!(
            delivered(&mut b),
            cnps.to_vec(),
            "the CNPs went, the data wait"
        );
        clock.advance_to(at_us(4000));
        a.flush().unwrap();
        assert_eq!(delivered(&mut b), data, "then the data, in order");
        assert_eq!(a.held(), 10);
    }

    /// A paused priority keeps at most WAITING_BYTES waiting; beyond that its frames are
    /// refused as by a full ring (the caller keeps them), and nothing is lost.
    #[test]
    fn a_paused_priority_keeps_a_bounded_queue() {
        let clock = VirtualClock::new(at_us(0));
        let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
        let mut a = PauseHonouring::new(a, clock.clone(), TEN_GBPS);
        assert!(b.transmit(&pfc(&[(3, 0xffff)]).frame(MAC_B)).unwrap());
        received(&mut a);
        let frame = tagged(3, 1024);
        let fits = WAITING_BYTES / frame.len();
        for _ in 0..fits {
            assert!(a.transmit(&frame).unwrap());
        }
        assert!(!a.transmit(&frame).unwrap(), "the queue is full: refused");
        assert!(
            a.transmit(&tagged(6, 16)).unwrap(),
            "another priority still goes"
        );
        assert_eq!(delivered(&mut b).len(), 1);
        clock.advance_to(at_us(4000));
        assert!(a.transmit(&frame).unwrap(), "the pause is over");
        assert_eq!(
            delivered(&mut b).len(),
            fits + 1,
            "every frame taken arrives"
        );
    }
}
