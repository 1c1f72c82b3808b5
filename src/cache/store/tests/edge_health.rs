//! Event and resourceVersion behaviour of the edge-health filter (docs/SEMANTICS.md §6.2, §10):
//! exactly the affected objects change, node IP changes re-resolve IP keys, and the incremental
//! view equals a from-scratch rebuild. A child of `store::tests` (shares its helpers).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::handoff::edge_health::EdgeHealthMap;

fn map(pairs: &[(&str, bool)]) -> EdgeHealthMap {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// A Node with labels and InternalIPs.
fn node_ips(name: &str, l: &[(&str, &str)], ips: &[&str]) -> Value {
    let mut n = node(name, &labels(l));
    let addrs: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .chain([json!({"type": "Hostname", "address": name})])
        .collect();
    n["status"] = json!({ "addresses": addrs });
    n
}

/// (type, name) of the events of `res` after `cursor`.
fn names(st: &State, res: Resource, cursor: u64) -> Vec<(&'static str, String)> {
    events(st, res, cursor)
        .into_iter()
        .map(|(t, n, _, _)| (t, n))
        .collect()
}

fn modified(names_: &[&str]) -> Vec<(&'static str, String)> {
    names_.iter().map(|n| ("MODIFIED", n.to_string())).collect()
}

/// Fixture F (topology `s`) plus: a normal Service `plain` with F's addresses, Endpoints
/// `orphan` (no Service) on n2 and h, and slices of `plain`: `plain-a` on n1 and n2,
/// `plain-b` on n3 only. Nodes carry InternalIPs 192.168.0.{1,11,12,13} (h, n1, n2, n3).
fn world() -> State {
    let mut fx = fixture_f();
    fx.services.push(service("default", "plain", None));
    fx.endpoints
        .push(endpoints("default", "plain", f_addresses()));
    fx.endpoints.push(endpoints(
        "default",
        "orphan",
        vec![
            address("10.2.0.1", Some("h")),
            address("10.2.0.3", Some("n2")),
        ],
    ));
    let mut st = load(&fx);
    st.serve_v1beta1();
    let nodes = vec![
        node_ips("h", &[("zone", "a")], &["192.168.0.1"]),
        node_ips("n1", &[("zone", "a")], &["192.168.0.11"]),
        node_ips("n2", &[("zone", "b")], &["192.168.0.12"]),
        node_ips("n3", &[], &["192.168.0.13"]),
    ];
    st.apply_list(Resource::Nodes, texts(&nodes), 0);
    let slices = vec![
        slice_v1(
            "default",
            "plain-a",
            Some("plain"),
            vec![
                slice_endpoint_v1("10.1.0.2", Some("n1"), Some("a")),
                slice_endpoint_v1("10.1.0.3", Some("n2"), Some("b")),
            ],
        ),
        slice_v1(
            "default",
            "plain-b",
            Some("plain"),
            vec![slice_endpoint_v1("10.1.0.4", Some("n3"), None)],
        ),
    ];
    st.apply_list(Resource::SlicesV1, texts(&slices), 0);
    st
}

#[test]
fn map_change_recomputes_exactly_the_affected_objects() {
    let mut st = world();
    let plain_before = served(&st, Resource::Endpoints, "default", "plain");
    let a_before = served(&st, Resource::SlicesV1, "default", "plain-a");
    let cur = st.current_rv();
    let done = st.set_edge_health(map(&[("n2", false), ("n1", true)]), 1);
    // `s` (topology) already drops n2: no change, no event. `plain-b` has nothing on n2.
    assert_eq!(
        names(&st, Resource::Endpoints, cur),
        modified(&["orphan", "plain"])
    );
    for res in [Resource::SlicesV1, Resource::SlicesV1beta1] {
        assert_eq!(names(&st, res, cur), modified(&["plain-a"]), "{res:?}");
    }
    assert!(names(&st, Resource::Nodes, cur).is_empty());
    assert_eq!(done.events, 4);
    assert_eq!(st.current_rv(), cur + 4);
    assert_eq!(
        ips(&served(&st, Resource::Endpoints, "default", "plain")),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"])
    );
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1beta1, "default", "plain-a")),
        strs(&["10.1.0.2"])
    );
    assert_eq!(st.abnormal_nodes().len(), 1);
    // The same map again, or another one resolving to the same nodes: nothing.
    let cur = st.current_rv();
    assert_eq!(
        st.set_edge_health(map(&[("n2", false), ("n1", true)]), 2),
        Applied::default()
    );
    st.set_edge_health(map(&[("n2", false), ("n3", true)]), 2);
    assert_eq!(st.current_rv(), cur);
    // A failed poll (empty map) restores everything, one MODIFIED each.
    let done = st.set_edge_health(EdgeHealthMap::new(), 3);
    assert_eq!(done.events, 4);
    assert_eq!(
        names(&st, Resource::Endpoints, cur),
        modified(&["orphan", "plain"])
    );
    let plain = served(&st, Resource::Endpoints, "default", "plain");
    assert_eq!(ips(&plain), ips(&plain_before));
    assert!(rv_of(&plain) > rv_of(&plain_before));
    let a = served(&st, Resource::SlicesV1, "default", "plain-a");
    assert_eq!(a["endpoints"], a_before["endpoints"]);
    assert!(st.abnormal_nodes().is_empty());
}

