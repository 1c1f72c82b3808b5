//! Response framing: status line and headers, `Content-Length` or chunked bodies, complete JSON
//! and `Status` error responses (docs/SEMANTICS.md §1, "Errors"). Pure.
//!
//! It owns the bytes of every response head the server writes, so framing headers
//! (`Content-Length`, `Transfer-Encoding`, `Connection: close`) are added here and nowhere else.
//! It does not decide what to answer or when to flush.

use crate::k8s::status::ApiError;

/// The reason phrase for `code`; `""` for codes it does not know (the phrase is optional).
pub fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// The interim response to a request head with `Expect: 100-continue` (RFC 9110 §15.2.1): the
/// client may send the body now. No headers, no body; the final response follows later.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How the body after a [`head`] is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Exactly this many bytes follow (`Content-Length`).
    Length(usize),
    /// Chunks follow ([`push_chunk`], then [`push_last_chunk`]): a watch or a relayed answer to
    /// an HTTP/1.1 client.
    Chunked,
    /// The body ends when the connection closes (RFC 9112 §6.3, item 8): a watch or a relayed
    /// answer to an HTTP/1.0 client, which must not be sent chunked (§6.1). Always with
    /// `Connection: close`.
    Close,
}

/// Status line + headers + blank line. Always adds `Content-Length` or
/// `Transfer-Encoding: chunked` per `body` (none for 1xx and 204, which have no body, nor for a
/// close-delimited body), and `Connection: close` when `!keep_alive` or the body is
/// [`Body::Close`].
///
/// Caller headers named `Content-Length` or `Transfer-Encoding` are dropped (framing is decided
/// here), as is a caller `Connection` header when `!keep_alive`. A header whose name is not a
/// token or whose value contains CR, LF or NUL is dropped too (no header injection).
pub fn head(code: u16, headers: &[(&str, &str)], body: Body, keep_alive: bool) -> Vec<u8> {
    framed(code, headers, body, keep_alive)
}

/// [`head`] for a relayed upstream answer: the upstream's header names and byte values (a value
/// may carry obs-text), framed the same way.
pub fn relayed_head(
    code: u16,
    headers: &[(String, Vec<u8>)],
    body: Body,
    keep_alive: bool,
) -> Vec<u8> {
    framed(code, headers, body, keep_alive)
}

