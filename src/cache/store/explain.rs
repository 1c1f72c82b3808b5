//! The cache's side of `/debug/topology`: why each endpoint of a Service is kept or pruned, as
//! plain data ([`Overview`], [`ServiceExplanation`]). Pure; the server only formats.
//!
//! The verdicts come from the functions that prune ([`topology::explain_endpoints`],
//! [`topology::explain_slice_v1`]), fed with what the served objects were computed from: the
//! stored upstream object, its Service's stored keys, node labels, `--hostname`, the edge-health
//! set. An explanation therefore cannot disagree with what is served.
//!
//! Two steps, so that the writer (which every change waits for) spends its time only on the
//! copy: [`super::State::overview_input`] / [`super::State::explain_input`] take shared
//! object bytes, served resourceVersions and the labels of the nodes concerned (only the keys in
//! play) — no parsing; then [`ExplainInput::overview`] / [`ExplainInput::explain`] parse and
//! evaluate on the asking thread. Slices are explained in their discovery.k8s.io/v1 view (converted
//! first when the upstream serves v1beta1, as for serving; both views keep the same endpoints).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::index::Target;
use super::publisher::Publisher;
use super::serve::TopologyInputs;
use super::upstream::StandIn;
use super::{parse, Raw};
use crate::cache::collection::LabelSet;
use crate::cache::repair::{self, Repair};
use crate::cache::topology::{
    self, Class, Locality, ObjectVerdicts, Reason, TopologyKeys, FALLBACK_KEY,
};
use crate::handoff::site_pods::SitePods;
use crate::k8s::{convert, ObjectKey, Resource};

/// Most abnormal node names an [`Overview`] lists.
pub const MAX_ABNORMAL_LISTED: usize = 100;

/// One upstream endpoint object and its served resourceVersion.
#[derive(Clone, Debug)]
struct ObjectInput {
    name: String,
    raw: Raw,
    served_rv: Option<u64>,
}

/// One Service (cached or not) and its endpoint objects.
#[derive(Clone, Debug)]
struct ServiceInput {
    key: ObjectKey,
    service: Option<Raw>,
    keys: Option<TopologyKeys>,
    endpoints: Option<ObjectInput>,
    slices: Vec<ObjectInput>,
}

/// What explaining needs, copied from the cache under its lock (cheap: shared bytes and a few
/// labels); evaluated later without it.
#[derive(Clone, Debug)]
pub struct ExplainInput {
    hostname: String,
    wrapper_in_cluster: bool,
    /// The local node and every node an endpoint of the selected objects sits on (if cached),
    /// with only the labels whose key some selected Service filters by.
    nodes: BTreeMap<String, LabelSet>,
    abnormal: BTreeSet<String>,
    /// The container runtimes' views, by node (§13).
    runtime: SitePods,
    v1beta1_upstream: bool,
    services: Vec<ServiceInput>,
    /// Topology Services in the cache (the overview may hold fewer).
    topology_services: usize,
}

/// `GET /debug/topology`: every topology Service, with kept/total counts.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// `--hostname`.
    pub local_node: String,
    /// Whether the local node is a cached Node (if not, every topology Service is empty).
    pub local_node_known: bool,
    /// Nodes edge-health reports abnormal (the first [`MAX_ABNORMAL_LISTED`] by name).
    pub abnormal_nodes: Vec<String>,
    /// How many nodes edge-health reports abnormal.
    pub abnormal_node_count: usize,
    /// Topology Services in the cache.
    pub topology_services: usize,
    /// The first of them, by namespace/name.
    pub services: Vec<ServiceSummary>,
    /// Fewer `services` than `topology_services` (the row limit).
    pub truncated: bool,
}

/// One topology Service in the [`Overview`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSummary {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node label keys it filters by.
    pub keys: Vec<String>,
    /// The annotation the keys come from (`topologyKeys`, `openyurt.io/topologyKeys=…`).
    pub source: String,
    /// The local node's value for each key (`null`: label absent or node unknown).
    pub local_values: BTreeMap<String, Option<String>>,
    /// Over its core/v1 Endpoints object (`addresses` and `notReadyAddresses`), if cached.
    pub endpoints: Option<Counts>,
    /// Over its discovery.k8s.io/v1 EndpointSlices (their `endpoints`), if any.
    pub endpoint_slices: Option<Counts>,
    /// What its slices are filtered by, and why, for a Service with a fallback or the ordered
    /// mode (docs/SEMANTICS.md §2.9).
    pub decision: Option<String>,
}

/// Kept and total endpoints over some objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Endpoints served.
    pub kept: usize,
    /// Endpoints upstream.
    pub total: usize,
    /// Objects counted.
    pub objects: usize,
}

