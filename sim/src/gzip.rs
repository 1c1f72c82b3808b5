//! Gzip of large LIST answers, as an apiserver does: a client whose `Accept-Encoding` names
//! gzip gets a body over [`THRESHOLD_BYTES`] compressed at the apiserver's level (1, the
//! fastest), with `Content-Encoding: gzip`. Watches are never compressed. Pure.

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;

/// Bodies larger than this are compressed (the apiserver's threshold).
pub const THRESHOLD_BYTES: usize = 128 * 1024;

/// Whether an `Accept-Encoding` value accepts gzip: a `gzip` (or `x-gzip`) coding not given
/// `q=0`.
pub fn accepts(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|v| {
        v.split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip"))
                && !refused
        })
    })
}

/// `body` gzip'd when the client accepts it and it is over the threshold; `None` otherwise.
pub fn compress(accept_encoding: Option<&str>, body: &[u8]) -> Option<Vec<u8>> {
    if body.len() <= THRESHOLD_BYTES || !accepts(accept_encoding) {
        return None;
    }
    let mut e = GzEncoder::new(Vec::with_capacity(body.len() / 8), Compression::fast());
    e.write_all(body).ok()?;
    e.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    #[test]
    fn accept_encoding_forms() {
        for (v, want) in [
            (None, false),
            (Some(""), false),
            (Some("gzip"), true),
            (Some("GZIP"), true),
            (Some("deflate, gzip"), true),
            (Some("br;q=1.0, gzip;q=0.5"), true),
            (Some("x-gzip"), true),
            (Some("gzip;q=0"), false),
            (Some("gzip; q=0.0"), false),
            (Some("identity"), false),
            (Some("gzipped"), false),
            (Some("*"), false),
        ] {
            assert_eq!(accepts(v), want, "{v:?}");
        }
    }

    #[test]
    fn only_bodies_over_the_threshold_are_compressed_and_they_decompress_to_themselves() {
        let small = vec![b'a'; THRESHOLD_BYTES];
        assert_eq!(compress(Some("gzip"), &small), None);
        let big = br#"{"metadata":{"name":"n"}},"#.repeat(THRESHOLD_BYTES / 20);
        assert!(big.len() > THRESHOLD_BYTES);
        assert_eq!(compress(None, &big), None);
        assert_eq!(compress(Some("identity"), &big), None);
        let packed = compress(Some("gzip"), &big).expect("compressed");
        assert!(packed.len() < big.len() / 10);
        let mut back = Vec::new();
        GzDecoder::new(&packed[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, big);
    }
}
