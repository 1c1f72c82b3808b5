//! The content coding of an upstream body. A LIST asks for gzip (`Accept-Encoding: gzip`, unless
//! `--upstream-gzip=false`), and an apiserver gzips a list body over 128 KiB for a client that
//! asks; [`Decoded`] decompresses it as it is read, on its way to the
//! [`crate::upstream::list_split::ListSplitter`], so neither the compressed nor the decompressed
//! body is ever whole in memory. ureq's own `gzip` feature is not used: it would ask for gzip
//! on every request and decompress every answer, proxied ones included, whose client asked for
//! its own coding and must get the bytes the upstream sent.

use crate::upstream::client::UpstreamError;
use crate::upstream::decode::DecodeError;
use crate::upstream::failover::Failed;
use flate2::read::MultiGzDecoder;
use std::io::{self, Read};

/// The `Accept-Encoding` of a LIST when gzip is on.
pub(super) const ACCEPT_GZIP: &str = "gzip";

/// A 2xx body read through its `Content-Encoding`: as is (none, or `identity`) or gzip
/// decompressed as it is read. Any other coding is refused by [`Decoded::new`].
pub(crate) struct Decoded<R: Read> {
    coding: Coding<R>,
    /// The most decoded bytes taken.
    limit: u64,
}

enum Coding<R: Read> {
    Identity(Source<R>),
    Gzip(Box<MultiGzDecoder<Source<R>>>),
}

/// The transport under the decoder. It keeps its own read error, so that an error the decoder
/// returns can be told apart: the transport's (a reset, a missed progress deadline) or the
/// stream's own (a corrupt gzip stream).
struct Source<R> {
    inner: R,
    failed: Option<io::Error>,
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => {
                let kind = e.kind();
                self.failed = Some(e);
                Err(io::Error::new(kind, "upstream read failed"))
            }
            other => other,
        }
    }
}

impl<R: Read> Decoded<R> {
    /// The body `r` in the coding named by `content_encoding` (the header's value, if any),
    /// at most `limit` decoded bytes. A coding other than none, `identity` or `gzip` is an
    /// [`DecodeError::Encoding`].
    pub(crate) fn new(
        r: R,
        content_encoding: Option<&[u8]>,
        limit: u64,
    ) -> Result<Self, DecodeError> {
        let source = Source {
            inner: r,
            failed: None,
        };
        let value = content_encoding.map(|v| String::from_utf8_lossy(v).trim().to_string());
        let coding = match value.as_deref() {
            None | Some("") => Coding::Identity(source),
            Some(v) if v.eq_ignore_ascii_case("identity") => Coding::Identity(source),
            Some(v) if v.eq_ignore_ascii_case("gzip") || v.eq_ignore_ascii_case("x-gzip") => {
                Coding::Gzip(Box::new(MultiGzDecoder::new(source)))
            }
            Some(v) => {
                return Err(DecodeError::Encoding(format!(
                    "Content-Encoding {v:?} is not supported (grid-wrapper asks for gzip or \
                     nothing)"
                )))
            }
        };
        Ok(Decoded { coding, limit })
    }

    fn source(&mut self) -> &mut Source<R> {
        match &mut self.coding {
            Coding::Identity(s) => s,
            Coding::Gzip(d) => d.get_mut(),
        }
    }

    /// Reads the body to its end in `buf`-sized steps of decoded bytes, handing each to `feed`.
    /// A transport error is the transport's ([`Failed::Ureq`]); a corrupt stream is a
    /// [`DecodeError::Encoding`] and more than the limit of decoded bytes is
    /// [`UpstreamError::TooLarge`].
    pub(crate) fn feed_all(
        self,
        buf: &mut [u8],
        mut feed: impl FnMut(&[u8]),
    ) -> Result<(), Failed> {
        self.feed_while(buf, |chunk| {
            feed(chunk);
            true
        })
    }

