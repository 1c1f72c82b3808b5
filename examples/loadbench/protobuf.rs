//! kube-proxy's wire format in the bench: its `Accept` header, the `k8s\0` + `runtime.Unknown`
//! envelope read just far enough for a list's resourceVersion and item count, and a protobuf
//! kube-proxy ([`kube_proxy`]): its four LISTs in protobuf and a protobuf watch on each, kept
//! open (and drained) while grid-wrapper's VmRSS is read.

use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::http::{read_head, Client, REQUEST_TIMEOUT};
use crate::phases::slices_path;
use crate::procs::rss_kib;
use crate::{BenchResult, Wrapper, HOSTNAME, SELECTOR_L};

/// The `Accept` header kube-proxy sends (client-go with the protobuf content type).
pub const KUBE_PROXY_ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";
/// The envelope's magic prefix.
pub const MAGIC: &[u8] = b"k8s\0";

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The length-delimited fields numbered `number` of one message, in order.
fn fields(msg: &[u8], number: u64) -> Option<Vec<&[u8]>> {
    let (mut i, mut out) = (0, Vec::new());
    while i < msg.len() {
        let key = varint(msg, &mut i)?;
        match key & 7 {
            0 => {
                varint(msg, &mut i)?;
            }
            1 => i += 8,
            5 => i += 4,
            2 => {
                let len = varint(msg, &mut i)? as usize;
                let v = msg.get(i..i.checked_add(len)?)?;
                i += len;
                if key >> 3 == number {
                    out.push(v);
                }
            }
            _ => return None,
        }
    }
    (i == msg.len()).then_some(out)
}

fn field(msg: &[u8], number: u64) -> Option<&[u8]> {
    fields(msg, number)?.first().copied()
}

/// A protobuf list body's (metadata.resourceVersion, items): `runtime.Unknown.raw` (2) → the
/// list's `metadata` (1) → `resourceVersion` (2); items are the list's field 2.
pub fn list_info(body: &[u8]) -> Option<(String, usize)> {
    let raw = field(body.strip_prefix(MAGIC)?, 2)?;
    let rv = field(field(raw, 1)?, 2)?;
    Some((String::from_utf8(rv.to_vec()).ok()?, fields(raw, 2)?.len()))
}

/// GET `path` with kube-proxy's `Accept` on `c`: the body (200, `k8s\0`-prefixed, decodable
/// list envelope checked by the caller as needed) and the request's time.
pub fn get_pb(c: &mut Client, path: &str) -> BenchResult<(Vec<u8>, Duration)> {
    let t = Instant::now();
    let r = c.request("GET", path, b"")?;
    let took = t.elapsed();
    if r.code != 200 {
        return Err(format!(
            "protobuf GET {path}: HTTP {}: {}",
            r.code,
            String::from_utf8_lossy(&r.body[..r.body.len().min(300)])
        )
        .into());
    }
    if !r.body.starts_with(MAGIC) {
        return Err(format!(
            "protobuf GET {path}: the body does not start with k8s\\0 ({:?}…)",
            String::from_utf8_lossy(&r.body[..r.body.len().min(40)])
        )
        .into());
    }
    Ok((r.body, took))
}

/// Open protobuf watches, each drained by a thread until [`ProtoWatches::close`].
#[derive(Debug, Default)]
pub struct ProtoWatches {
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Option<String>>>,
}

impl ProtoWatches {
    /// Opens a watch of `path` with kube-proxy's `Accept`; fails unless it answers 200 with the
    /// protobuf watch content type.
    pub fn open(&mut self, addr: SocketAddr, path: &str) -> BenchResult<()> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        let mut r = BufReader::with_capacity(64 << 10, s);
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {KUBE_PROXY_ACCEPT}\r\n\r\n");
        r.get_mut().write_all(req.as_bytes())?;
        let (code, headers) = read_head(&mut r)?;
        let ctype = headers
            .iter()
            .find(|(k, _)| k == "content-type")
            .map_or("", |(_, v)| v.as_str());
        if code != 200 || !ctype.contains("protobuf") || !ctype.contains("stream=watch") {
            return Err(
                format!("protobuf watch {path}: HTTP {code}, Content-Type {ctype:?}").into(),
            );
        }
        r.get_ref()
            .set_read_timeout(Some(Duration::from_millis(200)))?;
        let (stop, bytes) = (self.stop.clone(), self.bytes.clone());
        self.threads.push(thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            while !stop.load(Ordering::Relaxed) {
                match r.read(&mut buf) {
                    Ok(0) => return Some("closed by grid-wrapper".into()),
                    Ok(n) => {
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Some(e.to_string()),
                }
            }
            None
        }));
        Ok(())
    }

    /// Stops the readers, closes the sockets: (bytes read, why watches ended early).
    pub fn close(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let ended = self
            .threads
            .into_iter()
            .filter_map(|t| t.join().unwrap_or_else(|_| Some("reader panicked".into())))
            .collect();
        (self.bytes.load(Ordering::Relaxed), ended)
    }
}

