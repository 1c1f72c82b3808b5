//! The cache's side of the edge-health filter (docs/SEMANTICS.md §10): the current map, each node's
//! InternalIPs, the resolved set of abnormal nodes that [`Locality::abnormal`] shows, and the
//! recomputation when that set changes. Pure (the poller is `upstream::edge_health`'s).
//!
//! A change of the abnormal set recomputes only the endpoint objects with an endpoint on a
//! node that entered or left it (the `by_node` index), of every class — unlike node label
//! changes, which only matter to topology Services. A map that resolves to the same set, or the
//! same map again, recomputes nothing. A Node's InternalIPs changing, or a Node appearing or
//! disappearing, re-resolves that one node (only while the map is non-empty).
//!
//! [`Locality::abnormal`]: crate::cache::topology::Locality::abnormal

use std::collections::{BTreeMap, BTreeSet};

use log::info;
use serde_json::Value;

use super::{Applied, State, Target};
use crate::cache::health;
use crate::upstream::edge_health_map::HealthMap;

/// Most node names an INFO line lists.
const LOGGED_NAMES: usize = 20;

/// Edge-health state of a [`State`].
#[derive(Debug, Default)]
pub(super) struct Health {
    /// The last map applied; empty = nothing known (every endpoint kept).
    map: HealthMap,
    /// The node names resolved abnormal from `map` and `ips` (see `cache::health`).
    pub(super) abnormal: BTreeSet<String>,
    /// Canonical InternalIPs of each cached Node that has any.
    ips: BTreeMap<String, Box<[String]>>,
    /// Nodes that entered or left `abnormal` since the last recomputation.
    dirty: BTreeSet<String>,
}

impl Health {
    fn ips_of(&self, node: &str) -> &[String] {
        self.ips.get(node).map_or(&[], |ips| &ips[..])
    }
}

impl State {
    /// Applies edge-health's latest answer (`map`; empty after a failed poll, which keeps every
    /// endpoint again): resolves the abnormal nodes, and recomputes the endpoint objects with
    /// an endpoint on a node whose status changed, logging every change of served content with
    /// a new RV exactly as [`State::apply`] does. The same map again, or one resolving to the
    /// same nodes, changes nothing. Logs the new set at INFO when it changes.
    pub fn set_edge_health(&mut self, map: HealthMap, now: u64) -> Applied {
        if map == self.health.map {
            return Applied::default();
        }
        let before = self.rv;
        let h = &mut self.health;
        let abnormal = health::abnormal_nodes(
            &map,
            h.ips.iter().map(|(name, ips)| (name.as_str(), &ips[..])),
        );
        h.map = map;
        if abnormal != h.abnormal {
            h.dirty
                .extend(abnormal.symmetric_difference(&h.abnormal).cloned());
            h.abnormal = abnormal;
            log_abnormal(&h.abnormal);
        }
        self.flush_derived(now);
        self.trim(now);
        self.publish_facts();
        Applied {
            events: (self.rv - before) as usize,
            ..Applied::default()
        }
    }

    /// The nodes whose endpoints the edge-health filter currently drops (names, and keys
    /// reported abnormal that name no cached node).
    pub fn abnormal_nodes(&self) -> &BTreeSet<String> {
        &self.health.abnormal
    }

    /// Node `name` was upserted (`Some`, with its changed content) or deleted (`None`): keeps
    /// its InternalIPs and, if they changed while a map is known, re-resolves that node.
    pub(super) fn health_node_changed(&mut self, name: &str, node: Option<&Value>) {
        let ips = node.map(health::internal_ips).unwrap_or_default();
        let h = &mut self.health;
        if h.ips_of(name) == &ips[..] {
            return;
        }
        if ips.is_empty() {
            h.ips.remove(name);
        } else {
            h.ips.insert(name.to_string(), ips.into());
        }
        if h.map.is_empty() {
            return;
        }
        let abnormal = health::node_abnormal(&h.map, name, h.ips_of(name));
        if abnormal != h.abnormal.contains(name) {
            if abnormal {
                h.abnormal.insert(name.to_string());
            } else {
                h.abnormal.remove(name);
            }
            h.dirty.insert(name.to_string());
            log_abnormal(&h.abnormal);
        }
    }

    /// The endpoint objects owed a recomputation by edge-health changes (any class).
    pub(super) fn take_health_targets(&mut self) -> BTreeSet<Target> {
        std::mem::take(&mut self.health.dirty)
            .iter()
            .flat_map(|node| self.on_node(node))
            .cloned()
            .collect()
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
