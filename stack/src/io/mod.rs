//! Devices that move Ethernet frames: one small [`Device`] trait, its backends and middleware.
//!
//! Backends: [`memory`] (two endpoints in one process, optionally through the fault model),
//! [`pcap`] (frames read from a capture, sent frames written to one), [`tap`]
//! (`/dev/net/tun`) and [`xdp`] (AF_XDP on an existing interface). Middleware wraps any
//! device and is itself a device: [`FaultInjector`], [`PcapRecorder`], [`Tracer`].
//!
//! Every device is non-blocking: `receive` and `transmit` return at once, and an event loop
//! waits on [`Device::raw_fd`] (with mio) and wakes at [`Device::next_wakeup`] for frames that
//! a device holds back without its descriptor becoming ready (delayed by fault injection or a
//! virtual link).

use std::os::fd::RawFd;

use thiserror::Error;

use crate::fault::FaultError;
use crate::time::Instant;
use crate::wire::encap::{ETHERNET_HEADER_LEN, VLAN_TAG_LEN};

/// Writes the `Device` methods a middleware passes straight to its `inner` device.
macro_rules! forward_to_inner {
    ($($method:ident),*) => { $(forward_to_inner!(@ $method);)* };
    (@ capabilities) => {
        fn capabilities(&self) -> $crate::io::Capabilities {
            self.inner.capabilities()
        }
    };
    (@ raw_fd) => {
        fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
            self.inner.raw_fd()
        }
    };
    (@ next_wakeup) => {
        fn next_wakeup(&self) -> Option<$crate::time::Instant> {
            self.inner.next_wakeup()
        }
    };
}

mod clock;
mod fault;
pub mod memory;
pub mod netdev;
pub mod pause;
pub mod pcap;
pub mod pcapng;
mod recorder;
pub mod tap;
pub mod timer;
mod trace;
pub mod vlan;
pub mod xdp;

#[cfg(test)]
mod tests;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use fault::FaultInjector;
pub use recorder::PcapRecorder;
pub use trace::{FrameSummary, Tracer};

/// What a device can do; the endpoint sizes its path MTU and buffers from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The largest IP packet the device carries (the Linux interface MTU).
    pub mtu: usize,
    /// Whether the device computes and checks the ICRC itself. No backend here does: RoCEv2
    /// offload exists only in RDMA NICs, which do not expose raw frames.
    pub icrc_offload: bool,
    /// The MAC address the endpoint should send from, where the device has its own (an AF_XDP
    /// interface). `None` where the endpoint is a host of its own behind the device and must
    /// choose one: a TAP's address belongs to the kernel's side of the link.
    pub mac: Option<[u8; 6]>,
}

impl Capabilities {
    /// The largest Ethernet frame (without FCS), allowing one 802.1Q tag.
    pub fn max_frame_len(&self) -> usize {
        self.mtu + ETHERNET_HEADER_LEN + VLAN_TAG_LEN
    }
}

