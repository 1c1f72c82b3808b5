//! The LIST client of the load bench, built not to be the bottleneck: one keep-alive
//! connection, one 4 MiB buffer reused for every response and read in big chunks, only the head
//! and the body framing (Content-Length or chunked) parsed; body bytes are counted and skipped,
//! never copied, scanned or allocated. Plus [`Floor`]: an in-process server that writes a
//! prebuilt response from memory with one `write_all`: what loopback costs for the same bytes
//! with one copy into the socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use crate::http::{MAX_BODY, MAX_HEAD, REQUEST_TIMEOUT};

/// The reused read buffer.
pub const BUF: usize = 4 << 20;

/// What a response was: status and body size.
#[derive(Clone, Copy, Debug)]
pub struct Reply {
    /// HTTP status.
    pub code: u16,
    /// Body bytes (without chunk framing).
    pub body_len: usize,
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// One keep-alive connection with a large reused buffer; `buf[start..end]` is read but not yet
/// consumed.
#[derive(Debug)]
pub struct RawClient {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    accept: &'static str,
}

impl RawClient {
    /// A client for `addr` (connects lazily).
    pub fn new(addr: SocketAddr) -> RawClient {
        RawClient {
            addr,
            stream: None,
            buf: vec![0; BUF],
            start: 0,
            end: 0,
            accept: "application/json",
        }
    }

    /// A client sending `Accept: accept` instead of `application/json` (e.g. kube-proxy's
    /// protobuf header).
    pub fn with_accept(addr: SocketAddr, accept: &'static str) -> RawClient {
        RawClient {
            accept,
            ..RawClient::new(addr)
        }
    }

    /// GET `path` and read the whole response (body skipped, counted).
    pub fn get(&mut self, path: &str) -> io::Result<Reply> {
        if self.stream.is_none() {
            let s = TcpStream::connect(self.addr)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
            self.stream = Some(s);
            (self.start, self.end) = (0, 0);
        }
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: {}\r\n\r\n",
            self.addr, self.accept
        );
        let r = self.stream_mut()?.write_all(req.as_bytes());
        let r = r.and_then(|()| self.read_reply());
        match r {
            Ok((reply, close)) => {
                if close {
                    self.stream = None;
                }
                Ok(reply)
            }
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }

    fn stream_mut(&mut self) -> io::Result<&mut TcpStream> {
        self.stream
            .as_mut()
            .ok_or_else(|| bad("not connected".into()))
    }

    /// One read appended at `end` (compacting first when the buffer is full).
    fn fill(&mut self) -> io::Result<()> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                return Err(bad("line longer than the buffer".into()));
            }
        }
        let end = self.end;
        let n = {
            let s = self
                .stream
                .as_mut()
                .ok_or_else(|| bad("not connected".into()))?;
            s.read(&mut self.buf[end..])?
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.end += n;
        Ok(())
    }

    /// The next CRLF-terminated line (without CRLF), consumed, as text.
    fn line(&mut self) -> io::Result<String> {
        let mut scanned = 0;
        loop {
            let from = self.start + scanned;
            if let Some(i) = self.buf[from..self.end].iter().position(|&b| b == b'\n') {
                let line = &self.buf[self.start..from + i];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let text = String::from_utf8_lossy(line).into_owned();
                self.start = from + i + 1;
                return Ok(text);
            }
            scanned = self.end - self.start;
            if scanned > MAX_HEAD {
                return Err(bad("response line too long".into()));
            }
            self.fill()?;
        }
    }

    /// Consumes `n` bytes: what is buffered, then whole-buffer reads over the rest.
    fn skip(&mut self, mut n: usize) -> io::Result<()> {
        let avail = self.end - self.start;
        if avail >= n {
            self.start += n;
            return Ok(());
        }
        n -= avail;
        (self.start, self.end) = (0, 0);
        while n > 0 {
            let got = {
                let s = self
                    .stream
                    .as_mut()
                    .ok_or_else(|| bad("not connected".into()))?;
                s.read(&mut self.buf[..])?
            };
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if got <= n {
                n -= got;
            } else {
                // Bytes past this response (none with sequential requests, kept anyway).
                (self.start, self.end) = (n, got);
                n = 0;
            }
        }
        Ok(())
    }

    /// Reads one response; the flag says whether the connection must be closed afterwards.
    fn read_reply(&mut self) -> io::Result<(Reply, bool)> {
        let status = self.line()?;
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {status:?}")))?;
        let (mut len, mut chunked, mut close, mut seen) = (None, false, false, status.len());
        loop {
            let h = self.line()?;
            seen += h.len() + 2;
            if seen > MAX_HEAD {
                return Err(bad("response head too large".into()));
            }
            if h.is_empty() {
                break;
            }
            let Some((k, v)) = h.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                len = Some(
                    v.parse::<usize>()
                        .map_err(|_| bad(format!("bad content-length {v:?}")))?,
                );
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.eq_ignore_ascii_case("chunked");
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.eq_ignore_ascii_case("close");
            }
        }
        let mut body_len = 0usize;
        if chunked {
            loop {
                let line = self.line()?;
                let hex = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(hex, 16)
                    .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
                if size == 0 {
                    while !self.line()?.is_empty() {} // trailers
                    break;
                }
                body_len += size;
                if body_len > MAX_BODY {
                    return Err(bad("body too large".into()));
                }
                self.skip(size)?;
                if !self.line()?.is_empty() {
                    return Err(bad("chunk not followed by CRLF".into()));
                }
            }
        } else if let Some(n) = len {
            if n > MAX_BODY {
                return Err(bad("body too large".into()));
            }
            self.skip(n)?;
            body_len = n;
        } else {
            // Close-delimited.
            body_len = self.end - self.start;
            (self.start, self.end) = (0, 0);
            let Some(s) = self.stream.as_mut() else {
                return Err(bad("not connected".into()));
            };
            loop {
                let got = s.read(&mut self.buf[..])?;
                if got == 0 {
                    break;
                }
                body_len += got;
                if body_len > MAX_BODY {
                    return Err(bad("body too large".into()));
                }
            }
            close = true;
        }
        Ok((Reply { code, body_len }, close))
    }
}

