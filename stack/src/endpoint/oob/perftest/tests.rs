//! Fixtures written by hand from perftest's format strings, and whole dialogues against peers
//! that replay perftest's side byte for byte.

use super::*;
use crate::endpoint::oob::script::{self, Step, Step::*};
use crate::endpoint::oob::{accept, connect};
use proptest::prelude::*;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(10));

/// KEY_PRINT_FMT_GID for [`client_keys`]: rxe, GID index 1 = ::ffff:192.168.122.10.
const KEY_C: &[u8; 108] = b"0000:0001:000011:3a5c1f:00001234:00005555deadb000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:7a:0a:00000000:\0";
/// KEY_PRINT_FMT_GID for [`server_keys`].
const KEY_S: &[u8; 108] = b"0000:0080:000012:0badc0:00004d2e:00007f3a12345000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:7a:0b:00000000:\0";
/// KEY_PRINT_FMT (no GID): LID 1, 4 outstanding reads.
const KEY_NO_GID: &[u8; 59] = b"0001:0004:000011:3a5c1f:00001234:00005555deadb000:00000000\0";
/// `strncpy(version, "6.06", 16)`.
const VERSION_MSG: &[u8; 16] = b"6.06\0\0\0\0\0\0\0\0\0\0\0\0";

fn client_keys() -> Keys {
    Keys {
        lid: 0,
        out_reads: 1,
        qpn: Qpn::new(0x11),
        psn: Psn::new(0x3a_5c1f),
        rkey: 0x1234,
        vaddr: 0x5555_dead_b000,
        gid: Some(Ipv4Addr::new(192, 168, 122, 10).to_ipv6_mapped()),
        srqn: 0,
    }
}

fn server_keys() -> Keys {
    Keys {
        lid: 0,
        out_reads: 128,
        qpn: Qpn::new(0x12),
        psn: Psn::new(0x0b_adc0),
        rkey: 0x4d2e,
        vaddr: 0x7f3a_1234_5000,
        gid: Some(Ipv4Addr::new(192, 168, 122, 11).to_ipv6_mapped()),
        srqn: 0,
    }
}

fn client_report() -> BwReport {
    BwReport {
        size: 65536,
        iters: 5000,
        bw_peak: 1.5,
        bw_avg: 1.25,
        msg_rate: 0.5,
    }
}

#[test]
fn key_messages_match_the_format_strings() {
    assert_eq!(client_keys().to_message(), KEY_C);
    assert_eq!(server_keys().to_message(), KEY_S);
    let no_gid = Keys {
        lid: 1,
        out_reads: 4,
        gid: None,
        ..client_keys()
    };
    assert_eq!(no_gid.to_message(), KEY_NO_GID);
    assert_eq!(Keys::parse(KEY_C, KeyForm::WithGid).unwrap(), client_keys());
    assert_eq!(
        Keys::parse(KEY_NO_GID, KeyForm::WithoutGid).unwrap(),
        no_gid
    );
}

fn key_reason(msg: &[u8]) -> String {
    Keys::parse(msg, KeyForm::WithGid).unwrap_err().reason
}

#[test]
fn malformed_keys_are_typed_errors() {
    assert_eq!(key_reason(&KEY_C[..107]), "107 bytes, expected 108");
    assert_eq!(
        key_reason(&[KEY_C.as_slice(), b"x"].concat()),
        "109 bytes, expected 108"
    );
    // The GID-less form where the GID form is expected, and the other way round.
    assert_eq!(key_reason(KEY_NO_GID), "59 bytes, expected 108");
    assert!(Keys::parse(KEY_C, KeyForm::WithoutGid).is_err());
    let mut bad = *KEY_C;
    bad[30] = b'z';
    assert_eq!(key_reason(&bad), "R_Key: byte 30 is 'z', not a hex digit");
    let mut bad = *KEY_C;
    bad[52] = b'.';
    assert_eq!(key_reason(&bad), "byte 52 is '.', expected ':'");
    // perftest's parser needs the trailing ':' after the SRQN to find its end.
    let mut bad = *KEY_C;
    bad[106] = 0;
    assert_eq!(key_reason(&bad), "byte 106 is '\\0', expected ':'");
    let mut bad = *KEY_C;
    bad[107] = b' ';
    assert_eq!(key_reason(&bad), "byte 107 is ' ', expected '\\0'");
    let err = Keys::parse(b"", KeyForm::WithGid).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("peer message is not LLLL:OOOO:QQQQQQ"),
        "{err}"
    );
}

