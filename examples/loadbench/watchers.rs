//! Concurrent watch clients: one thread per watch stream, an incremental chunked-body decoder,
//! and per event the sequence number the driver embedded in the object (annotation
//! [`SEQ_KEY`]) with the instant the bytes were read.

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::http::read_head;

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

/// A set of running watchers.
#[derive(Debug)]
pub struct WatchSet {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<WatchResult>>,
    counts: Vec<Arc<AtomicU64>>,
    dead: Arc<AtomicUsize>,
    /// Events other than BOOKMARKs (marked or not), summed over watchers.
    events: Arc<AtomicU64>,
    /// Latest receive instant (ns since the base) of such an event, over watchers.
    last_event: Arc<AtomicU64>,
}

impl WatchSet {
    /// Opens `n` watches of `path` on `addr` and waits (bounded) until every one got its
    /// response head.
    pub fn open(addr: SocketAddr, path: &str, n: usize, base: Instant) -> io::Result<WatchSet> {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let events = Arc::new(AtomicU64::new(0));
        let last_event = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::with_capacity(n);
        let mut counts = Vec::with_capacity(n);
        for _ in 0..n {
            let count = Arc::new(AtomicU64::new(0));
            counts.push(Arc::clone(&count));
            let (stop, started, dead) =
                (Arc::clone(&stop), Arc::clone(&started), Arc::clone(&dead));
            let any = Progress {
                events: Arc::clone(&events),
                last: Arc::clone(&last_event),
            };
            let path = path.to_string();
            let h = thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let r = run(addr, &path, base, &stop, &started, (&count, &any));
                    if r.ended.is_some() {
                        dead.fetch_add(1, Ordering::SeqCst);
                    }
                    r
                })?;
            handles.push(h);
        }
        let ok =
            crate::procs::wait_until(Duration::from_secs(20), Duration::from_millis(5), || {
                started.load(Ordering::SeqCst) + dead.load(Ordering::SeqCst) >= n
            });
        let set = WatchSet {
            stop,
            handles,
            counts,
            dead,
            events,
            last_event,
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
            .map(|h| {
                h.join().unwrap_or_else(|_| WatchResult {
                    ended: Some("watcher thread panicked".into()),
                    ..WatchResult::default()
                })
            })
            .collect()
    }
}

/// Set-wide counters of every event that is not a BOOKMARK.
struct Progress {
    events: Arc<AtomicU64>,
    last: Arc<AtomicU64>,
}

fn run(
    addr: SocketAddr,
    path: &str,
    base: Instant,
    stop: &AtomicBool,
    started: &AtomicUsize,
    (count, any): (&AtomicU64, &Progress),
) -> WatchResult {
    let mut res = WatchResult::default();
    let mut r = match connect(addr, path) {
        Ok(r) => r,
        Err(e) => {
            res.ended = Some(format!("connect: {e}"));
            return res;
        }
    };
    match read_head(&mut r) {
        Ok((code, _)) => {
            res.code = code;
            if code != 200 {
                res.ended = Some(format!("watch answered HTTP {code}"));
                return res;
            }
        }
        Err(e) => {
            res.ended = Some(format!("watch head: {e}"));
            return res;
        }
    }
    started.fetch_add(1, Ordering::SeqCst);
    let mut dec = Decoder::default();
    let mut buf = vec![0u8; READ_BUF];
    while !stop.load(Ordering::Relaxed) && res.ended.is_none() {
        let n = match r.read(&mut buf) {
            Ok(0) => {
                res.ended = Some("server closed the stream".into());
                break;
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                res.ended = Some(format!("read: {e}"));
                break;
            }
        };
        let now = base.elapsed().as_nanos() as u64;
        let before = res.recv.len();
        let other_before = res.unmarked;
        if let Err(e) = dec.feed(&buf[..n], |line| on_line(line, now, &mut res)) {
            res.ended = Some(e);
        }
        let marked = (res.recv.len() - before) as u64;
        let all = marked + (res.unmarked - other_before);
        count.fetch_add(marked, Ordering::Relaxed);
        if all > 0 {
            if res.first_ns == 0 {
                res.first_ns = now;
            }
            res.last_ns = now;
            any.events.fetch_add(all, Ordering::Relaxed);
            any.last.fetch_max(now, Ordering::Relaxed);
        }
    }
    res
}

fn connect(addr: SocketAddr, path: &str) -> io::Result<BufReader<TcpStream>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(POLL))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, */*\r\nUser-Agent: loadbench\r\n\r\n");
    s.write_all(req.as_bytes())?;
    Ok(BufReader::with_capacity(READ_BUF, s))
}

fn on_line(line: &[u8], now: u64, res: &mut WatchResult) {
    let Ok(text) = std::str::from_utf8(line) else {
        res.unmarked += 1;
        return;
    };
    let head = &text[..text.len().min(40)];
    if head.contains("\"BOOKMARK\"") {
        res.bookmarks += 1;
        return;
    }
    if head.contains("\"ERROR\"") {
        res.ended = Some(format!("ERROR event: {}", &text[..text.len().min(300)]));
        return;
    }
    match seq_of(text) {
        Some(seq) => res.recv.push((seq, now)),
        None => res.unmarked += 1,
    }
}

/// The sequence number in an event line (`"<SEQ_KEY>":"<digits>"`, whitespace tolerated).
pub fn seq_of(text: &str) -> Option<u64> {
    let key = format!("\"{SEQ_KEY}\"");
    let at = text.find(&key)? + key.len();
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    rest[..end].parse().ok()
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
            let size_text = String::from_utf8_lossy(&self.raw[pos..pos + eol]).to_string();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
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
        while let Some(nl) = self.lines[start..].iter().position(|&b| b == b'\n') {
            let line = &self.lines[start..start + nl];
            if !line.iter().all(u8::is_ascii_whitespace) {
                on_line(line);
            }
            start += nl + 1;
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
            assert_eq!(seq_of(std::str::from_utf8(&got[0]).expect("utf8")), Some(7));
        }
    }
}
