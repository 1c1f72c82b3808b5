//! The site relay's serving side (docs/SEMANTICS.md §12): a grid-wrapper with
//! `--relay-bind-address` in front of the simulator serves the upstream's objects unpruned on
//! its relay port, over TLS, to clients whose certificate chains to `--relay-client-ca-file`
//! only, while its kube-proxy port serves its own node's pruned view; a follower grid-wrapper
//! whose upstream is the relay serves its own node's pruned view and follows upstream changes.
//! Also: the relay's own probes, discovery and 404s, proxying with the caller's credentials only,
//! the client CA's reload, the relay view restored from a snapshot, and the startup refusal
//! without a client CA. Skips (printing why) without openssl.

use crate::common;

use std::io::BufRead;

use common::pki::Pki;
use common::{free_port, wait_for, web_ips, Sim, Wrapper};
use serde_json::Value;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
const ENDPOINTS: &str = "/api/v1/namespaces/default/endpoints/web";
const EVENTS: &str = "/api/v1/namespaces/default/events";

/// A relay: grid-wrapper as node `edge-a1` in front of `sim`, its relay port on port 0,
/// with its own upstream credentials (`Bearer relay-token`), which no follower request may carry.
/// Its client CA is the file `relay-client-ca.crt`, a copy of the test CA.
pub(crate) struct Relay {
    pub(crate) w: Wrapper,
    url: String,
}

fn relay(pki: &Pki, sim: &Sim) -> Relay {
    relay_of(pki, &sim.url, &[])
}

/// [`relay`] in front of the upstream at `url`, with `extra` flags.
fn relay_of(pki: &Pki, url: &str, extra: &[String]) -> Relay {
    let kc = pki.kubeconfig("relay.kubeconfig", url, "", "    token: relay-token\n");
    // A copy, which a test may replace (reload).
    let ca = pki.path("relay-client-ca.crt");
    std::fs::copy(pki.path("ca.crt"), &ca).expect("copy the client CA");
    let mut flags = vec![
        format!("--kubeconfig={kc}"),
        "--relay-bind-address=127.0.0.1:0".to_string(),
        format!("--relay-cert-file={}", pki.path("server.crt")),
        format!("--relay-key-file={}", pki.path("server.key")),
        format!("--relay-client-ca-file={ca}"),
    ];
    flags.extend_from_slice(extra);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let w = Wrapper::start(url, "edge-a1", &flags);
    let url = format!("https://{}", w.relay_addr());
    Relay { w, url }
}

/// A test PKI, the simulator (demo fixture) and a relay in front of it; `None` without openssl.
pub(crate) fn started() -> Option<(Pki, Sim, Relay)> {
    let pki = Pki::generate()?;
    let sim = Sim::start(&[]);
    let r = relay(&pki, &sim);
    Some((pki, sim, r))
}

/// The event POSTs the simulator recorded.
fn posted_events(sim: &Sim) -> Vec<Value> {
    sim.requests()
        .into_iter()
        .filter(|q| q["method"] == "POST" && q["path"] == EVENTS)
        .collect()
}

