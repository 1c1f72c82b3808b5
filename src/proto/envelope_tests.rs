use super::*;
use crate::k8s::Resource;
use crate::proto::encode::encode_object;
use crate::proto::testpool::{decode, json};
use serde_json::json;

const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// Checks MAGIC, decodes the runtime.Unknown after it, checks its typeMeta and content fields,
/// and returns its raw bytes.
fn unwrap_body(body: &[u8], api_version: &str, kind: &str) -> Vec<u8> {
    assert_eq!(body[..4], MAGIC);
    assert!(body.ends_with(TAIL));
    let unknown = decode(UNKNOWN, &body[4..]);
    let j = json(&unknown);
    assert_eq!(j["typeMeta"]["apiVersion"], api_version);
    assert_eq!(j["typeMeta"]["kind"], kind);
    assert_eq!(j["contentEncoding"], "");
    assert_eq!(j["contentType"], "");
    match unknown.get_field_by_name("raw").as_deref() {
        Some(prost_reflect::Value::Bytes(b)) => b.to_vec(),
        other => panic!("raw: {other:?}"),
    }
}

#[test]
fn object_head_exact_bytes() {
    let mut want = b"k8s\0\x0a\x0d\x0a\x02v1\x12\x07Service".to_vec();
    assert_eq!(object_head("v1", "Service"), want);
    // A whole body with an empty message.
    want.extend_from_slice(&[0x12, 0x00, 0x1a, 0x00, 0x22, 0x00]);
    let mut body = object_head("v1", "Service");
    body.extend_from_slice(&[0x12, 0x00]);
    body.extend_from_slice(TAIL);
    assert_eq!(body, want);
}

#[test]
fn get_body_decodes() {
    let svc = json!({"metadata": {"name": "s", "namespace": "d"},
        "spec": {"ports": [{"port": 80}]}});
    let e = encode_object(Resource::Services, &svc);
    let mut body = object_head("v1", "Service");
    body.extend_from_slice(&e.bytes);
    body.extend_from_slice(TAIL);
    let raw = unwrap_body(&body, "v1", "Service");
    let msg = json(&decode("core.v1.Service", &raw));
    assert_eq!(msg["metadata"]["name"], "s");
}

#[test]
fn list_body_decodes_with_its_items_in_order() {
    let res = Resource::SlicesV1;
    // Enough items that the List's length needs a multi-byte varint.
    let items: Vec<_> = (0..40)
        .map(|i| {
            let slice = json!({"metadata": {"name": format!("s-{i}"), "namespace": "d"},
                "addressType": "IPv4", "endpoints": [{"addresses": [format!("10.0.0.{i}")]}]});
            encode_object(res, &slice)
        })
        .collect();
    let items_len = items.iter().map(|e| e.bytes.len()).sum();
    let mut body = list_head(res.api_version(), res.list_kind(), "1234", items_len);
    for e in &items {
        body.extend_from_slice(&e.bytes);
    }
    body.extend_from_slice(TAIL);
    let raw = unwrap_body(&body, "discovery.k8s.io/v1", "EndpointSliceList");
    let list = json(&decode("k8s.io.api.discovery.v1.EndpointSliceList", &raw));
    assert_eq!(list["metadata"]["resourceVersion"], "1234");
    assert_eq!(list["metadata"]["selfLink"], "");
    assert_eq!(list["metadata"]["continue"], "");
    assert!(list["metadata"].get("remainingItemCount").is_none());
    assert_eq!(list["items"].as_array().map(Vec::len), Some(40));
    assert_eq!(list["items"][39]["metadata"]["name"], "s-39");
}

#[test]
fn empty_list_exact_bytes() {
    let mut body = list_head("v1", "NodeList", "5", 0);
    body.extend_from_slice(TAIL);
    let want = b"k8s\0\x0a\x0e\x0a\x02v1\x12\x08NodeList\
        \x12\x09\x0a\x07\x0a\x00\x12\x015\x1a\x00\
        \x1a\x00\x22\x00";
    assert_eq!(body, want);
}

#[test]
fn status_body_is_unversioned() {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": "gone", "reason": "Expired", "code": 410,
        "details": {"causes": [{"reason": "r", "message": "m", "field": "f"}]}});
    let body = status_body(&status);
    let raw = unwrap_body(&body, "v1", "Status");
    let msg = json(&decode("meta.v1.Status", &raw));
    assert_eq!(msg["code"], 410);
    assert_eq!(msg["reason"], "Expired");
    assert_eq!(msg["details"]["causes"][0]["field"], "f");
}

/// Splits a frame into its 4-byte big-endian length (checked) and the WatchEvent.
fn event(frame: &[u8]) -> prost_reflect::DynamicMessage {
    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(len, frame.len() - 4);
    decode(WATCH_EVENT, &frame[4..])
}

fn event_raw(ev: &prost_reflect::DynamicMessage) -> Vec<u8> {
    let object = ev.get_field_by_name("object").expect("object");
    let object = object.as_message().expect("a RawExtension");
    match object.get_field_by_name("raw").as_deref() {
        Some(prost_reflect::Value::Bytes(b)) => b.to_vec(),
        other => panic!("raw: {other:?}"),
    }
}

#[test]
fn watch_frames_decode() {
    // Small and large objects: every length varint at one and at several bytes.
    for n in [0, 1, 200, 3000] {
        let node = json!({"metadata": {"name": "x".repeat(n), "resourceVersion": "9"}});
        let e = encode_object(Resource::Nodes, &node);
        let mut frame = event_head("MODIFIED", "v1", "Node", e.bytes.len());
        frame.extend_from_slice(&e.bytes);
        frame.extend_from_slice(TAIL);
        let ev = event(&frame);
        assert_eq!(json(&ev)["type"], "MODIFIED");
        let raw = unwrap_body(&event_raw(&ev), "v1", "Node");
        let msg = json(&decode("core.v1.Node", &raw));
        assert_eq!(msg["metadata"]["name"].as_str().map(str::len), Some(n));
    }
}