/// An in-process server answering every GET on a connection with one prebuilt response
/// (Content-Length) written from memory: what loopback costs for these bytes.
#[derive(Debug)]
pub struct Floor {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Floor {
    /// Serves `body` on a free loopback port from a thread of this process.
    pub fn start(body: &[u8]) -> io::Result<Floor> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let mut resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        resp.extend_from_slice(body);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(mut s) = conn else { continue };
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
                let _ = serve(&mut s, &resp);
                let _ = s.shutdown(Shutdown::Both);
            }
        });
        Ok(Floor { addr, stop })
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// Answers every request head on `s` with `resp` until the peer closes.
fn serve(s: &mut TcpStream, resp: &[u8]) -> io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    let mut have = 0;
    loop {
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            return Ok(());
        }
        have += n;
        while let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            s.write_all(resp)?;
            buf.copy_within(i + 4..have, 0);
            have -= i + 4;
        }
        if have == buf.len() {
            return Err(bad("request head too large".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `responses` in order, one per request head, on one connection.
    fn server(responses: Vec<Vec<u8>>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            for r in responses {
                let mut have = Vec::new();
                while !have.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).unwrap();
                    have.extend_from_slice(&buf[..n]);
                }
                // Split writes so that framing straddles reads.
                for part in r.chunks(7) {
                    s.write_all(part).unwrap();
                }
            }
        });
        addr
    }

    #[test]
    fn content_length_chunked_and_keep_alive() {
        let big = vec![b'x'; BUF + 12345];
        let mut cl =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", big.len()).into_bytes();
        cl.extend_from_slice(&big);
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\na;x=1\r\n0123456789\r\n0\r\n\r\n"
                .to_vec();
        let small = b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno".to_vec();
        let mut c = RawClient::new(server(vec![cl, chunked, small]));
        let r = c.get("/a").unwrap();
        assert_eq!((r.code, r.body_len), (200, BUF + 12345));
        let r = c.get("/b").unwrap();
        assert_eq!((r.code, r.body_len), (200, 13));
        let r = c.get("/c").unwrap();
        assert_eq!((r.code, r.body_len), (404, 2));
    }

    #[test]
    fn floor_serves_the_body_repeatedly() {
        let f = Floor::start(&[b'y'; 100_000]).unwrap();
        let mut c = RawClient::new(f.addr);
        for _ in 0..3 {
            let r = c.get("/").unwrap();
            assert_eq!((r.code, r.body_len), (200, 100_000));
        }
    }
}
