//! Issue 9, point 3 — upstream failover, against the real binaries on 127.0.0.1: grid-wrapper
//! with `--master=http://A,http://B` in front of one simulator listening on A and B (one store,
//! the same resourceVersions, like two apiservers of one cluster). A goes down while nodes
//! change: a client's watch on grid-wrapper sees every change exactly once, lists stay right,
//! proxied requests reach B, /metrics and the log show the failover; A comes back: the failback
//! is logged and counted, the reflectors' watches and proxied requests return to A.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::autonomy::{metric, metrics, served};
use common::generations::{assert_every_change_once, gens, node_watch, own_node};
use common::{request, wait_for, wait_for_long, LogSink, Sim, Wrapper};
use serde_json::{json, Value};

const NODES: [&str; 4] = ["edge-a1", "edge-a2", "edge-b1", "edge-c1"];
/// How long A refuses connections: long enough for every check made while it is down.
const OUTAGE_SECS: u64 = 10;

/// A `/sim/` control request to `addr` (the address that is up).
fn control(addr: SocketAddr, op: &str, body: &Value) -> Value {
    let (code, _, resp) = request(
        addr,
        if op == "state" || op == "requests" {
            "GET"
        } else {
            "POST"
        },
        &format!("/sim/{op}"),
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(body).unwrap(),
    );
    assert!(
        code < 300,
        "sim {op}: {code} {}",
        String::from_utf8_lossy(&resp)
    );
    serde_json::from_slice(&resp).unwrap_or(Value::Null)
}

/// Makes `n` node changes through `addr` (label `gen` = the next number), 40 ms apart, and
/// appends what it did to `done`.
fn churn(addr: SocketAddr, n: usize, done: &mut Vec<(String, String)>) {
    for _ in 0..n {
        let g = done.len() + 1;
        let node = NODES[g % NODES.len()];
        control(
            addr,
            "label-node",
            &json!({"name": node, "labels": {"gen": g.to_string()}}),
        );
        done.push((node.to_string(), g.to_string()));
        std::thread::sleep(Duration::from_millis(40));
    }
}

/// Proxies an event POST through grid-wrapper; returns the listen address the sim recorded
/// it on (asked through `up`, an address that is up).
fn proxied_event_lands_on(w: &Wrapper, up: SocketAddr, name: &str) -> String {
    let body = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name}});
    let (code, _, resp) = request(
        w.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&body).unwrap(),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&resp));
    let recorded = control(up, "requests", &Value::Null);
    let found = recorded
        .as_array()
        .expect("recorded requests")
        .iter()
        .rev()
        .find(|r| {
            r["path"] == "/api/v1/namespaces/default/events"
                && r["bodyLength"].as_u64() == Some(serde_json::to_vec(&body).unwrap().len() as u64)
        })
        .cloned()
        .unwrap_or(Value::Null);
    found["listen"].as_str().unwrap_or("").to_string()
}

