//! The topology index: what the filter reads besides the objects themselves (node labels, each
//! Service's topology keys, which Service each slice belongs to), which endpoint objects have an
//! endpoint on which node (so that a node change recomputes only what it can affect), and the
//! recomputation a change owes (the dirty sets).
//!
//! Invariants: `slice_owner` and `slices_by_service` are inverse (every set sorted, none empty);
//! `nodes_of` and `by_node` are inverse through the ids: an object has an id while it has
//! endpoints on some node, `target_of[id]` is that object, a free id is `None` there and listed
//! in `free_ids` (reused first), and no by-node set is empty. Node names are shared between the
//! two (`Arc<str>`), each object's nodes are one sorted slice, and the by-node sets hold 4-byte
//! ids of objects, not their 40-byte keys: a large cluster has thousands of such objects, each on
//! several nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cache::collection::LabelSet;
use crate::cache::topology::TopologyKeys;
use crate::k8s::ObjectKey;

/// An endpoint object to recompute: Endpoints sort before EndpointSlices, then by key (the
/// order derived events are published in).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    Endpoints(ObjectKey),
    Slice(ObjectKey),
}

/// The topology index and the recomputation owed at the end of the current change.
#[derive(Debug, Default)]
pub(super) struct Index {
    node_labels: BTreeMap<String, LabelSet>,
    service_keys: BTreeMap<ObjectKey, TopologyKeys>,
    slice_owner: BTreeMap<ObjectKey, ObjectKey>,
    /// Sorted.
    slices_by_service: BTreeMap<ObjectKey, Vec<ObjectKey>>,
    // Which endpoint objects have an endpoint on which node, so that a change of a node other
    // than the local one recomputes only the objects it can affect (§6.2).
    by_node: BTreeMap<Arc<str>, Vec<u32>>,
    nodes_of: BTreeMap<Target, Indexed>,
    /// The object of each id in `by_node` (`None`: a free id, reused first).
    target_of: Vec<Option<Target>>,
    free_ids: Vec<u32>,
    // Recomputation owed at the end of the current change.
    dirty_all: bool,
    dirty_services: BTreeSet<ObjectKey>,
    dirty_nodes: BTreeSet<String>,
    /// Slices whose publication waits for the end of the change: their Service's §2.9 decision
    /// is taken over all its slices, once they are all in.
    deferred: BTreeSet<Target>,
    /// Services whose set of slices, or one of whose slices, changed in the current change.
    touched: BTreeSet<ObjectKey>,
    /// The §2.9 decision ([`crate::cache::topology::ServedBy::name`]) each Service with
    /// dynamic keys serves its slices with, to see when a change flips it.
    slice_decisions: BTreeMap<ObjectKey, String>,
}

/// What the by-node index holds for one endpoint object: its id in the by-node sets, and the
/// nodes it has endpoints on (sorted).
#[derive(Debug)]
struct Indexed {
    id: u32,
    nodes: Box<[Arc<str>]>,
}

impl Index {
    /// Every node's labels.
    pub(super) fn node_labels(&self) -> &BTreeMap<String, LabelSet> {
        &self.node_labels
    }

    /// Every topology Service's keys.
    pub(super) fn service_keys(&self) -> &BTreeMap<ObjectKey, TopologyKeys> {
        &self.service_keys
    }

    /// The Service of a slice.
    pub(super) fn owner_of(&self, slice: &ObjectKey) -> Option<&ObjectKey> {
        self.slice_owner.get(slice)
    }

    /// The slices of a Service, sorted.
    pub(super) fn slices_of(&self, service: &ObjectKey) -> &[ObjectKey] {
        self.slices_by_service.get(service).map_or(&[], |s| &s[..])
    }

    /// The nodes an endpoint object has endpoints on, sorted.
    pub(super) fn nodes_of(&self, target: &Target) -> impl Iterator<Item = &str> {
        let nodes = self.nodes_of.get(target).map_or(&[][..], |i| &i.nodes[..]);
        nodes.iter().map(|n| &**n)
    }

    /// Node `name` was upserted with `labels`: a change of its labels is owed a recomputation
    /// ([`Index::mark_node`]).
    pub(super) fn set_node(&mut self, name: &str, labels: LabelSet, local: &str) {
        if self.node_labels.get(name) != Some(&labels) {
            self.mark_node(name, local);
        }
        self.node_labels.insert(name.to_string(), labels);
    }

    /// Node `name` was deleted: owed a recomputation.
    pub(super) fn remove_node(&mut self, name: &str, local: &str) {
        self.node_labels.remove(name);
        self.mark_node(name, local);
    }

