//! Test fixtures F and T and JSON builders for nodes, Services, Endpoints and slices, shared with
//! the cache's event tests. Test-only.
//!
//! The topology tests form one numbered catalogue of cases, `case_NN_…` across
//! `topology/tests*.rs` (what is served) and `store/tests*.rs` (events and resourceVersions),
//! mostly on fixture F or T; a number names the same case in every file. The rules they check
//! are those of docs/SEMANTICS.md (§2, §3, §4, §5, §6.2, §10); every § here is a section of that
//! file.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Value};

use super::{
    endpoint_states, serve_endpoints, serve_slice_v1, serve_slice_v1beta1, service_keys,
    slice_service, Class, KeysAnnotation, Locality,
};
use crate::cache::collection::LabelSet;
use crate::k8s::ObjectKey;

/// A world: local node, node labels, Services and core/v1 Endpoints (upstream content).
#[derive(Clone, Debug)]
pub(crate) struct Fixture {
    /// `--hostname`.
    pub hostname: String,
    /// Node name → labels.
    pub nodes: BTreeMap<String, LabelSet>,
    /// Service objects.
    pub services: Vec<Value>,
    /// Endpoints objects (upstream, unfiltered).
    pub endpoints: Vec<Value>,
    /// `--wrapper-in-cluster`.
    pub wrapper_in_cluster: bool,
    /// Nodes edge-health reports abnormal (§10); empty by default.
    pub abnormal: BTreeSet<String>,
}

impl Fixture {
    /// The filter's view of this world.
    pub fn locality(&self) -> Locality<'_> {
        Locality {
            hostname: &self.hostname,
            nodes: &self.nodes,
            wrapper_in_cluster: self.wrapper_in_cluster,
            abnormal: &self.abnormal,
        }
    }

    /// The nodes as Node JSON objects, in name order.
    pub fn node_objects(&self) -> Vec<Value> {
        self.nodes.iter().map(|(n, l)| node(n, l)).collect()
    }

    /// Parsed annotation of the cached Service `key`, `None` if no such Service.
    pub fn annotation(&self, key: &ObjectKey) -> Option<KeysAnnotation> {
        self.services
            .iter()
            .find(|s| ObjectKey::of(s).as_ref() == Some(key))
            .map(service_keys)
    }

    /// The Service object `namespace/name`, mutable (panics if absent: test-only).
    pub fn service_mut(&mut self, namespace: &str, name: &str) -> &mut Value {
        let key = ObjectKey::new(namespace, name);
        self.services
            .iter_mut()
            .find(|s| ObjectKey::of(s).as_ref() == Some(&key))
            .expect("fixture has this service")
    }

    /// Sets (`Some`) or removes (`None`) the `topologyKeys` annotation of a Service.
    pub fn set_keys(&mut self, namespace: &str, name: &str, keys: Option<&str>) {
        let svc = self.service_mut(namespace, name);
        let meta = &mut svc["metadata"];
        match keys {
            Some(k) => meta["annotations"]["topologyKeys"] = json!(k),
            None => {
                if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                    a.remove("topologyKeys");
                }
            }
        }
    }

    /// The upstream Endpoints `namespace/name` (panics if absent: test-only).
    pub fn endpoints_of(&self, namespace: &str, name: &str) -> &Value {
        let key = ObjectKey::new(namespace, name);
        self.endpoints
            .iter()
            .find(|e| ObjectKey::of(e).as_ref() == Some(&key))
            .expect("fixture has these endpoints")
    }

    /// Classifies and serves an Endpoints object the way the cache does (§2.6; §2.9 decided
    /// over the object itself, as the cache does for Endpoints and for a Service's only slice).
    pub fn serve_endpoints(&self, obj: &Value) -> Value {
        let annotation = ObjectKey::of(obj).and_then(|k| self.annotation(&k));
        serve_endpoints(
            obj.clone(),
            Class::of(annotation.as_ref(), &endpoint_states(obj), &self.locality()),
            &self.locality(),
        )
    }

    /// Served content of the fixture's own Endpoints `namespace/name`.
    pub fn served(&self, namespace: &str, name: &str) -> Value {
        self.serve_endpoints(self.endpoints_of(namespace, name))
    }

    /// Classifies (by the service-name label) and serves a v1 slice.
    pub fn serve_slice_v1(&self, obj: &Value) -> Value {
        let annotation = slice_service(obj).and_then(|k| self.annotation(&k));
        serve_slice_v1(
            obj.clone(),
            Class::of(annotation.as_ref(), &endpoint_states(obj), &self.locality()),
            &self.locality(),
        )
    }

    /// Serves a v1 slice as the cache does when `all` are its Service's slices (it among them):
    /// the §2.9 decision is taken over all of them.
    pub fn serve_slice_v1_among(&self, obj: &Value, all: &[&Value]) -> Value {
        let annotation = slice_service(obj).and_then(|k| self.annotation(&k));
        let states: Vec<_> = all.iter().flat_map(|s| endpoint_states(s)).collect();
        serve_slice_v1(
            obj.clone(),
            Class::of(annotation.as_ref(), &states, &self.locality()),
            &self.locality(),
        )
    }

    /// Classifies (by the service-name label) and serves a v1beta1 slice.
    pub fn serve_slice_v1beta1(&self, obj: &Value) -> Value {
        let annotation = slice_service(obj).and_then(|k| self.annotation(&k));
        serve_slice_v1beta1(
            obj.clone(),
            Class::of(annotation.as_ref(), &endpoint_states(obj), &self.locality()),
            &self.locality(),
        )
    }
}

