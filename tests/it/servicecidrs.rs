//! ServiceCIDRs (docs/SEMANTICS.md §5.1, checklist item 31): served from the cache in both
//! versions when the upstream has them (the simulator serves only v1, so every v1beta1 answer
//! and every answer carrying grid-wrapper's own resourceVersions is the cache's), with kube-proxy's
//! own request shapes, after an offline restart from the snapshot, and proxied when the upstream
//! has none. The generic guarantees (list shape, watches, 410, protobuf) are checked for them
//! with every other resource in tests/it/protocol.rs and tests/it/protobuf.rs.

use crate::common;

use std::time::Duration;

use common::autonomy::{self, cache_flags};
use common::{demo, free_port, names, rv, wait_for, Sim, TempDir, SELECTOR_L};
use serde_json::{json, Value};

const V1: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const V1BETA1: &str = "/apis/networking.k8s.io/v1beta1/servicecidrs";

/// RVs of this process: `epoch << 40` and above (the simulator's are small numbers).
fn is_own(rv: u64) -> bool {
    rv >= 1 << 40
}

fn cidr(name: &str, cidrs: &[&str]) -> Value {
    json!({"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": name}, "spec": {"cidrs": cidrs}})
}

#[test]
fn servicecidrs_are_listed_watched_and_got_from_the_cache_in_both_versions() {
    let (sim, w) = demo(&[]);
    let lists = sim.state()["served"]["lists"].as_u64();
    for (path, api) in [
        (V1, "networking.k8s.io/v1"),
        (V1BETA1, "networking.k8s.io/v1beta1"),
    ] {
        // kube-proxy's own list: its label selector, limit and resourceVersion.
        let q = format!("{path}?labelSelector={SELECTOR_L}&limit=500&resourceVersion=0");
        let list = w.get_json(&q);
        assert_eq!(
            (list["kind"].as_str(), list["apiVersion"].as_str()),
            (Some("ServiceCIDRList"), Some(api))
        );
        assert_eq!(names(&list), ["kubernetes"], "{q}");
        assert!(is_own(rv(&list)), "{q}: {list}");
        let item = &list["items"][0];
        assert_eq!(item["spec"]["cidrs"], json!(["10.96.0.0/12"]));
        assert!(is_own(rv(item)), "{q}: {item}");
        let one = w.get_json(&format!("{path}/kubernetes"));
        assert_eq!(one["apiVersion"], api);
        let (code, _, _) = w.get(&format!("{path}/nope"));
        assert_eq!(code, 404, "{path}/nope");
        let by_name = w.get_json(&format!("{path}?fieldSelector=metadata.name%3Dnope"));
        assert!(names(&by_name).is_empty());
        // Cluster-scoped: no namespace to select on.
        let (code, _, _) = w.get(&format!(
            "{path}?fieldSelector=metadata.namespace%3Ddefault"
        ));
        assert_eq!(code, 400, "{path}: metadata.namespace");
    }
    assert_eq!(
        sim.state()["served"]["lists"].as_u64(),
        lists,
        "no list reached the upstream"
    );

    // Watches of both versions, kube-proxy's way (WatchList) and from a list's RV, see a new
    // ServiceCIDR as ADDED and its deletion as DELETED, each with its own RV.
    let start = rv(&w.get_json(V1));
    let mut watches: Vec<common::Watch> = [V1, V1BETA1]
        .iter()
        .flat_map(|p| {
            [
                format!("{p}?allowWatchBookmarks=true&labelSelector={SELECTOR_L}&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=30&watch=true"),
                format!("{p}?resourceVersion={start}&timeoutSeconds=30&watch=true"),
            ]
        })
        .map(|q| w.watch(&q))
        .collect();
    for (i, watch) in watches.iter_mut().enumerate() {
        assert_eq!(watch.code, 200);
        if i % 2 == 0 {
            assert_eq!(watch.expect()["type"], "ADDED");
            let end = watch.expect();
            assert_eq!(end["type"], "BOOKMARK", "{end}");
            assert_eq!(
                end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
        }
    }
    sim.apply(&cidr("extra", &["10.100.0.0/16"]));
    sim.delete("ServiceCIDR", "", "extra");
    for watch in &mut watches {
        let added = watch.expect();
        assert_eq!(
            (
                added["type"].as_str(),
                added["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("extra")),
            "{added}"
        );
        let deleted = watch.expect();
        assert_eq!(deleted["type"], "DELETED", "{deleted}");
        assert!(rv(&deleted["object"]) > rv(&added["object"]));
        assert!(is_own(rv(&added["object"])));
    }
    // A resume from before the log's start gets 410.
    let mut stale = w.watch(&format!(
        "{V1}?resourceVersion=5&timeoutSeconds=5&watch=true"
    ));
    let ev = stale.expect();
    assert_eq!(
        (ev["type"].as_str(), ev["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );

    // /metrics counts them per version.
    let text = autonomy::metrics(&w);
    for res in [
        "servicecidrs.networking.k8s.io/v1",
        "servicecidrs.networking.k8s.io/v1beta1",
    ] {
        let line = format!("grid_wrapper_objects{{resource=\"{res}\"}} 1");
        assert!(text.contains(&line), "missing {line:?}");
    }
}

#[test]
fn an_upstream_without_servicecidrs_has_their_requests_proxied() {
    let sim = Sim::start(&["--no-servicecidrs"]);
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &[]);
    // The sync does not wait for a resource the upstream does not have.
    w.wait_ready();
    sim.clear_requests();
    for path in [
        V1,
        V1BETA1,
        "/apis/networking.k8s.io/v1/servicecidrs/kubernetes",
    ] {
        let (code, _, body) = w.get(path);
        assert_eq!(code, 404, "{path}: {}", String::from_utf8_lossy(&body));
        let status: Value = serde_json::from_slice(&body).expect("a Status");
        assert_eq!(
            status["message"], "the server could not find the requested resource",
            "{path}: the upstream's answer"
        );
    }
    let recorded: Vec<String> = sim
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        recorded,
        [
            V1,
            V1BETA1,
            "/apis/networking.k8s.io/v1/servicecidrs/kubernetes"
        ],
        "proxied, in order"
    );
    // The other resources are served as usual, and one line says why ServiceCIDRs are not.
    assert_eq!(names(&w.get_json("/api/v1/nodes")).len(), 4);
    let text = log.wait_for_text("the upstream has no ServiceCIDRs", Duration::from_secs(20));
    assert_eq!(
        text.matches("the upstream has no ServiceCIDRs").count(),
        1,
        "{text}"
    );
    assert!(text.contains("requests for them are proxied"), "{text}");
}

#[test]
fn servicecidrs_are_served_after_an_offline_restart_from_the_snapshot() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = TempDir::new("cidrs-offline");
    let flags = cache_flags(&dir.path.display().to_string());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let sim = Sim::start(&["--listen", &format!("127.0.0.1:{port}")]);
    let (w1, _log1) = autonomy::start(&sim.url, "edge-a1", &flags);
    w1.wait_ready();
    autonomy::wait_snapshot_writes(&w1, 1);
    sim.apply(&cidr("extra", &["10.100.0.0/16", "fd00:10::/108"]));
    wait_for("the new ServiceCIDR to be served", || {
        names(&w1.get_json(V1)).len() == 2
    });
    autonomy::wait_snapshot_writes(&w1, 2);
    let max1 = autonomy::max_rv(&w1);
    // Power cut while the WAN is down.
    autonomy::signal(&w1, "KILL");
    drop(w1);
    drop(sim);

    let (w2, log2) = autonomy::start(&url, "edge-a1", &flags);
    wait_for("the snapshot to be served", || w2.get(V1).0 == 200);
    for path in [V1, V1BETA1] {
        let list = w2.get_json(path);
        assert_eq!(names(&list), ["extra", "kubernetes"], "{path}");
        assert!(rv(&list) > max1, "{path}: RVs above the previous process's");
        let extra = &list["items"][0];
        assert_eq!(
            extra["spec"]["cidrs"],
            json!(["10.100.0.0/16", "fd00:10::/108"])
        );
    }
    let mut watch = w2.watch(&format!("{V1}?watch=true&timeoutSeconds=10"));
    assert_eq!(watch.expect()["type"], "ADDED");
    // Logged by the thread that starts the reflectors, after its discovery probe of the (gone)
    // upstream: it may come a moment after the view is served.
    log2.wait_for_text("serving the snapshot's CidrsV1", Duration::from_secs(30));
}

#[test]
fn an_upstream_that_gains_servicecidrs_is_followed_without_a_restart() {
    // An upgrade of the control plane: the apiserver comes back on the same address, now with
    // ServiceCIDRs. The running process notices at its next re-check (every 60 s).
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let old = Sim::start(&["--listen", &listen, "--no-servicecidrs"]);
    let (w, log) = autonomy::start(&old.url, "edge-a1", &[]);
    w.wait_ready();
    assert_eq!(w.get(V1).0, 404, "proxied to an upstream without them");
    drop(old);
    let _new = Sim::start(&["--listen", &listen]);
    common::wait_for_long(
        "the new ServiceCIDRs to be served",
        Duration::from_secs(90),
        || {
            let (code, _, body) = w.get(V1);
            code == 200
                && serde_json::from_slice::<Value>(&body)
                    .is_ok_and(|l| names(&l) == ["kubernetes"] && is_own(rv(&l)))
        },
    );
    assert_eq!(names(&w.get_json(V1BETA1)), ["kubernetes"]);
    let text = log.wait_for_text(
        "the upstream has ServiceCIDRs now: mirroring CidrsV1",
        Duration::from_secs(20),
    );
    assert_eq!(
        text.matches("the upstream has ServiceCIDRs now: mirroring CidrsV1")
            .count(),
        1,
        "{text}"
    );
}
