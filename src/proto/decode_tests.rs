use super::*;
use crate::proto::encode::encode_object;
use crate::proto::envelope::{self, unwrap_body};
use serde_json::{json, Value};

/// Golden data from the real apiserver serializers (`e2e/proto-golden`): name, kind, the
/// protobuf body (hex) and the JSON body.
const GOLDEN: &str = include_str!("../../tests/proto/golden.tsv");

struct Golden {
    name: &'static str,
    proto: Vec<u8>,
    json: &'static str,
}

fn golden() -> Vec<Golden> {
    GOLDEN
        .lines()
        .map(|line| {
            let cols: Vec<&str> = line.splitn(4, '\t').collect();
            assert_eq!(cols.len(), 4, "{line}");
            let proto = (0..cols[2].len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&cols[2][i..i + 2], 16).unwrap())
                .collect();
            Golden {
                name: cols[0],
                proto,
                json: cols[3],
            }
        })
        .collect()
}

fn golden_named(name: &str) -> Golden {
    golden()
        .into_iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no golden {name}"))
}

fn resource_of(api_version: &str, kind: &str) -> Resource {
    Resource::ALL
        .into_iter()
        .find(|r| r.api_version() == api_version && (r.kind() == kind || r.list_kind() == kind))
        .unwrap_or_else(|| panic!("no resource for {api_version} {kind}"))
}

fn text(d: &Decoded) -> &str {
    std::str::from_utf8(&d.json).unwrap()
}

/// The message inside [`crate::proto::Encoded::bytes`] (after `0x12` and the varint length).
fn strip_prefix(bytes: &[u8]) -> &[u8] {
    let len_bytes = bytes[1..].iter().take_while(|&&b| b & 0x80 != 0).count() + 1;
    &bytes[1 + len_bytes..]
}

#[test]
fn golden_objects_decode_to_the_apiservers_json_byte_for_byte() {
    let mut n = 0;
    for g in golden() {
        if g.name.starts_with("frame-") || g.name.starts_with("list-") {
            continue;
        }
        let body = unwrap_body(&g.proto).unwrap();
        let got = if body.kind == "Status" {
            decode_status(body.raw, Some(body.type_meta())).unwrap()
        } else {
            let res = resource_of(body.api_version, body.kind);
            decode_object(res, body.raw, Some(body.type_meta())).unwrap()
        };
        assert_eq!(text(&got), g.json, "{}", g.name);
        assert!(got.unknown.is_empty(), "{}: {:?}", g.name, got.unknown);
        n += 1;
    }
    assert_eq!(n, 11);
}

#[test]
fn golden_json_encodes_and_decodes_back_byte_for_byte() {
    // JSON (the apiserver's) -> grid-wrapper's encoder -> decoder: the same bytes. The
    // encoder's bytes are the apiserver's too, but in service-full: its FieldsV1 Go keeps as
    // sent (with spaces), the encoder writes compact; its invalid UTF-8 became U+FFFD in the
    // JSON, which is written as itself, not as `\ufffd` (the same JSON value).
    for g in golden() {
        if g.name.starts_with("frame-") || g.name.starts_with("list-") || g.name == "status" {
            continue;
        }
        let body = unwrap_body(&g.proto).unwrap();
        let res = resource_of(body.api_version, body.kind);
        let value: Value = serde_json::from_str(g.json).unwrap();
        let enc = encode_object(res, &value);
        assert!(enc.unknown.is_empty(), "{}: {:?}", g.name, enc.unknown);
        if g.name != "service-full" {
            assert_eq!(strip_prefix(&enc.bytes), body.raw, "{}", g.name);
        }
        let got = decode_object(res, strip_prefix(&enc.bytes), Some(body.type_meta())).unwrap();
        if g.name == "service-full" {
            let got: Value = serde_json::from_slice(&got.json).unwrap();
            assert_eq!(got, value);
        } else {
            assert_eq!(text(&got), g.json, "{}", g.name);
        }
    }
}

