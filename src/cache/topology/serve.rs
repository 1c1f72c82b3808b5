//! Served content of endpoint objects (docs/SEMANTICS.md §2.4–§2.6, §3, §10): the §3 rewrite first,
//! then unfiltered for dangling and normal services, filtered by §2.3 for topology services; on top
//! of that, whatever the class, endpoints on nodes edge-health reports abnormal (§10) are dropped,
//! except from `default/kubernetes`. Kept entries are copied unchanged and in order, `hints`
//! included (§2.10). Whether an endpoint is kept is decided by [`verdict`] alone (`explain.rs`),
//! which the explanations of `/debug/topology` share; the §2.9 decision comes in the [`Class`].
//! Each function takes the object by value: the cache hands over the one it just decoded, so
//! serving never copies it.

use serde_json::{Map, Value};

use super::{
    address_node, rewrite, slice_endpoint_node, slice_service, verdict, Class, Locality, ServedBy,
};
use crate::k8s::ObjectKey;

/// Served content of a core/v1 Endpoints object (§2.4, §2.6, §3, §10).
///
/// `addresses` / `notReadyAddresses` emptied by a filter are removed (`omitempty`). A topology
/// service removes an empty list even if it came empty; the §10 filter alone removes only a
/// list it emptied, so an object with nothing on an abnormal node is served exactly as given.
pub fn serve_endpoints(obj: Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    if let Some(rewritten) = rewrite::endpoints(&obj, loc) {
        return rewritten;
    }
    let keys = class.decision();
    let edge_health = edge_health_applies(&obj, loc, false);
    if keys.is_none() && !edge_health {
        return obj;
    }
    let mut out = obj;
    let subsets = out
        .get_mut("subsets")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for subset in subsets.filter_map(Value::as_object_mut) {
        for field in ["addresses", "notReadyAddresses"] {
            let Some(list) = subset.get_mut(field).and_then(Value::as_array_mut) else {
                continue;
            };
            let before = list.len();
            list.retain(|addr| verdict(address_node(addr), keys, edge_health, loc).kept);
            if list.is_empty() && (keys.is_some() || before > 0) {
                // `omitempty`; retain (not remove) keeps the remaining keys' order either way.
                subset.retain(|k, _| k != field);
            }
        }
    }
    out
}

/// Served content of a discovery.k8s.io/v1 slice (§2.4, §2.5, §3, §10); input is a v1 object.
pub fn serve_slice_v1(obj: Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    serve_slice(obj, class, loc, "deprecatedTopology")
}

/// Served content of a v1beta1 slice (§2.4, §2.5, §3, §10); input is a v1beta1 object.
pub fn serve_slice_v1beta1(obj: Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    serve_slice(obj, class, loc, "topology")
}

/// Both slice versions: they differ only in where the hostname fallback lives.
fn serve_slice(obj: Value, class: Class<'_>, loc: &Locality<'_>, topology_field: &str) -> Value {
    if let Some(rewritten) = rewrite::slice(&obj, loc) {
        return rewritten;
    }
    let edge_health = edge_health_applies(&obj, loc, true);
    match class {
        Class::Topology(decision) => {
            let mut out = obj;
            if let Some(map) = out.as_object_mut() {
                filter_slice_endpoints(map, decision, loc, topology_field, edge_health);
            }
            out
        }
        Class::Normal | Class::Dangling if edge_health => {
            let mut out = obj;
            // Only endpoints on abnormal nodes go; the rest (hints included) stays as given.
            if let Some(Value::Array(list)) = out.get_mut("endpoints") {
                list.retain(|ep| {
                    let node = slice_endpoint_node(ep, topology_field);
                    verdict(node, None, true, loc).kept
                });
            }
            out
        }
        Class::Normal | Class::Dangling => obj,
    }
}

/// Filters `endpoints` in place (§2.3 as `decision` says, §2.9, and §10 when `edge_health`); the
/// kept ones are left as they are, `hints` included (§2.10). A missing or `null` list becomes
/// `[]` (not `omitempty`); a list of another type is left alone.
fn filter_slice_endpoints(
    slice: &mut Map<String, Value>,
    decision: ServedBy<'_>,
    loc: &Locality<'_>,
    topology_field: &str,
    edge_health: bool,
) {
    match slice.get_mut("endpoints") {
        Some(Value::Array(list)) => {
            list.retain(|ep| {
                let node = slice_endpoint_node(ep, topology_field);
                verdict(node, Some(decision), edge_health, loc).kept
            });
        }
        Some(Value::Null) | None => {
            slice.insert("endpoints".to_string(), Value::Array(Vec::new()));
        }
        Some(_) => {}
    }
}

/// Whether the §10 filter applies to `obj`: some node is reported abnormal and the object is
/// not `default/kubernetes` (the Endpoints, or a slice named `kubernetes` or labelled as the
/// `kubernetes` Service's), which stays exactly as without the feature.
pub(super) fn edge_health_applies(obj: &Value, loc: &Locality<'_>, slice: bool) -> bool {
    if loc.abnormal.is_empty() {
        return false;
    }
    let meta = obj.get("metadata");
    let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
    if field("namespace") != Some("default") {
        return true;
    }
    let kubernetes = field("name") == Some("kubernetes")
        || (slice && slice_service(obj) == Some(ObjectKey::new("default", "kubernetes")));
    !kubernetes
}
