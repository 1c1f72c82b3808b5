//! Which resources the reflectors mirror, in the order they are reported in ([`REFLECTED`]),
//! and query-string building with Go-compatible percent-encoding. The resources themselves, with
//! their collection paths and label selectors, are [`crate::k8s::Resource`]; what a reflector
//! hands the cache is [`crate::handoff`]'s. Pure.

use crate::k8s::Resource;

/// kube-proxy's selector for Services, Endpoints and EndpointSlices (docs/SEMANTICS.md §4);
/// [`Resource::label_selector`] is where it is used.
pub use crate::k8s::SERVICE_PROXY_SELECTOR;

/// The upstream resources a reflector mirrors, in the order reflectors are reported in
/// (`/metrics` reflector lines, `/debug/state` reflectors, the stats array).
pub const REFLECTED: [Resource; 7] = [
    Resource::Nodes,
    Resource::Services,
    Resource::Endpoints,
    Resource::SlicesV1,
    Resource::SlicesV1beta1,
    Resource::CidrsV1,
    Resource::CidrsV1beta1,
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
            (
                Resource::CidrsV1,
                "/apis/networking.k8s.io/v1/servicecidrs",
                false,
            ),
            (
                Resource::CidrsV1beta1,
                "/apis/networking.k8s.io/v1beta1/servicecidrs",
                false,
            ),
        ];
        for (r, path, filtered) in table {
            assert_eq!((r.path(), r.label_selector().is_some()), (path, filtered));
        }
    }
}