#[test]
fn list_items_have_no_type_meta() {
    let g = golden_named("list-slices");
    let body = unwrap_body(&g.proto).unwrap();
    assert_eq!(
        (body.api_version, body.kind),
        ("discovery.k8s.io/v1", "EndpointSliceList")
    );
    let list = envelope::decode_list(body.raw).unwrap();
    assert_eq!(list.resource_version, "555");
    assert_eq!(list.continue_token, "tok");
    assert_eq!(list.remaining_item_count, Some(2));
    assert_eq!(list.items.len(), 2);
    for item in &list.items {
        let got = decode_object(Resource::SlicesV1, item, None).unwrap();
        // Each item is a piece of the apiserver's JSON list, as is.
        assert!(g.json.contains(text(&got)), "{}", text(&got));
        assert!(text(&got).starts_with("{\"metadata\":"));
    }
}

#[test]
fn golden_watch_frames_become_the_json_watch_lines() {
    for name in ["frame-error", "frame-bookmark"] {
        let g = golden_named(name);
        let (event, used) = envelope::decode_frame(&g.proto, 1 << 20).unwrap().unwrap();
        assert_eq!(used, g.proto.len(), "{name}");
        let got = envelope::event_json(Resource::Services, &event).unwrap();
        assert_eq!(text(&got), g.json, "{name}");
        // The line is what the JSON watch decoder takes.
        let line = crate::upstream::decode::decode_event(&got.json).unwrap();
        match (name, line) {
            ("frame-error", crate::upstream::decode::WatchEvent::Error(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            }
            (
                "frame-bookmark",
                crate::upstream::decode::WatchEvent::Bookmark { resource_version },
            ) => {
                assert_eq!(resource_version, "99");
            }
            (_, other) => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn go_field_order_omitempty_and_nulls() {
    // Built by hand: ServicePort's JSON order is name, protocol, appProtocol, port, targetPort,
    // nodePort (appProtocol is field 6); nodePort 0 is omitempty; a Service's status is a
    // struct, never left out.
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [
        {"port": 80, "targetPort": 8080, "appProtocol": "h2c", "name": "a"}]}});
    let enc = encode_object(Resource::Services, &svc);
    let got = decode_object(Resource::Services, strip_prefix(&enc.bytes), None).unwrap();
    assert_eq!(
        text(&got),
        r#"{"metadata":{"name":"s"},"spec":{"ports":[{"name":"a","appProtocol":"h2c","port":80,"targetPort":8080}]},"status":{"loadBalancer":{}}}"#
    );
    // EndpointSlice endpoints (no omitempty): null when none; conditions a struct: {}.
    let slice = json!({"metadata": {"name": "e"}, "addressType": "IPv4",
        "endpoints": [{"addresses": []}]});
    let enc = encode_object(Resource::SlicesV1, &slice);
    let got = decode_object(Resource::SlicesV1, strip_prefix(&enc.bytes), None).unwrap();
    assert_eq!(
        text(&got),
        r#"{"metadata":{"name":"e"},"addressType":"IPv4","endpoints":[{"addresses":null,"conditions":{}}],"ports":null}"#
    );
}

#[test]
fn times() {
    let mut out = Vec::new();
    write_rfc3339(&mut out, 0, None);
    out.push(b' ');
    write_rfc3339(&mut out, 1_704_164_645, None);
    out.push(b' ');
    write_rfc3339(&mut out, -1, Some(5));
    out.push(b' ');
    write_rfc3339(&mut out, GO_ZERO_SECONDS, None);
    out.push(b' ');
    write_rfc3339(&mut out, 253_402_300_800, None);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "1970-01-01T00:00:00Z 2024-01-02T03:04:05Z 1969-12-31T23:59:59.000005Z \
         0001-01-01T00:00:00Z 10000-01-01T00:00:00Z"
    );
    // A condition's zero lastHeartbeatTime is null (omitempty leaves no struct out), the
    // zero creationTimestamp is left out (omitzero); an empty Timestamp is the zero time, an
    // explicit epoch is not.
    let mut cond = Vec::new();
    crate::proto::wire::put_bytes(&mut cond, 1, b"Ready");
    crate::proto::wire::put_bytes(&mut cond, 3, &[]);
    crate::proto::wire::put_bytes(&mut cond, 4, &[0x08, 0x00]);
    let got = decode_message(&schema::CORE_V1_NODE_CONDITION, &cond, None).unwrap();
    assert_eq!(
        text(&got),
        r#"{"type":"Ready","status":"","lastHeartbeatTime":null,"lastTransitionTime":"1970-01-01T00:00:00Z"}"#
    );
    let mut meta = Vec::new();
    crate::proto::wire::put_bytes(&mut meta, 8, &[]);
    let got = decode_message(&schema::META_V1_OBJECT_META, &meta, None).unwrap();
    assert_eq!(text(&got), "{}");
}

