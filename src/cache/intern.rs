//! One shared copy of each string that repeats across cached objects: namespaces and names of
//! object keys (a Service's name is also its Endpoints' name and its slices' owner), node names,
//! and the label keys and values of Nodes (the same few keys, and many values, on every Node).
//!
//! Pure data, owned by the cache's one writer ([`crate::cache::store::State`]); no lock, no I/O.
//! A string nothing else holds any more is forgotten in passing, so the set stays within a
//! constant factor of the strings in use.

use std::collections::HashSet;
use std::sync::Arc;

use crate::k8s::ObjectKey;

/// The set of shared strings: [`Interner::get`] gives the one copy of a string.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    /// The set's size at which the strings no one else holds are forgotten.
    sweep_at: usize,
}

/// The smallest [`Interner::sweep_at`]: a small set is never swept.
const MIN_SWEEP: usize = 1024;

impl Interner {
    /// The shared copy of `s` (made on first use).
    pub fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return Arc::clone(shared);
        }
        if self.strings.len() >= self.sweep_at {
            self.sweep();
        }
        let shared: Arc<str> = Arc::from(s);
        self.strings.insert(Arc::clone(&shared));
        shared
    }

    /// `key` with its namespace and name the shared copies.
    pub fn key(&mut self, key: &ObjectKey) -> ObjectKey {
        ObjectKey {
            namespace: self.get(&key.namespace),
            name: self.get(&key.name),
        }
    }

    /// Forgets the strings held by nothing but the set; the next sweep comes once the set has
    /// doubled again (so that sweeping stays a constant cost per string added).
    pub fn sweep(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.strings.shrink_to_fit();
        self.sweep_at = (2 * self.strings.len()).max(MIN_SWEEP);
    }

    /// How many strings are held.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether no string is held.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_copy() {
        let mut names = Interner::default();
        let a = names.get("default");
        let b = names.get(&String::from("default"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "default");
        assert!(!Arc::ptr_eq(&a, &names.get("kube-system")));
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn keys_share_their_namespace_and_a_name_used_elsewhere() {
        let mut names = Interner::default();
        let service = names.key(&ObjectKey::new("default", "web"));
        let slice = names.key(&ObjectKey::new("default", "web-abcde"));
        let endpoints = names.key(&ObjectKey::new("default", "web"));
        assert_eq!(endpoints, ObjectKey::new("default", "web"));
        assert!(Arc::ptr_eq(&service.namespace, &slice.namespace));
        assert!(Arc::ptr_eq(&service.name, &endpoints.name));
        assert!(!Arc::ptr_eq(&service.name, &slice.name));
    }

    #[test]
    fn interned_labels_equal_the_originals_and_share_their_strings() {
        use crate::cache::collection::LabelSet;
        let mut names = Interner::default();
        let node = |zone: &str| serde_json::json!({"metadata": {"labels": {"zone": zone, "kubernetes.io/os": "linux", "n": 1}}});
        let a = LabelSet::of_interned(&node("z1"), &mut names);
        let b = LabelSet::of(&node("z1")).interned(&mut names);
        assert_eq!(a, LabelSet::of(&node("z1")));
        assert_eq!(a.get("zone"), Some("z1"));
        assert_eq!(a.len(), 2, "a value that is not a string is no label");
        for ((ka, va), (kb, vb)) in a.pairs().zip(b.pairs()) {
            assert!(Arc::ptr_eq(ka, kb) && Arc::ptr_eq(va, vb));
        }
    }

    #[test]
    fn a_sweep_forgets_only_the_strings_no_one_holds() {
        let mut names = Interner::default();
        let kept = names.get("kept");
        drop(names.get("dropped"));
        names.sweep();
        assert_eq!(names.len(), 1);
        assert!(Arc::ptr_eq(&kept, &names.get("kept")));
    }

    #[test]
    fn strings_no_one_holds_do_not_pile_up() {
        let mut names = Interner::default();
        let held: Vec<Arc<str>> = (0..100).map(|i| names.get(&format!("held-{i}"))).collect();
        for i in 0..100_000 {
            drop(names.get(&format!("gone-{i}")));
        }
        assert!(names.len() <= 2 * MIN_SWEEP, "{} strings held", names.len());
        for (i, s) in held.iter().enumerate() {
            assert!(Arc::ptr_eq(s, &names.get(&format!("held-{i}"))));
        }
    }
}
