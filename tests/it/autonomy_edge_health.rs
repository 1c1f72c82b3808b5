//! Issue "edge autonomy", point 3 — the edge-health filter
//! (`--service-autonomy-enhancement=enabled=true,address=URL,interval=S`) against the real binary,
//! with the simulator's edge-health stub: a map keyed by node InternalIP or by node name removes
//! the endpoints on abnormal nodes from every Service (topology or not), a failing poll restores
//! them, and each change converges within two intervals.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy;
use common::{Sim, Wrapper};
use serde_json::{json, Value};

const INTERVAL: u64 = 1;

fn start(sim: &Sim) -> (Wrapper, common::LogSink) {
    let flag = format!(
        "--service-autonomy-enhancement=enabled=true,address={},interval={INTERVAL}",
        sim.edge_health_url()
    );
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &[&flag]);
    w.wait_ready();
    (w, log)
}

/// First addresses served for the `api` (normal) and `web` (topology, zone-a) slices and the
/// `api` Endpoints.
fn view(w: &Wrapper) -> (Vec<String>, Vec<String>, Vec<String>) {
    let slices = w.get_json("/apis/discovery.k8s.io/v1/endpointslices");
    let slice = |name: &str| {
        slices["items"]
            .as_array()
            .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == name))
            .map(common::slice_ips)
            .unwrap_or_default()
    };
    let ep = w.get_json("/api/v1/namespaces/default/endpoints/api");
    let ep_ips = ep["subsets"][0]["addresses"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["ip"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (slice("api-xyz89"), slice("web-abc12"), ep_ips)
}

fn entry(normal: bool) -> Value {
    json!({"normal": normal, "hmac": "ignored", "time": 1_700_000_000})
}

/// Sets the stub's answer and waits for the view `want`; returns how long that took.
fn converge(
    sim: &Sim,
    w: &Wrapper,
    status: u16,
    body: Value,
    want: &(Vec<String>, Vec<String>, Vec<String>),
) -> Duration {
    let t0 = Instant::now();
    sim.set_edge_health(status, body);
    let limit = Duration::from_secs(2 * INTERVAL);
    while &view(w) != want {
        assert!(
            t0.elapsed() < limit + Duration::from_millis(500),
            "not converged within two intervals: {:?}, want {want:?}",
            view(w)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn edge_health_keyed_by_internal_ip_drops_endpoints_of_abnormal_nodes_from_every_service() {
    let sim = Sim::start(&[]);
    let (w, log) = start(&sim);
    let all = (
        strings(&["10.244.1.20", "10.244.3.20", "10.244.4.20"]),
        strings(&["10.244.1.10", "10.244.2.10"]),
        strings(&["10.244.1.20", "10.244.3.20", "10.244.4.20"]),
    );
    assert_eq!(view(&w), all);
    let kube_before = w.get_json("/api/v1/namespaces/default/endpoints/kubernetes");
    // edge-b1 (192.168.2.11) and edge-a2 (192.168.1.12) abnormal; edge-c1 explicitly normal.
    let took = converge(
        &sim,
        &w,
        200,
        json!({"192.168.2.11": entry(false), "192.168.1.12": entry(false), "192.168.3.11": entry(true)}),
        &(
            strings(&["10.244.1.20", "10.244.4.20"]),
            strings(&["10.244.1.10"]),
            strings(&["10.244.1.20", "10.244.4.20"]),
        ),
    );
    println!("keyed by IP: converged in {} ms", took.as_millis());
    let kube = w.get_json("/api/v1/namespaces/default/endpoints/kubernetes");
    assert_eq!(
        kube["subsets"], kube_before["subsets"],
        "default/kubernetes untouched"
    );
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_edge_health_abnormal_nodes"),
        Some(2.0)
    );
    // The abnormal set is logged.
    log.wait_for_line("the abnormal set", Duration::from_secs(20), |l| {
        l.contains("abnormal node(s)") && l.contains("edge-b1")
    });
}

#[test]
fn edge_health_keyed_by_node_name_and_a_failing_poll_restores_every_endpoint() {
    let sim = Sim::start(&[]);
    let (w, _log) = start(&sim);
    let all = view(&w);
    let mut watch = w.watch(&format!(
        "/apis/discovery.k8s.io/v1/endpointslices?watch=true&timeoutSeconds=60&resourceVersion={}",
        common::rv(&w.get_json("/apis/discovery.k8s.io/v1/endpointslices"))
    ));
    let took = converge(
        &sim,
        &w,
        200,
        json!({"edge-c1": entry(false), "edge-a1": entry(true), "unknown-node": entry(false)}),
        &(
            strings(&["10.244.1.20", "10.244.3.20"]),
            all.1.clone(),
            strings(&["10.244.1.20", "10.244.3.20"]),
        ),
    );
    println!("keyed by name: converged in {} ms", took.as_millis());
    // The change reached the open watch as one MODIFIED of the api slice (web has nothing on
    // edge-c1 in its served view: no event for it).
    let ev = watch.expect();
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["name"], "api-xyz89", "{ev}");
    assert!(
        watch.next(Duration::from_millis(300)).is_none(),
        "no other event"
    );

    // Failing polls clear the map: a 500, then garbage, then an unreachable address are all
    // "no information" — everything served again.
    let took = converge(&sim, &w, 500, json!({"error": "boom"}), &all);
    println!("failing poll (500): restored in {} ms", took.as_millis());
    converge(
        &sim,
        &w,
        200,
        json!({"edge-c1": entry(false)}),
        &(
            strings(&["10.244.1.20", "10.244.3.20"]),
            all.1.clone(),
            strings(&["10.244.1.20", "10.244.3.20"]),
        ),
    );
    let took = converge(&sim, &w, 200, json!("this is not JSON {"), &all);
    println!(
        "failing poll (garbage): restored in {} ms",
        took.as_millis()
    );
}
