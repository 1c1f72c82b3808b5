//! Tests of `client.rs` against a tiny plain-HTTP server on 127.0.0.1.

use super::*;
use crate::upstream::forward::ForwardRequest;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;

/// One request as the fake server saw it.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) request_line: String,
    headers: Vec<(String, Vec<u8>)>,
    pub(crate) body: Vec<u8>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

fn read_request(s: &mut TcpStream) -> Seen {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "client closed early");
        buf.push(byte[0]);
    }
    let head = buf[..buf.len() - 4].to_vec();
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let request_line = String::from_utf8(lines.next().unwrap().to_vec()).unwrap();
    let headers: Vec<(String, Vec<u8>)> = lines
        .map(|l| {
            let i = l.iter().position(|&b| b == b':').unwrap();
            (
                String::from_utf8(l[..i].to_vec()).unwrap(),
                l[i + 1..].trim_ascii().to_vec(),
            )
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| std::str::from_utf8(v).unwrap().parse().unwrap());
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    Seen {
        request_line,
        headers,
        body,
    }
}

/// A `Connection: close` response with a computed Content-Length.
pub(crate) fn canned(status: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// Serves one canned response per connection (each closes after answering).
pub(crate) fn serve(responses: Vec<Vec<u8>>) -> (String, JoinHandle<Vec<Seen>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        responses
            .into_iter()
            .map(|resp| {
                let (mut s, _) = l.accept().unwrap();
                let seen = read_request(&mut s);
                s.write_all(&resp).unwrap();
                seen
            })
            .collect()
    });
    (url, h)
}

pub(crate) fn upstream(server: &str, token: Option<&str>) -> Upstream {
    let cfg = UpstreamConfig {
        server: server.into(),
        token: token.map(str::to_string),
        ..Default::default()
    };
    Upstream::new(&cfg, UpstreamOptions::default()).unwrap()
}

