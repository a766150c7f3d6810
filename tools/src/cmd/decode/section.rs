//! The shape of an explanation, shared by every header's explainer (`fields`, `mad`, the
//! frame's outer layers in `explain`) and by `roce view`: a header is a [`Section`] of
//! [`Field`]s, each at its bits, with its value and what the value means.

/// One field of a header.
pub struct Field {
    /// First bit, counted from the header's first bit (bit 0 is the most significant bit of
    /// byte 0), and width in bits.
    pub bits: (usize, usize),
    pub name: &'static str,
    pub value: String,
    pub meaning: String,
}

pub fn field(
    bits: (usize, usize),
    name: &'static str,
    value: impl ToString,
    meaning: impl ToString,
) -> Field {
    Field {
        bits,
        name,
        value: value.to_string(),
        meaning: meaning.to_string(),
    }
}

/// A header: its name and spec reference, where it lies in the frame, and its fields.
pub struct Section {
    pub title: String,
    pub start: usize,
    pub len: usize,
    pub fields: Vec<Field>,
    /// A sentence about the header as a whole, printed under its fields.
    pub note: Option<&'static str>,
}

impl Section {
    pub fn new(title: impl Into<String>, start: usize, len: usize, fields: Vec<Field>) -> Section {
        Section {
            title: title.into(),
            note: None,
            start,
            len,
            fields,
        }
    }
}

/// Where a field sits, as the explanation prints it: `bit 8` or `bits 0-7`.
pub fn bits_label((first, width): (usize, usize)) -> String {
    if width == 1 {
        format!("bit {first}")
    } else {
        format!("bits {first}-{}", first + width - 1)
    }
}

impl Section {
    /// Where the header lies in the frame, as the explanation prints it.
    pub fn range_label(&self) -> String {
        match self.len {
            0 => "no bytes".to_string(),
            n => format!("bytes {}-{}", self.start, self.start + n - 1),
        }
    }
}
