//! Topology pruning of Endpoints and EndpointSlices, as pure functions over `serde_json::Value`.
//! The rules are those of docs/SEMANTICS.md §2, §3 and §10; every § below is a section of that
//! file.
//!
//! This module owns the rules: parsing a Service's `topologyKeys` annotation (§2.1) and OpenYurt's
//! `openyurt.io/topologyKeys` (mapped onto the same keys, see [`openyurt`]; `topologyKeys` wins
//! when both give keys, see [`service_topology`]), the match predicate (§2.3), slice → Service
//! association (§2.6), the filtering of core/v1 Endpoints and of both EndpointSlice versions (§2.4,
//! §2.5, §5) and the `default/kubernetes` local-apiserver rewrite (§3), and the optional
//! edge-health filter (§10: endpoints on nodes in [`Locality::abnormal`] are dropped; the map
//! itself is `cache::edge_health`'s). Every keep/prune decision is a [`Verdict`] with a [`Reason`]
//! (`explain.rs`), which `/debug/topology` reports. It does not own resource versions, events or
//! indexes (the cache does) and never touches `metadata.resourceVersion`. Every served object is
//! the input with only the documented changes; unknown fields and the order of kept entries are
//! preserved. Malformed input never panics: a malformed endpoint has no node (so a topology service
//! drops it), other malformed parts are left as they are.

mod explain;
mod fallback;
pub mod openyurt;
mod rewrite;
mod serve;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_edge_health;
#[cfg(test)]
mod tests_explain;
#[cfg(test)]
mod tests_fallback;
#[cfg(test)]
mod tests_openyurt;
#[cfg(test)]
mod tests_slices;

pub use explain::{
    explain, explain_edge_health, explain_endpoints, explain_slice_v1, explain_slice_v1beta1,
    verdict, EndpointVerdict, ObjectVerdicts, Reason, Verdict,
};
pub use fallback::{endpoint_states, Choice, EndpointState, ServedBy};
pub use openyurt::OpenYurtTopology;
pub use serve::{serve_endpoints, serve_slice_v1, serve_slice_v1beta1};

use std::collections::{BTreeMap, BTreeSet};

use log::{debug, warn};
use serde_json::Value;

use crate::cache::collection::LabelSet;
use crate::k8s::ObjectKey;

/// The Service annotation holding the topology keys (§2.1). No prefix.
pub const TOPOLOGY_KEYS_ANNOTATION: &str = "topologyKeys";
/// The Service annotation switching `topologyKeys` to the ordered mode (§2.1, §2.9). No prefix.
pub const TOPOLOGY_MODE_ANNOTATION: &str = "topologyMode";
/// The value of [`TOPOLOGY_MODE_ANNOTATION`] that selects the ordered mode.
pub const ORDERED_MODE: &str = "ordered";
/// The value of [`TOPOLOGY_MODE_ANNOTATION`] that selects the default mode (any key, §2.3).
pub const ANY_MODE: &str = "any";
/// The last element of `topologyKeys` that asks for the fallback to every endpoint (§2.9). Not
/// a valid label key, so no node can carry it.
pub const FALLBACK_KEY: &str = "*";
/// The EndpointSlice label naming its Service (§2.6).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Well-known node hostname label, also the topology key v1beta1 consumers read (§2.5).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Well-known zone label, the v1beta1 topology key that v1 moved to `zone` (§5).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A parsed `topologyKeys` annotation (with its `topologyMode`): node label keys, of which an
/// endpoint's node must share one with the local node (§2.3), and the §2.9 extensions. Without
/// them (no trailing `*`, default mode) the keys are compared as a set: order and duplicates do
/// not matter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyKeys {
    /// The label keys, the trailing `*` excepted (a `*` elsewhere is a literal key).
    pub set: BTreeSet<String>,
    /// Ordered mode (§2.9): the keys in annotation order, each once; empty in the default mode.
    pub order: Vec<String>,
    /// The annotation ends with `*` (§2.9): when the keys keep no ready endpoint, every
    /// endpoint is served.
    pub fallback: bool,
}

impl TopologyKeys {
    /// The strict rule over `set` (§2.3): no fallback, default mode.
    pub fn any(set: BTreeSet<String>) -> Self {
        TopologyKeys {
            set,
            order: Vec::new(),
            fallback: false,
        }
    }

    /// The keys as the annotation lists them: in order in the ordered mode (else sorted), then
    /// `*` when it falls back.
    pub fn listed(&self) -> Vec<String> {
        let mut list = match self.ordered() {
            true => self.order.clone(),
            false => self.set.iter().cloned().collect(),
        };
        if self.fallback {
            list.push(FALLBACK_KEY.to_string());
        }
        list
    }

