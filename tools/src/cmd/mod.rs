//! One module per subcommand, each with its clap `Args` struct and a `run` function.

pub mod decode;

use std::path::Path;

use roce::capture::{CaptureError, CaptureReader};

/// Opens a capture for a subcommand; the error names the file once.
pub fn open_capture(path: &Path) -> anyhow::Result<CaptureReader> {
    CaptureReader::open(path).map_err(|e| match e {
        CaptureError::Open { .. } => anyhow::Error::new(e),
        other => anyhow::anyhow!("{}: {other}", path.display()),
    })
}
