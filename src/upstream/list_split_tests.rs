use super::*;
use crate::upstream::decode::object_ref_from_prefix;

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

/// The bounded splitter's answer for `body` fed in chunks of `n` bytes. With `take`, the items
/// and oversized entries are taken after each chunk (as the client does) and put back together;
/// without, all come from `finish_with_oversized`.
fn bounded(
    body: &[u8],
    n: usize,
    max: usize,
    take: bool,
) -> (Result<ListResult, DecodeError>, Vec<Oversized>) {
    let mut s = ListSplitter::with_max_item_bytes(max);
    let (mut items, mut over) = (Vec::new(), Vec::new());
    for c in body.chunks(n.max(1)) {
        s.feed(c);
        if take {
            items.extend(s.take_items());
            over.extend(s.take_oversized());
        }
    }
    let (list, rest) = s.finish_with_oversized();
    over.extend(rest);
    let list = list.map(|mut l| {
        items.append(&mut l.items);
        l.items = items;
        l
    });
    (list, over)
}

/// What the bounded splitter must answer for a body `decode_list` accepts: its list without
/// the items longer than `max`, and those items' entries (named from their first bytes).
fn expected(body: &[u8], max: usize) -> Option<(ListResult, Vec<Oversized>)> {
    let mut want = decode_list(body).ok()?;
    let (kept, over): (Vec<_>, Vec<_>) = want.items.into_iter().partition(|i| i.len() <= max);
    want.items = kept;
    let over = over
        .iter()
        .map(|i| {
            let bytes = i.as_bytes();
            let r = object_ref_from_prefix(bytes.get(..OVERSIZED_PREFIX_BYTES).unwrap_or(bytes));
            Oversized {
                namespace: r.namespace,
                name: r.name,
                bytes: bytes.len() as u64,
            }
        })
        .collect();
    Some((want, over))
}

/// Whether the bounded splitter agrees with `decode_list` on `body`: exactly [`expected`] when
/// that accepts it; when it refuses it, an error too, unless an item over the bound (whose
/// bytes are not checked) was left out.
fn bounded_agrees(body: &[u8], n: usize, max: usize, take: bool) -> Result<(), String> {
    let got = bounded(body, n, max, take);
    let ok = match (expected(body, max), &got) {
        (Some((list, over)), (Ok(l), o)) => list == *l && over == *o,
        (Some(_), (Err(_), _)) => false,
        (None, (Ok(_), o)) => !o.is_empty(),
        (None, (Err(_), _)) => true,
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "body {:?} max {max} chunks {n}\n decode_list: {:?}\n bounded:     {got:?}",
        String::from_utf8_lossy(body),
        decode_list(body)
    ))
}

/// A list whose first, third and last items are long (over 100 bytes), with escaped quotes,
/// backslashes, brackets and `items` keys inside their strings and objects.
fn long_items_list() -> String {
    let pad = "x".repeat(120);
    format!(
        r#"{{"kind":"NodeList","metadata":{{"resourceVersion":"9"}},"items":[
  {{"metadata":{{"name":"big-first","namespace":"ns"}},"spec":{{"s":"q\" }} ] {{ [ \\","items":[{{"x":"}}"}}],"p":"{pad}"}}}},
  {{"metadata":{{"name":"small"}}}} ,
  {{"metadata":{{"namespace":"ns2","name":"big \"mid\" \\ {{"}},"items":[[{{}}]],"data":"{pad}\\\"]}}"}},
  {{"metadata":{{"name":"s2"}},"items":[]}},
  {{"kind":"Node","spec":{{"p":"{pad}","metadata":{{"name":"not-this"}}}},"metadata":{{"name":"big-last"}}}}
 ],"extra":{{"items":[{{"metadata":{{"name":"envelope"}},"p":"{pad}"}}]}}}}"#
    )
}

