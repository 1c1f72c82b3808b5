//! Concurrent watch clients (one epoll thread for all streams, or one thread per stream; see
//! [`ClientKind`]), an incremental chunked-body decoder,
//! and per event the sequence number the driver embedded in the object (annotation
//! [`SEQ_KEY`]) with the instant the bytes were read.

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::http::read_head;
use rustls::{ClientConnection, StreamOwned};

/// The annotation carrying the driver's change counter.
pub const SEQ_KEY: &str = "loadbench.example/seq";
/// Read buffer per watcher.
const READ_BUF: usize = 256 << 10;
/// Largest chunk or event line accepted.
const MAX_LINE: usize = 16 << 20;
/// How often a blocked watcher checks the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// What one watcher saw.
#[derive(Debug, Default)]
pub struct WatchResult {
    /// HTTP status of the watch.
    pub code: u16,
    /// (sequence number, ns since the bench's base instant) per marked event.
    pub recv: Vec<(u64, u64)>,
    /// Events without a sequence number (BOOKMARKs excluded).
    pub unmarked: u64,
    /// BOOKMARK events.
    pub bookmarks: u64,
    /// Receive instant (ns since the base) of the first event that was not a BOOKMARK (0: none).
    pub first_ns: u64,
    /// Receive instant (ns since the base) of the last event that was not a BOOKMARK (0: none).
    pub last_ns: u64,
    /// Why the stream ended early (ERROR event, end of stream, I/O error), if it did.
    pub ended: Option<String>,
}

/// How the watch clients read their streams (`--watch-client`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// One thread reads every stream: mio (epoll), each socket read until it would block, each
    /// read timestamped. Like client-go's watches on Go's netpoller (epoll), and cheap enough
    /// that the bench client is not the bottleneck (its CPU per delivery is in the table).
    Epoll,
    /// One blocking thread per stream (the bench's client before 2026-12-02). On a 2-core
    /// machine its 100 threads' wake-ups cost more CPU than grid-wrapper's writes: client-bound.
    Threads,
}

static CLIENT: OnceLock<ClientKind> = OnceLock::new();
static EPOLL_THREADS: OnceLock<usize> = OnceLock::new();

/// Name prefix of the epoll client's reading threads (their CPU is read by that name).
pub const EPOLL_THREAD: &str = "watch-epoll";

/// Spreads the epoll client's watches over `n` threads (once, before the first
/// [`WatchSet::open`]); default 1. A second thread shows whether one was the bottleneck.
pub fn set_epoll_threads(n: usize) {
    let _ = EPOLL_THREADS.set(n.max(1));
}

/// Reading threads of the epoll client.
pub fn epoll_threads() -> usize {
    EPOLL_THREADS.get().copied().unwrap_or(1)
}

/// Chooses the watch client for the whole run (once, before the first [`WatchSet::open`]).
pub fn set_client(kind: ClientKind) {
    let _ = CLIENT.set(kind);
}

/// The watch client of this run (default [`ClientKind::Epoll`]).
pub fn client() -> ClientKind {
    CLIENT.get().copied().unwrap_or(ClientKind::Epoll)
}

/// A set of running watchers.
#[derive(Debug)]
pub struct WatchSet {
    stop: Arc<AtomicBool>,
    /// Each thread returns the results of the watches it read (one, or all of them).
    handles: Vec<JoinHandle<Vec<WatchResult>>>,
    counts: Vec<Arc<AtomicU64>>,
    dead: Arc<AtomicUsize>,
    /// Events other than BOOKMARKs (marked or not), summed over watchers.
    events: Arc<AtomicU64>,
    /// Latest receive instant (ns since the base) of such an event, over watchers.
    last_event: Arc<AtomicU64>,
}

/// What the reading threads share with the set.
#[derive(Clone)]
struct Shared {
    stop: Arc<AtomicBool>,
    started: Arc<AtomicUsize>,
    dead: Arc<AtomicUsize>,
    events: Arc<AtomicU64>,
    last: Arc<AtomicU64>,
}

