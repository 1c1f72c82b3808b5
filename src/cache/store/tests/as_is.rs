//! The fast path's reading and stamping against the `Value` path, and when it is taken.

use serde_json::{json, Value};

use super::super::{test_support, Target};
use super::*;
use crate::k8s::Resource;

/// `v` as a list item of `kind` becomes: its canonical bytes and facts.
fn prepared(v: &Value, kind: Resource) -> (super::super::Raw, AsIs) {
    match crate::cache::canonical::item(&v.to_string(), kind, &[]) {
        Ok(crate::cache::canonical::Item::Kept(_, bytes, Some(facts))) => (bytes, facts),
        other => panic!("{v} is not servable as it came: {other:?}"),
    }
}

#[test]
fn taken_only_for_objects_served_as_they_came() {
    let mut fx = fixture_f();
    fx.services.push(service("default", "plain", None));
    let ep = |ip: &str, node: &str| slice_endpoint_v1(ip, Some(node), None);
    let plain = slice_v1(
        "default",
        "plain-a",
        Some("plain"),
        vec![ep("10.0.0.3", "n2")],
    );
    let topo = slice_v1("default", "s-a", Some("s"), vec![ep("10.0.0.1", "h")]);
    let dangling = slice_v1("default", "d-a", Some("nobody"), vec![ep("10.0.0.4", "n3")]);
    let mut st = test_support::loaded(&fx, 1, Resource::SlicesV1, vec![]);
    let key = |v: &Value| ObjectKey::of(v).expect("named");
    let kind = Resource::SlicesV1;
    let as_is = |st: &mut State, kind, v: &Value, now| {
        let (bytes, facts) = prepared(v, kind);
        st.upsert_as_is(kind, &key(v), &bytes, facts, super::super::Relay::Too, now)
    };
    assert!(as_is(&mut st, kind, &plain, 1));
    assert!(as_is(&mut st, kind, &dangling, 1));
    // A topology Service's slice is filtered on its bytes: one endpoint kept, one pruned,
    // the kept one's hints kept; without an endpoints array it takes the Value path.
    let hinted = json!({"addresses":["10.0.0.9"],"nodeName":"n2",
        "hints":{"forZones":[{"name":"z"}]}});
    let topo_mixed = slice_v1(
        "default",
        "s-b",
        Some("s"),
        vec![ep("10.0.0.1", "h"), hinted, ep("10.0.0.2", "n3")],
    );
    let mut topo_null = slice_v1("default", "s-c", Some("s"), vec![]);
    topo_null["endpoints"] = Value::Null;
    assert!(as_is(&mut st, kind, &topo, 1));
    assert!(as_is(&mut st, kind, &topo_mixed, 1));
    assert!(!as_is(&mut st, kind, &topo_null, 1));
    // What each published is what the Value path serves, stamped with the RV it got.
    for v in [&plain, &topo, &topo_mixed] {
        let coll = st.collection(Resource::SlicesV1);
        let served = coll.get(&key(v)).expect("served").clone();
        drop(coll);
        let mut want = fx.serve_slice_v1(v);
        let got: Value = serde_json::from_slice(&served.json()).expect("JSON");
        want["metadata"]["resourceVersion"] = json!(served.rv.to_string());
        assert_eq!(got, want, "{}", key(v));
    }
    let kept = |v: &Value| {
        let coll = st.collection(Resource::SlicesV1);
        let served = coll.get(&key(v)).expect("served").clone();
        let got: Value = serde_json::from_slice(&served.json()).expect("JSON");
        got["endpoints"].as_array().map_or(0, Vec::len)
    };
    assert!(
        (1..3).contains(&kept(&topo_mixed)),
        "the filter pruned some, not all"
    );
    // The indexes know it: a relabel of n2 reaches it; its Service owns it.
    assert!(st
        .index
        .on_node("n2")
        .any(|t| *t == Target::Slice(key(&plain))));
    assert_eq!(
        st.index.owner_of(&key(&plain)),
        Some(&ObjectKey::new("default", "plain"))
    );
    // Endpoints: the plain Service's are, and the topology Service's, filtered on their
    // bytes (docs/SEMANTICS.md §2.4: pruned addresses and emptied lists left out);
    // default/kubernetes is not.
    let plain_eps = endpoints("default", "plain", f_addresses());
    let kube = endpoints("default", "kubernetes", f_addresses());
    let ekind = Resource::Endpoints;
    let mut topo_eps = fx.endpoints[0].clone();
    // A second subset whose addresses are all pruned and whose notReadyAddresses came empty:
    // both lists go, the subset stays.
    topo_eps["subsets"]
        .as_array_mut()
        .expect("subsets")
        .push(json!({
            "addresses": [{"ip": "10.9.9.9", "nodeName": "n3"}],
            "notReadyAddresses": [],
            "ports": [{"port": 80}]
        }));
    assert!(as_is(&mut st, ekind, &plain_eps, 1));
    assert!(as_is(&mut st, ekind, &topo_eps, 1));
    assert!(!as_is(&mut st, ekind, &kube, 1));
    for v in [&plain_eps, &topo_eps] {
        let coll = st.collection(Resource::Endpoints);
        let served = coll.get(&key(v)).expect("served").clone();
        drop(coll);
        let mut want = fx.serve_endpoints(v);
        let got: Value = serde_json::from_slice(&served.json()).expect("JSON");
        want["metadata"]["resourceVersion"] = json!(served.rv.to_string());
        assert_eq!(got, want, "{}", key(v));
    }
    let coll = st.collection(Resource::Endpoints);
    let got: Value =
        serde_json::from_slice(&coll.get(&key(&topo_eps)).expect("served").json()).expect("JSON");
    drop(coll);
    let addresses = |v: &Value| v["subsets"][0]["addresses"].as_array().map_or(0, Vec::len);
    assert!(
        (1..addresses(&topo_eps)).contains(&addresses(&got)),
        "the filter pruned some, not all: {got}"
    );
    assert_eq!(got["subsets"][1], json!({"ports": [{"port": 80}]}));
    // A node reported abnormal filters every object: none is served as it came.
    st.set_edge_health([("n2".to_string(), false)].into_iter().collect(), 2);
    assert!(!as_is(&mut st, kind, &plain, 2));
    st.set_edge_health(Default::default(), 3);
    assert!(as_is(&mut st, kind, &plain, 3));
    // Once v1beta1 is served, a slice is built in both versions: the Value path.
    st.serve_v1beta1();
    assert!(!as_is(&mut st, kind, &plain, 4));
    // Through a list, the result is the same as the Value path's whichever way it went.
    st.apply_list(
        kind,
        texts(&[plain, topo, topo_mixed, topo_null, dangling]),
        5,
    );
    assert!(st.is_ready());
}

/// A relabel or a Service change recomputes a topology Service's Endpoints on their stored
/// bytes, as it does its slices, and serves what the `Value` path would.
#[test]
fn topology_endpoints_are_recomputed_on_their_bytes() {
    let fx = fixture_f();
    let mut st = test_support::loaded(&fx, 1, Resource::SlicesV1, vec![]);
    let eps = &fx.endpoints[0];
    let key = ObjectKey::of(eps).expect("named");
    assert!(st.recompute_as_is(Resource::Endpoints, &key, 2));
    let coll = st.collection(Resource::Endpoints);
    let served = coll.get(&key).expect("served").clone();
    drop(coll);
    let mut want = fx.serve_endpoints(eps);
    want["metadata"]["resourceVersion"] = json!(served.rv.to_string());
    let got: Value = serde_json::from_slice(&served.json()).expect("JSON");
    assert_eq!(got, want);
    // Not for a kind without spans, nor an object not stored.
    assert!(!st.recompute_as_is(Resource::Services, &key, 3));
    let nobody = ObjectKey::new("default", "nobody");
    assert!(!st.recompute_as_is(Resource::Endpoints, &nobody, 3));
}
