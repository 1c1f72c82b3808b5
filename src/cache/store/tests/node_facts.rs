//! Nodes other than the local one, held as their facts (docs/SEMANTICS.md §1.1): the readers'
//! view holds the local Node whole and no other; the others' name, labels and addresses are
//! kept (reduced canonical objects), compared, and still drive the topology; a relay view keeps
//! every Node whole; the snapshot carries what a restart needs.

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::cache::store::test_support::Whole;

fn names(st: &State, res: Resource, cursor: u64) -> Vec<(&'static str, String)> {
    let evs = events(st, res, cursor);
    evs.into_iter().map(|(t, n, _, _)| (t, n)).collect()
}

/// Node `name` as a kubelet reports it: labels and addresses, and what changes with every
/// heartbeat (conditions' times), images and annotations, none of them facts.
fn kubelet_node(name: &str, zone: Option<&str>, beat: u32) -> Value {
    let mut n = node(name, &labels(&[]));
    if let Some(zone) = zone {
        n["metadata"]["labels"] = json!({ "zone": zone });
    }
    n["metadata"]["annotations"] = json!({"node.alpha.kubernetes.io/ttl": "0"});
    let images: Vec<Value> = (0..40)
        .map(|i| json!({"names": [format!("registry.example/image-{i}@sha256:{i:064}")], "sizeBytes": 1_000_000 + i}))
        .collect();
    n["status"] = json!({
        "addresses": [{"type": "InternalIP", "address": format!("192.168.1.{}", name.len())},
                      {"type": "Hostname", "address": name}],
        "conditions": [{"type": "Ready", "status": "True",
                        "lastHeartbeatTime": format!("2026-01-01T00:00:{beat:02}Z")}],
        "images": images,
    });
    n
}

/// What the cache keeps of upstream Node `name`: its bytes when kept as its own.
fn kept_bytes(st: &State, name: &str) -> Option<Raw> {
    match st
        .upstream
        .get(Resource::Nodes, &ObjectKey::new("", name))?
    {
        Stored::Own(raw) => Some(raw.clone()),
        _ => None,
    }
}

fn node_names(view: &Published) -> Vec<String> {
    let coll = view.collection(Resource::Nodes);
    coll.objects().map(|s| s.key.name.to_string()).collect()
}

#[test]
fn a_non_local_node_is_held_as_its_facts_and_only_the_local_node_is_served() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let n2 = kubelet_node("n2", Some("b"), 1);
    st.apply(Resource::Nodes, Change::upsert(&n2.clone()), 1);
    st.apply(
        Resource::Nodes,
        Change::upsert(&kubelet_node("h", Some("a"), 1)),
        1,
    );
    assert_eq!(st.with_view(node_names), vec!["h"]);
    // The local Node is served whole (its images too) and kept once.
    let h = served(&st, Resource::Nodes, "", "h");
    assert_eq!(h["status"]["images"].as_array().map(Vec::len), Some(40));
    assert!(matches!(
        st.upstream.get(Resource::Nodes, &ObjectKey::new("", "h")),
        Some(Stored::AsServed)
    ));
    // n2: its facts only, bounded by them, not by its whole bytes.
    let kept = kept_bytes(&st, "n2").expect("kept as its own bytes");
    let facts = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n2", "labels": {"zone": "b"}},
        "status": {"addresses": n2["status"]["addresses"]},
    });
    assert_eq!(kept, raw(&facts));
    let whole = serde_json::to_vec(&n2).expect("JSON").len();
    assert!(kept.len() * 10 < whole, "{} of {whole} bytes", kept.len());
    assert_eq!(served(&st, Resource::Nodes, "", "n2"), Value::Null);
    // A facts count: the cache's figures count the Nodes served.
    assert_eq!(st.facts().objects(Resource::Nodes), 1);
}

#[test]
fn a_non_local_heartbeat_is_no_publication() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.apply(
        Resource::Nodes,
        Change::upsert(&kubelet_node("n2", Some("b"), 1)),
        1,
    );
    let cur = st.current_rv();
    let eps = served(&st, Resource::Endpoints, "default", "s");
    for beat in 2..5 {
        let applied = st.apply(
            Resource::Nodes,
            Change::upsert(&kubelet_node("n2", Some("b"), beat)),
            beat.into(),
        );
        assert_eq!(applied.events, 0, "beat {beat}");
        assert!(!applied.facts_changed, "beat {beat}: no snapshot due");
    }
    assert_eq!(st.current_rv(), cur, "no RV spent");
    assert!(events(&st, Resource::Nodes, cur).is_empty());
    assert_eq!(served(&st, Resource::Endpoints, "default", "s"), eps);
    // The local Node's heartbeat is served, as before.
    st.apply(
        Resource::Nodes,
        Change::upsert(&kubelet_node("h", Some("a"), 9)),
        9,
    );
    assert_eq!(
        names(&st, Resource::Nodes, cur),
        vec![("MODIFIED", "h".into())]
    );
}