/// `GET /debug/topology/<namespace>/<service>`: every endpoint of its Endpoints and slices.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExplanation {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `--hostname`.
    pub local_node: String,
    /// Whether the local node is a cached Node.
    pub local_node_known: bool,
    /// `topology`, `normal` (no keys: not filtered by topology) or `dangling` (no Service
    /// cached: not filtered by topology).
    pub class: &'static str,
    /// The keys (empty unless `topology`).
    pub keys: Vec<String>,
    /// The annotation the keys come from.
    pub source: Option<String>,
    /// The local node's value for each key.
    pub local_values: BTreeMap<String, Option<String>>,
    /// Notes on the Service: no topology, ignored annotations, precedence.
    pub notes: Vec<String>,
    /// What its Endpoints object is filtered by, and why, for a Service with a fallback or the
    /// ordered mode (docs/SEMANTICS.md §2.9): it decides from its own addresses.
    pub endpoints_decision: Option<String>,
    /// What its slices are filtered by, and why: one decision over all of them.
    pub slices_decision: Option<String>,
    /// Its Endpoints object, then its slices by name.
    pub objects: Vec<ObjectReport>,
    /// Endpoint rows listed (over all objects).
    pub rows: usize,
    /// Rows left out by the row limit (the counts still cover them).
    pub omitted_rows: usize,
    /// `omitted_rows > 0`.
    pub truncated: bool,
}

/// One endpoint object of a [`ServiceExplanation`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `Endpoints` or `EndpointSlice`.
    pub kind: &'static str,
    /// `v1` or `discovery.k8s.io/v1` (the view explained).
    pub api_version: &'static str,
    /// `metadata.name`.
    pub name: String,
    /// The resourceVersion grid-wrapper serves it with (`null` if not served).
    pub resource_version: Option<String>,
    /// `default/kubernetes` rewritten to the local apiserver (docs/SEMANTICS.md §3): no upstream
    /// endpoint served.
    pub rewritten: bool,
    /// Endpoints served.
    pub kept: usize,
    /// Endpoints upstream.
    pub total: usize,
    /// Its endpoints (up to the row limit).
    pub endpoints: Vec<EndpointRow>,
}

/// One endpoint and its verdict.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRow {
    /// IP (first address of a slice endpoint).
    pub address: String,
    /// `addresses`, `notReadyAddresses` or `endpoints`.
    pub list: &'static str,
    /// The node the filter used.
    pub node: Option<String>,
    /// That node's value for each key (empty for an unknown node or without topology).
    pub node_values: BTreeMap<String, Option<String>>,
    /// Served or pruned.
    pub kept: bool,
    /// [`Reason::code`].
    pub reason: &'static str,
    /// The reason in words.
    pub message: String,
    /// The runtime repair's verdict (docs/SEMANTICS.md §13), when it changes the endpoint:
    /// `address from the runtime: <ip>` or `not ready: the runtime has no ready sandbox`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
}

impl ExplainInput {
    /// Copies what explaining the Services `keys` needs from the filter's inputs and the served
    /// view: shared object bytes, served resourceVersions, the labels of the nodes concerned.
    pub(super) fn gather(
        filter: &TopologyInputs<'_>,
        publisher: &Publisher,
        keys: Vec<ObjectKey>,
    ) -> ExplainInput {
        let settings = filter.settings;
        let index = filter.index;
        let by = StandIn::new(publisher, filter.slice_kind);
        let upstream_bytes = |kind, key: &ObjectKey| filter.upstream.bytes(kind, key, by);
        let mut node_names: BTreeSet<&str> = BTreeSet::from([settings.hostname.as_str()]);
        let mut label_keys: BTreeSet<&str> = BTreeSet::new();
        let mut services = Vec::with_capacity(keys.len());
        for key in keys {
            let filter_keys = index.service_keys().get(&key);
            label_keys.extend(
                filter_keys
                    .iter()
                    .flat_map(|k| k.set.iter().map(String::as_str)),
            );
            let mut object = |target: Target, raw: &Raw| {
                let (res, key) = match &target {
                    Target::Endpoints(k) => (Resource::Endpoints, k),
                    Target::Slice(k) => (Resource::SlicesV1, k),
                };
                let served_rv = publisher.collection(res).get(key).map(|s| s.rv);
                let name = key.name.to_string();
                node_names.extend(index.nodes_of(&target));
                ObjectInput {
                    name,
                    raw: raw.clone(),
                    served_rv,
                }
            };
            let endpoints = upstream_bytes(Resource::Endpoints, &key)
                .map(|raw| object(Target::Endpoints(key.clone()), &raw));
            let slices = (index.slices_of(&key).iter())
                .filter_map(|s| {
                    let raw = upstream_bytes(filter.slice_kind, s)?;
                    Some(object(Target::Slice(s.clone()), &raw))
                })
                .collect();
            services.push(ServiceInput {
                service: upstream_bytes(Resource::Services, &key),
                keys: filter_keys.cloned(),
                endpoints,
                slices,
                key,
            });
        }
        let nodes = node_names
            .into_iter()
            .filter_map(|n| {
                let labels = index.node_labels().get(n)?;
                let kept = labels
                    .pairs()
                    .filter(|(k, _)| label_keys.contains(&**k))
                    .cloned()
                    .collect();
                Some((n.to_string(), kept))
            })
            .collect();
        ExplainInput {
            hostname: settings.hostname.clone(),
            wrapper_in_cluster: settings.wrapper_in_cluster,
            nodes,
            abnormal: filter.abnormal.clone(),
            runtime: filter.runtime.clone(),
            v1beta1_upstream: filter.slice_kind == Resource::SlicesV1beta1,
            services,
            topology_services: index.service_keys().len(),
        }
    }
}

