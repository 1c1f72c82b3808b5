use super::*;
use crate::proto::testpool::{decode, descriptor, json};
use crate::proto::Kind as K;
use serde_json::json;

/// One message of the schema from JSON, without the `0x12` prefix, and what was reported.
fn message(msg: &Message, v: &Value) -> (Vec<u8>, Vec<String>) {
    let mut enc = Encoder::default();
    let mut buf = Vec::new();
    enc.top(msg, v, &mut buf);
    (buf, enc.unknown)
}

/// Bytes from a readable mix of byte values and ASCII strings.
macro_rules! bytes {
    ($($part:expr),* $(,)?) => {{
        let mut v: Vec<u8> = Vec::new();
        $( v.extend_from_slice(AsBytes::as_bytes(&$part)); )*
        v
    }};
}
trait AsBytes {
    fn as_bytes(&self) -> &[u8];
}
impl AsBytes for &str {
    fn as_bytes(&self) -> &[u8] {
        str::as_bytes(self)
    }
}
impl<const N: usize> AsBytes for [u8; N] {
    fn as_bytes(&self) -> &[u8] {
        self
    }
}

/// ObjectMeta with nothing set: the eight value fields, as gogo writes a zero ObjectMeta.
const ZERO_META: [u8; 16] = [
    0x0a, 0, 0x12, 0, 0x1a, 0, 0x22, 0, 0x2a, 0, 0x32, 0, 0x38, 0, 0x42, 0,
];

