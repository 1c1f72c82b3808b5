//! Routing: (method, path) → the cache-backed [`Route`], if any, on exact paths only
//! (docs/SEMANTICS.md §1). Query parameters never affect routing. What a request without a route
//! becomes (proxied upstream) is [`crate::api::decide`]'s to say.

use crate::k8s::Resource;

/// A cache-backed route: what a request reads of the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// A cache-backed collection: list or watch, optionally restricted to one namespace.
    Collection {
        /// The served resource.
        res: Resource,
        /// `Some(ns)` for the namespaced path.
        namespace: Option<String>,
    },
    /// A single cached object.
    Object {
        /// The served resource.
        res: Resource,
        /// Namespace (`None` for Nodes).
        namespace: Option<String>,
        /// `metadata.name`.
        name: String,
    },
}

impl Route {
    /// The served resource.
    pub fn resource(&self) -> Resource {
        match self {
            Route::Collection { res, .. } | Route::Object { res, .. } => *res,
        }
    }
}

/// Decodes `%XX` escapes of one path segment; `None` on a bad escape, non-UTF-8 or `/` inside.
pub fn segment(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = raw.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    let s = String::from_utf8(out).ok()?;
    (!s.is_empty() && !s.contains('/')).then_some(s)
}

fn core_resource(name: &str) -> Option<Resource> {
    match name {
        "services" => Some(Resource::Services),
        "endpoints" => Some(Resource::Endpoints),
        "nodes" => Some(Resource::Nodes),
        _ => None,
    }
}

/// Routes one request: `None` when it has no cache-backed route. Only `GET` is ever answered
/// from the cache.
pub fn route(method: &str, path: &str) -> Option<Route> {
    if method != "GET" {
        return None;
    }
    let rest = path.strip_prefix('/')?;
    let raw: Vec<&str> = rest.split('/').collect();
    let segs = raw
        .iter()
        .map(|s| segment(s))
        .collect::<Option<Vec<String>>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let collection = |res, namespace: Option<&str>| Route::Collection {
        res,
        namespace: namespace.map(str::to_string),
    };
    let object = |res, namespace: Option<&str>, name: &str| Route::Object {
        res,
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
    };
    match s.as_slice() {
        ["api", "v1", r] => core_resource(r).map(|res| collection(res, None)),
        ["api", "v1", "nodes", name] => Some(object(Resource::Nodes, None, name)),
        ["api", "v1", "namespaces", ns, r] => match core_resource(r) {
            Some(res) if res.namespaced() => Some(collection(res, Some(ns))),
            _ => None,
        },
        ["api", "v1", "namespaces", ns, r, name] => match core_resource(r) {
            Some(res) if res.namespaced() => Some(object(res, Some(ns), name)),
            _ => None,
        },
        ["apis", "discovery.k8s.io", v, rest @ ..] => {
            let res = match *v {
                "v1" => Resource::SlicesV1,
                "v1beta1" => Resource::SlicesV1beta1,
                _ => return None,
            };
            match rest {
                ["endpointslices"] => Some(collection(res, None)),
                ["namespaces", ns, "endpointslices"] => Some(collection(res, Some(ns))),
                ["namespaces", ns, "endpointslices", name] => Some(object(res, Some(ns), name)),
                _ => None,
            }
        }
        ["apis", "networking.k8s.io", v, "servicecidrs", rest @ ..] => {
            let res = match *v {
                "v1" => Resource::CidrsV1,
                "v1beta1" => Resource::CidrsV1beta1,
                _ => return None,
            };
            match rest {
                [] => Some(collection(res, None)),
                [name] => Some(object(res, None, name)),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(res: Resource, ns: Option<&str>) -> Option<Route> {
        Some(Route::Collection {
            res,
            namespace: ns.map(str::to_string),
        })
    }

    fn obj(res: Resource, ns: Option<&str>, name: &str) -> Option<Route> {
        Some(Route::Object {
            res,
            namespace: ns.map(str::to_string),
            name: name.to_string(),
        })
    }

    #[test]
    fn exact_paths_route_and_everything_else_proxies() {
        use Resource::*;
        let cases: Vec<(&str, &str, Option<Route>)> = vec![
            ("GET", "/api/v1/services", col(Services, None)),
            ("GET", "/api/v1/endpoints", col(Endpoints, None)),
            ("GET", "/api/v1/nodes", col(Nodes, None)),
            ("GET", "/api/v1/nodes/edge-1", obj(Nodes, None, "edge-1")),
            ("GET", "/api/v1/nodes/edge%2D1", obj(Nodes, None, "edge-1")),
            (
                "GET",
                "/api/v1/namespaces/default/services",
                col(Services, Some("default")),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/endpoints/web",
                obj(Endpoints, Some("default"), "web"),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1/endpointslices",
                col(SlicesV1, None),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1beta1/endpointslices",
                col(SlicesV1beta1, None),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
                col(SlicesV1, Some("kube-system")),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1beta1/namespaces/a/endpointslices/b",
                obj(SlicesV1beta1, Some("a"), "b"),
            ),
            // The original matched prefixes; we do not (docs/SEMANTICS.md §9).
            ("GET", "/api/v1/servicesXYZ", None),
            ("GET", "/api/v1/services/", None),
            ("GET", "/api/v1/services/foo", None),
            ("GET", "/api/v1/nodes/edge-1/status", None),
            ("GET", "/api/v1/namespaces/default/nodes", None),
            ("GET", "/api/v1/namespaces//services", None),
            ("GET", "/api/v1/nodes/%zz", None),
            ("GET", "/api/v1/nodes/a%2Fb", None),
            ("GET", "/apis/discovery.k8s.io/v2/endpointslices", None),
            (
                "GET",
                "/apis/networking.k8s.io/v1/servicecidrs",
                col(CidrsV1, None),
            ),
            (
                "GET",
                "/apis/networking.k8s.io/v1beta1/servicecidrs/kubernetes",
                obj(CidrsV1beta1, None, "kubernetes"),
            ),
            // Cluster-scoped: no namespaced form; other versions and subresources go upstream.
            (
                "GET",
                "/apis/networking.k8s.io/v1/namespaces/a/servicecidrs",
                None,
            ),
            ("GET", "/apis/networking.k8s.io/v1alpha1/servicecidrs", None),
            (
                "GET",
                "/apis/networking.k8s.io/v1/servicecidrs/kubernetes/status",
                None,
            ),
            ("GET", "/apis/networking.k8s.io/v1/ingresses", None),
            ("GET", "/api", None),
            ("GET", "", None),
            ("GET", "*", None),
            ("POST", "/api/v1/services", None),
            ("PATCH", "/api/v1/nodes/edge-1", None),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                None,
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(route(method, path), want, "{method} {path}");
        }
    }
}
