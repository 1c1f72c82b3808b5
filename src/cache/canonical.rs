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
//! here and the `list_item` fuzz target check it on arbitrary input. The same tree gives, for
//! an endpoint object, what publishing it exactly as it came needs ([`AsIs`]).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Number;

use crate::cache::topology::{self, HOSTNAME_LABEL, SERVICE_NAME_LABEL};
use crate::cache::view::{rv_stamp, stamp_rv, LabelSet};
use crate::k8s::{ObjectKey, Resource};

#[path = "canonical_spans.rs"]
mod spans;
pub use spans::{EndpointSpan, EndpointSpans};

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
    /// Admitted: its key, canonical bytes, and for an endpoint object of the served version
    /// what serving it exactly as it came needs.
    Kept(ObjectKey, Vec<u8>, Option<AsIs>),
    /// Valid JSON, but not an object with a `metadata.name`, or carrying an excluding label.
    Dropped,
    /// Must go through `serde_json::Value` to mean the same (a `RawValue` token key).
    Slow,
}

/// What publishing an endpoint object exactly as it came needs, read from the same tree (the
/// cache's fast path, `store_as_is.rs`): what the indexes and the view read from its `Value`
/// otherwise, and where its resourceVersion stamp goes in its canonical bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsIs {
    /// Nodes its endpoints are on, as [`crate::cache::topology::endpoint_nodes`] reads them.
    pub nodes: BTreeSet<String>,
    /// A slice's Service, as [`crate::cache::topology::slice_service`] reads it.
    pub service: Option<ObjectKey>,
    /// `metadata.labels`, as [`LabelSet::of`] reads them.
    pub labels: LabelSet,
    /// Offset in the bytes where `"resourceVersion":"<rv>"` goes (its sorted place in
    /// `metadata`), and the comma that goes with it.
    pub stamp_at: usize,
    /// See `stamp_at`.
    pub comma: Comma,
    /// For a v1 slice whose `endpoints` is an array: where each endpoint is in the bytes.
    pub endpoints: Option<EndpointSpans>,
}

impl AsIs {
    /// `raw` (the bytes this was read with) with `"resourceVersion":"<rv>"` spliced in.
    pub fn stamped(&self, raw: &[u8], rv: u64) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(raw.len() + rv_stamp(rv).len() + 1);
        out.extend_from_slice(raw.get(..self.stamp_at)?);
        self.finish_stamped(out, raw, rv)
    }

    /// [`AsIs::stamped`] of a v1 slice with the endpoints whose `keep` is false cut out and
    /// `hints` cut out of the kept ones (§2, §7: a topology Service's slice); `None` without
    /// [`AsIs::endpoints`] or with a `keep` of another length.
    pub fn pruned(&self, raw: &[u8], keep: &[bool], rv: u64) -> Option<Vec<u8>> {
        let cut = self.endpoints.as_ref()?.cut(raw, keep, self.stamp_at)?;
        self.finish_stamped(cut, raw, rv)
    }

    /// `out` (the bytes before the stamp's place) with the stamp and the rest of `raw`.
    fn finish_stamped(&self, mut out: Vec<u8>, raw: &[u8], rv: u64) -> Option<Vec<u8>> {
        let stamp = rv_stamp(rv);
        let after = raw.get(self.stamp_at..)?;
        out.reserve(stamp.len() + 1 + after.len());
        if self.comma == Comma::Before {
            out.push(b',');
        }
        out.extend_from_slice(stamp.as_bytes());
        if self.comma == Comma::After {
            out.push(b',');
        }
        out.extend_from_slice(after);
        Some(out)
    }

    /// The fast path's contract, checked by the tests, the `list_item` fuzz target and debug
    /// builds: these are the facts the `Value` path reads from `raw`, and the stamp goes where
    /// a `Value` map puts `metadata.resourceVersion`.
    pub fn check(&self, raw: &[u8]) -> Result<(), String> {
        let value: serde_json::Value =
            serde_json::from_slice(raw).map_err(|e| format!("not JSON: {e}"))?;
        let stamped = |mut v: serde_json::Value| {
            stamp_rv(&mut v, 1234);
            serde_json::to_vec(&v).map_err(|e| e.to_string())
        };
        let want = stamped(value.clone())?;
        let spans = match &self.endpoints {
            // Some endpoints kept, some pruned: every third goes.
            Some(spans) => {
                let keep: Vec<bool> = (0..spans.items.len()).map(|i| i % 3 != 1).collect();
                let pruned = stamped(spans.check(raw, &value, &keep)?)?;
                spans.fit(raw.len(), self.stamp_at) && self.pruned(raw, &keep, 1234) == Some(pruned)
            }
            // Without spans the slice takes the `Value` path: slower, never wrong.
            None => true,
        };
        let checks = [
            ("nodes", self.nodes == topology::endpoint_nodes(&value)),
            ("labels", self.labels == LabelSet::of(&value)),
            ("service", self.service == topology::slice_service(&value)),
            ("stamp", self.stamped(raw, 1234) == Some(want)),
            ("endpoint spans", spans),
        ];
        match checks.iter().find(|(_, ok)| !ok) {
            Some((what, _)) => Err(format!("{what} differ from the Value path's for {value}")),
            None => Ok(()),
        }
    }
}

