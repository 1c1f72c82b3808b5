//! The cache's state machine: upstream objects in, topology-pruned served objects, RVs and
//! event-log entries out (docs/SEMANTICS.md §6 and §6.2; every § below is a section of that file).
//!
//! [`State`] is pure (no I/O; its only synchronization is the readers' [`View`] lock): the
//! reflector threads call [`State::apply`] under the writer's lock (the single writer); the event
//! loop reads the [`View`] ([`State::view`]), which the writer locks only to read an old served
//! object and to record a new one (`crate::cache::published`). `now` is passed in (monotonic
//! seconds) so the log's time window needs no clock here. The edge-health map (§10) comes in the
//! same way, through [`State::set_edge_health`] (in `store_health.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use log::debug;
use serde_json::Value;

use crate::cache::facts::SharedFacts;
use crate::cache::published::{CollectionRef, Published, View};
use crate::cache::topology::{self, Labels, TopologyKeys};
use crate::cache::view::{labels_of, Retention};
use crate::handoff::Change;
use crate::k8s::{ObjectKey, Resource};
use crate::sync::lock;

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
    /// The last resourceVersion handed out (recorded into `view` with each change).
    rv: u64,
    /// What readers see; locked only to read an old served object and record a new one.
    view: View,
    // Upstream objects are kept as compact JSON bytes (a `Value` costs many times its JSON size)
    // and parsed only when a topology change recomputes them — or not kept at all when the served
    // object carries the same bytes (`store_upstream.rs`).
    nodes: BTreeMap<String, Stored>,
    node_labels: BTreeMap<String, Labels>,
    services: BTreeMap<ObjectKey, Stored>,
    service_keys: BTreeMap<ObjectKey, TopologyKeys>,
    endpoints: BTreeMap<ObjectKey, Stored>,
    slices: BTreeMap<ObjectKey, Stored>,
    slice_kind: Resource,
    /// Set by [`State::expect_slices`]: changes of the other slice version are then ignored.
    slice_kind_pinned: bool,
    slice_owner: BTreeMap<ObjectKey, ObjectKey>,
    /// Sorted (see `store_index.rs`).
    slices_by_service: BTreeMap<ObjectKey, Vec<ObjectKey>>,
    synced: BTreeSet<u8>,
    ready: bool,
    /// Serving objects restored from the on-disk snapshot: set by [`State::restore`], cleared
    /// once every reflector has listed from the upstream.
    from_snapshot: bool,
    // Recomputation owed at the end of the current `apply`.
    dirty_all: bool,
    dirty_services: BTreeSet<ObjectKey>,
    dirty_nodes: BTreeSet<String>,
    // Which endpoint objects have an endpoint on which node, so that a change of a node other
    // than the local one recomputes only the objects it can affect (§6.2).
    // Node names are shared between the two (`Arc<str>`), each object's nodes are one sorted
    // slice, and the by-node sets hold 4-byte ids of objects, not their 40-byte keys: a
    // large cluster has thousands of such objects, each on several nodes (see `store_index.rs`).
    by_node: BTreeMap<Arc<str>, Vec<u32>>,
    nodes_of: BTreeMap<Target, index::Indexed>,
    /// The object of each id in `by_node` (`None`: a free id, reused first).
    target_of: Vec<Option<Target>>,
    free_ids: Vec<u32>,
    /// Edge-health map, node InternalIPs, the resolved abnormal nodes (§10).
    health: health_filter::Health,
    /// Whether v1beta1 EndpointSlices are built: from the first v1beta1 request on
    /// ([`State::serve_v1beta1`]); until then no served copy, RV or log entry is spent on them.
    v1beta1: bool,
    /// Reads stored objects again as list items when a relabel or a Service change recomputes
    /// them on their bytes ([`State::recompute_as_is`]); kept, so that its buffers are (with
    /// musl's allocator a decoder per object mapped and unmapped pages for each).
    decoder: crate::cache::canonical::Decoder,
    /// Upstream bytes that [`State::pack_pending`] is to pack (`store_upstream.rs`): left for
    /// after the change is served, so that readiness and other writers do not wait for it.
    to_pack: Vec<(Resource, ObjectKey)>,
    /// Test-only: run after each object is recorded into the view (to park the writer there).
    #[cfg(test)]
    record_hook: Option<RecordHook>,
}

