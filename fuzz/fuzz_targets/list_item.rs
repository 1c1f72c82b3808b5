//! Arbitrary bytes as one upstream list item: the list path (a `ListPreparer`, no `Value`) must
//! give exactly what decoding the item into a `serde_json::Value` gives (`values_oracle`),
//! for every kind: the same admitted key, the same canonical bytes, the same drops; and the
//! facts read for publishing an endpoint object as it came are the `Value` path's.
#![no_main]
use grid_wrapper::cache::store::{values_oracle, Hold, ListPreparer, Prepared};
use grid_wrapper::upstream::kind::REFLECTED;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let kind = REFLECTED[usize::from(k) % REFLECTED.len()];
    let hold = if k & 0x80 == 0 { Hold::Whole } else { Hold::PackedOnly };
    let mut list = ListPreparer::new(kind, hold);
    list.push(text);
    let fast = list.finish();
    let slow = values_oracle(kind, serde_json::from_str(text));
    let bytes = |p: Prepared| match p {
        Prepared::Listed(m) => m
            .into_iter()
            .map(|(k, l)| {
                let bytes = l.whole().expect("listed bytes unpack");
                if let Some(facts) = &l.as_is {
                    facts.check(&bytes).expect("the fast path's contract");
                }
                (k, bytes)
            })
            .collect::<Vec<_>>(),
        _ => panic!("a list prepares to Listed"),
    };
    assert_eq!(bytes(fast), bytes(slow), "{kind:?} {text:?}");
});
