//! How the cache keeps upstream objects, seen through [`State`]: kept only where the served
//! bytes differ, packed there, the packed copy kept through a relabel, and list items without
//! type meta not kept twice; what is read back is always what was listed.

use crate::cache::store::test_support::Whole;
use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::cache::store::upstream::Stored;
use crate::handoff::Change;

#[test]
fn upstream_bytes_are_kept_only_where_served_content_differs() {
    let (fx, slices) = fixture_with_plain_service();
    let mut st = test_support::watched(&fx, 1, Resource::SlicesV1, slices.clone());
    // Watch events' objects come prepared as a list's items do: a pruned one packed on the
    // reflector's thread, nothing left for the writer to pack.
    let s_a = ObjectKey::new("default", "s-a");
    let own = |st: &State| {
        matches!(
            st.upstream.get(Resource::SlicesV1, &s_a),
            Some(Stored::Own(_))
        )
    };
    assert!(!own(&st));
    assert_eq!(st.pack_pending(usize::MAX), 0);
    let kept = |st: &State, kind, ns: &str, name: &str| {
        matches!(
            st.upstream.get(kind, &ObjectKey::new(ns, name)),
            Some(Stored::Packed(_))
        )
    };
    // Served as they came (but for the RV): not kept twice.
    assert!(!kept(&st, Resource::Nodes, "", "n2"));
    assert!(!kept(&st, Resource::Services, "default", "s"));
    assert!(!kept(&st, Resource::SlicesV1, "default", "plain-a"));
    // Pruned by topology: the upstream bytes are needed to recompute.
    assert!(kept(&st, Resource::Endpoints, "default", "s"));
    assert!(kept(&st, Resource::SlicesV1, "default", "s-a"));

    // Whatever is kept where, the upstream objects read back are exactly the ones listed.
    let expect = |kind, items: Vec<Value>| -> Vec<Raw> {
        fresh(kind, items.into_iter()).into_values().collect()
    };
    let check = |st: &State| {
        let out = st.export().whole().expect("whole");
        assert_eq!(out.nodes, expect(Resource::Nodes, fx.node_objects()));
        assert_eq!(
            out.services,
            expect(Resource::Services, fx.services.clone())
        );
        assert_eq!(
            out.endpoints,
            expect(Resource::Endpoints, fx.endpoints.clone())
        );
        assert_eq!(out.slices, expect(Resource::SlicesV1, slices.clone()));
    };
    check(&st);

    // n2 becomes abnormal (edge-health): `plain` is now pruned too, so its upstream bytes
    // are kept again; once n2 is back they are dropped again, and nothing was lost.
    st.set_edge_health([("n2".to_string(), false)].into_iter().collect(), 1);
    st.pack_pending(usize::MAX);
    assert!(kept(&st, Resource::SlicesV1, "default", "plain-a"));
    assert!(kept(&st, Resource::Endpoints, "default", "plain"));
    check(&st);
    st.set_edge_health(BTreeMap::new(), 2);
    assert!(!kept(&st, Resource::SlicesV1, "default", "plain-a"));
    check(&st);
    // An identical relist changes nothing; a real change is seen.
    let rv = st.current_rv();
    st.apply_list(Resource::Services, texts(&fx.services), 3);
    assert_eq!(st.current_rv(), rv);
    let mut changed = service("default", "plain", None);
    changed["spec"]["clusterIP"] = json!("10.96.9.9");
    st.apply(Resource::Services, Change::upsert(&changed), 3);
    assert_eq!(st.current_rv(), rv + 1);
}

