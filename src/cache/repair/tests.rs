//! The repair rule's table (docs/SEMANTICS.md §13), one row per case.

use super::*;
use crate::handoff::runtime_pods::{RuntimePod, RuntimePods};
use crate::handoff::site_pods::SitePods;
use serde_json::json;

const HOST: &str = "node-a";

/// The runtime knows `ns/web-0` ready at 10.0.9.9 and fd00::99 (uid u-web), `ns/db-0` without
/// a ready sandbox.
fn pods() -> RuntimePods {
    let mut view = RuntimePods::default();
    view.ready.insert(
        ObjectKey::new("ns", "web-0"),
        RuntimePod {
            uid: "u-web".into(),
            created_at: 1,
            ips: vec!["10.0.9.9".parse().unwrap(), "fd00::99".parse().unwrap()],
        },
    );
    view.not_ready.insert(ObjectKey::new("ns", "db-0"));
    view
}

fn slice(address_type: &str, endpoints: Value) -> Value {
    json!({"metadata": {"namespace": "ns", "name": "s"}, "addressType": address_type,
           "endpoints": endpoints})
}

fn ep(addr: &str, node: &str, pod: &str) -> Value {
    json!({"addresses": [addr], "conditions": {"ready": true, "serving": true},
           "nodeName": node, "targetRef": {"kind": "Pod", "namespace": "ns", "name": pod, "uid": "u-web"}})
}

/// Runs the rule on a slice of `kind` and returns its endpoints afterwards and the outcome.
fn run(kind: Resource, mut obj: Value, view: &RuntimePods) -> (Value, Outcome) {
    let out = repair(&mut obj, kind, &SitePods::local(HOST, view.clone()));
    (obj, out)
}

#[test]
fn table_slices() {
    let v = pods();
    let moved = json!(["10.0.9.9"]);
    // (case, slice, the first endpoint's addresses afterwards, its ready, outcome)
    let rows: Vec<(&str, Value, Value, bool, Outcome)> = vec![
        (
            "local pod on a new address: served with the runtime's",
            slice("IPv4", json!([ep("10.0.0.5", HOST, "web-0")])),
            moved.clone(),
            true,
            Outcome {
                addresses: 1,
                not_ready: 0,
            },
        ),
        (
            "the upstream names the runtime's address: as is",
            slice("IPv4", json!([ep("10.0.9.9", HOST, "web-0")])),
            moved.clone(),
            true,
            Outcome::default(),
        ),
        (
            "another node's endpoint: as is",
            slice("IPv4", json!([ep("10.0.0.5", "node-b", "web-0")])),
            json!(["10.0.0.5"]),
            true,
            Outcome::default(),
        ),
        (
            "a pod the runtime does not know: as is",
            slice("IPv4", json!([ep("10.0.0.5", HOST, "other")])),
            json!(["10.0.0.5"]),
            true,
            Outcome::default(),
        ),
        (
            "IPv6 slice: the sandbox's IPv6 address",
            slice("IPv6", json!([ep("fd00::5", HOST, "web-0")])),
            json!(["fd00::99"]),
            true,
            Outcome {
                addresses: 1,
                not_ready: 0,
            },
        ),
        (
            "the same IPv6 address written otherwise: as is",
            slice("IPv6", json!([ep("fd00:0::99", HOST, "web-0")])),
            json!(["fd00:0::99"]),
            true,
            Outcome::default(),
        ),
        (
            "FQDN slice: as is",
            slice("FQDN", json!([ep("web.example", HOST, "web-0")])),
            json!(["web.example"]),
            true,
            Outcome::default(),
        ),
        (
            "known without a ready sandbox: served not ready",
            slice("IPv4", json!([ep("10.0.0.7", HOST, "db-0")])),
            json!(["10.0.0.7"]),
            false,
            Outcome {
                addresses: 0,
                not_ready: 1,
            },
        ),
        (
            "targetRef not a Pod: as is",
            slice(
                "IPv4",
                json!([{"addresses": ["10.0.0.5"], "conditions": {"ready": true}, "nodeName": HOST,
                        "targetRef": {"kind": "Node", "name": "web-0"}}]),
            ),
            json!(["10.0.0.5"]),
            true,
            Outcome::default(),
        ),
        (
            "no targetRef: as is",
            slice(
                "IPv4",
                json!([{"addresses": ["10.0.0.5"], "conditions": {"ready": true}, "nodeName": HOST}]),
            ),
            json!(["10.0.0.5"]),
            true,
            Outcome::default(),
        ),
    ];
    for (case, obj, addresses, ready, outcome) in rows {
        let (after, out) = run(Resource::SlicesV1, obj, &v);
        assert_eq!(out, outcome, "{case}");
        assert_eq!(after["endpoints"][0]["addresses"], addresses, "{case}");
        assert_eq!(
            after["endpoints"][0]["conditions"]["ready"],
            json!(ready),
            "{case}"
        );
    }
}

