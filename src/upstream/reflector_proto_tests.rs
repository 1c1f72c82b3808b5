//! A reflector over the real client, against a fake upstream that answers in protobuf (and one
//! that answers JSON to the same request): what reaches the sink is what a JSON upstream's
//! answers bring.

use super::*;
use crate::proto::encode::encode_object;
use crate::proto::envelope::{self, event_head, status_event, TAIL};
use crate::proto::wire::{put_bytes, put_varint_field};
use crate::upstream::client::tests::serve;

fn obj(name: &str, rv: &str, pad: usize) -> Value {
    serde_json::json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
        "annotations": {"a": "x".repeat(pad)}}, "spec": {"clusterIP": "10.0.0.1"}})
}

/// A 200 in `content_type`, chunked in `n`-byte chunks.
fn answer(content_type: &str, body: &[u8], n: usize) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
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

/// A ServiceList page in protobuf: `rv`, `cont`, the items.
fn page(rv: &str, cont: &str, items: &[Value]) -> Vec<u8> {
    let mut meta = Vec::new();
    put_bytes(&mut meta, 1, b"");
    put_bytes(&mut meta, 2, rv.as_bytes());
    put_bytes(&mut meta, 3, cont.as_bytes());
    if !cont.is_empty() {
        put_varint_field(&mut meta, 4, 1);
    }
    let mut list = Vec::new();
    put_bytes(&mut list, 1, &meta);
    for o in items {
        list.extend(encode_object(Resource::Services, o).bytes);
    }
    let mut b = envelope::object_head("v1", "ServiceList");
    put_bytes(&mut b, 2, &list);
    b.extend_from_slice(TAIL);
    b
}

fn frame(event_type: &str, o: &Value) -> Vec<u8> {
    let e = encode_object(Resource::Services, o);
    let mut f = event_head(event_type, "v1", "Service", e.bytes.len());
    f.extend_from_slice(&e.bytes);
    f.extend_from_slice(TAIL);
    f
}

/// The JSON text of a list item as the apiserver sends it for `o` (no kind/apiVersion).
fn item_json(o: &Value) -> Box<str> {
    let e = encode_object(Resource::Services, o).bytes;
    let mut pos = 1;
    let _ = crate::proto::read::varint(&e, &mut pos).unwrap();
    let d = crate::proto::decode::decode_object(Resource::Services, &e[pos..], None).unwrap();
    String::from_utf8(d.json).unwrap().into()
}

