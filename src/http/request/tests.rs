//! Request reader tests: a table of raw requests, split-invariance, pipelining, keep-alive.

use super::*;

type Outcome = Vec<Result<Request, ReadError>>;

fn drive<'a>(limits: Limits, chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    read_all(limits, chunks)
}

fn small() -> Limits {
    Limits {
        max_head: 64,
        max_headers: 2,
        max_body: 8,
    }
}

enum Want {
    /// No outcome yet: more bytes needed.
    Partial,
    /// Exactly one request, checked by the function.
    Req(fn(&Request)),
    Err(ReadError),
}

struct Case {
    name: &'static str,
    raw: &'static [u8],
    limits: Limits,
    want: Want,
}

const fn case(name: &'static str, raw: &'static [u8], want: Want) -> Case {
    Case {
        name,
        raw,
        limits: Limits {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body: DEFAULT_MAX_BODY,
        },
        want,
    }
}

fn cases() -> Vec<Case> {
    use ReadError::*;
    use Want::{Err as E, Partial, Req};
    let mut v = vec![
        // Valid.
        case(
            "list+watch",
            b"GET /api/v1/services?resourceVersion=5&watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
            Req(|r| {
                assert_eq!(r.method, "GET");
                assert_eq!(r.path, "/api/v1/services");
                assert_eq!(r.query, "resourceVersion=5&watch=true");
                assert_eq!(r.minor_version, 1);
                assert_eq!(r.headers.len(), 2);
                assert_eq!(r.header("host"), Some(&b"127.0.0.1"[..]));
                assert_eq!(r.header_str("ACCEPT"), Some("*/*"));
                assert!(r.body.is_empty());
            }),
        ),
        case("http/1.0", b"GET / HTTP/1.0\r\n\r\n", Req(|r| {
            assert_eq!((r.path.as_str(), r.query.as_str(), r.minor_version), ("/", "", 0));
            assert!(r.headers.is_empty());
        })),
        case("bare LF", b"GET /a HTTP/1.1\nHost: x\n\n", Req(|r| {
            assert_eq!(r.path, "/a");
            assert_eq!(r.header_str("Host"), Some("x"));
        })),
        case("leading empty lines", b"\r\n\n\r\nGET /a HTTP/1.1\r\n\r\n", Req(|r| {
            assert_eq!(r.path, "/a")
        })),
        case("OWS trimmed", b"GET /a HTTP/1.1\r\nX-A: \t v w  \r\n\r\n", Req(|r| {
            assert_eq!(r.header("x-a"), Some(&b"v w"[..]))
        })),
        case("percent-encoding kept", b"GET /api/v1/namespaces/a%2Fb/services?labelSelector=a%3Db HTTP/1.1\r\n\r\n", Req(|r| {
            assert_eq!(r.path, "/api/v1/namespaces/a%2Fb/services");
            assert_eq!(r.query, "labelSelector=a%3Db");
        })),
        case("empty query", b"GET /a? HTTP/1.1\r\n\r\n", Req(|r| {
            assert_eq!((r.path.as_str(), r.query.as_str()), ("/a", ""))
        })),
        case("absolute-form", b"GET http://127.0.0.1:51006/api/v1/nodes?limit=500 HTTP/1.1\r\n\r\n", Req(|r| {
            assert_eq!((r.path.as_str(), r.query.as_str()), ("/api/v1/nodes", "limit=500"))
        })),
        case("absolute-form without path", b"GET HTTPS://h?x=1 HTTP/1.1\r\n\r\n", Req(|r| {
            assert_eq!((r.path.as_str(), r.query.as_str()), ("/", "x=1"))
        })),
        case("content-length", b"POST /api/v1/namespaces/d/events HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", Req(|r| {
            assert_eq!(r.method, "POST");
            assert_eq!(r.body, b"hello");
        })),
        case("identical content-lengths", b"PUT / HTTP/1.1\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc", Req(|r| {
            assert_eq!(r.body, b"abc")
        })),
        case("content-length 0", b"PATCH / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", Req(|r| {
            assert!(r.body.is_empty())
        })),
        case("chunked with extensions and trailers", b"POST /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n6 ; x\r\n world\r\n0\r\nX-T: 1\r\n\r\n", Req(|r| {
            assert_eq!(r.body, b"hello world")
        })),
        case("chunked, case-insensitive, empty body", b"POST /e HTTP/1.1\r\nTransfer-Encoding:  Chunked \r\n\r\n0\r\n\r\n", Req(|r| {
            assert!(r.body.is_empty())
        })),
        // Partial.
        case("nothing", b"", Partial),
        case("lone CR", b"\r", Partial),
        case("request line", b"GET /api/v1/nod", Partial),
        case("head without blank line", b"GET / HTTP/1.1\r\nHost: x\r\n", Partial),
        case("head, CR of blank line", b"GET / HTTP/1.1\r\nHost: x\r\n\r", Partial),
        case("body missing", b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel", Partial),
        case("last chunk missing", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", Partial),
        case("trailer end missing", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n", Partial),
        // Invalid head.
        case("TLS client hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", E(Malformed)),
        case("leading space", b" GET / HTTP/1.1\r\n\r\n", E(Malformed)),
        case("bad method byte", b"GE(T / HTTP/1.1", E(Malformed)),
        case("space in header name", b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", E(Malformed)),
        case("bare CR in value", b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", E(Malformed)),
        case("obs-fold", b"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", E(Malformed)),
        case("no version", b"GET /\r\n\r\n", E(Malformed)),
        case("garbage version", b"GET / HTTP/one\r\n\r\n", E(Malformed)),
        case("asterisk-form", b"OPTIONS * HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("authority-form", b"CONNECT h:443 HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("relative target", b"GET api/v1 HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("other scheme", b"GET ftp://h/x HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("empty authority", b"GET http:///x HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("fragment", b"GET /a#f HTTP/1.1\r\n\r\n", E(BadTarget)),
        case("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", E(UnsupportedVersion)),
        case("HTTP/1.2", b"GET / HTTP/1.2\r\n\r\n", E(UnsupportedVersion)),
        case("HTTP/3.0", b"GET / HTTP/3.0\r\nHost: x\r\n\r\n", E(UnsupportedVersion)),
        // Invalid framing.
        case("CL and TE", b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", E(ConflictingLength)),
        case("TE and CL", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", E(ConflictingLength)),
        case("non-numeric CL", b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", E(BadContentLength)),
        case("signed CL", b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", E(BadContentLength)),
        case("empty CL", b"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", E(BadContentLength)),
        case("CL list with hole", b"POST / HTTP/1.1\r\nContent-Length: 5,\r\n\r\nhello", E(BadContentLength)),
        case("differing CL list", b"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\nhello", E(BadContentLength)),
        case("differing CL headers", b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", E(BadContentLength)),
        case("overflowing CL", b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", E(BadContentLength)),
        case("CL over max_body", b"POST / HTTP/1.1\r\nContent-Length: 4194305\r\n\r\n", E(BodyTooLarge)),
        case("TE gzip", b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", E(UnsupportedTransferEncoding)),
        case("TE gzip, chunked", b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", E(UnsupportedTransferEncoding)),
        case("TE twice", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", E(UnsupportedTransferEncoding)),
        case("TE in HTTP/1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", E(TransferEncodingInHttp10)),
        case("bad hex", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", E(BadChunk)),
        case("17 hex digits", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000005\r\nhello\r\n0\r\n\r\n", E(BadChunk)),
        case("no CRLF after chunk data", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n", E(BadChunk)),
        case("bare LF chunk line", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", E(BadChunk)),
        case("huge chunk refused before allocating", b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", E(BodyTooLarge)),
    ];
    let limited = [
        Case { name: "head too large", raw: b"GET /0123456789012345678901234567890123456789 HTTP/1.1\r\nHost: x\r\n\r\n", limits: small(), want: E(HeadTooLarge) },
        Case { name: "head too large, no blank line yet", raw: b"GET /01234567890123456789012345678901234567890123456789012345678901234567890", limits: small(), want: E(HeadTooLarge) },
        Case { name: "too many headers", raw: b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: small(), want: E(TooManyHeaders) },
        Case { name: "max headers", raw: b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", limits: small(), want: Req(|r| assert_eq!(r.headers.len(), 2)) },
        Case { name: "CL over small max_body", raw: b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n", limits: small(), want: E(BodyTooLarge) },
        Case { name: "CL at max_body", raw: b"POST / HTTP/1.1\r\nContent-Length: 8\r\n\r\n12345678", limits: small(), want: Req(|r| assert_eq!(r.body, b"12345678")) },
        Case { name: "chunks over max_body", raw: b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n4\r\n", limits: small(), want: E(BodyTooLarge) },
        Case { name: "trailers over max_head", raw: b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: 0123456789012345678901234567890123456789012345678901234567890123\r\n", limits: small(), want: E(TrailersTooLarge) },
        Case { name: "no headers allowed", raw: b"GET / HTTP/1.1\r\nA: 1\r\n\r\n", limits: Limits { max_headers: 0, ..small() }, want: E(TooManyHeaders) },
    ];
    v.extend(limited);
    v
}

fn check(case: &Case, outcome: &Outcome) {
    match (&case.want, outcome.as_slice()) {
        (Want::Partial, []) => {}
        (Want::Req(f), [Ok(req)]) => f(req),
        (Want::Err(want), [Err(got)]) => assert_eq!(got, want, "{}", case.name),
        (_, got) => panic!("{}: unexpected outcome {got:?}", case.name),
    }
}

#[test]
fn table_of_raw_requests() {
    for case in cases() {
        let outcome = drive(case.limits, [case.raw]);
        check(&case, &outcome);
    }
}

#[test]
fn error_statuses_are_decided_here() {
    use ReadError::*;
    let table = [
        (Malformed, 400),
        (BadTarget, 400),
        (BadContentLength, 400),
        (ConflictingLength, 400),
        (BadChunk, 400),
        (TransferEncodingInHttp10, 400),
        (BodyTooLarge, 413),
        (BufferFull, 413),
        (HeadTooLarge, 431),
        (TooManyHeaders, 431),
        (TrailersTooLarge, 431),
        (UnsupportedTransferEncoding, 501),
        (UnsupportedVersion, 505),
    ];
    for (err, code) in table {
        assert_eq!(err.status(), code, "{err:?}");
        assert!(!err.message().is_empty());
        let api = err.to_api_error();
        assert_eq!((api.code, api.message.as_str()), (code, err.message()));
    }
    assert_eq!(Malformed.to_api_error().reason, "BadRequest");
    assert_eq!(BodyTooLarge.to_api_error().reason, "RequestEntityTooLarge");
}

/// Inputs for the split test: every table case, plus pipelined streams.
fn corpus() -> Vec<(Limits, Vec<u8>)> {
    let mut v: Vec<(Limits, Vec<u8>)> =
        cases().iter().map(|c| (c.limits, c.raw.to_vec())).collect();
    v.push((Limits::default(), PIPELINE.to_vec()));
    v.push((
        Limits::default(),
        [PIPELINE, b"GET / HTTP/9.9\r\n\r\n"].concat(),
    ));
    let roomy = Limits {
        max_body: 1024,
        ..small()
    };
    v.push((
        roomy,
        [PIPELINE, b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"].concat(),
    ));
    v
}

const PIPELINE: &[u8] = b"GET /a HTTP/1.1\r\n\r\n\
POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz\r\n\
GET /c?x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n\
GET /d HT";

#[test]
fn outcome_does_not_depend_on_how_input_is_split() {
    for (limits, input) in corpus() {
        // Only the push bound depends on how much is pushed at once (it bounds reads, not
        // requests): keep every input within it.
        assert!(input.len() <= limits.max_buffered());
        let whole = drive(limits, [input.as_slice()]);
        for at in 0..=input.len() {
            let (a, b) = input.split_at(at);
            assert_eq!(
                drive(limits, [a, b]),
                whole,
                "{:?} split at {at}",
                String::from_utf8_lossy(&input)
            );
        }
        let bytes = drive(limits, input.chunks(1));
        assert_eq!(
            bytes,
            whole,
            "{:?} byte by byte",
            String::from_utf8_lossy(&input)
        );
    }
}

#[test]
fn pipelined_requests_come_out_in_order_and_leftovers_stay() {
    let mut reader = RequestReader::new(Limits::default());
    reader.push(PIPELINE).unwrap();
    let mut got = Vec::new();
    while let Some(req) = reader.next_request().unwrap() {
        got.push((req.method, req.path, req.query, req.body));
    }
    let want = [
        ("GET", "/a", "", &b""[..]),
        ("POST", "/b", "", b"xyz"),
        ("GET", "/c", "x", b"z"),
    ]
    .map(|(m, p, q, b)| (m.to_string(), p.to_string(), q.to_string(), b.to_vec()));
    assert_eq!(got, want);
    assert_eq!(reader.buffered(), b"GET /d HT".len());
    reader.push(b"TP/1.1\r\n\r\n").unwrap();
    assert_eq!(
        reader.next_request().unwrap().map(|r| r.path),
        Some("/d".to_string())
    );
    assert_eq!(reader.buffered(), 0);
    assert_eq!(reader.next_request(), Ok(None));
}

#[test]
fn many_pipelined_requests_in_one_push() {
    let one = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    let input = one.repeat(5000);
    let mut reader = RequestReader::new(Limits::default());
    reader.push(&input).unwrap();
    let mut n = 0;
    while let Some(req) = reader.next_request().unwrap() {
        assert_eq!(req.path, "/x");
        n += 1;
    }
    assert_eq!((n, reader.buffered()), (5000, 0));
}

#[test]
fn head_limit_is_exact() {
    let limits = small();
    let head = |len: usize| {
        let fixed = "GET / HTTP/1.1\r\n\r\n".len();
        format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(len - fixed)).into_bytes()
    };
    assert!(matches!(
        drive(limits, [head(64).as_slice()]).as_slice(),
        [Ok(_)]
    ));
    assert_eq!(
        drive(limits, [head(65).as_slice()]),
        vec![Err(ReadError::HeadTooLarge)]
    );
}

#[test]
fn errors_are_sticky() {
    let mut reader = RequestReader::new(Limits::default());
    reader
        .push(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
        .unwrap();
    assert_eq!(reader.next_request(), Err(ReadError::BadContentLength));
    assert_eq!(
        reader.push(b"GET / HTTP/1.1\r\n\r\n"),
        Err(ReadError::BadContentLength)
    );
    assert_eq!(reader.next_request(), Err(ReadError::BadContentLength));
}

#[test]
fn push_is_bounded() {
    let limits = small();
    let mut reader = RequestReader::new(limits);
    let cap = limits.max_buffered();
    assert_eq!(cap, 64 * 2 + 8);
    // Complete requests pipelined too far ahead: the buffer is full, no head is too large.
    let pipelined: Vec<u8> = b"GET / HTTP/1.1\r\n\r\n".repeat(cap / 18 + 1);
    reader.push(&pipelined[..cap]).unwrap();
    assert_eq!(reader.buffered(), cap);
    assert_eq!(reader.push(b"E"), Err(ReadError::BufferFull));
    assert_eq!(reader.buffered(), cap);
}

#[test]
fn an_oversized_head_is_431_however_fast_it_arrives() {
    // One push past the buffer bound (a fast client, a TLS record's worth) is judged by the
    // head it carries, as a slow client's would be by `next_request`.
    for lead in [&b""[..], b"\r\n"] {
        let limits = small();
        let mut reader = RequestReader::new(limits);
        let mut big = lead.to_vec();
        big.extend_from_slice(b"GET / HTTP/1.1\r\nX: ");
        big.resize(limits.max_buffered() + 1, b'a');
        assert_eq!(reader.push(&big), Err(ReadError::HeadTooLarge));
        assert_eq!(reader.next_request(), Err(ReadError::HeadTooLarge));
        assert_eq!(ReadError::HeadTooLarge.status(), 431);
    }
    // A malformed head stays 400.
    let mut reader = RequestReader::new(small());
    assert_eq!(reader.push(&[b'{'; 200]), Err(ReadError::Malformed));
}

#[test]
fn declared_body_is_not_allocated_up_front() {
    let mut reader = RequestReader::new(Limits::default());
    reader
        .push(b"POST / HTTP/1.1\r\nContent-Length: 4194304\r\n\r\nab")
        .unwrap();
    assert_eq!(reader.next_request(), Ok(None));
    if let State::Body { req, .. } = &reader.state {
        assert!(
            req.body.capacity() < 1024,
            "capacity {}",
            req.body.capacity()
        );
    } else {
        panic!("not reading a body");
    }
}

#[test]
fn keep_alive_rules() {
    let cases: &[(u8, &[&str], bool)] = &[
        (1, &[], true),
        (1, &["keep-alive"], true),
        (1, &["Upgrade"], true),
        (1, &["close"], false),
        (1, &["Close"], false),
        (1, &["keep-alive, close"], false),
        (1, &["te", " close "], false),
        (0, &[], false),
        (0, &["keep-alive"], true),
        (0, &["Keep-Alive"], true),
        (0, &["foo,keep-alive"], true),
        (0, &["keep-alive", "close"], false),
        (0, &["keep-alives"], false),
    ];
    for &(minor_version, connection, want) in cases {
        let req = Request {
            method: "GET".into(),
            path: "/".into(),
            query: String::new(),
            minor_version,
            headers: connection
                .iter()
                .map(|v| ("Connection".to_string(), v.as_bytes().to_vec()))
                .collect(),
            body: Vec::new(),
        };
        assert_eq!(
            req.keep_alive(),
            want,
            "HTTP/1.{minor_version} {connection:?}"
        );
    }
    // And through the reader, where httparse trims the values.
    let out = drive(
        Limits::default(),
        [&b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"[..]],
    );
    assert!(matches!(out.as_slice(), [Ok(r)] if !r.keep_alive()));
}

#[test]
fn header_lookup_is_case_insensitive_and_first_match() {
    let out = drive(
        Limits::default(),
        [&b"GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\nX-Bin: \xff\r\n\r\n"[..]],
    );
    let [Ok(r)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(r.header_str("x-A"), Some("1"));
    assert_eq!(r.header("X-Bin"), Some(&b"\xff"[..]));
    assert_eq!(r.header_str("X-Bin"), None);
    assert_eq!(r.header("missing"), None);
}

/// Mutated corpus inputs (a fixed-seed generator, no dependency): never a panic, and still
/// split-invariant.
#[test]
fn mutated_inputs_never_panic() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = b"\r\n :;,0aF/?#\x00\xff";
    for (limits, input) in corpus() {
        let limits = Limits {
            max_body: limits.max_body.max(1024),
            ..limits
        };
        for _ in 0..40 {
            let mut m = input.clone();
            for _ in 0..(next() % 4 + 1) {
                if m.is_empty() {
                    break;
                }
                let at = (next() % m.len() as u64) as usize;
                let b = alphabet[(next() % alphabet.len() as u64) as usize];
                match next() % 3 {
                    0 => m[at] = b,
                    1 => m.insert(at, b),
                    _ => {
                        m.remove(at);
                    }
                }
            }
            let whole = drive(limits, [m.as_slice()]);
            let at = (next() % (m.len() as u64 + 1)) as usize;
            let (a, b) = m.split_at(at);
            assert_eq!(
                drive(limits, [a, b]),
                whole,
                "{:?}",
                String::from_utf8_lossy(&m)
            );
        }
    }
}

/// Pushes `chunks` one by one, taking requests after each push as the server does, and records
/// after each push: the paths of the requests completed, and whether a `100 Continue` was due.
fn continue_trace(limits: Limits, chunks: &[&[u8]]) -> Vec<(Vec<String>, bool)> {
    let mut reader = RequestReader::new(limits);
    let mut out = Vec::new();
    for chunk in chunks {
        let mut paths = Vec::new();
        if reader.push(chunk).is_ok() {
            while let Ok(Some(req)) = reader.next_request() {
                paths.push(req.path);
            }
        }
        let due = reader.take_continue();
        assert!(!reader.take_continue(), "due at most once");
        out.push((paths, due));
    }
    out
}

fn done(paths: &[&str], due: bool) -> (Vec<String>, bool) {
    (paths.iter().map(|p| p.to_string()).collect(), due)
}

#[test]
fn continue_is_due_once_the_head_of_a_body_that_expects_it_is_read() {
    let d = Limits::default();
    // Content-Length body: due after the head, before any body byte; not again.
    assert_eq!(
        continue_trace(
            d,
            &[
                b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
                b"he",
                b"llo",
            ]
        ),
        [done(&[], true), done(&[], false), done(&["/a"], false)]
    );
    // Chunked body.
    assert_eq!(
        continue_trace(
            d,
            &[
                b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
                b"5\r\nhello\r\n0\r\n\r\n",
            ]
        ),
        [done(&[], true), done(&["/a"], false)]
    );
    // Part of the body came with the head: the rest is still awaited, so it is due.
    assert_eq!(
        continue_trace(
            d,
            &[
                b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhe",
                b"llo",
            ]
        ),
        [done(&[], true), done(&["/a"], false)]
    );
}

#[test]
fn continue_is_not_due_without_a_body_to_wait_for() {
    let d = Limits::default();
    // The control: the same head, HTTP/1.1 with a body still to come, is due.
    assert_eq!(
        continue_trace(
            d,
            &[b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"]
        ),
        [done(&[], true)]
    );
    let cases: &[(&str, &[u8], &[&str])] = &[
        (
            "no body",
            b"GET /a HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            &["/a"],
        ),
        (
            "empty body",
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            &["/a"],
        ),
        (
            "HTTP/1.0",
            b"POST /a HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
            &[],
        ),
        (
            "no Expect",
            b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
            &[],
        ),
        (
            "other expectation",
            b"POST /a HTTP/1.1\r\nExpect: 100-continued\r\nContent-Length: 5\r\n\r\n",
            &[],
        ),
        (
            "body with the head (Content-Length)",
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
            &["/a"],
        ),
        (
            "body with the head (chunked)",
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
            &["/a"],
        ),
        (
            "refused by the head checks",
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9999999999\r\n\r\n",
            &[],
        ),
        (
            "refused in the body",
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            &[],
        ),
    ];
    for (name, raw, paths) in cases {
        assert_eq!(continue_trace(d, &[raw]), [done(paths, false)], "{name}");
    }
    // The over-limit Content-Length gets its final status (413) and no 100.
    let mut reader = RequestReader::new(Limits {
        max_body: 8,
        ..Limits::default()
    });
    reader
        .push(b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n")
        .unwrap();
    assert_eq!(reader.next_request(), Err(ReadError::BodyTooLarge));
    assert!(!reader.take_continue());
}

#[test]
fn continue_expectation_is_case_insensitive_and_may_be_listed() {
    for expect in [
        "100-continue",
        "100-Continue",
        "100-CONTINUE",
        " 100-continue\t",
        "foo, 100-continue",
        "100-continue,",
    ] {
        let head = format!("POST /a HTTP/1.1\r\nEXPECT: {expect}\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(
            continue_trace(Limits::default(), &[head.as_bytes()]),
            [done(&[], true)],
            "{expect:?}"
        );
    }
    // A member on a second Expect line counts too.
    assert_eq!(
        continue_trace(
            Limits::default(),
            &[b"POST /a HTTP/1.1\r\nExpect: foo\r\nexpect: 100-continue\r\nContent-Length: 5\r\n\r\n"]
        ),
        [done(&[], true)]
    );
}

#[test]
fn continue_follows_pipelined_requests_in_order() {
    // An earlier complete request, then the head of one expecting 100: the earlier request is
    // handed over first, and the 100 is due only for the second, once it awaits its body.
    let mut reader = RequestReader::new(Limits::default());
    reader
        .push(
            b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx\
              POST /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        )
        .unwrap();
    assert_eq!(
        reader.next_request().unwrap().map(|r| r.path),
        Some("/a".into())
    );
    assert!(!reader.take_continue());
    assert_eq!(reader.next_request(), Ok(None));
    assert!(reader.take_continue());
    reader.push(b"y").unwrap();
    let b = reader.next_request().unwrap();
    assert_eq!(
        b.map(|r| (r.path, r.body)),
        Some(("/b".into(), b"y".to_vec()))
    );
    assert!(!reader.take_continue());
}
