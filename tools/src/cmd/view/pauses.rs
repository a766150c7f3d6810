//! The pauses a capture's PAUSE and PFC frames put in force, as continuous intervals per
//! pausing port and priority: the bands the ladder draws (IEEE 802.3 Annex 31B, 802.1Qbb).
//! A pause time counts from its frame; a later frame for the same priority replaces the time
//! left, a time of zero (XON) ends the pause at once.

use std::collections::HashMap;

use roce::capture::{Frame, Link};
use roce::wire::encap::ETHERNET_HEADER_LEN;
use roce::wire::pause::{ETHERTYPE_MAC_CONTROL, MacControlRepr, PRIORITIES, quanta_to_ps};
use roce::wire::{NotRoce, PacketError, RocePacket};

/// Ports and priorities followed at once; pauses of any more are not drawn (bounded memory
/// on a hostile capture).
const MAX_OPEN: usize = 4096;

/// A PAUSE or PFC frame's source MAC and body; `None` for any other frame. MAC control
/// frames are Ethernet frames, never tagged (a cooked or raw IP capture has none).
pub fn pause_frame(frame: &Frame<'_>) -> Option<([u8; 6], MacControlRepr)> {
    if frame.link != Link::Ethernet {
        return None;
    }
    let frame = frame.data;
    let Err(PacketError::NotRoce(NotRoce::EtherType(ETHERTYPE_MAC_CONTROL))) =
        RocePacket::parse(frame)
    else {
        return None;
    };
    let src = frame.get(6..12)?.try_into().ok()?;
    let body = MacControlRepr::parse(frame.get(ETHERNET_HEADER_LEN..)?)?;
    matches!(body, MacControlRepr::Pause(_) | MacControlRepr::Pfc(_)).then_some((src, body))
}

/// One continuous pause of a port's priority (`None`: an 802.3x PAUSE of the whole link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub mac: [u8; 6],
    pub priority: Option<u8>,
    pub start_ts: u64,
    pub end_ts: u64,
}

/// The pauses of a run of frames.
#[derive(Debug, Default)]
pub struct Pauses {
    /// (port, priority) -> (start, when it lapses).
    open: HashMap<([u8; 6], Option<u8>), (u64, u64)>,
    done: Vec<Interval>,
}

impl Pauses {
    /// A pause frame from `src` at `ts`, its quanta counted at `link_bits_per_sec`.
    pub fn frame(&mut self, ts: u64, src: [u8; 6], body: &MacControlRepr, link_bits_per_sec: u64) {
        match body {
            MacControlRepr::Pause(p) => self.set(ts, src, None, p.quanta, link_bits_per_sec),
            MacControlRepr::Pfc(p) => {
                for n in (0..PRIORITIES).filter(|&n| p.enabled(n)) {
                    self.set(ts, src, Some(n as u8), p.quanta[n], link_bits_per_sec);
                }
            }
            MacControlRepr::Other(_) => {}
        }
    }

    fn set(&mut self, ts: u64, mac: [u8; 6], priority: Option<u8>, quanta: u16, bps: u64) {
        let key = (mac, priority);
        let end = |start_ts, end_ts| Interval {
            mac,
            priority,
            start_ts,
            end_ts,
        };
        // A pause that lapsed before this frame is over whatever the frame says.
        if let Some(&(start, until)) = self.open.get(&key)
            && until <= ts
        {
            self.done.push(end(start, until));
            self.open.remove(&key);
        }
        if quanta == 0 {
            if let Some((start, _)) = self.open.remove(&key) {
                self.done.push(end(start, ts));
            }
            return;
        }
        let until = ts + quanta_to_ps(quanta, bps).div_ceil(1000);
        if let Some(open) = self.open.get_mut(&key) {
            open.1 = until;
        } else if self.open.len() < MAX_OPEN {
            self.open.insert(key, (ts, until));
        }
    }

    /// Drops the pauses over before `ts`, which the page will not draw.
    pub fn forget_before(&mut self, ts: u64) {
        self.done.retain(|i| i.end_ts > ts);
    }

    /// Every pause by start time, those still in force ending where they lapse.
    pub fn finish(mut self) -> Vec<Interval> {
        for ((mac, priority), (start_ts, end_ts)) in self.open {
            self.done.push(Interval {
                mac,
                priority,
                start_ts,
                end_ts,
            });
        }
        self.done.sort_by_key(|i| (i.start_ts, i.mac, i.priority));
        self.done
    }
}
