//! `/healthz`, `/livez`, `/readyz` on `--metrics-bind-address`, on a thread of their own so the
//! apiserver paths on the main port stay proxied and a stuck loop is still detectable.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{debug, warn};

use crate::cache::store::State;
use crate::server::conn::lock;
use crate::server::{debug_state, debug_topology, metrics};

/// What `/readyz` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Nothing to serve yet: no snapshot, and the initial sync is not complete.
    NotReady,
    /// Serving a snapshot restored from `--cache-dir` (written `age` seconds ago) while the
    /// upstream has not been synced yet.
    Snapshot {
        /// Seconds since the snapshot was written (by the wall clock).
        age: u64,
    },
    /// Synced with the upstream.
    Ready,
}

impl Readiness {
    /// The cache's readiness, with the restored snapshot's write time (Unix seconds).
    pub fn of(state: &State, snapshot_written: Option<u64>, now_unix: u64) -> Readiness {
        match (state.is_ready(), state.serving_snapshot()) {
            (false, _) => Readiness::NotReady,
            (true, true) => Readiness::Snapshot {
                age: now_unix.saturating_sub(snapshot_written.unwrap_or(now_unix)),
            },
            (true, false) => Readiness::Ready,
        }
    }
}

/// Answers one health request line: (status, body). Serving a snapshot is ready (kube-proxy
/// gets a complete, consistent view), with the reason in the body.
pub fn answer(path: &str, readiness: Readiness) -> (u16, String) {
    match (path.split('?').next().unwrap_or(""), readiness) {
        ("/healthz" | "/livez", _) => (200, "ok".into()),
        ("/readyz", Readiness::Ready) => (200, "ok".into()),
        ("/readyz", Readiness::Snapshot { age }) => (
            200,
            format!(
                "ok: serving the on-disk snapshot written {age} s ago; the upstream apiserver has not answered yet"
            ),
        ),
        ("/readyz", Readiness::NotReady) => (
            503,
            "not ready: initial sync with the apiserver is not complete".into(),
        ),
        _ => (404, "not found".into()),
    }
}

/// What the health listener reports beyond the cache itself.
#[derive(Debug, Default)]
pub struct Extras {
    /// Write time (Unix seconds) of the snapshot restored at startup, if one was.
    pub snapshot_written: Option<u64>,
    /// The snapshot writer's counters, with `--cache-dir`.
    pub writer: Option<Arc<crate::persist::WriterStats>>,
    /// `--debug`: serve `/debug/state`.
    pub debug: bool,
}

/// (status, Content-Type, body) for one request path on the health/metrics listener.
fn route(
    path_and_query: &str,
    shared: &Mutex<State>,
    extras: &Extras,
) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let now = crate::persist::unix_now();
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    match path {
        "/metrics" => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::render(shared, extras, now),
        ),
        p if p == "/debug/topology" || p.starts_with("/debug/topology/") => {
            debug_topology::answer(p, query, shared)
        }
        "/debug/state" if extras.debug => debug_state::answer(query, shared, extras),
        _ => {
            let readiness = Readiness::of(&lock(shared), extras.snapshot_written, now);
            let (code, body) = answer(path_and_query, readiness);
            (code, TEXT, body)
        }
    }
}

fn serve(mut sock: TcpStream, shared: &Mutex<State>, extras: &Extras) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while len < buf.len() {
        match sock.read(&mut buf[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                len += n;
                if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let line = String::from_utf8_lossy(&buf[..len]);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (code, content_type, body) = route(path, shared, extras);
    let reason = crate::http::response::reason(code);
    let resp = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = sock.write_all(resp.as_bytes()) {
        debug!("health: write failed: {e}");
    }
}

/// Starts the health listener thread.
pub fn spawn(
    listener: TcpListener,
    shared: Arc<Mutex<State>>,
    extras: Extras,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            for sock in listener.incoming() {
                match sock {
                    Ok(s) => serve(s, &shared, &extras),
                    Err(e) => warn!("health: accept failed: {e}"),
                }
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::{answer, Readiness};

    #[test]
    fn readyz_follows_readiness() {
        assert_eq!(answer("/readyz", Readiness::NotReady).0, 503);
        assert_eq!(answer("/readyz", Readiness::Ready).0, 200);
        let (code, body) = answer("/readyz", Readiness::Snapshot { age: 42 });
        assert_eq!(code, 200);
        assert!(body.contains("snapshot written 42 s ago"), "{body}");
        assert_eq!(answer("/healthz", Readiness::NotReady).0, 200);
        assert_eq!(answer("/livez?verbose", Readiness::NotReady).0, 200);
        assert_eq!(answer("/debug/pprof", Readiness::Ready).0, 404);
    }

    #[test]
    fn metrics_report_readiness_and_counts() {
        use crate::cache::store::{Settings, State};
        use crate::cache::view::Retention;
        let st = State::new(
            Settings {
                hostname: "h".into(),
                wrapper_in_cluster: true,
                retention: Retention::for_queue(10),
            },
            42,
        );
        let m = crate::server::metrics::render_cache(&st, &super::Extras::default(), 0);
        assert!(m.contains("grid_wrapper_ready 0\n"), "{m}");
        assert!(m.contains("grid_wrapper_resource_version 42\n"));
        assert!(
            m.contains("grid_wrapper_objects{resource=\"endpointslices.discovery.k8s.io/v1\"} 0\n")
        );
    }
}
