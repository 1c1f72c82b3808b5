//! The runtime repair in the cache (docs/SEMANTICS.md §13): a new view is one `MODIFIED` per
//! object it changes, in every served slice version and in Endpoints; the same view again, or
//! the upstream catching up, is none; the view's end restores the upstream's content. Listed
//! objects take the `Value` path while a repair may apply. A child of `store::tests`.

use serde_json::{json, Value};

use super::*;
use crate::handoff::runtime_pods::{RuntimePod, RuntimePods};

fn target(ip: &str, node: &str, pod: &str) -> (Value, Value) {
    let tref = json!({"kind": "Pod", "namespace": "default", "name": pod});
    let ep = json!({"addresses": [ip], "conditions": {"ready": true}, "nodeName": node,
                    "targetRef": tref});
    let addr = json!({"ip": ip, "nodeName": node, "targetRef": tref});
    (ep, addr)
}

/// `web` (a normal Service) with web-0 on the local node `h` at `local_ip` and web-1 on n2.
fn objects(local_ip: &str) -> (Value, Value) {
    let (e0, a0) = target(local_ip, "h", "web-0");
    let (e1, a1) = target("10.0.0.6", "n2", "web-1");
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "web-x",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "endpoints": [e0, e1], "ports": [{"port": 80}]});
    let eps = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"namespace": "default", "name": "web"},
        "subsets": [{"addresses": [a0, a1], "ports": [{"port": 80}]}]});
    (slice, eps)
}

fn view(ip: &str) -> RuntimePods {
    let mut v = RuntimePods::default();
    v.ready.insert(
        ObjectKey::new("default", "web-0"),
        RuntimePod {
            uid: "u".into(),
            created_at: 1,
            ips: vec![ip.parse().unwrap()],
        },
    );
    v
}

/// A ready cache for `h` with `web`'s objects listed (v1beta1 served too).
fn world() -> State {
    let mut st = state_for("h");
    st.apply_list(Resource::Nodes, texts(&[node("h", &labels(&[]))]), 0);
    st.apply_list(
        Resource::Services,
        texts(&[service("default", "web", None)]),
        0,
    );
    let (slice, eps) = objects("10.0.0.5");
    st.apply_list(Resource::Endpoints, texts(&[eps]), 0);
    st.apply_list(Resource::SlicesV1, texts(&[slice]), 0);
    assert!(st.is_ready());
    st.serve_v1beta1();
    st
}

fn first_ips(st: &State) -> (Value, Value, Value) {
    (
        served(st, Resource::SlicesV1, "default", "web-x")["endpoints"][0]["addresses"].clone(),
        served(st, Resource::SlicesV1beta1, "default", "web-x")["endpoints"][0]["addresses"]
            .clone(),
        served(st, Resource::Endpoints, "default", "web")["subsets"][0]["addresses"][0]["ip"]
            .clone(),
    )
}

#[test]
fn a_new_view_is_one_modified_per_object_and_the_upstream_catching_up_is_none() {
    let mut st = world();
    let cur = st.current_rv();
    let done = st.set_runtime_pods(view("10.0.9.9"), 1);
    assert_eq!(done.events, 3, "Endpoints, v1 and v1beta1 slice");
    assert_eq!(
        first_ips(&st),
        (json!(["10.0.9.9"]), json!(["10.0.9.9"]), json!("10.0.9.9"))
    );
    for res in [
        Resource::Endpoints,
        Resource::SlicesV1,
        Resource::SlicesV1beta1,
    ] {
        let ev = events(&st, res, cur);
        assert_eq!(ev.len(), 1, "{res:?}");
        assert_eq!(ev[0].0, "MODIFIED", "{res:?}");
        assert!(ev[0].2 > cur);
    }
    // The other node's endpoint is as it was.
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.0.6"]));
    assert_eq!(
        st.facts().runtime_repairs,
        2,
        "one endpoint in Endpoints, one in the slice"
    );
    // The same view again: nothing.
    let cur = st.current_rv();
    assert_eq!(st.set_runtime_pods(view("10.0.9.9"), 2), Applied::default());
    // The upstream catches up: the served bytes are the same, no event; the repair ends.
    let (slice, eps) = objects("10.0.9.9");
    st.apply(Resource::SlicesV1, Change::upsert(&slice), 3);
    st.apply(Resource::Endpoints, Change::upsert(&eps), 3);
    assert_eq!(
        st.current_rv(),
        cur,
        "the upstream naming the runtime's address changes nothing"
    );
    assert_eq!(st.facts().runtime_repairs, 0);
}

