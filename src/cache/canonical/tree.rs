//! The tree a list item is read into ([`Tree`], [`Node`]): strings borrowed from the text where
//! they need no unescaping, each object's entries sorted by key, and written back exactly as
//! serde_json writes a `Value` (compact). Objects' entries and arrays' elements live in the tree's
//! own buffers, which one list's items share ([`Tree::recycle`]): reading an item allocates nothing
//! once they have grown. Keys are compared and strings copied without the C library's per-call
//! `memcmp`/`memcpy`, which musl (what the static builds link) does a byte at a time or with
//! `rep movs`: with musl, making a list canonical was markedly slower than with glibc, and each of
//! these measures narrowed the gap (criterion `prepare/slices_list_*` with
//! `--target x86_64-unknown-linux-musl`, perf for the causes; the figures are in BENCHMARKS.md).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

/// The key by which serde_json's `Value` recognizes an embedded `RawValue` (feature
/// `raw_value`): an item carrying it is decoded the slow way, so that it means the same.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A JSON value whose strings borrow from the text where they need no unescaping; an array's
/// elements and an object's entries are in the [`Tree`] it was read into.
#[derive(Clone, Debug)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    /// Its elements: [`Tree::items`].
    Array(Span),
    /// Its entries, sorted by key, each key once (see [`sort_entries`]): [`Tree::entries`].
    Object(Span),
}

/// Where an array's elements or an object's entries are in their [`Tree`]: `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span(usize, usize);

pub(super) type Entries<'n, 'a> = &'n [(Cow<'a, str>, Node<'a>)];

pub(super) fn get<'n, 'a>(
    entries: &'n [(Cow<'a, str>, Node<'a>)],
    key: &str,
) -> Option<&'n Node<'a>> {
    let at = entries.binary_search_by(|(k, _)| by_key(k, key)).ok()?;
    Some(&entries[at].1)
}

/// `out.extend_from_slice(bytes)` in copies of a fixed size, which the compiler inlines: a
/// list item is hundreds of short strings, and musl's `memcpy` (`rep movsq`, then a byte at a
/// time) costs more to start than such a string takes to copy (perf of the static build showed
/// `memcpy` called from here as a large share of decoding a list).
fn append(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len());
    let mut rest = bytes;
    while let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        out.extend_from_slice(chunk);
        rest = tail;
    }
    if let Some((chunk, tail)) = rest.split_first_chunk::<4>() {
        out.extend_from_slice(chunk);
        rest = tail;
    }
    out.extend(rest.iter().copied());
}

/// The order of object keys ([`crate::bytes::cmp`]: musl's `memcmp` is slow).
pub(super) fn by_key(a: &str, b: &str) -> std::cmp::Ordering {
    crate::bytes::cmp(a.as_bytes(), b.as_bytes())
}

/// `s` as a JSON string, as serde_json writes it: as it is between quotes when nothing in it
/// needs escaping (serde_json escapes `"`, `\` and control characters, nothing else), else by
/// serde_json.
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        append(out, s.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, s)
    }
}

/// `entries` (one object's, in text order) sorted by key in place; of a repeated key the last
/// value stays (a `Value` map's rule), the others are left at the end; how many are kept. An
/// apiserver writes keys in Go struct field order, so most objects of a real list take the sort
/// (criterion `prepare/slices_list_go_order_scale_S`).
fn sort_entries(entries: &mut [(Cow<'_, str>, Node<'_>)]) -> usize {
    if entries.windows(2).all(|w| by_key(&w[0].0, &w[1].0).is_lt()) {
        return entries.len(); // already sorted (the simulator, `serde_json::Value`)
    }
    entries.sort_by(|a, b| by_key(&a.0, &b.0)); // stable: repeats stay in text order
    let mut kept = 0;
    for i in 0..entries.len() {
        if kept > 0 && by_key(&entries[kept - 1].0, &entries[i].0).is_eq() {
            entries.swap(kept - 1, i); // a later repeat replaces the kept one
        } else {
            entries.swap(kept, i);
            kept += 1;
        }
    }
    kept
}

/// Writes the object of `entries` as serde_json does, each value by `value`, which gets where
/// the entry's key starts, the key and the value (the writers that record offsets use that).
pub(super) fn write_object<'n, 'a>(
    out: &mut Vec<u8>,
    entries: Entries<'n, 'a>,
    mut value: impl FnMut(&mut Vec<u8>, usize, &str, &'n Node<'a>) -> Result<(), serde_json::Error>,
) -> Result<(), serde_json::Error> {
    out.push(b'{');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let key_at = out.len();
        write_str(out, k)?;
        out.push(b':');
        value(out, key_at, k, v)?;
    }
    out.push(b'}');
    Ok(())
}

