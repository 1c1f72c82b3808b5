//! Issue "edge autonomy", point 1 — `--cache-dir`: an offline restart serves the snapshot at
//! once (RVs above the previous process's), `/readyz` and `/metrics` say so, the upstream's
//! return is diffed into exactly the real changes (DELETED included) on open watches, and a
//! damaged or foreign snapshot is never served. Against the real binaries; "offline" is an
//! upstream port where nothing listens, "back" is a simulator started on that port.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy::{self, cache_flags, RawWatch};
use common::{free_port, wait_for, Sim, TempDir, Wrapper};
use serde_json::json;

/// A simulator on a fixed loopback port, so that it can go away and come back on the same URL.
fn sim_on(port: u16) -> Sim {
    Sim::start(&["--listen", &format!("127.0.0.1:{port}")])
}

fn flags(dir: &TempDir) -> Vec<String> {
    cache_flags(&dir.path.display().to_string())
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Starts a synced wrapper with a snapshot in `dir`, applies a relabel, waits until the
/// snapshot holds it; returns the wrapper (still running).
fn synced_with_snapshot(sim: &Sim, dir: &TempDir) -> (Wrapper, common::LogSink) {
    let f = flags(dir);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &refs(&f));
    w.wait_ready();
    autonomy::wait_snapshot_writes(&w, 1);
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));
    wait_for("the relabel to prune edge-a2's endpoint", || {
        !common::serves_edge_a2_web(&w)
    });
    autonomy::wait_snapshot_writes(&w, 2);
    (w, log)
}

#[test]
fn cache_dir_offline_restart_serves_the_snapshot_at_once_then_converges_on_the_upstream() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = TempDir::new("cache-offline");
    let sim = sim_on(port);
    let (w1, _log1) = synced_with_snapshot(&sim, &dir);
    let before = autonomy::served(&w1).expect("served");
    let max1 = autonomy::max_rv(&w1);
    // Power cut: no graceful shutdown, and the WAN is down.
    autonomy::signal(&w1, "KILL");
    drop(w1);
    drop(sim);

    let t0 = Instant::now();
    let f = flags(&dir);
    let (w2, log2) = autonomy::start(&url, "edge-a1", &refs(&f));
    let mut first_list = None;
    while t0.elapsed() < Duration::from_secs(10) {
        if w2.get("/apis/discovery.k8s.io/v1/endpointslices").0 == 200 {
            first_list = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let first_list = first_list.expect("the snapshot is served while the upstream is down");
    println!(
        "start → first served list from the snapshot: {} ms",
        first_list.as_millis()
    );
    assert_eq!(
        autonomy::served(&w2).as_ref(),
        Some(&before),
        "exactly what was served before"
    );
    for path in autonomy::COLLECTIONS {
        let list = w2.get_json(path);
        assert!(
            common::rv(&list) > max1,
            "{path}: RVs above the previous process's"
        );
        for item in list["items"].as_array().expect("items") {
            assert!(common::rv(item) > max1, "{path}: item RV reissued");
        }
    }
    let (code, body) = autonomy::readyz(&w2);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("serving the on-disk snapshot"), "{body}");
    assert_eq!(
        autonomy::metric(&w2, "grid_wrapper_serving_snapshot"),
        Some(1.0)
    );
    assert!(autonomy::metric(&w2, "grid_wrapper_snapshot_age_seconds").is_some());
    let text = log2.wait_for_text("serving the snapshot from", Duration::from_secs(20));
    assert_eq!(
        text.matches("serving the snapshot from").count(),
        1,
        "{text}"
    );

    // Watches opened on the snapshot stay open while the upstream comes back changed: `api`
    // deleted, edge-a2 back in zone-a (the fresh simulator's fixture) and web's slice pruned
    // accordingly.
    let mut services = RawWatch::open(w2.addr, "/api/v1/services?watch=true&timeoutSeconds=120");
    let own_node = format!("{}&watch=true&timeoutSeconds=120", common::OWN_NODE);
    let mut nodes = RawWatch::open(w2.addr, &own_node);
    services.read_for(Duration::from_millis(200));
    nodes.read_for(Duration::from_millis(200));
    let (svc_initial, node_initial) = (services.events(), nodes.events());
    let sim2 = sim_on(port);
    sim2.delete("Service", "default", "api");
    let oracle = Wrapper::start(&sim2.url, "edge-a1", &[]);
    let want = autonomy::served(&oracle).expect("oracle state");
    wait_for("the snapshot to converge on the upstream", || {
        autonomy::served(&w2).as_ref() == Some(&want)
    });
    wait_for("readiness to say synced", || {
        autonomy::readyz(&w2).1 == "ok"
    });
    assert_eq!(
        autonomy::metric(&w2, "grid_wrapper_serving_snapshot"),
        Some(0.0)
    );
    assert!(
        !services.read_for(Duration::from_millis(300)),
        "the watch stays open"
    );
    assert!(
        !nodes.read_for(Duration::from_millis(300)),
        "the watch stays open"
    );
    let svc_text = String::from_utf8_lossy(&services.bytes).into_owned();
    assert_eq!(
        svc_text.matches("\"type\":\"DELETED\"").count(),
        1,
        "one DELETED (api): {svc_text}"
    );
    assert!(svc_text.contains("\"name\":\"api\""), "{svc_text}");
    assert_eq!(
        services.events() - svc_initial,
        1,
        "only the real change reaches the services watch"
    );
    let node_text = String::from_utf8_lossy(&nodes.bytes).into_owned();
    // edge-a2 is not this node: its change is a fact, not an event on kube-proxy's watch.
    assert_eq!(
        nodes.events() - node_initial,
        0,
        "no event for another Node: {node_text}"
    );
}

