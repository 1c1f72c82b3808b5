//! Event and resourceVersion behaviour of the cache: TOPOLOGY.md §11 cases about events
//! (2–7, 12, 17–25, 39) and PROTOCOL.md §8 rules, plus a from-scratch recompute oracle.

use serde_json::{json, Value};

use super::*;
use crate::cache::topology::fixtures::*;
use crate::cache::view::Served;

const SEED: u64 = 1_000;

fn state_for(host: &str) -> State {
    test_support::state(host, SEED)
}

/// A ready cache loaded with a fixture's nodes, services and endpoints.
fn load(fx: &Fixture) -> State {
    test_support::loaded(fx, SEED, UpstreamKind::SlicesV1, vec![])
}

/// (type, name, rv, served JSON) of every log entry of `res` after `cursor`.
fn events(st: &State, res: Resource, cursor: u64) -> Vec<(&'static str, String, u64, Value)> {
    let entries = st
        .collection(res)
        .after(cursor, usize::MAX)
        .unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let (kind, obj) = match (&e.old, &e.new) {
                (None, Some(n)) => ("ADDED", n),
                (Some(_), Some(n)) => ("MODIFIED", n),
                (Some(o), None) => ("DELETED", o),
                (None, None) => unreachable!("an entry always has an object"),
            };
            let v: Value = serde_json::from_slice(&obj.bytes).unwrap_or_default();
            (kind, obj.key.name.to_string(), e.rv, v)
        })
        .collect()
}

fn served(st: &State, res: Resource, ns: &str, name: &str) -> Value {
    st.collection(res)
        .get(&ObjectKey::new(ns, name))
        .map(|s| serde_json::from_slice(&s.bytes).unwrap_or_default())
        .unwrap_or(Value::Null)
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn relabel(st: &mut State, name: &str, pairs: &[(&str, &str)]) {
    st.apply(
        UpstreamKind::Nodes,
        Change::Upsert(node(name, &labels(pairs))),
        1,
    );
}

#[test]
fn case_01_initial_state_and_own_rvs() {
    let st = load(&fixture_t());
    let r1 = served(&st, Resource::Endpoints, "default", "region-1");
    assert_eq!(ips(&r1), strs(&["127.0.0.1", "127.0.0.2"]));
    assert_eq!(
        ips(&served(&st, Resource::Endpoints, "default", "no-region")).len(),
        3
    );
    // Served objects carry our RVs (above the seed), never the upstream's "7".
    assert!(rv_of(&r1) > SEED);
    assert_eq!(r1["kind"], "Endpoints");
    assert_eq!(r1["apiVersion"], "v1");
}

#[test]
fn case_02_03_local_then_remote_relabel() {
    let mut st = load(&fixture_t());
    let before = served(&st, Resource::Endpoints, "default", "region-1");
    let cur = st.current_rv();
    relabel(&mut st, "hostname", &[("region", "2")]);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].0, ev[0].1.as_str()), ("MODIFIED", "region-1"));
    assert_eq!(ips(&ev[0].3), strs(&["127.0.0.1", "127.0.0.3"]));
    assert!(
        ev[0].2 > rv_of(&before),
        "a topology-only change gets a new RV"
    );
    // Case 3.
    let cur = st.current_rv();
    relabel(&mut st, "node-2", &[("region", "3")]);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1);
    assert_eq!(ips(&ev[0].3), strs(&["127.0.0.1"]));
}

#[test]
fn case_04_05_service_annotation_changes() {
    let fx = fixture_t();
    let mut st = load(&fx);
    let cur = st.current_rv();
    let mut svc = service("default", "no-region", None);
    svc["metadata"]["annotations"] = json!({"non-relative": "true"});
    st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
    assert!(events(&st, Resource::Endpoints, cur).is_empty());
    let sev = events(&st, Resource::Services, cur);
    assert_eq!(sev.len(), 1);
    assert_eq!((sev[0].0, sev[0].1.as_str()), ("MODIFIED", "no-region"));
    // Case 5.
    let cur = st.current_rv();
    let svc = service("default", "no-region", Some(r#"["region"]"#));
    st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].1, "no-region");
    assert_eq!(ips(&ev[0].3), strs(&["127.0.2.1", "127.0.2.2"]));
}

