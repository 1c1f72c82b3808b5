//! The relay view (`--relay-bind-address`): the upstream's objects unpruned, with RVs of the one
//! counter; changed by upstream changes only, never by a recomputation (docs/SEMANTICS.md §12).

use std::sync::Arc;

use serde_json::Value;

use super::super::test_support::{self, texts};
use super::super::State;
use crate::cache::published::View;
use crate::cache::topology::fixtures::*;
use crate::handoff::Change;
use crate::k8s::{ObjectKey, Resource};

/// Fixture T with a slice per Service, each with an endpoint on every node.
fn slices() -> Vec<Value> {
    ["region-1", "no-region"]
        .iter()
        .enumerate()
        .map(|(i, svc)| {
            let eps = [("1", "hostname"), ("2", "node-1"), ("3", "node-2")]
                .iter()
                .map(|(n, node)| slice_endpoint_v1(&format!("10.{i}.0.{n}"), Some(node), None))
                .collect();
            slice_v1("default", &format!("{svc}-abc"), Some(svc), eps)
        })
        .collect()
}

/// A ready cache of fixture T and [`slices`], keeping a relay view.
fn relaying() -> (State, View) {
    let fx = fixture_t();
    let mut st = test_support::state(&fx.hostname, 1_000);
    st.keep_relay_view();
    st.apply_list(Resource::Nodes, texts(&fx.node_objects()), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    assert!(
        st.apply_list(Resource::SlicesV1, texts(&slices()), 0)
            .became_ready
    );
    let relay = st.relay_view().expect("a relay view is kept");
    (st, relay)
}

fn get(view: &View, res: Resource, name: &str) -> Option<Value> {
    let view = view.read();
    let served = view.collection(res).get(&ObjectKey::new("default", name))?;
    serde_json::from_slice(&served.json()).ok()
}

fn log_len_after(view: &View, res: Resource, rv: u64) -> usize {
    view.read()
        .collection(res)
        .after(rv, usize::MAX)
        .map_or(usize::MAX, |e| e.len())
}

#[test]
fn no_relay_view_unless_asked() {
    let st = test_support::state("h", 1);
    assert!(st.relay_view().is_none());
}

#[test]
fn relay_view_serves_every_endpoint_the_local_view_prunes() {
    let (st, relay) = relaying();
    assert!(relay.read().is_ready(), "ready with the readers' view");
    let local = st.view();
    // Endpoints: the local view keeps region 1, the relay view every address.
    let pruned = get(&local, Resource::Endpoints, "region-1").expect("served");
    let whole = get(&relay, Resource::Endpoints, "region-1").expect("relayed");
    assert_eq!(ips(&pruned), strs(&["127.0.0.1", "127.0.0.2"]));
    assert_eq!(ips(&whole), strs(&["127.0.0.1", "127.0.0.2", "127.0.0.3"]));
    // v1 slices the same (the list's fast path).
    let pruned = get(&local, Resource::SlicesV1, "region-1-abc").expect("served");
    let whole = get(&relay, Resource::SlicesV1, "region-1-abc").expect("relayed");
    assert_eq!(slice_ips(&pruned), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(
        slice_ips(&whole),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    assert_eq!(whole["apiVersion"], "discovery.k8s.io/v1");
    assert_ne!(
        whole["metadata"]["resourceVersion"], "9",
        "the relay's own RV"
    );
    // What is served unpruned is the very same shared object in both views; so are Nodes and
    // Services.
    for (res, name) in [
        (Resource::SlicesV1, "no-region-abc"),
        (Resource::Endpoints, "no-region"),
        (Resource::Services, "region-1"),
    ] {
        let key = ObjectKey::new("default", name);
        let a = local
            .read()
            .collection(res)
            .get(&key)
            .cloned()
            .expect("served");
        let b = relay
            .read()
            .collection(res)
            .get(&key)
            .cloned()
            .expect("relayed");
        assert!(Arc::ptr_eq(&a, &b), "{res:?} {name} shared");
    }
    assert_eq!(relay.read().collection(Resource::Nodes).len(), 3);
}

#[test]
fn a_recomputation_leaves_the_relay_view_alone() {
    let (mut st, relay) = relaying();
    let before = st.current_rv();
    // The local node moves to region 2: the local view's topology objects change...
    st.apply(
        Resource::Nodes,
        Change::upsert(&node("hostname", &labels(&[("region", "2")]))),
        1,
    );
    let local = st.view();
    assert_eq!(
        ips(&get(&local, Resource::Endpoints, "region-1").expect("served")),
        strs(&["127.0.0.1", "127.0.0.3"])
    );
    assert_eq!(log_len_after(&local, Resource::Endpoints, before), 1);
    // ...the relay view gets the node's change and nothing else.
    assert_eq!(log_len_after(&relay, Resource::Nodes, before), 1);
    assert_eq!(log_len_after(&relay, Resource::Endpoints, before), 0);
    assert_eq!(log_len_after(&relay, Resource::SlicesV1, before), 0);
}

#[test]
fn an_upstream_change_is_one_relay_event_and_a_deletion_another() {
    let (mut st, relay) = relaying();
    let before = st.current_rv();
    // A pruned-away address changes: nothing for the local view, one event for the relay's.
    let mut ep = fixture_t().endpoints_of("default", "region-1").clone();
    ep["subsets"][0]["addresses"][2]["ip"] = "127.0.0.9".into();
    st.apply(Resource::Endpoints, Change::upsert(&ep.clone()), 1);
    let local = st.view();
    assert_eq!(log_len_after(&local, Resource::Endpoints, before), 0);
    assert_eq!(log_len_after(&relay, Resource::Endpoints, before), 1);
    let whole = get(&relay, Resource::Endpoints, "region-1").expect("relayed");
    assert!(ips(&whole).contains(&"127.0.0.9".to_string()));
    let rv: u64 = whole["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        rv > before && rv == st.current_rv(),
        "an RV of the one counter"
    );
    assert_eq!(relay.read().current_rv(), rv);
    // The same again: nothing.
    st.apply(Resource::Endpoints, Change::upsert(&ep.clone()), 1);
    assert_eq!(log_len_after(&relay, Resource::Endpoints, before), 1);
    // A slice deleted upstream: DELETED in both views.
    let gone = slices().remove(0);
    let at = st.current_rv();
    st.apply(Resource::SlicesV1, Change::delete(&gone), 2);
    assert!(get(&relay, Resource::SlicesV1, "region-1-abc").is_none());
    assert_eq!(log_len_after(&relay, Resource::SlicesV1, at), 1);
    assert_eq!(log_len_after(&local, Resource::SlicesV1, at), 1);
}

#[test]
fn a_restored_snapshot_fills_the_relay_view() {
    let (st, _) = relaying();
    let exported = st.export();
    let objects = test_support::Whole::whole(&exported).expect("whole");
    let mut again = test_support::state("hostname", 5_000);
    again.keep_relay_view();
    assert!(again.restore(objects, Resource::SlicesV1, 0));
    let relay = again.relay_view().expect("kept");
    assert!(relay.read().is_ready());
    let whole = get(&relay, Resource::SlicesV1, "region-1-abc").expect("relayed");
    assert_eq!(
        slice_ips(&whole),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    assert_eq!(
        ips(&get(&relay, Resource::Endpoints, "region-1").expect("relayed")).len(),
        3
    );
}

#[test]
fn the_relay_view_names_the_slice_version_the_upstream_has_even_before_any_slice() {
    let mut st = test_support::state("h", 1);
    st.keep_relay_view();
    let relay = st.relay_view().expect("kept");
    st.expect_slices(Resource::SlicesV1beta1);
    assert!(
        relay.read().serves_v1beta1(),
        "an upstream with v1beta1 only"
    );
    st.apply_list(Resource::SlicesV1beta1, texts(&[]), 0);
    assert!(relay.read().serves_v1beta1());
    st.expect_slices(Resource::SlicesV1);
    assert!(!relay.read().serves_v1beta1(), "back to v1");
}
