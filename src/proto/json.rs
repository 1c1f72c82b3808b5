//! A served object's JSON text read for the encoder without a `serde_json::Value`, and the one
//! view of a JSON value the encoder reads ([`Json`]), implemented both for a `Value` and for the
//! text read here, so that both give the same message and the same reports by construction.
//!
//! The text is read by serde_json's own deserializer (so what parses, numbers and strings mean
//! exactly what they mean in a `Value`) into a [`Tree`]: strings borrowed from the text where they
//! need no unescaping, each object's entries sorted by key with a repeated key's last value kept
//! (a `Value` map's rule), every object's entries and array's elements in the tree's shared
//! buffers rather than a map and a `String` per key. An object whose first key is serde_json's
//! `RawValue` token means, in a `Value`, the JSON text its string holds; so it does here.
//!
//! `cache/canonical/tree.rs` reads a list item the same way for the cache's canonical bytes; the
//! two could become one module below both `cache` and `proto` (as [`crate::bytes`] is).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// The key by which serde_json's `Value` recognizes an embedded `RawValue` (feature
/// `raw_value`), when it is an object's first key: the object is the JSON text of its string.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// What the encoder reads of one JSON value: a `Value`'s answers, for a `&Value` and for an
/// [`At`] alike. `'t` is how long the strings it gives live.
pub trait Json<'t>: Copy {
    fn is_null(self) -> bool;
    fn is_string(self) -> bool;
    fn is_number(self) -> bool;
    fn is_object(self) -> bool;
    fn as_str(self) -> Option<&'t str>;
    fn as_bool(self) -> Option<bool>;
    /// As `Value::as_i64`: an integer that fits an `i64` (never a float).
    fn as_i64(self) -> Option<i64>;
    /// A number's text as serde_json writes it.
    fn number_text(self) -> Option<String>;
    /// An object's entries in key order, each key once.
    fn entries(self) -> Option<impl Iterator<Item = (&'t str, Self)>>;
    /// An object's value under `key`.
    fn get(self, key: &str) -> Option<Self>;
    /// An array's elements.
    fn items(self) -> Option<impl Iterator<Item = Self>>;
    /// The value as `Value::to_string` writes it (compact JSON).
    fn compact(self) -> String;
}

impl<'t> Json<'t> for &'t Value {
    fn is_null(self) -> bool {
        Value::is_null(self)
    }
    fn is_string(self) -> bool {
        Value::is_string(self)
    }
    fn is_number(self) -> bool {
        Value::is_number(self)
    }
    fn is_object(self) -> bool {
        Value::is_object(self)
    }
    fn as_str(self) -> Option<&'t str> {
        Value::as_str(self)
    }
    fn as_bool(self) -> Option<bool> {
        Value::as_bool(self)
    }
    fn as_i64(self) -> Option<i64> {
        Value::as_i64(self)
    }
    fn number_text(self) -> Option<String> {
        match self {
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
    fn entries(self) -> Option<impl Iterator<Item = (&'t str, Self)>> {
        Some(self.as_object()?.iter().map(|(k, v)| (k.as_str(), v)))
    }
    fn get(self, key: &str) -> Option<Self> {
        self.as_object()?.get(key)
    }
    fn items(self) -> Option<impl Iterator<Item = Self>> {
        Some(self.as_array()?.iter())
    }
    fn compact(self) -> String {
        self.to_string()
    }
}

/// A JSON value of a [`Tree`]: strings borrow from the text where they need no unescaping; an
/// array's elements and an object's entries are in the tree.
#[derive(Clone, Debug)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    /// Its elements: `Tree::items[start..end]`.
    Array(Span),
    /// Its entries, sorted by key, each key once: `Tree::entries[start..end]`.
    Object(Span),
}

/// Where an array's elements or an object's entries are in their [`Tree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
}

/// One JSON text's values. A value's entries (elements) stay on a stack until it ends, then move,
/// sorted, to the end of the tree's.
#[derive(Debug, Default)]
pub struct Tree<'a> {
    entries: Vec<(Cow<'a, str>, Node<'a>)>,
    items: Vec<Node<'a>>,
    open_entries: Vec<(Cow<'a, str>, Node<'a>)>,
    open_items: Vec<Node<'a>>,
}

/// The `null` that a text which does not parse is read as.
pub static NULL: Node<'static> = Node::Null;

