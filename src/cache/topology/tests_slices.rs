//! Numbered content cases (see `fixtures.rs`) for EndpointSlices: v1, v1beta1 and conversion
//! (docs/SEMANTICS.md §2.5, §5), the slice's Service (§2.6), hints (§2.4) and the rewrite (§3).

use serde_json::{json, Value};

use super::fixtures::*;
use super::*;
use crate::k8s::convert::{slice_v1_to_v1beta1, slice_v1beta1_to_v1};

/// Fixture F's endpoints as a v1 slice: on `h`, `n1`, `n2` and no node, each with zone hints.
fn f_slice(name: &str, service: Option<&str>) -> Value {
    slice_v1(
        "default",
        name,
        service,
        vec![
            slice_endpoint_v1("10.0.0.1", Some("h"), Some("a")),
            slice_endpoint_v1("10.0.0.2", Some("n1"), Some("a")),
            slice_endpoint_v1("10.0.0.3", Some("n2"), Some("b")),
            slice_endpoint_v1("10.0.0.5", None, Some("a")),
        ],
    )
}

#[test]
fn slice_service_table() {
    let table: &[(Value, Option<ObjectKey>)] = &[
        (
            f_slice("s-abcde", Some("s")),
            Some(ObjectKey::new("default", "s")),
        ),
        (
            f_slice("custom", Some("s")),
            Some(ObjectKey::new("default", "s")),
        ),
        (f_slice("s-abcde", None), None),
        (f_slice("s-abcde", Some("")), None),
        (
            json!({ "metadata": { "labels": { "kubernetes.io/service-name": 3 } } }),
            None,
        ),
        (json!({ "metadata": { "labels": [] } }), None),
        (json!(null), None),
    ];
    for (slice, want) in table {
        assert_eq!(&slice_service(slice), want, "{slice}");
    }
}

#[test]
fn case_29_kubernetes_slice_rewrite() {
    let f = fixture_f();
    let mut obj = slice_v1("default", "kubernetes", Some("kubernetes"), vec![]);
    obj["endpoints"] = json!([{ "addresses": ["10.0.0.100"], "conditions": { "ready": true } }]);
    obj["ports"] = json!([{ "name": "https", "port": 6443, "protocol": "TCP" }]);
    obj["metadata"]["annotations"] = json!({
        "superedge.io/local-endpoint": "169.254.20.11",
        "superedge.io/local-port": "51003",
    });
    let keys = TopologyKeys::any(["zone".to_string()].into());
    let mut expected = obj.clone();
    expected["endpoints"] = json!([{ "addresses": ["169.254.20.11"] }]);
    expected["ports"] = json!([{ "name": "https", "port": 51003, "protocol": "TCP" }]);
    for class in [Class::Normal, Class::Topology(ServedBy::AnyKey(&keys))] {
        assert_eq!(
            serve_slice_v1(obj.clone(), class, &f.locality()),
            expected,
            "{class:?}"
        );
        let beta = slice_v1_to_v1beta1(&obj);
        let mut expected_beta = beta.clone();
        expected_beta["endpoints"] = expected["endpoints"].clone();
        expected_beta["ports"] = expected["ports"].clone();
        assert_eq!(
            serve_slice_v1beta1(beta.clone(), class, &f.locality()),
            expected_beta
        );
    }
    // Family mismatch: served unchanged (after normal classification).
    let mut v6 = obj.clone();
    v6["metadata"]["annotations"]["superedge.io/local-endpoint"] = json!("fd00::1");
    assert_eq!(serve_slice_v1(v6.clone(), Class::Normal, &f.locality()), v6);
    // ... but an IPv6 slice takes it.
    v6["addressType"] = json!("IPv6");
    let served = serve_slice_v1(v6.clone(), Class::Normal, &f.locality());
    assert_eq!(served["endpoints"], json!([{ "addresses": ["fd00::1"] }]));
    // Only the slice named exactly `kubernetes`, in `default`.
    for (ns, name) in [
        ("default", "kubernetes-abcde"),
        ("kube-system", "kubernetes"),
    ] {
        let mut other = obj.clone();
        other["metadata"]["namespace"] = json!(ns);
        other["metadata"]["name"] = json!(name);
        assert_eq!(
            serve_slice_v1(other.clone(), Class::Normal, &f.locality()),
            other
        );
    }
    // FQDN or missing addressType never matches.
    for at in [json!("FQDN"), Value::Null] {
        let mut other = obj.clone();
        other["addressType"] = at;
        assert_eq!(
            serve_slice_v1(other.clone(), Class::Normal, &f.locality()),
            other
        );
    }
}