#[test]
fn topology_service_and_relabel_interplay() {
    let mut st = world();
    let cur = st.current_rv();
    st.set_edge_health(map(&[("192.168.0.11", false)]), 1);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(
        ev.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
        ["plain", "s"]
    );
    assert_eq!(ips(&ev[1].3), strs(&["10.0.0.1"]));
    // n2 joins zone a: `s` gains 10.0.0.3, still without n1's 10.0.0.2.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_ips("n2", &[("zone", "a")], &["192.168.0.12"])),
        2,
    );
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ips(&ev[0].3), strs(&["10.0.0.1", "10.0.0.3"]));
    // The poll fails: only topology filtering remains.
    let cur = st.current_rv();
    st.set_edge_health(EdgeHealthMap::new(), 3);
    assert_eq!(
        ips(&served(&st, Resource::Endpoints, "default", "s")),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    assert_eq!(
        names(&st, Resource::Endpoints, cur),
        modified(&["plain", "s"])
    );
}

#[test]
fn ip_keys_follow_node_ip_changes_and_node_add_delete() {
    let mut st = world();
    st.set_edge_health(map(&[("192.168.0.12", false), ("n3", true)]), 1);
    assert!(st.abnormal_nodes().contains("n2"));
    // n2's InternalIP changes: n2 is normal again; only objects on n2 change.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_ips("n2", &[("zone", "b")], &["192.168.0.99"])),
        2,
    );
    assert_eq!(
        names(&st, Resource::Endpoints, cur),
        modified(&["orphan", "plain"])
    );
    assert_eq!(names(&st, Resource::SlicesV1, cur), modified(&["plain-a"]));
    // n3 takes over the abnormal IP.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_ips("n3", &[], &["192.168.0.12"])),
        2,
    );
    assert_eq!(names(&st, Resource::Endpoints, cur), modified(&["plain"]));
    assert_eq!(
        names(&st, Resource::SlicesV1beta1, cur),
        modified(&["plain-b"])
    );
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "plain-b")),
        Vec::<String>::new()
    );
    // n3 deleted: its IP no longer names it, its endpoints are served again.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::delete(&node("n3", &labels(&[]))),
        3,
    );
    assert_eq!(names(&st, Resource::Endpoints, cur), modified(&["plain"]));
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "plain-b")),
        strs(&["10.1.0.4"])
    );
    // ... and added back with it: abnormal again.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_ips("n3", &[], &["192.168.0.12"])),
        4,
    );
    assert_eq!(names(&st, Resource::Endpoints, cur), modified(&["plain"]));
    // A name key survives the node's deletion (an endpoint still names it).
    st.set_edge_health(map(&[("n1", false)]), 5);
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::delete(&node("n1", &labels(&[]))),
        6,
    );
    // Nothing changes: `s` and `plain` already drop n1's 10.0.0.2, and still do.
    assert!(names(&st, Resource::Endpoints, cur).is_empty());
    assert!(!ips(&served(&st, Resource::Endpoints, "default", "plain"))
        .contains(&"10.0.0.2".to_string()));
    // Status-only node updates with the same IPs recompute nothing.
    let cur = st.current_rv();
    let mut n2 = node_ips("n2", &[("zone", "b")], &["192.168.0.99"]);
    n2["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    st.apply(Resource::Nodes, Change::upsert(&n2), 7);
    assert!(names(&st, Resource::Endpoints, cur).is_empty());
}

