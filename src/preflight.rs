//! `grid-wrapper check`: a preflight for a node before kube-proxy is rewired to grid-wrapper.
//! One pass against the upstream with the server's own flags, then a report. It starts no
//! server and no reflector, writes nothing (`--cache-dir` is not touched) and never waits long:
//! every call has a short limit ([`CHECK_TIMEOUTS`]), and when `GET /version` does not reach
//! the upstream nothing else is tried.
//!
//! # What it does
//!
//! 1. Reads the kubeconfig / in-cluster settings as the server does (and the bearer token file,
//!    which the server would otherwise only warn about).
//! 2. `GET /version`: connectivity, TLS, credentials; `gitVersion`. No answer is a problem and
//!    ends the check; an error answer (401, 403…) is only a warning, since the server itself
//!    never asks for `/version` (the resource checks below say what it would get).
//! 3. The EndpointSlice version, decided as the server decides it at start (API discovery, else
//!    LIST probes).
//! 4. Whether the server would mirror ServiceCIDRs (its own LIST probe, v1 then v1beta1): a 403
//!    is a `rbac` warning (the server would proxy them, and kube-proxy's ServiceCIDR watch
//!    would fail while the upstream is unreachable); a 404 (an upstream older than 1.33) is
//!    reported, not warned about.
//! 5. Per resource (Nodes, Services, Endpoints, EndpointSlices of that version, ServiceCIDRs when
//!    the server would mirror them): the reflector's
//!    own LIST (kube-proxy's label selector, `resourceVersion=0`, pages followed) — which is the
//!    list-permission check and the data — then a WATCH from the list's resourceVersion with
//!    `timeoutSeconds=1` that must answer 200 (its body is not read). Access is tested by
//!    trying, not by SelfSubjectAccessReview: trying exercises the real path (authentication,
//!    RBAC, admission of the exact query, an aggregated or proxied apiserver in between).
//! 6. The local node (`--hostname`) and its labels for every key of every Service's
//!    `topologyKeys` (parsed by [`crate::cache::topology::service_keys`]).
//! 7. What would be served: the lists go into a [`crate::cache::store::State`] as the
//!    reflectors' first lists do, and the served collections are counted per topology Service.
//! 8. With `--relay-kubeconfig`: each site relay, alone, with the relay kubeconfig's
//!    credentials: `GET /version` (TLS, the client certificate accepted; no answer is a
//!    problem, an error answer a warning), then the list and the short watch of each resource
//!    of step 5. Problems name the relay (`relay https://r1:51010: list services …`).
//! 9. With `--container-runtime-endpoint`: one poll of the container runtime as the runtime
//!    source makes it (docs/SEMANTICS.md §13): the same client, one deadline for the whole poll
//!    (`--container-runtime-request-timeout`), only `ListPodSandbox` and `PodSandboxStatus`.
//!    It is reported answering or not (why, as a class: the socket missing, permission
//!    denied, refused, a timeout, not a CRI server), with its sandboxes and pods; when the four
//!    lists of step 5 are complete, the repair rule is applied to each object step 7 would
//!    serve and the endpoints it would change counted (served on the runtime's address, served
//!    not ready). A poll that fails is a `runtime` problem, as an unreachable relay is: the
//!    flag asks for the source, and the server would run with it doing nothing (serving as if
//!    the flag were off, one WARN). The runtime is polled even when the upstream is not
//!    reached (it is local); the repair counts then are unknown.
//!
//! The pure part ([`model`], [`report::build`], [`render`]) turns a [`Fetched`] into a
//! [`Report`] and prints it; [`fetch`] is the thin I/O part.
//!
//! # Exit codes and text output
//!
//! 0: ready; 1: at least one problem; 2: invalid flags (before anything is contacted). The text
//! report ends with one `problem: <tag>: <message>` line per problem, then `result: ready` or
//! `result: NOT ready (N problems)`. Tags (stable): `config`, `connectivity`, `tls`, `auth`
//! (401: credentials rejected), `rbac` (403), `throttled` (429: the upstream sheds load; its
//! `Retry-After` is shown), `api` (another failed request), `node` (the
//! local node does not exist), `topology` (a topology Service whose keys the local node has
//! none of: every endpoint pruned), `runtime` (the container runtime did not answer a poll).
//! `warning: <tag>: …` lines do not change the exit code; the
//! tag `protobuf` warns of a listed field that grid-wrapper's protobuf schema does not know
//! (kube-proxy, which reads protobuf, would not get it; [`crate::proto::unknown`]).
//! `advice: topology: …` lines name Services that native traffic distribution could serve
//! (docs/SEMANTICS.md §2.10); they change nothing either.
//!
//! # The JSON document (`--output=json`)
//!
//! One object, field names camelCase (see [`Report`] for the types):
//! - `reportFormat` (number, 1): layout version; new fields may appear without a bump.
//! - `ready` (bool): no problems; the exit code is 0 exactly when true.
//! - `hostname` (string).
//! - `upstream`: `server` (URL), `reachable` (bool: it answered HTTP), `gitVersion` (string or
//!   null), `endpointSliceVersion` (`discovery.k8s.io/v1` / `discovery.k8s.io/v1beta1` or null),
//!   `endpointSliceVersionSource` (`discovery` / `probe` / `guess` or null),
//!   `discoveryVersions` (strings), `serviceCidrVersion` (`networking.k8s.io/v1` /
//!   `networking.k8s.io/v1beta1` or null), `serviceCidrs` (`mirrored` / `absent` / `forbidden` /
//!   `unknown`, or null when the upstream was not reached).
//! - `access`: array of `{resource, apiVersion, verb, allowed, code, error}`: `resource` plural
//!   (`nodes`, `services`, `endpoints`, `endpointslices`, `servicecidrs`), `verb` `list` or `watch`, `code` the
//!   HTTP status of a refusal or null, `error` a one-line text or null. Empty when the upstream
//!   was not reached.
//! - `node`: `name`, `found` (bool, or null when Nodes could not be listed), `topologyLabels`
//!   (object: key → the node's value, or null when it lacks the label).
//! - `topologyKeys`: every key in use (sorted strings).
//! - `topologyServices`: null when Services could not be listed, else an array of
//!   `{namespace, name, topologyKeys, missingKeys, fullyPruned, endpointSliceEndpoints,
//!   endpointsAddresses}`: `missingKeys` (strings or null), `fullyPruned` (bool or null), the
//!   two counts `{kept, total}` or null (EndpointSlice endpoints of the mirrored version;
//!   core/v1 Endpoints addresses, ready and not ready).
//! - `totals`: null unless all four resources were listed, else `{topologyServices,
//!   fullyPrunedServices, endpointSliceEndpoints: {kept, total}, endpointsAddresses: {kept,
//!   total}, served: {nodes, services, endpoints, endpointslices}}`.
//! - `relays`: one entry per site relay, in order: `{server, relay: true, reachable,
//!   gitVersion, access}` (`access` as above, empty when the relay was not reached).
//! - `runtime`: null without `--container-runtime-endpoint`, else `{endpoint, reachable,
//!   failure, error, sandboxes, readySandboxes, podsWithAddress, podsNotReady, repairs}`:
//!   `failure` null or `socket-missing` / `permission-denied` / `refused` / `timeout` /
//!   `closed` / `io` / `not-cri`, `error` null or a one-line text, the four counts null unless
//!   `reachable`; `repairs` null unless the runtime answered and the four lists of step 5 are
//!   complete, else `{endpointSliceAddresses, endpointSliceNotReady, endpointsAddresses,
//!   endpointsNotReady}` (endpoints the repair rule would change in what is served now).
//! - `problems`, `warnings`, `advisories`: arrays of `{tag, message}`.
//!
//! Not checked: edge-health (`--service-autonomy-enhancement` is not polled, so its pruning is
//! not in the counts), the serving certificate files, and whether the bind addresses are free.

