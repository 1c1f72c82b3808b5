//! The wire forms: a watch event's framing is made once per log entry and format and is the
//! same as framing it alone; the ends of framing are built from their owners' constants; a
//! JSON watch event is one exact chunk.

use super::*;
use crate::api::transition::tests::slice_entries;
use crate::cache::collection::Form;
use crate::http::response::CHUNK_END;
use crate::proto::envelope;

/// The bytes of `segments`, in order.
pub(crate) fn concat(segments: &[Segment]) -> Vec<u8> {
    segments
        .iter()
        .flat_map(|s| s.as_bytes().iter().copied())
        .collect()
}

#[test]
fn an_entry_is_framed_once_and_shared_by_every_watcher() {
    let (res, entries) = slice_entries();
    for format in [Format::Json, Format::Protobuf] {
        for entry in &entries {
            for event in Event::ALL {
                let Some(obj) = event.object(entry) else {
                    assert!(entry_event(format, res, entry, event).is_none());
                    continue;
                };
                let first = entry_event(format, res, entry, event)
                    .unwrap_or_else(|| panic!("{event:?}: no event"));
                // A second watcher reuses the first one's framing: nothing is made again.
                let head = entry.wire(slot(format, event), || {
                    panic!("{event:?} in {format:?} was framed again")
                });
                let second = entry_event(format, res, entry, event)
                    .unwrap_or_else(|| panic!("{event:?}: no event"));
                assert!(matches!(&second[0], Segment::Shared(h) if Arc::ptr_eq(h, &head)));
                assert_eq!(concat(&first), concat(&second));
                // The same bytes as framing the event for one watcher alone.
                let alone = super::event(format, res, event.name(), &obj);
                assert_eq!(concat(&first), concat(&alone), "{event:?} {format:?}");
            }
        }
    }
}

#[test]
fn a_compacted_objects_json_is_decoded_once_per_entry_not_per_watcher() {
    let (res, entries) = slice_entries();
    let mut seen = 0;
    for entry in &entries {
        for event in Event::ALL {
            let Some(obj) = event.object(entry) else {
                continue;
            };
            let before = obj.json();
            obj.protobuf(res);
            assert_eq!(obj.form(), Form::Protobuf, "{event:?}: not compacted");
            let body = |chunk: EventChunk| match &chunk[1] {
                Segment::Shared(b) => Arc::clone(b),
                other => panic!("{event:?}: body not shared: {other:?}"),
            };
            let first = body(entry_event(Format::Json, res, entry, event).expect("event"));
            let second = body(entry_event(Format::Json, res, entry, event).expect("event"));
            assert!(Arc::ptr_eq(&first, &second), "{event:?}: decoded again");
            assert_eq!(first[..], before[..]);
            seen += 1;
        }
    }
    assert!(seen > 0);
}

#[test]
fn every_event_and_format_has_a_slot_of_its_own() {
    let mut slots: Vec<usize> = [Format::Json, Format::Protobuf]
        .iter()
        .flat_map(|f| Event::ALL.map(|e| slot(*f, e)))
        .chain(Event::ALL.map(json_body_slot))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(
        slots,
        (0..crate::cache::collection::WIRE_SLOTS).collect::<Vec<_>>()
    );
}

#[test]
fn the_ends_of_framing_are_their_owners_constants() {
    assert_eq!(protobuf::FRAME_END, [envelope::TAIL, CHUNK_END].concat());
    assert_eq!(protobuf::FRAME_END, b"\x1a\x00\x22\x00\r\n");
    assert_eq!(json::EVENT_END, b"}\n\r\n");
}

#[test]
fn a_json_watch_event_is_one_chunk() {
    let body = "{\"type\":\"MODIFIED\",\"object\":{}}\n";
    let want = format!("{:x}\r\n{body}\r\n", body.len());
    let got = concat(&json::event("MODIFIED", Segment::Static(b"{}")));
    assert_eq!(String::from_utf8(got).ok(), Some(want));
    // An ERROR event carries the Status as its object.
    let err = ApiError::expired("5", 9);
    let got = concat(&error_event(Format::Json, &err));
    let body = [
        b"{\"type\":\"ERROR\",\"object\":".as_slice(),
        &err.to_json(),
        b"}\n",
    ]
    .concat();
    let want = [format!("{:x}\r\n", body.len()).as_bytes(), &body, b"\r\n"].concat();
    assert_eq!(got, want);
}

#[test]
fn a_protobuf_error_frame_is_one_chunk_around_the_status_event() {
    let err = ApiError::expired("5", 9);
    let frame = envelope::status_event(&err.to_value());
    let got = concat(&error_event(Format::Protobuf, &err));
    let want = [format!("{:x}\r\n", frame.len()).as_bytes(), &frame, b"\r\n"].concat();
    assert_eq!(got, want);
}

#[test]
fn bookmarks_carry_the_rv_and_the_initial_events_end() {
    let res = Resource::SlicesV1;
    let plain = String::from_utf8(json::bookmark_object(res, 42, false)).unwrap_or_default();
    assert_eq!(
        plain,
        "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\
         \"metadata\":{\"resourceVersion\":\"42\"}}"
    );
    let end = String::from_utf8(json::bookmark_object(res, 42, true)).unwrap_or_default();
    assert_eq!(
        end,
        "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\
         \"metadata\":{\"resourceVersion\":\"42\",\
         \"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}"
    );
    // The JSON bookmark event frames that object.
    let got = concat(&bookmark(Format::Json, res, 42, true));
    let want = concat(&json::event("BOOKMARK", Segment::Owned(end.into_bytes())));
    assert_eq!(got, want);
}

#[test]
fn an_unchunked_event_is_its_chunks_data() {
    let (res, entries) = slice_entries();
    let err = ApiError::expired("5", 9);
    for format in [Format::Json, Format::Protobuf] {
        let mut events: Vec<EventChunk> =
            vec![bookmark(format, res, 42, true), error_event(format, &err)];
        for entry in &entries {
            for event in Event::ALL {
                events.extend(entry_event(format, res, entry, event));
            }
            if let Some(obj) = &entry.new {
                events.push(event(format, res, "ADDED", obj));
            }
        }
        for chunk in events {
            let framed = concat(&chunk);
            let line = framed
                .windows(2)
                .position(|w| w == b"\r\n")
                .unwrap_or_else(|| panic!("no chunk-size line"));
            let size = std::str::from_utf8(&framed[..line])
                .ok()
                .and_then(|h| usize::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| panic!("bad chunk size"));
            let data = &framed[line + 2..];
            assert_eq!(data.len(), size + 2, "{format:?}");
            assert_eq!(concat(&unchunked(chunk)), data[..size], "{format:?}");
        }
    }
}