/// Labels from pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> LabelSet {
    LabelSet::from_pairs(
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect(),
    )
}

/// A Node object.
pub(crate) fn node(name: &str, labels: &LabelSet) -> Value {
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.into(), v.into())).collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": labels, "resourceVersion": "1" },
    })
}

/// A ClusterIP Service, with the `topologyKeys` annotation when `keys` is `Some`.
pub(crate) fn service(namespace: &str, name: &str, keys: Option<&str>) -> Value {
    let mut svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "namespace": namespace, "name": name, "resourceVersion": "1" },
        "spec": { "clusterIP": "10.96.0.10", "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }] },
    });
    if let Some(k) = keys {
        svc["metadata"]["annotations"] = json!({ "topologyKeys": k });
    }
    svc
}

/// A core/v1 `EndpointAddress`, with `nodeName` when `node` is `Some`.
pub(crate) fn address(ip: &str, node: Option<&str>) -> Value {
    let mut a = json!({ "ip": ip });
    if let Some(n) = node {
        a["nodeName"] = json!(n);
        a["targetRef"] =
            json!({ "kind": "Pod", "namespace": "default", "name": format!("pod-{ip}") });
    }
    a
}

/// Endpoints with one subset, ports `[{name: http, port: 80, protocol: TCP}]`.
pub(crate) fn endpoints(namespace: &str, name: &str, addresses: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": { "namespace": namespace, "name": name, "resourceVersion": "7", "labels": { "app": name } },
        "subsets": [{
            "addresses": addresses,
            "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }],
        }],
    })
}

/// A v1 slice endpoint: ready conditions, `nodeName` / `zone` and zone hints when given.
pub(crate) fn slice_endpoint_v1(ip: &str, node: Option<&str>, zone: Option<&str>) -> Value {
    let mut e = json!({
        "addresses": [ip],
        "conditions": { "ready": true, "serving": true, "terminating": false },
    });
    if let Some(n) = node {
        e["nodeName"] = json!(n);
    }
    if let Some(z) = zone {
        e["zone"] = json!(z);
        e["hints"] = json!({ "forZones": [{ "name": z }] });
    }
    e
}

/// A discovery.k8s.io/v1 slice, IPv4, ports http/80, labelled with `service` when given.
pub(crate) fn slice_v1(
    namespace: &str,
    name: &str,
    service: Option<&str>,
    eps: Vec<Value>,
) -> Value {
    let mut s = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": namespace, "name": name, "resourceVersion": "9",
            "labels": { "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io" },
        },
        "addressType": "IPv4",
        "endpoints": eps,
        "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }],
    });
    if let Some(svc) = service {
        s["metadata"]["labels"]["kubernetes.io/service-name"] = json!(svc);
    }
    s
}

