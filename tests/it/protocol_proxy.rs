//! Conformance checklist of docs/SEMANTICS.md §11, items 3 and 4: everything not served from the
//! cache is proxied upstream (streamed, hop-by-hop headers dropped, 503 when unreachable), and
//! event POST/PATCH bodies reach the upstream byte for byte — against the real binaries.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

#[test]
fn c03_proxies_every_other_request_streamed_and_503_when_upstream_unreachable() {
    let sim = Sim::start(&["--bookmark-interval", "1"]);
    let w = Wrapper::start(&sim.url, "edge-a1", &[]);
    sim.clear_requests();

    // A subresource GET and a non-GET method on a cached path go upstream; the upstream's status
    // and body come back.
    let (code, _, body) = w.get("/api/v1/nodes/edge-a1/status");
    assert_eq!(code, 404);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v["message"],
        "the server could not find the requested resource"
    );
    let (code, _, body) = request(
        w.addr,
        "DELETE",
        "/api/v1/namespaces/default/services/web",
        &[],
        b"",
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["status"], "Success", "the simulator's answer is relayed");
    let q = "labelSelector=a%3Db&watch=false&x=%2F";
    let (code, _, _) = w.get(&format!("/apis/networking.k8s.io/v1/ingresses?{q}"));
    assert_eq!(code, 404);
    let rec = sim.requests();
    let seen: Vec<(String, String, String)> = rec
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("").to_string(),
                r["path"].as_str().unwrap_or("").to_string(),
                r["query"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "GET".into(),
                "/api/v1/nodes/edge-a1/status".into(),
                String::new()
            ),
            (
                "DELETE".into(),
                "/api/v1/namespaces/default/services/web".into(),
                String::new()
            ),
            (
                "GET".into(),
                "/apis/networking.k8s.io/v1/ingresses".into(),
                q.into()
            ),
        ]
    );
    assert_eq!(
        header_of(&rec[0], "host"),
        Some(sim.addr.to_string()),
        "Host is set to the upstream host"
    );

    // Streaming: a watch path grid-wrapper does not cache (a namespace with an encoded '/',
    // which the simulator takes literally) is relayed chunk by chunk while it is open.
    let ns = "a%2Fb";
    let mut watch = w.watch(&format!(
        "/api/v1/namespaces/{ns}/services?watch=true&allowWatchBookmarks=true&timeoutSeconds=8"
    ));
    assert_eq!(watch.code, 200);
    assert_eq!(header(&watch.headers, "transfer-encoding"), Some("chunked"));
    let first = watch
        .next(Duration::from_secs(4))
        .expect("a relayed BOOKMARK");
    assert_eq!(first["type"], "BOOKMARK", "{first}");
    let t = std::time::Instant::now();
    sim.apply(&json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "streamed", "namespace": ns},
        "spec": {"clusterIP": "10.96.9.9", "ports": [{"port": 80, "protocol": "TCP"}]}}));
    let ev = watch.until(|e| e["type"] != "BOOKMARK");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "streamed");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "relayed event was held back"
    );
    assert!(!watch.is_ended(), "the relayed stream is still open");
    drop(watch);
    // grid-wrapper's own Services watch delivers the same ADDED on its own schedule: wait for
    // it, so the check below (the cache still answers without the upstream) is not a race.
    wait_for("the cache to hold the streamed Service", || {
        names(&w.get_json("/api/v1/services")).len() == 5
    });

    // Upstream gone: proxied requests get a 503 Status; the cache still answers.
    drop(sim);
    let (code, headers, body) = request(
        w.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    let st = assert_status(code, &headers, &body, 503);
    assert_eq!(st["reason"], "ServiceUnavailable");
    let (code, headers, body) = w.get("/api/v1/nodes/edge-a1/status");
    assert_status(code, &headers, &body, 503);
    assert_eq!(names(&w.get_json("/api/v1/services")).len(), 5);
}

