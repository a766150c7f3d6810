//! One module per subcommand, each with its clap `Args` struct and a `run` function.

pub mod analyze;
pub mod decode;
pub mod demo;
pub mod endpoint;
pub mod ladder;
pub mod perf;
pub mod pingpong;
pub mod sim;
pub mod teach;

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use roce::capture::{CaptureError, CaptureReader, Frame};

/// Opens a capture for a subcommand; the error names the file once.
pub fn open_capture(path: &Path) -> anyhow::Result<CaptureReader> {
    CaptureReader::open(path).map_err(|e| match e {
        CaptureError::Open { .. } => anyhow::Error::new(e),
        other => anyhow::anyhow!("{}: {other}", path.display()),
    })
}

/// Files at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_FROM_BYTES: u64 = 32 << 20;
/// Frames between progress updates.
const PROGRESS_EVERY: u64 = 1 << 16;

fn progress_bar(path: &Path) -> ProgressBar {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    if size < PROGRESS_FROM_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
    {
        bar.set_style(style);
    }
    bar
}

/// Feeds every frame of the capture at `path` to `each`, with a progress bar on stderr for
/// a large file. Returns why the capture is damaged, if it is (the frames before the damage
/// were all fed).
pub fn replay(path: &Path, mut each: impl FnMut(&Frame<'_>)) -> anyhow::Result<Option<String>> {
    let mut reader = open_capture(path)?;
    let bar = progress_bar(path);
    let damage = loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                each(&frame);
                if frame.index % PROGRESS_EVERY == 0 {
                    bar.set_position(reader.offset());
                }
            }
            Ok(None) => break None,
            Err(e @ CaptureError::Damaged { .. }) => break Some(e.to_string()),
            Err(e) => return Err(e.into()),
        }
    };
    bar.finish_and_clear();
    Ok(damage)
}
