//! The fast path against its oracle: a list item as text, taken by a [`ListPreparer`], must give
//! exactly what decoding it into a `Value` gives ([`values_oracle`]), for every kind, whatever
//! the text.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::cache::store::{values_oracle, Hold, ListPreparer, Prepared};
use crate::k8s::Resource;
use crate::upstream::kind::REFLECTED;

fn listed(p: Prepared) -> BTreeMap<ObjectKey, Vec<u8>> {
    match p {
        Prepared::Listed(m) => m
            .into_iter()
            .map(|(k, l)| {
                let bytes = l.whole().expect("listed bytes unpack");
                if let Some(facts) = &l.as_is {
                    facts.check(&bytes).expect("the fast path's contract");
                }
                (k, bytes.to_vec())
            })
            .collect(),
        _ => panic!("a list prepares to Listed"),
    }
}

/// Asserts that `texts` as a list give what their `Value`s give; returns the result.
fn same_as_value_path(kind: Resource, texts: &[&str]) -> BTreeMap<ObjectKey, Vec<u8>> {
    let list = |hold| {
        let mut list = ListPreparer::new(kind, hold);
        texts.iter().for_each(|text| list.push(text));
        list.finish()
    };
    let fast = listed(list(Hold::Whole));
    let values = texts.iter().filter_map(|t| serde_json::from_str(t).ok());
    let slow = listed(values_oracle(kind, values));
    assert_eq!(
        fast, slow,
        "{kind:?}: the fast path differs from the Value path for {texts:?}"
    );
    let packed_only = listed(list(Hold::PackedOnly));
    assert_eq!(
        packed_only, slow,
        "{kind:?}: held packed only, for {texts:?}"
    );
    fast
}

#[test]
fn an_item_is_cleaned_sorted_and_typed() {
    let text = r#"{ "spec": {"z": 1, "a": [3, {"y": null, "b": true}]},
        "metadata": {"resourceVersion": "77", "name": "svc", "namespace": "ns",
                     "managedFields": [{"manager": "kubectl"}], "labels": {"app": "x"}} }"#;
    let out = same_as_value_path(Resource::Services, &[text]);
    let bytes = &out[&ObjectKey::new("ns", "svc")];
    assert_eq!(
        std::str::from_utf8(bytes).unwrap(),
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"labels":{"app":"x"},"name":"svc","namespace":"ns"},"spec":{"a":[3,{"b":true,"y":null}],"z":1}}"#
    );
    // A kind or apiVersion the item names itself must be the resource's: another one, or the
    // wrong scope, is refused (issue 39), on both paths.
    let typed = r#"{"kind":"EndpointSlice","metadata":{"name":"s","namespace":"d"}}"#;
    let out = same_as_value_path(Resource::SlicesV1beta1, &[typed]);
    assert_eq!(
        std::str::from_utf8(&out[&ObjectKey::new("d", "s")]).unwrap(),
        r#"{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{"name":"s","namespace":"d"}}"#
    );
    for refused in [
        r#"{"kind":"Other","metadata":{"name":"s","namespace":"d"}}"#,
        r#"{"apiVersion":"discovery.k8s.io/v1","metadata":{"name":"s","namespace":"d"}}"#,
        r#"{"kind":"EndpointSlice","metadata":{"name":"s"}}"#,
    ] {
        assert!(same_as_value_path(Resource::SlicesV1beta1, &[refused]).is_empty());
        assert!(matches!(
            item(refused, Resource::SlicesV1beta1, &[]),
            Ok(Item::Misfit(..))
        ));
    }
    let node_in_a_namespace = r#"{"metadata":{"name":"n","namespace":"d"}}"#;
    assert!(same_as_value_path(Resource::Nodes, &[node_in_a_namespace]).is_empty());
}

