//! Upstream apiserver access: kubeconfig / in-cluster settings ([`kubeconfig`]), the one ureq
//! agent every thread clones ([`client`]), pure decoding of list bodies and watch lines
//! ([`decode`]), retry pacing ([`backoff`]), the mirrored resources ([`kind`]), EndpointSlice
//! version choice ([`discovery`]) and the list+watch threads that feed the cache ([`reflector`]).
//! Private: `tls` (rustls/ureq TLS settings) and `throttle` (the `--kube-qps` token bucket).
//! Nothing here touches the mio loop or the served view.

pub mod backoff;
pub mod client;
pub mod decode;
pub mod discovery;
pub mod kind;
pub mod kubeconfig;
pub mod reflector;
mod throttle;
mod tls;

pub use client::{ForwardRequest, ForwardResponse, Upstream, UpstreamError};
pub use decode::ListResult;
pub use kubeconfig::{KubeconfigError, UpstreamConfig};
pub use reflector::{discover_slice_kind, spawn, Change, ListWatch, Sink, UpstreamKind};