impl ExplainInput {
    fn locality(&self) -> Locality<'_> {
        Locality {
            hostname: &self.hostname,
            nodes: &self.nodes,
            wrapper_in_cluster: self.wrapper_in_cluster,
            abnormal: &self.abnormal,
        }
    }

    /// Every topology Service copied, with kept/total over its Endpoints and its v1 slices.
    pub fn overview(&self) -> Overview {
        let loc = self.locality();
        let services = self
            .services
            .iter()
            .map(|svc| {
                let classes = self.classes(svc, &loc);
                let count = |objs: &mut dyn Iterator<Item = ObjectVerdicts<'_>>| {
                    objs.fold(Counts::default(), |c, o| Counts {
                        kept: c.kept + o.endpoints.iter().filter(|e| e.verdict.kept).count(),
                        total: c.total + o.endpoints.len(),
                        objects: c.objects + 1,
                    })
                };
                let endpoints = svc.endpoints.as_ref().map(|o| {
                    count(
                        &mut self
                            .endpoints_verdicts(o, classes.endpoints, &loc)
                            .into_iter(),
                    )
                });
                let slices = (!svc.slices.is_empty()).then(|| {
                    count(
                        &mut svc
                            .slices
                            .iter()
                            .filter_map(|o| self.slice_verdicts(o, classes.slices, &loc)),
                    )
                });
                let (_, source, _) = svc.annotations();
                ServiceSummary {
                    namespace: svc.key.namespace.to_string(),
                    name: svc.key.name.to_string(),
                    keys: key_list(svc.keys.as_ref()),
                    source: source.unwrap_or_default(),
                    local_values: self.values_of(&self.hostname, svc.keys.as_ref()),
                    endpoints,
                    endpoint_slices: slices,
                    decision: classes.slices_why,
                }
            })
            .collect::<Vec<_>>();
        Overview {
            local_node: self.hostname.clone(),
            local_node_known: self.nodes.contains_key(&self.hostname),
            abnormal_nodes: self
                .abnormal
                .iter()
                .take(MAX_ABNORMAL_LISTED)
                .cloned()
                .collect(),
            abnormal_node_count: self.abnormal.len(),
            topology_services: self.topology_services,
            truncated: services.len() < self.topology_services,
            services,
        }
    }

    /// The (first) Service copied, endpoint by endpoint, listing at most `max_rows` rows.
    pub fn explain(&self, max_rows: usize) -> ServiceExplanation {
        let loc = self.locality();
        let mut rows = 0;
        let mut omitted = 0;
        let mut objects = Vec::new();
        let svc = self.services.first();
        let classes = svc.map_or_else(Classes::dangling, |s| self.classes(s, &loc));
        let class = classes.endpoints;
        let keys = svc.and_then(|s| s.keys.as_ref());
        let mut report = |kind, api_version, obj: &ObjectInput, verdicts: ObjectVerdicts<'_>| {
            let kept = verdicts.endpoints.iter().filter(|e| e.verdict.kept).count();
            let total = verdicts.endpoints.len();
            let listed = total.min(max_rows - rows.min(max_rows));
            rows += listed;
            omitted += total - listed;
            let repairs = self.repairs(kind, obj);
            let endpoints = verdicts
                .endpoints
                .into_iter()
                .zip(repairs.into_iter().chain(std::iter::repeat(Repair::AsIs)))
                .take(listed)
                .map(|(e, fix)| EndpointRow {
                    runtime: runtime_words(fix),
                    message: self.message(e.verdict.reason, e.node.as_deref(), class),
                    node_values: match &e.node {
                        Some(n) if self.nodes.contains_key(n) => self.values_of(n, keys),
                        _ => BTreeMap::new(),
                    },
                    address: e.address,
                    list: e.list,
                    node: e.node,
                    kept: e.verdict.kept,
                    reason: e.verdict.reason.code(),
                })
                .collect();
            objects.push(ObjectReport {
                kind,
                api_version,
                name: obj.name.clone(),
                resource_version: obj.served_rv.map(|rv| rv.to_string()),
                rewritten: verdicts.rewritten,
                kept,
                total,
                endpoints,
            });
        };
        if let Some(svc) = svc {
            if let Some(o) = &svc.endpoints {
                if let Some(v) = self.endpoints_verdicts(o, class, &loc) {
                    report("Endpoints", "v1", o, v);
                }
            }
            for o in &svc.slices {
                if let Some(v) = self.slice_verdicts(o, classes.slices, &loc) {
                    report("EndpointSlice", "discovery.k8s.io/v1", o, v);
                }
            }
        }
        let (mut notes, source, class_name) = match svc {
            Some(s) => s.annotations(),
            None => (Vec::new(), None, "dangling"),
        };
        if class_name == "dangling" {
            notes.push("no such Service cached: its endpoint objects are served without topology filtering".into());
        }
        ServiceExplanation {
            namespace: svc.map(|s| s.key.namespace.to_string()).unwrap_or_default(),
            name: svc.map(|s| s.key.name.to_string()).unwrap_or_default(),
            local_node: self.hostname.clone(),
            local_node_known: self.nodes.contains_key(&self.hostname),
            class: class_name,
            keys: key_list(keys),
            source,
            local_values: self.values_of(&self.hostname, keys),
            notes,
            endpoints_decision: classes.endpoints_why,
            slices_decision: classes.slices_why,
            objects,
            rows,
            omitted_rows: omitted,
            truncated: omitted > 0,
        }
    }

    fn endpoints_verdicts<'k>(
        &self,
        obj: &ObjectInput,
        class: Class<'k>,
        loc: &Locality<'_>,
    ) -> Option<ObjectVerdicts<'k>> {
        let value = parse(&obj.raw)?;
        Some(topology::explain_endpoints(&value, class, loc))
    }

    /// The runtime repair's verdict for each endpoint of `obj` (a `kind` of the report), in
    /// the order the topology verdicts list them.
    fn repairs(&self, kind: &str, obj: &ObjectInput) -> Vec<Repair> {
        let Some(mut value) = parse(&obj.raw) else {
            return Vec::new();
        };
        let res = if kind == "Endpoints" {
            Resource::Endpoints
        } else {
            if self.v1beta1_upstream {
                value = convert::slice_v1beta1_to_v1(&value);
            }
            Resource::SlicesV1
        };
        repair::verdicts(&value, res, &self.runtime)
    }

    fn slice_verdicts<'k>(
        &self,
        obj: &ObjectInput,
        class: Class<'k>,
        loc: &Locality<'_>,
    ) -> Option<ObjectVerdicts<'k>> {
        let mut value = parse(&obj.raw)?;
        if self.v1beta1_upstream {
            value = convert::slice_v1beta1_to_v1(&value);
        }
        Some(topology::explain_slice_v1(&value, class, loc))
    }

    /// `node`'s value for each key (`null` when it lacks the label).
    fn values_of(
        &self,
        node: &str,
        keys: Option<&TopologyKeys>,
    ) -> BTreeMap<String, Option<String>> {
        let labels = self.nodes.get(node);
        keys.into_iter()
            .flat_map(|k| k.set.iter())
            .map(|k| (k.clone(), labels.and_then(|l| l.get(k)).map(str::to_string)))
            .collect()
    }

    fn message(&self, reason: Reason<'_>, node: Option<&str>, class: Class<'_>) -> String {
        let h = &self.hostname;
        let n = node.unwrap_or("");
        match reason {
            Reason::KeyMatches(k) => {
                let v = self.nodes.get(h).and_then(|l| l.get(k)).unwrap_or("");
                format!("same {k}={v:?} as the local node {h}")
            }
            Reason::NoTopology => match class {
                Class::Dangling => "no Service cached: not filtered by topology".into(),
                _ => "the Service has no topology keys: not filtered by topology".into(),
            },
            Reason::NoNodeName => "the endpoint names no node".into(),
            Reason::UnknownNode => format!("node {n} is not a cached Node"),
            Reason::LocalNodeUnknown => {
                format!("the local node {h} is not a cached Node: a topology Service gets no endpoints")
            }
            Reason::LocalNodeLacksKeys => {
                format!("the local node {h} has none of the keys: a topology Service gets no endpoints")
            }
            Reason::NoKeyMatches => format!("no key has the same value on {n} as on the local node {h}"),
            Reason::Fallback => format!("the keys keep no ready endpoint: fallback {FALLBACK_KEY} serves every endpoint"),
            Reason::NoKeyKeepsReady => "ordered mode: no key keeps a ready endpoint, and there is no fallback".into(),
            Reason::EdgeHealthAbnormal => format!("edge-health reports node {n} abnormal"),
            Reason::Rewritten => {
                "default/kubernetes is rewritten to the local apiserver: upstream endpoints are not served".into()
            }
        }
    }
}

