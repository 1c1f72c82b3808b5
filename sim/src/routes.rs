//! Request routing for the simulator: (method, path) → [`Route`], plus query-string decoding.
//! Exact path matching only; which EndpointSlice versions exist is decided by `--slice-version`.
//! Pure. Not the product's `api::route` / `api::query`: the sim takes path segments literally (a
//! namespace `a%2Fb` is served, tests/it/protocol_proxy.rs relies on it) and keeps a bad `%` escape
//! in the query as it is, where the product proxies such a path and answers such a query 400.

use grid_wrapper::k8s::Resource;

/// Which EndpointSlice versions are served (`--slice-version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceVersions {
    /// Only `discovery.k8s.io/v1`.
    V1,
    /// Only `discovery.k8s.io/v1beta1`.
    V1beta1,
    /// Both.
    Both,
}

impl SliceVersions {
    /// Whether a resource is served at all under this setting.
    pub fn serves(self, res: Resource) -> bool {
        match res {
            Resource::SlicesV1 => self != SliceVersions::V1beta1,
            Resource::SlicesV1beta1 => self != SliceVersions::V1,
            _ => true,
        }
    }

    /// Served discovery versions, preferred first.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            SliceVersions::V1 => &["v1"],
            SliceVersions::V1beta1 => &["v1beta1"],
            SliceVersions::Both => &["v1", "v1beta1"],
        }
    }
}

/// Discovery documents the simulator serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// `GET /api` (APIVersions).
    Core,
    /// `GET /api/v1` (APIResourceList).
    CoreV1,
    /// `GET /apis` (APIGroupList).
    Groups,
    /// `GET /apis/discovery.k8s.io` (APIGroup).
    SliceGroup,
    /// `GET /apis/discovery.k8s.io/<version>` (APIResourceList).
    SliceVersion(&'static str),
    /// `GET /apis/networking.k8s.io` (APIGroup).
    NetworkingGroup,
    /// `GET /apis/networking.k8s.io/v1` (APIResourceList): servicecidrs, unless not served.
    NetworkingV1 {
        /// Whether servicecidrs are listed (`--no-servicecidrs`: not).
        servicecidrs: bool,
    },
    /// `GET /version`.
    Version,
}

/// Control operations under `/sim/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOp {
    /// `POST /sim/apply`.
    Apply,
    /// `POST /sim/delete`.
    Delete,
    /// `POST /sim/label-node`.
    LabelNode,
    /// `POST /sim/pad-node`.
    PadNode,
    /// `POST /sim/compact`.
    Compact,
    /// `POST /sim/close-watches`.
    CloseWatches,
    /// `GET /sim/requests`.
    Requests,
    /// `POST /sim/requests/clear` (the served log too).
    ClearRequests,
    /// `GET /sim/served`: the lists and watches served from the store.
    Served,
    /// `GET /sim/state`.
    State,
    /// `POST /sim/reset-rv`.
    ResetRv,
    /// `GET /sim/edge-health` (the stub answer; counted).
    EdgeHealth,
    /// `POST /sim/edge-health` (sets the stub answer).
    SetEdgeHealth,
    /// `POST /sim/refuse`.
    Refuse,
    /// `GET /sim/load`: the load model's settings and counters.
    Load,
    /// `POST /sim/load`: changes the load model.
    SetLoad,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// GET list or watch of a collection, optionally restricted to a namespace.
    Collection {
        /// The resource.
        res: Resource,
        /// Path namespace.
        ns: Option<String>,
    },
    /// GET one object.
    Object {
        /// The resource.
        res: Resource,
        /// Path namespace (`None` for nodes).
        ns: Option<String>,
        /// Object name.
        name: String,
    },
    /// GET a discovery document.
    Discovery(Discovery),
    /// A control operation (method already checked).
    Sim(SimOp),
    /// `/sim/...` with an unknown path or wrong method.
    SimBad,
    /// `GET /readyz`, `/livez` or `/healthz`: `ok` (failover probes).
    Health,
    /// Anything else: recorded and answered generically.
    Other,
}

impl Route {
    /// The resource of a collection or object route.
    pub fn resource(&self) -> Option<Resource> {
        match self {
            Route::Collection { res, .. } | Route::Object { res, .. } => Some(*res),
            _ => None,
        }
    }
}