#[test]
fn a_protobuf_upstream_lists_pages_and_watches_as_a_json_one() {
    let (a, b, c) = (obj("a", "5", 0), obj("b", "6", 0), obj("c", "11", 0));
    let big = obj("big", "12", 300_000);
    let mut watch = frame("ADDED", &c);
    watch.extend(frame("MODIFIED", &big));
    watch.extend(frame(
        "BOOKMARK",
        &serde_json::json!({"metadata": {"resourceVersion": "14"}}),
    ));
    watch.extend(frame("DELETED", &obj("c", "15", 0)));
    watch.extend(status_event(
        &serde_json::json!({"kind": "Status", "apiVersion": "v1",
        "status": "Failure", "reason": "Expired", "message": "too old", "code": 410}),
    ));
    let pb = envelope::CONTENT_TYPE;
    let (url, server) = serve(vec![
        answer(pb, &page("9", "tok", std::slice::from_ref(&a)), 7),
        answer(pb, &page("9", "", std::slice::from_ref(&b)), 4096),
        answer(envelope::WATCH_CONTENT_TYPE, &watch, 100),
    ]);
    let cfg = crate::upstream::kubeconfig::UpstreamConfig {
        server: url,
        ..Default::default()
    };
    let lists = crate::upstream::client::ListSettings {
        max_object_bytes: 100_000,
        ..Default::default()
    };
    let stats = crate::upstream::stats::Stats::new();
    let up = Upstream::with_stats(
        &cfg,
        crate::upstream::client::UpstreamOptions {
            lists,
            ..Default::default()
        },
        &stats,
    )
    .unwrap();
    let sink = Arc::new(Rec::default());
    let mut r = Reflector::new(
        up.clone(),
        Resource::Services,
        sink.clone(),
        Backoff::without_jitter(),
        Arc::new(KindStats::new()),
    );
    let mut stage = Stage::Empty;
    for _ in 0..8 {
        let (next, _) = r.step(stage);
        stage = next;
        if matches!(stage, Stage::Empty) {
            break;
        }
    }
    // The 410 ERROR event: relist.
    assert_eq!(stage.describe(), ("Empty", ""));
    let got = sink.take();
    assert_eq!(got[0], Got::List(vec![item_json(&a), item_json(&b)]));
    let Got::One(Change::Upsert(added)) = &got[1] else {
        panic!("{:?}", got[1])
    };
    let added: serde_json::Value = serde_json::from_str(&added.text).unwrap();
    assert_eq!(added["metadata"]["name"], "c");
    assert_eq!(added["kind"], "Service");
    let Got::One(Change::Oversized(o)) = &got[2] else {
        panic!("{:?}", got[2])
    };
    assert_eq!(o.name.as_deref(), Some("big"));
    assert!(matches!(&got[3], Got::One(Change::Delete(d)) if &*d.name == "c"));
    assert_eq!(got.len(), 4);
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        assert_eq!(
            s.header("accept"),
            Some(&b"application/vnd.kubernetes.protobuf, application/json"[..]),
            "{}",
            s.request_line
        );
    }
    assert!(
        seen[1].request_line.contains("continue=tok"),
        "{}",
        seen[1].request_line
    );
    let requests = stats.requests();
    use crate::upstream::stats::Verb;
    assert_eq!(requests.format_count(Verb::List, "protobuf"), 2);
    assert_eq!(requests.format_count(Verb::Watch, "protobuf"), 1);
    assert_eq!(requests.format_count(Verb::List, "json"), 0);
}

#[test]
fn an_undecodable_protobuf_frame_relists_as_an_undecodable_json_line_does() {
    let good = frame("ADDED", &obj("c", "11", 0));
    // A well-framed event whose object is not the apiserver's.
    let mut bad = 5u32.to_be_bytes().to_vec();
    bad.extend_from_slice(&[0x0a, 0x09, 0x41, 0x42, 0x43]);
    let mut watch = good;
    watch.extend(bad);
    let pb = envelope::CONTENT_TYPE;
    let (url, server) = serve(vec![
        answer(pb, &page("9", "", &[obj("a", "5", 0)]), 4096),
        answer(envelope::WATCH_CONTENT_TYPE, &watch, 4096),
    ]);
    let cfg = crate::upstream::kubeconfig::UpstreamConfig {
        server: url,
        ..Default::default()
    };
    let up = Upstream::new(&cfg, crate::upstream::client::UpstreamOptions::default()).unwrap();
    let sink = Arc::new(Rec::default());
    let stats = Arc::new(KindStats::new());
    let mut r = Reflector::new(
        up,
        Resource::Services,
        sink.clone(),
        Backoff::without_jitter(),
        stats.clone(),
    );
    let mut stage = Stage::Empty;
    for _ in 0..4 {
        let (next, _) = r.step(stage);
        stage = next;
        if matches!(stage, Stage::Empty) {
            break;
        }
    }
    assert_eq!(stage.describe(), ("Empty", ""));
    assert_eq!(
        stats.relists_for(crate::upstream::stats::RelistReason::Undecodable),
        1
    );
    let got = sink.take();
    assert_eq!(got.len(), 2, "the list and the good event: {got:?}");
    assert!(
        stats
            .last_error()
            .contains("undecodable protobuf watch frame"),
        "{}",
        stats.last_error()
    );
    server.join().unwrap();
}