#[test]
fn the_views_end_serves_the_upstream_again_and_a_listed_object_is_repaired() {
    let mut st = world();
    st.set_runtime_pods(view("10.0.9.9"), 1);
    // A relist while the repair holds: still served repaired (the `Value` path).
    let cur = st.current_rv();
    let (mut slice, mut eps) = objects("10.0.0.5");
    st.apply_list(Resource::SlicesV1, texts(&[slice.clone()]), 2);
    assert_eq!(st.current_rv(), cur, "an unchanged relist is silent");
    slice["metadata"]["labels"]["x"] = json!("changed");
    eps["metadata"]["labels"] = json!({"x": "changed"});
    st.apply_list(Resource::SlicesV1, texts(&[slice]), 2);
    st.apply_list(Resource::Endpoints, texts(&[eps]), 2);
    assert!(st.current_rv() > cur, "a changed relist is served");
    assert_eq!(
        first_ips(&st),
        (json!(["10.0.9.9"]), json!(["10.0.9.9"]), json!("10.0.9.9"))
    );
    // The runtime no longer reports the pod: the upstream's address again, one MODIFIED each.
    let done = st.set_runtime_pods(RuntimePods::default(), 3);
    assert_eq!(done.events, 3);
    assert_eq!(
        first_ips(&st),
        (json!(["10.0.0.5"]), json!(["10.0.0.5"]), json!("10.0.0.5"))
    );
    assert_eq!(st.facts().runtime_repairs, 0);
}

/// The incrementally served slice equals the rule applied to the upstream's (a normal Service:
/// served as it came but for the repair) over random sequences of upstream changes and runtime
/// views, and every logged change is a real one.
#[test]
fn random_changes_and_views_serve_what_the_rule_gives() {
    use crate::cache::repair;
    let mut rng = Lcg(45);
    let mut st = world();
    let mut upstream = objects("10.0.0.5").0;
    let pods = ["web-0", "web-1", "web-2"];
    for step in 0..300 {
        if rng.next(2) == 0 {
            let eps: Vec<Value> = (0..rng.next(4))
                .map(|i| {
                    let node = ["h", "n2"][rng.next(2) as usize];
                    let pod = pods[rng.next(3) as usize];
                    target(&format!("10.0.{}.{i}", rng.next(3)), node, pod).0
                })
                .collect();
            upstream["endpoints"] = Value::Array(eps);
            st.apply(Resource::SlicesV1, Change::upsert(&upstream.clone()), step);
        } else {
            let mut v = RuntimePods::default();
            for pod in pods {
                let key = ObjectKey::new("default", pod);
                match rng.next(3) {
                    0 => {
                        let ip = format!("10.0.{}.{}", rng.next(3), rng.next(3));
                        let pod = RuntimePod {
                            uid: "u".into(),
                            created_at: 1,
                            ips: vec![ip.parse().unwrap()],
                        };
                        v.ready.insert(key, pod);
                    }
                    1 => {
                        v.not_ready.insert(key);
                    }
                    _ => {}
                }
            }
            st.set_runtime_pods(v, step);
        }
        let mut want = upstream.clone();
        repair::repair(&mut want, Resource::SlicesV1, st.runtime.site());
        let mut got = served(&st, Resource::SlicesV1, "default", "web-x");
        got["metadata"]
            .as_object_mut()
            .map(|m| m.remove("resourceVersion"));
        assert_eq!(got, want, "step {step}");
    }
    for res in [Resource::SlicesV1, Resource::SlicesV1beta1] {
        assert_every_logged_change_is_real(&st, res);
    }
}

fn report(node: &str, view: RuntimePods, valid_for: u64) -> crate::handoff::site_pods::NodeReport {
    crate::handoff::site_pods::NodeReport {
        node: node.into(),
        pods: view,
        valid_for,
    }
}

