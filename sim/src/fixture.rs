//! Start-up object sets: `demo` (a small three-zone edge cluster used by `make demo` and the
//! integration tests), `empty`, and `scale` (generated Nodes/Services/Endpoints/EndpointSlices
//! for benchmarks), the latter in two shapes: `flat` (minimal objects, the default) and `real`
//! (each object as the component that owns it writes it: [`real`]). Pure: each returns the
//! objects to apply, in order; [`list_bytes`] measures what a store of them lists.

mod real;

use crate::api::{self, Filter};
use crate::store::{Kind, Store};
use grid_wrapper::k8s::Resource;
use serde_json::{json, Value};

/// Which fixture to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixture {
    /// The demo cluster (see [`demo`]).
    Demo,
    /// No objects.
    Empty,
    /// Generated objects (see [`scale`]).
    Scale(ScaleParams),
}

/// How the `scale` fixture's objects look (`--shape`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// Minimal objects: a Node of about 1 KB, slices and Endpoints without uids or
    /// managedFields (every existing bench and test).
    #[default]
    Flat,
    /// The same cluster, each object as its owner writes it (see [`real`]): kubelet-shaped
    /// Nodes of 10–15 KB, controller-shaped slices and Endpoints, managedFields everywhere.
    Real,
}

impl Shape {
    /// Parses a `--shape` value.
    pub fn parse(s: &str) -> Option<Shape> {
        match s {
            "flat" => Some(Shape::Flat),
            "real" => Some(Shape::Real),
            _ => None,
        }
    }

    /// The `--shape` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Flat => "flat",
            Shape::Real => "real",
        }
    }
}

/// Sizes of the `scale` fixture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleParams {
    /// Node count.
    pub nodes: usize,
    /// Service count (one Endpoints and one EndpointSlice each).
    pub services: usize,
    /// Zone count (node label `zone` = `zone-<i>`).
    pub zones: usize,
    /// Endpoints per slice.
    pub endpoints_per_slice: usize,
    /// How the objects look.
    pub shape: Shape,
}

impl Default for ScaleParams {
    fn default() -> Self {
        ScaleParams {
            nodes: 500,
            services: 2000,
            zones: 20,
            endpoints_per_slice: 10,
            shape: Shape::Flat,
        }
    }
}

/// The objects of a fixture, in apply order.
pub fn objects(f: Fixture) -> Vec<Value> {
    match f {
        Fixture::Demo => demo(),
        Fixture::Empty => Vec::new(),
        Fixture::Scale(p) if p.shape == Shape::Real => real::scale(p),
        Fixture::Scale(p) => scale(p),
    }
}

/// One kind's LIST as a store serves it: `(plural, items, bytes)`.
pub type ListBytes = (&'static str, usize, usize);

/// The bytes of each kind's JSON LIST as `store` serves it now (no selector, before gzip; v1
/// EndpointSlices): the denominator of the benchmarks' memory ratios. Serializes every list.
pub fn list_bytes(store: &Store) -> Vec<ListBytes> {
    Kind::ALL
        .iter()
        .map(|k| {
            let res = match k {
                Kind::Node => Resource::Nodes,
                Kind::Service => Resource::Services,
                Kind::Endpoints => Resource::Endpoints,
                Kind::Slice => Resource::SlicesV1,
                Kind::Cidr => Resource::CidrsV1,
            };
            let (objs, rv) = api::list(store, res);
            let bytes = api::list_body(res, &objs, rv, &Filter::default()).len();
            (k.plural(), objs.len(), bytes)
        })
        .collect()
}

/// [`list_bytes`] as one line: `nodes 500 items 6543210 B (13086 B each), …, total N B`.
pub fn list_bytes_line(lists: &[ListBytes]) -> String {
    let mut parts: Vec<String> = lists
        .iter()
        .map(|(plural, n, bytes)| {
            let each = if *n > 0 {
                format!(" ({} B each)", bytes / n)
            } else {
                String::new()
            };
            format!("{plural} {n} items {bytes} B{each}")
        })
        .collect();
    let total: usize = lists.iter().map(|(_, _, b)| b).sum();
    parts.push(format!(
        "total {total} B ({:.1} MiB)",
        total as f64 / 1048576.0
    ));
    parts.join(", ")
}

fn node(name: &str, zone: &str, ip: &str, pod_cidr: &str) -> Value {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "zone": zone,
            "topology.kubernetes.io/zone": zone}},
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip},
                          {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.28.0", "kubeProxyVersion": "v1.28.0"}}
    })
}

