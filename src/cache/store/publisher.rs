//! The served view's writer side: the resourceVersion counter, the readers' [`View`] handle, and
//! whether v1beta1 EndpointSlices are served. A recomputed object becomes served content with a
//! new RV, recorded into the view one object at a time.
//!
//! Invariants: `rv` is the last RV handed out and the view's RV (every record sets both); an RV
//! is spent only on a real change of served content (a new object, a deletion, or bytes that
//! differ but for the stamp); the view is locked only to read an old served object and to record
//! a new one (the serialization in between runs unlocked; this is the only writer); no served
//! v1beta1 copy, RV or log entry exists until `v1beta1` is set
//! ([`Publisher::start_v1beta1`]).

use std::sync::Arc;

use serde_json::Value;

use crate::cache::collection::{
    admission_filtered, labels_of, stamp_rv, Retention, Served, EXCLUDING_LABELS,
};
use crate::cache::compaction::Compaction;
use crate::cache::facts::{Facts, SharedFacts};
use crate::cache::published::{CollectionRef, Published, View, ViewWriter};
use crate::k8s::{ObjectKey, Resource};

/// The RV counter and the readers' view it records into.
#[derive(Debug)]
pub(super) struct Publisher {
    /// The last resourceVersion handed out (recorded into `view` with each change).
    rv: u64,
    /// What readers see; locked only to read an old served object and record a new one. The
    /// one writing handle: readers get [`View`]s of it.
    view: ViewWriter,
    /// Whether v1beta1 EndpointSlices are built: from the first v1beta1 request on; until then
    /// no served copy, RV or log entry is spent on them.
    v1beta1: bool,
    /// With `--relay-bind-address`: the relay view, what followers read (the upstream's objects
    /// unpruned, with RVs of the same counter). See [`Publisher::publish_relay`].
    relay: Option<ViewWriter>,
    /// Where each new version recorded into a view is handed over to be compacted
    /// ([`crate::cache::compaction`]); `None`: on its first protobuf read only.
    compaction: Option<Compaction>,
    /// Test-only: run after each object is recorded into the view (to park the writer there).
    #[cfg(test)]
    record_hook: Option<RecordHook>,
}

/// Test-only: what `State::set_record_hook` runs after each recorded object, outside the
/// view's lock.
#[cfg(test)]
pub(crate) struct RecordHook(pub Box<dyn FnMut() + Send>);

#[cfg(test)]
impl std::fmt::Debug for RecordHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordHook")
    }
}

/// What the cache's figures say beside the view's counts ([`Publisher::facts`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Status {
    pub(super) ready: bool,
    pub(super) serving_snapshot: bool,
    /// The cached Nodes (whole or as facts) edge-health resolved abnormal.
    pub(super) abnormal_nodes: usize,
    /// Endpoints served as the container runtime says.
    pub(super) runtime_repairs: usize,
    /// Other nodes whose runtime view is in force.
    pub(super) runtime_site_views: usize,
    /// Objects held stale per resource (indexed by [`Resource::index`]).
    pub(super) stale: [u64; Resource::ALL.len()],
}

impl Publisher {
    /// An empty view whose RVs start above `seed`.
    pub(super) fn new(seed: u64, retention: Retention) -> Publisher {
        Publisher {
            rv: seed,
            view: ViewWriter::new(seed, retention),
            v1beta1: false,
            relay: None,
            compaction: None,
            #[cfg(test)]
            record_hook: None,
        }
    }

    /// Keeps a relay view from now on (before the first change: it starts empty, at the
    /// current RV, with the same retention).
    pub(super) fn keep_relay_view(&mut self) {
        if self.relay.is_none() {
            let retention = self.view.read().retention();
            self.relay = Some(ViewWriter::new(self.rv, retention));
        }
    }

    /// Hands every version recorded from now on over to `compaction`.
    pub(super) fn compact_with(&mut self, compaction: Compaction) {
        self.compaction = Some(compaction);
    }

    /// The readers' view holds and serves only the Node `name` from now on.
    pub(super) fn serve_only_node(&mut self, name: &str) {
        self.view.write().set_only_node(name);
    }

    /// Every object of `res` in the relay view, shared (pointer copies: whoever reads their
    /// JSON does, not this writer), in key order (`None`: no relay view).
    pub(super) fn relay_blobs(&self, res: Resource) -> Option<Vec<Arc<Served>>> {
        let relay = self.relay.as_ref()?.read();
        let coll = relay.collection(res);
        Some(coll.objects().cloned().collect())
    }

    /// The relay view's handle, when one is kept.
    pub(super) fn relay_view(&self) -> Option<View> {
        self.relay.as_ref().map(ViewWriter::reader)
    }

    /// The relay view serves slices of `kind`, the version the upstream has (it serves them as
    /// they came, unconverted).
    pub(super) fn relay_slices(&mut self, kind: Resource) {
        if let Some(relay) = &mut self.relay {
            relay
                .write()
                .set_relay_slices(kind == Resource::SlicesV1beta1);
        }
    }

