use thiserror::Error;

/// Why a header or packet could not be parsed or emitted.
///
/// Every variant names the header it concerns, so that a decoder can say which part of a
/// frame was wrong without further context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ends before the header does.
    #[error("{header}: truncated, {needed} bytes needed but {available} present")]
    Truncated {
        /// The header being read or written.
        header: &'static str,
        /// Its length, or the bytes the buffer needed.
        needed: usize,
        /// The bytes there were.
        available: usize,
    },
    /// A field holds a value this header cannot carry (for example a length field that lies).
    #[error("{header}: malformed: {reason}")]
    Malformed {
        /// The header.
        header: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The BTH opcode is not one of the RC, UC, UD or CNP opcodes this stack understands.
    #[error("BTH: unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
}

/// Shorthand for results in the wire layer.
pub type Result<T> = core::result::Result<T, WireError>;

/// Fails with [`WireError::Truncated`] unless `buf` holds at least `needed` bytes.
pub(crate) fn check_len(header: &'static str, buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(WireError::Truncated {
            header,
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}
