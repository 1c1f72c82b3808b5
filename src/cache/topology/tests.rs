//! Numbered content cases (see `fixtures.rs`) for core/v1 Endpoints: annotation parsing
//! (docs/SEMANTICS.md §2.1), the match rule (§2.3) and the `default/kubernetes` rewrite (§3).

use serde_json::{json, Value};

use super::fixtures::*;
use super::*;

fn keyset(keys: &[&str]) -> TopologyKeys {
    TopologyKeys::any(keys.iter().map(|k| k.to_string()).collect())
}

/// (annotation value (`None` = absent), expected keys, whether `Invalid`).
type KeysCase = (Option<Value>, Option<&'static [&'static str]>, bool);

#[test]
fn service_keys_table() {
    let table: &[KeysCase] = &[
        // (annotation value (None = absent), keys, invalid)
        (None, None, false),
        (Some(json!("[]")), None, false),
        (Some(json!("null")), None, false),
        (Some(json!(r#"["zone"]"#)), Some(&["zone"]), false),
        (
            Some(json!(r#"[ "zone", "rack" ]"#)),
            Some(&["zone", "rack"]),
            false,
        ),
        (Some(json!(r#"["zone","zone"]"#)), Some(&["zone"]), false),
        // `*` before the end: the literal key it always was (§2.9; `["*"]` is in
        // tests_fallback.rs).
        (Some(json!(r#"["*","zone"]"#)), Some(&["*", "zone"]), false),
        (Some(json!("zone")), None, true),
        (Some(json!(r#""zone""#)), None, true),
        (Some(json!("{}")), None, true),
        (Some(json!("[1]")), None, true),
        (Some(json!(r#"["zone",null]"#)), None, true),
        (Some(json!("")), None, true),
        (Some(json!(5)), None, true),
        (Some(Value::Null), None, false),
    ];
    for (value, want, invalid) in table {
        let mut svc = service("default", "s", None);
        if let Some(v) = value {
            svc["metadata"]["annotations"] = json!({ "topologyKeys": v });
        }
        let got = service_keys(&svc);
        assert_eq!(got.keys(), want.map(keyset).as_ref(), "{value:?}");
        assert_eq!(
            matches!(got, KeysAnnotation::Invalid(_)),
            *invalid,
            "{value:?}"
        );
    }
    // Malformed metadata never panics and means "absent".
    for svc in [
        json!(null),
        json!({"metadata": 3}),
        json!({"metadata": {"annotations": []}}),
    ] {
        assert_eq!(service_keys(&svc), KeysAnnotation::Absent, "{svc}");
    }
}

#[test]
fn keeps_table() {
    let f = fixture_f();
    let loc = f.locality();
    let zone = keyset(&["zone"]);
    let table: &[(Option<&str>, bool)] = &[
        (Some("h"), true),
        (Some("n1"), true),
        (Some("n2"), false),
        (Some("n3"), false),
        (Some("ghost"), false),
        (Some(""), false),
        (None, false),
    ];
    for (node, want) in table {
        assert_eq!(keeps(*node, &zone, &loc), *want, "{node:?}");
    }
    let unknown_host = Locality {
        hostname: "nope",
        ..loc
    };
    assert!(!keeps(Some("h"), &zone, &unknown_host));
}

fn classify_t(f: &Fixture, name: &str) -> Vec<String> {
    ips(&f.served("default", name))
}

#[test]
fn case_01_fixture_t_initial() {
    let f = fixture_t();
    assert_eq!(
        classify_t(&f, "region-1"),
        strs(&["127.0.0.1", "127.0.0.2"])
    );
    assert_eq!(
        classify_t(&f, "no-region"),
        strs(&["127.0.2.1", "127.0.2.2", "127.0.2.3"])
    );
}

#[test]
fn case_05_annotation_added_to_normal_service() {
    let mut f = fixture_t();
    f.set_keys("default", "no-region", Some(r#"["region"]"#));
    assert_eq!(
        classify_t(&f, "no-region"),
        strs(&["127.0.2.1", "127.0.2.2"])
    );
    assert_eq!(
        classify_t(&f, "region-1"),
        strs(&["127.0.0.1", "127.0.0.2"])
    );
}

#[test]
fn case_08_fixture_f_initial() {
    let f = fixture_f();
    let upstream = f.endpoints_of("default", "s");
    let served = f.served("default", "s");
    assert_eq!(ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
    // Only the addresses changed: metadata (RV included), kind, ports, kept entries verbatim.
    let mut expected = upstream.clone();
    expected["subsets"][0]["addresses"] = json!([
        upstream["subsets"][0]["addresses"][0],
        upstream["subsets"][0]["addresses"][1]
    ]);
    assert_eq!(served, expected);
}

#[test]
fn case_09_not_ready_addresses() {
    let mut f = fixture_f();
    f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([
        address("10.0.1.2", Some("n1")),
        address("10.0.1.3", Some("n2"))
    ]);
    let served = f.served("default", "s");
    assert_eq!(not_ready_ips(&served), strs(&["10.0.1.2"]));
    assert_eq!(ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn case_10_or_over_keys() {
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
    f.endpoints[0]["subsets"][0]["addresses"] = json!(addrs);
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
}

/// Asserts every address list is gone while subsets and ports remain.
fn assert_emptied(served: &Value) {
    assert!(ips(served).is_empty(), "{served}");
    let subset = &served["subsets"][0];
    assert!(subset.get("addresses").is_none(), "omitempty: {served}");
    assert_eq!(
        subset["ports"],
        json!([{ "name": "http", "port": 80, "protocol": "TCP" }])
    );
}

#[test]
fn case_11_local_node_lacks_key() {
    for host_labels in [labels(&[]), labels(&[("rack", "r1")])] {
        let mut f = fixture_f();
        f.nodes.insert("h".into(), host_labels);
        assert_emptied(&f.served("default", "s"));
    }
}

#[test]
fn case_12_local_node_unknown_then_added() {
    let mut f = fixture_f();
    f.nodes.remove("h");
    assert_emptied(&f.served("default", "s"));
    f.nodes.insert("h".into(), labels(&[("zone", "a")]));
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2"])
    );
}

#[test]
fn case_13_annotation_removed_or_empty() {
    for keys in [None, Some("[]"), Some("null")] {
        let mut f = fixture_f();
        f.set_keys("default", "s", keys);
        let served = f.served("default", "s");
        assert_eq!(&served, f.endpoints_of("default", "s"), "{keys:?}");
        assert_eq!(ips(&served).len(), 6);
    }
}

#[test]
fn case_14_invalid_annotation_is_unfiltered() {
    for keys in ["zone", r#""zone""#, "{}", "[1]"] {
        let mut f = fixture_f();
        f.set_keys("default", "s", Some(keys));
        let annotation = service_keys(&f.services[0]);
        assert!(
            matches!(annotation, KeysAnnotation::Invalid(ref w) if w.contains("topologyKeys")),
            "{keys}: {annotation:?}"
        );
        assert_eq!(
            &f.served("default", "s"),
            f.endpoints_of("default", "s"),
            "{keys}"
        );
    }
}

/// A `*` that is not last is the literal label key `*`, which no node carries: it matches
/// nothing (§2.9; a last `*` is the fallback, case 61).
#[test]
fn case_15_star_before_the_end_is_a_literal_key() {
    let mut f = fixture_f();
    f.set_keys("default", "s", Some(r#"["*","rack"]"#));
    assert_emptied(&f.served("default", "s"));
}

#[test]
fn case_16_empty_label_values() {
    let mut f = fixture_f();
    f.nodes.insert("h".into(), labels(&[("zone", "")]));
    f.nodes.insert("n1".into(), labels(&[("zone", "")]));
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2"])
    );
}

#[test]
fn case_20_21_node_deleted_and_readded() {
    let mut f = fixture_f();
    f.services.push(service("default", "plain", None));
    f.endpoints
        .push(endpoints("default", "plain", f_addresses()));
    // 20: n1 deleted, later re-added.
    f.nodes.remove("n1");
    assert_eq!(ips(&f.served("default", "s")), strs(&["10.0.0.1"]));
    f.nodes.insert("n1".into(), labels(&[("zone", "a")]));
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2"])
    );
    // 21: the local node deleted: topology services empty, normal ones untouched.
    f.nodes.remove("h");
    assert_emptied(&f.served("default", "s"));
    assert_eq!(
        &f.served("default", "plain"),
        f.endpoints_of("default", "plain")
    );
}

#[test]
fn case_22_last_served_content() {
    // The DELETED event carries what was last served: the filtered object.
    let f = fixture_f();
    let served = f.served("default", "s");
    assert_eq!(ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(
        served["metadata"],
        f.endpoints_of("default", "s")["metadata"]
    );
}

/// `default/kubernetes` Endpoints with the given annotations (pairs; `None` value = absent).
fn kubernetes_endpoints(namespace: &str, ip: Option<&str>, port: Option<&str>) -> Value {
    let mut e = endpoints(namespace, "kubernetes", vec![address("10.0.0.100", None)]);
    e["subsets"][0]["ports"] = json!([{ "name": "https", "port": 6443, "protocol": "TCP" }]);
    let mut ann = serde_json::Map::new();
    if let Some(ip) = ip {
        ann.insert("superedge.io/local-endpoint".into(), json!(ip));
    }
    if let Some(port) = port {
        ann.insert("superedge.io/local-port".into(), json!(port));
    }
    e["metadata"]["annotations"] = Value::Object(ann);
    e
}

fn rewritten_subsets(ip: &str, port: u16) -> Value {
    json!([{ "addresses": [{ "ip": ip }], "ports": [{ "name": "https", "port": port, "protocol": "TCP" }] }])
}

#[test]
fn case_26_kubernetes_rewrite() {
    let f = fixture_f();
    let obj = kubernetes_endpoints("default", Some("169.254.20.11"), Some("51003"));
    // Exempt from topology filtering: the same result whatever the class.
    let keys = keyset(&["zone"]);
    for class in [
        Class::Dangling,
        Class::Normal,
        Class::Topology(ServedBy::AnyKey(&keys)),
    ] {
        let served = serve_endpoints(obj.clone(), class, &f.locality());
        let mut expected = obj.clone();
        expected["subsets"] = rewritten_subsets("169.254.20.11", 51003);
        assert_eq!(served, expected, "{class:?}");
    }
    let v6 = kubernetes_endpoints("default", Some("fd00::1"), Some("443"));
    let served = serve_endpoints(v6.clone(), Class::Normal, &f.locality());
    assert_eq!(served["subsets"], rewritten_subsets("fd00::1", 443));
}

/// (case, namespace, (local-endpoint, local-port), `--wrapper-in-cluster`).
type RewriteCase = (&'static str, &'static str, Annotations, bool);
type Annotations = (Option<&'static str>, Option<&'static str>);

#[test]
fn case_27_kubernetes_rewrite_rejected() {
    let good: Annotations = (Some("169.254.20.11"), Some("51003"));
    let table: &[RewriteCase] = &[
        ("ip abc", "default", (Some("abc"), good.1), true),
        ("port x", "default", (good.0, Some("x")), true),
        ("port 0", "default", (good.0, Some("0")), true),
        ("port 70000", "default", (good.0, Some("70000")), true),
        ("port -1", "default", (good.0, Some("-1")), true),
        ("ip missing", "default", (None, good.1), true),
        ("port missing", "default", (good.0, None), true),
        ("both missing", "default", (None, None), true),
        ("not in cluster", "default", good, false),
        ("kube-system", "kube-system", good, true),
    ];
    let f = fixture_f();
    for (what, ns, (ip, port), in_cluster) in table {
        let obj = kubernetes_endpoints(ns, *ip, *port);
        let loc = Locality {
            wrapper_in_cluster: *in_cluster,
            ..f.locality()
        };
        assert_eq!(
            serve_endpoints(obj.clone(), Class::Normal, &loc),
            obj,
            "{what}"
        );
    }
    // "Served unchanged after normal classification": a topology class still filters.
    let obj = kubernetes_endpoints("default", Some("abc"), Some("51003"));
    let keys = keyset(&["zone"]);
    let served = serve_endpoints(
        obj.clone(),
        Class::Topology(ServedBy::AnyKey(&keys)),
        &f.locality(),
    );
    assert!(ips(&served).is_empty());
}

#[test]
fn case_28_annotations_added_later() {
    let f = fixture_f();
    let before = kubernetes_endpoints("default", None, None);
    assert_eq!(
        serve_endpoints(before.clone(), Class::Normal, &f.locality()),
        before
    );
    let after = kubernetes_endpoints("default", Some("169.254.20.11"), Some("51003"));
    let served = serve_endpoints(after.clone(), Class::Normal, &f.locality());
    assert_eq!(served["subsets"], rewritten_subsets("169.254.20.11", 51003));
    assert_eq!(served["metadata"], after["metadata"]);
}

#[test]
fn endpoint_nodes_of_endpoints() {
    let mut f = fixture_f();
    f.endpoints[0]["subsets"]
        .as_array_mut()
        .expect("fixture subsets")
        .push(json!({ "notReadyAddresses": [address("10.0.1.9", Some("n9"))] }));
    let got: Vec<String> = endpoint_nodes(&f.endpoints[0]).into_iter().collect();
    assert_eq!(got, strs(&["ghost", "h", "n1", "n2", "n3", "n9"]));
}

#[test]
fn unknown_fields_and_order_preserved() {
    let f = fixture_f();
    let mut obj = f.endpoints_of("default", "s").clone();
    obj["x-top"] = json!({ "a": [1, 2] });
    obj["subsets"][0]["x-subset"] = json!(true);
    obj["subsets"][0]["addresses"][1]["x-addr"] = json!("kept");
    obj["subsets"]
        .as_array_mut()
        .expect("fixture subsets")
        .push(json!({ "addresses": [address("10.0.9.9", Some("n2"))], "ports": [] }));
    let served = f.serve_endpoints(&obj);
    assert_eq!(served["x-top"], obj["x-top"]);
    assert_eq!(served["subsets"][0]["x-subset"], json!(true));
    assert_eq!(
        served["subsets"][0]["addresses"][1]["x-addr"],
        json!("kept")
    );
    // The emptied second subset stays, with its ports.
    assert_eq!(served["subsets"][1], json!({ "ports": [] }));
}

#[test]
fn malformed_endpoints_never_panic() {
    let f = fixture_f();
    let keys = keyset(&["zone"]);
    let mut weird_addrs = f.endpoints_of("default", "s").clone();
    weird_addrs["subsets"][0]["addresses"] = json!([
        address("10.0.0.1", Some("h")),
        7,
        null,
        "10.0.0.2",
        { "ip": "10.0.0.8", "nodeName": 5 },
        { "ip": "10.0.0.9", "nodeName": ["h"] },
    ]);
    weird_addrs["subsets"][0]["notReadyAddresses"] = json!({ "not": "a list" });
    let served = serve_endpoints(
        weird_addrs.clone(),
        Class::Topology(ServedBy::AnyKey(&keys)),
        &f.locality(),
    );
    // Malformed entries have no node: dropped; malformed lists are left alone.
    assert_eq!(
        served["subsets"][0]["addresses"],
        json!([address("10.0.0.1", Some("h"))])
    );
    assert_eq!(
        served["subsets"][0]["notReadyAddresses"],
        json!({ "not": "a list" })
    );

    let inputs = [
        json!(null),
        json!(1),
        json!("x"),
        json!([]),
        json!({}),
        json!({ "subsets": 5 }),
        json!({ "subsets": [1, null, "x", []] }),
        json!({ "subsets": [{ "addresses": null, "notReadyAddresses": 3 }] }),
        json!({ "metadata": "x", "subsets": [] }),
        json!({ "metadata": { "namespace": "default", "name": "kubernetes", "annotations": 1 } }),
        json!({ "metadata": { "namespace": 1, "name": ["kubernetes"] } }),
        json!({ "metadata": { "namespace": "default", "name": "kubernetes",
            "annotations": { "superedge.io/local-endpoint": 1, "superedge.io/local-port": 51003 } } }),
    ];
    for input in inputs {
        for class in [
            Class::Dangling,
            Class::Normal,
            Class::Topology(ServedBy::AnyKey(&keys)),
        ] {
            let served = serve_endpoints(input.clone(), class, &f.locality());
            assert_eq!(served, input, "{class:?} {input}");
        }
        let _ = endpoint_nodes(&input);
        let _ = slice_service(&input);
    }
}

#[test]
fn fixture_node_objects_match_labels() {
    for f in [fixture_f(), fixture_t()] {
        let objects = f.node_objects();
        assert_eq!(objects.len(), f.nodes.len());
        for obj in objects {
            let key = ObjectKey::of(&obj).expect("node has a name");
            let want = f.nodes.get(&*key.name).expect("node in map");
            let want: BTreeMap<&str, &str> = want.iter().collect();
            assert_eq!(obj["metadata"]["labels"], json!(want), "{key}");
        }
        assert!(f.nodes.contains_key(&f.hostname));
    }
}
