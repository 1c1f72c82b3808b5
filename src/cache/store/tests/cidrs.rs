//! ServiceCIDRs (docs/SEMANTICS.md §5): one upstream version served in both, with this
//! process's RVs and one event per version per change; the sync waits for them only when the
//! upstream has them; not admission-filtered; kept in the snapshot.

use serde_json::{json, Value};

use super::super::State;
use crate::cache::store::test_support::{list_all_empty, state, texts, Whole};
use crate::handoff::Change;
use crate::k8s::{ObjectKey, Resource};

fn cidr(version: &str, name: &str, cidrs: &[&str], labels: Value) -> Value {
    json!({"apiVersion": format!("networking.k8s.io/{version}"), "kind": "ServiceCIDR",
        "metadata": {"name": name, "resourceVersion": "5", "labels": labels},
        "spec": {"cidrs": cidrs}})
}

fn kubernetes(version: &str) -> Value {
    cidr(version, "kubernetes", &["10.96.0.0/12"], json!({}))
}

/// The served object `name` of `res`, and its RV.
fn served(st: &State, res: Resource, name: &str) -> Option<(Value, u64)> {
    let c = st.collection(res);
    let s = c.get(&ObjectKey::new("", name))?;
    Some((serde_json::from_slice(&s.json()).expect("JSON"), s.rv))
}

/// A cache that mirrors `kind` and has listed every resource (`items` as the ServiceCIDRs).
fn synced(kind: Resource, items: Vec<Value>) -> State {
    let mut st = state("edge-1", 1000);
    st.expect_cidrs(Some(kind), 0);
    list_all_empty(&mut st);
    assert!(!st.is_ready(), "the sync waits for the ServiceCIDRs");
    assert!(!st.serves_cidrs());
    let done = st.apply_list(kind, texts(&items), 0);
    assert!(done.became_ready && st.is_ready() && st.serves_cidrs());
    st
}

#[test]
fn servicecidrs_are_served_in_both_versions_with_own_rvs_and_one_event_each() {
    let mut st = synced(Resource::CidrsV1, vec![kubernetes("v1")]);
    for res in [Resource::CidrsV1, Resource::CidrsV1beta1] {
        let (obj, rv) = served(&st, res, "kubernetes").expect("served");
        assert_eq!(obj["apiVersion"], res.api_version());
        assert_eq!(obj["kind"], "ServiceCIDR");
        assert_eq!(obj["spec"]["cidrs"], json!(["10.96.0.0/12"]));
        assert_eq!(obj["metadata"]["resourceVersion"], rv.to_string());
        assert!(rv > 1000, "this process's RV, not the upstream's 5");
    }
    // A change: one new RV and one log entry per version, v1 first.
    let before = st.current_rv();
    let grown = cidr(
        "v1",
        "kubernetes",
        &["10.96.0.0/12", "fd00::/108"],
        json!({}),
    );
    assert_eq!(
        st.apply(Resource::CidrsV1, Change::upsert(&grown), 1)
            .events,
        2
    );
    let (v1, rv1) = served(&st, Resource::CidrsV1, "kubernetes").expect("v1");
    let (beta, rv2) = served(&st, Resource::CidrsV1beta1, "kubernetes").expect("v1beta1");
    assert_eq!((rv1, rv2), (before + 1, before + 2));
    assert_eq!(v1["spec"], beta["spec"]);
    // The same object again: nothing.
    let again = cidr(
        "v1",
        "kubernetes",
        &["10.96.0.0/12", "fd00::/108"],
        json!({}),
    );
    assert_eq!(
        st.apply(Resource::CidrsV1, Change::upsert(&again), 2)
            .events,
        0
    );
    // A deletion reaches both versions.
    let gone = st.apply(Resource::CidrsV1, Change::delete(&kubernetes("v1")), 3);
    assert_eq!(gone.events, 2);
    for res in [Resource::CidrsV1, Resource::CidrsV1beta1] {
        assert!(served(&st, res, "kubernetes").is_none(), "{res:?}");
        assert_eq!(
            st.collection(res).log_len(),
            2,
            "{res:?}: modified, deleted"
        );
    }
}