pub mod model;
pub mod render;
pub mod report;
mod served;

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde_json::Value;

use crate::config::{Config, OutputFormat};
use crate::cri;
use crate::k8s::Resource;
use crate::upstream::client::{ListSettings, Timeouts, Upstream, UpstreamError, UpstreamOptions};
use crate::upstream::discovery;
use crate::upstream::kind::with_query;
use crate::upstream::kubeconfig::{self, UpstreamConfig};
use crate::upstream::reflector;

pub use model::{
    Fetched, Problem, Reached, RelayFetch, Report, ResourceFetch, RuntimeFetch, SliceFinding,
    SliceSource, Tag,
};
pub use report::build;

/// The check's time limits: connection setup 3 s, a response head (and a whole JSON GET) 5 s,
/// one LIST 60 s, 5 s between reads. An unreachable upstream is reported within about 5 s.
pub const CHECK_TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(3),
    response_head: Duration::from_secs(5),
    list: Duration::from_secs(60),
    idle: Duration::from_secs(5),
    list_progress: Duration::from_secs(5),
    watch_progress: Duration::from_secs(5),
};
/// `timeoutSeconds` of the access-check WATCH.
pub const WATCH_PROBE_SECONDS: &str = "1";

/// Runs the check: fetch, build the report, render it in `format`. Returns the text to print
/// and whether the node is ready.
pub fn run(cfg: &Config, format: OutputFormat) -> (String, bool) {
    let report = build(fetch(cfg));
    let text = match format {
        OutputFormat::Text => render::text(&report),
        // A Report always serializes (string keys, no floats); the fallback is never used.
        OutputFormat::Json => render::json(&report).unwrap_or_else(|e| {
            format!(
                "{{\"reportFormat\":1,\"ready\":false,\"error\":{:?}}}\n",
                e.to_string()
            )
        }),
    };
    (text, report.ready)
}