#[test]
fn case_06_service_event_sequence() {
    let mut st = load(&Fixture {
        services: vec![],
        endpoints: vec![],
        ..fixture_t()
    });
    let cur = st.current_rv();
    for i in 0..10 {
        let keys = (i % 2 == 0).then_some(r#"["foo", "bar"]"#);
        st.apply(
            UpstreamKind::Services,
            Change::Upsert(service("default", &i.to_string(), keys)),
            1,
        );
    }
    for i in 0..10 {
        let name = i.to_string();
        if i % 3 == 0 {
            let mut svc = service(
                "default",
                &name,
                (i % 2 == 0).then_some(r#"["foo", "bar"]"#),
            );
            svc["metadata"]["annotations"]["updated"] = json!("true");
            st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
        } else {
            st.apply(
                UpstreamKind::Services,
                Change::Delete(service("default", &name, None)),
                1,
            );
        }
    }
    let ev = events(&st, Resource::Services, cur);
    let got: Vec<String> = ev.iter().map(|(t, n, _, _)| format!("{t} {n}")).collect();
    let mut want: Vec<String> = (0..10).map(|i| format!("ADDED {i}")).collect();
    for i in 0..10 {
        want.push(format!(
            "{} {i}",
            if i % 3 == 0 { "MODIFIED" } else { "DELETED" }
        ));
    }
    assert_eq!(got, want);
    assert!(
        ev.windows(2).all(|w| w[0].2 < w[1].2),
        "RVs strictly increase"
    );
}

#[test]
fn case_07_upserts_deletes_and_unknown_keys() {
    let mut st = load(&Fixture {
        services: vec![],
        endpoints: vec![],
        ..fixture_t()
    });
    for i in 0..10 {
        let n = i.to_string();
        st.apply(
            UpstreamKind::Nodes,
            Change::Upsert(node(&format!("node-{i}"), &labels(&[]))),
            1,
        );
        st.apply(
            UpstreamKind::Services,
            Change::Upsert(service("default", &n, None)),
            1,
        );
        st.apply(
            UpstreamKind::Endpoints,
            Change::Upsert(json!({"metadata":{"namespace":"default","name":n}})),
            1,
        );
    }
    assert_eq!(st.collection(Resource::Services).len(), 10);
    assert_eq!(st.collection(Resource::Endpoints).len(), 10);
    // An update for an unknown key is an upsert (Deviation from T1).
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(service("default", "new", None)),
        1,
    );
    assert_eq!(st.collection(Resource::Services).len(), 11);
    // Deleting unknown names: no events.
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Delete(service("default", "nope", None)),
        1,
    );
    st.apply(
        UpstreamKind::Endpoints,
        Change::Delete(json!({"metadata":{"namespace":"x","name":"y"}})),
        1,
    );
    assert_eq!(st.current_rv(), cur);
    st.apply(UpstreamKind::Services, Change::Replace(vec![]), 1);
    st.apply(UpstreamKind::Endpoints, Change::Replace(vec![]), 1);
    assert!(st.collection(Resource::Services).is_empty());
    assert!(st.collection(Resource::Endpoints).is_empty());
}