#[test]
fn strings_are_escaped_as_go_escapes_them() {
    let mut out = Vec::new();
    go_string(
        &mut out,
        b"a<b>&\"\\\x08\x0c\n\r\t\x01\x7f \xe2\x80\xa8\xe2\x80\xa9 \xc3\xa9 \xff \xe2\x82 \xed\xa0\x80",
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\"a\\u003cb\\u003e\\u0026\\\"\\\\\\b\\f\\n\\r\\t\\u0001\x7f \\u2028\\u2029 é \\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd\""
    );
    let mut out = Vec::new();
    compact_json(&mut out, b"{ \"a<\" : [1, \"\xe2\x80\xa8 \\\" &\"] }\n");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"a\u003c":[1,"\u2028 \" \u0026"]}"#
    );
}

#[test]
fn merges_repeats_and_packed_and_maps_as_gogo() {
    use crate::proto::wire::{put_bytes, put_varint_field};
    // ServicePort: name twice (the last wins), port twice; targetPort's IntOrString met twice
    // is merged (type from the first, strVal from the second).
    let mut port = Vec::new();
    put_bytes(&mut port, 1, b"first");
    put_bytes(&mut port, 1, b"last");
    put_varint_field(&mut port, 3, 1);
    put_varint_field(&mut port, 3, 2);
    put_bytes(&mut port, 4, &[0x08, 0x01]);
    put_bytes(&mut port, 4, &[0x1a, 0x01, b'x']);
    let got = decode_message(&schema::CORE_V1_SERVICE_PORT, &port, None).unwrap();
    assert_eq!(text(&got), r#"{"name":"last","port":2,"targetPort":"x"}"#);
    // Labels out of order, a key repeated: sorted, the last value kept.
    let mut meta = Vec::new();
    for (k, v) in [("b", "1"), ("a", "2"), ("b", "3")] {
        let mut entry = Vec::new();
        put_bytes(&mut entry, 1, k.as_bytes());
        put_bytes(&mut entry, 2, v.as_bytes());
        put_bytes(&mut meta, 11, &entry);
    }
    let got = decode_message(&schema::META_V1_OBJECT_META, &meta, None).unwrap();
    assert_eq!(text(&got), r#"{"labels":{"a":"2","b":"3"}}"#);
    // A Quantity map entry without a value is the zero Quantity.
    let mut status = Vec::new();
    put_bytes(&mut status, 1, &[0x0a, 0x03, b'c', b'p', b'u']);
    let got = decode_message(&schema::CORE_V1_NODE_STATUS, &status, None).unwrap();
    assert!(
        text(&got).starts_with(r#"{"capacity":{"cpu":"0"},"daemonEndpoints""#),
        "{}",
        text(&got)
    );
}

#[test]
fn unknown_fields_are_skipped_and_reported() {
    use crate::proto::wire::{put_bytes, put_varint_field};
    let mut spec = Vec::new();
    put_bytes(&mut spec, 3, b"10.0.0.1");
    put_varint_field(&mut spec, 99, 5);
    let mut port = Vec::new();
    put_varint_field(&mut port, 3, 80);
    put_bytes(&mut port, 77, b"new");
    put_bytes(&mut spec, 1, &port);
    put_bytes(&mut spec, 1, &port);
    let mut svc = Vec::new();
    put_bytes(&mut svc, 2, &spec);
    put_bytes(&mut svc, 50, b"z");
    let got = decode_object(Resource::Services, &svc, None).unwrap();
    assert_eq!(got.unknown, ["#50", "spec.#99", "spec.ports[].#77"]);
    assert_eq!(
        text(&got),
        r#"{"metadata":{},"spec":{"ports":[{"port":80,"targetPort":0},{"port":80,"targetPort":0}],"clusterIP":"10.0.0.1"},"status":{"loadBalancer":{}}}"#
    );
}

#[test]
fn garbage_and_truncation_are_errors() {
    let g = golden_named("node");
    let body = unwrap_body(&g.proto).unwrap();
    // Every strict prefix of a message either errors or decodes (a cut at a field boundary);
    // never a panic.
    let mut errors = 0;
    for cut in 0..body.raw.len() {
        if decode_object(Resource::Nodes, &body.raw[..cut], None).is_err() {
            errors += 1;
        }
    }
    assert!(errors > body.raw.len() / 2, "{errors}");
    // A known field with the wrong wire type.
    let bad = [0x0a, 0x02, 0x08, 0x01]; // metadata { name: varint }
    assert_eq!(
        decode_object(Resource::Nodes, &bad, None),
        Err(DecodeError::WireType {
            path: "metadata.name".into(),
            wire: 0
        })
    );
    // An IntOrString of type 2; an empty Quantity; a FieldsV1 that is not JSON.
    let port = [0x22, 0x02, 0x08, 0x02];
    assert!(matches!(
        decode_message(&schema::CORE_V1_SERVICE_PORT, &port, None),
        Err(DecodeError::Invalid { .. })
    ));
    let status = [0x0a, 0x07, 0x0a, 0x01, b'c', 0x12, 0x02, 0x0a, 0x00];
    assert!(matches!(
        decode_message(&schema::CORE_V1_NODE_STATUS, &status, None),
        Err(DecodeError::Invalid { .. })
    ));
    let mf = [0x3a, 0x03, 0x0a, 0x01, b'{'];
    assert!(matches!(
        decode_message(&schema::META_V1_MANAGED_FIELDS_ENTRY, &mf, None),
        Err(DecodeError::Invalid { .. })
    ));
    // JSON, but with invalid UTF-8 in a string: the decoder's output must stay UTF-8.
    let mf = [0x3a, 0x07, 0x0a, 0x05, b'[', b'"', 0xff, b'"', b']'];
    assert!(matches!(
        decode_message(&schema::META_V1_MANAGED_FIELDS_ENTRY, &mf, None),
        Err(DecodeError::Invalid { .. })
    ));
    for junk in [&[0xffu8][..], &[0x0b], &[0x12, 0x05, 1], &[0x00, 0x00]] {
        assert!(
            decode_object(Resource::Services, junk, None).is_err(),
            "{junk:?}"
        );
    }
}

#[test]
fn encoder_fixtures_round_trip() {
    // JSON as the tests of the encoder write it (not Go-shaped: keys missing, other order):
    // the decoded JSON holds every value of it, and encodes to the same bytes again.
    let fixtures = [
        (
            Resource::Services,
            json!({"kind": "Service", "apiVersion": "v1",
                "metadata": {"name": "s", "namespace": "d", "uid": "u-1", "resourceVersion": "7",
                    "annotations": {"x": "y"}},
                "spec": {"ports": [{"port": 443, "targetPort": "https", "protocol": "TCP"}],
                    "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "type": "ClusterIP",
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                    "internalTrafficPolicy": "Cluster", "selector": {"app": "a"},
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
                "status": {"loadBalancer": {}}}),
        ),
        (
            Resource::Nodes,
            json!({"metadata": {"name": "n", "creationTimestamp": "2024-01-02T03:04:05Z"},
                "spec": {"podCIDR": "10.1.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule",
                    "timeAdded": "2024-01-02T03:04:05Z"}]},
                "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3900m"},
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                    "conditions": [{"type": "Ready", "status": "True",
                        "lastHeartbeatTime": "2024-01-02T03:04:05Z"}],
                    "nodeInfo": {"kubeletVersion": "v1.33.0"}}}),
        ),
        (
            Resource::Endpoints,
            json!({"metadata": {"name": "e"}, "subsets": [{
                "addresses": [{"ip": "10.0.0.1", "nodeName": "n",
                    "targetRef": {"kind": "Pod", "name": "p", "namespace": "d"}}],
                "notReadyAddresses": [{"ip": "10.0.0.2"}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
        ),
        (
            Resource::SlicesV1,
            json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"name": "s-abc", "namespace": "d", "labels":
                    {"kubernetes.io/service-name": "s"}, "generation": 3},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                    "hints": {"forZones": [{"name": "z"}]}, "nodeName": "n"}],
                "ports": [{"name": "", "port": 80, "protocol": "TCP"}]}),
        ),
        (
            Resource::SlicesV1beta1,
            json!({"metadata": {"name": "s-abc", "namespace": "d"}, "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false},
                    "topology": {"kubernetes.io/hostname": "n"}}],
                "ports": [{"port": 80}]}),
        ),
        (
            Resource::CidrsV1,
            json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.0.0.0/16"]},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "r", "message": "m"}]}}),
        ),
        (
            Resource::CidrsV1beta1,
            json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["fd00::/108"]}}),
        ),
    ];
    for (res, fixture) in fixtures {
        let enc = encode_object(res, &fixture);
        assert!(enc.unknown.is_empty(), "{res:?} {:?}", enc.unknown);
        let tm = TypeMeta {
            api_version: res.api_version(),
            kind: res.kind(),
        };
        let got = decode_object(res, strip_prefix(&enc.bytes), Some(tm)).unwrap();
        let value: Value = serde_json::from_slice(&got.json).unwrap();
        let mut want = fixture.clone();
        if let Some(obj) = want.as_object_mut() {
            res.fill_type_meta(obj);
        }
        assert_holds(&value, &want, res);
        let again = encode_object(res, &value);
        assert_eq!(again.bytes, enc.bytes, "{res:?}");
    }
}

