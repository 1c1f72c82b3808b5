//! The hand-off from the upstream to the cache: what a reflector gives the cache (a watch
//! event's [`Change`], or a list item by item through [`ListItems`] and [`ListApply`]: the one
//! shape a list has), who takes it (a [`Sink`]),
//! an item left out for its size ([`Oversized`]), the order the first lists come in
//! ([`list_order`]), the rule and counts of objects refused because they do not fit what was
//! asked ([`refused`]), and edge-health's answer, parsed ([`edge_health`]: the map the poller
//! hands the cache). Both the upstream side and the cache import it; it imports neither. Pure
//! but for the refusal counts.

use crate::k8s::{ObjectKey, Resource};
use serde_json::Value;

pub mod edge_health;
pub mod list_order;
pub mod refused;
pub mod runtime_pods;
pub mod site_pods;

use list_order::ListOrder;

/// An item of the list longer than the splitter's bound, not kept: who it is, as far as its
/// first [`crate::upstream::list_split::OVERSIZED_PREFIX_BYTES`] tell ([`crate::upstream::decode::object_ref_from_prefix`]; `None` when they do not),
/// and its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Oversized {
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: Option<String>,
    /// The item's whole length in bytes.
    pub bytes: u64,
}

/// A single change for the cache (a watch event's). A list is never a `Change`: it is taken item
/// by item ([`Sink::list_items`]). The object comes as the upstream sent it (its JSON text, not
/// decoded: the cache makes it canonical on the reflector's thread, as it does a list item), with
/// the key the reflector read from it while checking it.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Object added or modified.
    Upsert(Watched),
    /// Object deleted: its key (the rest of its last state is not needed).
    Delete(ObjectKey),
    /// A new version of an object (a watch's ADDED or MODIFIED) over the object bound, not
    /// taken: the cache keeps serving the version it holds, marked stale, or leaves a new
    /// object out (docs/SEMANTICS.md §7, "Objects over `--max-object-bytes`").
    Oversized(Oversized),
}

/// A watch event's object as the upstream sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// `metadata.namespace` and `metadata.name`, as read from `text`.
    pub key: ObjectKey,
    /// The object's JSON text (`kind`/`apiVersion` possibly absent: the cache fills them in).
    pub text: Box<str>,
}

impl Change {
    /// An upsert of `obj` (for the tests, the fuzz targets and the benches, which build
    /// objects as `Value`s; a reflector hands on the text it read). A nameless object has an
    /// empty key, which the cache drops.
    pub fn upsert(obj: &Value) -> Change {
        Change::Upsert(Watched {
            key: key_or_empty(obj),
            text: obj.to_string().into(),
        })
    }

    /// The deletion of `obj` (see [`Change::upsert`]).
    pub fn delete(obj: &Value) -> Change {
        Change::Delete(key_or_empty(obj))
    }
}

/// The key of `obj`, empty when it has no name.
fn key_or_empty(obj: &Value) -> ObjectKey {
    ObjectKey::of(obj).unwrap_or_default()
}

/// Where a LIST's items go as they are split from the body, one at a time (so that a list
/// need never be held as the texts of all its items at once).
pub trait ListItems {
    /// One item's JSON text.
    fn push(&mut self, text: Box<str>);
    /// Forgets every item pushed so far: the list is read again (from another server).
    fn clear(&mut self);
    /// How many items were pushed since the last [`ListItems::clear`].
    fn len(&self) -> usize;
    /// An item over the object bound, not kept (see
    /// [`crate::upstream::list_split::ListSplitter::with_max_item_bytes`]); ignored by default.
    fn skipped(&mut self, _item: Oversized) {}
    /// Whether it takes no more items: the list is abandoned, and its reader stops reading
    /// (`--max-list-items`); never by default.
    fn full(&self) -> bool {
        false
    }
    /// Whether none was.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The one Node kept whole, when every other Node of this list is kept only as its facts
    /// (`metadata.name`, `metadata.labels`, `status.addresses`): a reader may then hand over any
    /// other Node with only those fields. `None` (the default): every item whole.
    fn facts_only_except(&self) -> Option<&str> {
        None
    }
}

/// A list's items collected as their texts.
#[derive(Debug, Default)]
pub struct Texts(pub Vec<Box<str>>);

impl ListItems for Texts {
    fn push(&mut self, text: Box<str>) {
        self.0.push(text);
    }
    fn clear(&mut self) {
        self.0.clear();
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A sink's taker of one full list ([`Sink::list_items`]): fed the items as they are read,
/// then applied once the list is complete (dropped if it is not).
pub trait ListApply: ListItems {
    /// Applies the complete list: replaces the kind's objects.
    fn apply(self: Box<Self>);
}

/// Receiver of a reflector's changes. A watched object has a `metadata.name` (nameless objects
/// are dropped) and was checked against the resource ([`refused`]); it and list items stay JSON
/// texts, which the cache cleans, types and makes canonical itself.
pub trait Sink: Send + Sync + 'static {
    /// Applies one watch event's change for `kind`.
    fn apply(&self, kind: Resource, change: Change);

    /// Takes a full list of `kind` item by item while it is read (the cache's taker prepares
    /// each item as it comes, so that a list is held only in its prepared form).
    fn list_items(&self, kind: Resource) -> Box<dyn ListApply + '_>;

    /// The order the first lists should come in, if the sink has one (the cache's does:
    /// [`ListOrder`]); `None` lists in any order.
    fn list_order(&self) -> Option<&ListOrder> {
        None
    }
}
