//! Opening a device from the command line's `--iface BACKEND`: `tap:NAME`, `xdp:IFNAME` or
//! `pcap:IN.pcap`, optionally recording everything to `--pcap-out FILE`.

use core::fmt;
use core::str::FromStr;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::io::tap::TapDevice;
use crate::io::xdp::{XdpConfig, XdpDevice};
use crate::io::{Device, DeviceError, PcapRecorder, SystemClock, pcap};

/// Where frames come from and go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A TAP interface, created if absent: the endpoint is a host behind it.
    Tap(String),
    /// AF_XDP on an existing interface: the endpoint uses the interface's MAC.
    Xdp(String),
    /// Frames read from a capture; sent frames are discarded (or recorded).
    Pcap(PathBuf),
}

/// A `--backend` argument that names no backend (the text as given).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0:?} is not a backend: use tap:NAME, xdp:IFNAME or pcap:FILE")]
pub struct BackendSyntax(String);

impl FromStr for Backend {
    type Err = BackendSyntax;
    fn from_str(s: &str) -> Result<Backend, BackendSyntax> {
        let bad = || BackendSyntax(s.to_owned());
        let (kind, name) = s.split_once(':').ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        match kind {
            "tap" => Ok(Backend::Tap(name.to_owned())),
            "xdp" => Ok(Backend::Xdp(name.to_owned())),
            "pcap" => Ok(Backend::Pcap(PathBuf::from(name))),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Tap(n) => write!(f, "tap:{n}"),
            Backend::Xdp(n) => write!(f, "xdp:{n}"),
            Backend::Pcap(p) => write!(f, "pcap:{}", p.display()),
        }
    }
}

impl Backend {
    /// The interface whose kernel neighbour table the endpoint uses (AF_XDP; see
    /// [`kernel_neighbour`]).
    pub fn kernel_neighbours(&self) -> Option<&str> {
        match self {
            Backend::Xdp(name) => Some(name),
            Backend::Tap(_) | Backend::Pcap(_) => None,
        }
    }

    /// Opens the device; with `pcap_out` every frame sent and received is recorded there.
    pub fn open(&self, pcap_out: Option<&Path>) -> Result<Box<dyn Device>, DeviceError> {
        let device: Box<dyn Device> = match self {
            Backend::Tap(name) => Box::new(TapDevice::open(name, None)?),
            Backend::Xdp(name) => Box::new(XdpDevice::open(name, XdpConfig::default())?),
            Backend::Pcap(path) => Box::new(pcap::PcapDevice::open(path)?),
        };
        match pcap_out {
            Some(out) => {
                let writer = pcap::create(out)?;
                Ok(Box::new(PcapRecorder::new(
                    device,
                    writer,
                    SystemClock::new(),
                )))
            }
            None => Ok(device),
        }
    }

    /// A MAC for a host behind a TAP or reading a capture, where the device has none of its
    /// own: locally administered (bit 1 of the first byte), unicast, from the IPv4 address
    /// if there is one so that reruns keep it: `02:00:a:b:c:d`.
    pub fn host_mac(ipv4: Option<std::net::Ipv4Addr>) -> [u8; 6] {
        let o = ipv4.map_or([0, 0, 0, 1], |a| a.octets());
        [0x02, 0x00, o[0], o[1], o[2], o[3]]
    }
}

/// The MAC the kernel resolved for `addr` on interface `ifname`, from `/proc/net/arp`
/// (complete entries only).
///
/// On AF_XDP the kernel keeps the interface: its XDP program steers only RoCEv2 to the
/// endpoint, so ARP stays with the kernel, and the endpoint, which shares the interface's
/// address and MAC, takes its neighbours from the kernel's table. The out-of-band TCP
/// connection to the same peer address fills it.
pub fn kernel_neighbour(ifname: &str, addr: std::net::Ipv4Addr) -> Option<[u8; 6]> {
    let table = std::fs::read_to_string("/proc/net/arp").ok()?;
    parse_proc_arp(&table, ifname, addr)
}

/// One line per entry: `IP address  HW type  Flags  HW address  Mask  Device`; flag 0x2
/// (ATF_COM) marks a resolved entry.
fn parse_proc_arp(table: &str, ifname: &str, addr: std::net::Ipv4Addr) -> Option<[u8; 6]> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [ip, _, flags, hw, _, dev] = f.as_slice() else {
            return None;
        };
        let complete = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()? & 2 != 0;
        if *dev != ifname || ip.parse::<std::net::Ipv4Addr>().ok()? != addr || !complete {
            return None;
        }
        let mut mac = [0u8; 6];
        let mut parts = hw.split(':');
        for byte in &mut mac {
            *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        Some(mac)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_backends() {
        assert_eq!("tap:roce0".parse(), Ok(Backend::Tap("roce0".into())));
        assert_eq!("xdp:veth1".parse(), Ok(Backend::Xdp("veth1".into())));
        assert_eq!(
            "pcap:/tmp/a:b.pcap".parse(),
            Ok(Backend::Pcap("/tmp/a:b.pcap".into()))
        );
        for bad in ["roce0", "tap:", "eth:x", ""] {
            assert!(bad.parse::<Backend>().is_err(), "{bad}");
        }
        assert_eq!(Backend::Tap("x".into()).to_string(), "tap:x");
    }

    #[test]
    fn reads_the_kernel_arp_table() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device
10.88.0.2        0x1         0x2         a2:9e:01:02:03:04     *        va
10.88.0.3        0x1         0x0         00:00:00:00:00:00     *        va
10.88.0.2        0x1         0x2         a2:9e:01:02:03:05     *        vb
";
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(
            parse_proc_arp(table, "va", ip("10.88.0.2")),
            Some([0xa2, 0x9e, 1, 2, 3, 4])
        );
        assert_eq!(
            parse_proc_arp(table, "va", ip("10.88.0.3")),
            None,
            "incomplete"
        );
        assert_eq!(parse_proc_arp(table, "vc", ip("10.88.0.2")), None);
    }

    #[test]
    fn a_missing_capture_is_an_error() {
        let err = Backend::Pcap("/nonexistent/in.pcap".into())
            .open(None)
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/in.pcap"), "{err}");
        assert_eq!(
            Backend::host_mac(Some([10, 77, 0, 2].into())),
            [2, 0, 10, 77, 0, 2]
        );
    }
}
