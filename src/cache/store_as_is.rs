//! Publication without a `Value` for an endpoint object served exactly as it came: its Service
//! has no topology keys, no node is reported abnormal (§10) and it is not `default/kubernetes`
//! (§8). Its served bytes are then its upstream bytes with the resourceVersion stamp spliced
//! into `metadata`, and what the indexes and the view need (its nodes, its Service, its labels)
//! was read off the lock when the list item was made canonical ([`AsIs`]). At scale S that is
//! half the slices of a list, which otherwise are decoded into a `Value` again under the lock
//! and serialized again. In debug builds every publication through here is checked against the
//! `Value` path.

use super::{State, Stored};
use crate::cache::canonical::AsIs;
use crate::cache::topology::{self, Class};
use crate::cache::view::Served;
use crate::k8s::{ObjectKey, Resource};
use crate::upstream::kind::UpstreamKind;

impl State {
    /// Upserts a listed endpoint object without a `Value` when it is served as it came;
    /// `false` (nothing done) when it is not, or its bytes need the `Value` path.
    pub(super) fn upsert_as_is(
        &mut self,
        kind: UpstreamKind,
        key: &ObjectKey,
        bytes: &super::Raw,
        facts: AsIs,
        now: u64,
    ) -> bool {
        let res = match kind {
            UpstreamKind::Endpoints => Resource::Endpoints,
            UpstreamKind::SlicesV1 if self.slice_kind == kind && !self.v1beta1 => {
                Resource::SlicesV1
            }
            _ => return false,
        };
        if topology::may_rewrite(key, &self.locality()) || !self.health.abnormal.is_empty() {
            return false;
        }
        let service = match kind {
            UpstreamKind::Endpoints => Some(key),
            _ => facts.service.as_ref(),
        };
        if matches!(self.class_of(service), Class::Topology(_)) {
            return false;
        }
        // The stamp's place is checked before anything changes (it cannot be off in bytes this
        // process made; this only keeps a wrong splice from ever being served).
        if facts.stamp_at > bytes.len() {
            return false;
        }
        #[cfg(debug_assertions)]
        facts.check(bytes).expect("the fast path's contract");
        self.keep_endpoint_object(
            kind,
            key,
            Stored::Own(bytes.clone()),
            facts.nodes.clone(),
            facts.service.clone(),
        );
        let make = |rv: u64| {
            let served = facts.stamped(bytes, rv).unwrap_or_default();
            Served::from_parts(key.clone(), rv, served, facts.labels.clone())
        };
        self.publish_with(res, key, Some(make), now);
        self.settle(kind, key);
        true
    }
}

#[cfg(test)]
#[path = "store_as_is_tests.rs"]
mod tests;
