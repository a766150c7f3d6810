//! TUNSETIFF on an open `/dev/net/tun` (Documentation/networking/tuntap.rst).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Attaches `tun` to TAP interface `name` without packet information headers, creating the
/// interface if absent. `name` has passed the netdev name check (fits IFNAMSIZ with its NUL).
pub(super) fn attach_tap(tun: &File, name: &str) -> io::Result<()> {
    let mut req = super::super::netdev::ifreq(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `req` is valid and exclusively
    // borrowed for the call, and `tun` is an open descriptor.
    let rc = unsafe {
        libc::ioctl(
            tun.as_raw_fd(),
            libc::TUNSETIFF,
            &mut req as *mut libc::ifreq,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
