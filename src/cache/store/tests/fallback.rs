//! The §2.9 decision in the cache (docs/SEMANTICS.md §2.9, §6.2): one decision over all the
//! slices of a Service, so that a change of one slice recomputes its siblings, with a new RV
//! and one event for exactly the objects whose served content changes.

use std::collections::BTreeMap;

use crate::cache::store::test_support::Whole;

use serde_json::{json, Value};

use super::*;

/// A slice of `default/s` with one endpoint per (ip, node, ready).
fn slice(name: &str, eps: &[(&str, &str, bool)]) -> Value {
    let eps = eps
        .iter()
        .map(|(ip, node, ready)| {
            let mut e = slice_endpoint_v1(ip, Some(node), Some("a"));
            e["conditions"]["ready"] = json!(ready);
            e
        })
        .collect();
    slice_v1("default", name, Some("s"), eps)
}

/// Fixture F with `default/s` annotated `keys`.
fn with_keys(keys: &str) -> Fixture {
    let mut fx = fixture_f();
    fx.set_keys("default", "s", Some(keys));
    fx
}

/// Case 67: `["zone","*"]`, the zone's only ready endpoint in slice A; it fails: A and B both
/// serve everything (B changed only because A did); it recovers: back again. Each time one event
/// per object whose content changed, nothing for the others.
#[test]
fn case_67_a_slice_change_switches_its_siblings() {
    let fx = with_keys(r#"["zone","*"]"#);
    let a = |ready| slice("s-a", &[("10.0.0.1", "h", ready), ("10.0.0.3", "n2", true)]);
    let b = slice("s-b", &[("10.0.0.4", "n2", true)]);
    let c = slice("s-c", &[("10.0.0.5", "h", false)]);
    let mut st = test_support::loaded(
        &fx,
        SEED,
        Resource::SlicesV1,
        vec![a(true), b.clone(), c.clone()],
    );
    let ips = |st: &State, name: &str| slice_ips(&served(st, Resource::SlicesV1, "default", name));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    assert!(ips(&st, "s-b").is_empty());
    assert_eq!(ips(&st, "s-c"), strs(&["10.0.0.5"]));
    // The zone's last ready endpoint fails.
    let cur = st.current_rv();
    st.apply(Resource::SlicesV1, Change::upsert(&a(false)), 1);
    let ev = events(&st, Resource::SlicesV1, cur);
    let names: Vec<&str> = ev.iter().map(|e| e.1.as_str()).collect();
    // s-c kept its not-ready zone endpoint and keeps it: no event.
    assert_eq!(names, vec!["s-a", "s-b"]);
    assert!(ev.iter().all(|e| e.0 == "MODIFIED" && e.2 > cur));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1", "10.0.0.3"]));
    assert_eq!(ips(&st, "s-b"), strs(&["10.0.0.4"]));
    // `/debug/topology` says what decided, for the slices together and for the Endpoints.
    let why = st
        .explain_service(&ObjectKey::new("default", "s"), 100)
        .expect("explained");
    assert_eq!(
        why.slices_decision.as_deref(),
        Some("zone kept 0 ready of 2; fallback *: all 4")
    );
    assert_eq!(
        why.endpoints_decision.as_deref(),
        Some("zone kept 2 ready of 6; served by any key")
    );
    assert!(
        why.notes.iter().any(|n| n.starts_with("a last \"*\"")),
        "{:?}",
        why.notes
    );
    let fallback = why.objects.iter().flat_map(|o| &o.endpoints);
    assert!(fallback
        .filter(|r| r.list == "endpoints")
        .all(|r| r.kept && r.reason == "Fallback"));
    // It recovers.
    let cur = st.current_rv();
    st.apply(Resource::SlicesV1, Change::upsert(&a(true)), 2);
    let names: Vec<String> = events(&st, Resource::SlicesV1, cur)
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(names, strs(&["s-a", "s-b"]));
    assert!(ips(&st, "s-b").is_empty());
    // A change of s-b flips the decision back: its own event first, then its sibling's (§6.2).
    st.apply(Resource::SlicesV1, Change::upsert(&a(false)), 3);
    let cur = st.current_rv();
    let b_local = slice("s-b", &[("10.0.0.4", "n2", true), ("10.0.0.6", "h", true)]);
    st.apply(Resource::SlicesV1, Change::upsert(&b_local), 3);
    let names: Vec<String> = events(&st, Resource::SlicesV1, cur)
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(names, strs(&["s-b", "s-a"]));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    st.apply(Resource::SlicesV1, Change::upsert(&a(true)), 3);
    st.apply(Resource::SlicesV1, Change::upsert(&b.clone()), 3);
    // The sibling that held the ready endpoint is deleted: the other one switches too.
    let cur = st.current_rv();
    st.apply(Resource::SlicesV1, Change::delete(&a(true)), 3);
    let ev = events(&st, Resource::SlicesV1, cur);
    let got: Vec<(&str, &str)> = ev.iter().map(|e| (e.0, e.1.as_str())).collect();
    assert_eq!(got, vec![("DELETED", "s-a"), ("MODIFIED", "s-b")]);
    assert_eq!(ips(&st, "s-b"), strs(&["10.0.0.4"]));
}

/// Random changes of nodes, annotations (`*`, the ordered mode) and slices (readiness
/// included): every served slice is what serving it among all its Service's slices from
/// scratch gives, each change logs at most one event per object, and only real changes.
#[test]
fn dynamic_keys_incremental_view_equals_from_scratch() {
    let zones = ["a", "b"];
    let mut rng = Lcg(11);
    let mut fx = fixture_f();
    let mut st = load(&fx);
    let mut slices: BTreeMap<String, Value> = BTreeMap::new();
    for step in 0..500 {
        let cur = st.current_rv();
        match rng.next(5) {
            0 => {
                let name = ["h", "n1", "n2", "n3"][rng.next(4) as usize];
                let l = labels(&[("zone", zones[rng.next(2) as usize])]);
                fx.nodes.insert(name.into(), l.clone());
                st.apply(Resource::Nodes, Change::upsert(&node(name, &l)), step);
            }
            1 => {
                let keys = [
                    r#"["zone","*"]"#,
                    r#"["zone"]"#,
                    r#"["*"]"#,
                    r#"["rack","zone"]"#,
                ][rng.next(4) as usize];
                let mut svc = service("default", ["s", "t"][rng.next(2) as usize], Some(keys));
                if rng.next(2) == 0 {
                    svc["metadata"]["annotations"]["topologyMode"] = json!("ordered");
                }
                let key = ObjectKey::of(&svc).unwrap_or_default();
                fx.services
                    .retain(|s| ObjectKey::of(s).as_ref() != Some(&key));
                fx.services.push(svc.clone());
                st.apply(Resource::Services, Change::upsert(&svc), step);
            }
            2 if !slices.is_empty() => {
                let name = format!("sl-{}", rng.next(4));
                if let Some(gone) = slices.remove(&name) {
                    st.apply(Resource::SlicesV1, Change::delete(&gone), step);
                }
            }
            _ => {
                let name = format!("sl-{}", rng.next(4));
                let svc = ["s", "t"][rng.next(2) as usize];
                let eps = (0..rng.next(3))
                    .map(|i| {
                        let node = ["h", "n1", "n2", "n3"][rng.next(4) as usize];
                        let mut e = slice_endpoint_v1(&format!("10.1.0.{i}"), Some(node), None);
                        e["conditions"]["ready"] = json!(rng.next(3) > 0);
                        e
                    })
                    .collect();
                let s = slice_v1("default", &name, Some(svc), eps);
                slices.insert(name, s.clone());
                st.apply(Resource::SlicesV1, Change::upsert(&s), step);
            }
        }
        let logged = events(&st, Resource::SlicesV1, cur);
        let mut names: Vec<&str> = logged.iter().map(|e| e.1.as_str()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "step {step}: one event per object");
        for (name, upstream) in &slices {
            let owner = upstream["metadata"]["labels"]["kubernetes.io/service-name"].clone();
            let siblings: Vec<&Value> = slices
                .values()
                .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == owner)
                .collect();
            let mut want = fx.serve_slice_v1_among(upstream, &siblings);
            let got = served(&st, Resource::SlicesV1, "default", name);
            want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
            want["kind"] = json!("EndpointSlice");
            assert_eq!(got, want, "step {step}: slice {name}");
        }
    }
    assert_every_logged_change_is_real(&st, Resource::SlicesV1);
}

