//! Every branch of the one decision: each fate, each reason to proxy, each port, a held request
//! looked at again, and what the counters count.

use std::time::{Duration, Instant};

use super::*;

const PB: &str = "application/vnd.kubernetes.protobuf, */*";
const SLICES_V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const SLICES_V1BETA1: &str = "/apis/discovery.k8s.io/v1beta1/endpointslices";
const CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const NOT_READY_HOLD: Duration = Duration::from_secs(3);

fn request(method: &str, target: &str, accept: Option<&str>) -> Request {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        minor_version: 1,
        headers: accept
            .map(|a| ("Accept".to_string(), a.as_bytes().to_vec()))
            .into_iter()
            .collect(),
        body: Vec::new(),
    }
}

fn get(target: &str) -> Request {
    request("GET", target, None)
}

fn serving(ready: bool, serves_v1beta1: bool, serves_cidrs: bool) -> Serving {
    Serving {
        ready,
        serves_v1beta1,
        serves_cidrs,
        only_node: None,
    }
}

/// Ready, v1beta1 built, ServiceCIDRs served: everything cache-backed can be answered.
const WARM: Serving = Serving {
    ready: true,
    serves_v1beta1: true,
    serves_cidrs: true,
    only_node: None,
};
/// Before the first sync.
const COLD: Serving = Serving {
    ready: false,
    serves_v1beta1: false,
    serves_cidrs: false,
    only_node: None,
};

fn arrived(now: Instant) -> Turn {
    Turn::Arrived {
        now,
        not_ready_hold: NOT_READY_HOLD,
    }
}

fn decide_now(req: &Request, side: Side, serving: &Serving) -> Decision {
    decide(req, side, serving, arrived(Instant::now()))
}

fn collection(res: Resource) -> Route {
    Route::Collection {
        res,
        namespace: None,
    }
}

/// What a held request waits for; `None` if it is not held.
fn wait_of(d: &Decision) -> Option<Wait> {
    match d.fate {
        Fate::Hold { wait, .. } => Some(wait),
        _ => None,
    }
}

