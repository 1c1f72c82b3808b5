//! Event and resourceVersion behaviour of the cache: the numbered cases about events (2–7, 12,
//! 17–25, 39; the catalogue is described in `topology/fixtures.rs`) and the rules of
//! docs/SEMANTICS.md §6 and §6.2. Readiness, slice versions, admission and the from-scratch
//! recompute oracle are in `tests/lifecycle.rs`, edge-health's in `tests/edge_health.rs`; both share
//! the helpers.

use serde_json::{json, Value};

use super::*;
use crate::cache::collection::Served;
use crate::cache::store::test_support::texts;
use crate::cache::topology::fixtures::*;

const SEED: u64 = 1_000;

fn state_for(host: &str) -> State {
    test_support::state(host, SEED)
}

/// A ready cache loaded with a fixture's nodes, services and endpoints.
fn load(fx: &Fixture) -> State {
    test_support::loaded(fx, SEED, Resource::SlicesV1, vec![])
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
            let v: Value = serde_json::from_slice(&obj.json()).unwrap_or_default();
            (kind, obj.key.name.to_string(), e.rv, v)
        })
        .collect()
}

fn served(st: &State, res: Resource, ns: &str, name: &str) -> Value {
    st.collection(res)
        .get(&ObjectKey::new(ns, name))
        .map(|s| serde_json::from_slice(&s.json()).unwrap_or_default())
        .unwrap_or(Value::Null)
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Every `MODIFIED` still in the log of `res` changed the served content (RV aside).
fn assert_every_logged_change_is_real(st: &State, res: Resource) {
    let coll = st.collection(res);
    let entries = coll.after(coll.horizon(), usize::MAX).unwrap_or_default();
    drop(coll);
    let strip = |s: &Served| {
        let mut v: Value = serde_json::from_slice(&s.json()).unwrap_or_default();
        v["metadata"]["resourceVersion"] = Value::Null;
        v
    };
    for e in entries {
        if let (Some(o), Some(n)) = (&e.old, &e.new) {
            assert_ne!(
                strip(o),
                strip(n),
                "{res:?} {} logged without a change",
                n.key
            );
        }
    }
}

/// Fixture F with a Service without topology keys and its Endpoints, and two slices: `s-a` of
/// the topology Service (pruned), `plain-a` of the other (served as it came).
fn fixture_with_plain_service() -> (Fixture, Vec<Value>) {
    let mut fx = fixture_f();
    fx.services.push(service("default", "plain", None));
    fx.endpoints
        .push(endpoints("default", "plain", f_addresses()));
    let ep = |ip: &str, node: &str| slice_endpoint_v1(ip, Some(node), None);
    let slices = vec![
        slice_v1(
            "default",
            "s-a",
            Some("s"),
            vec![ep("10.0.0.1", "h"), ep("10.0.0.3", "n2")],
        ),
        slice_v1(
            "default",
            "plain-a",
            Some("plain"),
            vec![ep("10.0.0.3", "n2")],
        ),
    ];
    (fx, slices)
}

fn relabel(st: &mut State, name: &str, pairs: &[(&str, &str)]) {
    st.apply(
        Resource::Nodes,
        Change::upsert(&node(name, &labels(pairs))),
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
    st.apply(Resource::Services, Change::upsert(&svc), 1);
    assert!(events(&st, Resource::Endpoints, cur).is_empty());
    let sev = events(&st, Resource::Services, cur);
    assert_eq!(sev.len(), 1);
    assert_eq!((sev[0].0, sev[0].1.as_str()), ("MODIFIED", "no-region"));
    // Case 5.
    let cur = st.current_rv();
    let svc = service("default", "no-region", Some(r#"["region"]"#));
    st.apply(Resource::Services, Change::upsert(&svc), 1);
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
            Resource::Services,
            Change::upsert(&service("default", &i.to_string(), keys)),
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
            st.apply(Resource::Services, Change::upsert(&svc), 1);
        } else {
            st.apply(
                Resource::Services,
                Change::delete(&service("default", &name, None)),
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
            Resource::Nodes,
            Change::upsert(&node(&format!("node-{i}"), &labels(&[]))),
            1,
        );
        st.apply(
            Resource::Services,
            Change::upsert(&service("default", &n, None)),
            1,
        );
        st.apply(
            Resource::Endpoints,
            Change::upsert(&json!({"metadata":{"namespace":"default","name":n}})),
            1,
        );
    }
    assert_eq!(st.collection(Resource::Services).len(), 10);
    assert_eq!(st.collection(Resource::Endpoints).len(), 10);
    // An update for an unknown key is an upsert (Deviation from T1).
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "new", None)),
        1,
    );
    assert_eq!(st.collection(Resource::Services).len(), 11);
    // Deleting unknown names: no events.
    let cur = st.current_rv();
    st.apply(
        Resource::Services,
        Change::delete(&service("default", "nope", None)),
        1,
    );
    st.apply(
        Resource::Endpoints,
        Change::delete(&json!({"metadata":{"namespace":"x","name":"y"}})),
        1,
    );
    assert_eq!(st.current_rv(), cur);
    st.apply_list(Resource::Services, texts(&[]), 1);
    st.apply_list(Resource::Endpoints, texts(&[]), 1);
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
        Resource::Services,
        Change::upsert(&fx.services[0].clone()),
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
        Resource::Services,
        Change::delete(&fx.services[0].clone()),
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
    st.apply(Resource::Nodes, Change::upsert(&n2), 1);
    assert!(events(&st, Resource::Endpoints, cur).is_empty());
    // Other nodes are not served (held as facts): no Node event, no RV.
    assert!(events(&st, Resource::Nodes, cur).is_empty());
    assert_eq!(served(&st, Resource::Nodes, "", "n2"), Value::Null);
    assert_eq!(st.current_rv(), cur);
}

