//! The cache's side of `--cache-dir`: taking its upstream objects for a snapshot, and serving a
//! snapshot's objects after a restart. Pure (the disk is `crate::persist`'s). One of the binder's
//! routes: an `impl` of [`State`] over the parts ([`super::upstream`] exports, a restore goes
//! through the same path as a first list).

use log::warn;

use super::{State, Upstream};
use crate::cache::snapshot::Objects;
use crate::k8s::Resource;

impl State {
    /// Every cached upstream object, shared (its bytes, its packed bytes, or its served bytes
    /// and RV): taken under the lock (pointer copies), made whole and written off it.
    pub fn export(&self) -> Objects<Upstream> {
        Objects {
            nodes: self.upstream.blobs(Resource::Nodes, self.stand_in()),
            services: self.upstream.blobs(Resource::Services, self.stand_in()),
            endpoints: self.upstream.blobs(Resource::Endpoints, self.stand_in()),
            slices: self.upstream.blobs(self.slice_kind, self.stand_in()),
        }
    }

    /// Serves a snapshot's objects at once: the cache becomes ready, with every object stamped
    /// by this process's RVs, and stays marked as serving the snapshot until every reflector has
    /// listed from the upstream (whose lists are then diffed against it, as any relist is).
    /// Only for a fresh cache (nothing applied yet); returns whether it restored.
    pub fn restore(&mut self, objects: Objects, slice_kind: Resource, now: u64) -> bool {
        if self.ready || !self.synced.is_empty() || self.upstream.holds_any(Resource::Nodes) {
            warn!("not restoring the snapshot: the cache already holds upstream data");
            return false;
        }
        if matches!(slice_kind, Resource::SlicesV1 | Resource::SlicesV1beta1) {
            self.slice_kind = slice_kind;
        }
        let slices = self.slice_kind;
        for (kind, items) in [
            (Resource::Nodes, objects.nodes),
            (Resource::Services, objects.services),
            (Resource::Endpoints, objects.endpoints),
            (slices, objects.slices),
        ] {
            // As a list's items: the same canonical decode, the pruned objects' upstream
            // bytes packed as they are read (restored through `Value`s and packed afterwards,
            // the static build kept more memory after an offline start).
            // Prepared as a first list is (`list_preparer`), straight from the snapshot's bytes.
            let mut list = self.list_preparer(kind);
            for b in items.iter() {
                match std::str::from_utf8(b) {
                    Ok(text) => list.push(text),
                    Err(e) => warn!("{kind:?}: skipping a snapshot object that is not UTF-8: {e}"),
                }
            }
            self.replace(kind, list.into_objects(), now);
        }
        // Nodes, then Services, then the endpoint objects: each endpoint object was served with
        // every node and Service already in place, so the recomputation those upserts asked for
        // would only repeat the same work (a large share of the restore time).
        self.index.forget_dirty();
        let _ = self.health.take_dirty();
        self.ready = true;
        self.from_snapshot = true;
        self.publisher.set_ready();
        self.publisher.publish_facts(self.status());
        true
    }
}

impl Objects<Upstream> {
    /// Every object made whole, all at once (the snapshot writer makes them whole one at a
    /// time); `None` for bytes that do not unpack.
    pub fn whole(&self) -> Option<Objects> {
        let whole =
            |objs: &[Upstream]| -> Option<Vec<_>> { objs.iter().map(Upstream::bytes).collect() };
        Some(Objects {
            nodes: whole(&self.nodes)?,
            services: whole(&self.services)?,
            endpoints: whole(&self.endpoints)?,
            slices: whole(&self.slices)?,
        })
    }
}

#[cfg(test)]
mod tests;
