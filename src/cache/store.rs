//! The cache's state machine: upstream objects in, topology-pruned served objects, RVs and
//! event-log entries out (docs/SEMANTICS.md §6 and §6.2; every § below is a section of that file).
//!
//! [`State`] binds the cache's parts and routes each change through them; it holds only the facts
//! that belong to no part (settings, which reflectors have listed, readiness, the slice version):
//!
//! - `store/upstream.rs`: what the upstream said, by resource and key, and how it is kept;
//! - `store/index.rs`: node labels, topology keys, slice owners, the by-node index, the dirty sets;
//! - `store/publisher.rs`: the RV counter and the readers' [`View`], one object recorded at a time;
//! - `store/edge_health.rs`: the edge-health map and the abnormal nodes it resolves to (§10);
//! - `store/serve.rs`: the filter's inputs, borrowed from the parts, and what it serves;
//! - `store/prepare.rs`: lists prepared off every lock (pure);
//! - `store/node_facts.rs`: a Node other than the local one, reduced to its facts (pure);
//! - `store/stale.rs`: the objects held stale (a newer version over the object bound refused);
//! - [`explain`]: `/debug/topology`'s data (pure, on a copied [`explain::ExplainInput`]);
//!
//! The binder's own routes are all here, below the change path: publication on the bytes (an
//! object served as it came, or pruned by cutting bytes), the snapshot's export and restore, and
//! v1beta1 EndpointSlices on demand. Its tests are in `store/tests/`.
//!
//! [`State`] is pure (no I/O; its only synchronization is the readers' [`View`] lock): one
//! thread owns it (`crate::writer`) and calls [`State::apply`]; the event loop reads the [`View`] ([`State::view`]), which the writer
//! locks only to read an old served object and to record a new one. `now` is passed in (monotonic
//! seconds) so the log's time window needs no clock here. The edge-health map (§10) comes in the
//! same way, through [`State::set_edge_health`].
//!
//! Invariants: the index describes exactly the kept upstream objects (each endpoint object's nodes
//! and Service as last kept); the served view holds the filtered content of exactly the kept
//! objects (v1beta1 slices once they are served); at the end of each change the dirty sets are
//! empty and the facts are stored.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use log::{debug, info, warn};
use serde_json::Value;

use crate::cache::canonical::{AsIs, Item};
use crate::cache::collection::{admission_filtered, LabelSet, Retention, Served, EXCLUDING_LABELS};
use crate::cache::facts::{Facts, SharedFacts};
use crate::cache::intern::Interner;
use crate::cache::published::{CollectionRef, Published, View};
use crate::cache::repair::Outcome;
use crate::cache::snapshot::Objects;
use crate::cache::topology::{self, Class};
use crate::handoff::edge_health::EdgeHealthMap;
use crate::handoff::runtime_pods::RuntimePods;
use crate::handoff::site_pods::NodeReport;
use crate::handoff::Change;
use crate::k8s::{ObjectKey, Resource};

mod edge_health;
pub mod explain;
mod index;
mod node_facts;
mod prepare;
mod publisher;
mod runtime;
mod serve;
mod stale;
mod upstream;

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

use edge_health::EdgeHealth;
use explain::{ExplainInput, Overview, ServiceExplanation};
use index::{Index, Target};
#[cfg(test)]
use prepare::fresh;
pub use prepare::{values_oracle, Hold, ListPreparer, Listed, Prepared, WatchPreparer};
#[cfg(test)]
pub(crate) use publisher::RecordHook;
use publisher::{Publisher, Status};
use runtime::Runtime;
use serve::{EndpointScope, TopologyInputs};
pub use stale::StaleObject;
use stale::{Stale, StaleMark, StaleWarning};
pub use upstream::{Exported, ServedBytes};
use upstream::{StandIn, Stored, UpstreamObjects};

/// How long a relay's followers hold the relay's own node's runtime view after the relay last
/// confirmed it (seconds, §13.1): they ask again every poll interval.
const OWN_VIEW_VALID_FOR: u64 = 60;

/// Fixed inputs of the filter.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--hostname`: the local node.
    pub hostname: String,
    /// `--wrapper-in-cluster`: enables the `default/kubernetes` local rewrite.
    pub wrapper_in_cluster: bool,
    /// Event-log retention per resource.
    pub retention: Retention,
}

/// The upstream objects grid-wrapper caches and everything it serves from them.
#[derive(Debug)]
pub struct State {
    settings: Settings,
    /// What the upstream said.
    upstream: UpstreamObjects,
    /// What the filter reads besides the objects, and the recomputation owed.
    index: Index,
    /// The RV counter and the readers' view.
    publisher: Publisher,
    /// Edge-health map, node InternalIPs, the resolved abnormal nodes (§10).
    edge_health: EdgeHealth,
    /// The container runtime's view of the local pods and the repairs in force (§13).
    runtime: Runtime,
    slice_kind: Resource,
    /// Set by [`State::expect_slices`]: changes of the other slice version are then ignored.
    slice_kind_pinned: bool,
    /// The ServiceCIDR version mirrored, `None` while the upstream is not known to have the
    /// resource ([`State::expect_cidrs`]); the sync waits for its first list only when set.
    cidr_kind: Option<Resource>,
    synced: BTreeSet<u8>,
    ready: bool,
    /// Serving objects restored from the on-disk snapshot: set by [`State::restore`], cleared
    /// once every reflector has listed from the upstream.
    from_snapshot: bool,
    /// Reads stored objects again as list items when a relabel or a Service change recomputes
    /// them on their bytes ([`State::recompute_as_is`]); kept, so that its buffers are (with
    /// musl's allocator a decoder per object mapped and unmapped pages for each).
    decoder: crate::cache::canonical::Decoder,
    /// The shared copies of the strings kept objects repeat: their keys' namespaces and names,
    /// Node labels, endpoint objects' labels.
    names: Interner,
    /// The objects held stale: a version over the object bound was refused, the last one
    /// accepted is served (docs/SEMANTICS.md §7).
    stale: Stale,
    /// `--max-object-bytes`, for log lines (`None`: not told).
    object_bound: Option<u64>,
    /// The facts of a Node other than the local one changed in the current change
    /// ([`Applied::facts_changed`]).
    facts_changed: bool,
}

/// Whether a publication is of an upstream change, which the relay view takes too, or of a
/// recomputation (topology, edge-health), which leaves it as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Relay {
    /// An upstream change: the relay view takes it too.
    Too,
    /// A recomputation: the relay view stays as it is.
    Not,
}

/// What one [`State::apply`] or [`State::set_edge_health`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Log entries appended (over all resources).
    pub events: usize,
    /// The cache became ready with this change.
    pub became_ready: bool,
    /// Every reflector has now listed from the upstream after a start from the snapshot.
    pub upstream_synced: bool,
    /// The facts of a Node other than the local one changed (no event: the readers' view does
    /// not hold it), which the snapshot carries.
    pub facts_changed: bool,
}

