//! Issue 27, point 2 — following a site relay, against the real binaries on 127.0.0.1. The
//! relay's serving side is stood in for by a simulator over TLS that demands a client
//! certificate from the test CA and its own bearer token (`--relay-kubeconfig`); the cloud is a
//! second simulator with another token (`--kubeconfig`). Both hold the same objects, every
//! change is applied to both, but their resourceVersions differ (the relay's are ahead), as
//! two RV spaces do. The follower reads from the relay only; the relay goes down: it moves to
//! the cloud (relisting from scratch, never resuming at the relay's RV); the relay comes back:
//! it moves back. A client watch on the follower sees every change exactly once and no
//! DELETED/ADDED of unchanged objects; /metrics says which server each reflector reads from.
//! `grid-wrapper check` checks each relay by URL. Issue 43: the fail-back moves every reflector
//! within two probes and a tick of the relay answering again, however quiet the cloud's watches.

use crate::common;

use std::time::{Duration, Instant};

use common::autonomy::metrics;
use common::generations::{assert_every_change_once, converged, node_watch};
use common::pki::Pki;
use common::{wait_for, wait_for_long, LogSink, Sim, Wrapper};
use serde_json::{json, Value};

const NODES: [&str; 4] = ["edge-a1", "edge-a2", "edge-b1", "edge-c1"];
const RELAY_TOKEN: &str = "relay-token";
const CLOUD_TOKEN: &str = "cloud-token";
/// How long the relay refuses connections.
const OUTAGE_SECS: u64 = 15;

