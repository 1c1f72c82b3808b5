//! Conformance checklist of docs/SEMANTICS.md §11, items 26 and 28, and bad input: every malformed
//! or unsupported request gets its own test, a full `Status`, and leaves the server serving.

use crate::common;

use std::io::{BufReader, Cursor};
use std::time::Duration;

use common::*;
use serde_json::Value;

const SVC: &str = "/api/v1/services";

/// The server still answers a normal LIST (on a new connection) after the bad request.
fn still_serving(w: &Wrapper) {
    let list = w.get_json(&format!(
        "{SVC}?labelSelector={SELECTOR_L}&limit=500&resourceVersion=0"
    ));
    assert_eq!(names(&list), ["api", "db", "kubernetes", "web"]);
    let mut watch = w.watch(&format!("{SVC}?watch=true&timeoutSeconds=5"));
    assert_eq!(watch.expect()["type"], "ADDED");
}

/// Parses the raw bytes a server answered into (status, headers, body).
fn parse(raw_answer: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    read_response(&mut BufReader::new(Cursor::new(raw_answer.to_vec()))).unwrap_or_else(|e| {
        panic!(
            "unparsable answer ({e}): {:?}",
            String::from_utf8_lossy(raw_answer)
        )
    })
}

/// Sends `bytes`, expects a `Status` answer with `code`, then checks the server still serves.
fn bad_raw(bytes: &[u8], code: u16, message: &str) {
    let shared = shared_demo();
    let w = &shared.w;
    let (got, headers, body) = parse(&raw(w.addr, bytes));
    let st = assert_status(got, &headers, &body, code);
    assert_eq!(st["message"], message);
    still_serving(w);
}

/// GETs `path`, expects a `Status` with `code` and `reason`; returns it.
fn bad_get(w: &Wrapper, path: &str, code: u16, reason: &str) -> Value {
    let (got, headers, body) = w.get(path);
    let st = assert_status(got, &headers, &body, code);
    assert_eq!(st["reason"], reason, "{path}");
    st
}

#[test]
fn bad_input_garbage_request_line_gets_400() {
    bad_raw(b"GARBAGE\r\n\r\n", 400, "malformed HTTP request");
}

#[test]
fn bad_input_binary_noise_gets_400() {
    bad_raw(
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
        400,
        "malformed HTTP request",
    );
}

#[test]
fn bad_input_oversized_headers_get_431() {
    let big = "x".repeat(20 * 1024);
    let req = format!("GET {SVC} HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    bad_raw(req.as_bytes(), 431, "request header section too large");
}

#[test]
fn bad_input_too_many_headers_get_431() {
    let mut req = format!("GET {SVC} HTTP/1.1\r\nHost: x\r\n");
    for i in 0..100 {
        req.push_str(&format!("X-H{i}: v\r\n"));
    }
    req.push_str("\r\n");
    bad_raw(req.as_bytes(), 431, "too many request header fields");
}

#[test]
fn bad_input_content_length_and_transfer_encoding_get_400() {
    let req = "POST /api/v1/namespaces/default/events HTTP/1.1\r\nHost: x\r\n\
               Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    bad_raw(
        req.as_bytes(),
        400,
        "both Content-Length and Transfer-Encoding present",
    );
}

#[test]
fn bad_input_bad_chunked_body_gets_400() {
    let req = "POST /api/v1/namespaces/default/events HTTP/1.1\r\nHost: x\r\n\
               Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
    bad_raw(req.as_bytes(), 400, "invalid chunked request body");
}

#[test]
fn bad_input_invalid_label_selector_gets_400() {
    let shared = shared_demo();
    let w = &shared.w;
    for sel in [
        "a in (", "==x", "a b", "a=(b)", "a,,b", "!", "a in (b", "-bad-=x",
    ] {
        for q in ["", "&watch=true"] {
            bad_get(
                w,
                &format!("{SVC}?labelSelector={}{q}", enc(sel)),
                400,
                "BadRequest",
            );
        }
    }
    still_serving(w);
}

#[test]
fn bad_input_invalid_field_selector_gets_400() {
    let shared = shared_demo();
    let w = &shared.w;
    for sel in [
        "metadata.name",
        "metadata.name>3",
        "=web",
        "metadata.name=a\\",
    ] {
        for q in ["", "&watch=true"] {
            bad_get(
                w,
                &format!("{SVC}?fieldSelector={}{q}", enc(sel)),
                400,
                "BadRequest",
            );
        }
    }
    still_serving(w);
}

#[test]
fn bad_input_unsupported_field_label_gets_400_with_its_name() {
    let shared = shared_demo();
    let w = &shared.w;
    let st = bad_get(
        w,
        &format!("{SVC}?fieldSelector={}", enc("status.phase=Running")),
        400,
        "BadRequest",
    );
    assert_eq!(st["message"], "field label not supported: status.phase");
    let st = bad_get(
        w,
        &format!(
            "/api/v1/endpoints?fieldSelector={}",
            enc("spec.clusterIP!=None")
        ),
        400,
        "BadRequest",
    );
    assert_eq!(st["message"], "field label not supported: spec.clusterIP");
    still_serving(w);
}

#[test]
fn bad_input_accept_yaml_gets_406() {
    let shared = shared_demo();
    let w = &shared.w;
    for path in [
        SVC.to_string(),
        format!("{SVC}?watch=true"),
        "/api/v1/nodes/edge-a1".to_string(),
    ] {
        let (code, headers, body) =
            request(w.addr, "GET", &path, &[("Accept", "application/yaml")], b"");
        let st = assert_status(code, &headers, &body, 406);
        assert_eq!(st["reason"], "NotAcceptable");
    }
    still_serving(w);
}

