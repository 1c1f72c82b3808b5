//! docs/SEMANTICS.md §10 content cases: the edge-health filter on Endpoints and both slice
//! versions, alone (normal and dangling objects) and together with the topology filter.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::fixtures::*;
use crate::cache::edge_health::abnormal_nodes;
use crate::handoff::edge_health;
use crate::k8s::convert::slice_v1_to_v1beta1;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Fixture F with `s` a normal Service and `abnormal` reported abnormal.
fn normal_f(abnormal: &[&str]) -> Fixture {
    let mut f = fixture_f();
    f.set_keys("default", "s", None);
    f.abnormal = set(abnormal);
    f
}

/// F's endpoints (h, n1, n2, no node, ghost) as a v1 slice of `service`, with zone hints.
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
            slice_endpoint_v1("10.0.0.6", Some("ghost"), Some("a")),
        ],
    )
}

#[test]
fn normal_service_loses_endpoints_on_abnormal_nodes() {
    let f = normal_f(&["n2", "ghost"]);
    let upstream = f.endpoints_of("default", "s");
    let served = f.served("default", "s");
    // n2 and ghost go; the node-less 10.0.0.5 and everything on other nodes stay, in order.
    assert_eq!(
        ips(&served),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5"])
    );
    // Only the addresses changed; kept entries verbatim.
    let mut expected = upstream.clone();
    let kept: Vec<Value> = [0, 1, 3, 4]
        .iter()
        .map(|i| upstream["subsets"][0]["addresses"][*i].clone())
        .collect();
    expected["subsets"][0]["addresses"] = json!(kept);
    assert_eq!(served, expected);
    // Dangling (no Service cached): filtered the same way.
    let mut dangling = f.clone();
    dangling.services.clear();
    assert_eq!(dangling.served("default", "s"), served);
}

