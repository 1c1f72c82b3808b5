//! Cache-style read answers of the simulated apiserver: object filters (path namespace, label
//! and field selectors), the served form of stored objects (slices converted to the route's
//! version), LIST bodies, single-object GETs and discovery documents. Pure over a `Store`.

use crate::routes::{Discovery, Query, SliceVersions};
use crate::store::{Kind, Store};
use grid_wrapper::api::selector::{FieldSelector, LabelLookup, LabelSelector};
use grid_wrapper::k8s::convert;
use grid_wrapper::k8s::status::ApiError;
use grid_wrapper::k8s::{ObjectKey, Resource};
use grid_wrapper::proto::{encode_object, envelope};
use serde_json::{json, Value};
use std::sync::Arc;

/// Longest selector string accepted (a named bound; real selectors are far shorter).
pub const MAX_SELECTOR_LEN: usize = 4096;

/// What a LIST or WATCH selects. The selectors are the product's (`grid_wrapper::api::selector`,
/// apimachinery's grammar), matched here against stored JSON.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Path namespace.
    pub ns: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Filter {
    /// Builds the filter from the path namespace and query; bad selectors are 400s.
    pub fn new(res: Resource, ns: Option<String>, q: &Query) -> Result<Filter, ApiError> {
        Ok(Filter {
            ns,
            labels: label_selector(q.get("labelSelector").unwrap_or(""))?,
            fields: field_selector(q.get("fieldSelector").unwrap_or(""), res)?,
        })
    }

    /// Whether a stored object is selected. A label must be a JSON string to count; a field
    /// that is absent or not a string compares as `""`.
    pub fn matches(&self, obj: &Value) -> bool {
        let ns_ok = match &self.ns {
            None => true,
            Some(ns) => obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns),
        };
        let labels = JsonLabels(obj.pointer("/metadata/labels").and_then(Value::as_object));
        ns_ok
            && self.labels.matches(&labels)
            && self.fields.matches(|field| {
                field
                    .split('.')
                    .try_fold(obj, |v, seg| v.get(seg))
                    .and_then(Value::as_str)
            })
    }
}

/// A stored object's `metadata.labels`, for the product's label selectors.
struct JsonLabels<'a>(Option<&'a serde_json::Map<String, Value>>);

impl LabelLookup for JsonLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }
}

/// Parses a `labelSelector`. Only equality-based requirements are simulated: set-based and
/// ordinal ones (`in`, `notin`, `>`, `<`, whose characters no valid label key or value holds)
/// stay a 400 here, although the product's parser reads them.
pub fn label_selector(s: &str) -> Result<LabelSelector, ApiError> {
    if s.len() > MAX_SELECTOR_LEN {
        return Err(ApiError::bad_request("label selector too long"));
    }
    if s.contains(['(', ')', '<', '>']) {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: unsupported label selector requirement {s:?}"
        )));
    }
    LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Parses a `fieldSelector` for `res`: the fields it may use are `Resource::selectable_fields`
