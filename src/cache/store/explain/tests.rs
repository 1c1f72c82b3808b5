//! `/debug/topology` data from a real cache: what it explains is what it serves (kept
//! endpoints, served resourceVersions), after changes too; the overview's counts; unknown
//! Services; what is copied under the lock.

use serde_json::{json, Value};

use super::super::State;
use super::*;
use crate::cache::topology::fixtures::*;
use crate::handoff::edge_health::EdgeHealthMap;
use crate::handoff::Change;
use crate::k8s::Resource;

fn load(fx: &Fixture, slices: Vec<Value>, kind: Resource) -> State {
    crate::cache::store::test_support::loaded(fx, 1_000, kind, slices)
}

fn f_slices() -> Vec<Value> {
    let ep = slice_endpoint_v1;
    vec![
        slice_v1(
            "default",
            "s-aaaaa",
            Some("s"),
            vec![
                ep("10.0.0.1", Some("h"), Some("a")),
                ep("10.0.0.3", Some("n2"), Some("b")),
            ],
        ),
        slice_v1(
            "default",
            "s-bbbbb",
            Some("s"),
            vec![ep("10.0.0.2", Some("n1"), None), ep("10.0.0.5", None, None)],
        ),
    ]
}

fn served(st: &State, res: Resource, name: &str) -> Value {
    let s = st
        .collection(res)
        .get(&ObjectKey::new("default", name))
        .cloned()
        .expect("served");
    serde_json::from_slice(&s.json()).expect("JSON")
}

/// The explanation agrees with what the cache serves, object by object.
fn assert_agrees(st: &State, service: &str) -> ServiceExplanation {
    let e = st
        .explain_service(&ObjectKey::new("default", service), 1000)
        .expect("known");
    for o in &e.objects {
        let kept: Vec<&str> = o
            .endpoints
            .iter()
            .filter(|r| r.kept)
            .map(|r| r.address.as_str())
            .collect();
        let (res, ips) = match o.kind {
            "Endpoints" => {
                let v = served(st, Resource::Endpoints, &o.name);
                let mut all = ips(&v);
                all.extend(not_ready_ips(&v));
                (Resource::Endpoints, all)
            }
            _ => (
                Resource::SlicesV1,
                slice_ips(&served(st, Resource::SlicesV1, &o.name)),
            ),
        };
        assert_eq!(kept, ips, "{} {}", o.kind, o.name);
        assert_eq!(o.kept, kept.len());
        let rv = st
            .collection(res)
            .get(&ObjectKey::new("default", &o.name))
            .map(|s| s.rv.to_string());
        assert_eq!(o.resource_version, rv, "{}", o.name);
    }
    e
}

#[test]
fn explains_what_it_serves_and_follows_changes() {
    let f = fixture_f();
    let mut st = load(&f, f_slices(), Resource::SlicesV1);
    let e = assert_agrees(&st, "s");
    assert_eq!(
        (e.class, e.keys.clone(), e.source.as_deref()),
        ("topology", vec!["zone".to_string()], Some("topologyKeys"))
    );
    assert_eq!(
        e.local_values,
        [("zone".to_string(), Some("a".to_string()))].into()
    );
    let names: Vec<(&str, &str)> = e
        .objects
        .iter()
        .map(|o| (o.kind, o.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("Endpoints", "s"),
            ("EndpointSlice", "s-aaaaa"),
            ("EndpointSlice", "s-bbbbb")
        ]
    );
    let eps = &e.objects[0];
    assert_eq!((eps.kept, eps.total), (2, 6));
    let row = |addr: &str| {
        eps.endpoints
            .iter()
            .find(|r| r.address == addr)
            .expect("row")
            .clone()
    };
    let n2 = row("10.0.0.3");
    assert_eq!(
        (n2.kept, n2.reason, n2.node.as_deref()),
        (false, "NoKeyMatches", Some("n2"))
    );
    assert_eq!(
        n2.node_values,
        [("zone".to_string(), Some("b".to_string()))].into()
    );
    assert_eq!(row("10.0.0.5").reason, "NoNodeName");
    assert_eq!(row("10.0.0.6").reason, "UnknownNode");
    assert!(row("10.0.0.6").node_values.is_empty());
    assert_eq!(
        row("10.0.0.4").node_values,
        [("zone".to_string(), None)].into()
    );
    assert!(
        row("10.0.0.1").message.contains("zone=\"a\""),
        "{}",
        row("10.0.0.1").message
    );

    // n2 joins zone a: kept now, with the new served RV.
    st.apply(
        Resource::Nodes,
        Change::upsert(&node("n2", &labels(&[("zone", "a")]))),
        1,
    );
    let e = assert_agrees(&st, "s");
    let n2 = e.objects[0]
        .endpoints
        .iter()
        .find(|r| r.address == "10.0.0.3")
        .expect("row");
    assert_eq!((n2.kept, n2.reason), (true, "KeyMatches"));
    // The local node leaves every zone: nothing kept, the reason says why.
    st.apply(Resource::Nodes, Change::upsert(&node("h", &labels(&[]))), 2);
    let e = assert_agrees(&st, "s");
    assert!(e
        .objects
        .iter()
        .flat_map(|o| &o.endpoints)
        .all(|r| r.reason == "LocalNodeLacksKeys"));
    // Edge-health on a normal Service.
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "s", None)),
        3,
    );
    st.set_edge_health(EdgeHealthMap::from([("n1".to_string(), false)]), 4);
    let e = assert_agrees(&st, "s");
    let o = st.topology_overview(10);
    assert_eq!(
        (o.abnormal_nodes.clone(), o.abnormal_node_count),
        (vec!["n1".to_string()], 1)
    );
    assert_eq!(e.class, "normal");
    assert!(e.notes[0].contains("no topology keys"), "{:?}", e.notes);
    let codes: Vec<&str> = e.objects[0].endpoints.iter().map(|r| r.reason).collect();
    assert_eq!(
        codes,
        [
            "NoTopology",
            "EdgeHealthAbnormal",
            "NoTopology",
            "NoTopology",
            "NoTopology",
            "NoTopology"
        ]
    );
}

