//! Issue "edge autonomy", point 2 — the upstream's resourceVersions go backwards (etcd restored,
//! control plane replaced, an intermediate cache with its own RVs): the upstream answers the
//! reflectors' re-watch "too large resource version" (HTTP 504, or an ERROR event), and
//! grid-wrapper relists from scratch, diffs, and converges — DELETED for what disappeared — with
//! a client's watch open throughout. Against the real binaries.

mod common;

use std::time::Duration;

use common::autonomy::{self, RawWatch};
use common::{wait_for, Sim, Wrapper};
use serde_json::json;

fn rv_reset_converges(form: &str) {
    let sim = Sim::start(&[]);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &[]);
    w.wait_ready();
    // Move the upstream's RV well above where the reset will put it.
    for i in 0..40 {
        sim.label_node("edge-c1", json!({"bump": i.to_string()}));
    }
    wait_for("the bumps to be served", || {
        w.get_json("/api/v1/nodes/edge-c1")["metadata"]["labels"]["bump"] == "39"
    });
    let upstream_rv = common::rv(&sim.get_json("/api/v1/nodes"));
    let mut watches: Vec<(&str, RawWatch)> = [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        "/api/v1/nodes",
    ]
    .into_iter()
    .map(|p| {
        let rv = common::rv(&w.get_json(p));
        let path = format!("{p}?watch=true&timeoutSeconds=120&resourceVersion={rv}");
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
    sim.delete("Service", "default", "api");
    sim.delete("Endpoints", "default", "api");
    sim.delete("EndpointSlice", "default", "api-xyz89");
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));

    let oracle = Wrapper::start(&sim.url, "edge-a1", &[]);
    let want = autonomy::served(&oracle).expect("oracle");
    wait_for("convergence after the RV reset", || {
        autonomy::served(&w).as_ref() == Some(&want)
    });
    assert!(relists(&w) > relists_before, "relisted from scratch");
    let text = log.text();
    let too_large = text
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("too large"))
        .count();
    assert!(too_large >= 1, "the too-large answer is logged:\n{text}");
    assert!(
        too_large <= 20,
        "no retry loop on the refused RV ({too_large} lines):\n{text}"
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
    assert_eq!(
        watches[4].1.events(),
        1,
        "nodes: only edge-a2's relabel: {nodes}"
    );
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
