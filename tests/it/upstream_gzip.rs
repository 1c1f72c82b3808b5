//! Issue 26, a lighter WAN: the reflectors' lists ask the upstream for gzip, a list over the
//! apiserver's 128 KiB threshold arrives gzip'd and is served exactly as without gzip
//! (`--upstream-gzip=false`); watches do not ask for it; a corrupt gzip stream or an unknown
//! coding is a failed list, retried, never a panic. Against the real binaries; the simulator's
//! served log (`GET /sim/served`) shows what each list and watch asked for and got.

use crate::common;

use std::time::Duration;

use common::fault_proxy::{Fault, FaultProxy, Misbehaviour};
use common::{wait_for_long, Sim, Wrapper, SELECTOR_L};
use serde_json::Value;

/// A cluster whose Services, Endpoints and EndpointSlices lists are each over 128 KiB (in
/// protobuf, which the reflectors ask for first, as in JSON).
const SCALE: [&str; 10] = [
    "--fixture",
    "scale",
    "--nodes",
    "20",
    "--zones",
    "4",
    "--services",
    "800",
    "--endpoints-per-slice",
    "10",
];
const HOSTNAME: &str = "node-00000";

/// The sim's served log, from the `from`th entry on.
fn served(sim: &Sim, from: usize) -> Vec<Value> {
    match sim.get_json("/sim/served") {
        Value::Array(v) => v.into_iter().skip(from).collect(),
        other => panic!("/sim/served: {other}"),
    }
}

/// The served lists every kube-proxy reads, each item without its resourceVersion, sorted by
/// namespace and name.
fn served_items(w: &Wrapper) -> Vec<(String, Vec<Value>)> {
    let paths = [
        "/api/v1/nodes".to_string(),
        format!("/api/v1/services?labelSelector={SELECTOR_L}"),
        "/api/v1/endpoints".to_string(),
        format!("/apis/discovery.k8s.io/v1/endpointslices?labelSelector={SELECTOR_L}"),
    ];
    paths
        .into_iter()
        .map(|p| {
            let list = w.get_json(&p);
            let mut items = list["items"].as_array().cloned().unwrap_or_default();
            for it in &mut items {
                if let Some(m) = it["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
            }
            let key = |v: &Value| {
                let m = &v["metadata"];
                (m["namespace"].to_string(), m["name"].to_string())
            };
            items.sort_by_key(key);
            (p, items)
        })
        .collect()
}

#[test]
fn lists_ask_for_gzip_arrive_gzipped_and_are_served_as_without_it_while_watches_do_not_ask() {
    let sim = Sim::start(&SCALE);
    let w = Wrapper::start(&sim.url, HOSTNAME, &[]);
    let with_gzip = served(&sim, 0);
    let plain_from = with_gzip.len();
    let off = Wrapper::start(&sim.url, HOSTNAME, &["--upstream-gzip=false"]);
    let without = served(&sim, plain_from);

    let of = |log: &[Value], verb: &str| -> Vec<Value> {
        log.iter().filter(|r| r["verb"] == verb).cloned().collect()
    };
    let lists = of(&with_gzip, "list");
    assert!(lists.len() >= 4, "the sync's lists: {with_gzip:?}");
    for l in &lists {
        assert_eq!(l["acceptEncoding"], "gzip", "a list asks for gzip: {l}");
    }
    let gzipped: Vec<&str> = lists
        .iter()
        .filter(|l| l["contentEncoding"] == "gzip")
        .filter_map(|l| l["path"].as_str())
        .collect();
    for path in [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
    ] {
        assert!(gzipped.contains(&path), "{path} arrived gzip'd: {lists:?}");
    }
    let watches = of(&with_gzip, "watch");
    assert!(!watches.is_empty(), "the reflectors watch: {with_gzip:?}");
    for wt in &watches {
        assert_eq!(
            wt["acceptEncoding"],
            Value::Null,
            "a watch asks for no coding: {wt}"
        );
    }
    for l in of(&without, "list") {
        assert_eq!(l["acceptEncoding"], Value::Null, "gzip off: {l}");
        assert_eq!(l["contentEncoding"], Value::Null, "gzip off: {l}");
    }

    // What kube-proxy gets is the same either way, and it is the whole cluster where nothing
    // is pruned.
    let (a, b) = (served_items(&w), served_items(&off));
    for ((path, got), (_, want)) in a.iter().zip(&b) {
        assert!(!got.is_empty(), "{path} serves items");
        assert!(
            got == want,
            "{path}: served differently with and without gzip"
        );
    }
    assert_eq!(a[1].1.len(), 800, "every Service");
    assert_eq!(a[2].1.len(), 800, "every Endpoints");
}

#[test]
fn a_corrupt_gzip_list_and_an_unknown_coding_are_retried_with_a_clear_line_not_a_panic() {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    for (path, coding) in [
        ("GET /api/v1/services?", "gzip"),
        ("GET /api/v1/nodes?", "br"),
    ] {
        proxy.add(Fault {
            matches: path.into(),
            unless: Some("watch=true".into()),
            what: Misbehaviour::Coded(coding),
        });
    }
    let (w, log) =
        Wrapper::start_captured(&[&format!("--master={}", proxy.url), "--hostname=edge-a1"]);
    wait_for_long(
        "ready after the failed lists",
        Duration::from_secs(60),
        || w.readyz() == Some(200),
    );
    assert!(
        proxy.fired("/api/v1/services?"),
        "the corrupt gzip list was sent"
    );
    assert!(proxy.fired("/api/v1/nodes?"), "the unknown coding was sent");
    let text = log.wait_for_text(
        "Services: recovered after 1 failure",
        Duration::from_secs(10),
    );
    let line = |what: &str| -> String {
        text.lines()
            .find(|l| l.contains("WARN") && l.contains(what))
            .unwrap_or_else(|| panic!("no WARN line for {what}:\n{text}"))
            .to_string()
    };
    let services = line("Services: list failed");
    assert!(services.contains("content encoding: gzip: "), "{services}");
    let nodes = line("Nodes: list failed");
    assert!(
        nodes.contains("Content-Encoding \"br\" is not supported"),
        "{nodes}"
    );
    assert!(!text.contains("panicked"), "{text}");
    // Both resources are served after their retried lists.
    for path in ["/api/v1/services", "/api/v1/nodes"] {
        let served = w.get_json(path)["items"].as_array().map_or(0, Vec::len);
        assert!(served > 0, "{path} served");
    }
}
