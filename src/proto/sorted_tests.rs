//! [`decode_object_sorted`] against what it replaces, Go's JSON made the cache's form by
//! `cache::canonical::tree::sorted`, byte for byte (and against serializing a
//! `serde_json::Value` of Go's JSON, what that form is defined as).

use crate::k8s::Resource;
use crate::proto::decode::{
    decode_object, decode_object_kept, decode_object_sorted, DecodeError, TypeMeta,
};
use crate::proto::encode::encode_object;
use crate::proto::envelope::{decode_list, unwrap_body};
use crate::proto::wire::{put_bytes, put_varint_field};
use serde_json::{json, Value};

/// Golden data from the real apiserver serializers (`e2e/proto-golden`).
const GOLDEN: &str = include_str!("../../tests/proto/golden.tsv");

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn type_meta(res: Resource) -> TypeMeta<'static> {
    TypeMeta {
        api_version: res.api_version(),
        kind: res.kind(),
    }
}

/// What the cache made of `msg` before: Go's JSON, sorted; `None` when either step fails.
fn old(res: Resource, msg: &[u8], tm: Option<TypeMeta<'_>>) -> Option<Vec<u8>> {
    let go = decode_object(res, msg, tm).ok()?;
    crate::cache::canonical::tree::sorted(&go.json)
}

/// The new bytes of `msg` when they are written (not left to the old way), after checking them
/// against the old ones: the same bytes when written; when refused with anything but
/// `NotSorted`, the old way fails too; `NotSorted` only for what the old way decodes or
/// refuses alike.
fn check(res: Resource, msg: &[u8], tm: Option<TypeMeta<'_>>) -> Result<String, DecodeError> {
    let want = old(res, msg, tm);
    match decode_object_sorted(res, msg, tm) {
        Ok(got) => {
            let got = String::from_utf8(got.json).expect("UTF-8");
            let want = want.map(|w| String::from_utf8(w).expect("UTF-8"));
            assert_eq!(Some(&got), want.as_ref(), "{res:?}");
            // What the cache's form is: a `Value` of Go's JSON, serialized.
            let go = decode_object(res, msg, tm).expect("decodes").json;
            let value: Value = serde_json::from_slice(&go).expect("JSON");
            assert_eq!(got, value.to_string(), "{res:?}");
            Ok(got)
        }
        Err(e @ DecodeError::NotSorted(_)) => Err(e),
        Err(e) => {
            assert_eq!(want, None, "{res:?}: {e}");
            Err(e)
        }
    }
}

fn resource_of(api_version: &str, kind: &str) -> Resource {
    Resource::ALL
        .into_iter()
        .find(|r| r.api_version() == api_version && (r.kind() == kind || r.list_kind() == kind))
        .unwrap_or_else(|| panic!("no resource for {api_version} {kind}"))
}

/// The golden objects and list items: each resource's message, with and without its TypeMeta.
fn golden_messages() -> Vec<(Resource, Vec<u8>)> {
    let mut out = Vec::new();
    for line in GOLDEN.lines() {
        let cols: Vec<&str> = line.splitn(4, '\t').collect();
        if cols[0].starts_with("frame-") || cols[1] == "Status" {
            continue;
        }
        let proto = unhex(cols[2]);
        let body = unwrap_body(&proto).unwrap();
        let res = resource_of(body.api_version, body.kind);
        if cols[0].starts_with("list-") {
            for item in decode_list(body.raw).unwrap().items {
                out.push((res, item.to_vec()));
            }
        } else {
            out.push((res, body.raw.to_vec()));
        }
    }
    out
}

#[test]
fn golden_objects_and_list_items_are_the_old_bytes() {
    let messages = golden_messages();
    assert_eq!(messages.len(), 12);
    let mut with_managed_fields = 0;
    for (res, msg) in messages {
        for tm in [Some(type_meta(res)), None] {
            match check(res, &msg, tm) {
                Ok(got) => assert!(got.starts_with('{') && got.len() > 20, "{got}"),
                // `metadata.managedFields` (which the cache drops): as the cache holds the
                // object, without them, it is written.
                Err(DecodeError::NotSorted("a FieldsV1")) => {
                    with_managed_fields += 1;
                    let kept = decode_object_kept(res, &msg, tm).unwrap();
                    let served = crate::proto::encode_json(res, &kept.json);
                    let len_bytes = served.bytes[1..]
                        .iter()
                        .take_while(|&&b| b & 0x80 != 0)
                        .count()
                        + 1;
                    let got = check(res, &served.bytes[1 + len_bytes..], tm).expect("written");
                    assert!(got.contains("\"uid\":"), "{got}");
                }
                Err(e) => panic!("{res:?}: {e}"),
            }
        }
    }
    assert_eq!(with_managed_fields, 2);
}

