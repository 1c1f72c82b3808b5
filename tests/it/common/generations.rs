//! Node "generations" for the failover and relay tests: each change is a node's label `gen` set
//! to the next number; the `node → gen` pairs of a list; a client watch of the nodes; whether a
//! grid-wrapper serves the latest generation of every node; and the check that a watch saw every
//! change exactly once.

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

/// Whether `w` serves, for each of `nodes`, the latest `gen` that `done` gave it.
pub fn converged(w: &Wrapper, nodes: &[&str], done: &[(String, String)]) -> bool {
    let have = gens(&w.get_json("/api/v1/nodes"));
    nodes.iter().all(|n| {
        let want = done
            .iter()
            .rev()
            .find(|(node, _)| node == n)
            .map_or("", |(_, g)| g.as_str());
        have.iter().any(|(node, g)| node == n && g == want)
    })
}

/// A client watch of the nodes on `w` from its current list, for `timeout_secs`.
pub fn node_watch(w: &Wrapper, timeout_secs: u64) -> Watch {
    let list = w.get_json("/api/v1/nodes");
    let watch = Watch::open(
        w.addr,
        &format!(
            "/api/v1/nodes?watch=true&timeoutSeconds={timeout_secs}&resourceVersion={}",
            super::rv(&list)
        ),
        &[],
    );
    assert_eq!(watch.code, 200);
    watch
}

/// Reads `watch` until it has `done.len()` events: each must be a MODIFIED of the next change,
/// with increasing resourceVersions; then nothing more (no DELETED and re-ADDED object, no
/// duplicate).
pub fn assert_every_change_once(watch: &mut Watch, done: &[(String, String)]) {
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
