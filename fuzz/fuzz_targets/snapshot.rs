//! Arbitrary bytes as an on-disk snapshot: an error or a snapshot, never a panic; a decoded
//! snapshot encodes back to a file that decodes to the same snapshot.
#![no_main]
use grid_wrapper::cache::snapshot;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(snap) = snapshot::decode(data) {
        let again = snapshot::encode(&snap);
        assert_eq!(snapshot::decode(&again), Ok(snap));
    }
});
