//! Protobuf answers over real sockets: lists, GETs and watches for a client preferring
//! `application/vnd.kubernetes.protobuf`, read back with the product's envelope decoders and
//! `proto::decode`, and `--no-protobuf` (JSON whatever the `Accept`).

use crate::routes::SliceVersions;
use crate::server::{self, Shared};
use crate::tests::{call, get_json, sim};
use crate::{fixture, store};
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::decode::decode_object;
use grid_wrapper::proto::envelope::{self, decode_frame, decode_list, event_json, unwrap_body};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// The reflector's `Accept`.
const PB: &str = "Accept: application/vnd.kubernetes.protobuf, application/json\r\n";

fn start_pb(protobuf: bool, bookmark: Option<Duration>) -> SocketAddr {
    let mut st = store::Store::new(1000);
    for o in fixture::demo() {
        st.apply(o).expect("fixture");
    }
    let mut shared = Shared::new(st, SliceVersions::Both, bookmark, None);
    shared.protobuf = protobuf;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let shared = Arc::new(shared);
    std::thread::spawn(move || server::serve(listener, shared, None));
    addr
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A protobuf LIST body as JSON: (kind, apiVersion, resourceVersion, items).
fn decode_list_body(res: Resource, body: &[u8]) -> (String, String, String, Vec<Value>) {
    let b = unwrap_body(body).expect("a protobuf body");
    let list = decode_list(b.raw).expect("a List");
    let items = list
        .items
        .iter()
        .map(|item| {
            let d = decode_object(res, item, None).expect("an item");
            assert!(d.unknown.is_empty(), "{:?}", d.unknown);
            serde_json::from_slice(&d.json).expect("decoded JSON")
        })
        .collect();
    (
        b.kind.to_string(),
        b.api_version.to_string(),
        list.resource_version.to_string(),
        items,
    )
}

/// Whether `v` is a Go zero value as Go's JSON writes it (what protobuf adds for a value field
/// the stored JSON leaves out): `null`, `""`, `0`, `false`, or an object of zeros.
fn go_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(go_zero),
    }
}

/// `got` (decoded from protobuf) holds every value of `want` (the JSON answer's), and beyond
/// them only Go zero values: the stored JSON leaves out fields an apiserver's Go types always
/// write, and protobuf writes them.
fn assert_same_but_zeros(got: &Value, want: &Value, at: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let gv = g.get(k).unwrap_or(&Value::Null);
                assert_same_but_zeros(gv, wv, &format!("{at}.{k}"));
            }
            for (k, gv) in g.iter().filter(|(k, _)| !w.contains_key(*k)) {
                assert!(go_zero(gv), "{at}.{k}: {gv} added");
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{at}");
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                assert_same_but_zeros(gv, wv, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(got, want, "{at}"),
    }
}

const COLLECTIONS: &[(Resource, &str)] = &[
    (Resource::Nodes, "/api/v1/nodes"),
    (Resource::Services, "/api/v1/services"),
    (Resource::Endpoints, "/api/v1/endpoints"),
    (
        Resource::SlicesV1,
        "/apis/discovery.k8s.io/v1/endpointslices",
    ),
    (
        Resource::SlicesV1beta1,
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
    ),
    (Resource::CidrsV1, "/apis/networking.k8s.io/v1/servicecidrs"),
];

#[test]
fn protobuf_lists_hold_the_json_lists_items() {
    let addr = start_pb(true, None);
    for (res, path) in COLLECTIONS {
        let (code, head, body) = call(addr, "GET", path, PB, b"");
        assert_eq!(code, 200, "{path}");
        assert_eq!(
            header(&head, "content-type"),
            Some(envelope::CONTENT_TYPE),
            "{path}"
        );
        let (kind, api_version, rv, items) = decode_list_body(*res, &body);
        let (_, want) = get_json(addr, path);
        assert_eq!(kind, res.list_kind(), "{path}");
        assert_eq!(api_version, res.api_version(), "{path}");
        assert_eq!(json!(rv), want["metadata"]["resourceVersion"], "{path}");
        let want_items = want["items"].as_array().expect("items");
        assert!(!want_items.is_empty(), "{path}: the demo has some");
        assert_eq!(items.len(), want_items.len(), "{path}");
        for (got, want) in items.iter().zip(want_items) {
            assert_same_but_zeros(got, want, path);
        }
    }
    // A selector selects the same items in protobuf.
    let path = "/api/v1/namespaces/default/services?labelSelector=app%3Dweb";
    let (_, _, body) = call(addr, "GET", path, PB, b"");
    let (_, want) = get_json(addr, path);
    assert_eq!(want["items"].as_array().map(Vec::len), Some(1), "{want}");
    assert_same_but_zeros(
        &json!(decode_list_body(Resource::Services, &body).3),
        &want["items"],
        path,
    );
    // JSON clients are unchanged, whatever else they accept.
    for accept in [
        "",
        "Accept: application/json\r\n",
        "Accept: application/json, application/vnd.kubernetes.protobuf\r\n",
    ] {
        let (_, head, body) = call(addr, "GET", "/api/v1/nodes", accept, b"");
        assert_eq!(header(&head, "content-type"), Some("application/json"));
        serde_json::from_slice::<Value>(&body).expect("JSON");
    }
    let (_, served) = get_json(addr, "/sim/served");
    assert_eq!(served[0]["format"], "protobuf");
    assert_eq!(served[1]["format"], "json");
    let (_, state) = get_json(addr, "/sim/state");
    assert_eq!(state["served"]["protobufLists"], COLLECTIONS.len() + 1);
}

