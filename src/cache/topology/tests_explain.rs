//! Explanations agree with serving: for the numbered content cases (see `fixtures.rs`) and the
//! edge-health ones (docs/SEMANTICS.md §10), the endpoints `explain_*` marks kept are exactly, in
//! order, the ones `serve_*` keeps; plus the reason of each pruned endpoint.

use serde_json::{json, Value};

use super::fixtures::*;
use super::*;
use crate::k8s::convert::slice_v1_to_v1beta1;

/// `(list, ip)` of every address of an Endpoints object, in object order.
fn endpoint_pairs(obj: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for subset in obj["subsets"].as_array().into_iter().flatten() {
        for list in ["addresses", "notReadyAddresses"] {
            for a in subset[list].as_array().into_iter().flatten() {
                out.push((list.to_string(), a["ip"].as_str().unwrap_or("").to_string()));
            }
        }
    }
    out
}

fn kept_pairs(v: &ObjectVerdicts<'_>) -> Vec<(String, String)> {
    v.endpoints
        .iter()
        .filter(|e| e.verdict.kept)
        .map(|e| (e.list.to_string(), e.address.clone()))
        .collect()
}

/// Explains and serves `obj` in fixture `f`; asserts they agree; returns the verdicts.
fn agree_endpoints<'f>(
    f: &'f Fixture,
    obj: &Value,
    annotation: &'f Option<KeysAnnotation>,
) -> ObjectVerdicts<'f> {
    let class = Class::of(annotation.as_ref(), &endpoint_states(obj), &f.locality());
    let loc = f.locality();
    let served = serve_endpoints(obj.clone(), class, &loc);
    let verdicts = explain_endpoints(obj, class, &loc);
    assert_eq!(verdicts.endpoints.len(), endpoint_pairs(obj).len(), "{obj}");
    if verdicts.rewritten {
        assert!(verdicts.endpoints.iter().all(|e| !e.verdict.kept));
        assert_ne!(&served, obj, "a rewritten object changes");
    } else {
        assert_eq!(kept_pairs(&verdicts), endpoint_pairs(&served), "{obj}");
    }
    verdicts
}

/// Same for a v1 slice, in both served versions.
fn agree_slice(f: &Fixture, slice: &Value) {
    let annotation = slice_service(slice).and_then(|k| f.annotation(&k));
    let class = Class::of(annotation.as_ref(), &endpoint_states(slice), &f.locality());
    let loc = f.locality();
    let beta = slice_v1_to_v1beta1(slice);
    for (served, verdicts) in [
        (
            serve_slice_v1(slice.clone(), class, &loc),
            explain_slice_v1(slice, class, &loc),
        ),
        (
            serve_slice_v1beta1(beta.clone(), class, &loc),
            explain_slice_v1beta1(&beta, class, &loc),
        ),
    ] {
        let kept: Vec<String> = kept_pairs(&verdicts)
            .into_iter()
            .map(|(_, ip)| ip)
            .collect();
        if verdicts.rewritten {
            assert!(kept.is_empty());
            assert_ne!(&served, slice);
        } else {
            assert_eq!(kept, slice_ips(&served), "{slice}");
        }
    }
}

fn agree(f: &Fixture) {
    for obj in &f.endpoints {
        let annotation = ObjectKey::of(obj).and_then(|k| f.annotation(&k));
        agree_endpoints(f, obj, &annotation);
        // The same ready addresses as a slice of the same Service.
        let eps = (obj["subsets"][0]["addresses"]
            .as_array()
            .into_iter()
            .flatten())
        .map(|a| {
            slice_endpoint_v1(
                a["ip"].as_str().unwrap_or(""),
                a["nodeName"].as_str(),
                Some("a"),
            )
        })
        .collect();
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
        agree_slice(f, &slice_v1(ns, &format!("{name}-x1"), Some(name), eps));
    }
}

