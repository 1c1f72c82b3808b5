//! Tests of `forward.rs` against the tiny plain-HTTP server of `client_tests.rs` on 127.0.0.1.

use super::*;
use crate::upstream::client::tests::{body_of, serve, upstream};
use std::net::TcpListener;

#[test]
fn forward_keeps_method_body_and_content_type_and_the_clients_authorization() {
    let (url, server) = serve(vec![
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Resp: r\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".to_vec(),
    ]);
    let up = upstream(&url, Some("server-token"));
    let body = vec![0x6b, 0x38, 0x73, 0x00, 0xff, 0x0a, 0x0d, 0x0a, 0x80];
    let h = |n: &str, v: &str| (n.to_string(), v.as_bytes().to_vec());
    let resp = up
        .forward(ForwardRequest {
            method: "POST".into(),
            path_and_query: "/api/v1/namespaces/default/events?x=1".into(),
            headers: vec![
                h("Content-Type", "application/vnd.kubernetes.protobuf"),
                h("Authorization", "Bearer client-token"),
                h("Connection", "keep-alive, X-Hop"),
                h("X-Hop", "1"),
                h("Host", "evil.example"),
                h("Content-Length", "999"),
                h("X-Keep", "yes"),
            ],
            body: body.clone(),
        })
        .unwrap();
    assert_eq!(resp.status, 201);
    assert!(resp.headers.iter().any(|(n, v)| n == "x-resp" && v == b"r"));
    assert!(!resp
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("connection")));
    assert_eq!(body_of(resp.body), b"{}");

    // Second request: no Authorization from the client → none upstream, despite the server token.
    let resp = up
        .forward(ForwardRequest {
            method: "PATCH".into(),
            path_and_query: "/apis/events.k8s.io/v1/namespaces/default/events/e1".into(),
            headers: vec![h("Content-Type", "application/strategic-merge-patch+json")],
            body: b"{\"series\":{}}".to_vec(),
        })
        .unwrap();
    assert!(!resp
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")));
    assert_eq!(body_of(resp.body), b"abc");

    let seen = server.join().unwrap();
    let first = &seen[0];
    assert_eq!(
        first.request_line,
        "POST /api/v1/namespaces/default/events?x=1 HTTP/1.1"
    );
    assert_eq!(first.body, body);
    assert_eq!(
        first.header("content-type"),
        Some(&b"application/vnd.kubernetes.protobuf"[..])
    );
    assert_eq!(
        first.header("authorization"),
        Some(&b"Bearer client-token"[..])
    );
    assert_eq!(first.header("x-keep"), Some(&b"yes"[..]));
    assert_eq!(first.header("x-hop"), None);
    assert_eq!(first.header("content-length"), Some(&b"9"[..]));
    let host = String::from_utf8(first.header("host").unwrap().to_vec()).unwrap();
    assert_eq!(format!("http://{host}"), url);

    let second = &seen[1];
    assert_eq!(
        second.request_line,
        "PATCH /apis/events.k8s.io/v1/namespaces/default/events/e1 HTTP/1.1"
    );
    assert_eq!(second.header("authorization"), None);
    assert_eq!(
        second.header("content-type"),
        Some(&b"application/strategic-merge-patch+json"[..])
    );
    assert_eq!(second.body, b"{\"series\":{}}");
}

#[test]
fn forward_to_a_closed_port_is_unreachable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let up = upstream(&format!("http://127.0.0.1:{port}"), None);
    let err = up
        .forward(ForwardRequest {
            method: "GET".into(),
            path_and_query: "/version".into(),
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Unreachable(_)), "{err:?}");
    assert!(matches!(
        up.list("/api/v1/nodes"),
        Err(UpstreamError::Unreachable(_))
    ));
}

#[test]
fn forward_rejects_unsendable_requests() {
    let up = upstream("http://127.0.0.1:9", None);
    for req in [
        ForwardRequest {
            method: "GET".into(),
            path_and_query: "nope".into(),
            ..Default::default()
        },
        ForwardRequest {
            method: "G T".into(),
            path_and_query: "/".into(),
            ..Default::default()
        },
        ForwardRequest {
            method: "GET".into(),
            path_and_query: "/".into(),
            headers: vec![("X-Bad".into(), b"a\nb".to_vec())],
            ..Default::default()
        },
    ] {
        assert!(matches!(
            up.forward(req),
            Err(UpstreamError::InvalidRequest(_))
        ));
    }
}