/// The relay's `grid_wrapper_relay_open_watches` samples, summed over resources matching
/// `resource` (a substring of the label).
fn relay_watches(r: &Relay, resource: &str) -> u64 {
    let (_, _, metrics) = common::request(r.w.health, "GET", "/metrics", &[], b"");
    String::from_utf8_lossy(&metrics)
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_relay_open_watches{") && l.contains(resource))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A follower: grid-wrapper as node `edge-b1` reading the relay (`--relay-kubeconfig`: the
/// relay's CA and the follower's client certificate, which the relay port requires, on its
/// proxied requests too), then `sim`, ready.
pub(crate) fn follower(pki: &Pki, sim: &Sim, r: &Relay) -> Wrapper {
    let cluster = format!("    certificate-authority-data: {}\n", pki.b64("ca.crt"));
    let creds = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        pki.b64("client.crt"),
        pki.b64("client.key")
    );
    let kc = pki.kubeconfig("follower.kubeconfig", &r.url, &cluster, &creds);
    Wrapper::start(&sim.url, "edge-b1", &[&format!("--relay-kubeconfig={kc}")])
}

/// GET over TLS with `agent`: (status, body).
fn get(agent: &ureq::Agent, url: &str) -> (u16, Vec<u8>) {
    let mut resp = agent.get(url).call().expect("GET over TLS");
    let code = resp.status().as_u16();
    (code, resp.body_mut().read_to_vec().expect("body"))
}

fn get_json(agent: &ureq::Agent, url: &str) -> Value {
    let (code, body) = get(agent, url);
    assert_eq!(code, 200, "{url}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("JSON")
}

/// The first address of every endpoint of core/v1 Endpoints.
fn endpoint_ips(eps: &Value) -> Vec<String> {
    let mut ips: Vec<String> = eps["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["ip"].as_str().map(str::to_string))
        .collect();
    ips.sort();
    ips
}

#[test]
fn relay_port_serves_the_upstream_unpruned_and_the_kube_proxy_port_pruned() {
    let Some((pki, sim, r)) = started() else {
        return;
    };
    let agent = pki.agent();

    // EndpointSlices and Endpoints of the topology Service `web`: every zone on the relay port,
    // zone-a only (edge-a1's) on the kube-proxy port.
    let whole = get_json(&agent, &format!("{}{SLICES}", r.url));
    assert_eq!(
        web_ips(&whole).len(),
        4,
        "unpruned on the relay port: {whole}"
    );
    assert_eq!(
        web_ips(&r.w.get_json(SLICES)).len(),
        2,
        "pruned for edge-a1"
    );
    let eps = get_json(&agent, &format!("{}{ENDPOINTS}", r.url));
    assert_eq!(endpoint_ips(&eps).len(), 4, "unpruned Endpoints: {eps}");
    assert_eq!(endpoint_ips(&r.w.get_json(ENDPOINTS)).len(), 2);

    // The relay's own answers: probes and discovery naming the one slice version it serves.
    let (code, body) = get(&agent, &format!("{}/readyz", r.url));
    assert_eq!((code, body.as_slice()), (200, b"ok".as_slice()));
    let group = get_json(&agent, &format!("{}/apis/discovery.k8s.io", r.url));
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let (code, _) = get(
        &agent,
        &format!("{}/apis/discovery.k8s.io/v1beta1/endpointslices", r.url),
    );
    assert_eq!(code, 404, "the slice version the relay does not serve");

    // A watch on the relay port follows an upstream change of a slice: the zone-c endpoint
    // (pruned on the kube-proxy port anyway) goes away.
    let rv = whole["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let resp = agent
        .get(format!(
            "{}{SLICES}?watch=true&resourceVersion={rv}&timeoutSeconds=10",
            r.url
        ))
        .call()
        .expect("WATCH over TLS");
    assert_eq!(resp.status().as_u16(), 200);
    let mut lines = std::io::BufReader::new(resp.into_body().into_reader()).lines();
    let mut slice = sim.get_json(&format!("{SLICES}/web-abc12"));
    if let Some(eps) = slice["endpoints"].as_array_mut() {
        eps.retain(|e| e["nodeName"] != "edge-c1");
    }
    sim.apply(&slice);
    let event: Value =
        serde_json::from_str(&lines.next().expect("an event").expect("read")).expect("JSON");
    assert_eq!(event["type"], "MODIFIED", "{event}");
    assert_eq!(
        web_ips(&serde_json::json!({"items": [event["object"].clone()]})).len(),
        3,
        "{event}"
    );
    // The relay's own resourceVersion, not the upstream's.
    let relayed_rv: u64 = event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("an RV");
    assert!(
        relayed_rv > rv.parse::<u64>().unwrap_or(u64::MAX),
        "{event}"
    );

    // The followers' watch is counted apart in /metrics.
    assert_eq!(
        relay_watches(&r, "\"endpointslices.discovery.k8s.io/v1\""),
        1
    );
}

#[test]
fn relay_port_refuses_clients_without_a_certificate_of_its_ca() {
    let Some((pki, _sim, r)) = started() else {
        return;
    };
    let url = format!("{}{SLICES}", r.url);
    assert!(
        pki.agent_trusting("ca.crt").get(&url).call().is_err(),
        "no client certificate: the handshake fails"
    );
    assert!(
        pki.agent_as("other-client").get(&url).call().is_err(),
        "a client certificate of another CA: the handshake fails"
    );
    assert_eq!(get(&pki.agent(), &url).0, 200, "the relay still serves");
    // The kube-proxy port is plain HTTP as configured: the relay's TLS is its own.
    assert_eq!(r.w.get(SLICES).0, 200);
}

#[test]
fn sighup_reloads_the_relay_ports_client_ca() {
    let Some((pki, _sim, r)) = started() else {
        return;
    };
    let url = format!("{}/readyz", r.url);
    let accepted = |client: &str| pki.agent_as(client).get(&url).call().is_ok();
    assert!(accepted("client") && !accepted("other-client"));
    // The site's CA rotates: the relay now accepts the other CA's clients only.
    std::fs::copy(pki.path("other-ca.crt"), pki.path("relay-client-ca.crt")).expect("new CA");
    common::autonomy::signal(&r.w, "HUP");
    wait_for("the relay to accept the new CA's client", || {
        accepted("other-client")
    });
    assert!(!accepted("client"), "the old CA's client is refused");
}

#[test]
fn relay_port_is_not_ready_before_its_first_sync_and_404s_absent_servicecidrs() {
    let Some(pki) = Pki::generate() else { return };
    // Never synced: an upstream that does not listen.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let cold = Wrapper::start_unready(
        &dead,
        "edge-a1",
        &[
            "--relay-bind-address=127.0.0.1:0",
            &format!("--relay-cert-file={}", pki.path("server.crt")),
            &format!("--relay-key-file={}", pki.path("server.key")),
            &format!("--relay-client-ca-file={}", pki.path("ca.crt")),
        ],
    );
    let agent = pki.agent();
    let url = format!("https://{}", cold.relay_addr());
    wait_for("the relay port answers", || {
        agent.get(format!("{url}/livez")).call().is_ok()
    });
    assert_eq!(get(&agent, &format!("{url}/livez")).0, 200);
    assert_eq!(get(&agent, &format!("{url}/readyz")).0, 503);
    drop(cold);

    // An upstream without ServiceCIDRs: 404 on the relay port, answered by the relay (a
    // follower reads it as "absent"), not proxied.
    let sim = Sim::start(&["--no-servicecidrs"]);
    let r = relay(&pki, &sim);
    sim.clear_requests();
    for path in [
        "/apis/networking.k8s.io/v1/servicecidrs",
        "/apis/networking.k8s.io/v1beta1/servicecidrs",
    ] {
        let (code, body) = get(&agent, &format!("{}{path}", r.url));
        let status: Value = serde_json::from_slice(&body).expect("a Status");
        assert_eq!(
            (code, &status["reason"]),
            (404, &Value::from("NotFound")),
            "{path}"
        );
    }
    let asked: Vec<Value> = sim
        .requests()
        .into_iter()
        .filter(|q| {
            q["path"]
                .as_str()
                .is_some_and(|p| p.contains("servicecidrs"))
        })
        .filter(|q| q["query"].as_str().is_none_or(str::is_empty))
        .collect();
    assert!(asked.is_empty(), "proxied to the upstream: {asked:?}");
}

#[test]
fn relay_port_proxies_with_the_callers_own_authorization_only() {
    let Some((pki, sim, r)) = started() else {
        return;
    };
    let agent = pki.agent();
    for auth in [Some("Bearer kube-proxy-token"), None] {
        sim.clear_requests();
        let mut req = agent
            .post(format!("{}{EVENTS}", r.url))
            .header("Content-Type", "application/json");
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let resp = req.send(b"{\"kind\":\"Event\"}".as_slice()).expect("POST");
        assert_eq!(resp.status().as_u16(), 201);
        let posted = posted_events(&sim);
        assert_eq!(posted.len(), 1, "{posted:?}");
        assert_eq!(
            posted[0]["authorization"],
            auth.map_or(Value::Null, Value::from),
            "the caller's own Authorization, never the relay's token"
        );
    }
}

#[test]
fn follower_behind_the_relay_serves_its_own_nodes_view_and_follows_changes() {
    let Some((pki, sim, r)) = started() else {
        return;
    };
    let f = follower(&pki, &sim, &r);
    assert_eq!(
        web_ips(&f.get_json(SLICES)),
        vec!["10.244.3.10"],
        "zone-b only"
    );
    assert_eq!(endpoint_ips(&f.get_json(ENDPOINTS)), vec!["10.244.3.10"]);

    // An upstream change reaches the follower through the relay: edge-c1 joins zone-b.
    sim.label_node("edge-c1", serde_json::json!({"zone": "zone-b"}));
    wait_for("the follower serves edge-c1's endpoint too", || {
        web_ips(&f.get_json(SLICES)).len() == 2
    });
    let mut ips = endpoint_ips(&f.get_json(ENDPOINTS));
    ips.sort();
    assert_eq!(ips, vec!["10.244.3.10", "10.244.4.10"]);
    // The relay's own node is unaffected.
    assert_eq!(web_ips(&r.w.get_json(SLICES)).len(), 2);

    // An event POST of the follower's kube-proxy reaches the upstream with its own token.
    sim.clear_requests();
    let (code, _, _) = common::request(
        f.addr,
        "POST",
        EVENTS,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer kube-proxy-token"),
        ],
        b"{}",
    );
    assert_eq!(code, 201);
    let posted = posted_events(&sim);
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0]["authorization"], "Bearer kube-proxy-token");

    // The relay counts the follower's watches: one per reflector.
    assert!(relay_watches(&r, "") >= 4);
}

