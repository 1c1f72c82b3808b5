//! The writer against served objects kept in their protobuf form alone: an unchanged re-send
//! spends no RV, a change publishes, a deletion carries the object's JSON and protobuf form.

use serde_json::{json, Value};

use super::*;
use crate::cache::collection::Form;
use crate::cache::store::test_support::texts;
use crate::handoff::{Change, Watched};

const KIND: Resource = Resource::SlicesV1;

/// A slice of the Service `plain` (no topology keys: served as it came).
fn plain_slice(ip: &str) -> String {
    let ep = slice_endpoint_v1(ip, Some("n2"), None);
    slice_v1("default", "plain-a", Some("plain"), vec![ep]).to_string()
}

fn key() -> ObjectKey {
    ObjectKey::new("default", "plain-a")
}

/// Fixture F with the Service `plain`, and `slice` listed.
fn listed(slice: &str) -> State {
    let mut fx = fixture_f();
    fx.services.push(service("default", "plain", None));
    let mut st = test_support::state(&fx.hostname, 1_000);
    st.apply_list(Resource::Nodes, texts(&fx.node_objects()), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    st.apply_list(KIND, [slice], 0);
    assert!(st.is_ready());
    st
}

/// The served slice, read by a protobuf client: kept in its protobuf form alone.
fn compacted(st: &State) -> Arc<crate::cache::collection::Served> {
    let served = st.collection(KIND).get(&key()).expect("served").clone();
    let _ = served.protobuf(KIND);
    assert_eq!(served.form(), Form::Protobuf, "the served slice compacts");
    served
}

fn watched(text: &str) -> Change {
    Change::Upsert(Watched {
        key: key(),
        text: text.into(),
    })
}

fn value(json: &[u8]) -> Value {
    serde_json::from_slice(json).expect("JSON")
}

#[test]
fn an_unchanged_resend_of_a_compacted_object_spends_no_rv() {
    let text = plain_slice("10.0.0.3");
    let mut st = listed(&text);
    let served = compacted(&st);
    let rv = st.current_rv();
    // Relisted, and sent again by a watch: the same bytes.
    st.apply_list(KIND, [&text], 1);
    st.apply(KIND, watched(&text), 1);
    assert_eq!(st.current_rv(), rv, "no RV spent");
    let now = st.collection(KIND).get(&key()).expect("served").clone();
    assert!(Arc::ptr_eq(&now, &served), "the same version served");
    assert_eq!(st.collection(KIND).pending(rv), 0, "nothing logged");
}

#[test]
fn a_change_of_a_compacted_object_publishes() {
    let mut st = listed(&plain_slice("10.0.0.3"));
    compacted(&st);
    // The same length, then another length; a relist, then a watch event.
    for (ip, by_watch) in [("10.0.0.4", false), ("10.0.0.44", true)] {
        let _ = compacted(&st);
        let rv = st.current_rv();
        let text = plain_slice(ip);
        if by_watch {
            st.apply(KIND, watched(&text), 1);
        } else {
            st.apply_list(KIND, [&text], 1);
        }
        let entries = st.collection(KIND).after(rv, usize::MAX).expect("logged");
        assert_eq!(entries.len(), 1, "{ip}");
        let new = entries[0].new.as_ref().expect("MODIFIED");
        assert_eq!(value(&new.json())["endpoints"][0]["addresses"], json!([ip]));
        assert_eq!(new.rv, rv + 1);
    }
}

#[test]
fn the_deletion_of_a_compacted_object_carries_its_json_and_protobuf() {
    let text = plain_slice("10.0.0.3");
    let mut st = listed(&text);
    let served = compacted(&st);
    let before = value(&served.json());
    let rv = st.current_rv();
    st.apply(KIND, Change::Delete(key()), 1);
    let entries = st.collection(KIND).after(rv, usize::MAX).expect("logged");
    assert_eq!(entries.len(), 1);
    assert!(entries[0].new.is_none(), "DELETED");
    let old = entries[0].old.as_ref().expect("its last state");
    assert_eq!(old.rv, rv + 1);
    let mut want = before;
    want["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    assert_eq!(value(&old.json()), want);
    let want_pb = crate::proto::encode_json(KIND, &old.json()).bytes;
    assert_eq!(old.protobuf(KIND)[..], want_pb[..]);
    assert_eq!(
        value(&served.json())["metadata"]["resourceVersion"],
        json!(served.rv.to_string())
    );
}