#[test]
fn not_ready_addresses_and_omitempty() {
    let mut f = normal_f(&["n1"]);
    f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([
        address("10.0.1.2", Some("n1")),
        address("10.0.1.3", Some("n2"))
    ]);
    let served = f.served("default", "s");
    assert_eq!(not_ready_ips(&served), strs(&["10.0.1.3"]));
    assert!(!ips(&served).contains(&"10.0.0.2".to_string()));
    // A list the filter empties is removed (omitempty); subset and ports stay.
    f.endpoints[0]["subsets"][0]["addresses"] = json!([address("10.0.0.2", Some("n1"))]);
    f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([address("10.0.1.2", Some("n1"))]);
    let served = f.served("default", "s");
    assert_eq!(
        served["subsets"],
        json!([{ "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }] }])
    );
    // A list that came empty is left as given when the filter removes nothing from it.
    f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([]);
    let served = f.served("default", "s");
    assert_eq!(served["subsets"][0]["notReadyAddresses"], json!([]));
    assert!(served["subsets"][0].get("addresses").is_none());
}

#[test]
fn nothing_abnormal_serves_the_object_unchanged() {
    for abnormal in [&[][..], &["n9"][..], &["10.0.0.3"][..]] {
        let mut f = normal_f(abnormal);
        f.endpoints[0]["subsets"][0]["notReadyAddresses"] = json!([]);
        assert_eq!(
            f.served("default", "s"),
            *f.endpoints_of("default", "s"),
            "{abnormal:?}"
        );
        let sl = f_slice("s-a", Some("s"));
        assert_eq!(f.serve_slice_v1(&sl), sl, "{abnormal:?}");
    }
}

#[test]
fn node_absent_from_the_map_is_kept() {
    // Resolved from a real map: n1 normal, n2 absent, only ghost abnormal.
    let map = edge_health::parse(br#"{"n1":{"normal":true},"ghost":{"normal":false}}"#).unwrap();
    let mut f = normal_f(&[]);
    f.abnormal = abnormal_nodes(&map, []);
    let served = f.served("default", "s");
    assert_eq!(
        ips(&served),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"])
    );
}

#[test]
fn topology_service_applies_both_filters() {
    let mut f = fixture_f();
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2"])
    );
    f.abnormal = set(&["n1", "n2"]);
    assert_eq!(ips(&f.served("default", "s")), strs(&["10.0.0.1"]));
    // Even the local node's own endpoints go when it is reported abnormal.
    f.abnormal = set(&["h"]);
    assert_eq!(ips(&f.served("default", "s")), strs(&["10.0.0.2"]));
    // Slices: both filters, hints kept (§2.10), in both versions.
    let sl = f_slice("s-a", Some("s"));
    let v1 = f.serve_slice_v1(&sl);
    assert_eq!(slice_ips(&v1), strs(&["10.0.0.2"]));
    assert!(v1["endpoints"][0].get("hints").is_some());
    let beta = f.serve_slice_v1beta1(&slice_v1_to_v1beta1(&sl));
    assert_eq!(slice_ips(&beta), strs(&["10.0.0.2"]));
}

#[test]
fn slices_v1_and_v1beta1_of_normal_and_dangling_services() {
    let f = normal_f(&["n1", "ghost"]);
    for service in [Some("s"), Some("unknown"), None] {
        let sl = f_slice("s-a", service);
        let v1 = f.serve_slice_v1(&sl);
        assert_eq!(
            slice_ips(&v1),
            strs(&["10.0.0.1", "10.0.0.3", "10.0.0.5"]),
            "{service:?}"
        );
        // Not a topology service: kept endpoints keep their hints, nothing else changes.
        let mut expected = sl.clone();
        let kept: Vec<Value> = [0, 2, 3]
            .iter()
            .map(|i| sl["endpoints"][*i].clone())
            .collect();
        expected["endpoints"] = json!(kept);
        assert_eq!(v1, expected, "{service:?}");
        let beta = slice_v1_to_v1beta1(&sl);
        assert_eq!(
            slice_ips(&f.serve_slice_v1beta1(&beta)),
            strs(&["10.0.0.1", "10.0.0.3", "10.0.0.5"]),
            "{service:?}"
        );
    }
}

#[test]
fn slice_endpoint_node_found_as_the_topology_filter_finds_it() {
    let f = normal_f(&["n1"]);
    // v1beta1: `nodeName`, else `topology["kubernetes.io/hostname"]`.
    let beta = json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "s-b", "labels": {"kubernetes.io/service-name": "s"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.2"], "topology": {"kubernetes.io/hostname": "n1"}},
            {"addresses": ["10.0.0.7"], "nodeName": "n1"},
            {"addresses": ["10.0.0.3"], "nodeName": "n2", "topology": {"kubernetes.io/hostname": "n1"}},
            {"addresses": ["10.0.0.5"]}
        ]
    });
    assert_eq!(
        slice_ips(&f.serve_slice_v1beta1(&beta)),
        strs(&["10.0.0.3", "10.0.0.5"])
    );
    // v1: `nodeName`, else `deprecatedTopology["kubernetes.io/hostname"]`.
    let mut v1 = slice_v1("default", "s-c", Some("s"), vec![]);
    v1["endpoints"] = json!([
        {"addresses": ["10.0.0.2"], "deprecatedTopology": {"kubernetes.io/hostname": "n1"}},
        {"addresses": ["10.0.0.3"], "nodeName": "n2"}
    ]);
    assert_eq!(slice_ips(&f.serve_slice_v1(&v1)), strs(&["10.0.0.3"]));
}

#[test]
fn default_kubernetes_is_untouched() {
    let mut f = normal_f(&["n1"]);
    f.services.push(service("default", "kubernetes", None));
    // Not rewritten (no annotations): served exactly as without the feature.
    let eps = endpoints(
        "default",
        "kubernetes",
        vec![address("10.0.0.100", None), address("10.0.0.2", Some("n1"))],
    );
    assert_eq!(f.serve_endpoints(&eps), eps);
    for (name, label) in [("kubernetes", Some("kubernetes")), ("kubernetes", None)] {
        let sl = slice_v1(
            "default",
            name,
            label,
            f_slice("x", None)["endpoints"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        assert_eq!(f.serve_slice_v1(&sl), sl, "{name} {label:?}");
        let beta = slice_v1_to_v1beta1(&sl);
        assert_eq!(f.serve_slice_v1beta1(&beta), beta);
    }
    // A slice of the `kubernetes` Service by label, whatever its name.
    let sl = f_slice("kubernetes-abcde", Some("kubernetes"));
    assert_eq!(f.serve_slice_v1(&sl), sl);
    // Rewritten: exactly the §3 result.
    let mut annotated = eps.clone();
    annotated["metadata"]["annotations"] = json!({
        "superedge.io/local-endpoint": "169.254.20.11",
        "superedge.io/local-port": "51003",
    });
    let served = f.serve_endpoints(&annotated);
    assert_eq!(ips(&served), strs(&["169.254.20.11"]));
    // `kubernetes` in another namespace is an ordinary object.
    let other = endpoints(
        "kube-system",
        "kubernetes",
        vec![
            address("10.0.0.2", Some("n1")),
            address("10.0.0.3", Some("n2")),
        ],
    );
    assert_eq!(ips(&f.serve_endpoints(&other)), strs(&["10.0.0.3"]));
    // A topology `default/kubernetes` keeps today's topology filtering (and no more).
    f.set_keys("default", "kubernetes", Some(r#"["zone"]"#));
    f.abnormal = set(&["h"]);
    let eps = endpoints(
        "default",
        "kubernetes",
        vec![
            address("10.0.0.1", Some("h")),
            address("10.0.0.3", Some("n2")),
        ],
    );
    assert_eq!(ips(&f.serve_endpoints(&eps)), strs(&["10.0.0.1"]));
}

#[test]
fn keyed_by_ip_and_by_name() {
    let ips_of = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (n1, n2, n3) = (
        ips_of(&["192.168.0.11"]),
        ips_of(&["192.168.0.12", "fd00::12"]),
        ips_of(&[]),
    );
    let nodes = || [("n1", &n1[..]), ("n2", &n2[..]), ("n3", &n3[..])];
    let body = |b: &str| edge_health::parse(b.as_bytes()).unwrap();
    let cases = [
        // Current edge-health: keyed by InternalIP.
        (
            r#"{"192.168.0.11":{"normal":false},"192.168.0.12":{"normal":true}}"#,
            vec!["10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"],
        ),
        (
            r#"{"fd00:0:0::12":{"normal":false,"hmac":"x","time":1}}"#,
            vec!["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"],
        ),
        // The original: keyed by node name (also a node without addresses, or not cached).
        (
            r#"{"n3":{"normal":false},"ghost":{"normal":false},"n1":{"normal":true}}"#,
            vec!["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5"],
        ),
        // An unusable entry counts as absent.
        (
            r#"{"n3":{"normal":"false"},"192.168.0.11":{}}"#,
            vec![
                "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6",
            ],
        ),
    ];
    for (text, want) in cases {
        let mut f = normal_f(&[]);
        f.abnormal = abnormal_nodes(&body(text), nodes());
        assert_eq!(ips(&f.served("default", "s")), strs(&want), "{text}");
    }
}
