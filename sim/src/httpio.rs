//! HTTP/1.1 over one blocking connection. Requests are read by the product's incremental reader
//! (`grid_wrapper::http::request`, with the simulator's larger limits) and response bytes are
//! framed by `grid_wrapper::http::response`; this module only moves them through `Read` and
//! `Write`. No `100 Continue` is sent: a client expecting one sends its body after its own wait.

use grid_wrapper::http::request::{self, Limits, RequestReader};
use grid_wrapper::http::response::{self, Body};
use grid_wrapper::k8s::status::ApiError;
use std::io::{self, Read, Write};

pub use grid_wrapper::http::request::Request;

/// Request limits: a 64 KiB head (431 past it), 100 header fields, a 16 MiB body (413 past it).
pub const LIMITS: Limits = Limits {
    max_head: 64 * 1024,
    max_headers: 100,
    max_body: 16 * 1024 * 1024,
};

/// Size of each socket read.
const READ_CHUNK: usize = 16 * 1024;

/// Why no request could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The reader refused the input (answer with its Status, then close).
    Refused(request::ReadError),
    /// Socket error or EOF inside a request.
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Refused(e) => write!(f, "{e}"),
            ReadError::Io(e) => write!(f, "read: {e}"),
        }
    }
}

impl ReadError {
    /// The Status to answer with, if the connection can still take one.
    pub fn status(&self) -> Option<ApiError> {
        match self {
            ReadError::Refused(e) => Some(e.to_api_error()),
            ReadError::Io(_) => None,
        }
    }
}

/// The request reader of one connection: the product's, with [`LIMITS`], plus whether bytes of
/// an unfinished request have arrived (an EOF then is an error, not a clean close).
#[derive(Debug)]
pub struct Reader {
    inner: RequestReader,
    /// Bytes were pushed since the last complete request.
    started: bool,
}

impl Reader {
    /// An empty reader.
    pub fn new() -> Self {
        Reader {
            inner: RequestReader::new(LIMITS),
            started: false,
        }
    }
}

/// Reads the next request from `r` through `reader`, which keeps extra bytes for the next call
/// (pipelining). `Ok(None)` on a clean EOF between requests.
pub fn read_request<R: Read>(r: &mut R, reader: &mut Reader) -> Result<Option<Request>, ReadError> {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        if let Some(req) = reader.inner.next_request().map_err(ReadError::Refused)? {
            reader.started = reader.inner.buffered() > 0;
            return Ok(Some(req));
        }
        match r.read(&mut chunk) {
            Ok(0) if !reader.started => return Ok(None),
            Ok(0) => {
                return Err(ReadError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "EOF inside a request",
                )))
            }
            Ok(n) => {
                reader.started = true;
                reader
                    .inner
                    .push(chunk.get(..n).unwrap_or_default())
                    .map_err(ReadError::Refused)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
}

fn send<W: Write>(w: &mut W, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

/// Writes a complete response with `Content-Length`, then flushes.
pub fn write_response<W: Write>(
    w: &mut W,
    code: u16,
    content_type: &str,
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    write_coded(w, code, content_type, None, body, close)
}

/// [`write_response`] with a `Content-Encoding` when `content_encoding` is given (the body is
/// already in that coding).
pub fn write_coded<W: Write>(
    w: &mut W,
    code: u16,
    content_type: &str,
    content_encoding: Option<&str>,
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut headers = vec![("Content-Type", content_type)];
    headers.extend(content_encoding.map(|c| ("Content-Encoding", c)));
    let mut out = response::head(code, &headers, Body::Length(body.len()), !close);
    out.extend_from_slice(body);
    send(w, &out)
}

/// A complete response with these headers (`Content-Length` and `Connection` are added).
pub fn write_with_headers<W: Write>(
    w: &mut W,
    code: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut out = response::head(code, headers, Body::Length(body.len()), !close);
    out.extend_from_slice(body);
    send(w, &out)
}

/// Writes an `ApiError` as a JSON Status response.
pub fn write_status<W: Write>(w: &mut W, err: &ApiError, close: bool) -> io::Result<()> {
    send(w, &response::status(err, !close))
}

/// Writes a JSON value as a complete response.
pub fn write_json<W: Write>(
    w: &mut W,
    code: u16,
    v: &serde_json::Value,
    close: bool,
) -> io::Result<()> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    send(w, &response::json(code, &body, !close))
}

/// Starts a chunked 200 response of `content_type` and flushes the head.
pub fn start_chunked<W: Write>(w: &mut W, content_type: &str) -> io::Result<()> {
    let headers = [("Content-Type", content_type)];
    send(w, &response::head(200, &headers, Body::Chunked, true))
}

