//! kube-proxy 1.37 exits when its own Node is deleted or when the Node's addresses change. These
//! tests run kube-proxy's Node informer as client-go runs it, against the real binaries: a
//! WatchList (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`, bookmarks) with the
//! field selector `metadata.name=<hostname>`, resumed from its last resourceVersion when the
//! stream ends, and listed again (a new WatchList whose initial events replace the informer's
//! store) when the resourceVersion is refused with 410. Through each event that makes
//! grid-wrapper or its upstream start over — a relist diff, an upstream RV reset, a failover
//! switch, an offline restart from the snapshot — the informer never sees its Node deleted
//! (neither a DELETED event nor a relist without it) and never sees its addresses change.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::autonomy::{self, cache_flags, metric, wait_snapshot_writes};
use common::{free_port, wait_for, wait_for_long, LogSink, Sim, TempDir, Watch, Wrapper};
use serde_json::{json, Value};

const HOST: &str = "edge-a1";

/// kube-proxy's Node informer (client-go's reflector and store, reduced to one object).
struct NodeInformer {
    addr: SocketAddr,
    /// The last resourceVersion seen (an event's object or a bookmark).
    rv: String,
    /// The Node's `status.addresses` as first listed.
    addresses: Option<Value>,
    stream: Option<Watch>,
    /// The next connection is a WatchList (the first sync, or after a 410).
    relist_next: bool,
    /// The initial events of the WatchList in progress, until its initial-events-end bookmark.
    listing: Option<Vec<Value>>,
    relists: usize,
    /// What kube-proxy 1.37 exits on: each a line saying what was seen.
    exits: Vec<String>,
    trace: Vec<String>,
}

impl NodeInformer {
    fn new(addr: SocketAddr) -> NodeInformer {
        NodeInformer {
            addr,
            rv: String::new(),
            addresses: None,
            stream: None,
            relist_next: true,
            listing: None,
            relists: 0,
            exits: Vec::new(),
            trace: Vec::new(),
        }
    }

    fn path(&self) -> String {
        let sel = format!("fieldSelector=metadata.name%3D{HOST}");
        if self.relist_next {
            format!(
                "/api/v1/nodes?{sel}&watch=1&sendInitialEvents=true\
                 &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=60"
            )
        } else {
            format!(
                "/api/v1/nodes?{sel}&watch=1&resourceVersion={}&allowWatchBookmarks=true\
                 &timeoutSeconds=60",
                self.rv
            )
        }
    }

    /// Runs the informer until `until`: connects (again), reads events, resumes and relists.
    fn run_until(&mut self, until: Instant) {
        while Instant::now() < until {
            let Some(stream) = self.stream.as_mut() else {
                self.connect();
                continue;
            };
            let left = until.saturating_duration_since(Instant::now());
            match stream.next(left.min(Duration::from_millis(200))) {
                Some(ev) => self.event(ev),
                None if stream.is_ended() => {
                    self.trace.push("stream ended".into());
                    self.stream = None;
                    self.listing = None;
                }
                None => {}
            }
        }
    }

    /// Runs until the informer has listed `n` times in all (bounded by `limit`).
    fn run_until_relists(&mut self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.relists < n && Instant::now() < deadline {
            self.run_until((Instant::now() + Duration::from_millis(200)).min(deadline));
        }
        assert!(
            self.relists >= n,
            "the informer listed {} times, expected {n}: {:#?}",
            self.relists,
            self.trace
        );
    }

