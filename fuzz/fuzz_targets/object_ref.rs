//! Arbitrary bytes as the first bytes of an upstream object and of a watch event line, cut
//! where the input chooses: the prefix readers never panic, and on a whole JSON object they
//! read what serde reads (`metadata.namespace`/`name`/`resourceVersion`; an event's `type` and
//! `object.metadata.…`) when those are strings, nothing otherwise.
#![no_main]
use grid_wrapper::upstream::decode::{event_ref_from_prefix, object_ref_from_prefix, ObjectRef};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// What the readers must answer for `metadata` (a serde value, if any).
fn ref_of(meta: Option<&Value>) -> ObjectRef {
    let s = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    ObjectRef {
        namespace: s("namespace"),
        name: s("name"),
        resource_version: s("resourceVersion"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, text)) = data.split_first() else { return };
    let end = text.len() * usize::from(cut) / 255;
    let prefix = text.get(..end).unwrap_or(text);
    let _ = object_ref_from_prefix(prefix);
    let _ = event_ref_from_prefix(prefix);
    let obj = object_ref_from_prefix(text);
    let (kind, event) = event_ref_from_prefix(text);
    if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(text) {
        assert_eq!(obj, ref_of(v.get("metadata")));
        assert_eq!(kind.as_deref(), v.get("type").and_then(Value::as_str));
        assert_eq!(event, ref_of(v.get("object").and_then(|o| o.get("metadata"))));
    }
});
