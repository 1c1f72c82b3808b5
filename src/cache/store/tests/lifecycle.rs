//! The cache's lifecycle: slice versions (v1beta1 upstream, pinning), readiness and where the
//! history starts, admission (cases 37–38, docs/SEMANTICS.md §4), list decoding, and the oracle
//! that compares the incremental view with a from-scratch recompute.

use super::*;

#[test]
fn v1beta1_upstream_serves_both_versions() {
    let mut st = load(&fixture_f());
    st.serve_v1beta1();
    let b = json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "s-x", "labels": {"kubernetes.io/service-name": "s"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.2"], "topology": {"kubernetes.io/hostname": "n1"}},
            {"addresses": ["10.0.0.3"], "nodeName": "n2"}
        ]
    });
    st.apply_list(Resource::SlicesV1beta1, texts(&[b]), 1);
    assert_eq!(st.slice_kind(), Resource::SlicesV1beta1);
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1beta1, "default", "s-x")),
        strs(&["10.0.0.2"])
    );
    let v1 = served(&st, Resource::SlicesV1, "default", "s-x");
    assert_eq!(v1["apiVersion"], "discovery.k8s.io/v1");
    assert_eq!(slice_ips(&v1), strs(&["10.0.0.2"]));
}

#[test]
fn not_ready_until_every_kind_listed_and_history_starts_at_ready() {
    let fx = fixture_f();
    let mut st = state_for("h");
    st.apply_list(Resource::Nodes, texts(&fx.node_objects()), 0);
    st.apply(
        Resource::Services,
        Change::upsert(&fx.services[0].clone()),
        0,
    );
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    assert!(!st.is_ready(), "slices have not listed yet");
    let a = st.apply_list(Resource::SlicesV1, texts(&[]), 0);
    assert!(a.became_ready && st.is_ready());
    let c = st.collection(Resource::Endpoints);
    assert_eq!(c.horizon(), st.current_rv());
    assert_eq!(c.log_len(), 0);
}