    fn connect(&mut self) {
        let path = self.path();
        let Ok(watch) = Watch::try_open(self.addr, &path, &[]) else {
            // grid-wrapper is down (restarting): client-go backs off and tries again.
            std::thread::sleep(Duration::from_millis(100));
            return;
        };
        self.trace.push(format!("GET {path} → {}", watch.code));
        match watch.code {
            200 => {
                self.listing = self.relist_next.then(Vec::new);
                self.stream = Some(watch);
            }
            410 => self.relist_next = true,
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }

    fn event(&mut self, ev: Value) {
        let typ = ev["type"].as_str().unwrap_or("").to_string();
        let obj = &ev["object"];
        let rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or("");
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        self.trace.push(format!("{typ} {name} rv={rv}"));
        match typ.as_str() {
            "ERROR" => {
                if obj["code"] == 410 {
                    self.relist_next = true;
                }
                self.stream = None;
                self.listing = None;
                return;
            }
            "BOOKMARK" => {
                self.rv = rv.to_string();
                let end = obj["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true";
                if end {
                    if let Some(items) = self.listing.take() {
                        self.replace(&items);
                    }
                }
                return;
            }
            _ => {}
        }
        assert_eq!(name, HOST, "the field selector holds: {ev}");
        self.rv = rv.to_string();
        if let Some(items) = self.listing.as_mut() {
            assert_eq!(typ, "ADDED", "initial events are ADDED: {ev}");
            items.push(obj.clone());
            return;
        }
        match typ.as_str() {
            "DELETED" => self.exits.push(format!("DELETED on the watch: {ev}")),
            _ => self.check_addresses(obj),
        }
    }

    /// A WatchList's initial events replace the store (client-go's `Replace`): a Node missing
    /// from them is a deletion.
    fn replace(&mut self, items: &[Value]) {
        self.relists += 1;
        self.relist_next = false;
        match items.iter().find(|o| o["metadata"]["name"] == HOST) {
            Some(node) => self.check_addresses(node),
            None => self
                .exits
                .push(format!("relisted without the Node (rv {})", self.rv)),
        }
    }

    fn check_addresses(&mut self, node: &Value) {
        let now = node["status"]["addresses"].clone();
        match &self.addresses {
            None => {
                assert!(now.as_array().is_some_and(|a| !a.is_empty()), "{node}");
                self.addresses = Some(now);
            }
            Some(first) if *first != now => self
                .exits
                .push(format!("addresses changed from {first} to {now}")),
            Some(_) => {}
        }
    }

    fn assert_still_running(&self, step: &str) {
        assert!(
            self.exits.is_empty(),
            "{step}: kube-proxy would exit: {:#?}\ntrace: {:#?}",
            self.exits,
            self.trace
        );
    }
}

fn relists(w: &Wrapper) -> f64 {
    metric(w, "grid_wrapper_upstream_relists_total{resource=\"nodes\"}").unwrap_or(0.0)
}

/// Runs the informer for `d` more.
fn run_for(inf: &mut NodeInformer, d: Duration) {
    inf.run_until(Instant::now() + d);
}

#[test]
fn local_node_survives_a_relist_diff() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, HOST, &[]);
    let mut inf = NodeInformer::new(w.addr);
    inf.run_until_relists(1, Duration::from_secs(10));
    let before = relists(&w);

    // The upstream compacts its history past the nodes reflector's last event and drops every
    // watch: the reflector's resume is refused (410) and it lists again, diffing the new list
    // against the cache, while other nodes change.
    sim.label_node("edge-c1", json!({"round": "1"}));
    let mut api = sim.get_json("/api/v1/namespaces/default/services/api");
    api["metadata"]["labels"]["round"] = json!("1");
    sim.apply(&api);
    sim.control("compact", &json!({}));
    sim.control("close-watches", &json!({}));
    sim.label_node("edge-c1", json!({"round": "2"}));
    wait_for("the reflectors to relist", || relists(&w) > before);
    wait_for("the change after the relist to be served", || {
        w.get_json("/api/v1/nodes/edge-c1")["metadata"]["labels"]["round"] == "2"
    });
    run_for(&mut inf, Duration::from_secs(2));
    inf.assert_still_running("relist diff");
    assert!(inf.addresses.is_some());
}

#[test]
fn local_node_survives_an_upstream_rv_reset() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, HOST, &[]);
    let mut inf = NodeInformer::new(w.addr);
    inf.run_until_relists(1, Duration::from_secs(10));
    for i in 0..40 {
        sim.label_node("edge-c1", json!({"bump": i.to_string()}));
    }
    wait_for("the bumps to be served", || {
        w.get_json("/api/v1/nodes/edge-c1")["metadata"]["labels"]["bump"] == "39"
    });
    let before = relists(&w);
    // The upstream's RVs restart far below (etcd restored): the reflectors relist from scratch.
    sim.reset_rv(20, Some("http"));
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));
    wait_for("the reflectors to relist", || relists(&w) > before);
    wait_for("the relabel after the reset to be served", || {
        w.get_json("/api/v1/nodes/edge-a2")["metadata"]["labels"]["zone"] == "zone-b"
    });
    run_for(&mut inf, Duration::from_secs(2));
    inf.assert_still_running("upstream RV reset");
}

