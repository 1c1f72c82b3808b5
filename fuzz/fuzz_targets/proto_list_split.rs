//! Arbitrary bytes as the List message of a protobuf LIST body, wrapped in the apiserver's
//! envelope (`k8s\0`, typeMeta of the kind the first byte picks, the List as raw, the tail) and
//! fed to the streaming splitter in chunks of a size the second byte chooses. It must answer
//! what the whole-body decoders answer (`envelope::decode_list`, then `decode_object_kept` for
//! each item, the object as the cache keeps it): the same items' JSON, resourceVersion and continue, or an error where they refuse it;
//! and never panic. A splitter bounding its items (at a bound the third byte chooses) must keep
//! exactly the items whose message and JSON are within the bound, report one entry for each
//! other, and answer a list the decoders refuse only when it left an item out undecoded. A body
//! cut before its tail is an error.
#![no_main]
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::decode::decode_object_kept;
use grid_wrapper::proto::envelope::{decode_list, object_head, TAIL};
use grid_wrapper::proto::wire::put_bytes;
use grid_wrapper::upstream::proto_list::ProtoListSplitter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [pick, n, bound, list @ ..] = data else {
        return;
    };
    let res = Resource::ALL[usize::from(*pick) % Resource::ALL.len()];
    let chunk = usize::from(*n).max(1);
    let mut body = object_head(res.api_version(), res.list_kind());
    put_bytes(&mut body, 2, list);
    body.extend_from_slice(TAIL);

    // The whole-body decoders.
    let want = decode_list(list).and_then(|l| {
        let items = l
            .items
            .iter()
            .map(|i| decode_object_kept(res, i, None).map(|d| (i.len(), d.json)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            l.resource_version.to_string(),
            l.continue_token.to_string(),
            items,
        ))
    });

    let mut s = ProtoListSplitter::with_max_item_bytes(usize::MAX);
    let mut items = Vec::new();
    for c in body.chunks(chunk) {
        s.feed(c);
        items.extend(s.take_items());
    }
    let (got, over) = s.finish_with_oversized();
    assert!(over.is_empty());
    match (&want, got) {
        (Ok((rv, cont, want_items)), Ok(got)) => {
            assert_eq!(*rv, got.resource_version);
            assert_eq!(
                Some(cont.as_str()).filter(|c| !c.is_empty()),
                got.continue_token.as_deref()
            );
            let want_json: Vec<&[u8]> = want_items.iter().map(|(_, j)| j.as_slice()).collect();
            let got_json: Vec<&[u8]> = items.iter().map(|i| i.as_bytes()).collect();
            assert_eq!(want_json, got_json);
        }
        (Err(_), Err(_)) => {}
        (want, got) => panic!("decoders {want:?}, splitter {got:?}"),
    }

    // The bounded splitter.
    let max = usize::from(*bound) * 4;
    let mut s = ProtoListSplitter::with_max_item_bytes(max);
    let (mut items, mut over) = (Vec::new(), Vec::new());
    for c in body.chunks(chunk) {
        s.feed(c);
        items.extend(s.take_items());
        over.extend(s.take_oversized());
    }
    let (got, rest) = s.finish_with_oversized();
    over.extend(rest);
    match (want, got) {
        (Ok((_, _, want_items)), Ok(_)) => {
            let (kept, long): (Vec<_>, Vec<_>) = want_items
                .into_iter()
                .partition(|(msg, json)| *msg <= max && json.len() <= max);
            let kept: Vec<&[u8]> = kept.iter().map(|(_, j)| j.as_slice()).collect();
            let got_json: Vec<&[u8]> = items.iter().map(|i| i.as_bytes()).collect();
            assert_eq!(kept, got_json, "max {max}");
            assert_eq!(long.len(), over.len(), "max {max}");
        }
        (Ok(_), Err(e)) => panic!("decoders took it, bounded splitter {e:?}"),
        (Err(e), Ok(got)) => {
            assert!(!over.is_empty(), "decoders {e:?}, bounded splitter {got:?}")
        }
        (Err(_), Err(_)) => {}
    }

    // A body cut anywhere before its tail (whose two empty fields are optional) is no list.
    if let Some(cut) = body.len().checked_sub(TAIL.len() + 1 + usize::from(*n) % 7) {
        let mut s = ProtoListSplitter::with_max_item_bytes(usize::MAX);
        s.feed(&body[..cut]);
        assert!(
            s.finish_with_oversized().0.is_err(),
            "cut at {cut} of {}",
            body.len()
        );
    }
});
