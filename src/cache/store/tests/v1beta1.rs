//! v1beta1 EndpointSlices on demand: nothing is spent on them until asked for, and what is
//! built then equals what serving them all along would have served.
use serde_json::{json, Value};

use super::super::test_support;
use super::*;
use crate::handoff::Change;

/// Fixture F with two v1 slices of `default/s` (topology) and one of a Service without keys.
fn slices() -> Vec<Value> {
    let ep = |ip: &str, node: &str| slice_endpoint_v1(ip, Some(node), None);
    vec![
        slice_v1(
            "default",
            "s-a",
            Some("s"),
            vec![ep("10.0.0.1", "h"), ep("10.0.0.3", "n2")],
        ),
        slice_v1("default", "s-b", Some("s"), vec![ep("10.0.0.2", "n1")]),
        slice_v1(
            "default",
            "other-a",
            Some("other"),
            vec![ep("10.1.0.1", "n2")],
        ),
    ]
}

fn loaded() -> State {
    let mut fx = fixture_f();
    fx.services.push(service("default", "other", None));
    test_support::loaded(&fx, 1_000, Resource::SlicesV1, slices())
}

/// The served v1beta1 objects, without their resourceVersions.
fn beta_content(st: &State) -> Vec<Value> {
    st.collection(Resource::SlicesV1beta1)
        .objects()
        .map(|o| {
            let mut v: Value = serde_json::from_slice(&o.json()).unwrap_or_default();
            if let Some(meta) = v["metadata"].as_object_mut() {
                meta.remove("resourceVersion");
            }
            v
        })
        .collect()
}

fn relabel_local(st: &mut State, zone: &str) -> usize {
    let h = node("h", &labels(&[("zone", zone)]));
    st.apply(Resource::Nodes, Change::upsert(&h), 1).events
}

#[test]
fn nothing_is_spent_on_v1beta1_until_it_is_asked_for() {
    let mut lazy = loaded();
    let mut eager = loaded();
    eager.serve_v1beta1();
    let facts = eager.shared_facts().load();
    assert_eq!(facts.objects(Resource::SlicesV1beta1), 3, "{facts:?}");
    assert_eq!(facts, eager.facts(), "the health listener's figures");
    assert!(!lazy.serves_v1beta1());
    assert!(lazy.collection(Resource::SlicesV1beta1).is_empty());
    assert_eq!(lazy.collection(Resource::SlicesV1).len(), 3);
    // A relabel of the local node changes the node, the Endpoints `default/s` and both
    // topology slices: one RV per slice while only v1 is served, two once v1beta1 is.
    assert_eq!(relabel_local(&mut lazy, "b"), 1 + 1 + 2);
    assert_eq!(relabel_local(&mut eager, "b"), 1 + 1 + 2 * 2);
    assert!(lazy.collection(Resource::SlicesV1beta1).is_empty());
    assert_eq!(lazy.collection(Resource::SlicesV1beta1).log_len(), 0);
}

#[test]
fn v1beta1_built_on_demand_equals_v1beta1_served_all_along() {
    let mut fx = fixture_f();
    fx.services.push(service("default", "other", None));
    let mut eager = test_support::state("h", 1_000);
    eager.serve_v1beta1();
    for (kind, items) in [
        (Resource::Nodes, fx.node_objects()),
        (Resource::Services, fx.services.clone()),
        (Resource::Endpoints, fx.endpoints.clone()),
        (Resource::SlicesV1, slices()),
    ] {
        eager.apply_list(kind, test_support::texts(&items), 0);
    }
    let mut lazy = loaded();
    relabel_local(&mut lazy, "b");
    relabel_local(&mut eager, "b");

    let before = lazy.current_rv();
    lazy.serve_v1beta1();
    assert_eq!(
        lazy.current_rv(),
        before,
        "building spends no resourceVersion"
    );
    assert_eq!(beta_content(&lazy), beta_content(&eager));
    assert_eq!(beta_content(&lazy).len(), 3);
    let coll = lazy.collection(Resource::SlicesV1beta1);
    assert!(coll.objects().all(|o| o.rv == before));
    assert_eq!(coll.horizon(), before);
    assert_eq!(coll.log_len(), 0);
    // A v1beta1 watch from before the build cannot be resumed; one from its RV can.
    assert!(coll.after(before - 1, 10).is_err());
    assert_eq!(coll.after(before, 10).map(|v| v.len()), Ok(0));
    drop(coll);

    // From now on both versions follow every change, as if served all along.
    assert_eq!(relabel_local(&mut lazy, "a"), 1 + 1 + 2 * 2);
    relabel_local(&mut eager, "a");
    assert_eq!(beta_content(&lazy), beta_content(&eager));
    let events = lazy
        .collection(Resource::SlicesV1beta1)
        .after(before, 10)
        .unwrap_or_default();
    let names: Vec<&str> = events
        .iter()
        .filter_map(|e| e.new.as_ref().map(|n| &*n.key.name))
        .collect();
    assert_eq!(names, ["s-a", "s-b"]);
    let gone = json!({"metadata": {"namespace": "default", "name": "other-a"}});
    lazy.apply(Resource::SlicesV1, Change::delete(&gone), 2);
    assert_eq!(lazy.collection(Resource::SlicesV1beta1).len(), 2);
    // A second call changes nothing.
    let rv = lazy.current_rv();
    lazy.serve_v1beta1();
    assert_eq!(lazy.collection(Resource::SlicesV1beta1).len(), 2);
    assert_eq!(lazy.current_rv(), rv);
}
