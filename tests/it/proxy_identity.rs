//! grid-wrapper never lends its identity (docs/SEMANTICS.md §8): against an HTTPS upstream that
//! authenticates a request by a client certificate of its CA or by its bearer token (the
//! simulator with `--client-cert-optional --token`, as an apiserver with `--client-ca-file` and
//! no anonymous access to writes), grid-wrapper's reflectors sync with its client certificate,
//! while a proxied `POST …/events` or `DELETE …/pods/x` without `Authorization` reaches the
//! upstream without that certificate (refused 401) through the kube-proxy port, the relay port and
//! a follower reading a relay, and with the caller's own token carries that token and no
//! certificate. A token of grid-wrapper's is never added either. Skips without openssl.

use crate::common;

use common::pki::Pki;
use common::{request, Sim, Wrapper};
use serde_json::Value;

/// The token the upstream accepts (the caller's: kube-proxy's).
const TOKEN: &str = "kube-proxy-token";
const EVENTS: &str = "/api/v1/namespaces/default/events";
const POD: &str = "/api/v1/namespaces/default/pods/x";

/// The simulator over TLS: a certificate of the test CA or `Bearer TOKEN` authenticates.
fn upstream(pki: &Pki) -> Sim {
    pki.apiserver(Some(TOKEN))
}

/// A kubeconfig for `server` trusting the test CA, with the `user:` lines `creds`.
fn kubeconfig(pki: &Pki, name: &str, server: &str, creds: &str) -> String {
    let cluster = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    pki.kubeconfig(name, server, &cluster, creds)
}

/// The `user:` lines of the test client certificate, no token.
fn cert_creds() -> &'static str {
    "    client-certificate: client.crt\n    client-key: client.key\n"
}

/// Clears the upstream's recorded requests (its control API over TLS).
fn clear(pki: &Pki, sim: &Sim) {
    let resp = pki
        .agent()
        .post(format!("{}/sim/requests/clear", sim.url))
        .send(b"{}".as_slice())
        .expect("POST /sim/requests/clear over TLS");
    assert_eq!(resp.status().as_u16(), 200);
}

/// The request the upstream recorded for `method` `path` (the last one).
fn recorded(pki: &Pki, sim: &Sim, method: &str, path: &str) -> Option<Value> {
    pki.recorded(sim)
        .into_iter()
        .rev()
        .find(|q| q["method"] == method && q["path"] == path)
}

/// Sends a POST of an event and a DELETE of a pod with `send` (method, path, extra headers →
/// status), without and then with the caller's token, and checks what reached the upstream.
fn check_proxied(pki: &Pki, sim: &Sim, via: &str, send: &dyn Fn(&str, &str, bool) -> u16) {
    for (method, path, ok) in [("POST", EVENTS, 201), ("DELETE", POD, 200)] {
        clear(pki, sim);
        let code = send(method, path, false);
        assert_eq!(
            code, 401,
            "{via}: {method} {path} without Authorization must reach the upstream anonymous"
        );
        assert!(
            recorded(pki, sim, method, path).is_none(),
            "{via}: refused, not recorded"
        );
        let code = send(method, path, true);
        assert_eq!(code, ok, "{via}: {method} {path} with the caller's token");
        let got = recorded(pki, sim, method, path)
            .unwrap_or_else(|| panic!("{via}: {method} {path} not recorded"));
        assert_eq!(got["authorization"], format!("Bearer {TOKEN}"), "{via}");
        assert_eq!(
            got["clientCertificate"], false,
            "{via}: {method} {path} arrived on a connection presenting grid-wrapper's certificate"
        );
    }
}

/// Through the kube-proxy port of `w`.
fn via_kube_proxy_port(w: &Wrapper) -> impl Fn(&str, &str, bool) -> u16 + '_ {
    move |method, path, with_token| {
        let auth = format!("Bearer {TOKEN}");
        let mut headers = vec![("Content-Type", "application/json")];
        if with_token {
            headers.push(("Authorization", auth.as_str()));
        }
        request(w.addr, method, path, &headers, b"{\"kind\":\"Event\"}").0
    }
}

