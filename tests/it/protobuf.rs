//! Protobuf answers (`application/vnd.kubernetes.protobuf`), checked with the independent
//! decoder of tests/it/common/protobuf.rs (official .proto files, prost-reflect): its own tests
//! first (`decoder_*`), then the real binaries over loopback sockets, each protobuf answer
//! compared with the JSON answer to the same request.

use crate::common;

use std::time::{Duration, Instant};

use common::protobuf::*;
use common::*;
use serde_json::{json, Value};

// ---- The decoder's own tests (no server involved). ----

#[test]
fn decoder_field_names_are_the_kubernetes_json_names() {
    // prost-reflect's serde (and our walker) name fields by their proto names: in these files
    // they are the Kubernetes JSON names (no `json_name` option, no underscore to camel-case).
    let mut checked = 0;
    for m in pool().all_messages() {
        if !m.full_name().starts_with("k8s.io.") {
            continue;
        }
        for f in m.fields() {
            assert_eq!(f.json_name(), f.name(), "{}.{}", m.full_name(), f.name());
            assert!(!f.name().contains('_'), "{}.{}", m.full_name(), f.name());
            checked += 1;
        }
    }
    assert!(checked > 500, "only {checked} fields");
    for name in [
        "k8s.io.api.core.v1.NodeList",
        "k8s.io.api.core.v1.ServiceList",
        "k8s.io.api.core.v1.EndpointsList",
        "k8s.io.api.discovery.v1.EndpointSliceList",
        "k8s.io.api.discovery.v1beta1.EndpointSliceList",
        "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
        "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
        "k8s.io.apimachinery.pkg.runtime.Unknown",
    ] {
        message(name);
    }
}

#[test]
fn decoder_converts_times_quantities_fields_and_int64_to_kubernetes_json() {
    // A Node given in protobuf's own JSON mapping, encoded by prost-reflect, wrapped by hand.
    let raw = encode_proto_json(
        "k8s.io.api.core.v1.Node",
        &json!({
            "metadata": {
                "name": "edge-a1", "resourceVersion": "42", "generation": "7",
                "labels": {"zone": "zone-a"},
                "creationTimestamp": {"seconds": "1704164705"},
                "managedFields": [{"manager": "m", "operation": "Update",
                    "time": {"seconds": "1704164705", "nanos": 5},
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"Raw": base64(br#"{"f:metadata":{"f:labels":{}}}"#)}}]
            },
            "spec": {"podCIDR": "10.244.1.0/24", "unschedulable": false},
            "status": {
                "capacity": {"cpu": {"string": "4"}, "memory": {"string": "8Gi"}},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": {"seconds": "951782400"},
                    "lastTransitionTime": {}}]
            }
        }),
    );
    let d = decode_body(&wrap_unknown("v1", "Node", &raw));
    assert_eq!((d.api_version.as_str(), d.kind.as_str()), ("v1", "Node"));
    let want = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "edge-a1", "resourceVersion": "42", "generation": 7,
            "labels": {"zone": "zone-a"},
            "creationTimestamp": "2024-01-02T03:05:05Z",
            "managedFields": [{"manager": "m", "operation": "Update",
                "time": "2024-01-02T03:05:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
        },
        "spec": {"podCIDR": "10.244.1.0/24", "unschedulable": false},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi"},
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2000-02-29T00:00:00Z",
                "lastTransitionTime": null}]
        }
    });
    assert_eq!(d.object, want);
    assert_eq!(rfc3339(-1, 0, false), "1969-12-31T23:59:59Z");
    assert_eq!(
        rfc3339(1704164705, 123_456_789, true),
        "2024-01-02T03:05:05.123456Z"
    );
    assert_eq!(base64(b"ab"), "YWI=");
}

#[test]
fn decoder_converts_int_or_string_and_keeps_explicit_false() {
    let raw = encode_proto_json(
        "k8s.io.api.core.v1.Service",
        &json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.10", "allocateLoadBalancerNodePorts": false,
                "ports": [{"name": "a", "port": 80, "targetPort": {"type": "0", "intVal": 8080}},
                          {"name": "b", "port": 81, "targetPort": {"type": "1", "strVal": "http"}},
                          {"name": "c", "port": 82, "targetPort": {}}]}
        }),
    );
    let d = decode_body(&wrap_unknown("v1", "Service", &raw));
    assert_eq!(
        d.object["spec"]["ports"],
        json!([{"name": "a", "port": 80, "targetPort": 8080},
               {"name": "b", "port": 81, "targetPort": "http"},
               {"name": "c", "port": 82, "targetPort": 0}])
    );
    assert_eq!(d.object["spec"]["allocateLoadBalancerNodePorts"], false);

    // v1beta1 EndpointSlice: a topology map, a pointer `ready: false`.
    let raw = encode_proto_json(
        "k8s.io.api.discovery.v1beta1.EndpointSlice",
        &json!({"metadata": {"name": "web-abc12"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false},
                "topology": {"kubernetes.io/hostname": "edge-a1"}}],
            "ports": [{"port": 80, "protocol": "TCP"}]}),
    );
    let d = decode_body(&wrap_unknown(
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        &raw,
    ));
    assert_eq!(
        d.object["endpoints"][0],
        json!({"addresses": ["10.0.0.1"], "conditions": {"ready": false},
            "topology": {"kubernetes.io/hostname": "edge-a1"}})
    );
}

