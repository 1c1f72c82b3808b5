//! The compactor thread: takes the versions the writer publishes
//! ([`crate::cache::compaction`]) and brings each to its held form, so that neither the writer
//! nor the event loop encodes a protobuf form or checks it.
//!
//! It starts once the cache is ready (synced, or serving a snapshot): until then the sync has
//! the machine to itself and the versions wait in the queue (weakly: one replaced meanwhile is
//! skipped). A client that reads in protobuf before the compactor reaches a version compacts it
//! itself, as without the compactor; the two never do it twice (the version's lock).

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
                let mut ready = false;
                for one in pending {
                    while !ready {
                        ready = facts.load().ready;
                        if !ready {
                            std::thread::sleep(READY_POLL);
                        }
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
