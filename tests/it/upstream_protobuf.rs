//! Issue 46, point 1: the reflectors ask the upstream for protobuf
//! (`Accept: application/vnd.kubernetes.protobuf, application/json`, lists and watches) and take
//! whichever comes back. Against the real binaries: a simulator serving protobuf (its served
//! log, `GET /sim/served`, says which format each list and watch got), one that does not
//! (`--no-protobuf`, the JSON fallback), and what grid-wrapper serves from each, to a JSON
//! client and to a protobuf client (kube-proxy's Accept): the same objects (resourceVersions
//! aside: grid-wrapper's are its own per process). To a protobuf client, field for field; to a
//! JSON client, the same as a Go client decodes them: an object that came in protobuf is served
//! as the JSON the apiserver writes for it (Go's zero values included, `"nodeInfo":
//! {"architecture":"",…}`), where the simulator's own JSON leaves them out, as no apiserver does.

use crate::common;

use std::time::Duration;

use common::autonomy::metric;
use common::protobuf::{assert_same, decode_body, normalize, without_type_meta, KUBE_PROXY_ACCEPT};
use common::*;
use serde_json::{json, Value};

/// What kube-proxy reads, and the other cached collections (a list of every Node is proxied:
/// SEMANTICS §1.1).
const PATHS: [&str; 5] = [
    "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1",
    "/api/v1/services",
    "/api/v1/endpoints",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/api/v1/nodes/edge-a1",
];

/// The formats of the lists and watches a simulator served, by verb.
fn formats(sim: &Sim) -> Vec<(String, String)> {
    match sim.get_json("/sim/served") {
        Value::Array(v) => v
            .iter()
            .map(|s| {
                let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
                (text("verb"), text("format"))
            })
            .collect(),
        other => panic!("/sim/served: {other}"),
    }
}

/// Every list and watch `sim` served was in `format`, and there were some of each.
fn all_served_in(sim: &Sim, format: &str) {
    let served = formats(sim);
    for verb in ["list", "watch"] {
        let of: Vec<_> = served.iter().filter(|(v, _)| v == verb).collect();
        assert!(!of.is_empty(), "{verb}s were served: {served:?}");
        assert!(
            of.iter().all(|(_, f)| f == format),
            "every {verb} in {format}: {served:?}"
        );
    }
}

fn responses(w: &Wrapper, verb: &str, format: &str) -> f64 {
    let sample =
        format!("grid_wrapper_upstream_responses_total{{verb=\"{verb}\",format=\"{format}\"}}");
    metric(w, &sample).unwrap_or(0.0)
}

/// Removes every `metadata.resourceVersion` (grid-wrapper's RVs differ between processes).
fn strip_rvs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                meta.remove("resourceVersion");
            }
            map.values_mut().for_each(strip_rvs);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rvs),
        _ => {}
    }
}

/// A JSON list with its items stripped of kind/apiVersion (protobuf items have no typeMeta).
fn items_untyped(mut list: Value) -> Value {
    if let Some(items) = list["items"].as_array_mut() {
        for it in items {
            *it = without_type_meta(it);
        }
    }
    list
}

/// A GET's answer with `accept`, decoded (protobuf by the independent decoder), without RVs.
fn get(w: &Wrapper, path: &str, accept: &str) -> Value {
    let (code, _, body) = request(w.addr, "GET", path, &[("Accept", accept)], b"");
    assert_eq!(
        code,
        200,
        "{path} {accept}: {}",
        String::from_utf8_lossy(&body)
    );
    let mut v = if accept == KUBE_PROXY_ACCEPT {
        decode_body(&body).object
    } else {
        serde_json::from_slice(&body).expect("a JSON body")
    };
    strip_rvs(&mut v);
    v
}

/// A JSON watch of `path` from `rv`.
fn watch_from(w: &Wrapper, path: &str, rv: u64) -> Watch {
    let q = format!("{path}?resourceVersion={rv}&timeoutSeconds=30&watch=true");
    let watch = Watch::open(w.addr, &q, &[("Accept", "application/json")]);
    assert_eq!(watch.code, 200, "{q}");
    watch
}

