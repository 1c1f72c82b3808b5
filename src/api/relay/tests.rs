//! The relay port's own answers (docs/SEMANTICS.md §12).

use super::*;

fn view(ready: bool, serves_v1beta1: bool, serves_cidrs: bool) -> Serving {
    Serving {
        ready,
        serves_v1beta1,
        serves_cidrs,
        only_node: None,
    }
}

fn reply(a: RelayAnswer) -> (u16, serde_json::Value) {
    match a {
        RelayAnswer::Reply(r) => {
            let body: Vec<u8> = r.body.iter().flat_map(|s| s.as_bytes().to_vec()).collect();
            (r.code, serde_json::from_slice(&body).expect("JSON"))
        }
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn probes_answer_from_the_relay_views_readiness() {
    let (cold, warm) = (view(false, false, false), view(true, false, false));
    assert!(matches!(
        answer("GET", "/readyz", &cold),
        RelayAnswer::Probe(503, _)
    ));
    assert!(matches!(
        answer("GET", "/readyz", &warm),
        RelayAnswer::Probe(200, "ok")
    ));
    for p in ["/livez", "/healthz"] {
        assert!(matches!(
            answer("GET", p, &cold),
            RelayAnswer::Probe(200, "ok")
        ));
    }
}

#[test]
fn discovery_names_the_one_slice_version_served() {
    let (code, group) = reply(answer(
        "GET",
        "/apis/discovery.k8s.io",
        &view(true, false, false),
    ));
    assert_eq!(code, 200);
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "discovery.k8s.io/v1"
    );
    assert_eq!(group["versions"].as_array().map(Vec::len), Some(1));
    let (_, group) = reply(answer(
        "GET",
        "/apis/discovery.k8s.io",
        &view(true, true, false),
    ));
    assert_eq!(group["versions"][0]["version"], "v1beta1");
    // The follower's own parser picks the version named.
    #[cfg(feature = "io")]
    assert_eq!(
        crate::upstream::discovery::slice_kind_from_group(&group).0,
        Resource::SlicesV1beta1
    );
    let (code, list) = reply(answer(
        "GET",
        "/apis/discovery.k8s.io/v1",
        &view(true, false, false),
    ));
    assert_eq!(code, 200);
    assert_eq!(list["groupVersion"], "discovery.k8s.io/v1");
    assert_eq!(list["resources"][0]["name"], "endpointslices");
    // Before the relay view is ready, the version is not known yet: held.
    assert!(matches!(
        answer("GET", "/apis/discovery.k8s.io", &view(false, false, false)),
        RelayAnswer::NotReady
    ));
}

#[test]
fn what_the_relay_view_does_not_serve_is_404_never_proxied() {
    let v1 = view(true, false, false);
    for path in [
        "/apis/discovery.k8s.io/v1beta1",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/x",
        "/apis/networking.k8s.io/v1/servicecidrs",
        "/apis/networking.k8s.io/v1beta1/servicecidrs/kubernetes",
    ] {
        let (code, status) = reply(answer("GET", path, &v1));
        assert_eq!(
            (code, &status["reason"]),
            (404, &json!("NotFound")),
            "{path}"
        );
    }
    let beta = view(true, true, true);
    let (code, _) = reply(answer(
        "GET",
        "/apis/discovery.k8s.io/v1/endpointslices",
        &beta,
    ));
    assert_eq!(code, 404);
    // What it serves goes to the cache routes; anything else on (proxied).
    for path in [
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        "/apis/networking.k8s.io/v1/servicecidrs",
        "/api/v1/nodes",
        "/version",
    ] {
        assert!(
            matches!(answer("GET", path, &beta), RelayAnswer::Routed),
            "{path}"
        );
    }
    assert!(matches!(
        answer("POST", "/apis/networking.k8s.io/v1/servicecidrs", &v1),
        RelayAnswer::Routed
    ));
    // Not ready: held as a cache-backed request.
    assert!(matches!(
        answer(
            "GET",
            "/apis/networking.k8s.io/v1/servicecidrs",
            &view(false, false, false)
        ),
        RelayAnswer::NotReady
    ));
}

#[test]
fn odd_methods_and_paths_are_routed_or_404_never_a_panic() {
    let warm = view(true, false, true);
    // Not a GET, or not a path of the relay's own: routed as on the kube-proxy port (which
    // answers a path it cannot route with a Status, or proxies it).
    for (method, path) in [
        ("POST", "/readyz"),
        ("DELETE", "/apis/discovery.k8s.io"),
        ("GET", ""),
        ("GET", "/"),
        ("GET", "/readyz/"),
        ("GET", "/apis/discovery.k8s.io/"),
        ("GET", "/apis/discovery.k8s.io/v2"),
        ("GET", "/apis/discovery.k8s.io//v1"),
        ("GET", "/apis/discovery.k8s.io%2Fv1"),
        (
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces//endpointslices/",
        ),
        ("GET", "\u{0}\u{ffff}"),
        ("GET", &"/a".repeat(4096)),
    ] {
        assert!(
            matches!(answer(method, path, &warm), RelayAnswer::Routed),
            "{method} {path:?}"
        );
    }
    // Slice paths of the version the relay does not serve, however they are written: 404.
    for path in [
        "/apis/discovery.k8s.io/v1beta1",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/namespaces/x/endpointslices/y",
    ] {
        assert_eq!(reply(answer("GET", path, &warm)).0, 404, "{path}");
    }
}

/// Paths of grid-wrapper's own (docs/SEMANTICS.md §13.1): the runtime report is a PUT naming
/// one node, taken on a ready view; anything else there is answered, never proxied.
#[test]
fn grid_wrappers_own_paths_are_answered_never_routed() {
    let (cold, warm) = (view(false, false, false), view(true, false, false));
    let path = "/grid-wrapper/v1/runtime-pods/edge-a2";
    assert!(matches!(
        answer("PUT", path, &warm),
        RelayAnswer::RuntimeReport
    ));
    assert!(matches!(answer("PUT", path, &cold), RelayAnswer::NotReady));
    assert_eq!(reply(answer("GET", path, &warm)).0, 405);
    assert_eq!(reply(answer("POST", path, &warm)).0, 405);
    let (code, status) = reply(answer("PUT", "/grid-wrapper/v1/runtime-pods/a/b", &warm));
    assert_eq!((code, status["kind"].as_str()), (400, Some("Status")));
    assert_eq!(
        reply(answer("PUT", "/grid-wrapper/v1/runtime-pods/", &warm)).0,
        400
    );
    assert_eq!(reply(answer("GET", "/grid-wrapper/other", &warm)).0, 404);
    assert_eq!(reply(answer("PUT", "/grid-wrapper/", &cold)).0, 404);
}
