//! A Node other than the local one, as the cache holds it: its facts only — `metadata.name`,
//! `metadata.labels` (topology and the fallback read them) and `status.addresses` (edge-health
//! matches InternalIPs) — as a reduced canonical Node object. The readers' view serves only the
//! local Node, whole; every other Node is read by the filter, edge-health and the snapshot, none
//! of which needs its conditions, capacity, images or annotations (docs/SEMANTICS.md §1.1). A
//! reduced object (not a struct of its own) keeps every reader of a stored Node as it is: the
//! labels and addresses are read from it as from a whole Node, the snapshot writes it as any
//! object, and a reduced Node reduces to itself. Pure.

use serde_json::{Map, Value};

use super::{raw, Raw};
use crate::k8s::Resource;

/// The facts of `node` as a Node object: `apiVersion`, `kind`, `metadata.name`,
/// `metadata.labels` and `status.addresses`, each only if `node` has it.
pub(super) fn reduce(node: &Value) -> Value {
    let mut meta = Map::new();
    for field in ["name", "labels"] {
        if let Some(v) = node.pointer(&format!("/metadata/{field}")) {
            meta.insert(field.into(), v.clone());
        }
    }
    let mut obj = Map::new();
    Resource::Nodes.fill_type_meta(&mut obj);
    obj.insert("metadata".into(), Value::Object(meta));
    if let Some(addresses) = node.pointer("/status/addresses") {
        let mut status = Map::new();
        status.insert("addresses".into(), addresses.clone());
        obj.insert("status".into(), Value::Object(status));
    }
    Value::Object(obj)
}

/// [`reduce`] of a Node's canonical bytes, as canonical bytes (`None`: not JSON).
pub(super) fn reduce_bytes(bytes: &[u8]) -> Option<Raw> {
    let node: Value = serde_json::from_slice(bytes).ok()?;
    Some(raw(&reduce(&node)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_node_reduces_to_its_name_labels_and_addresses_and_a_reduced_one_to_itself() {
        let whole = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u", "labels": {"zone": "a"},
                         "annotations": {"x": "y"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "images": [{"names": ["a"], "sizeBytes": 1}]}
        });
        let facts = reduce(&whole);
        assert_eq!(
            facts,
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "labels": {"zone": "a"}},
                "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
            })
        );
        assert_eq!(reduce(&facts), facts);
        let bytes = raw(&whole);
        let reduced = reduce_bytes(&bytes).expect("JSON");
        assert_eq!(reduce_bytes(&reduced), Some(reduced.clone()));
        assert_eq!(reduced, raw(&facts));
        // Without labels or addresses, none are made up.
        let bare = reduce(&json!({"metadata": {"name": "n2"}, "status": {}}));
        assert_eq!(
            bare,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
        );
    }
}
