//! Served object versions handed over, as they are published, to be brought to their one held
//! form ([`Served::protobuf`]) off the writer and off the event loop: the compactor thread
//! (`crate::writer::compactor`) takes them one by one, so that a version drops its JSON soon
//! after it is published rather than on its first protobuf read, which then only shares bytes.
//!
//! A version is handed over weakly: one that a newer version replaced before its turn (and that
//! no reader holds) is skipped, not kept alive by the queue. A version no one has compacted yet
//! is served as before (its first protobuf reader compacts it).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Weak};

use super::collection::Served;
use crate::k8s::Resource;

/// The handing side: what the publisher queues each new version with.
#[derive(Clone, Debug)]
pub struct Compaction {
    queue: Sender<Pending>,
}

/// A published version waiting for its held form, as the resource it is served as.
#[derive(Debug)]
pub struct Pending {
    res: Resource,
    served: Weak<Served>,
}

/// A compaction queue: the publisher's side and the compactor's.
pub fn queue() -> (Compaction, Receiver<Pending>) {
    let (queue, rx) = mpsc::channel();
    (Compaction { queue }, rx)
}

impl Compaction {
    /// Hands `served`, just published as `res`, over to the compactor (nothing when the
    /// compactor is gone: its first protobuf reader compacts it).
    pub fn hand_over(&self, res: Resource, served: &Arc<Served>) {
        let pending = Pending {
            res,
            served: Arc::downgrade(served),
        };
        // A send fails only once the compactor has stopped.
        let _ = self.queue.send(pending);
    }
}

impl Pending {
    /// Brings the version to its held form, unless it is gone; whether it was there.
    pub fn compact(self) -> bool {
        match self.served.upgrade() {
            Some(served) => {
                served.protobuf(self.res);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::Form;
    use crate::k8s::ObjectKey;

    fn slice(rv: u64) -> Arc<Served> {
        let json = format!(
            r#"{{"addressType":"IPv4","apiVersion":"discovery.k8s.io/v1","endpoints":null,"kind":"EndpointSlice","metadata":{{"name":"s","namespace":"ns","resourceVersion":"{rv}"}},"ports":null}}"#
        );
        Arc::new(Served::from_parts(
            ObjectKey::new("ns", "s"),
            rv,
            json.into_bytes(),
            Default::default(),
        ))
    }

    #[test]
    fn a_handed_over_version_is_compacted_by_the_taker() {
        let (compaction, rx) = queue();
        let served = slice(7);
        let before = served.json();
        compaction.hand_over(Resource::SlicesV1, &served);
        assert_eq!(served.form(), Form::Json);
        let pending = rx.try_recv().expect("queued");
        assert!(pending.compact());
        assert_eq!(served.form(), Form::Protobuf);
        assert_eq!(served.json()[..], before[..]);
    }

    #[test]
    fn a_replaced_version_is_skipped_not_kept_alive() {
        let (compaction, rx) = queue();
        let served = slice(7);
        compaction.hand_over(Resource::SlicesV1, &served);
        drop(served);
        let pending = rx.try_recv().expect("queued");
        assert!(!pending.compact());
    }

    #[test]
    fn handing_over_after_the_compactor_stopped_is_harmless() {
        let (compaction, rx) = queue();
        drop(rx);
        let served = slice(7);
        compaction.hand_over(Resource::SlicesV1, &served);
        assert_eq!(served.form(), Form::Json);
    }
}
