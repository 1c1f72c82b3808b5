//! `--debug` → `/debug/state`, and the operator's `/metrics` (issue 9, point 5), against the
//! real binaries: open watches with their cursors and selectors, reflector states and counts in
//! `/debug/state` (404 without `--debug`); request, watch, traffic and process metrics moving
//! with the right labels in a well-formed exposition; a watch ended for being too slow counted.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::autonomy::{metric, metrics};
use common::*;
use grid_wrapper::server::exposition::check_exposition;
use serde_json::{json, Value};

const V1: &str = "/apis/discovery.k8s.io/v1/endpointslices";

fn debug_state(w: &Wrapper) -> Value {
    let (code, headers, body) = request(w.health, "GET", "/debug/state", &[], b"");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    serde_json::from_slice(&body).expect("/debug/state is JSON")
}

#[test]
fn exposition_checker_rejects_malformed_text() {
    for bad in [
        "x 1\n",
        "# TYPE x gauge\nx{a=\"b\" 1\n",
        "# TYPE x gauge\nx{a=b} 1\n",
        "# TYPE x gauge\nx one\n",
        "# TYPE x gauge\n# TYPE x gauge\nx 1\n",
        "# TYPE x counter\nx 1\n",
        "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n",
        "# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",
    ] {
        assert!(check_exposition(bad).is_err(), "accepted {bad:?}");
    }
    let good =
        "# HELP x h\n# TYPE x gauge\nx{a=\"1\",b=\"\"} 1.5\n# TYPE y_total counter\ny_total 3\n";
    assert_eq!(check_exposition(good).map(|t| t.len()), Ok(2));
}

fn requests(w: &Wrapper, route: &str, resource: &str, code: u16) -> f64 {
    let sample = format!(
        "grid_wrapper_requests_total{{route=\"{route}\",resource=\"{resource}\",code=\"{code}\"}}"
    );
    metric(w, &sample).unwrap_or(0.0)
}

