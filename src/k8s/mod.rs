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
/// EndpointSlice versions are served, each derived from the one version the upstream offers;
/// so are both ServiceCIDR versions, when the upstream has the resource (docs/SEMANTICS.md §5).
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
    /// networking.k8s.io/v1 ServiceCIDRs (Kubernetes ≥ 1.33; kube-proxy's nftables proxier).
    CidrsV1,
    /// networking.k8s.io/v1beta1 ServiceCIDRs (Kubernetes 1.31 to 1.36).
    CidrsV1beta1,
}

impl Resource {
    /// Every served resource, in a fixed order (index = [`Resource::index`]).
    pub const ALL: [Resource; 7] = [
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
        Resource::SlicesV1beta1,
        Resource::Nodes,
        Resource::CidrsV1,
        Resource::CidrsV1beta1,
    ];

    /// Position in [`Resource::ALL`].
    pub fn index(self) -> usize {
        match self {
            Resource::Services => 0,
            Resource::Endpoints => 1,
            Resource::SlicesV1 => 2,
            Resource::SlicesV1beta1 => 3,
            Resource::Nodes => 4,
            Resource::CidrsV1 => 5,
            Resource::CidrsV1beta1 => 6,
        }
    }

    /// The slot of the cache's first-list bookkeeping, 0..=4: which of its upstream collections
    /// the resource's upstream list fills (both EndpointSlice versions fill the same one, so
    /// either one's list completes it; both ServiceCIDR versions too). The cache is synced once
    /// slots 0..=3 are listed, and slot 4 too when the upstream has ServiceCIDRs
    /// ([`Resource::is_cidr`]); [`crate::handoff::list_order::ListOrder`] tracks which first
    /// lists are done by it.
    pub fn sync_slot(self) -> u8 {
        match self {
            Resource::Nodes => 0,
            Resource::Services => 1,
            Resource::Endpoints => 2,
            Resource::SlicesV1 | Resource::SlicesV1beta1 => 3,
            Resource::CidrsV1 | Resource::CidrsV1beta1 => 4,
        }
    }

    /// Whether this is a ServiceCIDR version: served only when the upstream has the resource,
    /// proxied otherwise (docs/SEMANTICS.md §5).
    pub fn is_cidr(self) -> bool {
        matches!(self, Resource::CidrsV1 | Resource::CidrsV1beta1)
    }

    /// Cluster-wide collection path upstream, e.g. `/api/v1/services`.
    pub fn path(self) -> &'static str {
        match self {
            Resource::Nodes => "/api/v1/nodes",
            Resource::Services => "/api/v1/services",
            Resource::Endpoints => "/api/v1/endpoints",
            Resource::SlicesV1 => "/apis/discovery.k8s.io/v1/endpointslices",
            Resource::SlicesV1beta1 => "/apis/discovery.k8s.io/v1beta1/endpointslices",
            Resource::CidrsV1 => "/apis/networking.k8s.io/v1/servicecidrs",
            Resource::CidrsV1beta1 => "/apis/networking.k8s.io/v1beta1/servicecidrs",
        }
    }

    /// The label selector the upstream is listed and watched with, if any: Services, Endpoints
    /// and EndpointSlices use [`SERVICE_PROXY_SELECTOR`]; Nodes and ServiceCIDRs are cached
    /// whole (a client's own selector is applied when they are served, §1).
    pub fn label_selector(self) -> Option<&'static str> {
        match self {
            Resource::Nodes | Resource::CidrsV1 | Resource::CidrsV1beta1 => None,
            _ => Some(SERVICE_PROXY_SELECTOR),
        }
    }

    /// Item kind, e.g. `EndpointSlice`.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Services => "Service",
            Resource::Endpoints => "Endpoints",
            Resource::SlicesV1 | Resource::SlicesV1beta1 => "EndpointSlice",
            Resource::Nodes => "Node",
            Resource::CidrsV1 | Resource::CidrsV1beta1 => "ServiceCIDR",
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
            Resource::CidrsV1 | Resource::CidrsV1beta1 => "ServiceCIDRList",
        }
    }

    /// `apiVersion` of items and lists.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::Services | Resource::Endpoints | Resource::Nodes => "v1",
            Resource::SlicesV1 => "discovery.k8s.io/v1",
            Resource::SlicesV1beta1 => "discovery.k8s.io/v1beta1",
            Resource::CidrsV1 => "networking.k8s.io/v1",
            Resource::CidrsV1beta1 => "networking.k8s.io/v1beta1",
        }
    }

    /// Plural resource name used in paths and `Status.details.kind`.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Services => "services",
            Resource::Endpoints => "endpoints",
            Resource::SlicesV1 | Resource::SlicesV1beta1 => "endpointslices",
            Resource::Nodes => "nodes",
            Resource::CidrsV1 | Resource::CidrsV1beta1 => "servicecidrs",
        }
    }

    /// Whether objects of this resource live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Resource::Nodes | Resource::CidrsV1 | Resource::CidrsV1beta1
        )
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
            Resource::Nodes | Resource::CidrsV1 | Resource::CidrsV1beta1 => &["metadata.name"],
        }
    }
}
