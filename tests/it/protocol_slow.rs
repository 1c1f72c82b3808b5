//! Conformance checklist of docs/SEMANTICS.md §11, item 24: a watcher that does not read is ended,
//! never silently thinned out, while a fast watcher keeps receiving everything.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
/// Endpoints per pushed slice (about 150 bytes each once served).
const ENDPOINTS: usize = 400;
/// Upper bound on the bytes pushed through the slow watch (far above the socket buffers).
const MAX_PUSH_BYTES: usize = 12 << 20;

#[test]
fn c24_slow_watcher_is_ended_never_thinned_and_fast_watcher_keeps_working() {
    let _heavy = common::heavy();
    let sim = Sim::start(&["--history", "100000"]);
    let w = Wrapper::start(&sim.url, "edge-a1", &["--notify-channel-size=5"]);
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"clusterIP": "10.96.8.8", "ports": [{"port": 80, "protocol": "TCP"}]}}));
    sim.apply(&big_slice(0, ENDPOINTS));
    wait_for("the big slice", || {
        names(&w.get_json(V1)).contains(&"big-1".to_string())
    });
    let start = rv(&w.get_json(V1));
    let path = format!("{V1}?watch=true&timeoutSeconds=60&resourceVersion={start}");

    // The slow watcher: opened, then not read while the changes pile up.
    let mut slow = w.watch(&path);
    assert_eq!(slow.code, 200);
    let done = AtomicBool::new(false);
    let (fast_rvs, pushed) = std::thread::scope(|s| {
        // The fast watcher reads everything as it comes.
        let fast = s.spawn(|| {
            let mut fast = w.watch(&path);
            let mut rvs = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                match fast.next(Duration::from_millis(300)) {
                    Some(ev) => {
                        assert_eq!(ev["type"], "MODIFIED", "{}", ev["type"]);
                        rvs.push(rv(&ev["object"]));
                    }
                    None if done.load(Ordering::SeqCst) => break,
                    None => assert!(!fast.is_ended(), "the fast watch ended"),
                }
            }
            rvs
        });
        let one = serde_json::to_vec(&big_slice(1, ENDPOINTS)).unwrap().len();
        let t = Instant::now();
        let mut round = 1;
        while round * one < MAX_PUSH_BYTES && t.elapsed() < Duration::from_secs(8) {
            let batch: Vec<Value> = (round..round + 5)
                .map(|r| big_slice(r, ENDPOINTS))
                .collect();
            sim.apply(&Value::Array(batch));
            round += 5;
        }
        wait_for("the last change to reach the cache", || {
            w.get_json(&format!("{V1}?fieldSelector=metadata.name%3Dbig-1"))["items"][0]["metadata"]
                ["labels"]["round"]
                .as_str()
                .and_then(|r| r.parse::<usize>().ok())
                == Some(round - 1)
        });
        // Let the fast watcher catch up, then stop it.
        std::thread::sleep(Duration::from_millis(800));
        done.store(true, Ordering::SeqCst);
        (fast.join().unwrap(), round - 1)
    });
    assert_eq!(fast_rvs.len(), pushed, "the fast watcher got every change");
    assert!(
        fast_rvs.windows(2).all(|p| p[0] < p[1]),
        "fast RVs in order"
    );

    // Now drain the slow watcher: what it got is an unbroken prefix of the log, then the server
    // closed the stream.
    let mut slow_rvs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match slow.next(Duration::from_secs(2)) {
            Some(ev) => {
                assert_eq!(ev["type"], "MODIFIED");
                slow_rvs.push(rv(&ev["object"]));
            }
            None => break,
        }
    }
    eprintln!(
        "slow watcher: {} of {pushed} events before the server ended it",
        slow_rvs.len()
    );
    assert!(
        slow.is_ended(),
        "the slow watch was not ended (got {} of {pushed})",
        slow_rvs.len()
    );
    assert!(
        !slow_rvs.is_empty() && slow_rvs.len() < pushed,
        "cut after {} of {pushed}",
        slow_rvs.len()
    );
    assert_eq!(
        slow_rvs[..],
        fast_rvs[..slow_rvs.len()],
        "no event dropped in the middle"
    );

    // The client resumes from its last RV through the log, as the reflector would.
    let last = *slow_rvs.last().unwrap();
    let mut resumed = w.watch(&format!(
        "{V1}?watch=true&timeoutSeconds=20&resourceVersion={last}"
    ));
    let rest: Vec<u64> = (0..pushed - slow_rvs.len())
        .map(|_| rv(&resumed.expect()["object"]))
        .collect();
    assert_eq!(
        rest[..],
        fast_rvs[slow_rvs.len()..],
        "the rest, after resuming"
    );
    // Other watchers keep working.
    sim.apply(&big_slice(0, ENDPOINTS));
    assert_eq!(
        resumed.expect()["object"]["metadata"]["labels"]["round"],
        "0"
    );
}
