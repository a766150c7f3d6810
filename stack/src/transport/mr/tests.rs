//! The key table's rules, one by one (IBA 10.6; rxe_mr.c, rxe_mw.c).

use super::*;

const PD: PdId = PdId::DEFAULT;
const QP: Accessor = Accessor {
    pd: PD,
    qpn: Qpn::new(0x11),
};
const OTHER_QP: Accessor = Accessor {
    pd: PD,
    qpn: Qpn::new(0x12),
};
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn table() -> (MrTable, u32) {
    let mut t = MrTable::new(None);
    let key = t.register(PD, 0x1000, vec![0; 64], RW).unwrap();
    (t, key)
}

fn write(t: &mut MrTable, who: Accessor, key: u32, va: u64, len: u64) -> Result<(), MrError> {
    let span = t.remote(who, key, (va, len), Access::REMOTE_WRITE)?;
    t.slice_mut(&span.unwrap()).fill(0xab);
    Ok(())
}

#[test]
fn bounds_and_rights() {
    let (mut t, key) = table();
    assert!(write(&mut t, QP, key, 0x1000, 64).is_ok());
    assert_eq!(
        write(&mut t, QP, key, 0x1001, 64),
        Err(MrError::OutOfBounds {
            key,
            va: 0x1001,
            len: 64
        })
    );
    assert!(write(&mut t, QP, key, 0xfff, 1).is_err());
    assert!(write(&mut t, QP, key, u64::MAX, 2).is_err());
    assert_eq!(
        t.read_remote(QP, key, (0x1000, 1), Access::REMOTE_READ),
        Err(MrError::AccessDenied {
            key,
            need: Access::REMOTE_READ
        })
    );
    assert_eq!(
        t.read_remote(QP, key + 1, (0x1000, 1), Access::NONE),
        Err(MrError::UnknownKey(key + 1))
    );
    assert_eq!(
        t.read_remote(QP, 999, (0, 0), Access::REMOTE_READ),
        Ok(&[][..]),
        "zero length checks nothing (C9-88)"
    );
}

#[test]
fn remote_write_needs_local_write() {
    let mut t = MrTable::new(None);
    assert_eq!(
        t.register(PD, 0, vec![0; 8], Access::REMOTE_WRITE),
        Err(MrError::BadRights)
    );
    assert!(t.register(PD, 0, vec![0; 8], Access::REMOTE_READ).is_ok());
}

#[test]
fn a_local_region_has_no_rkey() {
    let mut t = MrTable::new(None);
    let key = t.register(PD, 0, vec![0; 8], Access::LOCAL_WRITE).unwrap();
    let mr = t.get(key).unwrap();
    assert_eq!(
        (mr.lkey(), mr.rkey()),
        (key, 0),
        "rxe: rkey 0 without a remote right"
    );
    assert_eq!(
        t.remote(QP, key, (0, 8), Access::NONE),
        Err(MrError::UnknownKey(key))
    );
    assert!(t.local(PD, key, 0, 8, Access::LOCAL_WRITE).is_ok());
}

#[test]
fn stale_key_after_reuse() {
    let (mut t, key) = table();
    t.deregister(key).unwrap();
    let again = t.register(PD, 0x1000, vec![0; 64], Access::ALL).unwrap();
    assert_eq!(key >> 8, again >> 8, "the index is reused");
    assert_ne!(key, again, "under another key byte");
    assert!(t.get(key).is_none());
}

#[test]
fn seeded_key_bytes_differ_from_counting() {
    let mut seeded = MrTable::new(Some(7));
    let keys: Vec<u32> = (0..8)
        .map(|_| seeded.register(PD, 0, vec![], Access::NONE).unwrap())
        .collect();
    assert!(keys.iter().all(|&k| k != 0));
    assert!(keys.iter().any(|&k| k & 0xff != 1), "{keys:x?}");
}

