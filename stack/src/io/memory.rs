//! Two devices joined by an in-process link, each direction through its own [`FaultyLink`]: two
//! endpoints in one process (`roce demo`, integration tests) with seeded loss, delay and
//! congestion, on virtual or real time.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::fault::{FaultConfig, FaultError, FaultStats, FaultyLink};
use crate::time::Instant;

use super::{Capabilities, Clock, Device, DeviceError, check_frame_len};

/// How the two directions of a [`pair`] behave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryLinkConfig {
    /// The largest frame either end carries, without FCS.
    pub mtu: usize,
    /// Frames from device `a` to device `b`.
    pub a_to_b: FaultConfig,
    /// Frames from device `b` to device `a`.
    pub b_to_a: FaultConfig,
    /// Seeds direction a-to-b; b-to-a uses a seed derived from it, so the two directions make
    /// independent choices.
    pub seed: u64,
}

impl Default for MemoryLinkConfig {
    /// A perfect link with a 4200-byte MTU, room for a 4096-byte RoCE payload and its headers.
    fn default() -> Self {
        MemoryLinkConfig {
            mtu: 4200,
            a_to_b: FaultConfig::default(),
            b_to_a: FaultConfig::default(),
            seed: 0,
        }
    }
}

/// Locally administered unicast addresses for the two ends.
pub const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
/// See [`MAC_A`].
pub const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

#[derive(Debug)]
struct Shared {
    a_to_b: Mutex<FaultyLink>,
    b_to_a: Mutex<FaultyLink>,
}

/// One end of an in-memory link.
pub struct MemoryDevice {
    shared: Arc<Shared>,
    is_a: bool,
    clock: Arc<dyn Clock + Send + Sync>,
    caps: Capabilities,
}

impl std::fmt::Debug for MemoryDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDevice")
            .field("name", &self.name())
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// Creates the two ends `(a, b)` of a link timed by `clock`.
pub fn pair(
    config: MemoryLinkConfig,
    clock: impl Clock + Send + Sync + 'static,
) -> Result<(MemoryDevice, MemoryDevice), FaultError> {
    let shared = Arc::new(Shared {
        a_to_b: Mutex::new(FaultyLink::new(config.a_to_b, config.seed)?),
        b_to_a: Mutex::new(FaultyLink::new(
            config.b_to_a,
            config.seed ^ 0x5bd1_e995_5bd1_e995,
        )?),
    });
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(clock);
    let end = |is_a: bool, mac| MemoryDevice {
        shared: shared.clone(),
        is_a,
        clock: clock.clone(),
        caps: Capabilities {
            mtu: config.mtu,
            icrc_offload: false,
            mac: Some(mac),
        },
    };
    Ok((end(true, MAC_A), end(false, MAC_B)))
}

impl MemoryDevice {
    fn name(&self) -> &'static str {
        if self.is_a { "memory:a" } else { "memory:b" }
    }

    fn outgoing(&self) -> MutexGuard<'_, FaultyLink> {
        let link = if self.is_a {
            &self.shared.a_to_b
        } else {
            &self.shared.b_to_a
        };
        // A panic while holding the lock cannot leave a FaultyLink half-updated in a way that
        // matters to the other end, so a poisoned lock is still usable.
        link.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn incoming(&self) -> MutexGuard<'_, FaultyLink> {
        let link = if self.is_a {
            &self.shared.b_to_a
        } else {
            &self.shared.a_to_b
        };
        link.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn peer_gone(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    /// What the link did to the frames this end sent.
    pub fn sent_stats(&self) -> FaultStats {
        *self.outgoing().stats()
    }

    /// The faults applied to the frames this end sends.
    pub fn sent_faults(&self) -> FaultConfig {
        *self.outgoing().config()
    }

    /// Changes the faults applied to the frames this end sends from now on (see
    /// [`FaultyLink::set_config`]).
    pub fn set_sent_faults(&self, config: FaultConfig) -> Result<(), FaultError> {
        self.outgoing().set_config(config)
    }

    fn closed(&self) -> DeviceError {
        DeviceError::Closed {
            device: self.name().to_owned(),
        }
    }
}

impl Device for MemoryDevice {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        let now = self.clock.now();
        let frame = self.incoming().poll(now);
        match frame {
            Some(frame) => {
                consume(&frame);
                Ok(true)
            }
            None if self.peer_gone() && self.incoming().in_flight() == 0 => Err(self.closed()),
            None => Ok(false),
        }
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        check_frame_len(self.name(), &self.caps, frame)?;
        if self.peer_gone() {
            return Err(self.closed());
        }
        let now = self.clock.now();
        self.outgoing().send(now, frame.to_vec());
        Ok(true)
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.incoming().next_delivery()
    }
}
