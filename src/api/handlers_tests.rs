//! LIST answers: the body of a whole collection (selection "everything") is byte-identical to the
//! per-item body and shares every item's bytes, stays fresh after changes, and watch starts select
//! the same objects.

use serde_json::{json, Value};

use std::ops::ControlFlow;

use super::*;
use crate::api::selector::FieldSelector;
use crate::api::transition::{InitialCursor, Item};
use crate::api::wire::tests::concat;
use crate::cache::collection::Retention;
use crate::cache::store::test_support::{self, texts};
use crate::cache::store::{Settings, State};
use crate::cache::topology::fixtures;
use crate::handoff::Change;
use crate::k8s::Resource;

/// kube-proxy's label selector L, URL-encoded.
const L: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion":"v1","kind":"Node","metadata":{"name":name,"labels":labels},
        "status":{"addresses":[{"type":"InternalIP","address":"192.168.0.1"}]}})
}

fn service(ns: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion":"v1","kind":"Service","metadata":{"namespace":ns,"name":name,"labels":labels},
        "spec":{"clusterIP":"10.96.0.10","ports":[{"name":"http","port":80,"protocol":"TCP"}]}})
}

fn endpoints(ns: &str, name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Endpoints","metadata":{"namespace":ns,"name":name},
        "subsets":[{"addresses":[{"ip":"10.0.0.1","nodeName":"edge-1"}],"ports":[{"port":80}]}]})
}