/// One list item's tree: the entries of its objects and the elements of its arrays, each
/// object's (array's) together, and the stacks of the unfinished ones. A value's entries
/// (elements) stay on a stack until it ends, then move, sorted, to the end of the tree's.
/// Kept from item to item ([`Tree::recycle`]), so that reading an item allocates nothing once
/// the buffers have grown: a `Vec` of the exact size per object and array, freed with the
/// item, made musl's allocator map and unmap a page for every item of a list (strace and perf
/// of a start: an `mmap`/`munmap` pair per item, and much of the decoding thread's time spent
/// in the kernel).
#[derive(Debug, Default)]
pub(super) struct Tree<'a> {
    entries: Vec<(Cow<'a, str>, Node<'a>)>,
    items: Vec<Node<'a>>,
    open_entries: Vec<(Cow<'a, str>, Node<'a>)>,
    open_items: Vec<Node<'a>>,
    /// Whether an object of the tree has the key [`RAW_VALUE_TOKEN`].
    pub(super) raw_value: bool,
}

impl<'a> Tree<'a> {
    /// Emptied, for a text of another lifetime, keeping its allocations (collecting an empty
    /// `Vec`'s `into_iter` into one of a type of the same layout reuses its buffer).
    // `filter` could not change the element type's lifetime, which is the point.
    #[allow(clippy::unnecessary_filter_map)]
    pub(super) fn recycle<'b>(self) -> Tree<'b> {
        fn empty<T, U>(mut v: Vec<T>) -> Vec<U> {
            v.clear();
            v.into_iter().filter_map(|_| None).collect()
        }
        Tree {
            entries: empty(self.entries),
            items: empty(self.items),
            open_entries: empty(self.open_entries),
            open_items: empty(self.open_items),
            raw_value: false,
        }
    }