/// Where the stamp's comma goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comma {
    /// Before a greater key: `"resourceVersion":"…",`.
    After,
    /// Last in `metadata`: `,"resourceVersion":"…"`.
    Before,
    /// Alone in an empty `metadata`.
    None,
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
    let facts = match res {
        Resource::Endpoints | Resource::SlicesV1 => facts(top, res),
        _ => None,
    };
    let (bytes, (stamp_at, comma), endpoints) = write(top, res == Resource::SlicesV1)?;
    let as_is = facts.map(|(nodes, service, labels)| AsIs {
        nodes,
        service,
        labels,
        stamp_at,
        comma,
        endpoints,
    });
    Ok(Item::Kept(key, bytes, as_is))
}

/// Nodes, Service and labels of an endpoint object served as it came; `None` when serving
/// would change more than the stamp (`kind`/`apiVersion` of another version) or it has `spec`.
fn facts(
    top: &[(Cow<'_, str>, Node<'_>)],
    res: Resource,
) -> Option<(BTreeSet<String>, Option<ObjectKey>, LabelSet)> {
    let is = |k: &str, want: &str| matches!(get(top, k), Some(Node::String(s)) if s == want);
    if !is("kind", res.kind()) || !is("apiVersion", res.api_version()) || get(top, "spec").is_some()
    {
        return None;
    }
    // A float may not survive a second decode and encode digit for digit (serde_json's float
    // parsing is not exact), and the splice must give what re-serializing would: endpoint
    // objects carry none, so any float sends the object the `Value` way.
    if top.iter().any(|(_, v)| v.has_float()) {
        return None;
    }
    let text = |n: Option<&Node<'_>>| match n {
        Some(Node::String(s)) => Some(s.to_string()),
        _ => None,
    };
    let node = |n: Option<&Node<'_>>| text(n).filter(|s| !s.is_empty());
    let meta = object(get(top, "metadata"));
    let labels = object(meta.and_then(|m| get(m, "labels")));
    let pairs: Vec<(Box<str>, Box<str>)> = labels
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((Box::from(&**k), text(Some(v))?.into())))
        .collect();
    let service = labels
        .and_then(|l| node(get(l, SERVICE_NAME_LABEL)))
        .map(|svc| {
            let ns = text(meta.and_then(|m| get(m, "namespace"))).unwrap_or_default();
            ObjectKey::new(&ns, &svc)
        });
    let mut nodes = BTreeSet::new();
    for subset in array(top, "subsets").filter_map(|s| object(Some(s))) {
        for field in ["addresses", "notReadyAddresses"] {
            for addr in array(subset, field).filter_map(|a| object(Some(a))) {
                nodes.extend(node(get(addr, "nodeName")));
            }
        }
    }
    for ep in array(top, "endpoints").filter_map(|e| object(Some(e))) {
        let found = endpoint_name(ep)
            .or_else(|| endpoint_host(ep, "topology"))
            .or_else(|| endpoint_host(ep, "deprecatedTopology"));
        nodes.extend(found.map(str::to_string));
    }
    Some((nodes, service, LabelSet::from_pairs(pairs)))
}

