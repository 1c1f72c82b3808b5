//! Upstream apiserver access: kubeconfig / in-cluster settings ([`kubeconfig`]), the one ureq
//! agent every thread clones, for grid-wrapper's own API calls ([`client`]), the forwarding of
//! clients' requests, the proxy's upstream side ([`forward`]), pure decoding of list bodies and watch lines
//! ([`decode`]; a list body split into its items as it arrives: [`list_split`]), retry pacing ([`backoff`]), the mirrored resources ([`kind`]), EndpointSlice
//! version choice ([`discovery`]), the list+watch threads that feed the cache ([`reflector`]) and
//! their health counters ([`stats`], pure), the thread that discovers the versions to mirror,
//! starts the reflectors and re-checks those versions ([`supervisor`]; what it decides reaches
//! the cache through its `Expectations` trait), and the optional edge-health poller
//! ([`edge_health`], `--service-autonomy-enhancement`), whose answer's parser is a hand-off
//! type ([`crate::handoff::edge_health`]), and the choice among several apiservers
//! (`--master=A,B,…`, and the site relays before them) with its health probes ([`failover`]),
//! each server's role and resourceVersion domain ([`domain`]), why a call failed ([`error`],
//! shared by the client and its TLS settings) and the `Retry-After` rules ([`retry_after`], pure). Private: `episode` (the reflectors'
//! failure bookkeeping), `rewatch` (whether a re-watch first reads the upstream's current
//! resourceVersion, and whether it went back), `tls` (rustls/ureq TLS settings) and `throttle` (the `--kube-qps` token
//! bucket).
//! Nothing here touches the mio loop or the served view.

pub mod backoff;
#[cfg(feature = "io")]
pub mod client;
pub mod decode;
#[cfg(feature = "io")]
pub mod discovery;
pub mod domain;
#[cfg(feature = "io")]
pub mod edge_health;
#[cfg(feature = "io")]
mod episode;
#[cfg(feature = "io")]
pub mod error;
pub mod failover;
#[cfg(feature = "io")]
pub mod forward;
pub mod kind;
pub mod kubeconfig;
#[cfg(feature = "io")]
pub mod list;
pub mod list_split;
pub mod proto_list;
pub mod proto_watch;
#[cfg(feature = "io")]
pub mod reflector;
pub mod retry_after;
#[cfg(feature = "io")]
mod rewatch;
#[cfg(feature = "io")]
pub mod site_report;
pub mod stats;
#[cfg(feature = "io")]
pub mod supervisor;
#[cfg(feature = "io")]
mod throttle;
#[cfg(feature = "io")]
mod tls;
#[cfg(feature = "io")]
mod token;

#[cfg(feature = "io")]
pub use client::{ListSettings, Timeouts, Upstream, UpstreamError, UpstreamOptions};
pub use decode::ListResult;
#[cfg(feature = "io")]
pub use forward::{ForwardRequest, ForwardResponse};
pub use kubeconfig::{KubeconfigError, UpstreamConfig};
#[cfg(feature = "io")]
pub use reflector::{discover_slice_kind, spawn, ListWatch};