#[test]
fn service_port_exact_bytes() {
    let port = json!({"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080});
    let (bytes, unknown) = message(&schema::CORE_V1_SERVICE_PORT, &port);
    let want = bytes!(
        [0x0a, 4],
        "http",
        [0x12, 3],
        "TCP",
        [0x18, 80],
        // targetPort: IntOrString {type 0, intVal 8080, strVal ""}
        [0x22, 7, 0x08, 0, 0x10, 0x90, 0x3f, 0x1a, 0],
        // nodePort: a value int32, written as 0; appProtocol: a pointer, absent.
        [0x28, 0],
    );
    assert_eq!(bytes, want);
    assert!(unknown.is_empty());
    let msg = decode("core.v1.ServicePort", &bytes);
    assert_eq!(json(&msg)["targetPort"]["intVal"], 8080);
}

#[test]
fn int_or_string_as_string_and_negative_int32() {
    let port = json!({"port": -1, "targetPort": "web", "appProtocol": "h2c"});
    let (bytes, unknown) = message(&schema::CORE_V1_SERVICE_PORT, &port);
    let want = bytes!(
        [0x0a, 0, 0x12, 0],
        // Go's uint64(int32(-1)): ten bytes.
        [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        [0x22, 9, 0x08, 1, 0x10, 0, 0x1a, 3],
        "web",
        [0x28, 0, 0x32, 3],
        "h2c",
    );
    assert_eq!(bytes, want);
    assert!(unknown.is_empty());
    let msg = json(&decode("core.v1.ServicePort", &bytes));
    assert_eq!(msg["port"], -1);
    assert_eq!(msg["targetPort"]["strVal"], "web");
}

#[test]
fn zero_object_meta_and_absent_fields() {
    let (bytes, unknown) = message(&schema::META_V1_OBJECT_META, &json!({}));
    assert_eq!(bytes, ZERO_META);
    assert!(unknown.is_empty());
    // null is absent too.
    let (bytes, _) = message(&schema::META_V1_OBJECT_META, &json!({"name": null}));
    assert_eq!(bytes, ZERO_META);
}

#[test]
fn object_meta_with_time_labels_and_pointers() {
    let meta = json!({
        "name": "n1",
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "deletionTimestamp": "2024-01-02T04:04:05+01:00",
        "deletionGracePeriodSeconds": 30,
        "labels": {"b": "2", "a": "1"},
    });
    let (bytes, unknown) = message(&schema::META_V1_OBJECT_META, &meta);
    let ts = [0x08, 0xa5, 0xfa, 0xcd, 0xac, 0x06, 0x10, 0x00];
    let want = bytes!(
        [0x0a, 2],
        "n1",
        [0x12, 0, 0x1a, 0, 0x22, 0, 0x2a, 0, 0x32, 0, 0x38, 0],
        [0x42, 8],
        ts,
        [0x4a, 8],
        ts,
        [0x50, 30],
        [0x5a, 6, 0x0a, 1],
        "a",
        [0x12, 1],
        "1",
        [0x5a, 6, 0x0a, 1],
        "b",
        [0x12, 1],
        "2",
    );
    assert_eq!(bytes, want);
    assert!(unknown.is_empty());
    decode("meta.v1.ObjectMeta", &bytes);
}

#[test]
fn zero_time_writes_an_empty_timestamp() {
    // time_proto.go: the zero Time marshals to nothing; the field itself (a value) is written.
    for t in ["0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00"] {
        let (bytes, _) = message(
            &schema::META_V1_OBJECT_META,
            &json!({"creationTimestamp": t}),
        );
        assert_eq!(bytes, ZERO_META, "{t}");
    }
    // Just after it is not zero: seconds -62135596799.
    let (bytes, _) = message(
        &schema::META_V1_OBJECT_META,
        &json!({"creationTimestamp": "0001-01-01T00:00:01Z"}),
    );
    assert_eq!(bytes[14..17], [0x42, 13, 0x08]);
}

#[test]
fn node_capacity_map_is_sorted_and_quantities_are_messages() {
    let status = json!({"capacity": {"pods": "110", "cpu": "4"}, "phase": "Running"});
    let (bytes, unknown) = message(&schema::CORE_V1_NODE_STATUS, &status);
    let want = bytes!(
        [0x0a, 10, 0x0a, 3],
        "cpu",
        [0x12, 3, 0x0a, 1],
        "4",
        [0x0a, 13, 0x0a, 4],
        "pods",
        [0x12, 5, 0x0a, 3],
        "110",
        [0x1a, 7],
        "Running",
        // daemonEndpoints: a value struct holding a value struct holding a value int32.
        [0x32, 4, 0x0a, 2, 0x08, 0],
        // nodeInfo: a value struct, ten zero strings.
        [0x3a, 20, 0x0a, 0, 0x12, 0, 0x1a, 0, 0x22, 0, 0x2a, 0],
        [0x32, 0, 0x3a, 0, 0x42, 0, 0x4a, 0, 0x52, 0],
    );
    assert_eq!(bytes, want);
    assert!(unknown.is_empty());
    decode("core.v1.NodeStatus", &bytes);
}

/// A 1.37 kubelet writes `nodeInfo.runningInUserNamespace` (field 12, k8s.io/api v0.37): it is
/// encoded, not dropped as unknown (found by `make e2e`: kube-proxy 1.37 reads its Node in
/// protobuf).
#[test]
fn node_info_running_in_user_namespace_is_field_12() {
    let info = json!({"machineID": "m", "runningInUserNamespace": true});
    let (bytes, unknown) = message(&schema::CORE_V1_NODE_SYSTEM_INFO, &info);
    assert!(unknown.is_empty(), "{unknown:?}");
    assert_eq!(bytes[..3], [0x0a, 1, b'm']);
    assert!(bytes.ends_with(&[0x60, 0x01]), "{bytes:02x?}");
    decode("core.v1.NodeSystemInfo", &bytes);
}

#[test]
fn endpoint_slice_endpoint_with_hints_and_conditions() {
    let ep = json!({
        "addresses": ["10.0.0.1"],
        "conditions": {"ready": true, "serving": true, "terminating": false},
        "nodeName": "n1",
        "zone": "z1",
        "hints": {"forZones": [{"name": "z1"}], "forNodes": [{"name": "n1"}]},
    });
    let (bytes, unknown) = message(&schema::DISCOVERY_V1_ENDPOINT, &ep);
    let want = bytes!(
        [0x0a, 8],
        "10.0.0.1",
        [0x12, 6, 0x08, 1, 0x10, 1, 0x18, 0],
        [0x32, 2],
        "n1",
        [0x3a, 2],
        "z1",
        [0x42, 12, 0x0a, 4, 0x0a, 2],
        "z1",
        [0x12, 4, 0x0a, 2],
        "n1",
    );
    assert_eq!(bytes, want);
    assert!(unknown.is_empty());
    let msg = json(&decode("discovery.v1.Endpoint", &bytes));
    assert_eq!(msg["hints"]["forNodes"][0]["name"], "n1");
    assert_eq!(msg["conditions"]["terminating"], false);
}

#[test]
fn whole_objects_decode_with_the_official_schema() {
    let service = json!({
        "kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "s", "namespace": "d", "uid": "u-1", "resourceVersion": "7",
            "annotations": {"x": "y"}},
        "spec": {"ports": [{"port": 443, "targetPort": "https", "protocol": "TCP"}],
            "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "type": "ClusterIP",
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster", "selector": {"app": "a"},
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
        "status": {"loadBalancer": {}},
    });
    let e = encode_object(Resource::Services, &service);
    assert!(e.unknown.is_empty(), "{:?}", e.unknown);
    assert_eq!(e.bytes[0], 0x12);
    let msg = json(&decode("core.v1.Service", strip_prefix(&e.bytes)));
    assert_eq!(msg["metadata"]["name"], "s");
    assert_eq!(msg["spec"]["ports"][0]["port"], 443);
    assert_eq!(msg["spec"]["ports"][0]["targetPort"]["strVal"], "https");
    assert_eq!(msg["spec"]["selector"]["app"], "a");
    assert_eq!(
        msg["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );

    let node = json!({
        "metadata": {"name": "n", "creationTimestamp": "2024-01-02T03:04:05Z"},
        "spec": {"podCIDR": "10.1.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule",
            "timeAdded": "2024-01-02T03:04:05Z"}]},
        "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3900m"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2024-01-02T03:04:05Z"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0"}},
    });
    let e = encode_object(Resource::Nodes, &node);
    assert!(e.unknown.is_empty(), "{:?}", e.unknown);
    let msg = json(&decode("core.v1.Node", strip_prefix(&e.bytes)));
    assert_eq!(
        msg["metadata"]["creationTimestamp"]["seconds"],
        "1704164645"
    );
    assert_eq!(msg["status"]["allocatable"]["cpu"]["string"], "3900m");

    let endpoints = json!({"metadata": {"name": "e"}, "subsets": [{
        "addresses": [{"ip": "10.0.0.1", "nodeName": "n",
            "targetRef": {"kind": "Pod", "name": "p", "namespace": "d"}}],
        "notReadyAddresses": [{"ip": "10.0.0.2"}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]});
    let e = encode_object(Resource::Endpoints, &endpoints);
    assert!(e.unknown.is_empty(), "{:?}", e.unknown);
    let msg = json(&decode("core.v1.Endpoints", strip_prefix(&e.bytes)));
    assert_eq!(msg["subsets"][0]["addresses"][0]["targetRef"]["name"], "p");

    for (res, name) in [
        (Resource::SlicesV1, "discovery.v1.EndpointSlice"),
        (Resource::SlicesV1beta1, "discovery.v1beta1.EndpointSlice"),
    ] {
        let slice = json!({
            "kind": "EndpointSlice", "apiVersion": res.api_version(),
            "metadata": {"name": "s-abc", "namespace": "d", "labels":
                {"kubernetes.io/service-name": "s"}, "generation": 3},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                "hints": {"forZones": [{"name": "z"}]}, "nodeName": "n"}],
            "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
        });
        let e = encode_object(res, &slice);
        assert!(e.unknown.is_empty(), "{res:?} {:?}", e.unknown);
        let msg = json(&decode(name, strip_prefix(&e.bytes)));
        assert_eq!(msg["addressType"], "IPv4", "{res:?}");
        assert_eq!(msg["metadata"]["generation"], "3", "{res:?}");
        assert_eq!(
            msg["endpoints"][0]["hints"]["forZones"][0]["name"], "z",
            "{res:?}"
        );
    }
}

/// The message inside [`Encoded::bytes`] (after `0x12` and the varint length).
fn strip_prefix(bytes: &[u8]) -> &[u8] {
    let len_bytes = bytes[1..].iter().take_while(|&&b| b & 0x80 != 0).count() + 1;
    &bytes[1 + len_bytes..]
}

#[test]
fn unknown_fields_are_dropped_and_reported_once() {
    let svc = json!({
        "kind": "Service", "apiVersion": "v1", "newTop": 1,
        "metadata": {"name": "s"},
        "spec": {"someNewField": true,
            "ports": [{"port": 1, "newField": 1}, {"port": 2, "newField": 2}]},
    });
    let e = encode_object(Resource::Services, &svc);
    assert_eq!(
        e.unknown,
        ["newTop", "spec.someNewField", "spec.ports[].newField"]
    );
    let clean = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 1}, {"port": 2}]}});
    assert_eq!(e.bytes, encode_object(Resource::Services, &clean).bytes);
}

