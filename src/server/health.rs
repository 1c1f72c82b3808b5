//! The health and metrics listener on `--metrics-bind-address`: `/healthz`, `/livez`,
//! `/readyz`, `/metrics`, `/debug/topology`, and `/debug/state` with `--debug`.
//!
//! # No client delays a probe
//!
//! The kubelet restarts the pod when its liveness probe gets no answer within a second or so,
//! so nothing another client of this port does may make a probe wait:
//!
//! - Many connections are served at once by a small mio loop on a thread of its own
//!   (`health/serve.rs`), not by the kube-proxy event loop: `/metrics` reads `/proc` and the
//!   debug pages take the cache's lock, neither of which may hold up kube-proxy's watches, and
//!   a stuck kube-proxy loop does not silence the probes that would detect it. Each connection
//!   has a deadline for its request head ([`READ_TIMEOUT`]) and one for its answer
//!   ([`WRITE_TIMEOUT`]); a head is read up to [`MAX_HEAD`] bytes (answered from what came at
//!   either limit, as before); answers are written without blocking, so a client that does
//!   not read holds nothing but its own connection. At most [`MAX_CONNECTIONS`] are open: one
//!   more closes the oldest, so a flood of idle connections cannot keep a new probe out.
//! - `/healthz`, `/livez`, `/readyz` and `/metrics` take no lock of the cache: they read its
//!   facts ([`crate::cache::facts`]), atomics the writer refreshes at the end of each change,
//!   so a probe never waits for a relist being applied.
//! - `/readyz` names, with `--container-runtime-endpoint`, what the runtime source is doing
//!   ([`runtime_line`], from the poll record of `handoff::runtime_pods`, atomics too); the
//!   runtime never changes its status.
//! - `/debug/topology` and `/debug/state` still take the cache's lock (as long as it takes to
//!   copy what they need). They are answered one after the other on a worker thread, started
//!   at the first such request, so while one waits for the lock the loop answers the probes.

use std::sync::Arc;
use std::time::Duration;

use crate::cache::facts::{Facts, SharedFacts};
use crate::handoff::runtime_pods::{self, PollOutcome, PollStatus};
use crate::http::response::{self, Body};
use crate::server::extras::Extras;
use crate::server::{debug_state, debug_topology, metrics};
use crate::writer::WriterHandle;

