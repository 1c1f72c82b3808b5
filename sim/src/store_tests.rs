//! Unit tests of the store (`store.rs`): RV stamping, history, watch starts, compaction and
//! `/sim/reset-rv`.

use super::*;

fn node(name: &str, zone: &str) -> Value {
    json!({"kind": "Node", "metadata": {"name": name, "labels": {"zone": zone}}})
}

#[test]
fn apply_stamps_and_counts_rvs() {
    let mut s = Store::new(10);
    let e1 = s.apply(node("n1", "a")).expect("apply");
    assert_eq!(e1.rv, START_RV + 1);
    assert_eq!(e1.etype, EventType::Added);
    let e2 = s.apply(node("n1", "b")).expect("apply");
    assert_eq!(e2.etype, EventType::Modified);
    assert_eq!(e2.rv, START_RV + 2);
    let got = s
        .get(Kind::Node, &ObjectKey::new("", "n1"))
        .expect("stored");
    assert_eq!(got["metadata"]["resourceVersion"], "102");
    assert_eq!(got["apiVersion"], "v1");
    assert_eq!(
        got["metadata"]["uid"],
        e1.new.as_ref().expect("new")["metadata"]["uid"]
    );
    assert_eq!(s.rv(), 102);
}

#[test]
fn apply_rejects_bad_objects() {
    let mut s = Store::new(10);
    for bad in [
        json!({"metadata": {"name": "x"}}),
        json!({"kind": "Pod", "metadata": {"name": "x"}}),
        json!({"kind": "Node", "metadata": {}}),
        json!({"kind": "Node", "metadata": 3}),
        json!({"kind": "EndpointSlice", "apiVersion": "v2", "metadata": {"name": "x"}}),
    ] {
        assert_eq!(s.apply(bad).expect_err("bad").code, 400);
    }
    assert_eq!(s.rv(), START_RV, "failed applies consume no RV");
}

#[test]
fn delete_stamps_last_object_with_new_rv() {
    let mut s = Store::new(10);
    s.apply(node("n1", "a")).expect("apply");
    let d = s
        .delete(Kind::Node, &ObjectKey::new("", "n1"))
        .expect("delete");
    assert_eq!(d.etype, EventType::Deleted);
    assert_eq!(
        d.old.as_ref().expect("old")["metadata"]["resourceVersion"],
        "102"
    );
    assert_eq!(s.count(Kind::Node), 0);
    let e = s
        .delete(Kind::Node, &ObjectKey::new("", "n1"))
        .expect_err("gone");
    assert_eq!(e.code, 404);
}

#[test]
fn pad_node_grows_the_status_after_the_metadata_and_shrinks_back() {
    let mut s = Store::new(10);
    s.apply(node("n1", "a")).expect("apply");
    let e = s.pad_node("n1", 1000).expect("pad");
    let n = e.new.as_ref().expect("new");
    assert_eq!(
        n["status"]["images"][0]["names"][0].as_str().map(str::len),
        Some(1000)
    );
    let text = n.to_string();
    let (meta, status) = (text.find("\"metadata\""), text.find("\"status\""));
    assert!(meta < status, "metadata first: {text:.200}");
    let e = s.pad_node("n1", 0).expect("unpad");
    assert!(e.new.as_ref().expect("new")["status"]
        .get("images")
        .is_none());
    assert_eq!(s.pad_node("nope", 1).expect_err("404").code, 404);
}

#[test]
fn label_node_merges_and_removes() {
    let mut s = Store::new(10);
    s.apply(node("n1", "a")).expect("apply");
    let labels = json!({"zone": null, "rack": "r1"});
    let labels = labels.as_object().expect("map");
    let e = s.label_node("n1", labels).expect("label");
    let n = e.new.as_ref().expect("new");
    assert_eq!(n["metadata"]["labels"], json!({"rack": "r1"}));
    assert_eq!(s.label_node("nope", labels).expect_err("404").code, 404);
    let bad = json!({"zone": 1});
    assert_eq!(
        s.label_node("n1", bad.as_object().expect("map"))
            .expect_err("400")
            .code,
        400
    );
}