impl WatchSet {
    /// Opens `n` watches of `path` on `addr` with this run's [`client`] and waits (bounded)
    /// until every one got its response head.
    pub fn open(addr: SocketAddr, path: &str, n: usize, base: Instant) -> io::Result<WatchSet> {
        let sh = Shared {
            stop: Arc::new(AtomicBool::new(false)),
            started: Arc::new(AtomicUsize::new(0)),
            dead: Arc::new(AtomicUsize::new(0)),
            events: Arc::new(AtomicU64::new(0)),
            last: Arc::new(AtomicU64::new(0)),
        };
        let counts: Vec<_> = (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let mut handles = Vec::new();
        match client() {
            ClientKind::Threads => {
                for count in &counts {
                    let (sh, count, path) = (sh.clone(), Arc::clone(count), path.to_string());
                    let h = thread::Builder::new()
                        .stack_size(256 << 10)
                        .spawn(move || vec![run_blocking(addr, &path, base, &sh, count)])?;
                    handles.push(h);
                }
            }
            ClientKind::Epoll => {
                let per = n.div_ceil(epoll_threads().min(n).max(1)).max(1);
                for (i, group) in counts.chunks(per).enumerate() {
                    let (sh, group, path) = (sh.clone(), group.to_vec(), path.to_string());
                    let h = thread::Builder::new()
                        .name(format!("{EPOLL_THREAD}-{i}"))
                        .spawn(move || run_epoll(addr, &path, base, &sh, group))?;
                    handles.push(h);
                }
            }
        }
        let ok =
            crate::procs::wait_until(Duration::from_secs(20), Duration::from_millis(5), || {
                sh.started.load(Ordering::SeqCst) + sh.dead.load(Ordering::SeqCst) >= n
            });
        let set = WatchSet {
            stop: sh.stop,
            handles,
            counts,
            dead: sh.dead,
            events: sh.events,
            last_event: sh.last,
        };
        if !ok || set.dead.load(Ordering::SeqCst) > 0 {
            let results = set.finish();
            let why = results
                .iter()
                .find_map(|r| r.ended.clone())
                .unwrap_or_else(|| "watch heads did not arrive within 20 s".into());
            return Err(io::Error::other(format!("opening {n} watches: {why}")));
        }
        Ok(set)
    }

    /// Marked events received so far, summed over watchers.
    pub fn received(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Events other than BOOKMARKs so far (marked or not), summed over watchers.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Receive instant (ns since the base) of the latest such event (0: none yet).
    pub fn last_event_ns(&self) -> u64 {
        self.last_event.load(Ordering::Relaxed)
    }

    /// Watchers whose stream ended.
    pub fn dead(&self) -> usize {
        self.dead.load(Ordering::SeqCst)
    }

    /// Stops every watcher and returns what each saw.
    pub fn finish(self) -> Vec<WatchResult> {
        self.stop.store(true, Ordering::SeqCst);
        self.handles
            .into_iter()
            .flat_map(|h| {
                h.join().unwrap_or_else(|_| {
                    vec![WatchResult {
                        ended: Some("watcher thread panicked".into()),
                        ..WatchResult::default()
                    }]
                })
            })
            .collect()
    }
}

/// One watch stream being read: what it saw so far and its decoder.
struct Stream {
    res: WatchResult,
    dec: Decoder,
    count: Arc<AtomicU64>,
}

impl Stream {
    fn new(count: Arc<AtomicU64>) -> Stream {
        Stream {
            res: WatchResult::default(),
            dec: Decoder::default(),
            count,
        }
    }

    /// Takes bytes read at `now` (ns since the base) and updates the set-wide counters.
    fn on_bytes(&mut self, data: &[u8], now: u64, sh: &Shared) {
        let res = &mut self.res;
        let before = res.recv.len();
        let other_before = res.unmarked;
        if let Err(e) = self.dec.feed(data, |line| on_line(line, now, res)) {
            res.ended = Some(e);
        }
        let marked = (res.recv.len() - before) as u64;
        let all = marked + (res.unmarked - other_before);
        self.count.fetch_add(marked, Ordering::Relaxed);
        if all > 0 {
            if res.first_ns == 0 {
                res.first_ns = now;
            }
            res.last_ns = now;
            sh.events.fetch_add(all, Ordering::Relaxed);
            sh.last.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Records why the stream ended (the first reason wins).
    fn end(&mut self, why: String) {
        if self.res.ended.is_none() {
            self.res.ended = Some(why);
        }
    }

    fn ended(&self) -> bool {
        self.res.ended.is_some()
    }
}

/// A watch's connection: plain, or TLS to a relay port ([`crate::tls`]).
enum Sock<S: Read + Write> {
    Plain(S),
    Tls(Box<StreamOwned<ClientConnection, S>>),
}

impl<S: Read + Write> Read for Sock<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Plain(s) => s.read(buf),
            Sock::Tls(s) => s.read(buf),
        }
    }
}

impl<S: Read + Write> Write for Sock<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Plain(s) => s.write(buf),
            Sock::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sock::Plain(s) => s.flush(),
            Sock::Tls(s) => s.flush(),
        }
    }
}