#[test]
fn decoder_reads_watch_frames_and_statuses() {
    let status = encode_proto_json(
        "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
        &json!({"metadata": {}, "status": "Failure", "message": "too old resource version: 1 (5)",
            "reason": "Expired", "code": 410}),
    );
    let node = encode_proto_json(
        "k8s.io.api.core.v1.Node",
        &json!({"metadata": {"resourceVersion": "9",
            "annotations": {"k8s.io/initial-events-end": "true"}}}),
    );
    let mut body = watch_frame("BOOKMARK", &wrap_unknown("v1", "Node", &node));
    body.extend(watch_frame("ERROR", &wrap_unknown("v1", "Status", &status)));
    let evs = decode_watch(&body);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].0, "BOOKMARK");
    assert_eq!(
        evs[0].1.object,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"resourceVersion": "9",
            "annotations": {"k8s.io/initial-events-end": "true"}}})
    );
    assert_eq!(evs[1].0, "ERROR");
    assert_eq!(evs[1].1.object["code"], 410);
    assert_eq!(evs[1].1.object["reason"], "Expired");
    assert_eq!(evs[1].1.kind, "Status");
    // A truncated stream and a JSON body are refused.
    assert!(try_decode_watch(&body[..body.len() - 1]).is_err());
    let err = try_decode_body(br#"{"kind":"NodeList"}"#).unwrap_err();
    assert!(err.contains("magic"), "{err}");
    // Unknown kinds, content encodings and unknown fields are refused.
    assert!(try_decode_body(&wrap_unknown("v1", "Pod", &node)).is_err());
    let mut enc = wrap_unknown("v1", "Node", &node);
    enc.extend(len_field(3, b"gzip"));
    assert!(try_decode_body(&enc).is_err());
    let mut extra = node.clone();
    extra.extend(len_field(99, b"x"));
    let err = try_decode_body(&wrap_unknown("v1", "Node", &extra)).unwrap_err();
    assert!(err.contains("unknown"), "{err}");
}

#[test]
fn decoder_comparison_is_one_sided() {
    let json = json!({"a": "x", "c": {"ready": false}, "items": [], "t": null});
    // Zero values only on the protobuf side are fine (gogo writes non-pointer fields).
    let proto = json!({"a": "x", "c": {"ready": false}, "s": {}, "n": 0, "e": "", "t": null});
    assert!(diff(&json, &proto).is_empty(), "{:?}", diff(&json, &proto));
    // A false set in JSON (a pointer) must be on the wire.
    let missing = json!({"a": "x", "c": {}});
    assert_eq!(
        diff(&json, &missing).len(),
        1,
        "{:?}",
        diff(&json, &missing)
    );
    // A non-zero value only in protobuf, or a different value, is a difference.
    let extra = json!({"a": "x", "c": {"ready": false}, "z": 1});
    assert_eq!(diff(&json, &extra).len(), 1);
    let other = json!({"a": "y", "c": {"ready": true}});
    assert_eq!(diff(&json, &other).len(), 2);
    assert_eq!(
        normalize(&json!({"a": 0, "b": [{"c": ""}], "d": {"e": false}, "f": "g"})),
        json!({"b": [null], "f": "g"})
    );
}

// ---- Against the real binaries. ----

/// `v` without its object members that are `null`, recursively.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        v => v.clone(),
    }
}