/// Whether `obj` is outside selector L. The reflectors already list+watch with L; this guard
/// keeps such objects out even from an upstream that ignores label selectors.
fn excluded(kind: Resource, obj: &Value) -> bool {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|l| excluding(kind).iter().any(|k| l.contains_key(*k)))
}

/// The labels that keep an object of `kind` out: [`EXCLUDING_LABELS`], none for the resources
/// cached whole (Nodes, ServiceCIDRs).
fn excluding(kind: Resource) -> &'static [&'static str] {
    if admission_filtered(kind) {
        &EXCLUDING_LABELS
    } else {
        &[]
    }
}

/// An upstream object as compact JSON (canonical: `Value` maps are sorted, so equal objects
/// give equal bytes).
/// Shared (`Arc`) so that a snapshot for the disk takes every object without copying it.
type Raw = Arc<[u8]>;

fn raw(obj: &Value) -> Raw {
    // Serializing a Value cannot fail (its keys are strings).
    serde_json::to_vec(obj).unwrap_or_default().into()
}

fn parse(raw: &Raw) -> Option<Value> {
    // Our own serialization always parses back.
    serde_json::from_slice(raw).ok()
}

/// Drops what is never served (upstream RV, managedFields), fills in `kind`/`apiVersion` (so
/// that a listed object compares equal to its served form) and reads the key.
/// [`canonical::item`] does the same for list items without a `Value`.
fn clean(kind: Resource, mut obj: Value) -> Option<(ObjectKey, Value)> {
    let key = ObjectKey::of(&obj)?;
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    if let Some(map) = obj.as_object_mut() {
        kind.fill_type_meta(map);
    }
    Some((key, obj))
}

impl State {
    /// An empty, not yet ready cache whose RVs start above `seed` (§6, "One counter").
    pub fn new(settings: Settings, seed: u64) -> State {
        let mut publisher = Publisher::new(seed, settings.retention);
        publisher.serve_only_node(&settings.hostname);
        State {
            settings,
            upstream: UpstreamObjects::default(),
            index: Index::default(),
            publisher,
            edge_health: EdgeHealth::default(),
            runtime: Runtime::default(),
            slice_kind: Resource::SlicesV1,
            slice_kind_pinned: false,
            cidr_kind: None,
            synced: BTreeSet::new(),
            ready: false,
            from_snapshot: false,
            decoder: Default::default(),
            names: Interner::default(),
            stale: Stale::default(),
            object_bound: None,
            facts_changed: false,
        }
    }

    /// Tells the cache `--max-object-bytes`, which its log lines about objects over it name.
    pub fn set_object_bound(&mut self, bytes: u64) {
        self.object_bound = Some(bytes);
    }

    /// The first `limit` objects held stale (a newer version over the object bound was
    /// refused; the last accepted one is served), and how many there are.
    pub fn stale_objects(&self, limit: usize) -> (Vec<StaleObject>, usize) {
        (self.stale.list(limit), self.stale.len())
    }

    /// Test-only: runs `hook` after each object recorded into the view, outside the view's
    /// lock (a test parks the writer mid-apply with it).
    #[cfg(test)]
    pub(crate) fn set_record_hook(&mut self, hook: Option<RecordHook>) {
        self.publisher.set_record_hook(hook);
    }

    /// Hands every version published from now on (in either view) over to `compaction`, to be
    /// brought to its held form off this thread ([`crate::cache::compaction`]). Call before the
    /// first change, a snapshot's restore included, so that nothing waits for its first
    /// protobuf read.
    pub fn compact_with(&mut self, compaction: crate::cache::compaction::Compaction) {
        self.publisher.compact_with(compaction);
    }

    /// Keeps a relay view from now on (`--relay-bind-address`): what followers read, the
    /// upstream's objects unpruned (docs/SEMANTICS.md §12). Call before the first change.
    pub fn keep_relay_view(&mut self) {
        self.publisher.keep_relay_view();
    }

    /// The relay view's handle, when [`State::keep_relay_view`] was called.
    pub fn relay_view(&self) -> Option<View> {
        self.publisher.relay_view()
    }

    /// The current resourceVersion (the last one handed out).
    pub fn current_rv(&self) -> u64 {
        self.publisher.rv()
    }

    /// Whether every reflector has listed once (or a snapshot was restored) and the filtered
    /// view is built.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// Whether the served view still comes (partly) from the on-disk snapshot: restored, and not
    /// every reflector has listed from the upstream since.
    pub fn serving_snapshot(&self) -> bool {
        self.from_snapshot
    }

