//! Collections: replay, retention, RV stamps.

use super::*;
use serde_json::json;

fn served(name: &str, rv: u64) -> Arc<Served> {
    let mut v =
        json!({"kind":"Node","apiVersion":"v1","metadata":{"name":name,"labels":{"zone":"a"}}});
    stamp_rv(&mut v, rv);
    Arc::new(Served::from_value(ObjectKey::new("", name), rv, &v))
}

#[test]
fn replay_after_cursor_and_gone_below_horizon() {
    let mut c = Collection::new(10);
    let k = ObjectKey::new("", "n1");
    c.record(&k, Some(served("n1", 11)), 11, 0);
    c.record(&k, Some(served("n1", 13)), 13, 0);
    c.record(&k, None, 15, 0);
    assert_eq!(c.after(10, 100).map(|v| v.len()), Ok(3));
    let rvs: Vec<u64> = c
        .after(11, 100)
        .unwrap_or_default()
        .iter()
        .map(|e| e.rv)
        .collect();
    assert_eq!(rvs, vec![13, 15]);
    assert_eq!(c.after(9, 100).map(|v| v.len()), Err(Gone));
    assert_eq!(c.pending(13), 1);
    // The deletion carries the last content stamped with the deletion's RV.
    let del = c.after(13, 1).unwrap_or_default();
    let old = del[0].old.clone().map(|o| o.rv);
    assert_eq!(old, Some(15));
    assert!(del[0].new.is_none());
    assert!(c.is_empty());
}

#[test]
fn trim_keeps_minimum_and_raises_horizon() {
    let mut c = Collection::new(0);
    let k = ObjectKey::new("", "n");
    for rv in 1..=10 {
        c.record(&k, Some(served("n", rv)), rv, 0);
    }
    let r = Retention {
        min_entries: 3,
        max_entries: 5,
        window_secs: 100,
        max_bytes: usize::MAX,
    };
    c.trim(&r, 50);
    assert_eq!(c.log_len(), 5, "max_entries bounds the log");
    assert_eq!(c.horizon(), 5);
    c.trim(&r, 500);
    assert_eq!(c.log_len(), 3, "old entries go, min_entries stay");
    assert_eq!(c.horizon(), 7);
    assert!(c.after(6, 10).is_err());
    assert_eq!(c.after(7, 10).map(|v| v.len()), Ok(3));
}

#[test]
fn a_log_gives_back_the_room_a_burst_took_once_trimmed_or_reset() {
    let mut c = Collection::new(0);
    let k = ObjectKey::new("", "n");
    let one = served("n", 1);
    for rv in 1..=5_000 {
        c.record(&k, Some(one.clone()), rv, 0);
    }
    assert!(c.log.capacity() >= 5_000);
    let r = Retention {
        min_entries: 10,
        max_entries: 100,
        window_secs: 100,
        max_bytes: usize::MAX,
    };
    c.trim(&r, 1);
    assert_eq!(c.log_len(), 100);
    let room = c.log.capacity();
    assert!((100..=1_024).contains(&room), "{room} entries' room kept");
    // Steady churn within the retention does not reallocate the log.
    for rv in 5_001..=5_300 {
        c.record(&k, Some(one.clone()), rv, 1);
        c.trim(&r, 1);
    }
    assert_eq!(c.log.capacity(), room);
    // The history reset at readiness forgets the sync's room too.
    for rv in 5_301..=9_000 {
        c.record(&k, Some(one.clone()), rv, 1);
    }
    c.reset_history(9_000);
    assert_eq!((c.log_len(), c.log.capacity()), (0, 0));
}

#[test]
fn default_retention_is_bounded_like_the_apiserver_watch_cache() {
    let mut c = Collection::new(0);
    let k = ObjectKey::new("", "n");
    let one = served("n", 1);
    for rv in 1..=2_000 {
        c.record(&k, Some(one.clone()), rv, 0);
    }
    let r = Retention::for_queue(100);
    c.trim(&r, 0);
    assert_eq!(c.log_len(), 1_024, "at most 1,024 entries");
    c.trim(&r, 75);
    assert_eq!(c.log_len(), 1_024, "75 s old entries are still kept");
    c.trim(&r, 76);
    assert_eq!(
        c.log_len(),
        100,
        "older ones beyond --notify-channel-size go"
    );
    assert_eq!(c.horizon(), 1_900);
    // A larger --notify-channel-size is the floor, whatever the age.
    let big = Retention::for_queue(1_500);
    let mut c = Collection::new(0);
    for rv in 1..=2_000 {
        c.record(&k, Some(one.clone()), rv, 0);
    }
    c.trim(&big, 1_000);
    assert_eq!(c.log_len(), 1_500);
}