#[test]
fn relay_port_serves_the_snapshot_unpruned_after_an_offline_restart() {
    let Some(pki) = Pki::generate() else { return };
    let sim = Sim::start(&[]);
    let dir = common::TempDir::new("relay-snapshot");
    let flags = [format!("--cache-dir={}", dir.path.display())];
    let mut r = relay_of(&pki, &sim.url, &flags);
    // SIGTERM writes the final snapshot; then the upstream goes away.
    common::autonomy::signal(&r.w, "TERM");
    let exited = common::autonomy::wait_exit(&mut r.w, std::time::Duration::from_secs(10));
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    let url = sim.url.clone();
    drop(sim);
    // Offline: the relay view is restored with the readers' view, unpruned.
    let r = relay_of(&pki, &url, &flags);
    let whole = get_json(&pki.agent(), &format!("{}{SLICES}", r.url));
    assert_eq!(
        web_ips(&whole).len(),
        4,
        "unpruned from the snapshot: {whole}"
    );
    assert_eq!(web_ips(&r.w.get_json(SLICES)).len(), 2);
}

#[test]
fn relay_port_without_its_client_ca_refuses_to_start_with_one_line() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
        .args([
            "--hostname=edge-a1",
            "--relay-bind-address=127.0.0.1:1",
            "--relay-cert-file=/r.crt",
            "--relay-key-file=/r.key",
        ])
        .output()
        .expect("run grid-wrapper");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains("--relay-client-ca-file") && first.contains("unpruned"),
        "{err}"
    );
}

