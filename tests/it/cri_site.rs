//! Issue 45, point 4: the site's runtime views through the relay (docs/SEMANTICS.md §13.1), with
//! the real binaries: the simulator as the cloud, a relay (grid-wrapper `edge-a1` with
//! `--relay-bind-address`) and a follower (grid-wrapper `edge-a2` with `--relay-kubeconfig`),
//! each with its own real grpc-go CRI server. The follower's pod moves: the relay serves its
//! own kube-proxy (and its followers) the new address; the relay's pod moves: the follower
//! serves it. A report is taken only from one of the Node's addresses (here 127.0.0.1, which the
//! test gives Node `edge-a2`), never for another node, and a node whose reports stop is served
//! as the upstream says once its report's time is up. Skips without openssl or the CRI server.

use crate::common;

use std::time::Duration;

use common::cri::{Fake, Sb};
use common::pki::Pki;
use common::{heavy, wait_for_long, Sim, Wrapper};
use serde_json::{json, Value};

/// The demo's web pods on edge-a1 (the relay's node) and edge-a2 (the follower's), both zone a.
const POD_A1: &str = "web-5d8f7-a1x2q";
const POD_A2: &str = "web-5d8f7-b7k4m";
const OLD_A1: &str = "10.244.1.10";
const OLD_A2: &str = "10.244.2.10";
const NEW_A1: &str = "10.244.1.99";
const NEW_A2: &str = "10.244.2.99";
const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
const ENDPOINTS: &str = "/api/v1/namespaces/default/endpoints/web";
const REPORT: &str = "/grid-wrapper/v1/runtime-pods/";

fn pod(name: &'static str, attempt: u32, ip: &'static [&'static str]) -> Sb<'static> {
    Sb {
        id: if attempt == 0 { "sb-0" } else { "sb-1" },
        name,
        attempt,
        ready: true,
        ips: ip,
    }
}

fn runtime_flags(fake: &Fake) -> Vec<String> {
    vec![
        format!("--container-runtime-endpoint={}", fake.endpoint),
        "--container-runtime-poll-interval=1".into(),
    ]
}

/// The first address of pod `pod`'s endpoint in the served slice `web-abc12`, and its `ip` in
/// the served Endpoints `web`, as `w`'s kube-proxy port serves them.
fn served(w: &Wrapper, pod: &str) -> (Value, Value) {
    let slices = w.get_json(SLICES);
    let slice = slices["items"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["metadata"]["name"] == "web-abc12"))
        .and_then(|s| s["endpoints"].as_array())
        .and_then(|eps| eps.iter().find(|e| e["targetRef"]["name"] == pod))
        .map(|e| e["addresses"][0].clone())
        .unwrap_or(Value::Null);
    let eps = w.get_json(ENDPOINTS);
    let ip = eps["subsets"][0]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["targetRef"]["name"] == pod))
        .map(|x| x["ip"].clone())
        .unwrap_or(Value::Null);
    (slice, ip)
}

