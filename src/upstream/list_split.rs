//! A LIST body split into its items while it is read, so a relist never holds the whole body and
//! a copy of every item at once.
//!
//! [`crate::upstream::decode::decode_list`] needs the whole body in memory, and its items are
//! copied out of it: a large list then cost its body (grown by doubling) plus a copy of every item
//! at the same moment, the process's memory peak during relists (see BENCHMARKS.md). The
//! [`ListSplitter`] is fed the body in chunks as they arrive and keeps each element of the
//! top-level `items` array as its own text ([`ListResult::items`]); everything else (the envelope:
//! `kind`, `metadata`, `"items":[]`) is kept verbatim and decoded by `decode_list` at
//! [`ListSplitter::finish`]. The result is exactly `decode_list`'s on the whole body: every item is
//! checked to be one JSON value on its own, anything outside the items is checked by serde, and a
//! body the splitter cannot follow (an `items` key spelled with escapes, say) is simply left in the
//! envelope for serde. Pure: no I/O; the client feeds it.
//!
//! A bound on one item ([`ListSplitter::with_max_item_bytes`]): an item longer than the bound is
//! not kept. The splitter keeps at most its first [`OVERSIZED_PREFIX_BYTES`], lets the rest
//! stream by (still following its strings, escapes and depth to find its end) and records an
//! [`Oversized`] entry naming it instead ([`ListSplitter::take_oversized`]); the rest of the list
//! is answered as without it. Its bytes are gone, so serde cannot check it as one JSON value: the
//! structural scan (strings closed, escapes followed, brackets balanced) is its only check, so a
//! list that `decode_list` refuses for a mistake inside such an item is answered here (without
//! it). An oversized item that is not an object fails the list as any item that is not an object
//! does. The splitter's buffer for the current item never grows beyond the larger of the bound
//! and [`OVERSIZED_PREFIX_BYTES`]: reading a list holds at most that much of any one item.
//!
//! A bound on what is not an item: everything outside the items array's elements that the
//! splitter keeps (whitespace, `kind`, `metadata`, unknown fields) may take at most
//! [`MAX_ENVELOPE_BYTES`]; one byte more fails the list at once ([`ListSplitter::failed`]),
//! without keeping it. Whitespace between the items is not kept, so it needs no bound here (the
//! body's own bound covers it).

use crate::upstream::decode::{decode_list, object_ref_from_prefix, DecodeError, ListResult};
use serde_json::value::RawValue;

/// Where the splitter is in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Outside the items: bytes go to the envelope.
    Envelope,
    /// After `"items":` at depth 1, before its value.
    ItemsValue,
    /// Inside the items array, between elements; `comma`: one is needed before the next element.
    Between { comma: bool, after_comma: bool },
    /// Inside an element: bytes go to the current item.
    Item(ItemKind),
}

/// How the current element ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemKind {
    /// An object or array: when the depth is back to the array's.
    Nested,
    /// A string: when it closes.
    Text,
    /// A number or literal: at the next `,`, `]` or whitespace.
    Scalar,
}

/// Depth of the items array's elements (the top-level object is 1, the array 2).
const ITEMS_DEPTH: u32 = 2;
/// Longest depth-1 string remembered to recognise the `items` key.
const KEY_BYTES: usize = 8;
/// How much of an item longer than the bound is kept, to name it ([`Oversized`]).
pub const OVERSIZED_PREFIX_BYTES: usize = 64 * 1024;
/// The most bytes of a list kept outside its items (the envelope): a List's own fields are
/// `kind`, `apiVersion` and a `metadata` of `resourceVersion`, `continue` (an opaque token of
/// the apiserver's, a few hundred bytes) and `remainingItemCount`; well under a KiB. The rest is
/// room for fields a newer apiserver may add; whitespace or unknown fields beyond it are no list
/// an apiserver sends. A body whose items the splitter cannot follow (an `items` key spelled
/// with escapes) keeps them in the envelope, so it is held to this bound too.
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024;

pub use crate::handoff::Oversized;