#[test]
fn decoder_round_trips_every_object_grid_wrapper_serves_in_json() {
    // What grid-wrapper serves as JSON today, encoded by prost-reflect from the official
    // schema (every member must have a field), decoded again: equal under the comparison the
    // tests use. Checks the decoder (and the comparison) on real objects, not only on samples.
    let shared = shared_demo();
    let w = &shared.w;
    let mut bodies: Vec<(String, Value)> = COLLECTIONS
        .iter()
        .map(|c| (c.0.to_string(), w.get_json(c.0)))
        .collect();
    bodies.push(("node".into(), w.get_json("/api/v1/nodes/edge-a1")));
    let (code, headers, body) =
        w.get("/api/v1/endpoints?resourceVersion=1&resourceVersionMatch=Exact");
    bodies.push(("410".into(), assert_status(code, &headers, &body, 410)));
    for (what, json) in &bodies {
        let d = decode_body(&encode_k8s_json(json));
        assert_eq!(d.kind, json["kind"], "{what}");
        let want = if json["items"].is_array() {
            json_list_as_proto(json)
        } else {
            json.clone()
        };
        assert_same(&want, &d.object, what);
        // And exactly: nothing lost or added on the way (the encoder keeps explicit zeros).
        if let Some(items) = json["items"].as_array() {
            for (i, it) in items.iter().enumerate() {
                // Less its `null`s (Go's zero time, a nil pointer: absent on the wire).
                assert_eq!(
                    d.object["items"][i],
                    without_nulls(&without_type_meta(it)),
                    "{what}: item {i}"
                );
            }
        }
    }
    assert_eq!(
        parse_rfc3339("2024-01-02T03:05:05.123456Z"),
        Some((1704164705, 123_456_000))
    );
}

const SVC: &str = "/api/v1/services";
const EPS: &str = "/api/v1/endpoints";
const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const V1B1: &str = "/apis/discovery.k8s.io/v1beta1/endpointslices";
const NODES: &str = "/api/v1/nodes";
const NODE_BY_NAME: &str = "fieldSelector=metadata.name%3Dedge-a1";
/// kube-proxy's list of its own Node: the one Node list the cache serves (the others are
/// proxied, docs/SEMANTICS.md §1.1).
const OWN_NODES: &str = "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1";

/// (path, list kind, item kind, apiVersion).
const COLLECTIONS: &[(&str, &str, &str, &str)] = &[
    (OWN_NODES, "NodeList", "Node", "v1"),
    (SVC, "ServiceList", "Service", "v1"),
    (EPS, "EndpointsList", "Endpoints", "v1"),
    (
        V1,
        "EndpointSliceList",
        "EndpointSlice",
        "discovery.k8s.io/v1",
    ),
    (
        V1B1,
        "EndpointSliceList",
        "EndpointSlice",
        "discovery.k8s.io/v1beta1",
    ),
    (
        "/apis/networking.k8s.io/v1/servicecidrs",
        "ServiceCIDRList",
        "ServiceCIDR",
        "networking.k8s.io/v1",
    ),
    (
        "/apis/networking.k8s.io/v1beta1/servicecidrs",
        "ServiceCIDRList",
        "ServiceCIDR",
        "networking.k8s.io/v1beta1",
    ),
];

const JSON_ACCEPT: &[(&str, &str)] = &[("Accept", "application/json")];

/// A GET with kube-proxy's Accept header.
fn kp_get(w: &Wrapper, path: &str) -> Response {
    request(w.addr, "GET", path, &[("Accept", KUBE_PROXY_ACCEPT)], b"")
}

/// A 200 protobuf answer to kube-proxy's GET, decoded.
fn kp_get_ok(w: &Wrapper, path: &str) -> Decoded {
    let (code, headers, body) = kp_get(w, path);
    assert_eq!(code, 200, "{path}: {}", preview(&body));
    assert_eq!(
        header(&headers, "content-type"),
        Some(CONTENT_TYPE),
        "{path}: Content-Type with kube-proxy's Accept ({})",
        preview(&body)
    );
    decode_body(&body)
}

/// The JSON answer to the same GET (Accept: application/json).
fn json_get(w: &Wrapper, path: &str) -> Value {
    let (code, headers, body) = request(w.addr, "GET", path, JSON_ACCEPT, b"");
    assert_eq!(code, 200, "{path}: {}", preview(&body));
    assert!(header(&headers, "content-type").is_some_and(|c| c.starts_with("application/json")));
    serde_json::from_slice(&body).expect("JSON body")
}

/// A JSON list with its items stripped of kind/apiVersion (protobuf items have no typeMeta).
fn json_list_as_proto(list: &Value) -> Value {
    let mut l = list.clone();
    if let Some(items) = l["items"].as_array_mut() {
        for it in items {
            *it = without_type_meta(it);
        }
    }
    l
}

