//! What the topology filter sees when it serves an endpoint object ([`TopologyInputs`]): the class its
//! Service gives it, the local node's view of the cluster (node labels, `--hostname`, the
//! edge-health set), and the served content in each EndpointSlice version. A borrowed view of the
//! parts, made for one computation; it holds no state of its own, so what it serves and what
//! `/debug/topology` explains ([`super::explain`]) come from the same inputs.

use std::collections::BTreeSet;

use serde_json::Value;

use super::index::Index;
use super::upstream::{StandIn, UpstreamObjects};
use super::Settings;
use crate::cache::repair::{self, Outcome};
use crate::cache::topology::{self, Choice, Class, Locality, TopologyKeys};
use crate::handoff::site_pods::SitePods;
use crate::k8s::{convert, ObjectKey, Resource};

/// The inputs of the filter, borrowed from the cache's parts.
#[derive(Clone, Copy, Debug)]
pub(super) struct TopologyInputs<'a> {
    pub(super) settings: &'a Settings,
    pub(super) index: &'a Index,
    pub(super) upstream: &'a UpstreamObjects,
    /// The nodes edge-health resolved abnormal.
    pub(super) abnormal: &'a BTreeSet<String>,
    /// The container runtimes' views, by node (§13).
    pub(super) runtime: &'a SitePods,
    /// The EndpointSlice version the upstream provides.
    pub(super) slice_kind: Resource,
    /// The served objects that stand in for stored upstream ones (a slice's siblings, §2.9).
    pub(super) stand_in: StandIn<'a>,
}

/// The endpoints a §2.9 decision is taken over (docs/SEMANTICS.md §2.9): an Endpoints object
/// decides from its own addresses; the slices of a Service share one decision, from all of them.
#[derive(Clone, Copy, Debug)]
pub(super) enum EndpointScope<'v> {
    /// The Endpoints object being served.
    Endpoints(&'v Value),
    /// Every stored slice of the Service.
    Slices,
}

impl<'a> TopologyInputs<'a> {
    /// The keys of the Service `service`, if it is a topology Service.
    pub(super) fn keys_of(&self, service: Option<&ObjectKey>) -> Option<&'a TopologyKeys> {
        self.index.service_keys().get(service?)
    }

    /// The class the Service `service` gives its endpoint objects (docs/SEMANTICS.md §2.6), with
    /// the §2.9 decision over `scope` for a topology Service.
    pub(super) fn class_of(
        &self,
        service: Option<&ObjectKey>,
        scope: EndpointScope<'_>,
    ) -> Class<'a> {
        match service {
            Some(svc) => match self.keys_of(Some(svc)) {
                Some(keys) => Class::Topology(self.choose(svc, keys, scope).decision),
                None if self.upstream.contains(Resource::Services, svc) => Class::Normal,
                None => Class::Dangling,
            },
            None => Class::Dangling,
        }
    }

    /// The §2.9 decision of the topology Service `svc` over `scope`. Only dynamic keys read the
    /// endpoints; for slices, every stored slice of the Service is read again (a Service has
    /// few slices, and only the opt-in rules pay for it).
    pub(super) fn choose(
        &self,
        svc: &ObjectKey,
        keys: &'a TopologyKeys,
        scope: EndpointScope<'_>,
    ) -> Choice<'a> {
        let loc = self.locality();
        if !keys.dynamic() {
            return keys.choose(&[], &loc);
        }
        // The readiness the decision weighs is the served one: a pod the runtime of its node
        // knows without a ready sandbox (§13) counts as not ready.
        let repaired = |mut obj: Value, res: Resource| {
            repair::repair(&mut obj, res, self.runtime);
            obj
        };
        match scope {
            EndpointScope::Endpoints(obj) if !self.runtime.is_empty() => {
                let obj = repaired(obj.clone(), Resource::Endpoints);
                keys.choose(&topology::endpoint_states(&obj), &loc)
            }
            EndpointScope::Endpoints(obj) => keys.choose(&topology::endpoint_states(obj), &loc),
            EndpointScope::Slices => {
                let slices: Vec<Value> = self
                    .index
                    .slices_of(svc)
                    .iter()
                    .filter_map(|k| self.upstream.value(self.slice_kind, k, self.stand_in))
                    .map(|v| match self.runtime.is_empty() {
                        true => v,
                        false => repaired(v, self.slice_kind),
                    })
                    .collect();
                let states: Vec<_> = slices.iter().flat_map(topology::endpoint_states).collect();
                keys.choose(&states, &loc)
            }
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

    /// Served content of the Endpoints `obj` stored at `key`, and what the runtime repair rule
    /// (§13) changed in it, after the topology and edge-health filters.
    pub(super) fn serve_endpoints(&self, key: &ObjectKey, obj: Value) -> (Value, Outcome) {
        let class = self.class_of(Some(key), EndpointScope::Endpoints(&obj));
        let served = topology::serve_endpoints(obj, class, &self.locality());
        self.repaired(Resource::Endpoints, served)
    }

    /// Served content of the upstream slice `obj` (stored at `key`) in version `res`, and what
    /// the runtime repair rule (§13) changed in it.
    pub(super) fn serve_slice(
        &self,
        key: &ObjectKey,
        obj: Value,
        res: Resource,
    ) -> (Value, Outcome) {
        let served = self.filtered_slice(key, obj, res);
        self.repaired(res, served)
    }

    /// `served` after the runtime repair rule (§13).
    fn repaired(&self, res: Resource, mut served: Value) -> (Value, Outcome) {
        let outcome = repair::repair(&mut served, res, self.runtime);
        (served, outcome)
    }

    /// The upstream slice `obj` in version `res`, through the topology and edge-health filters.
    fn filtered_slice(&self, key: &ObjectKey, obj: Value, res: Resource) -> Value {
        let class = self.class_of(self.index.owner_of(key), EndpointScope::Slices);
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