fn sim_route(method: &str, rest: &str) -> Route {
    let op = match (method, rest) {
        ("POST", "apply") => SimOp::Apply,
        ("POST", "delete") => SimOp::Delete,
        ("POST", "label-node") => SimOp::LabelNode,
        ("POST", "pad-node") => SimOp::PadNode,
        ("POST", "compact") => SimOp::Compact,
        ("POST", "close-watches") => SimOp::CloseWatches,
        ("GET", "requests") => SimOp::Requests,
        ("POST", "requests/clear") => SimOp::ClearRequests,
        ("GET", "served") => SimOp::Served,
        ("GET", "state") => SimOp::State,
        ("POST", "reset-rv") => SimOp::ResetRv,
        ("GET", "edge-health") => SimOp::EdgeHealth,
        ("POST", "edge-health") => SimOp::SetEdgeHealth,
        ("POST", "refuse") => SimOp::Refuse,
        ("GET", "load") => SimOp::Load,
        ("POST", "load") => SimOp::SetLoad,
        _ => return Route::SimBad,
    };
    Route::Sim(op)
}

fn core_resource(seg: &str) -> Option<Resource> {
    match seg {
        "services" => Some(Resource::Services),
        "endpoints" => Some(Resource::Endpoints),
        _ => None,
    }
}

