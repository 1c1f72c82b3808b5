//! Issue 39, point 3: an update over `--max-object-bytes` of an object the cache holds keeps the
//! last accepted version served (stale), instead of serving the object's deletion. For the local
//! Node that deletion is what kube-proxy exits on, and it empties every topology Service. Against
//! the real binaries: the simulator grows the local Node past the bound on the watch, then a
//! relist (an RV reset upstream) lists it again over the bound, then it shrinks.

use crate::common;

use std::time::{Duration, Instant};

use common::{request, rv, Sim, Wrapper};
use serde_json::json;

const HOST: &str = "edge-a1";
const BOUND: u64 = 65_536;
const SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12";

/// The value of `sample` (a full name with labels) in `/metrics`, if present.
fn metric(w: &Wrapper, sample: &str) -> Option<u64> {
    let (_, _, body) = request(w.health, "GET", "/metrics", &[], b"");
    let text = String::from_utf8_lossy(&body).into_owned();
    let prefix = format!("{sample} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
}

fn too_large(w: &Wrapper) -> u64 {
    metric(
        w,
        "grid_wrapper_upstream_objects_too_large_total{resource=\"nodes\"}",
    )
    .unwrap_or(0)
}

fn stale_gauge(w: &Wrapper) -> Option<u64> {
    metric(w, "grid_wrapper_objects_stale{resource=\"nodes.v1\"}")
}

/// Waits up to `limit` for `cond`, or panics naming `what`.
fn within(limit: Duration, what: &str, cond: impl FnMut() -> bool) {
    within_or(limit, what, cond, String::new);
}

/// [`within`], with `detail()` in the panic message.
fn within_or(
    limit: Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
    detail: impl Fn() -> String,
) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}\n{}",
            detail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The stale objects `/debug/state` lists, as (resource, name).
fn listed_stale(w: &Wrapper) -> Vec<(String, String)> {
    let doc = w.debug_json("/debug/state");
    doc["stale_objects"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or_default().to_string();
            (s("resource"), s("name"))
        })
        .collect()
}

#[test]
fn an_oversized_update_of_the_local_node_keeps_it_served_and_the_topology_unchanged() {
    let sim = Sim::start(&[]);
    let (w, log) = Wrapper::start_captured(&[
        &format!("--master={}", sim.url),
        &format!("--hostname={HOST}"),
        &format!("--max-object-bytes={BOUND}"),
        "--debug",
    ]);
    w.wait_ready();
    let node = w.get_json(&format!("/api/v1/nodes/{HOST}"));
    let slice = w.get_json(SLICE);
    assert!(
        !common::slice_ips(&slice).is_empty(),
        "the topology slice serves endpoints: {slice}"
    );
    // kube-proxy's watch of its own Node.
    let list = w.get_json(&format!(
        "/api/v1/nodes?fieldSelector=metadata.name%3D{HOST}"
    ));
    let mut watch = w.watch(&format!(
        "/api/v1/nodes?fieldSelector=metadata.name%3D{HOST}&watch=true&resourceVersion={}",
        rv(&list)
    ));

    // The Node grows past the bound on the upstream's watch.
    sim.control("pad-node", &json!({"name": HOST, "bytes": 4 * BOUND}));
    within(Duration::from_secs(30), "the oversized event seen", || {
        too_large(&w) >= 1
    });
    within_or(
        Duration::from_secs(10),
        "the stale gauge at 1",
        || stale_gauge(&w) == Some(1),
        || log.text(),
    );
    let events = watch.drain(Duration::from_millis(500));
    assert!(events.is_empty(), "no event for the local Node: {events:?}");
    assert_eq!(
        w.get_json(&format!("/api/v1/nodes/{HOST}")),
        node,
        "the last accepted version served, its RV unchanged"
    );
    assert_eq!(w.get_json(SLICE), slice, "the topology unchanged");
    assert_eq!(
        listed_stale(&w),
        [("nodes.v1".to_string(), HOST.to_string())],
        "/debug/state lists it"
    );
    let too_large_warn =
        |l: &str| l.contains("WARN") && l.contains(HOST) && l.contains("max-object-bytes");
    let text = log.wait_for_line(
        "the WARN naming it",
        Duration::from_secs(20),
        too_large_warn,
    );
    let warns: Vec<&str> = text.lines().filter(|l| too_large_warn(l)).collect();
    assert_eq!(warns.len(), 1, "one WARN naming it:\n{text}");
    assert!(
        warns[0].contains(&format!("resourceVersion {}", rv(&node)))
            && warns[0].contains(&BOUND.to_string()),
        "the WARN says what it keeps serving, and the bound: {}",
        warns[0]
    );

    // A relist (the upstream's RVs restart: relisted from scratch) lists it over the bound
    // again: it is not absent from the list, so it is not deleted.
    let seen = too_large(&w);
    sim.reset_rv(20, Some("http"));
    within(
        Duration::from_secs(30),
        "the relist's oversized item seen",
        || too_large(&w) > seen,
    );
    std::thread::sleep(Duration::from_millis(300));
    let events = watch.drain(Duration::from_millis(500));
    assert!(
        events.iter().all(|e| e["type"] != "DELETED"),
        "no DELETED after the relist: {events:?}"
    );
    assert_eq!(w.get(&format!("/api/v1/nodes/{HOST}")).0, 200);
    assert_eq!(
        common::slice_ips(&w.get_json(SLICE)),
        common::slice_ips(&slice)
    );
    assert_eq!(stale_gauge(&w), Some(1));

    // A version within the bound replaces it and clears the mark.
    sim.control("pad-node", &json!({"name": HOST, "bytes": 0}));
    sim.label_node(HOST, json!({"after": "small"}));
    let ev = watch.until(|e| e["object"]["metadata"]["labels"]["after"] == "small");
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    within(Duration::from_secs(10), "the stale gauge back to 0", || {
        stale_gauge(&w) == Some(0)
    });
    assert!(listed_stale(&w).is_empty());
    assert_eq!(
        common::slice_ips(&w.get_json(SLICE)),
        common::slice_ips(&slice)
    );
}