#[test]
fn protobuf_gets_hold_the_json_object_and_errors_stay_json() {
    let addr = start_pb(true, None);
    for (res, path) in [
        (Resource::Nodes, "/api/v1/nodes/edge-a1"),
        (
            Resource::SlicesV1beta1,
            "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/web-abc12",
        ),
    ] {
        let (code, head, body) = call(addr, "GET", path, PB, b"");
        assert_eq!(code, 200);
        assert_eq!(header(&head, "content-type"), Some(envelope::CONTENT_TYPE));
        let b = unwrap_body(&body).expect("a protobuf body");
        let d = decode_object(res, b.raw, Some(b.type_meta())).expect("an object");
        let got: Value = serde_json::from_slice(&d.json).expect("JSON");
        assert_same_but_zeros(&got, &get_json(addr, path).1, path);
    }
    let (code, head, body) = call(addr, "GET", "/api/v1/nodes/nope", PB, b"");
    assert_eq!(code, 404);
    assert_eq!(header(&head, "content-type"), Some("application/json"));
    serde_json::from_slice::<Value>(&body).expect("a JSON Status");
    assert_eq!(get_json(addr, "/sim/state").1["served"]["protobufGets"], 2);
}

#[test]
fn large_protobuf_lists_are_gzipped_as_json_ones() {
    use flate2::read::GzDecoder;
    let addr = start_pb(true, None);
    sim(
        addr,
        "pad-node",
        json!({"name": "edge-a1", "bytes": 200_000}),
    );
    let accept = format!("{PB}Accept-Encoding: gzip\r\n");
    let (_, head, packed) = call(addr, "GET", "/api/v1/nodes", &accept, b"");
    assert_eq!(header(&head, "content-encoding"), Some("gzip"));
    assert_eq!(header(&head, "content-type"), Some(envelope::CONTENT_TYPE));
    let mut body = Vec::new();
    GzDecoder::new(&packed[..])
        .read_to_end(&mut body)
        .expect("a gzip stream");
    let (_, _, plain) = call(addr, "GET", "/api/v1/nodes", PB, b"");
    assert_eq!(body, plain);
    let (_, served) = get_json(addr, "/sim/served");
    assert_eq!(served[0]["contentEncoding"], "gzip");
    assert_eq!(served[0]["plainBytes"], plain.len());
    assert_eq!(served[0]["format"], "protobuf");
}

/// A protobuf watch stream: the head, then length-framed events in chunks.
struct PbWatch {
    r: BufReader<TcpStream>,
    head: String,
    pending: Vec<u8>,
}

impl PbWatch {
    fn open(addr: SocketAddr, target: &str, accept: &str) -> PbWatch {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(s, "GET {target} HTTP/1.1\r\nHost: sim\r\n{accept}\r\n").expect("write");
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
        PbWatch {
            r,
            head,
            pending: Vec::new(),
        }
    }

