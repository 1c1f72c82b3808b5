//! In-process end-to-end tests: the server runs on `127.0.0.1:0` and is driven over real
//! sockets with a tiny HTTP/1.1 client (fixed-length answers and chunked watch streams).

use crate::routes::SliceVersions;
use crate::server::{self, Shared};
use crate::{fixture, store};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) fn start_with(
    slices: SliceVersions,
    bookmark: Option<Duration>,
    token: Option<&str>,
) -> SocketAddr {
    let mut st = store::Store::new(1000);
    for o in fixture::demo() {
        st.apply(o).expect("fixture");
    }
    let shared = Arc::new(Shared::new(st, slices, bookmark, token.map(str::to_string)));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || server::serve(listener, shared, None));
    addr
}

pub(crate) fn start() -> SocketAddr {
    start_with(SliceVersions::V1, None, None)
}

/// Sends one request with `Connection: close`; returns (status, raw head, body).
pub(crate) fn call(
    addr: SocketAddr,
    method: &str,
    target: &str,
    extra: &str,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    s.write_all(body).expect("write");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("head end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let code = head[9..12].parse().expect("status code");
    (code, head, raw[split + 4..].to_vec())
}

pub(crate) fn get_json(addr: SocketAddr, target: &str) -> (u16, Value) {
    let (code, _, body) = call(addr, "GET", target, "", b"");
    (code, serde_json::from_slice(&body).expect("JSON body"))
}

pub(crate) fn sim(addr: SocketAddr, op: &str, body: Value) -> Value {
    let (code, _, b) = call(
        addr,
        "POST",
        &format!("/sim/{op}"),
        "",
        body.to_string().as_bytes(),
    );
    assert_eq!(code, 200, "{op}: {}", String::from_utf8_lossy(&b));
    serde_json::from_slice(&b).expect("JSON")
}

/// A watch stream: reads the head, then chunked event lines.
pub(crate) struct Watch {
    r: BufReader<TcpStream>,
    pending: Vec<u8>,
}

impl Watch {
    pub(crate) fn open(addr: SocketAddr, target: &str) -> Watch {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(s, "GET {target} HTTP/1.1\r\nHost: sim\r\n\r\n").expect("write");
        let mut r = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            r.read_line(&mut line).expect("head line");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
        Watch {
            r,
            pending: Vec::new(),
        }
    }

    /// Next event, or `None` at the terminating chunk.
    pub(crate) fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(nl) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=nl).collect();
                return Some(serde_json::from_slice(&line).expect("event JSON"));
            }
            let mut size = String::new();
            self.r.read_line(&mut size).expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
            let mut data = vec![0; n + 2];
            self.r.read_exact(&mut data).expect("chunk data");
            if n == 0 {
                return None;
            }
            self.pending.extend_from_slice(&data[..n]);
        }
    }

    pub(crate) fn next_of(&mut self, ty: &str) -> Value {
        loop {
            let ev = self.next().expect("stream open");
            if ev["type"] == ty {
                return ev;
            }
        }
    }

    /// Whether nothing at all (no byte) comes for `d`.
    pub(crate) fn silent_for(&mut self, d: Duration) -> bool {
        let s = self.r.get_ref();
        s.set_read_timeout(Some(d)).expect("timeout");
        let quiet = self.pending.is_empty()
            && self.r.buffer().is_empty()
            && matches!(self.r.fill_buf(), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        self.r
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        quiet
    }

    /// Reads to the end of the connection: whether it ended without the terminating chunk (cut).
    pub(crate) fn cut(&mut self) -> bool {
        let mut rest = Vec::new();
        let _ = self.r.read_to_end(&mut rest);
        !rest.ends_with(b"0\r\n\r\n")
    }
}

