//! Issue 23 — an upstream that stops talking mid-answer. A list that stalls (200, headers, part
//! of the body, then silence on an open connection) must delay no other resource and be
//! abandoned at its progress deadline; a watch that goes silent after the upstream showed it
//! sends bookmarks must be restarted at its progress deadline, not after the long idle limit.
//! Against the real binaries, with a fault proxy between grid-wrapper and the simulator.

use crate::common;

use std::time::{Duration, Instant};

use common::fault_proxy::{Fault, FaultProxy, Misbehaviour};
use common::{request, wait_for, web_ips, Sim, Wrapper};
use serde_json::{json, Value};

/// `/metrics` of a wrapper.
fn metrics(w: &Wrapper) -> String {
    let (_, _, body) = request(w.health, "GET", "/metrics", &[], b"");
    String::from_utf8_lossy(&body).into_owned()
}

/// The value of `name{resource="resource"}` in `/metrics` (0 when absent).
fn metric(w: &Wrapper, name: &str, resource: &str) -> u64 {
    let prefix = format!("{name}{{resource=\"{resource}\"}} ");
    metrics(w)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Waits up to `limit` for `cond`; the time it took, or a panic naming `what`.
fn within(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    within_or(limit, what, &mut cond, String::new)
}

/// [`within`], with `detail()` in the panic message.
fn within_or(
    limit: Duration,
    what: &str,
    cond: &mut dyn FnMut() -> bool,
    detail: impl Fn() -> String,
) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?} {}",
            detail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

fn node(name: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"zone": zone}},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}
    })
}

#[test]
fn a_stalled_services_list_delays_no_other_resource_and_is_abandoned_at_its_deadline() {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    let (w, log) = Wrapper::start_captured(&[
        &format!("--master={}", proxy.url),
        "--hostname=edge-a1",
        "--list-progress-timeout=10",
    ]);
    w.wait_ready();
    // Move the upstream's RV above where the reset puts it, then make every reflector relist
    // from scratch (the upstream's RVs went backwards): the Services relist is cut off after
    // 300 bytes of its body and held open, silent.
    for i in 0..40 {
        sim.label_node("edge-c1", json!({"bump": i.to_string()}));
    }
    wait_for("the bumps to be served", || {
        w.get_json("/api/v1/nodes/edge-c1")["metadata"]["labels"]["bump"] == "39"
    });
    proxy.add(Fault {
        matches: "GET /api/v1/services?".into(),
        unless: Some("watch=true".into()),
        what: Misbehaviour::StallAfter { bytes: 300 },
    });
    sim.reset_rv(20, Some("http"));
    within_or(
        Duration::from_secs(20),
        "the Services relist stalls",
        &mut || proxy.silenced("/api/v1/services?"),
        || format!("{:#?}", proxy.seen()),
    );
    // While it stalls, the upstream resets again, so every other reflector lists again too
    // (after the stall began: none of those lists may wait for it) ...
    for i in 0..40 {
        sim.label_node("edge-c1", json!({"bump": format!("again-{i}")}));
    }
    sim.reset_rv(5, Some("http"));
    // ... and a Node is added, an EndpointSlice changes, and a Service is created.
    sim.apply(&node("edge-z9", "zone-z"));
    let mut slice = sim.get_json("/apis/discovery.k8s.io/v1/endpointslices")["items"][0].clone();
    let slice_path = format!(
        "/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices/{}",
        slice["metadata"]["namespace"].as_str().unwrap_or_default(),
        slice["metadata"]["name"].as_str().unwrap_or_default()
    );
    slice["metadata"]["labels"]["touched"] = json!("yes");
    slice["kind"] = json!("EndpointSlice");
    slice["apiVersion"] = json!("discovery.k8s.io/v1");
    if let Some(m) = slice["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    sim.apply(&slice);
    sim.apply(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "late", "namespace": "default"},
        "spec": {"clusterIP": "10.96.9.9", "ports": [{"port": 80}]}
    }));
    let stalled_at = Instant::now();
    within(Duration::from_secs(30), "the new Node served", || {
        w.get("/api/v1/nodes/edge-z9").0 == 200
    });
    within(Duration::from_secs(30), "the slice change served", || {
        w.get_json(&slice_path)["metadata"]["labels"]["touched"] == "yes"
    });
    // Both were served while the Services list still stalled (it is abandoned only at its
    // deadline, and then counted): nothing waited for it.
    assert_eq!(
        metric(&w, "grid_wrapper_upstream_stalls_total", "services"),
        0,
        "the Node and the slice change were served only after the stalled list was given up"
    );
    assert_eq!(w.get("/api/v1/namespaces/default/services/late").0, 404);
    // A complete view is still served: ready throughout.
    assert_eq!(w.readyz(), Some(200));
    // At the deadline the list is abandoned, counted, said once, and retried: the Service
    // created meanwhile is served.
    within(
        Duration::from_secs(30),
        "the stalled list abandoned and counted",
        || metric(&w, "grid_wrapper_upstream_stalls_total", "services") >= 1,
    );
    assert!(
        stalled_at.elapsed() >= Duration::from_secs(5),
        "abandoned before its deadline"
    );

    within(Duration::from_secs(30), "the Service listed again", || {
        w.get("/api/v1/namespaces/default/services/late").0 == 200
    });
    let stall_warn =
        |l: &str| l.contains("WARN") && l.contains("Services") && l.contains("stalled");
    let text = log.wait_for_line("the stall's WARN", Duration::from_secs(20), stall_warn);
    let warns: Vec<&str> = text.lines().filter(|l| stall_warn(l)).collect();
    assert_eq!(warns.len(), 1, "one WARN for the stall:\n{text}");
    assert_eq!(
        metric(&w, "grid_wrapper_upstream_stalls_total", "nodes"),
        0,
        "only Services stalled"
    );
}

