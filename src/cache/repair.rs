//! The repair rule (docs/SEMANTICS.md §13): a served endpoint object (EndpointSlice v1 or
//! v1beta1, Endpoints) as the container runtimes of the site say their pods are. Pure.
//!
//! An endpoint is a candidate when it sits on a node whose runtime view is known ([`SitePods`]:
//! the local node's own, and with a site relay every reporting node's, §13.1; its node as §2.5
//! reads it, an Endpoints address's `nodeName`) and its `targetRef` is a Pod (kind `Pod` or no
//! kind), in the `targetRef`'s namespace (else the object's). Then, per [`verdict`], against
//! that node's view:
//!
//! - the runtime has a ready sandbox for that namespace/name with an address of the endpoint's
//!   family (a slice's `addressType`; an Endpoints address's own `ip`), and the endpoint's first
//!   address is not that address: the endpoint is served with `[that address]` (one address, as
//!   the EndpointSlice controller writes it, so that the upstream catching up serves the same
//!   bytes);
//! - the runtime knows the pod but has no ready sandbox for it: served not ready (a slice's
//!   `conditions.ready` and `conditions.serving` false; an Endpoints address moved to
//!   `notReadyAddresses`);
//! - anything else — a node without a view, no `targetRef`, a pod the runtime does not know, an FQDN
//!   slice, an address the endpoint already carries, a sandbox without an address of that
//!   family — is served as it is.
//!
//! The uid never decides (a static pod's sandbox carries the kubelet's config hash, a recreated
//! pod a new uid under the same name): it only confirms, in `/debug/topology`. The same object
//! and view always give the same bytes; an object the rule leaves alone is not touched.

use std::net::IpAddr;

use serde_json::Value;

use crate::cache::topology;
use crate::handoff::site_pods::SitePods;
use crate::k8s::{ObjectKey, Resource};

/// What the rule does to one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// Served as it is.
    AsIs,
    /// Served with this address, the runtime's (`uid_confirmed`: the `targetRef.uid` is the
    /// sandbox's).
    Address { ip: IpAddr, uid_confirmed: bool },
    /// Served not ready: the runtime knows the pod without a ready sandbox.
    NotReady,
}

/// How many endpoints of one object [`repair`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Endpoints served with the runtime's address.
    pub addresses: usize,
    /// Endpoints served not ready.
    pub not_ready: usize,
}

impl Outcome {
    /// Whether the object is served as it came.
    pub fn is_none(&self) -> bool {
        self.addresses == 0 && self.not_ready == 0
    }
}

/// The rule for one endpoint: on `node`, pointing at `target_ref`, first address `first` (of
/// family `v6`), in the object of namespace `namespace`, read against the runtime view of its
/// node in `site`.
pub fn verdict(
    node: Option<&str>,
    target_ref: Option<&Value>,
    namespace: &str,
    first: Option<&str>,
    v6: bool,
    site: &SitePods,
) -> Repair {
    let Some(pods) = node.and_then(|n| site.of(n)).filter(|p| !p.is_empty()) else {
        return Repair::AsIs;
    };
    let Some(key) = target_ref.and_then(|t| pod_of(t, namespace)) else {
        return Repair::AsIs;
    };
    match pods.ready.get(&key) {
        Some(pod) => {
            let Some(ip) = pod.first_of(v6) else {
                return Repair::AsIs;
            };
            if first.and_then(|f| f.parse::<IpAddr>().ok()) == Some(ip) {
                return Repair::AsIs;
            }
            let uid = target_ref
                .and_then(|t| t.get("uid"))
                .and_then(Value::as_str);
            Repair::Address {
                ip,
                uid_confirmed: uid == Some(pod.uid.as_str()),
            }
        }
        None if pods.not_ready.contains(&key) => Repair::NotReady,
        None => Repair::AsIs,
    }
}

/// The Pod a `targetRef` names: kind `Pod` (or none), a name, the ref's namespace or else the
/// object's.
fn pod_of(target_ref: &Value, namespace: &str) -> Option<ObjectKey> {
    let kind = target_ref
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("Pod");
    let name = target_ref.get("name").and_then(Value::as_str)?;
    if kind != "Pod" || name.is_empty() {
        return None;
    }
    let ns = target_ref
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(namespace);
    Some(ObjectKey::new(ns, name))
}

/// Applies the rule to every endpoint of the served object `obj` of `kind`, in place; the
/// object is untouched when the outcome is none.
pub fn repair(obj: &mut Value, kind: Resource, site: &SitePods) -> Outcome {
    if site.is_empty() {
        return Outcome::default();
    }
    let namespace = obj
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let at = Local {
        namespace: &namespace,
        site,
    };
    match kind {
        Resource::Endpoints => repair_endpoints(obj, &at),
        Resource::SlicesV1 | Resource::SlicesV1beta1 => {
            repair_slice(obj, topology_field(kind), &at)
        }
        _ => Outcome::default(),
    }
}

