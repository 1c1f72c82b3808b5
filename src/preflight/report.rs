//! The pure half of `grid-wrapper check`: what was fetched ([`Fetched`]) in, the [`Report`]
//! out. No sockets, no clock; unit-tested with hand-made fetch results.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cache::topology::{self, KeysAnnotation};
use crate::cache::view::labels_of;
use crate::k8s::{ObjectKey, Resource};
use crate::upstream::client::UpstreamError;
use crate::upstream::decode::ListResult;

use super::model::{
    Access, Count, Fetched, NodeReport, Problem, Reached, Report, ServiceReport, SliceSource, Tag,
    Totals, UpstreamReport, REPORT_FORMAT,
};
use super::{served, CHECK_TIMEOUTS};

/// One line for an upstream error: `401 Unauthorized: <message>` for a status, else its text.
pub fn describe(e: &UpstreamError) -> String {
    match e {
        UpstreamError::Status {
            code,
            reason,
            message,
            ..
        } => {
            let mut s = code.to_string();
            // An apiserver's 401 says "Unauthorized" twice: once is enough.
            let message = Some(message).filter(|m| *m != reason);
            for part in [Some(reason), message]
                .into_iter()
                .flatten()
                .filter(|p| !p.is_empty())
            {
                s.push_str(if s.contains(' ') { ": " } else { " " });
                s.push_str(&part.replace('\n', " "));
            }
            s
        }
        other => other.to_string().replace('\n', " "),
    }
}

/// What a failure means for the operator, by tag.
fn advice(tag: Tag) -> String {
    match tag {
        Tag::Auth => " (the upstream rejected the credentials)".into(),
        Tag::Connectivity => format!(
            " (is the URL right and reachable from this node? the check waits {} s to connect \
             and {} s for an answer)",
            CHECK_TIMEOUTS.connect.as_secs(),
            CHECK_TIMEOUTS.response_head.as_secs()
        ),
        Tag::Rbac => " (grant list and watch on it to this identity: see deploy/rbac.yaml)".into(),
        _ => String::new(),
    }
}

fn items(list: &Result<ListResult, UpstreamError>) -> Option<Vec<Value>> {
    let list = list.as_ref().ok()?;
    // An undecodable item is skipped here exactly as the cache skips it.
    Some(
        list.items
            .iter()
            .filter_map(|t| serde_json::from_str(t).ok())
            .collect(),
    )
}

/// Builds the report.
pub fn build(f: Fetched) -> Report {
    let mut problems: Vec<Problem> = f
        .config_problems
        .iter()
        .map(|m| Problem {
            tag: Tag::Config,
            message: m.clone(),
        })
        .collect();
    let mut warnings = Vec::new();
    let mut upstream = UpstreamReport {
        server: f.server.clone(),
        reachable: false,
        git_version: None,
        endpoint_slice_version: None,
        endpoint_slice_version_source: None,
        discovery_versions: Vec::new(),
    };
    match &f.version {
        Ok(v) => {
            upstream.reachable = true;
            upstream.git_version = v.get("gitVersion").and_then(Value::as_str).map(Into::into);
            if upstream.git_version.is_none() {
                warnings.push(Problem {
                    tag: Tag::Api,
                    message: "GET /version: no gitVersion in the answer".into(),
                });
            }
        }
        Err(e) => {
            let tag = Tag::of(e);
            upstream.reachable = tag.reached();
            let message = match tag {
                Tag::Config => describe(e),
                _ => format!("GET {}/version: {}{}", f.server, describe(e), advice(tag)),
            };
            // The server itself never asks for /version: an answer that is an error only
            // tells who is there (the resource checks say what the server would get).
            if upstream.reachable {
                warnings.push(Problem { tag, message });
            } else {
                problems.push(Problem { tag, message });
            }
        }
    }
    let mut report = Report {
        report_format: REPORT_FORMAT,
        ready: false,
        hostname: f.hostname.clone(),
        upstream,
        access: Vec::new(),
        node: NodeReport {
            name: f.hostname.clone(),
            found: None,
            topology_labels: BTreeMap::new(),
        },
        topology_keys: Vec::new(),
        topology_services: None,
        totals: None,
        problems: Vec::new(),
        warnings: Vec::new(),
    };
    if let Some(reached) = f.reached {
        reached_part(
            &f.hostname,
            f.wrapper_in_cluster,
            reached,
            &mut report,
            &mut problems,
            &mut warnings,
        );
    }
    report.ready = problems.is_empty();
    report.problems = problems;
    report.warnings = warnings;
    report
}

/// One warning per field of `objects` that grid-wrapper's protobuf schema does not know
/// ([`crate::proto::unknown`]): kube-proxy, which reads protobuf, would not get it.
fn unknown_fields(res: Resource, objects: &[Value]) -> Vec<Problem> {
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for obj in objects {
        for path in crate::proto::encode_object(res, obj).unknown {
            *paths.entry(path).or_default() += 1;
        }
    }
    paths
        .into_iter()
        .map(|(path, n)| Problem {
            tag: Tag::Protobuf,
            message: format!(
                "{} ({}): field {path} ({n} object{}) is not in grid-wrapper's protobuf schema: kube-proxy (protobuf) will not get it, JSON clients will",
                res.plural(),
                res.api_version(),
                if n == 1 { "" } else { "s" }
            ),
        })
        .collect()
}

