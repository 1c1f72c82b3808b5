//! grid-wrapper against an HTTPS upstream: the simulated apiserver serves TLS with a test CA
//! (made with the `openssl` CLI), requires a client certificate and a bearer token. Covers
//! kubeconfig credentials given as files and as `*-data`/`tokenFile`, a wrong CA (never ready,
//! an error naming the certificate, no crash), and proxied requests keeping the client's own
//! `Authorization` (or none) — the wrapper's token and client certificate are never attached
//! (there the sim takes a client certificate as an apiserver does: verified when given, not
//! required; `tests/it/proxy_identity.rs` has the rest). The sim's `/sim/` control
//! API is read over TLS with a small ureq client holding the test client certificate.
//! Without `openssl` each test prints "skipping" and passes.

use crate::common;

use base64::Engine as _;
use common::pki::Pki;
use common::{names, slice_ips, Wrapper};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The upstream token the sim requires.
const TOKEN: &str = "sim-secret-token";
/// The node grid-wrapper runs on (zone-a).
const HOSTNAME: &str = "edge-a1";

/// The wrapper's pruned EndpointSlice LIST: web-abc12 holds only the zone-a endpoints.
fn assert_pruned_list(w: &Wrapper) {
    let list = w.get_json("/apis/discovery.k8s.io/v1/endpointslices");
    assert!(names(&list).contains(&"api-xyz89".to_string()), "{list}");
    assert!(!names(&list).contains(&"db-hl7q2".to_string()), "{list}");
    let web = list["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == "web-abc12"))
        .unwrap_or_else(|| panic!("no web-abc12 in {list}"));
    let nodes: Vec<&str> = web["endpoints"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["nodeName"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(nodes, ["edge-a1", "edge-a2"], "web pruned to zone-a: {web}");
    assert_eq!(slice_ips(web).len(), 2);
}

/// Waits (bounded) for `/readyz` 200, showing the wrapper's log on failure.
fn wait_ready(w: &Wrapper, log: &common::LogSink) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while w.readyz() != Some(200) {
        assert!(
            Instant::now() < deadline,
            "grid-wrapper never became ready:\n{}",
            log.text()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// (a) Kubeconfig with file paths for CA and client certificate/key, plus a static token.
#[test]
fn kubeconfig_with_files_and_token_syncs() {
    let Some(pki) = Pki::generate() else { return };
    let sim = pki.apiserver(Some(TOKEN));
    let cluster = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    // Relative paths resolve against the kubeconfig's directory.
    let creds = format!(
        "    token: {TOKEN}\n    client-certificate: client.crt\n    client-key: client.key\n"
    );
    let kc = pki.kubeconfig("files.kubeconfig", &sim.url, &cluster, &creds);
    let (w, log) = Wrapper::start_captured(&["--kubeconfig", &kc, "--hostname", HOSTNAME]);
    wait_ready(&w, &log);
    assert_pruned_list(&w);
    // A proxied request without Authorization must not gain the wrapper's token: the sim,
    // which requires the token, rejects it.
    let (code, _, body) = w.get("/api/v1/namespaces/default/pods");
    assert_eq!(code, 401, "{}", String::from_utf8_lossy(&body));
}

/// (b) Kubeconfig with `*-data` (base64 PEM) fields and a `tokenFile`.
#[test]
fn kubeconfig_with_data_fields_and_token_file_syncs() {
    let Some(pki) = Pki::generate() else { return };
    let sim = pki.sim(Some(TOKEN));
    std::fs::write(pki.path("token"), format!("{TOKEN}\n")).expect("write token file");
    let cluster = format!("    certificate-authority-data: {}\n", pki.b64("ca.crt"));
    let creds = format!(
        "    tokenFile: {}\n    client-certificate-data: {}\n    client-key-data: {}\n",
        pki.path("token"),
        pki.b64("client.crt"),
        pki.b64("client.key")
    );
    let kc = pki.kubeconfig("data.kubeconfig", &sim.url, &cluster, &creds);
    let (w, log) = Wrapper::start_captured(&["--kubeconfig", &kc, "--hostname", HOSTNAME]);
    wait_ready(&w, &log);
    assert_pruned_list(&w);
    let watch = w.watch("/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=0");
    assert_eq!(watch.code, 200);
}

/// (c) A CA that did not sign the server certificate: never ready, an error about the
/// certificate in the log, and the process keeps running.
#[test]
fn wrong_ca_never_ready_and_logs_certificate_error() {
    let Some(pki) = Pki::generate() else { return };
    let sim = pki.sim(Some(TOKEN));
    let cluster = format!("    certificate-authority: {}\n", pki.path("other-ca.crt"));
    let creds = format!(
        "    token: {TOKEN}\n    client-certificate: {}\n    client-key: {}\n",
        pki.path("client.crt"),
        pki.path("client.key")
    );
    let kc = pki.kubeconfig("wrong-ca.kubeconfig", &sim.url, &cluster, &creds);
    let (mut w, log) = Wrapper::start_captured(&["--kubeconfig", &kc, "--hostname", HOSTNAME]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut logged = false;
    while Instant::now() < deadline {
        assert_eq!(
            w.readyz(),
            Some(503),
            "readyz with a wrong CA:\n{}",
            log.text()
        );
        assert!(
            matches!(w.proc.child.try_wait(), Ok(None)),
            "grid-wrapper exited:\n{}",
            log.text()
        );
        // An error-level line (WARN or ERROR) naming the certificate problem.
        logged = log.text().lines().any(|l| {
            let lower = l.to_ascii_lowercase();
            (l.contains("WARN") || l.contains("ERROR")) && lower.contains("certificate")
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        logged,
        "no WARN/ERROR about the certificate:\n{}",
        log.text()
    );
}

/// (d) Proxied requests carry the client's own Authorization unchanged, or none at all.
#[test]
fn proxied_requests_keep_client_authorization_only() {
    let Some(pki) = Pki::generate() else { return };
    // No --token: the sim records whatever arrives.
    let sim = pki.apiserver(None);
    let cluster = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    let creds = format!(
        "    token: wrapper-own-token\n    client-certificate: {}\n    client-key: {}\n",
        pki.path("client.crt"),
        pki.path("client.key")
    );
    let kc = pki.kubeconfig("proxy.kubeconfig", &sim.url, &cluster, &creds);
    let (w, log) = Wrapper::start_captured(&["--kubeconfig", &kc, "--hostname", HOSTNAME]);
    wait_ready(&w, &log);

    let with_auth = "/api/v1/namespaces/default/pods?labelSelector=with-auth";
    let (code, _, _) = common::request(
        w.addr,
        "GET",
        with_auth,
        &[("Authorization", "Bearer client-own-token")],
        b"",
    );
    assert_eq!(code, 404, "the sim answers unknown GETs 404 (relayed)");
    let without_auth = "/api/v1/namespaces/default/pods?labelSelector=no-auth";
    let (code, _, _) = common::request(w.addr, "GET", without_auth, &[], b"");
    assert_eq!(code, 404, "relayed 404");
    let event = br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1"}}"#;
    let (code, _, body) = common::request(
        w.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[("Content-Type", "application/json")],
        event,
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, event, "echoed body");

    let recorded = pki.recorded(&sim);
    let find = |path: &str, query: &str| {
        recorded
            .iter()
            .find(|r| r["path"] == path && r["query"].as_str().unwrap_or("").contains(query))
            .unwrap_or_else(|| panic!("{path}?{query} not recorded: {recorded:?}"))
            .clone()
    };
    let auth_headers = |r: &Value| -> Vec<String> {
        r["headers"]
            .as_array()
            .map(|hs| {
                hs.iter()
                    .filter(|h| {
                        h[0].as_str()
                            .is_some_and(|n| n.eq_ignore_ascii_case("authorization"))
                    })
                    .map(|h| h[1].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let got = find("/api/v1/namespaces/default/pods", "with-auth");
    assert_eq!(auth_headers(&got), ["Bearer client-own-token"], "{got}");
    assert_eq!(
        got["clientCertificate"], false,
        "not the wrapper's certificate: {got}"
    );
    let bare = find("/api/v1/namespaces/default/pods", "no-auth");
    assert!(
        auth_headers(&bare).is_empty(),
        "wrapper token attached: {bare}"
    );
    assert_eq!(bare["authorization"], Value::Null);
    let posted = find("/api/v1/namespaces/default/events", "");
    assert_eq!(posted["method"], "POST");
    assert!(
        auth_headers(&posted).is_empty(),
        "wrapper token attached: {posted}"
    );
    assert_eq!(posted["authorization"], Value::Null);
    let b = base64::engine::general_purpose::STANDARD
        .decode(posted["body"].as_str().unwrap_or(""))
        .expect("recorded body base64");
    assert_eq!(b, event, "relayed body");
}
