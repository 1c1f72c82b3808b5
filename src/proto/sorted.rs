//! What [`super::decode::decode_object_sorted`] needs to write an object's JSON in the cache's
//! form (each object's keys in byte order, strings as serde_json writes them) rather than in
//! Go's: the key order of each message, and serde_json's string escaping.
//!
//! The cache's form is what serializing a `serde_json::Value` writes, so a string is what
//! serde_json makes of Go's escaped text: `<`, `>`, `&`, U+2028 and U+2029 are left as they are,
//! `"`, `\` and control characters are escaped (`\b`, `\t`, `\n`, `\f`, `\r`, others as
//! `\u00xx`), and each byte of invalid UTF-8 (which Go writes as `\ufffd`) is U+FFFD itself.

use super::{schema, Message};
use std::sync::OnceLock;

/// The indexes into `msg.fields` in the byte order of the fields' JSON names; `None` for a
/// message that is not in [`schema::ALL`].
pub(super) fn key_order(msg: &'static Message) -> Option<&'static [u8]> {
    static ORDERS: OnceLock<Vec<(usize, Vec<u8>)>> = OnceLock::new();
    let orders = ORDERS.get_or_init(|| {
        let mut orders: Vec<(usize, Vec<u8>)> = schema::ALL
            .iter()
            .map(|&m| {
                let mut order: Vec<u8> = (0..m.fields.len())
                    .filter_map(|i| u8::try_from(i).ok())
                    .collect();
                order.sort_by(|&a, &b| {
                    let name = |i: u8| m.fields[usize::from(i)].json.as_bytes();
                    name(a).cmp(name(b))
                });
                (address(m), order)
            })
            .collect();
        orders.sort_by_key(|(at, _)| *at);
        orders
    });
    let at = orders
        .binary_search_by_key(&address(msg), |(at, _)| *at)
        .ok()?;
    Some(&orders[at].1)
}

/// Where a message's table is: statics have distinct addresses that do not move.
fn address(msg: &'static Message) -> usize {
    std::ptr::from_ref(msg) as usize
}

/// Appends `s` as a JSON string the way serde_json writes the string Go's JSON of it parses to
/// (see the module's documentation).
pub(super) fn serde_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    if std::str::from_utf8(s).is_ok() {
        escape_valid(out, s);
    } else {
        let mut rest = s;
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    escape_valid(out, valid.as_bytes());
                    rest = &[];
                }
                Err(e) => {
                    let (valid, bad) = rest.split_at(e.valid_up_to());
                    escape_valid(out, valid);
                    // Go's `utf8.DecodeRune` takes one byte of invalid UTF-8 at a time.
                    out.extend_from_slice("\u{fffd}".as_bytes());
                    rest = bad.get(1..).unwrap_or_default();
                }
            }
        }
    }
    out.push(b'"');
}

/// `s` (valid UTF-8) escaped as serde_json escapes a string: only ASCII bytes are escaped, and
/// no byte of a multi-byte character is ASCII.
fn escape_valid(out: &mut Vec<u8>, s: &[u8]) {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&s[start..i]);
        escape_ascii(out, b);
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the escape of the ASCII byte `b` in a JSON string, as both Go and serde_json write
/// it: `\"`, `\\`, the short escapes of control characters that have one, `\u00xx` for any
/// other (Go's HTML escapes of `<`, `>` and `&` included).
pub(super) fn escape_ascii(out: &mut Vec<u8>, b: u8) {
    match b {
        b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

#[cfg(test)]
#[path = "sorted_tests.rs"]
mod tests;