#[test]
fn list_then_watch_receives_applied_change() {
    let addr = start();
    let (code, nodes) = get_json(addr, "/api/v1/nodes");
    assert_eq!(code, 200);
    assert_eq!(nodes["kind"], "NodeList");
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(4));
    let rv = nodes["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();

    let mut w = Watch::open(
        addr,
        &format!("/api/v1/services?watch=true&resourceVersion={rv}"),
    );
    let applied = sim(
        addr,
        "apply",
        json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "new-svc", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.99", "ports": [{"port": 80}]}}),
    );
    assert_eq!(applied["type"], "ADDED");
    let ev = w.next().expect("event");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Service");
    assert_eq!(ev["object"]["apiVersion"], "v1");
    assert_eq!(ev["object"]["metadata"]["name"], "new-svc");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        applied["resourceVersion"]
    );
    assert!(
        applied["resourceVersion"]
            .as_str()
            .expect("rv")
            .parse::<u64>()
            .expect("num")
            > rv.parse::<u64>().expect("num")
    );

    // Deletion arrives as DELETED; a node relabel is invisible on the services watch.
    sim(
        addr,
        "label-node",
        json!({"name": "edge-a1", "labels": {"zone": "zone-b"}}),
    );
    let del = sim(
        addr,
        "delete",
        json!({"kind": "Service", "namespace": "default", "name": "new-svc"}),
    );
    let ev = w.next().expect("event");
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        del["resourceVersion"]
    );
    // Both events' lines are counted as watch bytes (each at least its object).
    let (_, state) = get_json(addr, "/sim/state");
    let counted = state["served"]["watchBytes"].as_u64().unwrap_or(0);
    let least = 2 * serde_json::to_vec(&ev["object"]).map_or(0, |b| b.len()) as u64;
    assert!(counted >= least, "{counted} < {least}: {state}");
}

#[test]
fn watch_from_zero_lists_then_follows_and_close_watches_ends_cleanly() {
    let addr = start();
    let target = "/apis/discovery.k8s.io/v1/endpointslices?watch=1&labelSelector=kubernetes.io%2Fservice-name%3Dweb";
    let mut w = Watch::open(addr, target);
    let first = w.next().expect("initial");
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "web-abc12");
    assert_eq!(first["object"]["apiVersion"], "discovery.k8s.io/v1");
    sim(
        addr,
        "delete",
        json!({"kind": "EndpointSlice", "name": "api-xyz89"}),
    ); // filtered out
    sim(addr, "close-watches", json!({}));
    assert!(
        w.next().is_none(),
        "terminating chunk, no event for the api slice"
    );
}

#[test]
fn resume_replays_and_old_rvs_get_410() {
    let addr = start();
    let (_, list) = get_json(addr, "/api/v1/nodes");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    sim(
        addr,
        "label-node",
        json!({"name": "edge-c1", "labels": {"rack": "r7"}}),
    );
    // Resuming from the list RV replays the change made since.
    let mut w = Watch::open(
        addr,
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
    );
    let ev = w.next().expect("replayed");
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["metadata"]["labels"]["rack"], "r7");
    let t0 = Instant::now();
    assert!(w.next().is_none(), "timeoutSeconds ends the stream");
    assert!(t0.elapsed() < Duration::from_secs(5));

    sim(addr, "compact", json!({}));
    for bad in [rv.as_str(), "99999999", "abc"] {
        let mut w = Watch::open(
            addr,
            &format!("/api/v1/nodes?watch=true&resourceVersion={bad}"),
        );
        let ev = w.next().expect("error event");
        assert_eq!(ev["type"], "ERROR", "rv {bad}");
        assert_eq!(ev["object"]["code"], 410);
        assert_eq!(ev["object"]["reason"], "Expired");
        assert_eq!(ev["object"]["kind"], "Status");
        assert!(w.next().is_none());
    }
}

#[test]
fn bookmarks_carry_the_current_rv() {
    let addr = start_with(SliceVersions::Both, Some(Duration::from_millis(200)), None);
    let mut w = Watch::open(
        addr,
        "/apis/discovery.k8s.io/v1beta1/endpointslices?watch=true&allowWatchBookmarks=true",
    );
    let first = w.next_of("ADDED");
    assert_eq!(first["object"]["apiVersion"], "discovery.k8s.io/v1beta1");
    let state = get_json(addr, "/sim/state").1;
    let bm = w.next_of("BOOKMARK");
    assert_eq!(bm["object"]["kind"], "EndpointSlice");
    assert_eq!(bm["object"]["apiVersion"], "discovery.k8s.io/v1beta1");
    assert_eq!(
        bm["object"]["metadata"]["resourceVersion"],
        state["resourceVersion"]
    );
    assert_eq!(state["openWatches"], 1);
}

