//! The topology filter + event log fed arbitrary sequences of node / Service / Endpoints /
//! EndpointSlice changes and edge-health maps. Invariants: RVs strictly increase along each event
//! log; the incrementally maintained view equals a from-scratch rebuild of the same upstream
//! objects and map, and equals the view restored from its own snapshot (encoded and decoded);
//! the relay view (`--relay-bind-address`) holds exactly the upstream objects, unpruned, with
//! RVs that strictly increase along each of its logs.
#![no_main]
use std::collections::BTreeMap;

use grid_wrapper::cache::snapshot::{self, Identity, Meta, Snapshot};
use grid_wrapper::cache::store::{Settings, State};
use grid_wrapper::cache::collection::{Collection, Retention};
use grid_wrapper::k8s::Resource;
use grid_wrapper::handoff::edge_health::EdgeHealthMap;
use grid_wrapper::handoff::Change;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const NODES: [&str; 5] = ["h", "n1", "n2", "n3", "n4"];
const SVCS: [&str; 3] = ["s", "t", "kubernetes"];
const ZONES: [&str; 3] = ["a", "b", ""];
const KEYS: [Option<&str>; 8] = [None, Some("[\"zone\"]"), Some("[]"), Some("zone"), Some("[\"zone\",\"rack\"]"), Some("[\"*\"]"), Some("[\"zone\",\"*\"]"), Some("[\"rack\",\"zone\",\"*\"]")];
const KINDS: [Resource; 4] = [Resource::Nodes, Resource::Services, Resource::Endpoints, Resource::SlicesV1];

fn settings() -> Settings {
    Settings { hostname: "h".into(), wrapper_in_cluster: true, retention: Retention::for_queue(4) }
}

fn node(i: u8, z: u8) -> Value {
    let mut labels = json!({});
    if z % 4 != 3 {
        labels["zone"] = json!(ZONES[usize::from(z % 4) % 3]);
    }
    if z & 4 != 0 {
        labels["rack"] = json!("r1");
    }
    json!({"kind":"Node","apiVersion":"v1","metadata":{"name":NODES[usize::from(i) % 5],"labels":labels},"status":{"n":z}})
}

fn service(i: u8, k: u8) -> Value {
    let mut s = json!({"kind":"Service","apiVersion":"v1","metadata":{"namespace":"default","name":SVCS[usize::from(i) % 3]},"spec":{"clusterIP":"10.0.0.1"}});
    if let Some(keys) = KEYS[usize::from(k) % KEYS.len()] {
        s["metadata"]["annotations"] = json!({"topologyKeys": keys});
        if k & 0x80 != 0 {
            s["metadata"]["annotations"]["topologyMode"] = json!("ordered");
        }
    }
    s
}

fn endpoints(i: u8, mask: u8) -> Value {
    let addrs: Vec<Value> = (0..6u8)
        .filter(|b| mask & (1 << b) != 0)
        .map(|b| match NODES.get(usize::from(b)) {
            Some(n) => json!({"ip": format!("10.1.0.{b}"), "nodeName": n}),
            None => json!({"ip": format!("10.1.0.{b}")}),
        })
        .collect();
    let mut e = json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"namespace":"default","name":SVCS[usize::from(i) % 3]},
        "subsets":[{"addresses":addrs,"ports":[{"port":80}]}]});
    if mask & 0x80 != 0 {
        e["metadata"]["annotations"] = json!({"superedge.io/local-endpoint":"169.254.20.11","superedge.io/local-port":"51003"});
    }
    e
}

fn slice(i: u8, mask: u8) -> Value {
    let eps: Vec<Value> = (0..6u8)
        .filter(|b| mask & (1 << b) != 0)
        .map(|b| {
            let mut e = json!({"addresses":[format!("10.2.{i}.{b}")],"zone":"a","hints":{"forZones":[{"name":"a"}]}});
            if let Some(n) = NODES.get(usize::from(b)) {
                e["nodeName"] = json!(n);
            }
            // The local node's endpoint not ready: the fallback and the ordered mode switch.
            if b == 0 && mask & 0x80 != 0 {
                e["conditions"] = json!({"ready": false});
            }
            e
        })
        .collect();
    let mut labels = json!({});
    if mask & 0x40 == 0 {
        labels["kubernetes.io/service-name"] = json!(SVCS[usize::from(i) % 3]);
    }
    json!({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","addressType":"IPv4",
        "metadata":{"namespace":"default","name":format!("sl-{}", i % 4),"labels":labels},"endpoints":eps})
}

fn key(v: &Value) -> String {
    format!("{}/{}", v["metadata"]["namespace"].as_str().unwrap_or(""), v["metadata"]["name"].as_str().unwrap_or(""))
}

/// A collection's objects, their RVs left out.
fn stripped(c: &Collection) -> BTreeMap<String, Value> {
    c.objects()
        .map(|o| {
            let mut v: Value = serde_json::from_slice(&o.json()).unwrap_or_default();
            v["metadata"]["resourceVersion"] = Value::Null;
            (o.key.to_string(), v)
        })
        .collect()
}

