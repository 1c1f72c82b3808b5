//! v1 <-> v1beta1 EndpointSlice conversion (docs/SEMANTICS.md §5). Pure.
//!
//! Follows `kubernetes/kubernetes: pkg/apis/discovery/v1beta1/conversion.go` endpoint by
//! endpoint; everything else (metadata, `addressType`, `ports`, other endpoint fields, unknown
//! fields) is copied unchanged, only `apiVersion` is set. JSON `null` counts as absent, as a nil
//! Go pointer or map would. Malformed parts (a non-array `endpoints`, a non-object endpoint) are
//! copied as they are; a non-object topology map or a non-string `zone` cannot be represented in
//! the target version and is dropped.

use serde_json::{Map, Value};

/// `apiVersion` of discovery.k8s.io/v1 objects.
pub const SLICE_V1: &str = "discovery.k8s.io/v1";
/// `apiVersion` of discovery.k8s.io/v1beta1 objects.
pub const SLICE_V1BETA1: &str = "discovery.k8s.io/v1beta1";

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// Converts a v1 EndpointSlice to v1beta1 and sets `apiVersion` to `discovery.k8s.io/v1beta1`.
///
/// Per endpoint: `topology` = copy of `deprecatedTopology`, plus `topology.kubernetes.io/zone` =
/// `zone` if set, plus `kubernetes.io/hostname` = `nodeName` if set and that key is absent or
/// empty; `deprecatedTopology` and `zone` are removed; `nodeName`, `hints` are copied.
pub fn slice_v1_to_v1beta1(v1: &Value) -> Value {
    convert_slice(v1, SLICE_V1BETA1, endpoint_v1_to_v1beta1)
}

/// Converts a v1beta1 EndpointSlice to v1 and sets `apiVersion` to `discovery.k8s.io/v1`.
///
/// Per endpoint with a `topology` map: `deprecatedTopology` = its copy; the zone key moves to
/// `zone`; the hostname key moves to `nodeName` when `nodeName` is unset, and is dropped when equal
/// to `nodeName`; an empty `deprecatedTopology` is omitted. `topology` is removed.
pub fn slice_v1beta1_to_v1(b: &Value) -> Value {
    convert_slice(b, SLICE_V1, endpoint_v1beta1_to_v1)
}

fn convert_slice(
    obj: &Value,
    api_version: &str,
    endpoint: fn(&Map<String, Value>) -> Value,
) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = map.clone();
    out.insert(
        "apiVersion".to_string(),
        Value::String(api_version.to_string()),
    );
    if let Some(Value::Array(eps)) = out.get_mut("endpoints") {
        for ep in eps.iter_mut() {
            if let Value::Object(m) = ep {
                *ep = endpoint(m);
            }
        }
    }
    Value::Object(out)
}

fn endpoint_v1_to_v1beta1(ep: &Map<String, Value>) -> Value {
    let deprecated = ep.get("deprecatedTopology").and_then(Value::as_object);
    let zone = ep.get("zone").and_then(Value::as_str);
    let node_name = ep.get("nodeName").and_then(Value::as_str);
    let topology = if deprecated.is_none() && zone.is_none() && node_name.is_none() {
        None
    } else {
        let mut t = deprecated.cloned().unwrap_or_default();
        if let Some(z) = zone {
            t.insert(ZONE.to_string(), Value::String(z.to_string()));
        }
        if let Some(n) = node_name {
            let present = t
                .get(HOSTNAME)
                .and_then(Value::as_str)
                .is_some_and(|h| !h.is_empty());
            if !present {
                t.insert(HOSTNAME.to_string(), Value::String(n.to_string()));
            }
        }
        // `omitempty` on a Go map: an empty map is not serialized.
        (!t.is_empty()).then_some(Value::Object(t))
    };
    Value::Object(rebuild(
        ep,
        "deprecatedTopology",
        &["zone", "topology"],
        vec![("topology", topology)],
    ))
}

