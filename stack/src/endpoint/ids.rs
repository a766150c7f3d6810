//! What a peer must not be able to guess, drawn once per run: the first QPN and the R_Key
//! key bytes (through [`TransportConfig::id_seed`]), initial PSNs and buffer addresses. An
//! off-path sender who spoofs the peer's address must guess all of them to land a WRITE
//! (issue 14: `roce perf` used QPN 0x11, R_Key 0x1 and a fixed VA).
//!
//! The run's seed comes from the operating system (`/dev/urandom`), or from
//! [`SEED_VAR`] when it is set, so that a test can fix every number a run draws.
//!
//! [`TransportConfig::id_seed`]: crate::transport::TransportConfig::id_seed

use std::io::Read;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::rng::Rng;
use crate::wire::Psn;

/// The environment variable that fixes the run's seed (any string; the same string draws
/// the same numbers).
pub const SEED_VAR: &str = "ROCE_SEED";

/// The seed of this run.
pub fn run_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var(SEED_VAR) {
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .unwrap_or_else(|_| fnv1a(text.as_bytes())),
        Err(_) => os_seed(),
    })
}

/// A new number from the run's seed: each call gives another.
pub fn draw() -> u64 {
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    let n = DRAWN.fetch_add(1, Ordering::Relaxed);
    Rng::new(run_seed() ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64()
}

/// A random 24-bit PSN, as the tools draw with `lrand48() & 0xffffff`.
pub fn random_psn() -> Psn {
    Psn::new(draw() as u32 & 0xff_ffff)
}

/// A page-aligned virtual address for a registered buffer of `len` bytes, somewhere in the
/// lower half of a 47-bit address space (where a process's heap lies).
pub fn random_va(len: usize) -> u64 {
    const LOW: u64 = 1 << 32;
    const HIGH: u64 = 1 << 46;
    let room = HIGH - LOW - (len as u64).min(HIGH / 2);
    (LOW + draw() % room) & !0xfff
}

fn os_seed() -> u64 {
    let mut bytes = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_ok() {
        return u64::from_le_bytes(bytes);
    }
    // No /dev/urandom: the clock and the process id, as the tools' srand48 does.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()) << 32
}

/// FNV-1a: a seed from any string.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_and_addresses_are_page_aligned() {
        let a: Vec<u64> = (0..64).map(|_| draw()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(a.len(), b.len());
        for _ in 0..64 {
            let va = random_va(1 << 20);
            assert!(va.is_multiple_of(4096) && va >= 1 << 32 && va + (1 << 20) < 1 << 46);
            assert!(random_psn().value() < 1 << 24);
        }
        assert_eq!(fnv1a(b"x"), fnv1a(b"x"));
    }
}
