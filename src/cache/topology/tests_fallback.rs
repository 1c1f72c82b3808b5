//! The `*` fallback and the ordered mode (docs/SEMANTICS.md §2.1, §2.9): parsing, one case per
//! rule, and a property test against a brute-force reference over random clusters.

use std::sync::Arc;

use serde_json::{json, Value};

use super::fixtures::*;
use super::*;

/// `h{unit=u1,zone=a}`, `n1{unit=u1,zone=a}`, `n2{unit=u2,zone=a}`, `n3{unit=u3,zone=b}`;
/// Service `default/s` with `keys` (and `topologyMode: ordered` when `ordered`).
fn units(keys: &str, ordered: bool) -> Fixture {
    let nodes = [
        ("h", labels(&[("unit", "u1"), ("zone", "a")])),
        ("n1", labels(&[("unit", "u1"), ("zone", "a")])),
        ("n2", labels(&[("unit", "u2"), ("zone", "a")])),
        ("n3", labels(&[("unit", "u3"), ("zone", "b")])),
    ];
    let mut svc = service("default", "s", Some(keys));
    if ordered {
        svc["metadata"]["annotations"]["topologyMode"] = json!("ordered");
    }
    Fixture {
        hostname: "h".to_string(),
        nodes: nodes.into_iter().map(|(n, l)| (n.to_string(), l)).collect(),
        services: vec![svc],
        endpoints: Vec::new(),
        wrapper_in_cluster: true,
        abnormal: Default::default(),
    }
}

/// Endpoints `default/s`: 10.0.0.1@n1, 10.0.0.2@n2, 10.0.0.3@n3, ready unless listed in
/// `not_ready` (by last digit).
fn three(not_ready: &[u8]) -> Value {
    let mut obj = endpoints("default", "s", Vec::new());
    let (mut ready, mut not) = (Vec::new(), Vec::new());
    for (i, node) in [(1u8, "n1"), (2, "n2"), (3, "n3")] {
        let a = address(&format!("10.0.0.{i}"), Some(node));
        if not_ready.contains(&i) {
            not.push(a);
        } else {
            ready.push(a);
        }
    }
    obj["subsets"][0]["addresses"] = json!(ready);
    obj["subsets"][0]["notReadyAddresses"] = json!(not);
    obj
}

/// Every IP served, ready or not, sorted.
fn served_ips(obj: &Value) -> Vec<String> {
    let mut all = ips(obj);
    all.extend(not_ready_ips(obj));
    all.sort();
    all
}

fn served(f: &Fixture, not_ready: &[u8]) -> Vec<String> {
    served_ips(&f.serve_endpoints(&three(not_ready)))
}

