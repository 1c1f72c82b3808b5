//! Which nodes edge-health reports abnormal, pure (docs/SEMANTICS.md §10): the edge-health map (its
//! `localinfo` answer, parsed by [`crate::handoff::edge_health`]) resolved against the
//! cached nodes, by name and by InternalIP. Decisions fixed here:
//!
//! - Node addresses that parse as IP literals are compared in the map keys' canonical form
//!   (`fd00:0::1` = `fd00::1`); anything else is compared as given.
//! - A node is abnormal iff some entry matching it (its name, or any of its InternalIPs) says
//!   `normal: false`. A name key needs no cached Node: an endpoint whose `nodeName` is a key
//!   reported abnormal is dropped even if that Node is unknown. An IP key needs the Node (and
//!   its `status.addresses`) to be cached.
//!
//! This module owns no state; the cache keeps the map and the resolved set, and the poller
//! (`upstream::edge_health`) fetches the body.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::handoff::edge_health::{canonical, EdgeHealthMap};

/// A Node's InternalIPs (`status.addresses[type=InternalIP].address`), canonical, sorted and
/// deduplicated; malformed parts are skipped.
pub fn internal_ips(node: &Value) -> Vec<String> {
    let mut ips: Vec<String> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        .filter_map(|a| a.get("address").and_then(Value::as_str))
        .filter(|a| !a.is_empty())
        .map(canonical)
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// Whether `key` is reported abnormal (`normal: false`).
fn reported_abnormal(map: &EdgeHealthMap, key: &str) -> bool {
    map.get(key) == Some(&false)
}

/// Whether node `name` with InternalIPs `ips` is abnormal: its name or one of its IPs is
/// reported `normal: false`.
pub fn node_abnormal(map: &EdgeHealthMap, name: &str, ips: &[String]) -> bool {
    reported_abnormal(map, name) || ips.iter().any(|ip| reported_abnormal(map, ip))
}

/// The node names whose endpoints are dropped: every key reported abnormal (as a node name,
/// cached or not) plus every cached node (`nodes`: name and InternalIPs) that
/// [`node_abnormal`] says is abnormal.
pub fn abnormal_nodes<'a>(
    map: &EdgeHealthMap,
    nodes: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = map
        .iter()
        .filter(|(_, normal)| !**normal)
        .map(|(k, _)| k.clone())
        .collect();
    if out.is_empty() {
        return out; // nothing reported abnormal: no node can be
    }
    for (name, ips) in nodes {
        if node_abnormal(map, name, ips) {
            out.insert(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, bool)]) -> EdgeHealthMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn internal_ips_reads_status_addresses() {
        let node = json!({"status": {"addresses": [
            {"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "10.0.0.2"},
            {"type": "ExternalIP", "address": "1.2.3.4"},
            {"type": "InternalIP", "address": "fd00:0::2"},
            {"type": "InternalIP", "address": "10.0.0.2"},
            {"type": "InternalIP", "address": ""},
            {"type": "InternalIP"},
            {"type": "InternalIP", "address": 5},
            "junk"
        ]}});
        assert_eq!(internal_ips(&node), vec!["10.0.0.2", "fd00::2"]);
        for node in [json!({}), json!(null), json!({"status": {"addresses": {}}})] {
            assert!(internal_ips(&node).is_empty(), "{node}");
        }
    }

    #[test]
    fn abnormal_by_name_or_ip() {
        let ips = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let n1 = ips(&["10.0.0.2"]);
        let n2 = ips(&["10.0.0.3", "fd00::3"]);
        let n3 = ips(&[]);
        let nodes = || [("n1", &n1[..]), ("n2", &n2[..]), ("n3", &n3[..])];
        let set = |m: &EdgeHealthMap| abnormal_nodes(m, nodes());
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        // By IP (current edge-health), v4 and v6.
        assert_eq!(
            set(&map(&[("10.0.0.2", false), ("10.0.0.3", true)])),
            names(&["10.0.0.2", "n1"])
        );
        assert_eq!(set(&map(&[("fd00::3", false)])), names(&["fd00::3", "n2"]));
        // By name, cached or not.
        assert_eq!(
            set(&map(&[("n3", false), ("ghost", false), ("n1", true)])),
            names(&["ghost", "n3"])
        );
        // Any matching entry saying false wins over one saying true.
        assert_eq!(
            set(&map(&[("n2", true), ("10.0.0.3", false)])),
            names(&["10.0.0.3", "n2"])
        );
        // All normal, absent, or empty: nothing.
        assert!(set(&map(&[("n1", true), ("10.0.0.3", true)])).is_empty());
        assert!(set(&EdgeHealthMap::new()).is_empty());
        assert!(node_abnormal(&map(&[("10.0.0.2", false)]), "n1", &n1));
        assert!(!node_abnormal(&map(&[("10.0.0.2", false)]), "n2", &n2));
    }
}