/// Test-only: what [`State::set_record_hook`] runs after each recorded object.
#[cfg(test)]
pub(crate) struct RecordHook(pub Box<dyn FnMut() + Send>);

#[cfg(test)]
impl std::fmt::Debug for RecordHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordHook")
    }
}

/// An endpoint object to recompute: Endpoints sort before EndpointSlices, then by key (the
/// order derived events are published in).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Endpoints(ObjectKey),
    Slice(ObjectKey),
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
}

/// Labels that keep an object out of kube-proxy's view (§4: kube-proxy's label selector).
pub const EXCLUDING_LABELS: [&str; 2] = [
    "service.kubernetes.io/headless",
    "service.kubernetes.io/service-proxy-name",
];

/// Whether the served objects of `res` went through the admission filter, so that none of them
/// carries an [`EXCLUDING_LABELS`] label: every resource but Nodes (see `excluded`).
pub fn admission_filtered(res: Resource) -> bool {
    res != Resource::Nodes
}

/// Whether `obj` is outside selector L. The reflectors already list+watch with L; this guard
/// keeps such objects out even from an upstream that ignores label selectors.
fn excluded(kind: Resource, obj: &Value) -> bool {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|l| excluding(kind).iter().any(|k| l.contains_key(*k)))
}

/// The labels that keep an object of `kind` out: [`EXCLUDING_LABELS`], none for Nodes.
fn excluding(kind: Resource) -> &'static [&'static str] {
    match kind {
        Resource::Nodes => &[],
        _ => &EXCLUDING_LABELS,
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
        let retention = settings.retention;
        State {
            settings,
            rv: seed,
            view: Arc::new(Mutex::new(Published::new(seed, retention))),
            nodes: BTreeMap::new(),
            node_labels: BTreeMap::new(),
            services: BTreeMap::new(),
            service_keys: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            slices: BTreeMap::new(),
            slice_kind: Resource::SlicesV1,
            slice_kind_pinned: false,
            slice_owner: BTreeMap::new(),
            slices_by_service: BTreeMap::new(),
            synced: BTreeSet::new(),
            ready: false,
            from_snapshot: false,
            dirty_all: false,
            dirty_services: BTreeSet::new(),
            dirty_nodes: BTreeSet::new(),
            by_node: BTreeMap::new(),
            nodes_of: BTreeMap::new(),
            target_of: Vec::new(),
            free_ids: Vec::new(),
            health: health_filter::Health::default(),
            v1beta1: false,
            decoder: Default::default(),
            to_pack: Vec::new(),
            #[cfg(test)]
            record_hook: None,
        }
    }

    /// Test-only: runs `hook` after each object recorded into the view, outside the view's
    /// lock (a test parks the writer mid-apply with it).
    #[cfg(test)]
    pub(crate) fn set_record_hook(&mut self, hook: Option<RecordHook>) {
        self.record_hook = hook;
    }

    /// The current resourceVersion (the last one handed out).
    pub fn current_rv(&self) -> u64 {
        self.rv
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
        CollectionRef::new(lock(&self.view), res)
    }

    /// Served Nodes, Services, Endpoints and v1 EndpointSlices (one lock, for log lines).
    pub fn served_counts(&self) -> [usize; 4] {
        let view = lock(&self.view);
        [
            Resource::Nodes,
            Resource::Services,
            Resource::Endpoints,
            Resource::SlicesV1,
        ]
        .map(|r| view.collection(r).len())
    }

    /// Runs `f` on the locked served view (one lock for several collections).
    pub fn with_view<R>(&self, f: impl FnOnce(&Published) -> R) -> R {
        f(&lock(&self.view))
    }

    /// The readers' handle on the served view (the event loop reads only through it).
    pub fn view(&self) -> View {
        Arc::clone(&self.view)
    }

    /// The figures the health listener reads without the writer's lock, refreshed at the end
    /// of each change (see [`crate::cache::facts`]).
    pub fn shared_facts(&self) -> Arc<SharedFacts> {
        lock(&self.view).facts()
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
    }

    /// Applies one upstream change, recomputes what it affects, and logs every change of served
    /// content with a new RV. `now` is monotonic seconds (for the log's time window).
    pub fn apply(&mut self, kind: Resource, change: Change, now: u64) -> Applied {
        let prepared = match change {
            // As a reflector's list is taken ([`State::list_preparer`]).
            Change::List(texts) => {
                let mut list = self.list_preparer(kind);
                texts.iter().for_each(|text| list.push(text));
                list.finish()
            }
            other => prepare(kind, other, Hold::Whole),
        };
        self.apply_prepared(kind, prepared, now)
    }

    /// [`State::apply`] of a change already [`prepare`]d (outside the lock).
    pub fn apply_prepared(&mut self, kind: Resource, change: Prepared, now: u64) -> Applied {
        let before = self.rv;
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
        }
        let listed = matches!(change, Prepared::Listed(_));
        match change {
            Prepared::One(Change::Upsert(obj)) => {
                let out_of_view = excluded(kind, &obj);
                if let Some((key, obj)) = clean(kind, obj) {
                    if out_of_view {
                        // An object that gained an excluding label left the view: a deletion.
                        self.delete(kind, &key, now);
                    } else {
                        self.upsert(kind, key, obj, now);
                    }
                }
            }
            Prepared::One(Change::Delete(obj)) => {
                if let Some((key, _)) = clean(kind, obj) {
                    self.delete(kind, &key, now);
                }
            }
            // `prepare` turns every list into `Listed`.
            Prepared::One(Change::Replace(_) | Change::List(_)) => {}
            Prepared::Listed(fresh) => self.replace(kind, fresh, now),
        }
        self.flush_derived(now);
        let mut applied = Applied {
            events: (self.rv - before) as usize,
            ..Applied::default()
        };
        if listed {
            self.compact_indexes();
        }
        if listed && self.synced.insert(kind.sync_slot()) && self.synced.len() == 4 {
            if self.from_snapshot {
                // Ready since the restore; the history (and open watches) carry on.
                self.from_snapshot = false;
                applied.upstream_synced = true;
            } else {
                self.ready = true;
                applied.became_ready = true;
                let mut view = lock(&self.view);
                view.set_ready();
                for coll in view.collections_mut() {
                    coll.reset_history(self.rv);
                }
            }
        }
        self.trim(now);
        self.publish_facts();
        applied
    }

    /// A full list: objects gone from it are deleted, the others upserted.
    fn replace(&mut self, kind: Resource, fresh: BTreeMap<ObjectKey, Listed>, now: u64) {
        let gone: Vec<ObjectKey> = self
            .keys_of(kind)
            .into_iter()
            .filter(|k| !fresh.contains_key(k))
            .collect();
        for key in gone {
            self.delete(kind, &key, now);
        }
        for (key, listed) in fresh {
            if self.same_listed(kind, &key, &listed) {
                continue; // unchanged: no need to decode it again
            }
            let Some(bytes) = listed.whole() else {
                log::warn!("{kind:?} {key}: listed bytes that do not unpack; skipped");
                continue;
            };
            let as_is = listed.as_is;
            if let Some(facts) = as_is {
                if self.upsert_as_is(kind, &key, &bytes, facts, now) {
                    continue; // served as it came: published without decoding it
                }
            }
            if let Some(obj) = parse(&bytes) {
                self.upsert_raw(kind, key, obj, bytes, now);
            }
        }
    }

    /// How a list of `kind` is best prepared: [`Hold::Whole`] while the store holds none of its
    /// objects (a first list, every object of which is published), else [`Hold::PackedOnly`].
    pub fn hold_for(&self, kind: Resource) -> Hold {
        let holds_some = match kind {
            Resource::Nodes => !self.nodes.is_empty(),
            Resource::Services => !self.services.is_empty(),
            Resource::Endpoints => !self.endpoints.is_empty(),
            Resource::SlicesV1 | Resource::SlicesV1beta1 => !self.slices.is_empty(),
        };
        if holds_some {
            Hold::PackedOnly
        } else {
            Hold::Whole
        }
    }

    /// A taker for a list of `kind`, prepared as [`State::hold_for`] says. A first list packs
    /// only the objects of the Services with topology keys: only a pruned object keeps its
    /// upstream bytes; those of any other are served as they came and a packed copy would be
    /// dropped unused (one whose Service comes later is packed then, `pack_pending`).
    pub fn list_preparer(&self, kind: Resource) -> ListPreparer {
        let list = ListPreparer::new(kind, self.hold_for(kind));
        match list.hold() {
            Hold::Whole => list.packing_only_for(self.service_keys.keys().cloned().collect()),
            Hold::PackedOnly => list,
        }
    }

    fn keys_of(&self, kind: Resource) -> Vec<ObjectKey> {
        match kind {
            Resource::Nodes => self.nodes.keys().map(|n| ObjectKey::new("", n)).collect(),
            Resource::Services => self.services.keys().cloned().collect(),
            Resource::Endpoints => self.endpoints.keys().cloned().collect(),
            Resource::SlicesV1 | Resource::SlicesV1beta1 => self.slices.keys().cloned().collect(),
        }
    }

    fn upsert(&mut self, kind: Resource, key: ObjectKey, obj: Value, now: u64) {
        let bytes = raw(&obj);
        if self.same_upstream(kind, &key, &bytes) {
            return;
        }
        self.upsert_raw(kind, key, obj, bytes, now);
    }

    /// [`State::upsert`] of a changed object whose compact bytes are already known (a list).
    fn upsert_raw(&mut self, kind: Resource, key: ObjectKey, obj: Value, bytes: Raw, now: u64) {
        let bytes = Stored::Own(bytes);
        match kind {
            Resource::Nodes => {
                self.health_node_changed(&key.name, Some(&obj));
                let labels = labels_of(&obj);
                if self.node_labels.get(&*key.name) != Some(&labels) {
                    self.mark_node(&key.name);
                }
                self.node_labels.insert(key.name.to_string(), labels);
                self.nodes.insert(key.name.to_string(), bytes);
                self.publish(Resource::Nodes, &key, Some(obj), now);
            }
            Resource::Services => {
                let keys = topology::service_keys_logged(&key, &obj);
                let is_new = !self.services.contains_key(&key);
                if is_new || self.service_keys.get(&key) != keys.as_ref() {
                    self.dirty_services.insert(key.clone());
                }
                match keys {
                    Some(k) => self.service_keys.insert(key.clone(), k),
                    None => self.service_keys.remove(&key),
                };
                self.services.insert(key.clone(), bytes);
                self.publish(Resource::Services, &key, Some(obj), now);
            }
            Resource::Endpoints => {
                self.keep_endpoint_object(kind, &key, bytes, topology::endpoint_nodes(&obj), None);
                let served = self.serve_endpoints(&key, obj);
                self.publish(Resource::Endpoints, &key, Some(served), now);
            }
            Resource::SlicesV1 | Resource::SlicesV1beta1 => {
                let (nodes, service) = (
                    topology::endpoint_nodes(&obj),
                    topology::slice_service(&obj),
                );
                self.keep_endpoint_object(kind, &key, bytes, nodes, service);
                self.publish_slice(&key, obj, now);
            }
        }
        self.settle(kind, &key);
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
            self.endpoints.insert(key.clone(), bytes);
            self.index_nodes(Target::Endpoints(key.clone()), nodes);
        } else {
            self.index_slice(key, service);
            self.index_nodes(Target::Slice(key.clone()), nodes);
            self.slices.insert(key.clone(), bytes);
        }
    }

    fn delete(&mut self, kind: Resource, key: &ObjectKey, now: u64) {
        match kind {
            Resource::Nodes => {
                if self.nodes.remove(&*key.name).is_some() {
                    self.node_labels.remove(&*key.name);
                    self.mark_node(&key.name);
                    self.health_node_changed(&key.name, None);
                    self.publish(Resource::Nodes, key, None, now);
                }
            }
            Resource::Services => {
                if self.services.remove(key).is_some() {
                    self.service_keys.remove(key);
                    self.dirty_services.insert(key.clone());
                    self.publish(Resource::Services, key, None, now);
                }
            }
            Resource::Endpoints => {
                if self.endpoints.remove(key).is_some() {
                    self.index_nodes(Target::Endpoints(key.clone()), BTreeSet::new());
                    self.publish(Resource::Endpoints, key, None, now);
                }
            }
            Resource::SlicesV1 | Resource::SlicesV1beta1 => {
                if self.slices.remove(key).is_some() {
                    self.index_slice(key, None);
                    self.index_nodes(Target::Slice(key.clone()), BTreeSet::new());
                    self.publish(Resource::SlicesV1, key, None, now);
                    if self.v1beta1 {
                        self.publish(Resource::SlicesV1beta1, key, None, now);
                    }
                }
            }
        }
    }

    /// Recomputes the endpoint objects that the changes of this `apply` affect, in key order.
    fn flush_derived(&mut self, now: u64) {
        let mut services = std::mem::take(&mut self.dirty_services);
        if std::mem::take(&mut self.dirty_all) {
            services.extend(self.service_keys.keys().cloned());
        }
        let mut targets: BTreeSet<Target> = BTreeSet::new();
        for svc in &services {
            if self.endpoints.contains_key(svc) {
                targets.insert(Target::Endpoints(svc.clone()));
            }
            if let Some(slices) = self.slices_by_service.get(svc) {
                targets.extend(slices.iter().cloned().map(Target::Slice));
            }
        }
        for node in std::mem::take(&mut self.dirty_nodes) {
            // Only topology Services filter by node labels.
            targets.extend(
                self.on_node(&node)
                    .filter(|t| match t {
                        Target::Endpoints(k) => self.service_keys.contains_key(k),
                        Target::Slice(k) => self
                            .slice_owner
                            .get(k)
                            .is_some_and(|s| self.service_keys.contains_key(s)),
                    })
                    .cloned(),
            );
        }
        // Edge-health changes affect objects of every class (not only topology Services).
        targets.extend(self.take_health_targets());
        if targets.is_empty() {
            return;
        }
        debug!("recomputing {} endpoint objects", targets.len());
        for target in targets {
            match target {
                Target::Endpoints(key) => {
                    let kind = Resource::Endpoints;
                    if self.recompute_as_is(kind, &key, now) {
                        continue; // filtered on its bytes
                    }
                    if let Some(obj) = self.upstream_value(kind, &key) {
                        self.materialize(kind, &key);
                        let served = self.serve_endpoints(&key, obj);
                        self.publish(Resource::Endpoints, &key, Some(served), now);
                        self.settle(kind, &key);
                    }
                }
                Target::Slice(key) => {
                    let kind = self.slice_kind;
                    if self.recompute_as_is(kind, &key, now) {
                        continue; // filtered on its bytes
                    }
                    if let Some(obj) = self.upstream_value(kind, &key) {
                        self.materialize(kind, &key);
                        self.publish_slice(&key, obj, now);
                        self.settle(kind, &key);
                    }
                }
            }
        }
    }
}

#[path = "store_as_is.rs"]
mod as_is;
#[path = "store_serve.rs"]
mod serve;
#[path = "store_upstream.rs"]
mod upstream;
use upstream::Stored;
pub use upstream::{ServedBytes, Upstream};

#[path = "store_publish.rs"]
mod publish;
use publish::finish;

#[path = "store_prepare.rs"]
mod prepare;
#[cfg(test)]
use prepare::fresh;
pub use prepare::{prepare, Hold, ListPreparer, Listed, Prepared};

#[path = "store_explain.rs"]
pub mod explain;
#[path = "store_health.rs"]
mod health_filter;
#[path = "store_index.rs"]
mod index;
#[path = "store_persist.rs"]
mod persist;
#[cfg(test)]
#[path = "store_test_support.rs"]
pub(crate) mod test_support;
#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
#[path = "store_v1beta1.rs"]
mod v1beta1;