    /// The served objects and event log of one resource, locked for as long as the returned
    /// reference lives (do not hold it across a call that changes the cache).
    pub fn collection(&self, res: Resource) -> CollectionRef<'_> {
        self.publisher.collection(res)
    }

    /// Nodes held (the local one served whole, the others as their facts), served Services,
    /// Endpoints, v1 EndpointSlices and v1 ServiceCIDRs (one lock, for log lines).
    pub fn served_counts(&self) -> [usize; 5] {
        let nodes = self.upstream.count(Resource::Nodes);
        let mut counts = self.with_view(|view| {
            [
                Resource::Nodes,
                Resource::Services,
                Resource::Endpoints,
                Resource::SlicesV1,
                Resource::CidrsV1,
            ]
            .map(|r| view.collection(r).len())
        });
        counts[0] = nodes;
        counts
    }

    /// Runs `f` on the locked served view (one lock for several collections).
    pub fn with_view<R>(&self, f: impl FnOnce(&Published) -> R) -> R {
        self.publisher.with_view(f)
    }

    /// The readers' handle on the served view (the event loop reads only through it).
    pub fn view(&self) -> View {
        self.publisher.view()
    }

    /// The figures the health listener reads as atomics, refreshed at the end
    /// of each change (see [`crate::cache::facts`]).
    pub fn shared_facts(&self) -> Arc<SharedFacts> {
        self.publisher.shared_facts()
    }

    /// The cache's figures now (one lock of the view; nothing allocated per object).
    pub fn facts(&self) -> Facts {
        self.publisher.facts(self.status())
    }

    /// The EndpointSlice version the upstream provides.
    pub fn slice_kind(&self) -> Resource {
        self.slice_kind
    }

    /// Pins the EndpointSlice version to mirror (startup discovery, or a later re-check that
    /// found a different one). From then on, changes of the other version are ignored — a
    /// reflector being replaced cannot mix versions — and the new version's first full list
    /// replaces every stored slice.
    pub fn expect_slices(&mut self, kind: Resource) {
        self.slice_kind = kind;
        self.slice_kind_pinned = true;
        self.publisher.relay_slices(kind);
    }

    /// What the facts say beside the view's counts.
    fn status(&self) -> Status {
        Status {
            ready: self.ready,
            serving_snapshot: self.from_snapshot,
            abnormal_nodes: self.abnormal_cached(),
            runtime_repairs: self.runtime.endpoints_repaired(),
            runtime_site_views: self.runtime.other_views(&self.settings.hostname),
            stale: self.stale.counts(),
        }
    }

    /// How many of the nodes edge-health resolved abnormal are cached Nodes (whole, or as
    /// facts: only the local one is served).
    fn abnormal_cached(&self) -> usize {
        let nodes = self.edge_health.abnormal().iter();
        nodes
            .filter(|n| {
                self.upstream
                    .contains(Resource::Nodes, &ObjectKey::new("", n))
            })
            .count()
    }

    /// The filter's inputs as they are now.
    fn filter(&self) -> TopologyInputs<'_> {
        TopologyInputs {
            settings: &self.settings,
            index: &self.index,
            upstream: &self.upstream,
            abnormal: self.edge_health.abnormal(),
            runtime: self.runtime.site(),
            slice_kind: self.slice_kind,
            stand_in: self.stand_in(),
        }
    }

    /// The served objects that stand in for upstream ones.
    fn stand_in(&self) -> StandIn<'_> {
        StandIn::new(&self.publisher, self.slice_kind)
    }

    /// The upstream object's compact JSON, wherever it is kept.
    fn upstream_bytes(&self, kind: Resource, key: &ObjectKey) -> Option<Raw> {
        self.upstream.bytes(kind, key, self.stand_in())
    }

    /// After a publication of `key`: its upstream bytes kept only if the served ones differ.
    fn settle(&mut self, kind: Resource, key: &ObjectKey) {
        let by = StandIn::new(&self.publisher, self.slice_kind);
        self.upstream.settle(kind, key, by);
    }

    /// Ends a change: old log entries dropped, the health listener's figures stored.
    fn end_change(&mut self, now: u64) {
        self.publisher.trim(now);
        self.publisher.publish_facts(self.status());
    }

    /// Ages every view's event logs at `now` (monotonic seconds, as for [`State::apply`]): the
    /// writer calls it between changes, every [`crate::cache::published::AGE_EVERY`], so that a
    /// log a burst of churn filled is emptied once the window passes although no change comes
    /// (docs/SEMANTICS.md). Spends no RV and logs no event.
    pub fn age(&mut self, now: u64) {
        self.publisher.age(now);
    }

    /// Applies one watch event's change, recomputes what it affects, and logs every change of
    /// served content with a new RV. `now` is monotonic seconds (for the log's time window).
    /// The change is prepared here, on the caller's thread, as the server prepares it on the
    /// reflector's ([`State::watch_preparer`]); what `grid-wrapper check`, the tests and the
    /// benches apply.
    pub fn apply(&mut self, kind: Resource, change: Change, now: u64) -> Applied {
        match self.watch_preparer().prepare(kind, change) {
            Some(prepared) => self.apply_prepared(kind, prepared, now),
            None => Applied::default(),
        }
    }

    /// A preparer of watch events: without a relay view, every Node but the local one is
    /// reduced to its facts before it reaches the writer, as a list's are
    /// ([`State::list_preparer`]); a relay serves its followers their own Nodes, whole.
    pub fn watch_preparer(&self) -> WatchPreparer {
        WatchPreparer::new(self.watch_preparer_except().as_deref())
    }

    /// The Node a [`State::watch_preparer`] keeps whole besides every other's facts (the local
    /// one), `None` with a relay view (every Node whole).
    pub fn watch_preparer_except(&self) -> Option<String> {
        (!self.publisher.relays()).then(|| self.settings.hostname.clone())
    }

    /// Applies a full list of `kind` given as its items' JSON texts, taken as the server takes a
    /// reflector's list: each text pushed through [`State::list_preparer`]'s [`ListPreparer`],
    /// the prepared list applied ([`State::apply_prepared`]), here on the caller's thread. What
    /// `grid-wrapper check`, the tests and the benches apply.
    pub fn apply_list<T: AsRef<str>>(
        &mut self,
        kind: Resource,
        texts: impl IntoIterator<Item = T>,
        now: u64,
    ) -> Applied {
        let mut list = self.list_preparer(kind);
        texts.into_iter().for_each(|text| list.push(text.as_ref()));
        self.apply_prepared(kind, list.finish(), now)
    }

    /// Applies a change already prepared on the reflector's thread: a list
    /// ([`ListPreparer::finish`]) or a watch event ([`WatchPreparer::prepare`]).
    pub fn apply_prepared(&mut self, kind: Resource, change: Prepared, now: u64) -> Applied {
        let before = self.current_rv();
        if matches!(kind, Resource::SlicesV1 | Resource::SlicesV1beta1) && kind != self.slice_kind {
            if self.slice_kind_pinned {
                debug!(
                    "ignoring a {kind:?} change: mirroring {:?}",
                    self.slice_kind
                );
                return Applied::default();
            }
            // Unpinned: the upstream switched versions; its full list replaces every slice.
            self.slice_kind = kind;
            self.publisher.relay_slices(kind);
        }
        if kind.is_cidr() && Some(kind) != self.cidr_kind {
            debug!("ignoring a {kind:?} change: mirroring {:?}", self.cidr_kind);
            return Applied::default();
        }
        let listed = matches!(change, Prepared::Listed(_));
        match change {
            Prepared::Upserted(key, item) => self.apply_item(kind, key, item, now),
            Prepared::Left(key) => {
                // An object that gained an excluding label left the view: a deletion.
                self.unstale(kind, &key);
                self.delete(kind, &key, now);
            }
            Prepared::Deleted(key) => self.delete(kind, &key, now),
            Prepared::Listed(fresh) => self.replace(kind, fresh, now),
        }
        self.flush_derived(now);
        let mut applied = Applied {
            events: (self.current_rv() - before) as usize,
            facts_changed: std::mem::take(&mut self.facts_changed),
            ..Applied::default()
        };
        if listed {
            self.index.compact();
        }
        if listed && kind.is_cidr() && !self.publisher.serves_cidrs() {
            self.publisher.start_cidrs();
        }
        if listed && self.synced.insert(kind.sync_slot()) {
            self.check_synced(&mut applied);
        }
        self.end_change(now);
        applied
    }

    /// Whether every first list the sync waits for is in: Nodes, Services, Endpoints, the
    /// slices, and the ServiceCIDRs when the upstream has them.
    fn synced_all(&self) -> bool {
        (0..=3).all(|slot| self.synced.contains(&slot))
            && (self.cidr_kind.is_none() || self.synced.contains(&4))
    }

    /// Once every first list is in: ready (a first start), or synced with the upstream (after
    /// a start from the snapshot). Each happens once.
    fn check_synced(&mut self, applied: &mut Applied) {
        if !self.synced_all() {
            return;
        }
        if self.from_snapshot {
            // Ready since the restore; the history (and open watches) carry on.
            self.from_snapshot = false;
            applied.upstream_synced = true;
        } else if !self.ready {
            self.ready = true;
            applied.became_ready = true;
            self.publisher.set_ready();
        }
    }

    /// The ServiceCIDR version the upstream has, or `None` when it has none (older than 1.33):
    /// startup detection, or a later re-check that found otherwise (docs/SEMANTICS.md §5.1).
    /// Changes of any other version are ignored from then on; the sync waits for the first
    /// list of `Some` version only. ServiceCIDRs already served stay served (and their
    /// history): when the upstream no longer has them, the last ones it listed are kept.
    pub fn expect_cidrs(&mut self, kind: Option<Resource>, now: u64) -> Applied {
        let kind = kind.filter(|k| k.is_cidr());
        if kind == self.cidr_kind {
            return Applied::default();
        }
        self.cidr_kind = kind;
        self.synced.remove(&Resource::CidrsV1.sync_slot());
        let mut applied = Applied::default();
        self.check_synced(&mut applied);
        self.end_change(now);
        applied
    }

    /// The ServiceCIDR version mirrored (see [`State::expect_cidrs`]).
    pub fn cidr_kind(&self) -> Option<Resource> {
        self.cidr_kind
    }

    /// Whether ServiceCIDRs are served from the cache: their first list (or a snapshot holding
    /// them) came; until then a request for them is proxied.
    pub fn serves_cidrs(&self) -> bool {
        self.publisher.serves_cidrs()
    }

    /// A full list: objects gone from it are deleted, the others upserted.
    fn replace(&mut self, kind: Resource, fresh: BTreeMap<ObjectKey, Listed>, now: u64) {
        let gone: Vec<ObjectKey> = self
            .upstream
            .keys(kind)
            .into_iter()
            .filter(|k| !fresh.contains_key(k))
            .collect();
        for key in gone {
            self.delete(kind, &key, now);
        }
        for (key, listed) in fresh {
            self.apply_item(kind, key, listed, now);
        }
    }

    /// Applies one prepared object, a list's item or a watch event's (the one body both take,
    /// so that a watched object and the same object listed are stored and served alike): an
    /// item over the object bound keeps the version held (stale); an unchanged one is left as
    /// it is (compared on its bytes, packed to packed where it can be); a changed endpoint
    /// object is served as it came where it can be, without a `Value`; any other is decoded
    /// from its canonical bytes and upserted.
    fn apply_item(&mut self, kind: Resource, key: ObjectKey, listed: Listed, now: u64) {
        if let Some(bytes) = listed.too_large() {
            self.refused_version(kind, &key, bytes);
            return;
        }
        self.unstale(kind, &key);
        if self
            .upstream
            .same_listed(kind, &key, &listed, self.stand_in())
        {
            return; // unchanged: no need to decode it again
        }
        let Some(bytes) = listed.whole() else {
            log::warn!("{kind:?} {key}: prepared bytes that do not unpack; skipped");
            return;
        };
        // Kept: its key shares its strings with the other objects' (a new object's key is the
        // one every map and index of the cache keeps).
        let key = self.names.key(&key);
        if let Some(facts) = listed.as_is {
            if self.upsert_as_is(kind, &key, &bytes, facts, Relay::Too, now) {
                return; // served as it came: published without decoding it
            }
        }
        if let Some(obj) = parse(&bytes) {
            self.upsert_raw(kind, key, obj, bytes, now);
        }
    }

    /// How a list of `kind` is best prepared: [`Hold::Whole`] while the store holds none of its
    /// objects (a first list, every object of which is published), else [`Hold::PackedOnly`].
    pub fn hold_for(&self, kind: Resource) -> Hold {
        if self.upstream.holds_any(kind) {
            Hold::PackedOnly
        } else {
            Hold::Whole
        }
    }

    /// A taker for a list of `kind`, prepared as [`State::hold_for`] says. A first list packs
    /// only the objects of the Services with topology keys: only a pruned object keeps its
    /// upstream bytes; those of any other are served as they came and a packed copy would be
    /// dropped unused (one whose Service comes later is packed then, `pack_pending`).
    /// Without a relay view, a list of Nodes keeps only the facts of every Node but the local
    /// one (`store/node_facts.rs`); a relay serves its followers their own Nodes, whole.
    pub fn list_preparer(&self, kind: Resource) -> ListPreparer {
        let mut list = ListPreparer::new(kind, self.hold_for(kind));
        if kind == Resource::Nodes && !self.publisher.relays() {
            list = list.facts_only_except(&self.settings.hostname);
        }
        match list.hold() {
            Hold::Whole => {
                list.packing_only_for(self.index.service_keys().keys().cloned().collect())
            }
            Hold::PackedOnly => list,
        }
    }

    /// Upserts a changed object, decoded from its canonical bytes `bytes` ([`State::apply_item`]).
    fn upsert_raw(&mut self, kind: Resource, key: ObjectKey, obj: Value, bytes: Raw, now: u64) {
        let bytes = Stored::Own(bytes);
        match kind {
            Resource::Nodes if !self.is_local(&key) => {
                return self.upsert_node_facts(&key, obj, now);
            }
            Resource::Nodes => {
                self.edge_health.node_changed(&key.name, Some(&obj));
                let labels = LabelSet::of_interned(&obj, &mut self.names);
                self.index
                    .set_node(&key.name, labels, &self.settings.hostname);
                self.upstream.insert(kind, &key, bytes);
                self.publisher
                    .publish(Resource::Nodes, &key, Some(obj), now);
            }
            Resource::Services => {
                let keys = topology::service_keys_logged(&key, &obj);
                let is_new = !self.upstream.contains(kind, &key);
                self.index.set_service(&key, keys, is_new);
                self.upstream.insert(kind, &key, bytes);
                self.publisher
                    .publish(Resource::Services, &key, Some(obj), now);
            }
            Resource::Endpoints => {
                let relayed = self.publisher.relays().then(|| obj.clone());
                self.keep_endpoint_object(kind, &key, bytes, topology::endpoint_nodes(&obj), None);
                let (served, repaired) = self.filter().serve_endpoints(&key, obj);
                self.publisher
                    .publish(Resource::Endpoints, &key, Some(served), now);
                self.runtime.note(Resource::Endpoints, &key, repaired);
                self.relay_value(kind, &key, relayed, now);
            }
            Resource::SlicesV1 | Resource::SlicesV1beta1 => {
                let (nodes, service) = (
                    topology::endpoint_nodes(&obj),
                    topology::slice_service(&obj),
                );
                let dynamic = self
                    .filter()
                    .keys_of(service.as_ref())
                    .is_some_and(|k| k.dynamic());
                self.keep_endpoint_object(kind, &key, bytes, nodes, service);
                let relayed = self.publisher.relays().then(|| obj.clone());
                if dynamic {
                    // §2.9: published once every slice of this change is in (`flush_derived`).
                    self.index.defer(&key);
                    self.relay_value(kind, &key, relayed, now);
                    return;
                }
                self.publish_slice(&key, obj, now);
                self.relay_value(kind, &key, relayed, now);
            }
            Resource::CidrsV1 | Resource::CidrsV1beta1 => {
                self.upstream.insert(kind, &key, bytes);
                self.publish_cidr(&key, Some(obj), now);
            }
        }
        self.settle(kind, &key);
    }

    /// Whether `key` is the local Node's (`--hostname`): the one Node the readers' view holds
    /// whole.
    fn is_local(&self, key: &ObjectKey) -> bool {
        *key.name == *self.settings.hostname
    }

    /// Upserts a Node other than the local one, `node` as the upstream has it (or its facts
    /// already, a list prepared without a relay view): only its facts are kept
    /// (`store/node_facts.rs`), compared with the ones kept before; a change outside them (a
    /// status heartbeat, its images) is no work beyond that comparison, and no event on the
    /// readers' view, which does not hold it. The relay view takes it whole.
    fn upsert_node_facts(&mut self, key: &ObjectKey, node: Value, now: u64) {
        let facts = node_facts::reduce(&node);
        let bytes = raw(&facts);
        if !self
            .upstream
            .same(Resource::Nodes, key, &bytes, self.stand_in())
        {
            self.edge_health.node_changed(&key.name, Some(&facts));
            self.index.set_node(
                &key.name,
                LabelSet::of_interned(&facts, &mut self.names),
                &self.settings.hostname,
            );
            self.upstream
                .insert(Resource::Nodes, key, Stored::Own(bytes));
            self.facts_changed = true;
        }
        let whole = self.publisher.relays().then_some(node);
        self.relay_value(Resource::Nodes, key, whole, now);
    }

    /// Publishes a ServiceCIDR in both served versions (`None`: its deletion): the versions
    /// differ only in `apiVersion`, so either is the upstream object as it came. v1 first (the
    /// order RVs are drawn in).
    fn publish_cidr(&mut self, key: &ObjectKey, obj: Option<Value>, now: u64) {
        self.publisher
            .publish(Resource::CidrsV1, key, obj.clone(), now);
        self.publisher
            .publish(Resource::CidrsV1beta1, key, obj, now);
    }

    /// Keeps an endpoint object's upstream bytes and indexes it: the nodes its endpoints are
    /// on, and a slice's Service.
    fn keep_endpoint_object(
        &mut self,
        kind: Resource,
        key: &ObjectKey,
        bytes: Stored,
        nodes: BTreeSet<String>,
        service: Option<ObjectKey>,
    ) {
        if kind == Resource::Endpoints {
            self.upstream.insert(kind, key, bytes);
            self.index
                .index_nodes(Target::Endpoints(key.clone()), nodes);
        } else {
            self.index.index_slice(key, service);
            self.index.index_nodes(Target::Slice(key.clone()), nodes);
            self.upstream.insert(kind, key, bytes);
        }
    }

    fn delete(&mut self, kind: Resource, key: &ObjectKey, now: u64) {
        self.stale.clear(kind, key);
        if !self.upstream.remove(kind, key) {
            return;
        }
        match kind {
            Resource::Nodes => {
                self.index.remove_node(&key.name, &self.settings.hostname);
                self.edge_health.node_changed(&key.name, None);
                if self.is_local(key) {
                    // Out of both views.
                    self.publisher.publish(Resource::Nodes, key, None, now);
                } else {
                    self.facts_changed = true;
                    self.relay_value(kind, key, None, now);
                }
            }
            Resource::Services => {
                self.index.remove_service(key);
                self.publisher.publish(Resource::Services, key, None, now);
            }
            Resource::Endpoints => {
                self.index
                    .index_nodes(Target::Endpoints(key.clone()), BTreeSet::new());
                self.publisher.publish(Resource::Endpoints, key, None, now);
                self.runtime
                    .note(Resource::Endpoints, key, Outcome::default());
                self.relay_value(kind, key, None, now);
            }
            Resource::SlicesV1 | Resource::SlicesV1beta1 => {
                self.index.index_slice(key, None);
                self.index
                    .index_nodes(Target::Slice(key.clone()), BTreeSet::new());
                self.publisher.publish(Resource::SlicesV1, key, None, now);
                self.runtime
                    .note(Resource::SlicesV1, key, Outcome::default());
                if self.publisher.serves_v1beta1() {
                    self.publisher
                        .publish(Resource::SlicesV1beta1, key, None, now);
                }
                self.relay_value(kind, key, None, now);
            }
            Resource::CidrsV1 | Resource::CidrsV1beta1 => self.publish_cidr(key, None, now),
        }
    }

    /// A version of `key` of `bytes`, over the object bound, was not taken: an object the cache
    /// holds stays served as last accepted (stale: same RV, no event); a new one is left out.
    /// One WARN per stale episode (and per new object), naming what is served.
    fn refused_version(&mut self, kind: Resource, key: &ObjectKey, bytes: u64) {
        let bound = self
            .object_bound
            .map_or_else(String::new, |b| format!("={b}"));
        let what = kind.kind();
        if !self.upstream.contains(kind, key) {
            let text = format!(
                "{what} {key}: a new upstream object of {bytes} bytes, over --max-object-bytes{bound}: skipped, it is not served"
            );
            if self.stale.warn_new(kind, key) {
                warn!("{text}");
            } else {
                debug!("{text}");
            }
            return;
        }
        let res = match kind {
            Resource::SlicesV1beta1 => Resource::SlicesV1,
            other => other,
        };
        let served_rv = self.collection(res).get(key).map_or(0, |s| s.rv);
        let mark = StaleMark { bytes, served_rv };
        let kept = if kind == Resource::Nodes && !self.is_local(key) {
            // Not served here: only its facts are held (docs/SEMANTICS.md §1.1).
            "keeps the facts of its last accepted version (name, labels, addresses)".to_string()
        } else {
            format!("keeps serving its last accepted version, of resourceVersion {served_rv}")
        };
        let text = format!(
            "{what} {key}: its new upstream version of {bytes} bytes is over --max-object-bytes{bound}: {kept} (stale), until a version within the bound or its deletion comes"
        );
        match self.stale.refused(kind, key, mark) {
            StaleWarning::Opened => warn!("{text}"),
            StaleWarning::Continues => debug!("{text}"),
        }
    }

    /// A version of `key` within the bound came (or it is deleted): it is no longer stale.
    fn unstale(&mut self, kind: Resource, key: &ObjectKey) {
        if let Some(mark) = self.stale.clear(kind, key) {
            info!(
                "{} {key}: a version within --max-object-bytes came: no longer stale (was served at resourceVersion {})",
                kind.kind(),
                mark.served_rv
            );
        }
    }

    /// The relay view's side of an upstream change of an endpoint object of `kind` (the version
    /// the upstream has), or of a Node other than the local one, given as its cleaned upstream `Value` (`None`: deleted); nothing
    /// without a relay view.
    fn relay_value(&mut self, kind: Resource, key: &ObjectKey, obj: Option<Value>, now: u64) {
        if !self.publisher.relays() {
            return;
        }
        let make = obj.map(|obj| {
            move |rv: u64| {
                let mut value = obj.clone();
                let bytes = publisher::finish(kind, &mut value, rv);
                Served::with_bytes(key.clone(), rv, &value, bytes)
            }
        });
        self.publisher.publish_relay(kind, key, make, now);
    }

    /// Publishes the served versions of a slice (a change reaches the v1 stream, and the
    /// v1beta1 stream once v1beta1 is served).
    fn publish_slice(&mut self, key: &ObjectKey, obj: Value, now: u64) {
        // v1 first (the order RVs are drawn in); a copy only while v1beta1 is served too.
        let beta = self.publisher.serves_v1beta1().then(|| obj.clone());
        let (served, repaired) = self.filter().serve_slice(key, obj, Resource::SlicesV1);
        self.publisher
            .publish(Resource::SlicesV1, key, Some(served), now);
        self.runtime.note(Resource::SlicesV1, key, repaired);
        if let Some(obj) = beta {
            let (served, _) = self.filter().serve_slice(key, obj, Resource::SlicesV1beta1);
            self.publisher
                .publish(Resource::SlicesV1beta1, key, Some(served), now);
        }
    }

    /// Recomputes the endpoint objects that the changes of this `apply` affect, in key order.
    fn flush_derived(&mut self, now: u64) {
        let upstream = &self.upstream;
        let mut targets = self
            .index
            .take_dirty(|svc| upstream.contains(Resource::Endpoints, svc));
        // Edge-health changes affect objects of every class (not only topology Services).
        for node in self.edge_health.take_dirty() {
            targets.extend(self.index.on_node(&node).cloned());
        }
        // A new runtime view of a node (§13) can change any object with an endpoint on it.
        for node in self.runtime.take_dirty() {
            targets.extend(self.index.on_node(&node).cloned());
        }
        // The slices this change put in, deferred (§2.9), are its own events: published first.
        let deferred = self.index.take_deferred();
        self.recheck_slice_decisions(&mut targets);
        targets.retain(|t| !deferred.contains(t));
        if targets.is_empty() && deferred.is_empty() {
            return;
        }
        debug!("recomputing {} endpoint objects", targets.len());
        for target in deferred.into_iter().chain(targets) {
            let (kind, key) = match target {
                Target::Endpoints(key) => (Resource::Endpoints, key),
                Target::Slice(key) => (self.slice_kind, key),
            };
            if self.recompute_as_is(kind, &key, now) {
                continue; // filtered on its bytes
            }
            let Some(obj) = self.upstream.value(kind, &key, self.stand_in()) else {
                continue;
            };
            let by = StandIn::new(&self.publisher, self.slice_kind);
            self.upstream.materialize(kind, &key, by);
            if kind == Resource::Endpoints {
                let (served, repaired) = self.filter().serve_endpoints(&key, obj);
                self.publisher
                    .publish(Resource::Endpoints, &key, Some(served), now);
                self.runtime.note(Resource::Endpoints, &key, repaired);
            } else {
                self.publish_slice(&key, obj, now);
            }
            self.settle(kind, &key);
        }
    }

    /// §2.9: the slices of a Service with dynamic keys share one decision, taken over all of
    /// them, so a change of one slice (or of a node under one) can change what its siblings
    /// serve. Each Service touched by this change, or owning a slice in `targets`, has its
    /// decision taken again; when it flipped, all its slices join `targets` (those whose served
    /// content does not change get no event).
    fn recheck_slice_decisions(&mut self, targets: &mut BTreeSet<Target>) {
        let mut services = self.index.take_touched();
        services.extend(targets.iter().filter_map(|t| match t {
            Target::Slice(k) => self.index.owner_of(k).cloned(),
            Target::Endpoints(_) => None,
        }));
        for svc in services {
            let filter = self.filter();
            let choice = filter
                .keys_of(Some(&svc))
                .filter(|k| k.dynamic())
                .map(|k| filter.choose(&svc, k, EndpointScope::Slices));
            let name = choice.as_ref().map(|c| c.decision.name());
            let why = choice.map(|c| c.describe());
            let Some(previous) = self.index.set_slice_decision(&svc, name) else {
                continue;
            };
            if let (Some(_), Some(why)) = (previous, why) {
                // A switch an operator wants to see (a unit lost or got back its last ready
                // endpoint); a first decision or keys that stopped being dynamic are not one.
                info!("service {svc}: EndpointSlices switch: {why}");
            }
            let slices = self.index.slices_of(&svc).iter().cloned();
            targets.extend(slices.map(Target::Slice));
        }
    }

    /// Applies edge-health's latest answer (`map`; empty after a failed poll, which keeps every
    /// endpoint again): resolves the abnormal nodes, and recomputes the endpoint objects with
    /// an endpoint on a node whose status changed, logging every change of served content with
    /// a new RV exactly as [`State::apply`] does. The same map again, or one resolving to the
    /// same nodes, changes nothing. Logs the new set at INFO when it changes.
    pub fn set_edge_health(&mut self, map: EdgeHealthMap, now: u64) -> Applied {
        if !self.edge_health.set_map(map) {
            return Applied::default();
        }
        self.recompute_owed(now)
    }

    /// Recomputes the endpoint objects a change of an input beside the upstream's (edge-health,
    /// the runtime) left owed, and ends the change; its events counted.
    fn recompute_owed(&mut self, now: u64) -> Applied {
        let before = self.current_rv();
        self.flush_derived(now);
        self.end_change(now);
        Applied {
            events: (self.current_rv() - before) as usize,
            ..Applied::default()
        }
    }

    /// Applies the container runtime's latest view of the local pods (§13): recomputes the
    /// endpoint objects with an endpoint on this node, each change of served content a new RV
    /// and event exactly as [`State::apply`] makes them. The same view again changes nothing.
    pub fn set_runtime_pods(&mut self, pods: RuntimePods, now: u64) -> Applied {
        if !self.runtime.set(&self.settings.hostname, pods) {
            return Applied::default();
        }
        self.site_changed(now)
    }

    /// Takes another node's report of its pods (§13.1: received on the relay port, its sender
    /// checked there): recomputes that node's endpoint objects as [`State::set_runtime_pods`]
    /// does the local node's. A report of the local node changes nothing.
    pub fn take_node_report(&mut self, report: NodeReport, now: u64) -> Applied {
        if !self.runtime.report(&self.settings.hostname, report, now) {
            return Applied::default();
        }
        self.site_changed(now)
    }

    /// Takes the relays' answer to this follower's report (§13.1): every node's view they hold.
    pub fn take_relayed_reports(&mut self, reports: Vec<NodeReport>, now: u64) -> Applied {
        if !self.runtime.relayed(&self.settings.hostname, reports, now) {
            return Applied::default();
        }
        self.site_changed(now)
    }

    /// Drops the other nodes' views whose time is up (§13.1); the writer calls it as it ages
    /// the logs.
    pub fn expire_node_reports(&mut self, now: u64) -> Applied {
        if !self.runtime.expire(now) {
            return Applied::default();
        }
        self.site_changed(now)
    }

    /// A node's runtime view changed: its endpoint objects are recomputed, and with a relay view
    /// the site's views it answers its followers with are published again.
    fn site_changed(&mut self, now: u64) -> Applied {
        if self.publisher.relays() {
            let bytes = self.runtime.answer(now, OWN_VIEW_VALID_FOR);
            self.publisher
                .publish_site(self.runtime.generation(), bytes);
        }
        self.recompute_owed(now)
    }

    /// The nodes whose endpoints the edge-health filter currently drops (names, and keys
    /// reported abnormal that name no cached node).
    pub fn abnormal_nodes(&self) -> &BTreeSet<String> {
        self.edge_health.abnormal()
    }

    /// Packs up to `max` of the upstream bytes kept for pruned objects since the last call;
    /// returns how many are left (see `store/upstream.rs`). The writer calls it after each
    /// change is applied and served, a batch per lock.
    pub fn pack_pending(&mut self, max: usize) -> usize {
        self.upstream.pack_pending(max)
    }

    /// Copies what [`ExplainInput::overview`] needs for the first `limit` topology Services.
    pub fn overview_input(&self, limit: usize) -> ExplainInput {
        let keys: Vec<ObjectKey> = self
            .index
            .service_keys()
            .keys()
            .take(limit)
            .cloned()
            .collect();
        ExplainInput::gather(&self.filter(), &self.publisher, keys)
    }

    /// Copies what [`ExplainInput::explain`] needs for `service`; `None` when the cache holds
    /// neither the Service nor an Endpoints object or slice of it.
    pub fn explain_input(&self, service: &ObjectKey) -> Option<ExplainInput> {
        let known = self.upstream.contains(Resource::Services, service)
            || self.upstream.contains(Resource::Endpoints, service)
            || !self.index.slices_of(service).is_empty();
        known.then(|| ExplainInput::gather(&self.filter(), &self.publisher, vec![service.clone()]))
    }

    /// The overview, computed under the caller's borrow (tests; the server copies first).
    pub fn topology_overview(&self, limit: usize) -> Overview {
        self.overview_input(limit).overview()
    }

    /// One Service explained under the caller's borrow (tests; the server copies first).
    pub fn explain_service(&self, service: &ObjectKey, rows: usize) -> Option<ServiceExplanation> {
        self.explain_input(service).map(|i| i.explain(rows))
    }
}