#[test]
fn case_12_local_node_appears() {
    let mut fx = fixture_f();
    fx.nodes.remove("h");
    let mut st = load(&fx);
    let s = served(&st, Resource::Endpoints, "default", "s");
    assert!(ips(&s).is_empty());
    assert_eq!(
        s["subsets"][0]["ports"][0]["port"], 80,
        "subset and ports kept"
    );
    let cur = st.current_rv();
    relabel(&mut st, "h", &[("zone", "a")]);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1);
    assert_eq!(ips(&ev[0].3), strs(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn case_17_endpoints_before_service() {
    let fx = fixture_f();
    let mut st = load(&Fixture {
        services: vec![],
        ..fx.clone()
    });
    assert_eq!(
        ips(&served(&st, Resource::Endpoints, "default", "s")).len(),
        6
    );
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(fx.services[0].clone()),
        1,
    );
    let sev = events(&st, Resource::Services, cur);
    let eev = events(&st, Resource::Endpoints, cur);
    assert_eq!(sev.len(), 1);
    assert_eq!(sev[0].0, "ADDED");
    assert_eq!(eev.len(), 1);
    assert_eq!(eev[0].0, "MODIFIED");
    assert!(sev[0].2 < eev[0].2, "the Service's own event comes first");
    assert_eq!(ips(&eev[0].3), strs(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn case_18_service_deleted() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Delete(fx.services[0].clone()),
        1,
    );
    let sev = events(&st, Resource::Services, cur);
    assert_eq!((sev.len(), sev[0].0), (1, "DELETED"));
    let eev = events(&st, Resource::Endpoints, cur);
    assert_eq!((eev.len(), eev[0].0), (1, "MODIFIED"));
    assert_eq!(ips(&eev[0].3).len(), 6);
}

#[test]
fn case_19_node_change_without_topology_effect() {
    let mut st = load(&fixture_f());
    let cur = st.current_rv();
    relabel(&mut st, "n3", &[("foo", "bar")]);
    let mut n2 = node("n2", &labels(&[("zone", "b")]));
    n2["status"] = json!({"conditions":[{"type":"Ready","status":"False"}]});
    st.apply(UpstreamKind::Nodes, Change::Upsert(n2), 1);
    assert!(events(&st, Resource::Endpoints, cur).is_empty());
    let nev = events(&st, Resource::Nodes, cur);
    assert_eq!(
        nev.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec!["MODIFIED", "MODIFIED"]
    );
    let got = served(&st, Resource::Nodes, "", "n2");
    assert_eq!(got["status"]["conditions"][0]["status"], "False");
    assert_eq!(rv_of(&got), nev[1].2);
}

#[test]
fn case_20_21_node_deleted_and_back_and_local_node_deleted() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Nodes,
        Change::Delete(node("n1", &labels(&[]))),
        1,
    );
    relabel(&mut st, "n1", &[("zone", "a")]);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 2);
    assert_eq!(ips(&ev[0].3), strs(&["10.0.0.1"]));
    assert_eq!(ips(&ev[1].3), strs(&["10.0.0.1", "10.0.0.2"]));
    // Case 21: the local node goes; a normal service is untouched.
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(service("default", "plain", None)),
        1,
    );
    st.apply(
        UpstreamKind::Endpoints,
        Change::Upsert(endpoints("default", "plain", f_addresses())),
        1,
    );
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Nodes,
        Change::Delete(node("h", &labels(&[]))),
        1,
    );
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].1, "s");
    assert!(ips(&ev[0].3).is_empty());
    let nev = events(&st, Resource::Nodes, cur);
    assert_eq!((nev.len(), nev[0].0), (1, "DELETED"));
}

#[test]
fn case_22_endpoints_deleted_carry_last_served_content() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Endpoints,
        Change::Delete(fx.endpoints[0].clone()),
        1,
    );
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].0, "DELETED");
    assert_eq!(ips(&ev[0].3), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(rv_of(&ev[0].3), ev[0].2, "stamped with the deletion's RV");
    assert!(ev[0].2 > cur);
}

#[test]
fn case_23_identical_redelivery_is_silent() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Replace(fx.services.clone()),
        1,
    );
    st.apply(
        UpstreamKind::Endpoints,
        Change::Replace(fx.endpoints.clone()),
        1,
    );
    st.apply(UpstreamKind::Nodes, Change::Replace(fx.node_objects()), 1);
    // A different upstream RV alone is no change either.
    let mut svc = fx.services[0].clone();
    svc["metadata"]["resourceVersion"] = json!("999");
    st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
    assert_eq!(st.current_rv(), cur);
}

#[test]
fn case_24_25_key_set_semantics() {
    let mut st = load(&fixture_f());
    let cur = st.current_rv();
    let svc = service("default", "s", Some(r#"[ "zone", "zone" ]"#));
    st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
    assert_eq!(events(&st, Resource::Services, cur).len(), 1);
    assert!(
        events(&st, Resource::Endpoints, cur).is_empty(),
        "same key set"
    );
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(service("default", "s", Some("[zone"))),
        1,
    );
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 1);
    assert_eq!(ips(&ev[0].3).len(), 6, "invalid annotation = unfiltered");
}