#[test]
fn trim_bounds_logged_bytes_beyond_the_minimum() {
    let mut c = Collection::new(0);
    let k = ObjectKey::new("", "n");
    for rv in 1..=10 {
        c.record(&k, Some(served("n", rv)), rv, 0);
    }
    let one = entry_bytes(&c.after(9, 1).unwrap_or_default()[0]);
    let r = Retention {
        min_entries: 2,
        max_entries: 100,
        window_secs: 1000,
        max_bytes: one * 4,
    };
    c.trim(&r, 0);
    assert!(
        c.log_bytes <= one * 4 + one,
        "bytes bounded: {}",
        c.log_bytes
    );
    assert!(c.log_len() >= 2 && c.log_len() < 10);
    let tiny = Retention { max_bytes: 0, ..r };
    c.trim(&tiny, 0);
    assert_eq!(c.log_len(), 2, "the minimum is kept whatever its size");
}

#[test]
fn same_but_rv_ignores_only_the_stamp() {
    let mut a = json!({"metadata":{"name":"x","labels":{"k":"v"}},"spec":{"n":1}});
    let mut b = a.clone();
    stamp_rv(&mut a, 7);
    stamp_rv(&mut b, 1234);
    let (ab, bb) = (
        serde_json::to_vec(&a).unwrap_or_default(),
        serde_json::to_vec(&b).unwrap_or_default(),
    );
    assert!(same_but_rv(&bb, 1234, &ab, 7));
    assert!(
        !same_but_rv(&bb, 1234, &ab, 8),
        "the old stamp must match too"
    );
    b["spec"]["n"] = json!(2);
    let bb = serde_json::to_vec(&b).unwrap_or_default();
    assert!(
        !same_but_rv(&bb, 1234, &ab, 7),
        "a content change is a change"
    );
}

#[test]
fn restamp_changes_only_the_rv() {
    let s = served("n1", 5);
    let r = s.restamped(9);
    let v: Value = serde_json::from_slice(&r.json()).unwrap_or_default();
    assert_eq!(v["metadata"]["resourceVersion"], "9");
    assert_eq!(v["metadata"]["labels"]["zone"], "a");
    assert_eq!(r.field("metadata.name"), Some("n1"));
}

#[test]
fn find_stamp_finds_the_first_stamp_like_a_plain_search() {
    let naive =
        |hay: &[u8], stamp: &str| hay.windows(stamp.len()).position(|w| w == stamp.as_bytes());
    let stamp = rv_stamp(42);
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        b"V".to_vec(),
        stamp.as_bytes().to_vec(),
        format!("{stamp}{stamp}").into_bytes(),
        format!(r#"{{"Vx":"VVV","metadata":{{"name":"n",{stamp}}}}}"#).into_bytes(),
        format!(r#"{{"metadata":{},"x":"V"}}"#, rv_stamp(4)).into_bytes(),
        format!(r#""resourceVersion":"4"{}"#, &stamp[..stamp.len() - 1]).into_bytes(),
        format!(r#"VVVVVVVVVVVVVV"resourceVersionV{stamp}V"#).into_bytes(),
    ];
    for hay in &cases {
        assert_eq!(
            find_stamp(hay, &stamp),
            naive(hay, &stamp),
            "{}",
            String::from_utf8_lossy(hay)
        );
    }
    // Every cut of a real object, so the stamp sits at every offset relative to the start.
    let obj = format!(
        r#"{{"kind":"EndpointSlice","metadata":{{"name":"Vv",{stamp}}},"endpoints":[{{"addresses":["10.0.0.1"]}}]}}"#
    );
    for cut in 0..obj.len() {
        let hay = &obj.as_bytes()[cut..];
        assert_eq!(find_stamp(hay, &stamp), naive(hay, &stamp), "cut {cut}");
    }
}

#[test]
fn entries_after_borrow_the_log_in_order() {
    let mut c = Collection::new(10);
    let k = ObjectKey::new("", "n1");
    for rv in [11, 13, 15] {
        c.record(&k, Some(served("n1", rv)), rv, 0);
    }
    let rvs =
        |cursor| -> Result<Vec<u64>, Gone> { Ok(c.entries_after(cursor)?.map(|e| e.rv).collect()) };
    assert_eq!(rvs(10), Ok(vec![11, 13, 15]));
    assert_eq!(rvs(12), Ok(vec![13, 15]));
    assert_eq!(rvs(15), Ok(vec![]));
    assert_eq!(rvs(99), Ok(vec![]));
    assert_eq!(rvs(9), Err(Gone));
    assert_eq!((c.pending(12), c.pending(15), c.pending(99)), (2, 0, 0));
}

#[test]
fn a_replaced_or_deleted_version_is_marked_superseded() {
    let mut c = Collection::new(10);
    let k = ObjectKey::new("", "n1");
    let first = served("n1", 11);
    let second = served("n1", 13);
    c.record(&k, Some(first.clone()), 11, 0);
    assert!(!first.superseded());
    c.record(&k, Some(second.clone()), 13, 0);
    assert!(first.superseded(), "replaced by a newer version");
    assert!(!second.superseded());
    c.record(&k, None, 15, 0);
    assert!(second.superseded(), "deleted");
}