#[test]
fn a_non_local_relabel_still_prunes_its_endpoints() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let has_n2 = |st: &State| {
        ips(&served(st, Resource::Endpoints, "default", "s")).contains(&"10.0.0.3".to_string())
    };
    assert!(!has_n2(&st), "n2 is in zone b, h in zone a");
    let cur = st.current_rv();
    let applied = st.apply(
        Resource::Nodes,
        Change::upsert(&kubelet_node("n2", Some("a"), 1)),
        1,
    );
    assert!(applied.facts_changed, "a snapshot is due");
    assert!(has_n2(&st), "n2 moved to zone a");
    assert!(events(&st, Resource::Nodes, cur).is_empty());
    assert_eq!(names(&st, Resource::Endpoints, cur).len(), 1);
    st.apply(
        Resource::Nodes,
        Change::delete(&kubelet_node("n2", Some("a"), 1)),
        2,
    );
    assert!(!has_n2(&st), "n2 gone");
    assert!(events(&st, Resource::Nodes, cur).is_empty());
}

#[test]
fn a_list_of_nodes_is_reduced_as_it_is_prepared_but_for_a_relay() {
    let fx = fixture_f();
    let prepared = |st: &State| {
        let mut list = st.list_preparer(Resource::Nodes);
        for name in ["h", "n2"] {
            list.push(&kubelet_node(name, Some("a"), 1).to_string());
        }
        match list.finish() {
            Prepared::Listed(items) => items
                .into_iter()
                .map(|(k, l)| (k.name.to_string(), l.bytes().map_or(0, |b| b.len())))
                .collect::<BTreeMap<String, usize>>(),
            _ => panic!("a list"),
        }
    };
    let whole = serde_json::to_vec(&kubelet_node("n2", Some("a"), 1))
        .expect("JSON")
        .len();
    let st = test_support::state(&fx.hostname, 1);
    let sizes = prepared(&st);
    assert!(
        sizes["h"] * 10 > whole * 9,
        "the local Node whole: {sizes:?}"
    );
    assert!(sizes["n2"] * 10 < whole, "n2's facts: {sizes:?}");
    let mut relay = test_support::state(&fx.hostname, 1);
    relay.keep_relay_view();
    let sizes = prepared(&relay);
    assert!(
        sizes["n2"] * 10 > whole * 9,
        "a relay's n2 whole: {sizes:?}"
    );
}

