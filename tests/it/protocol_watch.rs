//! Conformance checklist of docs/SEMANTICS.md §11, items 13–20: one event per change, watch starts
//! (snapshot, replay, 410), flushing, framing, event types and deletions — against the real
//! binaries over loopback sockets.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const EPS: &str = "/api/v1/endpoints";
const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const V1B1: &str = "/apis/discovery.k8s.io/v1beta1/endpointslices";
const SVC: &str = "/api/v1/services";
/// kube-proxy's list of its own Node: the one Node list the cache serves (docs/SEMANTICS.md
/// §1.1); a change of another Node is no Node event here.
const NODES: &str = "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1";
const QUIET: Duration = Duration::from_millis(600);

/// What joins a query to `path`: `&` when it has one already.
fn sep(path: &str) -> char {
    if path.contains('?') {
        '&'
    } else {
        '?'
    }
}

/// Opens a watch on `path` from `rv` (no bookmarks), bounded to 15 s.
fn watch_from(w: &Wrapper, path: &str, rv: u64) -> Watch {
    let watch = w.watch(&format!(
        "{path}{}watch=true&timeoutSeconds=15&resourceVersion={rv}",
        sep(path)
    ));
    assert_eq!(watch.code, 200, "watch {path}");
    watch
}

/// The item named `name` in a list.
fn item<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in list"))
}

/// `v` without `metadata.resourceVersion`.
fn without_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    v
}

/// The simulator's web Endpoints with its address list transformed by `f`.
fn web_endpoints(sim: &Sim, f: impl FnOnce(&mut Vec<Value>)) -> Value {
    let mut ep = sim.get_json("/api/v1/namespaces/default/endpoints/web");
    let addrs = ep["subsets"][0]["addresses"].as_array_mut().unwrap();
    f(addrs);
    ep
}

