//! Arbitrary bytes as an upstream watch stream: line splitting with a cap, event decoding, and
//! the decoded events applied to the cache as updates. No panic; RVs only grow.
#![no_main]
use std::io::BufReader;

use grid_wrapper::cache::store::{Settings, State};
use grid_wrapper::cache::collection::Retention;
use grid_wrapper::k8s::Resource;
use grid_wrapper::upstream::decode::{self, EventObject, Line, TextEvent, WatchEvent};
use serde_json::Value;
use grid_wrapper::handoff::{Change, Watched};
use libfuzzer_sys::fuzz_target;

const KINDS: [Resource; 4] = [
    Resource::Nodes,
    Resource::Services,
    Resource::Endpoints,
    Resource::SlicesV1,
];

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let kind = KINDS[usize::from(k) % KINDS.len()];
    let mut st = State::new(
        Settings { hostname: "h".into(), wrapper_in_cluster: true, retention: Retention::for_queue(8) },
        1,
    );
    for kind in KINDS {
        st.apply_list(kind, std::iter::empty::<&str>(), 0);
    }
    let _ = decode::decode_list(rest);
    let mut reader = BufReader::with_capacity(64, rest);
    let mut line = Vec::new();
    let mut last = st.current_rv();
    loop {
        line.clear();
        match decode::read_line(&mut reader, &mut line, 4096) {
            Ok(Line::Complete) | Ok(Line::Truncated) => {}
            Ok(Line::TooLong) => continue,
            Ok(Line::Eof) | Err(_) => break,
        }
        // The reflector's decoder (the object kept as its text) against the `Value` one.
        let text = decode::decode_event_text(&line);
        let value = decode::decode_event(&line);
        assert_eq!(text.is_ok(), value.is_ok(), "{text:?} {value:?}");
        let (o, upsert) = match (text, value) {
            (Ok(TextEvent::Added(o)), Ok(WatchEvent::Added(v)))
            | (Ok(TextEvent::Modified(o)), Ok(WatchEvent::Modified(v))) => (same(o, &v), true),
            (Ok(TextEvent::Deleted(o)), Ok(WatchEvent::Deleted(v))) => (same(o, &v), false),
            (Ok(TextEvent::Bookmark { resource_version: a }), Ok(WatchEvent::Bookmark { resource_version: b })) => {
                assert_eq!(a, b);
                continue;
            }
            (Ok(TextEvent::Error(a)), Ok(WatchEvent::Error(b))) => {
                assert_eq!(a, b);
                continue;
            }
            (Err(_), Err(_)) => continue,
            (a, b) => panic!("{a:?} {b:?}"),
        };
        let Some(key) = o.head.key() else { continue };
        if decode::refusal_of(kind, &o.head, "").is_some() {
            continue;
        }
        let change = if upsert {
            Change::Upsert(Watched { key, text: o.text })
        } else {
            Change::Delete(key)
        };
        st.apply(kind, change, 1);
        assert!(st.current_rv() >= last);
        last = st.current_rv();
    }
});

/// The object's text means `v`, and who it is, as read from the text, is what `v` says.
fn same(o: EventObject, v: &Value) -> EventObject {
    let parsed: Value = serde_json::from_str(&o.text).expect("the object's text is JSON");
    assert_eq!(&parsed, v);
    let s = |p: &str| v.pointer(p).map(|x| x.as_str().map(str::to_string));
    assert_eq!(o.head.kind, s("/kind"));
    assert_eq!(o.head.api_version, s("/apiVersion"));
    assert_eq!(o.head.meta.name, s("/metadata/name").flatten());
    assert_eq!(o.head.meta.namespace, s("/metadata/namespace").flatten());
    assert_eq!(o.head.meta.resource_version, s("/metadata/resourceVersion").flatten());
    assert_eq!(o.head.key(), grid_wrapper::k8s::ObjectKey::of(v));
    o
}
