//! The options every command that runs an endpoint shares: the device, the addresses, a
//! capture of what went over it, the timeout; and opening the runtime from them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use roce::cc::Preset;
use roce::endpoint::dcqcn::DcqcnHook;
use roce::endpoint::{Backend, DEFAULT_SPIN, Host, HostConfig, IpCidr, Runtime, RuntimeConfig};
use roce::io::SystemClock;
use roce::io::pause::PauseHonouring;
use roce::io::vlan::{TagPolicy, VlanTagging};
use roce::wire::Ecn;
use roce::wire::encap::VlanTag;

/// The options of a command whose peer is found through an out-of-band TCP exchange.
#[derive(Debug, Args)]
pub struct EndpointArgs {
    /// The server to connect to (TCP, the out-of-band exchange); without it, be the server.
    pub server: Option<String>,
    /// TCP port of the exchange (default 18515).
    #[arg(short = 'p', long)]
    pub port: Option<u16>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

impl std::ops::Deref for EndpointArgs {
    type Target = DeviceArgs;
    fn deref(&self) -> &DeviceArgs {
        &self.device
    }
}

/// The options of every command that runs an endpoint: its device, addresses, capture,
/// timeout and counters.
#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// The device: tap:NAME (created if absent), xdp:IFNAME (an existing interface) or
    /// pcap:IN.pcap (frames read from a capture).
    #[arg(long = "iface", value_name = "BACKEND")]
    pub iface: Backend,
    /// The endpoint's address and subnet; repeat for IPv4 and IPv6. GIDs follow rxe's
    /// table: 0 the link-local IPv6 GID, 1 the IPv4-mapped one, then global IPv6 ones.
    /// On xdp: the interface's own IPv4 address (the kernel keeps ARP there, and the
    /// endpoint takes the peer's MAC from the kernel's table).
    #[arg(long = "ip", value_name = "ADDR/PREFIX", required = true)]
    pub ip: Vec<IpCidr>,
    /// The endpoint's MAC address (default: the AF_XDP interface's own; behind a TAP
    /// 02:00 followed by the IPv4 address).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub mac: Option<[u8; 6]>,
    /// Records every frame the endpoint sends and receives.
    #[arg(long, value_name = "FILE")]
    pub pcap_out: Option<PathBuf>,
    /// Longest wait, in seconds, for the peer: connecting, each exchange, each completion.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Poll the device in a tight loop instead of sleeping (lowest latency, one busy core;
    /// an idle turn yields the core to whatever else is runnable).
    #[arg(long)]
    pub busy_poll: bool,
    /// After frames moved, keep polling this many microseconds (yielding the core between
    /// idle turns) before sleeping in epoll, as NAPI busy polling does: while traffic flows
    /// the endpoint does not pay a sleep and a wake-up per burst; an idle endpoint sleeps.
    /// 0 sleeps as soon as nothing is left to do. Default 200; 0 for one message at a time
    /// (pingpong, perf --lat), where the wait is the peer's whole turnaround and a spinning
    /// process on a busy machine waits behind others instead of being woken first.
    #[arg(long, value_name = "USEC",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub spin: Option<u64>,
    /// At the end, print the endpoint's counters on stderr: frames, retransmissions, CNPs
    /// and every kind of dropped frame (bad ICRC, unknown QP, P_Key or Q_Key mismatch...).
    #[arg(long)]
    pub stats: bool,
    /// Run DCQCN (paper or mlx5 parameters, or off): data packets go out ECT(0), CE marks
    /// are answered with CNPs, CNPs slow the sending QP down. rdma_rxe neither sends nor
    /// heeds CNPs, so against it this only marks packets ECN-capable.
    #[arg(long, value_name = "PRESET", default_value = "off")]
    pub dcqcn: String,
    /// The line rate DCQCN starts each QP at and returns to, in Gb/s; also the link speed
    /// PFC and PAUSE quanta (512 bit times) are counted at.
    #[arg(long, value_name = "GBPS", default_value_t = 10.0)]
    pub line_gbps: f64,
    /// The IP traffic class byte of every RoCE frame, as perftest's --tclass: DSCP in the
    /// upper six bits (--tclass 106 is DSCP 26, the usual RoCE class), ECN in the lower two
    /// (when not 0 they replace Not-ECT, or DCQCN's ECT(0)).
    #[arg(long, value_name = "T")]
    pub tclass: Option<u8>,
    /// Send every frame with an 802.1Q tag of this VLAN ID (received frames of the VLAN lose
    /// it; other VLANs' frames are dropped).
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u16).range(0..=4094))]
    pub vlan: Option<u16>,
    /// The 802.1Q priority (PCP) of the tag: the PFC class the traffic rides. Without --vlan,
    /// a priority tag (VLAN ID 0). Over tap: and xdp:, PFC frames pausing this priority (and
    /// 802.3x PAUSE) stop the endpoint sending for the quanta given, at --line-gbps; XON
    /// resumes it.
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub pcp: Option<u8>,
    /// The DSCP of the CNPs this endpoint sends (with --dcqcn, for CE-marked traffic it
    /// receives). Default: the data's (--tclass), so that a CNP rides the class of the traffic
    /// it answers. NVIDIA mlx5 NICs send CNPs with DSCP 48 (their cnp_dscp): --cnp-dscp 48
    /// matches them, putting CNPs on a class of their own ahead of the congested data.
    #[arg(long, value_name = "D", value_parser = clap::value_parser!(u8).range(0..=63))]
    pub cnp_dscp: Option<u8>,
    /// The 802.1Q priority (PCP) of the CNPs this endpoint sends, in the --vlan VLAN. Default:
    /// the data's (--pcp, or no tag). Without --vlan and --pcp only CNPs are tagged, with a
    /// priority tag (VLAN ID 0), the rule --pcp follows; data stay untagged. NVIDIA mlx5 NICs
    /// send CNPs at priority 6 (their cnp_802p_prio): --cnp-pcp 6 matches them.
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub cnp_pcp: Option<u8>,
}

