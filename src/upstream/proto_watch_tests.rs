use super::*;
use crate::proto::encode::encode_object;
use crate::proto::envelope::{event_head, status_event, TAIL};
use crate::upstream::decode::{decode_event, read_line, skip_line, Line, WatchEvent};
use serde_json::{json, Value};
use std::io::{BufReader, Cursor};

fn svc(name: &str, rv: &str, pad: usize) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
        "annotations": {"a": "x".repeat(pad)}},
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}})
}

/// One watch frame of `obj` as the apiserver writes it.
fn frame(event_type: &str, obj: &Value) -> Vec<u8> {
    let e = encode_object(Resource::Services, obj);
    let mut f = event_head(event_type, "v1", "Service", e.bytes.len());
    f.extend_from_slice(&e.bytes);
    f.extend_from_slice(TAIL);
    f
}

/// `bytes` read `n` at a time, as lines of at most `cap` bytes.
fn watch(bytes: Vec<u8>, n: usize, limit: usize) -> ProtoWatch<BufReader<Cursor<Vec<u8>>>> {
    ProtoWatch::new(BufReader::with_capacity(n, Cursor::new(bytes)), limit)
}

#[test]
fn frames_become_the_json_lines_of_their_events_across_any_read_boundary() {
    let mut stream = frame("ADDED", &svc("a", "11", 0));
    stream.extend(frame("MODIFIED", &svc("a", "12", 300)));
    stream.extend(frame(
        "BOOKMARK",
        &json!({"metadata": {"resourceVersion": "15"}}),
    ));
    stream.extend(frame("DELETED", &svc("a", "16", 0)));
    stream.extend(status_event(&json!({"kind": "Status", "apiVersion": "v1",
        "status": "Failure", "reason": "Expired", "message": "too old", "code": 410})));
    for n in [1, 3, 4096] {
        let mut w = watch(stream.clone(), n, 1 << 20);
        let mut line = Vec::new();
        let mut events = Vec::new();
        while read_line(&mut w, &mut line, 1 << 20).unwrap() == Line::Complete {
            events.push(decode_event(&line).unwrap());
        }
        assert_eq!(events.len(), 5, "reads of {n}");
        let WatchEvent::Added(a) = &events[0] else {
            panic!("{:?}", events[0])
        };
        assert_eq!(a["kind"], "Service");
        assert_eq!(a["apiVersion"], "v1");
        assert_eq!(a["metadata"]["resourceVersion"], "11");
        assert!(
            matches!(&events[1], WatchEvent::Modified(m) if m["metadata"]["resourceVersion"] == "12")
        );
        assert_eq!(
            events[2],
            WatchEvent::Bookmark {
                resource_version: "15".into()
            }
        );
        assert!(matches!(&events[3], WatchEvent::Deleted(_)));
        let WatchEvent::Error(s) = &events[4] else {
            panic!("{:?}", events[4])
        };
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    }
    // The line is the apiserver's JSON line for the event, byte for byte.
    let f = frame("ADDED", &svc("b", "3", 0));
    let (ev, _) = envelope::decode_frame(&f, 1 << 20).unwrap().unwrap();
    let mut want = envelope::event_json(Resource::Services, &ev).unwrap().json;
    want.push(b'\n');
    let mut got = Vec::new();
    watch(f, 7, 1 << 20).read_to_end(&mut got).unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_frame_over_the_bound_is_a_line_as_long_naming_its_object_and_the_stream_goes_on() {
    let big = frame("MODIFIED", &svc("big", "20", 200_000));
    let mut stream = big.clone();
    stream.extend(frame("ADDED", &svc("c", "21", 0)));
    let cap = 100_000;
    for n in [1, 4096, 1 << 20] {
        let mut w = watch(stream.clone(), n, cap);
        let mut line = Vec::new();
        assert_eq!(read_line(&mut w, &mut line, cap).unwrap(), Line::TooLong);
        let (kind, r) = crate::upstream::decode::event_ref_from_prefix(&line);
        assert_eq!(kind.as_deref(), Some("MODIFIED"));
        assert_eq!(r.name.as_deref(), Some("big"));
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.resource_version.as_deref(), Some("20"));
        let (more, found_end) = skip_line(&mut w).unwrap();
        assert!(found_end);
        // As long as the frame (its length prefix excluded).
        assert_eq!(cap as u64 + more, big.len() as u64 - 4);
        assert_eq!(read_line(&mut w, &mut line, cap).unwrap(), Line::Complete);
        assert!(matches!(decode_event(&line).unwrap(), WatchEvent::Added(_)));
        assert_eq!(read_line(&mut w, &mut line, cap).unwrap(), Line::Eof);
    }
}

#[test]
fn a_stream_cut_inside_a_frame_ends_there() {
    let f = frame("ADDED", &svc("a", "1", 0));
    for cut in 1..f.len() {
        let mut w = watch(f[..cut].to_vec(), 5, 1 << 20);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut w, &mut line, 1 << 20).unwrap(),
            Line::Eof,
            "cut at {cut}"
        );
    }
    // Inside an oversized frame's blanks: the line ends without its newline.
    let big = frame("ADDED", &svc("big", "1", 100_000));
    let mut w = watch(big[..big.len() - 10].to_vec(), 64, 1000);
    let mut line = Vec::new();
    assert_eq!(read_line(&mut w, &mut line, 1000).unwrap(), Line::TooLong);
    assert!(!skip_line(&mut w).unwrap().1);
}

#[test]
fn an_undecodable_frame_is_a_read_error_saying_so() {
    // Garbage inside a well-framed event.
    let mut bad = 5u32.to_be_bytes().to_vec();
    bad.extend_from_slice(&[0x0a, 0x09, 0x41, 0x42, 0x43]);
    // An object of a kind grid-wrapper does not cache.
    let e = encode_object(Resource::Services, &svc("p", "1", 0));
    let mut pod = event_head("ADDED", "v1", "Pod", e.bytes.len());
    pod.extend_from_slice(&e.bytes);
    pod.extend_from_slice(TAIL);
    for (stream, why) in [(bad, "protobuf"), (pod, "\"Pod\"")] {
        let mut w = watch(stream, 4096, 1 << 20);
        let mut line = Vec::new();
        let err = read_line(&mut w, &mut line, 1 << 20).unwrap_err();
        let u = undecodable(&err).expect("an UndecodableFrame");
        assert!(u.to_string().contains(why), "{u}");
    }
    // Another read error is not one.
    assert!(undecodable(&io::Error::other("reset")).is_none());
}