/// Every numbered content case (and the §10 ones) as a fixture.
fn cases() -> Vec<(&'static str, Fixture)> {
    let mut out = vec![("1 T", fixture_t()), ("8 F", fixture_f())];
    let mut t = fixture_t();
    t.nodes
        .insert("hostname".into(), labels(&[("region", "2")]));
    out.push(("2 T relabel host", t.clone()));
    t.nodes.insert("node-2".into(), labels(&[("region", "3")]));
    out.push(("3 T relabel node-2", t));
    let mut t = fixture_t();
    t.set_keys("default", "no-region", Some(r#"["region"]"#));
    out.push(("5 T annotated", t));
    let mut f = fixture_f();
    f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([
        address("10.0.1.2", Some("n1")),
        address("10.0.1.3", Some("n2"))
    ]);
    out.push(("9 not ready", f));
    let mut f = fixture_f();
    f.set_keys("default", "s", Some(r#"["zone","rack"]"#));
    f.nodes
        .insert("h".into(), labels(&[("zone", "a"), ("rack", "r1")]));
    f.nodes
        .insert("n2".into(), labels(&[("zone", "b"), ("rack", "r1")]));
    f.nodes
        .insert("n4".into(), labels(&[("zone", "c"), ("rack", "r2")]));
    let mut addrs = f_addresses();
    addrs.push(address("10.0.0.7", Some("n4")));
    f.endpoints = vec![endpoints("default", "s", addrs)];
    out.push(("10 OR", f));
    let mut f = fixture_f();
    f.nodes.insert("h".into(), labels(&[]));
    out.push(("11 h{}", f));
    let mut f = fixture_f();
    f.nodes.remove("h");
    out.push(("12 no h", f));
    for keys in [
        None,
        Some("[]"),
        Some("null"),
        Some("zone"),
        Some("[1]"),
        Some(r#"["*"]"#),
    ] {
        let mut f = fixture_f();
        f.set_keys("default", "s", keys);
        out.push(("13/14/15 annotation", f));
    }
    let mut f = fixture_f();
    f.nodes.insert("h".into(), labels(&[("zone", "")]));
    f.nodes.insert("n1".into(), labels(&[("zone", "")]));
    out.push(("16 empty values", f));
    let mut f = fixture_f();
    f.nodes.remove("n1");
    out.push(("20 n1 deleted", f));
    let mut f = fixture_f();
    f.services.clear();
    out.push(("18 dangling", f));
    for abnormal in [&["n1", "ghost"][..], &["n2"], &["h", "n3"]] {
        let mut f = fixture_f();
        f.abnormal = abnormal.iter().map(|s| s.to_string()).collect();
        out.push(("§10 topology", f.clone()));
        f.set_keys("default", "s", None);
        out.push(("§10 normal", f.clone()));
        f.services.clear();
        out.push(("§10 dangling", f));
    }
    out
}

#[test]
fn explanations_agree_with_serving_on_every_case() {
    for (name, f) in cases() {
        eprintln!("case {name}");
        agree(&f);
    }
}

#[test]
fn reasons_of_fixture_f() {
    let f = fixture_f();
    let annotation = f.annotation(&ObjectKey::new("default", "s"));
    let v = agree_endpoints(&f, f.endpoints_of("default", "s"), &annotation);
    let reasons: Vec<(&str, &str)> = v
        .endpoints
        .iter()
        .map(|e| (e.address.as_str(), e.verdict.reason.code()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("10.0.0.1", "KeyMatches"),
            ("10.0.0.2", "KeyMatches"),
            ("10.0.0.3", "NoKeyMatches"),
            ("10.0.0.4", "NoKeyMatches"),
            ("10.0.0.5", "NoNodeName"),
            ("10.0.0.6", "UnknownNode"),
        ]
    );
    assert_eq!(v.endpoints[0].verdict.reason, Reason::KeyMatches("zone"));
    assert_eq!(v.endpoints[0].node.as_deref(), Some("h"));
    assert_eq!(v.endpoints[4].node, None);
}

#[test]
fn reasons_when_the_local_node_is_unknown_or_lacks_the_keys() {
    let key = ObjectKey::new("default", "s");
    for (host_labels, want) in [
        (None, Reason::LocalNodeUnknown),
        (Some(labels(&[])), Reason::LocalNodeLacksKeys),
        (Some(labels(&[("rack", "r1")])), Reason::LocalNodeLacksKeys),
    ] {
        let mut f = fixture_f();
        match host_labels {
            Some(l) => f.nodes.insert("h".into(), l),
            None => f.nodes.remove("h"),
        };
        let annotation = f.annotation(&key);
        let v = agree_endpoints(&f, f.endpoints_of("default", "s"), &annotation);
        assert!(v.endpoints.iter().all(|e| e.verdict
            == Verdict {
                kept: false,
                reason: want
            }));
    }
}

#[test]
fn edge_health_reasons_topology_first() {
    let mut f = fixture_f();
    f.abnormal = ["n1", "n2", "ghost"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let annotation = f.annotation(&ObjectKey::new("default", "s"));
    let v = agree_endpoints(&f, f.endpoints_of("default", "s"), &annotation);
    let codes: Vec<&str> = v
        .endpoints
        .iter()
        .map(|e| e.verdict.reason.code())
        .collect();
    // n1 matches the zone but is abnormal; n2 and ghost are pruned by topology first.
    assert_eq!(
        codes,
        [
            "KeyMatches",
            "EdgeHealthAbnormal",
            "NoKeyMatches",
            "NoKeyMatches",
            "NoNodeName",
            "UnknownNode"
        ]
    );
    // A normal Service: only edge-health; the node-less address stays.
    f.set_keys("default", "s", None);
    let annotation = f.annotation(&ObjectKey::new("default", "s"));
    let v = agree_endpoints(&f, f.endpoints_of("default", "s"), &annotation);
    let codes: Vec<&str> = v
        .endpoints
        .iter()
        .map(|e| e.verdict.reason.code())
        .collect();
    assert_eq!(
        codes,
        [
            "NoTopology",
            "EdgeHealthAbnormal",
            "EdgeHealthAbnormal",
            "NoTopology",
            "NoTopology",
            "EdgeHealthAbnormal"
        ]
    );
}

#[test]
fn kubernetes_rewrite_and_its_exemptions_agree() {
    let mut f = fixture_f();
    f.abnormal = ["n1"].iter().map(|s| s.to_string()).collect();
    let mut eps = endpoints(
        "default",
        "kubernetes",
        vec![
            address("192.168.0.10", None),
            address("10.0.0.2", Some("n1")),
        ],
    );
    let annotations =
        json!({"superedge.io/local-endpoint": "169.254.20.11", "superedge.io/local-port": "51003"});
    eps["metadata"]["annotations"] = annotations.clone();
    let v = agree_endpoints(&f, &eps, &None);
    assert!(v.rewritten);
    assert!(v
        .endpoints
        .iter()
        .all(|e| e.verdict.reason == Reason::Rewritten));
    // Not rewritten (port 0): served as given, edge-health never applies to default/kubernetes.
    eps["metadata"]["annotations"]["superedge.io/local-port"] = json!("0");
    let v = agree_endpoints(&f, &eps, &None);
    assert!(!v.rewritten && v.endpoints.iter().all(|e| e.verdict.kept));
    // The slice named kubernetes, and a family mismatch.
    let mut slice = slice_v1(
        "default",
        "kubernetes",
        Some("kubernetes"),
        vec![slice_endpoint_v1("192.168.0.10", None, None)],
    );
    slice["metadata"]["annotations"] = annotations;
    agree_slice(&f, &slice);
    slice["metadata"]["annotations"]["superedge.io/local-endpoint"] = json!("fd00::1");
    agree_slice(&f, &slice);
}

#[test]
fn slice_cases_agree() {
    let f = fixture_f();
    // Cases 30/32/34/40 and hints, v1 and v1beta1.
    let eps = || {
        vec![
            slice_endpoint_v1("10.0.0.1", Some("h"), Some("a")),
            slice_endpoint_v1("10.0.0.2", Some("n1"), Some("a")),
            slice_endpoint_v1("10.0.0.3", Some("n2"), Some("b")),
            slice_endpoint_v1("10.0.0.5", None, Some("a")),
        ]
    };
    agree_slice(&f, &slice_v1("default", "s-abcde", Some("s"), eps()));
    agree_slice(&f, &slice_v1("default", "custom", Some("s"), eps()));
    agree_slice(&f, &slice_v1("default", "s-nolabel", None, eps()));
    agree_slice(
        &f,
        &slice_v1(
            "default",
            "s-n2",
            Some("s"),
            vec![slice_endpoint_v1("10.0.0.3", Some("n2"), None)],
        ),
    );
    let mut null = slice_v1("default", "s-null", Some("s"), vec![]);
    null["endpoints"] = Value::Null;
    agree_slice(&f, &null);
    // Case 35: v1beta1 node rules (topology hostname, nodeName, none).
    let beta = json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": { "namespace": "default", "name": "s-b", "labels": { "kubernetes.io/service-name": "s" } },
        "addressType": "IPv4",
        "endpoints": [
            { "addresses": ["10.0.0.11"], "topology": { "kubernetes.io/hostname": "n1" } },
            { "addresses": ["10.0.0.12"], "nodeName": "n1" },
            { "addresses": ["10.0.0.13"], "nodeName": "n2" },
            { "addresses": ["10.0.0.14"] },
        ],
    });
    let annotation = f.annotation(&ObjectKey::new("default", "s"));
    let class = Class::of(annotation.as_ref(), &[], &f.locality());
    let v = explain_slice_v1beta1(&beta, class, &f.locality());
    let kept: Vec<String> = kept_pairs(&v).into_iter().map(|(_, ip)| ip).collect();
    assert_eq!(
        kept,
        slice_ips(&serve_slice_v1beta1(beta.clone(), class, &f.locality()))
    );
    assert_eq!(kept, strs(&["10.0.0.11", "10.0.0.12"]));
    assert_eq!(v.endpoints[0].node.as_deref(), Some("n1"));
}

#[test]
fn keeps_and_on_abnormal_node_are_the_verdicts() {
    let mut f = fixture_f();
    f.abnormal = ["n2"].iter().map(|s| s.to_string()).collect();
    let loc = f.locality();
    let zone = TopologyKeys::any(["zone".to_string()].into());
    for node in [
        Some("h"),
        Some("n1"),
        Some("n2"),
        Some("n3"),
        Some("ghost"),
        Some(""),
        None,
    ] {
        assert_eq!(keeps(node, &zone, &loc), explain(node, &zone, &loc).kept);
        assert_eq!(
            on_abnormal_node(node, &loc),
            !explain_edge_health(node, &loc).kept
        );
    }
    assert!(on_abnormal_node(Some("n2"), &loc));
    assert!(!on_abnormal_node(None, &loc));
}
