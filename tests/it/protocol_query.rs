//! Conformance checklist of docs/SEMANTICS.md §11, items 6–8: the `watch` parameter, label
//! selectors and field selectors, applied exactly by the real `grid-wrapper` over loopback.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// Every collection kube-proxy lists, with the names served for `edge-a1` (services aside).
const LISTS: &[(&str, &[&str])] = &[
    ("/api/v1/endpoints", &["api", "kubernetes", "web"]),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        &["api-xyz89", "kubernetes", "web-abc12"],
    ),
    (
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        &["api-xyz89", "kubernetes", "web-abc12"],
    ),
    // kube-proxy's list of its own Node (the cache serves no other).
    (common::OWN_NODE, &["edge-a1"]),
];

fn list_names(w: &Wrapper, path: &str) -> Vec<String> {
    names(&w.get_json(path))
}

#[test]
fn c06_watch_is_true_unless_absent_zero_or_false() {
    let shared = shared_demo();
    let w = &shared.w;
    let lists = ["", "watch=false", "watch=0", "watch=FALSE", "watch=False"];
    let watches = [
        "watch=true",
        "watch=1",
        "watch=",
        "watch",
        "watch=yes",
        "watch=TRUE",
    ];
    for q in lists {
        let (code, headers, body) = w.get(&format!("/api/v1/services?{q}"));
        assert_eq!(code, 200, "{q}");
        assert!(
            header(&headers, "content-length").is_some(),
            "{q}: a list has a length"
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["kind"], "ServiceList", "{q}");
    }
    for q in watches {
        let mut watch = w.watch(&format!("/api/v1/services?{q}&timeoutSeconds=5"));
        assert_eq!(watch.code, 200, "{q}");
        assert_eq!(
            header(&watch.headers, "transfer-encoding"),
            Some("chunked"),
            "{q}"
        );
        assert_eq!(header(&watch.headers, "content-length"), None, "{q}");
        let ev = watch.expect();
        assert_eq!(ev["type"], "ADDED", "{q}: {ev}");
    }
}

#[test]
fn c07_label_selector_is_parsed_and_applied_exactly() {
    let (sim, w) = demo(&[]);
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "labelled", "namespace": "default",
                     "labels": {"team": "blue", "tier": "front"}},
        "spec": {"clusterIP": "10.96.0.50", "ports": [{"port": 80, "protocol": "TCP"}]}}));
    let all = ["api", "db", "kubernetes", "labelled", "web"];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while list_names(&w, "/api/v1/services") != all {
        assert!(
            std::time::Instant::now() < deadline,
            "labelled service never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cases: &[(&str, &[&str])] = &[
        ("", &all),
        (
            "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name",
            &all,
        ),
        ("app=web", &["web"]),
        ("app==web", &["web"]),
        ("app!=web", &["api", "db", "kubernetes", "labelled"]),
        ("app in (web,api)", &["api", "web"]),
        ("app notin (web)", &["api", "db", "kubernetes", "labelled"]),
        ("team", &["labelled"]),
        ("!team", &["api", "db", "kubernetes", "web"]),
        ("!app", &["kubernetes", "labelled"]),
        ("team=blue,tier=front", &["labelled"]),
        ("team=blue,tier=back", &[]),
        ("!team,app", &["api", "db", "web"]),
        (
            "component=apiserver,provider in (kubernetes)",
            &["kubernetes"],
        ),
    ];
    for (sel, want) in cases {
        let got = list_names(&w, &format!("/api/v1/services?labelSelector={}", enc(sel)));
        assert_eq!(got, *want, "labelSelector {sel:?}");
    }
    // kube-proxy's exact encoding of L, on every resource it lists.
    let got = list_names(
        &w,
        &format!("/api/v1/services?labelSelector={SELECTOR_L}&limit=500&resourceVersion=0"),
    );
    assert_eq!(got, all, "services with L");
    for (path, want) in LISTS {
        let sep = if path.contains('?') { '&' } else { '?' };
        let got = list_names(
            &w,
            &format!("{path}{sep}labelSelector={SELECTOR_L}&limit=500&resourceVersion=0"),
        );
        assert_eq!(got, *want, "{path} with L");
    }
    let slices = list_names(
        &w,
        &format!(
            "/apis/discovery.k8s.io/v1/endpointslices?labelSelector={}",
            enc("kubernetes.io/service-name=web")
        ),
    );
    assert_eq!(slices, ["web-abc12"]);
    // The same selector applies to watches.
    let mut watch = w.watch(&format!(
        "/api/v1/services?watch=true&timeoutSeconds=5&labelSelector={}",
        enc("!app")
    ));
    let events = watch.drain(Duration::from_millis(400));
    let got: Vec<&Value> = events
        .iter()
        .map(|e| &e["object"]["metadata"]["name"])
        .collect();
    assert_eq!(
        got,
        [&json!("kubernetes"), &json!("labelled")],
        "{events:?}"
    );
}