/// Gives Node `name` in the simulator `addresses` (InternalIP) as its only addresses.
fn set_node_addresses(sim: &Sim, name: &str, addresses: &[&str]) {
    let mut node = sim.get_json(&format!("/api/v1/nodes/{name}"));
    node["status"]["addresses"] = addresses
        .iter()
        .map(|a| json!({"type": "InternalIP", "address": a}))
        .collect();
    if let Some(m) = node["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    sim.control("apply", &node);
}

struct Site {
    _pki: Pki,
    sim: Sim,
    fake_a1: Fake,
    fake_a2: Fake,
    relay: Wrapper,
    relay_url: String,
    follower: Option<Wrapper>,
    pki_agent: ureq::Agent,
}

/// The cloud, a relay for edge-a1 and a follower for edge-a2 with their runtimes (both pods on
/// their upstream addresses); edge-a2's Node names `edge_a2_addresses`.
fn site(tag: &str, edge_a2_addresses: &[&str]) -> Option<Site> {
    let fake_a1 = Fake::start(&format!("{tag}-a1"), &[pod(POD_A1, 0, &[OLD_A1])])?;
    let fake_a2 = Fake::start(&format!("{tag}-a2"), &[pod(POD_A2, 0, &[OLD_A2])])?;
    let pki = Pki::generate()?;
    let sim = Sim::start(&[]);
    set_node_addresses(&sim, "edge-a2", edge_a2_addresses);
    let kc = pki.kubeconfig("relay.kubeconfig", &sim.url, "", "    token: t\n");
    let mut flags = vec![
        format!("--kubeconfig={kc}"),
        "--relay-bind-address=127.0.0.1:0".to_string(),
        format!("--relay-cert-file={}", pki.path("server.crt")),
        format!("--relay-key-file={}", pki.path("server.key")),
        format!("--relay-client-ca-file={}", pki.path("ca.crt")),
    ];
    flags.extend(runtime_flags(&fake_a1));
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    let relay = Wrapper::start(&sim.url, "edge-a1", &refs);
    let relay_url = format!("https://{}", relay.relay_addr());
    let cluster = format!("    certificate-authority-data: {}\n", pki.b64("ca.crt"));
    let creds = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        pki.b64("client.crt"),
        pki.b64("client.key")
    );
    let fkc = pki.kubeconfig("follower.kubeconfig", &relay_url, &cluster, &creds);
    let mut flags = vec![format!("--relay-kubeconfig={fkc}")];
    flags.extend(runtime_flags(&fake_a2));
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    let follower = Wrapper::start(&sim.url, "edge-a2", &refs);
    let pki_agent = pki.agent();
    Some(Site {
        _pki: pki,
        sim,
        fake_a1,
        fake_a2,
        relay,
        relay_url,
        follower: Some(follower),
        pki_agent,
    })
}

impl Site {
    fn follower(&self) -> &Wrapper {
        self.follower.as_ref().expect("the follower runs")
    }
}

