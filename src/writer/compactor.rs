//! The compactor thread: takes the versions the writer publishes
//! ([`crate::cache::compaction`]) and brings each to its held form, so that neither the writer
//! nor the event loop encodes a protobuf form or checks it.

use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

use crate::cache::compaction::Pending;

/// Starts the compactor on `pending`. It ends when the publisher's side is dropped. A panic
/// (a defect) ends it with an ERROR and nothing else: every version it did not reach is then
/// compacted by its first protobuf reader, as without it.
pub fn spawn(pending: Receiver<Pending>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("compactor".into())
        .spawn(move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for one in pending {
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