    /// Whether the ordered mode applies (§2.9).
    pub fn ordered(&self) -> bool {
        !self.order.is_empty()
    }

    /// Whether what is served depends on the readiness of the Service's endpoints (§2.9): a
    /// trailing `*` or the ordered mode. Otherwise each endpoint is decided alone (§2.3).
    pub fn dynamic(&self) -> bool {
        self.fallback || self.ordered()
    }
}

/// What a Service's `topologyKeys` annotation says (§2.1) — or, from [`service_keys`], both of its
/// topology annotations together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeysAnnotation {
    /// No annotations, key absent, `[]` or `null` (OpenYurt's: absent, `null` or `""`): a
    /// normal service.
    Absent,
    /// A non-empty array of label keys (or a valid OpenYurt value): a topology service.
    Keys(TopologyKeys),
    /// Unusable value (not JSON, not an array, non-string elements, not a string; for
    /// OpenYurt's, not one of its three values): treated as absent. The text says why; the
    /// caller logs it (the parsers do not).
    Invalid(String),
}

impl KeysAnnotation {
    /// The keys, if any. Two annotations "changed" (§6.2) iff their `keys()` differ: `Absent` and
    /// `Invalid` both mean "no keys".
    pub fn keys(&self) -> Option<&TopologyKeys> {
        match self {
            KeysAnnotation::Keys(k) => Some(k),
            KeysAnnotation::Absent | KeysAnnotation::Invalid(_) => None,
        }
    }
}

/// The effective keys of a Service from both annotations (see [`service_topology`]): `Keys`
/// from whichever wins, else `Invalid` when an annotation was unusable, else `Absent`.
pub fn service_keys(service: &Value) -> KeysAnnotation {
    service_topology(service).keys
}

/// Which annotation a Service's keys come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeysSource {
    /// grid-wrapper's (SuperEdge's) own `topologyKeys` (§2.1).
    TopologyKeys,
    /// OpenYurt's `openyurt.io/topologyKeys`, with its value.
    OpenYurt(OpenYurtTopology),
}

impl std::fmt::Display for KeysSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeysSource::TopologyKeys => f.write_str(TOPOLOGY_KEYS_ANNOTATION),
            KeysSource::OpenYurt(m) => {
                write!(
                    f,
                    "{}={}",
                    openyurt::OPENYURT_TOPOLOGY_ANNOTATION,
                    m.value()
                )
            }
        }
    }
}

/// What a Service's two topology annotations say together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceTopology {
    /// The effective annotation (what [`service_keys`] returns).
    pub keys: KeysAnnotation,
    /// Where the keys come from, when there are keys.
    pub source: Option<KeysSource>,
    /// Unusable annotations that were ignored, one reason each: the caller warns.
    pub warnings: Vec<String>,
    /// Set when `openyurt.io/topologyKeys` was present but `topologyKeys` won: the caller logs
    /// it at debug.
    pub shadowed: Option<String>,
}

/// Reads both annotations of a Service and decides which applies.
///
/// **Precedence:** `topologyKeys` wins whenever it gives keys (it is the annotation
/// grid-wrapper was built for, and SuperEdge's controller writes it); the OpenYurt annotation is
/// then ignored (reported in `shadowed`). Otherwise — `topologyKeys` absent, `[]`, `null` or
/// invalid (an invalid annotation counts as absent, §2.1) — `openyurt.io/topologyKeys` applies if
/// valid. Each invalid annotation that did not lose to a valid `topologyKeys` is reported in
/// `warnings`.
pub fn service_topology(service: &Value) -> ServiceTopology {
    let own = topology_keys_annotation(service);
    let yurt = openyurt::parse(service);
    let mut out = ServiceTopology {
        keys: KeysAnnotation::Absent,
        source: None,
        warnings: Vec::new(),
        shadowed: None,
    };
    if let KeysAnnotation::Keys(keys) = own {
        if let Err(why) = topology_mode(service) {
            out.warnings.push(why);
        }
        if keys.set.contains(FALLBACK_KEY) {
            out.warnings.push(format!(
                "annotation {TOPOLOGY_KEYS_ANNOTATION}: \"{FALLBACK_KEY}\" before the last element is read as \
                 a label key, which no node can carry (only a last \"{FALLBACK_KEY}\" is the fallback)"
            ));
        }
        if !matches!(yurt, Ok(None)) {
            out.shadowed = Some(format!(
                "annotation {} is ignored: {TOPOLOGY_KEYS_ANNOTATION} takes precedence",
                openyurt::OPENYURT_TOPOLOGY_ANNOTATION
            ));
        }
        out.keys = KeysAnnotation::Keys(keys);
        out.source = Some(KeysSource::TopologyKeys);
        return out;
    }
    if let KeysAnnotation::Invalid(why) = own {
        out.warnings.push(why);
    }
    match yurt {
        Ok(Some(mode)) => {
            out.keys = KeysAnnotation::Keys(mode.keys());
            out.source = Some(KeysSource::OpenYurt(mode));
        }
        Ok(None) => {}
        Err(why) => out.warnings.push(why),
    }
    if out.source.is_none() && !out.warnings.is_empty() {
        out.keys = KeysAnnotation::Invalid(out.warnings.join("; "));
    }
    out
}

