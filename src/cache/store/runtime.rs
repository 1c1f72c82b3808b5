//! The container runtimes' views as the cache keeps them (docs/SEMANTICS.md §13, §13.1): the
//! local runtime's (the runtime source's last view), every other node's as it reported to this
//! relay or as the relay this follower follows answered, which nodes' objects are owed a
//! recomputation, and which served objects are repaired now (for the count in `/metrics` and the
//! log line once per object). Pure; the rule itself is [`crate::cache::repair`].
//!
//! Invariants: `site` is `own` under the local node's name plus every entry of `others`;
//! `in_force` holds exactly the served Endpoints and v1 slices whose last publication the rule
//! changed, with what it changed; `endpoints` is the sum of their counts; `generation` moves
//! whenever `site` does.

use std::collections::{BTreeMap, BTreeSet};

use log::info;

use crate::cache::repair::Outcome;
use crate::handoff::runtime_pods::RuntimePods;
use crate::handoff::site_pods::{self, NodeReport, SitePods};
use crate::k8s::{ObjectKey, Resource};

/// Another node's view, and how long it holds.
#[derive(Debug)]
struct Other {
    /// Reported to this relay by the node itself (`false`: relayed by the relay this node
    /// follows).
    direct: bool,
    /// Seconds it holds after it is taken or confirmed.
    valid_for: u64,
    /// The writer's clock (seconds) at which it is dropped.
    expires: u64,
}

/// The runtime part of the cache.
#[derive(Debug, Default)]
pub(super) struct Runtime {
    /// Every node's view in force (the local one under its name); empty = no source and no
    /// report (nothing repaired).
    site: SitePods,
    /// How long each other node's view holds.
    others: BTreeMap<String, Other>,
    /// Nodes whose view changed since the last recomputation.
    dirty: BTreeSet<String>,
    /// Moves with every change of `site`.
    generation: u64,
    /// Served objects the rule changed, by resource (Endpoints, v1 slices) and key.
    in_force: BTreeMap<(Resource, ObjectKey), Outcome>,
    /// Endpoints served repaired (address or not ready), over `in_force`.
    endpoints: usize,
}

impl Runtime {
    /// Every node's view in force.
    pub(super) fn site(&self) -> &SitePods {
        &self.site
    }

    /// Moves with every change of [`Runtime::site`].
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// How many nodes other than `hostname` have a view in force.
    pub(super) fn other_views(&self, hostname: &str) -> usize {
        self.site.nodes.keys().filter(|n| *n != hostname).count()
    }

    /// Every view in force as a relay answers its followers (§13.1): each other node's with the
    /// time it still holds at `now`, the local node's with `own_valid_for`.
    pub(super) fn answer(&self, now: u64, own_valid_for: u64) -> Vec<u8> {
        let items = self.site.nodes.iter().map(|(node, pods)| {
            let valid = self
                .others
                .get(node)
                .map_or(own_valid_for, |o| o.expires.saturating_sub(now));
            (node.as_str(), pods, valid)
        });
        site_pods::encode_list(items)
    }

    /// Sets `node`'s view (an empty one drops it); `true` when it changed.
    fn put(&mut self, node: &str, pods: RuntimePods) -> bool {
        let changed = match pods.is_empty() {
            true => self.site.nodes.remove(node).is_some(),
            false => self.site.nodes.insert(node.to_string(), pods.clone()) != Some(pods),
        };
        if changed {
            self.dirty.insert(node.to_string());
            self.generation += 1;
        }
        changed
    }

    /// Takes the local runtime source's latest view of `hostname`'s pods; `false` (nothing to
    /// do) for the same view again.
    pub(super) fn set(&mut self, hostname: &str, pods: RuntimePods) -> bool {
        self.put(hostname, pods)
    }