fn slice(ns: &str, name: &str, gen: u32) -> Value {
    json!({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
        "metadata":{"namespace":ns,"name":name,"labels":{"kubernetes.io/service-name":"web"},
            "annotations":{"gen":gen.to_string()}},
        "addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],
        "endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true},"nodeName":"edge-1"}]})
}

/// A ready cache with objects of every resource, including nodes and ServiceCIDRs that carry
/// the excluding labels (they are not admission-filtered) and objects the admission filter
/// keeps out.
fn state() -> State {
    let mut st = State::new(
        Settings {
            hostname: "edge-1".into(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(100),
        },
        1,
    );
    st.serve_v1beta1();
    st.expect_cidrs(Some(Resource::CidrsV1), 0);
    let cidrs = vec![
        json!({"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR",
            "metadata":{"name":"kubernetes"},"spec":{"cidrs":["10.96.0.0/12"]}}),
        json!({"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR",
            "metadata":{"name":"extra","labels":{"service.kubernetes.io/headless":""}},
            "spec":{"cidrs":["10.100.0.0/16"]}}),
    ];
    st.apply_list(Resource::CidrsV1, texts(&cidrs), 0);
    let nodes = vec![
        node("edge-1", json!({"zone":"a"})),
        node("edge-2", json!({"service.kubernetes.io/headless":""})),
        node(
            "edge-3",
            json!({"service.kubernetes.io/service-proxy-name":"x"}),
        ),
    ];
    st.apply_list(Resource::Nodes, texts(&nodes), 0);
    let services = vec![
        service("default", "web", json!({"app":"web"})),
        service("kube-system", "dns", json!({})),
        service(
            "default",
            "hl",
            json!({"service.kubernetes.io/headless":""}),
        ),
    ];
    st.apply_list(Resource::Services, texts(&services), 0);
    let eps = vec![endpoints("default", "web"), endpoints("kube-system", "dns")];
    st.apply_list(Resource::Endpoints, texts(&eps), 0);
    let mut other = slice("default", "other", 0);
    other["metadata"]["labels"]["service.kubernetes.io/service-proxy-name"] = json!("x");
    let slices = vec![
        slice("default", "web-a", 0),
        slice("default", "web-b", 0),
        other,
    ];
    st.apply_list(Resource::SlicesV1, texts(&slices), 0);
    assert!(st.is_ready());
    st
}

/// The LIST body served for `query` on the cluster-wide collection of `res`.
fn list_bytes(st: &State, res: Resource, query: &str) -> Vec<u8> {
    let route = Route::Collection {
        res,
        namespace: None,
    };
    match st
        .with_view(|v| handle(&route, query, Format::Json, v, 0.0))
        .into_reply()
    {
        Some(r) => {
            assert_eq!(r.code, 200, "{res:?} {query}");
            concat(&r.body)
        }
        None => panic!("{res:?} {query}: not a reply"),
    }
}

fn filter_of(res: Resource, query: &str) -> Filter {
    let opts = query::parse(query, res.selectable_fields()).unwrap_or_else(|e| panic!("{e:?}"));
    Filter {
        namespace: None,
        labels: opts.label_selector,
        fields: opts.field_selector,
    }
}

/// The body the per-item path builds for the same request on the same state.
fn per_item_bytes(st: &State, res: Resource, query: &str) -> Vec<u8> {
    concat(&wire::json::list(
        res,
        st.current_rv(),
        st.with_view(|v| select_per_item(res, &filter_of(res, query), v))
            .iter(),
    ))
}

fn item_names(body: &[u8]) -> Vec<String> {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let items = v["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A LIST of the whole collection copies no served object: its body holds each object's own
/// bytes (the same allocation the view and every watcher share), joined by constant commas.
fn assert_items_are_shared(st: &State, res: Resource) {
    let route = Route::Collection {
        res,
        namespace: None,
    };
    let body = match st
        .with_view(|v| handle(&route, "", Format::Json, v, 0.0))
        .into_reply()
    {
        Some(r) => r.body,
        None => panic!("{res:?}: not a reply"),
    };
    let shared: Vec<&Arc<[u8]>> = body
        .iter()
        .filter_map(|s| match s {
            Segment::Shared(b) => Some(b),
            _ => None,
        })
        .collect();
    let objects: Vec<Arc<Served>> =
        st.with_view(|v| v.collection(res).objects().cloned().collect());
    assert!(!objects.is_empty(), "{res:?}");
    assert_eq!(shared.len(), objects.len(), "{res:?}: one segment per item");
    for (seg, obj) in shared.iter().zip(&objects) {
        assert!(Arc::ptr_eq(seg, &obj.json()), "{res:?} {}: copied", obj.key);
    }
    assert!(
        body.iter()
            .all(|s| !matches!(s, Segment::Owned(b) if b.len() > 512)),
        "{res:?}: no owned copy of the items"
    );
}

#[test]
fn list_bodies_equal_per_item_bodies_and_share_the_items() {
    let st = state();
    for res in Resource::ALL {
        for q in [
            L,
            "",
            "labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&resourceVersion=0",
        ] {
            let served = list_bytes(&st, res, q);
            assert_eq!(served, per_item_bytes(&st, res, q), "{res:?} {q}");
            let everything = filter_of(res, q).scope(res) == Scope::Everything;
            assert_eq!(
                everything,
                res.label_selector().is_some() || q.is_empty(),
                "{res:?} {q}"
            );
        }
        assert_items_are_shared(&st, res);
    }
    // The readers' view holds only the local Node (the others as facts, not served); L
    // excludes no Node.
    assert_eq!(
        item_names(&list_bytes(&st, Resource::Nodes, "")),
        vec!["edge-1"]
    );
    assert_eq!(
        item_names(&list_bytes(&st, Resource::Nodes, L)),
        vec!["edge-1"]
    );
    assert_eq!(
        item_names(&list_bytes(&st, Resource::SlicesV1, L)),
        vec!["web-a", "web-b"]
    );
    assert_eq!(
        item_names(&list_bytes(&st, Resource::Services, L)),
        vec!["web", "dns"]
    );
}

#[test]
fn a_list_after_a_change_reflects_it() {
    let mut st = state();
    let res = Resource::SlicesV1;
    let before = list_bytes(&st, res, L);
    assert_eq!(item_names(&before), vec!["web-a", "web-b"]);
    let rv = st.current_rv();

    st.apply(
        Resource::SlicesV1,
        Change::upsert(&slice("default", "web-c", 0)),
        0,
    );
    let after = list_bytes(&st, res, L);
    assert_eq!(item_names(&after), vec!["web-a", "web-b", "web-c"]);
    assert_eq!(after, per_item_bytes(&st, res, L));
    let v: Value = serde_json::from_slice(&after).unwrap_or_default();
    assert_eq!(
        v["metadata"]["resourceVersion"],
        st.current_rv().to_string()
    );
    assert!(st.current_rv() > rv);

    // A modification, then an object leaving the view by gaining an excluding label.
    st.apply(
        Resource::SlicesV1,
        Change::upsert(&slice("default", "web-a", 1)),
        0,
    );
    let modified = list_bytes(&st, res, L);
    assert_eq!(modified, per_item_bytes(&st, res, L));
    assert!(String::from_utf8_lossy(&modified).contains("\"gen\":\"1\""));
    let mut hl = slice("default", "web-b", 0);
    hl["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    st.apply(Resource::SlicesV1, Change::upsert(&hl), 0);
    let left = list_bytes(&st, res, L);
    assert_eq!(item_names(&left), vec!["web-a", "web-c"]);
    assert_eq!(left, per_item_bytes(&st, res, L));

    // A change elsewhere moves only the envelope's RV.
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "new", json!({}))),
        0,
    );
    assert_eq!(list_bytes(&st, res, L), per_item_bytes(&st, res, L));
}

#[test]
fn watch_starts_select_the_same_objects() {
    let st = state();
    let route = |res| Route::Collection {
        res,
        namespace: None,
    };
    for res in Resource::ALL {
        for q in [
            format!("{L}&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
            format!("{L}&watch=true&resourceVersion=0"),
            "watch=true".to_string(),
        ] {
            let Answer::Watch(plan) = st.with_view(|v| handle(&route(res), &q, Format::Json, v, 0.0)) else {
                panic!("{res:?} {q}: not a watch");
            };
            let keys = |v: &[Arc<Served>]| v.iter().map(|o| o.key.clone()).collect::<Vec<_>>();
            let expected = st.with_view(|v| select_per_item(res, &plan.filter, v));
            assert!(plan.initial, "{res:?} {q}");
            let everything = plan.filter.scope(res) == Scope::Everything;
            let mut cursor = InitialCursor::new(plan.cursor);
            let mut sent = Vec::new();
            let done = st.with_view(|v| {
                cursor.step(v.collection(res), v.current_rv(), &plan.filter, everything, |item| {
                    if let Item::Object(o) = item {
                        sent.push(Arc::clone(o));
                    }
                    ControlFlow::Continue(())
                })
            });
            assert_eq!(done, Ok(true), "{res:?} {q}");
            assert_eq!(keys(&sent), keys(&expected), "{res:?} {q}");
            assert_eq!(plan.cursor, st.current_rv());
        }
    }
}

/// Topology case 37 (the numbered catalogue of docs/ARCHITECTURE.md §9), the selection half (the cache's half, headless Endpoints never
/// served, is among the cache's lifecycle tests): a headless Service is listed, and only
/// `spec.clusterIP!=None` leaves it out.
#[test]
fn case_37_headless_service_only_without_field_selector() {
    let fx = fixtures::fixture_f();
    let mut st = test_support::loaded(&fx, 1_000, Resource::SlicesV1, vec![]);
    let mut hl = fixtures::service("default", "hl", None);
    hl["spec"]["clusterIP"] = json!("None");
    st.apply(Resource::Services, Change::upsert(&hl), 1);
    let all = |fields: &str| {
        let filter = Filter {
            fields: FieldSelector::parse(fields, Resource::Services.selectable_fields())
                .unwrap_or_default(),
            ..Filter::default()
        };
        st.with_view(|v| select(Resource::Services, &filter, v))
            .iter()
            .map(|o| o.key.name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(all(""), fixtures::strs(&["hl", "s"]));
    assert_eq!(all("spec.clusterIP!=None"), fixtures::strs(&["s"]));
}

/// The shared segments of a protobuf LIST of the whole collection of `res`.
fn protobuf_items(st: &State, res: Resource) -> Vec<Arc<[u8]>> {
    let route = Route::Collection {
        res,
        namespace: None,
    };
    let reply = match st.with_view(|v| handle(&route, "", Format::Protobuf, v, 0.0)) {
        Answer::List(plan) => plan.reply(),
        other => panic!("{res:?}: not a list: {other:?}"),
    };
    assert_eq!(
        (reply.code, reply.format),
        (200, Format::Protobuf),
        "{res:?}"
    );
    assert!(concat(&reply.body).starts_with(b"k8s\0"), "{res:?}");
    reply
        .body
        .into_iter()
        .filter_map(|s| match s {
            Segment::Shared(b) => Some(b),
            _ => None,
        })
        .collect()
}

#[test]
fn protobuf_forms_are_encoded_once_and_shared_by_every_list() {
    let st = state();
    for res in [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ] {
        let objects: Vec<Arc<Served>> =
            st.with_view(|v| v.collection(res).objects().cloned().collect());
        let first = protobuf_items(&st, res);
        let second = protobuf_items(&st, res);
        assert_eq!(first.len(), objects.len(), "{res:?}: one segment per item");
        for ((a, b), obj) in first.iter().zip(&second).zip(&objects) {
            assert!(Arc::ptr_eq(a, b), "{res:?} {}: encoded again", obj.key);
            assert!(Arc::ptr_eq(a, &obj.protobuf(res)), "{res:?} {}", obj.key);
        }
    }
}

#[test]
fn a_status_is_in_the_negotiated_format() {
    // (Which format a request negotiates, a conversion forwarded and a 406: `api::decide`.)
    let st = state();
    let route = Route::Collection {
        res: Resource::Services,
        namespace: None,
    };
    // A Status in the negotiated format: a 400 in protobuf.
    match st.with_view(|v| handle(&route, "labelSelector=a%20in%20(", Format::Protobuf, v, 0.0)) {
        Answer::Reply(r) => {
            assert_eq!((r.code, r.format), (400, Format::Protobuf));
            assert!(concat(&r.body).starts_with(b"k8s\0"));
        }
        other => panic!("not a reply: {other:?}"),
    }
}