// ---- publication on the bytes (a listed object served as it came, or pruned by cutting bytes) ----
// Publication without a `Value` for an endpoint object of a listed list: no node is reported
// abnormal (docs/SEMANTICS.md §10) and it is not `default/kubernetes` (§3). If its Service has no
// topology keys, its served bytes are its upstream bytes with the resourceVersion stamp spliced
// into `metadata`; a topology Service's v1 slice has its pruned endpoints cut out of those bytes
// first (§2.3; the kept ones as they are, `hints` included, §2.10), and its Endpoints their
// pruned addresses and the lists left empty (§2.4). What the indexes, the filter and the view
// need (its nodes, each endpoint's node and place, its Service, its labels) was read on the
// reflector's thread when the list item was made canonical ([`AsIs`]). That is the common case
// for a list's slices, which otherwise are decoded into a `Value` again by the writer, filtered
// and serialized again. The Services with a fallback or the ordered mode (§2.9) take the `Value`
// path: their decision reads all their slices. In debug builds
// every publication through here is checked against the `Value` path.
//
// One of the binder's routes: an `impl` of [`State`] that takes an object through the parts
// (kept by [`super::upstream`], indexed by [`super::index`], published by [`super::publisher`]).

impl State {
    /// Upserts a listed endpoint object without a `Value` when it is served as it came;
    /// `false` (nothing done) when it is not, or its bytes need the `Value` path.
    pub(super) fn upsert_as_is(
        &mut self,
        kind: Resource,
        key: &ObjectKey,
        bytes: &Raw,
        mut facts: AsIs,
        relay: Relay,
        now: u64,
    ) -> bool {
        let res = match kind {
            Resource::Endpoints => kind,
            Resource::SlicesV1 if self.slice_kind == kind && !self.publisher.serves_v1beta1() => {
                kind
            }
            _ => return false,
        };
        if topology::may_rewrite(key, &self.filter().locality())
            || !self.abnormal_nodes().is_empty()
            || self.runtime.may_repair(facts.nodes.iter())
        {
            return false;
        }
        let service = match kind {
            Resource::Endpoints => Some(key),
            _ => facts.service.as_ref(),
        };
        // A topology Service's v1 slice or Endpoints: which endpoints (addresses) stay (§2.3;
        // no §10 here: no node is abnormal), decided now; the others are left out of the
        // bytes below, without a `Value`.
        let filter = self.filter();
        if filter.keys_of(service).is_some_and(|k| k.dynamic()) {
            // §2.9: decided over the Service's endpoints, on the `Value` path.
            return false;
        }
        let keep: Option<Vec<bool>> = match filter.class_of(service, EndpointScope::Slices) {
            Class::Topology(decision) => {
                let loc = filter.locality();
                let kept =
                    |node: Option<&str>| topology::verdict(node, Some(decision), false, &loc).kept;
                let Some(keep) = facts.keep_by(bytes, kept) else {
                    return false;
                };
                Some(keep)
            }
            Class::Normal | Class::Dangling => None,
        };
        // The stamp's place is checked before anything changes (it cannot be off in bytes this
        // process made; this only keeps a wrong splice from ever being served).
        if facts.stamp_at > bytes.len() {
            return false;
        }
        #[cfg(debug_assertions)]
        facts.check(bytes).expect("the fast path's contract");
        let nodes = std::mem::take(&mut facts.nodes);
        // Kept by the served objects: the shared copies of strings that repeat.
        facts.labels = facts.labels.interned(&mut self.names);
        facts.service = facts.service.map(|s| self.names.key(&s));
        // A pruned object keeps its upstream bytes: packed on the reflector's thread when the list was
        // decoded, if they were.
        let stored = match (&keep, facts.packed.take()) {
            (Some(_), Some(packed)) => Stored::Packed(packed),
            _ => Stored::Own(bytes.clone()),
        };
        self.keep_endpoint_object(kind, key, stored, nodes, facts.service.clone());
        #[cfg(debug_assertions)]
        if let Some(keep) = &keep {
            self.check_pruned(res, key, bytes, &facts, keep);
        }
        let make = |rv: u64| {
            let served = match &keep {
                Some(keep) => facts.pruned(bytes, keep, rv),
                None => facts.stamped(bytes, rv),
            };
            Served::from_parts(
                key.clone(),
                rv,
                served.unwrap_or_default(),
                facts.labels.clone(),
            )
        };
        self.publisher.publish_with(res, key, Some(make), now);
        self.runtime.note(res, key, Outcome::default());
        if relay == Relay::Too {
            let whole = |rv: u64| {
                let stamped = facts.stamped(bytes, rv).unwrap_or_default();
                Served::from_parts(key.clone(), rv, stamped, facts.labels.clone())
            };
            self.publisher.publish_relay(kind, key, Some(whole), now);
        }
        self.settle(kind, key);
        true
    }