#[test]
fn a_watch_silent_after_bookmarks_is_restarted_at_its_progress_deadline() {
    let sim = Sim::start(&["--bookmark-interval", "1"]);
    let proxy = FaultProxy::start(sim.addr);
    // The first Nodes watch goes silent right after its first bookmark (a watch's query
    // starts with allowWatchBookmarks; a list's does not).
    proxy.add(Fault {
        matches: "GET /api/v1/nodes?allowWatchBookmarks=true".into(),
        unless: None,
        what: Misbehaviour::SilenceAfterBookmark,
    });
    let (w, log) = Wrapper::start_captured(&[
        &format!("--master={}", proxy.url),
        "--hostname=edge-a1",
        "--watch-progress-timeout=3",
    ]);
    w.wait_ready();
    within(Duration::from_secs(20), "a Nodes watch silenced", || {
        proxy.silenced("/api/v1/nodes?allowWatchBookmarks=true")
    });
    // A change upstream now reaches grid-wrapper only on a new watch.
    sim.label_node("edge-a1", json!({"after-silence": "1"}));
    within(
        Duration::from_secs(20),
        "the change served once the silent watch was restarted",
        || w.get_json("/api/v1/nodes/edge-a1")["metadata"]["labels"]["after-silence"] == "1",
    );
    assert!(metric(&w, "grid_wrapper_upstream_stalls_total", "nodes") >= 1);
    // A WARN says the watch went silent.
    log.wait_for_line("the silent watch's WARN", Duration::from_secs(20), |l| {
        l.contains("WARN") && l.contains("Nodes") && l.contains("silent")
    });
}

