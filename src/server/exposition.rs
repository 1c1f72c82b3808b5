//! A checker of the Prometheus text exposition format, for the tests of `/metrics` (unit and
//! integration): the format is an interface operators scrape, so its rules are checked, not
//! assumed. Pure.

use std::collections::{BTreeMap, BTreeSet};

/// The family a sample belongs to: its own name, or for a histogram's `_bucket`, `_sum` and
/// `_count` (a summary's `_sum` and `_count`) the base name.
fn family_of<'a>(name: &'a str, types: &BTreeMap<String, String>) -> &'a str {
    if types.contains_key(name) {
        return name;
    }
    for (suffix, kinds) in [
        ("_bucket", &["histogram"][..]),
        ("_sum", &["histogram", "summary"][..]),
        ("_count", &["histogram", "summary"][..]),
    ] {
        if let Some(base) = name.strip_suffix(suffix) {
            if types.get(base).is_some_and(|t| kinds.contains(&t.as_str())) {
                return base;
            }
        }
    }
    name
}

/// Checks the text exposition format: every sample line is `name{labels} value` with a
/// valid name, quoted label values and a number; every family has exactly one `# TYPE`
/// (before its samples, which are contiguous) and at most one `# HELP`; counters end in
/// `_total`; no series appears twice. Returns the families and their types.
pub fn check_exposition(text: &str) -> Result<BTreeMap<String, String>, String> {
    let valid_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let (mut types, mut helps) = (BTreeMap::new(), BTreeSet::new());
    let (mut series, mut done) = (BTreeSet::new(), BTreeSet::new());
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (word, name, tail) = (p.next(), p.next().unwrap_or(""), p.next());
            if !valid_name(name) || tail.is_none_or(str::is_empty) {
                return Err(format!("bad comment line {line:?}"));
            }
            let tail = tail.unwrap_or("");
            if word == Some("TYPE") {
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail) {
                    return Err(format!("bad type in {line:?}"));
                }
                if tail == "counter" && !name.ends_with("_total") {
                    return Err(format!("counter without _total: {line:?}"));
                }
                if types.insert(name.to_string(), tail.to_string()).is_some() {
                    return Err(format!("second TYPE for {name}"));
                }
                if current != name {
                    done.insert(std::mem::replace(&mut current, name.to_string()));
                }
            } else if word == Some("HELP") && !helps.insert(name.to_string()) {
                return Err(format!("second HELP for {name}"));
            }
            continue;
        }
        let (head, value) = line.rsplit_once(' ').ok_or(format!("no value: {line:?}"))?;
        let value_ok = value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value);
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (
                n,
                l.strip_suffix('}').ok_or(format!("bad labels: {line:?}"))?,
            ),
            None => (head, ""),
        };
        let labels_ok = labels.is_empty()
            || labels.strip_suffix('"').is_some_and(|l| {
                l.split("\",").all(|kv| {
                    kv.split_once("=\"")
                        .is_some_and(|(k, v)| valid_name(k) && !v.contains('"'))
                })
            });
        if !value_ok || !valid_name(name) || !labels_ok {
            return Err(format!("bad sample line {line:?}"));
        }
        let family = family_of(name, &types);
        if !types.contains_key(family) || done.contains(family) || family != current {
            return Err(format!("sample of {name} outside its family: {line:?}"));
        }
        if !series.insert(head.to_string()) {
            return Err(format!("duplicate series {head}"));
        }
    }
    Ok(types)
}