#[test]
fn long_items_are_left_out_and_named_whatever_the_chunking() {
    let body = long_items_list();
    let body = body.as_bytes();
    let (want, over) = expected(body, 100).expect("the sample is a list");
    let names: Vec<_> = want
        .items
        .iter()
        .map(|i| object_ref_from_prefix(i.as_bytes()).name)
        .collect();
    assert_eq!(names, [Some("small".to_string()), Some("s2".to_string())]);
    let named: Vec<_> = over
        .iter()
        .map(|o| (o.namespace.as_deref(), o.name.as_deref()))
        .collect();
    assert_eq!(
        named,
        [
            (Some("ns"), Some("big-first")),
            (Some("ns2"), Some("big \"mid\" \\ {")),
            (None, Some("big-last")),
        ]
    );
    assert!(over.iter().all(|o| o.bytes > 100));
    for n in 1..=body.len() {
        bounded_agrees(body, n, 100, n % 2 == 0).unwrap();
    }
    // Every bound: from every item left out to none.
    for max in 0..=body.len() {
        bounded_agrees(body, 7, max, true).unwrap();
    }
    // Unbounded: every item, no entry.
    let (list, none) = bounded(body, 13, usize::MAX, true);
    assert_eq!(list, decode_list(body));
    assert!(none.is_empty());
}

#[test]
fn an_item_of_exactly_the_bound_is_kept_one_byte_more_is_not() {
    let item = r#"{"metadata":{"namespace":"kube-system","name":"n\u0031"},"spec":{}}"#;
    let body = format!(r#"{{"metadata":{{"resourceVersion":"3"}},"items":[{item}]}}"#);
    let (list, over) = bounded(body.as_bytes(), 5, item.len(), true);
    assert_eq!(list.unwrap().items, [Box::from(item)]);
    assert!(over.is_empty());
    let (list, over) = bounded(body.as_bytes(), 5, item.len() - 1, true);
    let list = list.unwrap();
    assert!(list.items.is_empty());
    assert_eq!(list.resource_version, "3");
    assert_eq!(
        over,
        [Oversized {
            namespace: Some("kube-system".into()),
            name: Some("n1".into()),
            bytes: item.len() as u64,
        }]
    );
}

#[test]
fn a_body_cut_inside_a_long_item_fails_as_without_a_bound() {
    let body = long_items_list();
    let body = body.as_bytes();
    for end in 0..body.len() {
        let cut = &body[..end];
        for max in [0, 50, 100, 10_000] {
            let (got, _) = bounded(cut, 16, max, false);
            assert_eq!(got.is_ok(), split_list(cut).is_ok(), "{end} {max}");
        }
    }
    // Mistakes around a long item are still found.
    for bad in [
        r#"{"items":[{"a":"0123456789"} {}]}"#,
        r#"{"items":[{"a":"0123456789"},]}"#,
        r#"{"items":[{"a":"0123456789"}}]}"#,
        r#"{"items":[{"a":"0123456789"],"x":1}"#,
        r#"{"items":[{"a":"0123456789\"}]}"#,
    ] {
        let (got, _) = bounded(bad.as_bytes(), 3, 10, true);
        assert!(got.is_err(), "{bad}: {got:?}");
    }
}

#[test]
fn a_long_item_that_is_not_an_object_fails_the_list() {
    for item in [
        r#""0123456789 \" abc""#,
        "[1,2,3,4,5,6,7,8,9,10]",
        "12345678901234567890",
        "[{}, {}, {}, {}, {}]",
    ] {
        let body = format!(r#"{{"items":[{{"a":1}},{item},{{}}]}}"#);
        let (got, over) = bounded(body.as_bytes(), 4, 10, true);
        assert_eq!(got, Err(DecodeError::NotAnObject("list item")), "{item}");
        assert_eq!(decode_list(body.as_bytes()), got, "{item}");
        assert!(over.is_empty());
    }
}

#[test]
fn a_mistake_inside_a_long_item_is_not_seen() {
    // Its bytes are gone: the structural scan is its only check.
    let body =
        br#"{"items":[{"metadata":{"name":"x"},"a":1 2 , : }],"metadata":{"resourceVersion":"1"}}"#;
    assert!(decode_list(body).is_err());
    let (got, over) = bounded(body, 8, 10, true);
    assert!(got.unwrap().items.is_empty());
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].name.as_deref(), Some("x"));
}

