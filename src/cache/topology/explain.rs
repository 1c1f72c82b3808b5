//! Why an endpoint is kept or pruned: the match predicate (docs/SEMANTICS.md §2.3) and the §10
//! edge-health check as [`Verdict`]s with a [`Reason`], per endpoint and per endpoint object.
//!
//! These are the functions that prune: [`super::keeps`] is `explain(..).kept`,
//! [`super::on_abnormal_node`] is `!explain_edge_health(..).kept`, and `serve.rs` keeps an endpoint
//! iff [`verdict`] says so. [`explain_endpoints`] and the slice variants walk an object exactly as
//! the `serve_*` functions do (same §3 rewrite check, same §10 applicability, same node of each
//! endpoint), so an explanation can never disagree with what is served.

use serde_json::Value;

use super::{
    address_node, array, rewrite, serve::edge_health_applies, slice_endpoint_node, Class, Locality,
    ServedBy, TopologyKeys,
};

/// Why an endpoint is kept or pruned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason<'k> {
    /// Kept: the endpoint's node and the local node have the same value for this key (§2.3).
    KeyMatches(&'k str),
    /// Kept: the Service has no topology keys (normal or dangling, §2.6), and edge-health does
    /// not report the node abnormal.
    NoTopology,
    /// Pruned: the endpoint names no node (no or empty `nodeName`, no topology hostname).
    NoNodeName,
    /// Pruned: the endpoint's node is not a cached Node.
    UnknownNode,
    /// Pruned: the local node (`--hostname`) is not a cached Node, so a topology Service gets
    /// no endpoints at all.
    LocalNodeUnknown,
    /// Pruned: the local node has none of the keys, so a topology Service gets no endpoints at
    /// all.
    LocalNodeLacksKeys,
    /// Pruned: no key has the same value on the endpoint's node and on the local node.
    NoKeyMatches,
    /// Kept: the Service's keys keep no ready endpoint, and its annotation ends with `*`
    /// (§2.9): every endpoint is served.
    Fallback,
    /// Pruned: ordered mode without `*`, and no key keeps a ready endpoint (§2.9).
    NoKeyKeepsReady,
    /// Pruned: edge-health reports the endpoint's node abnormal (§10).
    EdgeHealthAbnormal,
    /// Not served: `default/kubernetes` is rewritten to the local apiserver (§3), which
    /// replaces every upstream endpoint.
    Rewritten,
}

impl Reason<'_> {
    /// A stable machine-readable name (`KeyMatches`, `NoKeyMatches`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::KeyMatches(_) => "KeyMatches",
            Reason::NoTopology => "NoTopology",
            Reason::NoNodeName => "NoNodeName",
            Reason::UnknownNode => "UnknownNode",
            Reason::LocalNodeUnknown => "LocalNodeUnknown",
            Reason::LocalNodeLacksKeys => "LocalNodeLacksKeys",
            Reason::NoKeyMatches => "NoKeyMatches",
            Reason::Fallback => "Fallback",
            Reason::NoKeyKeepsReady => "NoKeyKeepsReady",
            Reason::EdgeHealthAbnormal => "EdgeHealthAbnormal",
            Reason::Rewritten => "Rewritten",
        }
    }
}

/// Whether an endpoint is served, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict<'k> {
    /// Served (`true`) or pruned.
    pub kept: bool,
    /// Why.
    pub reason: Reason<'k>,
}

const fn pruned(reason: Reason<'_>) -> Verdict<'_> {
    Verdict {
        kept: false,
        reason,
    }
}

/// §2.3 for one endpoint on `endpoint_node` of a topology Service with `keys`.
///
/// Kept iff the local node and the endpoint's node are cached Nodes, the endpoint names a node,
/// and some key has equal values on both. When pruned, the reason names the first failing
/// condition in this order: local node unknown, local node lacks every key, no node name,
/// unknown node, no key matches (the first two empty the whole Service).
pub fn explain<'k>(
    endpoint_node: Option<&str>,
    keys: &'k TopologyKeys,
    loc: &Locality<'_>,
) -> Verdict<'k> {
    explain_among(endpoint_node, keys.set.iter().map(String::as_str), loc)
}

/// [`explain`] over the keys `keys` (all of a Service's, or the one the ordered mode chose).
pub(super) fn explain_among<'k, I>(
    endpoint_node: Option<&str>,
    keys: I,
    loc: &Locality<'_>,
) -> Verdict<'k>
where
    I: Iterator<Item = &'k str> + Clone,
{
    let Some(local) = loc.nodes.get(loc.hostname) else {
        return pruned(Reason::LocalNodeUnknown);
    };
    if !keys.clone().any(|k| local.contains_key(k)) {
        return pruned(Reason::LocalNodeLacksKeys);
    }
    let Some(node) = endpoint_node.filter(|n| !n.is_empty()) else {
        return pruned(Reason::NoNodeName);
    };
    let Some(remote) = loc.nodes.get(node) else {
        return pruned(Reason::UnknownNode);
    };
    let mut keys = keys;
    let matching =
        keys.find(|k| matches!((local.get(k), remote.get(k)), (Some(a), Some(b)) if a == b));
    match matching {
        Some(k) => Verdict {
            kept: true,
            reason: Reason::KeyMatches(k),
        },
        None => pruned(Reason::NoKeyMatches),
    }
}

