//! gRPC over HTTP/2 (grpc/grpc `doc/PROTOCOL-HTTP2.md`), the parts a unary client needs: the
//! request's header fields, the 5-octet message prefix (compression refused: we never offer
//! it), a bound on the answer's size, and the outcome read from `grpc-status` and the
//! percent-encoded `grpc-message`, in trailers or a trailers-only answer.

use super::hpack::{self, Field};

/// The largest answer message accepted: 16 MiB, the kubelet's own receive limit for CRI (a node
/// with many pods lists them all in one ListPodSandbox answer).
pub const MAX_MESSAGE: usize = 16 << 20;

/// The longest `grpc-message` kept, in octets (the rest is cut).
const MAX_STATUS_MESSAGE: usize = 1024;

/// The length of the message prefix: a compressed flag and a 4-octet big-endian length.
pub const PREFIX_LEN: usize = 5;

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrpcError {
    /// The HTTP status was not 200.
    HttpStatus(String),
    /// The answer's content-type is not gRPC's.
    ContentType(String),
    /// A compressed message (we never offered compression).
    Compressed,
    /// A message announcing more than [`MAX_MESSAGE`] octets.
    TooLarge { length: u64, max: usize },
    /// The body does not hold exactly one whole message.
    BadBody { length: usize },
    /// The answer ended without `grpc-status`, or with one that is not a number.
    NoStatus,
    /// The server's answer: a non-zero `grpc-status` and its message.
    Status { code: u32, message: String },
}

impl std::fmt::Display for GrpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrpcError::HttpStatus(s) => write!(f, "HTTP status {s} (not a gRPC answer)"),
            GrpcError::ContentType(c) => write!(f, "content-type {c:?} is not application/grpc"),
            GrpcError::Compressed => {
                f.write_str("compressed message, though compression was not offered")
            }
            GrpcError::TooLarge { length, max } => {
                write!(f, "message of {length} octets over the limit of {max}")
            }
            GrpcError::BadBody { length } => write!(
                f,
                "answer body of {length} octets is not exactly one message"
            ),
            GrpcError::NoStatus => f.write_str("answer ended without a valid grpc-status"),
            GrpcError::Status { code, message } => {
                write!(f, "grpc-status {code} ({}): {message}", code_name(*code))
            }
        }
    }
}

/// The name of a gRPC status code.
pub fn code_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|c| NAMES.get(c))
        .copied()
        .unwrap_or("unknown code")
}

/// The request's header block: pseudo-header fields first, each a literal without indexing.
pub fn request_headers(path: &str, authority: &str, timeout_ms: u64) -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_literal(&mut block, b":method", b"POST");
    hpack::encode_literal(&mut block, b":scheme", b"http");
    hpack::encode_literal(&mut block, b":path", path.as_bytes());
    hpack::encode_literal(&mut block, b":authority", authority.as_bytes());
    hpack::encode_literal(&mut block, b"content-type", b"application/grpc");
    hpack::encode_literal(&mut block, b"te", b"trailers");
    // The server may give up on the call at the same deadline as ours.
    hpack::encode_literal(
        &mut block,
        b"grpc-timeout",
        format!("{timeout_ms}m").as_bytes(),
    );
    block
}

/// A message with its 5-octet prefix, uncompressed.
pub fn frame_message(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Checks a message prefix as soon as it has arrived, so a huge length is refused before the
/// body is buffered.
pub fn check_prefix(body: &[u8]) -> Result<(), GrpcError> {
    if let Some(prefix) = body.get(..PREFIX_LEN) {
        if prefix[0] != 0 {
            return Err(GrpcError::Compressed);
        }
        let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        if length as usize > MAX_MESSAGE {
            return Err(GrpcError::TooLarge {
                length: u64::from(length),
                max: MAX_MESSAGE,
            });
        }
    }
    Ok(())
}

/// The one message of a unary answer's body.
pub fn unframe(body: &[u8]) -> Result<&[u8], GrpcError> {
    check_prefix(body)?;
    let bad = GrpcError::BadBody { length: body.len() };
    let prefix = body.get(..PREFIX_LEN).ok_or(bad.clone())?;
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if body.len() - PREFIX_LEN != length {
        return Err(bad);
    }
    Ok(&body[PREFIX_LEN..])
}

fn field<'a>(fields: &'a [Field], name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

/// Checks the answer's first header block (`:status` 200, a gRPC content-type).
pub fn check_headers(fields: &[Field]) -> Result<(), GrpcError> {
    let status = field(fields, ":status").unwrap_or(b"");
    if status != b"200" {
        return Err(GrpcError::HttpStatus(
            String::from_utf8_lossy(status).into_owned(),
        ));
    }
    let content_type = field(fields, "content-type").unwrap_or(b"");
    let grpc = content_type
        .strip_prefix(b"application/grpc")
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'+' || rest[0] == b';');
    if !grpc {
        return Err(GrpcError::ContentType(
            String::from_utf8_lossy(content_type).into_owned(),
        ));
    }
    Ok(())
}