    /// Service `key` was upserted with `keys` (`is_new`: it was not cached): a new Service, or
    /// one whose keys changed, is owed a recomputation of its endpoint objects.
    pub(super) fn set_service(
        &mut self,
        key: &ObjectKey,
        keys: Option<TopologyKeys>,
        is_new: bool,
    ) {
        if is_new || self.service_keys.get(key) != keys.as_ref() {
            self.dirty_services.insert(key.clone());
        }
        match keys {
            Some(k) => self.service_keys.insert(key.clone(), k),
            None => self.service_keys.remove(key),
        };
    }

    /// Service `key` was deleted: its endpoint objects are owed a recomputation.
    pub(super) fn remove_service(&mut self, key: &ObjectKey) {
        self.service_keys.remove(key);
        self.dirty_services.insert(key.clone());
    }

    /// A slice was stored (`owner`: its Service) or deleted (`None`): both its old and its new
    /// Service are [`Index::take_touched`].
    pub(super) fn index_slice(&mut self, slice: &ObjectKey, owner: Option<ObjectKey>) {
        self.touched.extend(self.slice_owner.get(slice).cloned());
        self.touched.extend(owner.clone());
        if self.slice_owner.get(slice) == owner.as_ref() {
            return; // unchanged (a recomputation, an update of the same Service's slice)
        }
        if let Some(previous) = self.slice_owner.remove(slice) {
            if let Some(set) = self.slices_by_service.get_mut(&previous) {
                remove_sorted(set, slice);
                if set.is_empty() {
                    self.slices_by_service.remove(&previous);
                }
            }
        }
        if let Some(owner) = owner {
            insert_sorted(
                self.slices_by_service.entry(owner.clone()).or_default(),
                slice.clone(),
            );
            self.slice_owner.insert(slice.clone(), owner);
        }
    }

    /// A node's labels or existence changed: the local node affects every topology Service,
    /// any other node only the objects with an endpoint on it.
    fn mark_node(&mut self, name: &str, local: &str) {
        if name == local {
            self.dirty_all = true;
        } else {
            self.dirty_nodes.insert(name.to_string());
        }
    }

    pub(super) fn index_nodes(&mut self, target: Target, nodes: BTreeSet<String>) {
        let same = |old: &Indexed| {
            old.nodes
                .iter()
                .map(|n| &**n)
                .eq(nodes.iter().map(String::as_str))
        };
        if self.nodes_of.get(&target).is_some_and(same) {
            return; // unchanged: both sorted
        }
        let old = self.nodes_of.remove(&target);
        if let Some(old) = &old {
            for n in old.nodes.iter() {
                if let Some(set) = self.by_node.get_mut(n) {
                    remove_sorted(set, &old.id);
                    if set.is_empty() {
                        self.by_node.remove(n);
                    }
                }
            }
        }
        if nodes.is_empty() {
            if let Some(old) = old {
                self.free_id(old.id);
            }
            return;
        }
        // The object keeps its id while it has endpoints on some node.
        let id = match old {
            Some(old) => old.id,
            None => self.new_id(&target),
        };
        let mut names: Vec<Arc<str>> = Vec::with_capacity(nodes.len());
        for n in nodes {
            // One shared copy of each node name: the `by_node` key.
            let name = match self.by_node.get_key_value(n.as_str()) {
                Some((name, _)) => name.clone(),
                None => Arc::from(n),
            };
            insert_sorted(self.by_node.entry(name.clone()).or_default(), id);
            names.push(name);
        }
        // `nodes` iterated in order, so `names` is sorted.
        let nodes = names.into_boxed_slice();
        self.nodes_of.insert(target, Indexed { id, nodes });
    }