fn endpoint_v1beta1_to_v1(ep: &Map<String, Value>) -> Value {
    let Some(topology) = ep.get("topology").and_then(Value::as_object) else {
        return Value::Object(rebuild(ep, "topology", &[], Vec::new()));
    };
    let mut deprecated = topology.clone();
    let mut zone = None;
    if let Some(z) = topology.get(ZONE) {
        zone = z.as_str().map(|z| Value::String(z.to_string()));
        deprecated.retain(|k, _| k != ZONE);
    }
    let mut node_name = None;
    if let Some(host) = topology.get(HOSTNAME) {
        match ep.get("nodeName").filter(|n| !n.is_null()) {
            None => {
                node_name = host.as_str().map(|h| Value::String(h.to_string()));
                deprecated.retain(|k, _| k != HOSTNAME);
            }
            Some(n) if n == host => deprecated.retain(|k, _| k != HOSTNAME),
            Some(_) => {}
        }
    }
    let deprecated = (!deprecated.is_empty()).then_some(Value::Object(deprecated));
    let mut put = vec![("deprecatedTopology", deprecated)];
    if zone.is_some() {
        put.push(("zone", zone));
    }
    if node_name.is_some() {
        put.push(("nodeName", node_name));
    }
    Value::Object(rebuild(ep, "topology", &["deprecatedTopology"], put))
}

