//! Issue 43: watches whose clients never read cost grid-wrapper a bounded amount of memory each,
//! whatever the size of the cache (their initial events are produced as the socket drains, not
//! queued up front), and in a quiet cluster they are ended after `--watch-stall-timeout` and
//! counted (docs/SEMANTICS.md §6, §6.1). Against the real binaries, over loopback.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::autonomy::metric;
use common::*;

/// A cluster whose EndpointSlices list is several MiB: 4,000 slices.
const SCALE: [&str; 12] = [
    "--fixture",
    "scale",
    "--nodes",
    "40",
    "--zones",
    "4",
    "--services",
    "4000",
    "--endpoints-per-slice",
    "10",
    "--history",
    "100",
];
const HOSTNAME: &str = "node-00000";
const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";
/// Stuck watches of each kind (plain from resourceVersion 0, WatchList).
const EACH: usize = 25;
/// The stall bound given to grid-wrapper, seconds.
const STALL: u64 = 3;
/// The most a stuck watch may add to grid-wrapper's RSS: far below what queueing its 4,000
/// initial events costs (about 90 bytes each as shared pointers, ~350 KiB; about 1 KiB each
/// as copies), above a batch's worth (the JSON of a version held in protobuf form alone is
/// decoded for the watch: a batch of up to `INITIAL_HIGH_WATER`, 64 KiB, of copies).
const PER_WATCH_BOUND: u64 = 160 << 10;

fn vm_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// Opens a watch on `path`, asking for `accept`, and never reads it.
fn stuck(w: &Wrapper, path: &str, accept: &str) -> TcpStream {
    let mut s = TcpStream::connect(w.addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n"
    )
    .expect("send the request");
    s
}

fn open_slice_watches(w: &Wrapper) -> f64 {
    metric(
        w,
        "grid_wrapper_open_watches{resource=\"endpointslices.discovery.k8s.io/v1\"}",
    )
    .unwrap_or(-1.0)
}

#[test]
fn stuck_watches_cost_o1_memory_and_are_ended_when_nothing_is_read() {
    let _heavy = common::heavy();
    let sim = Sim::start(&SCALE);
    let stall = format!("--watch-stall-timeout={STALL}");
    let w = Wrapper::start_unready(&sim.url, HOSTNAME, &[&stall, "--debug"]);
    // A sync of this size through a debug build on a loaded machine: not a speed assertion.
    wait_for_long("the sync", Duration::from_secs(180), || {
        w.readyz() == Some(200)
    });
    let pid = w.proc.child.id();
    let all = w.get_json(&format!("{V1}?labelSelector={SELECTOR_L}"));
    let n = all["items"].as_array().map_or(0, Vec::len);
    assert!(n >= 4000, "{n} slices served");

    // Warm up: one watch of each kind read to its initial end marker, then closed.
    let plain = format!("{V1}?labelSelector={SELECTOR_L}&watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=600");
    let watchlist = format!("{V1}?labelSelector={SELECTOR_L}&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=600");
    for path in [&plain, &watchlist] {
        let mut reader = w.watch(path);
        let mut added = 0;
        for _ in 0..=n {
            let ev = reader.expect();
            if ev["type"] != "ADDED" {
                assert_eq!(ev["type"], "BOOKMARK", "{path}: {ev}");
                break;
            }
            added += 1;
        }
        assert_eq!(added, n, "{path}: every slice, then the marker");
    }
    wait_for("the warm-up watches to close", || {
        open_slice_watches(&w) == 0.0
    });

    // Every version compacted to its one held form (the compactor starts once the cache is
    // ready): the memory measured below is the watches', not the compaction's.
    wait_for_long("every version compacted", Duration::from_secs(180), || {
        metric(&w, "grid_wrapper_served_forms{form=\"json\"}") == Some(0.0)
    });
    let before = vm_rss(pid);
    let opened = Instant::now();
    let mut held = Vec::new();
    // In JSON: decoded from the held form as they are queued (a watch holds at most a batch
    // of such copies). Kube-proxy's protobuf would not do: in that form the initial events of
    // this cache fit in the sockets' buffers, so nothing would be stuck.
    for _ in 0..EACH {
        held.push(stuck(&w, &plain, "application/json"));
        held.push(stuck(&w, &watchlist, "application/json"));
    }
    let count = held.len();
    wait_for("every stuck watch to be open", || {
        open_slice_watches(&w) == count as f64
    });
    // Each one is blocked on its socket once it holds bytes the client has not read: until
    // then the loop may still be producing its next events (a loaded machine).
    let watchers = || {
        let state = w.debug_json("/debug/state");
        state["watchers"]["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    wait_for_long(
        "every stuck watch to hold unsent bytes",
        Duration::from_secs(300),
        || {
            let items = watchers();
            items.len() == count && items.iter().all(|i| i["unsent_bytes"].as_u64() > Some(0))
        },
    );
    // Whatever each one queues, it queues while the loop serves it: by now, and until they
    // are ended, their memory is held. Take the largest of a few readings.
    let mut during = 0;
    for _ in 0..5 {
        during = during.max(vm_rss(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    // /debug/state shows each of them still sending its initial events.
    let items = watchers();
    assert_eq!(items.len(), count, "{items:#?}");
    for i in &items {
        assert_eq!(i["initial_events"], true, "{i}");
        assert!(i["unsent_bytes"].as_u64() > Some(0), "{i}");
    }
    let per_watch = during.saturating_sub(before) / count as u64;
    eprintln!(
        "stuck watches: {count} over {n} slices; RSS {before} -> {during} bytes, {per_watch} bytes per watch"
    );
    assert!(
        per_watch < PER_WATCH_BOUND,
        "{per_watch} bytes of RSS per stuck watch (bound {PER_WATCH_BOUND}): it grows with the cache"
    );

    // A quiet cluster: nothing changes, yet every one of them is ended within the stall bound
    // (plus the loop's slack) and counted as stalled.
    wait_for_long(
        "the stuck watches to be ended as stalled",
        Duration::from_secs(STALL + 10),
        || metric(&w, "grid_wrapper_watches_ended_total{reason=\"stalled\"}") == Some(count as f64),
    );
    assert!(
        opened.elapsed() >= Duration::from_secs(STALL),
        "ended before the bound: {:?}",
        opened.elapsed()
    );
    assert_eq!(open_slice_watches(&w), 0.0);
    let after = vm_rss(pid);
    eprintln!("RSS after they ended: {after} bytes");
    drop(held);
}
