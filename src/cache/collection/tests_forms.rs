//! The form a served object holds: its protobuf form alone once that form gives back its JSON
//! byte for byte, both forms otherwise. The cache serves JSON with sorted keys (a `Value`
//! serialized, or an upstream item made canonical): that is the JSON that compacts.

use super::*;
use serde_json::json;
use std::sync::Barrier;

/// Golden data from the real apiserver serializers (`e2e/proto-golden`): the JSON body of
/// `name`.
fn golden_json(name: &str) -> Vec<u8> {
    include_str!("../../../tests/proto/golden.tsv")
        .lines()
        .map(|line| line.splitn(4, '\t').collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&name))
        .and_then(|cols| cols.get(3).map(|json| json.as_bytes().to_vec()))
        .unwrap_or_else(|| panic!("no golden {name}"))
}

/// `value` stamped with `rv`, as the cache serves it (keys sorted), after a round trip
/// through its protobuf form (so that it holds what the apiserver would write: its defaults
/// and empty fields as Go writes them).
fn canonical(res: Resource, mut value: Value, rv: u64) -> Vec<u8> {
    stamp_rv(&mut value, rv);
    let sorted = serde_json::to_vec(&value).expect("JSON");
    let pb = crate::proto::encode_json(res, &sorted);
    assert!(pb.unknown.is_empty(), "{:?}", pb.unknown);
    decode_framed(res, &pb.bytes).expect("decodes")
}

/// `json` in Go's field order, as the apiserver writes it.
fn go_ordered(res: Resource, json: &[u8]) -> Vec<u8> {
    let pb = crate::proto::encode_json(res, json);
    let msg = unframe(&pb.bytes).expect("framed");
    let type_meta = TypeMeta {
        api_version: res.api_version(),
        kind: res.kind(),
    };
    decode_object(res, msg, Some(type_meta))
        .expect("decodes")
        .json
}

fn slice(rv: u64, ip: &str) -> Vec<u8> {
    canonical(
        Resource::SlicesV1,
        json!({
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": "web-abc", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true},
                           "nodeName": "n1", "zone": "z1",
                           "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-a",
                                         "uid": "p-1"}}],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]
        }),
        rv,
    )
}

fn endpoints(rv: u64) -> Vec<u8> {
    canonical(
        Resource::Endpoints,
        json!({
            "kind": "Endpoints", "apiVersion": "v1",
            "metadata": {"name": "web", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": "10.1.0.1", "nodeName": "n1"}],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
        }),
        rv,
    )
}

fn served(rv: u64, json: &[u8]) -> Served {
    Served::from_parts(
        ObjectKey::new("default", "web"),
        rv,
        json.to_vec(),
        LabelSet::default(),
    )
}

fn service(rv: u64) -> Vec<u8> {
    canonical(
        Resource::Services,
        json!({
            "kind": "Service", "apiVersion": "v1",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                         "labels": {"app": "web"}},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80,
                                "targetPort": 8080}],
                     "selector": {"app": "web"}, "clusterIP": "10.0.0.10",
                     "clusterIPs": ["10.0.0.10"], "type": "ClusterIP",
                     "sessionAffinity": "None", "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}}
        }),
        rv,
    )
}

/// Objects as the cache serves them: the apiserver's own Node JSON (golden) with its keys
/// sorted, and a Service, a slice and an Endpoints.
fn served_objects() -> Vec<(Resource, u64, Vec<u8>)> {
    let node = crate::cache::canonical::tree::sorted(&golden_json("node")).expect("JSON");
    vec![
        (Resource::Services, 40, service(40)),
        (Resource::Nodes, 7, node),
        (Resource::SlicesV1, 41, slice(41, "10.1.0.1")),
        (Resource::Endpoints, 42, endpoints(42)),
    ]
}

#[test]
fn a_served_object_keeps_only_its_protobuf_form() {
    for (res, rv, json) in served_objects() {
        let s = served(rv, &json);
        assert_eq!(s.form(), Form::Json, "{res:?}: JSON until a protobuf read");
        let want = crate::proto::encode_json(res, &json).bytes;
        let first = s.protobuf(res);
        assert_eq!(first[..], want[..], "{res:?}");
        assert_eq!(s.form(), Form::Protobuf, "{res:?}: compacted");
        assert_eq!(
            String::from_utf8_lossy(&s.json()),
            String::from_utf8_lossy(&json),
            "{res:?}: the same JSON, decoded"
        );
        assert_eq!(s.json_len(), json.len(), "{res:?}");
        let again = s.protobuf(res);
        assert!(Arc::ptr_eq(&first, &again), "{res:?}: the one form, shared");
    }
}