/// Compares a list answered in protobuf with the JSON list answered right after.
fn assert_list_same(w: &Wrapper, path: &str, list_kind: &str, api: &str) {
    let d = kp_get_ok(w, path);
    let json = json_get(w, path);
    assert_eq!(
        (d.api_version.as_str(), d.kind.as_str()),
        (api, list_kind),
        "{path}"
    );
    assert_eq!(
        d.object["metadata"]["resourceVersion"], json["metadata"]["resourceVersion"],
        "{path}: the list RV"
    );
    let n = json["items"].as_array().map_or(0, Vec::len);
    assert!(n > 0, "{path}: an empty list proves little");
    assert_eq!(
        d.object["items"].as_array().map_or(0, Vec::len),
        n,
        "{path}: item count"
    );
    assert_same(&json_list_as_proto(&json), &d.object, path);
}

/// `n` events of a JSON watch and a protobuf watch of the same request, compared one by one
/// (type, then the object: watch event objects carry their typeMeta in both forms).
fn assert_events_same(
    what: &str,
    json: &mut Watch,
    proto: &mut ProtoWatch,
    n: usize,
) -> Vec<(String, Decoded)> {
    let j: Vec<Value> = (0..n).map(|_| json.expect()).collect();
    let p: Vec<(String, Decoded)> = (0..n).map(|_| proto.expect()).collect();
    for (i, (je, (ty, d))) in j.iter().zip(&p).enumerate() {
        assert_eq!(je["type"], ty.as_str(), "{what}: event {i} type");
        assert_same(
            &je["object"],
            &d.object,
            &format!("{what}: event {i} ({ty})"),
        );
    }
    assert!(
        proto.next(Duration::from_millis(150)).is_none(),
        "{what}: more protobuf events than the {n} expected"
    );
    p
}

/// Opens the same watch as JSON and as protobuf (kube-proxy's Accept).
fn both(w: &Wrapper, path: &str) -> (Watch, ProtoWatch) {
    let json = Watch::open(w.addr, path, JSON_ACCEPT);
    assert_eq!(json.code, 200, "JSON {path}");
    (json, ProtoWatch::kube_proxy(w.addr, path))
}

#[test]
fn kube_proxy_lists_and_node_get_are_protobuf_equal_to_json() {
    let shared = shared_demo();
    let w = &shared.w;
    // v1beta1 EndpointSlices are built at the first request (held until built): before.
    json_get(w, V1B1);
    for (path, list_kind, _, api) in COLLECTIONS {
        let sep = if path.contains('?') { '&' } else { '?' };
        assert_list_same(
            w,
            &format!("{path}{sep}limit=500&resourceVersion=0"),
            list_kind,
            api,
        );
        assert_list_same(w, path, list_kind, api);
    }
    // kube-proxy's selectors: services and slices without headless/proxy-name; its node.
    for path in [SVC, V1] {
        let q = format!("{path}?labelSelector={SELECTOR_L}&limit=500&resourceVersion=0");
        let kind = if path == SVC {
            "ServiceList"
        } else {
            "EndpointSliceList"
        };
        let api = if path == SVC {
            "v1"
        } else {
            "discovery.k8s.io/v1"
        };
        assert_list_same(w, &q, kind, api);
    }
    let q = format!("{NODES}?{NODE_BY_NAME}&limit=500&resourceVersion=0");
    assert_list_same(w, &q, "NodeList", "v1");
    let d = kp_get_ok(w, &q);
    assert_eq!(names(&d.object), ["edge-a1"]);
    // The single node GET.
    let path = "/api/v1/nodes/edge-a1";
    let d = kp_get_ok(w, path);
    assert_eq!((d.api_version.as_str(), d.kind.as_str()), ("v1", "Node"));
    assert_same(&json_get(w, path), &d.object, path);
}

