//! What a reflector hands the cache: the order reflectors are reported in, the changes and the
//! sink they go to, and query-string building with Go-compatible percent-encoding. The
//! resources themselves, with their collection paths and label selectors, are
//! [`crate::k8s::Resource`]. Pure.

use crate::k8s::Resource;
use serde_json::Value;

use super::list_order::ListOrder;

/// kube-proxy's selector for Services, Endpoints and EndpointSlices (docs/SEMANTICS.md §4);
/// [`Resource::label_selector`] is where it is used.
pub use crate::k8s::SERVICE_PROXY_SELECTOR;

/// The upstream resources a reflector mirrors, in the order reflectors are reported in
/// (`/metrics` reflector lines, `/debug/state` reflectors, the stats array).
pub const REFLECTED: [Resource; 5] = [
    Resource::Nodes,
    Resource::Services,
    Resource::Endpoints,
    Resource::SlicesV1,
    Resource::SlicesV1beta1,
];

/// Percent-encodes a query value like Go's `url.QueryEscape` (space as `%20`).
#[cfg_attr(not(feature = "io"), allow(dead_code))]
pub(crate) fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path?k=v&…` from pairs already in sorted key order; empty values are omitted.
#[cfg_attr(not(feature = "io"), allow(dead_code))]
pub(crate) fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", escape(v)))
        .collect();
    if q.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", q.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_escaping_matches_go() {
        assert_eq!(
            escape(SERVICE_PROXY_SELECTOR),
            "%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"
        );
        assert_eq!(escape("a b~_-./"), "a%20b~_-.%2F");
        assert_eq!(with_query("/p", &[("a", ""), ("b", "1")]), "/p?b=1");
        assert_eq!(with_query("/p", &[("a", "")]), "/p");
    }

    #[test]
    fn resources_map_to_paths_and_selectors() {
        let table = [
            (Resource::Nodes, "/api/v1/nodes", false),
            (Resource::Services, "/api/v1/services", true),
            (Resource::Endpoints, "/api/v1/endpoints", true),
            (
                Resource::SlicesV1,
                "/apis/discovery.k8s.io/v1/endpointslices",
                true,
            ),
            (
                Resource::SlicesV1beta1,
                "/apis/discovery.k8s.io/v1beta1/endpointslices",
                true,
            ),
        ];
        for (r, path, filtered) in table {
            assert_eq!((r.path(), r.label_selector().is_some()), (path, filtered));
        }
    }
}

pub use crate::upstream::list_split::Oversized;

/// A change for the cache.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Object added or modified.
    Upsert(Value),
    /// Object deleted (its last state).
    Delete(Value),
    /// The full list (initial or relist); the cache diffs it against what it holds.
    Replace(Vec<Value>),
    /// The same as [`Change::Replace`], each item still its JSON text as the apiserver sent it
    /// (what the default [`Sink::list_items`] taker applies; the cache's own taker prepares
    /// each item as it is read instead, and never holds the list as texts).
    List(Vec<Box<str>>),
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
    /// Whether none was.
    fn is_empty(&self) -> bool {
        self.len() == 0
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
    fn apply(self: Box<Self>, sink: &dyn Sink);
}

/// The default taker: the texts, applied as [`Change::List`].
struct TextsFor {
    kind: Resource,
    texts: Texts,
}

impl ListItems for TextsFor {
    fn push(&mut self, text: Box<str>) {
        self.texts.push(text);
    }
    fn clear(&mut self) {
        self.texts.clear();
    }
    fn len(&self) -> usize {
        self.texts.len()
    }
}

impl ListApply for TextsFor {
    fn apply(self: Box<Self>, sink: &dyn Sink) {
        sink.apply(self.kind, Change::List(self.texts.0));
    }
}

/// Receiver of a reflector's changes. Watched objects carry `kind`, `apiVersion` and a
/// `metadata.name` (filled in; nameless objects are dropped); list items stay JSON texts,
/// which the cache cleans and types itself.
pub trait Sink: Send + Sync + 'static {
    /// Applies one change for `kind`.
    fn apply(&self, kind: Resource, change: Change);

    /// Takes a full list of `kind` item by item while it is read. The default collects the
    /// texts and applies them as one [`Change::List`]; the cache prepares each item as it
    /// comes, so that a list is held only in its prepared form.
    fn list_items(&self, kind: Resource) -> Box<dyn ListApply + '_> {
        Box::new(TextsFor {
            kind,
            texts: Texts::default(),
        })
    }

    /// The order the first lists should come in, if the sink has one (the cache's does:
    /// [`ListOrder`]); `None` lists in any order.
    fn list_order(&self) -> Option<&ListOrder> {
        None
    }
}