/// A listed endpoint object that is served pruned is packed as its list is decoded, and
/// a local relabel that recomputes it keeps that packed copy (the upstream object did not
/// change) instead of unpacking it and packing it again.
#[test]
fn a_relabel_keeps_the_packed_copy_of_an_unchanged_pruned_object() {
    let fx = fixture_f();
    let ep = |ip: &str, node: &str| slice_endpoint_v1(ip, Some(node), None);
    let slices = vec![slice_v1(
        "default",
        "s-a",
        Some("s"),
        vec![
            ep("10.0.0.1", "h"),
            ep("10.0.0.2", "n1"),
            ep("10.0.0.3", "n2"),
        ],
    )];
    let listed = |objs: &[Value]| test_support::texts(objs);
    let mut st = test_support::state(&fx.hostname, 1);
    st.apply_list(Resource::Nodes, listed(&fx.node_objects()), 0);
    st.apply_list(Resource::Services, listed(&fx.services), 0);
    st.apply_list(Resource::Endpoints, listed(&fx.endpoints), 0);
    st.apply_list(Resource::SlicesV1, listed(&slices), 0);
    assert!(st.is_ready());
    let key = ObjectKey::new("default", "s-a");
    let packed = |st: &State| match st.upstream.get(Resource::SlicesV1, &key) {
        Some(Stored::Packed(p)) => Some(p.clone()),
        _ => None,
    };
    let before = packed(&st).expect("packed while its list was decoded");
    assert_eq!(
        st.pack_pending(usize::MAX),
        0,
        "nothing left to pack after a list"
    );
    let served_ips = |st: &State| {
        let s = st
            .collection(Resource::SlicesV1)
            .get(&key)
            .expect("served")
            .json();
        let v: Value = serde_json::from_slice(&s).expect("served JSON");
        v["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .map(|e| e["addresses"][0].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(served_ips(&st), vec![json!("10.0.0.1"), json!("10.0.0.2")]);
    // h moves to zone b: the slice is recomputed (n2's endpoint for n1's), still pruned.
    st.apply(
        Resource::Nodes,
        Change::upsert(&node("h", &labels(&[("zone", "b")]))),
        1,
    );
    assert_eq!(served_ips(&st), vec![json!("10.0.0.1"), json!("10.0.0.3")]);
    let after = packed(&st).expect("still packed");
    assert!(after.is_same(&before), "the packed copy was made again");
    assert_eq!(st.pack_pending(usize::MAX), 0);
    let out = st.export().whole().expect("whole");
    assert_eq!(
        out.slices,
        fresh(Resource::SlicesV1, slices.into_iter())
            .into_values()
            .collect::<Vec<_>>()
    );
}

/// An apiserver sends list items without `kind`/`apiVersion` (kubernetes/kubernetes#63676):
/// they are filled in before comparing, so a listed object served as it came is not kept
/// a second time, and a later watch event of the same object (which carries them) is no
/// change.
#[test]
fn list_items_without_type_meta_are_not_kept_twice() {
    let fx = fixture_f();
    let bare = |objs: Vec<Value>| -> Vec<String> {
        objs.into_iter()
            .map(|mut o| {
                let map = o.as_object_mut().expect("fixture objects are objects");
                map.remove("kind");
                map.remove("apiVersion");
                o.to_string()
            })
            .collect()
    };
    let mut st = test_support::state(&fx.hostname, 1);
    st.apply_list(Resource::Nodes, bare(fx.node_objects()), 0);
    st.apply_list(Resource::Services, bare(fx.services.clone()), 0);
    st.apply_list(Resource::Endpoints, bare(fx.endpoints.clone()), 0);
    st.apply_list(Resource::SlicesV1, test_support::texts(&[]), 0);
    assert!(st.is_ready());
    // The local node is served whole and kept once; the others are kept as facts only.
    for node in fx.node_objects() {
        let key = ObjectKey::of(&node).expect("named");
        let stored = st.upstream.get(Resource::Nodes, &key);
        if *key.name == *fx.hostname {
            assert!(
                matches!(stored, Some(Stored::AsServed)),
                "node {key} is kept as well as served"
            );
        } else {
            assert!(matches!(stored, Some(Stored::Own(_))), "node {key}");
        }
    }
    let svc = fx.services[0].clone();
    let key = ObjectKey::of(&svc).expect("named");
    assert!(matches!(
        st.upstream.get(Resource::Services, &key),
        Some(Stored::AsServed)
    ));
    // The same object from a watch (with its type meta): nothing changed, no new RV.
    let rv = st.current_rv();
    st.apply(Resource::Services, Change::upsert(&svc), 1);
    assert_eq!(st.current_rv(), rv);
    // What is exported for the disk carries them too.
    let out = st.export().whole().expect("whole");
    let first: Value = serde_json::from_slice(&out.services[0]).expect("exported JSON");
    assert_eq!(first["kind"], "Service");
    assert_eq!(first["apiVersion"], "v1");
}
