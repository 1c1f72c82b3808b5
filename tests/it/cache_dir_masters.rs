//! `--cache-dir` with several `--master` servers (issue 39, point 6): the snapshot is tied to the
//! set of servers, not to their order, so a restart with `--master=B,A` serves the snapshot that
//! `--master=A,B` wrote. Against the real binaries; "offline" is upstream ports where nothing
//! listens.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy::{self, cache_flags};
use common::{free_port, Sim, TempDir};

#[test]
fn cache_dir_snapshot_is_served_whatever_the_order_of_the_masters() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dead = autonomy::dead_master();
    let dir = TempDir::new("cache-masters");
    let flags = cache_flags(&dir.path.display().to_string());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();

    let sim = Sim::start(&["--listen", &format!("127.0.0.1:{port}")]);
    let (w, _log) = autonomy::start(&format!("{url},{dead}"), "edge-a1", &flags);
    w.wait_ready();
    autonomy::wait_snapshot_writes(&w, 1);
    let before = autonomy::served(&w).expect("served");
    autonomy::signal(&w, "TERM");
    drop(w);
    drop(sim);

    // Offline, the same two servers in the other order.
    let (w, log) = autonomy::start(&format!("{dead},{url}"), "edge-a1", &flags);
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.get(common::OWN_NODE).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the snapshot of --master={url},{dead} is not served with --master={dead},{url}:\n{}",
            log.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(autonomy::served(&w), Some(before), "what was served before");
    // Logged after the snapshot was read (and would have been refused).
    let text = log.wait_for_text("serving the snapshot from", Duration::from_secs(20));
    assert!(!text.contains("ignoring the snapshot"), "{text}");
}
