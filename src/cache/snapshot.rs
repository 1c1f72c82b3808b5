//! The on-disk snapshot of the cache (`--cache-dir`): its contents and its file format. Pure:
//! bytes in, bytes out; the I/O shell (`crate::persist`) reads and writes the files.
//!
//! A snapshot holds what is needed to serve after a restart with no upstream: every cached
//! upstream object (compact JSON, as stored by the cache), the EndpointSlice version mirrored,
//! the last resourceVersion handed out, and what ties it to its node and upstream.

use std::sync::Arc;

use crate::upstream::kind::UpstreamKind;

/// What a snapshot is tied to: it is served only by a process with the same identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `--hostname` of the process that wrote it.
    pub hostname: String,
    /// The upstream: server URL and a fingerprint of its CA (see `crate::persist`).
    pub upstream: String,
}

/// Everything in a snapshot besides the objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Whose snapshot this is.
    pub identity: Identity,
    /// Wall-clock seconds since the Unix epoch when it was taken (for its age; informational).
    pub written_unix_secs: u64,
    /// The last resourceVersion handed out when it was taken.
    pub rv: u64,
    /// The EndpointSlice version mirrored (`SlicesV1` or `SlicesV1beta1`).
    pub slice_kind: UpstreamKind,
}

/// The cached upstream objects, each as compact JSON bytes, per resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Objects {
    /// Nodes.
    pub nodes: Vec<Arc<[u8]>>,
    /// Services.
    pub services: Vec<Arc<[u8]>>,
    /// Endpoints.
    pub endpoints: Vec<Arc<[u8]>>,
    /// EndpointSlices of `Meta::slice_kind`.
    pub slices: Vec<Arc<[u8]>>,
}

impl Objects {
    /// Number of objects over all resources.
    pub fn len(&self) -> usize {
        self.nodes.len() + self.services.len() + self.endpoints.len() + self.slices.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Identity, time, RV, slice version.
    pub meta: Meta,
    /// The objects.
    pub objects: Objects,
}
