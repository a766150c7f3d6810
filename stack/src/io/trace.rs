//! One `tracing` event per frame through a device (target `roce::io`, level TRACE), with the
//! RoCE fields a reader of the log looks for first: opcode, destination QP, PSN, ECN.
//! Enable with `RUST_LOG=roce::io=trace`.

use tracing::{Level, enabled, event};

use crate::wire::ce::{ecn, payload_ethertype};
use crate::wire::{Bth, Opcode};

use super::{Device, DeviceError};

/// What the tracer reports of a frame; decoding stops quietly where the frame stops making
/// sense, as a log line must never fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSummary {
    /// The frame's length in bytes.
    pub len: usize,
    /// The EtherType after any (one) 802.1Q tag: what the frame carries, not the tag's TPID.
    pub ethertype: Option<u16>,
    /// The IP ECN field, for IPv4 and IPv6 frames.
    pub ecn: Option<u8>,
    /// Opcode, destination QP and PSN of a RoCEv2 frame.
    pub bth: Option<(Opcode, u32, u32)>,
}

impl FrameSummary {
    /// Summarises `frame` as far as it parses.
    pub fn of(frame: &[u8]) -> FrameSummary {
        FrameSummary {
            len: frame.len(),
            ethertype: payload_ethertype(frame).map(|(_, ethertype)| ethertype),
            ecn: ecn(frame),
            bth: roce_bth(frame),
        }
    }
}

fn roce_bth(frame: &[u8]) -> Option<(Opcode, u32, u32)> {
    let bth = Bth::of_frame(frame)?;
    Some((bth.opcode(), bth.dest_qp().value(), bth.psn().value()))
}

fn trace_frame(direction: &'static str, frame: &[u8]) {
    if !enabled!(target: "roce::io", Level::TRACE) {
        return;
    }
    let s = FrameSummary::of(frame);
    match s.bth {
        Some((opcode, dest_qp, psn)) => event!(
            target: "roce::io",
            Level::TRACE,
            direction,
            len = s.len,
            opcode = %opcode,
            dest_qp,
            psn,
            ecn = s.ecn,
        ),
        None => event!(
            target: "roce::io",
            Level::TRACE,
            direction,
            len = s.len,
            ethertype = s.ethertype.map(|t| format!("{t:#06x}")),
        ),
    }
}

/// A device that reports each frame it passes as a `tracing` event.
#[derive(Debug)]
pub struct Tracer<D> {
    inner: D,
}

impl<D: Device> Tracer<D> {
    /// Logs every frame of `inner` (at trace level) and passes it on.
    pub fn new(inner: D) -> Tracer<D> {
        Tracer { inner }
    }

    /// The wrapped device.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

impl<D: Device> Device for Tracer<D> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        self.inner.receive(&mut |frame| {
            trace_frame("rx", frame);
            consume(frame);
        })
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        let sent = self.inner.transmit(frame)?;
        trace_frame(if sent { "tx" } else { "tx-full" }, frame);
        Ok(sent)
    }

    forward_to_inner!(capabilities, raw_fd, next_wakeup);

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }
}