    /// Recomputes a stored v1 slice or Endpoints object (a local-node relabel, a Service's keys
    /// changed) through [`State::upsert_as_is`]: its stored bytes are canonical, so reading them
    /// again as a list item gives the same bytes and the facts. `false` (nothing done) when it
    /// must take the `Value` path.
    pub(super) fn recompute_as_is(&mut self, kind: Resource, key: &ObjectKey, now: u64) -> bool {
        if !matches!(kind, Resource::SlicesV1 | Resource::Endpoints) {
            return false;
        }
        let Some(bytes) = self.upstream_bytes(kind, key) else {
            return false;
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return false;
        };
        let read = self.decoder.item(text, kind, &[]);
        self.decoder.shrink();
        match read {
            Ok(Item::Kept(k, same, Some(mut facts))) if k == *key && same[..] == bytes[..] => {
                // The upstream object did not change: if it stays pruned, its packed copy
                // stays too (a relabel of the local node recomputes every topology object).
                if let Some(Stored::Packed(packed)) = self.upstream.get(kind, key) {
                    facts.packed = Some(packed.clone());
                }
                self.upsert_as_is(kind, key, &bytes, facts, Relay::Not, now)
            }
            _ => false,
        }
    }

    /// Debug builds: the pruned bytes are what the `Value` path serves (`serve_slice`,
    /// `serve_endpoints`).
    #[cfg(debug_assertions)]
    fn check_pruned(
        &self,
        res: Resource,
        key: &ObjectKey,
        bytes: &Raw,
        facts: &AsIs,
        keep: &[bool],
    ) {
        let value = parse(bytes).expect("bytes this process made");
        let mut want = match res {
            Resource::Endpoints => self.filter().serve_endpoints(key, value).0,
            _ => self.filter().serve_slice(key, value, res).0,
        };
        let want = publisher::finish(res, &mut want, 1234);
        assert_eq!(
            facts.pruned(bytes, keep, 1234).as_deref(),
            Some(&want[..]),
            "a topology {res:?} object pruned on its bytes is what the Value path serves"
        );
    }
}

