//! The Pair harness writes a pcap of what it carried: every packet of a lossy RC exchange,
//! as the rxe-style frame, readable by the project's capture reader with valid ICRCs.

use std::io::Cursor;

use roce::capture::CaptureReader;
use roce::io::pcap::PcapWriter;
use roce::transport::engine_pair::{ConnectOptions, LinkConfig, Pair};
use roce::transport::{Access, QpType, SendOp, SendWr, Sge, TransportConfig, WcStatus};

#[test]
fn a_lossy_exchange_is_written_and_read_back() {
    let mut pair = Pair::new(TransportConfig::default(), LinkConfig::lossy(0.05), 3).unwrap();
    let conn = pair.connect(QpType::Rc, &ConnectOptions::default());
    pair.capture = Some(Vec::new());
    let src = pair
        .a
        .register_mr(0, vec![7; 20_000], Access::NONE)
        .unwrap();
    let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let dst = pair.b.register_mr(0, vec![0; 20_000], remote).unwrap();
    let op = SendOp::Write {
        remote_addr: 0,
        rkey: dst,
    };
    let sge = Sge {
        addr: 0,
        length: 20_000,
        lkey: src,
    };
    pair.a
        .post_send(conn.qp_a, SendWr::new(1, op, vec![sge]))
        .unwrap();
    let limit = pair.now() + std::time::Duration::from_secs(1);
    let mut status = None;
    pair.run_until(limit, |p| {
        status = p.a.poll_completion(conn.cq_a).map(|wc| wc.status);
        status.is_some()
    });
    assert_eq!(status, Some(WcStatus::Success));
    let mut writer = PcapWriter::new(Cursor::new(Vec::new())).unwrap();
    let captured = pair.capture.take().unwrap();
    for c in &captured {
        writer.write_frame(c.time, &c.frame().unwrap()).unwrap();
    }
    let bytes = writer.into_inner().into_inner();

    let mut reader = CaptureReader::new(Cursor::new(bytes)).unwrap();
    let mut frames = 0;
    let mut naks = 0;
    while let Some(frame) = reader.next_frame().unwrap() {
        let pkt = frame.roce().unwrap();
        assert!(pkt.icrc_ok(), "frame {}", frame.index);
        let aeth = pkt.ext().aeth;
        naks += usize::from(aeth.is_some_and(|a| a.syndrome.kind() == "NAK"));
        frames += 1;
    }
    assert_eq!(frames, captured.len());
    assert!(naks > 0, "the loss shows as NAKs in the capture");
    assert_eq!(pair.b.mr(dst).unwrap().bytes(), &[7; 20_000][..]);
}
