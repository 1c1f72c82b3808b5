//! Conformance checklist of docs/SEMANTICS.md §11, items 1, 2, 5 and 9–12 (exact routes, single
//! objects, content negotiation, list bodies, resourceVersions), against the real `grid-wrapper`
//! and `grid-wrapper-sim` binaries over loopback sockets. The other items live in
//! `protocol_*.rs` (proxy, query, watch, stream, slow, errors, sync).

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// (collection path, namespaced path, list kind, apiVersion, item kind, names served for edge-a1).
type Collection = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

const COLLECTIONS: &[Collection] = &[
    (
        "/api/v1/services",
        "/api/v1/namespaces/default/services",
        "ServiceList",
        "v1",
        "Service",
        &["api", "db", "kubernetes", "web"],
    ),
    (
        "/api/v1/endpoints",
        "/api/v1/namespaces/default/endpoints",
        "EndpointsList",
        "v1",
        "Endpoints",
        &["api", "kubernetes", "web"],
    ),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        "EndpointSliceList",
        "discovery.k8s.io/v1",
        "EndpointSlice",
        &["api-xyz89", "kubernetes", "web-abc12"],
    ),
    (
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices",
        "EndpointSliceList",
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        &["api-xyz89", "kubernetes", "web-abc12"],
    ),
    // Nodes: kube-proxy's list of its own (the cache serves no other, docs/SEMANTICS.md §1.1).
    (common::OWN_NODE, "", "NodeList", "v1", "Node", &["edge-a1"]),
    (
        "/apis/networking.k8s.io/v1/servicecidrs",
        "",
        "ServiceCIDRList",
        "networking.k8s.io/v1",
        "ServiceCIDR",
        &["kubernetes"],
    ),
    (
        "/apis/networking.k8s.io/v1beta1/servicecidrs",
        "",
        "ServiceCIDRList",
        "networking.k8s.io/v1beta1",
        "ServiceCIDR",
        &["kubernetes"],
    ),
];

fn sim_counter(sim: &Sim, what: &str) -> u64 {
    sim.state()["served"][what].as_u64().unwrap_or(u64::MAX)
}

fn list_names(w: &Wrapper, path: &str) -> Vec<String> {
    names(&w.get_json(path))
}

