//! Unit tests of the pure part of `grid-wrapper check`: hand-made fetch results in, report and
//! its text/JSON out.

use serde_json::{json, Value};

use super::model::{
    Count, Fetched, Reached, RepairCounts, ResourceFetch, RuntimeFetch, SliceFinding, SliceSource,
    Tag,
};
use super::render;
use super::report::build;
use crate::cri::{self, ReadySandbox, Sandboxes};
use crate::k8s::Resource;
use crate::upstream::client::UpstreamError;
use crate::upstream::decode::ListResult;
use crate::upstream::discovery::CidrFinding;

const HOST: &str = "edge-a1";

fn node(name: &str, zone: Option<&str>) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": name});
    if let Some(z) = zone {
        labels["zone"] = json!(z);
    }
    json!({"metadata": {"name": name, "labels": labels}})
}

fn service(name: &str, keys: Option<&str>) -> Value {
    let mut s = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {}});
    if let Some(k) = keys {
        s["metadata"]["annotations"] = json!({"topologyKeys": k});
    }
    s
}

/// A slice and an Endpoints of `svc` with one endpoint per node.
fn endpoints(svc: &str, nodes: &[&str]) -> (Value, Value) {
    let eps: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"addresses": [format!("10.0.0.{i}")], "nodeName": n}))
        .collect();
    let slice = json!({"metadata": {"name": format!("{svc}-x1"), "namespace": "default",
        "labels": {"kubernetes.io/service-name": svc}}, "addressType": "IPv4", "endpoints": eps});
    let addrs: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"ip": format!("10.0.0.{i}"), "nodeName": n}))
        .collect();
    let ep = json!({"metadata": {"name": svc, "namespace": "default"},
        "subsets": [{"addresses": addrs}]});
    (slice, ep)
}

fn list(items: &[Value]) -> Result<ListResult, UpstreamError> {
    Ok(ListResult {
        items: items.iter().map(|v| v.to_string().into()).collect(),
        resource_version: "7".into(),
        continue_token: None,
        origin: None,
    })
}

fn status(code: u16, reason: &str) -> UpstreamError {
    UpstreamError::Status {
        code,
        reason: reason.into(),
        message: format!("{reason} here"),
        causes: Vec::new(),
        retry_after: None,
    }
}

/// The demo-like cluster: four nodes in zones a, a, b, c; `web` (topology, `zone`) and `api`.
fn cluster(local_zone: Option<&str>) -> [Vec<Value>; 4] {
    let nodes = vec![
        node(HOST, local_zone),
        node("edge-a2", Some("zone-a")),
        node("edge-b1", Some("zone-b")),
        node("edge-c1", Some("zone-c")),
    ];
    let services = vec![service("web", Some("[\"zone\"]")), service("api", None)];
    let (ws, we) = endpoints("web", &[HOST, "edge-a2", "edge-b1", "edge-c1"]);
    let (as_, ae) = endpoints("api", &[HOST, "edge-b1"]);
    [nodes, services, vec![we, ae], vec![ws, as_]]
}

fn fetched(
    data: [Vec<Value>; 4],
    fail: &dyn Fn(Resource, &str) -> Option<UpstreamError>,
) -> Fetched {
    let kinds = [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ];
    let resources = kinds
        .into_iter()
        .zip(data)
        .map(|(kind, items)| ResourceFetch {
            kind,
            list: fail(kind, "list").map_or_else(|| list(&items), Err),
            watch: fail(kind, "watch").map_or(Ok(()), Err),
        })
        .collect();
    Fetched {
        hostname: HOST.into(),
        server: "https://10.0.0.1:6443".into(),
        wrapper_in_cluster: true,
        config_problems: Vec::new(),
        version: Ok(json!({"gitVersion": "v1.28.3"})),
        reached: Some(Reached {
            slices: SliceFinding {
                kind: Resource::SlicesV1,
                source: SliceSource::Discovery(vec!["v1".into()]),
            },
            cidrs: Ok(CidrFinding::Absent),
            resources,
        }),
        relays: Vec::new(),
        runtime: None,
    }
}

