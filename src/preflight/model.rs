//! The data of `grid-wrapper check`: what was fetched ([`Fetched`]) and the report built from
//! it ([`Report`], serialized as the `--output=json` document). Pure data.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::cri::{self, Sandboxes};
use crate::k8s::Resource;
use crate::upstream::client::UpstreamError;
use crate::upstream::decode::ListResult;
use crate::upstream::discovery::CidrFinding;

/// Layout version of the JSON report (`reportFormat`); bumped only when a field changes
/// meaning or disappears (added fields keep it).
pub const REPORT_FORMAT: u32 = 1;

/// Everything one check fetched from the upstream.
#[derive(Debug)]
pub struct Fetched {
    /// `--hostname`.
    pub hostname: String,
    /// The upstream server URL (`""` when the configuration could not be read).
    pub server: String,
    /// `--wrapper-in-cluster` (it changes what `default/kubernetes` serves).
    pub wrapper_in_cluster: bool,
    /// Problems of the local configuration found before any request (e.g. an unreadable
    /// bearer token file), as messages.
    pub config_problems: Vec<String>,
    /// `GET /version` (or the configuration error that prevented any request).
    pub version: Result<Value, UpstreamError>,
    /// The rest of the check; `None` when `/version` did not reach the upstream (nothing else
    /// was tried: it would fail the same way, after the same timeouts).
    pub reached: Option<Reached>,
    /// Each site relay (`--relay-kubeconfig`, `--relay-servers`), in order of preference.
    pub relays: Vec<RelayFetch>,
    /// The container runtime (`--container-runtime-endpoint`); `None` without the flag.
    pub runtime: Option<RuntimeFetch>,
}

/// One poll of the container runtime, as the runtime source makes it (docs/SEMANTICS.md §13).
#[derive(Debug)]
pub struct RuntimeFetch {
    /// `--container-runtime-endpoint`, as given.
    pub endpoint: String,
    /// `--container-runtime-request-timeout`: the poll's deadline.
    pub deadline_secs: u64,
    /// What the poll saw (`ListPodSandbox`, then `PodSandboxStatus` per ready sandbox).
    pub seen: Result<Sandboxes, cri::client::Error>,
}

/// What one check of one site relay fetched, with the relay kubeconfig's credentials.
#[derive(Debug)]
pub struct RelayFetch {
    /// The relay's URL.
    pub server: String,
    /// `GET /version`: TLS, the client certificate accepted.
    pub version: Result<Value, UpstreamError>,
    /// The reflectors' LIST and a short WATCH of each resource the upstream check decided on;
    /// empty when `/version` did not reach the relay.
    pub resources: Vec<ResourceFetch>,
}

/// What was fetched once the upstream answered.
#[derive(Debug)]
pub struct Reached {
    /// The EndpointSlice version the server would mirror.
    pub slices: SliceFinding,
    /// Whether the server would mirror ServiceCIDRs, and which version (the server's own probe);
    /// `Err` when the probe itself failed.
    pub cidrs: Result<CidrFinding, UpstreamError>,
    /// Nodes, Services, Endpoints and the EndpointSlices of [`Reached::slices`], in that order,
    /// then the ServiceCIDRs when [`Reached::cidrs`] found them.
    pub resources: Vec<ResourceFetch>,
}

/// The EndpointSlice version and how it was decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceFinding {
    /// The version.
    pub kind: Resource,
    /// How it was found.
    pub source: SliceSource,
}

/// How the EndpointSlice version was decided (as the server decides it at start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceSource {
    /// API discovery answered, listing these versions.
    Discovery(Vec<String>),
    /// Discovery failed; LIST probes decided.
    Probe,
    /// Neither answered: the server's default guess (it re-checks while running).
    Guess,
}

/// The LIST (the same query the reflector makes) and the short WATCH of one resource.
#[derive(Debug)]
pub struct ResourceFetch {
    /// The resource.
    pub kind: Resource,
    /// The full list.
    pub list: Result<ListResult, UpstreamError>,
    /// A watch from the list's resourceVersion with `timeoutSeconds=1`: `Ok` when it answered
    /// 200 (its body is not read).
    pub watch: Result<(), UpstreamError>,
}

/// A stable problem class: the first word after `problem:` / `warning:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tag {
    /// The local configuration (kubeconfig, in-cluster files, credentials files) is unusable.
    Config,
    /// The upstream was not reached (resolve, connect, timeout, not HTTP).
    Connectivity,
    /// The TLS handshake or the server certificate failed.
    Tls,
    /// The upstream answered 401: the credentials were rejected.
    Auth,
    /// The upstream answered 403: this identity may not do that.
    Rbac,
    /// The upstream answered 429 Too Many Requests: it is up but shedding load (API Priority
    /// and Fairness); the server would wait for its `Retry-After` and ask again.
    Throttled,
    /// Another failed request the server needs (404, 5xx, an undecodable answer).
    Api,
    /// The local node (`--hostname`) is not a Node upstream.
    Node,
    /// Topology: a Service whose keys the local node has none of (all its endpoints pruned),
    /// (warning) an unusable `topologyKeys` annotation, or (advice) a Service native traffic
    /// distribution could serve.
    Topology,
    /// (warning) A field the protobuf schema built into grid-wrapper does not know.
    Protobuf,
    /// The container runtime (`--container-runtime-endpoint`) did not answer a poll: its
    /// socket missing or refused, permission denied, no answer within the deadline, or not a
    /// CRI server.
    Runtime,
}

