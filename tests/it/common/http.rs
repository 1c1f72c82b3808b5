//! The harness's HTTP/1.1 client over plain sockets: one-shot requests, raw bytes, responses
//! (Content-Length, chunked or close-delimited) and open watch streams.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Response;

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): (status, headers, body).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    try_request(addr, method, path, headers, body).expect("HTTP request")
}

/// Like [`request`], returning I/O errors.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PATCH" || method == "PUT" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    read_response(&mut BufReader::new(s))
}

/// Sends raw bytes and returns everything the server answers until it closes (bounded).
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut out);
    out
}

/// Reads one response: status line, headers, and a Content-Length, chunked or close-delimited body.
pub fn read_response<R: BufRead>(r: &mut R) -> std::io::Result<Response> {
    let (code, headers) = read_head(r)?;
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        while let Some(chunk) = read_chunk(r)? {
            body.extend_from_slice(&chunk);
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len.trim().parse().unwrap_or(0);
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok((code, headers, body))
}

pub fn read_head<R: BufRead>(r: &mut R) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("status line {line:?}"),
            )
        })?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok((code, headers))
}

/// One chunk of a chunked body; `None` at the last chunk.
pub fn read_chunk<R: BufRead>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let size =
        usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("chunk size {line:?}"),
            )
        })?;
    if size == 0 {
        let mut end = String::new();
        r.read_line(&mut end)?;
        return Ok(None);
    }
    let mut data = vec![0; size + 2];
    r.read_exact(&mut data)?;
    data.truncate(size);
    Ok(Some(data))
}

/// Sends a GET for a stream (a watch) and reads its head: the reader positioned at the body,
/// the status code and the headers.
pub fn open_stream(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> OpenStream {
    try_open_stream(addr, path, headers).expect("open a stream")
}

/// An opened stream: the reader positioned at the body, the status code and the headers.
pub type OpenStream = (BufReader<TcpStream>, u16, Vec<(String, String)>);

/// Like [`open_stream`], returning I/O errors (a server that is down or closes at once).
pub fn try_open_stream(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<OpenStream> {
    let mut s = TcpStream::connect(addr)?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(s);
    let (code, headers) = read_head(&mut reader)?;
    Ok((reader, code, headers))
}

/// An open watch stream.
pub struct Watch {
    reader: BufReader<TcpStream>,
    pub code: u16,
    pub headers: Vec<(String, String)>,
    buf: Vec<u8>,
    ended: bool,
}

impl Watch {
    /// Opens a watch (the path carries `watch=true`).
    pub fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Watch {
        Self::try_open(addr, path, headers).expect("open a watch")
    }

    /// Like [`Watch::open`], returning I/O errors (a server that is down or restarting).
    pub fn try_open(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Watch> {
        let (reader, code, headers) = try_open_stream(addr, path, headers)?;
        Ok(Watch {
            reader,
            code,
            headers,
            buf: Vec::new(),
            ended: false,
        })
    }

    /// The next event, waiting at most `timeout`; `None` on timeout or end of stream.
    pub fn next(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                if line.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                return Some(serde_json::from_slice(&line).expect("one JSON event per line"));
            }
            if self.ended {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.reader.get_ref().set_read_timeout(Some(left)).ok()?;
            match read_chunk(&mut self.reader) {
                Ok(Some(data)) => self.buf.extend_from_slice(&data),
                Ok(None) => self.ended = true,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(_) => {
                    self.ended = true;
                }
            }
        }
    }

    /// The next event, which must arrive within 10 s.
    pub fn expect(&mut self) -> Value {
        self.next(Duration::from_secs(10))
            .expect("a watch event within 10 s")
    }

    /// Events until `pred` matches one (returned), bounded by 10 s.
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = self.next(left).expect("awaited watch event");
            if pred(&ev) {
                return ev;
            }
        }
    }

    /// Whether the server ended the stream (reads until end or `timeout`).
    pub fn ended_within(&mut self, timeout: Duration) -> bool {
        while self.next(timeout).is_some() {}
        self.ended
    }
}

/// The value of header `name` (case-insensitive), if present.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Splits a watch body into its events (one JSON value per `\n`-terminated line); panics on a
/// line that is not one JSON object or on bytes after the last newline.
pub fn watch_events(body: &[u8]) -> Vec<Value> {
    assert!(
        body.is_empty() || body.ends_with(b"\n"),
        "watch body must end with a newline: {:?}",
        String::from_utf8_lossy(&body[body.len().saturating_sub(200)..])
    );
    body.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_slice(l).unwrap_or_else(|e| {
                panic!(
                    "watch line is not one JSON value ({e}): {:?}",
                    String::from_utf8_lossy(l)
                )
            });
            assert!(v.is_object(), "watch line is not an object: {v}");
            v
        })
        .collect()
}

impl Watch {
    /// Every event until the stream is quiet for `quiet` (or ends), bounded by 15 s overall.
    pub fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut out = Vec::new();
        while Instant::now() < deadline {
            match self.next(quiet) {
                Some(ev) => out.push(ev),
                None => break,
            }
        }
        out
    }

    /// Whether the server has ended the stream (as seen by the reads so far).
    pub fn is_ended(&self) -> bool {
        self.ended
    }
}