/// The log lines containing `needle`.
fn log_lines(log: &LogSink, needle: &str) -> Vec<String> {
    log.text()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn failover_to_the_second_server_and_back_delivers_every_change_exactly_once() {
    let (sim, b) = Sim::start_two_addresses(&["--bookmark-interval", "1"]);
    let a = sim.addr;
    let (url_a, url_b) = (format!("http://{a}"), format!("http://{b}"));
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={url_a},{url_b}"), "--hostname=edge-a1"]);
    w.wait_ready();
    let idx = "grid_wrapper_upstream_current_server_index";
    assert_eq!(metric(&w, idx), Some(0.0), "{}", metrics(&w));
    let healthy_a =
        format!("grid_wrapper_upstream_server_healthy{{server=\"{url_a}\",index=\"0\"}}");
    assert_eq!(metric(&w, &healthy_a), Some(1.0));
    // The reflectors watch on A.
    wait_for("the reflectors' watches on A", || {
        control(b, "state", &Value::Null)["listens"][0]["openWatches"].as_u64() >= Some(4)
    });

    // A client watch on grid-wrapper, open through everything that follows.
    let mut watch = node_watch(&w, "edge-a1", 120);
    let mut done = Vec::new();
    churn(b, 10, &mut done);

    // A goes down (asked through B); changes go on at once, through B.
    let t_down = Instant::now();
    let r = control(
        b,
        "refuse",
        &json!({"seconds": OUTAGE_SECS, "listen": a.to_string()}),
    );
    assert_eq!(r["listens"], json!([a.to_string()]), "{r}");
    churn(b, 25, &mut done);
    wait_for("the failover in /metrics", || metric(&w, idx) == Some(1.0));
    let m = metrics(&w);
    for line in [
        "grid_wrapper_upstream_switches_total{direction=\"failover\"} 1\n".to_string(),
        "grid_wrapper_upstream_switches_total{direction=\"failback\"} 0\n".to_string(),
        format!("{healthy_a} 0\n"),
        format!("grid_wrapper_upstream_server_healthy{{server=\"{url_b}\",index=\"1\"}} 1\n"),
    ] {
        assert!(m.contains(&line), "missing {line:?} in\n{m}");
    }
    // Logged just after the metric changes.
    log.wait_for_text("upstream failover:", Duration::from_secs(10));
    let warn = log_lines(&log, "upstream failover:");
    assert_eq!(warn.len(), 1, "{}", log.text());
    assert!(warn[0].contains("WARN"), "{warn:?}");
    assert!(
        warn[0].contains(&url_a) && warn[0].contains(&url_b),
        "{warn:?}"
    );
    // Lists stay right (they converge on the upstream's state), every collection answers.
    let upstream = own_gen(&sim_nodes(b));
    wait_for("the wrapper's own Node to match the upstream's", || {
        gens(&w.get_json(&own_node("edge-a1"))) == upstream
    });
    assert!(served(&w).is_some(), "every collection is served");
    // Proxied requests go to B.
    assert_eq!(
        proxied_event_lands_on(&w, b, "during-outage"),
        b.to_string()
    );
    assert!(
        t_down.elapsed() < Duration::from_secs(OUTAGE_SECS),
        "the checks above took longer than the outage: raise OUTAGE_SECS"
    );

    // A comes back: fail back (after the probes), logged at INFO and counted.
    wait_for_long(
        "the failback in /metrics",
        Duration::from_secs(OUTAGE_SECS + 15),
        || metric(&w, idx) == Some(0.0),
    );
    let m = metrics(&w);
    for line in [
        "grid_wrapper_upstream_switches_total{direction=\"failover\"} 1\n".to_string(),
        "grid_wrapper_upstream_switches_total{direction=\"failback\"} 1\n".to_string(),
        format!("{healthy_a} 1\n"),
    ] {
        assert!(m.contains(&line), "missing {line:?} in\n{m}");
    }
    // Logged just after the metric changes.
    log.wait_for_text("upstream failback:", Duration::from_secs(10));
    let info = log_lines(&log, "upstream failback:");
    assert_eq!(info.len(), 1, "{}", log.text());
    assert!(
        info[0].contains("INFO") && info[0].contains(&url_a),
        "{info:?}"
    );
    // The reflectors' watches move back to A at their next BOOKMARK; proxied requests too.
    wait_for("the reflectors' watches back on A", || {
        let s = control(b, "state", &Value::Null);
        s["listens"][0]["openWatches"].as_u64() >= Some(4)
            && s["listens"][1]["openWatches"].as_u64() == Some(0)
    });
    assert_eq!(
        proxied_event_lands_on(&w, a, "after-failback"),
        a.to_string()
    );
    churn(a, 10, &mut done);

    // Every change exactly once, in order, with increasing resourceVersions.
    assert_every_change_once(&mut watch, "edge-a1", &done);
    assert_eq!(
        gens(&w.get_json(&own_node("edge-a1"))),
        own_gen(&sim_nodes(a))
    );
    // Resumed at its resourceVersion on each server: never relisted.
    assert_eq!(
        metric(
            &w,
            "grid_wrapper_upstream_relists_total{resource=\"nodes\"}"
        ),
        Some(0.0),
        "{}",
        metrics(&w)
    );
    assert!(
        metric(
            &w,
            "grid_wrapper_upstream_requests_total{verb=\"forward\",code=\"201\"}"
        ) >= Some(2.0)
    );
}

/// The simulator's node list, asked at `addr`.
/// `edge-a1 → gen` of the upstream's node list (the wrapper's own Node).
fn own_gen(list: &Value) -> Vec<(String, String)> {
    let mut g = gens(list);
    g.retain(|(n, _)| n == "edge-a1");
    g
}

fn sim_nodes(addr: SocketAddr) -> Value {
    let (code, _, body) = request(addr, "GET", "/api/v1/nodes", &[], b"");
    assert_eq!(code, 200);
    serde_json::from_slice(&body).expect("node list")
}
