//! Serving an endpoint object: the class its Service gives it, the local node's view of the
//! cluster, and its served content in each version, published.

use serde_json::Value;

use super::State;
use crate::cache::topology::{self, Class, Locality};
use crate::k8s::{convert, ObjectKey, Resource};

impl State {
    /// The class the Service `service` gives its endpoint objects (docs/SEMANTICS.md §2.6).
    pub(super) fn class_of(&self, service: Option<&ObjectKey>) -> Class<'_> {
        match service {
            Some(svc) => match self.service_keys.get(svc) {
                Some(keys) => Class::Topology(keys),
                None if self.services.contains_key(svc) => Class::Normal,
                None => Class::Dangling,
            },
            None => Class::Dangling,
        }
    }

    /// What the filter knows of the cluster: the local node, node labels, abnormal nodes.
    pub(super) fn locality(&self) -> Locality<'_> {
        Locality {
            hostname: &self.settings.hostname,
            nodes: &self.node_labels,
            wrapper_in_cluster: self.settings.wrapper_in_cluster,
            abnormal: &self.health.abnormal,
        }
    }

    /// Served content of the Endpoints `obj` stored at `key`.
    pub(super) fn serve_endpoints(&self, key: &ObjectKey, obj: Value) -> Value {
        topology::serve_endpoints(obj, self.class_of(Some(key)), &self.locality())
    }

    /// Served content of the upstream slice `obj` (stored at `key`) in version `res`.
    pub(super) fn serve_slice(&self, key: &ObjectKey, obj: Value, res: Resource) -> Value {
        let class = self.class_of(self.slice_owner.get(key));
        let loc = self.locality();
        let v1_upstream = self.slice_kind == Resource::SlicesV1;
        match (res, v1_upstream) {
            (Resource::SlicesV1, true) => topology::serve_slice_v1(obj, class, &loc),
            (Resource::SlicesV1, false) => {
                topology::serve_slice_v1(convert::slice_v1beta1_to_v1(&obj), class, &loc)
            }
            (_, true) => {
                topology::serve_slice_v1beta1(convert::slice_v1_to_v1beta1(&obj), class, &loc)
            }
            (_, false) => topology::serve_slice_v1beta1(obj, class, &loc),
        }
    }

    /// Publishes the served versions of a slice (a change reaches the v1 stream, and the
    /// v1beta1 stream once v1beta1 is served).
    pub(super) fn publish_slice(&mut self, key: &ObjectKey, obj: Value, now: u64) {
        // v1 first (the order RVs are drawn in); a copy only while v1beta1 is served too.
        let beta = self.v1beta1.then(|| obj.clone());
        let served = self.serve_slice(key, obj, Resource::SlicesV1);
        self.publish(Resource::SlicesV1, key, Some(served), now);
        if let Some(obj) = beta {
            let served = self.serve_slice(key, obj, Resource::SlicesV1beta1);
            self.publish(Resource::SlicesV1beta1, key, Some(served), now);
        }
    }
}