#[test]
fn c01_serves_list_and_watch_of_every_resource_on_exact_paths() {
    let (sim, w) = demo(&[]);
    let (lists, gets) = (sim_counter(&sim, "lists"), sim_counter(&sim, "gets"));
    for (path, ns_path, list_kind, api, kind, want) in COLLECTIONS {
        let list = w.get_json(path);
        assert_eq!(list["kind"], *list_kind, "{path}");
        assert_eq!(list["apiVersion"], *api, "{path}");
        assert_eq!(names(&list), *want, "{path}");
        for item in list["items"].as_array().unwrap() {
            assert_eq!(item["kind"], *kind, "{path}: {item}");
            assert_eq!(item["apiVersion"], *api, "{path}: {item}");
        }
        if !ns_path.is_empty() {
            assert_eq!(list_names(&w, ns_path), *want, "{ns_path}");
            let other = ns_path.replace("/default/", "/kube-system/");
            assert!(list_names(&w, &other).is_empty(), "{other}");
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut watch = w.watch(&format!("{path}{sep}watch=true&timeoutSeconds=10"));
        assert_eq!(watch.code, 200, "watch {path}");
        let events = watch.drain(Duration::from_millis(400));
        let got: Vec<&str> = events
            .iter()
            .map(|e| {
                assert_eq!(e["type"], "ADDED", "{path}: {e}");
                assert_eq!(e["object"]["kind"], *kind, "{path}: {e}");
                e["object"]["metadata"]["name"].as_str().unwrap_or("")
            })
            .collect();
        assert_eq!(got, *want, "watch {path}");
    }
    // All of that came from the cache: the simulator served no list and no get meanwhile.
    assert_eq!(
        sim_counter(&sim, "lists"),
        lists,
        "lists reached the upstream"
    );
    assert_eq!(sim_counter(&sim, "gets"), gets, "gets reached the upstream");

    // Exact paths only: near misses are not the cached collections but go upstream (the
    // simulator records them and answers 404).
    sim.clear_requests();
    let near = [
        "/api/v1/servicesXYZ",
        "/api/v1/services/",
        "/api/v1/nodesX",
        "/apis/discovery.k8s.io/v1/endpointslicesX",
        "/api/v1/namespaces/default/endpointsX",
    ];
    for p in near {
        let (code, _, body) = w.get(p);
        assert_eq!(code, 404, "{p}: {}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v["message"], "the server could not find the requested resource",
            "{p}"
        );
    }
    let recorded: Vec<String> = sim
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(recorded, near, "near-miss paths must be proxied, in order");
}

#[test]
fn c02_serves_single_node_get_from_cache_and_404_status_if_unknown() {
    let (sim, w) = demo(&[]);
    let gets = sim_counter(&sim, "gets");
    // Its own Node from the cache: its item of kube-proxy's list.
    let own = w.get_json(common::OWN_NODE);
    let got = w.get_json("/api/v1/nodes/edge-a1");
    assert_eq!(got, own["items"][0], "GET node edge-a1 = its list item");
    assert_eq!(got["kind"], "Node");
    assert_eq!(got["apiVersion"], "v1");
    assert_eq!(sim_counter(&sim, "gets"), gets, "the cache's");
    // Any other Node is the upstream's (§1.1): answered whole, unfiltered.
    let b1 = w.get_json("/api/v1/nodes/edge-b1");
    assert_eq!(b1["metadata"]["labels"]["zone"], "zone-b");
    assert_eq!(b1["status"]["addresses"][0]["address"], "192.168.2.11");
    assert_eq!(sim_counter(&sim, "gets"), gets + 1, "the upstream's");

    let (code, headers, body) = w.get("/api/v1/nodes/nope");
    let st = assert_status(code, &headers, &body, 404);
    assert_eq!(st["reason"], "NotFound");
    assert_eq!(sim_counter(&sim, "gets"), gets + 2, "the upstream's");

    // The namespaced single-object GETs (SHOULD) come from the cache too, filtered.
    let ep = w.get_json("/api/v1/namespaces/default/endpoints/web");
    assert_eq!(ep["kind"], "Endpoints");
    let ips: Vec<&str> = ep["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap())
        .collect();
    assert_eq!(ips, ["10.244.1.10", "10.244.2.10"], "zone-a endpoints only");
    for v in ["v1", "v1beta1"] {
        let s = w.get_json(&format!(
            "/apis/discovery.k8s.io/{v}/namespaces/default/endpointslices/web-abc12"
        ));
        assert_eq!(s["apiVersion"], format!("discovery.k8s.io/{v}"));
        assert_eq!(s["endpoints"].as_array().unwrap().len(), 2, "{v}: {s}");
    }
    let svc = w.get_json("/api/v1/namespaces/default/services/web");
    assert_eq!(svc["kind"], "Service");
    let (code, headers, body) = w.get("/api/v1/namespaces/default/services/nope");
    let st = assert_status(code, &headers, &body, 404);
    assert_eq!(st["message"], "services \"nope\" not found");
    assert_eq!(
        sim_counter(&sim, "gets"),
        gets + 2,
        "single GETs but edge-b1's and nope's reached the upstream"
    );
}

#[test]
fn c05_content_type_is_negotiated_json_or_protobuf_and_406_otherwise() {
    let shared = shared_demo();
    let w = &shared.w;
    const PB: &str = "application/vnd.kubernetes.protobuf";
    const JSON: &str = "application/json";
    let cases: &[(Option<&str>, u16, &str)] = &[
        (None, 200, JSON),
        (Some(""), 200, JSON),
        (Some("application/vnd.kubernetes.protobuf, */*"), 200, PB),
        (Some("application/json"), 200, JSON),
        (Some("application/json; charset=utf-8"), 200, JSON),
        (Some("application/*"), 200, JSON),
        (Some("*/*"), 200, JSON),
        (Some("application/yaml, application/json;q=0.5"), 200, JSON),
        (
            Some("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
            200,
            JSON,
        ),
        (Some("application/yaml"), 406, JSON),
        (Some("application/vnd.kubernetes.protobuf"), 200, PB),
        (Some("text/html"), 406, JSON),
    ];
    for path in [
        "/api/v1/services",
        "/api/v1/nodes/edge-a1",
        "/apis/discovery.k8s.io/v1/endpointslices?watch=true&timeoutSeconds=1",
    ] {
        for (accept, want, ct_want) in cases {
            let hs: Vec<(&str, &str)> = accept.iter().map(|a| ("Accept", *a)).collect();
            if path.contains("watch=true") {
                let watch = Watch::open(w.addr, path, &hs);
                assert_eq!(watch.code, *want, "{path} {accept:?}");
                let ct = header(&watch.headers, "content-type").unwrap_or("");
                let ct_want = if *ct_want == PB && *want == 200 {
                    "application/vnd.kubernetes.protobuf;stream=watch"
                } else {
                    ct_want
                };
                assert_eq!(ct, ct_want, "{path} {accept:?}: Content-Type");
                continue;
            }
            let (code, headers, body) = request(w.addr, "GET", path, &hs, b"");
            let ct = header(&headers, "content-type").unwrap_or("");
            assert_eq!(ct, *ct_want, "{path} {accept:?}: Content-Type");
            if *want == 406 {
                let st = assert_status(code, &headers, &body, 406);
                assert_eq!(st["reason"], "NotAcceptable");
                assert_eq!(
                    st["message"],
                    "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf"
                );
            } else {
                assert_eq!(code, 200, "{path} {accept:?}");
            }
        }
    }
    // Statuses of every kind carry the JSON content type too.
    for path in [
        "/api/v1/nodes/nope",
        "/api/v1/services?labelSelector=a%20in%20(",
        "/api/v1/services?sendInitialEvents=true",
        "/api/v1/services?resourceVersionMatch=Exact&resourceVersion=1",
    ] {
        let (code, headers, body) = w.get(path);
        assert!(code >= 400, "{path}");
        assert_status(code, &headers, &body, code);
    }
}

#[test]
fn c09_list_body_shape_empty_items_limit_ignored_no_continue() {
    let (sim, w) = demo(&[]);
    let svc = |ns: &str, name: &str, ip: &str| {
        json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": [{"port": 80, "protocol": "TCP"}]}})
    };
    sim.apply(&json!([
        svc("zzz", "aaa", "10.96.1.1"),
        svc("aaa", "zzz", "10.96.1.2"),
        // A second ServiceCIDR, so that their lists too hold more than one item.
        {"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1",
            "metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/16"]}}
    ]));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while list_names(&w, "/api/v1/services").len() != 6
        || list_names(&w, "/apis/networking.k8s.io/v1/servicecidrs").len() != 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "services never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for (path, _, list_kind, api, _, _) in COLLECTIONS {
        for q in ["", "?limit=1", "?limit=500&resourceVersion=0"] {
            let q = if path.contains('?') {
                q.replacen('?', "&", 1)
            } else {
                q.to_string()
            };
            let v = w.get_json(&format!("{path}{q}"));
            let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(
                sorted,
                ["apiVersion", "items", "kind", "metadata"],
                "{path}{q}"
            );
            assert_eq!(v["kind"], *list_kind);
            assert_eq!(v["apiVersion"], *api);
            let meta = v["metadata"].as_object().unwrap();
            assert_eq!(
                meta.keys().collect::<Vec<_>>(),
                ["resourceVersion"],
                "{path}{q}: no continue"
            );
            assert!(rv(&v) > 0);
            let items = v["items"].as_array().unwrap();
            // (kube-proxy's list of its own Node has one item whatever the limit.)
            let want = if path.starts_with("/api/v1/nodes") {
                1
            } else {
                2
            };
            assert!(items.len() >= want, "{path}{q}: limit is ignored");
            let keys: Vec<(String, String)> = items
                .iter()
                .map(|i| {
                    (
                        i["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                        i["metadata"]["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let mut want = keys.clone();
            want.sort();
            assert_eq!(keys, want, "{path}{q}: sorted by namespace/name");
        }
    }
    assert_eq!(
        names(&w.get_json("/api/v1/services")),
        ["zzz", "api", "db", "kubernetes", "web", "aaa"],
        "namespace first, then name"
    );
    for path in [
        "/api/v1/namespaces/empty/services",
        "/api/v1/namespaces/empty/endpoints",
        "/apis/discovery.k8s.io/v1/namespaces/empty/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/namespaces/empty/endpointslices",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnope",
    ] {
        let (code, _, body) = w.get(path);
        assert_eq!(code, 200);
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains("\"items\":[]"), "{path}: {text}");
    }
}

#[test]
fn c10_list_ignores_requested_resource_version() {
    let shared = shared_demo();
    let w = &shared.w;
    let base = w.get_json("/api/v1/endpoints");
    let current = rv(&base);
    let future = (current + 1000).to_string();
    let cur = current.to_string();
    for rvq in [
        "resourceVersion=0".to_string(),
        "resourceVersion=".to_string(),
        "resourceVersion=1".to_string(),
        "resourceVersion=abc".to_string(),
        "resourceVersion=18446744073709551615".to_string(),
        "resourceVersion=99999999999999999999999".to_string(),
        format!("resourceVersion={future}"),
        format!("resourceVersion={cur}"),
        "resourceVersion=1&resourceVersionMatch=NotOlderThan".to_string(),
        format!("resourceVersion={cur}&resourceVersionMatch=Exact"),
        "resourceVersion=1&limit=500".to_string(),
    ] {
        let v = w.get_json(&format!("/api/v1/endpoints?{rvq}"));
        assert_eq!(v, base, "{rvq}: the current snapshot, whatever the RV");
    }
    // The one documented exception: Exact with another RV is 410.
    let (code, headers, body) =
        w.get("/api/v1/endpoints?resourceVersion=1&resourceVersionMatch=Exact");
    let st = assert_status(code, &headers, &body, 410);
    assert_eq!(st["reason"], "Expired");
}

/// The first RV of the epoch `rv` belongs to (grid-wrapper's RVs carry a per-process epoch in
/// their high bits: `epoch << 40 | counter`).
fn epoch_start(rv: u64) -> u64 {
    (rv >> 40) << 40
}

#[test]
fn c11_every_served_object_carries_the_servers_own_numeric_rv() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, "edge-a1", &[]);
    let started = epoch_start(rv(&w.get_json(common::OWN_NODE)));
    assert!(started >= 1 << 40, "RVs carry a non-zero epoch");
    let upstream_paths = [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/api/v1/nodes",
    ];
    let mut upstream_rvs = std::collections::BTreeSet::new();
    for p in upstream_paths {
        let l = sim.get_json(p);
        upstream_rvs.insert(rv(&l));
        for i in l["items"].as_array().unwrap() {
            upstream_rvs.insert(rv(i));
        }
    }
    for (path, _, _, _, _, _) in COLLECTIONS {
        let l = w.get_json(path);
        let list_rv = rv(&l);
        assert!(
            list_rv > started && list_rv < started + (1 << 40),
            "{path}: list RV {list_rv} is not the server's own (epoch starting at {started})"
        );
        for item in l["items"].as_array().unwrap() {
            let s = item["metadata"]["resourceVersion"]
                .as_str()
                .expect("RV string");
            let n: u64 = s
                .parse()
                .unwrap_or_else(|_| panic!("{path}: RV {s:?} is not decimal"));
            assert_eq!(n.to_string(), s, "canonical decimal");
            assert!(
                n >= started && n <= list_rv,
                "{path}: item RV {n} not in [{started}, {list_rv}]"
            );
            assert!(
                !upstream_rvs.contains(&n),
                "{path}: upstream RV {n} exposed"
            );
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut watch = w.watch(&format!(
            "{path}{sep}watch=true&timeoutSeconds=5&allowWatchBookmarks=true"
        ));
        for ev in watch.drain(Duration::from_millis(300)) {
            let n = rv(&ev["object"]);
            assert!(n >= started && n <= list_rv, "{path}: event RV {n}: {ev}");
        }
    }
    let node = w.get_json("/api/v1/nodes/edge-a1");
    assert!(rv(&node) >= started);
}

#[test]
fn c12_rv_counter_strictly_increases_and_a_new_process_never_reissues_an_rv() {
    let sim = Sim::start(&[]);
    let w1 = Wrapper::start(&sim.url, "edge-a1", &[]);
    let l1 = w1.get_json(common::OWN_NODE);
    let mut watch = w1.watch(&format!(
        "{}&watch=true&timeoutSeconds=15&resourceVersion={}",
        common::OWN_NODE,
        rv(&l1)
    ));
    let mut last = rv(&l1);
    for i in 0..5 {
        sim.label_node("edge-a1", json!({"round": i.to_string()}));
        let ev = watch.expect();
        assert_eq!(ev["type"], "MODIFIED");
        let n = rv(&ev["object"]);
        assert!(n > last, "RV {n} after {last}");
        last = n;
    }
    let l1b = w1.get_json(common::OWN_NODE);
    assert_eq!(rv(&l1b), last, "the list RV is the last one handed out");
    let max_w1 = last;
    drop(watch);
    drop(w1);

    // A new process on the same upstream draws another epoch: none of its RVs is one the first
    // handed out (without --cache-dir the epoch is random, so "above" is not promised; with it,
    // tests/it/autonomy_*.rs check that RVs are above), and it refuses the old RVs with 410.
    let first_epoch = max_w1 >> 40;
    let w2 = Wrapper::start(&sim.url, "edge-a1", &[]);
    for (path, _, _, _, _, _) in COLLECTIONS {
        let l = w2.get_json(path);
        assert_ne!(
            rv(&l) >> 40,
            first_epoch,
            "{path}: same epoch as the first process"
        );
        for item in l["items"].as_array().unwrap() {
            assert_ne!(rv(item) >> 40, first_epoch, "{path}: {} reissued", rv(item));
        }
    }
    let mut stale = w2.watch(&format!(
        "{}&watch=true&timeoutSeconds=5&resourceVersion={max_w1}",
        common::OWN_NODE
    ));
    assert_eq!(stale.code, 200);
    let ev = stale.expect();
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 410);
    assert!(stale.ended_within(Duration::from_secs(2)));
}
