//! A follower's report of its node's pods on the relay port (docs/SEMANTICS.md §13.1):
//! `PUT /grid-wrapper/v1/runtime-pods/<node>`, taken only from the node itself, answered with
//! every node's view the relay holds. Pure: the connection hands it the request, the peer's
//! address and the relay view, and carries out what it says (hand the report to the writer,
//! send the reply).
//!
//! **Who may speak for a node.** The relay port already admits only clients with a certificate
//! of the relay client CA (§12); one certificate is shared by every follower of a site. A report
//! is taken only when the connection's source address is one of the reported Node's
//! `status.addresses` in the relay view (as the kubelet reports them): a follower can speak only
//! for its own node's pods, and a report changes nothing but the endpoints on that node.

use std::net::IpAddr;

use serde::Deserialize;

use crate::api::handlers::Reply;
use crate::api::negotiate::Format;
use crate::api::wire::Segment;
use crate::cache::published::Published;
use crate::handoff::site_pods::{self, NodeReport};
use crate::k8s::status::ApiError;
use crate::k8s::{ObjectKey, Resource};

/// What the relay does with one report.
#[derive(Debug)]
pub struct Taken {
    /// The report to hand the writer, when it is taken.
    pub report: Option<NodeReport>,
    /// The answer.
    pub reply: Reply,
    /// The answer's `ETag` (the site's views' generation), with a 200 or 304.
    pub etag: Option<String>,
}

/// Takes the report `body` for `node` (the path's), sent from `peer`, with `if_none_match` (the
/// generation the follower holds), against the relay view `view`.
pub fn take(
    node: &str,
    body: &[u8],
    peer: IpAddr,
    if_none_match: Option<&str>,
    view: &Published,
) -> Taken {
    let refused = |err: ApiError| Taken {
        report: None,
        reply: Reply::error(&err),
        etag: None,
    };
    let report = match site_pods::decode_report(body) {
        Ok(r) if r.node == node => r,
        Ok(r) => {
            return refused(ApiError::new(
                400,
                "BadRequest",
                format!("the report names node {:?}, its path node {node:?}", r.node),
            ))
        }
        Err(e) => return refused(ApiError::new(400, "BadRequest", e.to_string())),
    };
    let key = ObjectKey::new("", node);
    let Some(obj) = view.collection(Resource::Nodes).get(&key) else {
        return refused(ApiError::new(
            403,
            "Forbidden",
            format!("runtime report for node {node:?}: no such Node in the relay's cache"),
        ));
    };
    let addresses = node_addresses(&obj.json());
    let peer = canonical(peer);
    if !addresses.contains(&peer) {
        let named: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
        return refused(ApiError::new(
            403,
            "Forbidden",
            format!(
                "runtime report for node {node:?} from {peer}, which is not one of the Node's addresses ({}): a node reports only its own pods, from its own address",
                if named.is_empty() { "none".to_string() } else { named.join(", ") }
            ),
        ));
    }
    let (etag, reply) = match view.site_pods() {
        Some((generation, _)) if if_none_match == Some(etag_of(generation).as_str()) => (
            Some(etag_of(generation)),
            Reply {
                code: 304,
                format: Format::Json,
                retry_after: None,
                body: Vec::new(),
            },
        ),
        Some((generation, bytes)) => (
            Some(etag_of(generation)),
            Reply {
                code: 200,
                format: Format::Json,
                retry_after: None,
                body: vec![Segment::Shared(bytes)],
            },
        ),
        None => (
            None,
            Reply {
                code: 200,
                format: Format::Json,
                retry_after: None,
                body: vec![Segment::Owned(site_pods::encode_list(std::iter::empty()))],
            },
        ),
    };
    Taken {
        report: Some(report),
        reply,
        etag,
    }
}