/// The I/O part: every upstream call of the check, with [`CHECK_TIMEOUTS`]: the upstream, then
/// each site relay.
pub fn fetch(cfg: &Config) -> Fetched {
    let mut fetched = fetch_upstream(cfg);
    let kinds = match &fetched.reached {
        Some(r) => r.resources.iter().map(|f| f.kind).collect(),
        None => vec![
            Resource::Nodes,
            Resource::Services,
            Resource::Endpoints,
            Resource::SlicesV1,
        ],
    };
    match kubeconfig::load_relays(
        cfg.relay_kubeconfig.as_deref(),
        cfg.relay_servers.as_deref(),
    ) {
        Ok(Some(relays)) => {
            fetched.relays = relays
                .server_list()
                .into_iter()
                .map(|server| fetch_relay(cfg, &relays, server, &kinds))
                .collect();
        }
        Ok(None) => {}
        Err(e) => fetched
            .config_problems
            .push(format!("--relay-kubeconfig: {e}")),
    }
    fetch_runtime(cfg, &mut fetched);
    fetched
}

/// One poll of the container runtime, as the runtime source makes it: the same client, the
/// same deadline for the whole poll (`--container-runtime-request-timeout`), only the
/// read-only calls.
/// Nothing without `--container-runtime-endpoint`.
fn fetch_runtime(cfg: &Config, fetched: &mut Fetched) {
    let Some(endpoint) = &cfg.container_runtime_endpoint else {
        return;
    };
    let deadline_secs = cfg.container_runtime_request_timeout_secs;
    match cri::Client::new(endpoint, Duration::from_secs(deadline_secs)) {
        Ok(mut client) => {
            fetched.runtime = Some(RuntimeFetch {
                endpoint: endpoint.clone(),
                deadline_secs,
                seen: client.list_sandboxes(),
            });
        }
        // The flag parser accepted it already; reported all the same.
        Err(e) => fetched
            .config_problems
            .push(format!("--container-runtime-endpoint: {e}")),
    }
}

/// One relay, alone, with the relay kubeconfig's credentials: `/version`, then the reflectors'
/// list and watch of each of `kinds`.
fn fetch_relay(
    cfg: &Config,
    relays: &UpstreamConfig,
    server: &str,
    kinds: &[Resource],
) -> RelayFetch {
    let one = UpstreamConfig {
        server: server.to_string(),
        servers: vec![server.to_string()],
        ..relays.clone()
    };
    let (relay, version) = reach(cfg, &one);
    let resources = relay.map_or_else(Vec::new, |relay| {
        kinds.iter().map(|&k| fetch_resource(&relay, k)).collect()
    });
    RelayFetch {
        server: server.to_string(),
        version,
        resources,
    }
}

