//! [`encode_json`] against [`encode_object`] of the same text parsed into a `Value`: the same
//! bytes and the same reports, for every resource, on golden objects, on the shapes
//! grid-wrapper serves, and on texts chosen for where a reader of its own could differ.

use super::*;
use serde_json::json;

const GOLDEN: &str = include_str!("../../tests/proto/golden.tsv");

/// Asserts both encoders agree on `text` (which serde_json parses) for every resource.
fn agree(text: &[u8]) {
    let value: Value = serde_json::from_slice(text).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(text));
    });
    for res in Resource::ALL {
        let want = encode_object(res, &value);
        let got = encode_json(res, text);
        assert_eq!(
            got,
            want,
            "{res:?}: {}",
            String::from_utf8_lossy(&text[..text.len().min(300)])
        );
    }
}

/// `value` as grid-wrapper serves it (compact, keys sorted), pretty, and with every object's
/// keys reversed (as an apiserver writes them: not sorted).
fn agree_in_every_layout(value: &Value) {
    agree(&serde_json::to_vec(value).unwrap());
    agree(&serde_json::to_vec_pretty(value).unwrap());
    agree(reversed(value).as_bytes());
}

fn reversed(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), reversed(v)))
                .collect();
            format!("{{{}}}", entries.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(reversed).collect();
            format!("[{}]", items.join(","))
        }
        v => v.to_string(),
    }
}

#[test]
fn agrees_on_the_golden_objects() {
    let mut n = 0;
    for line in GOLDEN.lines() {
        let json = line.splitn(4, '\t').nth(3).unwrap();
        // As the apiserver wrote it (Go field order, FieldsV1 with spaces), then re-laid out.
        agree(json.as_bytes());
        agree_in_every_layout(&serde_json::from_str(json).unwrap());
        n += 1;
    }
    assert_eq!(n, 14);
}

#[test]
fn agrees_on_served_shapes() {
    let slice = json!({
        "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": "web-abcde", "namespace": "default", "uid": "0b1c-2d",
            "resourceVersion": "12345", "generation": 4,
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "labels": {"kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time":
                "2024-01-02T03:04:05Z"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web",
                "uid": "1234", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "discovery.k8s.io/v1", "time": "2024-01-02T03:04:05Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {},
                    "f:kubernetes.io/service-name": {}}}, "f:addressType": {}}}]},
        "addressType": "IPv4",
        "endpoints": (0..20).map(|i| json!({
            "addresses": [format!("10.1.{}.{}", i / 250, i % 250)],
            "conditions": {"ready": i % 3 != 0, "serving": true, "terminating": false},
            "nodeName": format!("node-{i}"), "zone": "z1",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": format!("web-{i}"),
                "uid": format!("uid-{i}")},
            "hints": {"forZones": [{"name": "z1"}]},
        })).collect::<Vec<_>>(),
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}],
    });
    let node = json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1",
            "topology.kubernetes.io/zone": "z1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
            "taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "2024-01-02T03:04:05Z"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16318940Ki", "pods": "110",
                "ephemeral-storage": "101430960Ki"},
            "allocatable": {"cpu": "3900m", "memory": "16216540Ki", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2024-01-02T03:04:05Z",
                "lastTransitionTime": "2024-01-02T03:04:05Z",
                "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "node-1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "m", "kubeletVersion": "v1.33.0",
                "containerRuntimeVersion": "containerd://2.0.0", "architecture": "amd64"},
            "images": [{"names": ["registry.k8s.io/pause@sha256:0123", "registry.k8s.io/pause:3.10"],
                "sizeBytes": 320368}],
        },
    });
    let service = json!({
        "kind": "Service", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default",
            "labels": {"app": "web"}},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "https", "port": 443, "targetPort": "https", "nodePort": 30443}],
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "type": "NodePort",
            "selector": {"app": "web"}, "sessionAffinity": "None",
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000,
            "internalTrafficPolicy": "Cluster"},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP",
            "ports": [{"port": 80, "protocol": "TCP", "error": null}]}]}},
    });
    let endpoints = json!({
        "kind": "Endpoints", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "10.1.0.1", "nodeName": "node-1", "hostname": "h",
                "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default"}}],
            "notReadyAddresses": [{"ip": "10.1.0.2"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}],
    });
    let cidr = json!({"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12", "fd00::/108"]},
        "status": {"conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "", "message": ""}]}});
    for v in [slice, node, service, endpoints, cidr] {
        agree_in_every_layout(&v);
    }
}

