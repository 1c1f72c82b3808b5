//! Comparing byte strings eight bytes at a time.
//!
//! `<[u8]>::cmp` and `==` call the C library's `memcmp`/`bcmp`. The static builds that ship link
//! musl, whose `memcmp` compares one byte at a time: profiles of the static build showed a start
//! spending a large share of its CPU there (see BENCHMARKS.md), most of it in the cache's maps
//! keyed by [`crate::k8s::ObjectKey`] (keys such as `default/svc-01234-s0` share long prefixes) and
//! in comparing a relisted object's bytes with the stored ones. These give the same answers with a
//! load and a compare per eight bytes, whatever the C library.

use std::cmp::Ordering;

/// `a.cmp(b)`: lexicographic order of byte strings.
pub fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut x, mut y) = (a, b);
    while let (Some((cx, rx)), Some((cy, ry))) = (x.split_first_chunk::<8>(), y.split_first_chunk())
    {
        // Big-endian: the first differing byte decides, as in lexicographic order.
        let (p, q) = (u64::from_be_bytes(*cx), u64::from_be_bytes(*cy));
        if p != q {
            return p.cmp(&q);
        }
        (x, y) = (rx, ry);
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    x.len().cmp(&y.len())
}

/// `a == b`.
pub fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && cmp(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of: the strings of up to 4 bytes over an alphabet with the high bit set and
    /// not, each alone and after one and two equal 8-byte chunks; a 40-byte string changed at
    /// each position, and its prefixes.
    #[test]
    fn agrees_with_the_slice_order() {
        let mut short: Vec<Vec<u8>> = vec![vec![]];
        let mut last = short.clone();
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|s| [0u8, b'a', 0x80, 0xff].map(|b| [&s[..], &[b]].concat()))
                .collect();
            short.extend(last.iter().cloned());
        }
        let mut strings: Vec<Vec<u8>> = Vec::new();
        for prefix in [&b""[..], b"abcdefgh", b"abcdefghABCDEFGH"] {
            strings.extend(short.iter().map(|s| [prefix, &s[..]].concat()));
        }
        let base: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for at in 0..base.len() {
            for delta in [1u8, 0x80] {
                let mut s = base.clone();
                s[at] = s[at].wrapping_add(delta);
                strings.push(s);
            }
            strings.push(base[..at].to_vec());
        }
        strings.push(base);
        for a in &strings {
            for b in &strings {
                assert_eq!(cmp(a, b), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(eq(a, b), a == b, "{a:?} vs {b:?}");
            }
        }
    }
}
