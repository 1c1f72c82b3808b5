//! Kubernetes vocabulary shared by every layer: the served resources, object keys and the
//! `Status` error object. Pure data, no I/O.

pub mod convert;
pub mod status;

use std::fmt;
use std::sync::Arc;

/// `namespace/name` of an object; cluster-scoped objects (Nodes) have an empty namespace.
/// Ordering is by namespace, then name — the order lists and WatchList initial events use.
/// The strings are shared (`Arc<str>`): a key is copied into several maps and indexes, and a
/// copy costs a reference count, not two allocations. Compared with [`crate::bytes::cmp`]
/// (the cache's maps are keyed by it; musl's `memcmp` is slow).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ObjectKey {
    /// Namespace, `""` for cluster-scoped objects.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
}

impl ObjectKey {
    /// Builds a key.
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Reads `metadata.namespace` / `metadata.name` of a JSON object. `None` without a name.
    pub fn of(obj: &serde_json::Value) -> Option<Self> {
        let meta = obj.get("metadata")?;
        let name = meta.get("name")?.as_str()?;
        if name.is_empty() {
            return None;
        }
        let namespace = meta.get("namespace").and_then(|v| v.as_str()).unwrap_or("");
        Some(ObjectKey::new(namespace, name))
    }
}

impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let by = |a: &str, b: &str| crate::bytes::cmp(a.as_bytes(), b.as_bytes());
        by(&self.namespace, &other.namespace).then_with(|| by(&self.name, &other.name))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// kube-proxy's selector for Services, Endpoints and EndpointSlices (docs/SEMANTICS.md §4): the
/// label selector the upstream is listed and watched with ([`Resource::label_selector`]).
pub const SERVICE_PROXY_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

/// A resource grid-wrapper mirrors from the upstream and serves from its cache. Both
/// EndpointSlice versions are served, each derived from the one version the upstream offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// core/v1 Services.
    Services,
    /// core/v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io/v1 EndpointSlices.
    SlicesV1,
    /// discovery.k8s.io/v1beta1 EndpointSlices.
    SlicesV1beta1,
    /// core/v1 Nodes.
    Nodes,
}

impl Resource {
    /// Every served resource, in a fixed order (index = [`Resource::index`]).
    pub const ALL: [Resource; 5] = [
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
        Resource::SlicesV1beta1,
        Resource::Nodes,
    ];

    /// Position in [`Resource::ALL`].
    pub fn index(self) -> usize {
        match self {
            Resource::Services => 0,
            Resource::Endpoints => 1,
            Resource::SlicesV1 => 2,
            Resource::SlicesV1beta1 => 3,
            Resource::Nodes => 4,
        }
    }

    /// The slot of the cache's first-list bookkeeping, 0..=3: which of its four collections the
    /// resource's upstream list fills (both EndpointSlice versions fill the same one, so either
    /// one's list completes it). The cache is synced once all four slots are listed, and
    /// [`crate::handoff::list_order::ListOrder`] tracks which first lists are done by it.
    pub fn sync_slot(self) -> u8 {
        match self {
            Resource::Nodes => 0,
            Resource::Services => 1,
            Resource::Endpoints => 2,
            Resource::SlicesV1 | Resource::SlicesV1beta1 => 3,
        }
    }

    /// Cluster-wide collection path upstream, e.g. `/api/v1/services`.
    pub fn path(self) -> &'static str {
        match self {
            Resource::Nodes => "/api/v1/nodes",
            Resource::Services => "/api/v1/services",
            Resource::Endpoints => "/api/v1/endpoints",
            Resource::SlicesV1 => "/apis/discovery.k8s.io/v1/endpointslices",
            Resource::SlicesV1beta1 => "/apis/discovery.k8s.io/v1beta1/endpointslices",
        }
    }

    /// The label selector the upstream is listed and watched with, if any: every resource but
    /// Nodes (unfiltered) uses [`SERVICE_PROXY_SELECTOR`].
    pub fn label_selector(self) -> Option<&'static str> {
        (self != Resource::Nodes).then_some(SERVICE_PROXY_SELECTOR)
    }

    /// Item kind, e.g. `EndpointSlice`.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Services => "Service",
            Resource::Endpoints => "Endpoints",
            Resource::SlicesV1 | Resource::SlicesV1beta1 => "EndpointSlice",
            Resource::Nodes => "Node",
        }
    }

    /// Fills in an object's `kind` and `apiVersion` where absent: an apiserver omits them from
    /// list items (kubernetes/kubernetes#63676), watch events carry them.
    pub fn fill_type_meta(self, obj: &mut serde_json::Map<String, serde_json::Value>) {
        obj.entry("kind").or_insert_with(|| self.kind().into());
        obj.entry("apiVersion")
            .or_insert_with(|| self.api_version().into());
    }

    /// List kind, e.g. `EndpointSliceList`.
    pub fn list_kind(self) -> &'static str {
        match self {
            Resource::Services => "ServiceList",
            Resource::Endpoints => "EndpointsList",
            Resource::SlicesV1 | Resource::SlicesV1beta1 => "EndpointSliceList",
            Resource::Nodes => "NodeList",
        }
    }

    /// `apiVersion` of items and lists.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::Services | Resource::Endpoints | Resource::Nodes => "v1",
            Resource::SlicesV1 => "discovery.k8s.io/v1",
            Resource::SlicesV1beta1 => "discovery.k8s.io/v1beta1",
        }
    }

    /// Plural resource name used in paths and `Status.details.kind`.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Services => "services",
            Resource::Endpoints => "endpoints",
            Resource::SlicesV1 | Resource::SlicesV1beta1 => "endpointslices",
            Resource::Nodes => "nodes",
        }
    }

    /// Whether objects of this resource live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Resource::Nodes)
    }

    /// Field names a `fieldSelector` may use on this resource (docs/SEMANTICS.md §1).
    pub fn selectable_fields(self) -> &'static [&'static str] {
        match self {
            Resource::Services => &[
                "metadata.name",
                "metadata.namespace",
                "spec.clusterIP",
                "spec.type",
            ],
            Resource::Endpoints | Resource::SlicesV1 | Resource::SlicesV1beta1 => {
                &["metadata.name", "metadata.namespace"]
            }
            Resource::Nodes => &["metadata.name"],
        }
    }
}