#[test]
fn strings_numbers_and_repeated_keys_come_out_as_from_a_value() {
    let cases = [
        // Escapes of every kind, in values and keys; unicode as is.
        r#"{"metadata":{"name":"a\"b\\c\/d\u00e9\n\t\u0001\ud83d\ude00","namespace":"n\u0073"},"x\u0041":"<&>\u003c"}"#,
        r#"{"metadata":{"name":"é😀","annotations":{"k":"{\"a\":1}"}}}"#,
        // Numbers: negative zero, exponents, floats, beyond u64 and i64.
        r#"{"metadata":{"name":"n"},"a":-0,"b":1.50,"c":1e3,"d":-2.5E-3,"e":18446744073709551616,"f":-9223372036854775809,"g":123456789012345678,"h":0.1}"#,
        // Repeated keys: the last value stays, at its sorted place.
        r#"{"metadata":{"name":"first"},"b":1,"a":2,"b":3,"metadata":{"name":"second","name":"third"}}"#,
        r#"{"metadata":{"name":"r","labels":{"a":"1","a":"2"}},"a":{"x":1},"a":[1]}"#,
        // Fuzz finding: floats that do not survive a second decode and encode.
        r#"{"ba":2,"bmanagedFi":[115,-0,1,-0,100000000000008000000e3],"metadata":{"name":"\u00e9"}}"#,
        // Pretty-printed, empty containers, nesting.
        "{\n  \"metadata\" : { \"name\" : \"p\" } ,\n  \"list\" : [ [ ], { }, [ [ 1 ] ] ]\n}",
    ];
    for kind in Resource::ALL {
        for text in cases {
            same_as_value_path(kind, &[text]);
        }
    }
    let out = same_as_value_path(Resource::Nodes, &[cases[3]]);
    assert!(out.contains_key(&ObjectKey::new("", "third")), "{out:?}");
}

#[test]
fn what_the_value_path_drops_is_dropped() {
    let dropped = [
        r#"[1,2]"#,
        r#""text""#,
        r#"null"#,
        r#"{"spec":{}}"#,
        r#"{"metadata":null}"#,
        r#"{"metadata":[{"name":"a"}]}"#,
        r#"{"metadata":{"name":""}}"#,
        r#"{"metadata":{"name":7}}"#,
        r#"{"metadata":{"namespace":"a"}}"#,
    ];
    for kind in Resource::ALL {
        for text in dropped {
            assert!(same_as_value_path(kind, &[text]).is_empty(), "{text}");
        }
    }
    // Excluded by a label, except Nodes; a namespace of another type counts as none.
    let headless = r#"{"metadata":{"name":"h","namespace":"d","labels":{"service.kubernetes.io/headless":""}}}"#;
    assert!(same_as_value_path(Resource::Services, &[headless]).is_empty());
    let headless_node =
        r#"{"metadata":{"name":"h","labels":{"service.kubernetes.io/headless":""}}}"#;
    assert_eq!(
        same_as_value_path(Resource::Nodes, &[headless_node]).len(),
        1
    );
    let odd_ns = r#"{"metadata":{"name":"o","namespace":5,"labels":"x"}}"#;
    assert!(same_as_value_path(Resource::Nodes, &[odd_ns]).contains_key(&ObjectKey::new("", "o")));
}