/// grid-wrapper's memory with a protobuf kube-proxy attached.
#[derive(Clone, Debug, Default)]
pub struct ProtoClient {
    /// VmRSS just before the first protobuf request, KiB.
    pub rss_before: u64,
    /// VmRSS 1 s after the four protobuf LISTs and watches, watches still open, KiB.
    pub rss: u64,
    /// (collection, protobuf body bytes, items) of the four LISTs.
    pub lists: Vec<(&'static str, u64, usize)>,
    /// The first of them (endpointslices, selector L; the first protobuf request of the run):
    /// its time, ns.
    pub first_list_ns: u64,
    /// Watches open when VmRSS was read.
    pub watches: usize,
    /// Watch bytes read meanwhile (bookmarks).
    pub watch_bytes: u64,
    /// Watches that ended before they were closed, and why.
    pub ended: Vec<String>,
}

impl ProtoClient {
    /// Sum of the four protobuf LIST bodies.
    pub fn bytes(&self) -> u64 {
        self.lists.iter().map(|l| l.1).sum()
    }
}

/// kube-proxy's four collections as it asks for them.
pub fn kube_proxy_paths() -> [(&'static str, String); 4] {
    let l = SELECTOR_L;
    [
        ("endpointslices", slices_path()),
        ("services", format!("/api/v1/services?labelSelector={l}")),
        ("endpoints", format!("/api/v1/endpoints?labelSelector={l}")),
        (
            "nodes",
            format!("/api/v1/nodes?fieldSelector=metadata.name%3D{HOSTNAME}"),
        ),
    ]
}

/// A protobuf kube-proxy: its four LISTs (endpointslices first, timed: it encodes every slice)
/// and a watch on each from the list's resourceVersion; VmRSS 1 s later, the watches still open
/// and drained; then they are closed.
pub fn kube_proxy(w: &Wrapper) -> BenchResult<ProtoClient> {
    let mut p = ProtoClient {
        rss_before: rss_kib(w.pid).unwrap_or(0),
        ..ProtoClient::default()
    };
    let mut c = Client::with_accept(w.addr, KUBE_PROXY_ACCEPT);
    let mut watches = ProtoWatches::default();
    for (i, (name, path)) in kube_proxy_paths().into_iter().enumerate() {
        let (body, took) = get_pb(&mut c, &path)?;
        if i == 0 {
            p.first_list_ns = took.as_nanos() as u64;
        }
        let (rv, items) = list_info(&body)
            .ok_or_else(|| format!("protobuf LIST {path}: not a decodable list envelope"))?;
        p.lists.push((name, body.len() as u64, items));
        let watch = format!(
            "{path}&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=456&watch=true"
        );
        watches.open(w.addr, &watch)?;
    }
    p.watches = watches.threads.len();
    thread::sleep(Duration::from_secs(1)); // as after sync: let allocations settle
    p.rss = rss_kib(w.pid).ok_or("no VmRSS")?;
    (p.watch_bytes, p.ended) = watches.close();
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(buf: &mut Vec<u8>, number: u64, v: &[u8]) {
        buf.push((number << 3 | 2) as u8);
        buf.push(v.len() as u8);
        buf.extend_from_slice(v);
    }

    #[test]
    fn list_info_reads_rv_and_items() {
        let mut meta = Vec::new();
        bytes_field(&mut meta, 2, b"12345");
        let mut raw = Vec::new();
        bytes_field(&mut raw, 1, &meta);
        bytes_field(&mut raw, 2, b"a");
        bytes_field(&mut raw, 2, b"b");
        let mut unknown = Vec::new();
        bytes_field(&mut unknown, 1, b"tm");
        bytes_field(&mut unknown, 2, &raw);
        unknown.extend_from_slice(&[3 << 3 | 2, 0]);
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&unknown);
        assert_eq!(list_info(&body), Some(("12345".into(), 2)));
        assert_eq!(list_info(b"{\"items\":[]}"), None);
    }
}