#[test]
fn debug_state_lists_open_watches_reflectors_and_counts() {
    let (_sim, w) = demo(&["--debug"]);
    wait_for("every reflector watching", || {
        let d = debug_state(&w);
        let r = d["reflectors"].as_array().cloned().unwrap_or_default();
        // Nodes, Services, Endpoints, v1 slices and v1 ServiceCIDRs.
        r.len() == 5 && r.iter().all(|r| r["state"] == "Watching")
    });
    let before = rv(&w.get_json(common::OWN_NODE));
    let mut nodes = w.watch("/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dedge-a1");
    let mut slices = w.watch(&format!("{V1}?watch=1&labelSelector={SELECTOR_L}"));
    assert_eq!((nodes.code, slices.code), (200, 200));
    nodes.expect();
    slices.expect();
    let d = debug_state(&w);
    let watchers = &d["watchers"];
    assert_eq!(watchers["open"], 2, "{d:#}");
    assert_eq!(watchers["truncated"], false);
    let items = watchers["items"].as_array().cloned().unwrap_or_default();
    let by_res: BTreeMap<String, Value> = items
        .iter()
        .map(|i| (i["resource"].as_str().unwrap_or("").to_string(), i.clone()))
        .collect();
    let n = &by_res["nodes.v1"];
    assert_eq!(n["field_selector"], "metadata.name=edge-a1");
    assert_eq!(n["label_selector"], "");
    assert_eq!(n["events_sent"], 1);
    let s = &by_res["endpointslices.discovery.k8s.io/v1"];
    assert_eq!(
        s["label_selector"],
        "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"
    );
    let current: u64 = d["resource_version"].as_str().unwrap().parse().unwrap();
    for i in &items {
        let cursor: u64 = i["cursor"].as_str().unwrap().parse().unwrap();
        assert!(before <= cursor && cursor <= current, "cursor {i}");
        assert_eq!(i["pending_entries"], 0, "{i}");
        assert!(i["peer"].as_str().unwrap().starts_with("127.0.0.1:"), "{i}");
    }
    // Counts per resource, as the lists say.
    for (path, label) in [
        // Nodes: the one served (the others are held as facts only, not counted).
        (common::OWN_NODE, "nodes.v1"),
        ("/api/v1/services", "services.v1"),
        ("/api/v1/endpoints", "endpoints.v1"),
        (V1, "endpointslices.discovery.k8s.io/v1"),
        (
            "/apis/networking.k8s.io/v1/servicecidrs",
            "servicecidrs.networking.k8s.io/v1",
        ),
        (
            "/apis/networking.k8s.io/v1beta1/servicecidrs",
            "servicecidrs.networking.k8s.io/v1beta1",
        ),
    ] {
        let list = w.get_json(path);
        let r = &d["resources"][label];
        assert_eq!(
            r["objects"],
            list["items"].as_array().unwrap().len(),
            "{label}"
        );
        assert!(r["bytes"].as_u64().unwrap() > 100, "{label}: {r}");
        assert!(r["event_log"]["entries"].is_u64(), "{label}: {r}");
    }
    for r in d["reflectors"].as_array().unwrap() {
        assert_eq!(r["failing"], false, "{r}");
        assert!(r["resource_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()));
        assert!(
            r["last_contact_unix"].as_u64().unwrap() > 1_600_000_000,
            "{r}"
        );
    }
    assert_eq!(d["ready"], true);
    assert_eq!(d["snapshot"]["serving"], false);
    assert_eq!(d["edge_health"]["abnormal_total"], 0);
    let rss = d["process"]["resident_memory_bytes"].as_u64().unwrap();
    assert!((1 << 20..1 << 30).contains(&rss), "rss {rss}");
    assert!(d["process"]["cpu_seconds"].as_f64().is_some());

    // A change moves the node watcher's cursor; `?watchers=1` lists one of the two.
    _sim.label_node("edge-a1", json!({"debug-state": "1"}));
    let ev = nodes.expect();
    assert_eq!(ev["type"], "MODIFIED");
    let d = debug_state(&w);
    let moved = d["watchers"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["resource"] == "nodes.v1")
        .map(|i| i["cursor"].clone());
    assert_eq!(moved, Some(json!(rv(&ev["object"]).to_string())));
    let (_, _, body) = request(w.health, "GET", "/debug/state?watchers=1", &[], b"");
    let one: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(one["watchers"]["listed"], 1);
    assert_eq!(one["watchers"]["truncated"], true);

    // A closed watch leaves the list.
    drop(slices);
    wait_for("the closed watch unlisted", || {
        debug_state(&w)["watchers"]["open"] == 1
    });
}

#[test]
fn metrics_count_requests_watches_traffic_and_the_process() {
    let (sim, w) = demo(&[]);
    let (code, _, _) = request(w.health, "GET", "/debug/state", &[], b"");
    assert_eq!(code, 404, "/debug/state needs --debug");

    // One of each route kind, each counted once with its labels (a fresh process).
    w.get_json("/api/v1/services");
    w.get_json("/api/v1/nodes/edge-a1");
    assert_eq!(w.get("/api/v1/namespaces/default/services/nope").0, 404);
    assert_eq!(w.get("/apis").0, 200);
    assert_eq!(w.get("/api/v1/nodes/edge-a1/status").0, 404);
    assert_eq!(w.get("/api/v1/services?labelSelector=%3D%3D").0, 400);
    assert_eq!(requests(&w, "list", "services.v1", 200), 1.0);
    assert_eq!(requests(&w, "get", "nodes.v1", 200), 1.0);
    assert_eq!(requests(&w, "get", "services.v1", 404), 1.0);
    assert_eq!(requests(&w, "proxy", "", 200), 1.0);
    assert_eq!(requests(&w, "proxy", "", 404), 1.0);
    assert_eq!(requests(&w, "list", "services.v1", 400), 1.0);
    let open = |res: &str| {
        metric(
            &w,
            &format!("grid_wrapper_open_watches{{resource=\"{res}\"}}"),
        )
    };
    assert_eq!(open("nodes.v1"), Some(0.0));

    let mut watch = w.watch(&format!("{}&watch=true", common::OWN_NODE));
    let other = w.watch("/api/v1/services?watch=true");
    assert_eq!(watch.drain(Duration::from_millis(300)).len(), 1);
    assert_eq!(requests(&w, "watch", "nodes.v1", 200), 1.0);
    assert_eq!(requests(&w, "watch", "services.v1", 200), 1.0);
    assert_eq!(
        (open("nodes.v1"), open("services.v1")),
        (Some(1.0), Some(1.0))
    );
    let text = metrics(&w);
    let total_open: f64 = text
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_open_watches{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(total_open, 2.0);

    // A relabel: events and bytes sent move.
    let events = "grid_wrapper_watch_events_sent_total{resource=\"nodes.v1\"}";
    let bytes = "grid_wrapper_sent_bytes_total{route=\"watch\"}";
    let (e0, b0) = (metric(&w, events).unwrap(), metric(&w, bytes).unwrap());
    assert!(e0 >= 1.0, "the initial event: {e0}");
    sim.label_node("edge-a1", json!({"debug-state": "1"}));
    assert_eq!(watch.expect()["type"], "MODIFIED");
    assert_eq!(metric(&w, events), Some(e0 + 1.0));
    // Bytes are counted when the write returns, which can be just after the client read them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while metric(&w, bytes).unwrap() <= b0 + 100.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(metric(&w, bytes).unwrap() > b0 + 100.0);
    assert!(metric(&w, "grid_wrapper_sent_bytes_total{route=\"list\"}").unwrap() > 1000.0);

    // A client that leaves is counted.
    drop(watch);
    wait_for("the closed watch counted", || open("nodes.v1") == Some(0.0));
    assert_eq!(
        metric(
            &w,
            "grid_wrapper_watches_ended_total{reason=\"client_gone\"}"
        ),
        Some(1.0)
    );

    // The process, plausibly.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let rss = metric(&w, "process_resident_memory_bytes").unwrap();
    assert!((1e6..1e9).contains(&rss), "rss {rss}");
    let cpu = metric(&w, "process_cpu_seconds_total").unwrap();
    assert!((0.0..600.0).contains(&cpu), "cpu {cpu}");
    let fds = metric(&w, "process_open_fds").unwrap();
    assert!((5.0..1000.0).contains(&fds), "fds {fds}");
    let start = metric(&w, "process_start_time_seconds").unwrap();
    assert!(
        start > now - 600.0 && start < now + 5.0,
        "start {start}, now {now}"
    );

    // The whole exposition is well-formed, and what existed before is still there.
    let text = metrics(&w);
    let types = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for (name, kind) in [
        ("grid_wrapper_requests_total", "counter"),
        ("grid_wrapper_open_watches", "gauge"),
        ("grid_wrapper_watches_ended_total", "counter"),
        ("grid_wrapper_sent_bytes_total", "counter"),
        ("grid_wrapper_watch_events_sent_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("grid_wrapper_serving_snapshot", "gauge"),
        ("grid_wrapper_edge_health_abnormal_nodes", "gauge"),
        ("grid_wrapper_upstream_relists_total", "counter"),
        ("grid_wrapper_answer_duration_seconds", "histogram"),
    ] {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    // Every LIST and GET answered from the cache is timed, and nothing else.
    let total = |prefix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    for route in ["list", "get"] {
        let counted = total(&format!("grid_wrapper_requests_total{{route=\"{route}\","));
        let timed = total(&format!(
            "grid_wrapper_answer_duration_seconds_count{{route=\"{route}\"}}"
        ));
        assert!(counted > 0.0, "no {route} counted\n{text}");
        assert_eq!(timed, counted, "{route}s timed\n{text}");
    }
    assert!(text.contains("grid_wrapper_upstream_relists_total{resource=\"nodes\"} 0\n"));
    assert_eq!(open("services.v1"), Some(1.0));
    drop(other);
}

#[test]
fn a_watch_ended_for_being_too_slow_is_counted() {
    let _heavy = common::heavy();
    // As in protocol_slow.rs: a watcher that does not read while large changes pile up.
    let sim = Sim::start(&["--history", "100000"]);
    let w = Wrapper::start(&sim.url, "edge-a1", &["--notify-channel-size=5", "--debug"]);
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"clusterIP": "10.96.8.8", "ports": [{"port": 80, "protocol": "TCP"}]}}));
    sim.apply(&big_slice(0, 400));
    wait_for("the big slice", || {
        names(&w.get_json(V1)).contains(&"big-1".to_string())
    });
    let too_slow = "grid_wrapper_watches_ended_total{reason=\"too_slow\"}";
    assert_eq!(metric(&w, too_slow), Some(0.0));
    let slow = w.watch(&format!("{V1}?watch=true&timeoutSeconds=60"));
    assert_eq!(slow.code, 200);
    let (t, mut round, mut backlog) = (Instant::now(), 1, 0u64);
    while metric(&w, too_slow) == Some(0.0) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never ended as too slow"
        );
        let batch: Vec<Value> = (round..round + 5).map(|r| big_slice(r, 400)).collect();
        sim.apply(&Value::Array(batch));
        round += 5;
        // Its backlog (unsent bytes, pending entries) shows in /debug/state while it lasts.
        for i in debug_state(&w)["watchers"]["items"].as_array().unwrap() {
            let b = i["unsent_bytes"].as_u64().unwrap() + i["pending_entries"].as_u64().unwrap();
            backlog = backlog.max(b);
        }
    }
    eprintln!(
        "too slow after {} rounds; largest backlog seen {backlog}",
        round - 1
    );
    assert!(backlog > 0, "the slow watcher's backlog was never seen");
    assert_eq!(metric(&w, too_slow), Some(1.0));
    wait_for("the slow watch unlisted", || {
        debug_state(&w)["watchers"]["open"] == 0
    });
    assert_eq!(
        metric(
            &w,
            "grid_wrapper_open_watches{resource=\"endpointslices.discovery.k8s.io/v1\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &w,
            "grid_wrapper_watches_ended_total{reason=\"client_gone\"}"
        ),
        Some(0.0)
    );
    drop(slow);
}