#[test]
fn v1beta1_upstream_is_explained_in_its_v1_view() {
    let f = fixture_f();
    let beta: Vec<Value> = f_slices()
        .iter()
        .map(crate::k8s::convert::slice_v1_to_v1beta1)
        .collect();
    let st = load(&f, beta, Resource::SlicesV1beta1);
    let e = assert_agrees(&st, "s");
    assert_eq!(e.objects[1].api_version, "discovery.k8s.io/v1");
    assert_eq!((e.objects[1].kept, e.objects[1].total), (1, 2));
}

#[test]
fn overview_counts_and_limits() {
    let mut f = fixture_f();
    f.services
        .push(service("default", "t", Some(r#"["zone"]"#)));
    f.services.push(service("default", "u", None));
    let mut yurt = service("default", "y", None);
    yurt["metadata"]["annotations"] = json!({"openyurt.io/topologyKeys": "kubernetes.io/hostname"});
    f.services.push(yurt);
    let st = load(&f, f_slices(), Resource::SlicesV1);
    let o = st.topology_overview(100);
    assert_eq!(
        (
            o.local_node.as_str(),
            o.local_node_known,
            o.topology_services,
            o.truncated
        ),
        ("h", true, 3, false)
    );
    let names: Vec<&str> = o.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s", "t", "y"], "topology Services only, by key");
    let s = &o.services[0];
    assert_eq!(
        s.endpoints,
        Some(Counts {
            kept: 2,
            total: 6,
            objects: 1
        })
    );
    assert_eq!(
        s.endpoint_slices,
        Some(Counts {
            kept: 2,
            total: 4,
            objects: 2
        })
    );
    assert_eq!(o.services[1].endpoints, None);
    let y = &o.services[2];
    assert_eq!(y.source, "openyurt.io/topologyKeys=kubernetes.io/hostname");
    assert_eq!(y.keys, ["kubernetes.io/hostname"]);
    assert_eq!(
        y.local_values,
        [("kubernetes.io/hostname".to_string(), None)].into()
    );
    let o = st.topology_overview(1);
    assert!(o.truncated && o.services.len() == 1 && o.topology_services == 3);
}

#[test]
fn unknown_dangling_and_row_limit() {
    let mut f = fixture_f();
    f.endpoints.push(endpoints(
        "default",
        "orphan",
        vec![address("10.9.0.1", Some("n1"))],
    ));
    let st = load(&f, f_slices(), Resource::SlicesV1);
    assert!(st
        .explain_service(&ObjectKey::new("default", "nope"), 10)
        .is_none());
    assert!(st
        .explain_service(&ObjectKey::new("kube-system", "s"), 10)
        .is_none());
    let e = st
        .explain_service(&ObjectKey::new("default", "orphan"), 10)
        .expect("endpoints cached");
    assert_eq!(e.class, "dangling");
    assert_eq!(e.objects[0].endpoints[0].reason, "NoTopology");
    let e = st
        .explain_service(&ObjectKey::new("default", "s"), 3)
        .expect("known");
    assert_eq!((e.rows, e.omitted_rows, e.truncated), (3, 7, true));
    assert_eq!(e.objects[0].endpoints.len(), 3);
    assert!(
        e.objects[1].endpoints.is_empty() && e.objects[1].total == 2,
        "counts cover omitted rows"
    );
}

#[test]
fn copies_only_the_nodes_and_labels_in_play() {
    let mut f = fixture_f();
    f.nodes.insert(
        "h".into(),
        labels(&[("zone", "a"), ("rack", "r1"), ("big", "x")]),
    );
    f.nodes.insert("far".into(), labels(&[("zone", "a")]));
    let st = load(&f, vec![], Resource::SlicesV1);
    let input = st
        .explain_input(&ObjectKey::new("default", "s"))
        .expect("known");
    let names: Vec<&str> = input.nodes.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["h", "n1", "n2", "n3"],
        "local node and endpoint nodes that are cached"
    );
    assert_eq!(input.nodes["h"], labels(&[("zone", "a")]));
}