impl DeviceArgs {
    /// With `--stats`, the counters of `rt`'s host and engine as one line on stderr.
    pub fn print_stats(&self, rt: &Runtime) {
        if self.stats {
            eprintln!("{}", stats_line(rt.host()));
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }

    /// Opens the device and puts a host on it, spinning [`DEFAULT_SPIN`] after traffic
    /// unless --spin says otherwise.
    pub fn open(&self) -> anyhow::Result<Runtime> {
        self.open_spinning(DEFAULT_SPIN)
    }

    /// Opens the device and puts a host on it, spinning `default_spin` after traffic unless
    /// --spin says otherwise.
    pub fn open_spinning(&self, default_spin: Duration) -> anyhow::Result<Runtime> {
        open_runtime(&OpenEndpoint {
            iface: &self.iface,
            ip: &self.ip,
            mac: self.mac,
            pcap_out: self.pcap_out.as_deref(),
            busy_poll: self.busy_poll,
            spin: self.spin.map_or(default_spin, Duration::from_micros),
            dcqcn: &self.dcqcn,
            line_gbps: self.line_gbps,
            tclass: self.tclass,
            cnp_dscp: self.cnp_dscp,
            vlan: self.tag_policy(),
        })
    }

    /// The 802.1Q tags `--vlan`, `--pcp` and `--cnp-pcp` ask for: none without any of them.
    pub fn tag_policy(&self) -> TagPolicy {
        TagPolicy {
            tag: (self.vlan.is_some() || self.pcp.is_some()).then(|| VlanTag {
                pcp: self.pcp.unwrap_or(0),
                dei: false,
                vid: self.vlan.unwrap_or(0),
            }),
            cnp_pcp: self.cnp_pcp,
        }
    }
}

/// What opening an endpoint on a device takes (the options of [`EndpointArgs`] that are not
/// about an out-of-band exchange).
#[derive(Debug)]
pub struct OpenEndpoint<'a> {
    /// The device.
    pub iface: &'a Backend,
    /// The endpoint's addresses.
    pub ip: &'a [IpCidr],
    /// Its MAC, if chosen.
    pub mac: Option<[u8; 6]>,
    /// A capture of everything sent and received.
    pub pcap_out: Option<&'a std::path::Path>,
    /// Poll in a tight loop.
    pub busy_poll: bool,
    /// How long to keep polling after frames moved before sleeping.
    pub spin: Duration,
    /// DCQCN preset name, or `off`.
    pub dcqcn: &'a str,
    /// DCQCN's line rate, and the speed pause quanta are counted at.
    pub line_gbps: f64,
    /// The traffic class byte (DSCP and ECN) of RoCE frames.
    pub tclass: Option<u8>,
    /// The DSCP of CNPs, if not the data's.
    pub cnp_dscp: Option<u8>,
    /// The 802.1Q tags of the frames sent.
    pub vlan: TagPolicy,
}