#[test]
fn agrees_on_edge_cases() {
    let texts: &[&str] = &[
        // Not objects.
        "null",
        "[]",
        "5",
        r#""s""#,
        "{}",
        " \n\t{ \"metadata\" : { \"name\" : \"x\" } } \r\n",
        // Nulls everywhere.
        r#"{"metadata":null,"spec":null,"status":null}"#,
        r#"{"metadata":{"name":null,"labels":{"a":null,"b":"2"},"ownerReferences":[null]},
            "spec":{"ports":null,"clusterIP":null,"selector":null,"clusterIPs":[null,"x"]}}"#,
        // Wrong types.
        r#"{"metadata":{"name":5,"labels":{"a":1,"b":[],"c":{}},"generation":"3"},
            "spec":{"ports":[{"port":"80","targetPort":1.5,"protocol":7},{"port":true},7,"x",[]],
            "clusterIPs":"x","selector":[],"type":{}},"status":[]}"#,
        r#"{"endpoints":{"a":1},"ports":"x","addressType":["IPv4"],
            "metadata":{"creationTimestamp":5,"deletionTimestamp":"yesterday",
            "managedFields":{"x":1}}}"#,
        // Unknown keys, at every depth, in and out of order.
        r#"{"zzz":1,"aaa":{},"metadata":{"newField":[1],"name":"x","aNew":null},
            "spec":{"ports":[{"new":1,"port":80},{"newer":{"deep":[1,2]}}],"zNew":true},
            "status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4","x":1}]}}}"#,
        // Escapes, in keys and values, map keys sorted after unescaping.
        r#"{"metadata":{"name":"a\"b\\c\u00e9\ud83d\ude00\/\b\f\n\r\t","namespace":"\u0000",
            "labels":{"k\u0062":"1","ka":"\u2028","k\u0000":"\u001f","ké":"é","k":"v"},
            "annotations":{"\ud83d\ude00":"\/\/"}}}"#,
        // An escaped known key is the key.
        r#"{"m\u0065tadata":{"n\u0061me":"x"},"sp\u0065c":{"ports":[{"p\u006frt":1}]}}"#,
        // Numbers: int32 and int64 ranges, -0, floats, exponents, beyond u64.
        r#"{"spec":{"ports":[{"port":2147483647},{"port":2147483648},{"port":-2147483648},
            {"port":-2147483649},{"port":-0},{"port":0},{"port":1e2},{"port":1.0},
            {"port":18446744073709551616},{"port":9223372036854775808},{"port":-1E0}],
            "healthCheckNodePort":-1,
            "sessionAffinityConfig":{"clientIP":{"timeoutSeconds":-2147483648}}},
            "metadata":{"generation":9223372036854775807,"deletionGracePeriodSeconds":-9223372036854775808}}"#,
        r#"{"metadata":{"generation":9223372036854775808,"deletionGracePeriodSeconds":-9223372036854775809}}"#,
        r#"{"metadata":{"generation":18446744073709551615,"deletionGracePeriodSeconds":-0.0}}"#,
        // Quantities as numbers: written as serde_json writes the number.
        r#"{"status":{"capacity":{"cpu":4,"memory":1.5e3,"pods":"110","x":-0,"y":1E-7,
            "z":123456789012345678901234567890,"w":0.1,"v":-12,"u":1e300,"t":{},"s":null,
            "r":true,"q":2.2250738585072014e-308,"p":9007199254740993,"o":0.30000000000000004}}}"#,
        // IntOrString.
        r#"{"spec":{"ports":[{"targetPort":"x"},{"targetPort":5},{"targetPort":-1},
            {"targetPort":2147483648},{"targetPort":1.5},{"targetPort":true},{"targetPort":null},
            {"targetPort":""},{"targetPort":{}},{"targetPort":-0}]}}"#,
        // Times and micro-times, with offsets and fractions; zero times; invalid ones.
        r#"{"metadata":{"creationTimestamp":"2024-01-02T03:04:05.123456789+01:00",
            "deletionTimestamp":"0001-01-01T00:00:00Z",
            "managedFields":[{"time":"2024-02-30T00:00:00Z"},{"time":"2024-01-02T03:04:05.5Z"}]},
            "status":{"conditions":[{"lastHeartbeatTime":"2024-01-02T03:04:05-23:59"}]}}"#,
        // Repeated keys: the last value, whole; key order in the text does not matter.
        r#"{"metadata":{"name":"a","name":"b","labels":{"x":"1","x":"2","a":"0"}},
            "metadata":{"namespace":"n","labels":{"b":"1","a":"2","b":"3"}},"kind":"x","kind":5}"#,
        r#"{"spec":{"ports":[{"port":1,"port":"x"},{"port":"x","port":2}]},"zz":1,"zz":2}"#,
        // FieldsV1: compact, keys sorted, repeats dropped, numbers and strings re-written.
        r#"{"metadata":{"managedFields":[
            {"manager":"m","fieldsV1":{"f:b":{},"f:a":{"x":[1,2.50,-0,1E2,"\u00e9\/"]},"f:a":{"y":null}}},
            {"fieldsV1":"str"},{"fieldsV1":7},{"fieldsV1":null},{"fieldsV1":[true,false,null]},
            {"fieldsV1":{ "a" : [ { } , [ ] ] }}]}}"#,
        // serde_json's RawValue token: as the first key the object is the text of its string.
        r#"{"metadata":{"$serde_json::private::RawValue":"{\"name\":\"raw\",\"labels\":{\"b\":\"1\",\"a\":\"2\",\"b\":\"3\"}}"}}"#,
        r#"{"$serde_json::private::RawValue":"{\"metadata\":{\"name\":\"top\"},\"spec\":{\"ports\":[{\"port\":{\"$serde_json::private::RawValue\":\"80\"}}]}}"}"#,
        r#"{"metadata":{"managedFields":[{"fieldsV1":{"$serde_json::private::RawValue":" {\"f:b\":1,\"f:a\":[1.50]} "}}]}}"#,
        r#"{"metadata":{"\u0024serde_json::private::RawValue":"\"escaped key\""}}"#,
        // Not the first key: an ordinary (unknown) key.
        r#"{"metadata":{"name":"x","$serde_json::private::RawValue":5}}"#,
    ];
    for text in texts {
        agree(text.as_bytes());
    }
}

#[test]
fn text_that_does_not_parse_is_encoded_as_null() {
    let deep = "[".repeat(200) + &"]".repeat(200);
    let texts: &[&[u8]] = &[
        b"",
        b"{",
        br#"{"a":1}x"#,
        br#"{"a":1,}"#,
        br#"{"metadata":{"name":"\ud800"}}"#,
        b"{\"metadata\":{\"name\":\"\xff\"}}",
        b"{\"metadata\":{\"name\":\"a\x01\"}}",
        br#"{"spec":{"ports":[{"port":1e400}]}}"#,
        br#"{"spec":{"ports":[{"port":01}]}}"#,
        br#"{"$serde_json::private::RawValue":5}"#,
        br#"{"$serde_json::private::RawValue":"[1,"}"#,
        br#"{"$serde_json::private::RawValue":"1","b":2}"#,
        deep.as_bytes(),
    ];
    for text in texts {
        assert!(
            serde_json::from_slice::<Value>(text).is_err(),
            "{}",
            String::from_utf8_lossy(text)
        );
        for res in Resource::ALL {
            assert_eq!(
                encode_json(res, text),
                encode_object(res, &Value::Null),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
