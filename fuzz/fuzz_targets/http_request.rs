//! The request reader fed arbitrary bytes, whole and in arbitrary splits: same outcome, no panic.
#![no_main]
use grid_wrapper::http::request::{read_all, Limits};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits { max_head: 1024, max_headers: 16, max_body: 2048 };

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    if rest.len() > LIMITS.max_buffered() {
        return; // beyond the push bound the outcome legitimately depends on the split
    }
    let whole = read_all(LIMITS, [rest]);
    let split = read_all(LIMITS, rest.chunks(usize::from(k % 17) + 1));
    assert_eq!(whole, split);
});