/// Why a device operation failed.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// The operating system refused an operation.
    #[error("{device}: {operation}: {source}")]
    Os {
        /// The device's name.
        device: String,
        /// What was attempted (a system call or step).
        operation: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// EPERM or EACCES: the process lacks the privilege.
    #[error("{device}: {operation}: permission denied (needs root, or CAP_NET_ADMIN and CAP_BPF)")]
    PermissionDenied {
        /// The device's name.
        device: String,
        /// What was attempted.
        operation: &'static str,
    },
    /// ENODEV: there is no interface of that name.
    #[error("{device}: no such network interface")]
    NoSuchInterface {
        /// The name asked for.
        device: String,
    },
    /// A frame longer than the device's MTU plus the Ethernet header.
    #[error("{device}: a frame of {len} bytes exceeds the largest the device carries ({max})")]
    FrameTooLarge {
        /// The device's name.
        device: String,
        /// The frame's length.
        len: usize,
        /// The longest frame the device carries.
        max: usize,
    },
    /// A received frame longer than the caller's buffer.
    #[error("{device}: a {len}-byte frame does not fit the {capacity}-byte buffer")]
    BufferTooSmall {
        /// The device's name.
        device: String,
        /// The frame's length.
        len: usize,
        /// The buffer's length.
        capacity: usize,
    },
    /// The capture is exhausted, or the other end of an in-memory link is gone.
    #[error("{device}: closed")]
    Closed {
        /// The device's name.
        device: String,
    },
    /// A capture to read or write is broken.
    #[error("{device}: {reason}")]
    Capture {
        /// The device's name.
        device: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The fault model's configuration is invalid.
    #[error(transparent)]
    Fault(#[from] FaultError),
}

impl DeviceError {
    /// Classifies an OS error, so that missing privileges and interfaces say so plainly.
    pub fn os(device: &str, operation: &'static str, source: std::io::Error) -> DeviceError {
        let device = device.to_owned();
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => DeviceError::PermissionDenied { device, operation },
            Some(libc::ENODEV) => DeviceError::NoSuchInterface { device },
            _ => DeviceError::Os {
                device,
                operation,
                source,
            },
        }
    }
}

/// A source and sink of Ethernet frames (without FCS).
pub trait Device {
    /// Hands the next received frame to `consume`, borrowed for the duration of the call (so a
    /// backend can lend its own buffer: AF_XDP lends the UMEM chunk). Returns `Ok(false)` when
    /// no frame is waiting.
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError>;

    /// Queues `frame` for transmission. Returns `Ok(false)` when the device has no room now;
    /// retry once its descriptor is writable or after [`flush`](Self::flush).
    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError>;

    /// Builds a frame and queues it, into the device's own transmit buffer where it can lend
    /// one (AF_XDP lends UMEM: the frame is written where the kernel reads it, one copy
    /// fewer than building it elsewhere and calling [`transmit`](Self::transmit)), else into
    /// `scratch`. `build` writes a frame at the start of the buffer it is given, which is
    /// `scratch.len()` bytes long and holds anything (every byte of the frame must be
    /// written), and returns its length, or `None` for no frame. The result says which:
    /// [`Built::Held`] when the device has no room now, the frame then in `scratch`, for
    /// `transmit` once there is.
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        transmit_from(self, scratch, build)
    }

    /// What the device can do: its MTU, ICRC offload, its own MAC address.
    fn capabilities(&self) -> Capabilities;

    /// The descriptor to register with mio, where the device has one.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }

    /// When the device next needs a `receive` or `flush` call although its descriptor may not
    /// become ready: a frame held back by a virtual link or fault injection falls due.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    /// Pushes frames queued by `transmit` to the wire (AF_XDP sends a batch per kick) and any
    /// held-back frames that fell due. Call it after each burst of `transmit`s.
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Copies the next received frame into `buf`; `Ok(None)` when none is waiting. A frame
    /// longer than `buf` is consumed and reported as [`DeviceError::BufferTooSmall`].
    fn receive_into(&mut self, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let mut outcome = Ok(None);
        self.receive(&mut |frame: &[u8]| {
            outcome = match buf.get_mut(..frame.len()) {
                Some(dst) => {
                    dst.copy_from_slice(frame);
                    Ok(Some(frame.len()))
                }
                None => Err((frame.len(), buf.len())),
            };
        })?;
        outcome.map_err(|(len, capacity)| DeviceError::BufferTooSmall {
            device: "receive_into".to_owned(),
            len,
            capacity,
        })
    }
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        (**self).receive(consume)
    }
    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        (**self).transmit(frame)
    }
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        (**self).transmit_built(scratch, build)
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        (**self).raw_fd()
    }
    fn next_wakeup(&self) -> Option<Instant> {
        (**self).next_wakeup()
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        (**self).flush()
    }
}

/// What [`Device::transmit_built`] did with the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    /// Queued for transmission.
    Sent,
    /// `build` had no frame.
    Nothing,
    /// The device had no room: the frame of this length is in `scratch`, not sent.
    Held(usize),
}

/// [`Device::transmit_built`] for a device that lends nothing: builds into `scratch`, then
/// [`Device::transmit`]s it.
pub(crate) fn transmit_from<D: Device + ?Sized>(
    device: &mut D,
    scratch: &mut [u8],
    build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
) -> Result<Built, DeviceError> {
    let Some(len) = build(scratch) else {
        return Ok(Built::Nothing);
    };
    let frame = scratch
        .get(..len)
        .ok_or_else(|| DeviceError::BufferTooSmall {
            device: "transmit_built".to_owned(),
            len,
            capacity: scratch.len(),
        })?;
    Ok(if device.transmit(frame)? {
        Built::Sent
    } else {
        Built::Held(len)
    })
}

/// Fails with [`DeviceError::FrameTooLarge`] if `frame` exceeds what `caps` allows.
pub(crate) fn check_frame_len(
    device: &str,
    caps: &Capabilities,
    frame: &[u8],
) -> Result<(), DeviceError> {
    let max = caps.max_frame_len();
    if frame.len() > max {
        return Err(DeviceError::FrameTooLarge {
            device: device.to_owned(),
            len: frame.len(),
            max,
        });
    }
    Ok(())
}
