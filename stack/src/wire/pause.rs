//! MAC control frames that stop a link: the 802.3x PAUSE (IEEE 802.3 Annex 31B) and
//! priority-based flow control, PFC (IEEE 802.1Qbb, carried as MAC control opcode 0x0101).
//!
//! Both follow EtherType 0x8808 and go to 01-80-C2-00-00-01:
//!
//! ```text
//!  bytes 0-1    opcode: 0x0001 PAUSE, 0x0101 PFC
//!  PAUSE
//!  bytes 2-3    pause_time, in quanta
//!  PFC
//!  bytes 2-3    priority-enable vector: byte 2 reserved (zero), byte 3 bit n = time[n] is valid
//!  bytes 4-19   time[0] .. time[7], in quanta
//! ```
//!
//! A quantum is the time to send 512 bits at the link's speed (5.12 ns at 100 Gb/s). A time of
//! zero for an enabled priority lifts its pause (XON); a non-zero time pauses it for that long
//! (XOFF), and a later frame replaces the time left. RoCE rides a PFC priority so that a
//! congested switch pauses the sender instead of dropping (the lossless class).

use super::FixedHeader;
use super::field;
use super::header::header_view;

/// EtherType of MAC control frames.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// MAC control opcode of the 802.3x PAUSE.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// MAC control opcode of PFC (802.1Qbb 36.1.3).
pub const OPCODE_PFC: u16 = 0x0101;
/// The destination address of PAUSE and PFC frames (802.3 31B.3.1).
pub const MAC_CONTROL_DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
/// Bits in one pause quantum (802.3 31B.2).
pub const BITS_PER_QUANTUM: u64 = 512;
/// The number of priorities PFC controls.
pub const PRIORITIES: usize = 8;
/// Bytes of a MAC control opcode.
pub const OPCODE_LEN: usize = 2;

/// How long `quanta` pause quanta last on a link of `bits_per_sec`, in picoseconds (exact for
/// every standard speed: 5,120 ps a quantum at 100 Gb/s). 0 for a zero speed.
pub const fn quanta_to_ps(quanta: u16, bits_per_sec: u64) -> u64 {
    if bits_per_sec == 0 {
        return 0;
    }
    (quanta as u128 * BITS_PER_QUANTUM as u128 * 1_000_000_000_000 / bits_per_sec as u128) as u64
}

/// The opcode at the start of a MAC control frame's body, if there are two bytes.
pub fn opcode(body: &[u8]) -> Option<u16> {
    (body.len() >= OPCODE_LEN).then(|| field::read_u16(body, 0))
}

header_view!(
    /// A view over the 2-byte parameter of an 802.3x PAUSE (after its opcode).
    Pause,
    PauseRepr
);

header_view! {
    /// A view over the 18 bytes of PFC parameters (after its opcode): the priority-enable
    /// vector and the eight times.
    Pfc, PfcRepr,
    pfc_at { ENABLE = 0, TIMES = 2 }
}

impl<T: AsRef<[u8]>> Pause<T> {
    /// How long to stop sending, in quanta; 0 resumes at once.
    pub fn quanta(&self) -> u16 {
        field::read_u16(self.bytes(), 0)
    }
}

impl<T: AsRef<[u8]>> Pfc<T> {
    /// The whole 16-bit priority-enable vector, reserved byte included.
    pub fn enable_vector(&self) -> u16 {
        field::read_u16(self.bytes(), pfc_at::ENABLE)
    }
    /// The pause time of `priority` (0-7) in quanta; priorities beyond 7 read as 0.
    pub fn time(&self, priority: usize) -> u16 {
        if priority >= PRIORITIES {
            return 0;
        }
        field::read_u16(self.bytes(), pfc_at::TIMES + 2 * priority)
    }
}

/// An 802.3x PAUSE's parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PauseRepr {
    /// Pause time in quanta.
    pub quanta: u16,
}

impl FixedHeader for PauseRepr {
    const NAME: &'static str = "802.3x PAUSE";
    const LEN: usize = 2;

    fn parse_unchecked(buf: &[u8]) -> Self {
        PauseRepr {
            quanta: Pause { buffer: buf }.quanta(),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u16(buf, 0, self.quanta);
    }
}

/// PFC's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PfcRepr {
    /// The priority-enable vector: the high byte is reserved and must be zero, bit n of the
    /// low byte says `quanta[n]` applies.
    pub enable_vector: u16,
    /// Pause time per priority, in quanta.
    pub quanta: [u16; PRIORITIES],
}

impl PfcRepr {
    /// True if the frame's time for `priority` applies.
    pub const fn enabled(&self, priority: usize) -> bool {
        priority < PRIORITIES && self.enable_vector & (1 << priority) != 0
    }

    /// The reserved high byte of the enable vector (non-zero is a malformed frame).
    pub const fn reserved(&self) -> u8 {
        (self.enable_vector >> 8) as u8
    }

