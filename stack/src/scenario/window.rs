//! A capture of bounded size for long runs: the first `first` frames are written as they
//! come, the last `last` are held in a ring and written at the end, and everything between is
//! only counted. A run of a few hundred megabytes stays a capture of a few megabytes that
//! still shows the connection starting, loss recovery in its first round trips and the end.

use std::collections::VecDeque;
use std::io::{self, Write};

use crate::io::pcap::PcapWriter;
use crate::time::Instant;

/// How many frames to keep from each end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureWindow {
    /// Frames kept from the start.
    pub first: u64,
    /// Frames kept from the end.
    pub last: usize,
}

impl Default for CaptureWindow {
    /// 2000 + 500 frames: at most about 10 MB with 4096-byte payloads.
    fn default() -> Self {
        CaptureWindow {
            first: 2000,
            last: 500,
        }
    }
}

/// What a [`WindowedCapture`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaptureSummary {
    /// Frames offered.
    pub seen: u64,
    /// Frames written (the first ones, then the last ones).
    pub written: u64,
    /// Frames offered after the first window and before the last one, not written.
    pub skipped: u64,
}

/// A pcap writer that keeps the first and the last frames of a run and skips the middle,
/// so a long run's capture stays small.
pub struct WindowedCapture<W: Write> {
    writer: PcapWriter<W>,
    window: CaptureWindow,
    tail: VecDeque<(Instant, Vec<u8>)>,
    summary: CaptureSummary,
}

impl<W: Write> std::fmt::Debug for WindowedCapture<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowedCapture")
            .field("window", &self.window)
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

impl<W: Write> WindowedCapture<W> {
    /// A capture into `out` keeping `window`.
    pub fn new(out: W, window: CaptureWindow) -> io::Result<WindowedCapture<W>> {
        Ok(WindowedCapture {
            writer: PcapWriter::new(out)?,
            window,
            tail: VecDeque::with_capacity(window.last),
            summary: CaptureSummary::default(),
        })
    }

    /// Offers one frame seen at `at` (nanoseconds since the Unix epoch).
    pub fn record(&mut self, at: Instant, frame: &[u8]) -> io::Result<()> {
        self.summary.seen += 1;
        if self.summary.seen <= self.window.first {
            self.summary.written += 1;
            return self.writer.write_frame(at, frame);
        }
        if self.window.last == 0 {
            self.summary.skipped += 1;
            return Ok(());
        }
        if self.tail.len() == self.window.last
            && let Some((_, mut old)) = self.tail.pop_front()
        {
            self.summary.skipped += 1;
            // Reuse the oldest frame's buffer: a long run recycles `last` buffers.
            old.clear();
            old.extend_from_slice(frame);
            self.tail.push_back((at, old));
            return Ok(());
        }
        self.tail.push_back((at, frame.to_vec()));
        Ok(())
    }

    /// Writes the held tail, flushes, and says what was written.
    pub fn finish(mut self) -> io::Result<(CaptureSummary, W)> {
        for (at, frame) in self.tail.drain(..) {
            self.summary.written += 1;
            self.writer.write_frame(at, &frame)?;
        }
        self.writer.flush()?;
        Ok((self.summary, self.writer.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::CaptureReader;

    #[test]
    fn keeps_the_first_and_last_frames_in_order() {
        let window = CaptureWindow { first: 3, last: 2 };
        let mut cap = WindowedCapture::new(Vec::new(), window).unwrap();
        for i in 0..10u8 {
            cap.record(Instant::from_micros(u64::from(i)), &[i; 60])
                .unwrap();
        }
        let (summary, bytes) = cap.finish().unwrap();
        assert_eq!(
            summary,
            CaptureSummary {
                seen: 10,
                written: 5,
                skipped: 5
            }
        );
        let mut reader = CaptureReader::new(std::io::Cursor::new(bytes)).unwrap();
        let mut firsts = Vec::new();
        while let Some(frame) = reader.next_frame().unwrap() {
            firsts.push(frame.data[0]);
        }
        assert_eq!(firsts, [0, 1, 2, 8, 9]);
    }

    #[test]
    fn a_short_run_is_written_whole() {
        let mut cap = WindowedCapture::new(Vec::new(), CaptureWindow::default()).unwrap();
        cap.record(Instant::ZERO, &[1; 60]).unwrap();
        let (summary, _) = cap.finish().unwrap();
        assert_eq!((summary.written, summary.skipped), (1, 0));
    }
}