#[test]
fn watch_start_table() {
    let mut s = Store::new(3);
    for i in 0..5 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    // RVs 101..=105; history holds 103,104,105 → horizon 102.
    assert_eq!(s.horizon(), 102);
    let cases: &[(Option<&str>, &str)] = &[
        (None, "snapshot"),
        (Some(""), "snapshot"),
        (Some("0"), "snapshot"),
        (Some("102"), "resume"),
        (Some("105"), "resume"),
        (Some("101"), "expired"),
        (Some("106"), "expired"),
        (Some("abc"), "expired"),
        (Some("-1"), "expired"),
    ];
    for (rv, want) in cases {
        let got = match s.start_watch(Kind::Node, *rv) {
            WatchStart::Snapshot { objects, cursor } => {
                assert_eq!(objects.len(), 5);
                assert_eq!(cursor, 105);
                "snapshot"
            }
            WatchStart::Resume { .. } => "resume",
            WatchStart::Expired(e) => {
                assert_eq!(e.code, 410);
                assert_eq!(e.reason, "Expired");
                "expired"
            }
            WatchStart::TooLarge { .. } => "too large",
        };
        assert_eq!(got, *want, "rv {rv:?}");
    }
}

#[test]
fn events_after_replays_and_detects_lag() {
    let mut s = Store::new(3);
    for i in 0..5 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    let (evs, cur) = s.events_after(103).expect("within history");
    assert_eq!(evs.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![104, 105]);
    assert_eq!(cur, 105);
    let (evs, _) = s.events_after(105).expect("current");
    assert!(evs.is_empty());
    assert!(s.events_after(101).is_none(), "101 < evicted 102");
}

#[test]
fn compact_expires_older_resumes_only() {
    let mut s = Store::new(100);
    s.apply(node("n1", "a")).expect("apply");
    s.apply(node("n2", "a")).expect("apply");
    assert!(matches!(
        s.start_watch(Kind::Node, Some("101")),
        WatchStart::Resume { .. }
    ));
    assert_eq!(s.compact(), 102);
    assert!(matches!(
        s.start_watch(Kind::Node, Some("101")),
        WatchStart::Expired(_)
    ));
    assert!(matches!(
        s.start_watch(Kind::Node, Some("102")),
        WatchStart::Resume { .. }
    ));
    // A watcher already running at 101 still gets its event.
    assert_eq!(s.events_after(101).expect("live").0.len(), 1);
}

#[test]
fn list_is_per_kind_and_sorted() {
    let mut s = Store::new(10);
    s.apply(node("b", "a")).expect("apply");
    s.apply(node("a", "a")).expect("apply");
    s.apply(json!({"kind": "Service", "metadata": {"name": "s"}}))
        .expect("apply");
    let names: Vec<_> = s
        .list(Kind::Node)
        .iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("a"), json!("b")]);
    let svc = s.list(Kind::Service);
    assert_eq!(svc[0]["metadata"]["namespace"], "default");
    assert!(s.list(Kind::Endpoints).is_empty());
}

