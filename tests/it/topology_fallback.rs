//! The `*` fallback and the ordered mode of `topologyKeys` (docs/SEMANTICS.md §2.9) through the
//! real binary and the simulator (demo fixture: grid-wrapper as node edge-a1; Service `web` with
//! one endpoint on each of edge-a1 (10.244.1.10), edge-a2 (10.244.2.10, zone-a like edge-a1),
//! edge-b1 (10.244.3.10) and edge-c1 (10.244.4.10)). A watch on the slices sees the switch to
//! the fallback when the unit's last ready endpoint goes not ready, and back when it recovers.

use crate::common;

use serde_json::{json, Value};

use common::{demo, slice_ips, wait_for, Sim, Watch, Wrapper};

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
const SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12";
const ENDPOINTS: &str = "/api/v1/namespaces/default/endpoints/web";
const ALL: [&str; 4] = ["10.244.1.10", "10.244.2.10", "10.244.3.10", "10.244.4.10"];

/// The demo with `web` annotated `keys` upstream (and `topologyMode: ordered` when `ordered`),
/// once grid-wrapper serves its slice with the local node's endpoint alone; a watch on the
/// slices from that list's RV, and the RV.
fn annotated_demo(keys: &str, ordered: bool) -> (Sim, Wrapper, Watch, u64) {
    let (sim, w) = demo(&[]);
    let mut svc = sim.get_json("/api/v1/namespaces/default/services/web");
    svc["metadata"]["annotations"]["topologyKeys"] = json!(keys);
    if ordered {
        svc["metadata"]["annotations"]["topologyMode"] = json!("ordered");
    }
    sim.apply(&svc);
    wait_for("the annotation served", || {
        slice_ips(&w.get_json(SLICE)) == ALL[..1]
    });
    let rv = common::rv(&w.get_json(SLICES));
    let watch = w.watch(&format!("{SLICES}?watch=true&resourceVersion={rv}"));
    (sim, w, watch, rv)
}

/// Sets the readiness of the demo endpoints upstream, in the slice and in the Endpoints object
/// (`addresses` / `notReadyAddresses`): `not_ready` lists the IPs that are not ready.
fn set_not_ready(sim: &Sim, not_ready: &[&str]) {
    let mut slice = sim.get_json(SLICE);
    for ep in slice["endpoints"].as_array_mut().into_iter().flatten() {
        let ip = ep["addresses"][0].as_str().unwrap_or("").to_string();
        ep["conditions"]["ready"] = json!(!not_ready.contains(&ip.as_str()));
    }
    sim.apply(&slice);
    let mut ep = sim.get_json(ENDPOINTS);
    let subset = &mut ep["subsets"][0];
    let mut all: Vec<Value> = Vec::new();
    for field in ["addresses", "notReadyAddresses"] {
        all.extend(subset[field].as_array().cloned().unwrap_or_default());
    }
    let (not, ready): (Vec<Value>, Vec<Value>) = all
        .into_iter()
        .partition(|a| not_ready.contains(&a["ip"].as_str().unwrap_or("")));
    subset["addresses"] = json!(ready);
    subset["notReadyAddresses"] = json!(not);
    sim.apply(&ep);
}

/// The next event about `web-abc12`, which must be a `MODIFIED` with a higher RV than `after`;
/// returns its IPs (sorted) and RV.
fn next_switch(watch: &mut Watch, after: u64) -> (Vec<String>, u64) {
    let ev = watch.until(|e| e["object"]["metadata"]["name"] == "web-abc12");
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    let rv = common::rv(&ev["object"]);
    assert!(rv > after, "a new resourceVersion: {rv} after {after}");
    let mut ips = slice_ips(&ev["object"]);
    ips.sort();
    (ips, rv)
}