fn ok(_: Resource, _: &str) -> Option<UpstreamError> {
    None
}

fn tags(r: &super::Report) -> Vec<Tag> {
    r.problems.iter().map(|p| p.tag).collect()
}

#[test]
fn a_good_node_is_ready_with_kept_counts_from_the_cache() {
    let r = build(fetched(cluster(Some("zone-a")), &ok));
    assert!(r.ready, "{:?}", r.problems);
    assert_eq!(r.upstream.git_version.as_deref(), Some("v1.28.3"));
    assert_eq!(
        r.upstream.endpoint_slice_version.as_deref(),
        Some("discovery.k8s.io/v1")
    );
    assert_eq!(r.upstream.endpoint_slice_version_source, Some("discovery"));
    assert_eq!(r.access.len(), 8);
    assert!(r.access.iter().all(|a| a.allowed && a.code.is_none()));
    assert_eq!(r.node.found, Some(true));
    assert_eq!(r.topology_keys, ["zone"]);
    assert_eq!(r.node.topology_labels["zone"].as_deref(), Some("zone-a"));
    let services = r.topology_services.as_ref().expect("services listed");
    assert_eq!(services.len(), 1, "only the topology Service");
    let web = &services[0];
    assert_eq!(
        (web.namespace.as_str(), web.name.as_str()),
        ("default", "web")
    );
    assert_eq!(
        web.endpoint_slice_endpoints,
        Some(Count { kept: 2, total: 4 })
    );
    assert_eq!(web.endpoints_addresses, Some(Count { kept: 2, total: 4 }));
    assert_eq!(web.fully_pruned, Some(false));
    assert_eq!(web.missing_keys, Some(vec![]));
    let t = r.totals.as_ref().expect("totals");
    assert_eq!((t.topology_services, t.fully_pruned_services), (1, 0));
    assert_eq!(t.endpoint_slice_endpoints, Count { kept: 2, total: 4 });
    assert_eq!(
        (
            t.served.nodes,
            t.served.services,
            t.served.endpoints,
            t.served.endpointslices
        ),
        (1, 2, 2, 2),
        "the local Node only"
    );
    let text = render::text(&r);
    assert!(text.contains("version v1.28.3"), "{text}");
    assert!(
        text.contains("default/web [zone]: EndpointSlices 2/4, Endpoints 2/4"),
        "{text}"
    );
    assert!(text.ends_with("result: ready\n"), "{text}");
    assert!(!text.contains("problem:"), "{text}");
}

#[test]
fn an_unreachable_upstream_is_one_connectivity_problem() {
    let f = Fetched {
        hostname: HOST.into(),
        server: "http://127.0.0.1:1".into(),
        wrapper_in_cluster: true,
        config_problems: Vec::new(),
        version: Err(UpstreamError::Unreachable("Connection refused".into())),
        reached: None,
        relays: Vec::new(),
        runtime: None,
    };
    let r = build(f);
    assert!(!r.ready && !r.upstream.reachable);
    assert_eq!(tags(&r), [Tag::Connectivity]);
    assert!(
        r.problems[0].message.contains("http://127.0.0.1:1/version"),
        "{:?}",
        r.problems
    );
    assert!(r.access.is_empty() && r.topology_services.is_none() && r.totals.is_none());
    assert_eq!(r.node.found, None);
    let text = render::text(&r);
    assert!(
        text.contains("problem: connectivity: GET http://127.0.0.1:1/version"),
        "{text}"
    );
    assert!(text.ends_with("result: NOT ready (1 problem)\n"), "{text}");
    let tls = Fetched {
        version: Err(UpstreamError::Tls(
            "invalid peer certificate: UnknownIssuer".into(),
        )),
        ..fetched(cluster(Some("zone-a")), &ok)
    };
    let mut tls = tls;
    tls.reached = None;
    assert_eq!(tags(&build(tls)), [Tag::Tls]);
}