fn header_of(recorded: &Value, name: &str) -> Option<String> {
    recorded["headers"].as_array().and_then(|hs| {
        hs.iter()
            .find(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .and_then(|h| h[1].as_str().map(str::to_string))
    })
}

#[test]
fn c04_forwards_event_post_and_patch_with_body_and_content_type_untouched() {
    use base64::Engine as _;
    let (sim, w) = demo(&[]);
    sim.clear_requests();
    // Protobuf-like bytes: the k8s envelope magic, NUL, 0xff, invalid UTF-8, CR LF.
    let mut binary = b"k8s\x00\n\x0fevents.k8s.io/v1\x12\x05Event\xff\xfe\x00\r\n\x80".to_vec();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect();
    binary.extend_from_slice(&[0, 0xff]);
    let proto = "application/vnd.kubernetes.protobuf";
    let smp = "application/strategic-merge-patch+json";
    let cases: Vec<(&str, &str, &str, Vec<u8>, u16)> = vec![
        (
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            proto,
            binary.clone(),
            201,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/events",
            proto,
            binary.clone(),
            201,
        ),
        (
            "PATCH",
            "/apis/events.k8s.io/v1/namespaces/default/events/kube-proxy.17f1",
            smp,
            binary.clone(),
            200,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/events/kube-proxy.17f2",
            smp,
            binary.clone(),
            200,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/events",
            proto,
            big.clone(),
            201,
        ),
    ];
    for (i, (method, path, ctype, body, want)) in cases.iter().enumerate() {
        let auth = format!("Bearer token-{i}");
        let (code, headers, resp) = request(
            w.addr,
            method,
            path,
            &[
                ("Content-Type", ctype),
                ("Authorization", &auth),
                ("Keep-Alive", "timeout=5"),
                ("Proxy-Authorization", "Basic eDp5"),
                ("X-Trace", "t-1"),
            ],
            body,
        );
        assert_eq!(code, *want, "{method} {path}");
        assert_eq!(
            &resp, body,
            "{method} {path}: the simulator's echo comes back unchanged"
        );
        assert_eq!(header(&headers, "content-type"), Some(*ctype));
        let rec = sim.requests();
        let r = rec.last().expect("recorded");
        assert_eq!(r["method"], *method);
        assert_eq!(r["path"], *path);
        assert_eq!(r["contentType"], *ctype);
        assert_eq!(r["authorization"], auth.as_str());
        let got = base64::engine::general_purpose::STANDARD
            .decode(r["body"].as_str().unwrap())
            .unwrap();
        assert!(
            got == *body,
            "{method} {path}: body changed on the way ({} vs {} bytes)",
            got.len(),
            body.len()
        );
        assert_eq!(header_of(r, "x-trace").as_deref(), Some("t-1"));
        assert_eq!(
            header_of(r, "keep-alive"),
            None,
            "hop-by-hop header forwarded"
        );
        assert_eq!(
            header_of(r, "proxy-authorization"),
            None,
            "hop-by-hop header forwarded"
        );
    }
    // No credentials are attached to a request that carried none.
    let (code, _, _) = request(
        w.addr,
        "POST",
        "/api/v1/namespaces/default/events",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(code, 201);
    assert_eq!(sim.requests().last().unwrap()["authorization"], Value::Null);
}

/// Reads exactly the interim `100 Continue` from `s` within its read timeout; panics with what
/// came instead (or with the timeout: the 100 never came).
fn expect_continue(s: &mut std::net::TcpStream, what: &str) {
    use std::io::Read;
    let want = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut got = vec![0; want.len()];
    if let Err(e) = s.read_exact(&mut got) {
        panic!("{what}: no 100 Continue within the read timeout ({e})");
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want),
        "{what}"
    );
}

#[test]
fn expect_100_continue_is_answered_before_the_body_is_read() {
    use base64::Engine as _;
    use std::io::{BufReader, Write};
    let (sim, w) = demo(&[]);
    sim.clear_requests();
    let path = "/api/v1/namespaces/default/events";
    let bodies: [&[u8]; 2] = [
        br#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"expect-1"}}"#,
        br#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"expect-2"}}"#,
    ];
    let mut s = std::net::TcpStream::connect(w.addr).expect("connect");
    // Bounded: without the interim answer the read below fails instead of hanging.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(s.try_clone().expect("clone the socket"));
    // Two requests on one keep-alive connection: the second's 100 must follow the first's
    // complete response, not interrupt it.
    for (i, body) in bodies.iter().enumerate() {
        let close = if i + 1 == bodies.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Expect: 100-continue\r\nContent-Length: {}\r\n{close}\r\n",
            w.addr,
            body.len()
        );
        // The head alone: a client honouring the expectation sends nothing more until the 100.
        s.write_all(head.as_bytes()).expect("send the head");
        expect_continue(reader.get_mut(), &format!("request {i}"));
        s.write_all(body).expect("send the body");
        let (code, headers, resp) = read_response(&mut reader).expect("the final response");
        assert_eq!(code, 201, "request {i}: {}", String::from_utf8_lossy(&resp));
        assert_eq!(&resp, body, "request {i}: the simulator's echo comes back");
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
        let rec = sim.requests();
        let r = rec.last().expect("recorded");
        assert_eq!(
            (r["method"].as_str(), r["path"].as_str()),
            (Some("POST"), Some(path))
        );
        let got = base64::engine::general_purpose::STANDARD
            .decode(r["body"].as_str().unwrap())
            .unwrap();
        assert_eq!(&got, body, "request {i}: the upstream got the body");
        assert_eq!(
            header_of(r, "expect"),
            None,
            "the whole body is forwarded, so Expect is not"
        );
    }
    assert_eq!(sim.requests().len(), 2);
}