#[test]
fn case_39_every_slice_of_the_service_gets_a_new_rv() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.serve_v1beta1();
    let a = slice_v1(
        "default",
        "s-aaaaa",
        Some("s"),
        vec![
            slice_endpoint_v1("10.0.0.2", Some("n1"), None),
            slice_endpoint_v1("10.0.0.3", Some("n2"), None),
        ],
    );
    let b = slice_v1(
        "default",
        "s-bbbbb",
        Some("s"),
        vec![slice_endpoint_v1("10.0.0.3", Some("n2"), None)],
    );
    st.apply(UpstreamKind::SlicesV1, Change::Replace(vec![a, b]), 1);
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "s-aaaaa")),
        strs(&["10.0.0.2"])
    );
    assert!(slice_ips(&served(&st, Resource::SlicesV1, "default", "s-bbbbb")).is_empty());
    let cur = st.current_rv();
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(service("default", "s", None)),
        1,
    );
    for res in [Resource::SlicesV1, Resource::SlicesV1beta1] {
        let ev = events(&st, res, cur);
        assert_eq!(
            ev.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
            vec!["s-aaaaa", "s-bbbbb"],
            "{res:?}"
        );
        assert!(ev.iter().all(|e| e.0 == "MODIFIED" && e.2 > cur));
    }
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "s-bbbbb")),
        strs(&["10.0.0.3"])
    );
    let beta = served(&st, Resource::SlicesV1beta1, "default", "s-aaaaa");
    assert_eq!(beta["apiVersion"], "discovery.k8s.io/v1beta1");
    assert_eq!(
        beta["endpoints"][0]["topology"]["kubernetes.io/hostname"],
        "n1"
    );
}

#[test]
fn v1beta1_upstream_serves_both_versions() {
    let mut st = load(&fixture_f());
    st.serve_v1beta1();
    let b = json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "s-x", "labels": {"kubernetes.io/service-name": "s"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.2"], "topology": {"kubernetes.io/hostname": "n1"}},
            {"addresses": ["10.0.0.3"], "nodeName": "n2"}
        ]
    });
    st.apply(UpstreamKind::SlicesV1beta1, Change::Replace(vec![b]), 1);
    assert_eq!(st.slice_kind(), UpstreamKind::SlicesV1beta1);
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1beta1, "default", "s-x")),
        strs(&["10.0.0.2"])
    );
    let v1 = served(&st, Resource::SlicesV1, "default", "s-x");
    assert_eq!(v1["apiVersion"], "discovery.k8s.io/v1");
    assert_eq!(slice_ips(&v1), strs(&["10.0.0.2"]));
}

#[test]
fn not_ready_until_every_kind_listed_and_history_starts_at_ready() {
    let fx = fixture_f();
    let mut st = state_for("h");
    st.apply(UpstreamKind::Nodes, Change::Replace(fx.node_objects()), 0);
    st.apply(
        UpstreamKind::Services,
        Change::Upsert(fx.services[0].clone()),
        0,
    );
    st.apply(
        UpstreamKind::Services,
        Change::Replace(fx.services.clone()),
        0,
    );
    st.apply(
        UpstreamKind::Endpoints,
        Change::Replace(fx.endpoints.clone()),
        0,
    );
    assert!(!st.is_ready(), "slices have not listed yet");
    let a = st.apply(UpstreamKind::SlicesV1, Change::Replace(vec![]), 0);
    assert!(a.became_ready && st.is_ready());
    let c = st.collection(Resource::Endpoints);
    assert_eq!(c.horizon(), st.current_rv());
    assert_eq!(c.log_len(), 0);
}

