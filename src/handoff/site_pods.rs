//! The site's runtime views (docs/SEMANTICS.md §13.1): every node's pods as its own container
//! runtime reports them, which the repair rule reads per endpoint by the endpoint's node
//! ([`SitePods`]), and the one wire form in which they travel between a follower and its relay
//! ([`NodeReport`]: a follower's `PUT` of its own node's view; the relay's answer, every node's).
//! A hand-off type: the relay port, the follower's reporter and the cache import it; it imports
//! neither. Pure but for the counts of reports taken and refused on the relay port
//! ([`record_report`], read by `/metrics`).
//!
//! Untrusted on both sides: a report is decoded with bounds (names, pods, addresses), its
//! addresses parsed as IP literals (others left out, as the runtime source does), and its
//! validity clamped to [`MIN_VALID_FOR`]..=[`MAX_VALID_FOR`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use crate::handoff::runtime_pods::{RuntimePod, RuntimePods};
use crate::k8s::ObjectKey;

/// The path a follower reports its node's pods to, on the relay port, followed by the node's
/// name (`PUT`).
pub const REPORT_PATH: &str = "/grid-wrapper/v1/runtime-pods/";
/// `kind` of one node's report.
const KIND: &str = "RuntimePods";
/// `kind` of the relay's answer (every node's).
const LIST_KIND: &str = "RuntimePodsList";
/// `apiVersion` of both.
const API_VERSION: &str = "grid-wrapper/v1";
/// The shortest validity a report may state (seconds).
pub const MIN_VALID_FOR: u64 = 10;
/// The longest validity a report may state (seconds).
pub const MAX_VALID_FOR: u64 = 600;
/// The most pods one node's report may name (ready and not ready together).
pub const MAX_PODS: usize = 10_000;
/// The most nodes one answer may name.
pub const MAX_NODES: usize = 10_000;
/// The most addresses kept per pod (a dual-stack pod has two).
const MAX_IPS: usize = 8;
/// The longest node, namespace or pod name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// Every node's runtime view the repair rule reads, by node name. A node absent, or with an
/// empty view, is served as the upstream says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SitePods {
    /// node name → its runtime's view of its pods.
    pub nodes: BTreeMap<String, RuntimePods>,
}

impl SitePods {
    /// One node's view only (the local runtime, without a site exchange).
    pub fn local(node: &str, pods: RuntimePods) -> SitePods {
        let mut nodes = BTreeMap::new();
        nodes.insert(node.to_string(), pods);
        SitePods { nodes }
    }

    /// The view of `node`'s runtime, if any.
    pub fn of(&self, node: &str) -> Option<&RuntimePods> {
        self.nodes.get(node)
    }

    /// Whether no node's runtime knows a pod (no repair can apply).
    pub fn is_empty(&self) -> bool {
        self.nodes.values().all(RuntimePods::is_empty)
    }

    /// Whether an endpoint on one of `nodes` may be repaired.
    pub fn may_repair<'n>(&self, mut nodes: impl Iterator<Item = &'n String>) -> bool {
        nodes.any(|n| self.of(n).is_some_and(|p| !p.is_empty()))
    }
}

/// One node's pods as its runtime reports them, valid for `valid_for` seconds from when it is
/// taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// The node (its Node object's name, the reporter's `--hostname`).
    pub node: String,
    /// Its runtime's view.
    pub pods: RuntimePods,
    /// Seconds the report holds without a newer one.
    pub valid_for: u64,
}

/// A report that cannot be taken, and why (for a `Status` message or a WARN line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadReport(pub String);