#[test]
fn case_20_21_node_deleted_and_back_and_local_node_deleted() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::delete(&node("n1", &labels(&[]))),
        1,
    );
    relabel(&mut st, "n1", &[("zone", "a")]);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!(ev.len(), 2);
    assert_eq!(ips(&ev[0].3), strs(&["10.0.0.1"]));
    assert_eq!(ips(&ev[1].3), strs(&["10.0.0.1", "10.0.0.2"]));
    // Case 21: the local node goes; a normal service is untouched.
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "plain", None)),
        1,
    );
    st.apply(
        Resource::Endpoints,
        Change::upsert(&endpoints("default", "plain", f_addresses())),
        1,
    );
    let cur = st.current_rv();
    st.apply(Resource::Nodes, Change::delete(&node("h", &labels(&[]))), 1);
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
        Resource::Endpoints,
        Change::delete(&fx.endpoints[0].clone()),
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
    st.apply_list(Resource::Services, texts(&fx.services), 1);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 1);
    st.apply_list(Resource::Nodes, texts(&fx.node_objects()), 1);
    // A different upstream RV alone is no change either.
    let mut svc = fx.services[0].clone();
    svc["metadata"]["resourceVersion"] = json!("999");
    st.apply(Resource::Services, Change::upsert(&svc), 1);
    assert_eq!(st.current_rv(), cur);
}

#[test]
fn case_24_25_key_set_semantics() {
    let mut st = load(&fixture_f());
    let cur = st.current_rv();
    let svc = service("default", "s", Some(r#"[ "zone", "zone" ]"#));
    st.apply(Resource::Services, Change::upsert(&svc), 1);
    assert_eq!(events(&st, Resource::Services, cur).len(), 1);
    assert!(
        events(&st, Resource::Endpoints, cur).is_empty(),
        "same key set"
    );
    let cur = st.current_rv();
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "s", Some("[zone"))),
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
    st.apply_list(Resource::SlicesV1, texts(&[a, b]), 1);
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "s-aaaaa")),
        strs(&["10.0.0.2"])
    );
    assert!(slice_ips(&served(&st, Resource::SlicesV1, "default", "s-bbbbb")).is_empty());
    let cur = st.current_rv();
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "s", None)),
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

/// A tiny deterministic generator for the oracle tests.
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

mod as_is;
mod cidrs;
mod edge_health;
mod fallback;
mod forms;
mod intake;
mod kept;
mod lifecycle;
mod node_facts;
mod persist;
mod relay;
mod runtime;
mod stale;
mod v1beta1;
mod watched;