/// docs/SEMANTICS.md §6.2: the incrementally maintained view equals a from-scratch recomputation,
/// and every served object's RV changes exactly when its content does.
#[test]
fn incremental_view_equals_from_scratch_recompute() {
    let zones = ["a", "b", "c"];
    let mut rng = Lcg(7);
    let mut fx = fixture_f();
    let mut st = load(&fx);
    let mut slices: BTreeMap<String, Value> = BTreeMap::new();
    for step in 0..400 {
        match rng.next(6) {
            0 => {
                let name = ["h", "n1", "n2", "n3", "n4"][rng.next(5) as usize];
                let l = labels(&[("zone", zones[rng.next(3) as usize])]);
                fx.nodes.insert(name.into(), l.clone());
                st.apply(Resource::Nodes, Change::upsert(&node(name, &l)), step);
            }
            1 => {
                let name = ["n1", "n2", "n3", "n4"][rng.next(4) as usize];
                fx.nodes.remove(name);
                st.apply(
                    Resource::Nodes,
                    Change::delete(&node(name, &labels(&[]))),
                    step,
                );
            }
            2 => {
                let keys =
                    [None, Some(r#"["zone"]"#), Some("[]"), Some("bad")][rng.next(4) as usize];
                let svc = service("default", ["s", "t"][rng.next(2) as usize], keys);
                let key = ObjectKey::of(&svc).unwrap_or_default();
                fx.services
                    .retain(|s| ObjectKey::of(s).as_ref() != Some(&key));
                fx.services.push(svc.clone());
                st.apply(Resource::Services, Change::upsert(&svc), step);
            }
            3 => {
                let name = ["s", "t"][rng.next(2) as usize];
                fx.services
                    .retain(|s| ObjectKey::of(s) != Some(ObjectKey::new("default", name)));
                st.apply(
                    Resource::Services,
                    Change::delete(&service("default", name, None)),
                    step,
                );
            }
            _ => {
                let name = format!("sl-{}", rng.next(4));
                let svc = ["s", "t"][rng.next(2) as usize];
                let eps = (0..rng.next(4))
                    .map(|i| {
                        let node = ["h", "n1", "n2", "n3", "n4", "ghost"][rng.next(6) as usize];
                        slice_endpoint_v1(&format!("10.1.{step}.{i}"), Some(node), Some("a"))
                    })
                    .collect();
                let s = slice_v1("default", &name, Some(svc), eps);
                slices.insert(name, s.clone());
                st.apply(Resource::SlicesV1, Change::upsert(&s), step);
            }
        }
        for (name, upstream) in &slices {
            let mut want = fx.serve_slice_v1(upstream);
            let got = served(&st, Resource::SlicesV1, "default", name);
            want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
            want["kind"] = json!("EndpointSlice");
            assert_eq!(got, want, "step {step}: slice {name}");
        }
        let mut want = fx.served("default", "s");
        let got = served(&st, Resource::Endpoints, "default", "s");
        want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
        assert_eq!(got, want, "step {step}: endpoints s");
    }
    // Every logged change is a real change of content.
    for res in Resource::ALL {
        assert_every_logged_change_is_real(&st, res);
    }
}

/// Case 37, the cache's half (the selection half, a headless Service listed only without the
/// field selector, is among the API's handler tests).
#[test]
fn case_37_headless_endpoints_never_served() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let mut hl = service("default", "hl", None);
    hl["spec"]["clusterIP"] = json!("None");
    let mut hl_eps = endpoints("default", "hl", f_addresses());
    hl_eps["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    st.apply(Resource::Services, Change::upsert(&hl), 1);
    st.apply_list(
        Resource::Endpoints,
        texts(&[fx.endpoints[0].clone(), hl_eps.clone()]),
        1,
    );
    assert!(st
        .collection(Resource::Endpoints)
        .get(&ObjectKey::new("default", "hl"))
        .is_none());
    // An Endpoints object that gains the label leaves the view (DELETED).
    let cur = st.current_rv();
    let mut s_eps = fx.endpoints[0].clone();
    s_eps["metadata"]["labels"]["service.kubernetes.io/headless"] = json!("");
    st.apply(Resource::Endpoints, Change::upsert(&s_eps), 1);
    let ev = events(&st, Resource::Endpoints, cur);
    assert_eq!((ev.len(), ev[0].0, ev[0].1.as_str()), (1, "DELETED", "s"));
}

#[test]
fn case_38_service_proxy_name_objects_never_served() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let mut svc = service("default", "other", None);
    svc["metadata"]["labels"] = json!({"service.kubernetes.io/service-proxy-name": "foo"});
    let mut sl = slice_v1(
        "default",
        "other-abcde",
        Some("other"),
        vec![slice_endpoint_v1("10.9.0.1", Some("n1"), None)],
    );
    sl["metadata"]["labels"]["service.kubernetes.io/service-proxy-name"] = json!("foo");
    let cur = st.current_rv();
    st.apply(Resource::Services, Change::upsert(&svc), 1);
    st.apply_list(Resource::SlicesV1, texts(&[sl]), 1);
    assert_eq!(st.current_rv(), cur, "nothing entered the view");
    assert!(st
        .collection(Resource::Services)
        .get(&ObjectKey::new("default", "other"))
        .is_none());
    assert!(st.collection(Resource::SlicesV1).is_empty());
    assert!(st.collection(Resource::SlicesV1beta1).is_empty());
}

#[test]
fn list_texts_are_decoded_one_by_one_and_garbage_items_are_skipped() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let good = fx.services[0].to_string().into_boxed_str();
    let other = service("default", "t", None).to_string().into_boxed_str();
    st.apply_list(Resource::Services, [good, "{not json".into(), other], 1);
    let names: Vec<String> = st
        .collection(Resource::Services)
        .objects()
        .map(|o| o.key.name.to_string())
        .collect();
    assert_eq!(names, strs(&["s", "t"]));
}