#[test]
fn other_requests_are_recorded_and_echoed() {
    let addr = start_with(SliceVersions::V1, None, Some("s3cret"));
    let auth = "Authorization: Bearer s3cret\r\n";
    let body = b"k8s\x00\x01\xffevent";
    let (code, head, echoed) = call(
        addr,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events?x=1",
        &format!("{auth}Content-Type: application/vnd.kubernetes.protobuf\r\n"),
        body,
    );
    assert_eq!(code, 201);
    assert!(
        head.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{head}"
    );
    assert_eq!(echoed, body);
    let (code, _, _) = call(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/events/e1",
        auth,
        b"{}",
    );
    assert_eq!(code, 200);
    let (code, _, b) = call(addr, "GET", "/api/v1/nodes/edge-a1/status", auth, b"");
    assert_eq!(code, 404);
    let st: Value = serde_json::from_slice(&b).expect("status");
    assert_eq!(st["status"], "Failure");
    // Without the token: 401, not recorded. v1beta1 is not served here: 404, recorded.
    let (code, _, _) = call(addr, "GET", "/api/v1/nodes", "", b"");
    assert_eq!(code, 401);
    let (code, _, _) = call(
        addr,
        "GET",
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        auth,
        b"",
    );
    assert_eq!(code, 404);

    let (code, recs) = get_json(addr, "/sim/requests");
    assert_eq!(code, 200);
    let recs = recs.as_array().expect("array");
    assert_eq!(recs.len(), 4);
    assert_eq!(recs[0]["method"], "POST");
    assert_eq!(
        recs[0]["path"],
        "/apis/events.k8s.io/v1/namespaces/default/events"
    );
    assert_eq!(recs[0]["query"], "x=1");
    assert_eq!(
        recs[0]["body"],
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body)
    );
    assert_eq!(
        recs[0]["contentType"],
        "application/vnd.kubernetes.protobuf"
    );
    assert_eq!(recs[0]["authorization"], "Bearer s3cret");
    assert_eq!(recs[1]["method"], "PATCH");
    assert_eq!(sim(addr, "requests/clear", json!({}))["cleared"], 4);
    assert_eq!(get_json(addr, "/sim/requests").1, json!([]));
}

#[test]
fn bad_input_gets_status_errors() {
    let addr = start();
    let cases: &[(&str, &str, &[u8], u16)] = &[
        (
            "GET",
            "/api/v1/services?labelSelector=a%20in%20(b)",
            b"",
            400,
        ),
        (
            "GET",
            "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue",
            b"",
            400,
        ),
        (
            "GET",
            "/api/v1/nodes?watch=true&timeoutSeconds=soon",
            b"",
            400,
        ),
        ("GET", "/api/v1/nodes/nope", b"", 404),
        (
            "GET",
            "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            b"",
            422,
        ),
        ("POST", "/sim/apply", b"{not json", 400),
        (
            "POST",
            "/sim/apply",
            b"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}",
            400,
        ),
        (
            "POST",
            "/sim/delete",
            b"{\"kind\":\"Node\",\"name\":\"ghost\"}",
            404,
        ),
        ("POST", "/sim/label-node", b"{\"name\":\"edge-a1\"}", 400),
        ("GET", "/sim/unknown", b"", 404),
    ];
    for (m, t, body, want) in cases {
        let (code, _, b) = call(addr, m, t, "", body);
        assert_eq!(code, *want, "{m} {t}");
        let st: Value = serde_json::from_slice(&b).expect("Status JSON");
        assert_eq!(
            (st["kind"].as_str(), st["code"].as_u64()),
            (Some("Status"), Some(u64::from(*want)))
        );
    }
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"\x16\x03\x01garbage\r\n\r\n").expect("write");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    assert!(
        raw.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    // The server survived.
    assert_eq!(get_json(addr, "/sim/state").0, 200);
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let addr = start();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /api/v1/nodes/edge-b1 HTTP/1.1\r\n\r\nGET /apis/discovery.k8s.io HTTP/1.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    assert_eq!(raw.matches("HTTP/1.1 200 OK").count(), 2, "{raw}");
    assert!(raw.contains("\"APIGroup\""));
}