/// Most connections open at once; one more closes the oldest.
pub const MAX_CONNECTIONS: usize = 64;
/// Most bytes of a request head read; a head that reaches it is answered from what came.
pub const MAX_HEAD: usize = 4096;
/// How long a connection may take to send its request head; then it is answered from what
/// came (a silent one: 404).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read its answer before its connection is closed.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a debug request may wait for the worker (and the cache's lock) before its
/// connection is closed unanswered.
pub const WORK_TIMEOUT: Duration = Duration::from_secs(60);

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
    pub fn of(facts: &Facts, snapshot_written: Option<u64>, now_unix: u64) -> Readiness {
        match (facts.ready, facts.serving_snapshot) {
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

/// `/readyz`'s body: [`answer`]'s, then, with `--container-runtime-endpoint`, a line on the
/// runtime ([`runtime_line`]), which never changes the status (docs/SEMANTICS.md §13).
pub fn readyz(
    readiness: Readiness,
    runtime: Option<&PollStatus>,
    runtime_repairs: u64,
) -> (u16, String) {
    let (code, mut body) = answer("/readyz", readiness);
    if let Some(status) = runtime {
        body.push('\n');
        body.push_str(&runtime_line(status, runtime_repairs));
    }
    (code, body)
}

/// What the runtime source is doing, in one line for an operator: whether the runtime answers
/// (since when it does not, and how it fails), and what is served from it meanwhile
/// (`repairs`: the endpoints served as it says, which a failing runtime leaves in force).
pub fn runtime_line(status: &PollStatus, repairs: u64) -> String {
    let endpoint = &status.endpoint;
    let repaired = format!(
        "{repairs} endpoint{} repaired",
        if repairs == 1 { "" } else { "s" }
    );
    match (status.failing, status.last_ok_ago) {
        (None, None) => format!("runtime {endpoint}: first poll under way"),
        (None, Some(ago)) => format!(
            "runtime {endpoint}: answering (last poll {} s ago), {repaired}",
            ago.as_secs()
        ),
        (Some((failing, how)), Some(ago)) => format!(
            "runtime {endpoint}: not answering for {} s ({}); its last answer, {} s ago, stays in force: {repaired}",
            failing.as_secs(),
            failure_word(how),
            ago.as_secs()
        ),
        (Some((failing, how)), None) => format!(
            "runtime {endpoint}: not answering for {} s ({}), not once since the start; endpoints are served as the upstream says",
            failing.as_secs(),
            failure_word(how)
        ),
    }
}

/// How a poll failed, in the words of [`runtime_line`].
fn failure_word(outcome: PollOutcome) -> &'static str {
    match outcome {
        PollOutcome::Ok => "ok",
        PollOutcome::Unreachable => "unreachable",
        PollOutcome::Timeout => "timeout",
        PollOutcome::BadAnswer => "bad answer",
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

fn is_topology(path: &str) -> bool {
    path == "/debug/topology" || path.starts_with("/debug/topology/")
}

/// Whether `path` (without its query) is answered under the cache's lock, by [`route_locked`].
fn takes_lock(path: &str, extras: &Extras) -> bool {
    is_topology(path) || (path == "/debug/state" && extras.debug)
}

/// (status, Content-Type, body) for one request path, from the cache's facts alone (no lock);
/// `None` for a path that takes the cache's lock (see [`route_locked`]).
fn route(
    path_and_query: &str,
    facts: &SharedFacts,
    extras: &Extras,
) -> Option<(u16, &'static str, String)> {
    let now = crate::clock::unix_now();
    let path = path_and_query.split('?').next().unwrap_or("");
    if takes_lock(path, extras) {
        return None;
    }
    Some(match path {
        "/metrics" => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::render(&facts.load(), extras, now),
        ),
        _ => {
            let facts = facts.load();
            let readiness = Readiness::of(&facts, extras.snapshot_written, now);
            let (code, body) = if path == "/readyz" {
                let runtime = runtime_pods::poll_status();
                readyz(readiness, runtime.as_ref(), facts.runtime_repairs)
            } else {
                answer(path_and_query, readiness)
            };
            (code, TEXT, body)
        }
    })
}

/// (status, Content-Type, body) for a path [`route`] leaves to the debug worker (the answer
/// asks the cache's writer).
fn route_debug(
    path_and_query: &str,
    writer: &WriterHandle,
    extras: &Extras,
) -> (u16, &'static str, String) {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    match path {
        "/debug/state" if extras.debug => debug_state::answer(query, writer, extras),
        p if is_topology(p) => debug_topology::answer(p, query, writer),
        _ => (404, TEXT, "not found".into()),
    }
}

/// The complete response: its head from [`crate::http::response::head`] (`Connection: close`),
/// then the body.
fn response(code: u16, content_type: &str, body: &str) -> Vec<u8> {
    let mut out = response::head(
        code,
        &[("Content-Type", content_type)],
        Body::Length(body.len()),
        false,
    );
    out.extend_from_slice(body.as_bytes());
    out
}

/// The path of a request head as read (the second word; `""` when there is none).
fn request_path(head: &[u8]) -> String {
    let line = String::from_utf8_lossy(head);
    line.split_whitespace().nth(1).unwrap_or("").to_string()
}

/// Starts the health listener's thread on `listener`. Its cache figures come from the
/// writer's facts; only the debug pages ask the writer (on a worker thread of their own).
pub fn spawn(
    listener: std::net::TcpListener,
    writer: WriterHandle,
    extras: Extras,
) -> std::io::Result<()> {
    let facts = writer.facts();
    let health = serve::HealthLoop::new(listener, facts, writer, Arc::new(extras))?;
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || health.run())
        .map(|_| ())
}

mod serve;

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