/// The reply's status, format, `Retry-After` and body text.
fn reply(d: &Decision) -> (u16, Format, Option<u32>, String) {
    match &d.fate {
        Fate::Reply(r) => {
            let body: Vec<u8> = r.body.iter().flat_map(|s| s.as_bytes().to_vec()).collect();
            (
                r.code,
                r.format,
                r.retry_after,
                String::from_utf8_lossy(&body).into_owned(),
            )
        }
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn cache_routes_are_served_in_the_negotiated_format_on_a_ready_view() {
    let cases = [
        (
            get("/api/v1/services"),
            collection(Resource::Services),
            Format::Json,
        ),
        (
            get("/api/v1/services?watch=1&resourceVersion=5"),
            collection(Resource::Services),
            Format::Json,
        ),
        (
            get("/api/v1/nodes/edge-1"),
            Route::Object {
                res: Resource::Nodes,
                namespace: None,
                name: "edge-1".into(),
            },
            Format::Json,
        ),
        (
            request("GET", SLICES_V1, Some(PB)),
            collection(Resource::SlicesV1),
            Format::Protobuf,
        ),
        (
            get(SLICES_V1BETA1),
            collection(Resource::SlicesV1beta1),
            Format::Json,
        ),
        (get(CIDRS), collection(Resource::CidrsV1), Format::Json),
    ];
    for side in Side::ALL {
        for (req, want, want_format) in &cases {
            // The relay view serves one slice version (here v1beta1): the other is a 404 there.
            if side == Side::Relay && want.resource() == Resource::SlicesV1 {
                continue;
            }
            let d = decide_now(req, side, &WARM);
            match &d.fate {
                Fate::Serve { route, format } => {
                    assert_eq!((route, format), (want, want_format), "{side:?} {req:?}")
                }
                other => panic!("{side:?} {}: not served: {other:?}", req.path),
            }
            assert_eq!(d.label, Label::Route(want.clone()), "{side:?} {}", req.path);
            assert!(!d.ask_v1beta1);
        }
    }
}

#[test]
fn what_the_cache_does_not_route_is_proxied_on_both_ports() {
    for side in Side::ALL {
        for serving in [WARM, COLD] {
            for req in [
                request("POST", "/api/v1/services", None),
                request("PATCH", "/api/v1/nodes/edge-1", None),
                get("/api/v1/services/foo"),
                get("/apis/networking.k8s.io/v1/ingresses"),
                get("/version"),
                get("/api/v1/nodes/%zz"),
            ] {
                let d = decide_now(&req, side, &serving);
                assert!(
                    matches!(d.fate, Fate::Proxy(Why::NotCached)),
                    "{side:?} {serving:?} {req:?}: {:?}",
                    d.fate
                );
                assert_eq!(d.label, Label::Proxy);
                assert!(!d.ask_v1beta1);
            }
        }
    }
}

#[test]
fn service_cidrs_of_an_upstream_without_them_are_proxied_once_ready() {
    let no_cidrs = serving(true, false, false);
    let d = decide_now(&get(CIDRS), Side::KubeProxy, &no_cidrs);
    assert!(matches!(d.fate, Fate::Proxy(Why::CidrsNotServed)), "{d:?}");
    assert_eq!(d.label, Label::Proxy);
    let d = decide_now(
        &get("/apis/networking.k8s.io/v1beta1/servicecidrs/kubernetes"),
        Side::KubeProxy,
        &no_cidrs,
    );
    assert!(matches!(d.fate, Fate::Proxy(Why::CidrsNotServed)), "{d:?}");
    // Before the first sync it is not known yet whether the upstream has them: held.
    let d = decide_now(&get(CIDRS), Side::KubeProxy, &COLD);
    assert_eq!(wait_of(&d), Some(Wait::Sync), "{d:?}");
    // The relay port never proxies them: 404 (docs/SEMANTICS.md §12).
    let d = decide_now(&get(CIDRS), Side::Relay, &no_cidrs);
    assert_eq!(reply(&d).0, 404);
    assert_eq!(d.label, Label::Relay);
}

#[test]
fn a_conversion_only_accept_is_forwarded_and_nothing_acceptable_is_a_406() {
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    for side in Side::ALL {
        let d = decide_now(
            &request("GET", "/api/v1/services", Some(table)),
            side,
            &WARM,
        );
        assert!(matches!(d.fate, Fate::Proxy(Why::Conversion)), "{d:?}");
        // Counted as the cache route it asked for.
        assert_eq!(d.label, Label::Route(collection(Resource::Services)));
        let d = decide_now(
            &request("GET", "/api/v1/services", Some("text/html")),
            side,
            &WARM,
        );
        let (code, format, _, _) = reply(&d);
        assert_eq!((code, format), (406, Format::Json));
        assert_eq!(d.label, Label::Route(collection(Resource::Services)));
    }
}

#[test]
fn before_the_first_sync_a_request_is_held_then_answered_503_in_its_format() {
    let now = Instant::now();
    for side in Side::ALL {
        let req = request("GET", "/api/v1/services", Some(PB));
        let d = decide(&req, side, &COLD, arrived(now));
        match d.fate {
            Fate::Hold { until, wait } => {
                assert_eq!((until, wait), (now + NOT_READY_HOLD, Wait::Sync))
            }
            other => panic!("{side:?}: not held: {other:?}"),
        }
        assert_eq!(d.label, Label::Route(collection(Resource::Services)));
        // Woken before its hold ends, still not ready: held on, to the same end.
        let until = now + NOT_READY_HOLD;
        let d = decide(&req, side, &COLD, Turn::Held { now, until });
        assert!(
            matches!(d.fate, Fate::Hold { until: u, wait: Wait::Sync } if u == until),
            "{d:?}"
        );
        // The hold ends: a 503 with Retry-After, in the negotiated format.
        let d = decide(&req, side, &COLD, Turn::Held { now: until, until });
        let (code, format, retry, _) = reply(&d);
        assert_eq!((code, format, retry), (503, Format::Protobuf, Some(1)));
        assert_eq!(d.label, Label::Route(collection(Resource::Services)));
        // The view became ready meanwhile: served.
        let d = decide(&req, side, &WARM, Turn::Held { now, until });
        assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
    }
    // A 406 is decided only once the hold is over (the hold comes first).
    let req = request("GET", "/api/v1/services", Some("text/html"));
    let d = decide(&req, Side::KubeProxy, &COLD, arrived(now));
    assert!(matches!(d.fate, Fate::Hold { .. }), "{d:?}");
}

#[test]
fn the_first_v1beta1_request_asks_the_writer_and_is_held_until_they_are_built() {
    let now = Instant::now();
    let unbuilt = serving(true, false, true);
    let req = get(SLICES_V1BETA1);
    let label = Label::Route(collection(Resource::SlicesV1beta1));
    let d = decide(&req, Side::KubeProxy, &unbuilt, arrived(now));
    assert!(d.ask_v1beta1);
    assert_eq!(d.label, label);
    let until = match d.fate {
        Fate::Hold {
            until,
            wait: Wait::V1beta1,
        } => until,
        other => panic!("not held: {other:?}"),
    };
    // At least the build's own wait, longer when `--not-ready-hold-seconds` says so.
    assert_eq!(until, now + V1BETA1_BUILD_WAIT);
    let long = Turn::Arrived {
        now,
        not_ready_hold: Duration::from_secs(30),
    };
    assert!(matches!(
        decide(&req, Side::KubeProxy, &unbuilt, long).fate,
        Fate::Hold { until: u, .. } if u == now + Duration::from_secs(30)
    ));
    // Woken before they are built: held on, without asking again.
    let d = decide(&req, Side::KubeProxy, &unbuilt, Turn::Held { now, until });
    assert!(!d.ask_v1beta1);
    assert!(
        matches!(d.fate, Fate::Hold { until: u, .. } if u == until),
        "{d:?}"
    );
    // Built: served.
    let d = decide(&req, Side::KubeProxy, &WARM, Turn::Held { now, until });
    assert!(!d.ask_v1beta1);
    assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
    // Not built in time: asked again, and a 503 with Retry-After.
    let d = decide(
        &req,
        Side::KubeProxy,
        &unbuilt,
        Turn::Held { now: until, until },
    );
    assert!(d.ask_v1beta1);
    let (code, _, retry, body) = reply(&d);
    assert_eq!((code, retry), (503, Some(1)));
    assert!(body.contains("still being built"), "{body}");
    assert_eq!(d.label, label);
    // Before the first sync: asked at once, held as any request before the first sync.
    let d = decide(&req, Side::KubeProxy, &COLD, arrived(now));
    assert!(d.ask_v1beta1);
    assert!(
        matches!(d.fate, Fate::Hold { until: u, wait: Wait::Sync } if u == now + NOT_READY_HOLD),
        "{d:?}"
    );
    // Already built: no question.
    let d = decide(&req, Side::KubeProxy, &WARM, arrived(now));
    assert!(!d.ask_v1beta1);
    // v1 EndpointSlices never ask.
    let d = decide(&get(SLICES_V1), Side::KubeProxy, &unbuilt, arrived(now));
    assert!(!d.ask_v1beta1);
    assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
}

#[test]
fn the_relay_port_answers_probes_discovery_and_404s_itself() {
    let now = Instant::now();
    let probe = |path: &str, serving: &Serving| match decide_now(&get(path), Side::Relay, serving) {
        Decision {
            fate: Fate::Probe(code, _),
            label: Label::Relay,
            ask_v1beta1: false,
        } => code,
        other => panic!("{path}: not a probe: {other:?}"),
    };
    assert_eq!(probe("/healthz", &COLD), 200);
    assert_eq!(probe("/livez", &COLD), 200);
    assert_eq!(probe("/readyz", &COLD), 503);
    assert_eq!(probe("/readyz", &WARM), 200);
    // On the kube-proxy port the same paths are the apiserver's.
    for path in ["/healthz", "/readyz", "/apis/discovery.k8s.io"] {
        let d = decide_now(&get(path), Side::KubeProxy, &WARM);
        assert!(matches!(d.fate, Fate::Proxy(Why::NotCached)), "{path}");
    }
    // Discovery names the one slice version the relay view serves.
    let v1 = serving(true, false, true);
    let d = decide_now(&get("/apis/discovery.k8s.io"), Side::Relay, &v1);
    let (code, _, _, body) = reply(&d);
    assert_eq!(code, 200);
    assert!(body.contains("discovery.k8s.io/v1\""), "{body}");
    assert_eq!(d.label, Label::Relay);
    // The slice version it does not serve: 404, never proxied nor built.
    let d = decide_now(&get(SLICES_V1BETA1), Side::Relay, &v1);
    assert_eq!(reply(&d).0, 404);
    assert!(!d.ask_v1beta1);
    let d = decide_now(&get(SLICES_V1), Side::Relay, &WARM);
    assert_eq!(reply(&d).0, 404);
    // Not ready: held as a cache-backed request, then 503 in JSON.
    let d = decide(
        &get("/apis/discovery.k8s.io"),
        Side::Relay,
        &COLD,
        arrived(now),
    );
    assert!(
        matches!(d.fate, Fate::Hold { until: u, wait: Wait::Sync } if u == now + NOT_READY_HOLD),
        "{d:?}"
    );
    assert_eq!(d.label, Label::Relay);
    let until = now + NOT_READY_HOLD;
    let d = decide(
        &request("GET", SLICES_V1, Some(PB)),
        Side::Relay,
        &COLD,
        Turn::Held { now: until, until },
    );
    let (code, format, retry, _) = reply(&d);
    assert_eq!((code, format, retry), (503, Format::Json, Some(1)));
    assert_eq!(d.label, Label::Relay);
    // Ready on the relay port: the slice version it serves is the cache route's, even v1beta1
    // (an upstream without v1), which the relay never asks the writer for.
    let beta = serving(true, true, true);
    let d = decide_now(&get(SLICES_V1BETA1), Side::Relay, &beta);
    assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
    assert!(!d.ask_v1beta1);
}

#[test]
fn the_relay_port_holds_no_v1beta1_request_for_a_build() {
    // The relay view is never asked to build v1beta1 EndpointSlices: a ready relay view answers
    // what it serves at once.
    let now = Instant::now();
    let d = decide(
        &get("/api/v1/services"),
        Side::Relay,
        &serving(true, false, true),
        arrived(now),
    );
    assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
    // Before its first sync, a routed request on the relay port is held like one on the
    // kube-proxy port, counted as its route.
    let d = decide(&get("/api/v1/services"), Side::Relay, &COLD, arrived(now));
    assert_eq!(wait_of(&d), Some(Wait::Sync), "{d:?}");
    assert_eq!(d.label, Label::Route(collection(Resource::Services)));
}

/// The readers' view of node `edge-1`: ready, holding that one Node whole.
fn only(node: &str, ready: bool) -> Serving {
    Serving {
        only_node: Some(node.into()),
        ..serving(ready, true, true)
    }
}

fn proxied_as_other_nodes(d: &Decision) -> bool {
    matches!(d.fate, Fate::Proxy(Why::OtherNodes)) && d.label == Label::Proxy
}

#[test]
fn only_a_request_for_the_local_node_is_served_the_others_are_proxied() {
    let view = only("edge-1", true);
    let served = [
        "/api/v1/nodes/edge-1",
        // Its other parameters are the cache's to check (a 400 from the handler).
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-1&limit=abc",
        // kube-proxy's list and watch of its own Node.
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-1&limit=500&resourceVersion=0",
        "/api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dedge-1&resourceVersion=5&timeoutSeconds=301&watch=true",
        "/api/v1/nodes?fieldSelector=metadata.name%3D%3Dedge-1",
        // Other terms ANDed with it, and a label selector.
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-1%2Cmetadata.name%21%3Dx&labelSelector=a%3Db",
    ];
    for target in served {
        let d = decide_now(&get(target), Side::KubeProxy, &view);
        assert!(matches!(d.fate, Fate::Serve { .. }), "{target}: {d:?}");
    }
    let proxied = [
        "/api/v1/nodes/edge-2",
        "/api/v1/nodes",
        "/api/v1/nodes?watch=true",
        "/api/v1/nodes?labelSelector=a%3Db",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-2",
        "/api/v1/nodes?fieldSelector=metadata.name%21%3Dedge-2",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-1x",
        // A query the cache does not take proves nothing (a field only the apiserver selects by).
        "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-1%2Cspec.unschedulable%3Dfalse",
    ];
    for target in proxied {
        let d = decide_now(&get(target), Side::KubeProxy, &view);
        assert!(proxied_as_other_nodes(&d), "{target}: {d:?}");
        // Before the first sync too: the cache never serves them, so nothing waits for it.
        let d = decide_now(&get(target), Side::KubeProxy, &only("edge-1", false));
        assert!(proxied_as_other_nodes(&d), "{target} (cold): {d:?}");
    }
    // Every other resource is as it was.
    let d = decide_now(&get("/api/v1/services"), Side::KubeProxy, &view);
    assert!(matches!(d.fate, Fate::Serve { .. }), "{d:?}");
    // Before the first sync the local node's request is held as any other.
    let d = decide_now(&get(served[2]), Side::KubeProxy, &only("edge-1", false));
    assert_eq!(wait_of(&d), Some(Wait::Sync), "{d:?}");
}

#[test]
fn the_relay_view_holds_every_node_and_serves_every_node_request() {
    // The relay view holds every Node whole (`only_node` is `None`): as before, from the cache.
    for target in [
        "/api/v1/nodes",
        "/api/v1/nodes/edge-2",
        "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dedge-2",
    ] {
        let d = decide_now(&get(target), Side::Relay, &WARM);
        assert!(matches!(d.fate, Fate::Serve { .. }), "{target}: {d:?}");
        let d = decide_now(&get(target), Side::KubeProxy, &WARM);
        assert!(matches!(d.fate, Fate::Serve { .. }), "{target}: {d:?}");
    }
}
