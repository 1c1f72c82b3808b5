//! The cache's indexes: which Service each slice belongs to, and which endpoint objects have an
//! endpoint on which node (so that a node change recomputes only what it can affect).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{State, Target};
use crate::k8s::ObjectKey;

impl State {
    pub(super) fn index_slice(&mut self, slice: &ObjectKey, owner: Option<ObjectKey>) {
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
        if let Some(old) = self.nodes_of.remove(&target) {
            for n in old.iter() {
                if let Some(set) = self.by_node.get_mut(n) {
                    remove_sorted(set, &target);
                    if set.is_empty() {
                        self.by_node.remove(n);
                    }
                }
            }
        }
        if nodes.is_empty() {
            return;
        }
        let mut names: Vec<Arc<str>> = Vec::with_capacity(nodes.len());
        for n in nodes {
            // One shared copy of each node name: the `by_node` key.
            let name = match self.by_node.get_key_value(n.as_str()) {
                Some((name, _)) => name.clone(),
                None => Arc::from(n),
            };
            insert_sorted(
                self.by_node.entry(name.clone()).or_default(),
                target.clone(),
            );
            names.push(name);
        }
        // `nodes` iterated in order, so `names` is sorted.
        self.nodes_of.insert(target, names.into_boxed_slice());
    }
}

impl State {
    /// After a full list: the index vectors grew by doubling; give back the spare room (at S,
    /// ~1 MiB of the by-node index).
    pub(super) fn compact_indexes(&mut self) {
        for set in self.by_node.values_mut() {
            set.shrink_to_fit();
        }
        for set in self.slices_by_service.values_mut() {
            set.shrink_to_fit();
        }
    }
}

/// Index sets are sorted vectors: a `BTreeSet` allocates a ~0.5 KiB node even for one element,
/// and these sets are small (a Service's slices; the ~80 objects with an endpoint on a node).
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
