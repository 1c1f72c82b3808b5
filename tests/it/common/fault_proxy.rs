//! A TCP proxy between grid-wrapper and the simulator that misbehaves on request: a response
//! cut off after some bytes and then held open and silent (a half-dead connection, a stuck load
//! balancer), or a watch that goes silent after its first bookmark (a black-holed path). Every
//! request is sent upstream with `Connection: close`, so each connection carries one request
//! and a fault hits exactly the request it names. Loopback only; every thread ends when the
//! proxy is dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What to do to the next request whose request line contains `matches` (and, if set, does
/// not contain `unless`). Each fault fires once.
#[derive(Clone, Debug)]
pub struct Fault {
    pub matches: String,
    pub unless: Option<String>,
    pub what: Misbehaviour,
}

#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Forward the response's first `bytes` bytes after its head, then go silent with the
    /// connection open.
    StallAfter { bytes: usize },
    /// Forward a watch up to and including its first event that holds `BOOKMARK` (a JSON line,
    /// or a protobuf frame and the end of its HTTP chunk), then go silent with the connection
    /// open.
    SilenceAfterBookmark,
    /// Close the connection without an answer (a connection reset by a broken hop).
    Drop,
    /// Answer 200 with an HTML page (a captive portal or a misconfigured proxy).
    Html,
    /// Answer 200 with this `Content-Encoding` and a body that is not valid in it: a gzip
    /// header, then a deflate block of a reserved type (a corrupt gzip stream).
    Coded(&'static str),
    /// Answer 200 as a watch whose events are these lines (each a JSON watch event), then hold
    /// the connection open and silent (a lying upstream).
    Lie(&'static str),
    /// Answer with this function instead of the upstream (it writes the whole response; the
    /// connection is closed after it).
    Answer(fn(&mut TcpStream)),
}

#[derive(Default)]
struct Shared {
    faults: Mutex<Vec<Fault>>,
    /// Request lines seen, in order, with whether a fault fired on it.
    seen: Mutex<Vec<(String, bool)>>,
    /// When each request line was seen, in the same order.
    seen_at: Mutex<Vec<(Instant, String)>>,
    /// Request lines whose answer was cut off (silent from then on).
    cut: Mutex<Vec<String>>,
    /// Connections held silent (closed when released or dropped).
    held: Mutex<Vec<TcpStream>>,
    stop: AtomicBool,
}

pub struct FaultProxy {
    pub addr: SocketAddr,
    pub url: String,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        let addr = listener.local_addr().expect("proxy address");
        listener.set_nonblocking(true).expect("nonblocking accept");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            while !s.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let s = s.clone();
                        thread::spawn(move || serve(client, upstream, &s));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FaultProxy {
            addr,
            url: format!("http://{addr}"),
            shared,
        }
    }

    /// Arms a fault.
    pub fn add(&self, fault: Fault) {
        self.shared.faults.lock().unwrap().push(fault);
    }

    /// The request lines seen so far and whether a fault fired on each.
    pub fn seen(&self) -> Vec<(String, bool)> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// When each request whose line contains `part` (and not `unless`) arrived, in order.
    pub fn arrivals(&self, part: &str, unless: &str) -> Vec<Instant> {
        self.shared
            .seen_at
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, l)| l.contains(part) && !l.contains(unless))
            .map(|(t, _)| *t)
            .collect()
    }

    /// Whether a fault fired on a request whose line contains `part`.
    pub fn fired(&self, part: &str) -> bool {
        self.seen().iter().any(|(l, f)| *f && l.contains(part))
    }

    /// Whether the answer to a request whose line contains `part` has been cut off.
    pub fn silenced(&self, part: &str) -> bool {
        self.shared
            .cut
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(part))
    }

    /// Closes every connection held silent.
    pub fn release(&self) {
        for c in self.shared.held.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.release();
    }
}

/// The request head (through its blank line) and any bytes after it.
fn read_head(client: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
}