// ---- the snapshot: export and restore ----
// The cache's side of `--cache-dir`: taking its upstream objects for a snapshot, and serving a
// snapshot's objects after a restart. Pure (the disk is `crate::persist`'s). One of the binder's
// routes: an `impl` of [`State`] over the parts ([`super::upstream`] exports, a restore goes
// through the same path as a first list).

impl State {
    /// Every cached upstream object, shared (its bytes, its packed bytes, or its served
    /// object): taken by the writer (pointer copies), made whole (a served object's JSON read,
    /// decoded if only its protobuf form is kept) and written by the snapshot writer.
    pub fn export(&self) -> Objects<Exported> {
        // A relay's snapshot holds every Node whole (its followers' own), from the relay view;
        // any other node's holds the local Node whole and the others' facts.
        let nodes = match self.publisher.relay_blobs(Resource::Nodes) {
            Some(whole) => whole.into_iter().map(Exported::served).collect(),
            None => self.upstream.blobs(Resource::Nodes, self.stand_in()),
        };
        Objects {
            nodes,
            services: self.upstream.blobs(Resource::Services, self.stand_in()),
            endpoints: self.upstream.blobs(Resource::Endpoints, self.stand_in()),
            slices: self.upstream.blobs(self.slice_kind, self.stand_in()),
            // Only while the upstream has them (the ones kept after it lost them are not).
            cidrs: self
                .cidr_kind
                .map_or_else(Vec::new, |kind| self.upstream.blobs(kind, self.stand_in())),
        }
    }