#[test]
fn protection_domains_separate_keys() {
    let mut t = MrTable::new(None);
    let pd = t.alloc_pd();
    let key = t.register(pd, 0, vec![0; 8], Access::ALL).unwrap();
    assert_eq!(
        t.remote(QP, key, (0, 8), Access::REMOTE_READ),
        Err(MrError::WrongPd(key)),
        "a queue pair of another domain"
    );
    assert_eq!(
        t.local(PD, key, 0, 8, Access::NONE),
        Err(MrError::WrongPd(key))
    );
    let who = Accessor { pd, qpn: QP.qpn };
    assert!(t.remote(who, key, (0, 8), Access::REMOTE_READ).is_ok());
    assert_eq!(t.dealloc_pd(pd), Err(MrError::PdInUse(pd.0)));
    t.deregister(key).unwrap();
    t.dealloc_pd(pd).unwrap();
    assert_eq!(
        t.register(pd, 0, vec![], Access::NONE),
        Err(MrError::UnknownPd(pd.0))
    );
}

#[test]
fn gather_and_scatter_cross_sges() {
    let mut t = MrTable::new(None);
    let a = t
        .register(PD, 0, (0..10).collect(), Access::LOCAL_WRITE)
        .unwrap();
    let b = t
        .register(PD, 100, (10..20).collect(), Access::LOCAL_WRITE)
        .unwrap();
    let sges = [
        Sge {
            addr: 2,
            length: 8,
            lkey: a,
        },
        Sge {
            addr: 100,
            length: 10,
            lkey: b,
        },
    ];
    let mut out = [0u8; 6];
    t.gather(PD, &sges, 5, &mut out).unwrap();
    assert_eq!(out, [7, 8, 9, 10, 11, 12]);
    t.scatter(PD, &sges, 6, &[0xaa; 4]).unwrap();
    assert_eq!(&t.get(a).unwrap().bytes()[8..], &[0xaa, 0xaa]);
    assert_eq!(&t.get(b).unwrap().bytes()[..3], &[0xaa, 0xaa, 12]);
    assert_eq!(t.scatter(PD, &sges, 17, &[0; 2]), Err(MrError::SgeTooShort));
}

#[test]
fn chosen_keys() {
    let mut t = MrTable::new(None);
    t.register_with_key(PD, 0x298, 0x1000, vec![7; 16], Access::ALL)
        .unwrap();
    assert_eq!(
        t.read_remote(QP, 0x298, (0x1000, 16), Access::REMOTE_READ)
            .unwrap(),
        &[7; 16]
    );
    assert_eq!(
        t.register_with_key(PD, 0x298, 0, vec![], Access::NONE),
        Err(MrError::KeyUnavailable(0x298))
    );
    assert!(
        t.register_with_key(PD, 0xffff_ff00, 0, vec![], Access::NONE)
            .is_err()
    );
    let other = t.register(PD, 0, vec![0; 4], Access::NONE).unwrap();
    assert_ne!(other >> 8, 2, "the chosen slot is not handed out again");
    t.deregister(0x298).unwrap();
    assert!(t.get(0x298).is_none());
}

/// A free fast-registration region of 4 KiB.
fn fast() -> (MrTable, u32) {
    let mut t = MrTable::new(None);
    let key = t.alloc_fast(PD, 4096).unwrap();
    (t, key)
}

#[test]
fn fast_registration_maps_and_rotates_the_key() {
    let (mut t, key) = fast();
    assert_eq!(
        t.remote(QP, key, (0, 1), Access::NONE),
        Err(MrError::Invalidated(key)),
        "free until registered"
    );
    let new = inc_rkey(key);
    t.fast_register(QP, key, new, (0x9000, 100), RW).unwrap();
    assert!(write(&mut t, QP, new, 0x9000, 100).is_ok());
    assert_eq!(t.get(new).unwrap().bytes()[..100], [0xab; 100]);
    assert_eq!(
        write(&mut t, QP, new, 0x9000, 101),
        Err(MrError::OutOfBounds {
            key: new,
            va: 0x9000,
            len: 101
        }),
        "only the registered length, not the whole capacity"
    );
    assert_eq!(
        write(&mut t, QP, key, 0x9000, 1),
        Err(MrError::UnknownKey(key)),
        "the old key is stale"
    );
    // Registered: invalidate first (rxe: only a free region is registered again).
    assert!(matches!(
        t.fast_register(QP, new, inc_rkey(new), (0, 8), RW),
        Err(MrError::BadState { .. })
    ));
    t.invalidate(QP, new).unwrap();
    assert_eq!(
        write(&mut t, QP, new, 0x9000, 1),
        Err(MrError::Invalidated(new))
    );
    let third = inc_rkey(new);
    t.fast_register(QP, new, third, (0x20_0000, 4096), Access::REMOTE_READ)
        .unwrap();
    assert!(
        t.remote(QP, third, (0x20_0000, 4096), Access::REMOTE_READ)
            .is_ok()
    );
}