/// Opens the device and puts a host on it.
pub fn open_runtime(o: &OpenEndpoint<'_>) -> anyhow::Result<Runtime> {
    if !(o.line_gbps > 0.0 && o.line_gbps <= 10_000.0) {
        anyhow::bail!(
            "--line-gbps must be above 0 and at most 10000, got {}",
            o.line_gbps
        );
    }
    let dcqcn =
        match o.dcqcn {
            "off" => None,
            name => Some(Preset::from_name(name).ok_or_else(|| {
                anyhow::anyhow!("--dcqcn must be paper, mlx5 or off, got {name:?}")
            })?),
        };
    let hook = dcqcn
        .map(|preset| DcqcnHook::new(preset.params(o.line_gbps * 1e9)))
        .transpose()
        .map_err(|e| anyhow::anyhow!("--line-gbps: {e}"))?;
    // The errors name the device and carry their cause in the message: flattened to one
    // line, so that `{:#}` does not repeat the cause.
    let mut device = o
        .iface
        .open(o.pcap_out)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if matches!(o.iface, Backend::Tap(_) | Backend::Xdp(_)) {
        // A real link's transmitter honours its partner's PAUSE and PFC frames; the tag (when
        // asked for) is put on before, so that the gate sees each frame's priority.
        device = Box::new(PauseHonouring::new(
            device,
            SystemClock::new(),
            (o.line_gbps * 1e9) as u64,
        ));
    }
    if !o.vlan.tags_nothing() {
        device = Box::new(VlanTagging::new(device, o.vlan));
    }
    let mac = o
        .mac
        .or(device.capabilities().mac)
        .unwrap_or_else(|| Backend::host_mac(first_ipv4(o.ip)));
    let mut host = HostConfig::new(mac, o.ip.to_vec());
    if hook.is_some() {
        host.ecn = Ecn::Ect0;
    }
    if let Some(tclass) = o.tclass {
        host.dscp = tclass >> 2;
        if tclass & 0b11 != 0 {
            host.ecn = Ecn::from_bits(tclass);
        }
    }
    host.cnp_dscp = o.cnp_dscp;
    let config = RuntimeConfig {
        busy_poll: o.busy_poll,
        spin: o.spin,
        kernel_neighbours: o.iface.kernel_neighbours().map(str::to_owned),
        coalesce_replies: false,
    };
    let mut rt = Runtime::new(device, host, config).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some((hook, _)) = hook {
        rt.host_mut().set_congestion_control(Box::new(hook));
    }
    Ok(rt)
}

/// The first IPv4 address among `ip`.
pub fn first_ipv4(ip: &[IpCidr]) -> Option<std::net::Ipv4Addr> {
    ip.iter().find_map(|c| match c.addr() {
        std::net::IpAddr::V4(v4) => Some(v4),
        std::net::IpAddr::V6(_) => None,
    })
}

/// Parses a unicast MAC address written as six hex bytes separated by colons.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{s:?} is not a MAC address like 02:00:0a:4d:00:02");
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let part = parts.next().ok_or_else(bad)?;
        *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() || mac[0] & 1 == 1 {
        return Err(bad());
    }
    Ok(mac)
}