#[test]
fn kube_proxy_watches_are_protobuf_frames_equal_to_json_events() {
    let shared = shared_demo();
    let w = &shared.w;
    json_get(w, V1B1);
    for (path, _, kind, api) in COLLECTIONS {
        let sep = if path.contains('?') { '&' } else { '?' };
        let list = json_get(w, path);
        let n = list["items"].as_array().map_or(0, Vec::len);
        let list_rv = &list["metadata"]["resourceVersion"];

        // From RV 0 with bookmarks: an ADDED per item, then a BOOKMARK at the snapshot RV.
        let q = format!(
            "{path}{sep}allowWatchBookmarks=true&resourceVersion=0&timeoutSeconds=30&watch=true"
        );
        let (mut j, mut p) = both(w, &q);
        let evs = assert_events_same(&q, &mut j, &mut p, n + 1);
        for (i, (ty, d)) in evs[..n].iter().enumerate() {
            assert_eq!(ty, "ADDED", "{q}");
            assert_eq!(
                (d.api_version.as_str(), d.kind.as_str()),
                (*api, *kind),
                "{q}"
            );
            assert_same(&list["items"][i], &d.object, &q);
        }
        let (ty, b) = &evs[n];
        assert_eq!(ty, "BOOKMARK", "{q}");
        assert_eq!(
            (b.api_version.as_str(), b.kind.as_str()),
            (*api, *kind),
            "{q}"
        );
        assert_eq!(&b.object["metadata"]["resourceVersion"], list_rv, "{q}");

        // WatchList (kube-proxy with WatchListClient): ADDED, then the initial-events-end
        // BOOKMARK; the stream stays open.
        let q = format!("{path}{sep}allowWatchBookmarks=true&resourceVersion=&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=30&watch=true");
        let (mut j, mut p) = both(w, &q);
        let evs = assert_events_same(&q, &mut j, &mut p, n + 1);
        assert!(evs[..n].iter().all(|(t, _)| t == "ADDED"), "{q}");
        let (ty, b) = &evs[n];
        assert_eq!(ty, "BOOKMARK", "{q}");
        assert_eq!(b.kind, *kind, "{q}");
        assert_eq!(
            b.object["metadata"]["annotations"],
            json!({"k8s.io/initial-events-end": "true"}),
            "{q}"
        );
        assert!(!p.ended_within(Duration::from_millis(200)), "{q}: closed");

        // From the list RV (the reflector's watch after its list): nothing yet, stream open.
        let q = format!("{path}{sep}allowWatchBookmarks=true&resourceVersion={}&timeout=7m36s&timeoutSeconds=456&watch=true", list_rv.as_str().unwrap());
        let mut p = ProtoWatch::kube_proxy(w.addr, &q);
        let evs = p.drain(Duration::from_millis(300));
        assert!(evs.iter().all(|(t, _)| t == "BOOKMARK"), "{q}: {evs:?}");
        assert!(!p.ended_within(Duration::from_millis(100)), "{q}: closed");
    }
    // kube-proxy's node informer: by name, from RV 0.
    let q = format!("{NODES}?allowWatchBookmarks=true&{NODE_BY_NAME}&resourceVersion=0&timeoutSeconds=30&watch=true");
    let (mut j, mut p) = both(w, &q);
    let evs = assert_events_same(&q, &mut j, &mut p, 2);
    assert_eq!(evs[0].0, "ADDED");
    assert_eq!(evs[0].1.object["metadata"]["name"], "edge-a1");
    assert_eq!(evs[1].0, "BOOKMARK");
}

/// The simulator's web Endpoints with its address list transformed by `f`.
fn web_endpoints(sim: &Sim, f: impl FnOnce(&mut Vec<Value>)) -> Value {
    let mut ep = sim.get_json("/api/v1/namespaces/default/endpoints/web");
    let addrs = ep["subsets"][0]["addresses"].as_array_mut().unwrap();
    f(addrs);
    ep
}

