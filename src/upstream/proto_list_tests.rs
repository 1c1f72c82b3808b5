use super::*;
use crate::proto::encode::encode_object;
use crate::proto::envelope::{list_head, TAIL};
use crate::proto::wire::{put_tag, put_varint, put_varint_field, LEN};
use serde_json::{json, Value};

fn svc(name: &str, pad: usize) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "7",
        "labels": {"app": "x".repeat(pad)}},
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}], "clusterIP": "10.0.0.1"}})
}

/// The items' `items` fields (tag and length included), as the apiserver writes them.
fn encoded(items: &[Value]) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|o| encode_object(Resource::Services, o).bytes)
        .collect()
}

/// A whole ServiceList body as the apiserver sends it.
fn body(rv: &str, items: &[Vec<u8>]) -> Vec<u8> {
    let len = items.iter().map(Vec::len).sum();
    let mut b = list_head("v1", "ServiceList", rv, len);
    items.iter().for_each(|i| b.extend_from_slice(i));
    b.extend_from_slice(TAIL);
    b
}

/// A ServiceList body with a ListMeta of `continue` and `remainingItemCount`.
fn paged_body(rv: &str, cont: &str, remaining: u64, items: &[Vec<u8>]) -> Vec<u8> {
    let mut meta = Vec::new();
    put_bytes(&mut meta, 1, b"");
    put_bytes(&mut meta, 2, rv.as_bytes());
    put_bytes(&mut meta, 3, cont.as_bytes());
    put_varint_field(&mut meta, 4, remaining);
    let mut list = Vec::new();
    put_bytes(&mut list, 1, &meta);
    items.iter().for_each(|i| list.extend_from_slice(i));
    let mut b = envelope::object_head("v1", "ServiceList");
    put_bytes(&mut b, 2, &list);
    b.extend_from_slice(TAIL);
    b
}

/// The JSON the apiserver sends for each item of a JSON list.
fn json_of(items: &[Vec<u8>]) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            // Skip the item's own tag and length.
            let mut pos = 1;
            let _ = read::varint(i, &mut pos).unwrap();
            let d = pdecode::decode_object(Resource::Services, &i[pos..], None).unwrap();
            String::from_utf8(d.json).unwrap()
        })
        .collect()
}

/// Feeds `body` in chunks of `n`, taking items as they come (as the client does).
fn split_in(
    body: &[u8],
    n: usize,
    max: usize,
) -> (
    Result<ListResult, DecodeError>,
    Vec<Box<str>>,
    Vec<Oversized>,
) {
    let mut s = ProtoListSplitter::with_max_item_bytes(max);
    let mut taken = Vec::new();
    let mut over = Vec::new();
    for c in body.chunks(n) {
        s.feed(c);
        taken.extend(s.take_items());
        over.extend(s.take_oversized());
    }
    let (r, more) = s.finish_with_oversized();
    over.extend(more);
    (r, taken, over)
}