    /// Reads one chunk into `pending`; false at the terminating chunk.
    fn fill(&mut self) -> bool {
        let mut size = String::new();
        self.r.read_line(&mut size).expect("chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
        let mut data = vec![0; n + 2];
        self.r.read_exact(&mut data).expect("chunk data");
        self.pending.extend_from_slice(&data[..n]);
        n > 0
    }

    /// The next event as its JSON watch line, or `None` at the end of the stream.
    fn next(&mut self, res: Resource) -> Option<Value> {
        loop {
            let got = decode_frame(&self.pending, 1 << 24).expect("a frame");
            if let Some((ev, used)) = got {
                let line = event_json(res, &ev).expect("an event").json;
                self.pending.drain(..used);
                return Some(serde_json::from_slice(&line).expect("event JSON"));
            }
            if !self.fill() {
                assert!(self.pending.is_empty(), "a partial frame at the end");
                return None;
            }
        }
    }
}

/// Most events read while waiting for one (bookmarks come every 200 ms).
const BOUND: usize = 50;

#[test]
fn protobuf_watches_frame_every_event_bookmarks_and_errors() {
    let addr = start_pb(true, Some(Duration::from_millis(200)));
    let res = Resource::Services;
    let mut w = PbWatch::open(
        addr,
        "/api/v1/services?watch=true&allowWatchBookmarks=true",
        PB,
    );
    assert_eq!(
        header(&w.head, "content-type"),
        Some(envelope::WATCH_CONTENT_TYPE)
    );
    let (_, list) = get_json(addr, "/api/v1/services");
    let items = list["items"].as_array().expect("items").len();
    let mut added = Vec::new();
    for _ in 0..items {
        let ev = w.next(res).expect("initial");
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"]["kind"], "Service");
        added.push(ev["object"]["metadata"]["name"].clone());
    }
    let names: Vec<Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].clone())
        .collect();
    assert_eq!(added, names);
    let svc = |port: u16| {
        json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": "new-svc", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.99", "ports": [{"port": port}]}})
    };
    let a = sim(addr, "apply", svc(80));
    let m = sim(addr, "apply", svc(81));
    let d = sim(
        addr,
        "delete",
        json!({"kind": "Service", "namespace": "default", "name": "new-svc"}),
    );
    // Bookmarks may come between the changes; a bounded number of events holds them all.
    let mut seen = Vec::new();
    for _ in 0..BOUND {
        let ev = w.next(res).expect("event");
        if ev["type"] != "BOOKMARK" {
            seen.push(ev);
        }
        if seen.len() == 3 {
            break;
        }
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    let want = [("ADDED", &a, 80), ("MODIFIED", &m, 81), ("DELETED", &d, 81)];
    for (ev, (ty, applied, port)) in seen.iter().zip(want) {
        assert_eq!(ev["type"], ty);
        assert_eq!(ev["object"]["metadata"]["name"], "new-svc");
        assert_eq!(
            ev["object"]["metadata"]["resourceVersion"],
            applied["resourceVersion"]
        );
        assert_eq!(ev["object"]["spec"]["ports"][0]["port"], port);
    }
    let bm = w.next(res).expect("bookmark");
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(bm["object"]["kind"], "Service");
    assert_eq!(
        bm["object"]["metadata"]["resourceVersion"],
        d["resourceVersion"]
    );
    sim(addr, "close-watches", json!({}));
    let ended = (0..BOUND).any(|_| match w.next(res) {
        None => true,
        Some(ev) => {
            assert_eq!(ev["type"], "BOOKMARK");
            false
        }
    });
    assert!(ended, "close-watches ends the stream");

    // An expired RV: one ERROR event carrying the 410 Status, then the end.
    sim(addr, "compact", json!({}));
    let mut w = PbWatch::open(addr, "/api/v1/nodes?watch=true&resourceVersion=1", PB);
    let ev = w.next(Resource::Nodes).expect("error event");
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(w.next(Resource::Nodes).is_none());

    let (_, served) = get_json(addr, "/sim/served");
    let formats: Vec<&Value> = served
        .as_array()
        .expect("served")
        .iter()
        .filter(|r| r["verb"] == "watch")
        .map(|r| &r["format"])
        .collect();
    assert_eq!(formats, [&json!("protobuf"), &json!("protobuf")]);
    assert_eq!(
        get_json(addr, "/sim/state").1["served"]["protobufWatches"],
        2
    );
}

#[test]
fn no_protobuf_answers_json_whatever_the_accept() {
    let addr = start_pb(false, None);
    let only_pb = "Accept: application/vnd.kubernetes.protobuf\r\n";
    for accept in [PB, only_pb] {
        let (code, head, body) = call(addr, "GET", "/api/v1/nodes", accept, b"");
        assert_eq!(code, 200);
        assert_eq!(header(&head, "content-type"), Some("application/json"));
        let v: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(v["kind"], "NodeList");
        let (_, head, body) = call(addr, "GET", "/api/v1/nodes/edge-a1", accept, b"");
        assert_eq!(header(&head, "content-type"), Some("application/json"));
        serde_json::from_slice::<Value>(&body).expect("JSON");
    }
    let mut w = PbWatch::open(addr, "/api/v1/nodes?watch=true&timeoutSeconds=1", PB);
    assert_eq!(header(&w.head, "content-type"), Some("application/json"));
    assert!(w.fill());
    let first = w.pending.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let ev: Value = serde_json::from_slice(first).expect("a JSON line");
    assert_eq!(ev["type"], "ADDED");
    let (_, served) = get_json(addr, "/sim/served");
    assert!(
        served
            .as_array()
            .expect("served")
            .iter()
            .all(|r| r["format"] == "json"),
        "{served}"
    );
    let (_, state) = get_json(addr, "/sim/state");
    assert_eq!(state["servesProtobuf"], false);
    assert_eq!(state["served"]["protobufLists"], 0);
    assert_eq!(state["served"]["protobufGets"], 0);
}
