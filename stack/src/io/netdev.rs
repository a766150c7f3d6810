//! The few properties of a Linux network interface the TAP and AF_XDP backends read or set:
//! index, MTU, MAC address, up/down.

use std::io;

#[allow(unsafe_code)]
mod sys;

pub(in crate::io) use sys::ifreq;

/// A network interface by name; every call goes to the kernel (names can be reused).
#[derive(Debug, Clone)]
pub struct Netdev {
    name: String,
}

impl Netdev {
    /// Fails with `InvalidInput` for a name the kernel cannot hold (empty, a NUL byte, or
    /// longer than 15 bytes).
    pub fn new(name: &str) -> io::Result<Netdev> {
        sys::check_name(name)?;
        Ok(Netdev {
            name: name.to_owned(),
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface index; `NotFound` (ENODEV) if there is no such interface.
    pub fn index(&self) -> io::Result<u32> {
        sys::index(&self.name)
    }

    /// The interface's MTU (SIOCGIFMTU).
    pub fn mtu(&self) -> io::Result<usize> {
        sys::mtu(&self.name)
    }

    /// Sets the interface's MTU (SIOCSIFMTU; needs CAP_NET_ADMIN).
    pub fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        let mtu = i32::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        sys::set_mtu(&self.name, mtu)
    }

    /// The interface's MAC address (SIOCGIFHWADDR).
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        sys::mac(&self.name)
    }

    /// Brings the interface up (IFF_UP), keeping its other flags.
    pub fn set_up(&self) -> io::Result<()> {
        sys::set_up(&self.name)
    }
}