/// Peak resident memory of a process, in bytes (`VmHWM`), if readable.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_64_mib_node_is_skipped_in_a_watch_and_in_a_list_with_memory_bounded() {
    const BIG: u64 = 64 * 1024 * 1024;
    let sim = Sim::start(&[]);
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={}", sim.url), "--hostname=edge-a1"]);
    w.wait_ready();
    assert_eq!(w.get("/api/v1/nodes/edge-a1").0, 200);
    // The Node grows past --max-object-bytes (4 MiB) on the watch: its last accepted version
    // stays served (stale, issue 39), the others are, and the watch goes on.
    let before = w.get_json("/api/v1/nodes/edge-a1");
    sim.control("pad-node", &json!({"name": "edge-a1", "bytes": BIG}));
    within(Duration::from_secs(60), "the oversized Node seen", || {
        metric(&w, "grid_wrapper_upstream_objects_too_large_total", "nodes") == 1
    });
    assert_eq!(w.get_json("/api/v1/nodes/edge-a1"), before, "kept, stale");
    // Another Node's change is still taken: edge-b1 joins zone-a, its endpoint is served.
    sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    within(Duration::from_secs(30), "a later change served", || {
        web_ips(&w.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"))
            .contains(&"10.244.3.10".to_string())
    });
    assert_eq!(
        metric(&w, "grid_wrapper_upstream_objects_too_large_total", "nodes"),
        1
    );
    assert_eq!(
        metric(&w, "grid_wrapper_upstream_relists_total", "nodes"),
        0
    );
    let too_large_warn =
        |l: &str| l.contains("WARN") && l.contains("edge-a1") && l.contains("max-object-bytes");
    let text = log.wait_for_line(
        "the oversized Node's WARN",
        Duration::from_secs(20),
        too_large_warn,
    );
    let warns: Vec<&str> = text.lines().filter(|l| too_large_warn(l)).collect();
    assert_eq!(warns.len(), 1, "one WARN naming it:\n{text}");

    // A fresh start lists it: a new object, skipped, the rest of the list applied, and the process never
    // holds the object (its peak stays far below the object's size).
    let (w2, log2) =
        Wrapper::start_captured(&[&format!("--master={}", sim.url), "--hostname=edge-a1"]);
    w2.wait_ready();
    let nodes = common::names(&w2.get_json(common::OWN_NODE));
    assert!(nodes.is_empty(), "not served: {nodes:?}");
    assert_eq!(w2.get("/api/v1/nodes/edge-a1").0, 404, "not served");

    assert_eq!(
        metric(
            &w2,
            "grid_wrapper_upstream_objects_too_large_total",
            "nodes"
        ),
        1
    );
    // The WARN names it.
    log2.wait_for_line(
        "the oversized Node's WARN",
        Duration::from_secs(20),
        too_large_warn,
    );
    let peak = peak_rss(w2.proc.child.id()).expect("VmHWM");
    assert!(
        peak < 40 * 1024 * 1024,
        "peak RSS {peak} bytes while listing a {BIG}-byte Node"
    );
    // Shrunk again, it is served again.
    sim.control("pad-node", &json!({"name": "edge-a1", "bytes": 0}));
    within(Duration::from_secs(30), "the Node served again", || {
        w2.get("/api/v1/nodes/edge-a1").0 == 200 && w.get("/api/v1/nodes/edge-a1").0 == 200
    });
}

#[test]
fn each_new_kind_of_failure_in_an_episode_is_a_warn_once() {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    // The Services lists fail: a dropped connection, an HTML page (a new kind), dropped again
    // and HTML again (repeats), then the real answer.
    for what in [
        Misbehaviour::Drop,
        Misbehaviour::Html,
        Misbehaviour::Drop,
        Misbehaviour::Html,
    ] {
        proxy.add(Fault {
            matches: "GET /api/v1/services?".into(),
            unless: Some("watch=true".into()),
            what,
        });
    }
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={}", proxy.url), "--hostname=edge-a1"]);
    within(Duration::from_secs(60), "ready after the failures", || {
        w.readyz() == Some(200)
    });
    assert_eq!(
        proxy.seen().iter().filter(|(_, fired)| *fired).count(),
        4,
        "every fault fired"
    );
    // The reflector logs the recovery once the writer has applied its list, which may be just
    // after /readyz turned 200.
    let text = log.wait_for_text(
        "Services: recovered after 4 failures",
        Duration::from_secs(10),
    );
    let warns: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("Services: list failed"))
        .collect();
    assert_eq!(warns.len(), 2, "one WARN per kind:\n{text}");
    assert!(warns[0].contains("unreachable"), "{}", warns[0]);
    assert!(warns[1].contains("undecodable"), "{}", warns[1]);
}