#[test]
fn fast_registration_refusals() {
    let (mut t, key) = fast();
    let new = inc_rkey(key);
    assert_eq!(
        t.fast_register(QP, key, new + 0x100, (0, 8), RW),
        Err(MrError::KeyUnavailable(new + 0x100)),
        "only the key byte is the consumer's"
    );
    assert!(matches!(
        t.fast_register(QP, key, new, (0, 4097), RW),
        Err(MrError::OutOfBounds { .. })
    ));
    assert_eq!(
        t.fast_register(QP, key, new, (0, 8), Access::REMOTE_WRITE),
        Err(MrError::BadRights)
    );
    let pd = t.alloc_pd();
    let stranger = Accessor { pd, qpn: QP.qpn };
    assert_eq!(
        t.fast_register(stranger, key, new, (0, 8), RW),
        Err(MrError::WrongPd(key))
    );
    let user = t.register(PD, 0, vec![0; 8], RW).unwrap();
    assert!(matches!(
        t.fast_register(QP, user, inc_rkey(user), (0, 8), RW),
        Err(MrError::BadState { .. })
    ));
    assert_eq!(
        t.invalidate(QP, user),
        Err(MrError::NotInvalidatable(user)),
        "a registered user region is not invalidated by a key"
    );
}

/// A region open to windows, and a window of `kind` on it.
fn windowed(kind: MwType) -> (MrTable, u32, u32) {
    let mut t = MrTable::new(None);
    let access = RW | Access::REMOTE_READ | Access::MW_BIND;
    let mr = t.register(PD, 0x1000, vec![0; 256], access).unwrap();
    let mw = t.alloc_window(PD, kind).unwrap();
    (t, mr, mw)
}

#[test]
fn a_type1_window_opens_only_its_part() {
    let (mut t, mr, mw) = windowed(MwType::Type1);
    assert_eq!(
        t.remote(QP, mw, (0x1000, 1), Access::NONE),
        Err(MrError::Invalidated(mw)),
        "unbound"
    );
    let key = t
        .bind(
            QP,
            mw,
            inc_rkey(mw),
            &MwBind::new(mr, 0x1010, 16, Access::REMOTE_WRITE),
        )
        .unwrap();
    assert_eq!(key, inc_rkey(mw));
    assert!(write(&mut t, QP, key, 0x1010, 16).is_ok());
    assert_eq!(t.get(mr).unwrap().bytes()[0x10..0x20], [0xab; 16]);
    assert!(
        write(&mut t, QP, key, 0x1008, 16).is_err(),
        "inside the region, outside the window (rxe checks only the region)"
    );
    assert_eq!(
        t.read_remote(QP, key, (0x1010, 1), Access::REMOTE_READ),
        Err(MrError::AccessDenied {
            key,
            need: Access::REMOTE_READ
        }),
        "the window's rights, not the region's"
    );
    assert!(
        write(&mut t, OTHER_QP, key, 0x1010, 1).is_ok(),
        "type 1: any queue pair of the domain"
    );
    assert_eq!(t.invalidate(QP, key), Err(MrError::NotInvalidatable(key)));
    assert_eq!(
        t.deregister(mr),
        Err(MrError::InUse(mr)),
        "bound windows pin it"
    );
    // Binding with length 0 unbinds a type 1 window.
    let key2 = t
        .bind(QP, key, inc_rkey(key), &MwBind::new(0, 0, 0, Access::NONE))
        .unwrap();
    assert_eq!(t.get(mr).unwrap().bound_windows(), 0);
    assert!(write(&mut t, QP, key2, 0x1010, 1).is_err());
    t.deregister(mr).unwrap();
}

