//! Interface ioctls (netdevice(7)) on an ordinary UDP socket, which is all they need.

use std::ffi::CString;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

pub(super) fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?} (1 to 15 bytes, no NUL)"),
        ));
    }
    Ok(())
}

/// An `ifreq` naming `name`, all else zero; `name` has passed [`check_name`].
pub(in crate::io) fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data (a name array and a union of integers, sockaddrs and a
    // pointer); all zeroes is a valid value of each.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

fn ioctl(request: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    let socket = UdpSocket::bind("0.0.0.0:0")?;
    // SAFETY: every request passed here (SIOC[GS]IF{FLAGS,MTU,HWADDR}) reads and writes at
    // most one `struct ifreq`, and `req` is a valid, exclusively borrowed one.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), request, req as *mut libc::ifreq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn index(name: &str) -> io::Result<u32> {
    let c_name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c_name is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

pub(super) fn mtu(name: &str) -> io::Result<usize> {
    let mut req = ifreq(name);
    ioctl(libc::SIOCGIFMTU as libc::Ioctl, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

pub(super) fn set_mtu(name: &str, mtu: i32) -> io::Result<()> {
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_mtu = mtu;
    ioctl(libc::SIOCSIFMTU as libc::Ioctl, &mut req)
}

pub(super) fn mac(name: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq(name);
    ioctl(libc::SIOCGIFHWADDR as libc::Ioctl, &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member of the union.
    let hwaddr = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, &src) in mac.iter_mut().zip(hwaddr.sa_data.iter()) {
        *dst = src as u8;
    }
    Ok(mac)
}

pub(super) fn set_up(name: &str) -> io::Result<()> {
    let mut req = ifreq(name);
    ioctl(libc::SIOCGIFFLAGS as libc::Ioctl, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the ifru_flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ioctl(libc::SIOCSIFFLAGS as libc::Ioctl, &mut req)
}