#[test]
fn a_pinned_slice_version_ignores_the_other_and_its_first_list_replaces_the_old() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let v1 = slice_v1(
        "default",
        "s-a",
        Some("s"),
        vec![slice_endpoint_v1("10.0.0.2", Some("n1"), None)],
    );
    st.apply_list(Resource::SlicesV1, texts(std::slice::from_ref(&v1)), 1);
    st.expect_slices(Resource::SlicesV1beta1);
    let cur = st.current_rv();
    // A late change from the replaced v1 reflector: ignored.
    st.apply(
        Resource::SlicesV1,
        Change::upsert(&slice_v1("default", "s-b", Some("s"), vec![])),
        1,
    );
    assert_eq!(st.current_rv(), cur);
    // The v1beta1 list replaces what the v1 reflector had stored.
    let b = json!({"apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "s-x", "labels": {"kubernetes.io/service-name": "s"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "h"}]});
    st.apply_list(Resource::SlicesV1beta1, texts(&[b]), 1);
    let names: Vec<String> = st
        .collection(Resource::SlicesV1)
        .objects()
        .map(|o| o.key.name.to_string())
        .collect();
    assert_eq!(names, strs(&["s-x"]));
    assert_eq!(
        slice_ips(&served(&st, Resource::SlicesV1, "default", "s-x")),
        strs(&["10.0.0.1"])
    );
}

#[test]
fn a_relist_keeps_endpoint_objects_packed_and_republishes_only_what_changed() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "t", None)),
        1,
    );
    // s-a is pruned (its Service has topology keys; n2 is in another zone than h), t-a is not.
    let list = |away: &str, plain: &str| {
        let pruned = slice_v1(
            "default",
            "s-a",
            Some("s"),
            vec![
                slice_endpoint_v1("10.0.0.1", Some("h"), None),
                slice_endpoint_v1(away, Some("n2"), None),
            ],
        );
        let whole = slice_v1(
            "default",
            "t-a",
            Some("t"),
            vec![slice_endpoint_v1(plain, Some("n2"), None)],
        );
        [pruned.to_string(), whole.to_string()]
    };
    // Prepared off the lock, a relist's endpoint objects are held once: packed. A first list
    // keeps them whole too (every object of it is published).
    assert_eq!(st.hold_for(Resource::SlicesV1), Hold::Whole);
    for hold in [Hold::Whole, Hold::PackedOnly] {
        let mut taker = ListPreparer::new(Resource::SlicesV1, hold);
        for text in list("10.0.0.3", "10.0.1.1") {
            taker.push(&text);
        }
        let Prepared::Listed(m) = taker.finish() else {
            panic!("a list prepares to Listed");
        };
        assert_eq!(m.len(), 2);
        for l in m.values() {
            assert_eq!(l.bytes().is_some(), hold == Hold::Whole);
            assert!(l.whole().is_some_and(|b| b.starts_with(b"{")));
        }
    }
    st.apply_list(Resource::SlicesV1, list("10.0.0.3", "10.0.1.1"), 1);
    assert_eq!(st.hold_for(Resource::SlicesV1), Hold::PackedOnly);
    let ips = |st: &State, name: &str| slice_ips(&served(st, Resource::SlicesV1, "default", name));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    assert_eq!(ips(&st, "t-a"), strs(&["10.0.1.1"]));
    let same = st.apply_list(Resource::SlicesV1, list("10.0.0.3", "10.0.1.1"), 1);
    assert_eq!(same.events, 0, "an unchanged relist publishes nothing");
    // Only the pruned-away endpoint changed: the served object is the same, but the stored
    // upstream object is the new one (n2 joining h's zone shows it).
    st.apply_list(Resource::SlicesV1, list("10.0.0.9", "10.0.1.1"), 1);
    let n2 = node("n2", &labels(&[("zone", "a")]));
    st.apply(Resource::Nodes, Change::upsert(&n2), 1);
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1", "10.0.0.9"]));
    // An object served whole changes: one event.
    let changed = st.apply_list(Resource::SlicesV1, list("10.0.0.9", "10.0.1.2"), 1);
    assert_eq!(changed.events, 1);
    assert_eq!(ips(&st, "t-a"), strs(&["10.0.1.2"]));
}