#[test]
fn unknown_keys_of_odd_names_are_reported_as_they_are_spelled() {
    // A dot joins a key to its parent's path, but not before a key that starts like `[]`/`{}`;
    // an empty key at the top is the empty path.
    let svc = json!({"": 1, "{a": 1, "metadata": {"": 1, "[x": 1, "{y": 1, "z.w": 1},
        "spec": {"ports": [{"": 1}]}});
    let e = encode_object(Resource::Services, &svc);
    assert_eq!(
        e.unknown,
        [
            "",
            "{a",
            "metadata.",
            "metadata[x",
            "metadata.z.w",
            "metadata{y",
            "spec.ports[]."
        ]
    );
}

#[test]
fn wrong_types_are_zero_values_and_reported() {
    let svc = json!({
        "metadata": {"name": 5, "labels": {"a": 1}, "deletionGracePeriodSeconds": "x",
            "creationTimestamp": "yesterday"},
        "spec": {"ports": [{"port": "80", "targetPort": 1.5}, {"port": 1_i64 << 40}], "clusterIPs": "x",
            "selector": [], "publishNotReadyAddresses": "yes"},
        "status": 7,
    });
    let e = encode_object(Resource::Services, &svc);
    let want = [
        "metadata.name (not a string)",
        "metadata.creationTimestamp (not an RFC 3339 time)",
        "metadata.deletionGracePeriodSeconds (not an int64)",
        "metadata.labels{} (not a string)",
        "spec.ports[].port (not an int32)",
        "spec.ports[].targetPort (not an int32 or a string)",
        "spec.selector (not an object)",
        "spec.publishNotReadyAddresses (not a bool)",
        "spec.clusterIPs (not an array)",
        "status (not an object)",
    ];
    assert_eq!(e.unknown, want);
    // Each one is encoded as the zero value (or not written, for a pointer).
    let zeroed = json!({
        "metadata": {"name": "", "labels": {"a": ""}},
        "spec": {"ports": [{"port": 0}, {}]},
    });
    assert_eq!(e.bytes, encode_object(Resource::Services, &zeroed).bytes);
    decode("core.v1.Service", strip_prefix(&e.bytes));
}