/// The keys of the Service `key` (see [`service_topology`]), logging each ignored invalid
/// annotation as a warning and a shadowed OpenYurt annotation at debug. The cache calls it once
/// per changed Service object, so a warning repeats only when the Service changes.
pub fn service_keys_logged(key: &ObjectKey, service: &Value) -> Option<TopologyKeys> {
    let topo = service_topology(service);
    for why in &topo.warnings {
        warn!("service {key}: ignoring {why}");
    }
    if let Some(note) = &topo.shadowed {
        debug!("service {key}: {note}");
    }
    match topo.keys {
        KeysAnnotation::Keys(k) => Some(k),
        KeysAnnotation::Absent | KeysAnnotation::Invalid(_) => None,
    }
}

/// Reads the Service's own `metadata.annotations.topologyKeys` (§2.1), ignoring OpenYurt's.
/// `[]`/`null` → Absent.
pub fn topology_keys_annotation(service: &Value) -> KeysAnnotation {
    let raw = match service
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(TOPOLOGY_KEYS_ANNOTATION))
    {
        None | Some(Value::Null) => return KeysAnnotation::Absent,
        Some(Value::String(s)) => s,
        Some(_) => {
            return KeysAnnotation::Invalid(format!(
                "annotation {TOPOLOGY_KEYS_ANNOTATION} is not a string"
            ))
        }
    };
    let parsed: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(e) => {
            return KeysAnnotation::Invalid(format!(
                "annotation {TOPOLOGY_KEYS_ANNOTATION}={raw:?} is not JSON: {e}"
            ))
        }
    };
    let items = match parsed {
        Value::Null => return KeysAnnotation::Absent,
        Value::Array(items) => items,
        _ => {
            return KeysAnnotation::Invalid(format!(
                "annotation {TOPOLOGY_KEYS_ANNOTATION}={raw:?} is not a JSON array"
            ))
        }
    };
    let mut listed = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::String(k) => listed.push(k),
            _ => {
                return KeysAnnotation::Invalid(format!(
                    "annotation {TOPOLOGY_KEYS_ANNOTATION}={raw:?} has a non-string element"
                ))
            }
        }
    }
    if listed.is_empty() {
        return KeysAnnotation::Absent;
    }
    // §2.9: a last `*` is the fallback; a `*` anywhere else stays the literal key it always was.
    let fallback = listed.last().is_some_and(|k| k == FALLBACK_KEY);
    if fallback {
        listed.pop();
    }
    let mut set = BTreeSet::new();
    let mut order = Vec::new();
    let ordered = topology_mode(service) == Ok(true);
    for k in listed {
        if set.insert(k.clone()) && ordered {
            order.push(k);
        }
    }
    KeysAnnotation::Keys(TopologyKeys {
        set,
        order,
        fallback,
    })
}

/// Reads `metadata.annotations.topologyMode` (§2.1): `Ok(true)` for `ordered`, `Ok(false)` when
/// absent, `null`, `""` or `any`, `Err(why)` for anything else (then the default mode applies,
/// the meaning `topologyKeys` had before the mode existed).
pub fn topology_mode(service: &Value) -> Result<bool, String> {
    match service
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(TOPOLOGY_MODE_ANNOTATION))
    {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(s)) if s == ORDERED_MODE => Ok(true),
        Some(Value::String(s)) if s.is_empty() || s == ANY_MODE => Ok(false),
        Some(other) => Err(format!(
            "annotation {TOPOLOGY_MODE_ANNOTATION}={other} is not \"{ORDERED_MODE}\" or \"{ANY_MODE}\""
        )),
    }
}

/// What the filter needs to know about the world.
#[derive(Clone, Copy, Debug)]
pub struct Locality<'a> {
    /// The local node `H` (`--hostname`).
    pub hostname: &'a str,
    /// Every cached Node with its labels.
    pub nodes: &'a BTreeMap<String, LabelSet>,
    /// `--wrapper-in-cluster` (enables the §3 rewrite).
    pub wrapper_in_cluster: bool,
    /// Node names edge-health reports abnormal (§10, resolved by `cache::edge_health`): endpoints on
    /// them are dropped from every endpoint object except `default/kubernetes`, whatever its
    /// class. Empty when the feature is off or nothing is reported abnormal.
    pub abnormal: &'a BTreeSet<String>,
}