#[test]
fn a_type2_window_belongs_to_its_queue_pair() {
    let (mut t, mr, mw) = windowed(MwType::Type2);
    let zb = Access::REMOTE_WRITE | Access::ZERO_BASED;
    let key = t
        .bind(QP, mw, inc_rkey(mw), &MwBind::new(mr, 0x1080, 32, zb))
        .unwrap();
    assert!(write(&mut t, QP, key, 0, 32).is_ok(), "zero based: from 0");
    assert_eq!(t.get(mr).unwrap().bytes()[0x80..0xa0], [0xab; 32]);
    assert!(write(&mut t, QP, key, 1, 32).is_err());
    assert_eq!(
        write(&mut t, OTHER_QP, key, 0, 1),
        Err(MrError::NotOwner(key)),
        "only through the queue pair it was bound through"
    );
    assert!(
        matches!(
            t.bind(QP, key, inc_rkey(key), &MwBind::new(mr, 0x1000, 8, zb)),
            Err(MrError::BadBind { .. })
        ),
        "bound: invalidate first (o10-37.2.30)"
    );
    assert_eq!(
        t.invalidate(OTHER_QP, key),
        Err(MrError::NotOwner(key)),
        "a key this queue pair does not own"
    );
    t.invalidate(QP, key).unwrap();
    assert!(write(&mut t, QP, key, 0, 1).is_err());
    assert!(matches!(
        t.invalidate(QP, key),
        Err(MrError::BadState { .. })
    ));
    assert_eq!(t.get(mr).unwrap().bound_windows(), 0);
}

#[test]
fn bind_refusals() {
    let (mut t, mr, mw) = windowed(MwType::Type2);
    let next = inc_rkey(mw);
    let refused = |t: &mut MrTable, b: MwBind| {
        matches!(t.bind(QP, mw, next, &b), Err(MrError::BadBind { .. }))
    };
    assert!(
        refused(&mut t, MwBind::new(mr, 0x1000, 0, Access::REMOTE_READ)),
        "o10-37.2.40"
    );
    assert!(
        refused(&mut t, MwBind::new(mr, 0x10f0, 32, Access::REMOTE_READ)),
        "C10-75"
    );
    assert!(
        refused(&mut t, MwBind::new(mr, 0x1000, 8, Access::MW_BIND)),
        "no such window right"
    );
    let plain = t.register(PD, 0, vec![0; 64], RW).unwrap();
    assert!(
        refused(&mut t, MwBind::new(plain, 0, 8, Access::REMOTE_WRITE)),
        "C10-73"
    );
    let read_only = t
        .register(PD, 0, vec![0; 64], Access::REMOTE_READ | Access::MW_BIND)
        .unwrap();
    assert!(
        refused(&mut t, MwBind::new(read_only, 0, 8, Access::REMOTE_WRITE)),
        "C10-74"
    );
    let pd = t.alloc_pd();
    let stranger = Accessor { pd, qpn: QP.qpn };
    assert!(
        matches!(
            t.bind(
                stranger,
                mw,
                next,
                &MwBind::new(mr, 0x1000, 8, Access::REMOTE_READ)
            ),
            Err(MrError::BadBind { .. })
        ),
        "C10-72"
    );
    let (mut t1, mr1, mw1) = windowed(MwType::Type1);
    let zb = Access::REMOTE_READ | Access::ZERO_BASED;
    assert!(
        matches!(
            t1.bind(QP, mw1, inc_rkey(mw1), &MwBind::new(mr1, 0x1000, 8, zb)),
            Err(MrError::BadBind { .. })
        ),
        "o10-36.2.2"
    );
    // Nothing refused changed anything.
    assert!(!t.window(mw).unwrap().is_bound());
    assert_eq!(t.get(mr).unwrap().bound_windows(), 0);
}

#[test]
fn invalidating_a_fast_region_with_windows_is_refused() {
    let mut t = MrTable::new(None);
    let key = t.alloc_fast(PD, 64).unwrap();
    let new = inc_rkey(key);
    t.fast_register(QP, key, new, (0, 64), RW | Access::MW_BIND)
        .unwrap();
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    t.bind(
        QP,
        mw,
        inc_rkey(mw),
        &MwBind::new(new, 0, 8, Access::REMOTE_WRITE),
    )
    .unwrap();
    assert_eq!(
        t.invalidate(QP, new),
        Err(MrError::InUse(new)),
        "a key in use"
    );
    t.dealloc_window(inc_rkey(mw)).unwrap();
    t.invalidate(QP, new).unwrap();
}
