//! Fields grid-wrapper's protobuf schema does not know (docs/SEMANTICS.md §1, "Fields newer than
//! grid-wrapper"): the cache keeps objects as the upstream's JSON, so a field added by a newer
//! Kubernetes reaches JSON clients but has no field number to be encoded with. The encoder leaves
//! it out and reports it here: counted per resource (`/metrics`), and each path logged once at
//! WARN. `grid-wrapper check` reports the same paths from its own pass over the upstream.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::k8s::{ObjectKey, Resource};
use crate::sync::lock;

/// What the process has met so far.
#[derive(Debug, Default)]
struct Registry {
    /// `(resource index, path)` of every unknown field met.
    paths: BTreeSet<(usize, String)>,
    /// Encoded objects that left out one field or more, per resource ([`Resource::index`]).
    objects: [u64; Resource::ALL.len()],
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    paths: BTreeSet::new(),
    objects: [0; Resource::ALL.len()],
});

/// Records the unknown fields of one encoded object `key` of `res`; logs each new path once.
pub fn note(res: Resource, key: &ObjectKey, paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    let mut reg = lock(&REGISTRY);
    reg.objects[res.index()] += 1;
    for path in paths {
        if reg.paths.insert((res.index(), path.clone())) {
            log::warn!(
                "{}: field {path} (first met in {key}) is not in grid-wrapper's protobuf schema: protobuf clients such as kube-proxy do not get it, JSON clients do (upgrade grid-wrapper to carry it)",
                res.plural()
            );
        }
    }
}

/// Records the unknown fields of one object `key` of `res` as the upstream sent it in protobuf
/// (a newer apiserver's fields, by number: `spec.#30`): skipped by the decoder, so no client of
/// grid-wrapper gets them; logs each new path once.
pub fn note_upstream(res: Resource, key: &ObjectKey, paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    let mut reg = lock(&REGISTRY);
    reg.objects[res.index()] += 1;
    for path in paths {
        if reg.paths.insert((res.index(), path.clone())) {
            log::warn!(
                "{}: field {path} of the upstream's protobuf (first met in {key}) is not in grid-wrapper's protobuf schema: skipped, no client gets it (upgrade grid-wrapper to carry it)",
                res.plural()
            );
        }
    }
}

/// Encoded objects that left out a field, per resource in [`Resource::ALL`] order.
pub fn objects() -> [u64; Resource::ALL.len()] {
    lock(&REGISTRY).objects
}

/// Every unknown field met, as `(resource, path)`, sorted.
pub fn paths() -> Vec<(Resource, String)> {
    lock(&REGISTRY)
        .paths
        .iter()
        .filter_map(|(i, p)| Some((*Resource::ALL.get(*i)?, p.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_is_kept_once_and_objects_are_counted() {
        // The registry is process-wide: count from what is there.
        let before = objects()[Resource::Services.index()];
        let key = ObjectKey::new("default", "web");
        let path = "spec.unknownTestField".to_string();
        note(Resource::Services, &key, std::slice::from_ref(&path));
        note(Resource::Services, &key, std::slice::from_ref(&path));
        note(Resource::Services, &key, &[]);
        assert_eq!(objects()[Resource::Services.index()], before + 2);
        let met: Vec<_> = paths()
            .into_iter()
            .filter(|(r, p)| *r == Resource::Services && *p == path)
            .collect();
        assert_eq!(met.len(), 1);
    }
}