#[test]
fn curl_gets_100_continue_for_a_large_post() {
    let Some(curl) = find_in_path("curl") else {
        println!("skipping: curl not found in PATH");
        return;
    };
    let (sim, w) = demo(&[]);
    sim.clear_requests();
    let dir = TempDir::new("expect");
    let file = dir.file("event.json");
    let out = dir.file("answer.json");
    // Well over 1 KiB; the Expect header is also forced, whatever curl's own size threshold.
    let note = "x".repeat(64 * 1024);
    let body = serde_json::to_vec(&json!({"kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "curl-expect"}, "note": note}))
    .unwrap();
    std::fs::write(&file, &body).expect("write the body file");
    let url = format!("http://{}/api/v1/namespaces/default/events", w.addr);
    // Without the 100, curl would send the body after its 30 s wait and still succeed: the
    // assertion is on the interim line curl reports, not on the time taken.
    let run = run_bounded(
        std::process::Command::new(curl)
            .args(["-sv", "--noproxy", "*", "--expect100-timeout", "30"])
            .args(["--max-time", "50", "-X", "POST"])
            .args(["--data-binary", &format!("@{file}")])
            .args(["-H", "Content-Type: application/json"])
            .args(["-H", "Expect: 100-continue"])
            .args(["-o", &out, "-w", "%{http_code}"])
            .arg(&url),
        Duration::from_secs(60),
    )
    .expect("curl finished within 60 s");
    let stderr = run.stderr_text();
    assert!(run.ok(), "curl failed: {stderr}");
    assert!(
        stderr.contains("> Expect: 100-continue"),
        "curl sent the expectation: {stderr}"
    );
    assert!(
        stderr.contains("< HTTP/1.1 100 Continue"),
        "curl got no 100 Continue: {stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout), "201", "{stderr}");
    assert_eq!(
        std::fs::read(&out).expect("curl wrote the answer"),
        body,
        "the simulator's echo"
    );
    let rec = sim.requests();
    let r = rec.last().expect("recorded");
    assert_eq!(r["method"], "POST");
    use base64::Engine as _;
    let got = base64::engine::general_purpose::STANDARD
        .decode(r["body"].as_str().unwrap())
        .unwrap();
    assert!(got == body, "the upstream got the body");
}