/// Every IP a served Endpoints object lists, ready or not, sorted.
fn endpoints_ips(w: &Wrapper) -> Vec<String> {
    let ep = w.get_json(ENDPOINTS);
    let mut ips: Vec<String> = ["addresses", "notReadyAddresses"]
        .iter()
        .flat_map(|f| ep["subsets"][0][*f].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["ip"].as_str().map(str::to_string))
        .collect();
    ips.sort();
    ips
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn star_falls_back_when_the_units_last_ready_endpoint_fails_and_back() {
    let (sim, w, mut watch, rv) = annotated_demo(r#"["kubernetes.io/hostname","*"]"#, false);
    // The local node's only endpoint goes not ready: every endpoint is served.
    set_not_ready(&sim, &["10.244.1.10"]);
    let (ips, rv) = next_switch(&mut watch, rv);
    assert_eq!(ips, strs(&ALL));
    wait_for("Endpoints fall back too", || {
        endpoints_ips(&w) == strs(&ALL)
    });
    let why = w.debug_json("/debug/topology/default/web");
    assert_eq!(
        why["slicesDecision"], "kubernetes.io/hostname kept 0 ready of 3; fallback *: all 4",
        "{why}"
    );
    // It recovers: the local node's endpoint alone again.
    set_not_ready(&sim, &[]);
    let (ips, _) = next_switch(&mut watch, rv);
    assert_eq!(ips, strs(&ALL[..1]));
    wait_for("Endpoints back", || endpoints_ips(&w) == strs(&ALL[..1]));
}

#[test]
fn ordered_mode_takes_the_first_key_with_a_ready_endpoint() {
    let (sim, w, mut watch, rv) = annotated_demo(r#"["kubernetes.io/hostname","zone","*"]"#, true);
    // The node's endpoint fails: the zone (edge-a1's not-ready one and edge-a2's).
    set_not_ready(&sim, &["10.244.1.10"]);
    let (ips, rv) = next_switch(&mut watch, rv);
    assert_eq!(ips, strs(&ALL[..2]));
    // The zone's other one too: the fallback.
    set_not_ready(&sim, &["10.244.1.10", "10.244.2.10"]);
    let (ips, rv) = next_switch(&mut watch, rv);
    assert_eq!(ips, strs(&ALL));
    // The node's endpoint recovers: the node alone.
    set_not_ready(&sim, &["10.244.2.10"]);
    let (ips, _) = next_switch(&mut watch, rv);
    assert_eq!(ips, strs(&ALL[..1]));
    let why = w.debug_json("/debug/topology/default/web");
    assert_eq!(
        why["slicesDecision"],
        "kubernetes.io/hostname kept 1 ready of 3; served by kubernetes.io/hostname",
        "{why}"
    );
}

/// Native traffic distribution side by side (docs/SEMANTICS.md §2.10): a Service without a
/// topology annotation comes through untouched (`spec.trafficDistribution`, slice hints); a
/// topology Service's kept endpoints keep their hints.
#[test]
fn traffic_distribution_and_hints_pass_through() {
    let (sim, w) = demo(&[]);
    let mut api = sim.get_json("/api/v1/namespaces/default/services/api");
    api["spec"]["trafficDistribution"] = json!("PreferSameZone");
    sim.apply(&api);
    let path = "/api/v1/namespaces/default/services/api";
    wait_for("trafficDistribution served", || {
        w.get_json(path)["spec"]["trafficDistribution"] == "PreferSameZone"
    });
    let without_rv = |mut v: Value| {
        v["metadata"]["resourceVersion"] = Value::Null;
        v
    };
    let api_slice = format!("{SLICES}/api-xyz89");
    assert_eq!(
        without_rv(w.get_json(&api_slice)),
        without_rv(sim.get_json(&api_slice))
    );
    // web (topology, zone): its two kept endpoints as they came, hints included.
    let served = w.get_json(SLICE);
    let upstream = sim.get_json(SLICE);
    assert_eq!(slice_ips(&served), ALL[..2]);
    assert_eq!(
        served["endpoints"][0]["hints"],
        json!({"forZones": [{"name": "zone-a"}]})
    );
    let kept = upstream["endpoints"].as_array().map(|e| e[..2].to_vec());
    assert_eq!(served["endpoints"].as_array().cloned(), kept);
}
