//! Conformance checklist of docs/SEMANTICS.md §11, items 29 and 30: nothing is served before the
//! initial sync (hold, then 503 + `Retry-After`), and losing the upstream keeps the cache and
//! the open watches, with only the real differences emitted on recovery.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SVC: &str = "/api/v1/services";
const EPS: &str = "/api/v1/endpoints";
const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const NODES: &str = "/api/v1/nodes";

#[test]
fn c29_no_cache_answer_before_initial_sync_hold_then_503_retry_after() {
    // Nothing listens on the upstream port yet.
    let port = free_port();
    let master = format!("http://127.0.0.1:{port}");
    let w = Wrapper::start_unready(&master, "edge-a1", &["--not-ready-hold-seconds=1"]);
    let (code, _, _) = request(w.health, "GET", "/readyz", &[], b"");
    assert_eq!(code, 503, "/readyz before the sync");
    for path in [
        SVC.to_string(),
        format!("{V1}?labelSelector={SELECTOR_L}&limit=500&resourceVersion=0"),
        "/api/v1/nodes/edge-a1".to_string(),
        format!("{NODES}?watch=true&fieldSelector=metadata.name%3Dedge-a1"),
    ] {
        let t = Instant::now();
        let (code, headers, body) = w.get(&path);
        let took = t.elapsed();
        let st = assert_status(code, &headers, &body, 503);
        assert_eq!(st["reason"], "ServiceUnavailable");
        assert_eq!(st["details"]["retryAfterSeconds"], 1);
        assert_eq!(header(&headers, "retry-after"), Some("1"), "{path}");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(5),
            "{path}: held {took:?}"
        );
    }
    // A proxied request meanwhile: the upstream is unreachable → 503 too.
    let (code, headers, body) = request(
        w.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[],
        b"{}",
    );
    assert_status(code, &headers, &body, 503);

    // The upstream appears: the cache syncs, then answers.
    let sim = Sim::start(&["--listen", &format!("127.0.0.1:{port}")]);
    w.wait_ready();
    assert_eq!(names(&w.get_json(SVC)), ["api", "db", "kubernetes", "web"]);
    drop(sim);
}

#[test]
fn c29_request_held_during_sync_is_answered_once_ready() {
    let port = free_port();
    let master = format!("http://127.0.0.1:{port}");
    let w = Wrapper::start_unready(&master, "edge-a1", &["--not-ready-hold-seconds=15"]);
    std::thread::scope(|s| {
        let list = s.spawn(|| w.get(EPS));
        let watch = s.spawn(|| {
            let mut watch = w.watch(&format!("{EPS}?watch=true&timeoutSeconds=20"));
            (watch.code, watch.drain(Duration::from_millis(500)))
        });
        std::thread::sleep(Duration::from_millis(700));
        let (code, _, _) = request(w.health, "GET", "/readyz", &[], b"");
        assert_eq!(code, 503);
        let sim = Sim::start(&["--listen", &format!("127.0.0.1:{port}")]);
        let (code, _, body) = list.join().unwrap();
        assert_eq!(
            code,
            200,
            "held, then answered: {}",
            String::from_utf8_lossy(&body)
        );
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            names(&v),
            ["api", "kubernetes", "web"],
            "a complete, filtered snapshot"
        );
        let (code, events) = watch.join().unwrap();
        assert_eq!(code, 200);
        let got: Vec<(String, String)> = events.iter().map(ev_name).collect();
        let want: Vec<(String, String)> = ["api", "kubernetes", "web"]
            .iter()
            .map(|n| ("ADDED".to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want);
        let web = &events[2]["object"]["subsets"][0]["addresses"];
        assert_eq!(
            web.as_array().unwrap().len(),
            2,
            "topology filtering done before serving"
        );
        drop(sim);
    });
}

#[test]
fn c30_upstream_loss_keeps_cache_and_watches_recovery_emits_only_real_differences() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let sim = Sim::start(&["--listen", &listen]);
    // An object only the first upstream has (it will be gone after the "restart").
    sim.apply(&json!([
        {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "gone", "namespace": "default"},
         "spec": {"clusterIP": "10.96.6.6", "ports": [{"port": 80, "protocol": "TCP"}]}},
        {"kind": "Endpoints", "apiVersion": "v1", "metadata": {"name": "gone", "namespace": "default"},
         "subsets": [{"addresses": [{"ip": "10.244.1.66", "nodeName": "edge-a1"}],
                      "ports": [{"port": 80, "protocol": "TCP"}]}]}
    ]));
    let w = Wrapper::start(&sim.url, "edge-a1", &[]);
    wait_for("gone to be cached", || {
        names(&w.get_json(EPS)).contains(&"gone".to_string())
    });
    // Nodes: kube-proxy's list of its own (the cache serves no other).
    let own = format!("{NODES}?fieldSelector=metadata.name%3Dedge-a1");
    let paths = [SVC, EPS, V1, own.as_str()];
    let before: Vec<serde_json::Value> = paths.iter().map(|p| w.get_json(p)).collect();
    let start = rv(&before[0]);
    let mut watches: Vec<Watch> = paths
        .iter()
        .map(|p| {
            let sep = if p.contains('?') { '&' } else { '?' };
            w.watch(&format!(
                "{p}{sep}watch=true&timeoutSeconds=20&resourceVersion={start}"
            ))
        })
        .collect();

    // The upstream dies.
    drop(sim);
    let (code, headers, body) = request(
        w.addr,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        b"k8s\x00\x01\xff",
    );
    let st = assert_status(code, &headers, &body, 503);
    assert_eq!(st["reason"], "ServiceUnavailable");
    std::thread::sleep(Duration::from_millis(1500));
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(w.get_json(p), before[i], "{p}: the cache is kept as it was");
        assert!(
            watches[i].next(Duration::from_millis(100)).is_none(),
            "{p}: event without a change"
        );
        assert!(!watches[i].is_ended(), "{p}: watch closed on upstream loss");
    }
    let (code, _, _) = request(w.health, "GET", "/readyz", &[], b"");
    assert_eq!(code, 200, "still ready: the cache is intact");

    // The upstream comes back without `gone` (a fresh demo): exactly the real differences.
    let sim = Sim::start(&["--listen", &listen]);
    wait_for("the relist", || {
        !names(&w.get_json(SVC)).contains(&"gone".to_string())
    });
    wait_for("the relist", || {
        !names(&w.get_json(EPS)).contains(&"gone".to_string())
    });
    let expect: [&[(&str, &str)]; 4] = [&[("DELETED", "gone")], &[("DELETED", "gone")], &[], &[]];
    for (i, p) in paths.iter().enumerate() {
        let got: Vec<(String, String)> = watches[i]
            .drain(Duration::from_millis(500))
            .iter()
            .map(ev_name)
            .collect();
        let want: Vec<(String, String)> = expect[i]
            .iter()
            .map(|(t, n)| (t.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want, "{p}");
    }
    for (i, p) in paths.iter().enumerate().skip(2) {
        assert_eq!(
            w.get_json(p)["items"],
            before[i]["items"],
            "{p}: unchanged objects keep content and RV"
        );
    }
    // And the watches carry on with the new upstream.
    sim.label_node("edge-a1", json!({"back": "yes"}));
    let ev = watches[3].expect();
    assert_eq!(ev_name(&ev), ("MODIFIED".into(), "edge-a1".into()));
}