/// Routes a request.
pub fn route(method: &str, path: &str, slices: SliceVersions) -> Route {
    if let Some(rest) = path.strip_prefix("/sim/") {
        return sim_route(method, rest);
    }
    if method != "GET" {
        return Route::Other;
    }
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api"] => Route::Discovery(Discovery::Core),
        ["api", "v1"] => Route::Discovery(Discovery::CoreV1),
        ["apis"] => Route::Discovery(Discovery::Groups),
        ["apis", "discovery.k8s.io"] => Route::Discovery(Discovery::SliceGroup),
        ["apis", "networking.k8s.io"] => Route::Discovery(Discovery::NetworkingGroup),
        ["apis", "networking.k8s.io", "v1"] => {
            Route::Discovery(Discovery::NetworkingV1 { servicecidrs: true })
        }
        ["version"] => Route::Discovery(Discovery::Version),
        ["readyz" | "livez" | "healthz"] => Route::Health,
        ["apis", "discovery.k8s.io", "v1"] if slices.serves(Resource::SlicesV1) => {
            Route::Discovery(Discovery::SliceVersion("v1"))
        }
        ["apis", "discovery.k8s.io", "v1beta1"] if slices.serves(Resource::SlicesV1beta1) => {
            Route::Discovery(Discovery::SliceVersion("v1beta1"))
        }
        ["api", "v1", "nodes"] => Route::Collection {
            res: Resource::Nodes,
            ns: None,
        },
        ["api", "v1", "nodes", name] if !name.is_empty() => Route::Object {
            res: Resource::Nodes,
            ns: None,
            name: name.to_string(),
        },
        ["api", "v1", r] => match core_resource(r) {
            Some(res) => Route::Collection { res, ns: None },
            None => Route::Other,
        },
        ["api", "v1", "namespaces", ns, r] if !ns.is_empty() => match core_resource(r) {
            Some(res) => Route::Collection {
                res,
                ns: Some(ns.to_string()),
            },
            None => Route::Other,
        },
        ["api", "v1", "namespaces", ns, r, name] if !ns.is_empty() && !name.is_empty() => {
            match core_resource(r) {
                Some(res) => Route::Object {
                    res,
                    ns: Some(ns.to_string()),
                    name: name.to_string(),
                },
                None => Route::Other,
            }
        }
        ["apis", "networking.k8s.io", "v1", "servicecidrs"] => Route::Collection {
            res: Resource::CidrsV1,
            ns: None,
        },
        ["apis", "networking.k8s.io", "v1", "servicecidrs", name] if !name.is_empty() => {
            Route::Object {
                res: Resource::CidrsV1,
                ns: None,
                name: name.to_string(),
            }
        }
        ["apis", "discovery.k8s.io", v, rest @ ..] => {
            let res = match *v {
                "v1" => Resource::SlicesV1,
                "v1beta1" => Resource::SlicesV1beta1,
                _ => return Route::Other,
            };
            if !slices.serves(res) {
                return Route::Other;
            }
            match rest {
                ["endpointslices"] => Route::Collection { res, ns: None },
                ["namespaces", ns, "endpointslices"] if !ns.is_empty() => Route::Collection {
                    res,
                    ns: Some(ns.to_string()),
                },
                ["namespaces", ns, "endpointslices", name]
                    if !ns.is_empty() && !name.is_empty() =>
                {
                    Route::Object {
                        res,
                        ns: Some(ns.to_string()),
                        name: name.to_string(),
                    }
                }
                _ => Route::Other,
            }
        }
        _ => Route::Other,
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes a query component (`+` is a space; bad escapes are kept literally).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex);
                let lo = b.get(i + 2).copied().and_then(hex);
                if let (Some(h), Some(l)) = (hi, lo) {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decoded query parameters; the first occurrence of a key wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: &str) -> Query {
        Query(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    /// Value of a parameter (`Some("")` when present without a value).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `watch` is true unless absent, `0` or `false` (case-insensitive).
    pub fn is_watch(&self) -> bool {
        match self.get("watch") {
            None => false,
            Some(v) => !(v == "0" || v.eq_ignore_ascii_case("false")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_table() {
        use Resource::*;
        let both = SliceVersions::Both;
        let col = |res, ns: Option<&str>| Route::Collection {
            res,
            ns: ns.map(str::to_string),
        };
        let cases: Vec<(&str, &str, SliceVersions, Route)> = vec![
            ("GET", "/api/v1/nodes", both, col(Nodes, None)),
            ("GET", "/api/v1/services", both, col(Services, None)),
            ("GET", "/api/v1/endpoints", both, col(Endpoints, None)),
            (
                "GET",
                "/api/v1/namespaces/kube-system/services",
                both,
                col(Services, Some("kube-system")),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1/endpointslices",
                both,
                col(SlicesV1, None),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices",
                both,
                col(SlicesV1beta1, Some("default")),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1beta1/endpointslices",
                SliceVersions::V1,
                Route::Other,
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1/endpointslices",
                SliceVersions::V1beta1,
                Route::Other,
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1beta1",
                SliceVersions::V1,
                Route::Other,
            ),
            (
                "GET",
                "/apis/discovery.k8s.io/v1",
                SliceVersions::V1,
                Route::Discovery(Discovery::SliceVersion("v1")),
            ),
            (
                "GET",
                "/apis/discovery.k8s.io",
                both,
                Route::Discovery(Discovery::SliceGroup),
            ),
            (
                "GET",
                "/api/v1/nodes/edge-a1",
                both,
                Route::Object {
                    res: Nodes,
                    ns: None,
                    name: "edge-a1".into(),
                },
            ),
            (
                "GET",
                "/api/v1/namespaces/default/services/web",
                both,
                Route::Object {
                    res: Services,
                    ns: Some("default".into()),
                    name: "web".into(),
                },
            ),
            ("GET", "/api/v1/nodes/edge-a1/status", both, Route::Other),
            ("GET", "/api/v1/servicesXYZ", both, Route::Other),
            ("GET", "/api/v1/nodes/", both, Route::Other),
            ("POST", "/api/v1/nodes", both, Route::Other),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                both,
                Route::Other,
            ),
            ("POST", "/sim/apply", both, Route::Sim(SimOp::Apply)),
            ("GET", "/sim/apply", both, Route::SimBad),
            ("GET", "/sim/state", both, Route::Sim(SimOp::State)),
            ("GET", "/sim/served", both, Route::Sim(SimOp::Served)),
            ("POST", "/sim/served", both, Route::SimBad),
            (
                "POST",
                "/sim/requests/clear",
                both,
                Route::Sim(SimOp::ClearRequests),
            ),
            ("GET", "/sim/nope", both, Route::SimBad),
            ("POST", "/sim/reset-rv", both, Route::Sim(SimOp::ResetRv)),
            (
                "GET",
                "/sim/edge-health",
                both,
                Route::Sim(SimOp::EdgeHealth),
            ),
            (
                "POST",
                "/sim/edge-health",
                both,
                Route::Sim(SimOp::SetEdgeHealth),
            ),
            ("POST", "/sim/refuse", both, Route::Sim(SimOp::Refuse)),
            ("GET", "/sim/refuse", both, Route::SimBad),
            ("GET", "/readyz", both, Route::Health),
            ("GET", "/livez", both, Route::Health),
            ("GET", "/healthz", both, Route::Health),
            ("POST", "/readyz", both, Route::Other),
            ("GET", "/readyz/etcd", both, Route::Other),
        ];
        for (m, p, v, want) in cases {
            assert_eq!(route(m, p, v), want, "{m} {p}");
        }
    }

    #[test]
    fn query_decoding_and_watch_flag() {
        let q = Query::parse(
            "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21x&fieldSelector=metadata.name%3Dedge-a1&watch=&a=1&a=2&bad=%zz+y",
        );
        assert_eq!(
            q.get("labelSelector"),
            Some("!service.kubernetes.io/headless,!x")
        );
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=edge-a1"));
        assert_eq!(q.get("a"), Some("1"));
        assert_eq!(q.get("bad"), Some("%zz y"));
        assert!(q.is_watch());
        for (raw, want) in [
            ("", false),
            ("watch=true", true),
            ("watch=1", true),
            ("watch=0", false),
            ("watch=False", false),
        ] {
            assert_eq!(Query::parse(raw).is_watch(), want, "{raw}");
        }
    }
}
