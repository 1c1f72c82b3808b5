//! A watch event's object takes a list item's path: prepared on the reflector's thread by the
//! list's decoder ([`super::super::WatchPreparer`]) and applied by the writer's one
//! `apply_item`. A watched object and the same object listed are stored and served alike: a
//! pruned slice, core Endpoints, a Node other than the local one (its facts), an object over
//! the object bound, an object carrying an excluding label.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::cache::store::test_support::{state, Whole};
use crate::cache::store::upstream::Stored;
use crate::handoff::{Change, Oversized};

/// The kinds compared.
const KINDS: [Resource; 4] = [
    Resource::Nodes,
    Resource::Services,
    Resource::Endpoints,
    Resource::SlicesV1,
];

/// A Node as a kubelet reports it: more than its facts (conditions, images, capacity).
fn kubelet_shaped(mut node: Value) -> Value {
    node["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    node["status"]["images"] = json!([{"names": ["registry/app@sha256:0123"], "sizeBytes": 1234}]);
    node["status"]["capacity"] = json!({"cpu": "4", "memory": "8Gi"});
    node["status"]["addresses"] = json!([{"type": "InternalIP", "address": "192.168.0.9"}]);
    node["metadata"]["resourceVersion"] = json!("77");
    node
}

/// Fixture F with a Service without topology keys, its Endpoints and two slices: `s-a` of the
/// topology Service (pruned), `plain-a` of the other (served as it came); kubelet-shaped Nodes.
fn world() -> (Fixture, Vec<Value>, Vec<Value>) {
    let (fx, slices) = fixture_with_plain_service();
    let nodes = fx.node_objects().into_iter().map(kubelet_shaped).collect();
    (fx, nodes, slices)
}

/// Every resource listed with the objects.
fn listed(fx: &Fixture, nodes: &[Value], slices: &[Value]) -> State {
    let mut st = state(&fx.hostname, 1);
    st.apply_list(Resource::Nodes, texts(nodes), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    st.apply_list(Resource::SlicesV1, texts(slices), 0);
    assert!(st.is_ready());
    st
}

/// The local Node and the Services listed, every other object a watch event after empty lists.
fn watched(fx: &Fixture, nodes: &[Value], slices: &[Value]) -> State {
    let mut st = state(&fx.hostname, 1);
    let local = |n: &&Value| n["metadata"]["name"] == json!(fx.hostname);
    let (mine, others): (Vec<&Value>, Vec<&Value>) = nodes.iter().partition(local);
    let mine: Vec<Value> = mine.into_iter().cloned().collect();
    st.apply_list(Resource::Nodes, texts(&mine), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&[]), 0);
    st.apply_list(Resource::SlicesV1, texts(&[]), 0);
    assert!(st.is_ready());
    for n in others {
        st.apply(Resource::Nodes, Change::upsert(n), 0);
    }
    for ep in &fx.endpoints {
        st.apply(Resource::Endpoints, Change::upsert(ep), 0);
    }
    for s in slices {
        st.apply(Resource::SlicesV1, Change::upsert(s), 0);
    }
    st
}

/// How each upstream object is kept: its own bytes, packed, or as the served object.
fn forms(st: &State) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for kind in KINDS {
        for key in st.upstream.keys(kind) {
            let form = match st.upstream.get(kind, &key) {
                Some(Stored::Own(_)) => "own",
                Some(Stored::Packed(_)) => "packed",
                Some(Stored::AsServed) => "as served",
                None => "absent",
            };
            out.insert(format!("{kind:?} {key}"), form);
        }
    }
    out
}

/// Every served object's bytes, its resourceVersion stamp cut out (the two caches number their
/// changes apart).
fn served(st: &State) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for res in Resource::ALL {
        for obj in st.collection(res).objects() {
            let text = String::from_utf8(obj.json().to_vec()).expect("UTF-8");
            let stamp = format!("\"resourceVersion\":\"{}\"", obj.rv);
            out.insert(format!("{res:?} {}", obj.key), text.replace(&stamp, ""));
        }
    }
    out
}

/// Stored bytes, how they are kept, and served bytes are the same.
fn assert_alike(a: &State, b: &State) {
    let (wa, wb) = (
        a.export().whole().expect("whole"),
        b.export().whole().expect("whole"),
    );
    assert_eq!(wa, wb, "the stored objects");
    assert_eq!(forms(a), forms(b), "how they are kept");
    assert_eq!(served(a), served(b), "the served objects");
    assert_eq!(
        a.stale_objects(10),
        b.stale_objects(10),
        "the stale objects"
    );
}