#[test]
fn watch_frame_exact_bytes() {
    let mut frame = event_head("ADDED", "v1", "Node", 2);
    frame.extend_from_slice(&[0x12, 0x00]);
    frame.extend_from_slice(TAIL);
    let body = b"k8s\0\x0a\x0a\x0a\x02v1\x12\x04Node\x12\x00\x1a\x00\x22\x00";
    let mut want = vec![0, 0, 0, 7 + 4 + body.len() as u8];
    want.extend_from_slice(b"\x0a\x05ADDED\x12");
    want.push(2 + body.len() as u8);
    want.push(0x0a);
    want.push(body.len() as u8);
    want.extend_from_slice(body);
    assert_eq!(frame, want);
}

#[test]
fn status_event_is_an_error_frame() {
    let status = json!({"status": "Failure", "code": 410, "reason": "Expired"});
    let frame = status_event(&status);
    let ev = event(&frame);
    assert_eq!(json(&ev)["type"], "ERROR");
    let raw = unwrap_body(&event_raw(&ev), "v1", "Status");
    assert_eq!(json(&decode("meta.v1.Status", &raw))["code"], 410);
}

#[test]
fn content_types() {
    assert_eq!(CONTENT_TYPE, "application/vnd.kubernetes.protobuf");
    assert_eq!(
        WATCH_CONTENT_TYPE,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
}

#[test]
fn decoders_take_the_encoders_envelopes_apart() {
    use crate::proto::decode::DecodeError;
    let res = Resource::SlicesV1;
    let items: Vec<_> = (0..3)
        .map(|i| {
            let slice = json!({"metadata": {"name": format!("s-{i}"), "namespace": "d"},
                "addressType": "IPv4"});
            encode_object(res, &slice)
        })
        .collect();
    let items_len = items.iter().map(|e| e.bytes.len()).sum();
    let mut body = list_head(res.api_version(), res.list_kind(), "42", items_len);
    for e in &items {
        body.extend_from_slice(&e.bytes);
    }
    body.extend_from_slice(TAIL);
    let b = super::unwrap_body(&body).unwrap();
    assert_eq!(
        (b.api_version, b.kind),
        (res.api_version(), "EndpointSliceList")
    );
    let list = decode_list(b.raw).unwrap();
    assert_eq!(list.resource_version, "42");
    assert_eq!(list.continue_token, "");
    assert_eq!(list.remaining_item_count, None);
    assert_eq!(list.items.len(), 3);
    for (item, e) in list.items.iter().zip(&items) {
        assert!(e.bytes.ends_with(item));
    }

    // A watch frame, then an ERROR frame, back to back in one buffer.
    let obj = &items[1];
    let mut stream = event_head(
        "MODIFIED",
        res.api_version(),
        "EndpointSlice",
        obj.bytes.len(),
    );
    stream.extend_from_slice(&obj.bytes);
    stream.extend_from_slice(TAIL);
    let first_len = stream.len();
    stream.extend_from_slice(&status_event(&json!({"status": "Failure", "code": 410,
        "reason": "Expired", "message": "gone"})));
    let (ev, used) = decode_frame(&stream, 1 << 20).unwrap().unwrap();
    assert_eq!(used, first_len);
    assert_eq!(ev.event_type, "MODIFIED");
    assert_eq!(ev.object.kind, "EndpointSlice");
    let line = event_json(res, &ev).unwrap();
    assert_eq!(
        std::str::from_utf8(&line.json).unwrap(),
        r#"{"type":"MODIFIED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"s-1","namespace":"d"},"addressType":"IPv4","endpoints":null,"ports":null}}"#
    );
    let (ev, used) = decode_frame(&stream[first_len..], 1 << 20)
        .unwrap()
        .unwrap();
    assert_eq!(used, stream.len() - first_len);
    let line = event_json(res, &ev).unwrap();
    assert_eq!(
        std::str::from_utf8(&line.json).unwrap(),
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"gone","reason":"Expired","code":410}}"#
    );

    // Every prefix of a frame waits for more; a stated length over the bound is refused
    // before its bytes arrive.
    for cut in 0..first_len {
        assert_eq!(decode_frame(&stream[..cut], 1 << 20), Ok(None), "{cut}");
    }
    assert_eq!(
        decode_frame(&[0xff, 0xff, 0xff, 0xff], 1 << 20),
        Err(DecodeError::FrameTooLong {
            len: u32::MAX as usize,
            limit: 1 << 20
        })
    );
    // Truncated or garbled bodies are errors, not panics.
    for cut in 0..body.len() {
        let _ = super::unwrap_body(&body[..cut]).and_then(|b| decode_list(b.raw));
    }
    assert!(super::unwrap_body(b"k8s").is_err());
    assert!(super::unwrap_body(b"k9s\0").is_err());
    let mut encoded_body = object_head("v1", "Service");
    encoded_body.extend_from_slice(&[0x12, 0x00, 0x1a, 0x04]);
    encoded_body.extend_from_slice(b"gzip");
    assert_eq!(
        super::unwrap_body(&encoded_body),
        Err(DecodeError::Envelope("a content encoding"))
    );
    // A frame without an object.
    let mut frame = 7u32.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0x0a, 0x05]);
    frame.extend_from_slice(b"ADDED");
    assert!(decode_frame(&frame, 64).is_err());
}