#[test]
fn syncs_and_watches_in_protobuf_and_serves_the_same_bytes_as_from_a_json_upstream() {
    let pb_sim = Sim::start(&[]);
    let json_sim = Sim::start(&["--no-protobuf"]);
    let pb = Wrapper::start(&pb_sim.url, "edge-a1", &[]);
    let js = Wrapper::start(&json_sim.url, "edge-a1", &[]);

    // Every list and watch of the sync was protobuf from the one, JSON from the other.
    all_served_in(&pb_sim, "protobuf");
    let served = formats(&json_sim);
    assert!(
        !served.is_empty() && served.iter().all(|(_, f)| f == "json"),
        "{served:?}"
    );
    // grid-wrapper counts what it got.
    wait_for("the protobuf watches counted", || {
        responses(&pb, "watch", "protobuf") >= 4.0
    });
    assert!(responses(&pb, "list", "protobuf") >= 4.0);
    assert_eq!(responses(&pb, "list", "json"), 0.0);
    assert!(responses(&js, "list", "json") >= 4.0);
    assert_eq!(responses(&js, "list", "protobuf"), 0.0);

    // The same cluster served the same: to kube-proxy field for field, to a JSON client as Go
    // decodes it (see the module docs).
    let same = |what: &str| {
        for path in PATHS {
            let json = "application/json";
            let (pb_proto, js_proto) = (
                get(&pb, path, KUBE_PROXY_ACCEPT),
                get(&js, path, KUBE_PROXY_ACCEPT),
            );
            assert!(
                pb_proto == js_proto,
                "{what}: {path} to kube-proxy differs:\n  from protobuf: {pb_proto}\n  from JSON: {js_proto}"
            );
            let pb_json = items_untyped(get(&pb, path, json));
            let js_json = items_untyped(get(&js, path, json));
            assert_same(
                &js_json,
                &pb_proto,
                &format!("{what}: {path}, JSON from a JSON upstream"),
            );
            assert_same(
                &pb_json,
                &js_proto,
                &format!("{what}: {path}, JSON from a protobuf upstream"),
            );
            assert_eq!(normalize(&pb_json), normalize(&js_json), "{what}: {path}");
        }
    };
    same("after sync");

    // Changes flow through the protobuf watch: a relabel, new endpoints, a deletion; the same
    // changes on the JSON upstream give the same events and the same answers (another Node's
    // relabel is seen in the endpoints it prunes: that Node itself is not served).
    let starts = (
        common::rv(&pb.get_json("/api/v1/endpoints")),
        common::rv(&js.get_json("/api/v1/endpoints")),
    );
    let mut watches: Vec<(Watch, Watch)> = [
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
    ]
    .iter()
    .map(|p| (watch_from(&pb, p, starts.0), watch_from(&js, p, starts.1)))
    .collect();
    // One change at a time, each seen by both wrappers before the next: the relabel and the
    // endpoint come through two reflectors, whose order between them is not fixed.
    for sim in [&pb_sim, &json_sim] {
        sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    }
    for w in [&pb, &js] {
        wait_for("edge-b1's endpoint kept after its relabel", || {
            w.get_json("/api/v1/namespaces/default/endpoints/web")
                .to_string()
                .contains("10.244.3.10")
        });
    }
    for sim in [&pb_sim, &json_sim] {
        let mut ep = sim.get_json("/api/v1/namespaces/default/endpoints/web");
        ep["subsets"][0]["addresses"]
            .as_array_mut()
            .expect("web's addresses")
            .push(json!({"ip": "10.244.2.11", "nodeName": "edge-a2"}));
        sim.apply(&ep);
    }
    // Each wrapper has the sim's last change (the new endpoint) before the answers are compared.
    for w in [&pb, &js] {
        wait_for("the new endpoint", || {
            w.get_json("/api/v1/namespaces/default/endpoints/web")
                .to_string()
                .contains("10.244.2.11")
        });
    }
    for (i, (a, b)) in watches.iter_mut().enumerate() {
        let mut from_pb = a.drain(Duration::from_millis(500));
        let mut from_json = b.drain(Duration::from_millis(500));
        from_pb.iter_mut().chain(&mut from_json).for_each(strip_rvs);
        let norm = |evs: &[Value]| evs.iter().map(normalize).collect::<Vec<_>>();
        assert_eq!(
            norm(&from_pb),
            norm(&from_json),
            "watch {i}: the same events"
        );
        assert!(
            from_pb.iter().any(|e| e["type"] != "BOOKMARK"),
            "watch {i}: the changes came: {from_pb:?}"
        );
    }
    same("after the changes");
    assert!(
        responses(&pb, "list", "json") == 0.0,
        "no JSON list was needed"
    );
}

#[test]
fn with_upstream_protobuf_off_the_reflectors_ask_a_protobuf_upstream_for_json() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, "edge-a1", &["--upstream-protobuf=false"]);
    wait_for("the watches counted", || {
        responses(&w, "watch", "json") >= 4.0
    });
    all_served_in(&sim, "json");
    assert!(responses(&w, "list", "json") >= 4.0);
    assert_eq!(responses(&w, "list", "protobuf"), 0.0);
    assert_eq!(responses(&w, "watch", "protobuf"), 0.0);
    // kube-proxy still reads protobuf from grid-wrapper: the flag is about the upstream only.
    let (code, _, body) = request(
        w.addr,
        "GET",
        "/api/v1/nodes/edge-a1",
        &[("Accept", KUBE_PROXY_ACCEPT)],
        b"",
    );
    assert_eq!(code, 200);
    assert_eq!(decode_body(&body).kind, "Node");
}
