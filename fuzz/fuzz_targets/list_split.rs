//! Arbitrary bytes as a LIST body, fed to the streaming splitter in chunks of a size the input
//! chooses: it must answer what `decode_list` answers for the whole body (the same list, or an
//! error where that is an error), and never panic. A splitter bounding its items (at a small
//! bound the input chooses) must keep exactly `decode_list`'s items within the bound, record
//! one entry for each of the others (its length, its name as serde reads it), and answer a list
//! `decode_list` refuses only when it left an item out (whose bytes it cannot check). A body
//! with more than `MAX_ENVELOPE_BYTES` outside its items is refused by the splitter whatever
//! `decode_list` says.
#![no_main]
use grid_wrapper::upstream::decode::decode_list;
use grid_wrapper::upstream::list_split::{
    ListSplitter, MAX_ENVELOPE_BYTES, OVERSIZED_PREFIX_BYTES,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&n, body)) = data.split_first() else { return };
    let chunk = usize::from(n).max(1);
    let mut s = ListSplitter::new();
    for c in body.chunks(chunk) {
        s.feed(c);
    }
    let got = s.finish();
    let want = decode_list(body);
    if body.len() > MAX_ENVELOPE_BYTES {
        // Its envelope may be over the bound: only "no panic" holds.
        return;
    }
    match (&want, got) {
        (Ok(want), Ok(got)) => assert_eq!(*want, got),
        (Err(_), Err(_)) => {}
        (want, got) => panic!("decode_list {want:?}, splitter {got:?}"),
    }

    // The bounded splitter; odd chunk sizes take items and entries as they come.
    let max = (usize::from(n) * 31 + body.len()) % 160;
    let take = n & 1 == 1;
    let mut s = ListSplitter::with_max_item_bytes(max);
    let (mut items, mut over) = (Vec::new(), Vec::new());
    for c in body.chunks(chunk) {
        s.feed(c);
        if take {
            items.extend(s.take_items());
            over.extend(s.take_oversized());
        }
    }
    let (got, rest) = s.finish_with_oversized();
    over.extend(rest);
    match (want, got) {
        (Ok(want), Ok(mut got)) => {
            items.append(&mut got.items);
            assert_eq!(want.resource_version, got.resource_version);
            assert_eq!(want.continue_token, got.continue_token);
            let (kept, long): (Vec<_>, Vec<_>) =
                want.items.into_iter().partition(|i| i.len() <= max);
            assert_eq!(kept, items, "max {max}");
            assert_eq!(long.len(), over.len(), "max {max}");
            for (item, o) in long.iter().zip(&over) {
                assert_eq!(o.bytes, item.len() as u64);
                if item.len() <= OVERSIZED_PREFIX_BYTES {
                    // The whole item was its prefix: named as serde reads it.
                    let v: Value = serde_json::from_str(item).expect("decode_list checked it");
                    let meta = |k: &str| {
                        v.get("metadata").and_then(|m| m.get(k)).and_then(Value::as_str)
                    };
                    assert_eq!(o.name.as_deref(), meta("name"), "{item}");
                    assert_eq!(o.namespace.as_deref(), meta("namespace"), "{item}");
                }
            }
        }
        (Ok(want), Err(e)) => panic!("decode_list {want:?}, bounded splitter {e:?}"),
        (Err(e), Ok(got)) => {
            assert!(!over.is_empty(), "decode_list {e:?}, bounded splitter {got:?}")
        }
        (Err(_), Err(_)) => {}
    }
});
