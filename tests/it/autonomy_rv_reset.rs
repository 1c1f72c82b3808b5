//! Issue "edge autonomy", point 2 — the upstream's resourceVersions go backwards (etcd restored,
//! control plane replaced, an intermediate cache with its own RVs): the upstream answers the
//! reflectors' re-watch "too large resource version" (HTTP 504, or an ERROR event), and
//! grid-wrapper relists from scratch, diffs, and converges — DELETED for what disappeared — with
//! a client's watch open throughout. Issue 43: a real apiserver answers no such thing — it
//! accepts the re-watch from its future and stays silent — so grid-wrapper reads the upstream's
//! current RV before re-watching (watches ended, cut, or kept open and silent past
//! `--watch-progress-timeout`) and relists when it went back. Against the real binaries.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy::{self, RawWatch};
use common::{wait_for, Sim, Wrapper};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn rv_reset_converges(form: &str) {
    let sim = Sim::start(&[]);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &[]);
    w.wait_ready();
    // Move the upstream's RV well above where the reset will put it.
    bump(&sim, &w);
    let upstream_rv = common::rv(&sim.get_json("/api/v1/nodes"));
    let mut watches: Vec<(&str, RawWatch)> = [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        common::OWN_NODE,
    ]
    .into_iter()
    .map(|p| {
        let rv = common::rv(&w.get_json(p));
        let sep = if p.contains('?') { '&' } else { '?' };
        let path = format!("{p}{sep}watch=true&timeoutSeconds=120&resourceVersion={rv}");
        (p, RawWatch::open(w.addr, &path))
    })
    .collect();
    let relists_before = relists(&w);

    // The upstream is replaced: RVs restart far below, then `api` is deleted and edge-a2 moves
    // to zone-b (web's topology view changes) — none of it on the stream the wrapper had.
    let reset = sim.reset_rv(20, Some(form));
    assert!(
        reset["resourceVersion"]
            .as_str()
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
            < upstream_rv,
        "{reset}"
    );
    let want = change_after_reset(&sim);
    wait_for("convergence after the RV reset", || {
        autonomy::served(&w).as_ref() == Some(&want)
    });
    assert!(relists(&w) > relists_before, "relisted from scratch");
    // Each reflector notices it one way or the other: its re-watch (or the relist at its RV)
    // answered "too large", or, read before the re-watch, the upstream's RV below its own.
    let gone_back = |l: &str| {
        let l = l.to_ascii_lowercase();
        l.contains("too large") || l.contains("resourceversion went back")
    };
    let text = log.wait_for_line("the RVs gone back", Duration::from_secs(20), gone_back);
    let noticed = text.lines().filter(|l| gone_back(l)).count();
    assert!(noticed >= 1, "the RVs gone back are logged:\n{text}");
    assert!(
        noticed <= 20,
        "no retry loop on the refused RV ({noticed} lines):\n{text}"
    );

    for (path, watch) in &mut watches {
        assert!(
            !watch.read_for(Duration::from_millis(300)),
            "{path}: the client's watch stays open"
        );
    }
    let body = |i: usize| String::from_utf8_lossy(&watches[i].1.bytes).into_owned();
    let services = body(0);
    assert_eq!(
        watches[0].1.events(),
        1,
        "services: only the deletion: {services}"
    );
    assert!(
        services.contains("\"type\":\"DELETED\"") && services.contains("\"name\":\"api\""),
        "{services}"
    );
    let endpoints = body(1);
    assert!(
        endpoints.contains("\"type\":\"DELETED\"") && endpoints.contains("\"name\":\"api\""),
        "{endpoints}"
    );
    for i in [2, 3] {
        let slices = body(i);
        assert!(
            slices.contains("\"type\":\"DELETED\"") && slices.contains("\"name\":\"api-xyz89\""),
            "{}: {slices}",
            watches[i].0
        );
        assert!(
            slices.contains("\"type\":\"MODIFIED\"") && slices.contains("\"name\":\"web-abc12\""),
            "{}: web's slice re-pruned after the relabel: {slices}",
            watches[i].0
        );
    }
    let nodes = body(4);
    // edge-a2's relabel is another Node's: a fact, not an event on kube-proxy's own Node.
    assert_eq!(watches[4].1.events(), 0, "nodes: none: {nodes}");
}