/// A slice endpoint's `nodeName`, if a non-empty string (the tree's
/// [`topology::slice_endpoint_node`], with [`endpoint_host`]).
fn endpoint_name<'n>(ep: Entries<'n, '_>) -> Option<&'n str> {
    non_empty(get(ep, "nodeName"))
}

/// The hostname label of a slice endpoint's `topology_field` object, if a non-empty string.
fn endpoint_host<'n>(ep: Entries<'n, '_>, topology_field: &str) -> Option<&'n str> {
    non_empty(object(get(ep, topology_field)).and_then(|t| get(t, HOSTNAME_LABEL)))
}

fn non_empty<'n>(n: Option<&'n Node<'_>>) -> Option<&'n str> {
    match n {
        Some(Node::String(s)) if !s.is_empty() => Some(s),
        _ => None,
    }
}

type Entries<'n, 'a> = &'n [(Cow<'a, str>, Node<'a>)];

fn object<'n, 'a>(n: Option<&'n Node<'a>>) -> Option<Entries<'n, 'a>> {
    match n {
        Some(Node::Object(entries)) => Some(entries),
        _ => None,
    }
}

fn array<'n, 'a>(entries: Entries<'n, 'a>, key: &str) -> impl Iterator<Item = &'n Node<'a>> {
    match get(entries, key) {
        Some(Node::Array(items)) => items.iter(),
        _ => [].iter(),
    }
}

/// The object `top` as serde_json writes it (compact), where in `metadata` the stamp goes, and
/// with `spans` where each element of an `endpoints` array is. Written by hand at the top two
/// levels (three in `endpoints`) only to learn those offsets; the bytes are those of
/// `serde_json::to_vec` (the oracle tests compare them with a `Value`'s).
type Written = (Vec<u8>, (usize, Comma), Option<EndpointSpans>);
fn write(top: Entries<'_, '_>, spans: bool) -> Result<Written, serde_json::Error> {
    let mut out = Vec::with_capacity(1024);
    let mut place = (0, Comma::None);
    let mut endpoints = None;
    out.push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &**k)?;
        out.push(b':');
        match v {
            Node::Object(meta) if k == "metadata" => {
                out.push(b'{');
                let mut at = None;
                for (j, (mk, mv)) in meta.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    if at.is_none() && &**mk > "resourceVersion" {
                        at = Some((out.len(), Comma::After));
                    }
                    serde_json::to_writer(&mut out, &**mk)?;
                    out.push(b':');
                    serde_json::to_writer(&mut out, mv)?;
                }
                let end = if meta.is_empty() {
                    Comma::None
                } else {
                    Comma::Before
                };
                place = at.unwrap_or((out.len(), end));
                out.push(b'}');
            }
            Node::Array(items) if spans && k == "endpoints" => {
                endpoints = spans::write_endpoints(&mut out, items)?;
            }
            _ => serde_json::to_writer(&mut out, v)?,
        }
    }
    out.push(b'}');
    Ok((out, place, endpoints))
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

/// `entries` sorted by key; of a repeated key the last value stays (a `Value` map's rule). An
/// apiserver writes keys in Go struct field order, so most objects of a real list take the
/// sort (criterion `prepare/slices_list_go_order_scale_S`: ~20 % more than sorted text; an
/// in-place sort and dedup measured no faster than this copy).
fn sorted<'a>(mut entries: Vec<(Cow<'a, str>, Node<'a>)>) -> Vec<(Cow<'a, str>, Node<'a>)> {
    if entries.windows(2).all(|w| w[0].0 < w[1].0) {
        return entries; // already sorted (the simulator, `serde_json::Value`)
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
    /// Whether the tree holds a number that is not an integer.
    fn has_float(&self) -> bool {
        match self {
            Node::Number(n) => n.is_f64(),
            Node::Array(items) => items.iter().any(Node::has_float),
            Node::Object(entries) => entries.iter().any(|(_, v)| v.has_float()),
            _ => false,
        }
    }

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