#[test]
fn node_ip_changes_without_a_map_recompute_nothing() {
    let mut st = world();
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_ips("n2", &[("zone", "b")], &["192.168.0.77"])),
        1,
    );
    // n2 is not the local node: its new address is a fact kept, not a served change.
    assert!(names(&st, Resource::Nodes, cur).is_empty());
    assert_eq!(st.current_rv(), cur);
}

#[test]
fn default_kubernetes_ignores_edge_health() {
    let mut st = world();
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "kubernetes", None)),
        1,
    );
    st.apply(
        Resource::Endpoints,
        Change::upsert(&endpoints(
            "default",
            "kubernetes",
            vec![address("10.0.0.2", Some("n1"))],
        )),
        1,
    );
    let cur = st.current_rv();
    st.set_edge_health(map(&[("n1", false)]), 2);
    assert_eq!(
        names(&st, Resource::Endpoints, cur),
        modified(&["plain", "s"])
    );
    assert_eq!(
        ips(&served(&st, Resource::Endpoints, "default", "kubernetes")),
        strs(&["10.0.0.2"])
    );
}

/// Served content of every endpoint-object collection, without RVs.
fn view(st: &State) -> BTreeMap<(Resource, ObjectKey), Value> {
    let mut out = BTreeMap::new();
    for res in Resource::ALL {
        for o in st.collection(res).objects() {
            let mut v: Value = serde_json::from_slice(&o.json()).unwrap_or_default();
            v["metadata"]["resourceVersion"] = Value::Null;
            out.insert((res, o.key.clone()), v);
        }
    }
    out
}

