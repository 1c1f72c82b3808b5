//! Arbitrary bytes as HPACK header blocks decoded in sequence by one decoder (the first octet
//! sets the dynamic table's bound in units of 32 octets; then blocks, each after a 2-octet
//! length): no panic, the table never exceeds its bound, the decoded list never exceeds its
//! own; and the whole input as a Huffman string decodes to at most 8/5 of its length.
#![no_main]
use grid_wrapper::cri::hpack::Decoder;
use grid_wrapper::cri::huffman;
use libfuzzer_sys::fuzz_target;

const LIST_BOUND: usize = 16 << 10;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    if huffman::decode(data, &mut out).is_ok() {
        assert!(out.len() <= data.len() * 8 / 5);
    }
    let Some((&units, mut rest)) = data.split_first() else {
        return;
    };
    let bound = usize::from(units) * 32;
    let mut decoder = Decoder::new(bound);
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (block, next) = tail.split_at(len);
        rest = next;
        let Ok(fields) = decoder.decode(block, LIST_BOUND) else {
            break;
        };
        assert!(decoder.table_size() <= bound);
        assert!(
            fields
                .iter()
                .map(|(n, v)| n.len() + v.len() + 32)
                .sum::<usize>()
                <= LIST_BOUND
        );
    }
});
