//! CM MADs and rdma_cm's IP private data header: whenever bytes parse, they re-emit byte for
//! byte and the emitted bytes parse to the same value. The input is tried as it is, and once
//! more with its first byte choosing one of the eleven CM messages (written into the class
//! and attribute ID of the rest), so that every message layout is exercised.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce::wire::FixedHeader;
use roce::wire::cm::{CmMadRepr, IpCmHeaderRepr};
use roce::wire::mad::{MAD_LEN, MGMT_CLASS_CM};

fn identity(mad: &[u8]) {
    if let Ok(m) = CmMadRepr::parse(mad) {
        let out = m.to_vec();
        assert_eq!(out[..], mad[..MAD_LEN], "parse -> emit gives the same bytes");
        assert_eq!(CmMadRepr::parse(&out).expect("emitted MADs parse"), m);
    }
}

fuzz_target!(|data: &[u8]| {
    identity(data);
    if let Ok(h) = IpCmHeaderRepr::parse(data) {
        let mut out = [0u8; 36];
        h.emit(&mut out).expect("36 bytes");
        assert_eq!(out[..], data[..36]);
        let _ = (h.src_addr(), h.dst_addr());
    }
    if data.len() > MAD_LEN {
        let mut mad = data[1..=MAD_LEN].to_vec();
        mad[1] = MGMT_CLASS_CM;
        mad[16..18].copy_from_slice(&(0x10 + u16::from(data[0] % 11)).to_be_bytes());
        identity(&mad);
    }
});