#[test]
fn cache_dir_damaged_snapshot_is_ignored_with_one_warning_and_converges_once_online() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let good = TempDir::new("cache-good");
    let sim = sim_on(port);
    let (w, _l) = synced_with_snapshot(&sim, &good);
    autonomy::signal(&w, "KILL");
    drop(w);
    drop(sim);
    let bytes = std::fs::read(good.path.join("snapshot")).expect("a snapshot was written");
    assert!(bytes.len() > 1000, "snapshot size {}", bytes.len());
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x01;
    let damages: [(&str, Vec<u8>); 4] = [
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("garbage", b"{\"kind\":\"NotASnapshot\"}".repeat(100)),
        ("one flipped bit", flipped),
        ("empty", Vec::new()),
    ];
    for (what, damaged) in damages {
        let dir = TempDir::new("cache-damaged");
        std::fs::write(dir.path.join("snapshot"), &damaged).expect("write damaged snapshot");
        let mut f = flags(&dir);
        f.push("--not-ready-hold-seconds=0".into());
        let (mut w, log) = autonomy::start(&url, "edge-a1", &refs(&f));
        // Refused at WARN, and then nothing served.
        log.wait_for_line(&format!("{what}: the WARN"), Duration::from_secs(20), |l| {
            l.contains("WARN") && l.contains("ignoring the snapshot")
        });
        let (code, _, body) = w.get("/api/v1/services");
        assert_eq!(
            code,
            503,
            "{what}: nothing served: {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(autonomy::readyz(&w).0, 503, "{what}");
        assert!(
            w.proc.child.try_wait().expect("wait").is_none(),
            "{what}: still running"
        );
        let text = log.text();
        let warnings = text
            .lines()
            .filter(|l| l.contains("ignoring the snapshot"))
            .count();
        assert_eq!(warnings, 1, "{what}: one WARN line:\n{text}");
        // The upstream comes back: it converges (and writes a good snapshot over the bad one).
        let sim = sim_on(port);
        w.wait_ready();
        let oracle = Wrapper::start(&sim.url, "edge-a1", &[]);
        let want = autonomy::served(&oracle);
        wait_for("convergence", || autonomy::served(&w) == want);
        autonomy::wait_snapshot_writes(&w, 1);
        drop(oracle);
        drop(sim);
        let _ = w.proc.child.kill();
    }
}