/// The ServiceCIDR `kubernetes` a 1.33+ apiserver makes from its `--service-cluster-ip-range`.
fn default_service_cidr() -> Value {
    json!({
        "kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": "kubernetes"},
        "spec": {"cidrs": ["10.96.0.0/12"]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
            "message": "Kubernetes Service CIDR is ready",
            "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    })
}

fn port(name: &str, port: u16, protocol: &str) -> Value {
    json!({"name": name, "port": port, "protocol": protocol})
}

fn service(name: &str, cluster_ip: &str, ports: Value, extra_meta: Value) -> Value {
    let mut meta = json!({"name": name, "namespace": "default", "labels": {"app": name}});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), extra_meta.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    let ips = if cluster_ip == "None" {
        json!(["None"])
    } else {
        json!([cluster_ip])
    };
    json!({
        "kind": "Service", "apiVersion": "v1", "metadata": meta,
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": ips,
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "selector": {"app": name}, "sessionAffinity": "None", "ports": ports},
        "status": {"loadBalancer": {}}
    })
}

/// One backend: (pod IP, node, zone, pod name).
type Backend<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a str);

fn endpoints(name: &str, labels: Value, backends: &[Backend<'_>], ports: Value) -> Value {
    let addrs: Vec<Value> = backends
        .iter()
        .map(|(ip, node, _, pod)| {
            let mut a = json!({"ip": ip});
            if let Some(n) = node {
                a["nodeName"] = json!(n);
                a["targetRef"] = json!({"kind": "Pod", "namespace": "default", "name": pod});
            }
            a
        })
        .collect();
    json!({
        "kind": "Endpoints", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "subsets": [{"addresses": addrs, "ports": ports}]
    })
}

fn slice(name: &str, labels: Value, backends: &[Backend<'_>], ports: Value) -> Value {
    let eps: Vec<Value> = backends
        .iter()
        .map(|(ip, node, zone, pod)| {
            let mut e = json!({"addresses": [ip],
                "conditions": {"ready": true, "serving": true, "terminating": false}});
            if let Some(n) = node {
                e["nodeName"] = json!(n);
                e["targetRef"] = json!({"kind": "Pod", "namespace": "default", "name": pod});
            }
            if let Some(z) = zone {
                e["zone"] = json!(z);
                e["hints"] = json!({"forZones": [{"name": z}]});
            }
            e
        })
        .collect();
    json!({
        "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "addressType": "IPv4", "endpoints": eps, "ports": ports
    })
}

fn slice_labels(service: &str, extra: &[(&str, &str)]) -> Value {
    let mut l = json!({"kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"});
    for (k, v) in extra {
        l[*k] = json!(v);
    }
    l
}

/// The demo cluster: zones `zone-a`/`zone-b`/`zone-c`; nodes `edge-a1`, `edge-a2`, `edge-b1`,
/// `edge-c1`; Services `default/web` (topologyKeys `["zone"]`, slice `web-abc12`), `default/api`
/// (slice `api-xyz89`), `default/kubernetes` (slice `kubernetes`), headless `default/db` (slice
/// `db-hl7q2`) and `default/other-proxy` (labelled `service.kubernetes.io/service-proxy-name:
/// other`, slice `other-proxy-k3m9x`), each with its Endpoints of the same name.
pub fn demo() -> Vec<Value> {
    let mut out = vec![
        node("edge-a1", "zone-a", "192.168.1.11", "10.244.1.0/24"),
        node("edge-a2", "zone-a", "192.168.1.12", "10.244.2.0/24"),
        node("edge-b1", "zone-b", "192.168.2.11", "10.244.3.0/24"),
        node("edge-c1", "zone-c", "192.168.3.11", "10.244.4.0/24"),
        default_service_cidr(),
    ];
    let none = || json!({});

    let web: [Backend<'_>; 4] = [
        (
            "10.244.1.10",
            Some("edge-a1"),
            Some("zone-a"),
            "web-5d8f7-a1x2q",
        ),
        (
            "10.244.2.10",
            Some("edge-a2"),
            Some("zone-a"),
            "web-5d8f7-b7k4m",
        ),
        (
            "10.244.3.10",
            Some("edge-b1"),
            Some("zone-b"),
            "web-5d8f7-c9p3s",
        ),
        (
            "10.244.4.10",
            Some("edge-c1"),
            Some("zone-c"),
            "web-5d8f7-d2w8n",
        ),
    ];
    let web_ports = json!([{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]);
    out.push(service(
        "web",
        "10.96.0.10",
        web_ports,
        json!({"annotations": {"topologyKeys": "[\"zone\"]"}}),
    ));
    out.push(slice(
        "web-abc12",
        slice_labels("web", &[("app", "web")]),
        &web,
        json!([port("http", 8080, "TCP")]),
    ));
    out.push(endpoints(
        "web",
        json!({"app": "web"}),
        &web,
        json!([port("http", 8080, "TCP")]),
    ));

    let api: [Backend<'_>; 3] = [
        (
            "10.244.1.20",
            Some("edge-a1"),
            Some("zone-a"),
            "api-7c9b4-q2w3e",
        ),
        (
            "10.244.3.20",
            Some("edge-b1"),
            Some("zone-b"),
            "api-7c9b4-r4t5y",
        ),
        (
            "10.244.4.20",
            Some("edge-c1"),
            Some("zone-c"),
            "api-7c9b4-u6i7o",
        ),
    ];
    out.push(service(
        "api",
        "10.96.0.20",
        json!([{"name": "grpc", "port": 9090, "targetPort": 9090, "protocol": "TCP"}]),
        none(),
    ));
    out.push(slice(
        "api-xyz89",
        slice_labels("api", &[("app", "api")]),
        &api,
        json!([port("grpc", 9090, "TCP")]),
    ));
    out.push(endpoints(
        "api",
        json!({"app": "api"}),
        &api,
        json!([port("grpc", 9090, "TCP")]),
    ));

    // The apiserver endpoint, annotated the way edgeadm does for the local-apiserver rewrite.
    let kube: [Backend<'_>; 1] = [("192.168.0.10", None, None, "")];
    let local = json!({"superedge.io/local-endpoint": "169.254.20.11",
                       "superedge.io/local-port": "51003"});
    let mut svc = service(
        "kubernetes",
        "10.96.0.1",
        json!([{"name": "https", "port": 443, "targetPort": 6443, "protocol": "TCP"}]),
        json!({"labels": {"component": "apiserver", "provider": "kubernetes"}}),
    );
    if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("selector");
    }
    out.push(svc);
    let mut s = slice(
        "kubernetes",
        json!({"kubernetes.io/service-name": "kubernetes"}),
        &kube,
        json!([port("https", 6443, "TCP")]),
    );
    s["metadata"]["annotations"] = local.clone();
    out.push(s);
    let mut e = endpoints(
        "kubernetes",
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"}),
        &kube,
        json!([port("https", 6443, "TCP")]),
    );
    e["metadata"]["annotations"] = local;
    out.push(e);

    let db: [Backend<'_>; 1] = [("10.244.3.30", Some("edge-b1"), Some("zone-b"), "db-0")];
    let headless = [("service.kubernetes.io/headless", "")];
    out.push(service(
        "db",
        "None",
        json!([port("postgres", 5432, "TCP")]),
        none(),
    ));
    out.push(slice(
        "db-hl7q2",
        slice_labels("db", &[("app", "db"), headless[0]]),
        &db,
        json!([port("postgres", 5432, "TCP")]),
    ));
    out.push(endpoints(
        "db",
        json!({"app": "db", "service.kubernetes.io/headless": ""}),
        &db,
        json!([port("postgres", 5432, "TCP")]),
    ));

    let other: [Backend<'_>; 1] = [(
        "10.244.4.40",
        Some("edge-c1"),
        Some("zone-c"),
        "other-proxy-6f-x1",
    )];
    let proxy_label = ("service.kubernetes.io/service-proxy-name", "other");
    out.push(service(
        "other-proxy",
        "10.96.0.40",
        json!([port("http", 8081, "TCP")]),
        json!({"labels": {"app": "other-proxy", (proxy_label.0): proxy_label.1}}),
    ));
    out.push(slice(
        "other-proxy-k3m9x",
        slice_labels("other-proxy", &[("app", "other-proxy"), proxy_label]),
        &other,
        json!([port("http", 8081, "TCP")]),
    ));
    out.push(endpoints(
        "other-proxy",
        json!({"app": "other-proxy", (proxy_label.0): proxy_label.1}),
        &other,
        json!([port("http", 8081, "TCP")]),
    ));
    out
}

pub(crate) fn pod_ip(idx: usize) -> String {
    format!(
        "10.{}.{}.{}",
        128 + (idx >> 16) % 128,
        (idx >> 8) & 255,
        idx & 255
    )
}

/// Where the scale fixture puts things, whatever its shape: node names, zones and addresses,
/// Service names and ClusterIPs, which Services have topology keys, and each Service's backends
/// (pod address, node, zone), spread round-robin over the nodes.
pub(crate) struct Layout {
    /// Nodes (at least one).
    pub nodes: usize,
    zones: usize,
    endpoints_per_slice: usize,
}

impl Layout {
    pub fn of(p: &ScaleParams) -> Layout {
        Layout {
            nodes: p.nodes.max(1),
            zones: p.zones.max(1),
            endpoints_per_slice: p.endpoints_per_slice,
        }
    }

    pub fn node_name(&self, i: usize) -> String {
        format!("node-{i:05}")
    }

    pub fn zone(&self, i: usize) -> String {
        format!("zone-{}", i % self.zones)
    }

    /// The region of node `i` (ten zones each).
    pub fn region(&self, i: usize) -> String {
        format!("region-{}", (i % self.zones) / 10)
    }

    pub fn node_ip(&self, i: usize) -> String {
        format!("172.{}.{}.{}", 16 + (i >> 16) % 16, (i >> 8) & 255, i & 255)
    }

    pub fn pod_cidr(&self, i: usize) -> String {
        format!("10.{}.{}.0/24", (i >> 8) % 128, i & 255)
    }

    pub fn service_name(s: usize) -> String {
        format!("svc-{s:05}")
    }

    pub fn cluster_ip(s: usize) -> String {
        format!("10.96.{}.{}", (s >> 8) & 255, s & 255)
    }

    /// Even-numbered Services are annotated `topologyKeys: '["zone"]'`.
    pub fn has_topology_keys(s: usize) -> bool {
        s % 2 == 0
    }

    /// Service `s`'s backends: (pod address, node name, zone).
    pub fn backends(&self, s: usize) -> Vec<(String, String, String)> {
        (0..self.endpoints_per_slice)
            .map(|j| {
                let idx = s * self.endpoints_per_slice + j;
                let n = idx % self.nodes;
                (pod_ip(idx), self.node_name(n), self.zone(n))
            })
            .collect()
    }
}

/// Generated objects: nodes `node-00000`… in zones `zone-0`…; Services `svc-00000`… in
/// `default` (even-numbered ones annotated `topologyKeys: '["zone"]'`), each with Endpoints of
/// the same name and one EndpointSlice `svc-NNNNN-s0` of `endpoints_per_slice` endpoints spread
/// round-robin over the nodes.
pub fn scale(p: ScaleParams) -> Vec<Value> {
    let layout = Layout::of(&p);
    let mut out = Vec::with_capacity(layout.nodes + 3 * p.services);
    for i in 0..layout.nodes {
        out.push(node(
            &layout.node_name(i),
            &layout.zone(i),
            &layout.node_ip(i),
            &layout.pod_cidr(i),
        ));
    }
    for s in 0..p.services {
        let (name, ip) = (Layout::service_name(s), Layout::cluster_ip(s));
        let extra = if Layout::has_topology_keys(s) {
            json!({"annotations": {"topologyKeys": "[\"zone\"]"}})
        } else {
            json!({})
        };
        out.push(service(
            &name,
            &ip,
            json!([{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]),
            extra,
        ));
        let owned: Vec<(String, String, String, String)> = layout
            .backends(s)
            .into_iter()
            .enumerate()
            .map(|(j, (ip, n, z))| (ip, n, z, format!("{name}-pod-{j}")))
            .collect();
        let backends: Vec<Backend<'_>> = owned
            .iter()
            .map(|(ip, n, z, pod)| {
                (
                    ip.as_str(),
                    Some(n.as_str()),
                    Some(z.as_str()),
                    pod.as_str(),
                )
            })
            .collect();
        let ports = json!([port("http", 8080, "TCP")]);
        out.push(slice(
            &format!("{name}-s0"),
            slice_labels(&name, &[]),
            &backends,
            ports.clone(),
        ));
        out.push(endpoints(&name, json!({"app": name}), &backends, ports));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objs.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name} missing"))
    }

    #[test]
    fn demo_has_the_documented_objects() {
        let objs = demo();
        for n in ["edge-a1", "edge-a2", "edge-b1", "edge-c1"] {
            let node = find(&objs, "Node", n);
            assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], n);
            assert_eq!(node["status"]["addresses"][0]["type"], "InternalIP");
        }
        assert_eq!(
            find(&objs, "Node", "edge-b1")["metadata"]["labels"]["zone"],
            "zone-b"
        );
        let web = find(&objs, "Service", "web");
        assert_eq!(web["metadata"]["annotations"]["topologyKeys"], "[\"zone\"]");
        assert!(find(&objs, "Service", "api")["metadata"]
            .get("annotations")
            .is_none());
        assert_eq!(find(&objs, "Service", "db")["spec"]["clusterIP"], "None");
        let other = find(&objs, "Service", "other-proxy");
        assert_eq!(
            other["metadata"]["labels"]["service.kubernetes.io/service-proxy-name"],
            "other"
        );
        for (svc, sl) in [
            ("web", "web-abc12"),
            ("api", "api-xyz89"),
            ("kubernetes", "kubernetes"),
            ("db", "db-hl7q2"),
            ("other-proxy", "other-proxy-k3m9x"),
        ] {
            let s = find(&objs, "EndpointSlice", sl);
            assert_eq!(s["metadata"]["labels"]["kubernetes.io/service-name"], svc);
            assert_eq!(s["addressType"], "IPv4");
            find(&objs, "Endpoints", svc);
        }
        let web_slice = find(&objs, "EndpointSlice", "web-abc12");
        let nodes: BTreeSet<_> = web_slice["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .map(|e| e["nodeName"].as_str().expect("nodeName").to_string())
            .collect();
        assert_eq!(nodes.len(), 4, "one web endpoint per node");
        assert_eq!(
            web_slice["endpoints"][2]["hints"]["forZones"][0]["name"],
            "zone-b"
        );
        for o in [
            find(&objs, "Endpoints", "db"),
            find(&objs, "EndpointSlice", "db-hl7q2"),
        ] {
            assert_eq!(
                o["metadata"]["labels"]["service.kubernetes.io/headless"],
                ""
            );
        }
        let keys: BTreeSet<_> = objs
            .iter()
            .map(|o| (o["kind"].to_string(), o["metadata"]["name"].to_string()))
            .collect();
        assert_eq!(keys.len(), objs.len(), "no duplicate objects");
    }

    #[test]
    fn scale_counts_and_annotations() {
        let p = ScaleParams {
            nodes: 7,
            services: 5,
            zones: 3,
            endpoints_per_slice: 4,
            shape: Shape::Flat,
        };
        let objs = scale(p);
        let count = |k: &str| objs.iter().filter(|o| o["kind"] == k).count();
        assert_eq!(count("Node"), 7);
        assert_eq!(count("Service"), 5);
        assert_eq!(count("Endpoints"), 5);
        assert_eq!(count("EndpointSlice"), 5);
        let annotated = objs
            .iter()
            .filter(|o| o["kind"] == "Service" && o["metadata"].get("annotations").is_some())
            .count();
        assert_eq!(annotated, 3);
        let s = find(&objs, "EndpointSlice", "svc-00001-s0");
        assert_eq!(s["endpoints"].as_array().expect("eps").len(), 4);
        assert_eq!(s["endpoints"][0]["nodeName"], "node-00004");
        assert_eq!(
            find(&objs, "Node", "node-00004")["metadata"]["labels"]["zone"],
            "zone-1"
        );
        let ips: BTreeSet<_> = objs
            .iter()
            .filter(|o| o["kind"] == "EndpointSlice")
            .flat_map(|o| o["endpoints"].as_array().cloned().unwrap_or_default())
            .map(|e| e["addresses"][0].to_string())
            .collect();
        assert_eq!(ips.len(), 20, "pod IPs are unique");
    }
}