#[test]
fn v1beta1_reads_the_node_from_topology_and_a_static_pods_uid_does_not_decide() {
    let v = pods();
    let obj = slice(
        "IPv4",
        json!([{"addresses": ["10.0.0.5"], "conditions": {"ready": true},
                "topology": {"kubernetes.io/hostname": HOST},
                "targetRef": {"kind": "Pod", "name": "web-0", "uid": "mirror-uid"}}]),
    );
    let (after, out) = run(Resource::SlicesV1beta1, obj, &v);
    assert_eq!(out.addresses, 1);
    assert_eq!(after["endpoints"][0]["addresses"], json!(["10.0.9.9"]));
    let target = &after["endpoints"][0]["targetRef"];
    let first = Some("10.0.0.5");
    let confirmed = |uid: &str| {
        let mut t = target.clone();
        t["uid"] = json!(uid);
        verdict(
            Some(HOST),
            Some(&t),
            "ns",
            first,
            false,
            &SitePods::local(HOST, v.clone()),
        )
    };
    let ip = "10.0.9.9".parse().unwrap();
    assert_eq!(
        confirmed("mirror-uid"),
        Repair::Address {
            ip,
            uid_confirmed: false
        }
    );
    assert_eq!(
        confirmed("u-web"),
        Repair::Address {
            ip,
            uid_confirmed: true
        }
    );
}

#[test]
fn table_endpoints() {
    let v = pods();
    let addr = |ip: &str, node: &str, pod: &str| json!({"ip": ip, "nodeName": node, "targetRef": {"kind": "Pod", "namespace": "ns", "name": pod}});
    let mut obj = json!({"metadata": {"namespace": "ns", "name": "svc"}, "subsets": [{
        "addresses": [addr("10.0.0.5", HOST, "web-0"), addr("10.0.0.6", "node-b", "web-1"),
                      addr("10.0.0.7", HOST, "db-0")],
        "ports": [{"port": 80}]
    }]});
    let out = repair(
        &mut obj,
        Resource::Endpoints,
        &SitePods::local(HOST, v.clone()),
    );
    assert_eq!(
        out,
        Outcome {
            addresses: 1,
            not_ready: 1
        }
    );
    let subset = &obj["subsets"][0];
    assert_eq!(
        subset["addresses"][0]["ip"],
        json!("10.0.9.9"),
        "moved pod repaired in place"
    );
    assert_eq!(
        subset["addresses"][1]["ip"],
        json!("10.0.0.6"),
        "another node's as is"
    );
    assert_eq!(
        subset["notReadyAddresses"],
        json!([addr("10.0.0.7", HOST, "db-0")])
    );
    // The repaired object again: the same bytes (nothing left to repair).
    let again = obj.clone();
    assert_eq!(
        repair(
            &mut obj,
            Resource::Endpoints,
            &SitePods::local(HOST, v.clone())
        ),
        Outcome::default()
    );
    assert_eq!(obj, again);
    // Every address not ready: `addresses` goes, as the upstream would omit it.
    let mut only = json!({"metadata": {"namespace": "ns"}, "subsets": [{"addresses": [addr("10.0.0.7", HOST, "db-0")]}]});
    repair(
        &mut only,
        Resource::Endpoints,
        &SitePods::local(HOST, v.clone()),
    );
    assert!(only["subsets"][0].get("addresses").is_none(), "{only}");
}

#[test]
fn an_empty_view_and_an_upstream_that_caught_up_leave_the_bytes_alone() {
    let obj = slice("IPv4", json!([ep("10.0.0.5", HOST, "web-0")]));
    let (after, out) = run(Resource::SlicesV1, obj.clone(), &RuntimePods::default());
    assert!(out.is_none());
    assert_eq!(after, obj);
    // The upstream catching up serves what the repair served: the same bytes.
    let (repaired, _) = run(Resource::SlicesV1, obj, &pods());
    let caught_up = slice("IPv4", json!([ep("10.0.9.9", HOST, "web-0")]));
    let (served, out) = run(Resource::SlicesV1, caught_up, &pods());
    assert!(out.is_none());
    assert_eq!(
        serde_json::to_vec(&served).unwrap(),
        serde_json::to_vec(&repaired).unwrap()
    );
}