#[test]
fn parsing_the_fallback_and_the_mode() {
    let keys = |value: &str, mode: Option<&str>| {
        let mut svc = service("default", "s", Some(value));
        if let Some(m) = mode {
            svc["metadata"]["annotations"]["topologyMode"] = json!(m);
        }
        (
            service_keys(&svc).keys().cloned(),
            service_topology(&svc).warnings,
        )
    };
    let set = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
    let (k, w) = keys(r#"["zone","*"]"#, None);
    let k = k.expect("keys");
    assert_eq!(
        (k.ordered(), k.set, k.fallback, w.len()),
        (false, set(&["zone"]), true, 0)
    );
    // `*` alone: no key, the fallback: a topology Service that serves everything.
    let k = keys(r#"["*"]"#, None).0.expect("keys");
    assert_eq!((k.set.len(), k.fallback), (0, true));
    // `*` before the end keeps its old meaning (a literal key), with a warning.
    let (k, w) = keys(r#"["*","zone"]"#, None);
    let k = k.expect("keys");
    assert_eq!(
        (k.set, k.fallback, w.len()),
        (set(&["*", "zone"]), false, 1)
    );
    // Ordered: order kept, duplicates once; default mode: a set.
    let k = keys(r#"["zone","unit","zone","*"]"#, Some("ordered"))
        .0
        .expect("keys");
    assert_eq!(
        (k.order, k.fallback),
        (vec!["zone".to_string(), "unit".to_string()], true)
    );
    assert_ne!(
        keys(r#"["zone","unit"]"#, Some("ordered")).0,
        keys(r#"["unit","zone"]"#, Some("ordered")).0
    );
    assert_eq!(
        keys(r#"["zone","unit"]"#, None).0,
        keys(r#"["unit","zone"]"#, Some("any")).0
    );
    // An unknown mode is the default one, with a warning.
    let (k, w) = keys(r#"["zone","unit"]"#, Some("first"));
    assert_eq!((k.expect("keys").ordered(), w.len()), (false, 1));
    // Without `*` and in the default mode, nothing depends on readiness.
    assert!(!keys(r#"["zone"]"#, None).0.expect("keys").dynamic());
}

/// OpenYurt's annotation keeps its own rule (§2.2): `topologyMode` does not apply to it, and it
/// has no fallback.
#[test]
fn openyurt_keeps_its_own_rule() {
    let mut svc = service("default", "s", None);
    svc["metadata"]["annotations"] = json!({
        "openyurt.io/topologyKeys": "openyurt.io/nodepool",
        "topologyMode": "ordered",
    });
    let keys = service_keys(&svc).keys().cloned().expect("OpenYurt's keys");
    assert!(!keys.dynamic(), "{keys:?}");
    assert!(service_topology(&svc).warnings.is_empty());
}

/// `["unit","*"]`: the unit's endpoint while it is ready; every endpoint once it is not, and the
/// unit again when it recovers.
#[test]
fn case_60_fallback_follows_the_units_last_ready_endpoint() {
    let f = units(r#"["unit","*"]"#, false);
    assert_eq!(served(&f, &[]), strs(&["10.0.0.1"]));
    // The unit's only endpoint fails: every endpoint, the failing one included.
    assert_eq!(
        served(&f, &[1]),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    // Another endpoint failing elsewhere does not matter while the unit has a ready one.
    assert_eq!(served(&f, &[2, 3]), strs(&["10.0.0.1"]));
    assert_eq!(served(&f, &[]), strs(&["10.0.0.1"]));
    // Strict, the same annotation without `*`: the unit's endpoint, ready or not.
    let strict = units(r#"["unit"]"#, false);
    assert_eq!(served(&strict, &[1]), strs(&["10.0.0.1"]));
}

/// `["*"]` alone serves every endpoint, ready or not.
#[test]
fn case_61_star_alone_serves_everything() {
    let f = units(r#"["*"]"#, false);
    for down in [&[][..], &[1], &[1, 2, 3]] {
        assert_eq!(
            served(&f, down),
            strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
        );
    }
}

/// Default mode with `*`: the keys together (OR), then everything.
#[test]
fn case_62_default_mode_keeps_the_or_of_the_keys() {
    let f = units(r#"["unit","zone","*"]"#, false);
    assert_eq!(served(&f, &[]), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(served(&f, &[1]), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(
        served(&f, &[1, 2]),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
}

/// Ordered mode: the first key that keeps a ready endpoint, alone; then `*`; back again.
#[test]
fn case_63_ordered_mode_takes_the_first_key_with_a_ready_endpoint() {
    let f = units(r#"["unit","zone","*"]"#, true);
    assert_eq!(served(&f, &[]), strs(&["10.0.0.1"]));
    // The unit loses its last ready endpoint: the zone (its not-ready endpoint included).
    assert_eq!(served(&f, &[1]), strs(&["10.0.0.1", "10.0.0.2"]));
    // The zone too: the fallback.
    assert_eq!(
        served(&f, &[1, 2]),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    // The unit recovers: the unit alone again.
    assert_eq!(served(&f, &[2]), strs(&["10.0.0.1"]));
}

/// Ordered mode without `*`: nothing when no key keeps a ready endpoint.
#[test]
fn case_64_ordered_mode_without_fallback_serves_nothing() {
    let f = units(r#"["unit","zone"]"#, true);
    assert_eq!(served(&f, &[1]), strs(&["10.0.0.1", "10.0.0.2"]));
    assert_eq!(served(&f, &[1, 2]), Vec::<String>::new());
    assert_eq!(served(&f, &[1, 2, 3]), Vec::<String>::new());
}

/// Slices: `conditions.ready: false` is not ready; absent or `null` is ready.
#[test]
fn case_65_slice_readiness_is_conditions_ready() {
    let f = units(r#"["unit","*"]"#, false);
    let slice = |ready: Value| {
        let mut e1 = slice_endpoint_v1("10.0.0.1", Some("n1"), None);
        e1["conditions"]["ready"] = ready;
        let e3 = slice_endpoint_v1("10.0.0.3", Some("n3"), None);
        slice_v1("default", "s-1", Some("s"), vec![e1, e3])
    };
    let kept = |s: &Value| slice_ips(&f.serve_slice_v1(s));
    assert_eq!(kept(&slice(json!(false))), strs(&["10.0.0.1", "10.0.0.3"]));
    assert_eq!(kept(&slice(json!(true))), strs(&["10.0.0.1"]));
    assert_eq!(kept(&slice(Value::Null)), strs(&["10.0.0.1"]));
}

/// A ready endpoint on a node edge-health reports abnormal is dropped anyway (§10): it does not
/// count as the unit's ready endpoint.
#[test]
fn case_66_an_abnormal_nodes_endpoint_is_not_available() {
    let mut f = units(r#"["unit","*"]"#, false);
    f.abnormal.insert("n1".to_string());
    assert_eq!(served(&f, &[]), strs(&["10.0.0.2", "10.0.0.3"]));
}

/// The explanation names the key that decided, or the fallback, and why.
#[test]
fn choice_is_described() {
    let f = units(r#"["unit","zone","*"]"#, true);
    let ann = f.annotation(&crate::k8s::ObjectKey::new("default", "s"));
    let keys = ann.as_ref().and_then(KeysAnnotation::keys).expect("keys");
    let obj = three(&[1, 2]);
    let choice = keys.choose(&endpoint_states(&obj), &f.locality());
    assert_eq!(choice.decision, ServedBy::Fallback);
    assert_eq!(
        choice.describe(),
        "unit kept 0 ready of 1; zone kept 0 ready of 1; fallback *: all 3"
    );
    let obj = three(&[1]);
    let choice = keys.choose(&endpoint_states(&obj), &f.locality());
    assert_eq!(
        choice.describe(),
        "unit kept 0 ready of 2; zone kept 1 ready of 2; served by zone"
    );
}

/// A small deterministic PRNG (xorshift), so that the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The rules of §2.3 and §2.9 written out again, endpoint by endpoint, from the raw annotation:
/// which of `eps` (node, ready) are served.
fn reference(
    value: &[&str],
    ordered: bool,
    nodes: &BTreeMap<String, LabelSet>,
    local: &str,
    abnormal: &BTreeSet<String>,
    eps: &[(Option<String>, bool)],
) -> Vec<bool> {
    let mut keys: Vec<&str> = value.to_vec();
    let fallback = keys.last() == Some(&"*");
    if fallback {
        keys.pop();
    }
    let matches = |node: &Option<String>, ks: &[&str]| -> bool {
        let (Some(l), Some(n)) = (nodes.get(local), node.as_ref().and_then(|n| nodes.get(n)))
        else {
            return false;
        };
        ks.iter()
            .any(|k| l.get(k).is_some() && l.get(k) == n.get(k))
    };
    let healthy = |node: &Option<String>| !node.as_ref().is_some_and(|n| abnormal.contains(n));
    let keeps_ready = |ks: &[&str]| {
        eps.iter()
            .any(|(n, ready)| *ready && healthy(n) && matches(n, ks))
    };
    let by = |ks: &[&str]| -> Vec<bool> {
        eps.iter()
            .map(|(n, _)| healthy(n) && matches(n, ks))
            .collect()
    };
    let all: Vec<bool> = eps.iter().map(|(n, _)| healthy(n)).collect();
    let dynamic = fallback || (ordered && !keys.is_empty());
    if !dynamic {
        return by(&keys);
    }
    if ordered && !keys.is_empty() {
        for k in &keys {
            if keeps_ready(&[k]) {
                return by(&[k]);
            }
        }
    } else if keeps_ready(&keys) {
        return by(&keys);
    }
    if fallback {
        all
    } else {
        vec![false; eps.len()]
    }
}

/// Random clusters (nodes and labels, the local node known or not, endpoints on known, unknown
/// or no nodes, readiness, abnormal nodes) and random annotations (`*` anywhere, either mode):
/// the served Endpoints and slices keep exactly what [`reference`] says.
#[test]
fn property_fallback_rules_against_a_brute_force_reference() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let key_pool = ["unit", "zone", "rack", "*"];
    for round in 0..4_000 {
        let mut nodes: BTreeMap<String, LabelSet> = BTreeMap::new();
        for i in 0..rng.below(6) {
            let mut l = Vec::new();
            for k in &key_pool[..3] {
                if rng.below(3) > 0 {
                    l.push((Arc::from(*k), Arc::from(format!("v{}", rng.below(2)))));
                }
            }
            nodes.insert(format!("n{i}"), LabelSet::from_pairs(l));
        }
        let local = format!("n{}", rng.below(6));
        let abnormal: BTreeSet<String> = (0..rng.below(2))
            .map(|_| format!("n{}", rng.below(6)))
            .collect();
        let value: Vec<&str> = (0..rng.below(4))
            .map(|_| key_pool[rng.below(4) as usize])
            .collect();
        let ordered = rng.below(2) == 0;
        let eps: Vec<(Option<String>, bool)> = (0..rng.below(6))
            .map(|_| {
                let node = match rng.below(8) {
                    0 => None,
                    n => Some(format!("n{}", n - 1)),
                };
                (node, rng.below(3) > 0)
            })
            .collect();
        let mut svc = service(
            "default",
            "s",
            Some(&serde_json::to_string(&value).unwrap()),
        );
        if ordered {
            svc["metadata"]["annotations"]["topologyMode"] = json!("ordered");
        }
        let f = Fixture {
            hostname: local.clone(),
            nodes: nodes.clone(),
            services: vec![svc],
            endpoints: Vec::new(),
            wrapper_in_cluster: false,
            abnormal: abnormal.clone(),
        };
        let want: Vec<bool> = if value.is_empty() {
            eps.iter()
                .map(|(n, _)| !n.as_ref().is_some_and(|n| abnormal.contains(n)))
                .collect()
        } else {
            reference(&value, ordered, &nodes, &local, &abnormal, &eps)
        };
        let ip = |i: usize| format!("10.1.0.{i}");
        let want_ips: Vec<String> = (0..eps.len()).filter(|i| want[*i]).map(ip).collect();
        // As Endpoints: ready ones in `addresses`, the others in `notReadyAddresses`.
        let mut obj = endpoints("default", "s", Vec::new());
        let (mut ready, mut not) = (Vec::new(), Vec::new());
        for (i, (node, r)) in eps.iter().enumerate() {
            let a = address(&ip(i), node.as_deref());
            if *r {
                ready.push(a)
            } else {
                not.push(a)
            }
        }
        obj["subsets"][0]["addresses"] = json!(ready);
        obj["subsets"][0]["notReadyAddresses"] = json!(not);
        let mut got = served_ips(&f.serve_endpoints(&obj));
        let mut sorted_want = want_ips.clone();
        sorted_want.sort();
        got.sort();
        assert_eq!(got, sorted_want, "round {round}: Endpoints, {value:?} ordered={ordered} local={local} {nodes:?} {eps:?} abnormal={abnormal:?}");
        // As one slice.
        let slice_eps: Vec<Value> = eps
            .iter()
            .enumerate()
            .map(|(i, (node, r))| {
                let mut e = slice_endpoint_v1(&ip(i), node.as_deref(), None);
                e["conditions"]["ready"] = json!(r);
                e
            })
            .collect();
        let slice = slice_v1("default", "s-1", Some("s"), slice_eps);
        assert_eq!(
            slice_ips(&f.serve_slice_v1(&slice)),
            want_ips,
            "round {round}: slice, {value:?} ordered={ordered} local={local} {nodes:?} {eps:?}"
        );
    }
}