/// Every value of `want` is in `got`; what `got` has beyond it is a Go zero value.
fn assert_holds(got: &Value, want: &Value, res: Resource) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, v) in g {
                match w.get(k) {
                    Some(wv) => assert_holds(v, wv, res),
                    None => assert!(is_zero(v), "{res:?}: extra {k}: {v}"),
                }
            }
            for k in w.keys() {
                assert!(g.contains_key(k) || is_zero(&w[k]), "{res:?}: lost {k}");
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{res:?}");
            for (g, w) in g.iter().zip(w) {
                assert_holds(g, w, res);
            }
        }
        _ => assert_eq!(got, want, "{res:?}"),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty() || s == "0",
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

#[test]
fn kept_objects_skip_managed_fields_and_nothing_else() {
    // The apiserver's own Service with managedFields: decoded as the cache keeps it, the JSON
    // is the apiserver's with `metadata.managedFields` removed, every other byte in place.
    let g = golden_named("service-full");
    let body = unwrap_body(&g.proto).unwrap();
    let res = resource_of(body.api_version, body.kind);
    let whole = decode_object(res, body.raw, Some(body.type_meta())).unwrap();
    let kept = decode_object_kept(res, body.raw, Some(body.type_meta())).unwrap();
    assert!(text(&whole).contains("\"managedFields\":["));
    assert!(!text(&kept).contains("managedFields"));
    let mut want: Value = serde_json::from_str(g.json).unwrap();
    want["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields")
        .unwrap();
    let got: Value = serde_json::from_str(text(&kept)).unwrap();
    assert_eq!(got, want);
    // Key order kept: the text is the whole one with the member cut out.
    let w = text(&whole);
    let at = w.find(",\"managedFields\":[").unwrap();
    let end = matching_bracket(w.as_bytes(), at + ",\"managedFields\":".len()) + 1;
    assert_eq!(text(&kept), format!("{}{}", &w[..at], &w[end..]));
    assert!(kept.unknown.is_empty());
    // Only ObjectMeta's field 17 is skipped: a Service's spec field 17 (ipFamilyPolicy) stays.
    assert!(text(&kept).contains("\"ipFamilyPolicy\":"));
}