/// n2's view: web-1 ready at `ip`.
fn n2_view(ip: &str) -> RuntimePods {
    let mut v = RuntimePods::default();
    v.ready.insert(
        ObjectKey::new("default", "web-1"),
        RuntimePod {
            uid: "u1".into(),
            created_at: 1,
            ips: vec![ip.parse().unwrap()],
        },
    );
    v
}

#[test]
fn another_nodes_report_repairs_only_that_nodes_endpoints_until_it_expires() {
    let mut st = world();
    st.keep_relay_view();
    let cur = st.current_rv();
    // n2 reports web-1 on a new address, and claims web-0 (which is on h) moved too.
    let mut claim = n2_view("10.0.8.8");
    claim.ready.insert(
        ObjectKey::new("default", "web-0"),
        RuntimePod {
            uid: "u".into(),
            created_at: 1,
            ips: vec!["10.6.6.6".parse().unwrap()],
        },
    );
    let done = st.take_node_report(report("n2", claim, 30), 10);
    assert_eq!(done.events, 3, "Endpoints, v1 and v1beta1 slice");
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.8.8"]));
    assert_eq!(
        slice["endpoints"][0]["addresses"],
        json!(["10.0.0.5"]),
        "a node's report never speaks for another node's endpoints"
    );
    let eps = served(&st, Resource::Endpoints, "default", "web");
    assert_eq!(eps["subsets"][0]["addresses"][1]["ip"], json!("10.0.8.8"));
    assert!(events(&st, Resource::SlicesV1, cur)
        .iter()
        .all(|e| e.0 == "MODIFIED"));
    // The relay view answers its followers with every node's view.
    let relay = st.relay_view().expect("a relay view");
    let (generation, bytes) = relay
        .read()
        .site_pods()
        .expect("the site's views published");
    let listed = crate::handoff::site_pods::decode_list(&bytes).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].node.as_str(), listed[0].valid_for), ("n2", 30));
    // The same report again, before its time is up: nothing; it holds 30 s from the last one.
    assert_eq!(
        st.take_node_report(report("n2", listed[0].pods.clone(), 30), 30),
        Applied::default()
    );
    assert_eq!(st.expire_node_reports(59), Applied::default());
    assert_eq!(relay.read().site_pods().map(|s| s.0), Some(generation));
    // No report for 30 s: dropped, the upstream's address again.
    let done = st.expire_node_reports(60);
    assert_eq!(done.events, 3);
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.0.6"]));
    let (after, bytes) = relay.read().site_pods().unwrap();
    assert!(after > generation);
    assert!(crate::handoff::site_pods::decode_list(&bytes)
        .unwrap()
        .is_empty());
}

#[test]
fn a_report_of_the_local_node_is_not_taken() {
    let mut st = world();
    let cur = st.current_rv();
    assert_eq!(
        st.take_node_report(report("h", view("10.0.9.9"), 60), 1),
        Applied::default()
    );
    assert_eq!(st.current_rv(), cur);
    assert_eq!(first_ips(&st).0, json!(["10.0.0.5"]));
}

#[test]
fn the_relays_answer_replaces_what_it_relayed_and_keeps_direct_reports() {
    let mut st = world();
    // The relay says: n2's web-1 at 10.0.8.8, and the local node h's (ignored: h's own runtime
    // speaks for it).
    let answer = vec![
        report("h", view("10.6.6.6"), 60),
        report("n2", n2_view("10.0.8.8"), 60),
    ];
    assert_eq!(st.take_relayed_reports(answer, 1).events, 3);
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.0.0.5"]));
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.8.8"]));
    // The next answer no longer names n2: its view is dropped.
    assert_eq!(st.take_relayed_reports(Vec::new(), 2).events, 3);
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.0.6"]));
    // n2 reports to this node directly: a relayed view of n2 does not replace it.
    st.take_node_report(report("n2", n2_view("10.0.7.7"), 60), 3);
    st.take_relayed_reports(vec![report("n2", n2_view("10.0.8.8"), 60)], 4);
    let slice = served(&st, Resource::SlicesV1, "default", "web-x");
    assert_eq!(slice["endpoints"][1]["addresses"], json!(["10.0.7.7"]));
}