#[test]
fn items_are_split_as_they_arrive_across_any_read_boundary() {
    let items = encoded(
        &(0..30)
            .map(|i| svc(&format!("s{i}"), i * 7))
            .collect::<Vec<_>>(),
    );
    let b = body("42", &items);
    let want = json_of(&items);
    for n in [1, 2, 3, 5, 7, 64, 1000, b.len()] {
        let (r, taken, over) = split_in(&b, n, usize::MAX);
        let r = r.unwrap();
        let got: Vec<&str> = taken.iter().map(|t| &**t).collect();
        assert_eq!(got, want, "chunks of {n}");
        assert!(over.is_empty());
        assert_eq!(r.resource_version, "42");
        assert_eq!(r.continue_token, None);
        assert!(r.items.is_empty(), "every item was taken as it came");
    }
    // An item is handed out once its last byte is in, before the rest of the body.
    let mut s = ProtoListSplitter::with_max_item_bytes(usize::MAX);
    let first_end = b.len() - TAIL.len() - items[1..].iter().map(Vec::len).sum::<usize>();
    s.feed(&b[..first_end - 1]);
    assert_eq!(s.take_items().count(), 0);
    s.feed(&b[first_end - 1..first_end]);
    assert_eq!(
        s.take_items().collect::<Vec<_>>(),
        vec![Box::from(want[0].as_str())]
    );
    // The JSON an item becomes is the JSON the apiserver sends (keys in Go's order).
    assert!(want[0].starts_with(r#"{"metadata":{"name":"s0","namespace":"default""#));
}

#[test]
fn list_meta_continue_is_kept_and_an_empty_list_is_a_list() {
    let items = encoded(&[svc("a", 0)]);
    let r = split_proto_list(&paged_body("9", "tok==", 3, &items), usize::MAX).unwrap();
    assert_eq!(r.resource_version, "9");
    assert_eq!(r.continue_token.as_deref(), Some("tok=="));
    assert_eq!(r.items.len(), 1);
    let r = split_proto_list(&body("5", &[]), usize::MAX).unwrap();
    assert_eq!((r.resource_version.as_str(), r.items.len()), ("5", 0));
}

#[test]
fn a_truncated_body_is_an_error_wherever_it_is_cut() {
    let items = encoded(&[svc("a", 3), svc("b", 300)]);
    let b = body("1", &items);
    for cut in 0..b.len() - TAIL.len() {
        let r = split_proto_list(&b[..cut], usize::MAX);
        assert!(r.is_err(), "cut at {cut} of {}", b.len());
    }
    // Cut inside the tail's fields too (a field header without its payload).
    assert!(split_proto_list(&b[..b.len() - 1], usize::MAX).is_err());
    let e = split_proto_list(&b[..b.len() / 2], usize::MAX).unwrap_err();
    assert!(e.to_string().contains("ended inside the list"), "{e}");
}

#[test]
fn a_huge_length_fails_at_once_without_waiting_for_its_bytes() {
    // An item claiming far more than the List holds.
    let mut list = Vec::new();
    put_tag(&mut list, 2, LEN);
    put_varint(&mut list, 1 << 40);
    let mut b = envelope::object_head("v1", "ServiceList");
    put_tag(&mut b, 2, LEN);
    put_varint(&mut b, 100);
    b.extend_from_slice(&list);
    let mut s = ProtoListSplitter::with_max_item_bytes(usize::MAX);
    s.feed(&b);
    let (r, _) = s.finish_with_oversized();
    let e = r.unwrap_err();
    assert!(
        e.to_string().contains("runs past the end of the list"),
        "{e}"
    );
    // A List claiming more than any body may hold.
    let mut b = envelope::object_head("v1", "ServiceList");
    put_tag(&mut b, 2, LEN);
    put_varint(&mut b, 1 << 40);
    let e = split_proto_list(&b, usize::MAX).unwrap_err();
    assert!(
        e.to_string().contains("a list of 1099511627776 bytes"),
        "{e}"
    );
    // An overlong varint.
    let mut b = envelope::object_head("v1", "ServiceList");
    b.extend_from_slice(&[0x12; 1]);
    b.extend_from_slice(&[0xff; 12]);
    assert!(split_proto_list(&b, usize::MAX).is_err());
}

#[test]
fn a_bad_envelope_is_a_clear_error() {
    let items = encoded(&[svc("a", 0)]);
    // JSON sent as protobuf.
    let e = split_proto_list(br#"{"items":[]}"#, usize::MAX).unwrap_err();
    assert!(e.to_string().contains("k8s\\0 magic"), "{e}");
    // An empty body.
    assert!(split_proto_list(b"", usize::MAX).is_err());
    // The magic alone: no list.
    let e = split_proto_list(b"k8s\0", usize::MAX).unwrap_err();
    assert!(e.to_string().contains("without a list"), "{e}");
    // A kind grid-wrapper does not cache.
    let mut b = list_head("v1", "PodList", "1", items[0].len());
    b.extend_from_slice(&items[0]);
    let e = split_proto_list(&b, usize::MAX).unwrap_err();
    assert!(e.to_string().contains("\"PodList\""), "{e}");
    // A content encoding.
    let mut b = body("1", &items);
    b.truncate(b.len() - TAIL.len());
    put_bytes(&mut b, 3, b"gzip");
    assert!(split_proto_list(&b, usize::MAX).is_err());
    // An item that is not a message of the kind.
    let mut list = Vec::new();
    put_bytes(&mut list, 2, &[0x0a, 0x05, 0x01]);
    let mut b = envelope::object_head("v1", "ServiceList");
    put_bytes(&mut b, 2, &list);
    let e = split_proto_list(&b, usize::MAX).unwrap_err();
    assert!(e.to_string().contains("list item 1"), "{e}");
}

#[test]
fn an_envelope_over_its_bound_fails_the_list_at_once() {
    let mut b = envelope::object_head("v1", "ServiceList");
    put_bytes(&mut b, 4, &vec![b'x'; MAX_ENVELOPE_BYTES + 1]);
    let mut s = ProtoListSplitter::with_max_item_bytes(usize::MAX);
    s.feed(&b[..40]);
    assert!(s.failed(), "refused as soon as its length is read");
}

#[test]
fn items_over_the_bound_are_named_and_skipped_the_rest_is_kept() {
    let big = svc("big", 100_000);
    let items = encoded(&[svc("a", 0), big.clone(), svc("c", 0)]);
    let b = body("3", &items);
    let want = json_of(&items);
    for n in [1, 999, b.len()] {
        let (r, taken, over) = split_in(&b, n, 50_000);
        assert_eq!(r.unwrap().resource_version, "3");
        assert_eq!(taken.len(), 2);
        assert_eq!(&*taken[1], want[2]);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].name.as_deref(), Some("big"));
        assert_eq!(over[0].namespace.as_deref(), Some("default"));
        // Of its message's length (the item field's payload).
        assert!(over[0].bytes > 100_000 && over[0].bytes < items[1].len() as u64);
    }
    // Within the bound as a message, over it as JSON: named, of its JSON's length.
    let json_len = want[1].len();
    let msg_len = items[1].len();
    assert!(msg_len < json_len);
    let (r, taken, over) = split_in(&b, 4096, msg_len);
    r.unwrap();
    assert_eq!(taken.len(), 2);
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].name.as_deref(), Some("big"));
    assert_eq!(over[0].bytes, json_len as u64);
}