fn rv_of(s: &Store, kind: Kind, ns: &str, name: &str) -> String {
    s.get(kind, &ObjectKey::new(ns, name)).expect("stored")["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn reset_rv_restamps_lowers_and_clears_history() {
    let mut s = Store::new(100);
    for i in 0..3 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    s.apply(json!({"kind": "Service", "metadata": {"name": "svc"}}))
        .expect("apply");
    for _ in 0..10 {
        s.apply(node("n0", "b")).expect("churn");
    }
    assert_eq!(s.rv(), 114);
    let before = s.get(Kind::Node, &ObjectKey::new("", "n0")).expect("n0");
    let epoch = s.epoch();
    let r = s
        .reset_rv(20, Some(TooLarge::Event), OpenWatches::End)
        .expect("reset");
    assert_eq!(
        r,
        Reset {
            previous: 114,
            current: 24,
            restamped: 4,
            epoch: epoch + 1,
            mode: TooLarge::Event,
            watches: OpenWatches::End,
        }
    );
    assert_eq!((s.rv(), s.horizon(), s.history_len()), (24, 24, 0));
    // Key order: nodes n0, n1, n2, then the service.
    assert_eq!(rv_of(&s, Kind::Node, "", "n0"), "21");
    assert_eq!(rv_of(&s, Kind::Node, "", "n2"), "23");
    assert_eq!(rv_of(&s, Kind::Service, "default", "svc"), "24");
    let after = s.get(Kind::Node, &ObjectKey::new("", "n0")).expect("n0");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"]);
    assert_eq!(s.too_large(), Some(TooLarge::Event));
    // The counter goes on from there.
    assert_eq!(s.apply(node("n9", "a")).expect("apply").rv, 25);
    // Events from before the reset are gone.
    let (evs, cur) = s.events_after(24).expect("current");
    assert_eq!((evs.len(), cur), (1, 25));
}

#[test]
fn reset_rv_rejects_rvs_that_do_not_go_backwards() {
    let mut s = Store::new(100);
    for i in 0..5 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    // Current 105 with 5 objects: rv + 5 must stay below 105.
    for bad in [0, 100, 105, 200, u64::MAX] {
        assert_eq!(
            s.reset_rv(bad, None, OpenWatches::End)
                .expect_err("bad")
                .code,
            400,
            "{bad}"
        );
    }
    assert_eq!((s.rv(), s.too_large()), (105, None), "nothing changed");
    let r = s.reset_rv(99, None, OpenWatches::End).expect("reset");
    assert_eq!((r.current, r.mode), (104, TooLarge::Http), "default form");
}

#[test]
fn too_large_answers_only_once_enabled() {
    let mut s = Store::new(3);
    for i in 0..5 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    // Off: a future RV is a 410 like any unusable one, and LIST ignores it.
    assert!(matches!(
        s.start_watch(Kind::Node, Some("106")),
        WatchStart::Expired(_)
    ));
    assert!(s.too_large_status(Some("106")).is_none());
    s.enable_too_large(TooLarge::Event);
    let cases: &[(Option<&str>, &str)] = &[
        (None, "snapshot"),
        (Some("0"), "snapshot"),
        (Some("105"), "resume"),
        (Some("106"), "too large"),
        (Some("18446744073709551615"), "too large"),
        (Some("101"), "expired"),
        (Some("abc"), "expired"),
        (Some("18446744073709551616"), "expired"),
    ];
    for (rv, want) in cases {
        let got = match s.start_watch(Kind::Node, *rv) {
            WatchStart::Snapshot { .. } => "snapshot",
            WatchStart::Resume { .. } => "resume",
            WatchStart::Expired(_) => "expired",
            WatchStart::TooLarge { mode, status } => {
                assert_eq!(mode, TooLarge::Event);
                assert_eq!(status["code"], 504);
                assert_eq!(
                    status["message"],
                    format!(
                        "Too large resource version: {}, current: 105",
                        rv.unwrap_or("")
                    )
                );
                "too large"
            }
        };
        assert_eq!(got, *want, "rv {rv:?}");
    }
    for (rv, too_large) in [
        (None, false),
        (Some(""), false),
        (Some("0"), false),
        (Some("105"), false),
        (Some("1"), false),
        (Some("x"), false),
        (Some("106"), true),
    ] {
        assert_eq!(s.too_large_status(rv).is_some(), too_large, "{rv:?}");
    }
}

#[test]
fn a_silent_reset_accepts_watches_from_the_future_and_keeps_or_cuts_the_open_ones() {
    let mut s = Store::new(100);
    for i in 0..3 {
        s.apply(node(&format!("n{i}"), "a")).expect("apply");
    }
    let (epoch, cuts) = (s.epoch(), s.cuts());
    let r = s
        .reset_rv(50, Some(TooLarge::Silent), OpenWatches::Keep)
        .expect("reset");
    assert_eq!((r.current, r.epoch, s.cuts()), (53, epoch, cuts), "kept");
    // A watch from the old, higher RV starts and waits there (no 410, no 504).
    assert!(matches!(
        s.start_watch(Kind::Node, Some("103")),
        WatchStart::Resume { cursor: 103 }
    ));
    assert_eq!(
        s.too_large_status(Some("103")).map(|st| st["code"].clone()),
        Some(json!(504)),
        "a LIST still 504"
    );
    // A reset naming no form takes the default one (`--too-large`'s, else http).
    let r = s.reset_rv(10, None, OpenWatches::Cut).expect("reset");
    assert_eq!(
        (r.epoch, s.cuts(), r.mode),
        (epoch, cuts + 1, TooLarge::Http)
    );
}
