//! Fixed-width text messages as the C tools `sprintf` them: hex fields, separators and a
//! terminating NUL, at fixed offsets.
//!
//! The tools read them back with `sscanf`/`strtol`, which skip garbage silently; we instead
//! require every byte to be where the format string puts it, and say which byte was not.

use super::error::{MalformedMessage, escape};

/// A cursor over one received message of a known layout.
#[derive(Debug)]
pub(crate) struct Fields<'a> {
    msg: &'a [u8],
    pos: usize,
    format: &'static str,
}

impl<'a> Fields<'a> {
    /// Fails unless `msg` is exactly `len` bytes: a short or oversize message cannot have the
    /// tool's layout.
    pub(crate) fn new(
        msg: &'a [u8],
        len: usize,
        format: &'static str,
    ) -> Result<Self, MalformedMessage> {
        let fields = Fields {
            msg,
            pos: 0,
            format,
        };
        if msg.len() != len {
            return Err(fields.error(format!("{} bytes, expected {len}", msg.len())));
        }
        Ok(fields)
    }

    pub(crate) fn error(&self, reason: String) -> MalformedMessage {
        MalformedMessage::new(self.format, self.msg, reason)
    }

    /// Reads `width` hex digits (either case, as `%x` parsing accepts) as one number.
    /// `width` is at most 16, so the value fits.
    pub(crate) fn hex(&mut self, width: usize, name: &str) -> Result<u64, MalformedMessage> {
        let mut value = 0u64;
        for _ in 0..width {
            let at = self.pos;
            let byte = self.next_byte()?;
            let digit = (byte as char).to_digit(16).ok_or_else(|| {
                self.error(format!(
                    "{name}: byte {at} is '{}', not a hex digit",
                    escape(&[byte])
                ))
            })?;
            value = (value << 4) | u64::from(digit);
        }
        Ok(value)
    }

    /// Requires the next byte to be `expected` (a separator, or the NUL terminator).
    pub(crate) fn expect(&mut self, expected: u8) -> Result<(), MalformedMessage> {
        let at = self.pos;
        let byte = self.next_byte()?;
        if byte == expected {
            Ok(())
        } else {
            Err(self.error(format!(
                "byte {at} is '{}', expected '{}'",
                escape(&[byte]),
                escape(&[expected])
            )))
        }
    }

    fn next_byte(&mut self) -> Result<u8, MalformedMessage> {
        let byte = *self
            .msg
            .get(self.pos)
            .ok_or_else(|| self.error(format!("ends at byte {}", self.pos)))?;
        self.pos += 1;
        Ok(byte)
    }
}

/// Copies a formatted message into a fixed-size, NUL-terminated buffer, exactly what
/// `sprintf` into `char msg[N]` followed by `write(fd, msg, sizeof msg)` puts on the wire.
///
/// Callers format typed fields whose widths add up to `N - 1`; a longer text is cut rather
/// than overflowing (and the unit tests pin every length).
pub(crate) fn nul_terminated<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let len = text.len().min(N.saturating_sub(1));
    out[..len].copy_from_slice(&text.as_bytes()[..len]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_accepts_both_cases_and_reports_the_bad_byte() {
        let mut f = Fields::new(b"aB:z\0", 5, "XX:X").unwrap();
        assert_eq!(f.hex(2, "field").unwrap(), 0xab);
        f.expect(b':').unwrap();
        let err = f.hex(1, "last").unwrap_err();
        assert_eq!(err.reason, "last: byte 3 is 'z', not a hex digit");
        assert_eq!(err.got, "aB:z\\0");
    }

    #[test]
    fn wrong_length_is_rejected_before_any_field() {
        let err = Fields::new(b"abc", 4, "XXXX").unwrap_err();
        assert_eq!(err.reason, "3 bytes, expected 4");
    }

    #[test]
    fn long_messages_are_quoted_only_in_part() {
        let long = vec![b'x'; 1000];
        let err = Fields::new(&long, 4, "XXXX").unwrap_err();
        assert!(err.got.len() < 200 && err.got.ends_with("..."));
    }

    #[test]
    fn nul_terminated_pads_and_cuts() {
        assert_eq!(nul_terminated::<4>("ab"), *b"ab\0\0");
        assert_eq!(nul_terminated::<4>("abcdef"), *b"abc\0");
    }
}