impl Tag {
    /// The tag as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Config => "config",
            Tag::Connectivity => "connectivity",
            Tag::Tls => "tls",
            Tag::Auth => "auth",
            Tag::Rbac => "rbac",
            Tag::Throttled => "throttled",
            Tag::Api => "api",
            Tag::Node => "node",
            Tag::Topology => "topology",
            Tag::Protobuf => "protobuf",
            Tag::Runtime => "runtime",
        }
    }

    /// The class of a failed upstream call.
    pub fn of(e: &UpstreamError) -> Tag {
        match e {
            UpstreamError::Config(_) | UpstreamError::InvalidRequest(_) => Tag::Config,
            UpstreamError::Unreachable(_)
            | UpstreamError::Stalled(_)
            | UpstreamError::Protocol(_) => Tag::Connectivity,
            UpstreamError::Tls(_) => Tag::Tls,
            UpstreamError::Status { code: 401, .. } => Tag::Auth,
            UpstreamError::Status { code: 403, .. } => Tag::Rbac,
            UpstreamError::Status { code: 429, .. } => Tag::Throttled,
            UpstreamError::Status { .. }
            | UpstreamError::TooLarge { .. }
            | UpstreamError::TooManyItems { .. } => Tag::Api,
            UpstreamError::ForeignResourceVersion { .. } => Tag::Connectivity,
            UpstreamError::Decode(_) => Tag::Api,
        }
    }

    /// Whether a call failing this way got an answer from the upstream.
    pub fn reached(self) -> bool {
        !matches!(self, Tag::Config | Tag::Connectivity | Tag::Tls)
    }
}

/// One problem (or warning): a tag and one line of text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The class.
    pub tag: Tag,
    /// What is wrong, on one line.
    pub message: String,
}

/// The report; serialized as the `--output=json` document (camelCase field names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`REPORT_FORMAT`].
    pub report_format: u32,
    /// No problems: grid-wrapper can run on this node with these flags.
    pub ready: bool,
    /// `--hostname`.
    pub hostname: String,
    /// The upstream apiserver (the cloud).
    pub upstream: UpstreamReport,
    /// The site relays read from before the upstream, in order (empty without
    /// `--relay-kubeconfig`).
    pub relays: Vec<RelayReport>,
    /// The container runtime; `None` without `--container-runtime-endpoint`.
    pub runtime: Option<RuntimeReport>,
    /// One entry per (resource, verb) tried, in order.
    pub access: Vec<Access>,
    /// The local node.
    pub node: NodeReport,
    /// Every key of every Service's `topologyKeys` annotation (sorted); empty when none or
    /// when the Services could not be listed.
    pub topology_keys: Vec<String>,
    /// The topology Services in key order; `None` when the Services could not be listed.
    pub topology_services: Option<Vec<ServiceReport>>,
    /// Sums and served-object counts; `None` unless all four resources were listed.
    pub totals: Option<Totals>,
    /// Why it is not ready (empty when ready).
    pub problems: Vec<Problem>,
    /// Worth knowing, not blocking.
    pub warnings: Vec<Problem>,
    /// Suggestions: nothing is wrong (e.g. a Service native traffic distribution could serve).
    pub advisories: Vec<Problem>,
}

/// What the upstream said about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamReport {
    /// The server URL.
    pub server: String,
    /// Whether it answered HTTP at all.
    pub reachable: bool,
    /// `GET /version` `gitVersion`.
    pub git_version: Option<String>,
    /// The EndpointSlice apiVersion the server would mirror, e.g. `discovery.k8s.io/v1`.
    pub endpoint_slice_version: Option<String>,
    /// How: `discovery`, `probe` (discovery failed, LISTs decided) or `guess` (neither
    /// answered; the server would re-check while running).
    pub endpoint_slice_version_source: Option<&'static str>,
    /// The versions API discovery listed (empty unless the source is `discovery`).
    pub discovery_versions: Vec<String>,
    /// The ServiceCIDR apiVersion the server would mirror, e.g. `networking.k8s.io/v1`; `None`
    /// when it would proxy them (see [`UpstreamReport::service_cidrs`]).
    pub service_cidr_version: Option<String>,
    /// What the ServiceCIDR probe found: `mirrored`, `absent` (404: proxied), `forbidden` (403:
    /// proxied) or `unknown` (the probe failed); `None` when the upstream was not reached.
    pub service_cidrs: Option<&'static str>,
}