#[test]
fn c13_each_filtered_change_yields_exactly_one_event_with_a_new_rv() {
    let (sim, w) = demo(&[]);
    let start = rv(&w.get_json(EPS));
    let mut eps = watch_from(&w, EPS, start);
    let mut v1 = watch_from(&w, V1, start);
    let mut v1b1 = watch_from(&w, V1B1, start);
    let mut nodes = watch_from(&w, NODES, start);

    // An upstream update with identical content (a resync): no event, no new RV.
    let same = sim.get_json("/api/v1/namespaces/default/endpoints/web");
    sim.apply(&same);
    let mut slice =
        sim.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12");
    sim.apply(&slice);
    // An upstream change invisible after filtering (a zone-b backend of a zone-filtered
    // Service changes its IP): no event either.
    sim.apply(&web_endpoints(&sim, |a| a[2]["ip"] = json!("10.244.3.99")));
    slice["endpoints"][2]["addresses"] = json!(["10.244.3.99"]);
    sim.apply(&slice);
    for (name, watch) in [
        ("endpoints", &mut eps),
        ("v1", &mut v1),
        ("v1beta1", &mut v1b1),
    ] {
        let evs = watch.drain(QUIET);
        assert!(evs.is_empty(), "{name}: invisible changes produced {evs:?}");
    }
    assert_eq!(rv(&w.get_json(EPS)), start, "no change, no new RV");

    // A visible change: exactly one MODIFIED with a new RV, only on that resource.
    sim.apply(&web_endpoints(&sim, |a| {
        a.push(json!({"ip": "10.244.2.11", "nodeName": "edge-a2"}))
    }));
    let ev = eps.expect();
    assert_eq!(ev_name(&ev), ("MODIFIED".into(), "web".into()));
    let r1 = rv(&ev["object"]);
    assert!(r1 > start);
    assert_eq!(
        ev["object"]["subsets"][0]["addresses"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(eps.drain(QUIET).is_empty(), "one change, one event");
    assert!(v1.drain(Duration::from_millis(100)).is_empty());
    assert_eq!(rv(item(&w.get_json(EPS), "web")), r1);

    // A node status update is a change of the served Node only (the local one: another Node's
    // status is not held).
    let mut node = sim.get_json("/api/v1/nodes/edge-a1");
    node["status"]["conditions"][0]["status"] = json!("False");
    sim.apply(&node);
    let ev = nodes.expect();
    assert_eq!(ev_name(&ev), ("MODIFIED".into(), "edge-a1".into()));
    assert!(rv(&ev["object"]) > r1);
    assert!(nodes.drain(QUIET).is_empty());
    assert!(
        eps.drain(Duration::from_millis(100)).is_empty(),
        "node status moved endpoints"
    );

    // A topology change (edge-b1 joins zone-a): one MODIFIED per affected object and version;
    // none on kube-proxy's own Node.
    sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    let mut seen = Vec::new();
    for (name, watch, obj) in [
        ("endpoints", &mut eps, "web"),
        ("v1", &mut v1, "web-abc12"),
        ("v1beta1", &mut v1b1, "web-abc12"),
    ] {
        let evs = watch.drain(QUIET);
        let got: Vec<(String, String)> = evs.iter().map(ev_name).collect();
        assert_eq!(got, [("MODIFIED".to_string(), obj.to_string())], "{name}");
        seen.push(rv(&evs[0]["object"]));
    }
    assert!(nodes.drain(QUIET).is_empty(), "another Node's relabel");
    let distinct: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        seen.len(),
        "every change has its own RV: {seen:?}"
    );
}

/// Exactly `n` events, then nothing more for a short while.
fn take(watch: &mut Watch, n: usize) -> Vec<Value> {
    let evs: Vec<Value> = (0..n).map(|_| watch.expect()).collect();
    let extra = watch.next(Duration::from_millis(150));
    assert!(
        extra.is_none(),
        "unexpected extra event {extra:?} after {evs:?}"
    );
    evs
}

#[test]
fn c14_watch_from_absent_empty_or_zero_rv_starts_with_added_for_every_match() {
    let shared = shared_demo();
    let w = &shared.w;
    for path in [SVC, EPS, V1, V1B1, NODES] {
        let list = w.get_json(path);
        let items = list["items"].as_array().unwrap().clone();
        for q in ["", "&resourceVersion=", "&resourceVersion=0"] {
            let mut watch = w.watch(&format!(
                "{path}{}watch=true&timeoutSeconds=10{q}",
                sep(path)
            ));
            let evs = take(&mut watch, items.len());
            for (ev, it) in evs.iter().zip(&items) {
                assert_eq!(ev["type"], "ADDED", "{path}{q}");
                assert_eq!(&ev["object"], it, "{path}{q}: the served object as listed");
            }
        }
        // Selectors apply to the initial events too.
        let first = items[0]["metadata"]["name"].as_str().unwrap();
        let mut watch = w.watch(&format!(
            "{path}{}watch=true&timeoutSeconds=10&fieldSelector={}",
            sep(path),
            enc(&format!("metadata.name={first}"))
        ));
        let got: Vec<(String, String)> = take(&mut watch, 1).iter().map(ev_name).collect();
        assert_eq!(got, [("ADDED".to_string(), first.to_string())], "{path}");
        // With bookmarks, a BOOKMARK at the snapshot RV follows the initial events.
        let mut watch = w.watch(&format!(
            "{path}{}watch=true&timeoutSeconds=10&allowWatchBookmarks=true",
            sep(path)
        ));
        let evs = take(&mut watch, items.len() + 1);
        let last = evs.last().unwrap();
        assert_eq!(last["type"], "BOOKMARK");
        assert_eq!(rv(&last["object"]), rv(&list), "{path}");
    }
}

/// Waits until the wrapper's lists satisfy `cond`.
fn wait_lists(w: &Wrapper, what: &str, cond: impl Fn(&Wrapper) -> bool) {
    wait_for(what, || cond(w));
}

#[test]
fn c15_watch_from_buffered_rv_replays_exactly_the_missed_changes_then_live() {
    let (sim, w) = demo(&[]);
    // The client lists everything, then has no watch open while upstream changes.
    let before: Vec<(String, Value)> = [SVC, EPS, V1, V1B1, NODES]
        .iter()
        .map(|p| (p.to_string(), w.get_json(p)))
        .collect();
    let start = rv(&before[0].1);
    // Each change reaches the cache before the next is made, so that the expected order is the
    // upstream order (the reflectors of different resources run independently).
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "new-svc", "namespace": "default"},
        "spec": {"clusterIP": "10.96.3.3", "ports": [{"port": 80, "protocol": "TCP"}]}}));
    wait_lists(&w, "new-svc", |w| {
        names(&w.get_json(SVC)).contains(&"new-svc".to_string())
    });
    sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    wait_lists(&w, "the relabel", |w| {
        web_ips(&w.get_json(V1)).contains(&"10.244.3.10".to_string())
    });
    sim.delete("Endpoints", "default", "api");
    wait_lists(&w, "the Endpoints deletion", |w| {
        names(&w.get_json(EPS)) == ["kubernetes", "web"]
    });
    sim.delete("EndpointSlice", "default", "api-xyz89");
    wait_lists(&w, "the slice deletion", |w| {
        names(&w.get_json(V1B1)) == ["kubernetes", "web-abc12"]
    });
    let after: Vec<Value> = [SVC, EPS, V1, V1B1, NODES]
        .iter()
        .map(|p| w.get_json(p))
        .collect();

    // A node relabel gives every affected object, in every version, a new RV; others keep it.
    for (i, name) in [(1, "web"), (2, "web-abc12"), (3, "web-abc12")] {
        let (old, new) = (rv(item(&before[i].1, name)), rv(item(&after[i], name)));
        assert!(new > old, "{} {name}: RV {old} → {new}", before[i].0);
        assert_eq!(
            item(&after[i], name)["endpoints"]
                .as_array()
                .map(Vec::len)
                .unwrap_or(3),
            3
        );
    }
    for (i, name) in [(1, "kubernetes"), (2, "kubernetes"), (4, "edge-a1")] {
        assert_eq!(
            rv(item(&before[i].1, name)),
            rv(item(&after[i], name)),
            "{name} untouched"
        );
    }

    let expect: [(&str, &[(&str, &str)]); 5] = [
        (SVC, &[("ADDED", "new-svc")]),
        (EPS, &[("MODIFIED", "web"), ("DELETED", "api")]),
        (V1, &[("MODIFIED", "web-abc12"), ("DELETED", "api-xyz89")]),
        (V1B1, &[("MODIFIED", "web-abc12"), ("DELETED", "api-xyz89")]),
        // Another Node's relabel: no event for kube-proxy's own Node.
        (NODES, &[]),
    ];
    let mut watches = Vec::new();
    for (i, (path, want)) in expect.iter().enumerate() {
        let mut watch = watch_from(&w, path, rv(&before[i].1));
        let evs = watch.drain(QUIET);
        let got: Vec<(String, String)> = evs.iter().map(ev_name).collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(t, n)| (t.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want, "{path}: exactly the missed changes");
        let mut last = start;
        for ev in &evs {
            let r = rv(&ev["object"]);
            assert!(
                r > last && r <= rv(&after[i]),
                "{path}: RV order {r} after {last}"
            );
            last = r;
            if ev["type"] == "MODIFIED" {
                let name = ev["object"]["metadata"]["name"].as_str().unwrap();
                assert_eq!(
                    &ev["object"],
                    item(&after[i], name),
                    "{path}: the current object"
                );
            }
        }
        watches.push(watch);
    }
    // Then live: the replaying watches continue with new changes.
    sim.label_node("edge-b1", json!({"zone": "zone-b"}));
    for (i, path) in [(1, EPS), (2, V1), (3, V1B1)] {
        let ev = watches[i].expect();
        assert_eq!(ev["type"], "MODIFIED", "{path} live: {ev}");
        assert!(rv(&ev["object"]) > rv(&after[i]));
    }
    assert!(
        watches[0].drain(Duration::from_millis(200)).is_empty(),
        "services unaffected"
    );
    assert!(
        watches[4].drain(Duration::from_millis(200)).is_empty(),
        "kube-proxy's own Node unaffected"
    );
}

