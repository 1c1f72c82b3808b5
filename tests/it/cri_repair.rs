//! Issue 45, the runtime repair (docs/SEMANTICS.md §13), against the real binaries: the
//! simulator as the upstream and the real grpc-go CRI server (`common::cri`) as the node's
//! runtime. A local pod that moves in the runtime is served on its new address as a `MODIFIED`
//! with a new resourceVersion (lists and open watches, JSON and protobuf, EndpointSlices and
//! Endpoints); the upstream catching up changes nothing more; a pod whose sandbox stops being
//! ready is served not ready, and one the runtime no longer lists as the upstream says; with the upstream gone the repair still applies; an offline restart repairs
//! at the first poll; a runtime that stalls changes nothing served and is one WARN. Without the
//! server binary each test prints one line and passes.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy::{self, cache_flags};
use common::cri::{Fake, Sb};
use common::protobuf::ProtoWatch;
use common::{free_port, heavy, rv, wait_for, Sim, TempDir, Watch, Wrapper};
use serde_json::{json, Value};

/// The demo's web pod on the local node `edge-a1`.
const POD: &str = "web-5d8f7-a1x2q";
/// Its address in the demo (the upstream's).
const OLD: &str = "10.244.1.10";
/// Its address after the "reboot".
const NEW: &str = "10.244.1.99";
const SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";
const ENDPOINTS: &str = "/api/v1/endpoints";

fn sandbox(attempt: u32, ready: bool, ip: &'static [&'static str]) -> Sb<'static> {
    Sb {
        id: if attempt == 0 { "sb-0" } else { "sb-1" },
        name: POD,
        attempt,
        ready,
        ips: ip,
    }
}

/// The demo's `web-abc12` endpoint of the pod `pod`, as served in `list`.
fn endpoint_of(slice: &Value, pod: &str) -> Value {
    slice["endpoints"]
        .as_array()
        .and_then(|eps| eps.iter().find(|e| e["targetRef"]["name"] == pod))
        .cloned()
        .unwrap_or(Value::Null)
}

fn item<'v>(list: &'v Value, name: &str) -> &'v Value {
    list["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The local pod's first address in the served `web-abc12`, and its address in Endpoints `web`.
fn served_addresses(w: &Wrapper) -> (Value, Value) {
    let slices = w.get_json(SLICES);
    let slice = endpoint_of(item(&slices, "web-abc12"), POD)["addresses"][0].clone();
    let eps = w.get_json(ENDPOINTS);
    let ip = item(&eps, "web")["subsets"][0]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["targetRef"]["name"] == POD))
        .map(|x| x["ip"].clone())
        .unwrap_or(Value::Null);
    (slice, ip)
}