/// One site relay, as checked with the relay kubeconfig's credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayReport {
    /// The relay's URL.
    pub server: String,
    /// Always `true`: marks the entry as a relay.
    pub relay: bool,
    /// Whether it answered HTTP at all (TLS and the client certificate accepted).
    pub reachable: bool,
    /// `GET /version` `gitVersion`.
    pub git_version: Option<String>,
    /// One entry per (resource, verb) tried, in order.
    pub access: Vec<Access>,
}

/// The container runtime, as one poll of the runtime source saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeReport {
    /// `--container-runtime-endpoint`, as given.
    pub endpoint: String,
    /// Whether the poll succeeded (every call answered as CRI within the deadline).
    pub reachable: bool,
    /// Why not, as a class: `socket-missing`, `permission-denied`, `refused` (a socket nobody
    /// listens on), `timeout`, `closed`, `io`, `not-cri` (HTTP/2, gRPC or the CRI message
    /// broken, or a gRPC error status); `None` when reachable.
    pub failure: Option<&'static str>,
    /// The error, one line; `None` when reachable.
    pub error: Option<String>,
    /// Sandboxes listed (every state); `None` when not reachable.
    pub sandboxes: Option<usize>,
    /// Of which READY (by their status); `None` when not reachable.
    pub ready_sandboxes: Option<usize>,
    /// Pods with a ready sandbox that has an address (those the repair can serve); `None` when
    /// not reachable.
    pub pods_with_address: Option<usize>,
    /// Pods the runtime knows without a ready sandbox; `None` when not reachable.
    pub pods_not_ready: Option<usize>,
    /// What the repair rule (docs/SEMANTICS.md §13) would change in the objects served right
    /// now; `None` unless the runtime answered and all four resources were listed.
    pub repairs: Option<RepairCounts>,
}

/// Endpoints the repair rule would change, per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairCounts {
    /// EndpointSlice endpoints (the mirrored version) served on the runtime's address.
    pub endpoint_slice_addresses: usize,
    /// EndpointSlice endpoints served not ready.
    pub endpoint_slice_not_ready: usize,
    /// Endpoints addresses served on the runtime's address.
    pub endpoints_addresses: usize,
    /// Endpoints addresses served not ready.
    pub endpoints_not_ready: usize,
}

/// One access check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// Plural resource name, e.g. `endpointslices`.
    pub resource: &'static str,
    /// Its apiVersion, e.g. `discovery.k8s.io/v1`.
    pub api_version: &'static str,
    /// `list` or `watch`.
    pub verb: &'static str,
    /// Whether it succeeded.
    pub allowed: bool,
    /// The HTTP status of a refusal (401, 403, 404…); `None` when allowed or unanswered.
    pub code: Option<u16>,
    /// The error, when not allowed.
    pub error: Option<String>,
}

/// The local node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    /// `--hostname`.
    pub name: String,
    /// Whether the Node exists upstream; `None` when the Nodes could not be listed.
    pub found: Option<bool>,
    /// Its label for each key in `topologyKeys` (`None`: the node lacks it).
    pub topology_labels: BTreeMap<String, Option<String>>,
}

/// Kept and total endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Served to kube-proxy on this node.
    pub kept: usize,
    /// Upstream.
    pub total: usize,
}

impl Count {
    /// Adds another count.
    pub fn add(&mut self, other: Count) {
        self.kept += other.kept;
        self.total += other.total;
    }
}

/// One topology Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its keys (sorted).
    pub topology_keys: Vec<String>,
    /// Those the local node has no label for; `None` when the node is unknown.
    pub missing_keys: Option<Vec<String>>,
    /// Every endpoint is pruned whatever the endpoints are: the node is missing or has none of
    /// the keys. `None` when the Nodes could not be listed.
    pub fully_pruned: Option<bool>,
    /// Endpoints of its EndpointSlices (the version mirrored); `None` unless all lists worked.
    pub endpoint_slice_endpoints: Option<Count>,
    /// Addresses (ready and not) of its core/v1 Endpoints; `None` unless all lists worked.
    pub endpoints_addresses: Option<Count>,
}

/// Sums over the topology Services, and what would be served in all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Topology Services.
    pub topology_services: usize,
    /// Of which fully pruned.
    pub fully_pruned_services: usize,
    /// Sum of [`ServiceReport::endpoint_slice_endpoints`].
    pub endpoint_slice_endpoints: Count,
    /// Sum of [`ServiceReport::endpoints_addresses`].
    pub endpoints_addresses: Count,
    /// Objects served per resource.
    pub served: ServedCounts,
}

/// Objects the cache would serve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedCounts {
    /// Nodes: the local one, if the upstream has it (every other Node is held as its facts
    /// and its requests proxied, docs/SEMANTICS.md §1.1).
    pub nodes: usize,
    /// Services.
    pub services: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// EndpointSlices (of the mirrored version).
    pub endpointslices: usize,
}