impl<'a> Tree<'a> {
    /// Emptied, for a text of another lifetime, keeping its allocations (collecting an empty
    /// `Vec`'s `into_iter` into one of a type of the same layout reuses its buffer).
    // `filter` could not change the element type's lifetime, which is the point.
    #[allow(clippy::unnecessary_filter_map)]
    pub fn recycle<'b>(self) -> Tree<'b> {
        fn empty<T, U>(mut v: Vec<T>) -> Vec<U> {
            v.clear();
            v.into_iter().filter_map(|_| None).collect()
        }
        Tree {
            entries: empty(self.entries),
            items: empty(self.items),
            open_entries: empty(self.open_entries),
            open_items: empty(self.open_items),
        }
    }

    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Cow<'_, str>, Node<'_>)>();
        let node = std::mem::size_of::<Node<'_>>();
        (self.entries.capacity() + self.open_entries.capacity()) * entry
            + (self.items.capacity() + self.open_items.capacity()) * node
    }

    /// Reads one JSON text (and nothing after it but whitespace) into the tree, which must be
    /// empty; its root. What `serde_json::from_slice::<Value>` refuses, this refuses.
    pub fn read(&mut self, text: &'a [u8]) -> Result<Node<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(text);
        let node = Seed::<Borrow>::new(self).deserialize(&mut de)?;
        de.end()?;
        Ok(node)
    }

    /// `node` of this tree, as the encoder reads it.
    pub fn at<'t>(&'t self, node: &'t Node<'a>) -> At<'t, 'a> {
        At { tree: self, node }
    }

    fn entries(&self, span: Span) -> &[(Cow<'a, str>, Node<'a>)] {
        self.entries.get(span.start..span.end).unwrap_or_default()
    }

    fn items(&self, span: Span) -> &[Node<'a>] {
        self.items.get(span.start..span.end).unwrap_or_default()
    }

    /// Appends `node` as `serde_json::to_writer` writes the same `Value`.
    fn write(&self, out: &mut Vec<u8>, node: &Node<'a>) {
        match node {
            Node::Null => out.extend_from_slice(b"null"),
            Node::Bool(true) => out.extend_from_slice(b"true"),
            Node::Bool(false) => out.extend_from_slice(b"false"),
            // Writing to a Vec does not fail, nor does a number or a string.
            Node::Number(n) => serde_json::to_writer(&mut *out, n).unwrap_or_default(),
            Node::String(s) => serde_json::to_writer(&mut *out, &**s).unwrap_or_default(),
            Node::Array(span) => {
                out.push(b'[');
                for (i, item) in self.items(*span).iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.write(out, item);
                }
                out.push(b']');
            }
            Node::Object(span) => {
                out.push(b'{');
                for (i, (k, v)) in self.entries(*span).iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    serde_json::to_writer(&mut *out, &**k).unwrap_or_default();
                    out.push(b':');
                    self.write(out, v);
                }
                out.push(b'}');
            }
        }
    }
}

/// One value of a [`Tree`], as the encoder reads it.
#[derive(Clone, Copy, Debug)]
pub struct At<'t, 'a> {
    tree: &'t Tree<'a>,
    node: &'t Node<'a>,
}

impl<'t, 'a> At<'t, 'a> {
    fn to(self, node: &'t Node<'a>) -> Self {
        At { node, ..self }
    }
    fn object(self) -> Option<&'t [(Cow<'a, str>, Node<'a>)]> {
        match self.node {
            Node::Object(span) => Some(self.tree.entries(*span)),
            _ => None,
        }
    }
}

