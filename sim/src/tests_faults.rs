//! In-process end-to-end tests of the fault injection (`/sim/reset-rv`, too-large answers,
//! `/sim/edge-health`, `/sim/refuse`, a refusal scheduled before serving), over real sockets on
//! 127.0.0.1 with the helpers of `tests.rs`. Every wait is bounded.

use crate::fault::TooLarge;
use crate::routes::SliceVersions;
use crate::server::{self, Shared};
use crate::tests::{call, get_json, sim, start, Watch};
use crate::{fixture, store};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Objects in the demo fixture (4 nodes, 5 services, 5 Endpoints, 5 slices, 1 ServiceCIDR).
const DEMO_OBJECTS: u64 = 20;

fn state_rv(addr: SocketAddr) -> u64 {
    get_json(addr, "/sim/state").1["rv"].as_u64().expect("rv")
}

fn item_rvs(list: &Value) -> Vec<u64> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            i["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("numeric RV")
        })
        .collect()
}

/// Checks a too-large Status against the apiserver's shape.
fn assert_too_large(st: &Value, requested: u64, current: u64) {
    assert_eq!(
        *st,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("Too large resource version: {requested}, current: {current}"),
               "reason": "Timeout",
               "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}],
                           "retryAfterSeconds": 1},
               "code": 504})
    );
}

fn post(addr: SocketAddr, op: &str, body: &str) -> (u16, Value) {
    let (code, _, b) = call(addr, "POST", &format!("/sim/{op}"), "", body.as_bytes());
    (code, serde_json::from_slice(&b).expect("JSON answer"))
}

#[test]
fn reset_rv_restamps_lowers_the_rv_and_ends_watches() {
    let addr = start();
    let old = state_rv(addr);
    let mut w = Watch::open(
        addr,
        &format!("/api/v1/services?watch=true&resourceVersion={old}"),
    );
    let r = sim(addr, "reset-rv", json!({"rv": 10}));
    let new = 10 + DEMO_OBJECTS;
    assert_eq!(r["previous"], old.to_string());
    assert_eq!(r["resourceVersion"], new.to_string());
    assert_eq!(
        (r["restamped"].as_u64(), r["too_large"].as_str()),
        (Some(DEMO_OBJECTS), Some("http"))
    );
    assert!(w.next().is_none(), "the open watch ended");
    let state = get_json(addr, "/sim/state").1;
    assert_eq!(
        (state["rv"].as_u64(), state["horizon"].as_u64()),
        (Some(new), Some(new))
    );
    assert_eq!(state["history"], 0);
    assert_eq!(state["too_large"], "http");
    let (_, nodes) = get_json(addr, "/api/v1/nodes");
    assert_eq!(nodes["metadata"]["resourceVersion"], new.to_string());
    let rvs = item_rvs(&nodes);
    assert_eq!(rvs.len(), 4);
    assert!(rvs.iter().all(|r| (11..=new).contains(r)), "{rvs:?}");
    // A watch from the new current RV follows later changes, stamped after it.
    let mut w = Watch::open(
        addr,
        &format!("/api/v1/nodes?watch=true&resourceVersion={new}"),
    );
    sim(
        addr,
        "label-node",
        json!({"name": "edge-a1", "labels": {"x": "y"}}),
    );
    let ev = w.next().expect("event");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        (new + 1).to_string()
    );
    // Not lower than the current RV (now new+1, with 19 objects): 400, nothing changed.
    for bad in [
        json!({"rv": new}),
        json!({"rv": 0}),
        json!({}),
        json!({"rv": 1, "too_large": "x"}),
    ] {
        let (code, st) = post(addr, "reset-rv", &bad.to_string());
        assert_eq!((code, st["code"].as_u64()), (400, Some(400)), "{bad}");
    }
    assert_eq!(state_rv(addr), new + 1);
}

