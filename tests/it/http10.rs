//! HTTP/1.0 clients never get a chunked body (RFC 9112 §6.1, docs/SEMANTICS.md §1): a watch
//! and a proxied answer are close-delimited, with `Connection: close`. Over real sockets.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Sends `request` and reads until the server closes (bounded by a read timeout); returns the
/// head's lines and the body.
fn exchange(addr: SocketAddr, request: &str) -> (Vec<String>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(request.as_bytes()).expect("send");
    let mut all = Vec::new();
    s.take(4 << 20)
        .read_to_end(&mut all)
        .expect("the server closes the connection");
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..at])
        .lines()
        .map(str::to_string)
        .collect();
    (head, all[at + 4..].to_vec())
}

fn has(head: &[String], name: &str) -> Option<String> {
    head.iter().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn assert_close_delimited(head: &[String]) {
    assert!(head[0].starts_with("HTTP/1.1 "), "{head:?}");
    assert_eq!(has(head, "Transfer-Encoding"), None, "{head:?}");
    assert_eq!(has(head, "Content-Length"), None, "{head:?}");
    assert_eq!(
        has(head, "Connection").as_deref(),
        Some("close"),
        "{head:?}"
    );
}

#[test]
fn an_http10_watch_is_a_close_delimited_stream_of_events() {
    let shared = shared_demo();
    let w = &shared.w;
    let nodes = names(&w.get_json("/api/v1/services"));
    assert!(!nodes.is_empty());
    let (head, body) = exchange(
        w.addr,
        "GET /api/v1/services?watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1 HTTP/1.0\r\nHost: x\r\n\r\n",
    );
    assert!(head[0].starts_with("HTTP/1.1 200"), "{head:?}");
    assert_close_delimited(&head);
    // One JSON event per line, nothing else: the initial ADDED, the marker.
    let events: Vec<Value> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(l)))
        })
        .collect();
    let added: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(added, nodes);
    assert_eq!(events[nodes.len()]["type"], "BOOKMARK", "{events:?}");
}

#[test]
fn an_http10_proxied_answer_is_close_delimited_even_when_keep_alive_is_asked() {
    let shared = shared_demo();
    let w = &shared.w;
    let (head, body) = exchange(
        w.addr,
        "GET /api/v1/nodes/edge-a1/status HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    );
    assert!(head[0].starts_with("HTTP/1.1 404"), "{head:?}");
    assert_close_delimited(&head);
    let status: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&body)));
    assert_eq!(status["kind"], "Status", "the upstream's body, as sent");
    // An HTTP/1.1 client still gets it chunked.
    let (head, _) = exchange(
        w.addr,
        "GET /api/v1/nodes/edge-a1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(has(&head, "Transfer-Encoding").as_deref(), Some("chunked"));
}