#[test]
fn golden_objects_cut_or_with_a_byte_changed_agree_with_the_old_way() {
    // Every strict prefix and every byte set to a few values: the same bytes, or both refuse
    // (invalid UTF-8, control characters, repeated and reordered fields, garbage).
    let mut written = 0;
    for (res, msg) in golden_messages() {
        let tm = Some(type_meta(res));
        for cut in 0..msg.len() {
            written += usize::from(check(res, &msg[..cut], tm).is_ok());
        }
        for at in 0..msg.len() {
            for b in [0x00, 0x01, b'"', b'<', b'\\', 0x7f, 0x80, 0xe2, 0xff] {
                let mut changed = msg.clone();
                changed[at] = b;
                written += usize::from(check(res, &changed, tm).is_ok());
            }
        }
    }
    assert!(written > 1000, "{written}");
}

/// `value` encoded as `res`'s message.
fn message(res: Resource, value: &Value) -> Vec<u8> {
    let enc = encode_object(res, value);
    assert!(enc.unknown.is_empty(), "{:?}", enc.unknown);
    let len_bytes = enc.bytes[1..]
        .iter()
        .take_while(|&&b| b & 0x80 != 0)
        .count()
        + 1;
    enc.bytes[1 + len_bytes..].to_vec()
}

#[test]
fn real_shaped_objects_are_the_old_bytes() {
    let objects = [
        (
            Resource::SlicesV1,
            json!({"metadata": {"name": "svc-00001-s0", "generateName": "svc-00001-",
                "namespace": "default", "uid": "0f6a2b1c-0001-4e5d-9a8b-0242ac120002",
                "resourceVersion": "1001", "generation": 3,
                "creationTimestamp": "2026-11-30T10:00:00Z",
                "labels": {"kubernetes.io/service-name": "svc-00001",
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                "annotations": {"endpoints.kubernetes.io/last-change-trigger-time":
                    "2026-11-30T10:00:00Z"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "svc-00001",
                    "uid": "0f6a2b1c-0001-4e5d-9a8b-0242ac120003", "controller": true,
                    "blockOwnerDeletion": true}]},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "p-0",
                        "uid": "6a1f0c2e"},
                    "nodeName": "node-00001", "zone": "zone-1",
                    "hints": {"forZones": [{"name": "zone-1"}], "forNodes": [{"name": "n"}]}},
                    {"addresses": ["10.0.0.2", "10.0.0.3"], "conditions": {}}],
                "ports": [{"name": "http", "protocol": "TCP", "port": 80, "appProtocol": "h2c"},
                    {"port": 0}]}),
        ),
        (
            Resource::Services,
            json!({"metadata": {"name": "s", "namespace": "d", "uid": "u-1",
                    "resourceVersion": "7", "deletionTimestamp": "2026-11-30T10:00:00Z",
                    "deletionGracePeriodSeconds": 30, "finalizers": ["a", "b"],
                    "annotations": {"topologyKeys": "[\"zone\"]", "x": "<&>"}},
                "spec": {"ports": [{"port": 443, "targetPort": "https", "protocol": "TCP"},
                        {"name": "m", "port": 80, "targetPort": 8080, "nodePort": 30080}],
                    "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "type": "NodePort",
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                    "internalTrafficPolicy": "Cluster", "selector": {"app": "a", "tier": "b"},
                    "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000,
                    "sessionAffinity": "ClientIP",
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP",
                    "ports": [{"port": 80, "protocol": "TCP", "error": "e"}]}]},
                    "conditions": [{"type": "T", "status": "True", "observedGeneration": 2,
                        "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "r",
                        "message": "m"}]}}),
        ),
        (
            Resource::Nodes,
            json!({"metadata": {"name": "n", "creationTimestamp": "2024-01-02T03:04:05Z",
                    "labels": {"zone": "z", "kubernetes.io/hostname": "n"}},
                "spec": {"podCIDR": "10.1.0.0/24", "podCIDRs": ["10.1.0.0/24"],
                    "providerID": "p", "unschedulable": true,
                    "taints": [{"key": "k", "effect": "NoSchedule",
                        "timeAdded": "2024-01-02T03:04:05Z"}]},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "allocatable": {"cpu": "3900m", "ephemeral-storage": "1e3"},
                    "phase": "Running",
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                        {"type": "Hostname", "address": "n"}],
                    "conditions": [{"type": "Ready", "status": "True",
                        "lastHeartbeatTime": "2024-01-02T03:04:05Z",
                        "lastTransitionTime": "1969-12-31T23:59:59Z",
                        "reason": "KubeletReady", "message": "kubelet is posting \"ready\""}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {"kubeletVersion": "v1.33.0", "machineID": "m"},
                    "images": [{"names": ["a:1", "a@sha256:00"], "sizeBytes": 123}],
                    "volumesInUse": ["v"], "declaredFeatures": ["f"]}}),
        ),
        (
            Resource::Endpoints,
            json!({"metadata": {"name": "e"}, "subsets": [{
                "addresses": [{"ip": "10.0.0.1", "nodeName": "n", "hostname": "h",
                    "targetRef": {"kind": "Pod", "name": "p", "namespace": "d"}}],
                "notReadyAddresses": [{"ip": "10.0.0.2"}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
        ),
        (
            Resource::SlicesV1beta1,
            json!({"metadata": {"name": "s-abc", "namespace": "d"}, "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false},
                    "topology": {"kubernetes.io/hostname": "n", "a": "b"}}],
                "ports": [{"port": 80}]}),
        ),
        (
            Resource::CidrsV1,
            json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.0.0.0/16"]},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "r",
                    "message": "m"}]}}),
        ),
        (Resource::CidrsV1beta1, json!({"metadata": {"name": "k"}})),
    ];
    for (res, value) in objects {
        let msg = message(res, &value);
        for tm in [Some(type_meta(res)), None] {
            check(res, &msg, tm).expect("written");
        }
    }
}

