//! The canonical compact bytes of one upstream list item, made without a `serde_json::Value`.
//!
//! The cache compares and keeps upstream objects as compact JSON with every object's keys sorted
//! (what serializing a `Value` gives), cleaned of `metadata.resourceVersion` and
//! `metadata.managedFields`, and with `kind`/`apiVersion` filled in (an apiserver omits them from
//! list items). Decoding each item into a `Value` for that costs a `String` and a map node per key
//! and string: most of a list's decode time (see BENCHMARKS.md). Here an item is read into a tree
//! that borrows its strings from the text (`canonical/tree.rs`), each object's entries sorted, and
//! the tree is written back as serde_json writes it (numbers and strings that need escapes by
//! serde_json itself), so strings and numbers come out exactly as from a `Value`. Keys repeated in
//! one object keep the last value, as a `Value` map does. Equality with the `Value` path is the
//! contract: unit tests here and the `list_item` fuzz target check it on arbitrary input. The same
//! tree gives, for an endpoint object, what publishing it exactly as it came needs ([`AsIs`]).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cache::collection::{rv_stamp, stamp_rv, LabelSet};
use crate::cache::topology::{self, HOSTNAME_LABEL, SERVICE_NAME_LABEL};
use crate::handoff::refused::{self, Reason};
use crate::k8s::{ObjectKey, Resource};

mod addresses;
mod spans;
pub mod tree;
pub use addresses::AddressSpans;
pub use spans::{EndpointSpan, EndpointSpans};
use tree::{get, write_object, write_str, Entries, Node, Tree};

/// What one list item becomes.
#[derive(Debug)]
pub enum Item {
    /// Admitted: its key, canonical bytes, and for an endpoint object of the served version
    /// what serving it exactly as it came needs.
    Kept(ObjectKey, Arc<[u8]>, Option<AsIs>),
    /// Valid JSON, but not an object with a `metadata.name`, or carrying an excluding label.
    Dropped,
    /// An object that does not fit the resource (another `kind` or `apiVersion`, or the wrong
    /// scope): refused ([`crate::handoff::refused`]). Its key and why.
    Misfit(ObjectKey, Reason),
    /// Must go through `serde_json::Value` to mean the same (a `RawValue` token key).
    Slow,
}

/// What publishing an endpoint object exactly as it came needs, read from the same tree (the
/// cache's fast path, `store/as_is.rs`): what the indexes and the view read from its `Value`
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
    /// Where each endpoint (address) is in the bytes, if the object has them.
    pub spans: Option<Spans>,
    /// The bytes packed, when the decoder packs (a list's items, off the lock).
    pub packed: Option<crate::cache::pack::Packed>,
}

/// Where the endpoints of an endpoint object are in its canonical bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spans {
    /// A v1 slice whose `endpoints` is an array: each endpoint.
    Endpoints(EndpointSpans),
    /// A core/v1 Endpoints object whose `subsets` is an array: each address.
    Addresses(AddressSpans),
}