#[test]
fn c08_field_selector_name_namespace_cluster_ip_and_400_otherwise() {
    let shared = shared_demo();
    let w = &shared.w;
    let svc = "/api/v1/services";
    let cases: &[(&str, &str, &[&str])] = &[
        (svc, "metadata.name=web", &["web"]),
        (svc, "metadata.name==web", &["web"]),
        (svc, "metadata.name!=web", &["api", "db", "kubernetes"]),
        (
            svc,
            "metadata.namespace=default",
            &["api", "db", "kubernetes", "web"],
        ),
        (svc, "metadata.namespace!=default", &[]),
        (svc, "spec.clusterIP!=None", &["api", "kubernetes", "web"]),
        (svc, "spec.clusterIP=None", &["db"]),
        (svc, "spec.clusterIP=10.96.0.10", &["web"]),
        (
            svc,
            "metadata.name=web,metadata.namespace=default",
            &["web"],
        ),
        (svc, "metadata.name=web,spec.clusterIP=None", &[]),
        ("/api/v1/endpoints", "metadata.name=web", &["web"]),
        ("/api/v1/endpoints", "metadata.namespace=kube-system", &[]),
        (
            "/apis/discovery.k8s.io/v1/endpointslices",
            "metadata.name=web-abc12",
            &["web-abc12"],
        ),
        (
            "/apis/discovery.k8s.io/v1beta1/endpointslices",
            "metadata.name!=web-abc12",
            &["api-xyz89", "kubernetes"],
        ),
        ("/api/v1/nodes", "metadata.name=edge-b1", &["edge-b1"]),
        (
            "/api/v1/nodes",
            "metadata.name!=edge-b1",
            &["edge-a1", "edge-a2", "edge-c1"],
        ),
    ];
    for (path, sel, want) in cases {
        let got = list_names(w, &format!("{path}?fieldSelector={}", enc(sel)));
        assert_eq!(got, *want, "{path} fieldSelector {sel:?}");
    }
    // kube-proxy 1.32+ services query, exactly as sent.
    let got = list_names(
        w,
        &format!("{svc}?fieldSelector=spec.clusterIP%21%3DNone&labelSelector={SELECTOR_L}&limit=500&resourceVersion=0"),
    );
    assert_eq!(got, ["api", "kubernetes", "web"]);

    let bad: &[(&str, &str, &str)] = &[
        (svc, "status.phase=Running", "status.phase"),
        ("/api/v1/endpoints", "spec.clusterIP=None", "spec.clusterIP"),
        (
            "/apis/discovery.k8s.io/v1/endpointslices",
            "spec.clusterIP!=None",
            "spec.clusterIP",
        ),
        (
            "/api/v1/nodes",
            "spec.unschedulable=true",
            "spec.unschedulable",
        ),
    ];
    for (path, sel, field) in bad {
        for q in ["", "&watch=true"] {
            let (code, headers, body) = w.get(&format!("{path}?fieldSelector={}{q}", enc(sel)));
            let st = assert_status(code, &headers, &body, 400);
            assert_eq!(st["reason"], "BadRequest");
            assert_eq!(
                st["message"],
                format!("field label not supported: {field}"),
                "{path} {sel}"
            );
        }
    }
}

/// Issue 23, point 5: what the apiserver refuses in the parameters kube-proxy sends is refused
/// with a Status; what it accepts is accepted.
#[test]
fn c06b_limit_and_boolean_parameters_are_checked_as_the_apiserver_checks_them() {
    let shared = shared_demo();
    let w = &shared.w;
    for q in [
        "limit=abc",
        "limit=1.5",
        "limit=",
        "watch=true&allowWatchBookmarks=maybe",
        "watch=true&timeoutSeconds=soon",
    ] {
        // kube-proxy's list of its own Node: the cache's to check.
        let (code, headers, body) = w.get(&format!("{}&{q}", common::OWN_NODE));
        let st = assert_status(code, &headers, &body, 400);
        assert_eq!(st["reason"], "BadRequest", "{q}");
        let (code, headers, body) = w.get(&format!("/api/v1/services?{q}"));
        let st = assert_status(code, &headers, &body, 400);
        assert_eq!(st["reason"], "BadRequest", "{q}");
    }
    // A negative limit means no limit, as for the apiserver.
    assert_eq!(list_names(w, "/api/v1/services?limit=-1").len(), 4);
    assert_eq!(list_names(w, "/api/v1/services?limit=500").len(), 4);
}