    /// Serves a snapshot's objects at once: the cache becomes ready, with every object stamped
    /// by this process's RVs, and stays marked as serving the snapshot until every reflector has
    /// listed from the upstream (whose lists are then diffed against it, as any relist is).
    /// Its ServiceCIDRs are restored (and served) as the version [`State::expect_cidrs`] set
    /// before: the snapshot's. Only for a fresh cache (nothing applied yet); returns whether it
    /// restored.
    pub fn restore(&mut self, objects: Objects, slice_kind: Resource, now: u64) -> bool {
        if self.ready || !self.synced.is_empty() || self.upstream.holds_any(Resource::Nodes) {
            warn!("not restoring the snapshot: the cache already holds upstream data");
            return false;
        }
        if matches!(slice_kind, Resource::SlicesV1 | Resource::SlicesV1beta1) {
            self.slice_kind = slice_kind;
            self.publisher.relay_slices(slice_kind);
        }
        let slices = self.slice_kind;
        let cidrs = match self.cidr_kind {
            Some(kind) => Some((kind, objects.cidrs)),
            None if !objects.cidrs.is_empty() => {
                warn!("the snapshot's ServiceCIDRs are of no known version: not restored");
                None
            }
            None => None,
        };
        for (kind, items) in [
            (Resource::Nodes, objects.nodes),
            (Resource::Services, objects.services),
            (Resource::Endpoints, objects.endpoints),
            (slices, objects.slices),
        ]
        .into_iter()
        .chain(cidrs)
        {
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
        let _ = self.edge_health.take_dirty();
        // The slices of Services with dynamic keys (§2.9) were deferred: served now.
        self.flush_derived(now);
        if self.cidr_kind.is_some() {
            self.publisher.start_cidrs();
        }
        self.ready = true;
        self.from_snapshot = true;
        self.publisher.set_ready();
        self.publisher.publish_facts(self.status());
        true
    }
}

// ---- v1beta1 EndpointSlices on demand ----
// v1beta1 EndpointSlices on demand. kube-proxy ≥ 1.21 lists and watches only
// `discovery.k8s.io/v1`, so a second served copy of every slice (and an RV and a log entry per
// change of it) would be spent for nobody. The v1beta1 view is built at the first request for
// it and kept up to date from then on (the publisher keeps the flag; this route of the binder
// builds the first copy from the stored slices).

impl State {
    /// Starts serving v1beta1 EndpointSlices (no-op when already served): builds the served
    /// v1beta1 copy of every stored slice, stamped with the current resourceVersion, with an
    /// empty history from there (a v1beta1 watch from an older RV gets 410 and relists). Spends
    /// no RV and logs no event. Called by the writer when the first request for them comes.
    pub fn serve_v1beta1(&mut self) {
        if self.publisher.serves_v1beta1() {
            return;
        }
        let rv = self.current_rv();
        let res = Resource::SlicesV1beta1;
        let mut built = Vec::with_capacity(self.upstream.slice_keys().len());
        let filter = self.filter();
        for key in self.upstream.slice_keys() {
            let Some(obj) = self.upstream.value(self.slice_kind, key, self.stand_in()) else {
                continue;
            };
            let (mut value, _) = filter.serve_slice(key, obj, res);
            let bytes = publisher::finish(res, &mut value, rv);
            built.push(Arc::new(Served::with_bytes(key.clone(), rv, &value, bytes)));
        }
        let count = built.len();
        self.publisher.start_v1beta1(built);
        self.publisher.publish_facts(self.status());
        info!("serving v1beta1 EndpointSlices from now on (first request): {count} built at resourceVersion {rv}");
    }

    /// Whether v1beta1 EndpointSlices are served (see [`State::serve_v1beta1`]).
    pub fn serves_v1beta1(&self) -> bool {
        self.publisher.serves_v1beta1()
    }
}
