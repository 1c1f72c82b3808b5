//! Publication without a `Value` for an endpoint object of a listed list: no node is reported
//! abnormal (docs/SEMANTICS.md §10) and it is not `default/kubernetes` (§3). If its Service has no
//! topology keys, its served bytes are its upstream bytes with the resourceVersion stamp spliced
//! into `metadata`; a topology Service's v1 slice has its pruned endpoints, and the `hints` of the
//! kept ones, cut out of those bytes first (§2.3, §2.4), and its Endpoints their pruned addresses
//! and the lists left empty (§2.4). What the indexes, the filter and the view need (its nodes, each
//! endpoint's node and place, its Service, its labels) was read off the lock when the list item was
//! made canonical ([`AsIs`]). That is the common case for a list's slices, which otherwise are
//! decoded into a `Value` again under the lock, filtered and serialized again. In debug builds
//! every publication through here is checked against the `Value` path.
//!
//! One of the binder's routes: an `impl` of [`State`] that takes an object through the parts
//! (kept by [`super::upstream`], indexed by [`super::index`], published by [`super::publisher`]).

use super::{State, Stored};
use crate::cache::canonical::{AsIs, Item};
use crate::cache::topology::{self, Class};
use crate::cache::view::Served;
use crate::k8s::{ObjectKey, Resource};

impl State {
    /// Upserts a listed endpoint object without a `Value` when it is served as it came;
    /// `false` (nothing done) when it is not, or its bytes need the `Value` path.
    pub(super) fn upsert_as_is(
        &mut self,
        kind: Resource,
        key: &ObjectKey,
        bytes: &super::Raw,
        mut facts: AsIs,
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
        let keep: Option<Vec<bool>> = match filter.class_of(service) {
            Class::Topology(keys) => {
                let loc = filter.locality();
                let kept =
                    |node: Option<&str>| topology::verdict(node, Some(keys), false, &loc).kept;
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
        // A pruned object keeps its upstream bytes: packed off the lock when the list was
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
                self.upsert_as_is(kind, key, &bytes, facts, now)
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
        bytes: &super::Raw,
        facts: &AsIs,
        keep: &[bool],
    ) {
        let value = super::parse(bytes).expect("bytes this process made");
        let mut want = match res {
            Resource::Endpoints => self.filter().serve_endpoints(key, value),
            _ => self.filter().serve_slice(key, value, res),
        };
        let want = super::publisher::finish(res, &mut want, 1234);
        assert_eq!(
            facts.pruned(bytes, keep, 1234).as_deref(),
            Some(&want[..]),
            "a topology {res:?} object pruned on its bytes is what the Value path serves"
        );
    }
}

#[cfg(test)]
mod tests;