/// Expects `200`, exactly one `ERROR` 410 `Expired` event, and the end of the stream.
fn assert_expired(w: &Wrapper, path: &str, rv_param: &str) {
    let mut watch = w.watch(&format!(
        "{path}{}watch=true&timeoutSeconds=10&resourceVersion={rv_param}",
        sep(path)
    ));
    assert_eq!(watch.code, 200, "{path} rv={rv_param}");
    let ev = watch.expect();
    assert_eq!(ev["type"], "ERROR", "{path} rv={rv_param}: {ev}");
    let st = &ev["object"];
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["apiVersion"], "v1");
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "Expired");
    assert_eq!(st["code"], 410);
    let msg = st["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with(&format!("too old resource version: {rv_param} (")),
        "{msg}"
    );
    assert!(
        watch.ended_within(Duration::from_secs(2)),
        "{path} rv={rv_param}: stream left open"
    );
}

#[test]
fn c16_unbuffered_future_nonnumeric_rv_get_error_410() {
    let shared = shared_demo();
    let w = &shared.w;
    let current = rv(&w.get_json(NODES));
    let future = (current + 1000).to_string();
    let below = (current - 1).to_string(); // below the startup horizon
    for path in [SVC, EPS, V1, V1B1, NODES] {
        for r in [
            "1",
            below.as_str(),
            future.as_str(),
            "abc",
            "-5",
            "1.5",
            "18446744073709551616",
        ] {
            assert_expired(w, path, &enc(r));
        }
    }
    // The current RV itself is fine: the stream stays open.
    let mut ok = watch_from(w, NODES, current);
    assert!(ok.next(Duration::from_millis(500)).is_none());
    assert!(!ok.is_ended());
}