/// The kept endpoints are served as they came, `hints` included (§2.10: kube-proxy only ever
/// narrows to some of them, or falls back to all of them).
#[test]
fn case_30_topology_slice_keeps_the_hints_of_kept_endpoints() {
    let f = fixture_f();
    let obj = f_slice("s-abcde", Some("s"));
    let served = f.serve_slice_v1(&obj);
    let mut expected = obj.clone();
    expected["endpoints"] = json!([obj["endpoints"][0], obj["endpoints"][1]]);
    assert_eq!(served, expected);
    assert_eq!(served["endpoints"][0]["zone"], json!("a"));
    assert_eq!(served["endpoints"][0]["conditions"]["ready"], json!(true));
}

#[test]
fn case_31_normal_service_keeps_hints() {
    let mut f = fixture_f();
    f.services.push(service("default", "t", None));
    let obj = f_slice("t-abcde", Some("t"));
    assert_eq!(f.serve_slice_v1(&obj), obj);
    let beta = slice_v1_to_v1beta1(&obj);
    assert_eq!(f.serve_slice_v1beta1(&beta), beta);
    assert!(beta["endpoints"][0].get("hints").is_some());
}

#[test]
fn case_32_custom_slice_name() {
    let f = fixture_f();
    let served = f.serve_slice_v1(&f_slice("custom", Some("s")));
    assert_eq!(slice_ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn case_33_long_service_name() {
    let long = "a".repeat(30) + "-" + &"b".repeat(29);
    assert_eq!(long.len(), 60);
    let mut f = fixture_f();
    f.services
        .push(service("default", &long, Some(r#"["zone"]"#)));
    let slice_name = format!("{}x7k2p", &long[..58]);
    let served = f.serve_slice_v1(&f_slice(&slice_name, Some(&long)));
    assert_eq!(slice_ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn case_34_unlabelled_slice_is_dangling() {
    let f = fixture_f();
    let obj = f_slice("s-abcde", None);
    assert_eq!(f.serve_slice_v1(&obj), obj);
}

#[test]
fn case_35_v1beta1_node_rules() {
    let f = fixture_f();
    let beta = json!({
        "apiVersion": "discovery.k8s.io/v1beta1",
        "kind": "EndpointSlice",
        "metadata": { "namespace": "default", "name": "s-abcde", "labels": { "kubernetes.io/service-name": "s" } },
        "addressType": "IPv4",
        "endpoints": [
            { "addresses": ["10.0.0.11"], "topology": { "kubernetes.io/hostname": "n1" } },
            { "addresses": ["10.0.0.12"], "nodeName": "n1" },
            { "addresses": ["10.0.0.13"], "nodeName": "n2" },
            { "addresses": ["10.0.0.14"] },
        ],
        "ports": [],
    });
    let served = f.serve_slice_v1beta1(&beta);
    assert_eq!(slice_ips(&served), strs(&["10.0.0.11", "10.0.0.12"]));
    assert_eq!(served["endpoints"][0], beta["endpoints"][0]);
    let v1 = slice_v1beta1_to_v1(&beta);
    assert_eq!(
        slice_ips(&f.serve_slice_v1(&v1)),
        strs(&["10.0.0.11", "10.0.0.12"])
    );
    // An empty nodeName falls back to the topology hostname, in both views.
    let mut empty = beta.clone();
    empty["endpoints"][2]["nodeName"] = json!("");
    empty["endpoints"][2]["topology"] = json!({ "kubernetes.io/hostname": "h" });
    let want = strs(&["10.0.0.11", "10.0.0.12", "10.0.0.13"]);
    assert_eq!(slice_ips(&f.serve_slice_v1beta1(&empty)), want);
    assert_eq!(
        slice_ips(&f.serve_slice_v1(&slice_v1beta1_to_v1(&empty))),
        want
    );
}

#[test]
fn case_36_v1_upstream_served_as_v1beta1() {
    let f = fixture_f();
    let v1 = f_slice("s-abcde", Some("s"));
    let beta = slice_v1_to_v1beta1(&v1);
    assert_eq!(beta["apiVersion"], json!("discovery.k8s.io/v1beta1"));
    assert_eq!(
        beta["endpoints"][0]["topology"],
        json!({ "kubernetes.io/hostname": "h", "topology.kubernetes.io/zone": "a" })
    );
    let served = f.serve_slice_v1beta1(&beta);
    assert_eq!(slice_ips(&served), slice_ips(&f.serve_slice_v1(&v1)));
    assert_eq!(slice_ips(&served), strs(&["10.0.0.1", "10.0.0.2"]));
    assert!(served["endpoints"][0].get("hints").is_some());
    assert_eq!(
        served["endpoints"][1]["topology"]["kubernetes.io/hostname"],
        json!("n1")
    );
}

#[test]
fn case_40_all_dropped_slice_has_empty_list() {
    let f = fixture_f();
    let obj = slice_v1(
        "default",
        "s-abcde",
        Some("s"),
        vec![
            slice_endpoint_v1("10.0.0.3", Some("n2"), None),
            slice_endpoint_v1("10.0.0.7", Some("n2"), None),
        ],
    );
    let served = f.serve_slice_v1(&obj);
    assert_eq!(served["endpoints"], json!([]));
    assert_eq!(
        serde_json::to_string(&served["endpoints"]).ok().as_deref(),
        Some("[]")
    );
    // Missing or null lists are served as `[]` too, in both versions.
    for eps in [None, Some(Value::Null)] {
        let mut obj = obj.clone();
        match eps {
            Some(v) => obj["endpoints"] = v,
            None => {
                obj.as_object_mut().map(|m| m.remove("endpoints"));
            }
        }
        assert_eq!(f.serve_slice_v1(&obj)["endpoints"], json!([]));
        assert_eq!(f.serve_slice_v1beta1(&obj)["endpoints"], json!([]));
    }
}

#[test]
fn endpoint_nodes_of_slices() {
    let v1 = f_slice("s-abcde", Some("s"));
    let want = strs(&["h", "n1", "n2"]);
    assert_eq!(endpoint_nodes(&v1).into_iter().collect::<Vec<_>>(), want);
    let beta = slice_v1_to_v1beta1(&v1);
    assert_eq!(endpoint_nodes(&beta).into_iter().collect::<Vec<_>>(), want);
    let fallbacks = json!({ "endpoints": [
        { "topology": { "kubernetes.io/hostname": "t" } },
        { "deprecatedTopology": { "kubernetes.io/hostname": "d" } },
        { "nodeName": "", "topology": { "kubernetes.io/hostname": "e" } },
        { "nodeName": 3 },
        "junk",
    ] });
    assert_eq!(
        endpoint_nodes(&fallbacks).into_iter().collect::<Vec<_>>(),
        strs(&["d", "e", "t"])
    );
}

#[test]
fn malformed_slices_never_panic() {
    let f = fixture_f();
    let keys = TopologyKeys::any(["zone".to_string()].into());
    let mut obj = f_slice("s-abcde", Some("s"));
    obj["endpoints"] = json!([
        slice_endpoint_v1("10.0.0.1", Some("h"), None),
        1,
        null,
        [],
        { "nodeName": 5 },
        { "deprecatedTopology": "h", "topology": 7 },
        { "deprecatedTopology": { "kubernetes.io/hostname": 1 } },
    ]);
    for served in [
        serve_slice_v1(
            obj.clone(),
            Class::Topology(ServedBy::AnyKey(&keys)),
            &f.locality(),
        ),
        serve_slice_v1beta1(
            obj.clone(),
            Class::Topology(ServedBy::AnyKey(&keys)),
            &f.locality(),
        ),
    ] {
        assert_eq!(
            served["endpoints"],
            json!([slice_endpoint_v1("10.0.0.1", Some("h"), None)])
        );
    }
    let inputs = [
        json!(null),
        json!(true),
        json!("x"),
        json!([1]),
        json!({ "endpoints": "x" }),
        json!({ "endpoints": 3, "metadata": [] }),
        json!({ "metadata": { "namespace": "default", "name": "kubernetes" }, "endpoints": "x" }),
        json!({ "metadata": { "namespace": "default", "name": "kubernetes",
            "annotations": { "superedge.io/local-endpoint": [], "superedge.io/local-port": {} } },
            "addressType": 4, "endpoints": {} }),
    ];
    for input in inputs {
        for class in [
            Class::Dangling,
            Class::Normal,
            Class::Topology(ServedBy::AnyKey(&keys)),
        ] {
            assert_eq!(
                serve_slice_v1(input.clone(), class, &f.locality()),
                input,
                "{input}"
            );
            assert_eq!(
                serve_slice_v1beta1(input.clone(), class, &f.locality()),
                input,
                "{input}"
            );
        }
        let _ = endpoint_nodes(&input);
        let _ = slice_v1_to_v1beta1(&input);
        let _ = slice_v1beta1_to_v1(&input);
    }
}