#[test]
fn cache_dir_snapshot_of_another_node_or_upstream_or_a_wiped_dir_is_never_served() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = TempDir::new("cache-identity");
    let sim = sim_on(port);
    let (w, _l) = synced_with_snapshot(&sim, &dir);
    autonomy::signal(&w, "TERM");
    drop(w);
    drop(sim);
    let mut f = flags(&dir);
    f.push("--not-ready-hold-seconds=0".into());
    let other_url = autonomy::dead_master();
    for (what, master, host, expect) in [
        (
            "another --hostname",
            url.as_str(),
            "edge-b1",
            "written for node",
        ),
        (
            "another upstream",
            other_url.as_str(),
            "edge-a1",
            "written for node",
        ),
    ] {
        let (w, log) = autonomy::start(master, host, &refs(&f));
        // Refused, and then nothing served.
        log.wait_for_text(expect, Duration::from_secs(20));
        assert_eq!(w.get("/api/v1/services").0, 503, "{what}: nothing served");
    }
    // The snapshot itself is intact: the right identity serves it.
    let (w, _log) = autonomy::start(&url, "edge-a1", &refs(&f));
    w.wait_ready();
    assert_eq!(w.get("/api/v1/services").0, 200);
    drop(w);
    // Wiped: an empty start.
    std::fs::remove_dir_all(&dir.path).expect("wipe");
    let (w, log) = autonomy::start(&url, "edge-a1", &refs(&f));
    // Found nothing to load, and then nothing served.
    log.wait_for_text("no snapshot in", Duration::from_secs(20));
    assert_eq!(w.get("/api/v1/services").0, 503, "wiped: nothing served");
}

#[test]
fn cache_dir_rvs_stay_above_the_previous_process_even_with_the_clock_set_back() {
    let sim = Sim::start(&[]);
    let dir = TempDir::new("cache-clock");
    let f = flags(&dir);
    let (w1, _l) = autonomy::start(&sim.url, "edge-a1", &refs(&f));
    w1.wait_ready();
    let max1 = autonomy::max_rv(&w1);
    autonomy::signal(&w1, "TERM");
    drop(w1);
    // The board reboots with its clock a year behind (no battery-backed RTC).
    let Some((w2, log)) = autonomy::start_with_fake_clock("-365d", &sim.url, &refs(&f)) else {
        return;
    };
    for path in autonomy::COLLECTIONS {
        let list = w2.get_json(path);
        assert!(
            common::rv(&list) > max1,
            "{path}: {} not above {max1}\n{}",
            common::rv(&list),
            log.text()
        );
    }
}

/// With a long `--cache-write-interval`, a change made after the last snapshot is written as
/// soon as the upstream is lost (not an interval later), so that an offline restart serves
/// what was served, not an older state: kube-proxy would otherwise program an earlier view
/// back (found by `make e2e`: the apiserver stopped, then grid-wrapper killed and restarted).
#[test]
fn cache_dir_change_is_written_as_soon_as_the_upstream_is_lost() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = TempDir::new("cache-lost");
    let sim = sim_on(port);
    let path = dir.path.display().to_string();
    let flags = [
        format!("--cache-dir={path}"),
        "--cache-write-interval=3600".into(),
    ];
    let (w1, log1) = autonomy::start(&url, "edge-a1", &refs(&flags));
    w1.wait_ready();
    autonomy::wait_snapshot_writes(&w1, 1);
    let unix = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let unsaved = "grid_wrapper_snapshot_unsaved_since_timestamp_seconds";
    let relabelled = unix();
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));
    wait_for("the relabel to prune edge-a2's endpoint", || {
        !common::serves_edge_a2_web(&w1)
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        autonomy::metric(&w1, "grid_wrapper_snapshot_writes_total"),
        Some(1.0),
        "within the interval, the change waits"
    );
    // The snapshot is behind since the relabel (whole seconds), and says so.
    let since = autonomy::metric(&w1, unsaved).expect(unsaved);
    assert!(
        since >= relabelled.floor() - 1.0 && since <= unix(),
        "{unsaved} {since}, relabelled at {relabelled}"
    );
    let served = autonomy::served(&w1).expect("served");
    // The WAN goes down: the change is written at once.
    drop(sim);
    autonomy::wait_snapshot_writes(&w1, 2);
    assert_eq!(
        autonomy::metric(&w1, unsaved),
        Some(0.0),
        "every change written"
    );
    log1.wait_for_text(
        "the upstream cannot be reached: writing the snapshot now",
        Duration::from_secs(5),
    );
    autonomy::signal(&w1, "KILL");
    drop(w1);

    let (w2, _log2) = autonomy::start(&url, "edge-a1", &refs(&flags));
    w2.wait_ready();
    assert!(
        !common::serves_edge_a2_web(&w2),
        "edge-a2's relabel restored"
    );
    assert_eq!(autonomy::served(&w2).as_ref(), Some(&served));
}