/// (others are a 400 `field label not supported: <field>`).
pub fn field_selector(s: &str, res: Resource) -> Result<FieldSelector, ApiError> {
    if s.len() > MAX_SELECTOR_LEN {
        return Err(ApiError::bad_request("field selector too long"));
    }
    FieldSelector::parse(s, res.selectable_fields())
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The stored object as served on `res`: slices converted to the route's version (by the
/// product's `k8s::convert`); `kind` and `apiVersion` always set. A slice without `apiVersion`
/// counts as v1.
pub fn served(res: Resource, obj: &Value) -> Value {
    let mut out = match res {
        Resource::SlicesV1 | Resource::SlicesV1beta1 => {
            let from = obj
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(convert::SLICE_V1);
            if from == res.api_version() {
                obj.clone()
            } else if res == Resource::SlicesV1 {
                convert::slice_v1beta1_to_v1(obj)
            } else {
                convert::slice_v1_to_v1beta1(obj)
            }
        }
        _ => obj.clone(),
    };
    if let Some(m) = out.as_object_mut() {
        m.insert("kind".into(), json!(res.kind()));
        m.insert("apiVersion".into(), json!(res.api_version()));
    }
    out
}

/// A LIST body: `{"kind":"<Kind>List","apiVersion":..,"metadata":{"resourceVersion":..},"items":[..]}`.
/// Like a real apiserver's, the items carry no `kind`/`apiVersion` (kubernetes/kubernetes#63676);
/// single GETs and watch events do.
pub fn list_body(res: Resource, objects: &[Arc<Value>], rv: u64, filter: &Filter) -> Vec<u8> {
    let items: Vec<Value> = objects
        .iter()
        .filter(|o| filter.matches(o))
        .map(|o| {
            let mut item = served(res, o);
            if let Some(m) = item.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            item
        })
        .collect();
    let body = json!({
        "kind": res.list_kind(),
        "apiVersion": res.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The protobuf LIST body of the same items as [`list_body`]: the apiserver's envelope
/// (`grid_wrapper::proto::envelope::list_head`) around each item's message
/// (`grid_wrapper::proto::encode_object`), as the apiserver sends for
/// `Accept: application/vnd.kubernetes.protobuf`.
pub fn list_body_protobuf(
    res: Resource,
    objects: &[Arc<Value>],
    rv: u64,
    filter: &Filter,
) -> Vec<u8> {
    let items: Vec<Vec<u8>> = objects
        .iter()
        .filter(|o| filter.matches(o))
        .map(|o| encode_object(res, &served(res, o)).bytes)
        .collect();
    let items_len = items.iter().map(Vec::len).sum();
    let mut body = envelope::list_head(
        res.api_version(),
        res.list_kind(),
        &rv.to_string(),
        items_len,
    );
    body.reserve(items_len + envelope::TAIL.len());
    for item in &items {
        body.extend_from_slice(item);
    }
    body.extend_from_slice(envelope::TAIL);
    body
}

/// The protobuf body of one served object (a GET's): the envelope around its message.
pub fn object_body_protobuf(res: Resource, obj: &Value) -> Vec<u8> {
    let mut body = envelope::object_head(res.api_version(), res.kind());
    body.extend_from_slice(&encode_object(res, obj).bytes);
    body.extend_from_slice(envelope::TAIL);
    body
}

/// Takes a consistent LIST snapshot.
pub fn list(store: &Store, res: Resource) -> (Vec<Arc<Value>>, u64) {
    (store.list(Kind::of(res)), store.rv())
}

/// A single-object GET: the served object or a 404 Status.
pub fn get(store: &Store, res: Resource, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
    let key = ObjectKey::new(ns.unwrap_or(""), name);
    store
        .get(Kind::of(res), &key)
        .map(|o| served(res, &o))
        .ok_or_else(|| ApiError::not_found(res.plural(), name))
}

fn resource_entry(name: &str, singular: &str, kind: &str, namespaced: bool) -> Value {
    json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind,
           "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
}

/// A discovery document.
pub fn discovery(doc: &Discovery, slices: SliceVersions) -> Value {
    let group_versions: Vec<Value> = slices
        .versions()
        .iter()
        .map(|v| json!({"groupVersion": format!("discovery.k8s.io/{v}"), "version": v}))
        .collect();
    let group = json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": "discovery.k8s.io",
        "versions": group_versions.clone(),
        "preferredVersion": group_versions.first().cloned().unwrap_or(Value::Null),
    });
    let networking_v1 = json!({"groupVersion": "networking.k8s.io/v1", "version": "v1"});
    let networking = json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": "networking.k8s.io",
        "versions": [networking_v1.clone()], "preferredVersion": networking_v1,
    });
    match doc {
        Discovery::Core => json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        Discovery::CoreV1 => {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
            "resources": [
                resource_entry("endpoints", "endpoints", "Endpoints", true),
                resource_entry("nodes", "node", "Node", false),
                resource_entry("services", "service", "Service", true),
            ]})
        }
        Discovery::Groups => {
            let groups: Vec<Value> = [group, networking]
                .into_iter()
                .map(|mut g| {
                    if let Some(m) = g.as_object_mut() {
                        m.remove("kind");
                        m.remove("apiVersion");
                    }
                    g
                })
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        Discovery::NetworkingGroup => networking,
        Discovery::NetworkingV1 { servicecidrs } => {
            let resources: Vec<Value> = servicecidrs
                .then(|| resource_entry("servicecidrs", "servicecidr", "ServiceCIDR", false))
                .into_iter()
                .collect();
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "networking.k8s.io/v1", "resources": resources})
        }
        Discovery::SliceGroup => group,
        Discovery::SliceVersion(v) => json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": format!("discovery.k8s.io/{v}"),
            "resources": [resource_entry("endpointslices", "endpointslice", "EndpointSlice", true)],
        }),
        Discovery::Version => version(DEFAULT_KUBE_MINOR),
    }
}