#[test]
fn never_panics_on_odd_json() {
    for v in [
        json!(null),
        json!([1, 2]),
        json!("x"),
        json!({"metadata": []}),
        json!({"spec": {"ports": [null, 1, "x", []]}}),
        json!({"metadata": {"managedFields": [{"fieldsV1": {"f:a": {}}, "time": 3}]}}),
        json!({"status": {"capacity": {"cpu": 4, "mem": null, "x": {}}}}),
        json!({"endpoints": [{"conditions": null, "hints": {"forZones": [null]}}]}),
    ] {
        for res in Resource::ALL {
            let e = encode_object(res, &v);
            decode(message_of(res).name, strip_prefix(&e.bytes));
        }
    }
    assert_eq!(
        encode_object(Resource::Nodes, &json!(3)).unknown,
        ["(not an object)"]
    );
}

#[test]
fn sparse_bookmark_object() {
    let bookmark = json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}});
    let e = encode_object(Resource::SlicesV1, &bookmark);
    assert!(e.unknown.is_empty());
    let msg = json(&decode(
        "discovery.v1.EndpointSlice",
        strip_prefix(&e.bytes),
    ));
    assert_eq!(msg["metadata"]["resourceVersion"], "12");
    assert_eq!(msg["addressType"], "");
}

#[test]
fn fields_v1_is_the_compact_json() {
    let meta = json!({"managedFields": [{"manager": "m", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:ports": {}}}, "time": "2024-01-02T03:04:05Z"}]});
    let (bytes, unknown) = message(&schema::META_V1_OBJECT_META, &meta);
    assert!(unknown.is_empty());
    let raw = br#"{"f:spec":{"f:ports":{}}}"#;
    assert!(bytes.windows(raw.len()).any(|w| w == raw));
    let msg = json(&decode("meta.v1.ObjectMeta", &bytes));
    assert_eq!(msg["managedFields"][0]["manager"], "m");
}

#[test]
fn rfc3339() {
    let ts = |s| parse_rfc3339(s).map(|t| (t.seconds, t.nanos));
    assert_eq!(ts("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(ts("2024-01-02T03:04:05Z"), Some((1_704_164_645, 0)));
    assert_eq!(
        ts("2024-01-02T03:04:05.123456Z"),
        Some((1_704_164_645, 123_456_000))
    );
    assert_eq!(ts("2024-01-02T04:34:05+01:30"), Some((1_704_164_645, 0)));
    assert_eq!(ts("2024-02-29T00:00:00-00:00").map(|t| t.1), Some(0));
    assert_eq!(ts("0001-01-01T00:00:00Z"), Some((GO_ZERO_SECONDS, 0)));
    for bad in [
        "",
        "2024-01-02",
        "2024-01-02 03:04:05Z",
        "2023-02-29T00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-01-02T24:00:00Z",
        "2024-01-02T03:04:05",
        "2024-01-02T03:04:05.Z",
        "2024-01-02T03:04:05+0100",
        "2024-01-02T03:04:05Zjunk",
        "२०२४-01-02T03:04:05Z",
    ] {
        assert_eq!(ts(bad), None, "{bad}");
    }
}

/// Every table of the generated schema against the official .proto files: each field's number,
/// JSON name, kind and cardinality, and no field of the .proto missing.
#[test]
fn schema_matches_the_official_proto_files() {
    for msg in schema::ALL {
        let desc = descriptor(msg.name);
        assert_eq!(
            desc.fields().len(),
            msg.fields.len(),
            "{} field count",
            msg.name
        );
        for f in msg.fields {
            let d = desc
                .get_field(f.number)
                .unwrap_or_else(|| panic!("{}.{}: no field {}", msg.name, f.json, f.number));
            assert_eq!(d.json_name(), f.json, "{}", msg.name);
            assert_eq!(
                d.is_list(),
                f.card == Card::Repeated,
                "{}.{}",
                msg.name,
                f.json
            );
            assert_eq!(d.is_map(), f.card == Card::Map, "{}.{}", msg.name, f.json);
            let kind = if d.is_map() {
                match d.kind() {
                    prost_reflect::Kind::Message(entry) => entry.map_entry_value_field().kind(),
                    k => panic!("{}.{}: map of {k:?}", msg.name, f.json),
                }
            } else {
                d.kind()
            };
            let want = match &f.kind {
                K::String => "string",
                K::Bool => "bool",
                K::Int32 => "int32",
                K::Int64 => "int64",
                K::Message(m) => m.name,
                K::Time => "meta.v1.Time",
                K::MicroTime => "meta.v1.MicroTime",
                K::Quantity => "k8s.io.apimachinery.pkg.api.resource.Quantity",
                K::IntOrString => "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
                K::FieldsV1 => "meta.v1.FieldsV1",
            };
            let got = match kind {
                prost_reflect::Kind::String => "string".to_owned(),
                prost_reflect::Kind::Bool => "bool".to_owned(),
                prost_reflect::Kind::Int32 => "int32".to_owned(),
                prost_reflect::Kind::Int64 => "int64".to_owned(),
                prost_reflect::Kind::Message(m) => m.full_name().to_owned(),
                k => format!("{k:?}"),
            };
            let want_full = if want.contains('.') && !want.starts_with("k8s.io") {
                descriptor(want).full_name().to_owned()
            } else {
                want.to_owned()
            };
            assert_eq!(got, want_full, "{}.{}", msg.name, f.json);
        }
    }
}
