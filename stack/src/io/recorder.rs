//! Records every frame a device receives or transmits into one pcap stream, as a capture on the
//! wire would show it (`--pcap-out FILE` with any backend).

use std::io::Write;

use super::pcap::PcapWriter;
use super::{Clock, Device, DeviceError};

/// Middleware that writes every frame the inner device receives or transmits to a pcap
/// file, stamped by its clock.
#[derive(Debug)]
pub struct PcapRecorder<D, W: Write, C> {
    inner: D,
    writer: PcapWriter<W>,
    clock: C,
    /// The first write error; kept so that `receive` can still hand the frame over and the
    /// error surfaces at the next call.
    failed: Option<std::io::Error>,
}

impl<D: Device, W: Write, C: Clock> PcapRecorder<D, W, C> {
    /// Records `inner`'s frames to `writer`, timestamps from `clock`.
    pub fn new(inner: D, writer: PcapWriter<W>, clock: C) -> PcapRecorder<D, W, C> {
        PcapRecorder {
            inner,
            writer,
            clock,
            failed: None,
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Flushes the capture and returns the device and the writer.
    pub fn into_parts(mut self) -> (D, PcapWriter<W>) {
        let _ = self.writer.flush();
        (self.inner, self.writer)
    }

    fn check(&mut self) -> Result<(), DeviceError> {
        match self.failed.take() {
            Some(e) => Err(DeviceError::os("pcap recorder", "write", e)),
            None => Ok(()),
        }
    }
}

impl<D: Device, W: Write, C: Clock> Device for PcapRecorder<D, W, C> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        self.check()?;
        let (writer, clock, failed) = (&mut self.writer, &self.clock, &mut self.failed);
        self.inner.receive(&mut |frame| {
            record(writer, clock, failed, frame);
            consume(frame);
        })
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        self.check()?;
        let sent = self.inner.transmit(frame)?;
        if sent {
            record(&mut self.writer, &self.clock, &mut self.failed, frame);
        }
        Ok(sent)
    }

    forward_to_inner!(capabilities, raw_fd, next_wakeup);

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.check()?;
        self.inner.flush()?;
        self.writer
            .flush()
            .map_err(|e| DeviceError::os("pcap recorder", "flush", e))
    }
}

fn record<W: Write>(
    writer: &mut PcapWriter<W>,
    clock: &impl Clock,
    failed: &mut Option<std::io::Error>,
    frame: &[u8],
) {
    if failed.is_none()
        && let Err(e) = writer.write_frame(clock.now(), frame)
    {
        *failed = Some(e);
    }
}
