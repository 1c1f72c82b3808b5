//! Objects held stale: the upstream sent a version over `--max-object-bytes` of an object the
//! cache holds, which keeps serving the last version it accepted (docs/SEMANTICS.md §7, "Objects
//! over `--max-object-bytes`"). Losing the object instead would serve its deletion: for the local
//! Node a `DELETED` kube-proxy exits on, and every topology Service emptied. Pure bookkeeping:
//! which objects are stale, and whether a log line is owed (one WARN per object per episode).

use std::collections::{BTreeMap, BTreeSet};

use crate::k8s::{ObjectKey, Resource};

/// Most names of *new* objects over the bound remembered to WARN about each once (past that,
/// at DEBUG), so a flood of them cannot grow the set.
const MAX_WARNED_NEW: usize = 1024;

/// One object held stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleMark {
    /// The size of the last version refused.
    pub bytes: u64,
    /// The served resourceVersion of the version kept.
    pub served_rv: u64,
}

/// One stale object, as `/debug/state` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleObject {
    /// The upstream resource.
    pub resource: Resource,
    /// Its key.
    pub key: ObjectKey,
    /// See [`StaleMark`].
    pub mark: StaleMark,
}

/// The stale objects by resource and key, and the new objects over the bound already named in a
/// WARN.
#[derive(Debug, Default)]
pub struct Stale {
    held: BTreeMap<(Resource, ObjectKey), StaleMark>,
    warned_new: BTreeSet<(Resource, ObjectKey)>,
}

/// What [`Stale::refused`] owes the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleWarning {
    /// The object just became stale (a WARN).
    Opened,
    /// It was stale already (DEBUG: the episode was named).
    Continues,
}

impl Stale {
    /// A version of the held object `key` was refused for its size: it is (still) stale.
    pub fn refused(&mut self, res: Resource, key: &ObjectKey, mark: StaleMark) -> StaleWarning {
        match self.held.insert((res, key.clone()), mark) {
            None => StaleWarning::Opened,
            Some(_) => StaleWarning::Continues,
        }
    }

    /// Whether a new object `key` over the bound is to be named in a WARN (the first time).
    pub fn warn_new(&mut self, res: Resource, key: &ObjectKey) -> bool {
        self.warned_new.len() < MAX_WARNED_NEW && self.warned_new.insert((res, key.clone()))
    }

    /// A version within the bound came, or the object was deleted: no longer stale. Returns the
    /// mark it had, if any.
    pub fn clear(&mut self, res: Resource, key: &ObjectKey) -> Option<StaleMark> {
        let k = (res, key.clone());
        self.warned_new.remove(&k);
        self.held.remove(&k)
    }

    /// Stale objects per resource (indexed by [`Resource::index`]).
    pub fn counts(&self) -> [u64; Resource::ALL.len()] {
        let mut counts = [0; Resource::ALL.len()];
        for (res, _) in self.held.keys() {
            counts[res.index()] += 1;
        }
        counts
    }

    /// How many objects are stale.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// The first `limit` stale objects, by resource and key.
    pub fn list(&self, limit: usize) -> Vec<StaleObject> {
        self.held
            .iter()
            .take(limit)
            .map(|((resource, key), mark)| StaleObject {
                resource: *resource,
                key: key.clone(),
                mark: *mark,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_opens_once_and_ends_with_a_version_within_the_bound() {
        let mut s = Stale::default();
        let key = ObjectKey::new("", "n1");
        let mark = StaleMark {
            bytes: 9,
            served_rv: 5,
        };
        assert_eq!(s.refused(Resource::Nodes, &key, mark), StaleWarning::Opened);
        assert_eq!(
            s.refused(Resource::Nodes, &key, mark),
            StaleWarning::Continues
        );
        assert_eq!(s.counts()[Resource::Nodes.index()], 1);
        assert_eq!(s.list(10)[0].key, key);
        assert_eq!(s.clear(Resource::Nodes, &key), Some(mark));
        assert_eq!(s.clear(Resource::Nodes, &key), None);
        assert_eq!(s.len(), 0);
        assert_eq!(s.refused(Resource::Nodes, &key, mark), StaleWarning::Opened);
    }

    #[test]
    fn new_objects_are_named_once_within_a_bound() {
        let mut s = Stale::default();
        let key = ObjectKey::new("ns", "big");
        assert!(s.warn_new(Resource::Services, &key));
        assert!(!s.warn_new(Resource::Services, &key));
        for i in 0..2 * MAX_WARNED_NEW {
            s.warn_new(Resource::Nodes, &ObjectKey::new("", &i.to_string()));
        }
        assert_eq!(s.warned_new.len(), MAX_WARNED_NEW);
    }
}