/// `roce: stats: ...`: traffic, recovery and congestion counters, then the drops that
/// happened, by reason.
fn stats_line(host: &Host) -> String {
    let h = host.stats();
    let e = host.engine().stats();
    let d = &h.drops;
    let drops: Vec<String> = [
        ("not for us", d.not_for_us),
        ("not RoCE", d.not_roce),
        ("malformed", d.malformed),
        ("bad ICRC", d.bad_icrc),
        ("bad IPv4 header", d.bad_ip_header),
        ("unknown QP", d.unknown_qp),
        ("P_Key mismatch", d.pkey_mismatch),
        ("Q_Key mismatch", d.qkey_mismatch),
        ("refused by the transport", d.engine_other),
        ("next hop unresolved", d.unresolved),
        ("no route", d.no_route),
        ("ARP/ND answers refused", h.resolution_refused),
        ("duplicate READs/atomics unanswered", e.duplicates_dropped),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
    .map(|(why, n)| format!("{n} {why}"))
    .collect();
    let drops = if drops.is_empty() {
        "none".to_owned()
    } else {
        drops.join(", ")
    };
    let c = host.cm().stats();
    let cm = if c.mads_received + c.mads_sent == 0 {
        String::new()
    } else {
        format!(
            "; CM MADs received {}, sent {} ({} resent, {} duplicates answered, {} REJ sent, \
             {} REJ received, {} dropped)",
            c.mads_received,
            c.mads_sent,
            c.retransmitted,
            c.duplicates,
            c.rejects_sent,
            c.rejects_received,
            c.malformed + c.bad_version + c.unexpected + c.half_open_full,
        )
    };
    format!(
        "roce: stats: frames received {}, sent {}; RoCE received {}, sent {}; \
         retransmitted {}; CE marks {}, CNPs received {}, sent {}; dropped: {drops}{cm}",
        h.frames_received,
        h.frames_sent,
        h.roce_received,
        h.roce_sent,
        e.retransmitted_packets,
        h.ce_received,
        h.cnps_received,
        h.cnps_sent,
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        device: DeviceArgs,
    }

    fn device(flags: &[&str]) -> DeviceArgs {
        let base = ["roce", "--iface", "pcap:x.pcap", "--ip", "10.0.0.1/24"];
        Cli::try_parse_from(base.iter().chain(flags))
            .unwrap()
            .device
    }

    /// Which frames get which tag, for every mix of --vlan, --pcp and --cnp-pcp; --cnp-dscp
    /// reaches the host, and nothing changes without the CNP options.
    #[test]
    fn cnp_class_flags_reach_the_tag_policy() {
        let tag = |pcp, vid| {
            Some(VlanTag {
                pcp,
                dei: false,
                vid,
            })
        };
        let policy = |flags: &[&str]| device(flags).tag_policy();
        assert!(policy(&[]).tags_nothing());
        assert_eq!(policy(&["--vlan", "5", "--pcp", "3"]).tag, tag(3, 5));
        assert_eq!(policy(&["--vlan", "5", "--pcp", "3"]).cnp_pcp, None);
        let own = policy(&["--vlan", "5", "--pcp", "3", "--cnp-pcp", "6"]);
        assert_eq!((own.tag, own.cnp_pcp), (tag(3, 5), Some(6)));
        // --pcp alone is a priority tag on every frame; --cnp-pcp alone on CNPs only.
        assert_eq!(policy(&["--pcp", "3"]).tag, tag(3, 0));
        let cnps_only = policy(&["--cnp-pcp", "6"]);
        assert_eq!((cnps_only.tag, cnps_only.cnp_pcp), (None, Some(6)));
        assert!(!cnps_only.tags_nothing());
        assert_eq!(device(&[]).cnp_dscp, None);
        assert_eq!(device(&["--cnp-dscp", "48"]).cnp_dscp, Some(48));
    }
}