/// How an endpoint object is served, from its Service (§2.6).
#[derive(Clone, Copy, Debug)]
pub enum Class<'a> {
    /// No such Service cached: served unfiltered.
    Dangling,
    /// Service cached without (valid) keys: served unfiltered.
    Normal,
    /// Service cached with keys: filtered as they decide (§2.3, §2.9).
    Topology(ServedBy<'a>),
}

impl<'a> Class<'a> {
    /// Classifies from the cached Service's parsed annotation (`None` = no Service cached);
    /// `endpoints` are those the §2.9 decision is taken over (read only when the keys are
    /// [`TopologyKeys::dynamic`]).
    pub fn of(
        service: Option<&'a KeysAnnotation>,
        endpoints: &[EndpointState<'_>],
        loc: &Locality<'_>,
    ) -> Self {
        match service {
            None => Class::Dangling,
            Some(annotation) => match annotation.keys() {
                Some(keys) => Class::Topology(keys.choose(endpoints, loc).decision),
                None => Class::Normal,
            },
        }
    }

    /// What a topology Service's endpoints are filtered by; `None` for normal and dangling.
    pub fn decision(self) -> Option<ServedBy<'a>> {
        match self {
            Class::Topology(decision) => Some(decision),
            Class::Normal | Class::Dangling => None,
        }
    }
}

/// §2.3 match predicate: [`explain`]`(..).kept`.
pub fn keeps(endpoint_node: Option<&str>, keys: &TopologyKeys, loc: &Locality<'_>) -> bool {
    explain(endpoint_node, keys, loc).kept
}

/// §10: whether an endpoint on `endpoint_node` sits on a node reported abnormal
/// (`!`[`explain_edge_health`]`(..).kept`). An endpoint without a node never does.
pub fn on_abnormal_node(endpoint_node: Option<&str>, loc: &Locality<'_>) -> bool {
    !explain_edge_health(endpoint_node, loc).kept
}

/// Whether the `default/kubernetes` rewrite (§3) may apply to the endpoint object `key`: when it
/// cannot, an object whose Service has no keys and with no abnormal node is served as it came.
pub fn may_rewrite(key: &ObjectKey, loc: &Locality<'_>) -> bool {
    rewrite::may_apply(&key.namespace, &key.name, loc)
}

/// The Service an EndpointSlice belongs to: label `kubernetes.io/service-name` in the slice's
/// namespace (§2.6).
pub fn slice_service(slice: &Value) -> Option<ObjectKey> {
    let meta = slice.get("metadata")?;
    let name = meta.get("labels")?.get(SERVICE_NAME_LABEL)?.as_str()?;
    if name.is_empty() {
        return None;
    }
    let namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    Some(ObjectKey::new(namespace, name))
}

/// Names of the nodes the object's endpoints sit on (for the cache's by-node index); works for Endpoints and both slice versions.
///
/// Endpoints: every non-empty `nodeName` of `addresses` and `notReadyAddresses`. Slices: per
/// endpoint, `nodeName` if non-empty, else `topology` / `deprecatedTopology`
/// `kubernetes.io/hostname` — the node the filter of either version uses.
pub fn endpoint_nodes(obj: &Value) -> BTreeSet<String> {
    let mut nodes = BTreeSet::new();
    for subset in array(obj, "subsets") {
        for field in ["addresses", "notReadyAddresses"] {
            for addr in array(subset, field) {
                if let Some(n) = address_node(addr) {
                    nodes.insert(n.to_string());
                }
            }
        }
    }
    for ep in array(obj, "endpoints") {
        let node = slice_endpoint_node(ep, "topology")
            .or_else(|| slice_endpoint_node(ep, "deprecatedTopology"));
        if let Some(n) = node {
            nodes.insert(n.to_string());
        }
    }
    nodes
}

/// The elements of `obj[field]` if it is an array, else nothing.
fn array<'v>(obj: &'v Value, field: &str) -> impl Iterator<Item = &'v Value> {
    obj.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Node of a core/v1 `EndpointAddress`: its non-empty string `nodeName`.
pub(crate) fn address_node(addr: &Value) -> Option<&str> {
    non_empty_str(addr.get("nodeName"))
}

/// Node of a slice endpoint: non-empty `nodeName`, else `<topology_field>["kubernetes.io/hostname"]`
/// (`topology` in v1beta1, `deprecatedTopology` in v1).
pub(crate) fn slice_endpoint_node<'v>(ep: &'v Value, topology_field: &str) -> Option<&'v str> {
    non_empty_str(ep.get("nodeName"))
        .or_else(|| non_empty_str(ep.get(topology_field).and_then(|t| t.get(HOSTNAME_LABEL))))
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}