/// A snapshot restore serves a dynamic Service's slices with the decision over all of them
/// (they are restored one by one).
#[test]
fn a_restore_decides_over_every_restored_slice() {
    let fx = with_keys(r#"["zone","*"]"#);
    let slices = vec![
        slice("s-a", &[("10.0.0.3", "n2", true)]),
        slice("s-b", &[("10.0.0.1", "h", true)]),
    ];
    let st = test_support::loaded(&fx, SEED, Resource::SlicesV1, slices);
    let objects = st.export().whole().expect("whole");
    let mut restored = test_support::state(&fx.hostname, SEED);
    assert!(restored.restore(objects, Resource::SlicesV1, 0));
    for name in ["s-a", "s-b"] {
        let ips = |st: &State| slice_ips(&served(st, Resource::SlicesV1, "default", name));
        assert_eq!(ips(&restored), ips(&st), "{name}");
    }
    assert!(slice_ips(&served(&restored, Resource::SlicesV1, "default", "s-a")).is_empty());
}

/// §2.9 with §13: the decision weighs the served readiness. The zone's only ready endpoint is a
/// pod the runtime of its node knows without a ready sandbox: served not ready, so the Service
/// falls back, as it would had the upstream said so; the runtime's pod ready again: back.
#[test]
fn a_pod_the_runtime_says_is_not_ready_makes_the_service_fall_back() {
    use crate::handoff::runtime_pods::{RuntimePod, RuntimePods};
    let fx = with_keys(r#"["zone","*"]"#);
    let mut a = slice("s-a", &[("10.0.0.1", "h", true), ("10.0.0.3", "n2", true)]);
    a["endpoints"][0]["targetRef"] = json!({"kind": "Pod", "namespace": "default", "name": "p1"});
    let b = slice("s-b", &[("10.0.0.4", "n2", true)]);
    let mut st = test_support::loaded(&fx, SEED, Resource::SlicesV1, vec![a, b]);
    let ips = |st: &State, name: &str| slice_ips(&served(st, Resource::SlicesV1, "default", name));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    assert!(ips(&st, "s-b").is_empty());
    let mut gone = RuntimePods::default();
    gone.not_ready.insert(ObjectKey::new("default", "p1"));
    st.set_runtime_pods(gone, 1);
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1", "10.0.0.3"]));
    assert_eq!(
        ips(&st, "s-b"),
        strs(&["10.0.0.4"]),
        "the fallback serves s-b"
    );
    let a_served = served(&st, Resource::SlicesV1, "default", "s-a");
    assert_eq!(
        a_served["endpoints"][0]["conditions"]["ready"],
        json!(false)
    );
    let mut back = RuntimePods::default();
    back.ready.insert(
        ObjectKey::new("default", "p1"),
        RuntimePod {
            uid: "u".into(),
            created_at: 2,
            ips: vec!["10.0.0.1".parse().unwrap()],
        },
    );
    st.set_runtime_pods(back, 2);
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    assert!(ips(&st, "s-b").is_empty());
}
