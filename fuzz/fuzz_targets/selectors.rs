//! Query strings, label and field selectors: parse, then match against labels from the input.
#![no_main]
use std::collections::BTreeMap;

use grid_wrapper::api::query;
use grid_wrapper::api::selector::{FieldSelector, LabelSelector};
use grid_wrapper::k8s::Resource;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    for res in Resource::ALL {
        let _ = query::parse(s, res.selectable_fields());
    }
    let (sel, labels_src) = s.split_once('\n').unwrap_or((s, "a=b,c=,d=e"));
    let labels: BTreeMap<String, String> = labels_src
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Ok(l) = LabelSelector::parse(sel) {
        let _ = l.matches(&labels);
    }
    if let Ok(f) = FieldSelector::parse(sel, Resource::Services.selectable_fields()) {
        let _ = f.matches(|name| labels.get(name).map(String::as_str));
        let _ = f.required("metadata.name");
    }
});