/// §6.2: with edge-health maps, node IP changes, relabels, Service and slice churn mixed, the
/// incrementally maintained view equals a rebuild from the same upstream objects, and every
/// logged change is a real one.
#[test]
fn incremental_health_view_equals_rebuild() {
    let names_ = ["h", "n1", "n2", "n3", "n4"];
    let ips_ = ["192.168.0.1", "192.168.0.2", "192.168.0.3", "fd00::9"];
    let mut rng = Lcg(11);
    let fx = fixture_f();
    let mut st = load(&fx);
    let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
    for (n, l) in &fx.nodes {
        nodes.insert(n.clone(), node(n, l));
    }
    let mut services: BTreeMap<String, Value> = BTreeMap::new();
    services.insert("s".into(), fx.services[0].clone());
    let mut eps: BTreeMap<String, Value> = BTreeMap::new();
    eps.insert("s".into(), fx.endpoints[0].clone());
    let mut slices: BTreeMap<String, Value> = BTreeMap::new();
    let mut health = EdgeHealthMap::new();
    let mut checked_abnormal = 0;
    for step in 0..300 {
        match rng.next(8) {
            0 | 1 => {
                let name = names_[rng.next(5) as usize];
                let zone = ["a", "b"][rng.next(2) as usize];
                let ip: Vec<&str> = (0..rng.next(3))
                    .map(|_| ips_[rng.next(4) as usize])
                    .collect();
                let n = node_ips(name, &[("zone", zone)], &ip);
                nodes.insert(name.into(), n.clone());
                st.apply(Resource::Nodes, Change::upsert(&n), step);
            }
            2 => {
                let name = names_[1 + rng.next(4) as usize];
                nodes.remove(name);
                st.apply(
                    Resource::Nodes,
                    Change::delete(&node(name, &labels(&[]))),
                    step,
                );
            }
            3 | 4 => {
                health = (0..rng.next(4))
                    .map(|_| {
                        let key = if rng.next(2) == 0 {
                            names_[rng.next(5) as usize]
                        } else {
                            ips_[rng.next(4) as usize]
                        };
                        (key.to_string(), rng.next(3) == 0)
                    })
                    .collect();
                st.set_edge_health(health.clone(), step);
            }
            5 => {
                let name = ["s", "t", "kubernetes"][rng.next(3) as usize];
                let keys = [None, Some(r#"["zone"]"#)][rng.next(2) as usize];
                let svc = service("default", name, keys);
                services.insert(name.into(), svc.clone());
                st.apply(Resource::Services, Change::upsert(&svc), step);
            }
            6 => {
                let name = ["s", "t", "kubernetes", "u"][rng.next(4) as usize];
                let addrs = (0..rng.next(4))
                    .map(|i| {
                        let n = ["h", "n1", "n2", "n3", "n4", "ghost", ""][rng.next(7) as usize];
                        address(
                            &format!("10.3.{step}.{i}"),
                            Some(n).filter(|n| !n.is_empty()),
                        )
                    })
                    .collect();
                let e = endpoints("default", name, addrs);
                eps.insert(name.into(), e.clone());
                st.apply(Resource::Endpoints, Change::upsert(&e), step);
            }
            _ => {
                let name = format!("sl-{}", rng.next(4));
                let svc = ["s", "t", "kubernetes"][rng.next(3) as usize];
                let list = (0..rng.next(4))
                    .map(|i| {
                        let n = ["h", "n1", "n2", "n3", "ghost"][rng.next(5) as usize];
                        slice_endpoint_v1(&format!("10.1.{step}.{i}"), Some(n), Some("a"))
                    })
                    .collect();
                let s = slice_v1("default", &name, Some(svc), list);
                slices.insert(name, s.clone());
                st.apply(Resource::SlicesV1, Change::upsert(&s), step);
            }
        }
        if step % 10 != 9 {
            continue;
        }
        // The rebuild learns the map first (so node arrivals resolve it), then the objects.
        let mut fresh = state_for("h");
        fresh.set_edge_health(health.clone(), step);
        for (kind, items) in [
            (Resource::Nodes, nodes.values()),
            (Resource::Services, services.values()),
            (Resource::Endpoints, eps.values()),
            (Resource::SlicesV1, slices.values()),
        ] {
            fresh.apply_list(kind, items.map(Value::to_string), step);
        }
        assert_eq!(fresh.abnormal_nodes(), st.abnormal_nodes(), "step {step}");
        checked_abnormal += usize::from(!st.abnormal_nodes().is_empty());
        assert_eq!(view(&fresh), view(&st), "step {step}");
    }
    assert!(
        checked_abnormal >= 10,
        "{checked_abnormal} checks with abnormal nodes"
    );
    for res in Resource::ALL {
        let coll = st.collection(res);
        for e in coll.after(coll.horizon(), usize::MAX).unwrap_or_default() {
            if let (Some(o), Some(n)) = (&e.old, &e.new) {
                let strip = |s: &Served| {
                    let mut v: Value = serde_json::from_slice(&s.json()).unwrap_or_default();
                    v["metadata"]["resourceVersion"] = Value::Null;
                    v
                };
                assert_ne!(strip(o), strip(n), "{res:?} {} logged unchanged", n.key);
            }
        }
    }
}
