//! Tests of the backends and middleware that need no privileges: in-memory links, captures,
//! fault injection, recording and tracing, all on virtual time.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::memory::{MAC_A, MemoryLinkConfig, pair};
use super::pcap::{PcapDevice, PcapWriter};
use super::*;
use crate::fault::{Delay, FaultConfig};
use crate::time::{Duration, Instant};
use crate::wire::sample;

/// An IPv4 RC SEND ONLY frame with `payload` bytes, ECT(0).
fn roce_v4(payload: usize) -> Vec<u8> {
    let a = "10.0.0.1".parse().unwrap();
    sample::rc_send_only(a, "10.0.0.2".parse().unwrap(), payload).unwrap()
}

/// A frame whose bytes after the Ethernet header say `tag`, so order can be checked.
fn tagged(tag: u8, len: usize) -> Vec<u8> {
    let mut f = vec![tag; len];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn drain(dev: &mut impl Device) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while dev.receive(&mut |f| out.push(f.to_vec())).unwrap() {}
    out
}

/// A file name unique to this test process, removed when dropped.
struct TempFile(PathBuf);
impl TempFile {
    fn new(name: &str) -> TempFile {
        let dir = std::env::temp_dir();
        TempFile(dir.join(format!("roce-io-{}-{name}", std::process::id())))
    }
}
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn memory_link_carries_frames_both_ways_in_order() {
    let clock = VirtualClock::new(Instant::ZERO);
    let (mut a, mut b) = pair(MemoryLinkConfig::default(), clock).unwrap();
    for tag in 0..10 {
        assert!(a.transmit(&tagged(tag, 64)).unwrap());
    }
    assert!(b.transmit(&tagged(99, 100)).unwrap());
    let got = drain(&mut b);
    assert_eq!(got, (0..10).map(|t| tagged(t, 64)).collect::<Vec<_>>());
    assert_eq!(drain(&mut a), vec![tagged(99, 100)]);
    assert_eq!(a.capabilities().mac, Some(MAC_A));
    assert_eq!(a.sent_stats().delivered, 10);
}

#[test]
fn memory_link_holds_delayed_frames_until_their_time() {
    let clock = VirtualClock::new(Instant::from_nanos(1_000));
    let mut config = MemoryLinkConfig::default();
    config.a_to_b.delay = Delay {
        base: Duration::from_nanos(5_000),
        jitter: Duration::from_nanos(0),
    };
    let (mut a, mut b) = pair(config, clock.clone()).unwrap();
    a.transmit(&tagged(1, 60)).unwrap();
    assert_eq!(b.next_wakeup(), Some(Instant::from_nanos(6_000)));
    assert!(drain(&mut b).is_empty());
    clock.advance_to(Instant::from_nanos(5_999));
    assert!(drain(&mut b).is_empty());
    clock.advance_to(Instant::from_nanos(6_000));
    assert_eq!(drain(&mut b).len(), 1);
    assert_eq!(b.next_wakeup(), None);
}

#[test]
fn memory_link_refuses_oversized_frames_and_reports_a_closed_peer() {
    let config = MemoryLinkConfig {
        mtu: 1500,
        ..MemoryLinkConfig::default()
    };
    let (mut a, b) = pair(config, VirtualClock::new(Instant::ZERO)).unwrap();
    assert!(a.transmit(&tagged(0, 1518)).unwrap());
    let err = a.transmit(&tagged(0, 1519)).unwrap_err();
    assert!(
        matches!(
            err,
            DeviceError::FrameTooLarge {
                len: 1519,
                max: 1518,
                ..
            }
        ),
        "{err}"
    );
    let (mut c, mut d) = pair(config, VirtualClock::new(Instant::ZERO)).unwrap();
    c.transmit(&tagged(3, 60)).unwrap();
    drop(c);
    assert!(
        d.receive(&mut |_| {}).unwrap(),
        "frames in flight outlive the sender"
    );
    assert!(matches!(
        d.receive(&mut |_| {}),
        Err(DeviceError::Closed { .. })
    ));
    drop(b);
    assert!(matches!(
        a.transmit(&tagged(0, 60)),
        Err(DeviceError::Closed { .. })
    ));
}

