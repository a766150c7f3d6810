//! A TAP interface (`/dev/net/tun` with IFF_TAP | IFF_NO_PI): the endpoint is a host of its
//! own on the far side of a virtual Ethernet link whose near side is the kernel's interface.
//! This is how the lab connects us to rdma_rxe guests (a TAP on a bridge).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use super::netdev::Netdev;
use super::{Capabilities, Device, DeviceError, check_frame_len};

#[allow(unsafe_code)]
mod sys;

/// Reads return at most one frame; TAP without IFF_VNET_HDR never hands over more than the
/// interface MTU plus the Ethernet header, and 64 KiB covers any MTU Linux allows here.
const READ_BUFFER: usize = 1 << 16;

/// A TAP interface (`/dev/net/tun`, IFF_TAP): Ethernet frames to and from the kernel.
#[derive(Debug)]
pub struct TapDevice {
    file: File,
    netdev: Netdev,
    mtu: usize,
    buf: Vec<u8>,
}

impl TapDevice {
    /// Attaches to TAP `name`, creating it if absent (it then disappears when the device is
    /// dropped), brings it up and, if `mtu` is given, sets its MTU. Non-blocking.
    pub fn open(name: &str, mtu: Option<usize>) -> Result<TapDevice, DeviceError> {
        let device = format!("tap:{name}");
        let netdev = Netdev::new(name).map_err(|e| DeviceError::os(&device, "name", e))?;
        let file = File::options()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| DeviceError::os(&device, "open /dev/net/tun", e))?;
        sys::attach_tap(&file, name).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => DeviceError::Os {
                device: device.clone(),
                operation: "TUNSETIFF (is it a TUN rather than a TAP interface?)",
                source: e,
            },
            Some(libc::EBUSY) => DeviceError::Os {
                device: device.clone(),
                operation: "TUNSETIFF (another process has it open)",
                source: e,
            },
            _ => DeviceError::os(&device, "TUNSETIFF", e),
        })?;
        if let Some(mtu) = mtu {
            netdev
                .set_mtu(mtu)
                .map_err(|e| DeviceError::os(&device, "set MTU", e))?;
        }
        netdev
            .set_up()
            .map_err(|e| DeviceError::os(&device, "bring up", e))?;
        let mtu = netdev
            .mtu()
            .map_err(|e| DeviceError::os(&device, "read MTU", e))?;
        Ok(TapDevice {
            file,
            netdev,
            mtu,
            buf: vec![0; READ_BUFFER],
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        self.netdev.name()
    }

    /// The kernel side's MAC address (the endpoint must use another one).
    pub fn kernel_mac(&self) -> Result<[u8; 6], DeviceError> {
        self.netdev
            .mac()
            .map_err(|e| DeviceError::os(self.netdev.name(), "read MAC", e))
    }

    fn error(&self, operation: &'static str, e: std::io::Error) -> DeviceError {
        DeviceError::os(&format!("tap:{}", self.netdev.name()), operation, e)
    }
}

impl Device for TapDevice {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        loop {
            match self.file.read(&mut self.buf) {
                Ok(n) => {
                    consume(&self.buf[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.error("read", e)),
            }
        }
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        check_frame_len(self.netdev.name(), &self.capabilities(), frame)?;
        loop {
            // A TAP write is one frame, whole or not at all.
            match self.file.write(frame) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.error("write", e)),
            }
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            mtu: self.mtu,
            icrc_offload: false,
            mac: None,
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }
}
