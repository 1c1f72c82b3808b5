//! Arbitrary bytes as a LIST body, fed to the streaming splitter in chunks of a size the input
//! chooses: it must answer what `decode_list` answers for the whole body (the same list, or an
//! error where that is an error), and never panic.
#![no_main]
use grid_wrapper::upstream::decode::decode_list;
use grid_wrapper::upstream::list_split::ListSplitter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, body)) = data.split_first() else { return };
    let mut s = ListSplitter::new();
    for c in body.chunks(usize::from(n).max(1)) {
        s.feed(c);
    }
    let got = s.finish();
    match (decode_list(body), got) {
        (Ok(want), Ok(got)) => assert_eq!(want, got),
        (Err(_), Err(_)) => {}
        (want, got) => panic!("decode_list {want:?}, splitter {got:?}"),
    }
});
