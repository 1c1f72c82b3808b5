//! `/debug/topology` on the metrics address, against the real binary and the simulator (demo
//! fixture: grid-wrapper as node edge-a1 in zone-a; Service `web` has `topologyKeys: ["zone"]`
//! with one endpoint on each of edge-a1, edge-a2 (zone-a), edge-b1 (zone-b), edge-c1 (zone-c);
//! `api` has no annotation).

use crate::common;

use serde_json::{json, Value};

use common::{assert_status, demo, request, wait_for, Wrapper};

fn debug(w: &Wrapper, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    request(w.health, "GET", path, &[], b"")
}

/// The row of `address` in object `kind` of a Service explanation.
fn row<'a>(e: &'a Value, kind: &str, address: &str) -> &'a Value {
    e["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == kind)
        .flat_map(|o| o["endpoints"].as_array().into_iter().flatten())
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("no {kind} row {address} in {e}"))
}

#[test]
fn overview_explanation_relabel_text_and_errors() {
    let (sim, w) = demo(&[]);

    // Overview: web with its keys, the local values, kept/total over Endpoints and v1 slices.
    let o = w.debug_json("/debug/topology");
    assert_eq!(o["localNode"], "edge-a1");
    assert_eq!(o["localNodeKnown"], true);
    assert_eq!(o["topologyServices"], 1);
    let web = &o["services"][0];
    assert_eq!(
        (web["namespace"].as_str(), web["name"].as_str()),
        (Some("default"), Some("web"))
    );
    assert_eq!(web["keys"], json!(["zone"]));
    assert_eq!(web["source"], "topologyKeys");
    assert_eq!(web["localValues"], json!({"zone": "zone-a"}));
    assert_eq!(
        web["endpoints"],
        json!({"kept": 2, "total": 4, "objects": 1})
    );
    assert_eq!(
        web["endpointSlices"],
        json!({"kept": 2, "total": 4, "objects": 1})
    );

    // Per Service: each pruned endpoint with the right reason, in both objects, with the RV
    // grid-wrapper serves the object with.
    let e = w.debug_json("/debug/topology/default/web");
    assert_eq!(e["class"], "topology");
    for kind in ["Endpoints", "EndpointSlice"] {
        let b1 = row(&e, kind, "10.244.3.10");
        assert_eq!(b1["node"], "edge-b1");
        assert_eq!(b1["kept"], false);
        assert_eq!(b1["reason"], "NoKeyMatches");
        assert_eq!(b1["nodeValues"], json!({"zone": "zone-b"}));
        assert_eq!(row(&e, kind, "10.244.4.10")["reason"], "NoKeyMatches");
        assert_eq!(row(&e, kind, "10.244.2.10")["reason"], "KeyMatches");
        assert_eq!(row(&e, kind, "10.244.1.10")["kept"], true);
    }
    let served =
        w.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12");
    let slice = e["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["name"] == "web-abc12")
        .expect("slice web-abc12");
    assert_eq!(
        slice["resourceVersion"],
        served["metadata"]["resourceVersion"]
    );
    assert_eq!(slice["apiVersion"], "discovery.k8s.io/v1");

    // Relabel edge-b1 into zone-a upstream: its endpoint is explained as kept.
    sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    wait_for("edge-b1 kept", || {
        let e = w.debug_json("/debug/topology/default/web");
        row(&e, "EndpointSlice", "10.244.3.10")["kept"] == true
    });
    let e = w.debug_json("/debug/topology/default/web");
    let b1 = row(&e, "Endpoints", "10.244.3.10");
    assert_eq!(
        (b1["kept"].as_bool(), b1["reason"].as_str()),
        (Some(true), Some("KeyMatches"))
    );
    assert_eq!(b1["nodeValues"], json!({"zone": "zone-a"}));
    // The local node loses its zone: everything pruned, for that reason.
    sim.label_node("edge-a1", json!({"zone": null}));
    wait_for("local node without zone", || {
        w.debug_json("/debug/topology")["services"][0]["endpoints"]["kept"] == 0
    });
    let e = w.debug_json("/debug/topology/default/web");
    assert_eq!(
        row(&e, "Endpoints", "10.244.1.10")["reason"],
        "LocalNodeLacksKeys"
    );

    // Text: an aligned table for a terminal.
    let (code, headers, body) = debug(&w, "/debug/topology/default/web?format=text");
    assert_eq!(code, 200);
    assert!(common::header(&headers, "content-type")
        .unwrap_or("")
        .starts_with("text/plain"));
    let text = String::from_utf8_lossy(&body);
    let lines: Vec<&str> = text.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("OBJECT"))
        .expect("table header");
    for col in ["ADDRESS", "NODE", "NODE VALUES", "VERDICT", "REASON"] {
        let at = lines[head]
            .find(col)
            .unwrap_or_else(|| panic!("{col} in {}", lines[head]));
        for r in &lines[head + 1..] {
            assert!(
                r.len() > at && !r[at..].starts_with(' '),
                "column {col} misaligned: {r}"
            );
        }
    }
    assert_eq!(
        lines.len() - head - 1,
        8,
        "4 endpoints in each of 2 objects:\n{text}"
    );
    let (code, _, body) = debug(&w, "/debug/topology?format=text");
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains("NAMESPACE  SERVICE"));

    // Errors: unknown Service 404, bad query 400, both JSON Status.
    let (code, headers, body) = debug(&w, "/debug/topology/default/nope");
    assert_status(code, &headers, &body, 404);
    let (code, headers, body) = debug(&w, "/debug/topology/default/web?format=yaml");
    assert_status(code, &headers, &body, 400);
    let (code, headers, body) = debug(&w, "/debug/topology/default/web?limit=0");
    assert_status(code, &headers, &body, 400);
    let (code, headers, body) = debug(&w, "/debug/topology/default/%zz");
    assert_status(code, &headers, &body, 400);
}

#[test]
fn service_without_topology_and_openyurt_annotation() {
    let (sim, w) = demo(&[]);
    let e = w.debug_json("/debug/topology/default/api");
    assert_eq!(e["class"], "normal");
    assert_eq!(e["keys"], json!([]));
    assert!(
        e["notes"][0]
            .as_str()
            .unwrap_or("")
            .contains("no topology keys"),
        "{e}"
    );
    assert_eq!(row(&e, "Endpoints", "10.244.3.20")["reason"], "NoTopology");
    assert_eq!(row(&e, "EndpointSlice", "10.244.3.20")["kept"], true);
    let (_, _, body) = debug(&w, "/debug/topology/default/api?format=text");
    assert!(String::from_utf8_lossy(&body).contains("no topology keys: not filtered by topology"));

    // OpenYurt's annotation on api: same node only (kubernetes.io/hostname).
    let mut api = sim.get_json("/api/v1/namespaces/default/services/api");
    api["metadata"]["annotations"] = json!({"openyurt.io/topologyKeys": "kubernetes.io/hostname"});
    sim.apply(&api);
    wait_for("api becomes a topology Service", || {
        w.debug_json("/debug/topology")["topologyServices"] == 2
    });
    let e = w.debug_json("/debug/topology/default/api");
    assert_eq!(
        e["source"],
        "openyurt.io/topologyKeys=kubernetes.io/hostname"
    );
    assert_eq!(row(&e, "Endpoints", "10.244.1.20")["kept"], true);
    assert_eq!(
        row(&e, "Endpoints", "10.244.3.20")["reason"],
        "NoKeyMatches"
    );
    let slices =
        w.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/api-xyz89");
    assert_eq!(common::slice_ips(&slices), ["10.244.1.20"]);
}