#[test]
fn every_prefix_and_every_one_byte_change_agrees_with_a_bound() {
    let body = LIST.as_bytes();
    for max in [0, 30, 60] {
        for end in 0..body.len() {
            bounded_agrees(&body[..end], 64, max, true).unwrap();
        }
        for at in 0..body.len() {
            for b in [b'{', b'}', b'[', b']', b'"', b'\\', b',', b':', b'x'] {
                let mut changed = body.to_vec();
                changed[at] = b;
                bounded_agrees(&changed, 64, max, false).unwrap();
            }
        }
    }
}

#[test]
fn the_item_buffer_stays_small_while_a_long_item_streams_by() {
    const CHUNK: usize = 32 * 1024;
    let head = r#"{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"huge","namespace":"n"},"data":""#;
    let mut body = head.as_bytes().to_vec();
    // 10 MB of a string with escaped quotes and brackets in it.
    while body.len() < 10_000_000 {
        body.extend_from_slice(br#"abc\"}]{[\\ "#);
    }
    body.extend_from_slice(br#"","items":[{}]},{"metadata":{"name":"after"}}]}"#);
    let huge = body.len() - head.len()
        + r#"{"metadata":{"name":"huge","namespace":"n"},"data":""#.len()
        - r#",{"metadata":{"name":"after"}}]}"#.len();
    for max in [0, 1024 * 1024] {
        let mut s = ListSplitter::with_max_item_bytes(max);
        let mut over = Vec::new();
        for c in body.chunks(CHUNK) {
            s.feed(c);
            over.extend(s.take_oversized());
            assert!(
                s.item.capacity() <= max.max(OVERSIZED_PREFIX_BYTES) + CHUNK,
                "{max}: {}",
                s.item.capacity()
            );
        }
        let (list, rest) = s.finish_with_oversized();
        over.extend(rest);
        let list = list.unwrap();
        if max == 0 {
            assert!(list.items.is_empty());
            assert_eq!(over.len(), 2);
        } else {
            assert_eq!(list.items, [Box::from(r#"{"metadata":{"name":"after"}}"#)]);
            assert_eq!(over.len(), 1);
        }
        assert_eq!(over[0].name.as_deref(), Some("huge"));
        assert_eq!(over[0].namespace.as_deref(), Some("n"));
        assert_eq!(over[0].bytes, huge as u64);
    }
}

#[test]
fn a_long_item_whose_metadata_comes_after_the_prefix_is_unnamed() {
    let spec = "s".repeat(OVERSIZED_PREFIX_BYTES);
    let item = format!(r#"{{"spec":"{spec}","metadata":{{"name":"late"}}}}"#);
    let body = format!(r#"{{"items":[{item}]}}"#);
    let (list, over) = bounded(body.as_bytes(), 1000, 100, true);
    assert!(list.unwrap().items.is_empty());
    assert_eq!(
        over,
        [Oversized {
            namespace: None,
            name: None,
            bytes: item.len() as u64,
        }]
    );
}

#[test]
fn the_bound_applies_to_items_serde_decodes_from_an_escaped_items_key() {
    // Found by the list_split fuzz target: the splitter cannot follow `it\u0065ms`, so serde
    // decodes those items from the envelope, and the bound must hold for them as well.
    let body = br#"{"it\u0065ms":[{"a":1},{"metadata":{"name":"big","namespace":"ns"},"x":"0123456789"}],"metadata":{"resourceVersion":"7"}}"#;
    let mut s = ListSplitter::with_max_item_bytes(20);
    s.feed(body);
    let (list, over) = s.finish_with_oversized();
    let list = list.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(list.resource_version, "7");
    assert_eq!(list.items, vec![Box::<str>::from(r#"{"a":1}"#)]);
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].name.as_deref(), Some("big"));
    assert_eq!(over[0].namespace.as_deref(), Some("ns"));
    assert_eq!(
        over[0].bytes,
        r#"{"metadata":{"name":"big","namespace":"ns"},"x":"0123456789"}"#.len() as u64
    );
    // Unbounded, nothing is left out.
    assert_eq!(split_list(body).map(|l| l.items.len()).ok(), Some(2));
}

/// A list whose bytes outside the items fill the envelope bound exactly: whitespace before the
/// JSON, then `extra` bytes of an unknown field after the items.
fn padded_list(pad: usize, extra: usize) -> Vec<u8> {
    let mut body = vec![b' '; pad];
    body.extend_from_slice(
        br#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}],"x":""#,
    );
    body.extend(std::iter::repeat_n(b'y', extra));
    body.extend_from_slice(br#""}"#);
    body
}

#[test]
fn bytes_outside_the_items_are_bounded() {
    let item = r#"{"metadata":{"name":"a"}}"#.len();
    let short = padded_list(0, 0).len() - item;
    // Exactly the bound outside the items: a list.
    let at = padded_list(MAX_ENVELOPE_BYTES - short, 0);
    for n in [1, 7, 4096, at.len()] {
        let list = chunked(&at, n).expect("at the bound");
        assert_eq!(list.items.len(), 1);
        assert_eq!(list.resource_version, "7");
    }
    // One byte more, as whitespace before the JSON or as an unknown field after the items.
    for body in [
        padded_list(MAX_ENVELOPE_BYTES - short + 1, 0),
        padded_list(MAX_ENVELOPE_BYTES - short, 1),
    ] {
        for n in [1, 7, 4096, body.len()] {
            let e = chunked(&body, n).expect_err("over the bound");
            assert!(
                e.to_string()
                    .contains(&format!("more than {MAX_ENVELOPE_BYTES} bytes outside")),
                "{e}"
            );
        }
    }
    // A continue token and a count of the remaining items are far within it.
    let body = format!(
        r#"{{"metadata":{{"resourceVersion":"9","continue":"{}","remainingItemCount":123456}},"items":[]}}"#,
        "t".repeat(4096)
    );
    assert_eq!(
        split_list(body.as_bytes()).map(|l| l.continue_token.map(|t| t.len())),
        Ok(Some(4096))
    );
}

#[test]
fn a_whitespace_flood_is_refused_without_being_kept() {
    const CHUNK: usize = 32 * 1024;
    let spaces = vec![b' '; CHUNK];
    let mut s = ListSplitter::new();
    // 64 MiB of whitespace before the JSON: the splitter fails at the bound and keeps no more.
    for i in 0..2048 {
        s.feed(&spaces);
        assert!(
            s.envelope.capacity() <= 2 * MAX_ENVELOPE_BYTES,
            "chunk {i}: {}",
            s.envelope.capacity()
        );
        if i * CHUNK > MAX_ENVELOPE_BYTES {
            assert!(s.failed(), "chunk {i}: not failed yet");
        }
    }
    s.feed(br#"{"metadata":{"resourceVersion":"1"},"items":[]}"#);
    assert!(s.finish().is_err());
    // Whitespace between the items is not kept: a list however much of it there is.
    let mut body = br#"{"metadata":{"resourceVersion":"1"},"items":[{}"#.to_vec();
    body.extend(std::iter::repeat_n(b' ', 4 * MAX_ENVELOPE_BYTES));
    body.extend_from_slice(b",{}]}");
    assert_eq!(split_list(&body).map(|l| l.items.len()), Ok(2));
}