proptest! {
    #[test]
    fn keys_round_trip(lid: u16, out_reads: u16, qpn in 0u32..1 << 24, psn in 0u32..1 << 24,
                       rkey: u32, vaddr: u64, gid: Option<[u8; 16]>, srqn: u32) {
        let keys = Keys { lid, out_reads, qpn: Qpn::new(qpn), psn: Psn::new(psn), rkey, vaddr,
                          gid: gid.map(Ipv6Addr::from), srqn };
        let msg = keys.to_message();
        prop_assert_eq!(msg.len(), keys.form().message_len());
        prop_assert_eq!(Keys::parse(&msg, keys.form()).unwrap(), keys);
    }

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..130)) {
        let _ = Keys::parse(&bytes, KeyForm::WithGid);
        let _ = Keys::parse(&bytes, KeyForm::WithoutGid);
        let _ = parse_version(&bytes);
        let _ = IbMtu::parse(&bytes);
    }
}

#[test]
fn version_message_and_checks() {
    assert_eq!(&version_message(VERSION), VERSION_MSG);
    assert_eq!(parse_version(VERSION_MSG).unwrap(), "6.06");
    assert_eq!(parse_version(b"5.70\0garbage\0\0\0\0").unwrap(), "5.70");
    let old = parse_version(b"5.60\0\0\0\0\0\0\0\0\0\0\0\0").unwrap_err();
    assert!(
        matches!(old, OobError::IncompatibleVersion(ref v) if v == "5.60"),
        "{old}"
    );
    for bad in [
        &b"6.06xxxxxxxxxxxx"[..],
        b"six\0\0\0\0\0\0\0\0\0\0\0\0\0",
        b".5\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        b"6.06\0",
    ] {
        let err = parse_version(bad).unwrap_err();
        assert!(matches!(err, OobError::Malformed(_)), "{err}");
    }
}

