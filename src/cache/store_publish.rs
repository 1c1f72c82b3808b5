//! Publication: a recomputed object becomes served content with a new RV, recorded into the
//! readers' view one object at a time (the view is locked only to read the old version and to
//! record the new one; the serialization in between runs unlocked).

use std::sync::Arc;

use serde_json::Value;

use super::{admission_filtered, State, EXCLUDING_LABELS};
use crate::cache::facts::Facts;
use crate::cache::published::Published;
use crate::cache::view::{labels_of, same_but_rv, stamp_rv, Served};
use crate::k8s::{ObjectKey, Resource};
use crate::sync::lock;

impl State {
    /// Makes `value` the served content of `key`: no change, no RV, no event; otherwise a new
    /// RV, a new shared serialization and one log entry. Returns whether anything changed.
    pub(super) fn publish(
        &mut self,
        res: Resource,
        key: &ObjectKey,
        value: Option<Value>,
        now: u64,
    ) -> bool {
        let make = value.map(|mut value| {
            // The LIST fast path (`api::filter::Selection`) relies on this.
            debug_assert!(
                !admission_filtered(res)
                    || !EXCLUDING_LABELS
                        .iter()
                        .any(|k| labels_of(&value).contains_key(*k)),
                "an admitted object carries an excluding label"
            );
            move |rv: u64| {
                let bytes = finish(res, &mut value, rv);
                Served::with_bytes(key.clone(), rv, &value, bytes)
            }
        });
        self.publish_with(res, key, make, now)
    }

    /// [`State::publish`] of the served object `make` builds, stamped with the RV it is given
    /// (`None`: a deletion).
    pub(super) fn publish_with(
        &mut self,
        res: Resource,
        key: &ObjectKey,
        make: Option<impl FnOnce(u64) -> Served>,
        now: u64,
    ) -> bool {
        // The view is locked twice, briefly: to read the old version, and to record the new one
        // (the serialization in between runs unlocked; this thread is the only writer).
        let old = lock(&self.view).collection(res).get(key).cloned();
        let Some(make) = make else {
            if old.is_none() {
                return false;
            }
            self.rv += 1;
            self.record(res, key, None, now);
            return true;
        };
        // Serialize once, stamped with the RV this change would get; compare with the old bytes
        // ignoring the stamp. Only a real change consumes the RV.
        let next = self.rv + 1;
        let served = make(next);
        if old
            .as_ref()
            .is_some_and(|o| same_but_rv(&served.bytes, next, &o.bytes, o.rv))
        {
            return false;
        }
        self.rv = next;
        self.record(res, key, Some(Arc::new(served)), now);
        true
    }

    /// Records a change of `key` at the current RV into the readers' view.
    fn record(&mut self, res: Resource, key: &ObjectKey, new: Option<Arc<Served>>, now: u64) {
        let mut view = lock(&self.view);
        view.collection_mut(res).record(key, new, self.rv, now);
        view.set_rv(self.rv);
        drop(view);
        #[cfg(test)]
        if let Some(hook) = &mut self.record_hook {
            (hook.0)();
        }
    }

    /// Drops log entries beyond the retention, in every collection.
    pub(super) fn trim(&mut self, now: u64) {
        lock(&self.view).trim(now);
    }

    /// Ends a change: stores the figures the health listener reads without this lock or the
    /// view's (`crate::cache::facts`), counted under the view's lock and stored while it is
    /// held (the event loop stores the logs' lengths under it too when it ages them).
    pub(super) fn publish_facts(&self) {
        let view = lock(&self.view);
        view.facts().store(&self.count_facts(&view));
    }

    /// The cache's figures now (one lock of the view; nothing allocated per object).
    pub fn facts(&self) -> Facts {
        self.count_facts(&lock(&self.view))
    }

    fn count_facts(&self, view: &Published) -> Facts {
        let nodes = view.collection(Resource::Nodes);
        let abnormal = self
            .abnormal_nodes()
            .iter()
            .filter(|n| nodes.get(&ObjectKey::new("", n.as_str())).is_some())
            .count();
        Facts {
            ready: self.ready,
            serving_snapshot: self.from_snapshot,
            resource_version: self.rv,
            objects: view.object_counts(),
            log_entries: view.log_lens(),
            abnormal_nodes: abnormal as u64,
        }
    }
}

/// Gives served content its `kind`, `apiVersion` and `metadata.resourceVersion` = `rv`, and
/// serializes it.
pub(super) fn finish(res: Resource, value: &mut Value, rv: u64) -> Vec<u8> {
    if let Some(obj) = value.as_object_mut() {
        obj.insert("kind".into(), Value::String(res.kind().into()));
        obj.insert("apiVersion".into(), Value::String(res.api_version().into()));
    }
    stamp_rv(value, rv);
    // Serializing a Value cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}
