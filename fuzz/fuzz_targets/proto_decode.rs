//! Arbitrary bytes as what an apiserver sends in protobuf: the first byte picks a resource, the
//! rest is an object's message for the decoder, and the whole input is also tried as a body
//! (`k8s\0` + Unknown), a List and a watch frame. Nothing may panic; a decoded object must be
//! JSON, and that JSON must encode and decode again to the same JSON value (unless the encoder
//! reports a value it cannot carry, such as a time beyond year 9999), up to keys whose value is
//! `null`: a pointer to a zero time is `null` in JSON, as in Go's, and `null` is no pointer.
//! The object as the cache keeps it (`decode_object_kept`) is the same JSON value but for
//! `metadata.managedFields`; a Node's facts (`NODE_FACTS`) are its name, labels and addresses.
//! The object in the cache's form (`decode_object_sorted`) is the bytes of its JSON with its
//! `kind` and `apiVersion` made that form by `cache::canonical::tree::sorted`, or it fails
//! where that way fails, or it leaves the object to that way (`NotSorted`).
#![no_main]
use grid_wrapper::cache::canonical::tree::sorted;
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::decode::{
    decode_object, decode_object_kept, decode_object_only, decode_object_sorted, DecodeError,
    TypeMeta, NODE_FACTS,
};
use grid_wrapper::proto::encode::encode_object;
use grid_wrapper::proto::envelope::{decode_frame, decode_list, event_json, unwrap_body};
use libfuzzer_sys::fuzz_target;

/// The message inside an encoder's bytes (after `0x12` and the varint length).
fn strip_prefix(bytes: &[u8]) -> &[u8] {
    let len_bytes = bytes[1..].iter().take_while(|&&b| b & 0x80 != 0).count() + 1;
    &bytes[1 + len_bytes..]
}

/// `v` without the object keys whose value is `null`.
fn without_nulls(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, msg)) = data.split_first() else {
        return;
    };
    let res = Resource::ALL[usize::from(pick) % Resource::ALL.len()];
    if let Ok(decoded) = decode_object(res, msg, None) {
        let value: serde_json::Value =
            serde_json::from_slice(&decoded.json).expect("the decoder writes JSON");
        let again = encode_object(res, &value);
        if again.unknown.is_empty() {
            let twice = decode_object(res, strip_prefix(&again.bytes), None)
                .expect("the encoder's message decodes");
            let twice: serde_json::Value =
                serde_json::from_slice(&twice.json).expect("the decoder writes JSON");
            assert_eq!(
                without_nulls(twice),
                without_nulls(value.clone()),
                "{res:?}"
            );
        }
        let kept = decode_object_kept(res, msg, None).expect("decodes as the whole object does");
        let kept: serde_json::Value =
            serde_json::from_slice(&kept.json).expect("the decoder writes JSON");
        let mut want = value;
        if let Some(meta) = want.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
        }
        assert_eq!(kept, want, "{res:?}");
        if res == Resource::Nodes {
            let facts = decode_object_only(res, msg, None, &NODE_FACTS).expect("decodes");
            let facts: serde_json::Value =
                serde_json::from_slice(&facts.json).expect("the decoder writes JSON");
            for p in ["/metadata/name", "/metadata/labels", "/status/addresses"] {
                assert_eq!(facts.pointer(p), want.pointer(p), "{p}");
            }
        }
    }
    let type_meta = Some(TypeMeta {
        api_version: res.api_version(),
        kind: res.kind(),
    });
    let old = decode_object(res, msg, type_meta)
        .ok()
        .and_then(|go| sorted(&go.json));
    match decode_object_sorted(res, msg, type_meta) {
        Ok(new) => assert_eq!(Some(new.json), old, "{res:?}"),
        Err(DecodeError::NotSorted(_)) => {}
        Err(e) => assert_eq!(old, None, "{res:?}: {e}"),
    }
    if let Ok(body) = unwrap_body(data) {
        let _ = decode_list(body.raw);
    }
    if let Ok(Some((event, used))) = decode_frame(data, 1 << 20) {
        assert!(used <= data.len());
        if let Ok(line) = event_json(res, &event) {
            serde_json::from_slice::<serde_json::Value>(&line.json).expect("a JSON watch line");
        }
    }
});
