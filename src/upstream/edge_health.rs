//! The edge-health poller (docs/SEMANTICS.md §10), I/O shell: one thread that GETs edge-health's
//! `localinfo` every `interval` with a plain ureq agent and hands each answer, parsed by
//! [`crate::handoff::edge_health::parse`], to a callback (normally a message to the cache's writer, `crate::writer::WriterHandle::set_edge_health`).
//!
//! - One poll at start, then one per `interval` (measured from the start of the previous
//!   poll); each poll is bounded by [`POLL_TIMEOUT`] end to end.
//! - Only a `200` whose body parses is an answer. Anything else — connection error, timeout,
//!   any other status (redirects are not followed), a body over [`MAX_BODY_BYTES`], bad JSON, a
//!   non-object top level — is a failed poll, reported to the callback as an **empty** map, so
//!   every endpoint is served again.
//! - Logging: WARN once when polling starts failing (with the error), INFO when it answers
//!   again, DEBUG for every poll. Which nodes are abnormal is the callback's to log
//!   (`State::set_edge_health` logs the resolved set at INFO when it changes).
//! - `http://` and `https://` addresses; https verifies the server against the system CA bundle
//!   (no client certificate, no credentials are ever sent).
//! - Stops within ~100 ms of `stop` being set while waiting between polls; a poll in flight
//!   finishes first (at most [`POLL_TIMEOUT`]) and its answer is then dropped.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use ureq::{http, Agent};

use crate::handoff::edge_health::{self as health_map, EdgeHealthMap};
use crate::upstream::client;
use crate::upstream::kubeconfig::UpstreamConfig;
use crate::upstream::tls;

/// End-to-end limit of one poll (connect, request, response and body).
pub const POLL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest `localinfo` body read (an entry is ~100 bytes; this is far above any cluster).
pub const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// Starts the poller thread (`edge-health`): polls `address` now and then every `interval`,
/// calling `on_poll` with the parsed map after every poll (an empty map after a failed one),
/// until `stop` is set. Errors: `address` is not an `http://` / `https://` URL with a host, the
/// TLS settings cannot be built (https without a system CA bundle), or the thread cannot start.
pub fn spawn(
    address: String,
    interval: Duration,
    on_poll: Box<dyn Fn(EdgeHealthMap) + Send>,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    let agent = agent(&address, POLL_TIMEOUT)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    std::thread::Builder::new()
        .name("edge-health".into())
        .spawn(move || run(&agent, &address, interval, &*on_poll, &stop))
}

/// A plain agent for `address`: no redirects, non-2xx statuses returned (not errors), every
/// request bounded by `timeout`.
fn agent(address: &str, timeout: Duration) -> Result<Agent, String> {
    let uri: http::Uri = address
        .parse()
        .map_err(|e| format!("edge-health address {address:?}: {e}"))?;
    let https = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => true,
        Some(s) if s.eq_ignore_ascii_case("http") => false,
        _ => {
            return Err(format!(
                "edge-health address {address:?}: scheme must be http or https"
            ))
        }
    };
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("edge-health address {address:?}: no host"));
    }
    let tls_settings = UpstreamConfig {
        server: address.to_string(),
        ..UpstreamConfig::default()
    };
    let tls = tls::tls_config(&tls_settings, https)
        .map_err(|e| format!("edge-health address {address:?}: {e}"))?;
    Ok(client::lean_buffers(Agent::config_builder())
        .tls_config(tls)
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("grid-wrapper/", env!("CARGO_PKG_VERSION")))
        .timeout_global(Some(timeout))
        .build()
        .new_agent())
}

/// One GET of `address`: the parsed map of a `200`, or why the poll failed.
fn poll(agent: &Agent, address: &str) -> Result<EdgeHealthMap, String> {
    let resp = agent
        .get(address)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    if code != 200 {
        return Err(format!("HTTP status {code}"));
    }
    let body = resp
        .into_body()
        .into_with_config()
        .limit(MAX_BODY_BYTES)
        .read_to_vec()
        .map_err(|e| format!("reading the body: {e}"))?;
    health_map::parse(&body).map_err(|e| format!("bad answer: {e}"))
}

/// The thread body: poll, report, wait; until `stop`.
fn run(
    agent: &Agent,
    address: &str,
    interval: Duration,
    on_poll: &dyn Fn(EdgeHealthMap),
    stop: &AtomicBool,
) {
    info!("edge-health: polling {address} every {interval:?}");
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = poll(agent, address);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let map = match result {
            Ok(map) => {
                if failing {
                    info!("edge-health: {address} answers again");
                }
                failing = false;
                let abnormal = map.values().filter(|normal| !**normal).count();
                debug!(
                    "edge-health: {} entries, {abnormal} abnormal, in {:?}",
                    map.len(),
                    started.elapsed()
                );
                map
            }
            Err(e) => {
                if failing {
                    debug!("edge-health: poll failed again: {e}");
                } else {
                    warn!(
                        "edge-health: polling {address} failed: {e}; every endpoint is served \
                         until it answers"
                    );
                }
                failing = true;
                EdgeHealthMap::new()
            }
        };
        on_poll(map);
        crate::clock::sleep_until(started + interval, stop);
    }
    debug!("edge-health: poller stopped");
}

#[cfg(test)]
#[path = "edge_health_tests.rs"]
mod tests;