    /// [`Decoded::feed_all`], until `feed` answers `false`: the rest of the body is not read (a
    /// reader that has refused what it read so far stops at once, not at the body's end).
    pub(crate) fn feed_while(
        mut self,
        buf: &mut [u8],
        mut feed: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), Failed> {
        let mut total: u64 = 0;
        loop {
            let read = match &mut self.coding {
                Coding::Identity(s) => s.read(buf),
                Coding::Gzip(d) => d.read(buf),
            };
            match read {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    total = total.saturating_add(n as u64);
                    if total > self.limit {
                        return Err(UpstreamError::TooLarge { limit: self.limit }.into());
                    }
                    if !feed(&buf[..n]) {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(match self.source().failed.take() {
                        Some(transport) => Failed::Ureq(ureq::Error::from(transport)),
                        None => UpstreamError::Decode(DecodeError::Encoding(format!("gzip: {e}")))
                            .into(),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    /// `data` gzip'd (the apiserver's level, the fastest).
    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read(body: &[u8], coding: Option<&str>, limit: u64) -> Result<Vec<u8>, Failed> {
        let d =
            Decoded::new(body, coding.map(str::as_bytes), limit).map_err(UpstreamError::from)?;
        let mut out = Vec::new();
        d.feed_all(&mut [0; 7], |c| out.extend_from_slice(c))?;
        Ok(out)
    }

    fn decode_error(r: Result<Vec<u8>, Failed>) -> String {
        match r {
            Err(Failed::Upstream(UpstreamError::Decode(DecodeError::Encoding(m)))) => m,
            other => panic!(
                "expected an encoding error, got {:?}",
                other.map(|v| v.len())
            ),
        }
    }

    #[test]
    fn identity_and_gzip_bodies_read_the_same() {
        let text = br#"{"kind":"NodeList","items":[{"a":1},{"b":2}]}"#.repeat(50);
        for coding in [None, Some(""), Some("identity")] {
            assert_eq!(read(&text, coding, 1 << 20).ok(), Some(text.clone()));
        }
        for coding in ["gzip", "GZIP", " x-gzip "] {
            assert_eq!(
                read(&gzip(&text), Some(coding), 1 << 20).ok(),
                Some(text.clone())
            );
        }
        // Two gzip members (what a concatenating writer produces) are one body.
        let mut two = gzip(&text[..100]);
        two.extend(gzip(&text[100..]));
        assert_eq!(read(&two, Some("gzip"), 1 << 20).ok(), Some(text.clone()));
    }

    #[test]
    fn a_corrupt_or_cut_gzip_stream_is_an_encoding_error() {
        let text = br#"{"kind":"NodeList","items":[]}"#.repeat(100);
        let good = gzip(&text);
        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xff;
        let mut bad_crc = good.clone();
        let n = bad_crc.len();
        bad_crc[n - 8] ^= 1;
        let cases: [&[u8]; 5] = [
            b"not gzip at all",
            &good[..good.len() / 2],
            &flipped,
            &bad_crc,
            &[0x1f, 0x8b],
        ];
        for body in cases {
            let m = decode_error(read(body, Some("gzip"), 1 << 20));
            assert!(m.starts_with("gzip: "), "{m}");
        }
        // Trailing bytes after the member are not a second member.
        let mut trailing = good;
        trailing.extend_from_slice(b"garbage!");
        decode_error(read(&trailing, Some("gzip"), 1 << 20));
    }

    #[test]
    fn an_unknown_coding_is_refused_by_name() {
        for coding in ["br", "deflate", "gzip, br", "zstd"] {
            let m = match Decoded::new(&b""[..], Some(coding.as_bytes()), 1) {
                Err(DecodeError::Encoding(m)) => m,
                Err(e) => panic!("{coding}: {e}"),
                Ok(_) => panic!("{coding}: accepted"),
            };
            assert!(m.contains(&format!("{coding:?}")), "{m}");
        }
    }

    #[test]
    fn the_limit_holds_for_decoded_bytes() {
        // 1 MiB of zeros compresses to about 1 KiB: the limit is on what it decodes to.
        let zeros = gzip(&vec![0; 1 << 20]);
        assert!(zeros.len() < 8 * 1024);
        match read(&zeros, Some("gzip"), 64 * 1024) {
            Err(Failed::Upstream(UpstreamError::TooLarge { limit })) => {
                assert_eq!(limit, 64 * 1024)
            }
            other => panic!("{:?}", other.map(|v| v.len())),
        }
        assert_eq!(
            read(&zeros, Some("gzip"), 1 << 20).map(|v| v.len()).ok(),
            Some(1 << 20)
        );
    }

    /// A transport error under the decoder stays the transport's (a stall stays a stall).
    #[test]
    fn a_transport_error_is_not_a_decode_error() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::TimedOut, "no byte in time"))
            }
        }
        for coding in [None, Some(&b"gzip"[..])] {
            let d = Decoded::new(Broken, coding, 1 << 20).unwrap();
            match d.feed_all(&mut [0; 16], |_| {}) {
                Err(Failed::Ureq(ureq::Error::Io(e))) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
                    assert_eq!(e.to_string(), "no byte in time");
                }
                Err(Failed::Ureq(e)) => panic!("{e}"),
                Err(Failed::Upstream(e)) => panic!("{e}"),
                Ok(()) => panic!("no error"),
            }
        }
    }
}
