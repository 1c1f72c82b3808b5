//! core/v1 Endpoints pruned on their bytes (`canonical/addresses.rs`) against the `Value` path.

use serde_json::{json, Value};

use super::{facts_of, Gen};
use crate::cache::canonical::{item, AsIs, Item};
use crate::k8s::Resource;

/// `v`'s canonical bytes, facts and decoded canonical value, as an Endpoints list item.
fn read(v: &str) -> (std::sync::Arc<[u8]>, AsIs, Value) {
    match item(v, Resource::Endpoints, &[]) {
        Ok(Item::Kept(_, bytes, Some(f))) => {
            f.check(&bytes).expect("the fast path's contract");
            let value = serde_json::from_slice(&bytes).expect("JSON");
            (bytes, f, value)
        }
        other => panic!("{v}: {other:?}"),
    }
}

/// For each `keep`: the pruned bytes are the `Value` filtered the same way, stamped.
fn prunes_as_its_value(bytes: &[u8], f: &AsIs, value: &Value, keeps: &[Vec<bool>]) {
    let spans = f.addresses().expect("spans of subsets");
    for keep in keeps {
        let mut want = spans.check(bytes, value, keep).expect("nodes agree");
        crate::cache::collection::stamp_rv(&mut want, 77);
        let want = serde_json::to_vec(&want).expect("serializes");
        assert_eq!(f.pruned(bytes, keep, 77), Some(want), "{value} {keep:?}");
    }
}

#[test]
fn an_endpoints_object_is_pruned_on_its_bytes_as_on_its_value() {
    // Both lists; an address without a node, with an empty one, one that is not an object, an
    // escaped key; a subset that is not an object, one whose list is not an array, one empty,
    // a list that came empty.
    let v = json!({"metadata":{"name":"e","namespace":"d","uid":"u","resourceVersion":"9"},
    "subsets":[
        {"addresses":[{"ip":"10.0.0.1","nodeName":"n1"},{"ip":"10.0.0.2"},
                      {"ip":"10.0.0.3","nodeName":"","a\"é":1}],
         "notReadyAddresses":[{"ip":"10.0.0.4","nodeName":"n2","targetRef":{"nodeName":"x"}}, 1],
         "ports":[{"port":80}]},
        "x",
        {"addresses":null,"notReadyAddresses":[{"nodeName":"n3"}]},
        {},
        {"addresses":[],"ports":[]}
    ]});
    let (bytes, f, value) = read(&v.to_string());
    let spans = f.addresses().expect("spans of subsets");
    let nodes: Vec<Option<&str>> = spans.nodes(&bytes).collect();
    assert_eq!(
        nodes,
        [Some("n1"), None, None, Some("n2"), None, Some("n3")]
    );
    let keeps: Vec<Vec<bool>> = (0u32..64)
        .map(|mask| (0..6).map(|i| mask & (1 << i) != 0).collect())
        .collect();
    prunes_as_its_value(&bytes, &f, &value, &keeps);
    // Nothing kept: every list goes, every subset stays (docs/SEMANTICS.md §2.4), `ports`
    // untouched.
    let none = f.pruned(&bytes, &[false; 6], 5).expect("pruned");
    let none: Value = serde_json::from_slice(&none).expect("JSON");
    assert_eq!(
        none["subsets"],
        json!([{"ports":[{"port":80}]}, "x", {"addresses":null}, {}, {"ports":[]}])
    );
    // A keep of another length, or a span one byte off, is refused or caught.
    assert_eq!(f.pruned(&bytes, &[true], 77), None);
    let mut off = f.clone();
    if let Some(a) = off.addresses_mut() {
        a.shift_first_item(1);
    }
    assert!(off.check(&bytes).is_err(), "a wrong address span is caught");
}

#[test]
fn endpoints_without_usable_spans_take_the_value_path() {
    // A node name that serializing escapes; no subsets, or not an array.
    for v in [
        json!({"metadata":{"name":"q","namespace":"d"},"subsets":[{"addresses":[{"nodeName":"a\"b"}]}]}),
        json!({"metadata":{"name":"q","namespace":"d"}}),
        json!({"metadata":{"name":"q","namespace":"d"},"subsets":null}),
        json!({"metadata":{"name":"q","namespace":"d"},"subsets":{"addresses":[]}}),
    ] {
        let f = facts_of(&v, Resource::Endpoints).expect("servable as it came");
        assert!(f.spans.is_none(), "{v}");
        assert!(f.keep_by(&[b' '; 1 << 20], |_| true).is_none(), "{v}");
    }
    // Empty subsets: spans, nothing to keep.
    let f = facts_of(
        &json!({"metadata":{"name":"q","namespace":"d"},"subsets":[]}),
        Resource::Endpoints,
    )
    .expect("servable as it came");
    assert_eq!(f.addresses().map(|a| a.len()), Some(0));
}

#[test]
fn generated_endpoints_prune_as_their_values() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15 ^ 0xe9);
    const SUBSET_FIELDS: [&str; 5] = [
        "addresses",
        "notReadyAddresses",
        "ports",
        "notReadyAddresse\\u0073",
        "x",
    ];
    const ADDRESS_FIELDS: [&str; 5] = ["ip", "nodeName", "hostname", "targetRef", "nodeNam\\u0065"];
    let mut seen = 0;
    for _ in 0..2000 {
        let mut subsets = Vec::new();
        for _ in 0..g.next() % 4 {
            if g.next() % 8 == 0 {
                subsets.push("7".to_string());
                continue;
            }
            let mut fields = Vec::new();
            for _ in 0..g.next() % 4 {
                let f = g.pick(&SUBSET_FIELDS);
                let list = if f.starts_with("notReady") || f == "addresses" {
                    let mut addrs = Vec::new();
                    for _ in 0..g.next() % 4 {
                        let mut a = Vec::new();
                        for _ in 0..g.next() % 4 {
                            let k = g.pick(&ADDRESS_FIELDS);
                            let v =
                                g.pick(&["\"n1\"", "\"\"", "\"n\\u0032\"", "3", "{}", "\"n3\""]);
                            a.push(format!("\"{k}\":{v}"));
                        }
                        addrs.push(match g.next() % 10 {
                            0 => "null".to_string(),
                            _ => format!("{{{}}}", a.join(",")),
                        });
                    }
                    format!("[{}]", addrs.join(","))
                } else {
                    g.pick(&["[]", "{}", "null", "[{\"port\":80}]"]).to_string()
                };
                fields.push(format!("\"{f}\":{list}"));
            }
            subsets.push(format!("{{{}}}", fields.join(",")));
        }
        let text = format!(
            r#"{{"subsets":[{}],"metadata":{{"name":"s","namespace":"d","uid":"u","resourceVersion":"3"}}}}"#,
            subsets.join(",")
        );
        let (bytes, f, value) = read(&text);
        let n = f.addresses().map_or(0, |s| s.len());
        seen += n;
        let keeps: Vec<Vec<bool>> = [0u32, !0, 0b0101_0101, 0b1010_1010, 0b0011_0110]
            .iter()
            .map(|mask| (0..n).map(|i| mask & (1 << (i % 32)) != 0).collect())
            .collect();
        prunes_as_its_value(&bytes, &f, &value, &keeps);
    }
    assert!(seen > 2000, "the generator made addresses: {seen}");
}
