//! Fault injection around any device, in both directions, with the model of
//! [`crate::fault`] timed by a [`Clock`] (the system clock over real devices).

use crate::fault::{FaultConfig, FaultError, FaultStats, FaultyLink};
use crate::time::Instant;

use super::{Clock, Device, DeviceError};

/// Most frames taken from the inner device per `receive`, so that a flooded device cannot keep
/// one call busy forever.
const RECEIVE_BATCH: usize = 64;

/// A device whose received and transmitted frames pass through their own [`FaultyLink`].
///
/// Frames delayed by the model wait inside the injector: the event loop must call `receive`
/// and `flush` again at [`Device::next_wakeup`].
#[derive(Debug)]
pub struct FaultInjector<D, C> {
    inner: D,
    clock: C,
    rx: FaultyLink,
    tx: FaultyLink,
    /// A due frame the inner device had no room for; it goes first at the next chance.
    tx_stalled: Option<Vec<u8>>,
    /// The inner device reported closed; delayed frames are still delivered first.
    inner_closed: Option<DeviceError>,
}

impl<D: Device, C: Clock> FaultInjector<D, C> {
    /// Applies `receive` to frames coming from `inner` and `transmit` to frames going to it;
    /// the two directions draw from independent generators derived from `seed`.
    pub fn new(
        inner: D,
        clock: C,
        receive: FaultConfig,
        transmit: FaultConfig,
        seed: u64,
    ) -> Result<FaultInjector<D, C>, FaultError> {
        Ok(FaultInjector {
            inner,
            clock,
            rx: FaultyLink::new(receive, seed)?,
            tx: FaultyLink::new(transmit, !seed)?,
            tx_stalled: None,
            inner_closed: None,
        })
    }

    /// What the fault model did to received frames.
    pub fn receive_stats(&self) -> &FaultStats {
        self.rx.stats()
    }

    /// What the fault model did to transmitted frames.
    pub fn transmit_stats(&self) -> &FaultStats {
        self.tx.stats()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device; frames the model still holds are dropped.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn pull_from_inner(&mut self) -> Result<(), DeviceError> {
        if self.inner_closed.is_some() {
            return Ok(());
        }
        let now = self.clock.now();
        for _ in 0..RECEIVE_BATCH {
            let rx = &mut self.rx;
            match self.inner.receive(&mut |frame| {
                rx.send(now, frame.to_vec());
            }) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e @ DeviceError::Closed { .. }) => {
                    self.inner_closed = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn push_due(&mut self) -> Result<(), DeviceError> {
        let now = self.clock.now();
        loop {
            let Some(frame) = self.tx_stalled.take().or_else(|| self.tx.poll(now)) else {
                return Ok(());
            };
            if !self.inner.transmit(&frame)? {
                self.tx_stalled = Some(frame);
                return Ok(());
            }
        }
    }
}

impl<D: Device, C: Clock> Device for FaultInjector<D, C> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        self.pull_from_inner()?;
        if let Some(frame) = self.rx.poll(self.clock.now()) {
            consume(&frame);
            return Ok(true);
        }
        if self.rx.in_flight() == 0
            && let Some(closed) = self.inner_closed.take()
        {
            return Err(closed);
        }
        Ok(false)
    }

    /// Returns `Ok(false)` only while a due frame waits for room in the inner device.
    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        self.push_due()?;
        if self.tx_stalled.is_some() {
            return Ok(false);
        }
        super::check_frame_len("fault injector", &self.inner.capabilities(), frame)?;
        self.tx.send(self.clock.now(), frame.to_vec());
        self.push_due()?;
        Ok(true)
    }

    forward_to_inner!(capabilities, raw_fd);

    fn next_wakeup(&self) -> Option<Instant> {
        [
            self.rx.next_delivery(),
            self.tx.next_delivery(),
            self.inner.next_wakeup(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.push_due()?;
        self.inner.flush()
    }
}