#[test]
fn a_list_taken_item_by_item_then_read_again_holds_only_the_second_reading() {
    let fx = fixture_f();
    let slice = |name: &str, ip: &str| {
        slice_v1(
            "default",
            name,
            Some("s"),
            vec![
                slice_endpoint_v1("10.0.0.1", Some("h"), None),
                slice_endpoint_v1(ip, Some("n2"), None),
            ],
        )
        .to_string()
        .into_boxed_str()
    };
    let second = [slice("s-a", "10.0.0.7"), slice("s-c", "10.0.0.8")];
    // What a reflector does: the hold first, then each item as it is read.
    let mut taken = load(&fx);
    let hold = taken.hold_for(Resource::SlicesV1);
    let mut list = ListPreparer::new(Resource::SlicesV1, hold);
    list.push(&slice("s-a", "10.0.0.3"));
    list.push(&slice("s-b", "10.0.0.4"));
    list.push("{not json");
    assert_eq!(list.pushed(), 3);
    list.clear(); // read again, from another server
    second.iter().for_each(|t| list.push(t));
    assert_eq!((list.pushed(), list.kind()), (2, Resource::SlicesV1));
    taken.apply_prepared(Resource::SlicesV1, list.finish(), 1);
    // The same as the second reading applied as one list of texts.
    let mut whole = load(&fx);
    whole.apply_list(Resource::SlicesV1, second, 1);
    let objects = |st: &State| -> Vec<(String, Value)> {
        let names: Vec<String> = st
            .collection(Resource::SlicesV1)
            .objects()
            .map(|o| o.key.name.to_string())
            .collect();
        let served = |n: String| (served(st, Resource::SlicesV1, "default", &n), n);
        names.into_iter().map(served).map(|(v, n)| (n, v)).collect()
    };
    let got = objects(&taken);
    assert_eq!(got, objects(&whole));
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["s-a", "s-c"]);
    // Both pruned to h's endpoint (n2 is in another zone), and then n2 joining h's zone
    // shows the upstream object kept is the second reading's.
    let n2 = node("n2", &labels(&[("zone", "a")]));
    taken.apply(Resource::Nodes, Change::upsert(&n2), 1);
    let ips = slice_ips(&served(&taken, Resource::SlicesV1, "default", "s-a"));
    assert_eq!(ips, strs(&["10.0.0.1", "10.0.0.7"]));
}

#[test]
fn a_first_list_packs_only_the_objects_of_topology_services() {
    let fx = fixture_f();
    let mut st = load(&fx);
    st.apply(
        Resource::Services,
        Change::upsert(&service("default", "t", None)),
        1,
    );
    let slice = |name: &str, svc: &str| {
        let eps = vec![
            slice_endpoint_v1("10.0.0.1", Some("h"), None),
            slice_endpoint_v1("10.0.0.2", Some("n2"), None),
        ];
        slice_v1("default", name, Some(svc), eps).to_string()
    };
    // A first list of slices ("s" has topology keys, "t" none, "u" is not known yet).
    let mut list = st.list_preparer(Resource::SlicesV1);
    assert_eq!(list.hold(), Hold::Whole);
    for (name, svc) in [("s-a", "s"), ("t-a", "t"), ("u-a", "u")] {
        list.push(&slice(name, svc));
    }
    let Prepared::Listed(m) = list.finish() else {
        panic!("a list prepares to Listed");
    };
    let packed: Vec<(&str, bool)> = m
        .iter()
        .map(|(k, l)| {
            let packed = l.as_is.as_ref().is_some_and(|f| f.packed.is_some());
            (&*k.name, packed)
        })
        .collect();
    assert_eq!(packed, [("s-a", true), ("t-a", false), ("u-a", false)]);
    assert!(m.values().all(|l| l.bytes().is_some()), "held whole");
    st.apply_prepared(Resource::SlicesV1, Prepared::Listed(m), 1);
    let ips = |st: &State, name: &str| slice_ips(&served(st, Resource::SlicesV1, "default", name));
    assert_eq!(ips(&st, "s-a"), strs(&["10.0.0.1"]));
    assert_eq!(ips(&st, "t-a"), strs(&["10.0.0.1", "10.0.0.2"]));
    // "u" comes with topology keys: its slice is pruned now, its upstream bytes kept (packed
    // later), so that n2 joining h's zone serves its endpoint again.
    let u = service("default", "u", Some(r#"["zone"]"#));
    st.apply(Resource::Services, Change::upsert(&u), 1);
    while st.pack_pending(16) > 0 {}
    assert_eq!(ips(&st, "u-a"), strs(&["10.0.0.1"]));
    let n2 = node("n2", &labels(&[("zone", "a")]));
    st.apply(Resource::Nodes, Change::upsert(&n2), 1);
    for name in ["s-a", "u-a", "t-a"] {
        assert_eq!(ips(&st, name), strs(&["10.0.0.1", "10.0.0.2"]), "{name}");
    }
    // A relist packs every endpoint object (it compares them packed to packed).
    assert_eq!(
        st.list_preparer(Resource::SlicesV1).hold(),
        Hold::PackedOnly
    );
}