    /// The site's runtime views as the relay answers its followers' reports (§13.1), of
    /// generation `generation`; nothing without a relay view.
    pub(super) fn publish_site(&mut self, generation: u64, bytes: Vec<u8>) {
        if let Some(relay) = &mut self.relay {
            relay.write().set_site_pods(generation, bytes.into());
        }
    }

    /// Whether a relay view is kept.
    pub(super) fn relays(&self) -> bool {
        self.relay.is_some()
    }

    /// Test-only: see [`RecordHook`].
    #[cfg(test)]
    pub(super) fn set_record_hook(&mut self, hook: Option<RecordHook>) {
        self.record_hook = hook;
    }

    /// The last resourceVersion handed out.
    pub(super) fn rv(&self) -> u64 {
        self.rv
    }

    /// Whether v1beta1 EndpointSlices are served.
    pub(super) fn serves_v1beta1(&self) -> bool {
        self.v1beta1
    }

    /// Whether ServiceCIDRs are served (the view's flag; only this writer sets it).
    pub(super) fn serves_cidrs(&self) -> bool {
        self.view.read().serves_cidrs()
    }

    /// ServiceCIDRs are served from now on: their first list was published.
    pub(super) fn start_cidrs(&mut self) {
        self.view.write().set_cidrs();
        if let Some(relay) = &mut self.relay {
            relay.write().set_cidrs();
        }
    }

    /// The readers' handle.
    pub(super) fn view(&self) -> View {
        self.view.reader()
    }