#[test]
fn bad_input_continue_token_on_list_gets_400() {
    let shared = shared_demo();
    let w = &shared.w;
    for path in [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        common::OWN_NODE,
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        let st = bad_get(
            w,
            &format!("{path}{sep}continue=abc&limit=500"),
            400,
            "BadRequest",
        );
        assert!(st["message"].as_str().unwrap().contains("continue"), "{st}");
    }
    // A watch ignores it.
    let mut watch = w.watch(&format!("{SVC}?watch=true&continue=abc&timeoutSeconds=5"));
    assert_eq!(watch.code, 200);
    assert_eq!(watch.expect()["type"], "ADDED");
    still_serving(w);
}

#[test]
fn c26_send_initial_events_on_list_and_rv_match_on_plain_watch_get_422() {
    let shared = shared_demo();
    let w = &shared.w;
    let cases: &[(&str, &str)] = &[
        (
            "sendInitialEvents=true",
            "sendInitialEvents is forbidden for list",
        ),
        (
            "sendInitialEvents=false",
            "sendInitialEvents is forbidden for list",
        ),
        (
            "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "watch=true&resourceVersionMatch=Exact&resourceVersion=0",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "watch=true&sendInitialEvents=true",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
    ];
    for path in [
        SVC,
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        common::OWN_NODE,
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        for (q, msg) in cases {
            let st = bad_get(w, &format!("{path}{sep}{q}"), 422, "Invalid");
            assert!(
                st["message"].as_str().unwrap().contains(msg),
                "{path}?{q}: {st}"
            );
        }
        let st = bad_get(
            w,
            &format!("{path}{sep}resourceVersionMatch=Bogus"),
            422,
            "Invalid",
        );
        assert!(
            st["message"]
                .as_str()
                .unwrap()
                .contains("Unsupported value"),
            "{st}"
        );
    }
    still_serving(w);
}

#[test]
fn c28_all_errors_are_full_status_objects_with_code_equal_to_http_status() {
    let shared = shared_demo();
    let w = &shared.w;
    let gets: &[(&str, u16)] = &[
        ("/api/v1/nodes/nope", 404),
        ("/api/v1/namespaces/default/endpoints/nope", 404),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/nope",
            404,
        ),
        ("/api/v1/services?labelSelector=a%20in%20(", 400),
        ("/api/v1/services?fieldSelector=bogus%3Dx", 400),
        ("/api/v1/services?timeoutSeconds=x&watch=true", 400),
        ("/api/v1/services?continue=x", 400),
        (
            "/api/v1/services?watch=maybe&allowWatchBookmarks=perhaps",
            400,
        ),
        (
            "/api/v1/services?resourceVersionMatch=Exact&resourceVersion=1",
            410,
        ),
        ("/api/v1/services?sendInitialEvents=true", 422),
        ("/api/v1/services?resourceVersionMatch=Nope", 422),
        // Proxied, answered by the upstream (relayed unchanged, also a full Status).
        ("/api/v1/pods", 404),
    ];
    for (path, code) in gets {
        let (got, headers, body) = w.get(path);
        assert_status(got, &headers, &body, *code);
    }
    let (got, headers, body) = request(
        w.addr,
        "GET",
        "/api/v1/services",
        &[("Accept", "text/plain")],
        b"",
    );
    assert_status(got, &headers, &body, 406);
    for (bytes, code) in [
        (b"NOT HTTP\r\n\r\n".to_vec(), 400),
        (
            format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "y".repeat(20000)).into_bytes(),
            431,
        ),
        (b"GET /api/v1/services HTTP/3.0\r\n\r\n".to_vec(), 505),
        (
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            501,
        ),
    ] {
        let (got, headers, body) = parse(&raw(w.addr, &bytes));
        assert_status(got, &headers, &body, code);
    }
    // Inside a watch: an ERROR event whose object is the same full Status.
    let mut watch = w.watch("/api/v1/services?watch=true&resourceVersion=7");
    let ev = watch.expect();
    assert_eq!(ev["type"], "ERROR");
    let st = &ev["object"];
    assert_eq!(
        (st["kind"].as_str(), st["apiVersion"].as_str()),
        (Some("Status"), Some("v1"))
    );
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "Expired");
    assert_eq!(st["code"], 410);
    assert!(st["metadata"].is_object());
    assert!(watch.ended_within(Duration::from_secs(2)));
    still_serving(w);
}

#[test]
fn half_closed_client_still_gets_its_answer() {
    // A client may send its request and shut down its sending side at once; the answer must
    // still come (this used to be dropped with the connection).
    let shared = shared_demo();
    let w = &shared.w;
    for _ in 0..20 {
        let (code, _, body) = parse(&raw(
            w.addr,
            b"GET /api/v1/nodes/edge-a1 HTTP/1.1\r\nHost: x\r\n\r\n",
        ));
        assert_eq!(code, 200);
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["metadata"]["name"],
            "edge-a1"
        );
    }
    // Two pipelined requests before the FIN: both answered, in order.
    let two = b"GET /api/v1/nodes/edge-a1 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/namespaces/default/services/nope HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = raw(w.addr, two);
    let mut r = BufReader::new(Cursor::new(answer));
    assert_eq!(read_response(&mut r).unwrap().0, 200);
    assert_eq!(read_response(&mut r).unwrap().0, 404);
    still_serving(w);
}
