//! Tests of the edge-health poller against a tiny plain-HTTP server on 127.0.0.1.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;

fn read_head(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) != 1 {
            break;
        }
        buf.push(byte[0]);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn canned(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers each connection with the next response (`None`: read the request, never answer,
/// hold the connection for a while); returns the URL and the request heads seen.
fn serve(responses: Vec<Option<Vec<u8>>>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/localinfo", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for resp in responses {
            let (mut s, _) = l.accept().unwrap();
            seen.push(read_head(&mut s));
            match resp {
                Some(bytes) => {
                    let _ = s.write_all(&bytes);
                }
                None => std::thread::sleep(Duration::from_secs(1)),
            }
        }
        seen
    });
    (url, h)
}

/// A port nothing listens on.
fn refused_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/localinfo")
}

const BODY: &str = r#"{"10.0.0.2":{"normal":false,"hmac":"x","time":1},"n1":{"normal":true}}"#;

#[test]
fn a_200_with_a_good_body_is_an_answer() {
    let (url, h) = serve(vec![Some(canned("200 OK", BODY))]);
    let got = poll(&agent(&url, POLL_TIMEOUT).unwrap(), &url).unwrap();
    let want: EdgeHealthMap = [("10.0.0.2".to_string(), false), ("n1".to_string(), true)].into();
    assert_eq!(got, want);
    let seen = h.join().unwrap();
    assert!(
        seen[0].starts_with("GET /localinfo HTTP/1.1\r\n"),
        "{seen:?}"
    );
    assert!(!seen[0].to_ascii_lowercase().contains("authorization"));
}

#[test]
fn everything_else_is_a_failed_poll() {
    let cases = [
        canned("500 Internal Server Error", BODY),
        canned("404 Not Found", BODY),
        canned("204 No Content", ""),
        canned("201 Created", BODY),
        b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n".to_vec(),
        canned("200 OK", "{not json"),
        canned("200 OK", "[]"),
        canned("200 OK", "null"),
        canned("200 OK", ""),
    ];
    for resp in cases {
        let what = String::from_utf8_lossy(&resp).into_owned();
        let (url, h) = serve(vec![Some(resp)]);
        assert!(
            poll(&agent(&url, POLL_TIMEOUT).unwrap(), &url).is_err(),
            "{what}"
        );
        h.join().unwrap();
    }
    let url = refused_url();
    assert!(poll(&agent(&url, POLL_TIMEOUT).unwrap(), &url).is_err());
}

#[test]
fn a_silent_server_times_out() {
    let (url, h) = serve(vec![None]);
    let started = Instant::now();
    let err = poll(&agent(&url, Duration::from_millis(300)).unwrap(), &url).unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(900), "{err}");
    h.join().unwrap();
}

#[test]
fn bad_addresses_are_rejected_at_spawn() {
    for address in [
        "",
        "localhost:51005",
        "ftp://x/",
        "http:///localinfo",
        "http://",
    ] {
        let err = spawn(
            address.to_string(),
            Duration::from_secs(1),
            Box::new(|_| {}),
            Arc::new(AtomicBool::new(false)),
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{address:?}");
    }
}

#[test]
fn the_thread_reports_every_poll_and_stops_promptly() {
    // First poll answers, second fails (500), third answers again.
    let (url, h) = serve(vec![
        Some(canned("200 OK", BODY)),
        Some(canned("500 Internal Server Error", "{}")),
        Some(canned("200 OK", r#"{"n1":{"normal":false}}"#)),
    ]);
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let handle = spawn(
        url,
        Duration::from_millis(50),
        Box::new(move |m| {
            let _ = tx.send(m);
        }),
        stop.clone(),
    )
    .unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(rx.recv_timeout(wait).unwrap().len(), 2);
    assert!(
        rx.recv_timeout(wait).unwrap().is_empty(),
        "a failed poll reports an empty map"
    );
    let third = rx.recv_timeout(wait).unwrap();
    assert_eq!(third.get("n1"), Some(&false));
    h.join().unwrap();
    // The server is gone: polls now fail (connection refused), still reported.
    assert!(rx.recv_timeout(wait).unwrap().is_empty());
    stop.store(true, Ordering::Relaxed);
    let started = Instant::now();
    handle.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn stop_interrupts_a_long_interval() {
    let (url, h) = serve(vec![Some(canned("200 OK", BODY))]);
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let handle = spawn(
        url,
        Duration::from_secs(3600),
        Box::new(move |m| {
            let _ = tx.send(m);
        }),
        stop.clone(),
    )
    .unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap().len(), 2);
    h.join().unwrap();
    let started = Instant::now();
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
}