    /// The endpoint objects with an endpoint on `node`.
    pub(super) fn on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Target> + 'a {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|&id| self.target_of.get(id as usize)?.as_ref())
    }

    fn new_id(&mut self, target: &Target) -> u32 {
        match self.free_ids.pop() {
            Some(id) => {
                if let Some(slot) = self.target_of.get_mut(id as usize) {
                    *slot = Some(target.clone());
                }
                id
            }
            None => {
                // More than 2^32 objects with endpoints cannot be held in memory anyway.
                let id = u32::try_from(self.target_of.len()).unwrap_or(u32::MAX);
                self.target_of.push(Some(target.clone()));
                id
            }
        }
    }

    fn free_id(&mut self, id: u32) {
        if let Some(slot) = self.target_of.get_mut(id as usize) {
            *slot = None;
            self.free_ids.push(id);
        }
    }

    /// The endpoint objects the changes since the last call affect (and forgets them): those of
    /// the Services changed (every topology Service after a local relabel; `has_endpoints`
    /// says whether a Service has an Endpoints object), and the topology objects with an
    /// endpoint on another node that changed. Only topology Services filter by node labels.
    pub(super) fn take_dirty(
        &mut self,
        has_endpoints: impl Fn(&ObjectKey) -> bool,
    ) -> BTreeSet<Target> {
        let mut services = std::mem::take(&mut self.dirty_services);
        if std::mem::take(&mut self.dirty_all) {
            services.extend(self.service_keys.keys().cloned());
        }
        let mut targets: BTreeSet<Target> = BTreeSet::new();
        for svc in &services {
            if has_endpoints(svc) {
                targets.insert(Target::Endpoints(svc.clone()));
            }
            targets.extend(self.slices_of(svc).iter().cloned().map(Target::Slice));
        }
        for node in std::mem::take(&mut self.dirty_nodes) {
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
        targets
    }

    /// Forgets the recomputation owed (a restore serves every object with the index complete),
    /// except the deferred slices, which are not served yet.
    pub(super) fn forget_dirty(&mut self) {
        self.dirty_all = false;
        self.dirty_services.clear();
        self.dirty_nodes.clear();
        self.touched.clear();
    }

    /// The slice `key` is published at the end of the change ([`Index::take_deferred`]).
    pub(super) fn defer(&mut self, key: &ObjectKey) {
        self.deferred.insert(Target::Slice(key.clone()));
    }

    /// The slices deferred since the last call (and forgets them).
    pub(super) fn take_deferred(&mut self) -> BTreeSet<Target> {
        std::mem::take(&mut self.deferred)
    }

    /// The Services touched since the last call (and forgets them).
    pub(super) fn take_touched(&mut self) -> BTreeSet<ObjectKey> {
        std::mem::take(&mut self.touched)
    }

    /// Records the decision `name` (`None`: keys not dynamic, or no Service) the slices of
    /// `service` are served with; when it differs from the one recorded, `Some` of that one.
    pub(super) fn set_slice_decision(
        &mut self,
        service: &ObjectKey,
        name: Option<String>,
    ) -> Option<Option<String>> {
        let previous = match &name {
            Some(n) => self.slice_decisions.insert(service.clone(), n.clone()),
            None => self.slice_decisions.remove(service),
        };
        (previous != name).then_some(previous)
    }

    /// After a full list: the index vectors grew by doubling; give back the spare room (a
    /// sizeable part of the by-node index after a large list).
    pub(super) fn compact(&mut self) {
        for set in self.by_node.values_mut() {
            set.shrink_to_fit();
        }
        self.target_of.shrink_to_fit();
        self.free_ids.shrink_to_fit();
        for set in self.slices_by_service.values_mut() {
            set.shrink_to_fit();
        }
    }
}

/// Index sets are sorted vectors: a `BTreeSet` allocates a ~0.5 KiB node even for one element,
/// and these sets are small (a Service's slices; the objects with an endpoint on one node).
fn insert_sorted<T: Ord>(set: &mut Vec<T>, item: T) {
    if let Err(at) = set.binary_search(&item) {
        set.insert(at, item);
    }
}

fn remove_sorted<T: Ord>(set: &mut Vec<T>, item: &T) {
    if let Ok(at) = set.binary_search(item) {
        set.remove(at);
        if set.capacity() > 2 * set.len() + 4 {
            set.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// Random re-indexing (objects gaining and losing nodes, leaving, coming back) keeps the
    /// by-node sets equal to what each object's own node list says, and reuses freed ids.
    #[test]
    fn by_node_ids_follow_every_object_through_random_reindexing() {
        let mut st = Index::default();
        let mut expect: BTreeMap<Target, BTreeSet<String>> = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..3_000 {
            let key = ObjectKey::new("default", &format!("o{}", next(40)));
            let target = if next(2) == 0 {
                Target::Endpoints(key)
            } else {
                Target::Slice(key)
            };
            let nodes: BTreeSet<String> = (0..next(5)).map(|_| format!("n{}", next(12))).collect();
            st.index_nodes(target.clone(), nodes.clone());
            if nodes.is_empty() {
                expect.remove(&target);
            } else {
                expect.insert(target, nodes);
            }
            for n in 0..12 {
                let node = format!("n{n}");
                let got: BTreeSet<&Target> = st.on_node(&node).collect();
                let want: BTreeSet<&Target> = expect
                    .iter()
                    .filter(|(_, ns)| ns.contains(&node))
                    .map(|(t, _)| t)
                    .collect();
                assert_eq!(got, want, "step {step}, node {node}");
                if want.is_empty() {
                    assert!(!st.by_node.contains_key(node.as_str()), "empty set kept");
                }
            }
            let live = st.target_of.iter().filter(|t| t.is_some()).count();
            assert_eq!(live, expect.len(), "step {step}: one id per indexed object");
            assert_eq!(st.nodes_of.len(), expect.len());
        }
        // 80 possible objects: ids were reused, not grown per step.
        assert!(st.target_of.len() <= 80, "{} ids", st.target_of.len());
    }
}