#[test]
fn a_watched_object_is_stored_and_served_as_the_same_object_listed() {
    let (fx, nodes, slices) = world();
    let (a, b) = (listed(&fx, &nodes, &slices), watched(&fx, &nodes, &slices));
    assert_alike(&a, &b);
    let f = forms(&b);
    assert_eq!(f["SlicesV1 default/s-a"], "packed", "pruned: {f:?}");
    assert_eq!(f["Endpoints default/s"], "packed", "pruned: {f:?}");
    assert_eq!(f["SlicesV1 default/plain-a"], "as served", "{f:?}");
    // A Node other than the local one: only its facts.
    let n2 = b.upstream_bytes(Resource::Nodes, &ObjectKey::new("", "n2"));
    let n2: Value = serde_json::from_slice(&n2.expect("kept")).expect("JSON");
    assert!(n2["status"].get("images").is_none(), "{n2}");
    assert!(n2["status"].get("addresses").is_some(), "{n2}");
}

#[test]
fn a_watched_object_over_the_bound_or_leaving_the_view_is_a_listed_one() {
    let (fx, nodes, slices) = world();
    let (mut a, mut b) = (listed(&fx, &nodes, &slices), listed(&fx, &nodes, &slices));
    // `plain-a` gains an excluding label; a new version of `s-a` is over the object bound.
    let mut left = slices[1].clone();
    left["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    let big = Oversized {
        namespace: Some("default".into()),
        name: Some("s-a".into()),
        bytes: 1 << 30,
    };
    let mut list = a.list_preparer(Resource::SlicesV1);
    list.push(&left.to_string());
    list.skipped(&big);
    a.apply_prepared(Resource::SlicesV1, list.finish(), 1);
    b.apply(Resource::SlicesV1, Change::upsert(&left), 1);
    b.apply(Resource::SlicesV1, Change::Oversized(big), 1);
    assert_alike(&a, &b);
    assert!(!served(&b).contains_key("SlicesV1 default/plain-a"));
    assert_eq!(b.stale_objects(10).1, 1, "s-a held stale");
}

#[test]
fn a_watch_event_is_prepared_off_the_writer_as_a_list_item_is() {
    let (fx, nodes, slices) = world();
    let st = listed(&fx, &nodes, &slices);
    let mut prep = st.watch_preparer();
    // An endpoint object: its canonical bytes, spans, and a packed copy, as a list's item.
    let Some(Prepared::Upserted(key, item)) =
        prep.prepare(Resource::SlicesV1, Change::upsert(&slices[0]))
    else {
        panic!("an upsert")
    };
    assert_eq!(key, ObjectKey::new("default", "s-a"));
    let as_is = item
        .as_is
        .as_ref()
        .expect("served as it came where it can be");
    assert!(as_is.spans.is_some() && as_is.packed.is_some(), "{as_is:?}");
    let mut list = ListPreparer::new(Resource::SlicesV1, Hold::Whole);
    list.push(&slices[0].to_string());
    let Prepared::Listed(mut one) = list.finish() else {
        panic!("a list")
    };
    assert_eq!(item.bytes(), one.remove(&key).expect("kept").bytes());
    // A Node other than the local one: reduced to its facts here; the local one whole.
    let facts = |prep: &mut WatchPreparer, node: &Value| {
        let Some(Prepared::Upserted(_, item)) = prep.prepare(Resource::Nodes, Change::upsert(node))
        else {
            panic!("an upsert")
        };
        let bytes = item.bytes().expect("whole bytes").clone();
        serde_json::from_slice::<Value>(&bytes).expect("JSON")["status"]
            .get("images")
            .is_none()
    };
    let name = |n: &Value| n["metadata"]["name"].as_str().unwrap_or("").to_string();
    let other = nodes
        .iter()
        .find(|n| name(n) != fx.hostname)
        .expect("a Node");
    let local = nodes
        .iter()
        .find(|n| name(n) == fx.hostname)
        .expect("the local Node");
    assert!(facts(&mut prep, other), "reduced");
    assert!(!facts(&mut prep, local), "kept whole");
    // A relay keeps every Node whole.
    let mut relay = state(&fx.hostname, 1);
    relay.keep_relay_view();
    assert!(
        !facts(&mut relay.watch_preparer(), other),
        "a relay's whole"
    );
    // An object carrying an excluding label leaves the view; a deletion is by its key.
    let mut left = slices[1].clone();
    left["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    assert!(matches!(
        prep.prepare(Resource::SlicesV1, Change::upsert(&left)),
        Some(Prepared::Left(k)) if k == ObjectKey::new("default", "plain-a")
    ));
    assert!(matches!(
        prep.prepare(Resource::SlicesV1, Change::delete(&left)),
        Some(Prepared::Deleted(k)) if k == ObjectKey::new("default", "plain-a")
    ));
}