/// A control request to the TLS relay simulator (with the client certificate).
fn relay_control(pki: &Pki, relay: &Sim, method: &str, op: &str, body: &Value) -> Value {
    let agent = pki.agent();
    let url = format!("{}/sim/{op}", relay.url);
    let mut resp = if method == "GET" {
        agent.get(&url).call()
    } else {
        agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(serde_json::to_vec(body).unwrap().as_slice())
    }
    .expect("relay sim control over TLS");
    assert!(resp.status().as_u16() < 300, "relay sim {op}");
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The served log (lists and watches) of the cloud simulator.
fn cloud_served(cloud: &Sim) -> Vec<Value> {
    cloud
        .get_json("/sim/served")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The `reflector_server_index` lines of /metrics: (resource, role).
fn reflector_roles(w: &Wrapper) -> Vec<(String, String)> {
    metrics(w)
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_upstream_reflector_server_index{"))
        .map(|l| {
            let field = |k: &str| {
                l.split(&format!("{k}=\""))
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("")
                    .to_string()
            };
            (field("resource"), field("role"))
        })
        .collect()
}

fn all_on(w: &Wrapper, role: &str) -> bool {
    let roles = reflector_roles(w);
    roles.len() >= 4 && roles.iter().all(|(_, r)| r == role)
}

/// `n` node changes applied to both simulators (label `gen`), appended to `done`.
fn churn(pki: &Pki, relay: &Sim, cloud: &Sim, n: usize, done: &mut Vec<(String, String)>) {
    for _ in 0..n {
        let g = done.len() + 1;
        let node = NODES[g % NODES.len()];
        let labels = json!({"name": node, "labels": {"gen": g.to_string()}});
        cloud.control("label-node", &labels);
        if relay_is_up(relay) {
            relay_control(pki, relay, "POST", "label-node", &labels);
        }
        done.push((node.to_string(), g.to_string()));
        std::thread::sleep(Duration::from_millis(40));
    }
}

/// Whether the relay simulator accepts connections (it refuses them during the outage).
fn relay_is_up(relay: &Sim) -> bool {
    std::net::TcpStream::connect_timeout(&relay.addr, Duration::from_millis(200)).is_ok()
}

/// A follower of `relay` (TLS, the relay token and client certificate) whose cloud is `cloud`
/// (its own token), on node edge-a1, with every reflector on the relay.
fn follower(pki: &Pki, relay: &Sim, cloud: &Sim) -> (Wrapper, LogSink) {
    let cluster = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    let creds = format!(
        "    token: {RELAY_TOKEN}\n    client-certificate: client.crt\n    client-key: client.key\n"
    );
    let relay_kc = pki.kubeconfig("relay.kubeconfig", &relay.url, &cluster, &creds);
    let cloud_kc = pki.kubeconfig(
        "cloud.kubeconfig",
        &cloud.url,
        "",
        &format!("    token: {CLOUD_TOKEN}\n"),
    );
    let (w, log) = Wrapper::start_captured(&[
        "--kubeconfig",
        &cloud_kc,
        "--relay-kubeconfig",
        &relay_kc,
        &format!("--relay-servers={}", relay.url),
        "--hostname=edge-a1",
    ]);
    wait_for("the follower to be ready", || w.readyz() == Some(200));
    wait_for("every reflector on the relay", || all_on(&w, "relay"));
    (w, log)
}

#[test]
fn a_follower_reads_the_relay_fails_over_to_the_cloud_and_back_with_every_change_once() {
    let Some(pki) = Pki::generate() else { return };
    let relay = pki.sim(Some(RELAY_TOKEN));
    let cloud = Sim::start(&["--token", CLOUD_TOKEN, "--bookmark-interval", "1"]);
    // The relay's resourceVersions run ahead of the cloud's (a label added and removed: the
    // objects stay the same).
    for i in 0..30 {
        for v in [json!(i.to_string()), Value::Null] {
            let body = json!({"name": "edge-c1", "labels": {"pad": v}});
            relay_control(&pki, &relay, "POST", "label-node", &body);
        }
    }
    let (w, log) = follower(&pki, &relay, &cloud);
    let m = metrics(&w);
    let relay_server = format!(
        "grid_wrapper_upstream_current_server_info{{server=\"{}\",index=\"0\",role=\"relay\"}} 1",
        relay.url
    );
    assert!(m.contains(&relay_server), "{m}");
    // The cloud served no list and no watch.
    assert_eq!(cloud_served(&cloud), Vec::<Value>::new());

    // A client watch on the follower, open through everything that follows.
    let mut watch = node_watch(&w, "edge-a1", 180);
    let mut done = Vec::new();
    churn(&pki, &relay, &cloud, 6, &mut done);
    wait_for("the follower to follow the relay", || {
        converged(&w, "edge-a1", &done)
    });

    // The relay dies: every reflector moves to the cloud, relisting from scratch.
    relay_control(
        &pki,
        &relay,
        "POST",
        "refuse",
        &json!({"seconds": OUTAGE_SECS}),
    );
    wait_for("every reflector on the cloud", || all_on(&w, "cloud"));
    log.wait_for_text("relisting from scratch", Duration::from_secs(10));
    log.wait_for_text(
        &format!(
            "was issued by relay {}, now reading from cloud {}",
            relay.url, cloud.url
        ),
        Duration::from_secs(10),
    );
    assert!(!cloud_served(&cloud).is_empty(), "the cloud is read now");
    churn(&pki, &relay, &cloud, 6, &mut done);
    wait_for("the follower to follow the cloud", || {
        converged(&w, "edge-a1", &done)
    });

    // The relay returns (with the changes made meanwhile): back to it.
    relay.wait_accepting();
    for (node, g) in done.iter().skip(6) {
        let body = json!({"name": node, "labels": {"gen": g}});
        relay_control(&pki, &relay, "POST", "label-node", &body);
    }
    wait_for_long(
        "every reflector back on the relay",
        Duration::from_secs(30),
        || all_on(&w, "relay"),
    );
    log.wait_for_text("upstream failback:", Duration::from_secs(10));
    cloud.control("requests/clear", &Value::Null);
    churn(&pki, &relay, &cloud, 6, &mut done);
    wait_for("the follower to follow the relay again", || {
        converged(&w, "edge-a1", &done)
    });
    assert_eq!(
        cloud_served(&cloud),
        Vec::<Value>::new(),
        "nothing read from the cloud once back on the relay"
    );

    // Every change exactly once, as MODIFIED, and nothing else (no DELETED/ADDED of the
    // unchanged objects at the switches).
    assert_every_change_once(&mut watch, "edge-a1", &done);
    // No credential went to the wrong side: both simulators require their own token (the
    // relay also the client certificate), and nothing was refused.
    let m = metrics(&w);
    assert!(!m.contains("code=\"401\""), "{m}");
    assert!(!m.contains("code=\"403\""), "{m}");
}

/// How long every reflector may take to be back on a relay that answers again: its two
/// passing probes, 2 s apart (docs/SEMANTICS.md §8.1), a watch read's tick, and the relist from
/// scratch, with room for a loaded machine; far below the minute a quiet cloud watch takes to
/// bring its next data (this cloud sends no bookmark at all: a watch on it is silent until its
/// 120 s progress deadline).
const FAILBACK_BOUND: Duration = Duration::from_secs(15);

/// Issue 43: the reflectors' watches on the cloud block in reads; once the relay passes its
/// probes, every one of them moves back within [`FAILBACK_BOUND`], not at its next bookmark.
#[test]
fn a_failback_to_the_relay_moves_every_reflector_within_two_probes_and_a_tick() {
    let Some(pki) = Pki::generate() else { return };
    let relay = pki.sim(Some(RELAY_TOKEN));
    let cloud = Sim::start(&["--token", CLOUD_TOKEN, "--bookmark-interval", "0"]);
    let (w, log) = follower(&pki, &relay, &cloud);
    relay_control(&pki, &relay, "POST", "refuse", &json!({"seconds": 6}));
    wait_for("every reflector on the cloud", || all_on(&w, "cloud"));
    relay.wait_accepting();
    let back = Instant::now();
    while !all_on(&w, "relay") {
        assert!(
            back.elapsed() < FAILBACK_BOUND,
            "not every reflector back on the relay {FAILBACK_BOUND:?} after it answered again: {:?}\n{}",
            reflector_roles(&w),
            log.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "every reflector back on the relay {:?} after it answered again",
        back.elapsed()
    );
    log.wait_for_text("upstream failback:", Duration::from_secs(10));
}

/// `grid-wrapper check` with relays: each relay is checked alone with the relay kubeconfig's
/// credentials and reported by URL; a relay that is down, or that refuses the handshake for want
/// of a client certificate, is a problem naming it.
#[test]
fn check_reports_each_relay_by_url() {
    let Some(pki) = Pki::generate() else { return };
    let relay = pki.sim(Some(RELAY_TOKEN));
    let cloud = Sim::start(&["--token", CLOUD_TOKEN]);
    let cluster = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    let good = pki.kubeconfig(
        "relay.kubeconfig",
        &relay.url,
        &cluster,
        &format!(
            "    token: {RELAY_TOKEN}\n    client-certificate: client.crt\n    client-key: client.key\n"
        ),
    );
    let no_cert = pki.kubeconfig(
        "relay-no-cert.kubeconfig",
        &relay.url,
        &cluster,
        &format!("    token: {RELAY_TOKEN}\n"),
    );
    let cloud_kc = pki.kubeconfig(
        "cloud.kubeconfig",
        &cloud.url,
        "",
        &format!("    token: {CLOUD_TOKEN}\n"),
    );
    let down = format!("https://127.0.0.1:{}", common::free_port());
    let run = |relay_kc: &str, servers: &str| {
        let out = common::run_bounded(
            std::process::Command::new(env!("CARGO_BIN_EXE_grid-wrapper")).args([
                "check",
                "--kubeconfig",
                &cloud_kc,
                "--relay-kubeconfig",
                relay_kc,
                &format!("--relay-servers={servers}"),
                "--hostname=edge-a1",
            ]),
            Duration::from_secs(60),
        )
        .expect("check finished in time");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run(&good, &relay.url);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "relay {}: reachable, version v1.28.0-sim, list + watch ok",
            relay.url
        )),
        "{out}"
    );
    let (code, out) = run(&good, &format!("{},{down}", relay.url));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("relay {down}: NOT reachable")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "problem: connectivity: relay {down}: GET {down}/version"
        )),
        "{out}"
    );
    let (code, out) = run(&no_cert, &relay.url);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("problem: tls: relay {}: GET", relay.url)),
        "{out}"
    );
}