#[test]
fn c16_evicted_rv_gets_error_410_after_enough_changes() {
    // The simulator keeps enough history that grid-wrapper sees every change (no relist).
    let sim = Sim::start(&["--history", "10000"]);
    let w = Wrapper::start(&sim.url, "edge-a1", &["--notify-channel-size=2"]);
    let start = rv(&w.get_json(NODES));
    // More node changes than the log retains (at most max(8 × 2, 4096) entries per resource).
    let n = 4200;
    let batch: Vec<Value> = (0..n)
        .map(|i| {
            json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "edge-a1", "labels": {"zone": "zone-a", "round": i.to_string()}}})
        })
        .collect();
    sim.apply(&Value::Array(batch));
    wait_for_long(
        "all node changes to reach the cache",
        Duration::from_secs(60),
        || {
            w.get_json("/api/v1/nodes/edge-a1")["metadata"]["labels"]["round"]
                .as_str()
                .and_then(|r| r.parse::<usize>().ok())
                == Some(n - 1)
        },
    );
    assert_expired(&w, NODES, &start.to_string());
    // Other resources' histories were not evicted: their watches resume from the same RV.
    let mut svc = watch_from(&w, SVC, start);
    assert!(svc.next(Duration::from_millis(300)).is_none());
    assert!(!svc.is_ended());
    // A recent node RV still resumes.
    let now = rv(&w.get_json(NODES));
    let mut nodes = watch_from(&w, NODES, now - 10);
    let evs = nodes.drain(Duration::from_millis(400));
    assert_eq!(evs.len(), 10, "the last 10 changes are replayed");
}

#[test]
fn c17_headers_flushed_before_first_event_and_events_flushed_promptly() {
    let (sim, w) = demo(&[]);
    let current = rv(&w.get_json(NODES));
    let t = Instant::now();
    // No initial events, no bookmarks: the head must still arrive at once.
    let mut watch = watch_from(&w, NODES, current);
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "watch head held back {:?}",
        t.elapsed()
    );
    assert_eq!(header(&watch.headers, "transfer-encoding"), Some("chunked"));
    assert_eq!(
        header(&watch.headers, "content-type"),
        Some("application/json")
    );
    assert!(watch.next(Duration::from_millis(500)).is_none());
    for i in 0..3 {
        let t = Instant::now();
        sim.label_node("edge-a1", json!({"step": i.to_string()}));
        let ev = watch.expect();
        assert_eq!(ev["object"]["metadata"]["labels"]["step"], i.to_string());
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "event {i} took {:?}",
            t.elapsed()
        );
    }
    // A burst: nothing is held back waiting for more.
    sim.apply(&json!([
        {"kind": "Node", "metadata": {"name": "edge-a1", "labels": {"zone": "zone-a", "b": "1"}}},
        {"kind": "Node", "metadata": {"name": "edge-a1", "labels": {"zone": "zone-a", "b": "2"}}}
    ]));
    assert_eq!(watch.expect()["object"]["metadata"]["labels"]["b"], "1");
    assert_eq!(watch.expect()["object"]["metadata"]["labels"]["b"], "2");
}

/// Runs a watch of `path?query` to its `timeoutSeconds` end while `during` changes upstream;
/// returns the events of the raw body.
fn full_watch(w: &Wrapper, path_query: &str, during: impl FnOnce() + Send) -> Vec<Value> {
    std::thread::scope(|s| {
        let h = s.spawn(|| request(w.addr, "GET", path_query, &[], b""));
        std::thread::sleep(Duration::from_millis(300));
        during();
        let (code, headers, body) = h.join().unwrap();
        assert_eq!(code, 200);
        assert_eq!(header(&headers, "transfer-encoding"), Some("chunked"));
        watch_events(&body)
    })
}

