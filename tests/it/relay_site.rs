//! Issue 27, a whole site on 127.0.0.1 with the real binaries: the simulator is the cloud, real
//! relays (grid-wrapper with `--relay-bind-address`) read it, and followers (grid-wrapper with
//! `--relay-kubeconfig`/`--relay-servers`) read the relays. The PKI is made by the operator's
//! own `deploy/relay/make-certs.sh`. Shown here: the cloud carries one set of watches for a relay
//! and its followers; a follower moves from the first relay to the second, then to the cloud,
//! and back as they return, and its client's watch sees every change exactly once; a relay
//! restart (a new resourceVersion epoch) is absorbed without an event; kube-proxy's event POST
//! reaches the cloud through follower and relay with kube-proxy's own token; a relay may itself
//! follow a relay. Skips (printing why) without openssl.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::autonomy::metrics;
use common::generations::{assert_every_change_once, converged, node_watch};
use common::procs::TempDir;
use common::{find_in_path, free_port, request, wait_for, wait_for_long, Sim, Watch, Wrapper};
use serde_json::{json, Value};

const NODES: [&str; 4] = ["edge-a1", "edge-a2", "edge-b1", "edge-c1"];

/// A site PKI from `deploy/relay/make-certs.sh` (relay certificate for 127.0.0.1).
struct SitePki {
    dir: TempDir,
}