#[test]
fn unknown_fields_of_an_item_are_skipped() {
    let mut item = encode_object(Resource::Services, &svc("a", 0)).bytes;
    // Field 99 (a newer apiserver's) appended to the Service message.
    let mut extra = Vec::new();
    put_bytes(&mut extra, 99, b"new");
    let mut pos = 1;
    let len = read::varint(&item, &mut pos).unwrap() as usize;
    let mut msg = item[pos..pos + len].to_vec();
    msg.extend_from_slice(&extra);
    item.clear();
    put_bytes(&mut item, 2, &msg);
    let plain = encoded(&[svc("a", 0)]);
    let r = split_proto_list(&body("1", &[item]), usize::MAX).unwrap();
    assert_eq!(&*r.items[0], json_of(&plain)[0]);
    assert!(crate::proto::unknown::paths()
        .iter()
        .any(|(r, p)| *r == Resource::Services && p == "#99"));
}

#[test]
fn names_are_read_from_a_cut_message() {
    let e = encode_object(Resource::Services, &svc("n1", 10)).bytes;
    let mut pos = 1;
    let _ = read::varint(&e, &mut pos).unwrap();
    let msg = &e[pos..];
    for cut in 0..msg.len() {
        let _ = object_ref_from_proto_prefix(&msg[..cut]);
    }
    let r = object_ref_from_proto_prefix(&msg[..msg.len() - 5]);
    assert_eq!(r.name.as_deref(), Some("n1"));
    assert_eq!(r.namespace.as_deref(), Some("default"));
    assert_eq!(r.resource_version.as_deref(), Some("7"));
    // The name cut off: not named.
    let r = object_ref_from_proto_prefix(&msg[..5]);
    assert_eq!(r.name, None);
}

#[test]
fn other_nodes_are_decoded_as_their_facts_only_when_asked() {
    let node = |name: &str| {
        json!({"metadata": {"name": name, "uid": "u", "labels": {"zone": "z1"},
            "annotations": {"a": "b"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": [{"names": ["img@sha256:00"], "sizeBytes": 5}]}})
    };
    let items: Vec<Vec<u8>> = [node("local"), node("other")]
        .iter()
        .map(|o| encode_object(Resource::Nodes, o).bytes)
        .collect();
    let len = items.iter().map(Vec::len).sum();
    let mut body = list_head("v1", "NodeList", "9", len);
    items.iter().for_each(|i| body.extend_from_slice(i));
    body.extend_from_slice(TAIL);
    let split = |facts_except: Option<&str>| {
        let mut s = ProtoListSplitter::with_max_item_bytes(1 << 20).node_facts_except(facts_except);
        s.feed(&body);
        let taken: Vec<Value> = s
            .take_items()
            .map(|t| serde_json::from_str(&t).unwrap())
            .collect();
        assert!(s.finish_with_oversized().0.is_ok());
        taken
    };
    let whole = split(None);
    let facts = split(Some("local"));
    assert_eq!(facts[0], whole[0], "the local Node whole");
    assert!(whole[1].pointer("/status/images/0").is_some());
    assert!(facts[1]
        .pointer("/status/images")
        .is_none_or(Value::is_null));
    assert!(facts[1].pointer("/metadata/annotations").is_none());
    for p in ["/metadata/name", "/metadata/labels", "/status/addresses"] {
        assert_eq!(facts[1].pointer(p), whole[1].pointer(p), "{p}");
    }
    // Not a list of Nodes: nothing reduced.
    let svcs = encoded(&[svc("local", 1), svc("other", 1)]);
    let mut s = ProtoListSplitter::with_max_item_bytes(1 << 20).node_facts_except(Some("local"));
    s.feed(&body_of(&svcs));
    assert_eq!(s.take_items().collect::<Vec<_>>(), json_boxed(&svcs));
}

fn body_of(items: &[Vec<u8>]) -> Vec<u8> {
    body("3", items)
}

fn json_boxed(items: &[Vec<u8>]) -> Vec<Box<str>> {
    json_of(items)
        .into_iter()
        .map(String::into_boxed_str)
        .collect()
}