fn reached_part(
    hostname: &str,
    wrapper_in_cluster: bool,
    reached: Reached,
    report: &mut Report,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let slices = reached.slices;
    report.upstream.endpoint_slice_version = Some(slices.kind.api_version().into());
    report.upstream.endpoint_slice_version_source = Some(match &slices.source {
        SliceSource::Discovery(versions) => {
            report.upstream.discovery_versions = versions.clone();
            "discovery"
        }
        SliceSource::Probe => "probe",
        SliceSource::Guess => "guess",
    });
    let mut lists: BTreeMap<&'static str, Option<Vec<Value>>> = BTreeMap::new();
    for r in &reached.resources {
        let res = r.kind;
        for (verb, err) in [
            ("list", r.list.as_ref().err()),
            ("watch", r.watch.as_ref().err()),
        ] {
            if let Some(e) = err {
                let tag = Tag::of(e);
                problems.push(Problem {
                    tag,
                    message: format!(
                        "{verb} {} ({}): {}{}",
                        res.plural(),
                        res.api_version(),
                        describe(e),
                        advice(tag)
                    ),
                });
            }
            report.access.push(Access {
                resource: res.plural(),
                api_version: res.api_version(),
                verb,
                allowed: err.is_none(),
                code: err.and_then(UpstreamError::status_code),
                error: err.map(describe),
            });
        }
        let listed = items(&r.list);
        if let Some(objects) = &listed {
            warnings.extend(unknown_fields(res, objects));
        }
        lists.insert(res.plural(), listed);
    }
    let take = |lists: &mut BTreeMap<&str, Option<Vec<Value>>>, k: &str| lists.remove(k).flatten();
    let nodes = take(&mut lists, "nodes");
    let services = take(&mut lists, "services");
    let endpoints = take(&mut lists, "endpoints");
    let slice_items = take(&mut lists, "endpointslices");

    // The local node and its labels, as the cache reads them.
    let local = nodes.as_ref().map(|ns| {
        ns.iter()
            .find(|n| ObjectKey::of(n).is_some_and(|k| &*k.name == hostname))
            .map(labels_of)
    });
    report.node.found = local.as_ref().map(Option::is_some);
    if local == Some(None) {
        problems.push(Problem {
            tag: Tag::Node,
            message: format!(
                "node {hostname:?} not found upstream: --hostname must be the Node's name \
                 (every topology Service would serve no endpoints)"
            ),
        });
    }

    // Topology Services, parsed with the cache's own parser.
    let Some(services) = services else { return };
    let mut topo: Vec<(ObjectKey, BTreeSet<String>)> = Vec::new();
    for svc in &services {
        let Some(key) = ObjectKey::of(svc) else {
            continue;
        };
        match topology::service_keys(svc) {
            KeysAnnotation::Keys(k) => topo.push((key, k.set)),
            KeysAnnotation::Invalid(why) => warnings.push(Problem {
                tag: Tag::Topology,
                message: format!("service {key}: topologyKeys ignored (served unfiltered): {why}"),
            }),
            KeysAnnotation::Absent => {}
        }
    }
    topo.sort();
    let in_use: BTreeSet<String> = topo.iter().flat_map(|(_, k)| k.iter().cloned()).collect();
    report.topology_keys = in_use.iter().cloned().collect();
    if let Some(Some(labels)) = &local {
        report.node.topology_labels = in_use
            .iter()
            .map(|k| (k.clone(), labels.get(k).cloned()))
            .collect();
    }

    let counts = match (&nodes, &endpoints, &slice_items) {
        (Some(n), Some(e), Some(s)) => Some(served::compute(
            hostname,
            wrapper_in_cluster,
            slices.kind,
            [n, &services, e, s],
            topo.iter().map(|(k, _)| k),
        )),
        _ => None,
    };
    let mut out = Vec::new();
    let mut totals_slices = Count::default();
    let mut totals_addresses = Count::default();
    let mut fully_pruned_services = 0;
    for (key, keys) in &topo {
        let missing: Option<Vec<String>> = match &local {
            Some(Some(labels)) => Some(
                keys.iter()
                    .filter(|k| !labels.contains_key(*k))
                    .cloned()
                    .collect(),
            ),
            _ => None,
        };
        let fully_pruned = match &local {
            None => None,
            Some(None) => Some(true),
            Some(Some(_)) => missing.as_ref().map(|m| m.len() == keys.len()),
        };
        let (slice_count, address_count) = counts
            .as_ref()
            .and_then(|c| c.per_service.get(key))
            .map_or((None, None), |(s, a)| (Some(*s), Some(*a)));
        if fully_pruned == Some(true) {
            fully_pruned_services += 1;
            if let (Some(Some(_)), Some(m)) = (&local, &missing) {
                let lost = slice_count
                    .map(|c| format!("all {} endpoints", c.total))
                    .unwrap_or_else(|| "every endpoint".into());
                problems.push(Problem {
                    tag: Tag::Topology,
                    message: format!(
                        "service {key}: node {hostname:?} has no label {} (its topologyKeys): \
                         {lost} would be pruned",
                        m.join(", ")
                    ),
                });
            }
        }
        if let Some(c) = slice_count {
            totals_slices.add(c);
        }
        if let Some(c) = address_count {
            totals_addresses.add(c);
        }
        out.push(ServiceReport {
            namespace: key.namespace.to_string(),
            name: key.name.to_string(),
            topology_keys: keys.iter().cloned().collect(),
            missing_keys: missing,
            fully_pruned,
            endpoint_slice_endpoints: slice_count,
            endpoints_addresses: address_count,
        });
    }
    if let Some(c) = counts {
        report.totals = Some(Totals {
            topology_services: out.len(),
            fully_pruned_services,
            endpoint_slice_endpoints: totals_slices,
            endpoints_addresses: totals_addresses,
            served: c.served,
        });
    }
    report.topology_services = Some(out);
}
