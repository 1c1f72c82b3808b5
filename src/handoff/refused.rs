//! Upstream objects refused because they do not fit what was asked (docs/SEMANTICS.md §7,
//! "Objects that do not fit"): a `kind` or `apiVersion` (when present) of another resource than
//! the one listed or watched, the wrong scope (a Node or ServiceCIDR with a namespace, a
//! Service, Endpoints or EndpointSlice without one), or, on a watch stream, a resourceVersion
//! older than the stream has reached. The rule ([`misfit`], [`older`]) is pure; the counts are
//! process-wide atomics that both sides of the hand-off add to and `/metrics` reads.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde_json::Value;

use crate::k8s::Resource;

/// Why an object was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its `kind` is not the resource's.
    Kind,
    /// Its `apiVersion` is not the resource's version.
    ApiVersion,
    /// A namespace on a cluster-scoped resource, or none on a namespaced one.
    Scope,
    /// A watch event whose object's resourceVersion is older than the stream's position.
    OlderVersion,
}

impl Reason {
    /// Every reason, in the order `/metrics` lists them.
    pub const ALL: [Reason; 4] = [
        Reason::Kind,
        Reason::ApiVersion,
        Reason::Scope,
        Reason::OlderVersion,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::Kind => "kind",
            Reason::ApiVersion => "api_version",
            Reason::Scope => "scope",
            Reason::OlderVersion => "older_resource_version",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Whether an object with these fields fits `res`: `kind` and `api_version` as the object has
/// them (`None`: absent, as in a JSON list's items; `Some(None)`: present but not a string),
/// `namespace` its `metadata.namespace` (`""` when absent). `None` when it fits.
pub fn misfit(
    res: Resource,
    kind: Option<Option<&str>>,
    api_version: Option<Option<&str>>,
    namespace: &str,
) -> Option<Reason> {
    if kind.is_some_and(|k| k != Some(res.kind())) {
        return Some(Reason::Kind);
    }
    if api_version.is_some_and(|v| v != Some(res.api_version())) {
        return Some(Reason::ApiVersion);
    }
    if res.namespaced() == namespace.is_empty() {
        return Some(Reason::Scope);
    }
    None
}

/// [`misfit`] of an object as a `Value`.
pub fn misfit_value(res: Resource, obj: &Value) -> Option<Reason> {
    let type_meta = |field: &str| obj.get(field).map(Value::as_str);
    let namespace = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    misfit(res, type_meta("kind"), type_meta("apiVersion"), namespace)
}

/// Whether `object_rv` is older than `position` (the resourceVersion a watch stream has
/// reached). Kubernetes RVs are opaque strings, so only two whole numbers are compared (what an
/// etcd-backed apiserver and grid-wrapper hand out); anything else is never older.
pub fn older(object_rv: &str, position: &str) -> bool {
    match (object_rv.parse::<u64>(), position.parse::<u64>()) {
        (Ok(obj), Ok(pos)) => obj < pos,
        _ => false,
    }
}

const REASONS: usize = Reason::ALL.len();

static COUNTS: [[AtomicU64; REASONS]; Resource::ALL.len()] =
    [const { [const { AtomicU64::new(0) }; REASONS] }; Resource::ALL.len()];

/// Counts one object of `res` refused for `reason`.
pub fn record(res: Resource, reason: Reason) {
    COUNTS[res.index()][reason.index()].fetch_add(1, Relaxed);
}

/// Objects of `res` refused for `reason` since the start.
pub fn count(res: Resource, reason: Reason) -> u64 {
    COUNTS[res.index()][reason.index()].load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_fits_and_what_does_not() {
        let n = Resource::Nodes;
        assert_eq!(
            misfit(n, None, None, ""),
            None,
            "a list item without type meta"
        );
        assert_eq!(misfit(n, Some(Some("Node")), Some(Some("v1")), ""), None);
        assert_eq!(
            misfit(n, Some(Some("Service")), Some(Some("v1")), "default"),
            Some(Reason::Kind)
        );
        assert_eq!(misfit(n, Some(None), None, ""), Some(Reason::Kind));
        assert_eq!(
            misfit(n, None, Some(Some("apps/v1")), ""),
            Some(Reason::ApiVersion)
        );
        assert_eq!(misfit(n, None, None, "default"), Some(Reason::Scope));
        assert_eq!(
            misfit(Resource::CidrsV1, None, None, "x"),
            Some(Reason::Scope)
        );
        assert_eq!(
            misfit(Resource::Services, None, None, ""),
            Some(Reason::Scope)
        );
        assert_eq!(misfit(Resource::Services, None, None, "default"), None);
        let slice = Resource::SlicesV1;
        assert_eq!(
            misfit(
                slice,
                Some(Some("EndpointSlice")),
                Some(Some("discovery.k8s.io/v1beta1")),
                "d"
            ),
            Some(Reason::ApiVersion)
        );
        assert_eq!(
            misfit(
                slice,
                Some(Some("EndpointSlice")),
                Some(Some("discovery.k8s.io/v1")),
                "d"
            ),
            None
        );
    }

    #[test]
    fn only_whole_numbers_are_compared() {
        assert!(older("9", "10"));
        assert!(!older("10", "10"));
        assert!(!older("11", "10"));
        assert!(!older("abc", "10"));
        assert!(!older("9", ""));
        assert!(!older("", "10"));
    }

    #[test]
    fn counts_add_up_per_resource_and_reason() {
        let before = count(Resource::CidrsV1beta1, Reason::Scope);
        record(Resource::CidrsV1beta1, Reason::Scope);
        assert_eq!(count(Resource::CidrsV1beta1, Reason::Scope), before + 1);
    }
}