/// The head with every `Connection` header replaced by `Connection: close`.
fn close_after(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for (i, line) in text.split("\r\n").enumerate() {
        if line.is_empty() {
            continue;
        }
        if i > 0 && line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
        if i == 0 {
            out.push_str("Connection: close\r\n");
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

fn serve(mut client: TcpStream, upstream: SocketAddr, s: &Shared) {
    let Some((head, rest)) = read_head(&mut client) else {
        return;
    };
    let line =
        String::from_utf8_lossy(head.split(|&b| b == b'\r').next().unwrap_or_default()).to_string();
    let fault = {
        let mut faults = s.faults.lock().unwrap();
        let i = faults.iter().position(|f| {
            line.contains(&f.matches) && f.unless.as_ref().is_none_or(|u| !line.contains(u))
        });
        i.map(|i| faults.remove(i))
    };
    s.seen_at
        .lock()
        .unwrap()
        .push((Instant::now(), line.clone()));
    s.seen.lock().unwrap().push((line.clone(), fault.is_some()));
    match fault.as_ref().map(|f| f.what) {
        Some(Misbehaviour::Drop) => {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Some(Misbehaviour::Html) => {
            let body = "<html><body><h1>502 Bad Gateway</h1></body></html>";
            let _ = write!(
                client,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Some(Misbehaviour::Answer(answer)) => {
            answer(&mut client);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Some(Misbehaviour::Coded(coding)) => {
            let body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff";
            let _ = write!(
                client,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = client.write_all(body);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Some(Misbehaviour::Lie(lines)) => {
            let _ = write!(
                client,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            for l in lines.lines().filter(|l| !l.trim().is_empty()) {
                let _ = write!(client, "{:x}\r\n{l}\n\r\n", l.len() + 1);
            }
            s.cut.lock().unwrap().push(line);
            s.held.lock().unwrap().push(client);
            return;
        }
        _ => {}
    }
    let Ok(mut up) = TcpStream::connect(upstream) else {
        return;
    };
    if up.write_all(&close_after(&head)).is_err() || up.write_all(&rest).is_err() {
        return;
    }
    // The client's request body, if any, goes on as it comes.
    if let (Ok(mut from), Ok(mut to)) = (client.try_clone(), up.try_clone()) {
        thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
        });
    }
    let what = fault.map(|f| f.what).filter(|w| {
        matches!(
            w,
            Misbehaviour::StallAfter { .. } | Misbehaviour::SilenceAfterBookmark
        )
    });
    let mut forwarded_body = 0usize;
    let mut head_done = false;
    let mut window: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if s.stop.load(Ordering::Relaxed) {
            return;
        }
        let n = match up.read(&mut chunk) {
            Ok(0) | Err(_) => {
                // The upstream ended: so does the client's connection (the body copier holds a
                // clone of it, so dropping ours would not close it).
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => n,
        };
        let mut data = &chunk[..n];
        let mut cut = None;
        match what {
            None
            | Some(
                Misbehaviour::Drop
                | Misbehaviour::Html
                | Misbehaviour::Coded(_)
                | Misbehaviour::Lie(_)
                | Misbehaviour::Answer(_),
            ) => {}
            Some(Misbehaviour::StallAfter { bytes }) => {
                let mut start = 0;
                if !head_done {
                    window.extend_from_slice(data);
                    if let Some(end) = window.windows(4).position(|w| w == b"\r\n\r\n") {
                        head_done = true;
                        // Bytes of this read after the head's end.
                        let body_in_window = window.len() - (end + 4);
                        start = n - body_in_window.min(n);
                    } else {
                        start = n;
                    }
                }
                if head_done {
                    let room = bytes.saturating_sub(forwarded_body);
                    let body = n - start;
                    if body >= room {
                        cut = Some(start + room);
                    } else {
                        forwarded_body += body;
                    }
                }
            }
            Some(Misbehaviour::SilenceAfterBookmark) => {
                let old = window.len();
                window.extend_from_slice(data);
                if let Some(at) = find(&window, b"BOOKMARK") {
                    // A protobuf frame: its 4-byte length, then the type field (tag 0x0a, length
                    // 8): the event ends with the frame, and the HTTP chunk with its CRLF.
                    let frame = at
                        .checked_sub(6)
                        .filter(|&f| window[f + 4..at] == [0x0a, 0x08])
                        .map(|f| {
                            let len = u32::from_be_bytes(window[f..f + 4].try_into().unwrap());
                            f + 4 + len as usize + 2
                        });
                    let end = match frame {
                        Some(end) => (end <= window.len()).then_some(end),
                        None => window[at..]
                            .iter()
                            .position(|&b| b == b'\n')
                            .map(|nl| at + nl + 1),
                    };
                    if let Some(end) = end {
                        cut = Some(end.saturating_sub(old).min(n));
                    }
                }
                if cut.is_none() && window.len() > 64 * 1024 {
                    let keep = window.split_off(window.len() - 64);
                    window = keep;
                }
            }
        }
        if let Some(c) = cut {
            data = &data[..c];
        }
        if client.write_all(data).is_err() {
            let _ = up.shutdown(Shutdown::Both);
            return;
        }
        if cut.is_some() {
            // Silent from now on, both ways open: the client sees neither data nor an end.
            s.cut.lock().unwrap().push(line);
            let mut held = s.held.lock().unwrap();
            held.push(client);
            held.push(up);
            return;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