impl AsIs {
    /// `raw` (the bytes this was read with) with `"resourceVersion":"<rv>"` spliced in.
    pub fn stamped(&self, raw: &[u8], rv: u64) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(raw.len() + rv_stamp(rv).len() + 1);
        out.extend_from_slice(raw.get(..self.stamp_at)?);
        self.finish_stamped(out, raw, rv)
    }

    /// [`AsIs::stamped`] with the endpoints whose `keep` is false left out (a topology
    /// Service's object, docs/SEMANTICS.md §2.3): of a v1 slice ([`Spans::Endpoints`]; the kept
    /// ones as they are, `hints` included, §2.10), or of core/v1 Endpoints
    /// ([`Spans::Addresses`]; lists left empty go too, §2.4). `None` without those spans or with a `keep` of another length.
    pub fn pruned(&self, raw: &[u8], keep: &[bool], rv: u64) -> Option<Vec<u8>> {
        match self.spans.as_ref()? {
            Spans::Addresses(addresses) => {
                let mut out = Vec::with_capacity(raw.len() + rv_stamp(rv).len() + 1);
                out.extend_from_slice(raw.get(..self.stamp_at)?);
                self.push_stamp(&mut out, rv);
                addresses.write_kept(&mut out, raw, keep, self.stamp_at)?;
                Some(out)
            }
            Spans::Endpoints(endpoints) => {
                let cut = endpoints.cut(raw, keep, self.stamp_at)?;
                self.finish_stamped(cut, raw, rv)
            }
        }
    }

    /// `keep` for [`AsIs::pruned`]: `kept` of each endpoint's node, in order (a v1 slice's
    /// endpoints or an Endpoints object's addresses), if their spans fit `raw`.
    pub fn keep_by(&self, raw: &[u8], kept: impl FnMut(Option<&str>) -> bool) -> Option<Vec<bool>> {
        let len = raw.len();
        match self.spans.as_ref()? {
            Spans::Endpoints(s) if s.fit(len, self.stamp_at) => {
                Some(s.items.iter().map(|e| e.node(raw)).map(kept).collect())
            }
            Spans::Addresses(a) if a.fit(len, self.stamp_at) => {
                Some(a.nodes(raw).map(kept).collect())
            }
            _ => None,
        }
    }

    /// What the `Value` path gives for `keep` (the spans' own check of their nodes first).
    fn value_pruned(
        &self,
        raw: &[u8],
        value: &serde_json::Value,
        keep: &[bool],
    ) -> Result<serde_json::Value, String> {
        match &self.spans {
            Some(Spans::Endpoints(spans)) => spans.check(raw, value, keep),
            Some(Spans::Addresses(spans)) => spans.check(raw, value, keep),
            None => Err("no spans".into()),
        }
    }

    /// `out` (the bytes before the stamp's place) with the stamp and the rest of `raw`.
    fn finish_stamped(&self, mut out: Vec<u8>, raw: &[u8], rv: u64) -> Option<Vec<u8>> {
        let after = raw.get(self.stamp_at..)?;
        out.reserve(after.len() + 32);
        self.push_stamp(&mut out, rv);
        out.extend_from_slice(after);
        Some(out)
    }

    /// The stamp, with its comma.
    fn push_stamp(&self, out: &mut Vec<u8>, rv: u64) {
        if self.comma == Comma::Before {
            out.push(b',');
        }
        out.extend_from_slice(rv_stamp(rv).as_bytes());
        if self.comma == Comma::After {
            out.push(b',');
        }
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
        let mut i = 0;
        let spans = match self.keep_by(raw, |_| {
            i += 1;
            i % 3 != 2
        }) {
            // Some endpoints kept, some pruned: every third goes.
            Some(keep) => {
                let pruned = stamped(self.value_pruned(raw, &value, &keep)?)?;
                self.pruned(raw, &keep, 1234) == Some(pruned)
            }
            // Without spans the object takes the `Value` path: slower, never wrong.
            None => self.spans.is_none(),
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

#[cfg(test)]
impl AsIs {
    pub(super) fn endpoints(&self) -> Option<&EndpointSpans> {
        match &self.spans {
            Some(Spans::Endpoints(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn endpoints_mut(&mut self) -> Option<&mut EndpointSpans> {
        match &mut self.spans {
            Some(Spans::Endpoints(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn addresses(&self) -> Option<&AddressSpans> {
        match &self.spans {
            Some(Spans::Addresses(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn addresses_mut(&mut self) -> Option<&mut AddressSpans> {
        match &mut self.spans {
            Some(Spans::Addresses(s)) => Some(s),
            _ => None,
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
/// that keep an object out (empty for Nodes). An error is the text's JSON error. For the
/// items of a list, [`Decoder::item`].
pub fn item(text: &str, res: Resource, excluding: &[&str]) -> Result<Item, serde_json::Error> {
    Decoder::default().item(text, res, excluding)
}

/// Reads the items of one list ([`item`]) with buffers kept from item to item, so that an
/// item costs one allocation, of its bytes' exact size (was: a buffer grown per item, copied
/// into the shared bytes and freed; and a `Vec` per object and array of its tree).
#[derive(Debug, Default)]
pub struct Decoder {
    /// The bytes being written.
    out: Vec<u8>,
    /// Empty between items.
    tree: Tree<'static>,
    /// Whether an endpoint object's bytes are packed too ([`AsIs::packed`]).
    pack: bool,
}

impl Decoder {
    /// A decoder that also packs each endpoint object's bytes.
    pub fn packing() -> Decoder {
        Decoder {
            pack: true,
            ..Decoder::default()
        }
    }

    /// [`item`].
    pub fn item(
        &mut self,
        text: &str,
        res: Resource,
        excluding: &[&str],
    ) -> Result<Item, serde_json::Error> {
        let mut tree = std::mem::take(&mut self.tree).recycle();
        let read = read_item(&mut tree, &mut self.out, text, res, excluding, self.pack);
        self.tree = tree.recycle();
        read
    }

    /// Lets go of its buffers if an item made them larger than a few typical items need (a
    /// decoder that lives on keeps no outsized buffers).
    pub fn shrink(&mut self) {
        if self.out.capacity() > Self::KEPT_BYTES || self.tree.bytes() > Self::KEPT_BYTES {
            *self = Decoder::default();
        }
    }

    const KEPT_BYTES: usize = 256 * 1024;
}

fn read_item<'t>(
    tree: &mut Tree<'t>,
    out: &mut Vec<u8>,
    text: &'t str,
    res: Resource,
    excluding: &[&str],
    pack: bool,
) -> Result<Item, serde_json::Error> {
    let root = tree.read(text)?;
    if tree.raw_value {
        return Ok(Item::Slow);
    }
    let Node::Object(mut top) = root else {
        return Ok(Item::Dropped);
    };
    let Some(&Node::Object(meta_at)) = get(tree.entries(top), "metadata") else {
        return Ok(Item::Dropped);
    };
    let meta = tree.entries(meta_at);
    let excluded = tree
        .object(get(meta, "labels"))
        .is_some_and(|labels| excluding.iter().any(|k| get(labels, k).is_some()));
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
    let type_meta = |field: &str| {
        get(tree.entries(top), field).map(|n| match n {
            Node::String(s) => Some(&**s),
            _ => None,
        })
    };
    if let Some(reason) =
        refused::misfit(res, type_meta("kind"), type_meta("apiVersion"), namespace)
    {
        return Ok(Item::Misfit(ObjectKey::new(namespace, name), reason));
    }
    let key = ObjectKey::new(namespace, name);
    let meta_at = tree.retain(meta_at, |k| k != "resourceVersion" && k != "managedFields");
    tree.set(top, "metadata", Node::Object(meta_at));
    for (field, value) in [("kind", res.kind()), ("apiVersion", res.api_version())] {
        top = tree.insert_missing(top, field, Node::String(Cow::Borrowed(value)));
    }
    let top = tree.entries(top);
    let facts = match res {
        Resource::Endpoints | Resource::SlicesV1 => facts(tree, top, res),
        _ => None,
    };
    out.clear();
    let ((stamp_at, comma), spans) = write(out, tree, top, res)?;
    let as_is = facts.map(|(nodes, service, labels)| AsIs {
        nodes,
        service,
        labels,
        stamp_at,
        comma,
        spans,
        packed: if pack {
            crate::cache::pack::pack(out)
        } else {
            None
        },
    });
    Ok(Item::Kept(key, Arc::from(&out[..]), as_is))
}

/// Nodes, Service and labels of an endpoint object served as it came; `None` when serving
/// would change more than the stamp (`kind`/`apiVersion` of another version) or it has `spec`.
fn facts<'a>(
    tree: &Tree<'a>,
    top: Entries<'_, 'a>,
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
    if top.iter().any(|(_, v)| tree.has_float(v)) {
        return None;
    }
    let text = |n: Option<&Node<'_>>| match n {
        Some(Node::String(s)) => Some(s.to_string()),
        _ => None,
    };
    let node = |n: Option<&Node<'_>>| text(n).filter(|s| !s.is_empty());
    let meta = tree.object(get(top, "metadata"));
    let labels = tree.object(meta.and_then(|m| get(m, "labels")));
    let pairs: Vec<(Arc<str>, Arc<str>)> = labels
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((Arc::from(&**k), text(Some(v))?.into())))
        .collect();
    let service = labels
        .and_then(|l| node(get(l, SERVICE_NAME_LABEL)))
        .map(|svc| {
            let ns = text(meta.and_then(|m| get(m, "namespace"))).unwrap_or_default();
            ObjectKey::new(&ns, &svc)
        });
    let mut nodes = BTreeSet::new();
    for subset in tree
        .array(top, "subsets")
        .filter_map(|s| tree.object(Some(s)))
    {
        for field in ["addresses", "notReadyAddresses"] {
            for addr in tree
                .array(subset, field)
                .filter_map(|a| tree.object(Some(a)))
            {
                nodes.extend(node(get(addr, "nodeName")));
            }
        }
    }
    for ep in tree
        .array(top, "endpoints")
        .filter_map(|e| tree.object(Some(e)))
    {
        let found = endpoint_name(ep)
            .or_else(|| endpoint_host(tree, ep, "topology"))
            .or_else(|| endpoint_host(tree, ep, "deprecatedTopology"));
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
fn endpoint_host<'n, 'a>(
    tree: &'n Tree<'a>,
    ep: Entries<'n, 'a>,
    topology_field: &str,
) -> Option<&'n str> {
    non_empty(
        tree.object(get(ep, topology_field))
            .and_then(|t| get(t, HOSTNAME_LABEL)),
    )
}

fn non_empty<'n>(n: Option<&'n Node<'_>>) -> Option<&'n str> {
    match n {
        Some(Node::String(s)) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// The object `top` as serde_json writes it (compact), where in `metadata` the stamp goes, and
/// where each element of a v1 slice's `endpoints` array is, or each address of an Endpoints
/// object's `subsets`. Written by hand at the top two levels (more in those arrays) only to
/// learn those offsets; the bytes are those of `serde_json::to_vec` (the oracle tests compare
/// them with a `Value`'s).
type Written = ((usize, Comma), Option<Spans>);
fn write<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    top: Entries<'_, 'a>,
    res: Resource,
) -> Result<Written, serde_json::Error> {
    let mut place = (0, Comma::None);
    let mut spans = None;
    out.push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k)?;
        out.push(b':');
        match v {
            Node::Object(meta) if k == "metadata" => {
                let meta = tree.entries(*meta);
                let mut at = None;
                write_object(out, meta, |out, key_at, mk, mv| {
                    if at.is_none() && mk > "resourceVersion" {
                        at = Some((key_at, Comma::After));
                    }
                    tree.write(out, mv)
                })?;
                let end = if meta.is_empty() {
                    Comma::None
                } else {
                    Comma::Before
                };
                // Else last, before the closing brace.
                place = at.unwrap_or((out.len() - 1, end));
            }
            Node::Array(items) if res == Resource::SlicesV1 && k == "endpoints" => {
                spans =
                    spans::write_endpoints(out, tree, tree.items(*items))?.map(Spans::Endpoints);
            }
            Node::Array(items) if res == Resource::Endpoints && k == "subsets" => {
                spans =
                    addresses::write_subsets(out, tree, tree.items(*items))?.map(Spans::Addresses);
            }
            _ => tree.write(out, v)?,
        }
    }
    out.push(b'}');
    Ok((place, spans))
}

#[cfg(test)]
mod tests;