/// The call's outcome from its trailers: `Ok` for grpc-status 0.
pub fn status(trailers: &[Field]) -> Result<(), GrpcError> {
    let code = field(trailers, "grpc-status")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or(GrpcError::NoStatus)?;
    if code == 0 {
        return Ok(());
    }
    let message = percent_decode(field(trailers, "grpc-message").unwrap_or(b""));
    Err(GrpcError::Status { code, message })
}

/// Decodes a percent-encoded `grpc-message` (invalid escapes are kept as they are), cut to
/// [`MAX_STATUS_MESSAGE`] octets and made valid UTF-8.
pub fn percent_decode(v: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(v.len().min(MAX_STATUS_MESSAGE));
    let mut i = 0;
    while i < v.len() && out.len() < MAX_STATUS_MESSAGE {
        match (
            v[i],
            v.get(i + 1).and_then(|&b| hex(b)),
            v.get(i + 2).and_then(|&b| hex(b)),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(list: &[(&str, &str)]) -> Vec<Field> {
        list.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn messages_round_trip() {
        let framed = frame_message(b"\x0a\x02\x12\x00");
        assert_eq!(framed, b"\x00\x00\x00\x00\x04\x0a\x02\x12\x00");
        assert_eq!(unframe(&framed), Ok(&b"\x0a\x02\x12\x00"[..]));
        assert_eq!(unframe(&frame_message(b"")), Ok(&b""[..]));
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(
            unframe(b"\x00\x00\x00"),
            Err(GrpcError::BadBody { length: 3 })
        );
        assert_eq!(
            unframe(b"\x00\x00\x00\x00\x02x"),
            Err(GrpcError::BadBody { length: 6 })
        );
        assert_eq!(
            unframe(b"\x00\x00\x00\x00\x00x"),
            Err(GrpcError::BadBody { length: 6 })
        );
        assert_eq!(unframe(b"\x01\x00\x00\x00\x00"), Err(GrpcError::Compressed));
        assert_eq!(
            check_prefix(b"\x00\xff\xff\xff\xff"),
            Err(GrpcError::TooLarge {
                length: 0xffff_ffff,
                max: MAX_MESSAGE
            })
        );
        assert_eq!(check_prefix(b"\x00\x01"), Ok(()));
    }

    #[test]
    fn headers_and_trailers_decide_the_outcome() {
        assert_eq!(
            check_headers(&fields(&[
                (":status", "200"),
                ("content-type", "application/grpc")
            ])),
            Ok(())
        );
        assert_eq!(
            check_headers(&fields(&[
                (":status", "200"),
                ("content-type", "application/grpc+proto")
            ])),
            Ok(())
        );
        assert_eq!(
            check_headers(&fields(&[
                (":status", "404"),
                ("content-type", "text/plain")
            ])),
            Err(GrpcError::HttpStatus("404".into()))
        );
        assert_eq!(
            check_headers(&fields(&[
                (":status", "200"),
                ("content-type", "application/grpcx")
            ])),
            Err(GrpcError::ContentType("application/grpcx".into()))
        );
        assert_eq!(status(&fields(&[("grpc-status", "0")])), Ok(()));
        assert_eq!(
            status(&fields(&[("grpc-message", "x")])),
            Err(GrpcError::NoStatus)
        );
        assert_eq!(
            status(&fields(&[("grpc-status", "zero")])),
            Err(GrpcError::NoStatus)
        );
        assert_eq!(
            status(&fields(&[
                ("grpc-status", "12"),
                ("grpc-message", "unknown method Foo%20%E2%9C%93%zz%")
            ])),
            Err(GrpcError::Status {
                code: 12,
                message: "unknown method Foo \u{2713}%zz%".into()
            })
        );
        assert!(GrpcError::Status {
            code: 12,
            message: "m".into()
        }
        .to_string()
        .contains("UNIMPLEMENTED"));
    }

    #[test]
    fn long_status_messages_are_cut() {
        let long = vec![b'a'; 10 * MAX_STATUS_MESSAGE];
        assert_eq!(percent_decode(&long).len(), MAX_STATUS_MESSAGE);
    }

    #[test]
    fn request_headers_decode_in_order() {
        let block = request_headers(
            "/runtime.v1.RuntimeService/ListPodSandbox",
            "localhost",
            5000,
        );
        let f = hpack::Decoder::new(0).decode(&block, 1 << 16).unwrap();
        let names: Vec<&[u8]> = f.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(
            names[..4],
            [&b":method"[..], b":scheme", b":path", b":authority"]
        );
        assert_eq!(f[6].1, b"5000m");
    }
}
