//! A switch's shared packet buffer (its MMU): admission, dynamic thresholds and the PFC
//! decisions, modelled on shared-buffer switch chips as the HPCC authors' ns-3 switch
//! (switch-mmu.cc) and Broadcom's documentation describe them.
//!
//! With PFC on, the lossless class is accounted at the ingress port it came in on. Each
//! ingress port keeps a headroom (bytes the link can still deliver after a PAUSE is sent:
//! twice its bandwidth-delay product plus a few frames); the rest of the buffer is shared.
//! An ingress queue (port, priority) may hold shared bytes up to a threshold, either fixed
//! (`--xoff`) or dynamic: alpha times the shared bytes still free (Choudhury and Hahne's
//! dynamic threshold), so that the more the buffer fills, the earlier every port pauses.
//!
//! - XOFF: as soon as an ingress queue reaches its threshold (or spills into headroom).
//! - XON: once it holds no headroom bytes and its shared bytes are a resume offset below the
//!   threshold (or `--xon`).
//! - A packet beyond both the threshold and the headroom is dropped: PFC with too small a
//!   headroom is lossy, and the report shows it.
//!
//! With PFC off, data is admitted while its egress queue stays under the same dynamic
//! threshold (alpha times the free buffer) and the buffer has room, and is dropped otherwise.
//! Control frames (ACK, NAK, CNP) are dropped only when the whole buffer is full.

use super::port::PRIOS;

/// Whether and how the switches pause their upstream on the data priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pfc {
    /// No PFC: a full buffer drops.
    Off,
    /// XOFF at the dynamic threshold, XON a resume offset below it.
    Dynamic,
    /// XOFF and XON at fixed ingress queue lengths.
    Fixed(StaticThresholds),
}

/// The fixed thresholds of `--xoff` and `--xon`, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticThresholds {
    /// Pause once an ingress queue holds this many bytes.
    pub xoff: u64,
    /// Resume once it is back down to this many.
    pub xon: u64,
}

/// How a switch treats a packet of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// PFC-protected data: ingress accounting, headroom, pauses.
    Lossless,
    /// Data without PFC: egress dynamic threshold, drops.
    Lossy,
    /// ACK, NAK, CNP.
    Control,
}

#[derive(Debug, Clone)]
pub(super) struct Mmu {
    buffer: u64,
    /// The buffer less every port's headroom.
    shared_limit: u64,
    alpha: f64,
    fixed: Option<StaticThresholds>,
    resume_offset: u64,
    headroom: Vec<u64>,
    /// Bytes held, all classes.
    pub used: u64,
    /// Bytes held in the shared part.
    shared_used: u64,
    /// Shared and headroom bytes per ingress port and priority (lossless class).
    ingress: Vec<[u64; PRIOS]>,
    hdrm: Vec<[u64; PRIOS]>,
    /// Bit p set: this switch holds the upstream of that port paused on priority p.
    paused: Vec<u8>,
    pub peak: u64,
}

impl Mmu {
    /// `headroom` per port: empty with PFC off.
    pub(super) fn new(
        buffer: u64,
        alpha: f64,
        fixed: Option<StaticThresholds>,
        resume_offset: u64,
        ports: usize,
        headroom: Vec<u64>,
    ) -> Mmu {
        let reserved: u64 = headroom.iter().sum();
        Mmu {
            buffer,
            shared_limit: buffer.saturating_sub(reserved),
            alpha,
            fixed,
            resume_offset,
            headroom,
            used: 0,
            shared_used: 0,
            ingress: vec![[0; PRIOS]; ports],
            hdrm: vec![[0; PRIOS]; ports],
            paused: vec![0; ports],
            peak: 0,
        }
    }

    /// The shared bytes an ingress queue may hold before it pauses its upstream.
    pub(super) fn threshold(&self) -> u64 {
        match self.fixed {
            Some(t) => t.xoff,
            None => (self.alpha * self.shared_limit.saturating_sub(self.shared_used) as f64) as u64,
        }
    }

    fn resume_level(&self) -> u64 {
        match self.fixed {
            Some(t) => t.xon,
            None => self.threshold().saturating_sub(self.resume_offset),
        }
    }

    /// Admits a packet of `size` bytes of `class` arriving on `port` for priority `prio`
    /// whose egress queue already holds `egress_bytes`; false if it is dropped.
    pub(super) fn admit(
        &mut self,
        port: usize,
        prio: u8,
        class: Class,
        egress_bytes: u64,
        size: u64,
    ) -> bool {
        let p = usize::from(prio);
        match class {
            Class::Lossless => {
                if self.ingress[port][p] + size <= self.threshold() {
                    self.ingress[port][p] += size;
                    self.shared_used += size;
                } else if self.hdrm[port][p] + size <= self.headroom[port] {
                    self.hdrm[port][p] += size;
                } else {
                    return false;
                }
            }
            Class::Lossy => {
                let free = self.shared_limit.saturating_sub(self.shared_used);
                if size > free || egress_bytes + size > (self.alpha * free as f64) as u64 {
                    return false;
                }
                self.shared_used += size;
            }
            Class::Control => {
                if self.used + size > self.buffer {
                    return false;
                }
            }
        }
        self.used += size;
        self.peak = self.peak.max(self.used);
        true
    }

