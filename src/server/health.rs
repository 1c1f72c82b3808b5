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

/// Answers one health request line: (status, body).
pub fn answer(path: &str, ready: bool) -> (u16, &'static str) {
    match path.split('?').next().unwrap_or("") {
        "/healthz" | "/livez" => (200, "ok"),
        "/readyz" if ready => (200, "ok"),
        "/readyz" => (
            503,
            "not ready: initial sync with the apiserver is not complete",
        ),
        _ => (404, "not found"),
    }
}

/// Prometheus text exposition of the cache's state.
pub fn metrics(state: &State) -> String {
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
    out
}

fn serve(mut sock: TcpStream, shared: &Mutex<State>) {
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
    let (code, body) = if path.split('?').next() == Some("/metrics") {
        (200, metrics(&lock(shared)))
    } else {
        let (code, body) = answer(path, lock(shared).is_ready());
        (code, body.to_string())
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
pub fn spawn(listener: TcpListener, shared: Arc<Mutex<State>>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            for sock in listener.incoming() {
                match sock {
                    Ok(s) => serve(s, &shared),
                    Err(e) => warn!("health: accept failed: {e}"),
                }
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::answer;

    #[test]
    fn readyz_follows_readiness() {
        assert_eq!(answer("/readyz", false).0, 503);
        assert_eq!(answer("/readyz", true).0, 200);
        assert_eq!(answer("/healthz", false).0, 200);
        assert_eq!(answer("/livez?verbose", false).0, 200);
        assert_eq!(answer("/debug/pprof", true).0, 404);
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
        let m = super::metrics(&st);
        assert!(m.contains("grid_wrapper_ready 0\n"), "{m}");
        assert!(m.contains("grid_wrapper_resource_version 42\n"));
        assert!(
            m.contains("grid_wrapper_objects{resource=\"endpointslices.discovery.k8s.io/v1\"} 0\n")
        );
    }
}