impl SitePki {
    fn make() -> Option<SitePki> {
        if find_in_path("openssl").is_none() {
            println!("skipping: openssl not found on PATH");
            return None;
        }
        let dir = TempDir::new("relay-site");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/relay/make-certs.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg(dir.file("pki"))
            .args(["test-site", "127.0.0.1"])
            .output()
            .expect("run make-certs.sh");
        assert!(
            out.status.success(),
            "make-certs.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(SitePki { dir })
    }

    fn file(&self, name: &str) -> String {
        self.dir.file(&format!("pki/{name}"))
    }

    /// The relay flags for `port`.
    fn relay_flags(&self, port: u16) -> Vec<String> {
        vec![
            format!("--relay-bind-address=127.0.0.1:{port}"),
            format!("--relay-cert-file={}", self.file("relay.crt")),
            format!("--relay-key-file={}", self.file("relay.key")),
            format!("--relay-client-ca-file={}", self.file("site-ca.crt")),
        ]
    }

    /// The follower flags for relays on `ports`, in order.
    fn follower_flags(&self, ports: &[u16]) -> Vec<String> {
        let kc = self.dir.file(&format!("relay-{}.kubeconfig", ports[0]));
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: relays\n\
             contexts:\n- name: relays\n  context:\n    cluster: relays\n    user: follower\n\
             clusters:\n- name: relays\n  cluster:\n    server: https://127.0.0.1:{}\n    \
             certificate-authority: {}\n\
             users:\n- name: follower\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            ports[0],
            self.file("site-ca.crt"),
            self.file("follower.crt"),
            self.file("follower.key"),
        );
        std::fs::write(&kc, text).expect("write the relay kubeconfig");
        let servers: Vec<String> = ports
            .iter()
            .map(|p| format!("https://127.0.0.1:{p}"))
            .collect();
        vec![
            format!("--relay-kubeconfig={kc}"),
            format!("--relay-servers={}", servers.join(",")),
        ]
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A relay as node `edge-a1` in front of `upstream`, serving on `port`, with `extra` flags.
fn relay(pki: &SitePki, upstream: &str, port: u16, extra: &[String]) -> Wrapper {
    let mut flags = pki.relay_flags(port);
    flags.extend_from_slice(extra);
    Wrapper::start(upstream, "edge-a1", &strs(&flags))
}

/// A follower as node `host` reading the relays on `ports`, the cloud `sim` last.
fn follower(pki: &SitePki, sim: &Sim, host: &str, ports: &[u16]) -> Wrapper {
    Wrapper::start(&sim.url, host, &strs(&pki.follower_flags(ports)))
}

/// The server each reflector of `w` reads from now (the `server` label of
/// `grid_wrapper_upstream_reflector_server_index`).
fn reflector_servers(w: &Wrapper) -> Vec<String> {
    metrics(w)
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_upstream_reflector_server_index{"))
        .filter_map(|l| Some(l.split("server=\"").nth(1)?.split('"').next()?.to_string()))
        .collect()
}

/// Whether every reflector of `w` reads from `server`.
fn all_on(w: &Wrapper, server: &str) -> bool {
    let servers = reflector_servers(w);
    servers.len() >= 4 && servers.iter().all(|s| s == server)
}

/// `n` node relabels at the cloud (label `gen`), appended to `done`.
fn churn(sim: &Sim, n: usize, done: &mut Vec<(String, String)>) {
    for _ in 0..n {
        let g = done.len() + 1;
        let node = NODES[g % NODES.len()];
        sim.label_node(node, json!({"gen": g.to_string()}));
        done.push((node.to_string(), g.to_string()));
        std::thread::sleep(Duration::from_millis(40));
    }
}

/// The watches open on the simulator now.
fn cloud_watches(sim: &Sim) -> u64 {
    sim.state()["openWatches"].as_u64().unwrap_or(0)
}

#[test]
fn the_cloud_carries_one_set_of_watches_for_a_relay_and_its_followers() {
    let Some(pki) = SitePki::make() else { return };
    let sim = Sim::start(&[]);
    // What one node alone opens on the cloud.
    let alone = Wrapper::start(&sim.url, "edge-c1", &[]);
    wait_for("one node's watches", || cloud_watches(&sim) >= 4);
    std::thread::sleep(Duration::from_millis(500));
    let one_node = cloud_watches(&sim);
    drop(alone);
    wait_for("the lone node's watches to close", || {
        cloud_watches(&sim) == 0
    });

    let port = free_port();
    let r = relay(&pki, &sim.url, port, &[]);
    let followers: Vec<Wrapper> = ["edge-a2", "edge-b1", "edge-c1"]
        .iter()
        .map(|h| follower(&pki, &sim, h, &[port]))
        .collect();
    for f in &followers {
        wait_for("every follower on the relay", || {
            all_on(f, &format!("https://127.0.0.1:{port}"))
        });
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        cloud_watches(&sim),
        one_node,
        "the relay's watches only, whatever the number of followers"
    );
    // Every follower's watches are on the relay.
    let (_, _, m) = request(r.health, "GET", "/metrics", &[], b"");
    let on_relay: u64 = String::from_utf8_lossy(&m)
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_relay_open_watches{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(on_relay, 3 * one_node, "{}", String::from_utf8_lossy(&m));
    // And they follow the cloud's changes through it.
    let mut done = Vec::new();
    churn(&sim, 4, &mut done);
    for (f, host) in followers.iter().zip(["edge-a2", "edge-b1", "edge-c1"]) {
        wait_for("the follower to follow", || converged(f, host, &done));
    }
}

#[test]
fn a_follower_moves_relay_to_relay_to_the_cloud_and_back_seeing_every_change_once() {
    let Some(pki) = SitePki::make() else { return };
    let sim = Sim::start(&["--bookmark-interval", "1"]);
    let (p1, p2) = (free_port(), free_port());
    let (u1, u2) = (
        format!("https://127.0.0.1:{p1}"),
        format!("https://127.0.0.1:{p2}"),
    );
    let r1 = relay(&pki, &sim.url, p1, &[]);
    let r2 = relay(&pki, &sim.url, p2, &[]);
    let f = follower(&pki, &sim, "edge-b1", &[p1, p2]);
    wait_for("every reflector on the first relay", || all_on(&f, &u1));
    let mut watch = node_watch(&f, "edge-b1", 600);
    let mut done = Vec::new();
    churn(&sim, 4, &mut done);
    wait_for("the follower to follow relay 1", || {
        converged(&f, "edge-b1", &done)
    });

    drop(r1);
    wait_for("every reflector on relay 2", || all_on(&f, &u2));
    churn(&sim, 4, &mut done);
    wait_for("the follower to follow relay 2", || {
        converged(&f, "edge-b1", &done)
    });

    drop(r2);
    wait_for("every reflector on the cloud", || all_on(&f, &sim.url));
    churn(&sim, 4, &mut done);
    wait_for("the follower to follow the cloud", || {
        converged(&f, "edge-b1", &done)
    });

    // Relay 2 returns, then relay 1: the follower goes back to each, in preference order.
    let r2 = relay(&pki, &sim.url, p2, &[]);
    wait_for_long("back on relay 2", Duration::from_secs(30), || {
        all_on(&f, &u2)
    });
    churn(&sim, 4, &mut done);
    wait_for("the follower to follow relay 2 again", || {
        converged(&f, "edge-b1", &done)
    });
    // Relay 2's watches send nothing while nothing changes (a BOOKMARK a minute): a reflector
    // leaves a server that is no longer preferred at its stream's next data. Changes move the
    // node reflector at once.
    let _r1 = relay(&pki, &sim.url, p1, &[]);
    wait_for_long("nodes back on relay 1", Duration::from_secs(30), || {
        churn(&sim, 1, &mut done);
        reflector_on(&f, "nodes", &u1)
    });
    churn(&sim, 4, &mut done);
    wait_for("the follower to follow relay 1 again", || {
        converged(&f, "edge-b1", &done)
    });
    assert_every_change_once(&mut watch, "edge-b1", &done);
    // The idle reflectors follow within the bookmark interval.
    wait_for_long(
        "every reflector back on relay 1",
        Duration::from_secs(75),
        || all_on(&f, &u1),
    );
    drop(r2);
    assert!(
        watch.next(Duration::from_millis(500)).is_none(),
        "no extra event"
    );
}

/// Whether the reflector of `resource` (its metric label) reads from `server`.
fn reflector_on(w: &Wrapper, resource: &str, server: &str) -> bool {
    metrics(w).lines().any(|l| {
        l.starts_with("grid_wrapper_upstream_reflector_server_index{")
            && l.contains(&format!("resource=\"{resource}\""))
            && l.contains(&format!("server=\"{server}\""))
    })
}

#[test]
fn a_relay_restart_is_absorbed_without_spurious_events() {
    let Some(pki) = SitePki::make() else { return };
    let sim = Sim::start(&["--bookmark-interval", "1"]);
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let r = relay(&pki, &sim.url, port, &[]);
    let f = follower(&pki, &sim, "edge-b1", &[port]);
    wait_for("every reflector on the relay", || all_on(&f, &url));
    let mut nodes = node_watch(&f, "edge-b1", 600);
    let slices = f.get_json("/apis/discovery.k8s.io/v1/endpointslices");
    let mut slice_watch = Watch::open(
        f.addr,
        &format!(
            "/apis/discovery.k8s.io/v1/endpointslices?watch=true&timeoutSeconds=600&resourceVersion={}",
            common::rv(&slices)
        ),
        &[],
    );
    // The relay restarts (a new process: a new resourceVersion epoch); the cloud is unchanged.
    let relay_rv = |w: &Wrapper| common::rv(&w.get_json(common::OWN_NODE));
    let before = relay_rv(&r);
    drop(r);
    let r = relay(&pki, &sim.url, port, &[]);
    assert_ne!(relay_rv(&r) >> 40, before >> 40, "a new epoch");
    wait_for_long(
        "the follower back on the relay",
        Duration::from_secs(30),
        || all_on(&f, &url),
    );
    // The follower relisted from the new relay (it was answered 410 or moved), and its
    // clients saw nothing: nothing changed.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        slice_watch.next(Duration::from_millis(500)).is_none(),
        "no spurious slice event"
    );
    // A real change after it arrives exactly once.
    let mut done = Vec::new();
    churn(&sim, 3, &mut done);
    wait_for("the follower to follow the restarted relay", || {
        converged(&f, "edge-b1", &done)
    });
    assert_every_change_once(&mut nodes, "edge-b1", &done);
    drop(r);
}

#[test]
fn event_posts_from_a_follower_reach_the_cloud_with_kube_proxys_own_token() {
    let Some(pki) = SitePki::make() else { return };
    let sim = Sim::start(&[]);
    let port = free_port();
    let _r = relay(&pki, &sim.url, port, &[]);
    let f = follower(&pki, &sim, "edge-b1", &[port]);
    wait_for("every reflector on the relay", || {
        all_on(&f, &format!("https://127.0.0.1:{port}"))
    });
    let body = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "kp-1"}});
    let (code, _, resp) = request(
        f.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer kube-proxy-token"),
        ],
        &serde_json::to_vec(&body).unwrap(),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&resp));
    let posted: Vec<Value> = sim
        .requests()
        .into_iter()
        .filter(|q| q["method"] == "POST" && q["path"] == "/api/v1/namespaces/default/events")
        .collect();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0]["authorization"], "Bearer kube-proxy-token");
}