#[test]
fn protobuf_watch_follows_relabels_and_endpoint_changes_like_json() {
    let (sim, w) = demo(&[]);
    json_get(&w, V1B1);
    let start = rv(&json_get(&w, OWN_NODES));
    let paths: Vec<String> = COLLECTIONS.iter().map(|c| c.0.to_string()).collect();
    let mut watches: Vec<(String, Watch, ProtoWatch)> = paths
        .iter()
        .map(|p| {
            let sep = if p.contains('?') { '&' } else { '?' };
            let q = format!("{p}{sep}allowWatchBookmarks=true&resourceVersion={start}&timeoutSeconds=60&watch=true");
            let (j, pw) = both(&w, &q);
            (q, j, pw)
        })
        .collect();

    // edge-b1 joins zone-a (its endpoints enter edge-a1's topology)...
    sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    // ...endpoints change (one more backend; a not-ready endpoint in the slice)...
    sim.apply(&web_endpoints(&sim, |a| {
        a.push(json!({"ip": "10.244.2.11", "nodeName": "edge-a2"}))
    }));
    let mut slice =
        sim.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12");
    slice["endpoints"].as_array_mut().unwrap().push(json!({
        "addresses": ["10.244.2.12"], "nodeName": "edge-a2", "zone": "zone-a",
        "conditions": {"ready": false, "serving": true, "terminating": false}}));
    sim.apply(&slice);
    // ...edge-b1 leaves again; the served node itself changes.
    sim.label_node("edge-b1", json!({"zone": "zone-b"}));
    sim.label_node("edge-a1", json!({"proto": "yes"}));
    // A Service with a named targetPort and a pointer false, added then deleted.
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "lb", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.4.4",
            "allocateLoadBalancerNodePorts": false,
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]}}));
    sim.delete("Service", "default", "lb");
    // A second ServiceCIDR (dual-stack).
    sim.apply(
        &json!({"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": "extra", "labels": {"a": "b"}},
        "spec": {"cidrs": ["10.100.0.0/16", "fd00:10::/108"]}}),
    );

    for (q, j, p) in &mut watches {
        let not_bookmark = |t: &str| t != "BOOKMARK";
        let je: Vec<Value> = j
            .drain(Duration::from_millis(800))
            .into_iter()
            .filter(|e| not_bookmark(e["type"].as_str().unwrap_or("")))
            .collect();
        let pe: Vec<(String, Decoded)> = p
            .drain(Duration::from_millis(800))
            .into_iter()
            .filter(|(t, _)| not_bookmark(t))
            .collect();
        assert!(!je.is_empty(), "{q}: the changes reached no JSON watch");
        let jt: Vec<(String, String)> = je.iter().map(ev_name).collect();
        let pt: Vec<(String, String)> = pe
            .iter()
            .map(|(t, d)| {
                (
                    t.clone(),
                    d.object["metadata"]["name"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        assert_eq!(pt, jt, "{q}: the same events");
        for (i, (je, (_, d))) in je.iter().zip(&pe).enumerate() {
            assert_same(&je["object"], &d.object, &format!("{q}: event {i}"));
        }
    }
}

/// Asserts a decoded `Status` failure with `code` and `reason`.
fn assert_proto_status(d: &Decoded, code: u16, reason: &str, what: &str) {
    assert_eq!(
        (d.api_version.as_str(), d.kind.as_str()),
        ("v1", "Status"),
        "{what}"
    );
    assert_eq!(d.object["status"], "Failure", "{what}: {}", d.object);
    assert_eq!(d.object["code"], code, "{what}: {}", d.object);
    assert_eq!(d.object["reason"], reason, "{what}: {}", d.object);
    assert!(
        d.object["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {}",
        d.object
    );
}

#[test]
fn errors_are_protobuf_statuses_when_protobuf_was_negotiated() {
    let shared = shared_demo();
    let w = &shared.w;
    json_get(w, V1B1);
    // A list with resourceVersionMatch=Exact and another RV: 410 Expired; a missing node: 404.
    for (path, code, reason) in [
        (
            "/api/v1/endpoints?resourceVersion=1&resourceVersionMatch=Exact",
            410,
            "Expired",
        ),
        ("/api/v1/namespaces/default/services/nope", 404, "NotFound"),
    ] {
        let (got, headers, body) = kp_get(w, path);
        assert_eq!(got, code, "{path}: {}", preview(&body));
        assert_eq!(
            header(&headers, "content-type"),
            Some(CONTENT_TYPE),
            "{path}"
        );
        let d = decode_body(&body);
        assert_proto_status(&d, code, reason, path);
        let (jcode, jheaders, jbody) = request(w.addr, "GET", path, JSON_ACCEPT, b"");
        let js = assert_status(jcode, &jheaders, &jbody, code);
        assert_same(&js, &d.object, path);
    }
    // A watch from a garbage RV: 200, one ERROR frame with the 410 Status, then the end.
    for (path, _, _, _) in COLLECTIONS {
        let sep = if path.contains('?') { '&' } else { '?' };
        for q in [
            format!("{path}{sep}allowWatchBookmarks=true&resourceVersion=abc&timeoutSeconds=10&watch=true"),
            format!("{path}{sep}allowWatchBookmarks=true&resourceVersion=abc&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=10&watch=true"),
        ] {
            let (mut j, mut p) = both(w, &q);
            let evs = assert_events_same(&q, &mut j, &mut p, 1);
            assert_eq!(evs[0].0, "ERROR", "{q}");
            assert_proto_status(&evs[0].1, 410, "Expired", &q);
            assert!(p.ended_within(Duration::from_secs(2)), "{q}: stream left open");
        }
    }
}

#[test]
fn content_negotiation_honours_q_values_and_406s_the_rest() {
    let shared = shared_demo();
    let w = &shared.w;
    let path = "/api/v1/services";
    let watch = "/api/v1/services?watch=true&timeoutSeconds=2";
    // JSON as before: no Accept, JSON, JSON preferred by q-values, anything.
    for accept in [
        None,
        Some("application/json"),
        Some("application/vnd.kubernetes.protobuf;q=0, application/json"),
        Some("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
        Some("*/*"),
    ] {
        let hs: Vec<(&str, &str)> = accept.iter().map(|a| ("Accept", *a)).collect();
        let (code, headers, body) = request(w.addr, "GET", path, &hs, b"");
        assert_eq!(code, 200, "{accept:?}");
        let ct = header(&headers, "content-type").unwrap_or("");
        assert!(ct.starts_with("application/json"), "{accept:?}: {ct}");
        let v: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(v["kind"], "ServiceList");
        let wj = Watch::open(w.addr, watch, &hs);
        let ct = header(&wj.headers, "content-type").unwrap_or("");
        assert!(ct.starts_with("application/json"), "watch {accept:?}: {ct}");
    }
    // Protobuf when it is acceptable and preferred.
    for accept in [
        KUBE_PROXY_ACCEPT,
        "application/vnd.kubernetes.protobuf",
        "application/json;q=0.5, application/vnd.kubernetes.protobuf",
    ] {
        let (code, headers, body) = request(w.addr, "GET", path, &[("Accept", accept)], b"");
        assert_eq!(code, 200, "{accept}: {}", preview(&body));
        assert_eq!(
            header(&headers, "content-type"),
            Some(CONTENT_TYPE),
            "{accept}"
        );
        assert_eq!(decode_body(&body).kind, "ServiceList", "{accept}");
        let pw = ProtoWatch::open(w.addr, watch, &[("Accept", accept)]);
        assert_eq!(pw.code, 200, "watch {accept}");
        pw.assert_stream_content_type(&format!("watch {accept}"));
    }
    // Nothing acceptable: a JSON 406 Status that names the protobuf type among the accepted.
    for accept in ["text/html", "application/vnd.kubernetes.protobuf;q=0"] {
        let (code, headers, body) = request(w.addr, "GET", path, &[("Accept", accept)], b"");
        let st = assert_status(code, &headers, &body, 406);
        assert_eq!(st["reason"], "NotAcceptable");
        let msg = st["message"].as_str().unwrap_or("");
        assert!(
            msg.contains("application/json") && msg.contains(CONTENT_TYPE),
            "{accept}: {msg}"
        );
    }
}

#[test]
fn a_field_newer_than_the_schema_reaches_json_not_protobuf_and_is_counted_and_logged_once() {
    // A JSON upstream: a protobuf one could not send a field its schema does not know (what
    // grid-wrapper does with an unknown field number is tested in upstream::proto_list).
    let sim = Sim::start(&["--no-protobuf"]);
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={}", sim.url), "--hostname=edge-a1"]);
    w.wait_ready();
    let sample = "grid_wrapper_protobuf_unknown_field_objects_total{resource=\"services.v1\"}";
    assert_eq!(common::autonomy::metric(&w, sample), Some(0.0));
    // A Service carrying a field no Kubernetes release has (as a newer apiserver's would).
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "future", "namespace": "default"},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.99",
                 "ports": [{"port": 80, "protocol": "TCP"}],
                 "someNewField": {"mode": "fast"}}});
    sim.apply(&svc);
    let path = "/api/v1/namespaces/default/services/future";
    wait_for("the new Service served", || {
        request(w.addr, "GET", path, JSON_ACCEPT, b"").0 == 200
    });
    // JSON clients get it as the upstream sent it.
    assert_eq!(
        json_get(&w, path)["spec"]["someNewField"],
        json!({"mode": "fast"})
    );
    // Protobuf clients get every known field (the decoder refuses unknown ones) and not it.
    let pb = kp_get_ok(&w, path).object;
    assert_eq!(pb["spec"]["clusterIP"], "10.96.0.99");
    assert!(pb["spec"].get("someNewField").is_none(), "{pb}");
    // A new version of it is encoded again: counted again, logged once.
    svc["metadata"]["labels"] = json!({"v": "2"});
    sim.apply(&svc);
    wait_for("the new version served", || {
        json_get(&w, path)["metadata"]["labels"]["v"] == "2"
    });
    assert_eq!(kp_get_ok(&w, path).object["metadata"]["labels"]["v"], "2");
    assert_eq!(common::autonomy::metric(&w, sample), Some(2.0));
    let text = log.wait_for_text("spec.someNewField", Duration::from_secs(10));
    let warns: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("someNewField"))
        .collect();
    assert_eq!(warns.len(), 1, "logged once:\n{text}");
    assert!(
        warns[0].contains("WARN") && warns[0].contains("default/future"),
        "{}",
        warns[0]
    );
}

