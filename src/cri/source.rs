//! The runtime source (docs/SEMANTICS.md §13), I/O shell: one thread (`cri-source`) that polls
//! the container runtime through a [`Client`] every interval and hands the view of the local
//! pods it builds ([`RuntimePods::from_sandboxes`]) to a callback (normally a message to the
//! cache's writer, `crate::writer::WriterHandle::set_runtime_pods`) when it changed.
//!
//! - One poll at start, then one per interval (measured from the start of the previous poll);
//!   each poll, all its calls, is bounded by the client's deadline, so neither the event loop
//!   nor the writer ever waits for the runtime.
//! - A failed poll hands nothing over: the last good view stays in force. Counted by outcome
//!   ([`record_poll`]); WARN once when polls start failing, INFO when the runtime answers again,
//!   DEBUG for the failures between.
//! - Stops within ~100 ms of `stop` being set while waiting between polls; a poll in flight
//!   finishes first (bounded by the poll's deadline).
//! - The endpoint polled is recorded for `/readyz` ([`record_endpoint`]) as the thread starts.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::client::{Client, Error, ErrorKind, Sandboxes};
use crate::handoff::runtime_pods::{
    record_endpoint, record_poll, PollOutcome, RuntimePods, Sandbox,
};

/// Starts the source thread: polls through `client` now and then every `interval`, calling
/// `on_view` with each view that differs from the last one handed over, until `stop` is set.
pub fn spawn(
    client: Client,
    interval: Duration,
    on_view: Box<dyn Fn(RuntimePods) + Send>,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("cri-source".into())
        .spawn(move || run(client, interval, &*on_view, &stop))
}

fn run(mut client: Client, interval: Duration, on_view: &dyn Fn(RuntimePods), stop: &AtomicBool) {
    record_endpoint(client.endpoint());
    info!(
        "container runtime {}: polling every {} s",
        client.endpoint(),
        interval.as_secs()
    );
    let mut last: Option<RuntimePods> = None;
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        match client.list_sandboxes() {
            Ok(seen) => {
                record_poll(PollOutcome::Ok);
                if failing {
                    info!("container runtime {}: answers again", client.endpoint());
                    failing = false;
                }
                let view = view_of(&seen);
                debug!(
                    "container runtime {}: {} ready sandboxes, {} pods with an address, {} without a ready sandbox",
                    client.endpoint(),
                    seen.ready.len(),
                    view.ready.len(),
                    view.not_ready.len()
                );
                if last.as_ref() != Some(&view) {
                    last = Some(view.clone());
                    on_view(view);
                }
            }
            Err(e) => {
                record_poll(outcome_of(&e));
                if failing {
                    debug!("{e}");
                } else {
                    warn!("{e}; the local endpoints stay served as they are until it answers");
                    failing = true;
                }
            }
        }
        crate::clock::sleep_until(started + interval, stop);
    }
}

/// The view of the local pods one poll gives ([`RuntimePods::from_sandboxes`]); `grid-wrapper
/// check` builds it the same way.
pub fn view_of(seen: &Sandboxes) -> RuntimePods {
    let ready = seen.ready.iter().map(|s| Sandbox {
        namespace: &s.namespace,
        name: &s.name,
        uid: &s.uid,
        attempt: s.attempt,
        created_at: s.created_at,
        ips: &s.ips,
    });
    let others = seen
        .not_ready
        .iter()
        .map(|(ns, n)| (ns.as_str(), n.as_str()));
    RuntimePods::from_sandboxes(ready, others)
}

/// How a failed poll is counted.
fn outcome_of(e: &Error) -> PollOutcome {
    match e.kind {
        ErrorKind::Connect(_) | ErrorKind::Io(_) | ErrorKind::Closed => PollOutcome::Unreachable,
        ErrorKind::Timeout(_) => PollOutcome::Timeout,
        ErrorKind::Protocol(_) | ErrorKind::Message(_) => PollOutcome::BadAnswer,
    }
}