#[test]
fn lists_over_the_threshold_are_gzipped_for_clients_that_ask_and_the_served_log_says_so() {
    use flate2::read::GzDecoder;
    let addr = start();
    sim(
        addr,
        "pad-node",
        json!({"name": "edge-a1", "bytes": 200_000}),
    );
    let gz = "Accept-Encoding: gzip\r\n";
    let (code, head, packed) = call(addr, "GET", "/api/v1/nodes", gz, b"");
    assert_eq!(code, 200);
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    let mut body = Vec::new();
    GzDecoder::new(&packed[..])
        .read_to_end(&mut body)
        .expect("a gzip stream");
    let (_, plain_head, plain) = call(addr, "GET", "/api/v1/nodes", "", b"");
    assert!(!plain_head.contains("Content-Encoding"), "{plain_head}");
    assert_eq!(body, plain);
    assert!(packed.len() < plain.len() / 10);
    // Under the threshold: plain, asked or not. A watch: never compressed.
    let (_, small_head, _) = call(addr, "GET", "/api/v1/services", gz, b"");
    assert!(!small_head.contains("Content-Encoding"), "{small_head}");
    let (_, watch_head, _) = call(
        addr,
        "GET",
        "/api/v1/nodes?watch=true&timeoutSeconds=1",
        gz,
        b"",
    );
    assert!(!watch_head.contains("Content-Encoding"), "{watch_head}");

    let (_, served) = get_json(addr, "/sim/served");
    let row = |i: usize| {
        let r = &served[i];
        (
            r["verb"].as_str().unwrap_or("").to_string(),
            r["path"].as_str().unwrap_or("").to_string(),
            r["acceptEncoding"].clone(),
            r["contentEncoding"].clone(),
        )
    };
    let rows: Vec<_> = (0..4).map(row).collect();
    assert_eq!(
        rows,
        [
            (
                "list".into(),
                "/api/v1/nodes".into(),
                json!("gzip"),
                json!("gzip")
            ),
            (
                "list".into(),
                "/api/v1/nodes".into(),
                Value::Null,
                Value::Null
            ),
            (
                "list".into(),
                "/api/v1/services".into(),
                json!("gzip"),
                Value::Null
            ),
            (
                "watch".into(),
                "/api/v1/nodes".into(),
                json!("gzip"),
                Value::Null
            ),
        ]
    );
    assert_eq!(served[0]["bytes"], packed.len());
    assert_eq!(served[0]["plainBytes"], plain.len());
    assert_eq!(served[1]["bytes"], plain.len());
    let (_, state) = get_json(addr, "/sim/state");
    assert_eq!(state["served"]["gzippedLists"], 1);
    let listed = state["served"]["listBytes"].as_u64().unwrap_or(0);
    assert!(listed > (packed.len() + plain.len()) as u64, "{state}");
    // Cleared with the recorded requests.
    sim(addr, "requests/clear", json!({}));
    assert_eq!(get_json(addr, "/sim/served").1, json!([]));
}

/// `--fixture scale --shape real`: the store takes every object as given (its uids and
/// timestamps kept), and `fixture::list_bytes` is what a LIST without a selector serves.
#[test]
fn real_shaped_scale_fixture_is_served_as_given_and_list_bytes_are_the_served_bodies() {
    let p = fixture::ScaleParams {
        nodes: 12,
        services: 30,
        shape: fixture::Shape::Real,
        ..fixture::ScaleParams::default()
    };
    let objs = fixture::objects(fixture::Fixture::Scale(p));
    let mut st = store::Store::new(1000);
    for o in objs.clone() {
        st.apply(o).expect("fixture");
    }
    let lists = fixture::list_bytes(&st);
    let shared = Arc::new(Shared::new(st, SliceVersions::V1, None, None));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || server::serve(listener, shared, None));
    let paths = [
        ("nodes", "/api/v1/nodes", 12),
        ("services", "/api/v1/services", 30),
        ("endpoints", "/api/v1/endpoints", 30),
        (
            "endpointslices",
            "/apis/discovery.k8s.io/v1/endpointslices",
            30,
        ),
        ("servicecidrs", "/apis/networking.k8s.io/v1/servicecidrs", 0),
    ];
    assert_eq!(lists.len(), paths.len());
    for ((plural, path, n), (listed, items, bytes)) in paths.into_iter().zip(&lists) {
        assert_eq!((plural, n), (*listed, *items));
        let (code, _, body) = call(addr, "GET", path, "", b"");
        assert_eq!(code, 200, "{path}");
        assert_eq!(body.len(), *bytes, "{path}");
    }
    let (_, node) = get_json(addr, "/api/v1/nodes/node-00003");
    let given = objs
        .iter()
        .find(|o| o["metadata"]["name"] == "node-00003")
        .expect("node-00003");
    for k in ["uid", "creationTimestamp", "managedFields", "annotations"] {
        assert_eq!(node["metadata"][k], given["metadata"][k], "{k}");
    }
    assert_eq!(node["status"], given["status"]);
    let line = fixture::list_bytes_line(&lists);
    let total: usize = lists.iter().map(|l| l.2).sum();
    assert!(line.starts_with("nodes 12 items "), "{line}");
    assert!(line.contains(&format!("total {total} B")), "{line}");
}