    /// Bytes its buffers hold.
    pub(super) fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Cow<'_, str>, Node<'_>)>();
        let node = std::mem::size_of::<Node<'_>>();
        (self.entries.capacity() + self.open_entries.capacity()) * entry
            + (self.items.capacity() + self.open_items.capacity()) * node
    }

    /// The capacities of its buffers (tests).
    #[cfg(test)]
    pub(super) fn capacities(&self) -> [usize; 4] {
        [
            self.entries.capacity(),
            self.items.capacity(),
            self.open_entries.capacity(),
            self.open_items.capacity(),
        ]
    }

    /// Reads one JSON text (and nothing after it) into the tree, which must be empty; its root.
    pub(super) fn read(&mut self, text: &'a str) -> Result<Node<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let node = Seed(self).deserialize(&mut de)?;
        de.end()?;
        Ok(node)
    }

    /// The entries of `object`, if it is an object.
    pub(super) fn object<'n>(&'n self, object: Option<&Node<'a>>) -> Option<Entries<'n, 'a>> {
        match object {
            Some(Node::Object(span)) => Some(self.entries(*span)),
            _ => None,
        }
    }

    /// The entries of the object at `span`.
    pub(super) fn entries(&self, Span(start, end): Span) -> Entries<'_, 'a> {
        self.entries.get(start..end).unwrap_or_default()
    }

    /// The elements of the array at `span`.
    pub(super) fn items(&self, Span(start, end): Span) -> &[Node<'a>] {
        self.items.get(start..end).unwrap_or_default()
    }

    /// The elements of the array under `key` in `entries` (none if it is not an array).
    pub(super) fn array<'n>(
        &'n self,
        entries: Entries<'n, 'a>,
        key: &str,
    ) -> impl Iterator<Item = &'n Node<'a>> {
        match get(entries, key) {
            Some(Node::Array(span)) => self.items(*span).iter(),
            _ => [].iter(),
        }
    }

    /// The object at `span` without the entries whose key `keep` refuses (order kept).
    pub(super) fn retain(&mut self, Span(start, end): Span, keep: impl Fn(&str) -> bool) -> Span {
        let Some(entries) = self.entries.get_mut(start..end) else {
            return Span(start, start);
        };
        let mut kept = 0;
        for i in 0..entries.len() {
            if keep(&entries[i].0) {
                entries.swap(kept, i);
                kept += 1;
            }
        }
        Span(start, start + kept)
    }

    /// The object at `span` with `value` under `key` in its sorted place, unless the key is
    /// there; in place when the object's entries are the last (the root's are: it ends last).
    pub(super) fn insert_missing(
        &mut self,
        span: Span,
        key: &'static str,
        value: Node<'a>,
    ) -> Span {
        let Err(at) = self.entries(span).binary_search_by(|(k, _)| by_key(k, key)) else {
            return span;
        };
        let Span(mut start, end) = span;
        if end != self.entries.len() {
            let moved = self.entries(span).to_vec();
            start = self.entries.len();
            self.entries.extend(moved);
        }
        self.entries.insert(start + at, (Cow::Borrowed(key), value));
        Span(start, self.entries.len())
    }

    /// Sets the value under `key` of the object at `span`, if it has the key.
    pub(super) fn set(&mut self, Span(start, end): Span, key: &str, value: Node<'a>) {
        let Some(entries) = self.entries.get_mut(start..end) else {
            return;
        };
        if let Ok(at) = entries.binary_search_by(|(k, _)| by_key(k, key)) {
            entries[at].1 = value;
        }
    }

    /// Whether `node` holds a number that is not an integer.
    pub(super) fn has_float(&self, node: &Node<'a>) -> bool {
        match node {
            Node::Number(n) => n.is_f64(),
            Node::Array(span) => self.items(*span).iter().any(|n| self.has_float(n)),
            Node::Object(span) => self.entries(*span).iter().any(|(_, v)| self.has_float(v)),
            _ => false,
        }
    }

    /// Appends `node` to `out` as `serde_json::to_writer` writes it (compact), without its
    /// serializer's call per piece: most of what writing a list item cost, with musl's
    /// `memcpy` for every piece (the oracle tests and the `list_item` fuzz target hold the
    /// bytes to a `Value`'s).
    pub(super) fn write(
        &self,
        out: &mut Vec<u8>,
        node: &Node<'a>,
    ) -> Result<(), serde_json::Error> {
        match node {
            Node::Null => out.extend_from_slice(b"null"),
            Node::Bool(true) => out.extend_from_slice(b"true"),
            Node::Bool(false) => out.extend_from_slice(b"false"),
            Node::Number(n) => serde_json::to_writer(&mut *out, n)?,
            Node::String(s) => write_str(out, s)?,
            Node::Array(span) => {
                out.push(b'[');
                for (i, item) in self.items(*span).iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.write(out, item)?;
                }
                out.push(b']');
            }
            Node::Object(span) => {
                write_object(out, self.entries(*span), |out, _, _, v| self.write(out, v))?
            }
        }
        Ok(())
    }
}

/// Decodes one value of the tree.
struct Seed<'s, 'a>(&'s mut Tree<'a>);

impl<'de> DeserializeSeed<'de> for Seed<'_, 'de> {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, 'de> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Node<'de>, E> {
        // As `Value` does: a non-finite float (never from JSON text) is null.
        Ok(Number::from_f64(n).map_or(Node::Null, Node::Number))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(s.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let tree = self.0;
        let mark = tree.open_items.len();
        while let Some(item) = seq.next_element_seed(Seed(&mut *tree))? {
            tree.open_items.push(item);
        }
        let start = tree.items.len();
        tree.items.extend(tree.open_items.drain(mark..));
        Ok(Node::Array(Span(start, tree.items.len())))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let tree = self.0;
        let mark = tree.open_entries.len();
        while let Some(Key(k)) = map.next_key()? {
            tree.raw_value |= k == RAW_VALUE_TOKEN;
            let value = map.next_value_seed(Seed(&mut *tree))?;
            tree.open_entries.push((k, value));
        }
        let kept = sort_entries(&mut tree.open_entries[mark..]);
        tree.open_entries.truncate(mark + kept);
        let start = tree.entries.len();
        tree.entries.extend(tree.open_entries.drain(mark..));
        Ok(Node::Object(Span(start, tree.entries.len())))
    }
}

/// An object key, borrowed where it needs no unescaping.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// `text` (one JSON value) with every object's keys sorted, written as serializing its
/// `serde_json::Value` writes it (nothing cleaned or filled in): the form of every served
/// object's JSON. `None` when it is not JSON, or must go through a `Value` to mean the same.
pub fn sorted(text: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(text).ok()?;
    let mut tree = Tree::default();
    let root = tree.read(text).ok()?;
    if tree.raw_value {
        return None;
    }
    let mut out = Vec::with_capacity(text.len());
    tree.write(&mut out, &root).ok()?;
    Some(out)
}
