//! The compactor thread: takes the versions the writer publishes
//! ([`crate::cache::compaction`]) and brings each to its held form, so that neither the writer
//! nor the event loop encodes a protobuf form or checks it.
//!
//! It starts once the cache is ready (synced, or serving a snapshot): until then the sync has
//! the machine to itself and the versions wait in the queue (weakly: one replaced meanwhile is
//! skipped). A version published later waits until it has lived `cache::compaction::SETTLE`. A client that reads in protobuf before the compactor reaches a version compacts it
//! itself, as without the compactor; the two never do it twice (the version's lock).

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cache::compaction::Pending;
use crate::cache::facts::SharedFacts;

/// How often the compactor looks whether the cache is ready yet.
const READY_POLL: Duration = Duration::from_millis(100);

/// Starts the compactor on `pending`, once `facts` says the cache is ready. It ends when the
/// publisher's side is dropped. A panic (a defect) ends it with an ERROR and nothing else:
/// every version it did not reach is then compacted by its first protobuf reader, as without
/// it.
pub fn spawn(
    pending: Receiver<Pending>,
    facts: Arc<SharedFacts>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("compactor".into())
        .spawn(move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut ready = None;
                for one in pending {
                    let since = *ready.get_or_insert_with(|| {
                        while !facts.load().ready {
                            std::thread::sleep(READY_POLL);
                        }
                        Instant::now()
                    });
                    // In publishing order, so no later one is due sooner.
                    let wait = one.due(since).saturating_duration_since(Instant::now());
                    if !wait.is_zero() {
                        std::thread::sleep(wait);
                    }
                    one.compact();
                }
            }));
            if run.is_err() {
                log::error!(
                    "the compactor panicked (see above); versions are compacted on their first protobuf read from now on"
                );
            }
        })
}