#[test]
fn a_relay_view_keeps_every_node_whole_and_takes_their_heartbeats() {
    let fx = fixture_f();
    let mut st = test_support::state(&fx.hostname, 1_000);
    st.keep_relay_view();
    let nodes: Vec<Value> = fx
        .nodes
        .iter()
        .map(|(n, l)| kubelet_node(n, l.get("zone"), 1))
        .collect();
    st.apply_list(Resource::Nodes, texts(&nodes), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    assert!(
        st.apply_list(Resource::SlicesV1, texts(&[]), 0)
            .became_ready
    );
    let relay = st.relay_view().expect("a relay view");
    let relayed = |name: &str| -> Value {
        let view = relay.read();
        let got = view.collection(Resource::Nodes);
        let got = got.get(&ObjectKey::new("", name));
        got.map_or(Value::Null, |s| {
            serde_json::from_slice(&s.json()).unwrap_or_default()
        })
    };
    assert_eq!(relay.read().collection(Resource::Nodes).len(), 4);
    assert_eq!(st.with_view(node_names), vec!["h"]);
    assert_eq!(
        relayed("n2")["status"]["images"].as_array().map(Vec::len),
        Some(40)
    );
    assert!(kept_bytes(&st, "n2").is_some_and(|b| b.len() < 400));
    // A heartbeat: the relay view's event only.
    let cur = st.current_rv();
    st.apply(
        Resource::Nodes,
        Change::upsert(&kubelet_node("n2", Some("b"), 7)),
        1,
    );
    assert_eq!(
        relayed("n2")["status"]["conditions"][0]["lastHeartbeatTime"],
        "2026-01-01T00:00:07Z"
    );
    assert!(events(&st, Resource::Nodes, cur).is_empty());
    let relay_log = relay.read().collection(Resource::Nodes).log_len();
    // Deleted: out of the relay view too.
    st.apply(
        Resource::Nodes,
        Change::delete(&kubelet_node("n2", Some("b"), 7)),
        2,
    );
    assert_eq!(relayed("n2"), Value::Null);
    assert_eq!(
        relay.read().collection(Resource::Nodes).log_len(),
        relay_log + 1
    );
    // A relay's snapshot holds every Node whole; restored, its relay view does again.
    let objects = st.export().whole().expect("whole");
    assert_eq!(objects.nodes.len(), 3);
    let mut back = test_support::state(&fx.hostname, 5_000);
    back.keep_relay_view();
    assert!(back.restore(objects, Resource::SlicesV1, 0));
    let view = back.relay_view().expect("a relay view");
    let view = view.read();
    let n1 = view.collection(Resource::Nodes);
    let n1 = n1.get(&ObjectKey::new("", "n1")).expect("n1 relayed");
    let n1: Value = serde_json::from_slice(&n1.json()).expect("JSON");
    assert_eq!(n1["status"]["images"].as_array().map(Vec::len), Some(40));
}

#[test]
fn the_snapshot_holds_the_local_node_whole_and_the_others_facts() {
    let fx = fixture_f();
    let mut st = load(&fx);
    for (n, l) in &fx.nodes {
        let node = kubelet_node(n, l.get("zone"), 1);
        st.apply(Resource::Nodes, Change::upsert(&node), 1);
    }
    let objects = st.export().whole().expect("whole");
    let nodes: BTreeMap<String, Value> = objects
        .nodes
        .iter()
        .map(|b| serde_json::from_slice::<Value>(b).expect("JSON"))
        .map(|v| (v["metadata"]["name"].as_str().unwrap_or("").to_string(), v))
        .collect();
    assert_eq!(nodes.len(), 4);
    assert_eq!(
        nodes["h"]["status"]["images"].as_array().map(Vec::len),
        Some(40)
    );
    assert_eq!(nodes["n2"]["status"].get("images"), None);
    assert_eq!(nodes["n2"]["metadata"]["labels"]["zone"], "b");
    // Restored: the same served view, the same facts.
    let mut back = test_support::state(&fx.hostname, 5_000);
    assert!(back.restore(objects, Resource::SlicesV1, 0));
    for name in ["h", "n2"] {
        let strip = |v: Value| {
            let mut v = v;
            v["metadata"]["resourceVersion"] = Value::Null;
            v
        };
        assert_eq!(
            strip(served(&back, Resource::Nodes, "", name)),
            strip(served(&st, Resource::Nodes, "", name)),
            "{name}"
        );
    }
    assert_eq!(kept_bytes(&back, "n2"), kept_bytes(&st, "n2"));
    assert_eq!(
        ips(&served(&back, Resource::Endpoints, "default", "s")),
        ips(&served(&st, Resource::Endpoints, "default", "s"))
    );
}

#[test]
fn an_older_snapshot_of_whole_nodes_is_reduced_on_restore() {
    let fx = fixture_f();
    let online = load(&fx);
    let mut objects = online.export().whole().expect("whole");
    // As an older binary wrote it: every Node whole.
    objects.nodes = fx
        .nodes
        .iter()
        .map(|(n, l)| kubelet_node(n, l.get("zone"), 1))
        .map(|v| Arc::from(serde_json::to_vec(&v).expect("JSON")))
        .collect();
    let mut back = test_support::state(&fx.hostname, 5_000);
    assert!(back.restore(objects, Resource::SlicesV1, 0));
    assert_eq!(back.with_view(node_names), vec!["h"]);
    for name in ["n1", "n2", "n3"] {
        let kept = kept_bytes(&back, name).expect("kept");
        let kept: Value = serde_json::from_slice(&kept).expect("JSON");
        assert_eq!(kept["status"].get("images"), None, "{name}");
        assert_eq!(kept["status"].get("conditions"), None, "{name}");
    }
    assert_eq!(
        ips(&served(&back, Resource::Endpoints, "default", "s")),
        ips(&served(&online, Resource::Endpoints, "default", "s"))
    );
}

#[test]
fn a_node_decoded_as_its_facts_only_prepares_to_the_same_bytes_as_whole() {
    // A protobuf upstream's other Nodes are decoded as their facts only (`NODE_FACTS`) when the
    // list's taker keeps no more: what it keeps must not depend on that.
    use crate::proto::decode::{decode_object_kept, decode_object_only, NODE_FACTS};
    use crate::proto::encode::encode_object;
    let fx = fixture_f();
    let st = test_support::state(&fx.hostname, 1);
    let msg = encode_object(Resource::Nodes, &kubelet_node("n2", Some("a"), 1)).bytes;
    // The message inside the `items` field's tag and length.
    let mut pos = 1;
    let _ = crate::proto::read::varint(&msg, &mut pos).expect("a length");
    let (whole, facts) = (
        decode_object_kept(Resource::Nodes, &msg[pos..], None).expect("decodes"),
        decode_object_only(Resource::Nodes, &msg[pos..], None, &NODE_FACTS).expect("decodes"),
    );
    assert!(facts.json.len() * 5 < whole.json.len());
    let prepared = |text: &[u8]| {
        let mut list = st.list_preparer(Resource::Nodes);
        assert_eq!(list.facts_except(), Some(&*fx.hostname));
        list.push(std::str::from_utf8(text).expect("UTF-8"));
        match list.finish() {
            Prepared::Listed(items) => items
                .into_iter()
                .map(|(k, l)| (k, l.bytes().cloned()))
                .collect::<Vec<_>>(),
            _ => panic!("a list"),
        }
    };
    let from_facts = prepared(&facts.json);
    assert_eq!(from_facts, prepared(&whole.json));
    assert_eq!(from_facts.len(), 1);
}
