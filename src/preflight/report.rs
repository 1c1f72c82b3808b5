//! The pure half of `grid-wrapper check`: what was fetched ([`Fetched`]) in, the [`Report`]
//! out. No sockets, no clock; unit-tested with hand-made fetch results.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cache::collection::labels_of;
use crate::cache::topology::{
    self, KeysAnnotation, KeysSource, TopologyKeys, HOSTNAME_LABEL, ZONE_LABEL,
};
use crate::cri::client::{Error as RuntimeError, ErrorKind as RuntimeErrorKind};
use crate::cri::source::view_of;
use crate::handoff::runtime_pods::RuntimePods;
use crate::k8s::{ObjectKey, Resource};
use crate::upstream::client::UpstreamError;
use crate::upstream::decode::ListResult;
use crate::upstream::discovery::CidrFinding;

use super::model::{
    Access, Count, Fetched, NodeReport, Problem, Reached, RelayFetch, RelayReport, Report,
    ResourceFetch, RuntimeFetch, RuntimeReport, ServiceReport, SliceSource, Tag, Totals,
    UpstreamReport, REPORT_FORMAT,
};
use super::{served, CHECK_TIMEOUTS};

/// What the ServiceCIDR probe says (docs/SEMANTICS.md §5.1), into `upstream`; a warning when
/// the server would proxy them for want of permission, or could not tell.
fn cidr_finding(
    found: &Result<CidrFinding, UpstreamError>,
    upstream: &mut UpstreamReport,
) -> Option<Problem> {
    let (state, warning) = match found {
        Ok(CidrFinding::Mirrored(kind)) => {
            upstream.service_cidr_version = Some(kind.api_version().into());
            ("mirrored", None)
        }
        Ok(CidrFinding::Absent) => ("absent", None),
        Ok(CidrFinding::Forbidden) => (
            "forbidden",
            Some(Problem {
                tag: Tag::Rbac,
                message: "list servicecidrs (networking.k8s.io): 403 Forbidden: the server would \
                          proxy kube-proxy's ServiceCIDR requests instead of serving them, and \
                          they would fail while the upstream is unreachable (grant list and \
                          watch on networking.k8s.io servicecidrs, as deploy/rbac.yaml does)"
                    .into(),
            }),
        ),
        Err(e) => {
            let tag = Tag::of(e);
            (
                "unknown",
                Some(Problem {
                    tag,
                    message: format!(
                        "list servicecidrs (networking.k8s.io): {}: the server would retry \
                         until it can tell whether to serve them{}",
                        describe(e),
                        advice(tag)
                    ),
                }),
            )
        }
    };
    upstream.service_cidrs = Some(state);
    warning
}

