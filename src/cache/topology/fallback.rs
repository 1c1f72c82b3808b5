//! The `*` fallback and the ordered mode of `topologyKeys` (docs/SEMANTICS.md §2.9): which keys
//! a topology Service's endpoints are filtered by, decided once for a set of endpoints (an
//! Endpoints object's, or every EndpointSlice of the Service) from their readiness.
//!
//! A Service whose keys are not [`TopologyKeys::dynamic`] always decides [`ServedBy::AnyKey`]
//! without looking at an endpoint (the strict rule of §2.3). The others count, for each candidate,
//! the *available* endpoints it keeps: ready (`ready` not false: an Endpoints `addresses` entry, a
//! slice endpoint whose `conditions.ready` is not `false`) and not on a node edge-health reports
//! abnormal (§10), since those are dropped whatever the keys say.

use serde_json::Value;

use super::explain::explain_among;
use super::{address_node, array, slice_endpoint_node, Locality, TopologyKeys, FALLBACK_KEY};

/// One endpoint as the decision sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointState<'v> {
    /// The node the filter uses for it (§2.5).
    pub node: Option<&'v str>,
    /// `ready` is not false.
    pub ready: bool,
}

/// What a topology Service's endpoints are filtered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedBy<'k> {
    /// Any of the keys (§2.3): the strict rule, and the default mode's choice when the keys
    /// keep a ready endpoint.
    AnyKey(&'k TopologyKeys),
    /// Ordered mode: this key alone, the first that keeps a ready endpoint.
    Key(&'k str),
    /// The trailing `*`: every endpoint.
    Fallback,
    /// Ordered mode without `*`, and no key keeps a ready endpoint: none.
    Nothing,
}

impl ServedBy<'_> {
    /// A short stable name (`any`, `key:<key>`, `*`, `none`): equal names, equal decisions
    /// for the same keys.
    pub fn name(&self) -> String {
        match self {
            ServedBy::AnyKey(_) => "any".into(),
            ServedBy::Key(k) => format!("key:{k}"),
            ServedBy::Fallback => FALLBACK_KEY.into(),
            ServedBy::Nothing => "none".into(),
        }
    }
}

/// A decision and how it was reached, for `/debug/topology`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice<'k> {
    /// The decision.
    pub decision: ServedBy<'k>,
    /// Each candidate tried, in order, with the available endpoints it keeps: one key at a
    /// time in the ordered mode, all keys together otherwise. Empty for keys that are not
    /// dynamic (nothing was counted).
    pub tried: Vec<(String, usize)>,
    /// Available endpoints (ready, on no abnormal node).
    pub ready: usize,
    /// All endpoints.
    pub total: usize,
}

impl Choice<'_> {
    /// One line saying which candidate decided and why, e.g. `zone kept 0 ready of 3; fallback
    /// *: all 3`.
    pub fn describe(&self) -> String {
        if self.tried.is_empty() {
            return "strict: any key (no fallback, default mode)".into();
        }
        let mut parts: Vec<String> = self
            .tried
            .iter()
            .map(|(what, kept)| format!("{what} kept {kept} ready of {}", self.ready))
            .collect();
        parts.push(match self.decision {
            ServedBy::AnyKey(_) => "served by any key".into(),
            ServedBy::Key(k) => format!("served by {k}"),
            ServedBy::Fallback => format!("fallback {FALLBACK_KEY}: all {}", self.total),
            ServedBy::Nothing => "no fallback: nothing served".into(),
        });
        parts.join("; ")
    }
}

impl TopologyKeys {
    /// §2.9: what `endpoints` (the whole set the decision covers) are filtered by.
    pub fn choose<'k>(&'k self, endpoints: &[EndpointState<'_>], loc: &Locality<'_>) -> Choice<'k> {
        let total = endpoints.len();
        if !self.dynamic() {
            return Choice {
                decision: ServedBy::AnyKey(self),
                tried: Vec::new(),
                ready: 0,
                total,
            };
        }
        let available: Vec<Option<&str>> = endpoints
            .iter()
            .filter(|e| e.ready && !e.node.is_some_and(|n| loc.abnormal.contains(n)))
            .map(|e| e.node)
            .collect();
        let mut tried = Vec::new();
        let mut decision = None;
        let kept = |keys: &mut dyn FnMut(Option<&str>) -> bool| {
            available.iter().filter(|n| keys(**n)).count()
        };
        if self.ordered() {
            for key in &self.order {
                let n =
                    kept(&mut |node| explain_among(node, std::iter::once(key.as_str()), loc).kept);
                tried.push((key.clone(), n));
                if n > 0 {
                    decision = Some(ServedBy::Key(key));
                    break;
                }
            }
        } else if !self.set.is_empty() {
            let n = kept(&mut |node| {
                explain_among(node, self.set.iter().map(String::as_str), loc).kept
            });
            let names: Vec<&str> = self.set.iter().map(String::as_str).collect();
            tried.push((names.join(","), n));
            if n > 0 {
                decision = Some(ServedBy::AnyKey(self));
            }
        }
        if tried.is_empty() {
            // `["*"]` alone: no key to try.
            tried.push(("(no key)".into(), 0));
        }
        let decision = decision.unwrap_or(if self.fallback {
            ServedBy::Fallback
        } else {
            ServedBy::Nothing
        });
        Choice {
            decision,
            tried,
            ready: available.len(),
            total,
        }
    }
}

/// Every endpoint of an Endpoints object (`addresses` ready, `notReadyAddresses` not) or of a
/// slice of either version (`conditions.ready` not `false`), with its node (§2.5).
pub fn endpoint_states(obj: &Value) -> Vec<EndpointState<'_>> {
    let mut out = Vec::new();
    for subset in array(obj, "subsets") {
        for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for addr in array(subset, field) {
                out.push(EndpointState {
                    node: address_node(addr),
                    ready,
                });
            }
        }
    }
    for ep in array(obj, "endpoints") {
        let node = slice_endpoint_node(ep, "deprecatedTopology")
            .or_else(|| slice_endpoint_node(ep, "topology"));
        let ready = ep.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false);
        out.push(EndpointState { node, ready });
    }
    out
}
