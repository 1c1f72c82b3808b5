use super::*;
use serde_json::json;
use std::io::Cursor;

#[test]
fn events_decode_table() {
    let obj = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
    let cases: Vec<(&str, Result<WatchEvent, DecodeError>)> = vec![
        (
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
            Ok(WatchEvent::Added(obj.clone())),
        ),
        (
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
            Ok(WatchEvent::Modified(obj.clone())),
        ),
        (
            r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
            Ok(WatchEvent::Deleted(obj)),
        ),
        (
            r#"{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"12"}}}"#,
            Ok(WatchEvent::Bookmark {
                resource_version: "12".into(),
            }),
        ),
        (
            r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#,
            Ok(WatchEvent::Error(StatusInfo {
                code: 410,
                reason: "Expired".into(),
                message: "too old".into(),
                causes: vec![],
            })),
        ),
        (
            r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#,
            Err(DecodeError::Missing("object.metadata.resourceVersion")),
        ),
        (
            r#"{"type":"WHAT","object":{}}"#,
            Err(DecodeError::UnknownType("WHAT".into())),
        ),
        (r#"{"object":{}}"#, Err(DecodeError::Missing("type"))),
        (
            r#"{"type":7,"object":{}}"#,
            Err(DecodeError::Missing("type")),
        ),
        (r#"{"type":"ADDED"}"#, Err(DecodeError::Missing("object"))),
        (
            r#"{"type":"ADDED","object":[1]}"#,
            Err(DecodeError::NotAnObject("object")),
        ),
        (r#"[1,2]"#, Err(DecodeError::NotAnObject("watch event"))),
    ];
    for (line, want) in cases {
        assert_eq!(decode_event(line.as_bytes()), want, "{line}");
    }
}

#[test]
fn garbage_and_truncated_events_are_errors() {
    for line in [
        &b"{\"type\":\"ADDED\",\"object\":{\"metadata\""[..],
        b"",
        b"\xff\xfe",
        b"null",
        b"}{",
        b"{\"type\":\"ADDED\",\"object\":{}}x",
    ] {
        assert!(
            matches!(
                decode_event(line),
                Err(DecodeError::Json(_) | DecodeError::NotAnObject(_))
            ),
            "{line:?}"
        );
    }
}

#[test]
fn lists_decode() {
    let l = decode_list(br#"{"kind":"ServiceList","metadata":{"resourceVersion":"42","continue":"abc"},"items":[{"metadata":{"name":"a"}}]}"#).unwrap();
    assert_eq!(l.resource_version, "42");
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.continue_token.as_deref(), Some("abc"));
    let l =
        decode_list(br#"{"metadata":{"resourceVersion":"5","continue":""},"items":null}"#).unwrap();
    assert!(l.items.is_empty());
    assert_eq!(l.continue_token, None);
    assert_eq!(
        decode_list(br#"{"metadata":{}}"#),
        Err(DecodeError::Missing("items"))
    );
    assert_eq!(
        decode_list(br#"{"items":[1]}"#),
        Err(DecodeError::NotAnObject("list item"))
    );
    assert_eq!(decode_list(b"[]"), Err(DecodeError::NotAnObject("list")));
    assert!(matches!(
        decode_list(br#"{"items":["#),
        Err(DecodeError::Json(_))
    ));
}

#[test]
fn status_bodies() {
    let s = decode_status_body(
        br#"{"kind":"Status","status":"Failure","reason":"Forbidden","message":"no","code":403}"#,
        403,
    );
    assert_eq!(
        s,
        StatusInfo {
            code: 403,
            reason: "Forbidden".into(),
            message: "no".into(),
            causes: vec![],
        }
    );
    let s = decode_status_body(b"<html>bad gateway</html>\n", 502);
    assert_eq!(
        s,
        StatusInfo {
            code: 502,
            reason: String::new(),
            message: "<html>bad gateway</html>".into(),
            causes: vec![],
        }
    );
    let long = vec![b'x'; 10_000];
    assert_eq!(decode_status_body(&long, 500).message.len(), 512);
    assert_eq!(decode_status_body(br#"{"kind":"Status"}"#, 504).code, 504);
}

#[test]
fn status_cause_reasons_and_too_large_resource_version() {
    // The apiserver's answer (HTTP 504 or a watch ERROR) to an RV newer than it has.
    let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 159128021, current: 159127032","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#;
    let s = decode_status_body(body, 504);
    assert_eq!(s.causes, ["ResourceVersionTooLarge"]);
    assert!(s.is_rv_too_large());
    let line = format!(
        r#"{{"type":"ERROR","object":{}}}"#,
        std::str::from_utf8(body).unwrap()
    );
    let Ok(WatchEvent::Error(ev)) = decode_event(line.as_bytes()) else {
        panic!("not an ERROR event");
    };
    assert_eq!(ev, s);
    // (causes, message, too large?)
    let table: [(&str, &str, bool); 7] = [
        (r#"[{"reason":"ResourceVersionTooLarge"}]"#, "", true),
        (
            r#"[{"message":"x"},{"reason":"FieldValueInvalid"},{"reason":"ResourceVersionTooLarge"}]"#,
            "",
            true,
        ),
        ("[]", "too large resource version: 5, current: 3", true),
        ("[]", "Timeout: TOO LARGE RESOURCE VERSION", true),
        (
            r#"[{"reason":"FieldValueInvalid"}]"#,
            "too old resource version",
            false,
        ),
        (r#"{"reason":"ResourceVersionTooLarge"}"#, "", false),
        (r#"[{"reason":7}]"#, "", false),
    ];
    for (causes, message, want) in table {
        let v: Value = serde_json::from_str(&format!(
            r#"{{"kind":"Status","code":504,"message":{},"details":{{"causes":{causes}}}}}"#,
            Value::from(message)
        ))
        .unwrap();
        assert_eq!(status_of(&v).is_rv_too_large(), want, "{causes} {message}");
    }
    // Causes are capped; absent details mean none.
    let many = format!(
        r#"{{"kind":"Status","details":{{"causes":[{}]}}}}"#,
        vec![r#"{"reason":"A"}"#; 100].join(",")
    );
    assert_eq!(
        decode_status_body(many.as_bytes(), 500).causes.len(),
        MAX_STATUS_CAUSES
    );
    assert!(status_of(&json!({"kind": "Status"})).causes.is_empty());
}

#[test]
fn skip_line_discards_the_rest_of_a_long_line() {
    let data = b"0123456789abcdef\nnext\nxyz";
    let mut r = io::BufReader::with_capacity(3, Cursor::new(&data[..]));
    let mut buf = Vec::new();
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::TooLong);
    assert_eq!(buf, b"01234");
    assert_eq!(skip_line(&mut r).unwrap(), (11, true));
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Complete);
    assert_eq!(buf, b"next");
    assert_eq!(read_line(&mut r, &mut buf, 2).unwrap(), Line::TooLong);
    assert_eq!(skip_line(&mut r).unwrap(), (1, false));
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Eof);
    assert_eq!(skip_line(&mut r).unwrap(), (0, false));
    // The newline right where the cap was reached.
    let mut r = Cursor::new(&b"0123456\nab"[..]);
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::TooLong);
    assert_eq!(skip_line(&mut r).unwrap(), (2, true));
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Truncated);
    assert_eq!(buf, b"ab");
}

#[test]
fn skip_line_buffers_nothing_of_a_huge_line() {
    struct Zeros(u64);
    impl io::Read for Zeros {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(usize::try_from(self.0).unwrap_or(usize::MAX));
            out[..n].fill(b'0');
            self.0 -= n as u64;
            Ok(n)
        }
    }
    let mut r = io::BufReader::with_capacity(4096, Zeros(50_000_000));
    assert_eq!(skip_line(&mut r).unwrap(), (50_000_000, false));
}

fn named(ns: Option<&str>, name: Option<&str>, rv: Option<&str>) -> ObjectRef {
    ObjectRef {
        namespace: ns.map(str::to_string),
        name: name.map(str::to_string),
        resource_version: rv.map(str::to_string),
    }
}

#[test]
fn object_refs_from_prefixes() {
    let huge = "x".repeat(100_000);
    let after_spec = format!(
        r#"{{"spec":{{"a":"{huge}","metadata":{{"name":"no"}},"b":[{{"name":"no"}}]}},"metadata":{{"name":"late","namespace":"ns"}}}}"#
    );
    let cases: Vec<(&str, ObjectRef)> = vec![
        (
            r#"{"kind":"Node","metadata":{"name":"a","namespace":"b","resourceVersion":"7"}}"#,
            named(Some("b"), Some("a"), Some("7")),
        ),
        (
            r#" {"metadata" : { "namespace" : "b" , "uid":"u", "name" : "a" } }"#,
            named(Some("b"), Some("a"), None),
        ),
        (&after_spec, named(Some("ns"), Some("late"), None)),
        // Escapes in values and keys.
        (
            r#"{"metadata":{"name":"a\"b\\c\u00e9\n","n\u0061mespace":"x}y"}}"#,
            named(Some("x}y"), Some("a\"b\\c\u{e9}\n"), None),
        ),
        (
            r#"{"m\u0065tadata":{"resourceVersion":"\u0039"}}"#,
            named(None, None, Some("9")),
        ),
        // Cut anywhere: a cut string is not read, complete ones are.
        (
            r#"{"metadata":{"namespace":"ns","name":"ab"#,
            named(Some("ns"), None, None),
        ),
        (
            r#"{"metadata":{"namespace":"ns","name":"a\"#,
            named(Some("ns"), None, None),
        ),
        (
            r#"{"metadata":{"namespace":"ns","name":"#,
            named(Some("ns"), None, None),
        ),
        (
            r#"{"metadata":{"namespace":"ns","na"#,
            named(Some("ns"), None, None),
        ),
        (
            r#"{"metadata":{"name":"ab","#,
            named(None, Some("ab"), None),
        ),
        // Only the top-level object's metadata, and only string members of it.
        (
            r#"{"a":{"metadata":{"name":"x"}},"metadata":{}}"#,
            ObjectRef::default(),
        ),
        (r#"{"metadata":[{"name":"x"}]}"#, ObjectRef::default()),
        (
            r#"{"metadata":{"name":7,"labels":{"name":"x"},"namespace":null}}"#,
            ObjectRef::default(),
        ),
        (r#"{"name":"x","namespace":"y"}"#, ObjectRef::default()),
        // The last of repeated keys wins, as in a serde `Value`.
        (
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            named(None, Some("b"), None),
        ),
        (
            r#"{"metadata":{"name":"a"},"metadata":{"namespace":"n"}}"#,
            named(Some("n"), None, None),
        ),
        (
            r#"{"metadata":{"name":"a","name":5}}"#,
            ObjectRef::default(),
        ),
        // Not an object.
        (r#"[{"metadata":{"name":"x"}}]"#, ObjectRef::default()),
        (r#""{\"metadata\":{\"name\":\"x\"}}""#, ObjectRef::default()),
        ("", ObjectRef::default()),
        ("   ", ObjectRef::default()),
        ("null", ObjectRef::default()),
        // After the top-level object: nothing.
        (
            r#"{"metadata":{"name":"a"}} {"metadata":{"name":"b"}}"#,
            named(None, Some("a"), None),
        ),
    ];
    for (prefix, want) in cases {
        let got = object_ref_from_prefix(prefix.as_bytes());
        assert_eq!(got, want, "{}", &prefix[..prefix.len().min(200)]);
    }
    // Not UTF-8 in a name: not read.
    assert_eq!(
        object_ref_from_prefix(b"{\"metadata\":{\"name\":\"\xff\",\"namespace\":\"n\"}}"),
        named(Some("n"), None, None)
    );
}

#[test]
fn object_refs_from_every_cut_of_an_object() {
    let text = r#"{"kind":"Pod","metadata":{"name":"web-\"0\"","namespace":"d\u0065v","resourceVersion":"12","labels":{"name":"x"}},"spec":{"metadata":{"name":"y"}}}"#;
    let full = object_ref_from_prefix(text.as_bytes());
    assert_eq!(full, named(Some("dev"), Some("web-\"0\""), Some("12")));
    let bytes = text.as_bytes();
    for end in 0..=bytes.len() {
        let got = object_ref_from_prefix(&bytes[..end]);
        // Each member is either not read yet or read right.
        for (g, w) in [
            (&got.name, &full.name),
            (&got.namespace, &full.namespace),
            (&got.resource_version, &full.resource_version),
        ] {
            assert!(g.is_none() || g == w, "cut at {end}: {got:?}");
        }
    }
    // Garbage of every byte value: no panic.
    for b in 0..=255u8 {
        let mut changed = bytes.to_vec();
        for at in 0..changed.len() {
            let old = std::mem::replace(&mut changed[at], b);
            let _ = object_ref_from_prefix(&changed);
            let _ = event_ref_from_prefix(&changed);
            changed[at] = old;
        }
    }
}

#[test]
fn event_refs_from_prefixes() {
    let obj = r#"{"kind":"Node","metadata":{"name":"n1","resourceVersion":"8"}}"#;
    let cases: Vec<(String, Option<&str>, ObjectRef)> = vec![
        (
            format!(r#"{{"type":"MODIFIED","object":{obj}}}"#),
            Some("MODIFIED"),
            named(None, Some("n1"), Some("8")),
        ),
        (
            format!(r#"{{"object":{obj},"type":"ADDED"}}"#),
            Some("ADDED"),
            named(None, Some("n1"), Some("8")),
        ),
        // Cut inside the object: what was complete.
        (
            r#"{"object":{"metadata":{"namespace":"a","name":"n2","resourceVersion":"9"},"spec":{"x":"#.to_string(),
            None,
            named(Some("a"), Some("n2"), Some("9")),
        ),
        (
            r#"{"type":"DELETED","object":{"metadata":{"name":"n"#.to_string(),
            Some("DELETED"),
            ObjectRef::default(),
        ),
        (r#"{"type":"ADD"#.to_string(), None, ObjectRef::default()),
        // The object's metadata only, not the event's or a nested one.
        (
            r#"{"metadata":{"name":"e"},"type":"ADDED","object":{"spec":{"metadata":{"name":"s"}}}}"#.to_string(),
            Some("ADDED"),
            ObjectRef::default(),
        ),
        (
            r#"{"type":5,"object":[{"metadata":{"name":"x"}}]}"#.to_string(),
            None,
            ObjectRef::default(),
        ),
        (
            r#"{"ty\u0070e":"BOOKMARK","object":{"metadata":{"resourceVersion":"3"}}}"#.to_string(),
            Some("BOOKMARK"),
            named(None, None, Some("3")),
        ),
        (r#"["type","ADDED"]"#.to_string(), None, ObjectRef::default()),
    ];
    for (line, kind, want) in cases {
        let (k, r) = event_ref_from_prefix(line.as_bytes());
        assert_eq!((k.as_deref(), r), (kind, want), "{line}");
    }
}

#[test]
fn line_reader_handles_complete_truncated_and_long_lines() {
    // A tiny BufReader capacity forces lines across several fill_buf calls.
    let data = b"one\n\ntwo-long-line\nthree";
    let mut r = io::BufReader::with_capacity(3, Cursor::new(&data[..]));
    let mut buf = Vec::new();
    assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
    assert_eq!(buf, b"one");
    assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
    assert_eq!(buf, b"");
    assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
    assert_eq!(buf, b"two-long-line");
    assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Truncated);
    assert_eq!(buf, b"three");
    assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Eof);

    let mut r = io::BufReader::with_capacity(4, Cursor::new(&b"0123456789\nab\n"[..]));
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::TooLong);
    assert_eq!(buf, b"01234");
    // Exactly at the cap is fine.
    let mut r = Cursor::new(&b"01234\n"[..]);
    assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Complete);
}

/// The reflector's decoder keeps an object's event's object as its text, read only for who it
/// is; it means what the `Value` decoder's event means, odd shapes included (repeated members,
/// members in any order, escapes, mistyped members, a top-level array).
#[test]
fn text_events_mean_what_value_events_mean() {
    let lines = [
        r#"{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"7"}}}"#,
        r#"{"object":{"metadata":{"name":"a"},"kind":7},"type":"MODIFIED"}"#,
        r#" {"type":"DELETED","object":{"metadata":{"name":"x","name":"b","namespace":3}}} "#,
        r#"{"type":"ADDED","type":"MODIFIED","object":{"metadata":{"name":"c"}}}"#,
        r#"{"type":"ADD\u0045D","object":{"metadata":{"na\u006de":"d"},"apiVersion":"v1"}}"#,
        r#"{"type":"ADDED","object":{"metadata":{"name":"e"},"metadata":{"namespace":"n"}}}"#,
        r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#,
        r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}"#,
        r#"["ADDED",{"metadata":{"name":"a"}}]"#,
        r#"{"type":"ADDED","object":[1]}"#,
        r#"{"type":7,"object":{}}"#,
        r#"{"type":"ADDED"}"#,
        r#"{"type":"NEW","object":{}}"#,
        r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}x"#,
    ];
    for line in lines {
        let (text, value) = (
            decode_event_text(line.as_bytes()),
            decode_event(line.as_bytes()),
        );
        let same = |o: &EventObject, v: &Value| {
            let parsed: Value = serde_json::from_str(&o.text).unwrap();
            let s = |p: &str| v.pointer(p).map(|x| x.as_str().map(str::to_string));
            parsed == *v
                && o.head.kind == s("/kind")
                && o.head.api_version == s("/apiVersion")
                && o.head.meta.name == s("/metadata/name").flatten()
                && o.head.meta.namespace == s("/metadata/namespace").flatten()
                && o.head.key() == crate::k8s::ObjectKey::of(v)
        };
        let ok = match (&text, &value) {
            (Ok(TextEvent::Added(o)), Ok(WatchEvent::Added(v)))
            | (Ok(TextEvent::Modified(o)), Ok(WatchEvent::Modified(v)))
            | (Ok(TextEvent::Deleted(o)), Ok(WatchEvent::Deleted(v))) => same(o, v),
            (
                Ok(TextEvent::Bookmark {
                    resource_version: a,
                }),
                Ok(WatchEvent::Bookmark {
                    resource_version: b,
                }),
            ) => a == b,
            (Ok(TextEvent::Error(a)), Ok(WatchEvent::Error(b))) => a == b,
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        assert!(ok, "{line}: {text:?} against {value:?}");
    }
    // The head is read from the text: kind, apiVersion, and the key the refusals use.
    let Ok(TextEvent::Added(o)) = decode_event_text(lines[0].as_bytes()) else {
        panic!("an ADDED event")
    };
    assert_eq!(o.head.kind, Some(Some("Service".into())));
    assert_eq!(o.head.meta.resource_version.as_deref(), Some("7"));
    assert_eq!(refusal_of(Resource::Services, &o.head, "6"), None);
    assert_eq!(
        refusal_of(Resource::Services, &o.head, "8"),
        Some(Reason::OlderVersion)
    );
    assert_eq!(
        refusal_of(Resource::Nodes, &o.head, "6"),
        Some(Reason::Kind)
    );
}

#[test]
fn a_line_a_value_refuses_is_refused_as_text_too() {
    // serde_json skips an ignored member and a raw object without checking their UTF-8,
    // escapes or number ranges; a `Value` checks them all.
    let lines: [&[u8]; 6] = [
        b"{\"type\":\"ADDED\",\"objece\":\"\x8c\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"},\"x\":\"\xff\"}}",
        br#"{"type":"ADDED","other":"\ud800","object":{"metadata":{"name":"a"}}}"#,
        br#"{"type":"ADDED","object":{"metadata":{"name":"a"},"x":"\udc00"}}"#,
        br#"{"type":"ADDED","other":1e999,"object":{"metadata":{"name":"a"}}}"#,
        br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"},"x":[-1e400]}}"#,
    ];
    for line in lines {
        assert!(
            decode_event(line).is_err(),
            "{}",
            String::from_utf8_lossy(line)
        );
        assert!(
            decode_event_text(line).is_err(),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    // What a Value takes, the text path takes too.
    let fine =
        br#"{"type":"ADDED","other":"\ud83d\ude00","object":{"metadata":{"name":"a"},"x":1e308}}"#;
    assert!(decode_event(fine).is_ok());
    assert!(matches!(decode_event_text(fine), Ok(TextEvent::Added(_))));
}