impl<S: Read + Write> Sock<S> {
    /// The same connection over another socket type (the TLS state kept).
    fn map<T: Read + Write>(self, f: impl FnOnce(S) -> T) -> Sock<T> {
        match self {
            Sock::Plain(s) => Sock::Plain(f(s)),
            Sock::Tls(t) => {
                let StreamOwned { conn, sock } = *t;
                Sock::Tls(Box::new(StreamOwned::new(conn, f(sock))))
            }
        }
    }

    fn socket(&mut self) -> &mut S {
        match self {
            Sock::Plain(s) => s,
            Sock::Tls(t) => &mut t.sock,
        }
    }
}

/// Connects (over TLS to a registered relay port), sends the watch request, reads the response
/// head (blocking). Returns the connection and the body bytes read past the head.
fn connect(addr: SocketAddr, path: &str) -> Result<(Sock<TcpStream>, Vec<u8>), String> {
    let sock = match crate::tls::for_addr(addr) {
        Some(config) => crate::tls::connect(addr, config).map(|t| Sock::Tls(Box::new(t))),
        None => TcpStream::connect(addr).map(Sock::Plain),
    };
    let mut s = sock.map_err(|e| format!("connect: {e}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, */*\r\nUser-Agent: loadbench\r\n\r\n");
    let tcp = s.socket();
    tcp.set_nodelay(true)
        .and_then(|()| tcp.set_read_timeout(Some(POLL * 50)))
        .and_then(|()| s.write_all(req.as_bytes()))
        .map_err(|e| format!("watch request: {e}"))?;
    let mut r = BufReader::with_capacity(64 << 10, s);
    let code = read_head(&mut r).map_err(|e| format!("watch head: {e}"))?.0;
    if code != 200 {
        return Err(format!("watch answered HTTP {code}"));
    }
    let rest = r.buffer().to_vec();
    let mut s = r.into_inner();
    s.socket()
        .set_read_timeout(Some(POLL))
        .map_err(|e| format!("socket: {e}"))?;
    Ok((s, rest))
}

fn run_blocking(
    addr: SocketAddr,
    path: &str,
    base: Instant,
    sh: &Shared,
    count: Arc<AtomicU64>,
) -> WatchResult {
    let mut st = Stream::new(count);
    let (mut s, rest) = match connect(addr, path) {
        Ok(x) => x,
        Err(e) => {
            sh.dead.fetch_add(1, Ordering::SeqCst);
            st.res.ended = Some(e);
            return st.res;
        }
    };
    st.res.code = 200;
    sh.started.fetch_add(1, Ordering::SeqCst);
    let now = base.elapsed().as_nanos() as u64;
    st.on_bytes(&rest, now, sh);
    let mut buf = vec![0u8; READ_BUF];
    while !sh.stop.load(Ordering::Relaxed) && !st.ended() {
        match s.read(&mut buf) {
            Ok(0) => st.end("server closed the stream".into()),
            Ok(n) => {
                let now = base.elapsed().as_nanos() as u64;
                st.on_bytes(&buf[..n], now, sh);
            }
            Err(e) if is_retry(&e) => {}
            Err(e) => st.end(format!("read: {e}")),
        }
    }
    if st.ended() {
        sh.dead.fetch_add(1, Ordering::SeqCst);
    }
    st.res
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Reads every stream on one thread: mio (epoll, edge-triggered), each ready socket read until
/// it would block, each read timestamped when it returns.
fn run_epoll(
    addr: SocketAddr,
    path: &str,
    base: Instant,
    sh: &Shared,
    counts: Vec<Arc<AtomicU64>>,
) -> Vec<WatchResult> {
    let mut streams: Vec<Stream> = counts.into_iter().map(Stream::new).collect();
    let mut socks: Vec<Option<Sock<mio::net::TcpStream>>> = Vec::with_capacity(streams.len());
    let poll = mio::Poll::new();
    let mut poll = match poll {
        Ok(p) => p,
        Err(e) => {
            for st in &mut streams {
                st.res.ended = Some(format!("epoll: {e}"));
            }
            sh.dead.fetch_add(streams.len(), Ordering::SeqCst);
            return streams.into_iter().map(|s| s.res).collect();
        }
    };
    for (i, st) in streams.iter_mut().enumerate() {
        let opened = connect(addr, path).and_then(|(mut s, rest)| {
            s.socket()
                .set_nonblocking(true)
                .map_err(|e| format!("socket: {e}"))?;
            let mut s = s.map(mio::net::TcpStream::from_std);
            poll.registry()
                .register(s.socket(), mio::Token(i), mio::Interest::READABLE)
                .map_err(|e| format!("epoll register: {e}"))?;
            Ok((s, rest))
        });
        match opened {
            Ok((s, rest)) => {
                st.res.code = 200;
                sh.started.fetch_add(1, Ordering::SeqCst);
                st.on_bytes(&rest, base.elapsed().as_nanos() as u64, sh);
                if st.ended() {
                    sh.dead.fetch_add(1, Ordering::SeqCst);
                    socks.push(None);
                } else {
                    socks.push(Some(s));
                }
            }
            Err(e) => {
                st.res.ended = Some(e);
                sh.dead.fetch_add(1, Ordering::SeqCst);
                socks.push(None);
            }
        }
    }
    let mut events = mio::Events::with_capacity(socks.len().max(1));
    let mut buf = vec![0u8; READ_BUF];
    while !sh.stop.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(POLL)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            for st in streams.iter_mut().filter(|s| !s.ended()) {
                st.end(format!("epoll: {e}"));
                sh.dead.fetch_add(1, Ordering::SeqCst);
            }
            break;
        }
        for ev in &events {
            let i = ev.token().0;
            let (Some(st), Some(slot)) = (streams.get_mut(i), socks.get_mut(i)) else {
                continue;
            };
            let Some(s) = slot.as_mut() else { continue };
            while !st.ended() {
                match s.read(&mut buf) {
                    Ok(0) => st.end("server closed the stream".into()),
                    Ok(n) => {
                        st.on_bytes(&buf[..n], base.elapsed().as_nanos() as u64, sh);
                        // A short read drained the socket; bytes that arrive later raise a
                        // new edge. This saves the read that would only say "would block".
                        // Not over TLS: decrypted bytes may wait in the session with the
                        // socket drained, and no edge would come for them.
                        if n < buf.len() && matches!(s, Sock::Plain(_)) {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => st.end(format!("read: {e}")),
                }
            }
            if st.ended() {
                sh.dead.fetch_add(1, Ordering::SeqCst);
                *slot = None;
            }
        }
    }
    streams.into_iter().map(|s| s.res).collect()
}

fn on_line(line: &[u8], now: u64, res: &mut WatchResult) {
    let head = &line[..line.len().min(40)];
    if contains(head, b"\"BOOKMARK\"") {
        res.bookmarks += 1;
        return;
    }
    if contains(head, b"\"ERROR\"") {
        let text = String::from_utf8_lossy(&line[..line.len().min(300)]);
        res.ended = Some(format!("ERROR event: {text}"));
        return;
    }
    match seq_of_bytes(line) {
        Some(seq) => res.recv.push((seq, now)),
        None => res.unmarked += 1,
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The first `byte` in `hay` at or after `from`, eight bytes at a time (the client reads every
/// event's bytes; a byte-by-byte scan made it the bench's bottleneck).
fn find_byte(hay: &[u8], byte: u8, from: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * u64::from(byte);
    let mut i = from;
    while i + 8 <= hay.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&hay[i..i + 8]);
        let x = u64::from_le_bytes(word) ^ pattern;
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay[i.min(hay.len())..]
        .iter()
        .position(|&b| b == byte)
        .map(|p| i + p)
}

/// The sequence number in an event line: `"`[`SEQ_KEY`]`":"<digits>"` (no whitespace, as
/// grid-wrapper and the simulator write compact JSON), found by the key's `/`.
fn seq_of_bytes(line: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"loadbench.example/seq\":\"";
    const SLASH_AT: usize = "\"loadbench.example".len();
    let mut from = SLASH_AT;
    while let Some(slash) = find_byte(line, b'/', from) {
        from = slash + 1;
        let Some(at) = slash.checked_sub(SLASH_AT) else {
            continue;
        };
        if line[at..].starts_with(KEY) {
            let digits = &line[at + KEY.len()..];
            let end = find_byte(digits, b'"', 0)?;
            return std::str::from_utf8(&digits[..end]).ok()?.parse().ok();
        }
    }
    None
}

/// A chunk size line's value (hex digits, optional extensions after `;`).
fn chunk_size(line: &[u8]) -> Option<usize> {
    let digits = line.split(|&b| b == b';').next()?.trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    digits.iter().try_fold(0usize, |n, &b| {
        Some(n * 16 + (b as char).to_digit(16)? as usize)
    })
}

/// Incremental decoder of a chunked body split into `\n`-terminated lines.
#[derive(Debug, Default)]
struct Decoder {
    raw: Vec<u8>,
    lines: Vec<u8>,
    done: bool,
}

impl Decoder {
    /// Feeds bytes; calls `on_line` for each complete line. Errors end the stream.
    fn feed(&mut self, data: &[u8], mut on_line: impl FnMut(&[u8])) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        self.raw.extend_from_slice(data);
        let mut pos = 0;
        loop {
            let Some(eol) = self.raw[pos..].windows(2).position(|w| w == b"\r\n") else {
                if self.raw.len() - pos > 64 {
                    return Err("chunk-size line too long".into());
                }
                break;
            };
            let size_line = &self.raw[pos..pos + eol];
            let size = chunk_size(size_line).ok_or_else(|| {
                format!("bad chunk size {:?}", String::from_utf8_lossy(size_line))
            })?;
            if size > MAX_LINE {
                return Err(format!("chunk of {size} bytes"));
            }
            if size == 0 {
                self.done = true;
                return Err("server ended the stream (last chunk)".into());
            }
            let data_at = pos + eol + 2;
            if self.raw.len() < data_at + size + 2 {
                break;
            }
            self.lines
                .extend_from_slice(&self.raw[data_at..data_at + size]);
            pos = data_at + size + 2;
        }
        self.raw.drain(..pos);
        let mut start = 0;
        while let Some(nl) = find_byte(&self.lines, b'\n', start) {
            let line = &self.lines[start..nl];
            if !line.iter().all(u8::is_ascii_whitespace) {
                on_line(line);
            }
            start = nl + 1;
        }
        self.lines.drain(..start);
        if self.lines.len() > MAX_LINE {
            return Err("event line too long".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_search_finds_every_position() {
        let hay: Vec<u8> = (0..40u8).collect();
        for (i, &b) in hay.iter().enumerate() {
            assert_eq!(find_byte(&hay, b, 0), Some(i));
            assert_eq!(find_byte(&hay, b, i), Some(i));
            assert_eq!(find_byte(&hay, b, i + 1), None);
        }
        assert_eq!(find_byte(&hay, 200, 0), None);
        assert_eq!(find_byte(&[], 1, 0), None);
    }

    #[test]
    fn decoder_survives_any_split() {
        let ev1 =
            format!("{{\"type\":\"MODIFIED\",\"object\":{{\"a\":{{\"{SEQ_KEY}\":\"7\"}}}}}}\n");
        let ev2 = "{\"type\":\"BOOKMARK\",\"object\":{}}\n".to_string();
        let mut wire = Vec::new();
        for e in [&ev1, &ev2] {
            wire.extend(format!("{:x}\r\n{e}\r\n", e.len()).bytes());
        }
        for cut in 0..wire.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            d.feed(&wire[..cut], |l| got.push(l.to_vec()))
                .expect("first half");
            d.feed(&wire[cut..], |l| got.push(l.to_vec()))
                .expect("second half");
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(seq_of_bytes(&got[0]), Some(7));
        }
    }
}