    /// Takes a node's own report (on the relay port, its sender checked); a report of the
    /// local node is not taken (its own runtime speaks for it). `true` when a view changed.
    pub(super) fn report(&mut self, hostname: &str, report: NodeReport, now: u64) -> bool {
        if report.node == hostname {
            return false;
        }
        let other = Other {
            direct: true,
            valid_for: report.valid_for,
            expires: now + report.valid_for,
        };
        if !self.others.contains_key(&report.node) {
            info!(
                "runtime report from node {}: {} pods with an address, {} without a ready sandbox (valid {} s)",
                report.node,
                report.pods.ready.len(),
                report.pods.not_ready.len(),
                report.valid_for
            );
        }
        self.others.insert(report.node.clone(), other);
        self.put(&report.node, report.pods)
    }

    /// Takes the relays' answer: every node's view they hold, each valid for its time from
    /// `now` on. Replaces every view relayed before; a node's own report to this node and the
    /// local view are kept. `true` when a view changed.
    pub(super) fn relayed(&mut self, hostname: &str, reports: Vec<NodeReport>, now: u64) -> bool {
        let mut changed = false;
        let mut seen = BTreeSet::new();
        for r in reports {
            let direct = self.others.get(&r.node).is_some_and(|o| o.direct);
            if r.node == hostname || direct || !seen.insert(r.node.clone()) {
                continue;
            }
            let other = Other {
                direct: false,
                valid_for: r.valid_for,
                expires: now + r.valid_for,
            };
            self.others.insert(r.node.clone(), other);
            changed |= self.put(&r.node, r.pods);
        }
        let gone: Vec<String> = self
            .others
            .iter()
            .filter(|(n, o)| !o.direct && !seen.contains(*n))
            .map(|(n, _)| n.clone())
            .collect();
        for node in gone {
            self.others.remove(&node);
            changed |= self.put(&node, RuntimePods::default());
        }
        changed
    }

    /// Drops the other nodes' views whose time is up at `now`; `true` when one was dropped.
    pub(super) fn expire(&mut self, now: u64) -> bool {
        let due: Vec<String> = self
            .others
            .iter()
            .filter(|(_, o)| o.expires <= now)
            .map(|(n, _)| n.clone())
            .collect();
        let mut changed = false;
        for node in due {
            if let Some(o) = self.others.remove(&node) {
                info!(
                    "runtime view of node {node} dropped: no {} for {} s; its endpoints are served as the upstream says",
                    if o.direct { "report from it" } else { "confirmation from the relay" },
                    o.valid_for
                );
            }
            changed |= self.put(&node, RuntimePods::default());
        }
        changed
    }

    /// The nodes whose objects are owed a recomputation (cleared).
    pub(super) fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// Whether an object with endpoints on `nodes` may be repaired (so must take the `Value`
    /// path).
    pub(super) fn may_repair<'n>(&self, nodes: impl Iterator<Item = &'n String>) -> bool {
        self.site.may_repair(nodes)
    }

    /// Records what the rule did to the object `key` of `res` as just published (or deleted:
    /// none), logging at INFO when its repair starts, changes or ends.
    pub(super) fn note(&mut self, res: Resource, key: &ObjectKey, outcome: Outcome) {
        if res == Resource::SlicesV1beta1 || (outcome.is_none() && self.in_force.is_empty()) {
            return; // the v1 slice's copy (counted once, as v1), or nothing repaired anywhere
        }
        let entry = (res, key.clone());
        let before = self.in_force.get(&entry).copied().unwrap_or_default();
        if before == outcome {
            return;
        }
        self.endpoints -= before.addresses + before.not_ready;
        self.endpoints += outcome.addresses + outcome.not_ready;
        if outcome.is_none() {
            self.in_force.remove(&entry);
            info!("{res:?} {key}: served as the upstream says again (runtime repair ended)");
        } else {
            self.in_force.insert(entry, outcome);
            info!(
                "{res:?} {key}: served as the container runtime says: {} endpoint(s) on the runtime's address, {} not ready",
                outcome.addresses, outcome.not_ready
            );
        }
    }

    /// Endpoints served repaired now (Endpoints and v1 slices).
    pub(super) fn endpoints_repaired(&self) -> usize {
        self.endpoints
    }
}
