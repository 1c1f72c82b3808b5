//! Issue "edge autonomy", point 2 (our own RVs) — a restarted grid-wrapper never accepts an RV
//! handed out by an earlier process, with or without `--cache-dir`, even when the board's clock
//! boots at the same stale time every time (no battery-backed clock): RVs carry a per-process
//! epoch, so a foreign RV is answered 410 and the client relists. Both processes run under
//! libfaketime starting at the same fake instant; skipped (with the reason) without `faketime`.

use crate::common;

use common::autonomy;
use common::Sim;
use serde_json::json;

/// The fake clock of both processes: it starts at the same instant at every start, as on a
/// board that restores a saved time at boot.
const STALE_BOOT: &str = "@2020-01-01 00:00:00";

#[test]
fn foreign_rv_gets_410_after_a_restart_with_the_same_stale_clock_without_cache_dir() {
    let sim = Sim::start(&[]);
    let Some((w1, _l1)) = autonomy::start_with_fake_clock(STALE_BOOT, &sim.url, &[]) else {
        return;
    };
    // RVs a client of the first process holds: list RVs and an event's RV.
    let list = w1.get_json(common::OWN_NODE);
    let mut watch = w1.watch(&format!(
        "{}&watch=true&timeoutSeconds=10&resourceVersion={}",
        common::OWN_NODE,
        common::rv(&list)
    ));
    sim.label_node("edge-a1", json!({"epoch-test": "1"}));
    let event_rv = common::rv(&watch.expect()["object"]);
    let mut held: Vec<u64> = autonomy::COLLECTIONS
        .iter()
        .map(|p| common::rv(&w1.get_json(p)))
        .collect();
    held.push(event_rv);
    drop(watch);
    drop(w1);

    let Some((w2, _l2)) = autonomy::start_with_fake_clock(STALE_BOOT, &sim.url, &[]) else {
        return;
    };
    let current = autonomy::max_rv(&w2);
    println!("first process's RVs {held:?}; second process's current RV {current}");
    for rv in held {
        assert_ne!(rv >> 40, current >> 40, "a new epoch");
        let mut stale = w2.watch(&format!(
            "{}&watch=true&timeoutSeconds=5&resourceVersion={rv}",
            common::OWN_NODE
        ));
        let ev = stale.expect();
        assert_eq!(ev["type"], "ERROR", "RV {rv} of the first process: {ev}");
        assert_eq!(ev["object"]["code"], 410, "{ev}");
    }
}

#[test]
fn with_cache_dir_rvs_keep_growing_across_restarts_at_the_same_stale_clock() {
    let sim = Sim::start(&[]);
    let dir = common::TempDir::new("epoch");
    let f = autonomy::cache_flags(&dir.path.display().to_string());
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    let mut last = 0;
    for round in 0..3 {
        let Some((mut w, _log)) = autonomy::start_with_fake_clock(STALE_BOOT, &sim.url, &f) else {
            return;
        };
        let lowest = autonomy::COLLECTIONS
            .iter()
            .flat_map(|p| {
                let l = w.get_json(p);
                let mut rvs = vec![common::rv(&l)];
                rvs.extend(l["items"].as_array().into_iter().flatten().map(common::rv));
                rvs
            })
            .min()
            .unwrap_or(0);
        assert!(lowest > last, "round {round}: RV {lowest} not above {last}");
        last = autonomy::max_rv(&w);
        autonomy::signal(&w, "TERM");
        let status = autonomy::wait_exit(&mut w, std::time::Duration::from_secs(5));
        assert!(
            status.is_some_and(|s| s.success()),
            "round {round}: graceful exit under faketime"
        );
    }
}
