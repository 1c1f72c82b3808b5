//! The canonical compact bytes of one upstream list item, made without a `serde_json::Value`.
//!
//! The cache compares and keeps upstream objects as compact JSON with every object's keys
//! sorted (what serializing a `Value` gives), cleaned of `metadata.resourceVersion` and
//! `metadata.managedFields`, and with `kind`/`apiVersion` filled in (an apiserver omits them
//! from list items). Decoding each item into a `Value` for that costs a `String` and a map node
//! per key and string: at scale S most of a list's decode time. Here an item is read into a
//! tree that borrows its strings from the text ([`Node`]), each object's entries are sorted
//! in a `Vec`, and the tree is written back through serde_json's own serializer, so strings
//! and numbers come out exactly as from a `Value`. Keys repeated in one object keep the last
//! value, as a `Value` map does. Equality with the `Value` path is the contract: unit tests
//! here and the `list_item` fuzz target check it on arbitrary input.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Number;

use crate::k8s::{ObjectKey, Resource};

/// The key by which serde_json's `Value` recognizes an embedded `RawValue` (feature
/// `raw_value`): an item carrying it is decoded the slow way, so that it means the same.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A JSON value whose strings borrow from the text where they need no unescaping.
#[derive(Debug)]
enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Entries sorted by key, each key once (see [`sorted`]).
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

/// What one list item becomes.
#[derive(Debug)]
pub enum Item {
    /// Admitted: its key and canonical bytes.
    Kept(ObjectKey, Vec<u8>),
    /// Valid JSON, but not an object with a `metadata.name`, or carrying an excluding label.
    Dropped,
    /// Must go through `serde_json::Value` to mean the same (a `RawValue` token key).
    Slow,
}

/// Reads `text` (one list item of `res`) into its canonical form; `excluding` are the labels
/// that keep an object out (empty for Nodes). An error is the text's JSON error.
pub fn item(text: &str, res: Resource, excluding: &[&str]) -> Result<Item, serde_json::Error> {
    let mut node: Node<'_> = serde_json::from_str(text)?;
    if node.mentions(RAW_VALUE_TOKEN) {
        return Ok(Item::Slow);
    }
    let Node::Object(top) = &mut node else {
        return Ok(Item::Dropped);
    };
    let Some(Node::Object(meta)) = get_mut(top, "metadata") else {
        return Ok(Item::Dropped);
    };
    let excluded = matches!(get(meta, "labels"), Some(Node::Object(labels))
        if excluding.iter().any(|k| get(labels, k).is_some()));
    let name: &str = match get(meta, "name") {
        Some(Node::String(n)) if !n.is_empty() => n,
        _ => return Ok(Item::Dropped),
    };
    if excluded {
        return Ok(Item::Dropped);
    }
    let namespace: &str = match get(meta, "namespace") {
        Some(Node::String(ns)) => ns,
        _ => "",
    };
    let key = ObjectKey::new(namespace, name);
    meta.retain(|(k, _)| k != "resourceVersion" && k != "managedFields");
    for (field, value) in [("kind", res.kind()), ("apiVersion", res.api_version())] {
        if let Err(at) = top.binary_search_by(|(k, _)| (**k).cmp(field)) {
            top.insert(
                at,
                (Cow::Borrowed(field), Node::String(Cow::Borrowed(value))),
            );
        }
    }
    // Serializing a tree of strings, numbers and sorted maps cannot fail.
    let bytes = serde_json::to_vec(&node)?;
    Ok(Item::Kept(key, bytes))
}

fn get<'n, 'a>(entries: &'n [(Cow<'a, str>, Node<'a>)], key: &str) -> Option<&'n Node<'a>> {
    let at = entries.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
    Some(&entries[at].1)
}

fn get_mut<'n, 'a>(
    entries: &'n mut [(Cow<'a, str>, Node<'a>)],
    key: &str,
) -> Option<&'n mut Node<'a>> {
    let at = entries.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
    Some(&mut entries[at].1)
}

/// `entries` sorted by key; of a repeated key the last value stays (a `Value` map's rule).
fn sorted<'a>(mut entries: Vec<(Cow<'a, str>, Node<'a>)>) -> Vec<(Cow<'a, str>, Node<'a>)> {
    if entries.windows(2).all(|w| w[0].0 < w[1].0) {
        return entries; // the common case: already sorted
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0)); // stable: repeats stay in text order
    let mut out: Vec<(Cow<'a, str>, Node<'a>)> = Vec::with_capacity(entries.len());
    for entry in entries {
        match out.last_mut() {
            Some(last) if last.0 == entry.0 => *last = entry,
            _ => out.push(entry),
        }
    }
    out
}

impl Node<'_> {
    /// Whether any object in the tree has the key `token`.
    fn mentions(&self, token: &str) -> bool {
        match self {
            Node::Array(items) => items.iter().any(|n| n.mentions(token)),
            Node::Object(entries) => entries.iter().any(|(k, v)| k == token || v.mentions(token)),
            _ => false,
        }
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
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
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(Key(k)) = map.next_key()? {
            entries.push((k, map.next_value()?));
        }
        Ok(Node::Object(sorted(entries)))
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

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Number(n) => n.serialize(s),
            Node::String(v) => s.serialize_str(v),
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(&**k, v)?;
                }
                map.end()
            }
        }
    }
}

#[cfg(test)]
#[path = "canonical_tests.rs"]
mod tests;
