//! grid-wrapper serving TLS (`--insecure=false`): with `--cert-file`/`--key-file` a client that
//! trusts the CA lists and watches over HTTPS; with `--ca-file` a client certificate is
//! required. The upstream (simulator) stays plain HTTP. Skips (printing why) without openssl.

use crate::common;

use common::pki::Pki;
use common::{web_ips, Sim, Wrapper};
use serde_json::Value;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

fn https(w: &Wrapper) -> String {
    format!("https://{}", w.addr)
}

#[test]
fn tls_serving_lists_and_watches_over_https_with_client_certificates() {
    let Some(pki) = Pki::generate() else { return };
    let sim = Sim::start(&[]);
    let (cert, key, ca) = (
        pki.path("server.crt"),
        pki.path("server.key"),
        pki.path("ca.crt"),
    );
    let w = Wrapper::start(
        &sim.url,
        "edge-a1",
        &[
            "--insecure=false",
            &format!("--cert-file={cert}"),
            &format!("--key-file={key}"),
            &format!("--ca-file={ca}"),
        ],
    );
    let agent = pki.agent();
    let mut resp = agent
        .get(format!("{}{SLICES}", https(&w)))
        .call()
        .expect("LIST over TLS");
    assert_eq!(resp.status().as_u16(), 200);
    let list: Value =
        serde_json::from_slice(&resp.body_mut().read_to_vec().expect("body")).expect("JSON");
    assert_eq!(web_ips(&list).len(), 2, "pruned to zone-a over TLS: {list}");

    // A watch over TLS receives a relabel.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let resp = agent
        .get(format!(
            "{}{SLICES}?watch=true&resourceVersion={rv}&timeoutSeconds=10",
            https(&w)
        ))
        .call()
        .expect("WATCH over TLS");
    assert_eq!(resp.status().as_u16(), 200);
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(resp.into_body().into_reader()));
    sim.label_node("edge-b1", serde_json::json!({"zone": "zone-a"}));
    let event: Value =
        serde_json::from_str(&lines.next().expect("an event").expect("read")).expect("JSON event");
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(
        web_ips(&serde_json::json!({"items": [event["object"].clone()]})).len(),
        3
    );

    // Without a client certificate the handshake is refused (--ca-file requires one).
    let plain = pki.agent_trusting("ca.crt");
    assert!(
        plain.get(format!("{}{SLICES}", https(&w))).call().is_err(),
        "no client cert → refused"
    );
    // The server still serves afterwards.
    assert_eq!(
        agent
            .get(format!("{}{SLICES}", https(&w)))
            .call()
            .map(|r| r.status().as_u16())
            .ok(),
        Some(200)
    );
    // Plain HTTP on the TLS port gets no HTTP answer.
    let raw = common::raw(w.addr, b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        !raw.starts_with(b"HTTP/1.1 200"),
        "plain HTTP must not be served on the TLS port"
    );
}

#[test]
fn tls_serving_with_unreadable_cert_is_a_clear_startup_error() {
    let sim = Sim::start(&[]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
        .args([
            &format!("--master={}", sim.url),
            "--hostname=edge-a1",
            "--insecure=false",
            "--cert-file=/nonexistent/cert.pem",
            "--key-file=/nonexistent/key.pem",
            "--bind-address=127.0.0.1:1",
            "--metrics-bind-address=127.0.0.1:2",
        ])
        .output()
        .expect("run grid-wrapper");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cert-file /nonexistent/cert.pem"), "{err}");
}
