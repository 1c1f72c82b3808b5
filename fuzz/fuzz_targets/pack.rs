//! Arbitrary bytes through the cache's packer: what `pack` makes unpacks to the same bytes,
//! and arbitrary bytes given to `unpack` (with an arbitrary length) give the bytes of that
//! length or `None`, never a panic.
#![no_main]
use grid_wrapper::cache::pack::{pack, unpack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let packed = pack(data).expect("inputs are far below 4 GiB");
    assert_eq!(packed.unpack().as_deref(), Some(data));
    let Some((&n, rest)) = data.split_first() else { return };
    if let Some(out) = unpack(rest, usize::from(n) * 16) {
        assert_eq!(out.len(), usize::from(n) * 16);
    }
});