/// kube-proxy 1.35–1.37's informers, each a WatchList exactly as it sends it (WatchListClient is
/// client-go's default from 1.35): Services with `!service.kubernetes.io/service-proxy-name` and
/// `spec.clusterIP!=None`, EndpointSlices with `!service.kubernetes.io/headless` alone (from
/// 1.35), its Node by name. In protobuf, equal to JSON: the selected objects as ADDED (headless
/// `db` and its slice left out, web's slice pruned as the list serves it), then the
/// initial-events-end bookmark, and the stream stays open.
#[test]
fn kube_proxy_1_37_watchlists_in_protobuf_equal_json() {
    // Its own: it counts answers in /metrics.
    let (_sim, w) = demo(&[]);
    let w = &w;
    let wl = "allowWatchBookmarks=true&resourceVersion=&resourceVersionMatch=NotOlderThan\
              &sendInitialEvents=true&timeoutSeconds=30&watch=true";
    let svc_sel = "labelSelector=%21service.kubernetes.io%2Fservice-proxy-name\
                   &fieldSelector=spec.clusterIP%21%3DNone";
    let slice_sel = "labelSelector=%21service.kubernetes.io%2Fheadless";
    for (path, sel, kind, api, absent) in [
        (SVC, svc_sel, "Service", "v1", "db"),
        (V1, slice_sel, "EndpointSlice", "discovery.k8s.io/v1", "db"),
        (NODES, NODE_BY_NAME, "Node", "v1", "edge-a2"),
    ] {
        let list = json_get(w, &format!("{path}?{sel}"));
        let want = names(&list);
        assert!(!want.is_empty(), "{path}?{sel}: {list}");
        assert!(
            !want.iter().any(|n| n.starts_with(absent)),
            "{path}?{sel}: {absent} selected: {want:?}"
        );
        let q = format!("{path}?{sel}&{wl}");
        let (mut j, mut p) = both(w, &q);
        let evs = assert_events_same(&q, &mut j, &mut p, want.len() + 1);
        for (i, (ty, d)) in evs[..want.len()].iter().enumerate() {
            assert_eq!(ty, "ADDED", "{q}");
            assert_eq!(
                (d.api_version.as_str(), d.kind.as_str()),
                (api, kind),
                "{q}"
            );
            assert_same(&list["items"][i], &d.object, &q);
        }
        let (ty, b) = &evs[want.len()];
        assert_eq!(ty, "BOOKMARK", "{q}");
        assert_eq!(
            b.object["metadata"]["annotations"],
            json!({"k8s.io/initial-events-end": "true"}),
            "{q}"
        );
        assert!(!p.ended_within(Duration::from_millis(200)), "{q}: closed");
    }
    // Counted by format in /metrics: three protobuf watch starts (and the JSON ones).
    let count = |f: &str| {
        common::autonomy::metric(
            w,
            &format!("grid_wrapper_cache_answers_total{{format=\"{f}\"}}"),
        )
    };
    assert_eq!(count("protobuf"), Some(3.0));
    assert_eq!(
        count("json"),
        Some(6.0),
        "three lists and three watches in JSON"
    );
}