#[test]
fn memory_link_applies_the_fault_model_reproducibly() {
    let run = |seed| {
        let mut config = MemoryLinkConfig {
            seed,
            ..MemoryLinkConfig::default()
        };
        config.a_to_b.loss = 0.3;
        let (mut a, mut b) = pair(config, VirtualClock::new(Instant::ZERO)).unwrap();
        for tag in 0..200 {
            a.transmit(&tagged(tag, 64)).unwrap();
        }
        (drain(&mut b), a.sent_stats())
    };
    let (first, stats) = run(11);
    assert_eq!(first.len() as u64, 200 - stats.dropped);
    assert!((30..90).contains(&stats.dropped), "{stats:?}");
    assert_eq!(run(11).0, first);
    assert_ne!(run(12).0, first);
}

#[test]
fn pcap_written_frames_read_back_identically() {
    let file = TempFile::new("roundtrip.pcap");
    let frames: Vec<Vec<u8>> = (0..5).map(|i| roce_v4(i * 100)).collect();
    let mut writer = pcap::create(&file.0).unwrap();
    for (i, f) in frames.iter().enumerate() {
        writer
            .write_frame(Instant::from_nanos(1_700_000_000_123_456_789 + i as u64), f)
            .unwrap();
    }
    writer.flush().unwrap();
    let mut dev = PcapDevice::open(&file.0).unwrap();
    let mut got = Vec::new();
    loop {
        match dev.receive(&mut |f| got.push(f.to_vec())) {
            Ok(true) => {}
            Ok(false) => panic!("a capture never has to wait"),
            Err(DeviceError::Closed { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got, frames);
    assert_eq!(dev.frames(), 5);
}

#[test]
fn pcap_device_writes_what_it_transmits() {
    let (input, output) = (TempFile::new("in.pcap"), TempFile::new("out.pcap"));
    pcap::create(&input.0).unwrap().flush().unwrap();
    let mut dev = PcapDevice::open(&input.0)
        .unwrap()
        .with_output(&output.0)
        .unwrap();
    assert!(matches!(
        dev.receive(&mut |_| {}),
        Err(DeviceError::Closed { .. })
    ));
    dev.transmit(&tagged(7, 80)).unwrap();
    dev.transmit(&tagged(8, 90)).unwrap();
    drop(dev);
    let mut back = PcapDevice::open(&output.0).unwrap();
    let mut got = Vec::new();
    while let Ok(true) = back.receive(&mut |f| got.push(f.to_vec())) {}
    assert_eq!(got, vec![tagged(7, 80), tagged(8, 90)]);
}

/// A pcapng file: section header, one interface of `linktype`, one enhanced packet block.
fn pcapng(linktype: u16, frame: &[u8]) -> Vec<u8> {
    let block = |kind: u32, body: &[u8]| {
        let len = (12 + body.len().div_ceil(4) * 4) as u32;
        let mut b = kind.to_le_bytes().to_vec();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(body);
        b.resize(len as usize - 4, 0);
        b.extend_from_slice(&len.to_le_bytes());
        b
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    let mut idb = linktype.to_le_bytes().to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&65535u32.to_le_bytes());
    let mut epb = vec![0u8; 12];
    epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    epb.extend_from_slice(frame);
    let mut out = block(0x0a0d_0d0a, &shb);
    out.extend(block(1, &idb));
    out.extend(block(6, &epb));
    out
}

#[test]
fn pcapng_is_read_and_bad_captures_are_clear_errors() {
    let file = TempFile::new("one.pcapng");
    let frame = roce_v4(33);
    std::fs::write(&file.0, pcapng(1, &frame)).unwrap();
    let mut dev = PcapDevice::open(&file.0).unwrap();
    let mut got = Vec::new();
    assert!(dev.receive(&mut |f| got.push(f.to_vec())).unwrap());
    assert_eq!(got, vec![frame.clone()]);
    assert!(matches!(
        dev.receive(&mut |_| {}),
        Err(DeviceError::Closed { .. })
    ));

    std::fs::write(&file.0, pcapng(113, &frame)).unwrap(); // Linux cooked capture
    let err = PcapDevice::open(&file.0)
        .unwrap()
        .receive(&mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("link type 113"), "{err}");

    let mut truncated = Vec::new();
    let mut writer = PcapWriter::new(&mut truncated).unwrap();
    writer.write_frame(Instant::ZERO, &frame).unwrap();
    truncated.truncate(truncated.len() - 10);
    std::fs::write(&file.0, &truncated).unwrap();
    let err = PcapDevice::open(&file.0)
        .unwrap()
        .receive(&mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("ends inside a record"), "{err}");

    std::fs::write(&file.0, b"").unwrap();
    let err = PcapDevice::open(&file.0).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    std::fs::write(&file.0, b"this is not a capture at all, not even close").unwrap();
    assert!(PcapDevice::open(&file.0).is_err());
    let missing = PcapDevice::open(std::path::Path::new("/nonexistent/x.pcap")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/x.pcap"),
        "{missing}"
    );
}

#[test]
fn fault_injector_delays_and_drops_in_both_directions() {
    let clock = VirtualClock::new(Instant::ZERO);
    let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
    let slow = FaultConfig {
        delay: Delay {
            base: Duration::from_nanos(10_000),
            jitter: Duration::from_nanos(0),
        },
        ..FaultConfig::default()
    };
    let lossy = FaultConfig {
        loss: 0.5,
        ..FaultConfig::default()
    };
    let mut a = FaultInjector::new(a, clock.clone(), lossy, slow, 1).unwrap();
    a.transmit(&tagged(1, 64)).unwrap();
    assert!(drain(&mut b).is_empty(), "held for 10 us");
    assert_eq!(a.next_wakeup(), Some(Instant::from_nanos(10_000)));
    clock.advance_to(Instant::from_nanos(10_000));
    a.flush().unwrap();
    assert_eq!(drain(&mut b), vec![tagged(1, 64)]);

    for tag in 0..100 {
        b.transmit(&tagged(tag, 64)).unwrap();
    }
    let got = drain(&mut a);
    let dropped = a.receive_stats().dropped;
    assert_eq!(got.len() as u64 + dropped, 100);
    assert!((25..75).contains(&dropped));
    assert!(got.windows(2).all(|w| w[0][20] < w[1][20]), "order kept");
}

#[test]
fn fault_injector_reports_closed_only_after_delayed_frames() {
    let clock = VirtualClock::new(Instant::ZERO);
    let (mut a, b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
    let slow = FaultConfig {
        delay: Delay {
            base: Duration::from_nanos(1_000),
            jitter: Duration::from_nanos(0),
        },
        ..FaultConfig::default()
    };
    let mut b = FaultInjector::new(b, clock.clone(), slow, FaultConfig::default(), 0).unwrap();
    a.transmit(&tagged(5, 64)).unwrap();
    drop(a);
    assert!(!b.receive(&mut |_| {}).unwrap());
    clock.advance_to(Instant::from_nanos(1_000));
    assert!(b.receive(&mut |_| {}).unwrap());
    assert!(matches!(
        b.receive(&mut |_| {}),
        Err(DeviceError::Closed { .. })
    ));
}

#[test]
fn recorder_captures_both_directions_in_order_with_timestamps() {
    let clock = VirtualClock::new(Instant::from_nanos(1_000_000_000));
    let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
    let writer = PcapWriter::new(Vec::new()).unwrap();
    let mut a = PcapRecorder::new(a, writer, clock.clone());
    a.transmit(&tagged(1, 64)).unwrap();
    clock.advance_by(Duration::from_nanos(500));
    b.transmit(&tagged(2, 70)).unwrap();
    assert_eq!(drain(&mut a), vec![tagged(2, 70)]);
    a.flush().unwrap();
    let (_, writer) = a.into_parts();
    let bytes = writer.into_inner();

    let file = TempFile::new("recorded.pcap");
    std::fs::write(&file.0, &bytes).unwrap();
    let mut replay = PcapDevice::open(&file.0).unwrap();
    assert_eq!(
        drain_capture(&mut replay),
        vec![tagged(1, 64), tagged(2, 70)]
    );
    // Second record's timestamp: 1 s + 500 ns, nanosecond magic.
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    let second = 24 + 16 + 64;
    assert_eq!(&bytes[second..second + 8], &[1, 0, 0, 0, 0xf4, 1, 0, 0]);
}

fn drain_capture(dev: &mut PcapDevice) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(true) = dev.receive(&mut |f| out.push(f.to_vec())) {}
    out
}

#[test]
fn tracer_emits_one_event_per_frame_with_roce_fields() {
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let (a, mut b) = pair(
            MemoryLinkConfig::default(),
            VirtualClock::new(Instant::ZERO),
        )
        .unwrap();
        let mut a = Tracer::new(a);
        a.transmit(&roce_v4(10)).unwrap();
        a.transmit(&tagged(0, 60)).unwrap();
        b.transmit(&roce_v4(0)).unwrap();
        assert_eq!(drain(&mut a).len(), 1);
    });
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(lines[0].contains("direction=\"tx\"") && lines[0].contains("opcode=RC_SEND_ONLY"));
    assert!(
        lines[0].contains("dest_qp=17") && lines[0].contains("ecn=2"),
        "{log}"
    );
    assert!(lines[1].contains("ethertype=\"0x88b5\""), "{log}");
    assert!(lines[2].contains("direction=\"rx\""), "{log}");
}

#[test]
fn receive_into_copies_and_refuses_a_short_buffer() {
    let (mut a, mut b) = pair(
        MemoryLinkConfig::default(),
        VirtualClock::new(Instant::ZERO),
    )
    .unwrap();
    a.transmit(&tagged(4, 100)).unwrap();
    a.transmit(&tagged(5, 100)).unwrap();
    let mut buf = [0u8; 128];
    assert_eq!(b.receive_into(&mut buf).unwrap(), Some(100));
    assert_eq!(&buf[..100], &tagged(4, 100)[..]);
    let err = b.receive_into(&mut buf[..50]).unwrap_err();
    assert!(matches!(
        err,
        DeviceError::BufferTooSmall {
            len: 100,
            capacity: 50,
            ..
        }
    ));
    assert_eq!(b.receive_into(&mut buf).unwrap(), None);
}

#[test]
fn summary_never_panics_on_truncations_of_a_roce_frame() {
    let frame = roce_v4(20);
    for len in 0..=frame.len() {
        let s = FrameSummary::of(&frame[..len]);
        assert_eq!(s.bth.is_some(), len >= 14 + 20 + 8 + 12, "{len}");
    }
}

#[test]
fn summary_ethertype_is_the_one_after_a_vlan_tag() {
    use crate::wire::encap::{ETHERTYPE_IPV4, ETHERTYPE_VLAN, VlanTag};
    let frame = roce_v4(20);
    let mut tagged = Vec::new();
    VlanTag::from_tci(0x2005).tag(&frame, &mut tagged);
    assert_eq!(tagged[12..14], ETHERTYPE_VLAN.to_be_bytes());
    let plain = FrameSummary::of(&frame);
    let s = FrameSummary::of(&tagged);
    assert_eq!(plain.ethertype, Some(ETHERTYPE_IPV4));
    assert_eq!(s.ethertype, Some(ETHERTYPE_IPV4));
    assert_eq!((s.ecn, s.bth), (plain.ecn, plain.bth));
    assert_eq!(FrameSummary::of(&tagged[..17]).ethertype, None);
}

/// A device that lends its own transmit buffer, as AF_XDP lends UMEM: it holds `0xa5` at
/// first and then whatever the last frame left. With `room` false it takes nothing.
struct Lending<D> {
    inner: D,
    slot: Vec<u8>,
    room: bool,
    /// Frames built in the lent buffer.
    lent: usize,
}

impl<D: Device> Device for Lending<D> {
    fn receive(&mut self, consume: &mut dyn FnMut(&[u8])) -> Result<bool, DeviceError> {
        self.inner.receive(consume)
    }
    fn transmit(&mut self, frame: &[u8]) -> Result<bool, DeviceError> {
        if !self.room {
            return Ok(false);
        }
        self.inner.transmit(frame)
    }
    fn transmit_built(
        &mut self,
        scratch: &mut [u8],
        build: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Built, DeviceError> {
        if !self.room || scratch.len() > self.slot.len() {
            return transmit_from(self, scratch, build);
        }
        let Some(len) = build(&mut self.slot[..scratch.len()]) else {
            return Ok(Built::Nothing);
        };
        self.lent += 1;
        self.inner.transmit(&self.slot[..len])?;
        Ok(Built::Sent)
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

/// `transmit_built` sends the same frames whether the device lends a used buffer or the
/// frame is built in the caller's and copied; says when there was no frame; and keeps a frame
/// the device had no room for in the caller's buffer, for `transmit` later.
#[test]
fn lent_and_copied_transmit_buffers_send_the_same_frames() {
    let frames = [roce_v4(3000), tagged(1, 60), roce_v4(10), tagged(2, 1500)];
    let sent_by = |lend: bool| {
        let clock = VirtualClock::new(Instant::ZERO);
        let (a, mut b) = pair(MemoryLinkConfig::default(), clock).unwrap();
        let mut dev: Box<dyn Device> = if lend {
            Box::new(Lending {
                inner: a,
                slot: vec![0xa5; 8192],
                room: true,
                lent: 0,
            })
        } else {
            Box::new(a)
        };
        let mut scratch = vec![0x5a; 4200];
        for frame in &frames {
            let built = dev
                .transmit_built(&mut scratch, &mut |buf| {
                    buf[..frame.len()].copy_from_slice(frame);
                    Some(frame.len())
                })
                .unwrap();
            assert_eq!(built, Built::Sent);
        }
        let none = dev.transmit_built(&mut scratch, &mut |_| None).unwrap();
        assert_eq!(none, Built::Nothing);
        drain(&mut b)
    };
    assert_eq!(sent_by(false), frames);
    assert_eq!(sent_by(true), frames);

    let clock = VirtualClock::new(Instant::ZERO);
    let (a, mut b) = pair(MemoryLinkConfig::default(), clock).unwrap();
    let mut full = Lending {
        inner: a,
        slot: vec![0; 8192],
        room: false,
        lent: 0,
    };
    let mut scratch = vec![0; 4200];
    let frame = tagged(3, 90);
    let built = full.transmit_built(&mut scratch, &mut |buf| {
        buf[..90].copy_from_slice(&frame);
        Some(90)
    });
    assert_eq!(built.unwrap(), Built::Held(90));
    assert_eq!(&scratch[..90], &frame[..], "held in the caller's buffer");
    assert!(drain(&mut b).is_empty());
    full.room = true;
    assert!(full.transmit(&scratch[..90]).unwrap());
    assert_eq!(drain(&mut b), vec![frame]);

    // A builder claiming more than it was given is an error, not a panic.
    let mut dev = pair(
        MemoryLinkConfig::default(),
        VirtualClock::new(Instant::ZERO),
    )
    .unwrap()
    .0;
    let err = dev
        .transmit_built(&mut [0; 64], &mut |_| Some(65))
        .unwrap_err();
    assert!(
        matches!(err, DeviceError::BufferTooSmall { len: 65, .. }),
        "{err}"
    );
}

/// The PAUSE/PFC middleware lends its inner device's buffer while nothing is paused, and
/// builds in the caller's while a priority is, so that a paused frame waits there.
#[test]
fn pause_honouring_lends_only_while_nothing_is_paused() {
    use crate::io::pause::PauseHonouring;
    use crate::wire::encap::VlanTag;
    use crate::wire::pause::{MacControlRepr, PfcRepr};
    let clock = VirtualClock::new(Instant::ZERO);
    let (a, mut b) = pair(MemoryLinkConfig::default(), clock.clone()).unwrap();
    let lending = Lending {
        inner: a,
        slot: vec![0; 8192],
        room: true,
        lent: 0,
    };
    let mut dev = PauseHonouring::new(lending, clock, 10_000_000_000);
    let mut on_priority_3 = Vec::new();
    let tag = VlanTag {
        pcp: 3,
        dei: false,
        vid: 7,
    };
    tag.tag(&roce_v4(64), &mut on_priority_3);
    let mut scratch = vec![0; 4200];
    let mut send = |dev: &mut PauseHonouring<_, _>, frame: &[u8]| {
        dev.transmit_built(&mut scratch, &mut |buf| {
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        })
        .unwrap()
    };
    assert_eq!(send(&mut dev, &on_priority_3), Built::Sent);
    assert_eq!(dev.inner().lent, 1, "nothing paused: lent");
    let xoff = MacControlRepr::Pfc(PfcRepr::new(&[(3, 0xffff)]));
    assert!(b.transmit(&xoff.frame(super::memory::MAC_B)).unwrap());
    while dev.receive(&mut |_| {}).unwrap() {}
    assert_eq!(
        send(&mut dev, &on_priority_3),
        Built::Sent,
        "taken, to wait in its priority's queue"
    );
    assert_eq!(send(&mut dev, &roce_v4(10)), Built::Sent, "priority 0 goes");
    assert_eq!(dev.inner().lent, 1, "a priority paused: copied");
    assert_eq!(drain(&mut b), vec![on_priority_3.clone(), roce_v4(10)]);
}
