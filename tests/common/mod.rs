//! Integration-test harness: starts the real `grid-wrapper-sim` and `grid-wrapper` binaries on
//! loopback, and speaks HTTP/1.1 to them over plain sockets (no client library in between).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A started child process, killed on drop.
pub struct Proc {
    pub child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound and released: a small race the tests accept).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The simulated apiserver.
pub struct Sim {
    pub proc: Proc,
    pub url: String,
    pub addr: SocketAddr,
}

impl Sim {
    /// Starts `grid-wrapper-sim` with `args` (fixture demo unless given) and waits for its
    /// "listening on" line.
    pub fn start(args: &[&str]) -> Sim {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_grid-wrapper-sim"));
        if !args.contains(&"--fixture") {
            cmd.args(["--fixture", "demo"]);
        }
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("start grid-wrapper-sim");
        let stdout = child.stdout.take().expect("sim stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("sim banner");
        let url = line
            .split_whitespace()
            .last()
            .expect("sim prints its URL")
            .to_string();
        let hostport = url
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        Sim {
            proc: Proc { child },
            addr: hostport.parse().expect("sim address"),
            url,
        }
    }

    /// POSTs a control request to `/sim/<what>`.
    pub fn control(&self, what: &str, body: &Value) -> Value {
        let (code, _, resp) = request(
            self.addr,
            "POST",
            &format!("/sim/{what}"),
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(body).unwrap(),
        );
        assert!(code < 300, "sim {what}: {code} {}", String::from_utf8_lossy(&resp));
        serde_json::from_slice(&resp).unwrap_or(Value::Null)
    }

    /// Upserts an object.
    pub fn apply(&self, obj: &Value) {
        self.control("apply", obj);
    }

    /// Merges labels into a node (a `null` value removes the label).
    pub fn label_node(&self, name: &str, labels: Value) {
        self.control("label-node", &serde_json::json!({"name": name, "labels": labels}));
    }

    /// Requests the sim recorded (proxied ones).
    pub fn requests(&self) -> Vec<Value> {
        let (_, _, body) = request(self.addr, "GET", "/sim/requests", &[], b"");
        serde_json::from_slice(&body).unwrap_or_default()
    }
}

/// A running grid-wrapper.
pub struct Wrapper {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub health: SocketAddr,
}

impl Wrapper {
    /// Starts grid-wrapper against `master` as node `hostname`, with extra flags.
    pub fn start_unready(master: &str, hostname: &str, extra: &[&str]) -> Wrapper {
        let port = free_port();
        let health = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
            .arg(format!("--master={master}"))
            .arg(format!("--hostname={hostname}"))
            .arg(format!("--bind-address=127.0.0.1:{port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{health}"))
            .args(extra)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start grid-wrapper");
        let w = Wrapper {
            proc: Proc { child },
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            health: format!("127.0.0.1:{health}").parse().unwrap(),
        };
        // Wait for the listener.
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(w.addr).is_err() {
            assert!(Instant::now() < deadline, "grid-wrapper did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        w
    }

    /// Starts grid-wrapper and waits for `/readyz` 200.
    pub fn start(master: &str, hostname: &str, extra: &[&str]) -> Wrapper {
        let w = Self::start_unready(master, hostname, extra);
        w.wait_ready();
        w
    }

    /// Waits (bounded) until `/readyz` answers 200.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok((200, _, _)) = try_request(self.health, "GET", "/readyz", &[], b"") {
                return;
            }
            assert!(Instant::now() < deadline, "grid-wrapper never became ready");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// GET on the wrapper.
    pub fn get(&self, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        request(self.addr, "GET", path, &[], b"")
    }

    /// GET that must answer 200 with JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let (code, _, body) = self.get(path);
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("JSON body")
    }

    /// Opens a watch.
    pub fn watch(&self, path: &str) -> Watch {
        Watch::open(self.addr, path, &[])
    }
}

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
) -> std::io::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
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
pub fn read_response<R: BufRead>(r: &mut R) -> std::io::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
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

fn read_head<R: BufRead>(r: &mut R) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("status line {line:?}")))?;
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
fn read_chunk<R: BufRead>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("chunk size {line:?}")))?;
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
        let mut s = TcpStream::connect(addr).expect("connect");
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("send watch");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reader = BufReader::new(s);
        let (code, headers) = read_head(&mut reader).expect("watch head");
        Watch {
            reader,
            code,
            headers,
            buf: Vec::new(),
            ended: false,
        }
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
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return None,
                Err(_) => {
                    self.ended = true;
                }
            }
        }
    }

    /// The next event, which must arrive within 10 s.
    pub fn expect(&mut self) -> Value {
        self.next(Duration::from_secs(10)).expect("a watch event within 10 s")
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

/// `metadata.resourceVersion` as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Names of a list's items.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// First address of each endpoint of a slice.
pub fn slice_ips(slice: &Value) -> Vec<String> {
    slice["endpoints"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["addresses"][0].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}
