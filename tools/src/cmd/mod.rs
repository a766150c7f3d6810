//! One module per subcommand, each with its clap `Args` struct and a `run` function.

pub mod analyze;
pub mod conform;
pub mod conform_agent;
pub mod decode;
pub mod demo;
pub mod endpoint;
pub mod lab_verbs;
pub mod ladder;
pub mod perf;
pub mod pingpong;
pub mod rping;
pub mod sim;
pub mod teach;
pub mod ucmatose;
pub mod udaddy;
pub mod view;

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use roce::capture::{CaptureError, CaptureReader, Frame, FrameRef};

/// An error and its causes on one line, each said once. Many of the stack's errors already
/// carry their cause's text ("verification failed: queue pair 0x11 entered the error
/// state") and name it as their source too, so anyhow's `{:#}` said it twice.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// What a write to stdout came to: `Ok(true)` when it failed only because the reader went
/// away (`roce sim dcqcn --json | head`), which is the reader's choice and ends the output
/// quietly; any other error (`> /dev/full`) is returned. Every command's output goes by this.
pub fn reader_left(written: std::io::Result<()>) -> std::io::Result<bool> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(true),
        written => written.map(|()| false),
    }
}

/// Writes a command's output to stdout; a reader that went away is no error
/// ([`reader_left`]), where `println!` panicked.
pub fn write_out(text: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    reader_left(out.write_fmt(text).and_then(|()| out.flush()))?;
    Ok(())
}

/// `print!` through [`write_out`]; evaluates to its `anyhow::Result<()>`.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cmd::write_out(format_args!($($arg)*))
    };
}

/// `println!` through [`write_out`]; evaluates to its `anyhow::Result<()>`.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cmd::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

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
    replay_from(open_capture(path)?, path, |frame, _| each(frame))
}

/// As [`replay`], with each frame's packet comment (pcapng) when it has one.
pub fn replay_commented(
    path: &Path,
    each: impl FnMut(&Frame<'_>, Option<&[u8]>),
) -> anyhow::Result<Option<String>> {
    replay_from(open_capture(path)?, path, each)
}

/// Frames a reading thread hands the analysing one at a time.
const BATCH_FRAMES: usize = 2048;
/// ... and at most this many bytes of them, so that the analysing thread is never further
/// behind than a few of these (the reader releases the pages it has left behind).
const BATCH_BYTES: usize = 1 << 20;
/// How many frames ahead the analysing thread asks for the headers of the frame it will look
/// at (a few hundred nanoseconds of work ahead, about the time the other core takes to hand
/// over a cache line).
const PREFETCH_FRAMES: usize = 8;
/// Batches on their way between the two threads: enough that a thread descheduled for a few
/// milliseconds on a busy machine does not stop the other at once (4 took 5-11% more wall
/// time on 1 KiB frames under load), and few enough that the analysing thread stays well
/// within the 32 MiB the mapped reader keeps behind it (`capture::mapped::WINDOW`).
const BATCHES_IN_FLIGHT: usize = 16;

/// As [`replay`], on two threads: this one reads the records (and takes the page faults of
/// mapping the file), another runs `each` on the frames in order. Whenever the other is
/// behind, this one also works out `ahead` (the stateless part of the work) for the frames it
/// reads, and `each` receives the result; otherwise `each` receives `None` and does that part
/// itself. A streamed capture (not a regular file) is replayed on this thread alone.
pub fn replay_split<T: Send>(
    path: &Path,
    ahead: impl Fn(&Frame<'_>) -> Option<T>,
    mut each: impl FnMut(&Frame<'_>, Option<T>) + Send,
) -> anyhow::Result<Option<String>> {
    let mut reader = open_capture(path)?;
    let Some(file) = reader.shared_file() else {
        return replay_from(reader, path, |frame, _| each(frame, None));
    };
    let bar = progress_bar(path);
    let (to_analyser, batches) = mpsc::sync_channel::<Batch<T>>(BATCHES_IN_FLIGHT);
    let (give_back, spare) = mpsc::channel::<Batch<T>>();
    // Batches sent and not yet analysed.
    let behind = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let analyser = scope.spawn(|| {
            for mut batch in batches {
                for i in 0..batch.len() {
                    // A frame worked out ahead is not read again here.
                    if let Some(&(ahead, None)) = batch.get(i + PREFETCH_FRAMES) {
                        file.prefetch(ahead);
                    }
                    let (r, known) = (batch[i].0, batch[i].1.take());
                    if let Some(frame) = file.frame(r) {
                        each(&frame, known);
                    }
                }
                batch.clear();
                behind.fetch_sub(1, Ordering::Relaxed);
                // The reader may have finished and gone: then the batch is simply dropped.
                let _ = give_back.send(batch);
            }
        });
        let mut batch = Vec::with_capacity(BATCH_FRAMES);
        let mut bytes = 0;
        let mut help = false;
        let outcome = loop {
            let r = match reader.next_frame_ref() {
                Ok(Some(r)) => r,
                Ok(None) => break Ok(None),
                Err(e @ CaptureError::Damaged { .. }) => break Ok(Some(e.to_string())),
                Err(e) => break Err(e.into()),
            };
            let known = if help {
                file.frame(r).and_then(|frame| ahead(&frame))
            } else {
                None
            };
            batch.push((r, known));
            bytes += r.len();
            if batch.len() == BATCH_FRAMES || bytes >= BATCH_BYTES {
                let next = spare
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH_FRAMES));
                behind.fetch_add(1, Ordering::Relaxed);
                if to_analyser
                    .send(std::mem::replace(&mut batch, next))
                    .is_err()
                {
                    break Ok(None); // the analyser panicked: joined below
                }
                // With more than two batches waiting, reading is ahead: spend the time
                // helping. From two, the reader took on more than it gained, likely leaving
                // the analyser waiting for batches (measured, not instrumented: README,
                // 1 KiB frames 43.6 ms wall median against 40.4, a million frames 118.9
                // against 108.9 ms).
                help = behind.load(Ordering::Relaxed) > 2;
                bytes = 0;
                bar.set_position(reader.offset());
            }
        };
        if !batch.is_empty() {
            behind.fetch_add(1, Ordering::Relaxed);
            let _ = to_analyser.send(batch);
        }
        drop(to_analyser);
        if let Err(panic) = analyser.join() {
            std::panic::resume_unwind(panic);
        }
        bar.finish_and_clear();
        outcome
    })
}

