//! What `roce view` puts in its page for each frame, in a compact form the page's script
//! reads: every string once in a table, every field, header and JSON key-value pair once, and
//! per frame only the numbers that point at them. Consecutive frames share nearly all of their
//! explanation (the same Ethernet header, the same meanings), so a page of many frames costs
//! little more than the values that change.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::cmd::decode::Dissected;
use crate::cmd::decode::explain;
use crate::cmd::decode::section::{Section, bits_label};

/// Frames longer than this keep their first [`HEAD_BYTES`] and last [`TAIL_BYTES`] bytes in the
/// page (the headers, the start of the payload, the pad and ICRC).
const KEEP_WHOLE: usize = 256;
const HEAD_BYTES: usize = 192;
const TAIL_BYTES: usize = 32;

/// The page's tables. Serialised as one JSON object the script parses once.
#[derive(Debug, Default, Serialize)]
pub struct Tables {
    /// Every string, once.
    s: Vec<String>,
    /// Fields: [bits label, name, value, meaning, first byte, last byte] (strings by index,
    /// bytes counted from the frame's start; -1 when the field has no bytes).
    f: Vec<[i64; 6]>,
    /// Headers: [title, byte range label, note (-1: none), first byte, length, field...].
    h: Vec<Vec<i64>>,
    /// decode --json key-value pairs: [key, value as JSON text].
    p: Vec<[u32; 2]>,
    #[serde(skip)]
    strings: HashMap<String, u32>,
    #[serde(skip)]
    fields: HashMap<[i64; 6], u32>,
    #[serde(skip)]
    headers: HashMap<Vec<i64>, u32>,
    #[serde(skip)]
    pairs: HashMap<[u32; 2], u32>,
}

/// One frame's details: [summary line, comment (-1: none), bytes (base64), kept head, bytes
/// left out after it, [headers], [decode --json pairs]].
pub type Details = (u32, i64, String, usize, usize, Vec<u32>, Vec<u32>);

impl Tables {
    /// The index of `s` in the string table.
    pub fn string(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.s.len() as u32;
        self.s.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn intern<K: std::hash::Hash + Eq + Clone>(
        map: &mut HashMap<K, u32>,
        list: &mut Vec<K>,
        key: K,
    ) -> u32 {
        if let Some(&i) = map.get(&key) {
            return i;
        }
        let i = list.len() as u32;
        list.push(key.clone());
        map.insert(key, i);
        i
    }

    fn header(&mut self, section: &Section) -> u32 {
        let mut row = vec![
            i64::from(self.string(&section.title)),
            i64::from(self.string(&section.range_label())),
            section.note.map_or(-1, |n| i64::from(self.string(n))),
            section.start as i64,
            section.len as i64,
        ];
        for field in &section.fields {
            // Whole bytes the field touches, from the frame's start.
            let (first, width) = field.bits;
            let (from, to) = if width == 0 {
                (-1, -1)
            } else {
                (
                    (section.start + first / 8) as i64,
                    (section.start + (first + width - 1) / 8) as i64,
                )
            };
            let key = [
                i64::from(self.string(&bits_label(field.bits))),
                i64::from(self.string(field.name)),
                i64::from(self.string(&field.value)),
                i64::from(self.string(&field.meaning)),
                from,
                to,
            ];
            row.push(i64::from(Self::intern(&mut self.fields, &mut self.f, key)));
        }
        Self::intern(&mut self.headers, &mut self.h, row)
    }

    /// The decode --json object flattened to `key` / `outer.inner` pairs, values as JSON text.
    fn pairs(&mut self, prefix: &str, value: &Value, out: &mut Vec<u32>) {
        let Value::Object(map) = value else { return };
        for (k, v) in map {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if v.is_object() {
                self.pairs(&key, v, out);
                continue;
            }
            let pair = [self.string(&key), self.string(&v.to_string())];
            out.push(Self::intern(&mut self.pairs, &mut self.p, pair));
        }
    }

    /// The details of frame `index` (from 0): the same summary, headers and fields as
    /// `roce decode`, the same keys and values as `roce decode --json`, and its bytes.
    pub fn details(
        &mut self,
        index: usize,
        data: &[u8],
        dissected: &Dissected<'_>,
        comment: Option<&str>,
    ) -> Details {
        let summary = explain::summary(index, data.len(), dissected);
        let summary = self.string(summary.trim_end());
        let comment = comment.map_or(-1, |c| i64::from(self.string(c)));
        let headers = explain::frame_sections(dissected)
            .iter()
            .map(|s| self.header(s))
            .collect();
        let mut pairs = Vec::new();
        self.pairs(
            "",
            &crate::cmd::decode::json::value(index, dissected),
            &mut pairs,
        );
        let (bytes, head, left_out) = if data.len() <= KEEP_WHOLE {
            (base64(data), data.len(), 0)
        } else {
            let mut kept = data[..HEAD_BYTES].to_vec();
            kept.extend_from_slice(&data[data.len() - TAIL_BYTES..]);
            (
                base64(&kept),
                HEAD_BYTES,
                data.len() - HEAD_BYTES - TAIL_BYTES,
            )
        };
        (summary, comment, bytes, head, left_out, headers, pairs)
    }
}

/// Standard base64 with padding (RFC 4648 section 4), which the page's `atob` reads.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn strings_fields_and_pairs_are_stored_once() {
        let mut t = Tables::default();
        let a = t.string("x");
        assert_eq!(t.string("x"), a);
        let frames = roce::wire::sample::frames(4);
        for (i, f) in frames.iter().enumerate() {
            let frame = roce::capture::Frame {
                index: i as u64,
                timestamp_ns: 0,
                link: roce::capture::Link::Ethernet,
                data: f,
                orig_len: f.len() as u32,
            };
            let d = t.details(i, f, &Dissected::of(&frame), None);
            assert!(!d.5.is_empty(), "a RoCE frame has headers");
        }
        let once = t.f.len();
        let frame = roce::capture::Frame {
            index: 0,
            timestamp_ns: 0,
            link: roce::capture::Link::Ethernet,
            data: &frames[0],
            orig_len: frames[0].len() as u32,
        };
        t.details(0, &frames[0], &Dissected::of(&frame), None);
        assert_eq!(t.f.len(), once, "the same frame again adds no field");
        assert_eq!(t.s.len(), t.strings.len(), "the map and the table agree");
    }
}