#[test]
fn relay_of_a_v1beta1_only_upstream_serves_and_names_v1beta1() {
    let Some(pki) = Pki::generate() else { return };
    let sim = Sim::start(&["--slice-version", "v1beta1"]);
    let r = relay(&pki, &sim);
    let agent = pki.agent();
    let group = get_json(&agent, &format!("{}/apis/discovery.k8s.io", r.url));
    assert_eq!(group["preferredVersion"]["version"], "v1beta1", "{group}");
    let beta = SLICES.replace("/v1/", "/v1beta1/");
    let whole = get_json(&agent, &format!("{}{beta}", r.url));
    assert_eq!(whole["apiVersion"], "discovery.k8s.io/v1beta1");
    assert_eq!(web_ips(&whole).len(), 4, "unpruned: {whole}");
    assert_eq!(get(&agent, &format!("{}{SLICES}", r.url)).0, 404);
    // A follower mirrors v1beta1 from the relay and serves its kube-proxy v1, pruned.
    let f = follower(&pki, &sim, &r);
    assert_eq!(web_ips(&f.get_json(SLICES)), vec!["10.244.3.10"]);
}

/// `bytes` sent raw over TLS (the test CA's client certificate) to `port`; what comes back
/// until the relay closes the connection or 5 s pass.
fn raw_tls(pki: &Pki, port: u16, bytes: &[u8]) -> String {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&pki.read("ca.crt")).expect("CA PEM"))
        .expect("CA");
    let chain = vec![CertificateDer::from_pem_slice(&pki.read("client.crt")).expect("client PEM")];
    let key = PrivateKeyDer::from_pem_slice(&pki.read("client.key")).expect("key PEM");
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .expect("client certificate");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("TLS");
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(bytes).expect("send");
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn relay_port_answers_malformed_requests_with_a_status() {
    let Some((pki, _sim, r)) = started() else {
        return;
    };
    let port: u16 = r
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    for (bytes, code) in [
        (&b"NOT A REQUEST\r\n\r\n"[..], "400"),
        (&b"GET /readyz HTTP/9.9\r\nHost: x\r\n\r\n"[..], "505"),
        (
            &b"GET /api/v1/nodes?labelSelector=a%3D%3D%3Db HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"[..],
            "400",
        ),
        (
            &b"GET /api/v1/nodes?watch=true&resourceVersion=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"[..],
            "200",
        ),
    ] {
        let answer = raw_tls(&pki, port, bytes);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {code}")),
            "{:?}: {answer}",
            String::from_utf8_lossy(bytes)
        );
        assert!(answer.contains("\"kind\":\"Status\""), "{answer}");
    }
    // The relay still serves.
    assert_eq!(get(&pki.agent(), &format!("{}{SLICES}", r.url)).0, 200);
}