#[test]
fn c18_one_json_object_per_line_every_event_has_kind_and_api_version() {
    let (sim, w) = demo(&[]);
    let q = "?watch=true&allowWatchBookmarks=true&timeoutSeconds=3";
    let evs = full_watch(&w, &format!("{EPS}{q}"), || {
        sim.apply(&web_endpoints(&sim, |a| {
            a.push(json!({"ip": "10.244.1.77", "nodeName": "edge-a1"}))
        }));
        sim.delete("Endpoints", "default", "api");
    });
    let types: Vec<&str> = evs
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert!(types.contains(&"ADDED") && types.contains(&"MODIFIED") && types.contains(&"DELETED"));
    assert!(types.contains(&"BOOKMARK"), "{types:?}");
    let mut all = evs;
    let mut err = w.watch(&format!("{NODES}&watch=true&resourceVersion=abc"));
    all.push(err.expect());
    for ev in &all {
        let keys: Vec<&String> = ev.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["object", "type"], "{ev}");
        assert!(
            ev["object"]["kind"].as_str().is_some_and(|k| !k.is_empty()),
            "kind: {ev}"
        );
        assert!(
            ev["object"]["apiVersion"]
                .as_str()
                .is_some_and(|k| !k.is_empty()),
            "apiVersion: {ev}"
        );
    }
}

#[test]
fn c19_only_added_modified_deleted_bookmark_error_are_emitted() {
    let (sim, w) = demo(&[]);
    let mut types = BTreeSet::new();
    for path in [V1, V1B1] {
        let q = "?watch=true&allowWatchBookmarks=true&timeoutSeconds=3";
        let evs = full_watch(&w, &format!("{path}{q}"), || {
            let mut s = sim
                .get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/api-xyz89");
            s["endpoints"][0]["conditions"]["ready"] = json!(false);
            sim.apply(&s);
            if path == V1B1 {
                sim.delete("EndpointSlice", "default", "api-xyz89");
            }
        });
        types.extend(
            evs.iter()
                .map(|e| e["type"].as_str().unwrap_or("?").to_string()),
        );
    }
    let mut err = w.watch(&format!("{SVC}?watch=true&resourceVersion=1"));
    types.insert(err.expect()["type"].as_str().unwrap_or("?").to_string());
    let allowed: BTreeSet<String> = ["ADDED", "BOOKMARK", "DELETED", "ERROR", "MODIFIED"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(types, allowed, "every type seen, nothing else");
}

#[test]
fn c20_deleted_carries_the_last_served_object_with_the_deletions_rv() {
    let (sim, w) = demo(&[]);
    let lists: Vec<Value> = [EPS, V1, V1B1].iter().map(|p| w.get_json(p)).collect();
    let start = rv(&lists[0]);
    let mut watches: Vec<Watch> = [EPS, V1, V1B1]
        .iter()
        .map(|p| watch_from(&w, p, start))
        .collect();
    sim.delete("Endpoints", "default", "web");
    sim.delete("EndpointSlice", "default", "web-abc12");
    let mut rvs = Vec::new();
    for (i, (path, name)) in [(EPS, "web"), (V1, "web-abc12"), (V1B1, "web-abc12")]
        .iter()
        .enumerate()
    {
        let evs = watches[i].drain(QUIET);
        assert_eq!(evs.len(), 1, "{path}: {evs:?}");
        let ev = &evs[0];
        assert_eq!(ev_name(ev), ("DELETED".to_string(), name.to_string()));
        let last = item(&lists[i], name);
        // The last *served* content (topology-filtered: zone-a only), with a new RV.
        assert_eq!(without_rv(&ev["object"]), without_rv(last), "{path}");
        assert!(
            rv(&ev["object"]) > rv(last) && rv(&ev["object"]) > start,
            "{path}"
        );
        rvs.push(rv(&ev["object"]));
        let now = w.get_json(path);
        assert!(
            rv(&now) >= rv(&ev["object"]),
            "{path}: list RV covers the deletion"
        );
        assert!(!names(&now).contains(&name.to_string()));
    }
    // Endpoints and EndpointSlices come from two upstream watches, so their relative order is
    // not defined; both slice versions come from one upstream deletion, v1 first.
    assert!(
        rvs[1] < rvs[2] && rvs[0] != rvs[1] && rvs[0] != rvs[2],
        "deletions with their own RVs: {rvs:?}"
    );
    let eps = &lists[0];
    let served = item(eps, "web")["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        served, 2,
        "the pruned object is what was served and deleted"
    );
}