    /// One resource's served objects and log, locked while the reference lives.
    pub(super) fn collection(&self, res: Resource) -> CollectionRef<'_> {
        CollectionRef::new(self.view.read(), res)
    }

    /// Runs `f` on the locked view.
    pub(super) fn with_view<R>(&self, f: impl FnOnce(&Published) -> R) -> R {
        f(&self.view.read())
    }

    /// The served object of `key` in `res`, shared (one lock, per object).
    pub(super) fn served(&self, res: Resource, key: &ObjectKey) -> Option<Arc<Served>> {
        let view = self.view.read();
        view.collection(res).get(key).cloned()
    }

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
            // The LIST fast path (`api::filter::Scope`) relies on this.
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

    /// [`Publisher::publish`] of the served object `make` builds, stamped with the RV it is
    /// given (`None`: a deletion).
    pub(super) fn publish_with(
        &mut self,
        res: Resource,
        key: &ObjectKey,
        make: Option<impl FnOnce(u64) -> Served>,
        now: u64,
    ) -> bool {
        // The view is locked twice, briefly: to read the old version, and to record the new one
        // (the serialization in between runs unlocked; this thread is the only writer).
        let old = self.view.read().collection(res).get(key).cloned();
        let Some(make) = make else {
            if old.is_none() {
                return false;
            }
            self.rv += 1;
            self.record(res, key, None, now);
            return true;
        };
        // Serialize once, stamped with the RV this change would get; compare with the old bytes
        // ignoring the stamp (an old version kept in protobuf form by fingerprints, without
        // decoding it: `Served::same_but_rv`). Only a real change consumes the RV.
        let next = self.rv + 1;
        let served = make(next);
        if old
            .as_ref()
            .is_some_and(|o| o.same_but_rv(&served.json(), next))
        {
            return false;
        }
        self.rv = next;
        self.record(res, key, Some(Arc::new(served)), now);
        true
    }

    /// Records a change of `key` at the current RV into the readers' view (and, for the
    /// resources served unmodified, the same object into the relay view).
    fn record(&mut self, res: Resource, key: &ObjectKey, new: Option<Arc<Served>>, now: u64) {
        if let Some(relay) = self.relay.as_mut().filter(|_| unmodified(res)) {
            record_into(relay, res, key, new.clone(), self.rv, now);
        }
        self.hand_over(res, new.as_ref());
        record_into(&mut self.view, res, key, new, self.rv, now);
        #[cfg(test)]
        if let Some(hook) = &mut self.record_hook {
            (hook.0)();
        }
    }

    /// The relay view's side of an upstream change of an endpoint object (Endpoints, or a slice
    /// of the version the upstream has): `make` builds the upstream object as it came, stamped
    /// with the RV it is given (`None`: a deletion). Called when the upstream changed the
    /// object, never for a recomputation (topology, edge-health), which leaves the relay view as
    /// it is. No change, no RV; when the readers' view has just recorded this very object (it is
    /// served unpruned), the relay view records the same shared bytes at the same RV; otherwise a
    /// new RV of the one counter.
    pub(super) fn publish_relay(
        &mut self,
        res: Resource,
        key: &ObjectKey,
        make: Option<impl Fn(u64) -> Served>,
        now: u64,
    ) {
        let Some(relay) = self.relay.as_mut() else {
            return;
        };
        let old = relay.read().collection(res).get(key).cloned();
        let Some(make) = make else {
            if old.is_some() {
                self.rv += 1;
                record_into(relay, res, key, None, self.rv, now);
                self.view.write().set_rv(self.rv);
            }
            return;
        };
        let next = self.rv + 1;
        let served = make(next);
        if old
            .as_ref()
            .is_some_and(|o| o.same_but_rv(&served.json(), next))
        {
            return;
        }
        // Served unpruned, and recorded by this change: the readers' bytes are the relay's.
        let local = self.view.read().collection(res).get(key).cloned();
        if let Some(local) = local.filter(|l| l.rv == self.rv) {
            if local.same_but_rv(&make(local.rv).json(), local.rv) {
                record_into(relay, res, key, Some(local), self.rv, now);
                return;
            }
        }
        self.rv = next;
        let served = Arc::new(served);
        if let Some(compaction) = &self.compaction {
            compaction.hand_over(res, &served);
        }
        record_into(relay, res, key, Some(served), self.rv, now);
        self.view.write().set_rv(self.rv);
    }

    /// Hands a new version over to be compacted (if anyone compacts).
    fn hand_over(&self, res: Resource, new: Option<&Arc<Served>>) {
        if let (Some(compaction), Some(new)) = (&self.compaction, new) {
            compaction.hand_over(res, new);
        }
    }

    /// Drops log entries beyond the retention, in every collection.
    pub(super) fn trim(&mut self, now: u64) {
        for view in std::iter::once(&mut self.view).chain(&mut self.relay) {
            view.write().trim(now);
        }
    }

    /// Ages the logs of every view at `now` while no change comes ([`Published::age`]).
    pub(super) fn age(&mut self, now: u64) {
        for view in std::iter::once(&mut self.view).chain(&mut self.relay) {
            view.write().age(now);
        }
    }

    /// The view becomes ready: every history starts at the current RV.
    pub(super) fn set_ready(&mut self) {
        for view in std::iter::once(&mut self.view).chain(&mut self.relay) {
            let mut view = view.write();
            view.set_ready();
            for coll in view.collections_mut() {
                coll.reset_history(self.rv);
            }
        }
    }

    /// Starts serving v1beta1 EndpointSlices with `built` (stamped with the current RV), with an
    /// empty history from there. Spends no RV and logs no event.
    pub(super) fn start_v1beta1(&mut self, built: Vec<Arc<Served>>) {
        self.v1beta1 = true;
        let mut view = self.view.write();
        view.set_v1beta1();
        let coll = view.collection_mut(Resource::SlicesV1beta1);
        for served in built {
            if let Some(compaction) = &self.compaction {
                compaction.hand_over(Resource::SlicesV1beta1, &served);
            }
            coll.seed(served);
        }
        coll.reset_history(self.rv);
    }

    /// The figures the health listener reads without the writer's lock.
    pub(super) fn shared_facts(&self) -> Arc<SharedFacts> {
        self.view.read().facts()
    }

    /// Ends a change: stores the figures the health listener reads without this lock or the
    /// view's (`crate::cache::facts`), counted under the view's lock and stored while it is
    /// held (the event loop stores the logs' lengths under it too when it ages them).
    pub(super) fn publish_facts(&self, status: Status) {
        let view = self.view.read();
        view.facts().store(&self.count_facts(&view, status));
    }

    /// The cache's figures now (one lock of the view; nothing allocated per object).
    pub(super) fn facts(&self, status: Status) -> Facts {
        self.count_facts(&self.view.read(), status)
    }

    fn count_facts(&self, view: &Published, status: Status) -> Facts {
        Facts {
            ready: status.ready,
            serving_snapshot: status.serving_snapshot,
            resource_version: self.rv,
            objects: view.object_counts(),
            log_entries: view.log_lens(),
            abnormal_nodes: status.abnormal_nodes as u64,
            runtime_repairs: status.runtime_repairs as u64,
            runtime_site_views: status.runtime_site_views as u64,
            stale: status.stale,
        }
    }
}

/// Whether `res` is served as the upstream has it in the readers' view too (Nodes, Services,
/// ServiceCIDRs): each of its records is the relay view's as well, the same shared object.
fn unmodified(res: Resource) -> bool {
    matches!(
        res,
        Resource::Nodes | Resource::Services | Resource::CidrsV1 | Resource::CidrsV1beta1
    )
}

/// Records a change of `key` at `rv` into `view`, which then stands at `rv`.
fn record_into(
    view: &mut ViewWriter,
    res: Resource,
    key: &ObjectKey,
    new: Option<Arc<Served>>,
    rv: u64,
    now: u64,
) {
    let mut view = view.write();
    view.collection_mut(res).record(key, new, rv, now);
    view.set_rv(rv);
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
