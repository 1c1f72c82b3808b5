use super::*;

const LIST: &str = r#"{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1",
 "metadata":{"resourceVersion":"42","continue":"tok","items":[{"not":"these"}]},
 "items" : [ {"metadata":{"name":"a","annotations":{"x":"]}\"[{,","y":"\\"}},"endpoints":[]} ,
   {"metadata":{"name":"b"},"items":[1,2,{"z":[]}]},{"k":"\u00e9 é"} ],
 "extra":{"items":[3]}}"#;

/// The splitter's answer for `body` fed in chunks of `n` bytes.
fn chunked(body: &[u8], n: usize) -> Result<ListResult, DecodeError> {
    let mut s = ListSplitter::new();
    for c in body.chunks(n.max(1)) {
        s.feed(c);
    }
    s.finish()
}

/// Whether the splitter agrees with `decode_list` on `body`: the same list when that is Ok,
/// an error when that is an error.
fn agrees(body: &[u8]) -> Result<(), String> {
    let want = decode_list(body);
    let got = split_list(body);
    match (&want, &got) {
        (Ok(w), Ok(g)) if w == g => Ok(()),
        (Err(_), Err(_)) => Ok(()),
        _ => Err(format!(
            "body {:?}\n decode_list: {want:?}\n splitter:    {got:?}",
            String::from_utf8_lossy(body)
        )),
    }
}

#[test]
fn splits_items_as_decode_list_does_whatever_the_chunking() {
    let want = decode_list(LIST.as_bytes()).expect("the sample is a list");
    assert_eq!(want.items.len(), 3);
    assert_eq!(want.resource_version, "42");
    assert_eq!(want.continue_token.as_deref(), Some("tok"));
    for n in 1..=LIST.len() {
        assert_eq!(
            chunked(LIST.as_bytes(), n),
            Ok(want.clone()),
            "chunks of {n}"
        );
    }
}

#[test]
fn the_items_array_leaves_the_envelope() {
    let mut s = ListSplitter::new();
    s.feed(LIST.as_bytes());
    let envelope = String::from_utf8(s.envelope.clone()).unwrap();
    assert!(envelope.contains(r#""items" : []"#), "{envelope}");
    assert!(!envelope.contains(r#""name":"a""#), "{envelope}");
    assert!(
        envelope.contains(r#""extra":{"items":[3]}"#),
        "nested items stay: {envelope}"
    );
    assert_eq!(s.items.len(), 3);
}

#[test]
fn bodies_it_cannot_split_are_left_to_serde() {
    for body in [
        // The key spelled with an escape: serde reads it as `items`.
        r#"{"it\u0065ms":[{"a":1}],"metadata":{"resourceVersion":"1"}}"#,
        r#"{"items":null}"#,
        r#"{"items":[]}"#,
        r#"{"metadata":{}}"#,
        r#"{"itemsx":[1],"items":[{}]}"#,
        r#"{"xitems":[1],"items":[{}]}"#,
        r#"{"kind":"items","items":[{}]}"#,
    ] {
        agrees(body.as_bytes()).unwrap();
        assert_eq!(
            split_list(body.as_bytes()).map(|l| l.items.len()),
            decode_list(body.as_bytes()).map(|l| l.items.len()),
            "{body}"
        );
    }
}

#[test]
fn broken_lists_are_errors() {
    for body in [
        "",
        "   ",
        "[]",
        "null",
        r#"{"items":[1,2]}"#,
        r#"{"items":["a"]}"#,
        r#"{"items":[{},]}"#,
        r#"{"items":[,{}]}"#,
        r#"{"items":[{}{}]}"#,
        r#"{"items":[{} x]}"#,
        r#"{"items":[{"a":1}}]}"#,
        r#"{"items":[}]}"#,
        r#"{"items":[{"a":]}"#,
        r#"{"items":[{"a":"\"}]}"#,
        r#"{"items":[tru]}"#,
        r#"{"items":[{}],"items":[{}]}"#,
        r#"{"items":[{}],"it\u0065ms":[{}]}"#,
        r#"{"items":[{}]}}"#,
        r#"{"items":[{}]"#,
        r#"["items":[{}]]"#,
        r#"{"metadata":5,"items":[{}]}"#,
        r#"{"kind":"items":[{}]}"#,
    ] {
        let got = split_list(body.as_bytes());
        assert!(got.is_err(), "{body}: {got:?}");
        agrees(body.as_bytes()).unwrap();
    }
    let bad_utf8 = b"{\"items\":[{\"a\":\"\xff\"}]}";
    assert!(split_list(bad_utf8).is_err());
    agrees(bad_utf8).unwrap();
}

#[test]
fn every_prefix_and_every_one_byte_change_gets_decode_lists_answer() {
    let body = LIST.as_bytes();
    for end in 0..body.len() {
        agrees(&body[..end]).unwrap();
    }
    for at in 0..body.len() {
        for b in [
            b'{', b'}', b'[', b']', b'"', b'\\', b',', b':', b' ', b'1', b'x',
        ] {
            let mut changed = body.to_vec();
            changed[at] = b;
            agrees(&changed).unwrap();
        }
        let mut cut = body.to_vec();
        cut.remove(at);
        agrees(&cut).unwrap();
    }
}

#[test]
fn a_deep_item_is_followed_without_recursion() {
    let deep = 100_000;
    let body = format!(
        r#"{{"items":[{{"a":{}{}}}]}}"#,
        "[".repeat(deep),
        "]".repeat(deep)
    );
    agrees(body.as_bytes()).unwrap();
    assert_eq!(split_list(body.as_bytes()).unwrap().items.len(), 1);
}
