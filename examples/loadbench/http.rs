//! A minimal blocking HTTP/1.1 client over `std::net` for the load bench: keep-alive requests
//! with Content-Length, chunked or close-delimited bodies, one-shot requests, free ports. Every
//! read is bounded by [`MAX_BODY`] / [`MAX_HEAD`].

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Largest response body accepted.
pub const MAX_BODY: usize = 512 << 20;
/// Largest response head (status line + headers) accepted.
pub const MAX_HEAD: usize = 64 << 10;
/// Read timeout of every request (a stuck server fails the bench instead of hanging it).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One response: status and body.
#[derive(Debug)]
pub struct Response {
    /// HTTP status.
    pub code: u16,
    /// Whether the body came chunked.
    pub chunked: bool,
    /// Body bytes.
    pub body: Vec<u8>,
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A free loopback port (bound and released).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A keep-alive connection that reconnects when the server closed it.
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
    accept: Option<&'static str>,
}

impl Client {
    /// A client for `addr` (connects lazily).
    pub fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            conn: None,
            accept: None,
        }
    }

    /// A client that sends `Accept: accept` with every request (e.g. kube-proxy's protobuf one).
    pub fn with_accept(addr: SocketAddr, accept: &'static str) -> Client {
        Client {
            accept: Some(accept),
            ..Client::new(addr)
        }
    }

    /// Sends one request and reads the whole response.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<Response> {
        let reused = self.conn.is_some();
        match self.try_request(method, path, body) {
            Ok(r) => Ok(r),
            // A kept-alive connection the server closed meanwhile: one fresh attempt.
            Err(_) if reused => {
                self.conn = None;
                self.try_request(method, path, body)
            }
            Err(e) => Err(e),
        }
    }

    fn try_request(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<Response> {
        if self.conn.is_none() {
            let s = TcpStream::connect(self.addr)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
            self.conn = Some(BufReader::with_capacity(256 << 10, s));
        }
        let Some(r) = self.conn.as_mut() else {
            return Err(bad("no connection".into()));
        };
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if let Some(a) = self.accept {
            req.push_str(&format!("Accept: {a}\r\n"));
        }
        if method == "POST" {
            req.push_str("Content-Type: application/json\r\n");
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut out = req.into_bytes();
        out.extend_from_slice(body);
        r.get_mut().write_all(&out)?;
        let (resp, close) = read_response(r)?;
        if close {
            self.conn = None;
        }
        Ok(resp)
    }
}

/// One request on a fresh connection with `Connection: close`.
pub fn get_once(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<Response> {
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut r = BufReader::new(s);
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    r.get_mut().write_all(req.as_bytes())?;
    read_response(&mut r).map(|(resp, _)| resp)
}

/// Reads a status line and headers: (status, lower-cased headers).
pub fn read_head<R: BufRead>(r: &mut R) -> io::Result<(u16, Vec<(String, String)>)> {
    let mut seen = 0usize;
    let mut line = String::new();
    r.read_line(&mut line)?;
    seen += line.len();
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        seen += h.len();
        if seen > MAX_HEAD {
            return Err(bad("response head too large".into()));
        }
        let h = h.trim_end();
        if h.is_empty() {
            return Ok((code, headers));
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

/// Reads one response; the flag says whether the connection must be closed afterwards.
fn read_response<R: BufRead>(r: &mut R) -> io::Result<(Response, bool)> {
    let (code, headers) = read_head(r)?;
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    let close = get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let chunked = get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let mut body = Vec::new();
    let close = if chunked {
        loop {
            let mut line = String::new();
            if r.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                let mut end = String::new();
                r.read_line(&mut end)?;
                break;
            }
            if body.len() + size > MAX_BODY {
                return Err(bad("body too large".into()));
            }
            let start = body.len();
            body.resize(start + size + 2, 0);
            r.read_exact(&mut body[start..])?;
            body.truncate(start + size);
        }
        close
    } else if let Some(len) = get("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        if len > MAX_BODY {
            return Err(bad("body too large".into()));
        }
        body.resize(len, 0);
        r.read_exact(&mut body)?;
        close
    } else {
        r.take(MAX_BODY as u64).read_to_end(&mut body)?;
        true // close-delimited
    };
    Ok((
        Response {
            code,
            chunked,
            body,
        },
        close,
    ))
}