/// The `ETag` of the site's views of `generation`.
pub fn etag_of(generation: u64) -> String {
    format!("\"{generation}\"")
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a dual-stack listener's peers).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[derive(Deserialize, Default)]
struct NodeDoc {
    #[serde(default)]
    status: NodeStatus,
}

#[derive(Deserialize, Default)]
struct NodeStatus {
    #[serde(default)]
    addresses: Vec<NodeAddress>,
}

#[derive(Deserialize)]
struct NodeAddress {
    #[serde(default)]
    address: String,
}

/// The IP addresses among a Node's `status.addresses` (hostnames left out).
fn node_addresses(bytes: &[u8]) -> Vec<IpAddr> {
    let doc: NodeDoc = serde_json::from_slice(bytes).unwrap_or_default();
    doc.status
        .addresses
        .iter()
        .filter_map(|a| a.address.trim().parse().ok())
        .map(canonical)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::{Retention, Served};
    use crate::handoff::runtime_pods::{RuntimePod, RuntimePods};
    use serde_json::json;

    fn view_with_node(addresses: serde_json::Value) -> Published {
        let mut v = Published::new(1, Retention::for_queue(100));
        let node = json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "edge-b", "resourceVersion": "2"},
            "status": {"addresses": addresses}});
        let served = Served::from_value(ObjectKey::new("", "edge-b"), 2, &node);
        v.collection_mut(Resource::Nodes)
            .seed(std::sync::Arc::new(served));
        v
    }

    fn report(node: &str) -> Vec<u8> {
        let mut pods = RuntimePods::default();
        pods.ready.insert(
            ObjectKey::new("ns", "web-0"),
            RuntimePod {
                uid: "u".into(),
                created_at: 1,
                ips: vec!["10.0.9.9".parse().unwrap()],
            },
        );
        site_pods::encode_report(node, &pods, 60)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_report_is_taken_only_from_one_of_the_nodes_addresses() {
        let v = view_with_node(json!([{"type": "Hostname", "address": "edge-b"},
                                      {"type": "InternalIP", "address": "10.1.0.2"}]));
        let ok = take("edge-b", &report("edge-b"), ip("10.1.0.2"), None, &v);
        assert_eq!(ok.reply.code, 200);
        assert_eq!(ok.report.map(|r| r.node), Some("edge-b".to_string()));
        let mapped = take("edge-b", &report("edge-b"), ip("::ffff:10.1.0.2"), None, &v);
        assert_eq!(mapped.reply.code, 200);
        let other = take("edge-b", &report("edge-b"), ip("10.1.0.3"), None, &v);
        assert_eq!((other.reply.code, other.report.is_none()), (403, true));
        let text = String::from_utf8_lossy(other.reply.body[0].as_bytes()).to_string();
        assert!(
            text.contains("10.1.0.3") && text.contains("10.1.0.2"),
            "{text}"
        );
        let unknown = take("edge-c", &report("edge-c"), ip("10.1.0.2"), None, &v);
        assert_eq!((unknown.reply.code, unknown.report.is_none()), (403, true));
    }

    #[test]
    fn a_report_for_another_node_than_its_path_or_garbage_is_a_bad_request() {
        let v = view_with_node(json!([{"type": "InternalIP", "address": "10.1.0.2"}]));
        let mismatch = take("edge-b", &report("edge-c"), ip("10.1.0.2"), None, &v);
        assert_eq!(
            (mismatch.reply.code, mismatch.report.is_none()),
            (400, true)
        );
        let garbage = take("edge-b", b"\x00\xff", ip("10.1.0.2"), None, &v);
        assert_eq!((garbage.reply.code, garbage.report.is_none()), (400, true));
    }

    #[test]
    fn the_answer_is_the_sites_views_and_304_when_the_follower_has_them() {
        let mut v = view_with_node(json!([{"type": "InternalIP", "address": "10.1.0.2"}]));
        let first = take("edge-b", &report("edge-b"), ip("10.1.0.2"), None, &v);
        assert_eq!((first.reply.code, first.etag), (200, None));
        let list = site_pods::encode_list(std::iter::empty());
        v.set_site_pods(7, list.clone().into());
        let fresh = take(
            "edge-b",
            &report("edge-b"),
            ip("10.1.0.2"),
            Some("\"6\""),
            &v,
        );
        assert_eq!(fresh.reply.code, 200);
        assert_eq!(fresh.etag.as_deref(), Some("\"7\""));
        assert_eq!(fresh.reply.body[0].as_bytes(), &list[..]);
        let same = take(
            "edge-b",
            &report("edge-b"),
            ip("10.1.0.2"),
            Some("\"7\""),
            &v,
        );
        assert_eq!((same.reply.code, same.reply.body.len()), (304, 0));
        assert!(same.report.is_some(), "a 304 still takes the report");
    }
}