fn runtime_flags(fake: &Fake) -> Vec<String> {
    vec![
        format!("--container-runtime-endpoint={}", fake.endpoint),
        "--container-runtime-poll-interval=1".into(),
        "--container-runtime-request-timeout=1".into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The runtime with `sandboxes`, the demo simulator, and a ready grid-wrapper for `edge-a1`
/// polling the runtime every second; `None` without the server binary.
fn setup(tag: &str, sandboxes: &[Sb<'_>]) -> Option<(Fake, Sim, Wrapper)> {
    let fake = Fake::start(tag, sandboxes)?;
    let sim = Sim::start(&[]);
    let f = runtime_flags(&fake);
    let w = Wrapper::start(&sim.url, "edge-a1", &refs(&f));
    Some((fake, sim, w))
}

/// The next event of `w` for `web-abc12` (others skipped), bounded by 10 s.
fn next_web_event(w: &mut Watch) -> Value {
    w.until(|e| e["object"]["metadata"]["name"] == "web-abc12")
}

#[test]
fn a_moved_pod_is_served_on_the_runtimes_address_and_the_upstream_catching_up_changes_nothing() {
    let _g = heavy();
    let Some((fake, sim, w)) = setup("repair-move", &[sandbox(0, true, &[OLD])]) else {
        return;
    };
    // The runtime agrees with the upstream: nothing is repaired.
    wait_for("the first poll", || {
        autonomy::metric(&w, "grid_wrapper_runtime_polls_total{outcome=\"ok\"}").unwrap_or(0.0)
            >= 1.0
    });
    assert_eq!(served_addresses(&w), (json!(OLD), json!(OLD)));
    let list = w.get_json(SLICES);
    let list_rv = rv(&list);
    let before = rv(item(&list, "web-abc12"));
    let path = format!("{SLICES}?watch=true&resourceVersion={list_rv}");
    let mut json_watch = Watch::open(w.addr, &path, &[("Accept", "application/json")]);
    let mut proto_watch = ProtoWatch::kube_proxy(w.addr, &path);
    let eps_path = format!("{ENDPOINTS}?watch=true&resourceVersion={list_rv}");
    let mut eps_watch = w.watch(&eps_path);

    // The pod comes back in a new sandbox on a new address.
    fake.set(&[sandbox(0, false, &[OLD]), sandbox(1, true, &[NEW])]);
    let ev = next_web_event(&mut json_watch);
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(endpoint_of(&ev["object"], POD)["addresses"], json!([NEW]));
    let repaired_rv = rv(&ev["object"]);
    assert!(repaired_rv > before, "a new resourceVersion");
    let (ty, d) = loop {
        let (ty, d) = proto_watch
            .next(Duration::from_secs(10))
            .expect("a protobuf event");
        if d.object["metadata"]["name"] == "web-abc12" {
            break (ty, d);
        }
    };
    assert_eq!(ty, "MODIFIED");
    assert_eq!(endpoint_of(&d.object, POD)["addresses"], json!([NEW]));
    assert_eq!(rv(&d.object), repaired_rv);
    let ev = eps_watch.until(|e| e["object"]["metadata"]["name"] == "web");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(served_addresses(&w), (json!(NEW), json!(NEW)));
    // The other nodes' endpoints are the upstream's.
    let slice = item(&w.get_json(SLICES), "web-abc12").clone();
    assert_eq!(
        endpoint_of(&slice, "web-5d8f7-b7k4m")["addresses"],
        json!(["10.244.2.10"])
    );
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_runtime_repairs"),
        Some(2.0),
        "the slice's endpoint and the Endpoints address"
    );
    let topo = w.debug_json("/debug/topology/default/web");
    assert!(
        topo.to_string()
            .contains(&format!("address from the runtime: {NEW}")),
        "{topo}"
    );

    // The upstream catches up: nothing more is served for web-abc12. A later change of
    // another object is the positive marker that the watch saw everything before it.
    let mut upstream =
        sim.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12");
    for ep in upstream["endpoints"].as_array_mut().unwrap() {
        if ep["targetRef"]["name"] == POD {
            ep["addresses"] = json!([NEW]);
        }
    }
    sim.apply(&upstream);
    wait_for("the simulator to serve the caught-up slice", || {
        let s =
            sim.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc12");
        endpoint_of(&s, POD)["addresses"] == json!([NEW])
    });
    let mut api =
        sim.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/api-xyz89");
    api["metadata"]["labels"]["marker"] = json!("1");
    sim.apply(&api);
    // Same reflector, same stream: a web-abc12 event would come before the marker's.
    let ev = json_watch.until(|e| {
        let name = &e["object"]["metadata"]["name"];
        assert_ne!(name, "web-abc12", "no event for the caught-up slice: {e}");
        name == "api-xyz89"
    });
    assert_eq!(ev["object"]["metadata"]["labels"]["marker"], "1");
    let served = w.get_json(SLICES);
    assert_eq!(
        rv(item(&served, "web-abc12")),
        repaired_rv,
        "no new resourceVersion"
    );
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_runtime_repairs"),
        Some(1.0)
    );
}

#[test]
fn a_sandbox_no_longer_ready_is_served_not_ready_and_a_removed_one_ends_the_repair() {
    let _g = heavy();
    let Some((fake, _sim, w)) = setup("repair-end", &[sandbox(1, true, &[NEW])]) else {
        return;
    };
    wait_for("the repair", || {
        served_addresses(&w) == (json!(NEW), json!(NEW))
    });
    let list = w.get_json(SLICES);
    let list_rv = rv(&list);
    let mut watch = w.watch(&format!("{SLICES}?watch=true&resourceVersion={list_rv}"));
    // The runtime knows the pod, without a ready sandbox: served not ready.
    fake.set(&[sandbox(1, false, &[NEW])]);
    let ev = next_web_event(&mut watch);
    assert_eq!(ev["type"], "MODIFIED");
    let ep = endpoint_of(&ev["object"], POD);
    assert_eq!(ep["conditions"]["ready"], json!(false), "{ep}");
    assert_eq!(ep["conditions"]["serving"], json!(false), "{ep}");
    let eps = w.get_json(ENDPOINTS);
    let not_ready = &item(&eps, "web")["subsets"][0]["notReadyAddresses"];
    assert_eq!(not_ready[0]["targetRef"]["name"], POD, "{eps}");
    // The runtime no longer knows the pod: the upstream's content again.
    fake.set(&[]);
    let ev = next_web_event(&mut watch);
    assert_eq!(ev["type"], "MODIFIED");
    let ep = endpoint_of(&ev["object"], POD);
    assert_eq!(ep["addresses"], json!([OLD]));
    assert_eq!(ep["conditions"]["ready"], json!(true));
    assert_eq!(served_addresses(&w), (json!(OLD), json!(OLD)));
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_runtime_repairs"),
        Some(0.0)
    );
}

