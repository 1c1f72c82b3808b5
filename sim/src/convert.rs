//! EndpointSlice conversion between `discovery.k8s.io/v1` and `discovery.k8s.io/v1beta1`, so a
//! slice stored in one version can be served in the other (after
//! `kubernetes/kubernetes: pkg/apis/discovery/v1beta1/conversion.go`, plus: a v1beta1 endpoint
//! with only `topology["kubernetes.io/hostname"]` gets that as its v1 `nodeName`). Pure.

use serde_json::{Map, Value};

/// `apiVersion` of v1 slices.
pub const V1: &str = "discovery.k8s.io/v1";
/// `apiVersion` of v1beta1 slices.
pub const V1BETA1: &str = "discovery.k8s.io/v1beta1";
/// Topology key carrying the node name in v1beta1.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
/// Topology key carrying the zone in v1beta1.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// Returns `slice` as `target` (`V1` or `V1BETA1`); a slice already in `target` is cloned.
/// A slice without `apiVersion` counts as v1.
pub fn slice_to(slice: &Value, target: &str) -> Value {
    let mut out = slice.clone();
    let from = slice
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(V1);
    if let Some(o) = out.as_object_mut() {
        o.insert("apiVersion".into(), Value::from(target));
        o.insert("kind".into(), Value::from("EndpointSlice"));
    }
    if from == target {
        return out;
    }
    if let Some(eps) = out.get_mut("endpoints").and_then(Value::as_array_mut) {
        for ep in eps.iter_mut().filter_map(Value::as_object_mut) {
            if target == V1BETA1 {
                endpoint_to_v1beta1(ep);
            } else {
                endpoint_to_v1(ep);
            }
        }
    }
    out
}

fn endpoint_to_v1beta1(ep: &mut Map<String, Value>) {
    let mut topo = match ep.remove("deprecatedTopology") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Some(Value::String(zone)) = ep.remove("zone") {
        topo.insert(ZONE_KEY.into(), Value::String(zone));
    }
    if let Some(node) = ep.get("nodeName").and_then(Value::as_str) {
        if !node.is_empty() && !topo.contains_key(HOSTNAME_KEY) {
            topo.insert(HOSTNAME_KEY.into(), Value::from(node));
        }
    }
    if !topo.is_empty() {
        ep.insert("topology".into(), Value::Object(topo));
    }
}

fn endpoint_to_v1(ep: &mut Map<String, Value>) {
    let mut topo = match ep.remove("topology") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Some(Value::String(zone)) = topo.remove(ZONE_KEY) {
        ep.insert("zone".into(), Value::String(zone));
    }
    let node = ep
        .get("nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    match (node, topo.get(HOSTNAME_KEY).and_then(Value::as_str)) {
        (Some(n), Some(h)) if n == h => {
            topo.remove(HOSTNAME_KEY);
        }
        (None, Some(h)) => {
            ep.insert("nodeName".into(), Value::from(h));
            topo.remove(HOSTNAME_KEY);
        }
        _ => {}
    }
    if !topo.is_empty() {
        ep.insert("deprecatedTopology".into(), Value::Object(topo));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1() -> Value {
        json!({"kind": "EndpointSlice", "apiVersion": V1,
            "metadata": {"name": "web-abc12", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.244.1.10"], "conditions": {"ready": true},
                 "nodeName": "edge-a1", "zone": "zone-a",
                 "hints": {"forZones": [{"name": "zone-a"}]}},
                {"addresses": ["10.244.9.10"], "deprecatedTopology": {"rack": "r1"}}
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    }

    #[test]
    fn v1_to_v1beta1_moves_node_and_zone_into_topology() {
        let b = slice_to(&v1(), V1BETA1);
        assert_eq!(b["apiVersion"], V1BETA1);
        let ep = &b["endpoints"][0];
        assert_eq!(ep["topology"][HOSTNAME_KEY], "edge-a1");
        assert_eq!(ep["topology"][ZONE_KEY], "zone-a");
        assert_eq!(ep["nodeName"], "edge-a1");
        assert!(ep.get("zone").is_none());
        assert_eq!(ep["hints"]["forZones"][0]["name"], "zone-a");
        assert_eq!(b["endpoints"][1]["topology"], json!({"rack": "r1"}));
        assert!(b["endpoints"][1].get("deprecatedTopology").is_none());
        assert_eq!(b["ports"], v1()["ports"]);
        assert_eq!(b["metadata"], v1()["metadata"]);
    }

    #[test]
    fn round_trip_is_identity() {
        let back = slice_to(&slice_to(&v1(), V1BETA1), V1);
        assert_eq!(back, v1());
    }

    #[test]
    fn v1beta1_hostname_only_becomes_node_name() {
        let b = json!({"apiVersion": V1BETA1, "kind": "EndpointSlice",
            "endpoints": [{"addresses": ["10.0.0.1"],
                "topology": {HOSTNAME_KEY: "edge-b1", ZONE_KEY: "zone-b"}}]});
        let v = slice_to(&b, V1);
        let ep = &v["endpoints"][0];
        assert_eq!(ep["nodeName"], "edge-b1");
        assert_eq!(ep["zone"], "zone-b");
        assert!(ep.get("topology").is_none());
        assert!(ep.get("deprecatedTopology").is_none());
    }

    #[test]
    fn same_version_is_unchanged_and_odd_shapes_do_not_panic() {
        assert_eq!(slice_to(&v1(), V1), v1());
        for odd in [
            json!(null),
            json!([1]),
            json!({"endpoints": "x"}),
            json!({"endpoints": [1, null]}),
        ] {
            let _ = slice_to(&odd, V1BETA1);
            let _ = slice_to(&odd, V1);
        }
    }
}