#[test]
fn bad_json_is_skipped_and_the_rest_of_the_list_kept() {
    let good = r#"{"metadata":{"name":"ok","namespace":"d"}}"#;
    let bad = [
        "",
        "{",
        r#"{"metadata":{"name":"x"}} trailing"#,
        r#"{"metadata":{"name":"x"},}"#,
        "{\"metadata\":{\"name\":\"ctl\u{1}\"}}",
        r#"{"a":1e400,"metadata":{"name":"x"}}"#,
        r#"{"a":"\ud800","metadata":{"name":"x"}}"#,
        &format!("{}{}", "[".repeat(200), "]".repeat(200)),
    ];
    for text in bad {
        let out = same_as_value_path(Resource::Services, &[text, good]);
        assert_eq!(out.len(), 1, "{text}");
        assert!(matches!(
            item(text, Resource::Services, &[]),
            Err(_) | Ok(Item::Dropped)
        ));
    }
    // Duplicate objects in one list: the last one stays.
    let twice = [
        r#"{"metadata":{"name":"d","namespace":"n"},"v":1}"#,
        r#"{"metadata":{"name":"d","namespace":"n"},"v":2}"#,
    ];
    let out = same_as_value_path(Resource::Services, &twice);
    assert!(String::from_utf8_lossy(&out[&ObjectKey::new("n", "d")]).contains(r#""v":2"#));
}

#[test]
fn an_embedded_raw_value_token_takes_the_value_path() {
    let text = r#"{"metadata":{"name":"t"},"x":{"$serde_json::private::RawValue":"[1, 2]"}}"#;
    assert!(matches!(
        item(text, Resource::Services, &[]),
        Ok(Item::Slow)
    ));
    same_as_value_path(Resource::Services, &[text]);
}

/// A small deterministic generator (xorshift) of JSON texts with few distinct keys, so that
/// objects come unsorted and with repeats, and with every kind of scalar.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
    fn value(&mut self, depth: u32) -> String {
        const SCALARS: [&str; 14] = [
            "null",
            "true",
            "false",
            "0",
            "-0",
            "7",
            "-12",
            "2.50",
            "1e2",
            "\"s\"",
            "\"\\u00e9\\n\"",
            "99999999999999999999",
            "\"node-00042.zone-b.example\"",
            "\"a quote \\\" and a \\\\ in 8+4+3\"",
        ];
        match (depth, self.next() % 4) {
            (0, _) | (_, 0) => self.pick(&SCALARS).to_string(),
            (_, 1) => {
                let n = self.next() % 4;
                let items: Vec<String> = (0..n).map(|_| self.value(depth - 1)).collect();
                format!("[{}]", items.join(","))
            }
            _ => self.object(depth - 1, false),
        }
    }
    fn object(&mut self, depth: u32, top: bool) -> String {
        const KEYS: [&str; 11] = [
            "b",
            "a",
            "kind",
            "x\\u0079",
            "spec",
            "labels",
            "é",
            "name",
            "endpoints",
            "hints",
            "nodeName",
        ];
        let mut entries = Vec::new();
        if top {
            let name = self.pick(&["\"n1\"", "\"n2\"", "\"\"", "3"]);
            let labels = self.pick(&[
                "{}",
                r#"{"service.kubernetes.io/service-proxy-name":"p"}"#,
                r#"{"app":"a","app":"b"}"#,
            ]);
            let meta = format!(
                r#"{{"resourceVersion":"9","labels":{labels},"name":{name},"managedFields":[1]}}"#
            );
            entries.push(format!(r#""metadata":{meta}"#));
        }
        for _ in 0..self.next() % 5 {
            let key = self.pick(&KEYS);
            entries.push(format!("\"{key}\":{}", self.value(depth)));
        }
        let at = (self.next() % (entries.len() as u64 + 1)) as usize;
        let len = entries.len();
        entries.rotate_left(at.min(len));
        format!("{{{}}}", entries.join(","))
    }
}

/// The tree's string writer against serde_json's, on every string of up to 19 characters
/// over an alphabet of what needs escaping and what does not (each length takes the writer's
/// eight- and four-byte copies and the bytes after them differently).
#[test]
fn strings_are_written_as_serde_json_writes_them() {
    let alphabet = ['a', '"', '\\', '\n', '\u{1f}', '\u{7f}', 'é', '€', '/'];
    let mut gen = Gen(0x2545_f491_4f6c_dd1d);
    for len in 0..20 {
        for _ in 0..200 {
            let s: String = (0..len)
                .map(|_| alphabet[(gen.next() % alphabet.len() as u64) as usize])
                .collect();
            let mut out = b"x".to_vec();
            tree::write_str(&mut out, &s).expect("writes");
            let want = serde_json::to_vec(&s).expect("serializes");
            assert_eq!(out[1..], want[..], "{s:?}");
        }
    }
}

/// The decoder's tree keeps its buffers from one item's text to the next: reading an item of
/// the same shape again allocates nothing.
#[test]
fn the_tree_keeps_its_buffers_between_items() {
    let text = r#"{"a":[1,2,{"b":[3,4,5]}],"c":{"d":1,"e":2,"f":[{}]}}"#.to_string();
    let mut tree = tree::Tree::default();
    let root = tree.read(&text).expect("JSON");
    let mut out = Vec::new();
    tree.write(&mut out, &root).expect("writes");
    assert_eq!(out, text.as_bytes());
    let capacities = |t: &tree::Tree<'_>| t.capacities();
    let grown = capacities(&tree);
    assert!(grown.iter().all(|&c| c > 0), "{grown:?}");
    let other = text.clone();
    let mut next: tree::Tree<'_> = tree.recycle();
    assert_eq!(capacities(&next), grown);
    let root = next.read(&other).expect("JSON");
    assert_eq!(capacities(&next), grown);
    out.clear();
    next.write(&mut out, &root).expect("writes");
    assert_eq!(out, other.as_bytes());
}

/// A decoder that lives on (the cache's, for recomputing stored objects) keeps its buffers
/// for items of a usual size and lets go of those an outsized item grew.
#[test]
fn a_decoder_keeps_no_outsized_buffers() {
    let mut d = Decoder::default();
    let small = r#"{"metadata":{"name":"a"},"subsets":[{"addresses":[{"ip":"1"}]}]}"#;
    d.item(small, Resource::Endpoints, &[]).expect("JSON");
    d.shrink();
    let kept = format!("{d:?}").len();
    let addrs: Vec<String> = (0..20_000).map(|i| format!(r#"{{"ip":"{i}"}}"#)).collect();
    let large = format!(
        r#"{{"metadata":{{"name":"a"}},"subsets":[{{"addresses":[{}]}}]}}"#,
        addrs.join(",")
    );
    d.item(&large, Resource::Endpoints, &[]).expect("JSON");
    d.shrink();
    assert_eq!(format!("{d:?}"), format!("{:?}", Decoder::default()));
    d.item(small, Resource::Endpoints, &[]).expect("JSON");
    d.shrink();
    assert_eq!(format!("{d:?}").len(), kept);
}

#[test]
fn generated_items_agree_with_the_value_path() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for round in 0..3000 {
        let text = g.object(3, true);
        let kind = REFLECTED[round % REFLECTED.len()];
        same_as_value_path(kind, &[&text]);
    }
}

#[test]
fn scale_objects_agree_with_the_value_path() {
    let slice = json!({"metadata":{"name":"s","namespace":"d","resourceVersion":"5",
        "labels":{"kubernetes.io/service-name":"svc"}},"addressType":"IPv4",
        "endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true},"nodeName":"n1",
        "hints":{"forZones":[{"name":"z"}]},"zone":"z"}],"ports":[{"port":80,"protocol":"TCP"}]});
    same_as_value_path(Resource::SlicesV1, &[&slice.to_string()]);
}

/// `v` as a list item of `res`, its facts (in a namespace when `res` is namespaced and `v` has
/// none: an item without one is refused).
fn facts_of(v: &Value, res: Resource) -> Option<AsIs> {
    let mut v = v.clone();
    if res.namespaced() && v["metadata"]["namespace"].is_null() {
        v["metadata"]["namespace"] = json!("d");
    }
    match item(&v.to_string(), res, &[]) {
        Ok(Item::Kept(_, bytes, facts)) => {
            if let Some(f) = &facts {
                f.check(&bytes).expect("the fast path's contract");
            }
            facts
        }
        other => panic!("{v}: {other:?}"),
    }
}

#[test]
fn endpoint_objects_carry_what_serving_them_as_they_came_needs() {
    let eps = json!([{"addresses":["10.0.0.1"],"nodeName":"n1"},
        {"addresses":["10.0.0.2"],"deprecatedTopology":{"kubernetes.io/hostname":"n2"}},
        {"addresses":["10.0.0.3"],"nodeName":"","topology":{"kubernetes.io/hostname":"n3"}},
        {"addresses":["10.0.0.4"],"nodeName":7}, 5, {"addresses":["10.0.0.5"]}]);
    let slice = |meta: Value| json!({"metadata": meta, "addressType": "IPv4", "endpoints": eps});
    // A key sorting after resourceVersion: the stamp goes before it.
    let f = facts_of(
        &slice(
            json!({"name":"a","namespace":"ns","uid":"u","resourceVersion":"3",
            "labels":{"kubernetes.io/service-name":"svc","x":"é"}}),
        ),
        Resource::SlicesV1,
    )
    .expect("servable as it came");
    assert_eq!(f.comma, Comma::After);
    assert_eq!(f.service, Some(ObjectKey::new("ns", "svc")));
    let nodes: Vec<&str> = f.nodes.iter().map(String::as_str).collect();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    // None after it: last. Labels of other types, or `labels` not an object, are no labels.
    for meta in [
        json!({"name":"b","labels":{"kubernetes.io/service-name":""}}),
        json!({"name":"c","labels":{"n":1,"kubernetes.io/service-name":"s"}}),
        json!({"name":"d","labels":"x"}),
    ] {
        let f = facts_of(&slice(meta), Resource::SlicesV1).expect("servable as it came");
        assert_eq!(f.comma, Comma::Before);
    }
    // core/v1 Endpoints: both address lists.
    let ep = json!({"metadata":{"name":"e","namespace":"d"},
        "subsets":[{"addresses":[{"ip":"10.0.0.1","nodeName":"n1"}],
                    "notReadyAddresses":[{"ip":"10.0.0.2","nodeName":"n2"},{"ip":"10.0.0.3"}, 1]},
                   {"ports":[{"port":80}]}, "x"]});
    let f = facts_of(&ep, Resource::Endpoints).expect("servable as it came");
    assert_eq!(f.nodes.len(), 2);
    // Not when serving changes more than the stamp, nor for other resources (an item of
    // another kind or apiVersion is refused: `an_item_is_cleaned_sorted_and_typed`).
    let none = [
        (
            json!({"metadata":{"name":"a"},"spec":{}}),
            Resource::Endpoints,
        ),
        (slice(json!({"name":"a"})), Resource::SlicesV1beta1),
        (json!({"metadata":{"name":"a"}}), Resource::Services),
        // A float (fuzz finding: `1e23`-like numbers do not survive decode and encode twice).
        (
            slice(json!({"name":"a"}))
                .as_object()
                .map_or(json!(null), |m| {
                    let mut m = m.clone();
                    m.insert("x".into(), json!([1, -0.0, 1.000_000_000_000_08e23]));
                    Value::Object(m)
                }),
            Resource::SlicesV1,
        ),
        (json!({"metadata":{"name":"a"}}), Resource::Nodes),
    ];
    for (v, res) in none {
        assert!(facts_of(&v, res).is_none(), "{v} as {res:?}");
    }
}

#[test]
fn a_topology_slice_is_pruned_on_its_bytes_as_on_its_value() {
    // hints first of several, alone, last; a node from deprecatedTopology; an empty nodeName;
    // elements that are not objects; escaped keys.
    let eps = json!([
        {"addresses":["10.0.0.1"],"nodeName":"n1","hints":{"forZones":[{"name":"z"}]}},
        {"hints":{"forZones":[]}},
        {"addresses":["10.0.0.2"],"deprecatedTopology":{"kubernetes.io/hostname":"n2"},
         "hints":{"forZones":[{"name":"a\"b"}]},"zone":"z"},
        {"addresses":["10.0.0.3"],"nodeName":"","deprecatedTopology":{"kubernetes.io/hostname":"n3"}},
        7, [1], null,
        {"a\"é":1,"hints":2,"nodeName":"n4"}
    ]);
    let v = json!({"metadata":{"name":"a","namespace":"ns","uid":"u",
        "labels":{"kubernetes.io/service-name":"svc"}},"addressType":"IPv4","endpoints":eps,
        "ports":[{"port":80}]});
    let f = facts_of(&v, Resource::SlicesV1).expect("servable as it came");
    let spans = f.endpoints().expect("spans of the endpoints array");
    let bytes = match item(&v.to_string(), Resource::SlicesV1, &[]) {
        Ok(Item::Kept(_, bytes, _)) => bytes,
        other => panic!("{other:?}"),
    };
    let nodes: Vec<Option<&str>> = spans.items.iter().map(|e| e.node(&bytes)).collect();
    assert_eq!(
        nodes,
        [
            Some("n1"),
            None,
            Some("n2"),
            Some("n3"),
            None,
            None,
            None,
            Some("n4")
        ]
    );
    let value: Value = serde_json::from_slice(&bytes).expect("JSON");
    // Every subset of the 8 endpoints kept: the bytes are what the Value path gives.
    for mask in 0u32..256 {
        let keep: Vec<bool> = (0..8).map(|i| mask & (1 << i) != 0).collect();
        let mut want = spans.check(&bytes, &value, &keep).expect("nodes agree");
        crate::cache::collection::stamp_rv(&mut want, 77);
        let want = serde_json::to_vec(&want).expect("serializes");
        assert_eq!(f.pruned(&bytes, &keep, 77), Some(want), "mask {mask:08b}");
    }
    // A keep of another length, or a span one byte off, is refused or caught.
    assert_eq!(f.pruned(&bytes, &[true], 77), None);
    let mut off = f.clone();
    if let Some(s) = off.endpoints_mut() {
        s.items[0].node.0 += 1;
    }
    assert!(off.check(&bytes).is_err(), "a wrong node span is caught");
    // A node name that serializing escapes: no spans (the Value path), the rest as before.
    let quoted = json!({"metadata":{"name":"q","namespace":"d"},"endpoints":[{"nodeName":"a\"b"}]});
    let f = facts_of(&quoted, Resource::SlicesV1).expect("servable");
    assert!(f.spans.is_none());
    // An empty array; no endpoints key, or null: no spans (the Value path inserts `[]`).
    let empty = json!({"metadata":{"name":"e"},"endpoints":[]});
    let f = facts_of(&empty, Resource::SlicesV1).expect("servable");
    assert_eq!(f.endpoints().map(|s| s.items.len()), Some(0));
    for v in [
        json!({"metadata":{"name":"e"}}),
        json!({"metadata":{"name":"e"},"endpoints":null}),
    ] {
        let f = facts_of(&v, Resource::SlicesV1).expect("servable");
        assert!(f.spans.is_none(), "{v}");
    }
}

#[test]
fn generated_slices_prune_as_their_values() {
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    const FIELDS: [&str; 7] = [
        "addresses",
        "nodeName",
        "hints",
        "deprecatedTopology",
        "zone",
        "conditions",
        "hin\\u0074s",
    ];
    let mut spans_seen = 0;
    for _ in 0..2000 {
        let mut eps = Vec::new();
        for _ in 0..g.next() % 6 {
            let mut fields = Vec::new();
            for _ in 0..g.next() % 5 {
                let f = g.pick(&FIELDS);
                let v = match f {
                    "nodeName" => g.pick(&["\"n1\"", "\"\"", "\"n\\u0032\"", "3"]).to_string(),
                    "deprecatedTopology" => g
                        .pick(&[r#"{"kubernetes.io/hostname":"n3"}"#, r#"{"x":"y"}"#, "[]"])
                        .to_string(),
                    _ => g
                        .pick(&["{}", "[1]", "\"z\"", r#"{"forZones":[{"name":"z"}]}"#])
                        .to_string(),
                };
                fields.push(format!("\"{f}\":{v}"));
            }
            eps.push(if g.next() % 8 == 0 {
                "7".to_string()
            } else {
                format!("{{{}}}", fields.join(","))
            });
        }
        let text = format!(
            r#"{{"ports":[],"endpoints":[{}],"metadata":{{"name":"s","namespace":"d","uid":"u"}},"addressType":"IPv4"}}"#,
            eps.join(",")
        );
        match item(&text, Resource::SlicesV1, &[]) {
            Ok(Item::Kept(_, bytes, Some(f))) => {
                f.check(&bytes).expect("the fast path's contract");
                let n = f.endpoints().map_or(0, |s| s.items.len());
                spans_seen += n;
                let value: Value = serde_json::from_slice(&bytes).expect("JSON");
                let spans = f.endpoints().expect("an endpoints array");
                for mask in [0u32, !0, 0b0101_0101, 0b1010_1010] {
                    let keep: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
                    let mut want = spans.check(&bytes, &value, &keep).expect("nodes agree");
                    crate::cache::collection::stamp_rv(&mut want, 5);
                    let want = serde_json::to_vec(&want).expect("serializes");
                    assert_eq!(f.pruned(&bytes, &keep, 5), Some(want), "{text}");
                }
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(
        spans_seen > 2000,
        "the generator made endpoints: {spans_seen}"
    );
}

#[test]
fn an_apiserver_ordered_slice_agrees_with_the_value_path() {
    // Go struct field order, as an apiserver writes a list item (no kind/apiVersion), with a
    // repeated key; sorted in place.
    let text = r#"{"metadata":{"name":"s","generateName":"s-","namespace":"d","uid":"u","resourceVersion":"7","generation":3,"labels":{"kubernetes.io/service-name":"svc","a":"1"},"ownerReferences":[{"apiVersion":"v1","kind":"Service","name":"svc","uid":"w","controller":true}]},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true,"serving":true,"terminating":false},"targetRef":{"kind":"Pod","namespace":"d","name":"p"},"nodeName":"n1","zone":"z","hints":{"forZones":[{"name":"z"}]},"zone":"y"}],"ports":[{"name":"http","protocol":"TCP","port":80}]}"#;
    same_as_value_path(Resource::SlicesV1, &[text]);
    let v: Value = serde_json::from_str(text).expect("JSON");
    let f = facts_of(&v, Resource::SlicesV1).expect("servable as it came");
    assert_eq!(f.endpoints().map(|s| s.items.len()), Some(1));
}

mod addresses;
