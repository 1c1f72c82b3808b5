//! Edge-health's `localinfo` answer, parsed (docs/SEMANTICS.md §10): the map that the poller
//! (`upstream::edge_health`) hands to the cache: a hand-off type, which both sides import. Pure.
//!
//! The answer is a JSON object `{"<key>": {"normal": bool, "hmac": "...", "time": n}, ...}`.
//! Keys are node names (the original edge-health) or node InternalIPs (edge-health since superedge
//! PR #454). Decisions fixed here:
//!
//! - The top level must be an object, else the whole answer is an error (the caller then clears
//!   the map, keeping every endpoint).
//! - An entry whose value is not an object with a boolean `normal` (and an empty key) is
//!   ignored: that key is treated as absent from the answer, so its node's endpoints are kept.
//!   `hmac` and `time` are not checked.
//! - Keys that parse as IP literals are kept in canonical form ([`canonical`]: `fd00:0::1` =
//!   `fd00::1`), the form in which the cache compares them with node addresses; anything else
//!   is kept as given.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

/// Edge-health's answer: key (node name or IP) → `normal`. Empty = nothing known (all kept).
pub type EdgeHealthMap = BTreeMap<String, bool>;

/// Parses edge-health's `localinfo` body. `Err` (with the reason) when the body is not JSON or
/// its top level is not an object; unusable entries are skipped (see the module doc).
pub fn parse(body: &[u8]) -> Result<EdgeHealthMap, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(entries) = value else {
        return Err(format!("top level is {}, not an object", json_type(&value)));
    };
    let mut map = EdgeHealthMap::new();
    let mut ignored = 0usize;
    for (key, entry) in entries {
        match entry.get("normal").and_then(Value::as_bool) {
            Some(normal) if !key.is_empty() => {
                map.insert(canonical(&key), normal);
            }
            _ => ignored += 1,
        }
    }
    if ignored > 0 {
        log::debug!("edge-health: ignored {ignored} entries without a boolean \"normal\"");
    }
    Ok(map)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` in canonical form if it is an IP literal, else unchanged.
pub fn canonical(text: &str) -> String {
    match text.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, bool)]) -> EdgeHealthMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn parse_accepts_edge_health_answers() {
        let body = br#"{
            "10.0.0.2": {"normal": false, "hmac": "ab", "time": 1700000000},
            "n3": {"normal": true, "hmac": "cd", "time": 1700000000},
            "fd00:0::1": {"normal": false}
        }"#;
        let got = parse(body).unwrap();
        assert_eq!(
            got,
            map(&[("10.0.0.2", false), ("n3", true), ("fd00::1", false)])
        );
        assert_eq!(parse(b"{}").unwrap(), EdgeHealthMap::new());
    }

    #[test]
    fn parse_ignores_unusable_entries() {
        let body = json!({
            "a": {"normal": "false"},
            "b": {"normal": null},
            "c": {},
            "d": [],
            "e": true,
            "f": null,
            "": {"normal": false},
            "g": {"normal": false, "hmac": 7, "time": "x"},
        })
        .to_string();
        assert_eq!(parse(body.as_bytes()).unwrap(), map(&[("g", false)]));
    }

    #[test]
    fn parse_rejects_non_objects_and_garbage() {
        for body in [
            &b""[..],
            b"not json",
            b"[]",
            b"null",
            b"3",
            b"\"x\"",
            b"{\"a\":",
            b"{} trailing",
            b"\xff\xfe",
        ] {
            assert!(parse(body).is_err(), "{:?}", String::from_utf8_lossy(body));
        }
    }
}
