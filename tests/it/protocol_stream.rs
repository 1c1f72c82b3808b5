//! Conformance checklist of docs/SEMANTICS.md §11, items 21–25 and 27: selector transitions,
//! bookmarks, watch lifetime, slow consumers, WatchList and the node informer — against the real
//! binaries over loopback sockets.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SVC: &str = "/api/v1/services";
const EPS: &str = "/api/v1/endpoints";
const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const V1B1: &str = "/apis/discovery.k8s.io/v1beta1/endpointslices";
const NODES: &str = "/api/v1/nodes";
/// kube-proxy's list of its own Node: the one Node list the cache serves (docs/SEMANTICS.md
/// §1.1).
const OWN: &str = "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1";

fn service(name: &str, ns: &str, labels: Value, cluster_ip: &str) -> Value {
    json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"clusterIP": cluster_ip, "ports": [{"port": 80, "protocol": "TCP"}]}})
}

fn item_rv(w: &Wrapper, path: &str, name: &str) -> Option<u64> {
    w.get_json(path)["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == name).map(rv))
}

#[test]
fn c21_selector_transitions_added_modified_deleted_with_old_object() {
    let (sim, w) = demo(&[]);
    let start = rv(&w.get_json(SVC));
    let sel = enc("tier=front");
    let mut watch = w.watch(&format!(
        "{SVC}?watch=true&timeoutSeconds=15&resourceVersion={start}&labelSelector={sel}"
    ));
    let field = enc("spec.clusterIP!=None");
    let mut by_field = w.watch(&format!(
        "{SVC}?watch=true&timeoutSeconds=15&resourceVersion={start}&fieldSelector={field}"
    ));
    let mut ns_watch = w.watch(&format!(
        "/api/v1/namespaces/other/services?watch=true&timeoutSeconds=15&resourceVersion={start}"
    ));

    // Entering: ADDED.
    sim.apply(&service(
        "sel",
        "default",
        json!({"tier": "front"}),
        "10.96.7.7",
    ));
    let ev = watch.expect();
    assert_eq!(ev_name(&ev), ("ADDED".into(), "sel".into()));
    assert_eq!(ev["object"]["metadata"]["labels"]["tier"], "front");
    assert_eq!(ev_name(&by_field.expect()), ("ADDED".into(), "sel".into()));
    // Staying: MODIFIED.
    let mut annotated = service("sel", "default", json!({"tier": "front"}), "10.96.7.7");
    annotated["metadata"]["annotations"] = json!({"note": "x"});
    sim.apply(&annotated);
    let ev = watch.expect();
    assert_eq!(ev_name(&ev), ("MODIFIED".into(), "sel".into()));
    assert_eq!(ev["object"]["metadata"]["annotations"]["note"], "x");
    let last_served = ev["object"].clone();
    assert_eq!(
        ev_name(&by_field.expect()),
        ("MODIFIED".into(), "sel".into())
    );
    // Not matching before or after: nothing.
    sim.apply(&service(
        "unrelated",
        "default",
        json!({"tier": "back"}),
        "10.96.7.8",
    ));
    // Leaving: DELETED with the old object, stamped with the change's RV.
    let mut back = annotated.clone();
    back["metadata"]["labels"]["tier"] = json!("back");
    sim.apply(&back);
    let ev = watch.expect();
    assert_eq!(ev_name(&ev), ("DELETED".into(), "sel".into()));
    assert_eq!(
        ev["object"]["metadata"]["labels"]["tier"], "front",
        "the old object"
    );
    let change_rv = item_rv(&w, SVC, "sel").unwrap();
    assert_eq!(rv(&ev["object"]), change_rv, "stamped with the change's RV");
    let mut old = last_served.clone();
    old["metadata"]["resourceVersion"] = json!(change_rv.to_string());
    assert_eq!(ev["object"], old);
    // by_field saw `unrelated` ADDED, then `sel` MODIFIED (still matching).
    let got: Vec<(String, String)> = (0..2).map(|_| ev_name(&by_field.expect())).collect();
    assert_eq!(
        got,
        [
            ("ADDED".into(), "unrelated".into()),
            ("MODIFIED".into(), "sel".into())
        ]
    );
    // A field-selector exit: clusterIP becomes None → DELETED on by_field.
    let mut none = back.clone();
    none["spec"]["clusterIP"] = json!("None");
    sim.apply(&none);
    let ev = by_field.expect();
    assert_eq!(ev_name(&ev), ("DELETED".into(), "sel".into()));
    assert_eq!(ev["object"]["spec"]["clusterIP"], "10.96.7.7");
    // Entering again: ADDED; a real deletion: DELETED.
    sim.apply(&annotated);
    assert_eq!(ev_name(&watch.expect()), ("ADDED".into(), "sel".into()));
    assert_eq!(ev_name(&by_field.expect()), ("ADDED".into(), "sel".into()));
    sim.delete("Service", "default", "sel");
    assert_eq!(ev_name(&watch.expect()), ("DELETED".into(), "sel".into()));
    assert_eq!(
        ev_name(&by_field.expect()),
        ("DELETED".into(), "sel".into())
    );
    assert!(
        watch.next(Duration::from_millis(300)).is_none(),
        "unrelated changes leaked"
    );
    // The path namespace is part of "matches": another namespace saw nothing.
    assert!(ns_watch.next(Duration::from_millis(100)).is_none());
    sim.apply(&service("there", "other", json!({}), "10.96.7.9"));
    assert_eq!(
        ev_name(&ns_watch.expect()),
        ("ADDED".into(), "there".into())
    );
}

/// A whole watch body (to its `timeoutSeconds` end), as events.
fn whole(w: &Wrapper, path_query: &str) -> Vec<Value> {
    let (code, headers, body) = request(w.addr, "GET", path_query, &[], b"");
    assert_eq!(code, 200, "{path_query}");
    assert_eq!(header(&headers, "transfer-encoding"), Some("chunked"));
    watch_events(&body)
}

#[test]
fn c22_bookmarks_have_the_watched_kind_only_an_rv_and_need_allow_watch_bookmarks() {
    let shared = shared_demo();
    let w = &shared.w;
    let current = rv(&w.get_json(OWN));
    let kinds = [
        (EPS, "Endpoints", "v1"),
        (V1B1, "EndpointSlice", "discovery.k8s.io/v1beta1"),
        (V1, "EndpointSlice", "discovery.k8s.io/v1"),
        (OWN, "Node", "v1"),
        (SVC, "Service", "v1"),
    ];
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (path, kind, api) in kinds {
            let w = &w;
            let sep = if path.contains('?') { '&' } else { '?' };
            handles.push(s.spawn(move || {
                // timeoutSeconds=3: the snapshot BOOKMARK, then the final one ~2 s before the end.
                let evs = whole(
                    w,
                    &format!("{path}{sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=3"),
                );
                let bookmarks: Vec<&Value> =
                    evs.iter().filter(|e| e["type"] == "BOOKMARK").collect();
                assert!(bookmarks.len() >= 2, "{path}: {evs:?}");
                for b in bookmarks {
                    let o = b["object"].as_object().unwrap();
                    assert_eq!(
                        o.keys().collect::<Vec<_>>(),
                        ["apiVersion", "kind", "metadata"],
                        "{path}: {b}"
                    );
                    assert_eq!(b["object"]["kind"], kind, "{path}");
                    assert_eq!(b["object"]["apiVersion"], api, "{path}");
                    let meta = b["object"]["metadata"].as_object().unwrap();
                    assert_eq!(
                        meta.keys().collect::<Vec<_>>(),
                        ["resourceVersion"],
                        "{path}: {b}"
                    );
                    assert!(rv(&b["object"]) >= current, "{path}");
                }
                for q in ["", "&allowWatchBookmarks=false"] {
                    let evs = whole(w, &format!("{path}{sep}watch=true&timeoutSeconds=3{q}"));
                    assert!(
                        evs.iter().all(|e| e["type"] == "ADDED"),
                        "{path}{q}: {evs:?}"
                    );
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Raw watch request with `Connection: close`: (elapsed, full response bytes).
fn raw_watch(w: &Wrapper, path_query: &str) -> (Duration, Vec<u8>) {
    let t = Instant::now();
    let mut s = TcpStream::connect(w.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(
        s,
        "GET {path_query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    (t.elapsed(), out)
}

#[test]
fn c23_watch_ends_cleanly_at_timeout_seconds_and_never_early() {
    let shared = shared_demo();
    let w = &shared.w;
    let current = rv(&w.get_json(OWN));
    // A quiet watch with timeoutSeconds=2: headers, no events, a clean end of the chunked body.
    let (took, out) = raw_watch(
        w,
        &format!("{OWN}&watch=true&timeoutSeconds=2&resourceVersion={current}"),
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n0\r\n\r\n"),
        "a clean, empty chunked body: {text:?}"
    );
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "ended after {took:?}"
    );
    // With events, the end is as clean (no ERROR event at the deadline).
    let evs = whole(w, &format!("{SVC}?watch=true&timeoutSeconds=1"));
    assert_eq!(evs.len(), 4);
    assert!(evs.iter().all(|e| e["type"] == "ADDED"));
    // A negative timeoutSeconds: the apiserver's watch timer has already fired, so the watch
    // ends at once, cleanly (it used to get the default lifetime, 30 to 60 minutes).
    for q in ["&timeoutSeconds=-1", "&timeoutSeconds=-5"] {
        let mut watch = w.watch(&format!("{OWN}&watch=true&resourceVersion={current}{q}"));
        assert_eq!(watch.code, 200, "{q}");
        assert!(
            watch.next(Duration::from_secs(10)).is_none(),
            "{q}: no event"
        );
        assert!(watch.is_ended(), "{q}: the watch ends at once");
    }
    // Absent or zero timeoutSeconds: the default lifetime (≥ 1800 s) — still open.
    let mut open: Vec<Watch> = ["", "&timeoutSeconds=0"]
        .iter()
        .map(|q| w.watch(&format!("{OWN}&watch=true&resourceVersion={current}{q}")))
        .collect();
    std::thread::sleep(Duration::from_millis(2500));
    for (i, watch) in open.iter_mut().enumerate() {
        assert_eq!(watch.code, 200);
        assert!(
            watch.next(Duration::from_millis(50)).is_none(),
            "watch {i}: unexpected event"
        );
        assert!(!watch.is_ended(), "watch {i} closed early");
    }
    // An unusable timeoutSeconds is rejected with a Status, never an early-closed stream.
    for bad in ["abc", "1.5", "1s"] {
        let (code, headers, body) = w.get(&format!("{OWN}&watch=true&timeoutSeconds={bad}"));
        let st = assert_status(code, &headers, &body, 400);
        assert_eq!(st["reason"], "BadRequest");
    }
}

#[test]
fn c24_watchers_are_freed_on_disconnect() {
    let (_sim, w) = demo(&[]);
    // More watches than the server's connection cap (1024), opened and dropped one by one: if a
    // disconnected watcher were kept, the later ones would be refused.
    let current = rv(&w.get_json(OWN));
    for i in 0..1100 {
        let mut watch = Watch::open(
            w.addr,
            &format!("{OWN}&watch=true&resourceVersion={current}&timeoutSeconds=60"),
            &[],
        );
        assert_eq!(watch.code, 200, "watch {i}");
        if i % 100 == 0 {
            assert!(watch.next(Duration::from_millis(5)).is_none());
        }
    }
    let mut watch = w.watch(&format!("{OWN}&watch=true&timeoutSeconds=5"));
    assert_eq!(watch.drain(Duration::from_millis(300)).len(), 1);
    assert_eq!(names(&w.get_json(OWN)).len(), 1);
}

#[test]
fn c25_watchlist_sends_sorted_added_then_initial_events_end_bookmark_and_stays_open() {
    let (sim, w) = demo(&[]);
    sim.apply(&json!([
        service("zzz", "aaa", json!({}), "10.96.5.1"),
        service("aaa", "zzz", json!({}), "10.96.5.2"),
        service("mmm", "default", json!({}), "10.96.5.3")
    ]));
    wait_for("the services", || names(&w.get_json(SVC)).len() == 7);
    let wl = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    for i in 0..5 {
        let list = w.get_json(SVC);
        let snapshot = rv(&list);
        let q = &[
            format!("{wl}&allowWatchBookmarks=true"),
            format!("{wl}&allowWatchBookmarks=true&resourceVersion="),
            format!("{wl}&allowWatchBookmarks=true&resourceVersion={snapshot}"),
            format!("{wl}&resourceVersion=0"),
            format!("allowWatchBookmarks=true&labelSelector={SELECTOR_L}&resourceVersion=&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true"),
        ][i];
        let mut watch = w.watch(&format!("{SVC}?{q}&timeoutSeconds=15"));
        assert_eq!(watch.code, 200, "{q}");
        let evs: Vec<Value> = (0..8).map(|_| watch.expect()).collect();
        let keys: Vec<(String, String)> = evs[..7]
            .iter()
            .map(|e| {
                assert_eq!(e["type"], "ADDED", "{q}: {e}");
                let m = &e["object"]["metadata"];
                (
                    m["namespace"].as_str().unwrap().into(),
                    m["name"].as_str().unwrap().into(),
                )
            })
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{q}: sorted by namespace/name");
        assert_eq!(keys[0], ("aaa".to_string(), "zzz".to_string()));
        let objs: Vec<&Value> = evs[..7].iter().map(|e| &e["object"]).collect();
        let items: Vec<&Value> = list["items"].as_array().unwrap().iter().collect();
        assert_eq!(objs, items, "{q}: the snapshot");
        let b = &evs[7];
        assert_eq!(b["type"], "BOOKMARK", "{q}");
        assert_eq!(b["object"]["kind"], "Service");
        assert_eq!(b["object"]["apiVersion"], "v1");
        assert!(rv(&b["object"]) >= snapshot, "{q}");
        assert_eq!(
            b["object"]["metadata"]["annotations"],
            json!({"k8s.io/initial-events-end": "true"}),
            "{q}"
        );
        // The stream stays open and continues live.
        assert!(watch.next(Duration::from_millis(200)).is_none(), "{q}");
        assert!(!watch.is_ended(), "{q}: closed after the initial events");
        sim.label_node("edge-a1", json!({"wl": i.to_string()})); // unrelated to services
        sim.apply(&service(
            "mmm",
            "default",
            json!({"round": i.to_string()}),
            "10.96.5.3",
        ));
        let ev = watch.until(|e| e["type"] != "BOOKMARK");
        assert_eq!(ev_name(&ev), ("MODIFIED".into(), "mmm".into()), "{q}");
        assert!(rv(&ev["object"]) > snapshot);
    }
    // sendInitialEvents=false with NotOlderThan is an ordinary watch from the RV.
    let now = rv(&w.get_json(SVC));
    let mut plain = w.watch(&format!(
        "{SVC}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion={now}&timeoutSeconds=10"
    ));
    assert!(
        plain.next(Duration::from_millis(300)).is_none(),
        "no initial events"
    );
    sim.apply(&service(
        "mmm",
        "default",
        json!({"round": "last"}),
        "10.96.5.3",
    ));
    assert_eq!(ev_name(&plain.expect()), ("MODIFIED".into(), "mmm".into()));
    // An unusable RV is a 410, as for ordinary watches.
    let mut bad = w.watch(&format!("{SVC}?{wl}&resourceVersion=abc"));
    let ev = bad.expect();
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
}

#[test]
fn c27_node_watch_by_name_returns_exactly_that_node_and_no_synthetic_deletions() {
    let (sim, w) = demo(&[]);
    let list = w.get_json(&format!(
        "{NODES}?fieldSelector=metadata.name%3Dedge-a1&limit=500&resourceVersion=0"
    ));
    assert_eq!(names(&list), ["edge-a1"]);
    let q = format!(
        "allowWatchBookmarks=true&fieldSelector=metadata.name%3Dedge-a1&resourceVersion={}&timeout=7m36s&timeoutSeconds=456&watch=true",
        rv(&list)
    );
    let mut informer = w.watch(&format!("{NODES}?{q}"));
    let mut initial = w.watch(&format!(
        "{NODES}?watch=true&timeoutSeconds=20&fieldSelector=metadata.name%3Dedge-a1"
    ));
    assert_eq!(
        ev_name(&initial.expect()),
        ("ADDED".into(), "edge-a1".into())
    );
    assert!(
        initial.next(Duration::from_millis(200)).is_none(),
        "only edge-a1"
    );
    // Other nodes change: nothing for the by-name watches.
    sim.label_node("edge-b1", json!({"x": "1"}));
    for watch in [&mut informer, &mut initial] {
        let evs = watch.drain(Duration::from_millis(300));
        assert!(evs.iter().all(|e| e["type"] == "BOOKMARK"), "{evs:?}");
    }
    // The node itself changes (status only): MODIFIED.
    let mut node = sim.get_json("/api/v1/nodes/edge-a1");
    node["status"]["conditions"][0]["reason"] = json!("Changed");
    sim.apply(&node);
    for watch in [&mut informer, &mut initial] {
        let ev = watch.expect();
        assert_eq!(ev_name(&ev), ("MODIFIED".into(), "edge-a1".into()));
        assert_eq!(ev["object"]["status"]["conditions"][0]["reason"], "Changed");
    }
    // Upstream watch interruptions, with and without a forced relist (compaction), never
    // produce a Node deletion or any other event for unchanged nodes.
    sim.control("close-watches", &json!({}));
    std::thread::sleep(Duration::from_millis(500));
    sim.control("compact", &json!({}));
    sim.control("close-watches", &json!({}));
    std::thread::sleep(Duration::from_millis(1500));
    for watch in [&mut informer, &mut initial] {
        let evs = watch.drain(Duration::from_millis(300));
        assert!(evs.iter().all(|e| e["type"] == "BOOKMARK"), "{evs:?}");
    }
    assert_eq!(names(&w.get_json(OWN)), ["edge-a1"]);
    // And the watches are still live.
    sim.label_node("edge-a1", json!({"after": "relist"}));
    for watch in [&mut informer, &mut initial] {
        let ev = watch.until(|e| e["type"] != "BOOKMARK");
        assert_eq!(ev_name(&ev), ("MODIFIED".into(), "edge-a1".into()));
    }
    let (code, _, body) = w.get(&format!("{NODES}?fieldSelector=metadata.name%3Dnope"));
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains("\"items\":[]"));
}
