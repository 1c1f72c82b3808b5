//! Objects over the object bound (docs/SEMANTICS.md §7, "Objects over `--max-object-bytes`"):
//! a refused version of an object the cache holds keeps the last accepted one served (stale,
//! its RV unchanged, no event), counted in the facts and listed; a version within the bound
//! replaces it, a deletion deletes it, and a new object over the bound stays out.

use super::*;
use crate::cache::store::test_support::Whole;
use crate::handoff::{Change, Oversized};

fn too_big(ns: &str, name: &str) -> Oversized {
    Oversized {
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        name: Some(name.to_string()),
        bytes: 5_000_000,
    }
}

fn stale_nodes(st: &State) -> u64 {
    st.facts().stale(Resource::Nodes)
}

#[test]
fn an_oversized_update_of_the_local_node_keeps_it_served_and_the_topology_as_it_was() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let before_rv = st.current_rv();
    let node = served(&st, Resource::Nodes, "", "h");
    let eps = served(&st, Resource::Endpoints, "default", "s");
    assert_ne!(node, Value::Null);

    let applied = st.apply(Resource::Nodes, Change::Oversized(too_big("", "h")), 5);

    assert_eq!(applied.events, 0, "no event");
    assert_eq!(st.current_rv(), before_rv, "no RV spent");
    assert_eq!(
        served(&st, Resource::Nodes, "", "h"),
        node,
        "the Node still served"
    );
    assert_eq!(
        served(&st, Resource::Endpoints, "default", "s"),
        eps,
        "the topology Service's endpoints unchanged"
    );
    assert_eq!(stale_nodes(&st), 1);
    assert_eq!(st.shared_facts().load().stale(Resource::Nodes), 1);
    let (listed, total) = st.stale_objects(10);
    assert_eq!(total, 1);
    assert_eq!(listed[0].key, ObjectKey::new("", "h"));
    assert_eq!(listed[0].mark.served_rv, rv_of(&node));
    assert_eq!(listed[0].mark.bytes, 5_000_000);
    // Another oversized version: still one stale object.
    st.apply(Resource::Nodes, Change::Oversized(too_big("", "h")), 6);
    assert_eq!((stale_nodes(&st), st.current_rv()), (1, before_rv));
    // The snapshot keeps the last good version.
    let exported = st.export().whole().expect("whole");
    assert!(exported
        .nodes
        .iter()
        .any(|b| serde_json::from_slice::<Value>(b).unwrap()["metadata"]["name"] == "h"));

    // A version within the bound replaces it and clears the mark.
    let mut relabelled = node_objects_named(&fx, "h");
    relabelled["metadata"]["labels"]["extra"] = json!("1");
    st.apply(Resource::Nodes, Change::upsert(&relabelled), 7);
    assert_eq!(stale_nodes(&st), 0);
    assert_eq!(
        served(&st, Resource::Nodes, "", "h")["metadata"]["labels"]["extra"],
        "1"
    );
    assert_eq!(st.stale_objects(10).1, 0);
}

/// The fixture's Node `name` as the upstream sends it.
fn node_objects_named(fx: &Fixture, name: &str) -> Value {
    fx.node_objects()
        .into_iter()
        .find(|n| n["metadata"]["name"] == name)
        .expect("a fixture node")
}

#[test]
fn a_version_within_the_bound_equal_to_the_served_one_clears_the_mark() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.apply(Resource::Nodes, Change::Oversized(too_big("", "n1")), 1);
    assert_eq!(stale_nodes(&st), 1);
    let rv = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&node_objects_named(&fx, "n1")),
        2,
    );
    assert_eq!((stale_nodes(&st), st.current_rv()), (0, rv), "no event");
}

#[test]
fn a_deletion_of_a_stale_object_deletes_it() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.apply(Resource::Nodes, Change::Oversized(too_big("", "h")), 1);
    let cursor = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::delete(&node_objects_named(&fx, "h")),
        2,
    );
    assert_eq!(served(&st, Resource::Nodes, "", "h"), Value::Null);
    assert_eq!(stale_nodes(&st), 0);
    let evs = events(&st, Resource::Nodes, cursor);
    assert_eq!(evs.len(), 1);
    assert_eq!((evs[0].0, evs[0].1.as_str()), ("DELETED", "h"));
}

#[test]
fn a_new_object_over_the_bound_stays_out() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let rv = st.current_rv();
    st.apply(
        Resource::Services,
        Change::Oversized(too_big("default", "huge")),
        1,
    );
    assert_eq!(
        served(&st, Resource::Services, "default", "huge"),
        Value::Null
    );
    assert_eq!(st.current_rv(), rv);
    assert_eq!(st.facts().stale(Resource::Services), 0);
}

/// A relist whose item for a held key is over the bound: the key is not absent from the list
/// (no `DELETED`), the last version stays served, stale; the next relist within the bound
/// replaces it. A new key over the bound stays out.
#[test]
fn a_relist_item_over_the_bound_keeps_the_held_version() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let node = served(&st, Resource::Nodes, "", "h");
    let eps = served(&st, Resource::Endpoints, "default", "s");
    let cursor = st.current_rv();
    let relist = |st: &State, big: &[&str]| {
        let mut list = st.list_preparer(Resource::Nodes);
        for n in fx.node_objects() {
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            if big.contains(&name) {
                list.skipped(&too_big("", name));
            } else {
                list.push(&n.to_string());
            }
        }
        list.skipped(&too_big("", "brand-new"));
        list.finish()
    };
    let prepared = relist(&st, &["h"]);
    let applied = st.apply_prepared(Resource::Nodes, prepared, 3);
    assert_eq!(applied.events, 0, "no DELETED, no event");
    assert_eq!(served(&st, Resource::Nodes, "", "h"), node);
    assert_eq!(served(&st, Resource::Nodes, "", "brand-new"), Value::Null);
    assert_eq!(served(&st, Resource::Endpoints, "default", "s"), eps);
    assert_eq!(stale_nodes(&st), 1);
    assert!(events(&st, Resource::Nodes, cursor).is_empty());

    let prepared = relist(&st, &[]);
    st.apply_prepared(Resource::Nodes, prepared, 4);
    assert_eq!(stale_nodes(&st), 0);
    assert_eq!(served(&st, Resource::Nodes, "", "h"), node);
}