/// The rule's verdict for every endpoint of the upstream object `obj` of `kind`, in object
/// order (subset by subset, `addresses` before `notReadyAddresses`; a slice's `endpoints`), as
/// `/debug/topology` lists them.
pub fn verdicts(obj: &Value, kind: Resource, site: &SitePods) -> Vec<Repair> {
    let namespace = obj
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let at = Local { namespace, site };
    let array = |v: &'_ Value, field: &str| -> Vec<Value> {
        v.get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match kind {
        Resource::Endpoints => array(obj, "subsets")
            .iter()
            .flat_map(|subset| {
                let mut all = array(subset, "addresses");
                all.extend(array(subset, "notReadyAddresses"));
                all
            })
            .map(|addr| address_verdict(&addr, &at))
            .collect(),
        Resource::SlicesV1 | Resource::SlicesV1beta1 => {
            let v6 = slice_family(obj);
            array(obj, "endpoints")
                .iter()
                .map(|ep| match v6 {
                    Some(v6) => endpoint_verdict(ep, v6, topology_field(kind), &at),
                    None => Repair::AsIs,
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Where the rule runs: the object's namespace, every node's runtime view.
struct Local<'a> {
    namespace: &'a str,
    site: &'a SitePods,
}

/// The field a slice version keeps its endpoints' hostname in (§2.5).
fn topology_field(kind: Resource) -> &'static str {
    if kind == Resource::SlicesV1 {
        "deprecatedTopology"
    } else {
        "topology"
    }
}

/// A slice's family: `Some(true)` IPv6, `Some(false)` IPv4, `None` (FQDN, unknown) never
/// repaired.
fn slice_family(obj: &Value) -> Option<bool> {
    match obj.get("addressType").and_then(Value::as_str) {
        Some("IPv4") => Some(false),
        Some("IPv6") => Some(true),
        _ => None,
    }
}

/// The rule for one slice endpoint.
fn endpoint_verdict(ep: &Value, v6: bool, topology_field: &str, at: &Local<'_>) -> Repair {
    let first = ep
        .get("addresses")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str);
    let node = topology::slice_endpoint_node(ep, topology_field);
    verdict(node, ep.get("targetRef"), at.namespace, first, v6, at.site)
}

/// The rule for one Endpoints address (as is when its `ip` is not an address).
fn address_verdict(addr: &Value, at: &Local<'_>) -> Repair {
    let ip = addr.get("ip").and_then(Value::as_str);
    let Some(v6) = ip
        .and_then(|i| i.parse::<IpAddr>().ok())
        .map(|i| i.is_ipv6())
    else {
        return Repair::AsIs;
    };
    let node = topology::address_node(addr);
    verdict(node, addr.get("targetRef"), at.namespace, ip, v6, at.site)
}

fn repair_slice(obj: &mut Value, topology_field: &str, at: &Local<'_>) -> Outcome {
    let Some(v6) = slice_family(obj) else {
        return Outcome::default();
    };
    let mut out = Outcome::default();
    let Some(endpoints) = obj.get_mut("endpoints").and_then(Value::as_array_mut) else {
        return out;
    };
    for ep in endpoints {
        match endpoint_verdict(ep, v6, topology_field, at) {
            Repair::AsIs => {}
            Repair::Address { ip, .. } => {
                ep["addresses"] = Value::Array(vec![Value::String(ip.to_string())]);
                out.addresses += 1;
            }
            Repair::NotReady => {
                if !ep.is_object() {
                    continue;
                }
                let conditions = ep.as_object_mut().map(|o| {
                    o.entry("conditions")
                        .or_insert_with(|| Value::Object(Default::default()))
                });
                let Some(Value::Object(c)) = conditions else {
                    continue;
                };
                let already = [c.get("ready"), c.get("serving")]
                    .iter()
                    .all(|v| *v == Some(&Value::Bool(false)));
                if !already {
                    c.insert("ready".into(), Value::Bool(false));
                    c.insert("serving".into(), Value::Bool(false));
                    out.not_ready += 1;
                }
            }
        }
    }
    out
}

fn repair_endpoints(obj: &mut Value, at: &Local<'_>) -> Outcome {
    let mut out = Outcome::default();
    let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) else {
        return out;
    };
    for subset in subsets.iter_mut().filter_map(Value::as_object_mut) {
        let mut moved = Vec::new();
        for field in ["addresses", "notReadyAddresses"] {
            let Some(Value::Array(addrs)) = subset.get_mut(field) else {
                continue;
            };
            let mut kept = Vec::with_capacity(addrs.len());
            for mut addr in std::mem::take(addrs) {
                match address_verdict(&addr, at) {
                    Repair::Address { ip, .. } => {
                        addr["ip"] = Value::String(ip.to_string());
                        out.addresses += 1;
                        kept.push(addr);
                    }
                    Repair::NotReady if field == "addresses" => {
                        out.not_ready += 1;
                        moved.push(addr);
                    }
                    Repair::NotReady | Repair::AsIs => kept.push(addr),
                }
            }
            *addrs = kept;
        }
        if !moved.is_empty() {
            let slot = subset
                .entry("notReadyAddresses")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(not_ready) = slot {
                not_ready.extend(moved);
            }
        }
        if subset
            .get("addresses")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            subset.remove("addresses");
        }
    }
    out
}

#[cfg(test)]
mod tests;
