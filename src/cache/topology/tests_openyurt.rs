//! OpenYurt's `openyurt.io/topologyKeys`: each value, precedence over `topologyKeys`, invalid
//! values, and the pruning each value gives.

use serde_json::{json, Value};

use super::fixtures::*;
use super::openyurt::{OPENYURT_NODEPOOL_LABEL, OPENYURT_TOPOLOGY_ANNOTATION};
use super::*;

fn svc(annotations: Value) -> Value {
    let mut s = service("default", "s", None);
    s["metadata"]["annotations"] = annotations;
    s
}

fn keyset(keys: &[&str]) -> TopologyKeys {
    TopologyKeys::any(keys.iter().map(|k| k.to_string()).collect())
}

const POOL_KEYS: [&str; 2] = [OPENYURT_NODEPOOL_LABEL, HOSTNAME_LABEL];

/// (annotation value, expected keys, expected source mode, whether invalid).
type YurtCase = (
    Value,
    Option<&'static [&'static str]>,
    Option<OpenYurtTopology>,
    bool,
);

#[test]
fn each_value() {
    let table: &[YurtCase] = &[
        // (value, keys, source mode, invalid)
        (
            json!("kubernetes.io/hostname"),
            Some(&[HOSTNAME_LABEL]),
            Some(OpenYurtTopology::Node),
            false,
        ),
        (
            json!("openyurt.io/nodepool"),
            Some(&POOL_KEYS),
            Some(OpenYurtTopology::NodePool),
            false,
        ),
        (
            json!("kubernetes.io/zone"),
            Some(&POOL_KEYS),
            Some(OpenYurtTopology::Zone),
            false,
        ),
        (json!(""), None, None, false),
        (Value::Null, None, None, false),
        // OpenYurt compares the one string exactly: no list, no JSON, no trimming, no other key.
        (json!("zone"), None, None, true),
        (json!("topology.kubernetes.io/zone"), None, None, true),
        (json!(r#"["kubernetes.io/zone"]"#), None, None, true),
        (json!(" kubernetes.io/zone"), None, None, true),
        (
            json!("kubernetes.io/hostname,openyurt.io/nodepool"),
            None,
            None,
            true,
        ),
        (json!("Kubernetes.io/hostname"), None, None, true),
        (json!(["kubernetes.io/zone"]), None, None, true),
        (json!(1), None, None, true),
    ];
    for (value, keys, mode, invalid) in table {
        let s = svc(json!({ OPENYURT_TOPOLOGY_ANNOTATION: value }));
        let topo = service_topology(&s);
        assert_eq!(topo.keys.keys(), keys.map(keyset).as_ref(), "{value}");
        assert_eq!(topo.source, mode.map(KeysSource::OpenYurt), "{value}");
        assert_eq!(
            matches!(topo.keys, KeysAnnotation::Invalid(_)),
            *invalid,
            "{value}"
        );
        assert_eq!(
            topo.warnings.len(),
            usize::from(*invalid),
            "{value}: warned once"
        );
        assert_eq!(service_keys(&s), topo.keys, "{value}");
        assert_eq!(topo.shadowed, None);
    }
    let s = svc(json!({ OPENYURT_TOPOLOGY_ANNOTATION: "openyurt.io/nodepool" }));
    assert_eq!(
        service_topology(&s)
            .source
            .map(|s| s.to_string())
            .as_deref(),
        Some("openyurt.io/topologyKeys=openyurt.io/nodepool")
    );
}

#[test]
fn topology_keys_takes_precedence() {
    let yurt = "openyurt.io/nodepool";
    // Both valid: topologyKeys wins, OpenYurt's is noted for a debug line, no warning.
    let s = svc(json!({ "topologyKeys": r#"["zone"]"#, OPENYURT_TOPOLOGY_ANNOTATION: yurt }));
    let topo = service_topology(&s);
    assert_eq!(topo.keys.keys(), Some(&keyset(&["zone"])));
    assert_eq!(topo.source, Some(KeysSource::TopologyKeys));
    assert!(topo.shadowed.is_some() && topo.warnings.is_empty());
    // A valid topologyKeys also silences an invalid OpenYurt value (it is not used anyway).
    let s = svc(json!({ "topologyKeys": r#"["zone"]"#, OPENYURT_TOPOLOGY_ANNOTATION: "bogus" }));
    let topo = service_topology(&s);
    assert_eq!(topo.source, Some(KeysSource::TopologyKeys));
    assert!(topo.shadowed.is_some() && topo.warnings.is_empty());
    // topologyKeys absent, [] or null: OpenYurt's applies.
    for own in [None, Some("[]"), Some("null")] {
        let mut a = json!({ OPENYURT_TOPOLOGY_ANNOTATION: yurt });
        if let Some(v) = own {
            a["topologyKeys"] = json!(v);
        }
        let topo = service_topology(&svc(a));
        assert_eq!(topo.keys.keys(), Some(&keyset(&POOL_KEYS)), "{own:?}");
        assert!(topo.warnings.is_empty() && topo.shadowed.is_none());
    }
    // An invalid topologyKeys counts as absent (docs/SEMANTICS.md §2.1): OpenYurt's applies,
    // with one warning.
    let s = svc(json!({ "topologyKeys": "zone", OPENYURT_TOPOLOGY_ANNOTATION: yurt }));
    let topo = service_topology(&s);
    assert_eq!(topo.keys.keys(), Some(&keyset(&POOL_KEYS)));
    assert_eq!(topo.warnings.len(), 1);
    assert!(
        topo.warnings[0].contains("topologyKeys"),
        "{:?}",
        topo.warnings
    );
    // Both invalid: no keys, two warnings, Invalid.
    let s = svc(json!({ "topologyKeys": "[1]", OPENYURT_TOPOLOGY_ANNOTATION: "rack" }));
    let topo = service_topology(&s);
    assert!(matches!(topo.keys, KeysAnnotation::Invalid(_)));
    assert_eq!(topo.warnings.len(), 2);
    // The own-annotation parser ignores OpenYurt's.
    assert_eq!(
        topology_keys_annotation(&s),
        service_keys(&svc(json!({ "topologyKeys": "[1]" })))
    );
}

/// `h` (local) and n1 in pool p1, n2 in p2, n3 in no pool; each carries its hostname label.
fn pool_fixture(value: &str) -> Fixture {
    let mut f = fixture_f();
    let node = |name: &str, pool: Option<&str>| {
        let mut pairs = vec![(HOSTNAME_LABEL, name), ("zone", "a")];
        pairs.extend(pool.map(|p| (OPENYURT_NODEPOOL_LABEL, p)));
        let l = labels(&pairs);
        (name.to_string(), l)
    };
    f.nodes = [
        node("h", Some("p1")),
        node("n1", Some("p1")),
        node("n2", Some("p2")),
        node("n3", None),
    ]
    .into_iter()
    .collect();
    f.set_keys("default", "s", None);
    f.service_mut("default", "s")["metadata"]["annotations"][OPENYURT_TOPOLOGY_ANNOTATION] =
        json!(value);
    f
}

#[test]
fn pruning_by_each_value() {
    // Endpoints: 10.0.0.1@h, .2@n1, .3@n2, .4@n3, .5 (no node), .6@ghost.
    let f = pool_fixture("kubernetes.io/hostname");
    assert_eq!(ips(&f.served("default", "s")), strs(&["10.0.0.1"]));
    for value in ["openyurt.io/nodepool", "kubernetes.io/zone"] {
        let mut f = pool_fixture(value);
        assert_eq!(
            ips(&f.served("default", "s")),
            strs(&["10.0.0.1", "10.0.0.2"]),
            "{value}"
        );
        // The local node in no pool: OpenYurt falls back to the node itself.
        f.nodes
            .insert("h".into(), labels(&[(HOSTNAME_LABEL, "h"), ("zone", "a")]));
        assert_eq!(
            ips(&f.served("default", "s")),
            strs(&["10.0.0.1"]),
            "{value}"
        );
        // Unknown local node: nothing (fail-closed, as every topology Service).
        f.nodes.remove("h");
        assert!(ips(&f.served("default", "s")).is_empty(), "{value}");
    }
    // An invalid value: a normal Service.
    let f = pool_fixture("rack");
    assert_eq!(ips(&f.served("default", "s")).len(), 6);
    // Both annotations: topologyKeys ["zone"] wins (every node here is in zone a).
    let mut f = pool_fixture("kubernetes.io/hostname");
    f.service_mut("default", "s")["metadata"]["annotations"]["topologyKeys"] = json!(r#"["zone"]"#);
    assert_eq!(
        ips(&f.served("default", "s")),
        strs(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"])
    );
}
