//! Issue 38 — `Retry-After` honoured (docs/SEMANTICS.md §7). A loaded apiserver answers 429
//! `TooManyRequests` with `Retry-After`, a shutting-down one 503 with it: grid-wrapper's own
//! next attempt at that request waits at least that long, then converges; an invalid value
//! keeps the normal backoff; `grid-wrapper check` says the upstream is throttled; a proxied
//! request gets the apiserver's 429 and its header as they are. Against the real binaries, a
//! fault proxy answering for the upstream where the timing of one request matters, and the
//! simulator's load mode (`/sim/load`) elsewhere.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::fault_proxy::{Fault, FaultProxy, Misbehaviour};
use common::{header, request, run_bounded, wait_for, wait_for_long, LogSink, Sim, Wrapper};
use serde_json::json;

/// The `Retry-After` the hostile answers carry, in seconds.
const RETRY_AFTER: u64 = 3;

fn answer(client: &mut TcpStream, code: u16, reason: &str, retry_after: &str) {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Too many requests, please try again later.", "reason": reason,
        "details": {"retryAfterSeconds": RETRY_AFTER}, "code": code,
    })
    .to_string();
    let _ = write!(
        client,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nRetry-After: {retry_after}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn too_many(client: &mut TcpStream) {
    answer(client, 429, "TooManyRequests", "3");
}

fn shutting_down(client: &mut TcpStream) {
    answer(client, 503, "ServiceUnavailable", "3");
}

fn too_many_soon(client: &mut TcpStream) {
    answer(client, 429, "TooManyRequests", "soon");
}

/// The value of `name{resource="resource"}` in the wrapper's `/metrics` (0 when absent).
fn metric(w: &Wrapper, name: &str, resource: &str) -> u64 {
    let (_, _, body) = request(w.health, "GET", "/metrics", &[], b"");
    let prefix = format!("{name}{{resource=\"{resource}\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Starts a wrapper behind a fault proxy whose first request matching `matches` (and not
/// `unless`) is answered by `hostile`; waits until that answer was given and the wrapper is
/// ready (it converged), then returns the gap between the hostile answer and the next request
/// of the same kind, with the wrapper and its log.
fn gap_after(
    matches: &str,
    unless: &str,
    hostile: fn(&mut TcpStream),
) -> (Duration, Wrapper, LogSink, FaultProxy, Sim) {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    proxy.add(Fault {
        matches: matches.into(),
        unless: Some(unless.into()),
        what: Misbehaviour::Answer(hostile),
    });
    let (w, log) = common::autonomy::start(&proxy.url, "edge-a1", &[]);
    wait_for_long("the hostile answer", Duration::from_secs(30), || {
        proxy.fired(matches)
    });
    wait_for_long("the request asked again", Duration::from_secs(30), || {
        proxy.arrivals(matches, unless).len() >= 2
    });
    w.wait_ready();
    let at = proxy.arrivals(matches, unless);
    (at[1].duration_since(at[0]), w, log, proxy, sim)
}

#[test]
fn a_list_answered_429_is_asked_again_no_sooner_than_its_retry_after() {
    let (gap, w, log, proxy, _sim) = gap_after("GET /api/v1/nodes?", "watch=true", too_many);
    assert!(
        gap >= Duration::from_secs(RETRY_AFTER),
        "the Nodes list was asked again {gap:?} after a 429 with Retry-After: {RETRY_AFTER}"
    );
    // Converged: the node is served, and the 429 is counted and logged once, with the server
    // and the Retry-After.
    let (code, _, body) = w.get("/api/v1/nodes/edge-a1");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        metric(&w, "grid_wrapper_upstream_throttled_total", "nodes"),
        1
    );
    let throttled_warn = |l: &str| l.contains("WARN") && l.contains("429");
    let text = log.wait_for_line("the 429's WARN", Duration::from_secs(20), throttled_warn);
    let warns: Vec<&str> = text.lines().filter(|l| throttled_warn(l)).collect();
    assert_eq!(warns.len(), 1, "{text}");
    assert!(
        warns[0].contains(&format!("Retry-After {RETRY_AFTER} s"))
            && warns[0].contains(&format!("cloud {}", proxy.url)),
        "{}",
        warns[0]
    );
}

#[test]
fn a_watch_answered_503_with_retry_after_is_started_again_no_sooner() {
    let (gap, w, _log, _proxy, sim) = gap_after(
        "GET /api/v1/services?allowWatchBookmarks",
        "no such text",
        shutting_down,
    );
    assert!(
        gap >= Duration::from_secs(RETRY_AFTER),
        "the Services watch was started again {gap:?} after a 503 with Retry-After: {RETRY_AFTER}"
    );
    // Converged: a change upstream reaches the wrapper through the new watch.
    sim.label_node("edge-a1", json!({"after": "503"}));
    wait_for_long("the relabel served", Duration::from_secs(20), || {
        let (code, _, body) = w.get("/api/v1/nodes/edge-a1");
        code == 200 && String::from_utf8_lossy(&body).contains("\"after\":\"503\"")
    });
}

#[test]
fn an_invalid_retry_after_keeps_the_normal_backoff() {
    let (gap, _w, _log, _proxy, _sim) =
        gap_after("GET /api/v1/nodes?", "watch=true", too_many_soon);
    // The first backoff is 0.4-1.2 s; "soon" is no wait of its own.
    assert!(
        gap < Duration::from_millis(2500),
        "an invalid Retry-After made the Nodes list wait {gap:?}"
    );
}

#[test]
fn check_reports_a_throttled_upstream() {
    let sim = Sim::start(&[]);
    sim.control("load", &json!({"next": 100_000, "retryAfter": RETRY_AFTER}));
    let started = Instant::now();
    let out = run_bounded(
        Command::new(env!("CARGO_BIN_EXE_grid-wrapper")).args([
            "check",
            "--master",
            &sim.url,
            "--hostname",
            "edge-a1",
        ]),
        Duration::from_secs(60),
    )
    .expect("grid-wrapper check finished in time");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let throttled: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("problem: throttled: "))
        .collect();
    assert!(
        throttled.iter().any(|l| l.contains("list nodes")
            && l.contains("429 TooManyRequests")
            && l.contains(&format!("Retry-After {RETRY_AFTER} s"))),
        "{stdout}"
    );
    // A throttled upstream is reported, not waited out: only the EndpointSlice list, asked
    // by the version probe and again by the access check, waits for its Retry-After.
    assert!(
        started.elapsed() < Duration::from_secs(RETRY_AFTER * 6),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_proxied_request_gets_the_apiservers_429_as_it_is() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, "edge-a1", &[]);
    // Ready means listed: each reflector's watch follows its list, and on a loaded machine may
    // not be open yet. The 429 is for the proxied request, not for a late watch.
    wait_for("the five reflectors' watches open on the simulator", || {
        sim.state()["openWatches"].as_u64() >= Some(5)
    });
    sim.control("load", &json!({"next": 1, "retryAfter": 7}));
    // Not mirrored: proxied to the upstream.
    let (code, headers, body) = w.get("/api/v1/namespaces/default/pods");
    assert_eq!(code, 429, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "retry-after"), Some("7"));
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 7);
    let load = request(sim.addr, "GET", "/sim/load", &[], b"").2;
    let load: serde_json::Value = serde_json::from_slice(&load).expect("load JSON");
    assert_eq!(load["throttled"], 1, "{load}");
}
