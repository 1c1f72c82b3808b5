//! The cache's indexes: which Service each slice belongs to, and which endpoint objects have an
//! endpoint on which node (so that a node change recomputes only what it can affect). The
//! by-node sets hold small ids of objects ([`Indexed`]), resolved through `State::target_of`.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{State, Target};
use crate::k8s::ObjectKey;

impl State {
    pub(super) fn index_slice(&mut self, slice: &ObjectKey, owner: Option<ObjectKey>) {
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
    pub(super) fn mark_node(&mut self, name: &str) {
        if name == self.settings.hostname {
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
}

/// What the by-node index holds for one endpoint object: its id in the by-node sets, and the
/// nodes it has endpoints on (sorted).
#[derive(Debug)]
pub(super) struct Indexed {
    pub(super) id: u32,
    pub(super) nodes: Box<[Arc<str>]>,
}

impl State {
    /// After a full list: the index vectors grew by doubling; give back the spare room (a
    /// sizeable part of the by-node index after a large list).
    pub(super) fn compact_indexes(&mut self) {
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

    use super::super::test_support;
    use super::*;

    /// Random re-indexing (objects gaining and losing nodes, leaving, coming back) keeps the
    /// by-node sets equal to what each object's own node list says, and reuses freed ids.
    #[test]
    fn by_node_ids_follow_every_object_through_random_reindexing() {
        let mut st = test_support::state("edge-1", 1);
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
