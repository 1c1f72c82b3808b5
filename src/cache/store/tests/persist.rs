//! Restoring a snapshot: the restored view is the view the lists would build (with this
//! process's RVs), the cache is ready at once and marked as serving the snapshot until every
//! kind has listed, and the upstream's lists are diffed against it.

use crate::cache::store::test_support::Whole;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::super::{fresh, Listed, Prepared, State};
use crate::cache::topology::fixtures::*;
use crate::k8s::Resource;

use crate::cache::store::test_support::{self, state, texts};

/// Fixture T plus slices for both Services (one of them on nodes of both regions).
fn world() -> (Fixture, Vec<Value>) {
    let fx = fixture_t();
    let slices = vec![
        slice_v1(
            "default",
            "region-1-abc",
            Some("region-1"),
            vec![
                slice_endpoint_v1("127.0.0.1", Some("hostname"), None),
                slice_endpoint_v1("127.0.0.3", Some("node-2"), None),
            ],
        ),
        slice_v1(
            "default",
            "no-region-xyz",
            Some("no-region"),
            vec![slice_endpoint_v1("127.0.2.3", Some("node-2"), None)],
        ),
    ];
    (fx, slices)
}

fn listed(fx: &Fixture, slices: &[Value], seed: u64) -> State {
    let st = test_support::loaded(fx, seed, Resource::SlicesV1, slices.to_vec());
    assert!(!st.serving_snapshot());
    st
}

/// The same objects, the endpoint objects as watch events ([`test_support::watched`]).
fn watched(fx: &Fixture, slices: &[Value], seed: u64) -> State {
    let st = test_support::watched(fx, seed, Resource::SlicesV1, slices.to_vec());
    assert!(!st.serving_snapshot());
    st
}

/// Served content of every resource without RVs.
fn view(st: &State) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for res in Resource::ALL {
        for obj in st.collection(res).objects() {
            let mut v: Value = serde_json::from_slice(&obj.json()).unwrap_or_default();
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            out.insert(format!("{}/{}", res.plural(), obj.key), v);
        }
    }
    out
}

#[test]
fn restore_builds_the_listed_view_with_new_rvs_and_is_ready_at_once() {
    let (fx, slices) = world();
    let mut online = watched(&fx, &slices, 1_000);
    let mut restored = state(&fx.hostname, 5_000);
    assert!(restored.restore(
        online.export().whole().expect("whole"),
        Resource::SlicesV1,
        0
    ));
    assert!(restored.is_ready() && restored.serving_snapshot());
    let facts = restored.shared_facts().load();
    assert!(facts.ready && facts.serving_snapshot, "{facts:?}");
    assert_eq!(facts, restored.facts(), "the health listener's figures");
    // Objects that came as watch events come packed where they are pruned, as a list's items
    // do; a restore reads them as a list's items, packed as they are read.
    assert!(
        online.pack_pending(0) == 0,
        "packed on the reflector's thread"
    );
    assert_eq!(restored.pack_pending(0), 0, "packed as they were read");
    assert_eq!(view(&restored), view(&online), "same served content");
    assert!(!view(&online).is_empty());
    for res in Resource::ALL {
        let coll = restored.collection(res);
        assert!(
            coll.objects().all(|o| o.rv > 5_000),
            "{res:?}: this process's RVs"
        );
        assert_eq!(
            coll.horizon(),
            restored.current_rv(),
            "history starts at the restore"
        );
    }
    // Each served object was computed once: one RV per served object, none spent on repeats.
    let served: usize = Resource::ALL
        .iter()
        .map(|&r| restored.collection(r).len())
        .sum();
    assert_eq!(restored.current_rv() - 5_000, served as u64);
    assert!(
        !restored.restore(
            online.export().whole().expect("whole"),
            Resource::SlicesV1,
            0
        ),
        "only once"
    );
}

