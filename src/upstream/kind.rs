//! The upstream resources a reflector mirrors, their collection paths and label selectors, and
//! query-string building with Go-compatible percent-encoding. Pure.

use crate::k8s::Resource;
use serde_json::Value;

use super::list_order::ListOrder;

/// kube-proxy's selector for Services, Endpoints and EndpointSlices (TOPOLOGY.md §6).
pub const SERVICE_PROXY_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";
/// An upstream resource that a reflector mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UpstreamKind {
    /// core/v1 Nodes (unfiltered).
    Nodes,
    /// core/v1 Services.
    Services,
    /// core/v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io/v1 EndpointSlices.
    SlicesV1,
    /// discovery.k8s.io/v1beta1 EndpointSlices.
    SlicesV1beta1,
}

impl UpstreamKind {
    /// Every upstream resource, in rendering order.
    pub const ALL: [UpstreamKind; 5] = [
        UpstreamKind::Nodes,
        UpstreamKind::Services,
        UpstreamKind::Endpoints,
        UpstreamKind::SlicesV1,
        UpstreamKind::SlicesV1beta1,
    ];

    /// Which of the cache's four collections the kind fills, 0..=3 (slices of either version
    /// fill the same one).
    pub fn slot(self) -> u8 {
        match self {
            UpstreamKind::Nodes => 0,
            UpstreamKind::Services => 1,
            UpstreamKind::Endpoints => 2,
            UpstreamKind::SlicesV1 | UpstreamKind::SlicesV1beta1 => 3,
        }
    }

    /// The matching served resource (its kind, apiVersion, plural).
    pub fn resource(self) -> Resource {
        match self {
            UpstreamKind::Nodes => Resource::Nodes,
            UpstreamKind::Services => Resource::Services,
            UpstreamKind::Endpoints => Resource::Endpoints,
            UpstreamKind::SlicesV1 => Resource::SlicesV1,
            UpstreamKind::SlicesV1beta1 => Resource::SlicesV1beta1,
        }
    }

    /// Cluster-wide collection path.
    pub fn path(self) -> &'static str {
        match self {
            UpstreamKind::Nodes => "/api/v1/nodes",
            UpstreamKind::Services => "/api/v1/services",
            UpstreamKind::Endpoints => "/api/v1/endpoints",
            UpstreamKind::SlicesV1 => "/apis/discovery.k8s.io/v1/endpointslices",
            UpstreamKind::SlicesV1beta1 => "/apis/discovery.k8s.io/v1beta1/endpointslices",
        }
    }

    /// The label selector used upstream, if any.
    pub fn label_selector(self) -> Option<&'static str> {
        (self != UpstreamKind::Nodes).then_some(SERVICE_PROXY_SELECTOR)
    }
}

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
    fn kinds_map_to_paths_resources_and_selectors() {
        let table = [
            (UpstreamKind::Nodes, "/api/v1/nodes", Resource::Nodes, false),
            (
                UpstreamKind::Services,
                "/api/v1/services",
                Resource::Services,
                true,
            ),
            (
                UpstreamKind::Endpoints,
                "/api/v1/endpoints",
                Resource::Endpoints,
                true,
            ),
            (
                UpstreamKind::SlicesV1,
                "/apis/discovery.k8s.io/v1/endpointslices",
                Resource::SlicesV1,
                true,
            ),
            (
                UpstreamKind::SlicesV1beta1,
                "/apis/discovery.k8s.io/v1beta1/endpointslices",
                Resource::SlicesV1beta1,
                true,
            ),
        ];
        for (k, path, r, filtered) in table {
            assert_eq!(
                (k.path(), k.resource(), k.label_selector().is_some()),
                (path, r, filtered)
            );
        }
    }
}

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
    /// (what reflectors send: the cache decodes one item at a time, which keeps a relist's
    /// memory near the size of its JSON).
    List(Vec<Box<str>>),
}

/// Receiver of a reflector's changes. Watched objects carry `kind`, `apiVersion` and a
/// `metadata.name` (filled in; nameless objects are dropped); list items stay JSON texts,
/// which the cache cleans and types itself.
pub trait Sink: Send + Sync + 'static {
    /// Applies one change for `kind`.
    fn apply(&self, kind: UpstreamKind, change: Change);

    /// The order the first lists should come in, if the sink has one (the cache's does:
    /// [`ListOrder`]); `None` lists in any order.
    fn list_order(&self) -> Option<&ListOrder> {
        None
    }
}