/// A report `body` PUT on the relay port with the follower's client certificate, from
/// 127.0.0.1: (status, body).
fn put_report(s: &Site, node: &str, body: &Value) -> (u16, String) {
    let url = format!("{}{REPORT}{node}", s.relay_url);
    let bytes = serde_json::to_vec(body).unwrap();
    match s
        .pki_agent
        .put(&url)
        .header("Content-Type", "application/json")
        .send(bytes.as_slice())
    {
        Ok(mut resp) => (
            resp.status().as_u16(),
            resp.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(e) => (0, e.to_string()),
    }
}

fn report_of(node: &str, pod: &str, ip: &str, valid_for: u64) -> Value {
    json!({"kind": "RuntimePods", "apiVersion": "grid-wrapper/v1", "node": node,
           "validForSeconds": valid_for,
           "ready": [{"namespace": "default", "name": pod, "uid": "u", "ips": [ip]}]})
}

#[test]
fn a_pod_that_moves_on_a_follower_is_served_on_its_new_address_by_the_relay_and_back() {
    let _g = heavy();
    let Some(s) = site("site-move", &["127.0.0.1"]) else {
        return;
    };
    assert_eq!(served(&s.relay, POD_A2), (json!(OLD_A2), json!(OLD_A2)));
    // The follower's pod comes back in a new sandbox on a new address.
    s.fake_a2
        .set(&[pod(POD_A2, 0, &[OLD_A2]), pod(POD_A2, 1, &[NEW_A2])]);
    wait_for_long(
        "the relay's kube-proxy port serving edge-a2's pod on its new address",
        Duration::from_secs(30),
        || served(&s.relay, POD_A2) == (json!(NEW_A2), json!(NEW_A2)),
    );
    // The follower serves its own pod repaired too, and the relay's pod as it is.
    assert_eq!(served(s.follower(), POD_A2), (json!(NEW_A2), json!(NEW_A2)));
    assert_eq!(served(s.follower(), POD_A1), (json!(OLD_A1), json!(OLD_A1)));
    // The relay's pod moves: the follower learns it from the relay's answer.
    s.fake_a1
        .set(&[pod(POD_A1, 0, &[OLD_A1]), pod(POD_A1, 1, &[NEW_A1])]);
    wait_for_long(
        "the follower serving edge-a1's pod on its new address",
        Duration::from_secs(30),
        || served(s.follower(), POD_A1) == (json!(NEW_A1), json!(NEW_A1)),
    );
    assert_eq!(served(&s.relay, POD_A1), (json!(NEW_A1), json!(NEW_A1)));
    // /metrics: each node holds the other's view; the relay counts the reports it took.
    let metric = |w: &Wrapper, m: &str| common::autonomy::metric(w, m).unwrap_or(-1.0);
    assert_eq!(metric(&s.relay, "grid_wrapper_runtime_site_views"), 1.0);
    assert_eq!(metric(s.follower(), "grid_wrapper_runtime_site_views"), 1.0);
    assert!(
        metric(
            &s.relay,
            "grid_wrapper_runtime_reports_total{outcome=\"taken\"}"
        ) >= 1.0
    );
    assert_eq!(
        metric(
            &s.relay,
            "grid_wrapper_runtime_reports_total{outcome=\"refused\"}"
        ),
        0.0
    );
    assert!(metric(&s.relay, "grid_wrapper_runtime_repairs") >= 4.0);
    assert!(
        s.relay
            .log
            .text()
            .contains("runtime report from node edge-a2"),
        "the relay logs the first report of a node"
    );
    drop(s.sim);
}

#[test]
fn a_report_is_taken_only_from_the_nodes_own_address_and_only_for_its_pods() {
    let _g = heavy();
    // edge-a2's Node does not name 127.0.0.1: the follower's reports are refused.
    let Some(s) = site("site-refused", &["192.168.1.12"]) else {
        return;
    };
    s.fake_a2
        .set(&[pod(POD_A2, 0, &[OLD_A2]), pod(POD_A2, 1, &[NEW_A2])]);
    let why = s
        .follower()
        .log
        .wait_for_text("runtime report to relay", Duration::from_secs(20));
    assert!(
        why.contains("192.168.1.12") && why.contains("127.0.0.1"),
        "the follower's WARN says why: {why}"
    );
    // Its own kube-proxy port is repaired from its own runtime; the relay's is not.
    wait_for_long("the follower's own repair", Duration::from_secs(30), || {
        served(s.follower(), POD_A2) == (json!(NEW_A2), json!(NEW_A2))
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(served(&s.relay, POD_A2), (json!(OLD_A2), json!(OLD_A2)));
    // A report for another node (edge-b1, 192.168.2.11) from here: 403, nothing changes.
    let refused = common::autonomy::metric(
        &s.relay,
        "grid_wrapper_runtime_reports_total{outcome=\"refused\"}",
    );
    assert!(refused.unwrap_or(0.0) >= 1.0, "refused: {refused:?}");
    let (code, body) = put_report(
        &s,
        "edge-b1",
        &report_of("edge-b1", "web-5d8f7-c9p3s", "10.9.9.9", 60),
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("not one of the Node's addresses"), "{body}");
    // A report whose body names another node than its path: 400.
    let (code, _) = put_report(&s, "edge-a2", &report_of("edge-b1", "x", "10.9.9.9", 60));
    assert_eq!(code, 400);
    // Another method on the report path: 405; another path of grid-wrapper's own: 404.
    let url = format!("{}{REPORT}edge-a2", s.relay_url);
    let code = match s.pki_agent.get(&url).call() {
        Ok(r) => r.status().as_u16(),
        Err(e) => panic!("GET {url}: {e}"),
    };
    assert_eq!(code, 405);
}

#[test]
fn a_nodes_view_is_dropped_when_its_reports_stop() {
    let _g = heavy();
    let Some(mut s) = site("site-expire", &["127.0.0.1"]) else {
        return;
    };
    // Stop the follower: its reports stop. A report made here instead, valid 10 s (the least).
    drop(s.follower.take());
    let (code, body) = put_report(&s, "edge-a2", &report_of("edge-a2", POD_A2, NEW_A2, 10));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("RuntimePodsList"), "{body}");
    wait_for_long("the report served", Duration::from_secs(30), || {
        served(&s.relay, POD_A2) == (json!(NEW_A2), json!(NEW_A2))
    });
    // Nothing more: within 10 s and the writer's 5 s tick, the upstream's address again.
    let t = std::time::Instant::now();
    wait_for_long(
        "the expired report dropped",
        Duration::from_secs(30),
        || served(&s.relay, POD_A2) == (json!(OLD_A2), json!(OLD_A2)),
    );
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(5),
        "dropped after {took:?}, before its time"
    );
    assert!(s
        .relay
        .log
        .wait_for_text(
            "runtime view of node edge-a2 dropped",
            Duration::from_secs(5)
        )
        .contains("no report from it for 10 s"));
    drop((s.fake_a1, s.fake_a2));
}