#[test]
fn configuration_problems_are_tagged_config() {
    let mut f = fetched(cluster(Some("zone-a")), &ok);
    f.version = Err(UpstreamError::Config("no kubeconfig".into()));
    f.reached = None;
    f.config_problems = vec!["bearer token file unusable".into()];
    let r = build(f);
    assert_eq!(tags(&r), [Tag::Config, Tag::Config]);
    assert_eq!(
        r.problems[1].message,
        "upstream configuration: no kubeconfig"
    );
}

#[test]
fn a_missing_node_is_a_node_problem_and_prunes_everything() {
    let mut f = fetched(cluster(Some("zone-a")), &ok);
    f.hostname = "edge-x9".into();
    let r = build(f);
    assert_eq!(tags(&r), [Tag::Node], "{:?}", r.problems);
    assert!(
        r.problems[0].message.contains("\"edge-x9\" not found"),
        "{:?}",
        r.problems
    );
    assert_eq!(r.node.found, Some(false));
    let web = &r.topology_services.as_ref().expect("listed")[0];
    assert_eq!(web.fully_pruned, Some(true));
    assert_eq!(
        web.endpoint_slice_endpoints,
        Some(Count { kept: 0, total: 4 })
    );
    assert_eq!(r.totals.as_ref().map(|t| t.fully_pruned_services), Some(1));
}

#[test]
fn a_node_without_the_key_lists_the_service_as_fully_pruned() {
    let r = build(fetched(cluster(None), &ok));
    assert_eq!(tags(&r), [Tag::Topology], "{:?}", r.problems);
    let msg = &r.problems[0].message;
    assert!(
        msg.starts_with("service default/web: node \"edge-a1\" has no label zone"),
        "{msg}"
    );
    assert!(msg.contains("all 4 endpoints would be pruned"), "{msg}");
    assert_eq!(r.node.topology_labels["zone"], None);
    let web = &r.topology_services.as_ref().expect("listed")[0];
    assert_eq!(web.missing_keys, Some(vec!["zone".to_string()]));
    assert_eq!(web.fully_pruned, Some(true));
    assert_eq!(
        web.endpoint_slice_endpoints,
        Some(Count { kept: 0, total: 4 })
    );
    let text = render::text(&r);
    assert!(text.contains("zone MISSING"), "{text}");
    assert!(text.contains("FULLY PRUNED"), "{text}");
}

#[test]
fn a_service_with_another_key_the_node_has_is_not_fully_pruned() {
    let mut data = cluster(None);
    data[1][0] = service("web", Some("[\"zone\", \"kubernetes.io/hostname\"]"));
    let r = build(fetched(data, &ok));
    assert!(r.ready, "{:?}", r.problems);
    let web = &r.topology_services.as_ref().expect("listed")[0];
    assert_eq!(web.missing_keys, Some(vec!["zone".to_string()]));
    assert_eq!(web.fully_pruned, Some(false));
    // Only the local node shares its hostname label.
    assert_eq!(
        web.endpoint_slice_endpoints,
        Some(Count { kept: 1, total: 4 })
    );
}

#[test]
fn refusals_are_reported_per_resource_and_verb() {
    let wrong_token = |_: Resource, _: &str| Some(status(401, "Unauthorized"));
    let mut f = fetched(cluster(Some("zone-a")), &wrong_token);
    f.version = Err(status(401, "Unauthorized"));
    let r = build(f);
    assert!(r.upstream.reachable);
    assert_eq!(tags(&r), [Tag::Auth; 8], "{:?}", r.problems);
    // /version is not needed by the server: its refusal is a warning.
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(r.warnings[0].tag, Tag::Auth);
    assert!(r.access.iter().all(|a| !a.allowed && a.code == Some(401)));
    assert!(
        r.problems[0]
            .message
            .starts_with("list nodes (v1): 401 Unauthorized"),
        "{:?}",
        r.problems
    );
    assert!(r.topology_services.is_none() && r.totals.is_none() && r.node.found.is_none());

    let no_slice_watch = |k: Resource, verb: &str| {
        (k == Resource::SlicesV1 && verb == "watch").then(|| status(403, "Forbidden"))
    };
    let r = build(fetched(cluster(Some("zone-a")), &no_slice_watch));
    assert_eq!(tags(&r), [Tag::Rbac]);
    assert!(
        r.problems[0].message.starts_with(
            "watch endpointslices (discovery.k8s.io/v1): 403 Forbidden: Forbidden here"
        ),
        "{:?}",
        r.problems
    );
    // The lists worked: the rest of the report is complete.
    assert!(r.totals.is_some());
    let text = render::text(&r);
    assert!(
        text.contains("problem: rbac: watch endpointslices"),
        "{text}"
    );
    assert!(
        text.contains("  FAILED  watch endpointslices (discovery.k8s.io/v1): 403"),
        "{text}"
    );
}