/// Writes one chunk (no flush; empty data writes nothing).
pub fn write_chunk<W: Write>(w: &mut W, data: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(data.len() + 12);
    response::push_chunk(&mut out, data);
    w.write_all(&out)
}

/// Writes the terminating chunk and flushes.
pub fn end_chunked<W: Write>(w: &mut W) -> io::Result<()> {
    let mut out = Vec::new();
    response::push_last_chunk(&mut out);
    send(w, &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn read_all(raw: &[u8]) -> Vec<Result<Request, u16>> {
        let mut cur = Cursor::new(raw.to_vec());
        let mut reader = Reader::new();
        let mut out = Vec::new();
        loop {
            match read_request(&mut cur, &mut reader) {
                Ok(Some(r)) => out.push(Ok(r)),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.status().map_or(0, |s| s.code)));
                    return out;
                }
            }
        }
    }

    fn one(raw: &[u8]) -> Request {
        match read_all(raw).into_iter().next() {
            Some(Ok(r)) => r,
            other => panic!("no request in {raw:?}: {other:?}"),
        }
    }

    #[test]
    fn parses_get_with_query() {
        let r = one(b"GET /api/v1/nodes?watch=true&x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/v1/nodes");
        assert_eq!(r.query, "watch=true&x=1");
        assert_eq!(r.header_str("host"), Some("a"));
        assert!(r.keep_alive());
    }

    #[test]
    fn bodies_content_length_and_chunked() {
        let r = one(b"POST /e HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
        assert_eq!(r.body, b"abc");
        assert!(!r.keep_alive());
        let r = one(b"PATCH /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n");
        assert_eq!(r.body, b"abcde");
    }

    #[test]
    fn pipelining_eof_and_eof_inside_a_request() {
        let reqs = read_all(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
        let paths: Vec<_> = reqs.iter().flatten().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/a", "/b"]);
        assert_eq!(reqs.len(), 2);
        let cut = read_all(b"GET /a HTTP/1.1\r\nHost");
        assert_eq!(cut.len(), 1);
        assert!(
            matches!(cut.first(), Some(Err(0))),
            "an I/O error, no Status"
        );
    }

    #[test]
    fn the_sim_limits_apply() {
        // A 40 KiB header: past the product's default head limit, within the simulator's.
        let mut raw = b"GET / HTTP/1.1\r\nX: ".to_vec();
        raw.extend(std::iter::repeat_n(b'a', 40 * 1024));
        raw.extend_from_slice(b"\r\n\r\n");
        assert_eq!(one(&raw).path, "/");
        let mut raw = b"GET / HTTP/1.1\r\nX: ".to_vec();
        raw.extend(std::iter::repeat_n(b'a', LIMITS.max_head + 10));
        assert!(matches!(read_all(&raw).first(), Some(Err(431))));
    }

    #[test]
    fn bad_input_gets_a_status() {
        let cases: &[(&[u8], u16)] = &[
            (b"\x16\x03\x01garbage\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
                413,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
                400,
            ),
        ];
        for (raw, code) in cases {
            let got = read_all(raw);
            assert!(
                matches!(got.as_slice(), [Err(c)] if c == code),
                "{raw:?}: {got:?}"
            );
        }
    }

    #[test]
    fn every_prefix_is_incomplete_never_refused() {
        let raw: &[u8] =
            b"POST /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        for cut in 1..raw.len() {
            let got = read_all(raw.get(..cut).unwrap_or_default());
            assert!(matches!(got.as_slice(), [Err(0)]), "cut {cut}: {got:?}");
        }
        assert!(matches!(read_all(raw).as_slice(), [Ok(_)]));
    }

    #[test]
    fn random_bytes_never_panic() {
        // Deterministic xorshift noise, spliced after valid request prefixes.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let prefixes: [&[u8]; 3] = [
            b"",
            b"GET / HTTP/1.1\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ];
        let alphabet = b"0123456789abcdefXYZ:; \r\n";
        for i in 0..3000 {
            let mut buf = prefixes[i % 3].to_vec();
            for _ in 0..(i % 97) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            let _ = read_all(&buf);
        }
    }

    #[test]
    fn response_framing() {
        let mut out = Vec::new();
        write_response(&mut out, 201, "text/plain", b"hi", true).expect("write");
        assert_eq!(
            out,
            b"HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
        );
        let mut out = Vec::new();
        start_chunked(&mut out, "application/json").expect("head");
        write_chunk(&mut out, b"hello\n").expect("write");
        write_chunk(&mut out, b"").expect("write");
        end_chunked(&mut out).expect("end");
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n0\r\n\r\n"
        );
    }
}
