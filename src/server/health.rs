//! `/healthz`, `/livez`, `/readyz` on `--metrics-bind-address`, on a thread of their own so the
//! apiserver paths on the main port stay proxied and a stuck loop is still detectable.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{debug, warn};

use crate::cache::store::State;
use crate::k8s::Resource;
use crate::server::conn::lock;

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
}

/// Prometheus text exposition of the cache's state.
pub fn metrics(state: &State, extras: &Extras, now_unix: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, rows: Vec<(String, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    gauge(
        "grid_wrapper_ready",
        "1 once every reflector has listed and the view is built.",
        vec![(String::new(), u64::from(state.is_ready()))],
    );
    gauge(
        "grid_wrapper_resource_version",
        "The last resourceVersion handed out.",
        vec![(String::new(), state.current_rv())],
    );
    let per = |f: &dyn Fn(Resource) -> usize| {
        Resource::ALL
            .iter()
            .map(|&r| {
                let label = format!("{{resource=\"{}.{}\"}}", r.plural(), r.api_version());
                (label, f(r) as u64)
            })
            .collect::<Vec<_>>()
    };
    gauge(
        "grid_wrapper_objects",
        "Served objects per resource.",
        per(&|r| state.collection(r).len()),
    );
    gauge(
        "grid_wrapper_event_log_entries",
        "Event-log entries kept per resource for watch resumption.",
        per(&|r| state.collection(r).log_len()),
    );
    gauge(
        "grid_wrapper_edge_health_abnormal_nodes",
        "Cached nodes the edge-health map reports abnormal (their endpoints are not served).",
        vec![(
            String::new(),
            state
                .abnormal_nodes()
                .iter()
                .filter(|n| {
                    let key = crate::k8s::ObjectKey::new("", n.as_str());
                    state.collection(Resource::Nodes).get(&key).is_some()
                })
                .count() as u64,
        )],
    );
    gauge(
        "grid_wrapper_serving_snapshot",
        "1 while the served view comes from the on-disk snapshot (upstream not synced yet).",
        vec![(String::new(), u64::from(state.serving_snapshot()))],
    );
    if let Some(written) = extras.snapshot_written.filter(|_| state.serving_snapshot()) {
        gauge(
            "grid_wrapper_snapshot_age_seconds",
            "Age of the on-disk snapshot being served (wall clock).",
            vec![(String::new(), now_unix.saturating_sub(written))],
        );
    }
    if let Some(w) = &extras.writer {
        use std::sync::atomic::Ordering::Relaxed;
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        };
        counter(
            "grid_wrapper_snapshot_writes_total",
            "Snapshots written to --cache-dir.",
            w.writes.load(Relaxed),
        );
        counter(
            "grid_wrapper_snapshot_write_failures_total",
            "Snapshot writes that failed (the previous snapshot is kept).",
            w.failures.load(Relaxed),
        );
        let mut gauge = |name: &str, help: &str, v: String| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {v}");
        };
        gauge(
            "grid_wrapper_snapshot_last_write_timestamp_seconds",
            "Unix time of the last snapshot written (0 = none yet).",
            w.last_write_unix.load(Relaxed).to_string(),
        );
        gauge(
            "grid_wrapper_snapshot_bytes",
            "Size of the last snapshot written.",
            w.last_bytes.load(Relaxed).to_string(),
        );
        gauge(
            "grid_wrapper_snapshot_last_write_duration_seconds",
            "Encode + write + fsync time of the last snapshot.",
            format!("{:.3}", w.last_write_ms.load(Relaxed) as f64 / 1000.0),
        );
    }
    crate::upstream::stats::global().render_prometheus(&mut out);
    out
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
    let now = crate::persist::unix_now();
    let (code, body) = if path.split('?').next() == Some("/metrics") {
        (200, metrics(&lock(shared), extras, now))
    } else {
        let readiness = Readiness::of(&lock(shared), extras.snapshot_written, now);
        answer(path, readiness)
    };
    let reason = crate::http::response::reason(code);
    let resp = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
        let m = super::metrics(&st, &super::Extras::default(), 0);
        assert!(m.contains("grid_wrapper_ready 0\n"), "{m}");
        assert!(m.contains("grid_wrapper_resource_version 42\n"));
        assert!(
            m.contains("grid_wrapper_objects{resource=\"endpointslices.discovery.k8s.io/v1\"} 0\n")
        );
    }
}