#[test]
fn an_invalid_annotation_is_a_warning_only() {
    let mut data = cluster(Some("zone-a"));
    data[1].push(service("broken", Some("zone")));
    let r = build(fetched(data, &ok));
    assert!(r.ready, "{:?}", r.problems);
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(r.warnings[0].tag, Tag::Topology);
    assert!(r.warnings[0]
        .message
        .starts_with("service default/broken: topologyKeys ignored"));
    assert!(render::text(&r).contains("warning: topology: service default/broken"));
}

#[test]
fn the_json_document_has_the_documented_fields() {
    let r = build(fetched(cluster(None), &ok));
    let v: Value = serde_json::from_str(&render::json(&r).expect("serializes")).expect("JSON");
    for field in [
        "reportFormat",
        "ready",
        "hostname",
        "upstream",
        "access",
        "node",
        "topologyKeys",
        "topologyServices",
        "totals",
        "problems",
        "warnings",
        "advisories",
    ] {
        assert!(v.get(field).is_some(), "{field} missing: {v}");
    }
    assert_eq!(v["reportFormat"], 1);
    assert_eq!(v["ready"], false);
    assert_eq!(v["upstream"]["gitVersion"], "v1.28.3");
    assert_eq!(v["upstream"]["endpointSliceVersion"], "discovery.k8s.io/v1");
    assert_eq!(v["upstream"]["endpointSliceVersionSource"], "discovery");
    assert_eq!(
        v["access"][0],
        json!({"resource": "nodes", "apiVersion": "v1", "verb": "list",
        "allowed": true, "code": null, "error": null})
    );
    assert_eq!(v["node"]["topologyLabels"], json!({"zone": null}));
    let web = &v["topologyServices"][0];
    assert_eq!(
        web["endpointSliceEndpoints"],
        json!({"kept": 0, "total": 4})
    );
    assert_eq!(web["endpointsAddresses"], json!({"kept": 0, "total": 4}));
    assert_eq!(web["missingKeys"], json!(["zone"]));
    assert_eq!(web["fullyPruned"], true);
    assert_eq!(v["totals"]["served"]["endpointslices"], 2);
    assert_eq!(v["problems"][0]["tag"], "topology");
}

#[test]
fn describe_keeps_one_line() {
    let e = UpstreamError::Status {
        code: 500,
        reason: String::new(),
        message: "a\nb".into(),
        causes: Vec::new(),
        retry_after: None,
    };
    assert_eq!(super::report::describe(&e), "500 a b");
    assert_eq!(
        super::report::describe(&status(403, "Forbidden")),
        "403 Forbidden: Forbidden here"
    );
}

#[test]
fn a_field_the_protobuf_schema_does_not_know_is_a_protobuf_warning() {
    let mut data = cluster(Some("zone-a"));
    for (i, name) in ["web2", "web3"].iter().enumerate() {
        let mut svc = service(name, None);
        svc["spec"]["someNewField"] = serde_json::json!({"x": i});
        data[1].push(svc);
    }
    let r = build(fetched(data, &ok));
    assert!(r.ready, "warnings only: {:?}", r.problems);
    let protobuf: Vec<&str> = r
        .warnings
        .iter()
        .filter(|w| w.tag == Tag::Protobuf)
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(
        protobuf,
        ["services (v1): field spec.someNewField (2 objects) is not in grid-wrapper's protobuf schema: kube-proxy (protobuf) will not get it, JSON clients will"],
        "{:?}",
        r.warnings
    );
    assert!(render::text(&r).contains("warning: protobuf: services (v1): field spec.someNewField"));
}