/// The classes of a Service's Endpoints object and of its slices, with their §2.9 decisions in
/// words (docs/SEMANTICS.md §2.9: the Endpoints object decides from its own addresses, the
/// slices together).
struct Classes<'k> {
    endpoints: Class<'k>,
    slices: Class<'k>,
    endpoints_why: Option<String>,
    slices_why: Option<String>,
}

impl Classes<'_> {
    fn dangling() -> Self {
        Classes {
            endpoints: Class::Dangling,
            slices: Class::Dangling,
            endpoints_why: None,
            slices_why: None,
        }
    }
}

impl ExplainInput {
    /// [`Classes`] of `svc`, decided as serving decides (the objects parsed again).
    fn classes<'s>(&self, svc: &'s ServiceInput, loc: &Locality<'_>) -> Classes<'s> {
        let Some(keys) = &svc.keys else {
            let class = match svc.service {
                Some(_) => Class::Normal,
                None => Class::Dangling,
            };
            return Classes {
                endpoints: class,
                slices: class,
                ..Classes::dangling()
            };
        };
        let choose = |objects: &mut dyn Iterator<Item = &ObjectInput>| {
            if !keys.dynamic() {
                return keys.choose(&[], loc); // the strict rule reads no endpoint
            }
            let values: Vec<_> = objects.filter_map(|o| parse(&o.raw)).collect();
            let states: Vec<_> = values.iter().flat_map(topology::endpoint_states).collect();
            keys.choose(&states, loc)
        };
        let of_endpoints = choose(&mut svc.endpoints.iter());
        let of_slices = choose(&mut svc.slices.iter());
        Classes {
            endpoints: Class::Topology(of_endpoints.decision),
            slices: Class::Topology(of_slices.decision),
            endpoints_why: (keys.dynamic() && svc.endpoints.is_some())
                .then(|| of_endpoints.describe()),
            slices_why: (keys.dynamic() && !svc.slices.is_empty()).then(|| of_slices.describe()),
        }
    }
}

