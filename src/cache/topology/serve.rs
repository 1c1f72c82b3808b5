//! Served content of endpoint objects (TOPOLOGY.md §3–§5, §7, §8): the §8 rewrite first, then
//! unfiltered for dangling and normal services, filtered by §2 for topology services. Kept
//! entries are copied unchanged and in order, except that topology services lose slice `hints`.

use serde_json::{Map, Value};

use super::{address_node, keeps, rewrite, slice_endpoint_node, Class, Locality, TopologyKeys};

/// Served content of a core/v1 Endpoints object (§3, §4, §8).
pub fn serve_endpoints(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    if let Some(rewritten) = rewrite::endpoints(obj, loc) {
        return rewritten;
    }
    let Class::Topology(keys) = class else {
        return obj.clone();
    };
    let mut out = obj.clone();
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
            list.retain(|addr| keeps(address_node(addr), keys, loc));
            if list.is_empty() {
                // `omitempty`; retain (not remove) keeps the remaining keys' order either way.
                subset.retain(|k, _| k != field);
            }
        }
    }
    out
}

/// Served content of a discovery.k8s.io/v1 slice (§5.1, §7, §8); input is a v1 object.
pub fn serve_slice_v1(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    serve_slice(obj, class, loc, "deprecatedTopology")
}

/// Served content of a v1beta1 slice (§5.2, §7, §8); input is a v1beta1 object.
pub fn serve_slice_v1beta1(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value {
    serve_slice(obj, class, loc, "topology")
}

/// Both slice versions: they differ only in where the hostname fallback lives.
fn serve_slice(obj: &Value, class: Class<'_>, loc: &Locality<'_>, topology_field: &str) -> Value {
    if let Some(rewritten) = rewrite::slice(obj, loc) {
        return rewritten;
    }
    let Class::Topology(keys) = class else {
        return obj.clone();
    };
    let mut out = obj.clone();
    if let Some(map) = out.as_object_mut() {
        filter_slice_endpoints(map, keys, loc, topology_field);
    }
    out
}

/// Filters `endpoints` in place and strips `hints` from the kept ones (§7). A missing or `null`
/// list becomes `[]` (not `omitempty`); a list of another type is left alone.
fn filter_slice_endpoints(
    slice: &mut Map<String, Value>,
    keys: &TopologyKeys,
    loc: &Locality<'_>,
    topology_field: &str,
) {
    match slice.get_mut("endpoints") {
        Some(Value::Array(list)) => {
            list.retain(|ep| keeps(slice_endpoint_node(ep, topology_field), keys, loc));
            for ep in list.iter_mut().filter_map(Value::as_object_mut) {
                ep.retain(|k, _| k != "hints");
            }
        }
        Some(Value::Null) | None => {
            slice.insert("endpoints".to_string(), Value::Array(Vec::new()));
        }
        Some(_) => {}
    }
}