/// On a 1.35+ upstream, a Service annotated exactly with the hostname or the zone label gets an
/// advisory line (native traffic distribution could serve it); other annotations, and older
/// upstreams, get none. Advice is neither a problem nor a warning.
#[test]
fn native_traffic_distribution_is_advised_for_hostname_and_zone_on_1_35() {
    let mut data = cluster(Some("zone-a"));
    data[1] = vec![
        service("by-node", Some(r#"["kubernetes.io/hostname"]"#)),
        service("by-zone", Some(r#"[ "topology.kubernetes.io/zone" ]"#)),
        service(
            "zone-or-node",
            Some(r#"["topology.kubernetes.io/zone","kubernetes.io/hostname"]"#),
        ),
        service(
            "zone-fallback",
            Some(r#"["topology.kubernetes.io/zone","*"]"#),
        ),
        service("web", Some(r#"["zone"]"#)),
        service("api", None),
    ];
    let advised = |version: &str| {
        let mut f = fetched(data.clone(), &ok);
        f.version = Ok(json!({ "gitVersion": version }));
        let r = build(f);
        let blocking = r.problems.iter().chain(&r.warnings);
        assert!(
            blocking
                .filter(|p| p.message.contains("trafficDistribution"))
                .count()
                == 0
        );
        (r.advisories.clone(), render::text(&r))
    };
    let (advice, text) = advised("v1.35.0");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("advice: ")).collect();
    assert_eq!(advice.len(), 2, "{text}");
    assert_eq!(
        lines,
        [
            "advice: topology: service default/by-node: topologyKeys [\"kubernetes.io/hostname\"]: \
             the upstream (v1.35.0) has native spec.trafficDistribution: PreferSameNode, which \
             does this with a fallback to other endpoints; grid-wrapper keeps it strict (no \
             fallback) and serving offline",
            "advice: topology: service default/by-zone: topologyKeys \
             [\"topology.kubernetes.io/zone\"]: the upstream (v1.35.0) has native \
             spec.trafficDistribution: PreferSameZone, which does this with a fallback to other \
             endpoints; grid-wrapper keeps it strict (no fallback) and serving offline",
        ]
    );
    assert_eq!(advised("v1.36.2-gke.1").0.len(), 2);
    for older in ["v1.34.9", "v1.28.3", "1.3", "garbage"] {
        assert!(advised(older).0.is_empty(), "{older}");
    }
}

#[test]
fn native_distribution_reads_the_upstream_version() {
    use super::report::native_distribution;
    for (v, want) in [
        ("v1.35.0", true),
        ("v1.35.0-sim", true),
        ("v2.0.0", true),
        ("v1.34.12", false),
        ("v1", false),
        ("", false),
        ("vx.y", false),
    ] {
        assert_eq!(native_distribution(Some(v)).is_some(), want, "{v}");
    }
    assert_eq!(native_distribution(None), None);
}

/// A Service with a last `*` is never fully pruned: it falls back to every endpoint.
#[test]
fn a_fallback_service_is_not_fully_pruned() {
    let mut data = cluster(None);
    data[1][0] = service("web", Some(r#"["zone","*"]"#));
    let r = build(fetched(data, &ok));
    assert!(r.ready, "{:?}", r.problems);
    let web = &r.topology_services.as_ref().expect("listed")[0];
    assert_eq!(web.topology_keys, ["zone", "*"]);
    assert_eq!(web.fully_pruned, Some(false));
    assert_eq!(
        web.endpoint_slice_endpoints,
        Some(Count { kept: 4, total: 4 })
    );
}

/// `cidrs` in place of the fetch's ServiceCIDR finding; when mirrored, their list and watch are
/// checked as the other resources' are (`fail`).
fn with_cidrs(
    mut f: Fetched,
    cidrs: Result<CidrFinding, UpstreamError>,
    fail: &dyn Fn(Resource, &str) -> Option<UpstreamError>,
) -> Fetched {
    if let Some(reached) = &mut f.reached {
        if let Ok(CidrFinding::Mirrored(kind)) = cidrs {
            let cidr =
                json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12"]}});
            reached.resources.push(ResourceFetch {
                kind,
                list: fail(kind, "list").map_or_else(|| list(&[cidr]), Err),
                watch: fail(kind, "watch").map_or(Ok(()), Err),
            });
        }
        reached.cidrs = cidrs;
    }
    f
}

#[test]
fn servicecidrs_mirrored_absent_forbidden_and_unknown_are_reported() {
    let base = || fetched(cluster(Some("zone-a")), &ok);

    let r = build(with_cidrs(
        base(),
        Ok(CidrFinding::Mirrored(Resource::CidrsV1)),
        &ok,
    ));
    assert!(r.ready, "{:?}", r.problems);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.upstream.service_cidrs, Some("mirrored"));
    assert_eq!(
        r.upstream.service_cidr_version.as_deref(),
        Some("networking.k8s.io/v1")
    );
    let cidr_access: Vec<_> = r
        .access
        .iter()
        .filter(|a| a.resource == "servicecidrs")
        .collect();
    assert_eq!(cidr_access.len(), 2, "list and watch: {:?}", r.access);
    assert!(render::text(&r).contains(", ServiceCIDRs networking.k8s.io/v1"));

    let r = build(with_cidrs(base(), Ok(CidrFinding::Absent), &ok));
    assert!(r.ready && r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.upstream.service_cidrs, Some("absent"));
    assert_eq!(r.upstream.service_cidr_version, None);
    assert!(render::text(&r).contains("no ServiceCIDRs (proxied)"));

    let r = build(with_cidrs(base(), Ok(CidrFinding::Forbidden), &ok));
    assert!(
        r.ready,
        "a 403 on ServiceCIDRs only makes the server proxy them: {:?}",
        r.problems
    );
    assert_eq!(r.upstream.service_cidrs, Some("forbidden"));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].tag, Tag::Rbac);
    assert!(
        r.warnings[0].message.contains("servicecidrs"),
        "{}",
        r.warnings[0].message
    );
    let text = render::text(&r);
    assert!(text.contains("warning: rbac: list servicecidrs"), "{text}");
    let json: Value = serde_json::from_str(&render::json(&r).expect("serializes")).expect("json");
    assert_eq!(json["upstream"]["serviceCidrs"], "forbidden");

    let r = build(with_cidrs(base(), Err(status(500, "InternalError")), &ok));
    assert_eq!(r.upstream.service_cidrs, Some("unknown"));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].tag, Tag::Api);
}

#[test]
fn a_servicecidr_watch_refused_is_a_problem_like_any_mirrored_resource() {
    let refuse = |kind: Resource, verb: &str| {
        (kind == Resource::CidrsV1 && verb == "watch").then(|| status(403, "Forbidden"))
    };
    let r = build(with_cidrs(
        fetched(cluster(Some("zone-a")), &ok),
        Ok(CidrFinding::Mirrored(Resource::CidrsV1)),
        &refuse,
    ));
    assert!(!r.ready);
    assert!(
        r.problems
            .iter()
            .any(|p| p.tag == Tag::Rbac && p.message.starts_with("watch servicecidrs")),
        "{:?}",
        r.problems
    );
}

#[test]
fn each_relay_is_reported_by_url_as_a_relay_with_its_own_problems() {
    let mut f = fetched(cluster(Some("zone-a")), &ok);
    let list_ok = || {
        Ok(ListResult {
            items: Vec::new(),
            resource_version: "3".into(),
            continue_token: None,
            origin: None,
        })
    };
    let forbidden = UpstreamError::Status {
        code: 403,
        reason: "Forbidden".into(),
        message: "no".into(),
        causes: Vec::new(),
        retry_after: None,
    };
    f.relays = vec![
        super::RelayFetch {
            server: "https://r1:51010".into(),
            version: Ok(json!({"gitVersion": "v1.28.3"})),
            resources: vec![
                ResourceFetch {
                    kind: Resource::Nodes,
                    list: list_ok(),
                    watch: Ok(()),
                },
                ResourceFetch {
                    kind: Resource::Services,
                    list: Err(forbidden),
                    watch: Ok(()),
                },
            ],
        },
        super::RelayFetch {
            server: "https://r2:51010".into(),
            version: Err(UpstreamError::Tls("certificate required".into())),
            resources: Vec::new(),
        },
    ];
    let r = build(f);
    assert!(!r.ready);
    assert_eq!(tags(&r), [Tag::Rbac, Tag::Tls]);
    assert!(r.problems[0]
        .message
        .starts_with("relay https://r1:51010: list services"));
    assert!(r.problems[1]
        .message
        .starts_with("relay https://r2:51010: GET https://r2:51010/version"));
    assert_eq!(r.relays.len(), 2);
    assert!(r.relays.iter().all(|x| x.relay));
    assert!(r.relays[0].reachable && !r.relays[1].reachable);
    assert_eq!(r.relays[0].access.len(), 4);
    // The upstream's own access checks are untouched.
    assert!(r.access.iter().all(|a| a.allowed));
    let text = render::text(&r);
    assert!(
        text.contains("relay https://r1:51010: reachable, version v1.28.3\n"),
        "{text}"
    );
    assert!(
        text.contains("  FAILED  list  services (v1): 403 Forbidden: no\n"),
        "{text}"
    );
    assert!(
        text.contains("relay https://r2:51010: NOT reachable\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&render::json(&r).unwrap()).unwrap();
    assert_eq!(json["relays"][1]["server"], "https://r2:51010");
    assert_eq!(json["relays"][1]["relay"], true);
}

/// `cluster` with each local endpoint (the first of each object) pointing at a Pod `<svc>-0`.
fn cluster_with_pods() -> [Vec<Value>; 4] {
    let mut data = cluster(Some("zone-a"));
    for ep in &mut data[2] {
        let pod = format!("{}-0", ep["metadata"]["name"].as_str().unwrap_or(""));
        ep["subsets"][0]["addresses"][0]["targetRef"] = json!({"kind": "Pod", "name": pod});
    }
    for slice in &mut data[3] {
        let svc = slice["metadata"]["labels"]["kubernetes.io/service-name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        slice["endpoints"][0]["targetRef"] = json!({"kind": "Pod", "name": format!("{svc}-0")});
    }
    data
}

fn runtime(seen: Result<Sandboxes, cri::client::Error>) -> Option<RuntimeFetch> {
    Some(RuntimeFetch {
        endpoint: "unix:///run/containerd/containerd.sock".into(),
        deadline_secs: 2,
        seen,
    })
}

/// `web-0` ready on a new address, `api-0` known with no ready sandbox, one unrelated pod.
fn sandboxes() -> Sandboxes {
    let ready = |name: &str, ip: &str| ReadySandbox {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        attempt: 1,
        created_at: 1,
        ips: vec![ip.into()],
    };
    Sandboxes {
        ready: vec![ready("web-0", "10.9.9.9"), ready("other", "10.9.9.8")],
        not_ready: vec![("default".into(), "api-0".into())],
    }
}

#[test]
fn a_runtime_that_answers_is_reported_with_what_it_would_repair() {
    let mut f = fetched(cluster_with_pods(), &ok);
    f.runtime = runtime(Ok(sandboxes()));
    let r = build(f);
    assert!(r.ready, "{:?}", r.problems);
    let rt = r.runtime.as_ref().expect("runtime part");
    assert!(rt.reachable);
    assert_eq!((rt.failure, rt.error.as_deref()), (None, None));
    assert_eq!(
        (
            rt.sandboxes,
            rt.ready_sandboxes,
            rt.pods_with_address,
            rt.pods_not_ready
        ),
        (Some(3), Some(2), Some(2), Some(1))
    );
    // web-0 moves (its slice endpoint and its Endpoints address), api-0 is served not ready.
    assert_eq!(
        rt.repairs,
        Some(RepairCounts {
            endpoint_slice_addresses: 1,
            endpoint_slice_not_ready: 1,
            endpoints_addresses: 1,
            endpoints_not_ready: 1,
        })
    );
    let text = render::text(&r);
    assert!(
        text.contains(
            "runtime unix:///run/containerd/containerd.sock: answers, 3 sandboxes (2 ready), \
             2 pods with an address, 1 known without a ready sandbox; would repair now: \
             EndpointSlice endpoints 1 to the runtime's address, 1 not ready; Endpoints \
             addresses 1 to the runtime's address, 1 not ready"
        ),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&render::json(&r).expect("json")).expect("parses");
    assert_eq!(doc["runtime"]["repairs"]["endpointsNotReady"], 1, "{doc}");
    assert_eq!(doc["runtime"]["podsWithAddress"], 2, "{doc}");
}

#[test]
fn a_runtime_on_the_served_addresses_repairs_nothing() {
    let mut f = fetched(cluster_with_pods(), &ok);
    let mut seen = sandboxes();
    seen.ready[0].ips = vec!["10.0.0.0".into()];
    seen.not_ready.clear();
    f.runtime = runtime(Ok(seen));
    let r = build(f);
    let rt = r.runtime.as_ref().expect("runtime part");
    assert_eq!(rt.repairs, Some(RepairCounts::default()));
}

#[test]
fn repairs_are_unknown_when_a_list_failed() {
    let mut f = fetched(cluster_with_pods(), &|k, v| {
        (k == Resource::Endpoints && v == "list").then(|| status(403, "Forbidden"))
    });
    f.runtime = runtime(Ok(sandboxes()));
    let r = build(f);
    let rt = r.runtime.as_ref().expect("runtime part");
    assert!(rt.reachable);
    assert_eq!(rt.repairs, None);
    assert!(render::text(&r).contains("repairs unknown"));
}

#[test]
fn a_runtime_that_does_not_answer_is_a_runtime_problem_by_class() {
    let err = |kind| cri::client::Error {
        endpoint: "unix:///run/containerd/containerd.sock".into(),
        call: cri::client::Call::ListPodSandbox,
        kind,
    };
    let io = |k| std::io::Error::new(k, "x");
    use cri::client::ErrorKind as K;
    for (kind, class) in [
        (
            K::Connect(io(std::io::ErrorKind::NotFound)),
            "socket-missing",
        ),
        (
            K::Connect(io(std::io::ErrorKind::PermissionDenied)),
            "permission-denied",
        ),
        (
            K::Connect(io(std::io::ErrorKind::ConnectionRefused)),
            "refused",
        ),
        (K::Timeout(std::time::Duration::from_secs(2)), "timeout"),
        (K::Closed, "closed"),
        (K::Message(cri::messages::MessageError::NoStatus), "not-cri"),
    ] {
        let mut f = fetched(cluster_with_pods(), &ok);
        f.runtime = runtime(Err(err(kind)));
        let r = build(f);
        assert!(!r.ready, "{class}");
        assert_eq!(tags(&r), [Tag::Runtime], "{class}");
        let rt = r.runtime.as_ref().expect("runtime part");
        assert_eq!((rt.reachable, rt.failure), (false, Some(class)));
        assert_eq!((rt.sandboxes, rt.repairs), (None, None), "{class}");
        let text = render::text(&r);
        assert!(
            text.contains(&format!(
                "runtime unix:///run/containerd/containerd.sock: NOT answering ({class})"
            )),
            "{text}"
        );
        assert!(
            text.contains(
                "problem: runtime: container runtime unix:///run/containerd/containerd.sock: ListPodSandbox: "
            ),
            "{text}"
        );
    }
}

#[test]
fn without_the_flag_there_is_no_runtime_part() {
    let r = build(fetched(cluster_with_pods(), &ok));
    assert_eq!(r.runtime, None);
    assert!(!render::text(&r).contains("runtime "));
    let doc: Value = serde_json::from_str(&render::json(&r).expect("json")).expect("parses");
    assert_eq!(doc["runtime"], Value::Null);
}