/// Splits a LIST body fed in chunks; see the module docs.
#[derive(Debug)]
pub struct ListSplitter {
    mode: Mode,
    depth: u32,
    in_string: bool,
    escape: bool,
    /// The last depth-1 string (its first [`KEY_BYTES`] bytes, and whether it was longer).
    key: Vec<u8>,
    key_long: bool,
    /// The last depth-1 token was a string (a `:` after it makes it a key).
    after_string: bool,
    envelope: Vec<u8>,
    /// The current item (only its first [`OVERSIZED_PREFIX_BYTES`] once it is `dropping`).
    item: Vec<u8>,
    /// The current item's length so far.
    item_len: u64,
    /// The current item is longer than `max_item`: its bytes past the prefix are dropped.
    dropping: bool,
    /// Longest item kept ([`ListSplitter::with_max_item_bytes`]).
    max_item: u64,
    /// The most the item buffer may hold: the larger of `max_item` and the prefix.
    item_cap: usize,
    items: Vec<Box<str>>,
    oversized: Vec<Oversized>,
    /// An item that is not an object was found (and not kept): the list fails in `finish`.
    not_object: bool,
    /// The first problem found inside the items array (reported by `finish`).
    broken: Option<DecodeError>,
    /// An items array was split out of the envelope.
    split: bool,
    /// The envelope passed [`MAX_ENVELOPE_BYTES`] (`broken` says so).
    envelope_full: bool,
}

impl Default for ListSplitter {
    fn default() -> Self {
        Self::new()
    }
}

fn json_error(what: &str) -> DecodeError {
    DecodeError::Json(format!("list items: {what}"))
}

impl ListSplitter {
    /// A splitter at the start of a body, keeping items of any length.
    pub fn new() -> Self {
        Self::with_max_item_bytes(usize::MAX)
    }

    /// A splitter at the start of a body that keeps no item longer than `max` bytes: each such
    /// item is recorded as an [`Oversized`] entry instead ([`ListSplitter::take_oversized`]).
    /// An item of exactly `max` bytes is kept.
    pub fn with_max_item_bytes(max: usize) -> Self {
        ListSplitter {
            mode: Mode::Envelope,
            depth: 0,
            in_string: false,
            escape: false,
            key: Vec::with_capacity(KEY_BYTES),
            key_long: false,
            after_string: false,
            envelope: Vec::new(),
            item: Vec::new(),
            item_len: 0,
            dropping: false,
            max_item: u64::try_from(max).unwrap_or(u64::MAX),
            item_cap: max.max(OVERSIZED_PREFIX_BYTES),
            items: Vec::new(),
            oversized: Vec::new(),
            not_object: false,
            broken: None,
            split: false,
            envelope_full: false,
        }
    }

