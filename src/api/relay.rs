//! What the relay port (`--relay-bind-address`, docs/SEMANTICS.md §12) answers itself, beyond
//! the cache-backed routes it shares with the kube-proxy port: the probes a follower's failover
//! prober sends, the EndpointSlice discovery a follower's reflectors start with, and a 404 for
//! the resources the relay view does not serve (a follower reads 404 as "absent", never a
//! proxied answer of the relay's upstream, which may have them). Pure: it reads the relay view's
//! [`Serving`], and feeds [`crate::api::decide`], which alone says what the request's fate is.

use serde_json::json;

use crate::api::handlers::Reply;
use crate::api::negotiate::Format;
use crate::api::route::route;
use crate::api::serving::Serving;
use crate::api::wire::Segment;
use crate::handoff::site_pods;
use crate::k8s::status::ApiError;
use crate::k8s::Resource;

/// The EndpointSlice API group, as discovery names it.
const SLICE_GROUP: &str = "discovery.k8s.io";

/// What the relay port does with one request.
#[derive(Debug)]
pub enum RelayAnswer {
    /// A probe's answer: status and a plain-text body.
    Probe(u16, &'static str),
    /// Answered by the relay: discovery, or a 404 `Status`.
    Reply(Reply),
    /// An answer that depends on the relay view, which is not ready yet: held (or 503) like a
    /// cache-backed request.
    NotReady,
    /// Nothing special: routed as on the kube-proxy port (the cache routes from the relay view,
    /// the rest proxied).
    Routed,
    /// A follower's report of its node's pods (docs/SEMANTICS.md §13.1), on a ready view:
    /// taken by [`crate::api::runtime_report::take`].
    RuntimeReport,
}

/// The EndpointSlice version the relay view serves: the upstream's (v1beta1 only for an
/// upstream that has no v1).
pub fn slice_resource(view: &Serving) -> Resource {
    if view.serves_v1beta1 {
        Resource::SlicesV1beta1
    } else {
        Resource::SlicesV1
    }
}

/// Decides what the relay port answers to `method` `path` (without its query) from `view`.
pub fn answer(method: &str, path: &str, view: &Serving) -> RelayAnswer {
    if path.starts_with(GRID_WRAPPER_PREFIX) {
        return own_path(method, path, view);
    }
    if method != "GET" {
        return RelayAnswer::Routed;
    }
    match path {
        "/healthz" | "/livez" => return RelayAnswer::Probe(200, "ok"),
        "/readyz" if view.ready => return RelayAnswer::Probe(200, "ok"),
        "/readyz" => {
            return RelayAnswer::Probe(
                503,
                "not ready: the relay's initial sync with its upstream is not complete",
            )
        }
        _ => {}
    }
    let asks = match path.strip_prefix("/apis/discovery.k8s.io") {
        Some("") => Asks::Group,
        Some("/v1") => Asks::Version(Resource::SlicesV1),
        Some("/v1beta1") => Asks::Version(Resource::SlicesV1beta1),
        _ => match route(method, path).map(|r| r.resource()) {
            Some(res) if res.is_cidr() || is_slice(res) => Asks::Resource(res),
            _ => return RelayAnswer::Routed,
        },
    };
    if !view.ready {
        return RelayAnswer::NotReady;
    }
    let served = slice_resource(view);
    let not_served = match asks {
        Asks::Group => false,
        Asks::Resource(res) if res.is_cidr() => !view.serves_cidrs,
        Asks::Version(res) | Asks::Resource(res) => res != served,
    };
    if not_served {
        return RelayAnswer::Reply(Reply::error(&ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource (the relay does not serve it)",
        )));
    }
    match asks {
        Asks::Group => RelayAnswer::Reply(json_reply(&api_group(served))),
        Asks::Version(_) => RelayAnswer::Reply(json_reply(&resource_list(served))),
        // A served slice version or ServiceCIDRs: the cache route answers from the relay view.
        Asks::Resource(_) => RelayAnswer::Routed,
    }
}

/// The prefix of the paths that are grid-wrapper's own on the relay port: answered by the relay,
/// never proxied to its upstream.
const GRID_WRAPPER_PREFIX: &str = "/grid-wrapper/";

/// A path of grid-wrapper's own: the runtime report (`PUT` only), else 404.
fn own_path(method: &str, path: &str, view: &Serving) -> RelayAnswer {
    let error = |code: u16, reason: &'static str, message: &str| {
        RelayAnswer::Reply(Reply::error(&ApiError::new(code, reason, message)))
    };
    if !path.starts_with(site_pods::REPORT_PATH) {
        return error(404, "NotFound", "the relay serves no such path");
    }
    match (method, site_pods::node_of_path(path)) {
        ("PUT", Some(_)) if view.ready => RelayAnswer::RuntimeReport,
        ("PUT", Some(_)) => RelayAnswer::NotReady,
        ("PUT", None) => error(400, "BadRequest", "the path does not name one node"),
        _ => error(
            405,
            "MethodNotAllowed",
            "a runtime report is a PUT of the reporting node's pods",
        ),
    }
}

/// What a request asks of the versions the relay view serves.
#[derive(Clone, Copy)]
enum Asks {
    /// The `discovery.k8s.io` APIGroup.
    Group,
    /// The APIResourceList of one EndpointSlice version.
    Version(Resource),
    /// A cache route of EndpointSlices or ServiceCIDRs.
    Resource(Resource),
}

fn is_slice(res: Resource) -> bool {
    matches!(res, Resource::SlicesV1 | Resource::SlicesV1beta1)
}

/// The `discovery.k8s.io` APIGroup naming the one version served.
fn api_group(served: Resource) -> serde_json::Value {
    let version = served_version(served);
    let gv = json!({"groupVersion": format!("{SLICE_GROUP}/{version}"), "version": version});
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": SLICE_GROUP,
        "versions": [gv.clone()],
        "preferredVersion": gv,
    })
}

/// The APIResourceList of the served version: EndpointSlices, read-only.
fn resource_list(served: Resource) -> serde_json::Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": served.api_version(),
        "resources": [{
            "name": served.plural(),
            "singularName": "endpointslice",
            "namespaced": true,
            "kind": served.kind(),
            "verbs": ["get", "list", "watch"],
        }],
    })
}

fn served_version(served: Resource) -> &'static str {
    match served {
        Resource::SlicesV1beta1 => "v1beta1",
        _ => "v1",
    }
}

fn json_reply(doc: &serde_json::Value) -> Reply {
    // Serializing a Value cannot fail.
    let body = serde_json::to_vec(doc).unwrap_or_default();
    Reply {
        code: 200,
        format: Format::Json,
        retry_after: None,
        body: vec![Segment::Owned(body)],
    }
}

#[cfg(test)]
mod tests;