fn framed<N: AsRef<str>, V: AsRef<[u8]>>(
    code: u16,
    headers: &[(N, V)],
    body: Body,
    keep_alive: bool,
) -> Vec<u8> {
    let keep_alive = keep_alive && body != Body::Close;
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(format!("HTTP/1.1 {code} {}\r\n", reason(code)).as_bytes());
    for (name, value) in headers {
        let (name, value) = (name.as_ref(), value.as_ref());
        let framing = name.eq_ignore_ascii_case("content-length")
            || name.eq_ignore_ascii_case("transfer-encoding")
            || (!keep_alive && name.eq_ignore_ascii_case("connection"));
        if framing || !valid_field(name, value) {
            continue;
        }
        push_field(&mut out, name, value);
    }
    if !(100..200).contains(&code) && code != 204 {
        match body {
            Body::Length(n) => push_field(&mut out, "Content-Length", n.to_string().as_bytes()),
            Body::Chunked => push_field(&mut out, "Transfer-Encoding", b"chunked"),
            Body::Close => {}
        }
    }
    if !keep_alive {
        push_field(&mut out, "Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn push_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn valid_field(name: &str, value: &[u8]) -> bool {
    !name.is_empty()
        && name.bytes().all(super::token::is_tchar)
        && !value.iter().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

/// Appends one chunk (`<hex len>\r\n<data>\r\n`). A no-op for empty data: an empty chunk would
/// end the stream.
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    push_chunk_size(out, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(CHUNK_END);
}

/// What ends a chunk's data, after [`push_chunk_size`] and the data itself.
pub const CHUNK_END: &[u8] = b"\r\n";

/// Appends the chunk-size line of a chunk of `len` bytes: `len` in lower-case hex, then CRLF.
/// For a chunk whose data is queued in pieces (a watch event around a shared object); written
/// without the formatting machinery, as it runs once per event and watcher.
pub fn push_chunk_size(out: &mut Vec<u8>, len: usize) {
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(len >> (i * 4)) & 0xf]);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the terminating chunk (no trailers): the clean end of a chunked body.
pub fn push_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

/// A complete `Content-Type: application/json` response.
pub fn json(code: u16, body: &[u8], keep_alive: bool) -> Vec<u8> {
    json_with(code, &[], body, keep_alive)
}

fn json_with(code: u16, extra: &[(&str, &str)], body: &[u8], keep_alive: bool) -> Vec<u8> {
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend_from_slice(extra);
    let mut out = head(code, &headers, Body::Length(body.len()), keep_alive);
    out.extend_from_slice(body);
    out
}

/// A complete `Status` error response (body = `err.to_json()`, HTTP status = `err.code`), with
/// `Retry-After` when `err.retry_after` is set.
pub fn status(err: &ApiError, keep_alive: bool) -> Vec<u8> {
    let body = err.to_json();
    match err.retry_after {
        Some(secs) => json_with(
            err.code,
            &[("Retry-After", &secs.to_string())],
            &body,
            keep_alive,
        ),
        None => json(err.code, &body, keep_alive),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_head_keeps_byte_values_and_is_framed_here() {
        let headers = vec![
            ("Content-Type".to_string(), b"application/json".to_vec()),
            ("X-Obs".to_string(), vec![b'a', 0xE9, b'b']),
            ("Content-Length".to_string(), b"99".to_vec()),
            ("Transfer-Encoding".to_string(), b"gzip".to_vec()),
            ("X-Bad".to_string(), b"a\r\nSet-Cookie: x".to_vec()),
        ];
        let h = relayed_head(200, &headers, Body::Chunked, true);
        let want = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Obs: a\xE9b\r\n\
                     Transfer-Encoding: chunked\r\n\r\n";
        assert_eq!(h, want.to_vec());
        // No body framing on a 204, and the connection's end said when it closes.
        let h = relayed_head(204, &headers[..1], Body::Length(0), false);
        assert_eq!(
            h,
            b"HTTP/1.1 204 No Content\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                .to_vec()
        );
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap_or("<not utf-8>")
    }

    #[test]
    fn heads_are_exact() {
        let cases: &[(Vec<u8>, &str)] = &[
            (
                head(
                    200,
                    &[("Content-Type", "application/json")],
                    Body::Chunked,
                    true,
                ),
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                 Transfer-Encoding: chunked\r\n\r\n",
            ),
            (
                head(404, &[], Body::Length(12), false),
                "HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\nConnection: close\r\n\r\n",
            ),
            (
                // Caller framing headers are replaced; injected CR/LF values are dropped.
                head(
                    200,
                    &[
                        ("Content-Length", "99"),
                        ("Transfer-Encoding", "gzip"),
                        ("X-Evil", "a\r\nSet-Cookie: x"),
                        ("Bad Name", "v"),
                        ("Connection", "keep-alive"),
                        ("X-Ok", "1"),
                    ],
                    Body::Length(0),
                    false,
                ),
                "HTTP/1.1 200 OK\r\nX-Ok: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            ),
            (
                head(204, &[], Body::Length(0), true),
                "HTTP/1.1 204 No Content\r\n\r\n",
            ),
            (
                head(599, &[], Body::Length(0), true),
                "HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n",
            ),
            (
                // A close-delimited body (an HTTP/1.0 client's): no framing header, and the
                // connection closes whatever was asked (its `Connection` header dropped).
                head(
                    200,
                    &[
                        ("Content-Type", "application/json"),
                        ("Connection", "keep-alive"),
                    ],
                    Body::Close,
                    true,
                ),
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(text(got), *want);
        }
    }

    #[test]
    fn continue_is_a_bare_interim_head() {
        assert_eq!(text(CONTINUE), "HTTP/1.1 100 Continue\r\n\r\n");
        assert_eq!(CONTINUE, head(100, &[], Body::Length(0), true).as_slice());
    }

    #[test]
    fn reasons() {
        for (code, want) in [(200, "OK"), (406, "Not Acceptable"), (410, "Gone"), (1, "")] {
            assert_eq!(reason(code), want);
        }
        for code in [400, 404, 406, 410, 413, 422, 429, 431, 500, 501, 503, 505] {
            assert!(!reason(code).is_empty(), "{code}");
        }
    }

    #[test]
    fn chunks() {
        let mut out = Vec::new();
        push_chunk(&mut out, b"{\"type\":\"ADDED\"}\n");
        push_chunk(&mut out, b"");
        push_chunk(&mut out, &[b'x'; 26]);
        push_last_chunk(&mut out);
        let want = format!(
            "11\r\n{{\"type\":\"ADDED\"}}\n\r\n1a\r\n{}\r\n0\r\n\r\n",
            "x".repeat(26)
        );
        assert_eq!(text(&out), want);
    }

    #[test]
    fn chunk_sizes_are_lower_case_hex() {
        for n in [
            0usize,
            1,
            9,
            10,
            15,
            16,
            255,
            256,
            4095,
            65_536,
            3_500_000,
            usize::MAX,
        ] {
            let mut v = Vec::new();
            push_chunk_size(&mut v, n);
            assert_eq!(text(&v), format!("{n:x}\r\n"), "{n}");
        }
    }

    #[test]
    fn json_response_is_complete() {
        let out = json(200, b"{\"a\":1}", true);
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        );
    }

    #[test]
    fn status_response_carries_the_status_and_retry_after() {
        let err = ApiError::unavailable("cache not ready", Some(1));
        let out = status(&err, false);
        let body = err.to_json();
        let want_head = format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
             Retry-After: 1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        assert_eq!(text(&out), format!("{want_head}{}", text(&body)));

        let out = status(&ApiError::not_found("nodes", "edge-1"), true);
        assert!(text(&out).starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(!text(&out).contains("Retry-After"));
        assert!(text(&out).ends_with(text(&ApiError::not_found("nodes", "edge-1").to_json())));
    }
}