    /// Feeds the next bytes of the body.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while let Some((&b, rest)) = chunk.split_first() {
            if self.broken.is_some() {
                return;
            }
            if self.envelope.len() >= MAX_ENVELOPE_BYTES
                && matches!(self.mode, Mode::Envelope | Mode::ItemsValue)
            {
                self.broken = Some(DecodeError::Json(format!(
                    "list: more than {MAX_ENVELOPE_BYTES} bytes outside its items (whitespace, \
                     metadata, unknown fields): no list an apiserver sends"
                )));
                self.envelope_full = true;
                return;
            }
            if self.mode == Mode::Item(ItemKind::Nested) {
                // The bulk of a body: a run of an object item, copied at once.
                let n = self.scan_nested(chunk);
                chunk = &chunk[n..];
            } else {
                self.byte(b);
                chunk = rest;
            }
        }
    }

    /// [`Self::item_byte`] for a run of an object or array item: how many bytes of `chunk` it
    /// takes (up to the item's end, which it ends).
    fn scan_nested(&mut self, chunk: &[u8]) -> usize {
        let (mut in_string, mut escape, mut depth) = (self.in_string, self.escape, self.depth);
        let mut done = false;
        let mut i = 0;
        while let Some(&b) = chunk.get(i) {
            i += 1;
            if in_string {
                if escape {
                    escape = false;
                } else if b == b'\\' {
                    escape = true;
                } else if b == b'"' {
                    in_string = false;
                } else {
                    // Skip to the next byte that matters inside a string.
                    let rest = chunk.get(i..).unwrap_or_default();
                    i += rest
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\')
                        .unwrap_or(rest.len());
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth = depth.saturating_add(1),
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == ITEMS_DEPTH {
                        done = true;
                        break;
                    }
                }
                _ => {}
            }
        }
        (self.in_string, self.escape, self.depth) = (in_string, escape, depth);
        self.keep(chunk.get(..i).unwrap_or_default());
        if done {
            self.end_item();
        }
        i
    }

    fn byte(&mut self, b: u8) {
        match self.mode {
            Mode::Envelope | Mode::ItemsValue => self.envelope_byte(b),
            Mode::Between { comma, after_comma } => self.between_byte(b, comma, after_comma),
            Mode::Item(kind) => self.item_byte(b, kind),
        }
    }

    /// Tracks strings and depth for one byte; returns whether `b` ended a string.
    fn track(&mut self, b: u8) -> bool {
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                return true;
            }
            return false;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth = self.depth.saturating_add(1),
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        false
    }

    fn envelope_byte(&mut self, b: u8) {
        self.envelope.push(b);
        let was_in_string = self.in_string;
        let at_key_depth = self.depth == 1;
        if self.mode == Mode::ItemsValue && !b.is_ascii_whitespace() {
            if b == b'[' {
                self.depth = self.depth.saturating_add(1);
                self.split = true;
                self.mode = Mode::Between {
                    comma: false,
                    after_comma: false,
                };
                return;
            }
            self.mode = Mode::Envelope;
        }
        let ended = self.track(b);
        if !at_key_depth {
            return;
        }
        if was_in_string {
            if ended {
                self.after_string = true;
            } else if self.key.len() < KEY_BYTES {
                self.key.push(b);
            } else {
                self.key_long = true;
            }
        } else if b == b'"' {
            self.key.clear();
            self.key_long = false;
            self.after_string = false;
        } else if b == b':' {
            if self.after_string && !self.key_long && self.key == b"items" {
                self.mode = Mode::ItemsValue;
            }
            self.after_string = false;
        } else if !b.is_ascii_whitespace() {
            self.after_string = false;
        }
    }

    fn between_byte(&mut self, b: u8, comma: bool, after_comma: bool) {
        match b {
            _ if b.is_ascii_whitespace() => {}
            b',' if comma => {
                self.mode = Mode::Between {
                    comma: false,
                    after_comma: true,
                }
            }
            b']' if !after_comma => {
                self.envelope.push(b']');
                self.depth = self.depth.saturating_sub(1);
                self.mode = Mode::Envelope;
            }
            _ if comma => self.broken = Some(json_error("expected `,` or `]` after an item")),
            b',' | b']' => self.broken = Some(json_error("expected an item")),
            _ => {
                let kind = match b {
                    b'{' | b'[' => ItemKind::Nested,
                    b'"' => ItemKind::Text,
                    _ => ItemKind::Scalar,
                };
                self.item.clear();
                self.item_len = 0;
                self.dropping = false;
                self.mode = Mode::Item(kind);
                self.item_byte(b, kind);
            }
        }
    }

    fn item_byte(&mut self, b: u8, kind: ItemKind) {
        if kind == ItemKind::Scalar
            && (b == b',' || b == b']' || b.is_ascii_whitespace())
            && !self.in_string
        {
            self.end_item();
            self.byte(b);
            return;
        }
        self.keep(&[b]);
        let ended_string = self.track(b);
        let done = match kind {
            ItemKind::Nested => !self.in_string && self.depth == ITEMS_DEPTH,
            ItemKind::Text => ended_string,
            ItemKind::Scalar => false,
        };
        if done {
            self.end_item();
        }
    }

    /// Adds the next bytes of the current item: to its text while it is within the bound; once
    /// it is not, only up to the prefix (the rest is counted and dropped).
    fn keep(&mut self, bytes: &[u8]) {
        let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.item_len = self.item_len.saturating_add(len);
        if !self.dropping {
            if self.item_len <= self.max_item {
                self.extend_item(bytes);
                return;
            }
            // Over the bound: what is kept so far is the item's start, `bytes` follow it.
            self.dropping = true;
            self.item.truncate(OVERSIZED_PREFIX_BYTES);
        }
        let room = OVERSIZED_PREFIX_BYTES.saturating_sub(self.item.len());
        if room > 0 {
            self.extend_item(bytes.get(..room).unwrap_or(bytes));
        }
    }

    /// Appends to the item buffer, growing it as a `Vec` does but never past `item_cap` (what
    /// is appended always fits in it).
    fn extend_item(&mut self, bytes: &[u8]) {
        let need = self.item.len().saturating_add(bytes.len());
        if need > self.item.capacity() {
            let grown = self
                .item
                .capacity()
                .saturating_mul(2)
                .max(need)
                .min(self.item_cap.max(need));
            self.item
                .reserve_exact(grown.saturating_sub(self.item.len()));
        }
        self.item.extend_from_slice(bytes);
    }

    fn end_item(&mut self) {
        self.mode = Mode::Between {
            comma: true,
            after_comma: false,
        };
        if self.dropping {
            self.end_oversized();
        } else {
            self.end_kept();
        }
        if self.item.capacity() > 64 * 1024 {
            self.item = Vec::new(); // do not keep the largest item's buffer for the rest
        }
    }

    /// An item over the bound ends: its structure was followed to here, which is all the check
    /// it gets; an object is recorded, anything else fails the list.
    fn end_oversized(&mut self) {
        self.dropping = false;
        if self.item.first() == Some(&b'{') {
            let r = object_ref_from_prefix(&self.item);
            self.oversized.push(Oversized {
                namespace: r.namespace,
                name: r.name,
                bytes: self.item_len,
            });
        } else {
            self.not_object = true;
        }
    }

    fn end_kept(&mut self) {
        let text = match std::str::from_utf8(&self.item) {
            Ok(t) => t,
            Err(e) => {
                self.broken = Some(json_error(&e.to_string()));
                return;
            }
        };
        // One JSON value on its own (as `decode_list`'s serde parse checks every item).
        if let Err(e) = serde_json::from_str::<&RawValue>(text) {
            self.broken = Some(DecodeError::Json(e.to_string()));
            return;
        }
        if text.starts_with('{') {
            self.items.push(Box::from(text));
        } else {
            self.not_object = true; // the list fails; nothing after it needs keeping
        }
    }

    /// Whether the list has already failed for its bytes outside the items
    /// ([`MAX_ENVELOPE_BYTES`]): the rest of the body need not be read; [`ListSplitter::finish`]
    /// says why. (Another failure lets the reader go on, so that a corrupt stream under the
    /// splitter is reported as such.)
    pub fn failed(&self) -> bool {
        self.envelope_full
    }

    /// The items split so far and not yet taken, for a reader that takes each item as it comes
    /// ([`crate::handoff::ListItems`]); `finish` answers only the rest.
    pub fn take_items(&mut self) -> std::vec::Drain<'_, Box<str>> {
        self.items.drain(..)
    }

    /// The items over the bound found so far and not yet taken, in the body's order, for a
    /// reader that takes them as it goes (as [`ListSplitter::take_items`]); those not taken
    /// before `finish` are lost with the splitter: see [`ListSplitter::finish_with_oversized`].
    pub fn take_oversized(&mut self) -> std::vec::Drain<'_, Oversized> {
        self.oversized.drain(..)
    }

    /// [`ListSplitter::finish`], and the [`Oversized`] entries not taken yet (all of them for a
    /// reader that never called [`ListSplitter::take_oversized`]). They are answered whatever
    /// the result; a reader that drops a failed list drops them with it.
    pub fn finish_with_oversized(mut self) -> (Result<ListResult, DecodeError>, Vec<Oversized>) {
        let list = self.decode();
        (list, std::mem::take(&mut self.oversized))
    }

    /// The decoded list: what `decode_list` answers for the whole body when that is a list;
    /// an error when it is not (the same kind of error, except that a bad item can be reported
    /// where serde would have named an earlier mistyped field). With a bound, the items over it
    /// are left out (and do not fail the list); `decode_list` may refuse a list this answers when
    /// the mistake is inside such an item (see the module docs). The [`Oversized`] entries not
    /// taken are dropped: take them first, or call [`ListSplitter::finish_with_oversized`].
    pub fn finish(mut self) -> Result<ListResult, DecodeError> {
        self.decode()
    }

    /// [`ListSplitter::finish`]'s work; items over the bound that serde decoded from the
    /// envelope (an `items` key the splitter could not follow) are moved to the oversized ones.
    fn decode(&mut self) -> Result<ListResult, DecodeError> {
        if let Some(e) = self.broken.take() {
            return Err(e);
        }
        let mut list = decode_list(&self.envelope);
        if matches!(self.mode, Mode::Between { .. } | Mode::Item(_)) {
            // The body ended inside the items: the envelope is cut short and serde says so.
            return Err(list
                .err()
                .unwrap_or_else(|| json_error("body ended inside the items")));
        }
        if self.split {
            let r = list.as_mut().map_err(|e| e.clone())?;
            if !r.items.is_empty() {
                // A second `items` array, not split (its key escaped): serde's duplicate.
                return Err(DecodeError::Missing("items"));
            }
            if self.not_object {
                return Err(DecodeError::NotAnObject("list item"));
            }
            r.items = std::mem::take(&mut self.items);
        } else if let Ok(r) = list.as_mut() {
            // The items came from serde: the bound applies to them too.
            let max = self.max_item;
            let (kept, long): (Vec<_>, Vec<_>) = std::mem::take(&mut r.items)
                .into_iter()
                .partition(|i| i.len() as u64 <= max);
            r.items = kept;
            for item in long {
                let o = object_ref_from_prefix(item.as_bytes());
                self.oversized.push(Oversized {
                    namespace: o.namespace,
                    name: o.name,
                    bytes: item.len() as u64,
                });
            }
        }
        list
    }
}

/// Splits a whole body at once (tests, fuzzing; the client feeds chunks as they arrive).
pub fn split_list(body: &[u8]) -> Result<ListResult, DecodeError> {
    let mut s = ListSplitter::new();
    s.feed(body);
    s.finish()
}

#[cfg(test)]
#[path = "list_split_tests.rs"]
mod tests;