impl std::fmt::Display for BadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReport {
    kind: String,
    api_version: String,
    node: String,
    valid_for_seconds: u64,
    #[serde(default)]
    ready: Vec<WirePod>,
    #[serde(default)]
    not_ready: Vec<WireKey>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePod {
    namespace: String,
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    created_at: i64,
    #[serde(default)]
    ips: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct WireKey {
    namespace: String,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireList {
    kind: String,
    api_version: String,
    #[serde(default)]
    items: Vec<WireReport>,
}

impl WireReport {
    fn of(node: &str, pods: &RuntimePods, valid_for: u64) -> WireReport {
        WireReport {
            kind: KIND.into(),
            api_version: API_VERSION.into(),
            node: node.into(),
            valid_for_seconds: valid_for,
            ready: pods
                .ready
                .iter()
                .map(|(key, pod)| WirePod {
                    namespace: key.namespace.to_string(),
                    name: key.name.to_string(),
                    uid: pod.uid.clone(),
                    created_at: pod.created_at,
                    ips: pod.ips.iter().map(IpAddr::to_string).collect(),
                })
                .collect(),
            not_ready: pods
                .not_ready
                .iter()
                .map(|key| WireKey {
                    namespace: key.namespace.to_string(),
                    name: key.name.to_string(),
                })
                .collect(),
        }
    }

    fn take(self) -> Result<NodeReport, BadReport> {
        if self.kind != KIND || self.api_version != API_VERSION {
            return Err(BadReport(format!(
                "not a {API_VERSION} {KIND} (kind {:?}, apiVersion {:?})",
                self.kind, self.api_version
            )));
        }
        name_ok("node", &self.node)?;
        if self.ready.len() + self.not_ready.len() > MAX_PODS {
            return Err(BadReport(format!(
                "node {}: {} pods, over the bound of {MAX_PODS}",
                self.node,
                self.ready.len() + self.not_ready.len()
            )));
        }
        let mut pods = RuntimePods::default();
        for p in self.ready {
            name_ok("namespace", &p.namespace)?;
            name_ok("pod name", &p.name)?;
            let ips: Vec<IpAddr> = p
                .ips
                .iter()
                .filter_map(|t| t.trim().parse().ok())
                .take(MAX_IPS)
                .collect();
            if ips.is_empty() {
                continue;
            }
            let pod = RuntimePod {
                uid: p.uid.chars().take(MAX_NAME).collect(),
                created_at: p.created_at,
                ips,
            };
            pods.ready
                .insert(ObjectKey::new(&p.namespace, &p.name), pod);
        }
        for k in self.not_ready {
            name_ok("namespace", &k.namespace)?;
            name_ok("pod name", &k.name)?;
            let key = ObjectKey::new(&k.namespace, &k.name);
            if !pods.ready.contains_key(&key) {
                pods.not_ready.insert(key);
            }
        }
        Ok(NodeReport {
            node: self.node,
            pods,
            valid_for: self.valid_for_seconds.clamp(MIN_VALID_FOR, MAX_VALID_FOR),
        })
    }
}

fn name_ok(what: &str, name: &str) -> Result<(), BadReport> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('/') {
        return Err(BadReport(format!("{what} {name:?}: not a name")));
    }
    Ok(())
}

/// One node's report as a follower sends it.
pub fn encode_report(node: &str, pods: &RuntimePods, valid_for: u64) -> Vec<u8> {
    serde_json::to_vec(&WireReport::of(node, pods, valid_for)).unwrap_or_default()
}

/// A follower's report, checked (see the module doc).
pub fn decode_report(bytes: &[u8]) -> Result<NodeReport, BadReport> {
    let wire: WireReport = serde_json::from_slice(bytes)
        .map_err(|e| BadReport(format!("not a {KIND} report: {e}")))?;
    wire.take()
}

/// The relay's answer: every node's view it holds, each with the validity it has left.
pub fn encode_list<'a>(items: impl Iterator<Item = (&'a str, &'a RuntimePods, u64)>) -> Vec<u8> {
    let list = WireList {
        kind: LIST_KIND.into(),
        api_version: API_VERSION.into(),
        items: items
            .map(|(node, pods, valid_for)| WireReport::of(node, pods, valid_for))
            .collect(),
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

/// The relay's answer, checked item by item (a bad item fails the whole answer).
pub fn decode_list(bytes: &[u8]) -> Result<Vec<NodeReport>, BadReport> {
    let wire: WireList =
        serde_json::from_slice(bytes).map_err(|e| BadReport(format!("not a {LIST_KIND}: {e}")))?;
    if wire.kind != LIST_KIND || wire.api_version != API_VERSION {
        return Err(BadReport(format!(
            "not a {API_VERSION} {LIST_KIND} (kind {:?})",
            wire.kind
        )));
    }
    if wire.items.len() > MAX_NODES {
        return Err(BadReport(format!(
            "{} nodes, over the bound of {MAX_NODES}",
            wire.items.len()
        )));
    }
    wire.items.into_iter().map(WireReport::take).collect()
}

/// Reports taken, then refused, on this relay port.
static REPORTS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Counts one report on the relay port: taken or refused.
pub fn record_report(taken: bool) {
    REPORTS[usize::from(!taken)].fetch_add(1, Relaxed);
}

/// Reports taken (`true`) or refused (`false`) on this relay port so far.
pub fn reports(taken: bool) -> u64 {
    REPORTS[usize::from(!taken)].load(Relaxed)
}

/// The node a report path names (`REPORT_PATH` + a name, nothing after it).
pub fn node_of_path(path: &str) -> Option<&str> {
    let node = path.strip_prefix(REPORT_PATH)?;
    name_ok("node", node).ok().map(|_| node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> RuntimePods {
        let mut v = RuntimePods::default();
        v.ready.insert(
            ObjectKey::new("ns", "web-0"),
            RuntimePod {
                uid: "u1".into(),
                created_at: 7,
                ips: vec!["10.0.9.9".parse().unwrap(), "fd00::9".parse().unwrap()],
            },
        );
        v.not_ready.insert(ObjectKey::new("ns", "db-0"));
        v
    }

    #[test]
    fn a_report_round_trips_and_its_validity_is_clamped() {
        let back = decode_report(&encode_report("n1", &view(), 60)).unwrap();
        assert_eq!(back.node, "n1");
        assert_eq!(back.pods, view());
        assert_eq!(back.valid_for, 60);
        let long = decode_report(&encode_report("n1", &view(), 1 << 40)).unwrap();
        assert_eq!(long.valid_for, MAX_VALID_FOR);
        let short = decode_report(&encode_report("n1", &view(), 0)).unwrap();
        assert_eq!(short.valid_for, MIN_VALID_FOR);
    }

    #[test]
    fn a_list_round_trips() {
        let v = view();
        let empty = RuntimePods::default();
        let bytes = encode_list([("a", &v, 30), ("b", &empty, 50)].into_iter());
        let back = decode_list(&bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].node.as_str(), &back[0].pods), ("a", &v));
        assert_eq!((back[1].node.as_str(), back[1].valid_for), ("b", 50));
    }

    #[test]
    fn bad_reports_are_refused_with_a_reason() {
        let bad: &[(&str, &str)] = &[
            ("garbage", "not a RuntimePods report"),
            ("{}", "not a RuntimePods report"),
            (
                r#"{"kind":"Pod","apiVersion":"grid-wrapper/v1","node":"n","validForSeconds":5}"#,
                "not a grid-wrapper/v1 RuntimePods",
            ),
            (
                r#"{"kind":"RuntimePods","apiVersion":"grid-wrapper/v1","node":"","validForSeconds":5}"#,
                "node \"\": not a name",
            ),
            (
                r#"{"kind":"RuntimePods","apiVersion":"grid-wrapper/v1","node":"n","validForSeconds":5,"ready":[{"namespace":"a/b","name":"p","ips":["10.0.0.1"]}]}"#,
                "namespace \"a/b\"",
            ),
        ];
        for (body, want) in bad {
            let e = decode_report(body.as_bytes()).unwrap_err();
            assert!(e.0.contains(want), "{body}: {e}");
        }
        let many: Vec<String> = (0..=MAX_PODS)
            .map(|i| format!(r#"{{"namespace":"n","name":"p{i}"}}"#))
            .collect();
        let body = format!(
            r#"{{"kind":"RuntimePods","apiVersion":"grid-wrapper/v1","node":"n","validForSeconds":5,"notReady":[{}]}}"#,
            many.join(",")
        );
        let e = decode_report(body.as_bytes()).unwrap_err();
        assert!(e.0.contains("over the bound"), "{e}");
    }

    #[test]
    fn addresses_that_are_not_ip_literals_are_left_out() {
        let body = r#"{"kind":"RuntimePods","apiVersion":"grid-wrapper/v1","node":"n","validForSeconds":60,
            "ready":[{"namespace":"ns","name":"a","ips":["10.0.0.1","evil.example","::1"]},
                     {"namespace":"ns","name":"b","ips":["nope"]}]}"#;
        let r = decode_report(body.as_bytes()).unwrap();
        let a = &r.pods.ready[&ObjectKey::new("ns", "a")];
        assert_eq!(a.ips.len(), 2);
        assert!(!r.pods.ready.contains_key(&ObjectKey::new("ns", "b")));
    }

    #[test]
    fn the_path_names_one_node() {
        assert_eq!(node_of_path("/grid-wrapper/v1/runtime-pods/n1"), Some("n1"));
        assert_eq!(node_of_path("/grid-wrapper/v1/runtime-pods/"), None);
        assert_eq!(node_of_path("/grid-wrapper/v1/runtime-pods/a/b"), None);
        assert_eq!(node_of_path("/api/v1/nodes"), None);
    }

    #[test]
    fn the_site_reads_each_endpoint_by_its_node() {
        let mut site = SitePods::local("a", view());
        site.nodes.insert("b".into(), RuntimePods::default());
        assert!(site.of("a").is_some() && site.of("c").is_none());
        let (a, b) = ("a".to_string(), "b".to_string());
        assert!(site.may_repair([&b, &a].into_iter()));
        assert!(!site.may_repair([&b].into_iter()));
        assert!(!SitePods::local("b", RuntimePods::default()).may_repair([&b].into_iter()));
        assert!(SitePods::default().is_empty());
    }
}
