//! Node "generations" for the failover and relay tests: each change is a node's label `gen` set
//! to the next number; the `node → gen` pairs of a list; kube-proxy's watch of its own Node;
//! whether a grid-wrapper serves the latest generation of its own Node; and the check that a
//! watch saw every change of it exactly once. A grid-wrapper serves only its own Node (the others
//! are held as facts, docs/SEMANTICS.md §1.1): the changes of the other nodes are the upstream's
//! churn it must take without an event.

use std::time::Duration;

use serde_json::Value;

use super::{Watch, Wrapper};

/// `node → gen` of a node list, sorted.
pub fn gens(list: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| {
            let s = |p: &str| {
                n.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/metadata/name"), s("/metadata/labels/gen"))
        })
        .collect();
    v.sort();
    v
}

/// kube-proxy's list of its own Node `host`.
pub fn own_node(host: &str) -> String {
    format!("/api/v1/nodes?fieldSelector=metadata.name%3D{host}")
}

/// The changes of `done` made to `host`.
pub fn of(host: &str, done: &[(String, String)]) -> Vec<(String, String)> {
    done.iter().filter(|(n, _)| n == host).cloned().collect()
}

/// Whether `w`, the grid-wrapper of node `host`, serves its own Node with the latest `gen` that
/// `done` gave it.
pub fn converged(w: &Wrapper, host: &str, done: &[(String, String)]) -> bool {
    let have = gens(&w.get_json(&own_node(host)));
    let want = of(host, done).pop().map_or(String::new(), |(_, g)| g);
    have == [(host.to_string(), want)]
}

/// kube-proxy's watch of its own Node `host` on `w` from its current list, for `timeout_secs`.
pub fn node_watch(w: &Wrapper, host: &str, timeout_secs: u64) -> Watch {
    let list = w.get_json(&own_node(host));
    let watch = Watch::open(
        w.addr,
        &format!(
            "{}&watch=true&timeoutSeconds={timeout_secs}&resourceVersion={}",
            own_node(host),
            super::rv(&list)
        ),
        &[],
    );
    assert_eq!(watch.code, 200);
    watch
}

/// Reads `watch` (of node `host`) until it has an event for each change of `done` made to
/// `host`: each must be a MODIFIED of the next such change, with increasing resourceVersions;
/// then nothing more (no DELETED and re-ADDED object, no duplicate, no event for another node).
pub fn assert_every_change_once(watch: &mut Watch, host: &str, done: &[(String, String)]) {
    let done = &of(host, done)[..];
    let mut seen = Vec::new();
    let mut last_rv = 0;
    while seen.len() < done.len() {
        let Some(ev) = watch.next(Duration::from_secs(10)) else {
            break;
        };
        assert_eq!(ev["type"], "MODIFIED", "only the real changes: {ev}");
        let rv = super::rv(&ev["object"]);
        assert!(
            rv > last_rv,
            "resourceVersions increase: {rv} after {last_rv}"
        );
        last_rv = rv;
        let s = |p: &str| {
            ev.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        seen.push((s("/object/metadata/name"), s("/object/metadata/labels/gen")));
    }
    assert_eq!(
        seen, done,
        "the client's watch saw every change exactly once"
    );
    assert!(
        watch.next(Duration::from_millis(700)).is_none(),
        "no extra (duplicate) event"
    );
}