/// Frames on their way from the reader to the analyser, with what was worked out ahead.
type Batch<T> = Vec<(FrameRef, Option<T>)>;

fn replay_from(
    mut reader: CaptureReader,
    path: &Path,
    mut each: impl FnMut(&Frame<'_>, Option<&[u8]>),
) -> anyhow::Result<Option<String>> {
    let bar = progress_bar(path);
    let damage = loop {
        match reader.next_frame_commented() {
            Ok(Some((frame, comment))) => {
                each(&frame, comment);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("queue pair 0x11 entered the error state")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("verification failed: {0}")]
        Says(#[from] Inner),
        #[error("verification failed")]
        Names(#[source] Inner),
    }

    #[test]
    fn an_error_line_says_each_cause_once() {
        let says = anyhow::Error::new(Outer::Says(Inner));
        assert_eq!(
            format!("{says:#}"),
            "verification failed: queue pair 0x11 entered the error state: \
             queue pair 0x11 entered the error state",
            "what anyhow says"
        );
        let once = "verification failed: queue pair 0x11 entered the error state";
        assert_eq!(error_line(&says), once);
        assert_eq!(error_line(&anyhow::Error::new(Outer::Names(Inner))), once);
        let context = anyhow::Error::new(Outer::Says(Inner)).context("roce demo");
        assert_eq!(error_line(&context), format!("roce demo: {once}"));
    }

    /// A capture of `n` frames in the temporary directory, removed on drop.
    struct TempCapture(std::path::PathBuf);

    impl TempCapture {
        fn new(name: &str, n: usize) -> TempCapture {
            let frames: Vec<Vec<u8>> = roce::wire::sample::frames(5)
                .into_iter()
                .cycle()
                .take(n)
                .collect();
            let path = std::env::temp_dir().join(format!("{name}-{}.pcap", std::process::id()));
            std::fs::write(&path, roce_tests::pcap_bytes(&frames)).unwrap();
            TempCapture(path)
        }
    }

    impl Drop for TempCapture {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn split_replay_delivers_every_frame_in_order_with_what_was_worked_out_ahead() {
        let n = 4 * BATCH_FRAMES + 7;
        let capture = TempCapture::new("roce-replay-split", n);
        let mut seen = Vec::new();
        let damage = replay_split(
            &capture.0,
            |frame| Some((frame.index, frame.data.len())),
            |frame, known| {
                // A slow analyser at the start of each batch, so that the reader gets ahead
                // and starts working things out for it.
                if (frame.index as usize).is_multiple_of(BATCH_FRAMES) {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                if let Some(k) = known {
                    assert_eq!(k, (frame.index, frame.data.len()));
                }
                seen.push((frame.index, known.is_some()));
            },
        )
        .unwrap();
        assert_eq!(damage, None);
        let indices: Vec<u64> = seen.iter().map(|s| s.0).collect();
        assert_eq!(indices, (0..n as u64).collect::<Vec<_>>());
        let helped = seen.iter().filter(|s| s.1).count();
        assert!(helped > 0, "the reader never worked ahead");
        assert!(
            helped < n,
            "the first batches go before the analyser falls behind"
        );
    }

    #[test]
    fn split_replay_reports_damage_after_the_good_frames() {
        let capture = TempCapture::new("roce-replay-split-damaged", 3 * BATCH_FRAMES);
        let bytes = std::fs::read(&capture.0).unwrap();
        std::fs::write(&capture.0, &bytes[..bytes.len() - 5]).unwrap();
        let mut frames = 0;
        let damage = replay_split(&capture.0, |_| Some(()), |_, _| frames += 1).unwrap();
        assert_eq!(frames, 3 * BATCH_FRAMES - 1);
        assert!(damage.is_some_and(|d| d.contains("cut short")));
    }

    #[test]
    fn split_replay_passes_on_the_analysers_panic() {
        let capture = TempCapture::new("roce-replay-split-panic", 3 * BATCH_FRAMES);
        let outcome = std::panic::catch_unwind(|| {
            replay_split(
                &capture.0,
                |_| None::<()>,
                |frame, _| assert!(frame.index < 10, "analyser fails"),
            )
        });
        assert!(outcome.is_err());
    }
}