    /// A packet admitted as [`Mmu::admit`] did leaves the buffer.
    pub(super) fn release(&mut self, port: usize, prio: u8, class: Class, size: u64) {
        let p = usize::from(prio);
        match class {
            Class::Lossless => {
                // Headroom drains first: it is what the pause was for.
                let from_hdrm = self.hdrm[port][p].min(size);
                self.hdrm[port][p] -= from_hdrm;
                let from_shared = (size - from_hdrm).min(self.ingress[port][p]);
                self.ingress[port][p] -= from_shared;
                self.shared_used -= from_shared;
            }
            Class::Lossy => self.shared_used -= size.min(self.shared_used),
            Class::Control => {}
        }
        self.used -= size.min(self.used);
    }

    /// True if (port, prio) should send XOFF now: not yet paused, and at its threshold.
    pub(super) fn should_pause(&self, port: usize, prio: u8) -> bool {
        let p = usize::from(prio);
        !self.is_paused(port, prio)
            && (self.hdrm[port][p] > 0 || self.ingress[port][p] >= self.threshold())
    }

    /// True if (port, prio) is paused and may send XON now.
    pub(super) fn should_resume(&self, port: usize, prio: u8) -> bool {
        let p = usize::from(prio);
        let shared = self.ingress[port][p];
        self.is_paused(port, prio)
            && self.hdrm[port][p] == 0
            && (shared == 0 || shared <= self.resume_level())
    }

    pub(super) fn is_paused(&self, port: usize, prio: u8) -> bool {
        self.paused[port] & (1 << prio) != 0
    }

    pub(super) fn set_paused(&mut self, port: usize, prio: u8, paused: bool) {
        if paused {
            self.paused[port] |= 1 << prio;
        } else {
            self.paused[port] &= !(1 << prio);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u8 = 3;

    /// 1 MB, alpha 1/8, two ports with 100 KB headroom each: 800 KB shared.
    fn dynamic() -> Mmu {
        Mmu::new(1_000_000, 0.125, None, 3_000, 2, vec![100_000, 100_000])
    }

    #[test]
    fn dynamic_threshold_shrinks_as_the_buffer_fills() {
        let mut m = dynamic();
        assert_eq!(m.threshold(), 100_000, "1/8 of 800 KB free");
        // Fill port 0 with 1 KB packets until it must pause.
        let mut admitted = 0;
        while !m.should_pause(0, P) {
            assert!(m.admit(0, P, Class::Lossless, 0, 1_000));
            admitted += 1_000;
        }
        // Pauses at the first x with x >= (800 000 - x) / 8: x = 88 889, so the 89th KB.
        assert_eq!(admitted, 89_000);
        assert_eq!(m.threshold(), (0.125 * 711_000.0) as u64);
        m.set_paused(0, P, true);
        assert!(!m.should_pause(0, P), "already paused");
        // Port 1 now pauses earlier: the buffer is fuller.
        let mut second = 0;
        while !m.should_pause(1, P) {
            assert!(m.admit(1, P, Class::Lossless, 0, 1_000));
            second += 1_000;
        }
        assert_eq!(second, 79_000, "x >= (711 000 - x) / 8 first at 79 KB");
    }

    #[test]
    fn headroom_absorbs_what_is_in_flight_then_drops() {
        let mut m = dynamic();
        while m.admit(0, P, Class::Lossless, 0, 1_000) && m.hdrm[0][3] == 0 {}
        assert!(
            m.should_pause(0, P),
            "spilling into headroom pauses at once"
        );
        m.set_paused(0, P, true);
        let mut more = 1;
        while m.admit(0, P, Class::Lossless, 0, 1_000) {
            more += 1;
        }
        assert_eq!(
            more, 100,
            "100 KB of headroom, the first packet already in it"
        );
        // Draining: no XON while headroom bytes remain, then once 3 KB under the threshold.
        let mut drained = 0;
        while !m.should_resume(0, P) {
            m.release(0, P, Class::Lossless, 1_000);
            drained += 1_000;
        }
        assert!(drained >= 100_000, "headroom first ({drained})");
        let shared = m.ingress[0][3];
        assert!(shared + 3_000 <= m.threshold() && shared + 4_000 > m.threshold());
    }

    #[test]
    fn fixed_thresholds() {
        let fixed = StaticThresholds {
            xoff: 20_000,
            xon: 10_000,
        };
        let mut m = Mmu::new(1_000_000, 0.125, Some(fixed), 3_000, 1, vec![50_000]);
        for _ in 0..19 {
            assert!(m.admit(0, P, Class::Lossless, 0, 1_000));
        }
        assert!(!m.should_pause(0, P));
        assert!(m.admit(0, P, Class::Lossless, 0, 1_000));
        assert!(m.should_pause(0, P), "at 20 KB");
        m.set_paused(0, P, true);
        for _ in 0..9 {
            m.release(0, P, Class::Lossless, 1_000);
        }
        assert!(!m.should_resume(0, P), "11 KB");
        m.release(0, P, Class::Lossless, 1_000);
        assert!(m.should_resume(0, P), "10 KB");
    }

    #[test]
    fn lossy_data_drops_past_the_egress_threshold() {
        let mut m = Mmu::new(100_000, 1.0, None, 0, 1, vec![0]);
        let mut queued = 0;
        while m.admit(0, P, Class::Lossy, queued, 1_000) {
            queued += 1_000;
        }
        // q + 1000 > 100 000 - q first at q = 50 000.
        assert_eq!(queued, 50_000);
        assert!(m.admit(0, 6, Class::Control, 0, 64), "control still fits");
        for _ in 0..50 {
            m.release(0, P, Class::Lossy, 1_000);
        }
        m.release(0, 6, Class::Control, 64);
        assert_eq!((m.used, m.shared_used), (0, 0));
    }
}
