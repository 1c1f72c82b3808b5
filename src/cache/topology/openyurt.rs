//! OpenYurt's Service annotation `openyurt.io/topologyKeys`, mapped onto the same pruning
//! (docs/SEMANTICS.md §2.2, §2.3).
//!
//! # What OpenYurt does
//!
//! Read in yurthub's filter (openyurtio/openyurt: `pkg/yurthub/filter/servicetopology/filter.go`,
//! every version in the index, up to the `filter/base` refactor) and its user manual
//! (openyurt.io/docs/user-manuals/network/service-topology, v1.2–v1.4 and "next"):
//!
//! - The value is **one plain string**, compared exactly (`svc.Annotations[...] == ...`, or
//!   `sets.Has`) with `kubernetes.io/hostname`, `openyurt.io/nodepool` or `kubernetes.io/zone`.
//!   It is not JSON and not a list: several values are only a TODO (yurt-manager's
//!   `servicetopology/adapter`: `"kubernetes.io/hostname, openyurt.io/nodepool, *"`). Any
//!   other value, or an empty one, means "no topology".
//! - `kubernetes.io/hostname`: only endpoints whose `nodeName` is the local node.
//! - `openyurt.io/nodepool` **and** `kubernetes.io/zone`: both are handled as "same node pool"
//!   (`case AnnotationServiceTopologyValueNodePool, AnnotationServiceTopologyValueZone`) in
//!   every version read; `kubernetes.io/zone` never compares a zone label. The local node's pool
//!   is its label `apps.openyurt.io/nodepool` (`projectinfo.GetNodePoolLabel()`); a pool's
//!   members are the NodePool's `status.nodes`, which yurt-manager fills from that same label.
//!   A local node in no pool "falls into node topology" (same node only).
//!
//! # The mapping
//!
//! | value | keys (§2.3, OR) |
//! |---|---|
//! | `kubernetes.io/hostname` | `kubernetes.io/hostname` |
//! | `openyurt.io/nodepool`, `kubernetes.io/zone` | `apps.openyurt.io/nodepool`, `kubernetes.io/hostname` |
//!
//! The hostname key in the pool mapping reproduces OpenYurt's fallback: with the local node in
//! a pool, "same pool or same hostname" is "same pool" (a node is in its own pool); with the
//! local node in none, only the local node itself matches.
//!
//! **Deviations** (the §2.3 rule, fail-closed, instead of OpenYurt's name comparison): nodes are
//! compared by their `kubernetes.io/hostname` label (kubelet sets it; it is the node name unless
//! overridden), so both the local node and the endpoint's node must be cached Nodes carrying it
//! (OpenYurt compares `nodeName` with `--node-name` without looking at Nodes); and a pool label
//! with an empty value is a pool named `""` (OpenYurt treats it as "no pool").

use serde_json::Value;

use super::{TopologyKeys, HOSTNAME_LABEL};

/// The OpenYurt Service annotation (one string value).
pub const OPENYURT_TOPOLOGY_ANNOTATION: &str = "openyurt.io/topologyKeys";
/// The node label naming an OpenYurt node pool (`projectinfo.GetNodePoolLabel()`).
pub const OPENYURT_NODEPOOL_LABEL: &str = "apps.openyurt.io/nodepool";

/// A valid value of `openyurt.io/topologyKeys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenYurtTopology {
    /// `kubernetes.io/hostname`: the local node only.
    Node,
    /// `openyurt.io/nodepool`: the local node's pool.
    NodePool,
    /// `kubernetes.io/zone`: OpenYurt's other name for the node pool.
    Zone,
}

impl OpenYurtTopology {
    /// The annotation value.
    pub fn value(self) -> &'static str {
        match self {
            OpenYurtTopology::Node => "kubernetes.io/hostname",
            OpenYurtTopology::NodePool => "openyurt.io/nodepool",
            OpenYurtTopology::Zone => "kubernetes.io/zone",
        }
    }

    /// The node label keys that implement it with the §2.3 rule (see the module docs).
    pub fn keys(self) -> TopologyKeys {
        let keys: &[&str] = match self {
            OpenYurtTopology::Node => &[HOSTNAME_LABEL],
            OpenYurtTopology::NodePool | OpenYurtTopology::Zone => {
                &[OPENYURT_NODEPOOL_LABEL, HOSTNAME_LABEL]
            }
        };
        TopologyKeys::any(keys.iter().map(|k| k.to_string()).collect())
    }
}

/// Reads `metadata.annotations["openyurt.io/topologyKeys"]`: `Ok(None)` when absent, `null` or
/// empty; `Err(why)` for any other value than the three OpenYurt accepts (compared exactly, as
/// OpenYurt does).
pub fn parse(service: &Value) -> Result<Option<OpenYurtTopology>, String> {
    let raw = match service
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(OPENYURT_TOPOLOGY_ANNOTATION))
    {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(format!(
                "annotation {OPENYURT_TOPOLOGY_ANNOTATION} is not a string"
            ))
        }
    };
    let mode = [
        OpenYurtTopology::Node,
        OpenYurtTopology::NodePool,
        OpenYurtTopology::Zone,
    ]
    .into_iter()
    .find(|m| m.value() == raw);
    match mode {
        Some(m) => Ok(Some(m)),
        None if raw.is_empty() => Ok(None),
        None => Err(format!(
            "annotation {OPENYURT_TOPOLOGY_ANNOTATION}={raw:?} is not one of \
             kubernetes.io/hostname, openyurt.io/nodepool, kubernetes.io/zone"
        )),
    }
}
