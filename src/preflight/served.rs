//! What grid-wrapper would serve on this node, computed by the cache itself: the fetched lists
//! go into a [`State`] exactly as the reflectors' first lists do (each item's JSON text through
//! the cache's list taker, [`State::apply_list`], per resource; EndpointSlice version pinned),
//! and the served collections are read back; with the container runtime's view of the local
//! pods, the repair rule ([`repair::repair`], docs/SEMANTICS.md §13) is applied to each served
//! endpoint object and what it would change counted. Pure.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cache::collection::{Collection, Retention};
use crate::cache::repair;
use crate::cache::store::{Settings, State};
use crate::cache::topology;
use crate::handoff::runtime_pods::RuntimePods;
use crate::k8s::{ObjectKey, Resource};

use super::model::{Count, RepairCounts, ServedCounts};

/// Per topology Service: (EndpointSlice endpoints, Endpoints addresses), and the served totals.
#[derive(Debug)]
pub(super) struct Computed {
    pub(super) per_service: BTreeMap<ObjectKey, (Count, Count)>,
    pub(super) served: ServedCounts,
    /// What the repair rule would change; `None` without a runtime view.
    pub(super) repairs: Option<RepairCounts>,
}

/// Endpoints of an EndpointSlice (either version).
fn slice_endpoints(slice: &Value) -> usize {
    slice
        .get("endpoints")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// Addresses, ready or not, of a core/v1 Endpoints.
fn endpoints_addresses(ep: &Value) -> usize {
    ep.get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            ["addresses", "notReadyAddresses"]
                .iter()
                .filter_map(|f| s.get(*f).and_then(Value::as_array))
                .map(Vec::len)
                .sum::<usize>()
        })
        .sum()
}

fn parse(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

/// Feeds `[nodes, services, endpoints, slices]` into a fresh cache for `hostname` and counts,
/// for each Service in `services_of_interest`, the endpoints it keeps out of those upstream.
/// Upstream objects the cache does not serve (outside kube-proxy's selector, nameless) count
/// in neither number. With `pods` (the runtime's view), the endpoints of the served objects the
/// repair rule would change are counted too.
pub(super) fn compute<'k>(
    hostname: &str,
    wrapper_in_cluster: bool,
    slice_kind: Resource,
    lists: [&Vec<Value>; 4],
    services_of_interest: impl Iterator<Item = &'k ObjectKey>,
    pods: Option<&RuntimePods>,
) -> Computed {
    let settings = Settings {
        hostname: hostname.to_string(),
        wrapper_in_cluster,
        // No watcher reads the event log: keep as little of it as possible.
        retention: Retention {
            min_entries: 1,
            max_entries: 1,
            window_secs: 0,
            max_bytes: 0,
        },
    };
    let mut state = State::new(settings, 0);
    state.expect_slices(slice_kind);
    if slice_kind == Resource::SlicesV1beta1 {
        state.serve_v1beta1();
    }
    let [nodes, services, endpoints, slices] = lists;
    for (kind, items) in [
        (Resource::Nodes, nodes),
        (Resource::Services, services),
        (Resource::Endpoints, endpoints),
        (slice_kind, slices),
    ] {
        state.apply_list(kind, items.iter().map(Value::to_string), 0);
    }
    let slice_res = slice_kind;
    let view = state.view();
    let view = view.read();
    let served_slices = view.collection(slice_res);
    let served_endpoints = view.collection(Resource::Endpoints);

    let mut per_service: BTreeMap<ObjectKey, (Count, Count)> = services_of_interest
        .map(|k| (k.clone(), (Count::default(), Count::default())))
        .collect();
    for slice in slices {
        let (Some(key), Some(owner)) = (ObjectKey::of(slice), topology::slice_service(slice))
        else {
            continue;
        };
        let (Some((count, _)), Some(served)) =
            (per_service.get_mut(&owner), served_slices.get(&key))
        else {
            continue;
        };
        count.total += slice_endpoints(slice);
        count.kept += parse(&served.json()).map_or(0, |v| slice_endpoints(&v));
    }
    for ep in endpoints {
        let Some(key) = ObjectKey::of(ep) else {
            continue;
        };
        let (Some((_, count)), Some(served)) =
            (per_service.get_mut(&key), served_endpoints.get(&key))
        else {
            continue;
        };
        count.total += endpoints_addresses(ep);
        count.kept += parse(&served.json()).map_or(0, |v| endpoints_addresses(&v));
    }
    let repairs = pods.map(|pods| {
        let mut counts = RepairCounts::default();
        let site = crate::handoff::site_pods::SitePods::local(hostname, pods.clone());
        let served_objects = |items: &[Value], collection: &Collection| {
            items
                .iter()
                .filter_map(ObjectKey::of)
                .filter_map(|key| collection.get(&key).and_then(|o| parse(&o.json())))
                .collect::<Vec<Value>>()
        };
        for mut obj in served_objects(slices, served_slices) {
            let o = repair::repair(&mut obj, slice_kind, &site);
            counts.endpoint_slice_addresses += o.addresses;
            counts.endpoint_slice_not_ready += o.not_ready;
        }
        for mut obj in served_objects(endpoints, served_endpoints) {
            let o = repair::repair(&mut obj, Resource::Endpoints, &site);
            counts.endpoints_addresses += o.addresses;
            counts.endpoints_not_ready += o.not_ready;
        }
        counts
    });
    Computed {
        repairs,
        per_service,
        served: ServedCounts {
            nodes: view.collection(Resource::Nodes).len(),
            services: view.collection(Resource::Services).len(),
            endpoints: served_endpoints.len(),
            endpointslices: served_slices.len(),
        },
    }
}
