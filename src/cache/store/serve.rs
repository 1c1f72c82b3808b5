//! What the topology filter sees when it serves an endpoint object ([`Filter`]): the class its
//! Service gives it, the local node's view of the cluster (node labels, `--hostname`, the
//! edge-health set), and the served content in each EndpointSlice version. A borrowed view of the
//! parts, made for one computation; it holds no state of its own, so what it serves and what
//! `/debug/topology` explains ([`super::explain`]) come from the same inputs.

use std::collections::BTreeSet;

use serde_json::Value;

use super::index::Index;
use super::upstream::UpstreamObjects;
use super::Settings;
use crate::cache::topology::{self, Class, Locality};
use crate::k8s::{convert, ObjectKey, Resource};

/// The inputs of the filter, borrowed from the cache's parts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Filter<'a> {
    pub(super) settings: &'a Settings,
    pub(super) index: &'a Index,
    pub(super) upstream: &'a UpstreamObjects,
    /// The nodes edge-health resolved abnormal.
    pub(super) abnormal: &'a BTreeSet<String>,
    /// The EndpointSlice version the upstream provides.
    pub(super) slice_kind: Resource,
}

impl<'a> Filter<'a> {
    /// The class the Service `service` gives its endpoint objects (docs/SEMANTICS.md §2.6).
    pub(super) fn class_of(&self, service: Option<&ObjectKey>) -> Class<'a> {
        match service {
            Some(svc) => match self.index.service_keys().get(svc) {
                Some(keys) => Class::Topology(keys),
                None if self.upstream.contains(Resource::Services, svc) => Class::Normal,
                None => Class::Dangling,
            },
            None => Class::Dangling,
        }
    }

    /// What the filter knows of the cluster: the local node, node labels, abnormal nodes.
    pub(super) fn locality(&self) -> Locality<'a> {
        Locality {
            hostname: &self.settings.hostname,
            nodes: self.index.node_labels(),
            wrapper_in_cluster: self.settings.wrapper_in_cluster,
            abnormal: self.abnormal,
        }
    }

    /// Served content of the Endpoints `obj` stored at `key`.
    pub(super) fn serve_endpoints(&self, key: &ObjectKey, obj: Value) -> Value {
        topology::serve_endpoints(obj, self.class_of(Some(key)), &self.locality())
    }

    /// Served content of the upstream slice `obj` (stored at `key`) in version `res`.
    pub(super) fn serve_slice(&self, key: &ObjectKey, obj: Value, res: Resource) -> Value {
        let class = self.class_of(self.index.owner_of(key));
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
}
