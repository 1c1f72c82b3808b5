//! In-process tests of several listen addresses (`--listen A --listen B`): one store served on
//! both, `/sim/refuse` of one address (or all), the listen address in recorded requests and in
//! `/sim/state`, and the health endpoints failover probes use. Real sockets on 127.0.0.1,
//! bounded waits.

use crate::routes::SliceVersions;
use crate::server::{self, Shared};
use crate::tests::{call, get_json, sim, Watch};
use crate::{fixture, store};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A demo simulator on `n` loopback addresses.
fn start_n(n: usize) -> Vec<SocketAddr> {
    let mut st = store::Store::new(1000);
    for o in fixture::demo() {
        st.apply(o).expect("fixture");
    }
    let shared = Arc::new(Shared::new(st, SliceVersions::V1, None, None).with_listeners(n));
    let addrs: Vec<SocketAddr> = (0..n)
        .map(|i| {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || server::serve_on(listener, shared, None, i));
            addr
        })
        .collect();
    // Every accept loop has registered its address (a control request to one address acts on
    // all of them; one not yet registered answered "not listening").
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while (0..n).any(|i| shared.listen(i).addr().is_none()) {
        assert!(
            std::time::Instant::now() < deadline,
            "accept loops did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    addrs
}

fn refused(addr: SocketAddr) -> bool {
    matches!(TcpStream::connect(addr), Err(e) if e.kind() == ErrorKind::ConnectionRefused)
}

fn post(addr: SocketAddr, op: &str, body: Value) -> (u16, Value) {
    let (code, _, b) = call(
        addr,
        "POST",
        &format!("/sim/{op}"),
        "",
        body.to_string().as_bytes(),
    );
    (code, serde_json::from_slice(&b).expect("JSON answer"))
}

/// Polls `/sim/state` on `addr` until `cond` holds (bounded: 10 s).
fn wait_state(addr: SocketAddr, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = get_json(addr, "/sim/state").1;
        if cond(&state) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {state}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw watch request; returns the socket after the response head.
fn raw_watch(addr: SocketAddr, target: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(s, "GET {target} HTTP/1.1\r\nHost: sim\r\n\r\n").expect("write");
    let mut head = vec![0u8; 512];
    let n = s.read(&mut head).expect("head");
    assert!(head[..n].starts_with(b"HTTP/1.1 200"));
    s
}

#[test]
fn two_addresses_serve_one_store_and_refuse_takes_down_only_the_named_one() {
    let addrs = start_n(2);
    let (a, b) = (addrs[0], addrs[1]);
    // One store: a change made through A is listed, at the same RV, through B.
    let applied = sim(
        a,
        "label-node",
        json!({"name": "edge-a1", "labels": {"via": "a"}}),
    );
    let rv: u64 = applied["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("rv");
    let (_, nodes) = get_json(b, "/api/v1/nodes");
    assert_eq!(nodes["metadata"]["resourceVersion"], rv.to_string());
    // A watch on each address.
    let mut on_a = Watch::open(a, &format!("/api/v1/nodes?watch=true&resourceVersion={rv}"));
    let mut on_b = raw_watch(b, &format!("/api/v1/nodes?watch=true&resourceVersion={rv}"));
    let state = wait_state(a, "a watch on each address", |s| {
        s["listens"][0]["openWatches"] == 1 && s["listens"][1]["openWatches"] == 1
    });
    assert_eq!(state["listens"][0]["listen"], a.to_string());
    assert_eq!(state["listens"][1]["listen"], b.to_string());
    assert_eq!(state["openWatches"], 2);

    // Take B down, asking A.
    let (code, r) = post(a, "refuse", json!({"seconds": 1, "listen": b.to_string()}));
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["listen"], b.to_string());
    assert_eq!(r["listens"], json!([b.to_string()]));
    assert_eq!(r["closedWatches"], 1);
    assert!(refused(b), "B refuses");
    assert!(!refused(a), "A serves");
    // B's watch was cut, A's goes on.
    let mut rest = Vec::new();
    let _ = on_b.read_to_end(&mut rest);
    assert!(!rest.ends_with(b"0\r\n\r\n"), "cut, not ended cleanly");
    sim(
        a,
        "label-node",
        json!({"name": "edge-a1", "labels": {"via": "a2"}}),
    );
    let ev = on_a.next().expect("A's watch goes on");
    assert_eq!(ev["object"]["metadata"]["labels"]["via"], "a2");
    let state = wait_state(a, "B's watch to end", |s| {
        s["listens"][1]["openWatches"] == 0
    });
    assert_eq!(state["listens"][1]["refusing"], true);
    assert_eq!(state["listens"][1]["refusals"], 1);
    assert_eq!(state["listens"][0]["refusing"], false);
    assert_eq!(
        (state["refusals"].as_u64(), state["openWatches"].as_u64()),
        (Some(1), Some(1))
    );
    // Refusing B again while it refuses: 409; an unknown address: 400.
    let (code, _) = post(a, "refuse", json!({"seconds": 1, "listen": b.to_string()}));
    assert_eq!(code, 409);
    let (code, st) = post(a, "refuse", json!({"seconds": 1, "listen": "127.0.0.1:1"}));
    assert_eq!(code, 400, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains(&a.to_string())),
        "{st}"
    );

    // Proxied requests are recorded with the address they arrived on.
    let (code, _, _) = call(a, "POST", "/api/v1/namespaces/default/events", "", b"{}");
    assert_eq!(code, 201);
    // B comes back with the same store.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(b).is_err() {
        assert!(Instant::now() < deadline, "B never listened again");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, _, _) = call(b, "POST", "/api/v1/namespaces/default/events", "", b"{}");
    assert_eq!(code, 201);
    let (_, recorded) = get_json(b, "/sim/requests");
    let via: Vec<&str> = recorded
        .as_array()
        .expect("array")
        .iter()
        .map(|r| r["listen"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(via, [a.to_string(), b.to_string()]);
    let (_, nodes) = get_json(b, "/api/v1/nodes");
    assert_eq!(nodes["metadata"]["resourceVersion"], (rv + 1).to_string());
    let state = get_json(b, "/sim/state").1;
    assert_eq!(state["listens"][1]["refusing"], false);
    assert!(
        state["listens"][1]["requests"].as_u64() >= Some(2),
        "{state}"
    );
}

#[test]
fn refuse_without_listen_takes_down_every_address() {
    let addrs = start_n(2);
    let (code, r) = post(addrs[1], "refuse", json!({"seconds": 1}));
    assert_eq!(code, 200, "{r}");
    let all: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    assert_eq!(r["listens"], json!(all));
    assert!(addrs.iter().all(|&a| refused(a)), "both refuse");
    let deadline = Instant::now() + Duration::from_secs(10);
    while addrs.iter().any(|&a| TcpStream::connect(a).is_err()) {
        assert!(Instant::now() < deadline, "never listened again");
        std::thread::sleep(Duration::from_millis(20));
    }
    let state = get_json(addrs[0], "/sim/state").1;
    assert_eq!(state["refusals"], 2);
}

#[test]
fn health_endpoints_answer_ok_and_are_not_recorded() {
    let a = start_n(1)[0];
    for path in ["/readyz", "/livez", "/healthz"] {
        let (code, head, body) = call(a, "GET", path, "", b"");
        assert_eq!((code, body.as_slice()), (200, &b"ok"[..]), "{path}");
        assert!(head.contains("Content-Type: text/plain"), "{head}");
    }
    assert_eq!(get_json(a, "/sim/requests").1, json!([]));
}
