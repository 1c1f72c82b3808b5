//! The edge-health ("service autonomy enhancement") map, pure (TOPOLOGY.md §10): parsing
//! edge-health's `localinfo` answer and resolving which nodes it reports abnormal.
//!
//! The answer is a JSON object `{"<key>": {"normal": bool, "hmac": "...", "time": n}, ...}`.
//! Keys are node names (the original edge-health) or node InternalIPs (edge-health since superedge
//! PR #454); both are matched. Decisions fixed here:
//!
//! - The top level must be an object, else the whole answer is an error (the caller then clears
//!   the map, keeping every endpoint).
//! - An entry whose value is not an object with a boolean `normal` (and an empty key) is
//!   ignored: that key is treated as absent from the answer, so its node's endpoints are kept.
//!   `hmac` and `time` are not checked.
//! - Keys and node addresses that parse as IP literals are compared in canonical form
//!   (`fd00:0::1` = `fd00::1`); anything else is compared as given.
//! - A node is abnormal iff some entry matching it (its name, or any of its InternalIPs) says
//!   `normal: false`. A name key needs no cached Node: an endpoint whose `nodeName` is a key
//!   reported abnormal is dropped even if that Node is unknown. An IP key needs the Node (and
//!   its `status.addresses`) to be cached.
//!
//! This module owns no state; the cache keeps the map and the resolved set, and the poller
//! (`upstream::edge_health`) fetches the body.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::Value;

/// Edge-health's answer: key (node name or IP) → `normal`. Empty = nothing known (all kept).
pub type HealthMap = BTreeMap<String, bool>;

/// Parses edge-health's `localinfo` body. `Err` (with the reason) when the body is not JSON or
/// its top level is not an object; unusable entries are skipped (see the module doc).
pub fn parse(body: &[u8]) -> Result<HealthMap, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(entries) = value else {
        return Err(format!("top level is {}, not an object", json_type(&value)));
    };
    let mut map = HealthMap::new();
    let mut ignored = 0usize;
    for (key, entry) in entries {
        match entry.get("normal").and_then(Value::as_bool) {
            Some(normal) if !key.is_empty() => {
                map.insert(canonical(&key), normal);
            }
            _ => ignored += 1,
        }
    }
    if ignored > 0 {
        log::debug!("edge-health: ignored {ignored} entries without a boolean \"normal\"");
    }
    Ok(map)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` in canonical form if it is an IP literal, else unchanged.
pub fn canonical(text: &str) -> String {
    match text.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => text.to_string(),
    }
}

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
fn reported_abnormal(map: &HealthMap, key: &str) -> bool {
    map.get(key) == Some(&false)
}

/// Whether node `name` with InternalIPs `ips` is abnormal: its name or one of its IPs is
/// reported `normal: false`.
pub fn node_abnormal(map: &HealthMap, name: &str, ips: &[String]) -> bool {
    reported_abnormal(map, name) || ips.iter().any(|ip| reported_abnormal(map, ip))
}

/// The node names whose endpoints are dropped: every key reported abnormal (as a node name,
/// cached or not) plus every cached node (`nodes`: name and InternalIPs) that
/// [`node_abnormal`] says is abnormal.
pub fn abnormal_nodes<'a>(
    map: &HealthMap,
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

    fn map(pairs: &[(&str, bool)]) -> HealthMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn parse_accepts_edge_health_answers() {
        let body = br#"{
            "10.0.0.2": {"normal": false, "hmac": "ab", "time": 1700000000},
            "n3": {"normal": true, "hmac": "cd", "time": 1700000000},
            "fd00:0::1": {"normal": false}
        }"#;
        let got = parse(body).unwrap();
        assert_eq!(
            got,
            map(&[("10.0.0.2", false), ("n3", true), ("fd00::1", false)])
        );
        assert_eq!(parse(b"{}").unwrap(), HealthMap::new());
    }

    #[test]
    fn parse_ignores_unusable_entries() {
        let body = json!({
            "a": {"normal": "false"},
            "b": {"normal": null},
            "c": {},
            "d": [],
            "e": true,
            "f": null,
            "": {"normal": false},
            "g": {"normal": false, "hmac": 7, "time": "x"},
        })
        .to_string();
        assert_eq!(parse(body.as_bytes()).unwrap(), map(&[("g", false)]));
    }

    #[test]
    fn parse_rejects_non_objects_and_garbage() {
        for body in [
            &b""[..],
            b"not json",
            b"[]",
            b"null",
            b"3",
            b"\"x\"",
            b"{\"a\":",
            b"{} trailing",
            b"\xff\xfe",
        ] {
            assert!(parse(body).is_err(), "{:?}", String::from_utf8_lossy(body));
        }
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
        let set = |m: &HealthMap| abnormal_nodes(m, nodes());
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
        assert!(set(&HealthMap::new()).is_empty());
        assert!(node_abnormal(&map(&[("10.0.0.2", false)]), "n1", &n1));
        assert!(!node_abnormal(&map(&[("10.0.0.2", false)]), "n2", &n2));
    }
}