    /// A frame that pauses each `(priority, quanta)` given and leaves the rest alone.
    pub fn new(times: &[(usize, u16)]) -> PfcRepr {
        let mut pfc = PfcRepr::default();
        for &(p, q) in times.iter().filter(|(p, _)| *p < PRIORITIES) {
            pfc.enable_vector |= 1 << p;
            pfc.quanta[p] = q;
        }
        pfc
    }
}

impl FixedHeader for PfcRepr {
    const NAME: &'static str = "PFC";
    const LEN: usize = 18;

    fn parse_unchecked(buf: &[u8]) -> Self {
        let v = Pfc { buffer: buf };
        PfcRepr {
            enable_vector: v.enable_vector(),
            quanta: core::array::from_fn(|p| v.time(p)),
        }
    }

    fn emit_unchecked(&self, buf: &mut [u8]) {
        field::write_u16(buf, pfc_at::ENABLE, self.enable_vector);
        for (p, q) in self.quanta.iter().enumerate() {
            field::write_u16(buf, pfc_at::TIMES + 2 * p, *q);
        }
    }
}

/// A MAC control frame's body as far as flow control goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacControlRepr {
    /// 802.3x PAUSE: the whole link.
    Pause(PauseRepr),
    /// PFC: per priority.
    Pfc(PfcRepr),
    /// Another MAC control opcode (EPON's GATE, REPORT, ...), not flow control.
    Other(u16),
}

impl MacControlRepr {
    /// Reads the body after EtherType 0x8808; `None` if it is too short for its opcode.
    pub fn parse(body: &[u8]) -> Option<MacControlRepr> {
        let params = body.get(OPCODE_LEN..)?;
        Some(match opcode(body)? {
            OPCODE_PAUSE => MacControlRepr::Pause(PauseRepr::parse(params).ok()?),
            OPCODE_PFC => MacControlRepr::Pfc(PfcRepr::parse(params).ok()?),
            other => MacControlRepr::Other(other),
        })
    }

    /// Bytes of opcode and parameters.
    pub fn buffer_len(&self) -> usize {
        OPCODE_LEN
            + match self {
                MacControlRepr::Pause(_) => PauseRepr::LEN,
                MacControlRepr::Pfc(_) => PfcRepr::LEN,
                MacControlRepr::Other(_) => 0,
            }
    }

    /// Writes opcode and parameters into the start of `buf`; false if it is too short.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        if buf.len() < self.buffer_len() {
            return false;
        }
        let (op, params) = buf.split_at_mut(OPCODE_LEN);
        let code = match self {
            MacControlRepr::Pause(p) => {
                p.emit_unchecked(params);
                OPCODE_PAUSE
            }
            MacControlRepr::Pfc(p) => {
                p.emit_unchecked(params);
                OPCODE_PFC
            }
            MacControlRepr::Other(code) => *code,
        };
        field::write_u16(op, 0, code);
        true
    }

    /// A whole Ethernet frame from `src` to the MAC control address, padded to the 60-byte
    /// minimum (no FCS).
    pub fn frame(&self, src: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::with_capacity(60);
        f.extend_from_slice(&MAC_CONTROL_DST);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ETHERTYPE_MAC_CONTROL.to_be_bytes());
        let at = f.len();
        f.resize(at + self.buffer_len(), 0);
        self.emit(&mut f[at..]);
        f.resize(f.len().max(60), 0);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_last_512_bit_times() {
        assert_eq!(quanta_to_ps(1, 100_000_000_000), 5_120);
        assert_eq!(quanta_to_ps(0xffff, 100_000_000_000), 335_539_200);
        assert_eq!(quanta_to_ps(1, 25_000_000_000), 20_480);
        assert_eq!(quanta_to_ps(10, 0), 0);
    }

    #[test]
    fn pfc_frame_round_trips() {
        let pfc = PfcRepr::new(&[(3, 0xffff), (6, 0)]);
        assert!(pfc.enabled(3) && pfc.enabled(6) && !pfc.enabled(0) && !pfc.enabled(9));
        let frame = MacControlRepr::Pfc(pfc).frame([2, 0, 0, 0, 0, 1]);
        assert_eq!(frame.len(), 60);
        assert_eq!(&frame[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0x48]);
        assert_eq!(
            MacControlRepr::parse(&frame[14..]),
            Some(MacControlRepr::Pfc(pfc))
        );
        let pause = MacControlRepr::Pause(PauseRepr { quanta: 7 });
        let frame = pause.frame([2, 0, 0, 0, 0, 1]);
        assert_eq!(MacControlRepr::parse(&frame[14..]), Some(pause));
        assert_eq!(MacControlRepr::parse(&[0x01, 0x01, 0]), None, "cut short");
        assert_eq!(
            MacControlRepr::parse(&[0, 3]),
            Some(MacControlRepr::Other(3))
        );
    }

    mod pause {
        use super::*;
        crate::wire::header::round_trip_proptest!(PauseRepr);
    }
    mod pfc {
        use super::*;
        crate::wire::header::round_trip_proptest!(PfcRepr);
    }
}
