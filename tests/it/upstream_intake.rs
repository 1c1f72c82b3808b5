//! Issue 39, point 5: objects are checked against what was asked. A lying upstream whose nodes
//! watch sends a Service, a Node with a namespace, and a Node's older version after its newer one:
//! each is refused (not served by LIST, GET or watch), counted by resource and reason in
//! `/metrics`, and named in one WARN for the stream; the newer version stays served. Against the
//! real binaries, with a fault proxy that answers the first nodes watch itself.

use crate::common;

use std::time::{Duration, Instant};

use common::fault_proxy::{Fault, FaultProxy, Misbehaviour};
use common::{request, Sim, Wrapper};
use serde_json::json;

/// The value of `sample` (a full name with labels) in `/metrics` (0 when absent).
fn metric(w: &Wrapper, sample: &str) -> u64 {
    let (_, _, body) = request(w.health, "GET", "/metrics", &[], b"");
    let text = String::from_utf8_lossy(&body).into_owned();
    let prefix = format!("{sample} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn refused(w: &Wrapper, reason: &str) -> u64 {
    metric(
        w,
        &format!("grid_wrapper_objects_refused_total{{resource=\"nodes.v1\",reason=\"{reason}\"}}"),
    )
}

#[test]
fn a_lying_nodes_watch_is_refused_what_does_not_fit_and_what_goes_backwards() {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    let event =
        |kind: &str, obj: serde_json::Value| json!({"type": kind, "object": obj}).to_string();
    let lies = [
        event(
            "ADDED",
            json!({"kind": "Service", "apiVersion": "v1",
                   "metadata": {"name": "liar", "namespace": "default", "resourceVersion": "99999900"},
                   "spec": {"clusterIP": "10.96.0.99", "ports": [{"port": 80}]}}),
        ),
        event(
            "ADDED",
            json!({"kind": "Node", "apiVersion": "v1",
                   "metadata": {"name": "namespaced", "namespace": "default", "resourceVersion": "99999910"}}),
        ),
        event(
            "MODIFIED",
            json!({"kind": "Node", "apiVersion": "v1",
                   "metadata": {"name": "edge-a1", "resourceVersion": "99999990",
                                "labels": {"version": "newer", "zone": "zone-a"}}}),
        ),
        event(
            "MODIFIED",
            json!({"kind": "Node", "apiVersion": "v1",
                   "metadata": {"name": "edge-a1", "resourceVersion": "99999980",
                                "labels": {"version": "older", "zone": "zone-a"}}}),
        ),
    ]
    .join("\n");
    proxy.add(Fault {
        matches: "GET /api/v1/nodes?allowWatchBookmarks".into(),
        unless: None,
        what: Misbehaviour::Lie(Box::leak(lies.into_boxed_str())),
    });
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={}", proxy.url), "--hostname=edge-a1"]);
    w.wait_ready();
    let start = Instant::now();
    while refused(&w, "older_resource_version") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the lies refused: not within 30 s\n{}",
            log.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(proxy.fired("/api/v1/nodes?allowWatchBookmarks"));
    assert_eq!(refused(&w, "kind"), 1);
    assert_eq!(refused(&w, "scope"), 1);
    assert_eq!(refused(&w, "older_resource_version"), 1);

    // Not served by LIST, GET or watch of the local Node (the only one the cache serves); the
    // newer version stays served.
    let names = common::names(&w.get_json(common::OWN_NODE));
    assert_eq!(names, ["edge-a1"]);
    let a1 = w.get_json("/api/v1/nodes/edge-a1");
    assert_eq!(a1["metadata"]["labels"]["version"], "newer", "{a1}");
    let mut watch = w.watch(&format!("{}&watch=true", common::OWN_NODE));
    let events = watch.drain(Duration::from_millis(500));
    let watched: Vec<&str> = events
        .iter()
        .filter_map(|e| e["object"]["metadata"]["name"].as_str())
        .collect();
    assert_eq!(watched, ["edge-a1"]);

    // One WARN for the stream, naming the first object refused.
    let refusing_warn = |l: &str| l.contains("WARN") && l.contains("refusing");
    let text = log.wait_for_line("the refusal's WARN", Duration::from_secs(20), refusing_warn);
    let warns: Vec<&str> = text.lines().filter(|l| refusing_warn(l)).collect();
    assert_eq!(warns.len(), 1, "one WARN per stream:\n{text}");
    assert!(
        warns[0].contains("liar") && warns[0].contains("Service"),
        "{}",
        warns[0]
    );
}