/// RVs strictly increase along a collection's log.
fn assert_rvs_increase(c: &Collection) {
    let entries = c.after(c.horizon(), usize::MAX).expect("the horizon is always replayable");
    for w in entries.windows(2) {
        assert!(w[0].rv < w[1].rv);
    }
}

fn content(st: &State, res: Resource) -> BTreeMap<String, Value> {
    stripped(&st.collection(res))
}

fuzz_target!(|data: &[u8]| {
    let mut st = State::new(settings(), 10);
    st.keep_relay_view();
    let mut model: BTreeMap<usize, BTreeMap<String, Value>> = BTreeMap::new();
    for (i, kind) in KINDS.iter().enumerate() {
        st.apply_list(*kind, std::iter::empty::<&str>(), 0);
        model.insert(i, BTreeMap::new());
    }
    let mut last_rv = st.current_rv();
    let mut health = EdgeHealthMap::new();
    for (step, op) in data.chunks_exact(3).enumerate().take(200) {
        if op[0] % 10 == 9 {
            // An edge-health map: bit b of op[1] lists node b, bit b of op[2] says abnormal.
            health = NODES
                .iter()
                .enumerate()
                .filter(|(b, _)| op[1] & (1 << b) != 0)
                .map(|(b, n)| (n.to_string(), op[2] & (1 << b) == 0))
                .collect();
            st.set_edge_health(health.clone(), step as u64);
            assert!(st.current_rv() >= last_rv);
            last_rv = st.current_rv();
            continue;
        }
        let (kind_i, obj, upsert) = match op[0] % 10 {
            0 => (0, node(op[1], op[2]), true),
            1 => (0, node(op[1], 0), false),
            2 => (1, service(op[1], op[2]), true),
            3 => (1, service(op[1], 0), false),
            4 => (2, endpoints(op[1], op[2]), true),
            5 => (2, endpoints(op[1], 0), false),
            6 => (3, slice(op[1], op[2]), true),
            7 => (3, slice(op[1], 0), false),
            _ => {
                // A relist of one kind with the model's objects (nothing changed: no events).
                let k = usize::from(op[1]) % 4;
                let before = st.current_rv();
                // As reflectors hand it over: each item as JSON text, prepared as it comes.
                st.apply_list(KINDS[k], model[&k].values().map(Value::to_string), step as u64);
                assert_eq!(st.current_rv(), before, "an identical relist produced events");
                continue;
            }
        };
        let m = model.get_mut(&kind_i).expect("kinds are preset");
        // A watch event's object as a reflector hands it over: its text, prepared as it comes.
        let change = if upsert {
            m.insert(key(&obj), obj.clone());
            Change::upsert(&obj)
        } else {
            m.remove(&key(&obj));
            Change::delete(&obj)
        };
        st.apply(KINDS[kind_i], change, step as u64);
        assert!(st.current_rv() >= last_rv);
        last_rv = st.current_rv();
    }
    // RVs strictly increase along each log, and objects carry the RV of their last change.
    for res in Resource::ALL {
        assert_rvs_increase(&st.collection(res));
    }
    // The relay view: every upstream object as it came, whatever topology and edge-health did;
    // its logs' RVs strictly increase too.
    let relay = st.relay_view().expect("a relay view is kept");
    let relay = relay.read();
    for res in Resource::ALL {
        assert_rvs_increase(relay.collection(res));
    }
    for (i, kind) in KINDS.iter().enumerate() {
        let mut want = model[&i].clone();
        for v in want.values_mut() {
            v["metadata"]["resourceVersion"] = Value::Null;
        }
        // (The model names a cluster-scoped object `/name`, the cache `name`: same order.)
        let want: Vec<Value> = want.into_values().collect();
        let have: Vec<Value> = stripped(relay.collection(*kind)).into_values().collect();
        assert_eq!(have, want, "{kind:?}: the relay view is the upstream's");
    }
    drop(relay);
    // From-scratch rebuild of the same upstream objects serves the same content.
    let mut fresh = State::new(settings(), 10);
    for (i, kind) in KINDS.iter().enumerate() {
        fresh.apply_list(*kind, model[&i].values().map(Value::to_string), 0);
    }
    fresh.set_edge_health(health.clone(), 0);
    for res in Resource::ALL {
        assert_eq!(content(&st, res), content(&fresh, res), "{res:?} differs from a rebuild");
    }
    // Its own snapshot, through the file format, restores the same view.
    let snap = Snapshot {
        meta: Meta {
            identity: Identity { hostname: "h".into(), upstream: "u".into() },
            written_unix_secs: 0,
            rv: st.current_rv(),
            slice_kind: Resource::SlicesV1,
            cidr_kind: st.cidr_kind(),
        },
        objects: st.export(),
    };
    let decoded = snapshot::decode(&snapshot::encode(&snap)).expect("a snapshot decodes");
    let mut restored = State::new(settings(), st.current_rv());
    restored.expect_cidrs(decoded.meta.cidr_kind, 0);
    assert!(restored.restore(decoded.objects, decoded.meta.slice_kind, 0));
    restored.set_edge_health(health, 0);
    for res in Resource::ALL {
        assert_eq!(content(&st, res), content(&restored, res), "{res:?} differs after a restore");
    }
});