/// A tiny deterministic generator for the oracle test.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// TOPOLOGY.md §9: the incrementally maintained view equals a from-scratch recomputation, and
/// every served object's RV changes exactly when its content does.
#[test]
fn incremental_view_equals_from_scratch_recompute() {
    let zones = ["a", "b", "c"];
    let mut rng = Lcg(7);
    let mut fx = fixture_f();
    let mut st = load(&fx);
    let mut slices: BTreeMap<String, Value> = BTreeMap::new();
    for step in 0..400 {
        match rng.next(6) {
            0 => {
                let name = ["h", "n1", "n2", "n3", "n4"][rng.next(5) as usize];
                let l = labels(&[("zone", zones[rng.next(3) as usize])]);
                fx.nodes.insert(name.into(), l.clone());
                st.apply(UpstreamKind::Nodes, Change::Upsert(node(name, &l)), step);
            }
            1 => {
                let name = ["n1", "n2", "n3", "n4"][rng.next(4) as usize];
                fx.nodes.remove(name);
                st.apply(
                    UpstreamKind::Nodes,
                    Change::Delete(node(name, &labels(&[]))),
                    step,
                );
            }
            2 => {
                let keys =
                    [None, Some(r#"["zone"]"#), Some("[]"), Some("bad")][rng.next(4) as usize];
                let svc = service("default", ["s", "t"][rng.next(2) as usize], keys);
                let key = ObjectKey::of(&svc).unwrap_or_default();
                fx.services
                    .retain(|s| ObjectKey::of(s).as_ref() != Some(&key));
                fx.services.push(svc.clone());
                st.apply(UpstreamKind::Services, Change::Upsert(svc), step);
            }
            3 => {
                let name = ["s", "t"][rng.next(2) as usize];
                fx.services
                    .retain(|s| ObjectKey::of(s) != Some(ObjectKey::new("default", name)));
                st.apply(
                    UpstreamKind::Services,
                    Change::Delete(service("default", name, None)),
                    step,
                );
            }
            _ => {
                let name = format!("sl-{}", rng.next(4));
                let svc = ["s", "t"][rng.next(2) as usize];
                let eps = (0..rng.next(4))
                    .map(|i| {
                        let node = ["h", "n1", "n2", "n3", "n4", "ghost"][rng.next(6) as usize];
                        slice_endpoint_v1(&format!("10.1.{step}.{i}"), Some(node), Some("a"))
                    })
                    .collect();
                let s = slice_v1("default", &name, Some(svc), eps);
                slices.insert(name, s.clone());
                st.apply(UpstreamKind::SlicesV1, Change::Upsert(s), step);
            }
        }
        for (name, upstream) in &slices {
            let mut want = fx.serve_slice_v1(upstream);
            let got = served(&st, Resource::SlicesV1, "default", name);
            want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
            want["kind"] = json!("EndpointSlice");
            assert_eq!(got, want, "step {step}: slice {name}");
        }
        let mut want = fx.served("default", "s");
        let got = served(&st, Resource::Endpoints, "default", "s");
        want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
        assert_eq!(got, want, "step {step}: endpoints s");
    }
    // Every logged change is a real change of content.
    for res in Resource::ALL {
        let coll = st.collection(res);
        let entries = coll.after(coll.horizon(), usize::MAX).unwrap_or_default();
        drop(coll);
        for e in entries {
            if let (Some(o), Some(n)) = (&e.old, &e.new) {
                let strip = |s: &Served| {
                    let mut v: Value = serde_json::from_slice(&s.bytes).unwrap_or_default();
                    v["metadata"]["resourceVersion"] = Value::Null;
                    v
                };
                assert_ne!(
                    strip(o),
                    strip(n),
                    "{res:?} {} logged without a change",
                    n.key
                );
            }
        }
    }
}

#[test]
fn case_37_headless_endpoints_never_served_headless_service_only_without_field_selector() {
    use crate::api::filter::Filter;
    use crate::api::handlers::select;
    use crate::api::selector::FieldSelector;
    let fx = fixture_f();
    let mut st = load(&fx);
    let mut hl = service("default", "hl", None);
    hl["spec"]["clusterIP"] = json!("None");
    let mut hl_eps = endpoints("default", "hl", f_addresses());
    hl_eps["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    st.apply(UpstreamKind::Services, Change::Upsert(hl), 1);
    st.apply(
        UpstreamKind::Endpoints,
        Change::Replace(vec![fx.endpoints[0].clone(), hl_eps.clone()]),
        1,
    );
    assert!(st
        .collection(Resource::Endpoints)
        .get(&ObjectKey::new("default", "hl"))
        .is_none());
    // An Endpoints object that gains the label leaves the view (DELETED).
    let cur = st.current_rv();
    let mut s_eps = fx.endpoints[0].clone();
    s_eps["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    st.apply(UpstreamKind::Endpoints, Change::Upsert(s_eps), 1);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!((ev.len(), ev[0].0, ev[0].1.as_str()), (1, "DELETED", "s"));
    let all = |fields: &str| {
        let filter = Filter {
            fields: FieldSelector::parse(fields, Resource::Services.selectable_fields())
                .unwrap_or_default(),
            ..Filter::default()
        };
        st.with_view(|v| select(Resource::Services, &filter, v))
            .iter()
            .map(|o| o.key.name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(all(""), strs(&["hl", "s"]));
    assert_eq!(all("spec.clusterIP!=None"), strs(&["s"]));
}

#[test]
fn case_38_service_proxy_name_objects_never_served() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let mut svc = service("default", "other", None);
    svc["metadata"]["labels"] = json!({"service.kubernetes.io/service-proxy-name": "foo"});
    let mut sl = slice_v1(
        "default",
        "other-abcde",
        Some("other"),
        vec![slice_endpoint_v1("10.9.0.1", Some("n1"), None)],
    );
    sl["metadata"]["labels"]["service.kubernetes.io/service-proxy-name"] = json!("foo");
    let cur = st.current_rv();
    st.apply(UpstreamKind::Services, Change::Upsert(svc), 1);
    st.apply(UpstreamKind::SlicesV1, Change::Replace(vec![sl]), 1);
    assert_eq!(st.current_rv(), cur, "nothing entered the view");
    assert!(st
        .collection(Resource::Services)
        .get(&ObjectKey::new("default", "other"))
        .is_none());
    assert!(st.collection(Resource::SlicesV1).is_empty());
    assert!(st.collection(Resource::SlicesV1beta1).is_empty());
}

#[test]
fn list_texts_are_decoded_one_by_one_and_garbage_items_are_skipped() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let good = fx.services[0].to_string().into_boxed_str();
    let other = service("default", "t", None).to_string().into_boxed_str();
    st.apply(
        UpstreamKind::Services,
        Change::List(vec![good, "{not json".into(), other]),
        1,
    );
    let names: Vec<String> = st
        .collection(Resource::Services)
        .objects()
        .map(|o| o.key.name.to_string())
        .collect();
    assert_eq!(names, strs(&["s", "t"]));
}

#[test]
fn a_pinned_slice_version_ignores_the_other_and_its_first_list_replaces_the_old() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let v1 = slice_v1(
        "default",
        "s-a",
        Some("s"),
        vec![slice_endpoint_v1("10.0.0.2", Some("n1"), None)],
    );
    st.apply(UpstreamKind::SlicesV1, Change::Replace(vec![v1.clone()]), 1);
    st.expect_slices(UpstreamKind::SlicesV1beta1);
    let cur = st.current_rv();
    // A late change from the replaced v1 reflector: ignored.
    st.apply(
        UpstreamKind::SlicesV1,
        Change::Upsert(slice_v1("default", "s-b", Some("s"), vec![])),
        1,
    );
    assert_eq!(st.current_rv(), cur);
    // The v1beta1 list replaces what the v1 reflector had stored.
    let b = json!({"apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "s-x", "labels": {"kubernetes.io/service-name": "s"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "h"}]});
    st.apply(UpstreamKind::SlicesV1beta1, Change::Replace(vec![b]), 1);
    let names: Vec<String> = st
        .collection(Resource::SlicesV1)
        .objects()
        .map(|o| o.key.name.to_string())
        .collect();
    assert_eq!(names, strs(&["s-x"]));
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "s-x")),
        strs(&["10.0.0.1"])
    );
}

#[path = "store_health_tests.rs"]
mod health;