#[test]
fn json_the_protobuf_form_does_not_give_back_is_kept_with_it() {
    // Go's field order (the protobuf form gives back sorted keys).
    let sorted = slice(41, "10.1.0.1");
    let go = go_ordered(Resource::SlicesV1, &sorted);
    assert_ne!(go, sorted);
    // A field the schema does not know (a newer apiserver's): left out of the protobuf form.
    let text = String::from_utf8(sorted.clone()).expect("UTF-8");
    let unknown = text.replacen(
        "\"addressType\":",
        "\"aNewField\":\"x\",\"addressType\":",
        1,
    );
    // The apiserver's JSON of a Service with invalid UTF-8 (`\ufffd` escapes, which the
    // protobuf form gives back as the character itself).
    let cases = [
        (Resource::SlicesV1, 41, go),
        (Resource::SlicesV1, 41, unknown.into_bytes()),
        (Resource::Services, 12345, golden_json("service-full")),
    ];
    for (res, rv, json) in cases {
        let s = served(rv, &json);
        let kept = s.json();
        let pb = s.protobuf(res);
        assert_eq!(s.form(), Form::Json, "{res:?}");
        assert!(Arc::ptr_eq(&kept, &s.json()), "the JSON kept, not decoded");
        assert_eq!(pb[..], crate::proto::encode_json(res, &json).bytes[..]);
        assert!(Arc::ptr_eq(&pb, &s.protobuf(res)), "shared");
    }
    // Another resource's message does not give back this JSON either.
    let s = served(41, &sorted);
    let _ = s.protobuf(Resource::SlicesV1beta1);
    assert_eq!(s.form(), Form::Json);
}

#[test]
fn concurrent_first_reads_share_one_form() {
    let json = slice(41, "10.1.0.1");
    let s = Arc::new(served(41, &json));
    let barrier = Arc::new(Barrier::new(8));
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let (s, barrier) = (Arc::clone(&s), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                if i % 2 == 0 {
                    (Some(s.protobuf(Resource::SlicesV1)), s.json())
                } else {
                    let json = s.json();
                    (None, json)
                }
            })
        })
        .collect();
    let reads: Vec<_> = readers
        .into_iter()
        .map(|t| t.join().expect("reader"))
        .collect();
    let pbs: Vec<_> = reads.iter().filter_map(|(pb, _)| pb.clone()).collect();
    assert!(
        pbs.iter().all(|pb| Arc::ptr_eq(pb, &pbs[0])),
        "encoded once"
    );
    assert!(reads.iter().all(|(_, j)| j[..] == json[..]));
    assert_eq!(s.form(), Form::Protobuf);
}

#[test]
fn a_compacted_object_compares_exactly() {
    let json = slice(41, "10.1.0.1");
    let s = served(41, &json);
    let _ = s.protobuf(Resource::SlicesV1);
    assert_eq!(s.form(), Form::Protobuf);
    // The same content at another RV; the same length with another address; another length.
    assert!(s.same_but_rv(&slice(57, "10.1.0.1"), 57));
    assert!(!s.same_but_rv(&slice(57, "10.1.0.2"), 57));
    assert!(!s.same_but_rv(&slice(57, "10.1.0.22"), 57));
    assert!(!s.same_but_rv(&slice(57, "10.1.0.1"), 58), "no stamp of 58");
    // As the upstream's bytes: this JSON without the stamp of its RV.
    let stamp = rv_stamp(41);
    let text = String::from_utf8(json).expect("UTF-8");
    let raw = text
        .replacen(&format!("{stamp},"), "", 1)
        .replacen(&format!(",{stamp}"), "", 1);
    assert_ne!(raw, text);
    assert!(s.unstamped_eq(raw.as_bytes()));
    assert!(!s.unstamped_eq(raw.replace("10.1.0.1", "10.1.0.2").as_bytes()));
    assert!(!s.unstamped_eq(text.as_bytes()), "still stamped");
}

#[test]
fn a_compacted_object_restamped_for_its_deletion() {
    let s = served(41, &slice(41, "10.1.0.1"));
    let _ = s.protobuf(Resource::SlicesV1);
    assert_eq!(s.form(), Form::Protobuf);
    let gone = s.restamped(60);
    assert_eq!(gone.rv, 60);
    // The content of its JSON, restamped (as a `Value`, as before it was compacted).
    let want = slice(60, "10.1.0.1");
    let value = |b: &[u8]| serde_json::from_slice::<Value>(b).expect("JSON");
    assert_eq!(value(&gone.json()), value(&want));
    assert_eq!(
        gone.protobuf(Resource::SlicesV1)[..],
        crate::proto::encode_json(Resource::SlicesV1, &want).bytes[..]
    );
}