#[test]
fn upstream_lists_after_a_restore_emit_exactly_the_real_changes() {
    let (fx, slices) = world();
    let online = listed(&fx, &slices, 1_000);
    let mut st = state(&fx.hostname, 5_000);
    st.restore(
        online.export().whole().expect("whole"),
        Resource::SlicesV1,
        0,
    );
    st.serve_v1beta1();
    let at = st.current_rv();

    // Meanwhile upstream: no-region deleted (Service, Endpoints, slice); node-2 joined region 1.
    let nodes: Vec<Value> = fx
        .node_objects()
        .into_iter()
        .map(|mut n| {
            if n["metadata"]["name"] == "node-2" {
                n["metadata"]["labels"] = json!({"region": "1"});
            }
            n
        })
        .collect();
    let same = |v: &[Value], name: &str| -> Vec<Value> {
        v.iter()
            .filter(|o| o["metadata"]["name"] != name)
            .cloned()
            .collect()
    };
    let a = st.apply_list(Resource::Nodes, texts(&nodes), 1);
    assert!(!a.became_ready && !a.upstream_synced && st.serving_snapshot());
    st.apply_list(
        Resource::Services,
        texts(&same(&fx.services, "no-region")),
        1,
    );
    st.apply_list(
        Resource::Endpoints,
        texts(&same(&fx.endpoints, "no-region")),
        1,
    );
    let last = st.apply_list(
        Resource::SlicesV1,
        texts(&same(&slices, "no-region-xyz")),
        1,
    );
    assert!(last.upstream_synced && !last.became_ready && !st.serving_snapshot());

    let kinds = |res: Resource| -> Vec<(String, bool)> {
        st.collection(res)
            .after(at, usize::MAX)
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let key = e
                    .old
                    .as_ref()
                    .or(e.new.as_ref())
                    .map(|o| o.key.name.to_string());
                (key.unwrap_or_default(), e.new.is_none())
            })
            .collect()
    };
    // node-2 is not the local node: its relabel is a fact (the Endpoints' events below follow
    // from it), not a served Node event.
    assert_eq!(kinds(Resource::Nodes), vec![]);
    assert_eq!(
        kinds(Resource::Services),
        vec![("no-region".to_string(), true)]
    );
    // region-1's Endpoints keep node-2's address now (same region); no-region's are deleted.
    assert_eq!(
        kinds(Resource::Endpoints),
        vec![
            ("region-1".to_string(), false),
            ("no-region".to_string(), true)
        ]
    );
    for res in [Resource::SlicesV1, Resource::SlicesV1beta1] {
        let mut got = kinds(res);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("no-region-xyz".to_string(), true),
                ("region-1-abc".to_string(), false)
            ],
            "{res:?}"
        );
    }
}

/// The writer makes each exported object whole itself: from its packed bytes (pruned by
/// topology), from its served bytes without the stamp (served as it came), or as it is (not
/// packed yet). The file is the one the whole objects make, and every kind of export is in it.
#[test]
fn an_export_writes_the_file_its_whole_objects_write() {
    use crate::cache::snapshot::{self, Identity, Meta, Snapshot};
    use crate::cache::store::Exported;
    let (fx, slices) = world();
    let mut online = watched(&fx, &slices, 1_000);
    // The slices again, changed, taken without their as-is facts (the `Value` path): a pruned
    // one is kept whole until the writer packs it. One object packed, the others not yet.
    for (kind, objects) in [
        (Resource::SlicesV1, &slices),
        (Resource::Endpoints, &fx.endpoints),
    ] {
        let changed = objects.iter().map(|s| {
            let mut s = s.clone();
            s["metadata"]["labels"]["again"] = json!("yes");
            s
        });
        for (key, bytes) in fresh(kind, changed) {
            let item = Prepared::Upserted(key, Listed::new(bytes, None));
            online.apply_prepared(kind, item, 0);
        }
    }
    assert!(online.pack_pending(1) > 0);
    let export = online.export();
    let all: Vec<&Exported> = [&export.nodes, &export.services, &export.endpoints]
        .into_iter()
        .chain([&export.slices])
        .flatten()
        .collect();
    assert!(all.iter().any(|u| matches!(u, Exported::Packed(_))));
    assert!(all.iter().any(|u| matches!(u, Exported::Raw(_))));
    assert!(all.iter().any(|u| matches!(u, Exported::Served(..))));
    let meta = Meta {
        identity: Identity {
            hostname: "h".into(),
            upstream: "u".into(),
        },
        written_unix_secs: 7,
        rv: online.current_rv(),
        slice_kind: Resource::SlicesV1,
        cidr_kind: online.cidr_kind(),
    };
    let whole = export.whole().expect("whole");
    let written = snapshot::encode(&Snapshot {
        meta: meta.clone(),
        objects: export,
    });
    assert!(!written.is_empty());
    assert_eq!(
        written,
        snapshot::encode(&Snapshot {
            meta,
            objects: whole.clone(),
        })
    );
    assert_eq!(snapshot::decode(&written).expect("decodes").objects, whole);
}

/// A snapshot object that is not UTF-8 (the file's checks make that unlikely, but the disk is
/// untrusted) is skipped with a warning; the others are served, nothing panics.
#[test]
fn a_restore_skips_an_object_that_is_not_utf8() {
    let (fx, slices) = world();
    let online = listed(&fx, &slices, 1_000);
    let mut objects = online.export().whole().expect("whole");
    let good = objects.nodes.len();
    assert!(good > 0);
    objects.nodes.push(std::sync::Arc::from(
        &b"{\"metadata\":{\"name\":\"\xff\"}}"[..],
    ));
    let mut restored = state(&fx.hostname, 5_000);
    assert!(restored.restore(objects, Resource::SlicesV1, 0));
    // Every node kept (the local one served, the others as facts).
    assert_eq!(restored.upstream.keys(Resource::Nodes).len(), good);
    assert_eq!(
        view(&restored),
        view(&online),
        "the rest is served as listed"
    );
}