/// One line for an upstream error: `401 Unauthorized: <message>` for a status, else its text.
pub fn describe(e: &UpstreamError) -> String {
    match e {
        UpstreamError::Status {
            code,
            reason,
            message,
            retry_after,
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
            if let Some(d) = retry_after {
                s.push_str(&format!(" (Retry-After {} s)", d.as_secs()));
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
        Tag::Throttled => " (the apiserver is up but shedding load with API Priority and \
                           Fairness: the server would wait for its Retry-After and ask again; \
                           run the check again later)"
            .into(),
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
        service_cidr_version: None,
        service_cidrs: None,
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
    let relays = f
        .relays
        .iter()
        .map(|r| relay_part(r, &mut problems, &mut warnings))
        .collect();
    let (runtime, pods) = match &f.runtime {
        Some(r) => {
            let (report, pods) = runtime_part(r, &mut problems);
            (Some(report), pods)
        }
        None => (None, None),
    };
    let mut report = Report {
        report_format: REPORT_FORMAT,
        ready: false,
        hostname: f.hostname.clone(),
        upstream,
        relays,
        runtime,
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
        advisories: Vec::new(),
    };
    if let Some(reached) = f.reached {
        reached_part(
            &f.hostname,
            f.wrapper_in_cluster,
            reached,
            pods.as_ref(),
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

/// The access entries of `resources` (a list and a watch each), with a problem per refusal
/// (`on`: who was asked, e.g. `relay https://r1:51010: `, empty for the upstream).
fn access_part(resources: &[ResourceFetch], on: &str, problems: &mut Vec<Problem>) -> Vec<Access> {
    let mut access = Vec::new();
    for r in resources {
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
                        "{on}{verb} {} ({}): {}{}",
                        res.plural(),
                        res.api_version(),
                        describe(e),
                        advice(tag)
                    ),
                });
            }
            access.push(Access {
                resource: res.plural(),
                api_version: res.api_version(),
                verb,
                allowed: err.is_none(),
                code: err.and_then(UpstreamError::status_code),
                error: err.map(describe),
            });
        }
    }
    access
}

/// One relay: `/version` (any answer proves TLS and the client certificate; an error status is
/// a warning, as for the upstream) and its access checks. Unreachable is a problem: the
/// follower would read from the next server.
fn relay_part(
    r: &RelayFetch,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> RelayReport {
    let on = format!("relay {}: ", r.server);
    let mut report = RelayReport {
        server: r.server.clone(),
        relay: true,
        reachable: false,
        git_version: None,
        access: Vec::new(),
    };
    match &r.version {
        Ok(v) => {
            report.reachable = true;
            report.git_version = v.get("gitVersion").and_then(Value::as_str).map(Into::into);
        }
        Err(e) => {
            let tag = Tag::of(e);
            report.reachable = tag.reached();
            let message = match tag {
                Tag::Config => format!("{on}{}", describe(e)),
                _ => format!(
                    "{on}GET {}/version: {}{}",
                    r.server,
                    describe(e),
                    advice(tag)
                ),
            };
            if report.reachable {
                warnings.push(Problem { tag, message });
            } else {
                problems.push(Problem { tag, message });
            }
        }
    }
    report.access = access_part(&r.resources, &on, problems);
    report
}

/// The class of a failed runtime poll, as `RuntimeReport::failure` names it.
fn runtime_failure(e: &RuntimeError) -> &'static str {
    match &e.kind {
        RuntimeErrorKind::Connect(io) => match io.kind() {
            std::io::ErrorKind::NotFound => "socket-missing",
            std::io::ErrorKind::PermissionDenied => "permission-denied",
            std::io::ErrorKind::ConnectionRefused => "refused",
            _ => "io",
        },
        RuntimeErrorKind::Io(_) => "io",
        RuntimeErrorKind::Timeout(_) => "timeout",
        RuntimeErrorKind::Closed => "closed",
        RuntimeErrorKind::Protocol(_) | RuntimeErrorKind::Message(_) => "not-cri",
    }
}

/// What to do about a failed runtime poll, by class.
fn runtime_advice(failure: &str, deadline_secs: u64) -> String {
    match failure {
        "socket-missing" => " (is the runtime's socket mounted into this container at that \
                              path? see the chart's containerRuntime values)"
            .into(),
        "permission-denied" => " (connecting to a unix socket needs write permission on it: \
                                 run as a user the socket's mode lets in)"
            .into(),
        "refused" => " (the socket exists but nothing listens on it: is the runtime running?)".into(),
        "timeout" => format!(
            " (the runtime did not answer within --container-runtime-request-timeout={deadline_secs} s)"
        ),
        "not-cri" | "closed" => {
            " (is it the CRI socket the kubelet uses, --container-runtime-endpoint as the \
             kubelet names it?)"
                .into()
        }
        _ => String::new(),
    }
}

/// The runtime's part of the report, and the view of the local pods its poll gives. A poll
/// that fails is a `runtime` problem: the flag asks for the runtime source, and the server
/// would run with it doing nothing (serving as if the flag were off, one WARN).
fn runtime_part(
    r: &RuntimeFetch,
    problems: &mut Vec<Problem>,
) -> (RuntimeReport, Option<RuntimePods>) {
    let mut report = RuntimeReport {
        endpoint: r.endpoint.clone(),
        reachable: false,
        failure: None,
        error: None,
        sandboxes: None,
        ready_sandboxes: None,
        pods_with_address: None,
        pods_not_ready: None,
        repairs: None,
    };
    match &r.seen {
        Ok(seen) => {
            let pods = view_of(seen);
            report.reachable = true;
            report.sandboxes = Some(seen.ready.len() + seen.not_ready.len());
            report.ready_sandboxes = Some(seen.ready.len());
            report.pods_with_address = Some(pods.ready.len());
            report.pods_not_ready = Some(pods.not_ready.len());
            (report, Some(pods))
        }
        Err(e) => {
            let failure = runtime_failure(e);
            let error = e.to_string().replace('\n', " ");
            problems.push(Problem {
                tag: Tag::Runtime,
                message: format!("{error}{}", runtime_advice(failure, r.deadline_secs)),
            });
            report.failure = Some(failure);
            report.error = Some(error);
            (report, None)
        }
    }
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
    pods: Option<&RuntimePods>,
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
    warnings.extend(cidr_finding(&reached.cidrs, &mut report.upstream));
    let mut lists: BTreeMap<&'static str, Option<Vec<Value>>> = BTreeMap::new();
    report.access = access_part(&reached.resources, "", problems);
    for r in &reached.resources {
        let res = r.kind;
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
    let native = native_distribution(report.upstream.git_version.as_deref());
    let mut topo: Vec<(ObjectKey, TopologyKeys)> = Vec::new();
    for svc in &services {
        let Some(key) = ObjectKey::of(svc) else {
            continue;
        };
        let parsed = topology::service_topology(svc);
        if let (Some(version), KeysAnnotation::Keys(k)) = (native, &parsed.keys) {
            if parsed.source == Some(KeysSource::TopologyKeys) {
                report.advisories.extend(native_advice(&key, k, version));
            }
        }
        match parsed.keys {
            KeysAnnotation::Keys(k) => topo.push((key, k)),
            KeysAnnotation::Invalid(why) => warnings.push(Problem {
                tag: Tag::Topology,
                message: format!("service {key}: topologyKeys ignored (served unfiltered): {why}"),
            }),
            KeysAnnotation::Absent => {}
        }
    }
    topo.sort_by(|a, b| a.0.cmp(&b.0));
    let in_use: BTreeSet<String> = topo
        .iter()
        .flat_map(|(_, k)| k.set.iter().cloned())
        .collect();
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
            pods,
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
                keys.set
                    .iter()
                    .filter(|k| !labels.contains_key(*k))
                    .cloned()
                    .collect(),
            ),
            _ => None,
        };
        // A last `*` serves every endpoint when the keys keep none (SEMANTICS §2.9).
        let fully_pruned = match &local {
            None => None,
            Some(_) if keys.fallback => Some(false),
            Some(None) => Some(true),
            Some(Some(_)) => missing.as_ref().map(|m| m.len() == keys.set.len()),
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
            topology_keys: keys.listed(),
            missing_keys: missing,
            fully_pruned,
            endpoint_slice_endpoints: slice_count,
            endpoints_addresses: address_count,
        });
    }
    if let Some(c) = counts {
        if let Some(runtime) = &mut report.runtime {
            runtime.repairs = c.repairs;
        }
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

/// The first Kubernetes release where `spec.trafficDistribution` has `PreferSameZone` and
/// `PreferSameNode` generally available.
const NATIVE_DISTRIBUTION: (u32, u32) = (1, 35);

/// The upstream's `gitVersion` when it is at least [`NATIVE_DISTRIBUTION`] (`v1.35.0`,
/// `v1.35.2-gke.1`, `v1.36.0-sim`); `None` when older or unparsable.
pub fn native_distribution(git_version: Option<&str>) -> Option<&str> {
    let text = git_version?;
    let mut parts = text.strip_prefix('v').unwrap_or(text).split('.');
    let mut number = || -> Option<u32> {
        let part = parts.next()?;
        let digits = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        part[..digits].parse().ok()
    };
    let (major, minor) = (number()?, number()?);
    ((major, minor) >= NATIVE_DISTRIBUTION).then_some(text)
}

/// The advisory line for a Service whose `topologyKeys` is exactly the hostname or the zone
/// label (no fallback, default mode), which native traffic distribution also serves.
fn native_advice(key: &ObjectKey, keys: &TopologyKeys, version: &str) -> Option<Problem> {
    let only = |label: &str| keys.set.len() == 1 && keys.set.contains(label);
    if keys.dynamic() {
        return None;
    }
    let (label, native) = if only(HOSTNAME_LABEL) {
        (HOSTNAME_LABEL, "PreferSameNode")
    } else if only(ZONE_LABEL) {
        (ZONE_LABEL, "PreferSameZone")
    } else {
        return None;
    };
    Some(Problem {
        tag: Tag::Topology,
        message: format!(
            "service {key}: topologyKeys [\"{label}\"]: the upstream ({version}) has native \
             spec.trafficDistribution: {native}, which does this with a fallback to other \
             endpoints; grid-wrapper keeps it strict (no fallback) and serving offline"
        ),
    })
}
