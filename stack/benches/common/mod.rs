//! What the benchmarks share: criterion measuring the thread's CPU time, and reading a
//! finished benchmark's median back from criterion's files to print figures against targets.
//!
//! CPU time rather than wall time: the targets are per core, and on a shared machine wall
//! time also counts the time other processes hold the core.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cpu_time::ThreadTime;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// Criterion measurement by the thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
pub struct CpuTime;

/// Durations print the same whichever clock measured them.
static DURATION_FORMAT: WallTime = WallTime;

impl Measurement for CpuTime {
    type Intermediate = ThreadTime;
    type Value = Duration;

    fn start(&self) -> ThreadTime {
        ThreadTime::now()
    }
    fn end(&self, start: ThreadTime) -> Duration {
        start.elapsed()
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        DURATION_FORMAT.formatter()
    }
}

/// Criterion measuring CPU time, one second of warm-up and `secs` of measurement per
/// benchmark: what every benchmark here uses.
pub fn cpu_criterion(secs: u64) -> criterion::Criterion<CpuTime> {
    criterion::Criterion::default()
        .with_measurement(CpuTime)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(secs))
}

/// Criterion's closing summary; returns where it keeps its results, for [`median_ns`].
pub fn final_summary() -> PathBuf {
    criterion::Criterion::default()
        .with_measurement(CpuTime)
        .configure_from_args()
        .final_summary();
    criterion_dir()
}

/// Where criterion keeps its results: under the workspace target dir (benches run from the
/// package dir).
fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("criterion")
}

/// The median of a finished benchmark, in nanoseconds, from criterion's saved estimates.
pub fn median_ns(dir: &Path, id: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(id).join("new/estimates.json")).ok()?;
    let at = text.find("\"median\"")?;
    let rest = &text[at..];
    let at = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let end = rest[at..].find(',')?;
    rest[at..at + end].trim().parse().ok()
}