#[test]
fn local_node_survives_a_failover_switch_and_back() {
    // One simulator on two addresses: A and B serve the same store.
    let (sim, b) = Sim::start_two_addresses(&[]);
    let a = sim.addr;
    let (w, _log) = Wrapper::start_captured(&[
        &format!("--master=http://{a},http://{b}"),
        &format!("--hostname={HOST}"),
    ]);
    w.wait_ready();
    let mut inf = NodeInformer::new(w.addr);
    inf.run_until_relists(1, Duration::from_secs(10));
    let idx = "grid_wrapper_upstream_current_server_index";
    let control = |op: &str, body: Value| {
        let (code, _, resp) = common::request(
            b,
            "POST",
            &format!("/sim/{op}"),
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(&body).expect("JSON"),
        );
        assert!(code < 300, "{op}: {}", String::from_utf8_lossy(&resp));
    };
    control("refuse", json!({"seconds": 6, "listen": a.to_string()}));
    control(
        "label-node",
        json!({"name": "edge-c1", "labels": {"during": "outage"}}),
    );
    wait_for("the failover", || metric(&w, idx) == Some(1.0));
    run_for(&mut inf, Duration::from_secs(1));
    inf.assert_still_running("failover");
    wait_for_long("the failback", Duration::from_secs(25), || {
        metric(&w, idx) == Some(0.0)
    });
    run_for(&mut inf, Duration::from_secs(2));
    inf.assert_still_running("failback");
    assert_eq!(
        w.get_json("/api/v1/nodes/edge-c1")["metadata"]["labels"]["during"],
        "outage"
    );
}

/// grid-wrapper on a fixed port (kube-proxy's kubeconfig names one address) with a cache dir.
fn start_fixed(master: &str, port: u16, dir: &TempDir) -> (Wrapper, LogSink) {
    let w = Wrapper::spawn_at(
        std::process::Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
            .arg(format!("--master={master}"))
            .arg(format!("--hostname={HOST}"))
            .args(cache_flags(&dir.path.display().to_string())),
        &format!("127.0.0.1:{port}"),
    );
    let log = w.log.clone();
    (w, log)
}

#[test]
fn local_node_survives_an_offline_restart_from_the_snapshot() {
    let (sim_port, port) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{sim_port}");
    let dir = TempDir::new("kube-proxy-node");
    let sim = Sim::start(&["--listen", &format!("127.0.0.1:{sim_port}")]);
    let (w1, _log1) = start_fixed(&url, port, &dir);
    w1.wait_ready();
    wait_snapshot_writes(&w1, 1);
    let mut inf = NodeInformer::new(w1.addr);
    inf.run_until_relists(1, Duration::from_secs(10));

    // Power cut with the WAN down: grid-wrapper is killed, the upstream is gone.
    autonomy::signal(&w1, "KILL");
    drop(w1);
    drop(sim);
    run_for(&mut inf, Duration::from_millis(500));
    let (w2, log2) = start_fixed(&url, port, &dir);
    // kube-proxy's resume carries the previous process's RV: refused, then a WatchList that
    // the snapshot answers.
    inf.run_until_relists(2, Duration::from_secs(10));
    inf.assert_still_running("offline restart");
    assert_eq!(
        autonomy::metric(&w2, "grid_wrapper_serving_snapshot"),
        Some(1.0),
        "{}",
        log2.text()
    );

    // The upstream comes back: grid-wrapper's first lists are diffed against the snapshot.
    let _sim2 = Sim::start(&["--listen", &format!("127.0.0.1:{sim_port}")]);
    wait_for("the snapshot to give way to the upstream", || {
        autonomy::metric(&w2, "grid_wrapper_serving_snapshot") == Some(0.0)
    });
    run_for(&mut inf, Duration::from_secs(2));
    inf.assert_still_running("upstream back");
}

/// The informer above is a real judge: a Node deleted upstream is seen as kube-proxy sees it.
#[test]
fn informer_sees_a_real_deletion_and_an_address_change() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, HOST, &[]);
    let mut inf = NodeInformer::new(w.addr);
    inf.run_until_relists(1, Duration::from_secs(10));
    let mut node = w.get_json(&format!("/api/v1/nodes/{HOST}"));
    node["status"]["addresses"][0]["address"] = json!("10.9.9.9");
    sim.apply(&node);
    run_for(&mut inf, Duration::from_secs(1));
    assert!(
        inf.exits.iter().any(|e| e.contains("addresses changed")),
        "{:#?}",
        inf.trace
    );
    sim.delete("Node", "", HOST);
    run_for(&mut inf, Duration::from_secs(1));
    assert!(
        inf.exits.iter().any(|e| e.starts_with("DELETED")),
        "{:#?}",
        inf.trace
    );
}