#[test]
fn mtu_and_sys_data_messages() {
    assert_eq!(IbMtu::Mtu1024.to_message(), *b"3\0");
    assert_eq!(IbMtu::Mtu4096.to_message(), *b"5\0");
    assert_eq!(IbMtu::parse(b"3\0").unwrap(), IbMtu::Mtu1024);
    assert_eq!(IbMtu::Mtu256.bytes(), 256);
    assert_eq!(IbMtu::from_bytes(2048), Some(IbMtu::Mtu2048));
    for bad in [&b"6\0"[..], b"3x", b"3", b"3\0\0"] {
        assert!(IbMtu::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        SysData::default().to_messages(),
        [[0, 0, 0x10, 0], [0, 0, 0, 0x40]]
    );
    let peer = SysData::from_messages([0, 1, 0, 0], [0, 0, 0, 0x80]).unwrap();
    assert_eq!(
        SysData::default().max(peer),
        SysData {
            cycle_buffer: 65536,
            cache_line_size: 128
        }
    );
    assert!(SysData::from_messages([0, 0, 0x10, 1], [0, 0, 0, 0x40]).is_err());
    assert!(SysData::from_messages([0, 0, 0x10, 0], [0; 4]).is_err());
    assert!(SysData::from_messages([0x80, 0, 0, 0], [0, 0, 0, 0x40]).is_err());
}

#[test]
fn reports_are_big_endian() {
    let m = client_report().to_messages();
    assert_eq!(m[0], [0, 0, 0, 0, 0, 1, 0, 0]);
    assert_eq!(m[1], [0, 0, 0, 0, 0, 0, 0x13, 0x88]);
    assert_eq!(m[2], [0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
    assert_eq!(m[3], [0x3f, 0xf4, 0, 0, 0, 0, 0, 0]);
    assert_eq!(m[4], [0x3f, 0xe0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(BwReport::from_messages(m), client_report());
}

#[test]
fn gid_types_and_printing() {
    assert!(is_v4_mapped(&Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()));
    assert!(is_v4_mapped(&"ff0e::ffff:239.1.1.1".parse().unwrap()));
    assert!(!is_v4_mapped(&"fe80::5054:ff:fe12:3456".parse().unwrap()));
    let keys = Keys {
        out_reads: 128,
        ..client_keys()
    };
    assert_eq!(
        keys.print_lines("local", BwTest::Read),
        " local address: LID 0000 QPN 0x0011 PSN 0x3a5c1f OUT 0x80 RKey 0x001234 VAddr 0x005555deadb000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:122:10\n"
    );
    assert_eq!(
        keys.print_lines("remote", BwTest::Send)
            .lines()
            .next()
            .unwrap(),
        " remote address: LID 0000 QPN 0x0011 PSN 0x3a5c1f"
    );
}

#[test]
fn defaults_follow_the_sources() {
    assert_eq!(BwTest::Write.defaults().iters, 5000);
    assert_eq!(BwTest::Read.defaults().out_reads, None);
    assert_eq!(BwTest::Send.defaults().rx_depth, 512);
    assert_eq!(BwTest::Atomic.defaults().size, 8);
    assert_eq!(BwTest::Send.syncs_after_connect(), 3);
    assert!(!BwTest::Send.exchanges_reports());
}

/// perftest's side of one `ctx_xchg_data`: the client writes first.
fn xchg(peer_is_client: bool, ours: &[u8], theirs: &[u8]) -> [Step; 2] {
    if peer_is_client {
        [Send(theirs.to_vec()), Expect(ours.to_vec())]
    } else {
        [Expect(ours.to_vec()), Send(theirs.to_vec())]
    }
}

/// Versions, system data (4096, 64) and MTU 1024 from both sides.
fn negotiation_script(peer_is_client: bool) -> Vec<Step> {
    let mut s = Vec::new();
    s.extend(xchg(peer_is_client, VERSION_MSG, VERSION_MSG));
    s.extend(xchg(peer_is_client, &[0, 0, 0x10, 0], &[0, 0, 0x10, 0]));
    s.extend(xchg(peer_is_client, &[0, 0, 0, 0x40], &[0, 0, 0, 0x40]));
    s.extend(xchg(peer_is_client, b"3\0", b"3\0"));
    s
}

/// The bytes perftest exchanges for `test` in one role, our messages `ours_key`/`our_report`
/// and the scripted peer's `peer_key`/`peer_report`, written from the C sequence in main().
fn perftest_script(
    test: BwTest,
    peer_is_client: bool,
    ours_key: &[u8],
    peer_key: &[u8],
    our_report: &BwReport,
    peer_report: &BwReport,
) -> Vec<Step> {
    let mut s = negotiation_script(peer_is_client);
    let keys = 1 + test.syncs_after_connect() + usize::from(test.exchanges_reports());
    for _ in 0..keys {
        s.extend(xchg(peer_is_client, ours_key, peer_key));
    }
    if test.exchanges_reports() {
        let ours = our_report.to_messages();
        for (ours, theirs) in ours.iter().zip(peer_report.to_messages()) {
            s.extend(xchg(peer_is_client, ours, &theirs));
        }
    }
    s.extend(xchg(peer_is_client, ours_key, peer_key));
    // ctx_close_connection: both write "done" and close without reading.
    s.push(Send(DONE.to_vec()));
    s.push(ExpectEnd(DONE.to_vec()));
    s
}

fn negotiation() -> Negotiation {
    Negotiation {
        sys: SysData::default(),
        mtu: IbMtu::Mtu1024,
    }
}

/// Our side of a whole test, as `roce perf` will run it (without the RoCE traffic).
fn run_ours(stream: TcpStream, role: Role, test: BwTest) -> (Keys, Option<BwReport>) {
    let (keys, report) = match role {
        Role::Client => (client_keys(), client_report()),
        Role::Server => (server_keys(), BwReport::default()),
    };
    let session = Session::new(stream, role, T).unwrap();
    let (negotiated, agreed) = session.negotiate(&negotiation()).unwrap();
    assert_eq!(agreed.peer_version, "6.06");
    assert_eq!(agreed.mtu, IbMtu::Mtu1024);
    let mut connected = negotiated.exchange_keys(keys).unwrap();
    let peer = *connected.peer();
    for _ in 0..test.syncs_after_connect() {
        connected.sync().unwrap();
    }
    (peer, connected.finish(test, &report).unwrap())
}

const TESTS: [BwTest; 4] = [BwTest::Write, BwTest::Read, BwTest::Send, BwTest::Atomic];

#[test]
fn client_speaks_perftest_sequence_for_every_test() {
    for test in TESTS {
        // perftest's server sends an uninitialised report: any bits must do.
        let garbage = BwReport::from_messages([[0xa5; 8]; 5]);
        let script = perftest_script(test, false, KEY_C, KEY_S, &client_report(), &garbage);
        let (addr, c_server) = script::server(vec![script]);
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let (peer, report) = run_ours(stream, Role::Client, test);
        c_server.join().unwrap();
        assert_eq!(peer, server_keys());
        let report = report.map(|r| r.to_messages());
        assert_eq!(report, test.exchanges_reports().then_some([[0xa5; 8]; 5]));
    }
}

#[test]
fn server_speaks_perftest_sequence_for_every_test() {
    for test in TESTS {
        let none = BwReport::default();
        let script = perftest_script(test, true, KEY_S, KEY_C, &none, &client_report());
        let (listener, c_client) = script::client(vec![script]);
        let (peer, report) = run_ours(accept(&listener, T).unwrap(), Role::Server, test);
        c_client.join().unwrap();
        assert_eq!(peer, client_keys());
        assert_eq!(report, test.exchanges_reports().then_some(client_report()));
    }
}

#[test]
fn loopback_our_client_and_server() {
    for test in TESTS {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server =
            thread::spawn(move || run_ours(accept(&listener, T).unwrap(), Role::Server, test));
        let stream = connect(addr, Duration::from_secs(5)).unwrap();
        let (from_server, _) = run_ours(stream, Role::Client, test);
        let (from_client, report) = server.join().unwrap();
        assert_eq!((from_server, from_client), (server_keys(), client_keys()));
        assert_eq!(report, test.exchanges_reports().then_some(client_report()));
    }
}

/// Runs our client against a scripted server and returns our client's error.
fn client_error(script: Vec<Step>) -> OobError {
    let (addr, c_server) = script::server(vec![script]);
    let stream = connect(addr, Duration::from_secs(5)).unwrap();
    let session = Session::new(stream, Role::Client, T).unwrap();
    let err = session
        .negotiate(&negotiation())
        .and_then(|(n, _)| n.exchange_keys(client_keys()))
        .and_then(|mut c| c.sync())
        .unwrap_err();
    c_server.join().unwrap();
    err
}

#[test]
fn bad_peers_give_typed_errors() {
    let old = client_error(xchg(false, VERSION_MSG, b"5.1\0\0\0\0\0\0\0\0\0\0\0\0\0").into());
    assert!(matches!(old, OobError::IncompatibleVersion(_)), "{old}");

    let mut s = negotiation_script(false);
    let ipv6_gid = b"0000:0001:000012:0badc0:00004d2e:00007f3a12345000:fe:80:00:00:00:00:00:00:50:54:00:ff:fe:12:34:56:00000000:\0";
    s.extend(xchg(false, KEY_C, ipv6_gid));
    let err = client_error(s);
    assert!(matches!(err, OobError::GidTypeMismatch { .. }), "{err}");

    let mut s = negotiation_script(false);
    s.extend(xchg(false, KEY_C, KEY_S));
    let mut moved = *KEY_S;
    moved[10..16].copy_from_slice(b"000013");
    s.extend(xchg(false, KEY_C, &moved));
    let err = client_error(s);
    assert!(matches!(err, OobError::KeysChanged { .. }), "{err}");

    let mut s = negotiation_script(false);
    s.extend(xchg(false, KEY_C, &KEY_S[..100]));
    let err = client_error(s);
    assert!(
        matches!(
            err,
            OobError::Closed {
                got: 100,
                expected: 108,
                ..
            }
        ),
        "{err}"
    );

    let mut s = negotiation_script(false);
    s.extend(xchg(false, KEY_C, KEY_NO_GID));
    s.push(Send(vec![0; 49]));
    let err = client_error(s);
    assert!(matches!(err, OobError::Malformed(_)), "{err}");
}