#[test]
fn published_versions_are_held_in_protobuf_form_alone_before_any_protobuf_read() {
    let (_sim, w) = demo(&[]);
    let metric = |sample: &str| common::autonomy::metric(&w, sample).unwrap_or(0.0);
    let forms = |form: &str| metric(&format!("grid_wrapper_served_forms{{form=\"{form}\"}}"));
    // The compactor takes every published version off the writer: no protobuf client needed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while forms("protobuf") == 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(forms("protobuf") > 0.0, "nothing compacted");
    assert_eq!(
        metric("grid_wrapper_cache_answers_total{format=\"protobuf\"}"),
        0.0,
        "a protobuf read happened"
    );
    // JSON and protobuf clients get the same objects from the one form held.
    for path in [V1, SVC] {
        let list = json_get(&w, path);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        assert!(!items.is_empty(), "{path}");
        let d = kp_get_ok(&w, path);
        let pb = d.object["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), pb.len(), "{path}");
        for (j, p) in items.iter().zip(&pb) {
            assert_same(&without_type_meta(j), p, path);
        }
    }
    // A JSON watch started afterwards: the same objects.
    let list = json_get(&w, V1);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let q = format!("{V1}?resourceVersion=0&timeoutSeconds=30&watch=true");
    let mut watch = Watch::open(w.addr, &q, JSON_ACCEPT);
    assert_eq!(watch.code, 200, "{q}");
    for item in &items {
        let ev = watch.expect();
        assert_eq!(ev["type"], "ADDED", "{q}");
        assert_eq!(&ev["object"], item, "{q}");
    }
}
