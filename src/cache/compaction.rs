//! Served object versions handed over, as they are published, to be brought to their one held
//! form ([`Served::protobuf`]) off the writer and off the event loop: the compactor thread
//! (`crate::writer::compactor`) takes them one by one, so that a version drops its JSON soon
//! after it is published rather than on its first protobuf read, which then only shares bytes.
//!
//! A version is handed over weakly, and one that a newer version (or a deletion) replaced
//! before its turn is skipped: the queue keeps nothing alive, and churn costs no compaction. The
//! versions published before the cache is ready (the sync: nearly all of them) are compacted as
//! soon as it is; a later one only once it has lived [`SETTLE`], so that an object changing
//! again and again (a rollout) is not encoded and checked for each short-lived version, and a
//! JSON reader of its changes shares the kept JSON. A version no one has compacted yet is served
//! as before (its first protobuf reader compacts it).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long a version published after the cache became ready lives before it is compacted.
pub const SETTLE: Duration = Duration::from_secs(10);

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
    /// When it was published.
    at: Instant,
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
            at: Instant::now(),
        };
        // A send fails only once the compactor has stopped.
        let _ = self.queue.send(pending);
    }
}

impl Pending {
    /// When it is due, for a compactor that found the cache ready at `ready`: then, for a
    /// version published before (the sync's); [`SETTLE`] after it was published, for a later
    /// one.
    pub fn due(&self, ready: Instant) -> Instant {
        if self.at <= ready {
            ready
        } else {
            self.at + SETTLE
        }
    }

    /// Brings the version to its held form, unless it is gone or was replaced; whether it did.
    pub fn compact(self) -> bool {
        match self.served.upgrade() {
            Some(served) if !served.superseded() => {
                served.protobuf(self.res);
                true
            }
            _ => false,
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
    fn a_version_replaced_before_its_turn_is_skipped() {
        let (compaction, rx) = queue();
        let served = slice(7);
        compaction.hand_over(Resource::SlicesV1, &served);
        served.supersede();
        let pending = rx.try_recv().expect("queued");
        assert!(!pending.compact());
        assert_eq!(served.form(), Form::Json);
    }

    #[test]
    fn the_syncs_versions_are_due_at_readiness_later_ones_once_settled() {
        let (compaction, rx) = queue();
        let served = slice(7);
        compaction.hand_over(Resource::SlicesV1, &served);
        let pending = rx.try_recv().expect("queued");
        let ready = pending.at + Duration::from_secs(3);
        assert_eq!(pending.due(ready), ready, "published before readiness");
        let ready = pending.at - Duration::from_millis(1);
        assert_eq!(pending.due(ready), pending.at + SETTLE, "published after");
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
