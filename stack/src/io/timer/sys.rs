//! timerfd(2) through libc.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

pub(super) fn create() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create takes no pointers; a non-negative result is a new descriptor
    // that nothing else owns.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by timerfd_create and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `fd` to expire once, `after` from now (a zero `after` disarms it).
pub(super) fn set(fd: &OwnedFd, after: Duration) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(after.as_secs()).unwrap_or(libc::time_t::MAX),
            // Below 10^9: fits a c_long of any width.
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec that outlives the call; the old value is not
    // asked for (null).
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the number of expirations since the last read (EAGAIN if none).
pub(super) fn read_expirations(fd: &OwnedFd) -> io::Result<u64> {
    let mut count = [0u8; 8];
    // SAFETY: `count` is 8 writable bytes, what a timerfd read writes.
    let n = unsafe { libc::read(fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(count))
}

/// Whether poll(2) finds one of `fds` readable within `timeout_ms`.
#[cfg(test)]
pub(super) fn poll_readable(fds: &mut [libc::pollfd], timeout_ms: i32) -> bool {
    // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of the length given.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    n > 0
}