/// The index of the `]` or `}` closing the one at `open` (strings skipped).
fn matching_bracket(s: &[u8], open: usize) -> usize {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &b) in s.iter().enumerate().skip(open) {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced")
}

#[test]
fn node_facts_decode_only_name_labels_and_addresses() {
    let g = golden_named("node");
    let body = unwrap_body(&g.proto).unwrap();
    let whole: Value = serde_json::from_str(g.json).unwrap();
    let facts = decode_object_only(Resource::Nodes, body.raw, None, &NODE_FACTS).unwrap();
    let facts: Value = serde_json::from_slice(&facts.json).unwrap();
    for p in ["/metadata/name", "/metadata/labels", "/status/addresses"] {
        assert!(whole.pointer(p).is_some(), "{p}");
        assert_eq!(facts.pointer(p), whole.pointer(p), "{p}");
    }
    // Nothing else is read: what Go writes for an absent field (a struct's zero value, `null`
    // for a slice or map without omitempty) stands in for it.
    for p in [
        "/metadata/uid",
        "/metadata/annotations",
        "/spec/podCIDR",
        "/spec/taints",
        "/status/capacity",
        "/status/conditions",
        "/status/images",
    ] {
        assert!(whole.pointer(p).is_some(), "{p}");
        assert!(facts.pointer(p).is_none_or(Value::is_null), "{p}: {facts}");
    }
    let info = facts.pointer("/status/nodeInfo/kubeletVersion");
    assert_eq!(info, Some(&json!("")));
    // The whole object decodes as before with the same decoder (the projection is per call).
    let again = decode_object_kept(Resource::Nodes, body.raw, None).unwrap();
    let again: Value = serde_json::from_slice(&again.json).unwrap();
    assert_eq!(
        again.pointer("/status/images"),
        whole.pointer("/status/images")
    );
}

#[test]
fn kept_and_facts_only_decodes_refuse_garbage_as_the_whole_decode_does() {
    // Skipping fields unread checks them only as far as the wire format goes: junk is still an
    // error, never a panic, and a field skipped in a message that does not parse is no excuse.
    for junk in [
        &[0xffu8][..],
        &[0x0b],
        &[0x12, 0x05, 1],
        &[0x00, 0x00],
        &[0x0a, 0x03, 0x8a, 0x01],
    ] {
        assert!(
            decode_object_kept(Resource::Nodes, junk, None).is_err(),
            "{junk:?}"
        );
        assert!(
            decode_object_only(Resource::Nodes, junk, None, &NODE_FACTS).is_err(),
            "{junk:?}"
        );
    }
    // metadata (field 1) holding managedFields (17) whose bytes are cut short: a wire error.
    let cut = [0x0a, 0x04, 0x8a, 0x01, 0x05, 0x00];
    assert!(decode_object_kept(Resource::Services, &cut, None).is_err());
}