#[test]
fn too_large_rvs_get_504_in_both_forms_and_old_ones_keep_410() {
    let addr = start();
    let old = state_rv(addr);
    // Before any reset a future RV is a 410 like any unusable one, and LIST ignores it.
    assert_eq!(
        get_json(addr, &format!("/api/v1/nodes?resourceVersion={}", old + 5)).0,
        200
    );
    sim(addr, "reset-rv", json!({"rv": 10}));
    let cur = 10 + DEMO_OBJECTS;
    // http form: a watch and a LIST from the old RV get HTTP 504 with the Status.
    for target in [
        format!("/api/v1/nodes?watch=true&resourceVersion={old}"),
        format!("/apis/discovery.k8s.io/v1/endpointslices?resourceVersion={old}"),
        format!("/api/v1/services?resourceVersion={old}&limit=500"),
    ] {
        let (code, head, body) = call(addr, "GET", &target, "", b"");
        assert_eq!(code, 504, "{target}");
        assert!(head.starts_with("HTTP/1.1 504 Gateway Timeout"), "{head}");
        assert!(head.contains("Content-Type: application/json"), "{head}");
        let st: Value = serde_json::from_slice(&body).expect("Status");
        assert_too_large(&st, old, cur);
    }
    // Current, "0", "" and below-horizon RVs behave as before.
    for q in [
        "resourceVersion=0",
        "resourceVersion=",
        &format!("resourceVersion={cur}"),
    ] {
        assert_eq!(get_json(addr, &format!("/api/v1/nodes?{q}")).0, 200, "{q}");
    }
    let mut w = Watch::open(addr, "/api/v1/nodes?watch=true&resourceVersion=5");
    let ev = w.next().expect("ERROR");
    assert_eq!(
        (ev["type"].as_str(), ev["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
    assert!(w.next().is_none());

    // event form: 200, one ERROR event with the same Status, end of stream; LIST still 504.
    let r = sim(addr, "reset-rv", json!({"rv": 5, "too_large": "event"}));
    let cur = 5 + DEMO_OBJECTS;
    assert_eq!(
        (r["rv"].as_u64(), r["too_large"].as_str()),
        (Some(cur), Some("event"))
    );
    let mut w = Watch::open(
        addr,
        &format!("/api/v1/services?watch=true&resourceVersion={old}&allowWatchBookmarks=true"),
    );
    let ev = w.next().expect("ERROR");
    assert_eq!(ev["type"], "ERROR");
    assert_too_large(&ev["object"], old, cur);
    assert!(w.next().is_none(), "the stream ends after the ERROR");
    let (code, _, body) = call(
        addr,
        "GET",
        &format!("/api/v1/endpoints?resourceVersion={old}"),
        "",
        b"",
    );
    assert_eq!(code, 504);
    assert_too_large(&serde_json::from_slice(&body).expect("Status"), old, cur);
}

#[test]
fn edge_health_stub_round_trip_and_poll_counter() {
    let addr = start();
    let (code, _, body) = call(addr, "GET", "/sim/edge-health", "", b"");
    assert_eq!((code, body.as_slice()), (200, &b"{}"[..]), "default");
    let report = json!({"edge-a1": {"normal": true, "hmac": "abc", "time": 1_700_000_000},
                        "192.168.2.11": {"normal": false, "hmac": "def", "time": 1_700_000_000}});
    let set = sim(addr, "edge-health", json!({"status": 200, "body": report}));
    assert_eq!(set["body"], report);
    let (code, head, body) = call(addr, "GET", "/sim/edge-health", "", b"");
    assert_eq!(code, 200);
    assert!(head.contains("Content-Type: application/json"), "{head}");
    assert_eq!(
        serde_json::from_slice::<Value>(&body).expect("JSON"),
        report
    );
    // Garbage and error codes are served as set.
    sim(
        addr,
        "edge-health",
        json!({"status": 503, "body": "{\"truncated\": "}),
    );
    let (code, _, body) = call(addr, "GET", "/sim/edge-health", "", b"");
    assert_eq!((code, body.as_slice()), (503, &b"{\"truncated\": "[..]));
    let (code, _) = post(addr, "edge-health", r#"{"status": 99}"#);
    assert_eq!(code, 400);
    // Three polls counted, none recorded as a request.
    let state = get_json(addr, "/sim/state").1;
    assert_eq!(state["edge_health_polls"], 3);
    assert_eq!(state["recorded"], 0);
    assert_eq!(get_json(addr, "/sim/requests").1, json!([]));
}

fn refused(addr: SocketAddr) -> bool {
    matches!(TcpStream::connect(addr), Err(e) if e.kind() == ErrorKind::ConnectionRefused)
}

/// Waits (bounded by `limit`) until `addr` accepts again; returns when it did.
fn wait_accepting(addr: SocketAddr, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        if TcpStream::connect(addr).is_ok() {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{addr} never accepted again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn refuse_closes_listener_and_connections_then_listens_on_the_same_port() {
    let addr = start();
    let rv = state_rv(addr);
    // A keep-alive connection that already served a request, and an open watch.
    let mut ka = TcpStream::connect(addr).expect("connect");
    ka.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    ka.write_all(b"GET /version HTTP/1.1\r\nHost: sim\r\n\r\n")
        .expect("write");
    let mut buf = [0u8; 4096];
    let n = ka.read(&mut buf).expect("answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let mut watch = TcpStream::connect(addr).expect("connect");
    watch
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    watch
        .write_all(b"GET /api/v1/nodes?watch=true HTTP/1.1\r\nHost: sim\r\n\r\n")
        .expect("write");
    let mut streamed = vec![0u8; 4096];
    let n = watch.read(&mut streamed).expect("watch head");
    streamed.truncate(n);

    let t0 = Instant::now();
    let (code, r) = post(addr, "refuse", r#"{"seconds": 1}"#);
    assert_eq!(code, 200, "{r}");
    assert_eq!(
        (r["refusing"].as_u64(), r["listen"].as_str()),
        (Some(1), Some(addr.to_string().as_str()))
    );
    assert!(refused(addr), "refused as soon as the answer arrived");
    // The watch stream is cut: EOF without the terminating chunk.
    let _ = watch.read_to_end(&mut streamed);
    assert!(!streamed.ends_with(b"0\r\n\r\n"), "cut, not ended cleanly");
    // The keep-alive connection answers nothing more.
    let _ = ka.write_all(b"GET /version HTTP/1.1\r\nHost: sim\r\n\r\n");
    let mut rest = Vec::new();
    let _ = ka.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));

    let back = wait_accepting(addr, Duration::from_secs(10));
    assert!(back - t0 >= Duration::from_millis(900), "{:?}", back - t0);
    let state = get_json(addr, "/sim/state").1;
    assert_eq!(
        (state["rv"].as_u64(), state["refusals"].as_u64()),
        (Some(rv), Some(1)),
        "store kept"
    );
    assert_eq!(state["openWatches"], 0);
    for bad in [r#"{"seconds": 0}"#, r#"{"seconds": 601}"#, "{}"] {
        assert_eq!(post(addr, "refuse", bad).0, 400, "{bad}");
    }
    assert!(!refused(addr));
}

#[test]
fn a_refusal_scheduled_before_serving_binds_later() {
    let mut st = store::Store::new(10);
    for o in fixture::demo() {
        st.apply(o).expect("fixture");
    }
    st.enable_too_large(TooLarge::Event);
    let shared = Arc::new(Shared::new(st, SliceVersions::V1, None, None));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let t0 = Instant::now();
    shared.listen(0).schedule(t0 + Duration::from_secs(1));
    std::thread::spawn(move || server::serve(listener, shared, None));
    let deadline = t0 + Duration::from_millis(800);
    while !refused(addr) {
        assert!(Instant::now() < deadline, "the listener was not closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let back = wait_accepting(addr, Duration::from_secs(10));
    assert!(back - t0 >= Duration::from_millis(900), "{:?}", back - t0);
    // --too-large from the start: a future RV is too large without a reset.
    let mut w = Watch::open(addr, "/api/v1/nodes?watch=true&resourceVersion=100000");
    assert_eq!(w.next().expect("ERROR")["object"]["code"], 504);
}

/// Like a real apiserver restored from an older etcd state: a silent reset accepts a watch from
/// the old, higher RVs with 200 and sends nothing on it (no event, no bookmark) until the
/// counter passes that RV; the open watches stay (`keep`), silent too, or are cut (`cut`: no
/// terminating chunk).
#[test]
fn a_silent_reset_keeps_watches_from_the_future_quiet_until_the_counter_passes_them() {
    let addr = crate::tests::start_with(SliceVersions::V1, Some(Duration::from_millis(100)), None);
    let old = state_rv(addr);
    let target = format!("/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={old}");
    let mut kept = Watch::open(addr, &target);
    assert_eq!(
        kept.next_of("BOOKMARK")["object"]["metadata"]["resourceVersion"],
        old.to_string()
    );
    let r = sim(
        addr,
        "reset-rv",
        json!({"rv": 10, "too_large": "silent", "watches": "keep"}),
    );
    assert_eq!(
        (r["too_large"].as_str(), r["watches"].as_str()),
        (Some("silent"), Some("keep"))
    );
    let mut fresh = Watch::open(addr, &target);
    for w in [&mut kept, &mut fresh] {
        assert!(
            w.silent_for(Duration::from_millis(500)),
            "no bookmark below the watcher's RV"
        );
    }
    // A LIST "not older than" the old RV is still refused (504), as an apiserver's is.
    assert_eq!(
        get_json(addr, &format!("/api/v1/nodes?resourceVersion={old}")).0,
        504
    );
    // The counter passes the old RV: events after it come, then bookmarks.
    let mut n = 0;
    while state_rv(addr) <= old {
        n += 1;
        sim(
            addr,
            "label-node",
            json!({"name": "edge-a1", "labels": {"n": n.to_string()}}),
        );
    }
    for w in [&mut kept, &mut fresh] {
        let ev = w.next().expect("event");
        assert_eq!(ev["type"], "MODIFIED");
        assert_eq!(
            ev["object"]["metadata"]["resourceVersion"],
            (old + 1).to_string()
        );
    }
    let r = sim(addr, "reset-rv", json!({"rv": 5, "watches": "cut"}));
    assert_eq!(r["watches"], "cut");
    assert!(kept.cut() && fresh.cut(), "cut, not ended");
}