impl<'t> Json<'t> for At<'t, '_> {
    fn is_null(self) -> bool {
        matches!(self.node, Node::Null)
    }
    fn is_string(self) -> bool {
        matches!(self.node, Node::String(_))
    }
    fn is_number(self) -> bool {
        matches!(self.node, Node::Number(_))
    }
    fn is_object(self) -> bool {
        matches!(self.node, Node::Object(_))
    }
    fn as_str(self) -> Option<&'t str> {
        match self.node {
            Node::String(s) => Some(s),
            _ => None,
        }
    }
    fn as_bool(self) -> Option<bool> {
        match self.node {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn as_i64(self) -> Option<i64> {
        match self.node {
            Node::Number(n) => n.as_i64(),
            _ => None,
        }
    }
    fn number_text(self) -> Option<String> {
        match self.node {
            Node::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
    fn entries(self) -> Option<impl Iterator<Item = (&'t str, Self)>> {
        Some(self.object()?.iter().map(move |(k, v)| (&**k, self.to(v))))
    }
    fn get(self, key: &str) -> Option<Self> {
        let entries = self.object()?;
        let at = entries.binary_search_by(|(k, _)| by_key(k, key)).ok()?;
        Some(self.to(&entries[at].1))
    }
    fn items(self) -> Option<impl Iterator<Item = Self>> {
        match self.node {
            Node::Array(span) => Some(self.tree.items(*span).iter().map(move |n| self.to(n))),
            _ => None,
        }
    }
    fn compact(self) -> String {
        let mut out = Vec::new();
        self.tree.write(&mut out, self.node);
        // Only whole UTF-8 strings and ASCII were written.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The order of object keys: a `Value` map's (`String`'s byte order), without musl's `memcmp`.
fn by_key(a: &str, b: &str) -> std::cmp::Ordering {
    crate::bytes::cmp(a.as_bytes(), b.as_bytes())
}

/// `entries` (one object's, in text order) sorted by key in place; of a repeated key the last
/// value stays, the others are left at the end; how many are kept. An apiserver writes keys in
/// Go struct field order, grid-wrapper's served JSON in key order (already sorted).
fn sort_entries(entries: &mut [(Cow<'_, str>, Node<'_>)]) -> usize {
    if entries.windows(2).all(|w| by_key(&w[0].0, &w[1].0).is_lt()) {
        return entries.len();
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

/// How a [`Seed`] keeps the strings of text that lives `'de` in a tree of strings that live `'a`.
trait Strings<'de, 'a> {
    fn keep(s: Cow<'de, str>) -> Cow<'a, str>;
}

/// Borrowed from the text the tree reads (`'de` is `'a`).
struct Borrow;
impl<'a> Strings<'a, 'a> for Borrow {
    fn keep(s: Cow<'a, str>) -> Cow<'a, str> {
        s
    }
}

/// Copied: a `RawValue`'s text, which lives no longer than the reading of its string.
struct Own;
impl<'a> Strings<'_, 'a> for Own {
    fn keep(s: Cow<'_, str>) -> Cow<'a, str> {
        Cow::Owned(s.into_owned())
    }
}

/// Reads one value into the tree.
struct Seed<'s, 'a, S> {
    tree: &'s mut Tree<'a>,
    strings: PhantomData<S>,
}

impl<'s, 'a, S> Seed<'s, 'a, S> {
    fn new(tree: &'s mut Tree<'a>) -> Self {
        Seed {
            tree,
            strings: PhantomData,
        }
    }
}

impl<'de, 'a, S: Strings<'de, 'a>> DeserializeSeed<'de> for Seed<'_, 'a, S> {
    type Value = Node<'a>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'a, S: Strings<'de, 'a>> Visitor<'de> for Seed<'_, 'a, S> {
    type Value = Node<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node<'a>, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node<'a>, E> {
        Ok(Node::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Node<'a>, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Node<'a>, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Node<'a>, E> {
        // As `Value` does: a non-finite float (never from JSON text) is null.
        Ok(Number::from_f64(n).map_or(Node::Null, Node::Number))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'a>, E> {
        Ok(Node::String(S::keep(Cow::Borrowed(s))))
    }
    fn visit_str<E>(self, s: &str) -> Result<Node<'a>, E> {
        Ok(Node::String(Cow::Owned(s.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'a>, A::Error> {
        let tree = self.tree;
        let mark = tree.open_items.len();
        while let Some(item) = seq.next_element_seed(Seed::<S>::new(&mut *tree))? {
            tree.open_items.push(item);
        }
        let start = tree.items.len();
        tree.items.extend(tree.open_items.drain(mark..));
        let end = tree.items.len();
        Ok(Node::Array(Span { start, end }))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'a>, A::Error> {
        let tree = self.tree;
        let mark = tree.open_entries.len();
        let mut first = true;
        while let Some(Key(k)) = map.next_key()? {
            if first && k == RAW_VALUE_TOKEN {
                return raw_value::<A, S>(tree, map);
            }
            first = false;
            let value = map.next_value_seed(Seed::<S>::new(&mut *tree))?;
            tree.open_entries.push((S::keep(k), value));
        }
        let kept = sort_entries(&mut tree.open_entries[mark..]);
        tree.open_entries.truncate(mark + kept);
        let start = tree.entries.len();
        tree.entries.extend(tree.open_entries.drain(mark..));
        let end = tree.entries.len();
        Ok(Node::Object(Span { start, end }))
    }
}

/// The rest of an object whose first key is [`RAW_VALUE_TOKEN`], as a `Value` reads it: its
/// value is a string, the JSON text of what the object stands for, and nothing follows.
fn raw_value<'de, 'a, A: MapAccess<'de>, S: Strings<'de, 'a>>(
    tree: &mut Tree<'a>,
    mut map: A,
) -> Result<Node<'a>, A::Error> {
    use de::Error as _;
    let Key(text) = map.next_value()?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let node = Seed::<Own>::new(tree)
        .deserialize(&mut de)
        .and_then(|node| de.end().map(|()| node))
        .map_err(A::Error::custom)?;
    if map.next_key::<Key<'de>>()?.is_some() {
        return Err(A::Error::custom("an entry after a raw value"));
    }
    Ok(node)
}

/// An object key (or a raw value's text), borrowed where it needs no unescaping.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_tree_keeps_its_buffers() {
        let text = br#"{"a":[1,2,{"b":"c"}],"d":{"e":null}}"#.to_vec();
        let mut tree = Tree::default();
        tree.read(&text).unwrap();
        let held = tree.bytes();
        assert!(held > 0);
        let tree: Tree<'static> = tree.recycle();
        assert_eq!(tree.bytes(), held);
        assert!(tree.entries.is_empty() && tree.items.is_empty());
    }
}