#[test]
fn with_the_upstream_gone_the_repair_applies_and_a_stalled_runtime_changes_nothing() {
    let _g = heavy();
    let Some(fake) = Fake::start("repair-offline", &[sandbox(0, true, &[OLD])]) else {
        return;
    };
    let sim = Sim::start(&[]);
    let f = runtime_flags(&fake);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &refs(&f));
    w.wait_ready();
    drop(sim); // the WAN is down
    fake.set(&[sandbox(0, false, &[OLD]), sandbox(1, true, &[NEW])]);
    wait_for("the repair with the upstream gone", || {
        served_addresses(&w) == (json!(NEW), json!(NEW))
    });
    let repaired = rv(item(&w.get_json(SLICES), "web-abc12"));

    // The runtime stalls (stopped): polls time out, one WARN, nothing served changes.
    let pid = fake.pid().to_string();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status();
    assert!(stop.is_ok_and(|s| s.success()), "SIGSTOP the runtime");
    let timeouts = |w: &Wrapper| {
        autonomy::metric(w, "grid_wrapper_runtime_polls_total{outcome=\"timeout\"}").unwrap_or(0.0)
    };
    common::wait_for_long("three timed-out polls", Duration::from_secs(20), || {
        timeouts(&w) >= 3.0
    });
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status();
    assert_eq!(served_addresses(&w), (json!(NEW), json!(NEW)));
    assert_eq!(rv(item(&w.get_json(SLICES), "web-abc12")), repaired);
    // The episode's end is logged after its WARN: counted once that is in.
    let text = log.wait_for_text("answers again", Duration::from_secs(10));
    let warns = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("container runtime"))
        .count();
    assert_eq!(warns, 1, "one WARN per episode:\n{text}");
}

#[test]
fn an_offline_restart_repairs_at_the_first_poll() {
    let _g = heavy();
    let Some(fake) = Fake::start("repair-restart", &[sandbox(0, true, &[OLD])]) else {
        return;
    };
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = TempDir::new("repair-restart");
    let sim = Sim::start(&["--listen", &format!("127.0.0.1:{port}")]);
    let mut f = cache_flags(&dir.path.display().to_string());
    f.extend(runtime_flags(&fake));
    let (w1, _log1) = autonomy::start(&sim.url, "edge-a1", &refs(&f));
    w1.wait_ready();
    autonomy::wait_snapshot_writes(&w1, 1);
    // Power cut with the WAN down; the pod comes back on a new address.
    autonomy::signal(&w1, "KILL");
    drop(w1);
    drop(sim);
    fake.set(&[sandbox(0, false, &[OLD]), sandbox(1, true, &[NEW])]);
    let t0 = Instant::now();
    let (w2, _log2) = autonomy::start(&url, "edge-a1", &refs(&f));
    w2.wait_ready();
    wait_for("the first poll's repair", || {
        served_addresses(&w2) == (json!(NEW), json!(NEW))
    });
    println!("repaired {} ms after the restart", t0.elapsed().as_millis());
}