#[test]
fn proxied_requests_carry_no_client_certificate_of_grid_wrappers_on_either_port() {
    let Some(pki) = Pki::generate() else { return };
    let sim = upstream(&pki);
    // A relay authenticated to the upstream by its client certificate only: its reflectors sync
    // with it (the upstream refuses a list without a certificate or the token).
    let kc = kubeconfig(&pki, "cert.kubeconfig", &sim.url, cert_creds());
    let (relay, log) = Wrapper::start_captured(&[
        &format!("--kubeconfig={kc}"),
        "--hostname=edge-a1",
        "--relay-bind-address=127.0.0.1:0",
        &format!("--relay-cert-file={}", pki.path("server.crt")),
        &format!("--relay-key-file={}", pki.path("server.key")),
        &format!("--relay-client-ca-file={}", pki.path("ca.crt")),
    ]);
    if std::panic::catch_unwind(|| relay.wait_ready()).is_err() {
        panic!(
            "the relay never synced with its certificate:\n{}",
            log.text()
        );
    }
    check_proxied(&pki, &sim, "kube-proxy port", &via_kube_proxy_port(&relay));

    // The relay port: a follower's request, on a connection with the follower's certificate.
    let agent = pki.agent();
    let relay_url = format!("https://{}", relay.relay_addr());
    let via_relay_port = |method: &str, path: &str, with_token: bool| {
        let uri = format!("{relay_url}{path}");
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("Content-Type", "application/json");
        if with_token {
            req = req.header("Authorization", format!("Bearer {TOKEN}"));
        }
        let req = req.body(b"{\"kind\":\"Event\"}".to_vec()).expect("request");
        agent
            .run(req)
            .expect("through the relay port")
            .status()
            .as_u16()
    };
    check_proxied(&pki, &sim, "relay port", &via_relay_port);

    // A follower reading the relay (--relay-kubeconfig: the relay's CA, the follower's
    // certificate, which the relay port requires) and the cloud with a token of its own: its
    // kube-proxy's requests reach the cloud through the relay with neither.
    let relay_kc = kubeconfig(&pki, "relay.kubeconfig", &relay_url, cert_creds());
    let cloud_kc = kubeconfig(
        &pki,
        "token.kubeconfig",
        &sim.url,
        "    token: follower-own-token\n",
    );
    let follower = Wrapper::start(
        &sim.url,
        "edge-b1",
        &[
            &format!("--kubeconfig={cloud_kc}"),
            &format!("--relay-kubeconfig={relay_kc}"),
        ],
    );
    check_proxied(
        &pki,
        &sim,
        "follower → relay",
        &via_kube_proxy_port(&follower),
    );
    drop(follower);

    // A relay named as the upstream (--kubeconfig) is taken for an apiserver: the reflectors
    // present the certificate, proxied requests do not, and the relay port's TLS refuses them.
    // When its alert is read (TLS 1.3 may instead show the request's write failing first, a
    // broken pipe), the answer says why.
    let misnamed = Wrapper::start(
        &relay_url,
        "edge-c1",
        &[&format!("--kubeconfig={relay_kc}")],
    );
    let (code, _, body) = request(misnamed.addr, "POST", EVENTS, &[], b"{}");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 503, "{body}");
    if body.contains("CertificateRequired") {
        assert!(body.contains("--relay-kubeconfig"), "{body}");
    }
    // The relay answered the handshake: it is not taken for a server down.
    let (_, _, metrics) = request(misnamed.health, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8_lossy(&metrics);
    let healthy: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_upstream_server_healthy{"))
        .collect();
    assert!(
        !healthy.is_empty() && healthy.iter().all(|l| l.ends_with(" 1")),
        "{healthy:?}"
    );
    drop(misnamed);
    drop(relay);
}

#[test]
fn proxied_requests_never_carry_grid_wrappers_token() {
    let Some(pki) = Pki::generate() else { return };
    let sim = upstream(&pki);
    // The token file authenticates grid-wrapper (the upstream's token is TOKEN: the file holds
    // it), no certificate.
    std::fs::write(pki.path("token"), format!("{TOKEN}\n")).expect("token file");
    let creds = format!("    tokenFile: {}\n", pki.path("token"));
    let inline = format!("    token: {TOKEN}\n");
    for (name, creds) in [("file.kubeconfig", &creds), ("inline.kubeconfig", &inline)] {
        let kc = kubeconfig(&pki, name, &sim.url, creds);
        let w = Wrapper::start(&sim.url, "edge-a1", &[&format!("--kubeconfig={kc}")]);
        let send = via_kube_proxy_port(&w);
        // Without Authorization: refused, so grid-wrapper's token was not added.
        for (method, path) in [("POST", EVENTS), ("DELETE", POD)] {
            assert_eq!(send(method, path, false), 401, "{name}: {method} {path}");
        }
    }
}