#[test]
fn keys_are_sorted_with_the_type_meta_among_them() {
    // An EndpointSlice's `addressType` comes before `apiVersion`, `endpoints` before `kind`.
    let res = Resource::SlicesV1;
    let msg = message(
        res,
        &json!({"metadata": {"name": "e"}, "addressType": "IPv4"}),
    );
    assert_eq!(
        check(res, &msg, Some(type_meta(res))).unwrap(),
        r#"{"addressType":"IPv4","apiVersion":"discovery.k8s.io/v1","endpoints":null,"kind":"EndpointSlice","metadata":{"name":"e"},"ports":null}"#
    );
    // A message with nothing in it: Go's zero values, sorted.
    assert_eq!(
        check(Resource::Services, &[], None).unwrap(),
        r#"{"metadata":{},"spec":{},"status":{"loadBalancer":{}}}"#
    );
    assert_eq!(
        check(
            Resource::Endpoints,
            &[],
            Some(type_meta(Resource::Endpoints))
        )
        .unwrap(),
        r#"{"apiVersion":"v1","kind":"Endpoints","metadata":{}}"#
    );
}

#[test]
fn strings_are_escaped_as_serde_json_escapes_them() {
    // Go escapes `<>&`, U+2028 and U+2029, writes invalid UTF-8 as `\ufffd`, a byte each;
    // serde_json writes them as they are (U+FFFD itself), escapes only `"`, `\` and control
    // characters.
    let name = b"a<b>&\"\\\x08\x0c\n\r\t\x01\x1f\x7f \xe2\x80\xa8\xe2\x80\xa9 \xc3\xa9 \xff \xe2\x82 \xed\xa0\x80 /";
    let mut meta = Vec::new();
    put_bytes(&mut meta, 1, name);
    let mut msg = Vec::new();
    put_bytes(&mut msg, 1, &meta);
    let got = check(Resource::Endpoints, &msg, None).unwrap();
    assert_eq!(
        got,
        "{\"metadata\":{\"name\":\"a<b>&\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \u{2028}\u{2029} é \u{fffd} \u{fffd}\u{fffd} \u{fffd}\u{fffd}\u{fffd} /\"}}"
    );
    // The same in a map's value, a list's element, an IntOrString and a Quantity.
    let mut meta = Vec::new();
    put_nested_entry(&mut meta, 12, b"k", name);
    put_bytes(&mut meta, 14, name);
    let mut port = Vec::new();
    put_bytes(
        &mut port,
        4,
        &[&[0x08, 0x01, 0x1a, name.len() as u8][..], name].concat(),
    );
    let mut spec = Vec::new();
    put_bytes(&mut spec, 1, &port);
    let mut svc = Vec::new();
    put_bytes(&mut svc, 1, &meta);
    put_bytes(&mut svc, 2, &spec);
    check(
        Resource::Services,
        &svc,
        Some(type_meta(Resource::Services)),
    )
    .unwrap();
    let mut status = Vec::new();
    put_nested_entry(
        &mut status,
        1,
        b"cpu",
        &[&[0x0a, name.len() as u8][..], name].concat(),
    );
    let mut node = Vec::new();
    put_bytes(&mut node, 3, &status);
    let got = check(Resource::Nodes, &node, None).unwrap();
    assert!(got.contains(r#""capacity":{"cpu":"a<b>&\""#), "{got}");
}

/// A map entry {key=1, value=2} as field `number`.
fn put_nested_entry(buf: &mut Vec<u8>, number: u32, key: &[u8], value: &[u8]) {
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, key);
    put_bytes(&mut entry, 2, value);
    put_bytes(buf, number, &entry);
}

#[test]
fn maps_are_sorted_and_a_repeated_key_keeps_its_last_value() {
    let mut meta = Vec::new();
    for (k, v) in [
        ("b", "1"),
        ("a", "2"),
        ("b", "3"),
        ("", "e"),
        ("a\u{e9}", "4"),
    ] {
        put_nested_entry(&mut meta, 11, k.as_bytes(), v.as_bytes());
    }
    put_nested_entry(&mut meta, 12, b"z", b"1");
    put_nested_entry(&mut meta, 12, b"z", b"2");
    put_nested_entry(&mut meta, 12, b"<", b"3");
    let mut msg = Vec::new();
    put_bytes(&mut msg, 1, &meta);
    assert_eq!(
        check(Resource::Endpoints, &msg, None).unwrap(),
        "{\"metadata\":{\"annotations\":{\"<\":\"3\",\"z\":\"2\"},\"labels\":{\"\":\"e\",\"a\":\"2\",\"a\u{e9}\":\"4\",\"b\":\"3\"}}}"
    );
    // A key that is not UTF-8 (serde_json sorts it as U+FFFD), or serde_json's RawValue token,
    // is left to the old way.
    for key in [&b"\xff"[..], b"$serde_json::private::RawValue"] {
        let mut meta = Vec::new();
        put_nested_entry(&mut meta, 11, key, b"v");
        let mut msg = Vec::new();
        put_bytes(&mut msg, 1, &meta);
        assert!(matches!(
            check(Resource::Endpoints, &msg, None),
            Err(DecodeError::NotSorted(_))
        ));
    }
}

#[test]
fn times_and_int_or_string() {
    let mut meta = Vec::new();
    put_bytes(&mut meta, 1, b"s");
    put_bytes(&mut meta, 8, &[0x08, 0x00]); // creationTimestamp: the epoch
    put_bytes(&mut meta, 9, &[]); // deletionTimestamp: the zero time, null
    let mut port = Vec::new();
    put_bytes(&mut port, 2, b"TCP");
    put_varint_field(&mut port, 3, 80);
    put_bytes(&mut port, 4, &[0x10, 0xff, 0xff, 0xff, 0xff, 0x0f]); // targetPort: -1
    let mut spec = Vec::new();
    put_bytes(&mut spec, 1, &port);
    let mut svc = Vec::new();
    put_bytes(&mut svc, 1, &meta);
    put_bytes(&mut svc, 2, &spec);
    assert_eq!(
        check(Resource::Services, &svc, None).unwrap(),
        r#"{"metadata":{"creationTimestamp":"1970-01-01T00:00:00Z","deletionTimestamp":null,"name":"s"},"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":-1}]},"status":{"loadBalancer":{}}}"#
    );
}

#[test]
fn fields_v1_is_left_to_the_old_way() {
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, b"m");
    put_bytes(
        &mut entry,
        7,
        &[
            0x0a, 0x09, b'{', b'"', b'b', b'"', b':', b'{', b'}', b' ', b'}',
        ],
    );
    let mut meta = Vec::new();
    put_bytes(&mut meta, 17, &entry);
    let mut msg = Vec::new();
    put_bytes(&mut msg, 1, &meta);
    let res = Resource::Endpoints;
    assert!(matches!(
        check(res, &msg, None),
        Err(DecodeError::NotSorted(_))
    ));
    assert!(old(res, &msg, None).is_some());
}

#[test]
fn every_message_reached_has_its_key_order() {
    use crate::proto::{schema, Kind};
    for &msg in schema::ALL {
        let order = super::key_order(msg).expect("a key order");
        let names: Vec<&str> = order
            .iter()
            .map(|&i| msg.fields[usize::from(i)].json)
            .collect();
        assert_eq!(names.len(), msg.fields.len(), "{}", msg.name);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        for field in msg.fields {
            if let Kind::Message(inner) = field.kind {
                assert!(super::key_order(inner).is_some(), "{}", inner.name);
            }
        }
    }
}