#[test]
fn a_relay_may_follow_a_relay() {
    let Some(pki) = SitePki::make() else { return };
    let sim = Sim::start(&[]);
    let (p1, p2) = (free_port(), free_port());
    let _upper = relay(&pki, &sim.url, p1, &[]);
    // The lower relay reads the upper one, and serves on its own port.
    let lower = relay(&pki, &sim.url, p2, &pki.follower_flags(&[p1]));
    wait_for("the lower relay on the upper one", || {
        all_on(&lower, &format!("https://127.0.0.1:{p1}"))
    });
    let f = follower(&pki, &sim, "edge-b1", &[p2]);
    wait_for("the follower on the lower relay", || {
        all_on(&f, &format!("https://127.0.0.1:{p2}"))
    });
    // Its own node's view (zone b only), as the cloud would give it.
    let direct = Wrapper::start(&sim.url, "edge-b1", &[]);
    let path = "/api/v1/namespaces/default/endpoints/web";
    let strip = |mut v: Value| {
        v["metadata"]["resourceVersion"] = Value::Null;
        v
    };
    assert_eq!(strip(f.get_json(path)), strip(direct.get_json(path)));
    let mut done = Vec::new();
    churn(&sim, 3, &mut done);
    wait_for("the follower to follow two relays down", || {
        converged(&f, "edge-b1", &done)
    });
}
