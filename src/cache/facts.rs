//! What the health listener reports about the cache (`/readyz` and the cache's part of
//! `/metrics`), kept in atomics that the writer refreshes at the end of each change and that
//! readers load without a lock: a probe never waits for a relist being applied.
//!
//! The writer ([`crate::cache::store::State`]) stores [`Facts`] into the [`SharedFacts`] it
//! shares with the readers' view ([`crate::cache::published::Published::facts`]) while it holds
//! the view's lock, as it does when it ages the logs between changes, so the last store is always
//! the newest count. Readiness is one word (ready and serving the snapshot change together);
//! every other figure is loaded on its own, as a scrape samples each gauge on its own.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

use crate::k8s::Resource;

const RESOURCES: usize = Resource::ALL.len();

/// The cache's figures, as read from [`SharedFacts::load`] or counted by the writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Every reflector has listed once (or a snapshot was restored) and the view is built.
    pub ready: bool,
    /// The served view still comes (partly) from the on-disk snapshot.
    pub serving_snapshot: bool,
    /// The last resourceVersion handed out.
    pub resource_version: u64,
    /// Served objects per resource (indexed by [`Resource::index`]).
    pub objects: [u64; RESOURCES],
    /// Event-log entries kept per resource (indexed by [`Resource::index`]).
    pub log_entries: [u64; RESOURCES],
    /// Cached nodes the edge-health map reports abnormal.
    pub abnormal_nodes: u64,
    /// Endpoints served as the container runtime says (docs/SEMANTICS.md §13).
    pub runtime_repairs: u64,
    /// Other nodes whose runtime view is in force, reported or relayed (docs/SEMANTICS.md §13.1).
    pub runtime_site_views: u64,
    /// Objects held stale per upstream resource (indexed by [`Resource::index`]): a newer
    /// version over `--max-object-bytes` was refused, the last accepted one is served.
    pub stale: [u64; RESOURCES],
}

impl Facts {
    /// Served objects of `res`.
    pub fn objects(&self, res: Resource) -> u64 {
        self.objects[res.index()]
    }

    /// Event-log entries of `res`.
    pub fn log_entries(&self, res: Resource) -> u64 {
        self.log_entries[res.index()]
    }

    /// Objects of `res` held stale.
    pub fn stale(&self, res: Resource) -> u64 {
        self.stale[res.index()]
    }
}

/// [`Facts`] in atomics: written by the single writer (changes and the logs' ageing: the stores
/// are the cache's own), read by anyone without waiting.
#[derive(Debug)]
pub struct SharedFacts {
    /// 0: not ready, 1: ready from the snapshot, 2: ready (synced with the upstream).
    readiness: AtomicU8,
    resource_version: AtomicU64,
    objects: [AtomicU64; RESOURCES],
    log_entries: [AtomicU64; RESOURCES],
    abnormal_nodes: AtomicU64,
    runtime_repairs: AtomicU64,
    runtime_site_views: AtomicU64,
    stale: [AtomicU64; RESOURCES],
}

impl SharedFacts {
    /// Facts of an empty, not yet ready cache at resourceVersion `rv`.
    pub fn new(rv: u64) -> SharedFacts {
        SharedFacts {
            readiness: AtomicU8::new(0),
            resource_version: AtomicU64::new(rv),
            objects: std::array::from_fn(|_| AtomicU64::new(0)),
            log_entries: std::array::from_fn(|_| AtomicU64::new(0)),
            abnormal_nodes: AtomicU64::new(0),
            runtime_repairs: AtomicU64::new(0),
            runtime_site_views: AtomicU64::new(0),
            stale: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The current figures (no lock).
    pub fn load(&self) -> Facts {
        let (ready, serving_snapshot) = match self.readiness.load(Relaxed) {
            0 => (false, false),
            1 => (true, true),
            _ => (true, false),
        };
        Facts {
            ready,
            serving_snapshot,
            resource_version: self.resource_version.load(Relaxed),
            objects: std::array::from_fn(|i| self.objects[i].load(Relaxed)),
            log_entries: std::array::from_fn(|i| self.log_entries[i].load(Relaxed)),
            abnormal_nodes: self.abnormal_nodes.load(Relaxed),
            runtime_repairs: self.runtime_repairs.load(Relaxed),
            runtime_site_views: self.runtime_site_views.load(Relaxed),
            stale: std::array::from_fn(|i| self.stale[i].load(Relaxed)),
        }
    }

    /// Publishes `facts` (the writer, at the end of a change).
    pub(crate) fn store(&self, facts: &Facts) {
        let readiness = match (facts.ready, facts.serving_snapshot) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => 2,
        };
        self.readiness.store(readiness, Relaxed);
        self.resource_version.store(facts.resource_version, Relaxed);
        self.store_log_entries(&facts.log_entries);
        for (slot, v) in self.objects.iter().zip(facts.objects) {
            slot.store(v, Relaxed);
        }
        self.abnormal_nodes.store(facts.abnormal_nodes, Relaxed);
        self.runtime_repairs.store(facts.runtime_repairs, Relaxed);
        self.runtime_site_views
            .store(facts.runtime_site_views, Relaxed);
        for (slot, v) in self.stale.iter().zip(facts.stale) {
            slot.store(v, Relaxed);
        }
    }

    /// Publishes the event logs' lengths alone (the writer, after ageing them).
    pub(crate) fn store_log_entries(&self, log_entries: &[u64; RESOURCES]) {
        for (slot, v) in self.log_entries.iter().zip(log_entries) {
            slot.store(*v, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_stored_is_loaded() {
        let shared = SharedFacts::new(7);
        assert_eq!(
            shared.load(),
            Facts {
                resource_version: 7,
                ..Facts::default()
            }
        );
        for (ready, serving_snapshot) in [(true, true), (true, false), (false, false)] {
            let facts = Facts {
                ready,
                serving_snapshot,
                resource_version: 42,
                objects: [1, 2, 3, 4, 5, 12, 13],
                log_entries: [6, 7, 8, 9, 10, 14, 15],
                abnormal_nodes: 11,
                runtime_repairs: 3,
                runtime_site_views: 2,
                stale: [1, 0, 0, 0, 0, 2, 0],
            };
            shared.store(&facts);
            assert_eq!(shared.load(), facts);
        }
        shared.store_log_entries(&[0; RESOURCES]);
        assert_eq!(shared.load().log_entries, [0; RESOURCES]);
        assert_eq!(shared.load().objects(Resource::Endpoints), 2);
    }
}