/// The minor version `GET /version` reports without `--kube-version`.
pub const DEFAULT_KUBE_MINOR: u32 = 28;

/// `GET /version` of a Kubernetes 1.`minor` apiserver.
pub fn version(minor: u32) -> Value {
    json!({"major": "1", "minor": minor.to_string(), "gitVersion": format!("v1.{minor}.0-sim"),
        "platform": "linux/amd64"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "labels": labels},
               "spec": {"clusterIP": "None"}})
    }

    fn by_labels(sel: &str) -> Filter {
        let labels = label_selector(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
        Filter {
            labels,
            ..Filter::default()
        }
    }

    #[test]
    fn label_selector_table() {
        let headless = labelled(json!({"service.kubernetes.io/headless": ""}));
        let plain = labelled(json!({"app": "web"}));
        let none = json!({"metadata": {"name": "x"}});
        let l = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";
        // (selector, object, expected)
        let cases: &[(&str, &Value, bool)] = &[
            ("", &plain, true),
            (l, &headless, false),
            (l, &plain, true),
            (l, &none, true),
            ("app", &plain, true),
            ("app", &none, false),
            ("app=web", &plain, true),
            ("app==web", &plain, true),
            ("app=api", &plain, false),
            ("app!=api", &plain, true),
            ("app!=web", &plain, false),
            ("app!=web", &none, true),
            ("app=web,!service.kubernetes.io/headless", &plain, true),
            ("app=web,service.kubernetes.io/headless", &plain, false),
            (" app = web ", &plain, true),
            ("service.kubernetes.io/headless=", &headless, true),
        ];
        for (sel, o, want) in cases {
            assert_eq!(by_labels(sel).matches(o), *want, "selector {sel:?}");
        }
    }

    #[test]
    fn label_selector_rejects_unsupported() {
        for sel in [
            "app in (a,b)",
            "app notin (a)",
            "x>1",
            "x<1",
            "a,,b",
            "!",
            "=v",
            "a=b=c",
            "a b",
        ] {
            let e = label_selector(sel).expect_err(sel);
            assert_eq!(e.code, 400, "{sel}");
        }
    }

    #[test]
    fn field_selector_table() {
        let o = labelled(json!({}));
        let cases: &[(&str, Resource, bool)] = &[
            ("metadata.name=web", Resource::Services, true),
            ("metadata.name==web", Resource::Services, true),
            ("metadata.name=api", Resource::Services, false),
            ("metadata.name!=api", Resource::Services, true),
            ("metadata.namespace=default", Resource::SlicesV1, true),
            ("metadata.namespace=kube-system", Resource::Endpoints, false),
            (
                "metadata.name=web,metadata.namespace=default",
                Resource::Endpoints,
                true,
            ),
            ("spec.clusterIP!=None", Resource::Services, false),
            ("metadata.name=web", Resource::Nodes, true),
        ];
        for (sel, res, want) in cases {
            let fields = field_selector(sel, *res).unwrap_or_else(|e| panic!("{sel}: {e}"));
            let f = Filter {
                fields,
                ..Filter::default()
            };
            assert_eq!(f.matches(&o), *want, "{sel}");
        }
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        let cases: &[(&str, Resource)] = &[
            ("spec.nodeName=x", Resource::Services),
            ("spec.clusterIP=None", Resource::Endpoints),
            ("metadata.namespace=default", Resource::Nodes),
            ("metadata.name", Resource::Nodes),
        ];
        for (sel, res) in cases {
            let e = field_selector(sel, *res).expect_err(sel);
            assert_eq!(e.code, 400);
        }
        let e = field_selector("spec.nodeName=x", Resource::Services).expect_err("unsupported");
        assert_eq!(e.message, "field label not supported: spec.nodeName");
    }

    const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
    const ZONE_KEY: &str = "topology.kubernetes.io/zone";

    fn v1() -> Value {
        json!({"kind": "EndpointSlice", "apiVersion": convert::SLICE_V1,
            "metadata": {"name": "web-abc12", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.244.1.10"], "conditions": {"ready": true},
                 "nodeName": "edge-a1", "zone": "zone-a",
                 "hints": {"forZones": [{"name": "zone-a"}]}},
                {"addresses": ["10.244.9.10"], "deprecatedTopology": {"rack": "r1"}}
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    }

    #[test]
    fn v1_to_v1beta1_moves_node_and_zone_into_topology() {
        let b = served(Resource::SlicesV1beta1, &v1());
        assert_eq!(b["apiVersion"], convert::SLICE_V1BETA1);
        let ep = &b["endpoints"][0];
        assert_eq!(ep["topology"][HOSTNAME_KEY], "edge-a1");
        assert_eq!(ep["topology"][ZONE_KEY], "zone-a");
        assert_eq!(ep["nodeName"], "edge-a1");
        assert!(ep.get("zone").is_none());
        assert_eq!(ep["hints"]["forZones"][0]["name"], "zone-a");
        assert_eq!(b["endpoints"][1]["topology"], json!({"rack": "r1"}));
        assert!(b["endpoints"][1].get("deprecatedTopology").is_none());
        assert_eq!(b["ports"], v1()["ports"]);
        assert_eq!(b["metadata"], v1()["metadata"]);
    }

    #[test]
    fn round_trip_is_identity() {
        let back = served(Resource::SlicesV1, &served(Resource::SlicesV1beta1, &v1()));
        assert_eq!(back, v1());
    }

    #[test]
    fn v1beta1_hostname_only_becomes_node_name() {
        let b = json!({"apiVersion": convert::SLICE_V1BETA1, "kind": "EndpointSlice",
            "endpoints": [{"addresses": ["10.0.0.1"],
                "topology": {HOSTNAME_KEY: "edge-b1", ZONE_KEY: "zone-b"}}]});
        let v = served(Resource::SlicesV1, &b);
        let ep = &v["endpoints"][0];
        assert_eq!(ep["nodeName"], "edge-b1");
        assert_eq!(ep["zone"], "zone-b");
        assert!(ep.get("topology").is_none());
        assert!(ep.get("deprecatedTopology").is_none());
    }

    #[test]
    fn same_version_is_unchanged_and_odd_shapes_do_not_panic() {
        assert_eq!(served(Resource::SlicesV1, &v1()), v1());
        let mut no_type_meta = v1();
        if let Some(m) = no_type_meta.as_object_mut() {
            m.remove("kind");
            m.remove("apiVersion");
        }
        assert_eq!(served(Resource::SlicesV1, &no_type_meta), v1());
        for odd in [
            json!(null),
            json!([1]),
            json!({"endpoints": "x"}),
            json!({"endpoints": [1, null]}),
        ] {
            let _ = served(Resource::SlicesV1beta1, &odd);
            let _ = served(Resource::SlicesV1, &odd);
        }
    }

    fn demo_store() -> Store {
        let mut s = Store::new(1000);
        for o in fixture::demo() {
            s.apply(o).expect("fixture applies");
        }
        s
    }

    fn names(body: &[u8]) -> Vec<String> {
        let v: Value = serde_json::from_slice(body).expect("json");
        v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn list_applies_selectors_and_namespace() {
        let s = demo_store();
        let l = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";
        let cases: &[(Resource, Option<&str>, &str, &[&str])] = &[
            (
                Resource::Services,
                None,
                l,
                &["api", "db", "kubernetes", "web"],
            ),
            (
                Resource::SlicesV1,
                None,
                l,
                &["api-xyz89", "kubernetes", "web-abc12"],
            ),
            (Resource::Endpoints, None, l, &["api", "kubernetes", "web"]),
            (
                Resource::Nodes,
                None,
                "fieldSelector=metadata.name%3Dedge-b1",
                &["edge-b1"],
            ),
            (Resource::Services, Some("kube-system"), "", &[]),
            (
                Resource::Services,
                None,
                "fieldSelector=spec.clusterIP%21%3DNone&labelSelector=app%3Dweb",
                &["web"],
            ),
        ];
        for (res, ns, q, want) in cases {
            let f = Filter::new(*res, ns.map(str::to_string), &Query::parse(q)).expect("filter");
            let (objs, rv) = list(&s, *res);
            let body = list_body(*res, &objs, rv, &f);
            assert_eq!(names(&body), *want, "{res:?} {q}");
            let v: Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(v["metadata"]["resourceVersion"], s.rv().to_string());
            assert_eq!(v["kind"], res.list_kind());
            for item in v["items"].as_array().expect("items") {
                assert!(item.get("kind").is_none() && item.get("apiVersion").is_none());
            }
        }
    }

    #[test]
    fn slices_are_served_in_the_route_version() {
        let s = demo_store();
        let v1b = get(&s, Resource::SlicesV1beta1, Some("default"), "web-abc12").expect("get");
        assert_eq!(v1b["apiVersion"], "discovery.k8s.io/v1beta1");
        assert_eq!(
            v1b["endpoints"][0]["topology"]["kubernetes.io/hostname"],
            "edge-a1"
        );
        let n = get(&s, Resource::Nodes, None, "edge-a1").expect("node");
        assert_eq!(
            (n["kind"].as_str(), n["apiVersion"].as_str()),
            (Some("Node"), Some("v1"))
        );
        let e = get(&s, Resource::Nodes, None, "nope").expect_err("404");
        assert_eq!(e.to_value()["message"], "nodes \"nope\" not found");
    }

    #[test]
    fn discovery_lists_servicecidrs_unless_they_are_not_served() {
        let groups = discovery(&Discovery::Groups, SliceVersions::V1);
        assert_eq!(groups["groups"][1]["name"], "networking.k8s.io");
        let on = discovery(
            &Discovery::NetworkingV1 { servicecidrs: true },
            SliceVersions::V1,
        );
        assert_eq!(on["resources"][0]["name"], "servicecidrs");
        assert_eq!(on["resources"][0]["namespaced"], false);
        let off = discovery(
            &Discovery::NetworkingV1 {
                servicecidrs: false,
            },
            SliceVersions::V1,
        );
        assert_eq!(off["resources"], json!([]));
    }

    #[test]
    fn discovery_follows_slice_versions() {
        let g = discovery(&Discovery::SliceGroup, SliceVersions::Both);
        assert_eq!(g["versions"].as_array().map(Vec::len), Some(2));
        assert_eq!(g["preferredVersion"]["version"], "v1");
        let g = discovery(&Discovery::SliceGroup, SliceVersions::V1beta1);
        assert_eq!(g["versions"][0]["groupVersion"], "discovery.k8s.io/v1beta1");
        let r = discovery(&Discovery::SliceVersion("v1"), SliceVersions::V1);
        assert_eq!(r["resources"][0]["kind"], "EndpointSlice");
    }
}