#[test]
fn a_v1beta1_upstream_is_served_as_v1_too_and_the_other_version_is_ignored() {
    let mut st = synced(Resource::CidrsV1beta1, vec![kubernetes("v1beta1")]);
    let (v1, _) = served(&st, Resource::CidrsV1, "kubernetes").expect("v1");
    assert_eq!(v1["apiVersion"], "networking.k8s.io/v1");
    let rv = st.current_rv();
    let other = cidr("v1", "other", &["10.0.0.0/16"], json!({}));
    assert_eq!(
        st.apply(Resource::CidrsV1, Change::upsert(&other), 1)
            .events,
        0
    );
    assert_eq!(st.current_rv(), rv);
}

#[test]
fn an_upstream_without_servicecidrs_does_not_hold_the_sync_and_none_are_served() {
    let mut st = state("edge-1", 1);
    list_all_empty(&mut st);
    assert!(st.is_ready(), "no ServiceCIDRs expected");
    assert!(!st.serves_cidrs(), "requests for them are proxied");
    let ignored = st.apply(Resource::CidrsV1, Change::upsert(&kubernetes("v1")), 0);
    assert_eq!(ignored.events, 0);
    assert_eq!(st.collection(Resource::CidrsV1).len(), 0);
}

#[test]
fn learning_the_upstream_has_none_ends_the_wait_for_them() {
    let mut st = state("edge-1", 1);
    st.expect_cidrs(Some(Resource::CidrsV1), 0);
    list_all_empty(&mut st);
    assert!(!st.is_ready());
    let done = st.expect_cidrs(None, 0);
    assert!(done.became_ready && st.is_ready());
    // Told again: nothing more happens.
    assert_eq!(st.expect_cidrs(None, 0), Default::default());
}

#[test]
fn servicecidrs_are_cached_whole_whatever_their_labels() {
    let labelled = cidr(
        "v1",
        "extra",
        &["10.100.0.0/16"],
        json!({"service.kubernetes.io/service-proxy-name": "other"}),
    );
    let mut st = synced(Resource::CidrsV1, vec![labelled.clone()]);
    assert!(served(&st, Resource::CidrsV1, "extra").is_some());
    // A watch event with the label is an update, not a deletion.
    let mut changed = labelled;
    changed["spec"]["cidrs"] = json!(["10.101.0.0/16"]);
    assert_eq!(
        st.apply(Resource::CidrsV1, Change::upsert(&changed), 1)
            .events,
        2
    );
    assert!(served(&st, Resource::CidrsV1beta1, "extra").is_some());
}

#[test]
fn the_snapshot_keeps_them_and_a_restart_serves_them() {
    let online = synced(Resource::CidrsV1, vec![kubernetes("v1")]);
    let export = online.export().whole().expect("whole");
    assert_eq!(export.cidrs.len(), 1);
    let mut restored = state("edge-1", 5000);
    restored.expect_cidrs(Some(Resource::CidrsV1), 0);
    assert!(restored.restore(export.clone(), Resource::SlicesV1, 0));
    assert!(restored.is_ready() && restored.serves_cidrs() && restored.serving_snapshot());
    let (obj, rv) = served(&restored, Resource::CidrsV1beta1, "kubernetes").expect("served");
    assert_eq!(obj["spec"]["cidrs"], json!(["10.96.0.0/12"]));
    assert!(rv > 5000);
    // Synced with the upstream only once the ServiceCIDRs listed too.
    list_all_empty(&mut restored);
    assert!(restored.serving_snapshot());
    let done = restored.apply_list(Resource::CidrsV1, texts(&[kubernetes("v1")]), 1);
    assert!(done.upstream_synced && !restored.serving_snapshot());
    assert_eq!(done.events, 0, "the same ServiceCIDR: no event");
    // A process whose upstream has none (or a snapshot that does not say) does not serve them.
    let mut without = state("edge-1", 5000);
    assert!(without.restore(export, Resource::SlicesV1, 0));
    assert!(!without.serves_cidrs());
    assert_eq!(without.collection(Resource::CidrsV1).len(), 0);
}
