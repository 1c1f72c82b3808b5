//! Routing: (method, path) → [`Route`], on exact paths only (docs/SEMANTICS.md §1). Query
//! parameters never affect routing; anything not answered from the cache is proxied upstream.

use crate::k8s::Resource;

/// Where a request goes.
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
    /// Everything else: forwarded upstream unchanged.
    Proxy,
}

impl Route {
    /// The served resource of a cache-backed route.
    pub fn resource(&self) -> Option<Resource> {
        match self {
            Route::Collection { res, .. } | Route::Object { res, .. } => Some(*res),
            Route::Proxy => None,
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

/// Routes one request. Only `GET` is ever answered from the cache.
pub fn route(method: &str, path: &str) -> Route {
    if method != "GET" {
        return Route::Proxy;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Route::Proxy;
    };
    let raw: Vec<&str> = rest.split('/').collect();
    let Some(segs) = raw
        .iter()
        .map(|s| segment(s))
        .collect::<Option<Vec<String>>>()
    else {
        return Route::Proxy;
    };
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
        ["api", "v1", r] => core_resource(r).map_or(Route::Proxy, |res| collection(res, None)),
        ["api", "v1", "nodes", name] => object(Resource::Nodes, None, name),
        ["api", "v1", "namespaces", ns, r] => match core_resource(r) {
            Some(res) if res.namespaced() => collection(res, Some(ns)),
            _ => Route::Proxy,
        },
        ["api", "v1", "namespaces", ns, r, name] => match core_resource(r) {
            Some(res) if res.namespaced() => object(res, Some(ns), name),
            _ => Route::Proxy,
        },
        ["apis", "discovery.k8s.io", v, rest @ ..] => {
            let res = match *v {
                "v1" => Resource::SlicesV1,
                "v1beta1" => Resource::SlicesV1beta1,
                _ => return Route::Proxy,
            };
            match rest {
                ["endpointslices"] => collection(res, None),
                ["namespaces", ns, "endpointslices"] => collection(res, Some(ns)),
                ["namespaces", ns, "endpointslices", name] => object(res, Some(ns), name),
                _ => Route::Proxy,
            }
        }
        ["apis", "networking.k8s.io", v, "servicecidrs", rest @ ..] => {
            let res = match *v {
                "v1" => Resource::CidrsV1,
                "v1beta1" => Resource::CidrsV1beta1,
                _ => return Route::Proxy,
            };
            match rest {
                [] => collection(res, None),
                [name] => object(res, None, name),
                _ => Route::Proxy,
            }
        }
        _ => Route::Proxy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(res: Resource, ns: Option<&str>) -> Route {
        Route::Collection {
            res,
            namespace: ns.map(str::to_string),
        }
    }

    fn obj(res: Resource, ns: Option<&str>, name: &str) -> Route {
        Route::Object {
            res,
            namespace: ns.map(str::to_string),
            name: name.to_string(),
        }
    }

    #[test]
    fn exact_paths_route_and_everything_else_proxies() {
        use Resource::*;
        let cases: Vec<(&str, &str, Route)> = vec![
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
            ("GET", "/api/v1/servicesXYZ", Route::Proxy),
            ("GET", "/api/v1/services/", Route::Proxy),
            ("GET", "/api/v1/services/foo", Route::Proxy),
            ("GET", "/api/v1/nodes/edge-1/status", Route::Proxy),
            ("GET", "/api/v1/namespaces/default/nodes", Route::Proxy),
            ("GET", "/api/v1/namespaces//services", Route::Proxy),
            ("GET", "/api/v1/nodes/%zz", Route::Proxy),
            ("GET", "/api/v1/nodes/a%2Fb", Route::Proxy),
            (
                "GET",
                "/apis/discovery.k8s.io/v2/endpointslices",
                Route::Proxy,
            ),
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
                Route::Proxy,
            ),
            (
                "GET",
                "/apis/networking.k8s.io/v1alpha1/servicecidrs",
                Route::Proxy,
            ),
            (
                "GET",
                "/apis/networking.k8s.io/v1/servicecidrs/kubernetes/status",
                Route::Proxy,
            ),
            ("GET", "/apis/networking.k8s.io/v1/ingresses", Route::Proxy),
            ("GET", "/api", Route::Proxy),
            ("GET", "", Route::Proxy),
            ("GET", "*", Route::Proxy),
            ("POST", "/api/v1/services", Route::Proxy),
            ("PATCH", "/api/v1/nodes/edge-1", Route::Proxy),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                Route::Proxy,
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(route(method, path), want, "{method} {path}");
        }
    }
}
