//! Nodes other than the local one are held as facts (docs/SEMANTICS.md §1.1): kube-proxy's
//! list and watch of its own Node (`fieldSelector=metadata.name=<hostname>`) are served from the
//! cache, online and offline; any request that could select another Node goes to the upstream
//! (503 with a Status when it is unreachable); another Node's labels still prune the topology;
//! and a relay's follower still gets its own Node whole.

use crate::common;

use common::{names, rv, wait_for, web_ips, Sim, Wrapper};
use serde_json::{json, Value};

const HOST: &str = "edge-a1";
const OWN: &str = "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1";
const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

/// Whether `obj` (or a list) carries the cache's resourceVersion: its RVs are far above the
/// simulator's (docs/SEMANTICS.md §6), whose own are at most `upstream`.
fn from_cache(obj: &Value, upstream: u64) -> bool {
    rv(obj) > upstream
}

#[test]
fn kube_proxy_reads_its_own_node_from_the_cache_and_the_others_from_the_upstream() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, HOST, &[]);
    let upstream_rv = rv(&sim.get_json("/api/v1/nodes"));

    // kube-proxy's list and watch of its own Node: the cache's, whole.
    let own = w.get_json(&format!("{OWN}&limit=500&resourceVersion=0"));
    assert_eq!(names(&own), vec![HOST]);
    assert!(from_cache(&own, upstream_rv), "the cache's own RV: {own}");
    let node = &own["items"][0];
    assert_eq!(node["status"]["conditions"][0]["type"], "Ready", "{node}");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.28.0");
    assert_eq!(
        w.get_json("/api/v1/nodes/edge-a1")["metadata"]["name"],
        HOST
    );
    let mut watch = w.watch(&format!("{OWN}&watch=1&resourceVersion=0"));
    let ev = watch.expect();
    assert_eq!(
        (ev["type"].as_str(), common::ev_name(&ev).1.as_str()),
        (Some("ADDED"), HOST)
    );
    assert!(from_cache(&ev["object"], upstream_rv), "{ev}");

    // Any other Node request is the upstream's: every Node, as it has them.
    let all = w.get_json("/api/v1/nodes");
    assert_eq!(names(&all).len(), 4, "{all}");
    assert_eq!(
        rv(&all),
        rv(&sim.get_json("/api/v1/nodes")),
        "the upstream's list"
    );
    let other = w.get_json("/api/v1/nodes/edge-b1");
    assert_eq!(other["status"]["conditions"][0]["type"], "Ready", "{other}");
    assert!(!from_cache(&other, upstream_rv), "the upstream's: {other}");
    let labelled = w.get_json("/api/v1/nodes?labelSelector=zone%3Dzone-b");
    assert_eq!(names(&labelled), vec!["edge-b1"]);
    assert!(
        !from_cache(&labelled, upstream_rv),
        "the upstream's: {labelled}"
    );

    // Another Node's labels still prune: edge-c1 joins zone-a, its endpoint is kept.
    let before = web_ips(&w.get_json(SLICES));
    assert!(!before.contains(&"10.244.4.10".to_string()), "{before:?}");
    sim.label_node("edge-c1", json!({"zone": "zone-a"}));
    wait_for("edge-c1's endpoint to be served", || {
        web_ips(&w.get_json(SLICES)).contains(&"10.244.4.10".to_string())
    });
    // ... and its own Node's watch saw nothing of it.
    assert!(watch.next(std::time::Duration::from_millis(500)).is_none());

    // Offline: its own Node from the cache; any other Node request a 503 Status.
    drop(sim);
    let own = w.get_json(OWN);
    assert_eq!(names(&own), vec![HOST]);
    for path in [
        "/api/v1/nodes",
        "/api/v1/nodes/edge-b1",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-b1",
        "/api/v1/nodes?watch=1",
    ] {
        let (code, headers, body) = w.get(path);
        let status = common::assert_status(code, &headers, &body, 503);
        assert_eq!(status["kind"], "Status", "{path}");
    }
}

#[test]
fn a_relay_follower_gets_its_own_node_whole() {
    let Some((pki, sim, r)) = crate::relay_serve::started() else {
        return;
    };
    let f = crate::relay_serve::follower(&pki, &sim, &r);
    // The follower (edge-b1) lists Nodes from the relay view, which keeps every Node whole.
    let own = f.get_json("/api/v1/nodes?fieldSelector=metadata.name%3Dedge-b1");
    assert_eq!(names(&own), vec!["edge-b1"]);
    let node = &own["items"][0];
    assert_eq!(node["status"]["conditions"][0]["type"], "Ready", "{node}");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.28.0");
    assert_eq!(node["spec"]["podCIDR"], "10.244.3.0/24");
    // The relay's own kube-proxy port: its own Node only, from its cache.
    assert_eq!(
        names(&r.w.get_json("/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1")),
        vec!["edge-a1"]
    );
}