pub(crate) fn body_of(mut r: Box<dyn Read + Send>) -> Vec<u8> {
    let mut out = Vec::new();
    r.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn list_and_watch_send_the_token_and_decode_status_errors() {
    let (url, server) = serve(vec![
        canned("200 OK", r#"{"metadata":{"resourceVersion":"9"},"items":[{"metadata":{}}]}"#),
        canned("410 Gone", r#"{"kind":"Status","status":"Failure","reason":"Expired","message":"too old","code":410}"#),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline1\n\r\n6\r\nline2\n\r\n0\r\n\r\n".to_vec(),
        canned("200 OK", "[]"),
    ]);
    let up = upstream(&format!("{url}/"), Some("server-token"));
    let l = up.list("/api/v1/services?resourceVersion=0").unwrap();
    assert_eq!((l.resource_version.as_str(), l.items.len()), ("9", 1));
    let err = up
        .watch("/api/v1/services?watch=true", false)
        .err()
        .unwrap();
    assert_eq!(
        err,
        UpstreamError::Status {
            code: 410,
            reason: "Expired".into(),
            message: "too old".into(),
            causes: vec![],
            retry_after: None,
        }
    );
    let mut lines = up.watch("/api/v1/services?watch=true", false).unwrap();
    let mut s = String::new();
    lines.read_to_string(&mut s).unwrap();
    assert_eq!(s, "line1\nline2\n");
    // A 2xx list body that is not a list.
    assert!(matches!(
        up.list("/api/v1/services"),
        Err(UpstreamError::Decode(_))
    ));
    let seen = server.join().unwrap();
    assert_eq!(
        seen[0].request_line,
        "GET /api/v1/services?resourceVersion=0 HTTP/1.1"
    );
    for r in &seen {
        assert_eq!(r.header("authorization"), Some(&b"Bearer server-token"[..]));
        // Lists and watches prefer protobuf; a JSON answer is taken (the canned ones are JSON).
        assert_eq!(r.header("accept"), Some(ACCEPT_PROTOBUF.as_bytes()));
    }
}

#[test]
fn token_file_is_reread_at_most_every_interval_and_wins_over_token() {
    let dir = std::env::temp_dir().join(format!("gw-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let path = dir.join("token");
    std::fs::write(&path, "one\n").unwrap();
    let src = TokenSource::new(
        Some("static".into()),
        Some(path.clone()),
        Duration::from_secs(60),
    );
    let t0 = Instant::now();
    assert_eq!(src.current(t0).as_deref(), Some("one"));
    std::fs::write(&path, "two").unwrap();
    assert_eq!(
        src.current(t0 + Duration::from_secs(59)).as_deref(),
        Some("one")
    );
    assert_eq!(
        src.current(t0 + Duration::from_secs(60)).as_deref(),
        Some("two")
    );
    std::fs::remove_file(&path).unwrap();
    // Unreadable: keep the last good value.
    assert_eq!(
        src.current(t0 + Duration::from_secs(200)).as_deref(),
        Some("two")
    );
    // A token file that was never readable: the static token is used.
    let never_read = TokenSource::new(Some("static".into()), Some(path), Duration::from_secs(60));
    assert_eq!(never_read.current(t0).as_deref(), Some("static"));
    assert_eq!(
        TokenSource::new(Some(String::new()), None, Duration::ZERO).current(t0),
        None
    );
}

#[test]
fn token_bucket_paces_after_the_burst() {
    let t0 = Instant::now();
    let mut b = TokenBucket::new(2.0, 3, t0);
    assert_eq!(b.take(t0), None);
    assert_eq!(b.take(t0), None);
    assert_eq!(b.take(t0), None);
    assert_eq!(b.take(t0), Some(Duration::from_millis(500)));
    assert_eq!(b.take(t0), Some(Duration::from_millis(1000)));
    // 2 s later: 4 tokens accrued, 2 of them repay the reservations; 2 remain.
    let t2 = t0 + Duration::from_secs(2);
    assert_eq!(b.take(t2), None);
    assert_eq!(b.take(t2), None);
    assert_eq!(b.take(t2), Some(Duration::from_millis(500)));
    // Refill never exceeds the burst.
    let mut b = TokenBucket::new(2.0, 3, t0);
    let later = t0 + Duration::from_secs(3600);
    assert_eq!(
        (0..4).map(|_| b.take(later).is_none()).collect::<Vec<_>>(),
        [true, true, true, false]
    );
    let mut unlimited = TokenBucket::new(0.0, 0, t0);
    assert!((0..1000).all(|_| unlimited.take(t0).is_none()));
}

#[test]
fn bad_settings_are_config_errors() {
    let paced = UpstreamOptions {
        qps: 5.0,
        burst: 10,
        ..UpstreamOptions::default()
    };
    let base = UpstreamConfig {
        server: "https://10.0.0.1:6443".into(),
        insecure_skip_tls_verify: true,
        ..Default::default()
    };
    assert!(Upstream::new(&base, paced).is_ok());
    let cases = [
        UpstreamConfig {
            server: "ftp://x".into(),
            ..base.clone()
        },
        UpstreamConfig {
            server: "no scheme".into(),
            ..base.clone()
        },
        UpstreamConfig {
            server: "https://h/?q=1".into(),
            ..base.clone()
        },
        UpstreamConfig {
            ca_pem: Some(b"not pem".to_vec()),
            ..base.clone()
        },
        UpstreamConfig {
            ca_pem: Some(
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(),
            ),
            ..base.clone()
        },
        UpstreamConfig {
            client_cert_pem: Some(b"x".to_vec()),
            ..base.clone()
        },
        UpstreamConfig {
            client_cert_pem: Some(b"x".to_vec()),
            client_key_pem: Some(b"y".to_vec()),
            ..base.clone()
        },
    ];
    for cfg in cases {
        assert!(
            matches!(Upstream::new(&cfg, paced), Err(UpstreamError::Config(_))),
            "{cfg:?}"
        );
    }
}

#[test]
fn buffers_fit_the_largest_client_head_and_a_body_many_times_their_size() {
    // A client head at the server's limit (16 KiB of headers) must still fit the connection's
    // output buffer when forwarded, and a body much larger than the input buffer must arrive
    // whole (read in steps) — both through the lean buffers.
    let big = INPUT_BUF_BYTES * 5 + 17;
    let items: Vec<String> = (0..big / 40)
        .map(|i| format!(r#"{{"metadata":{{"name":"n{i:08}"}}}}"#))
        .collect();
    let list = format!(
        r#"{{"metadata":{{"resourceVersion":"3"}},"items":[{}]}}"#,
        items.join(",")
    );
    assert!(list.len() > 4 * INPUT_BUF_BYTES);
    let (url, server) = serve(vec![canned("200 OK", "{}"), canned("200 OK", &list)]);
    let up = upstream(&url, Some("server-token"));
    let filler = "x".repeat(crate::http::request::DEFAULT_MAX_HEAD - 200);
    let resp = up
        .forward(ForwardRequest {
            method: "GET".into(),
            path_and_query: "/version".into(),
            headers: vec![("X-Filler".into(), filler.clone().into_bytes())],
            body: vec![],
        })
        .unwrap();
    assert_eq!(resp.status, 200);
    let l = up.list("/api/v1/nodes").unwrap();
    assert_eq!(l.items.len(), items.len());
    let seen = server.join().unwrap();
    assert_eq!(seen[0].header("x-filler"), Some(filler.as_bytes()));
}

#[test]
fn a_response_head_over_the_limit_is_a_protocol_error_not_a_hang() {
    let huge = format!(
        "HTTP/1.1 200 OK\r\nX-Huge: {}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
        "h".repeat(MAX_RESPONSE_HEAD_BYTES + 1)
    );
    let ok = format!(
        "HTTP/1.1 200 OK\r\nX-Big: {}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
        "b".repeat(MAX_RESPONSE_HEAD_BYTES - 200)
    );
    let (url, server) = serve(vec![huge.into_bytes(), ok.into_bytes()]);
    let up = upstream(&url, None);
    let err = up.get_json("/version").unwrap_err();
    match &err {
        UpstreamError::Protocol(m) => assert!(m.contains("response head larger"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A head just under the limit is fine.
    assert!(up.get_json("/version").is_ok());
    server.join().unwrap();
}

/// `body` as a chunked response whose chunks are `n` bytes long.
fn chunked_response(body: &str, n: usize) -> Vec<u8> {
    chunked_coded(body.as_bytes(), n, None)
}

/// A chunked 200 of `n`-byte chunks, with a `Content-Encoding` if given.
fn chunked_coded(body: &[u8], n: usize, coding: Option<&str>) -> Vec<u8> {
    let coding = coding.map_or(String::new(), |c| format!("Content-Encoding: {c}\r\n"));
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\n{coding}Transfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for c in body.chunks(n) {
        out.extend(format!("{:x}\r\n", c.len()).into_bytes());
        out.extend(c);
        out.extend(b"\r\n");
    }
    out.extend(b"0\r\n\r\n");
    out
}

#[test]
fn a_list_arriving_in_small_chunks_is_split_into_its_items() {
    let big = "é\\\"]}".repeat(20_000);
    let body = format!(
        r#"{{"kind":"List","metadata":{{"resourceVersion":"7","continue":"c"}},"items":[{{"metadata":{{"name":"a","annotations":{{"x":"{big}"}}}}}},{{"metadata":{{"name":"b"}}}}]}}"#
    );
    let (url, server) = serve(vec![
        chunked_response(&body, 7),
        // Cut inside the second item, then closed: an error, not a shorter list.
        canned("200 OK", &body[..body.len() - 30]),
    ]);
    let up = upstream(&url, None);
    let l = up.list("/api/v1/services").unwrap();
    let origin = Some(RvOrigin {
        server: 0,
        domain: 0,
        role: crate::upstream::domain::Role::Cloud,
    });
    assert_eq!(l.origin, origin, "the one server answered");
    let plain = decode::decode_list(body.as_bytes()).unwrap();
    assert_eq!(l, ListResult { origin, ..plain });
    assert_eq!(l.items.len(), 2);
    assert_eq!(
        (l.resource_version.as_str(), l.continue_token.as_deref()),
        ("7", Some("c"))
    );
    let name =
        |i: &str| serde_json::from_str::<serde_json::Value>(i).unwrap()["metadata"]["name"].clone();
    assert_eq!(name(&l.items[1]), "b");
    assert!(matches!(
        up.list("/api/v1/services"),
        Err(UpstreamError::Decode(_))
    ));
    server.join().unwrap();
}

/// Records each item as it is handed over, and tells the server when the first one came.
struct Signalled {
    items: Vec<Box<str>>,
    first: Option<std::sync::mpsc::Sender<()>>,
    clears: usize,
}

impl ListItems for Signalled {
    fn push(&mut self, text: Box<str>) {
        self.items.push(text);
        if let Some(tx) = self.first.take() {
            let _ = tx.send(());
        }
    }
    fn clear(&mut self) {
        self.clears += 1;
        self.items.clear();
    }
    fn len(&self) -> usize {
        self.items.len()
    }
}

#[test]
fn a_lists_items_are_handed_over_while_the_rest_of_the_body_is_still_to_come() {
    let head =
        r#"{"kind":"List","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"}},"#;
    let rest = r#"{"metadata":{"name":"b"}}]}"#;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !seen.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the request ended early");
            seen.extend_from_slice(&buf[..n]);
        }
        let chunk = |t: &str| format!("{:x}\r\n{t}\r\n", t.len());
        let first = format!(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            chunk(head)
        );
        s.write_all(first.as_bytes()).unwrap();
        s.flush().unwrap();
        // The rest only once the first item was handed over (or after 10 s, which fails).
        let handed_early = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        s.write_all(format!("{}0\r\n\r\n", chunk(rest)).as_bytes())
            .unwrap();
        handed_early
    });
    let up = upstream(&url, None);
    let mut items = Signalled {
        items: Vec::new(),
        first: Some(tx),
        clears: 0,
    };
    let list = up.list_into("/api/v1/services", &mut items).unwrap();
    assert!(
        server.join().unwrap(),
        "the first item was not handed over before the body ended"
    );
    assert!(list.items.is_empty(), "the items went to the taker");
    assert_eq!(list.resource_version, "9");
    assert_eq!(items.clears, 1, "cleared once, before the attempt");
    let names: Vec<String> = items
        .items
        .iter()
        .map(|i| {
            serde_json::from_str::<serde_json::Value>(i).unwrap()["metadata"]["name"].to_string()
        })
        .collect();
    assert_eq!(names, ["\"a\"", "\"b\""]);
}

#[test]
fn a_list_with_a_bad_item_taken_as_read_is_an_error_whatever_was_handed_over() {
    let bodies = [
        // An item that is not an object, after one that was handed over.
        r#"{"kind":"List","metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"a"}},1]}"#,
        // An item that is not JSON.
        r#"{"kind":"List","metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"a"}},{"x":]}"#,
        // Cut short inside the second item.
        r#"{"kind":"List","metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"a"}},{"meta"#,
    ];
    let (url, server) = serve(bodies.iter().map(|b| canned("200 OK", b)).collect());
    let up = upstream(&url, None);
    for body in bodies {
        let mut items = Texts::default();
        let got = up.list_into("/api/v1/services", &mut items);
        assert!(
            matches!(got, Err(UpstreamError::Decode(_))),
            "{body}: {got:?}"
        );
        assert!(items.0.len() <= 1, "nothing after the bad item: {body}");
    }
    server.join().unwrap();
}

use super::encoding::tests::gzip;

#[test]
fn lists_ask_for_gzip_and_split_it_as_plain_while_watches_and_proxied_requests_do_not() {
    let big = "x".repeat(300 * 1024);
    let body = format!(
        r#"{{"kind":"List","metadata":{{"resourceVersion":"7"}},"items":[{{"metadata":{{"name":"a","annotations":{{"x":"{big}"}}}}}},{{"metadata":{{"name":"b"}}}}]}}"#
    );
    let packed = gzip(body.as_bytes());
    let mut corrupt = packed.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x55;
    let (url, server) = serve(vec![
        chunked_coded(&packed, 1000, Some("gzip")),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline1\n\r\n0\r\n\r\n".to_vec(),
        chunked_coded(&packed, 4096, Some("gzip")),
        chunked_coded(&corrupt, 4096, Some("gzip")),
        chunked_coded(body.as_bytes(), 4096, Some("br")),
    ]);
    let up = upstream(&url, None);
    let l = up.list("/api/v1/services").unwrap();
    let plain = decode::decode_list(body.as_bytes()).unwrap();
    assert_eq!(
        l,
        ListResult {
            origin: l.origin,
            ..plain
        }
    );
    let mut s = String::new();
    let mut lines = up.watch("/api/v1/services?watch=true", false).unwrap();
    lines.read_to_string(&mut s).unwrap();
    assert_eq!(s, "line1\n");
    // A proxied request keeps its own Accept-Encoding and gets the upstream's bytes as sent.
    let resp = up
        .forward(ForwardRequest {
            method: "GET".into(),
            path_and_query: "/api/v1/services".into(),
            headers: vec![("Accept-Encoding".into(), b"gzip".to_vec())],
            body: Vec::new(),
        })
        .unwrap();
    let coding = resp
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-encoding"));
    assert_eq!(coding.map(|(_, v)| v.as_slice()), Some(&b"gzip"[..]));
    assert_eq!(body_of(resp.body), packed);
    // A corrupt stream and an unknown coding are errors that say so.
    for want in [
        "content encoding: gzip: ",
        "content encoding: Content-Encoding \"br\"",
    ] {
        match up.list("/api/v1/services") {
            Err(e @ UpstreamError::Decode(DecodeError::Encoding(_))) => {
                assert!(e.to_string().contains(want), "{e}")
            }
            other => panic!("{want}: {other:?}"),
        }
    }
    let seen = server.join().unwrap();
    let accept = |i: usize| seen[i].header("accept-encoding");
    assert_eq!(accept(0), Some(&b"gzip"[..]), "the list");
    assert_eq!(accept(1), None, "the watch");
    assert_eq!(accept(2), Some(&b"gzip"[..]), "the proxied request");

    // With gzip off, a list does not ask for it.
    let (url, server) = serve(vec![canned("200 OK", &body)]);
    let off = with_lists(
        url,
        ListSettings {
            gzip: false,
            ..ListSettings::default()
        },
    );
    assert_eq!(off.list("/api/v1/services").unwrap().items.len(), 2);
    assert_eq!(server.join().unwrap()[0].header("accept-encoding"), None);
}

#[test]
fn a_gzipped_protobuf_list_is_split_as_the_same_list_in_json() {
    use crate::proto::encode::encode_object;
    use crate::proto::envelope::{list_head, CONTENT_TYPE, TAIL};
    use crate::upstream::proto_list::split_proto_list;
    let objs: Vec<_> = (0..50)
        .map(|i| {
            serde_json::json!({"metadata": {"name": format!("s{i}"), "namespace": "d",
            "annotations": {"x": "y".repeat(i * 500)}}})
        })
        .collect();
    let items: Vec<_> = objs
        .iter()
        .map(|o| encode_object(crate::k8s::Resource::Services, o).bytes)
        .collect();
    let mut body = list_head("v1", "ServiceList", "77", items.iter().map(Vec::len).sum());
    items.iter().for_each(|i| body.extend_from_slice(i));
    body.extend_from_slice(TAIL);
    let want = split_proto_list(&body, usize::MAX).unwrap();
    let packed = gzip(&body);
    let mut resp = chunked_coded(&packed, 1000, Some("gzip"));
    // The apiserver's Content-Type, with a parameter.
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let ct = format!("\r\nContent-Type: {CONTENT_TYPE}; charset=binary");
    resp.splice(at..at, ct.into_bytes());
    let (url, server) = serve(vec![resp]);
    let up = upstream(&url, None);
    let l = up.list("/api/v1/services").unwrap();
    assert_eq!(l.items, want.items);
    assert_eq!(l.items.len(), 50);
    assert_eq!(l.resource_version, "77");
    let seen = server.join().unwrap();
    assert_eq!(seen[0].header("accept"), Some(ACCEPT_PROTOBUF.as_bytes()));
    assert_eq!(seen[0].header("accept-encoding"), Some(&b"gzip"[..]));
}

#[test]
fn with_protobuf_off_lists_and_watches_ask_for_json_only() {
    let body =
        r#"{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#;
    let (url, server) = serve(vec![
        canned("200 OK", body),
        canned("200 OK", "{\"type\":\"BOOKMARK\"}\n"),
    ]);
    let up = with_lists(
        url,
        ListSettings {
            protobuf: false,
            ..ListSettings::default()
        },
    );
    assert_eq!(up.list("/api/v1/services").unwrap().resource_version, "5");
    let mut s = String::new();
    up.watch("/api/v1/services?watch=true", false)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 2);
    for r in &seen {
        assert_eq!(
            r.header("accept"),
            Some(&b"application/json"[..]),
            "{}",
            r.request_line
        );
    }
}

/// A client of `url` with `lists` and every other option at its default.
fn with_lists(url: String, lists: ListSettings) -> Upstream {
    let cfg = UpstreamConfig {
        server: url,
        ..Default::default()
    };
    let opts = UpstreamOptions {
        lists,
        ..UpstreamOptions::default()
    };
    Upstream::new(&cfg, opts).unwrap()
}
