//! The container runtime's view as the cache keeps it (docs/SEMANTICS.md §13): the last view the
//! runtime source handed over, whether the local node's objects are owed a recomputation, and
//! which served objects are repaired now (for the count in `/metrics` and the log line once per
//! object). Pure; the rule itself is [`crate::cache::repair`].
//!
//! Invariants: `in_force` holds exactly the served Endpoints and v1 slices whose last
//! publication the rule changed, with what it changed; `endpoints` is the sum of their counts.

use std::collections::BTreeMap;

use log::info;

use crate::cache::repair::Outcome;
use crate::handoff::runtime_pods::RuntimePods;
use crate::k8s::{ObjectKey, Resource};

/// The runtime part of the cache.
#[derive(Debug, Default)]
pub(super) struct Runtime {
    /// The last view handed over; empty = no source, or it knows no pod (nothing repaired).
    pods: RuntimePods,
    /// The view changed since the last recomputation.
    dirty: bool,
    /// Served objects the rule changed, by resource (Endpoints, v1 slices) and key.
    in_force: BTreeMap<(Resource, ObjectKey), Outcome>,
    /// Endpoints served repaired (address or not ready), over `in_force`.
    endpoints: usize,
}

impl Runtime {
    /// The view in force.
    pub(super) fn pods(&self) -> &RuntimePods {
        &self.pods
    }

    /// Takes the source's latest view; `false` (nothing to do) for the same view again.
    pub(super) fn set(&mut self, pods: RuntimePods) -> bool {
        if pods == self.pods {
            return false;
        }
        self.pods = pods;
        self.dirty = true;
        true
    }

    /// Whether the local node's endpoint objects are owed a recomputation (cleared).
    pub(super) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Whether an object with endpoints on `nodes` may be repaired (so must take the `Value`
    /// path).
    pub(super) fn may_repair<'n>(
        &self,
        mut nodes: impl Iterator<Item = &'n String>,
        hostname: &str,
    ) -> bool {
        !self.pods.is_empty() && nodes.any(|n| n == hostname)
    }

    /// Records what the rule did to the object `key` of `res` as just published (or deleted:
    /// none), logging at INFO when its repair starts, changes or ends.
    pub(super) fn note(&mut self, res: Resource, key: &ObjectKey, outcome: Outcome) {
        if res == Resource::SlicesV1beta1 || (outcome.is_none() && self.in_force.is_empty()) {
            return; // the v1 slice's copy (counted once, as v1), or nothing repaired anywhere
        }
        let entry = (res, key.clone());
        let before = self.in_force.get(&entry).copied().unwrap_or_default();
        if before == outcome {
            return;
        }
        self.endpoints -= before.addresses + before.not_ready;
        self.endpoints += outcome.addresses + outcome.not_ready;
        if outcome.is_none() {
            self.in_force.remove(&entry);
            info!("{res:?} {key}: served as the upstream says again (runtime repair ended)");
        } else {
            self.in_force.insert(entry, outcome);
            info!(
                "{res:?} {key}: served as the container runtime says: {} endpoint(s) on the runtime's address, {} not ready",
                outcome.addresses, outcome.not_ready
            );
        }
    }

    /// Endpoints served repaired now (Endpoints and v1 slices).
    pub(super) fn endpoints_repaired(&self) -> usize {
        self.endpoints
    }
}