/// §10 for one endpoint on `endpoint_node`: pruned iff its node is reported abnormal. An
/// endpoint without a node never is.
pub fn explain_edge_health(endpoint_node: Option<&str>, loc: &Locality<'_>) -> Verdict<'static> {
    let abnormal = !loc.abnormal.is_empty()
        && endpoint_node
            .filter(|n| !n.is_empty())
            .is_some_and(|n| loc.abnormal.contains(n));
    if abnormal {
        pruned(Reason::EdgeHealthAbnormal)
    } else {
        Verdict {
            kept: true,
            reason: Reason::NoTopology,
        }
    }
}

/// The verdict `serve.rs` applies to one endpoint: §2.3 as the Service's `decision` says
/// (§2.9) when it is a topology Service, then §10 when `edge_health` applies to the object (see
/// `serve.rs`). A topology verdict that prunes wins over edge-health.
pub fn verdict<'k>(
    endpoint_node: Option<&str>,
    decision: Option<ServedBy<'k>>,
    edge_health: bool,
    loc: &Locality<'_>,
) -> Verdict<'k> {
    let topology = match decision {
        Some(ServedBy::AnyKey(keys)) => explain(endpoint_node, keys, loc),
        Some(ServedBy::Key(key)) => explain_among(endpoint_node, std::iter::once(key), loc),
        Some(ServedBy::Fallback) => Verdict {
            kept: true,
            reason: Reason::Fallback,
        },
        Some(ServedBy::Nothing) => pruned(Reason::NoKeyKeepsReady),
        None => Verdict {
            kept: true,
            reason: Reason::NoTopology,
        },
    };
    if !topology.kept || !edge_health {
        return topology;
    }
    let edge_health = explain_edge_health(endpoint_node, loc);
    if edge_health.kept {
        topology
    } else {
        edge_health
    }
}

/// One endpoint of an endpoint object with its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointVerdict<'k> {
    /// The address (`ip` of an Endpoints address, first of a slice endpoint's `addresses`;
    /// empty when missing).
    pub address: String,
    /// The list it is in: `addresses` / `notReadyAddresses` (Endpoints) or `endpoints`.
    pub list: &'static str,
    /// The node the filter used, if any.
    pub node: Option<String>,
    /// Served or not, and why.
    pub verdict: Verdict<'k>,
}

/// Every endpoint of one upstream endpoint object, in order, with its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectVerdicts<'k> {
    /// §3 applies: the served object holds only the local apiserver endpoint.
    pub rewritten: bool,
    /// The upstream endpoints in object order (subset by subset, `addresses` before
    /// `notReadyAddresses`).
    pub endpoints: Vec<EndpointVerdict<'k>>,
}

/// Verdicts for every address of a core/v1 Endpoints object, as [`super::serve_endpoints`]
/// decides them.
pub fn explain_endpoints<'k>(
    obj: &Value,
    class: Class<'k>,
    loc: &Locality<'_>,
) -> ObjectVerdicts<'k> {
    let rewritten = rewrite::applies(obj, loc, rewrite::Target::Endpoints);
    let keys = class.decision();
    let edge_health = edge_health_applies(obj, loc, false);
    let mut endpoints = Vec::new();
    for subset in array(obj, "subsets") {
        for field in ["addresses", "notReadyAddresses"] {
            for addr in array(subset, field) {
                let node = address_node(addr);
                endpoints.push(EndpointVerdict {
                    address: text(addr.get("ip")),
                    list: field,
                    node: node.map(str::to_string),
                    verdict: if rewritten {
                        pruned(Reason::Rewritten)
                    } else {
                        verdict(node, keys, edge_health, loc)
                    },
                });
            }
        }
    }
    ObjectVerdicts {
        rewritten,
        endpoints,
    }
}

/// Verdicts for every endpoint of a discovery.k8s.io/v1 slice, as [`super::serve_slice_v1`]
/// decides them.
pub fn explain_slice_v1<'k>(
    obj: &Value,
    class: Class<'k>,
    loc: &Locality<'_>,
) -> ObjectVerdicts<'k> {
    explain_slice(obj, class, loc, "deprecatedTopology")
}

/// Verdicts for every endpoint of a v1beta1 slice, as [`super::serve_slice_v1beta1`] decides
/// them.
pub fn explain_slice_v1beta1<'k>(
    obj: &Value,
    class: Class<'k>,
    loc: &Locality<'_>,
) -> ObjectVerdicts<'k> {
    explain_slice(obj, class, loc, "topology")
}

fn explain_slice<'k>(
    obj: &Value,
    class: Class<'k>,
    loc: &Locality<'_>,
    topology_field: &str,
) -> ObjectVerdicts<'k> {
    let rewritten = rewrite::applies(obj, loc, rewrite::Target::Slice);
    let keys = class.decision();
    let edge_health = edge_health_applies(obj, loc, true);
    let endpoints = array(obj, "endpoints")
        .map(|ep| {
            let node = slice_endpoint_node(ep, topology_field);
            EndpointVerdict {
                address: text(ep.get("addresses").and_then(|a| a.get(0))),
                list: "endpoints",
                node: node.map(str::to_string),
                verdict: if rewritten {
                    pruned(Reason::Rewritten)
                } else {
                    verdict(node, keys, edge_health, loc)
                },
            }
        })
        .collect();
    ObjectVerdicts {
        rewritten,
        endpoints,
    }
}

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}