impl ServiceInput {
    /// (notes, source, class name) from the Service's annotations (parsed again: the stored
    /// keys came from the same bytes, so the two agree).
    fn annotations(&self) -> (Vec<String>, Option<String>, &'static str) {
        let Some(svc) = self.service.as_ref().and_then(parse) else {
            return (Vec::new(), None, "dangling");
        };
        let topo = topology::service_topology(&svc);
        let mut notes: Vec<String> = topo
            .warnings
            .iter()
            .map(|w| format!("ignored {w}"))
            .collect();
        notes.extend(topo.shadowed);
        if let Some(keys) = &self.keys {
            if keys.ordered() {
                notes.push("topologyMode: ordered: the first key that keeps a ready endpoint decides, alone".into());
            }
            if keys.fallback {
                notes.push(format!(
                    "a last \"{FALLBACK_KEY}\": every endpoint when the keys keep no ready one"
                ));
            }
            return (notes, topo.source.map(|s| s.to_string()), "topology");
        }
        let none =
            "no topology keys: endpoints are not filtered by topology (only edge-health applies)";
        notes.insert(0, none.into());
        (notes, None, "normal")
    }
}

fn key_list(keys: Option<&TopologyKeys>) -> Vec<String> {
    keys.map(TopologyKeys::listed).unwrap_or_default()
}

#[cfg(test)]
mod tests;

/// A repair verdict in `/debug/topology`'s words; `None` when the endpoint is served as it is.
fn runtime_words(fix: Repair) -> Option<String> {
    match fix {
        Repair::AsIs => None,
        Repair::Address { ip, uid_confirmed } => Some(format!(
            "address from the runtime: {ip}{}",
            if uid_confirmed {
                " (uid confirmed)"
            } else {
                ""
            }
        )),
        Repair::NotReady => Some("not ready: the runtime has no ready sandbox".into()),
    }
}