/// The check's client for `ucfg` (the server's `--kube-qps`/`--kube-burst`, `--upstream-gzip`
/// and `--max-list-items`, [`CHECK_TIMEOUTS`]) and its `GET /version`; the client only when that
/// reached the server (else nothing more is tried: it would fail the same way).
fn reach(cfg: &Config, ucfg: &UpstreamConfig) -> (Option<Upstream>, Result<Value, UpstreamError>) {
    let lists = ListSettings {
        gzip: cfg.upstream_gzip,
        protobuf: cfg.upstream_protobuf,
        max_list_items: usize::try_from(cfg.max_list_items).unwrap_or(usize::MAX),
        ..ListSettings::default()
    };
    let opts = UpstreamOptions {
        relays: None,
        qps: cfg.kube_qps,
        burst: cfg.kube_burst,
        timeouts: CHECK_TIMEOUTS,
        lists,
    };
    let upstream = match Upstream::new(ucfg, opts) {
        Ok(u) => u,
        Err(e) => return (None, Err(e)),
    };
    let version = upstream.get_json("/version");
    match &version {
        Err(e) if !Tag::of(e).reached() => (None, version),
        _ => (Some(upstream), version),
    }
}

/// The upstream part of [`fetch`].
fn fetch_upstream(cfg: &Config) -> Fetched {
    let mut fetched = Fetched {
        hostname: cfg.hostname.clone(),
        server: cfg.master.clone().unwrap_or_default(),
        wrapper_in_cluster: cfg.wrapper_in_cluster,
        config_problems: Vec::new(),
        version: Err(UpstreamError::Config(String::new())),
        reached: None,
        relays: Vec::new(),
        runtime: None,
    };
    let ucfg = match kubeconfig::load(cfg.kubeconfig.as_deref(), cfg.master.as_deref()) {
        Ok(u) => u,
        Err(e) => {
            fetched.version = Err(UpstreamError::Config(e.to_string()));
            return fetched;
        }
    };
    fetched.server = ucfg.server.clone();
    if let Some(path) = &ucfg.token_file {
        if let Err(e) = kubeconfig::read_bounded(path) {
            fetched.config_problems.push(format!(
                "bearer token file unusable ({e}): requests would go without it"
            ));
        }
    }
    // The check lists as the server would (`--upstream-gzip`).
    let (upstream, version) = reach(cfg, &ucfg);
    fetched.version = version;
    let Some(upstream) = upstream else {
        return fetched;
    };
    let slices = find_slices(&upstream);
    let cidrs = discovery::find_cidr_kind(&upstream);
    let cidr_kind = cidrs.as_ref().ok().and_then(|c| c.kind());
    let resources = [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        slices.kind,
    ]
    .into_iter()
    .chain(cidr_kind)
    .map(|kind| fetch_resource(&upstream, kind))
    .collect();
    fetched.reached = Some(Reached {
        slices,
        cidrs,
        resources,
    });
    fetched
}

/// The EndpointSlice version, as the server decides it at start.
fn find_slices(upstream: &Upstream) -> SliceFinding {
    match upstream.get_json("/apis/discovery.k8s.io") {
        Ok(group) => {
            let (kind, versions) = discovery::slice_kind_from_group(&group);
            SliceFinding {
                kind,
                source: SliceSource::Discovery(versions),
            }
        }
        Err(_) => {
            // The server's own fallback (it asks discovery once more, then probes).
            let (kind, answered) = discovery::discover_slice_kind_checked(upstream);
            let source = if answered {
                SliceSource::Probe
            } else {
                SliceSource::Guess
            };
            SliceFinding { kind, source }
        }
    }
}

/// The reflector's LIST (label selector, `resourceVersion=0`, pages followed), then a short
/// WATCH from its resourceVersion.
fn fetch_resource(upstream: &Upstream, kind: Resource) -> ResourceFetch {
    let sel = kind.label_selector().unwrap_or("");
    let list = reflector::list_all(upstream, kind, "0");
    let rv = list
        .as_ref()
        .map(|l| l.resource_version.clone())
        .unwrap_or_default();
    let query = with_query(
        kind.path(),
        &[
            ("allowWatchBookmarks", "true"),
            ("labelSelector", sel),
            ("resourceVersion", &rv),
            ("timeoutSeconds", WATCH_PROBE_SECONDS),
            ("watch", "true"),
        ],
    );
    // The head is enough: dropping the body closes the connection.
    let watch = upstream.watch(&query, false).map(drop);
    ResourceFetch { kind, list, watch }
}
