//! Edge-health as the cache keeps it (docs/SEMANTICS.md §10): the current map, each node's
//! InternalIPs, the resolved set of abnormal nodes that [`Locality::abnormal`] shows, and the
//! nodes whose status changed since the last recomputation. Pure (the poller is
//! `upstream::edge_health`'s).
//!
//! Invariants: `abnormal` is what `cache::edge_health` resolves from `map` and `ips`; `dirty` holds
//! every node that entered or left `abnormal` since [`EdgeHealth::take_dirty`]. A change of the
//! abnormal set recomputes only the endpoint objects with an endpoint on a node that entered or
//! left it (the index's by-node sets), of every class — unlike node label changes, which only
//! matter to topology Services. A map that resolves to the same set, or the same map again,
//! dirties nothing. A Node's InternalIPs changing, or a Node appearing or disappearing,
//! re-resolves that one node (only while the map is non-empty).
//!
//! [`Locality::abnormal`]: crate::cache::topology::Locality::abnormal

use std::collections::{BTreeMap, BTreeSet};

use log::info;
use serde_json::Value;

use crate::cache::edge_health;
use crate::handoff::edge_health::EdgeHealthMap;

/// Most node names an INFO line lists.
const LOGGED_NAMES: usize = 20;

/// Edge-health state of the cache.
#[derive(Debug, Default)]
pub(super) struct EdgeHealth {
    /// The last map applied; empty = nothing known (every endpoint kept).
    map: EdgeHealthMap,
    /// The node names resolved abnormal from `map` and `ips` (see `cache::edge_health`).
    abnormal: BTreeSet<String>,
    /// Canonical InternalIPs of each cached Node that has any.
    ips: BTreeMap<String, Box<[String]>>,
    /// Nodes that entered or left `abnormal` since the last recomputation.
    dirty: BTreeSet<String>,
}

impl EdgeHealth {
    fn ips_of(&self, node: &str) -> &[String] {
        self.ips.get(node).map_or(&[], |ips| &ips[..])
    }

    /// Takes edge-health's latest answer (`map`; empty after a failed poll, which keeps every
    /// endpoint again) and resolves the abnormal nodes; logs the new set at INFO when it
    /// changes. `false` (nothing done) for the same map again.
    pub(super) fn set_map(&mut self, map: EdgeHealthMap) -> bool {
        if map == self.map {
            return false;
        }
        let abnormal = edge_health::abnormal_nodes(
            &map,
            self.ips.iter().map(|(name, ips)| (name.as_str(), &ips[..])),
        );
        self.map = map;
        if abnormal != self.abnormal {
            self.dirty
                .extend(abnormal.symmetric_difference(&self.abnormal).cloned());
            self.abnormal = abnormal;
            log_abnormal(&self.abnormal);
        }
        true
    }

    /// The nodes whose endpoints the edge-health filter currently drops (names, and keys
    /// reported abnormal that name no cached node).
    pub(super) fn abnormal(&self) -> &BTreeSet<String> {
        &self.abnormal
    }

    /// Node `name` was upserted (`Some`, with its changed content) or deleted (`None`): keeps
    /// its InternalIPs and, if they changed while a map is known, re-resolves that node.
    pub(super) fn node_changed(&mut self, name: &str, node: Option<&Value>) {
        let ips = node.map(edge_health::internal_ips).unwrap_or_default();
        if self.ips_of(name) == &ips[..] {
            return;
        }
        if ips.is_empty() {
            self.ips.remove(name);
        } else {
            self.ips.insert(name.to_string(), ips.into());
        }
        if self.map.is_empty() {
            return;
        }
        let abnormal = edge_health::node_abnormal(&self.map, name, self.ips_of(name));
        if abnormal != self.abnormal.contains(name) {
            if abnormal {
                self.abnormal.insert(name.to_string());
            } else {
                self.abnormal.remove(name);
            }
            self.dirty.insert(name.to_string());
            log_abnormal(&self.abnormal);
        }
    }

    /// The nodes whose status changed since the last call: their endpoint objects (any class)
    /// are owed a recomputation.
    pub(super) fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }
}

fn log_abnormal(abnormal: &BTreeSet<String>) {
    if abnormal.is_empty() {
        info!("edge-health: no node is abnormal; every endpoint is served");
        return;
    }
    let names: Vec<&str> = abnormal
        .iter()
        .take(LOGGED_NAMES)
        .map(String::as_str)
        .collect();
    let more = abnormal.len().saturating_sub(LOGGED_NAMES);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    info!(
        "edge-health: dropping endpoints on {} abnormal node(s): {}{tail}",
        abnormal.len(),
        names.join(", ")
    );
}