/// Fixture F: `h{zone=a}`, `n1{zone=a}`, `n2{zone=b}`, `n3{}`; Service `default/s` with
/// `["zone"]`; Endpoints `default/s` with 10.0.0.1@h … 10.0.0.4@n3, 10.0.0.5 (no node),
/// 10.0.0.6@ghost.
pub(crate) fn fixture_f() -> Fixture {
    let nodes = [
        ("h", labels(&[("zone", "a")])),
        ("n1", labels(&[("zone", "a")])),
        ("n2", labels(&[("zone", "b")])),
        ("n3", labels(&[])),
    ];
    Fixture {
        hostname: "h".to_string(),
        nodes: nodes.into_iter().map(|(n, l)| (n.to_string(), l)).collect(),
        services: vec![service("default", "s", Some(r#"["zone"]"#))],
        endpoints: vec![endpoints("default", "s", f_addresses())],
        wrapper_in_cluster: true,
        abnormal: BTreeSet::new(),
    }
}

/// The six addresses of fixture F's Endpoints.
pub(crate) fn f_addresses() -> Vec<Value> {
    vec![
        address("10.0.0.1", Some("h")),
        address("10.0.0.2", Some("n1")),
        address("10.0.0.3", Some("n2")),
        address("10.0.0.4", Some("n3")),
        address("10.0.0.5", None),
        address("10.0.0.6", Some("ghost")),
    ]
}

/// Fixture T (from the original's unit tests, superedge cache_test.go): `hostname{region=1}`,
/// `node-1{region=1}`, `node-2{region=2}`; Services `default/region-1` (`["region"]`) and
/// `default/no-region`.
pub(crate) fn fixture_t() -> Fixture {
    let nodes = [
        ("hostname", labels(&[("region", "1")])),
        ("node-1", labels(&[("region", "1")])),
        ("node-2", labels(&[("region", "2")])),
    ];
    let eps = |name: &str, prefix: &str| {
        let addrs = [("1", "hostname"), ("2", "node-1"), ("3", "node-2")]
            .iter()
            .map(|(i, n)| address(&format!("{prefix}.{i}"), Some(n)))
            .collect();
        endpoints("default", name, addrs)
    };
    Fixture {
        hostname: "hostname".to_string(),
        nodes: nodes.into_iter().map(|(n, l)| (n.to_string(), l)).collect(),
        services: vec![
            service("default", "region-1", Some(r#"["region"]"#)),
            service("default", "no-region", None),
        ],
        endpoints: vec![eps("region-1", "127.0.0"), eps("no-region", "127.0.2")],
        wrapper_in_cluster: true,
        abnormal: BTreeSet::new(),
    }
}

/// IPs of `addresses` over all subsets of an Endpoints object, in order.
pub(crate) fn ips(obj: &Value) -> Vec<String> {
    list_ips(obj, "addresses")
}

/// IPs of `notReadyAddresses` over all subsets, in order.
pub(crate) fn not_ready_ips(obj: &Value) -> Vec<String> {
    list_ips(obj, "notReadyAddresses")
}

fn list_ips(obj: &Value, field: &str) -> Vec<String> {
    let subsets = obj["subsets"].as_array().cloned().unwrap_or_default();
    subsets
        .iter()
        .flat_map(|s| s[field].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["ip"].as_str().map(str::to_string))
        .collect()
}

/// First address of each endpoint of a slice, in order.
pub(crate) fn slice_ips(obj: &Value) -> Vec<String> {
    let eps = obj["endpoints"].as_array().cloned().unwrap_or_default();
    eps.iter()
        .filter_map(|e| e["addresses"][0].as_str().map(str::to_string))
        .collect()
}

/// `strs(&["a"])` → `vec!["a".to_string()]`, for comparisons.
pub(crate) fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
