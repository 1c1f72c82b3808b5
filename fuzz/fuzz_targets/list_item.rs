//! Arbitrary bytes as one upstream list item: the fast path (`Change::List`, no `Value`) must
//! give exactly what decoding the item into a `serde_json::Value` gives (`Change::Replace`),
//! for every kind: the same admitted key, the same canonical bytes, the same drops.
#![no_main]
use grid_wrapper::cache::store::{prepare, Prepared};
use grid_wrapper::upstream::kind::{Change, UpstreamKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let kind = UpstreamKind::ALL[usize::from(k) % UpstreamKind::ALL.len()];
    let fast = prepare(kind, Change::List(vec![text.into()]));
    let values = serde_json::from_str(text).into_iter().collect();
    let slow = prepare(kind, Change::Replace(values));
    match (fast, slow) {
        (Prepared::Listed(a), Prepared::Listed(b)) => assert_eq!(a, b, "{kind:?} {text:?}"),
        _ => panic!("a list prepares to Listed"),
    }
});