/// Copies `src` in order, placing the `put` entries (those that are `Some`) where `anchor` was
/// (or at the end), and skipping `anchor`, every key in `drop` and every key being put.
fn rebuild(
    src: &Map<String, Value>,
    anchor: &str,
    drop: &[&str],
    put: Vec<(&str, Option<Value>)>,
) -> Map<String, Value> {
    let put_names: Vec<&str> = put.iter().map(|(name, _)| *name).collect();
    let mut pending = Some(put);
    let mut out = Map::new();
    for (k, v) in src {
        if k == anchor {
            emit(&mut out, pending.take());
        } else if !drop.contains(&k.as_str()) && !put_names.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    emit(&mut out, pending);
    out
}

fn emit(out: &mut Map<String, Value>, put: Option<Vec<(&str, Option<Value>)>>) {
    for (name, value) in put.into_iter().flatten() {
        if let Some(value) = value {
            out.insert(name.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn slice(api_version: &str, endpoints: Value) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": "EndpointSlice",
            "metadata": { "namespace": "default", "name": "s-abcde", "resourceVersion": "5",
                "labels": { "kubernetes.io/service-name": "s" } },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }],
            "x-unknown": 1,
        })
    }

    /// (v1 endpoint, its v1beta1 form); each pair round-trips in both directions.
    fn pairs() -> Vec<(Value, Value)> {
        let cond = json!({ "ready": true, "serving": true, "terminating": false });
        let hints = json!({ "forZones": [{ "name": "a" }] });
        vec![
            (
                json!({ "addresses": ["10.0.0.1"], "conditions": cond, "nodeName": "n1",
                    "zone": "a", "hints": hints, "targetRef": { "kind": "Pod", "name": "p" } }),
                json!({ "addresses": ["10.0.0.1"], "conditions": cond, "nodeName": "n1",
                    "topology": { "kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a" },
                    "hints": hints, "targetRef": { "kind": "Pod", "name": "p" } }),
            ),
            (
                json!({ "addresses": ["10.0.0.2"], "nodeName": "n1",
                    "deprecatedTopology": { "rack": "r1" } }),
                json!({ "addresses": ["10.0.0.2"], "nodeName": "n1",
                    "topology": { "rack": "r1", "kubernetes.io/hostname": "n1" } }),
            ),
            (
                // Different hostname and nodeName survive both ways.
                json!({ "addresses": ["10.0.0.3"], "nodeName": "n1",
                    "deprecatedTopology": { "kubernetes.io/hostname": "n2" } }),
                json!({ "addresses": ["10.0.0.3"], "nodeName": "n1",
                    "topology": { "kubernetes.io/hostname": "n2" } }),
            ),
            (
                json!({ "addresses": ["10.0.0.4"] }),
                json!({ "addresses": ["10.0.0.4"] }),
            ),
            (
                json!({ "addresses": ["10.0.0.5"], "zone": "b", "x-ep": [1] }),
                json!({ "addresses": ["10.0.0.5"], "topology": { "topology.kubernetes.io/zone": "b" },
                    "x-ep": [1] }),
            ),
        ]
    }

    #[test]
    fn conversion_table_and_round_trips() {
        for (v1_ep, beta_ep) in pairs() {
            let v1 = slice(SLICE_V1, json!([v1_ep]));
            let beta = slice(SLICE_V1BETA1, json!([beta_ep]));
            assert_eq!(slice_v1_to_v1beta1(&v1), beta, "v1 → v1beta1 of {v1_ep}");
            assert_eq!(slice_v1beta1_to_v1(&beta), v1, "v1beta1 → v1 of {beta_ep}");
            assert_eq!(slice_v1beta1_to_v1(&slice_v1_to_v1beta1(&v1)), v1);
            assert_eq!(slice_v1_to_v1beta1(&slice_v1beta1_to_v1(&beta)), beta);
        }
    }

    #[test]
    fn v1beta1_hostname_moves_to_node_name() {
        let beta = slice(
            SLICE_V1BETA1,
            json!([
                { "addresses": ["1"], "topology": { "kubernetes.io/hostname": "n1", "rack": "r" } },
                { "addresses": ["2"], "nodeName": null, "topology": { "kubernetes.io/hostname": "n2" } },
                { "addresses": ["3"], "topology": {} },
                { "addresses": ["4"], "topology": "junk" },
                { "addresses": ["5"], "topology": { "topology.kubernetes.io/zone": 7 } },
            ]),
        );
        let v1 = slice_v1beta1_to_v1(&beta);
        assert_eq!(
            v1["endpoints"],
            json!([
                { "addresses": ["1"], "nodeName": "n1", "deprecatedTopology": { "rack": "r" } },
                { "addresses": ["2"], "nodeName": "n2" },
                { "addresses": ["3"] },
                { "addresses": ["4"] },
                { "addresses": ["5"] },
            ])
        );
    }

    #[test]
    fn v1_to_v1beta1_edge_cases() {
        let v1 = slice(
            SLICE_V1,
            json!([
                // An empty hostname in deprecatedTopology is replaced by nodeName (Go `== ""`).
                { "addresses": ["1"], "nodeName": "n1", "deprecatedTopology": { "kubernetes.io/hostname": "" } },
                // An empty deprecatedTopology alone gives no topology (omitempty).
                { "addresses": ["2"], "deprecatedTopology": {} },
                // zone wins over a deprecatedTopology zone key.
                { "addresses": ["3"], "zone": "z", "deprecatedTopology": { "topology.kubernetes.io/zone": "old" } },
                { "addresses": ["4"], "nodeName": null, "zone": null, "deprecatedTopology": null },
            ]),
        );
        let beta = slice_v1_to_v1beta1(&v1);
        assert_eq!(
            beta["endpoints"],
            json!([
                { "addresses": ["1"], "nodeName": "n1", "topology": { "kubernetes.io/hostname": "n1" } },
                { "addresses": ["2"] },
                { "addresses": ["3"], "topology": { "topology.kubernetes.io/zone": "z" } },
                { "addresses": ["4"], "nodeName": null },
            ])
        );
    }

    #[test]
    fn only_api_version_and_endpoints_change() {
        let v1 = slice(SLICE_V1, json!([{ "addresses": ["1"], "nodeName": "n" }]));
        let mut beta = slice_v1_to_v1beta1(&v1);
        assert_eq!(beta["apiVersion"], json!(SLICE_V1BETA1));
        for key in ["metadata", "addressType", "ports", "x-unknown", "kind"] {
            assert_eq!(beta[key], v1[key], "{key}");
        }
        beta["endpoints"] = v1["endpoints"].clone();
        beta["apiVersion"] = v1["apiVersion"].clone();
        assert_eq!(beta, v1);
    }

    #[test]
    fn malformed_input_is_copied() {
        let inputs = [
            json!(null),
            json!(3),
            json!("slice"),
            json!([{ "endpoints": [] }]),
            json!({ "endpoints": "x" }),
            json!({ "endpoints": [1, "a", null, [], true] }),
        ];
        for input in inputs {
            for out in [slice_v1_to_v1beta1(&input), slice_v1beta1_to_v1(&input)] {
                match input.as_object() {
                    None => assert_eq!(out, input),
                    Some(_) => assert_eq!(out["endpoints"], input["endpoints"]),
                }
            }
        }
    }
}