/// Moves the upstream's RV well above where a reset will put it, and waits for the wrapper.
fn bump(sim: &Sim, w: &Wrapper) {
    for i in 0..40 {
        sim.label_node("edge-a1", json!({"bump": i.to_string()}));
    }
    wait_for("the bumps to be served", || {
        w.get_json(common::OWN_NODE)["items"][0]["metadata"]["labels"]["bump"] == "39"
    });
}

/// After a reset: `api` is deleted and edge-a2 moves to zone-b (web's topology view changes).
/// Returns what a fresh grid-wrapper serves then.
fn change_after_reset(sim: &Sim) -> BTreeMap<String, BTreeMap<String, Value>> {
    sim.delete("Service", "default", "api");
    sim.delete("Endpoints", "default", "api");
    sim.delete("EndpointSlice", "default", "api-xyz89");
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));
    let oracle = Wrapper::start(&sim.url, "edge-a1", &[]);
    autonomy::served(&oracle).expect("oracle")
}

fn relists(w: &Wrapper) -> f64 {
    ["nodes", "services", "endpoints"]
        .iter()
        .filter_map(|r| {
            autonomy::metric(
                w,
                &format!("grid_wrapper_upstream_relists_total{{resource=\"{r}\"}}"),
            )
        })
        .sum()
}

#[test]
fn upstream_rv_reset_answered_with_http_504_converges_with_deleted_events() {
    rv_reset_converges("http");
}

#[test]
fn upstream_rv_reset_answered_with_an_error_event_converges_with_deleted_events() {
    rv_reset_converges("event");
}

/// How long convergence may take after a silent restore: a few of the test's 3 s progress
/// deadlines and backoffs, far below the 120 s deadline (or the 660 s idle limit) a watch
/// from the restored upstream's future would otherwise sit out.
const SILENT_RESTORE_BOUND: Duration = Duration::from_secs(20);

/// The upstream is restored from an older state the way a real apiserver behaves: its RVs
/// restart lower, and a watch from above them is accepted with 200 and stays silent (no event,
/// no bookmark). `watches` says what became of the open upstream watches: ended cleanly (an
/// apiserver shutting down), cut (a crash), or kept open, silent (`extra` then holds a short
/// `--watch-progress-timeout`). grid-wrapper serves the restored state promptly (as a fresh
/// grid-wrapper serves it), counts the relists and says why.
fn silent_restore_converges(watches: &str, extra: &[&str]) {
    let sim = Sim::start(&["--bookmark-interval", "1"]);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", extra);
    w.wait_ready();
    bump(&sim, &w);
    let relists_before = relists(&w);

    let reset = sim.control(
        "reset-rv",
        &json!({"rv": 20, "too_large": "silent", "watches": watches}),
    );
    assert_eq!(reset["watches"], watches, "{reset}");
    let want = change_after_reset(&sim);
    let deadline = Instant::now() + SILENT_RESTORE_BOUND;
    while autonomy::served(&w).as_ref() != Some(&want) {
        assert!(
            Instant::now() < deadline,
            "not converged within {SILENT_RESTORE_BOUND:?} of the silent restore:\n{}",
            log.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(relists(&w) > relists_before, "relisted from scratch");
    let text = log.wait_for_text("resourceVersion went back from", Duration::from_secs(20));
    let went_back: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("resourceVersion went back from"))
        .collect();
    assert!(
        !went_back.is_empty() && went_back.len() <= 10,
        "one line per reflector that noticed:\n{text}"
    );
    assert!(
        went_back[0].contains("WARN")
            && went_back[0].contains("(etcd restored or control plane replaced?)"),
        "{}",
        went_back[0]
    );
}

#[test]
fn a_silent_restore_whose_watches_ended_is_noticed_at_the_rewatch() {
    silent_restore_converges("end", &[]);
}

#[test]
fn a_silent_restore_whose_watches_were_cut_is_noticed_at_the_rewatch() {
    silent_restore_converges("cut", &[]);
}

#[test]
fn a_silent_restore_behind_open_watches_is_noticed_at_the_progress_deadline() {
    silent_restore_converges("keep", &["--watch-progress-timeout=3"]);
}
