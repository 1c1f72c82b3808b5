//! List/watch query options (docs/SEMANTICS.md §1, §6): parsing and validation. Pure.
//!
//! This module owns the reading of a collection request's raw query string (the part after
//! `?`, still percent-encoded) into [`ListOptions`], and every 400/422 decision that depends on
//! the query alone. Decisions that need the cache (resourceVersion too old, `Exact` RV
//! mismatch) belong to the handlers.

use crate::api::selector::{FieldSelector, LabelSelector};
use crate::k8s::status::ApiError;

/// How a request's `resourceVersion` is to be matched (`resourceVersionMatch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RvMatch {
    /// `NotOlderThan`: any state at least as new as the given RV.
    NotOlderThan,
    /// `Exact`: exactly the given RV.
    Exact,
}

/// The options of one LIST or WATCH request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// The request is a watch: `watch` present with a value other than `0`/`false`.
    pub watch: bool,
    /// `labelSelector` (everything when absent).
    pub label_selector: LabelSelector,
    /// `fieldSelector` (everything when absent).
    pub field_selector: FieldSelector,
    /// `resourceVersion` as sent (possibly empty); `None` when absent.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`; `None` when absent or empty.
    pub resource_version_match: Option<RvMatch>,
    /// `sendInitialEvents`; `None` when absent.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks` (false when absent).
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds` when positive; `None` when absent or 0 (the default lifetime); `Some(0)`
    /// when negative (the apiserver's timer has already fired: the watch ends at once).
    pub timeout_seconds: Option<u64>,
}

/// Message of the 400 answered to a LIST carrying a `continue` token.
pub const CONTINUE_UNSUPPORTED: &str =
    "continue tokens are not supported: grid-wrapper always returns the full list";

/// Parses and validates the raw query string of a collection request. `supported_fields`: the
/// field names the resource allows in `fieldSelector` (`Resource::selectable_fields`).
///
/// Errors: 400 `BadRequest` for undecodable input (bad `%` escape, `;` separator, invalid
/// boolean, non-integer `timeoutSeconds`, selector syntax, unsupported field, `continue` on a
/// LIST); 422 `Invalid` for the `sendInitialEvents` / `resourceVersionMatch` rules of the
/// apiserver's `ValidateListOptions`.
pub fn parse(query: &str, supported_fields: &[&str]) -> Result<ListOptions, ApiError> {
    let params = decode_query(query)?;
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };

    // Convert_Slice_string_To_bool: only "0" and "false" (any case) are false; "" is true.
    let watch = get("watch").is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"));
    let allow_watch_bookmarks = parse_bool("allowWatchBookmarks", get("allowWatchBookmarks"))?;
    let send_initial_events = parse_bool("sendInitialEvents", get("sendInitialEvents"))?;
    let timeout_seconds = match get("timeoutSeconds") {
        None => None,
        Some(v) => {
            let secs: i64 = v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for timeoutSeconds: {v:?}: must be an integer"
                ))
            })?;
            // The apiserver's watch handler: 0 means its default lifetime; a negative value
            // is a timer that has already fired, so the watch ends at once.
            match secs {
                0 => None,
                s if s < 0 => Some(0),
                s => u64::try_from(s).ok(),
            }
        }
    };
    // The cache never paginates, but the apiserver refuses a `limit` that is not an integer
    // (a negative one means no limit there, as it does here).
    if let Some(v) = get("limit") {
        if v.parse::<i64>().is_err() {
            return Err(ApiError::bad_request(format!(
                "invalid value for limit: {v:?}: must be an integer"
            )));
        }
    }
    let label_selector = LabelSelector::parse(get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let field_selector = FieldSelector::parse(get("fieldSelector").unwrap_or(""), supported_fields)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    if !watch && get("continue").is_some_and(|v| !v.is_empty()) {
        return Err(ApiError::bad_request(CONTINUE_UNSUPPORTED));
    }

    let resource_version_match = match get("resourceVersionMatch") {
        None | Some("") => None,
        Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
        Some("Exact") => Some(RvMatch::Exact),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
            )))
        }
    };
    if watch {
        if send_initial_events.is_some() && resource_version_match != Some(RvMatch::NotOlderThan) {
            return Err(ApiError::invalid(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if resource_version_match.is_some() && send_initial_events.is_none() {
            return Err(ApiError::invalid(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
    } else if send_initial_events.is_some() {
        return Err(ApiError::invalid("sendInitialEvents is forbidden for list"));
    }

    Ok(ListOptions {
        watch,
        label_selector,
        field_selector,
        resource_version: get("resourceVersion").map(str::to_string),
        resource_version_match,
        send_initial_events,
        allow_watch_bookmarks: allow_watch_bookmarks.unwrap_or(false),
        timeout_seconds,
    })
}

/// Go `strconv.ParseBool` on an optional parameter; anything else is a 400.
fn parse_bool(name: &str, value: Option<&str>) -> Result<Option<bool>, ApiError> {
    match value {
        None => Ok(None),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Ok(Some(false)),
        Some(v) => Err(ApiError::bad_request(format!(
            "invalid value for {name}: {v:?}: must be true or false"
        ))),
    }
}

/// Go `url.ParseQuery`: `&`-separated `key=value` pairs, percent-decoded with `+` as space.
/// Keeps every pair in order (the first of repeated keys is the one read). A `;` in a pair or a
/// bad `%` escape is a 400, where Go reports an error. Decoded bytes that are not UTF-8 are
/// replaced (U+FFFD), which no selector or known value accepts.
pub fn decode_query(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for pair in query.split('&') {
        if pair.contains(';') {
            return Err(ApiError::bad_request(
                "invalid semicolon separator in query",
            ));
        }
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((unescape(key)?, unescape(value)?));
    }
    Ok(out)
}

/// Go `url.QueryUnescape`.
fn unescape(s: &str) -> Result<String, ApiError> {
    if !s.contains(['%', '+']) {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex_val);
                let lo = b.get(i + 2).copied().and_then(hex_val);
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    let bad: String = s.get(i..).unwrap_or("").chars().take(3).collect();
                    return Err(ApiError::bad_request(format!(
                        "invalid URL escape {bad:?} in query"
                    )));
                };
                out.push(hi << 4 | lo);
                i += 3;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const SVC: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.clusterIP",
        "spec.type",
    ];
    const NODES: &[&str] = &["metadata.name"];
    /// kube-proxy's label selector (docs/SEMANTICS.md §4) as kube-proxy encodes it.
    const L: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

    fn ok(q: &str, fields: &[&str]) -> ListOptions {
        match parse(q, fields) {
            Ok(o) => o,
            Err(e) => panic!("{q:?} should parse: {e}"),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// L selects unlabelled objects and drops headless / foreign-proxy ones.
    fn assert_is_l(o: &ListOptions) {
        assert!(o.label_selector.matches(&labels(&[("app", "web")])));
        assert!(!o
            .label_selector
            .matches(&labels(&[("service.kubernetes.io/headless", "")])));
        assert!(!o.label_selector.matches(&labels(&[(
            "service.kubernetes.io/service-proxy-name",
            "x"
        )])));
    }

    #[test]
    fn kube_proxy_initial_list() {
        let o = ok(&format!("{L}&limit=500&resourceVersion=0"), SVC);
        assert!(!o.watch);
        assert_is_l(&o);
        assert!(o.field_selector.is_empty());
        assert_eq!(o.resource_version.as_deref(), Some("0"));
        assert_eq!(o.resource_version_match, None);
        assert_eq!(o.send_initial_events, None);
        assert_eq!(o.timeout_seconds, None);
        assert!(!o.allow_watch_bookmarks);
    }

    #[test]
    fn kube_proxy_relist() {
        let o = ok(&format!("{L}&resourceVersion=1732890000000123"), SVC);
        assert!(!o.watch);
        assert_eq!(o.resource_version.as_deref(), Some("1732890000000123"));
        assert_is_l(&o);
    }

    #[test]
    fn kube_proxy_watch() {
        let q = format!(
            "allowWatchBookmarks=true&{L}&resourceVersion=1732890000000123&timeout=7m36s&timeoutSeconds=456&watch=true"
        );
        let o = ok(&q, SVC);
        assert!(o.watch);
        assert!(o.allow_watch_bookmarks);
        assert_eq!(o.timeout_seconds, Some(456));
        assert_eq!(o.resource_version.as_deref(), Some("1732890000000123"));
        assert_is_l(&o);
    }

    #[test]
    fn kube_proxy_node_informer() {
        for q in [
            "fieldSelector=metadata.name%3Dedge-1&limit=500&resourceVersion=0",
            "allowWatchBookmarks=true&fieldSelector=metadata.name%3Dedge-1&resourceVersion=5&timeout=5m1s&timeoutSeconds=301&watch=true",
        ] {
            let o = ok(q, NODES);
            assert_eq!(o.field_selector.required("metadata.name"), Some("edge-1"));
            assert!(o.field_selector.matches(|_| Some("edge-1")));
            assert!(!o.field_selector.matches(|_| Some("edge-2")));
        }
    }

    #[test]
    fn kube_proxy_132_services() {
        let q = format!(
            "allowWatchBookmarks=true&fieldSelector=spec.clusterIP%21%3DNone&{L}&resourceVersion=7&timeout=9m0s&timeoutSeconds=540&watch=true"
        );
        let o = ok(&q, SVC);
        let get = |ip: &'static str| move |f: &str| (f == "spec.clusterIP").then_some(ip);
        assert!(o.field_selector.matches(get("10.96.0.1")));
        assert!(!o.field_selector.matches(get("None")));
        assert_is_l(&o);
        // The same selector on endpoints is not supported.
        let e = parse(&q, &["metadata.name", "metadata.namespace"]).expect_err("unsupported");
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert_eq!(e.message, "field label not supported: spec.clusterIP");
    }

    #[test]
    fn kube_proxy_watch_list() {
        for rv in ["", "1732890000000123"] {
            let q = format!(
                "allowWatchBookmarks=true&{L}&resourceVersion={rv}&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=333&watch=true"
            );
            let o = ok(&q, SVC);
            assert!(o.watch);
            assert_eq!(o.send_initial_events, Some(true));
            assert_eq!(o.resource_version_match, Some(RvMatch::NotOlderThan));
            assert_eq!(o.resource_version.as_deref(), Some(rv));
            assert_eq!(o.timeout_seconds, Some(333));
        }
    }

    #[test]
    fn watch_flag_values() {
        let cases: &[(&str, bool)] = &[
            ("", false),
            ("watch=true", true),
            ("watch=1", true),
            ("watch=", true),
            ("watch", true),
            ("watch=yes", true),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("watch=False", false),
            ("watch=fAlSe", false),
            ("watch=0&watch=1", false),
            ("watch=1&watch=0", true),
            ("Watch=true", false),
        ];
        for (q, want) in cases {
            assert_eq!(ok(q, SVC).watch, *want, "{q:?}");
        }
    }

    #[test]
    fn boolean_parameters_follow_parse_bool() {
        for v in ["1", "t", "T", "TRUE", "true", "True"] {
            let o = ok(&format!("watch=1&allowWatchBookmarks={v}"), SVC);
            assert!(o.allow_watch_bookmarks, "{v}");
        }
        for v in ["0", "f", "F", "FALSE", "false", "False"] {
            let o = ok(&format!("watch=1&allowWatchBookmarks={v}"), SVC);
            assert!(!o.allow_watch_bookmarks, "{v}");
            let q = format!("watch=1&sendInitialEvents={v}&resourceVersionMatch=NotOlderThan");
            assert_eq!(ok(&q, SVC).send_initial_events, Some(false), "{v}");
        }
        for v in ["", "yes", "tRUE", "2", "%20true"] {
            for key in ["allowWatchBookmarks", "sendInitialEvents"] {
                let q = format!("watch=1&{key}={v}&resourceVersionMatch=NotOlderThan");
                let e = parse(&q, SVC).expect_err(&q);
                assert_eq!(e.code, 400, "{q}");
                assert!(e.message.contains(key), "{q}: {}", e.message);
            }
        }
    }

    #[test]
    fn timeout_seconds() {
        let cases: &[(&str, Option<u64>)] = &[
            ("", None),
            ("timeoutSeconds=456", Some(456)),
            ("timeoutSeconds=%2B7", Some(7)),
            ("timeoutSeconds=0456", Some(456)),
            ("timeoutSeconds=0", None),
            ("timeoutSeconds=-5", Some(0)),
            ("timeoutSeconds=9223372036854775807", Some(i64::MAX as u64)),
            ("timeoutSeconds=10&timeoutSeconds=x", Some(10)),
        ];
        for (q, want) in cases {
            assert_eq!(
                ok(&format!("watch=1&{q}"), SVC).timeout_seconds,
                *want,
                "{q:?}"
            );
        }
        for v in ["", "abc", "1.5", "5s", "9223372036854775808", "+5", "0x10"] {
            let q = format!("watch=1&timeoutSeconds={v}");
            let e = parse(&q, SVC).expect_err(&q);
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{q}");
        }
        // Ignored on a LIST but still must be an integer.
        assert_eq!(ok("timeoutSeconds=30", SVC).timeout_seconds, Some(30));
    }

    #[test]
    fn percent_decoding_like_go() {
        // (query, expected resourceVersion)
        let cases: &[(&str, &str)] = &[
            ("resourceVersion=a+b", "a b"),
            ("resourceVersion=a%2Bb", "a+b"),
            ("resourceVersion=%41%62", "Ab"),
            ("resourceVersion=%e2%9c%93", "\u{2713}"),
            ("resourceVersion=%ff", "\u{fffd}"),
            ("resourceVersion=1&resourceVersion=2", "1"),
            ("resource%56ersion=9", "9"),
            ("&&resourceVersion=3&", "3"),
            ("resourceVersion=a=b", "a=b"),
            ("resourceVersion", ""),
        ];
        for (q, want) in cases {
            assert_eq!(ok(q, SVC).resource_version.as_deref(), Some(*want), "{q:?}");
        }
        assert_eq!(ok("limit=500", SVC).resource_version, None);
        for q in [
            "resourceVersion=%",
            "resourceVersion=%4",
            "resourceVersion=%zz",
            "x%g1=1",
            "a=1;b=2",
            "pretty=%",
        ] {
            let e = parse(q, SVC).expect_err(q);
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{q}");
        }
        let e = parse("resourceVersion=%zz", SVC).expect_err("bad escape");
        assert!(e.message.contains("%zz"), "{}", e.message);
        // Escaped `;` is data.
        assert_eq!(
            ok("resourceVersion=%3B", SVC).resource_version.as_deref(),
            Some(";")
        );
    }

    #[test]
    fn selector_errors_are_400_with_the_selector_message() {
        let cases: &[(&str, &str)] = &[
            ("labelSelector=a%2C%2Cb", "found ','"),
            ("labelSelector=a+in+%28x", "expected: ',' or ')'"),
            ("labelSelector=a%40b", "invalid label key \"a@b\""),
            (
                "fieldSelector=status.phase%3DRunning",
                "field label not supported: status.phase",
            ),
            (
                "fieldSelector=metadata.name%3Da%5Cn",
                "invalid escape sequence",
            ),
            ("fieldSelector=metadata.name", "can't understand"),
        ];
        for (q, want) in cases {
            let e = parse(q, SVC).expect_err(q);
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{q}");
            assert!(
                e.message.contains(want),
                "{q}: {:?} lacks {want:?}",
                e.message
            );
        }
    }

    #[test]
    fn continue_tokens() {
        let e = parse("continue=abc&limit=500", SVC).expect_err("list with continue");
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert_eq!(e.message, CONTINUE_UNSUPPORTED);
        assert!(ok("continue=", SVC).label_selector.is_empty());
        assert!(ok("continue=abc&watch=true", SVC).watch);
    }

    #[test]
    fn watch_list_and_rv_match_rules() {
        const SIE_LIST: &str = "sendInitialEvents is forbidden for list";
        const SIE_NEEDS: &str =
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
        const RVM_WATCH: &str =
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
        // (query, Ok(rv match) or Err(422 message))
        let cases: &[(&str, Result<Option<RvMatch>, &str>)] = &[
            // LIST
            (
                "resourceVersionMatch=NotOlderThan&resourceVersion=5",
                Ok(Some(RvMatch::NotOlderThan)),
            ),
            (
                "resourceVersionMatch=Exact&resourceVersion=5",
                Ok(Some(RvMatch::Exact)),
            ),
            ("resourceVersionMatch=", Ok(None)),
            ("sendInitialEvents=true", Err(SIE_LIST)),
            (
                "sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
                Err(SIE_LIST),
            ),
            ("watch=0&sendInitialEvents=true", Err(SIE_LIST)),
            (
                "resourceVersionMatch=Newest",
                Err(r#"Unsupported value: "Newest": supported values: "Exact", "NotOlderThan""#),
            ),
            (
                "resourceVersionMatch=exact",
                Err(r#"Unsupported value: "exact": supported values: "Exact", "NotOlderThan""#),
            ),
            // WATCH
            ("watch=1&sendInitialEvents=true", Err(SIE_NEEDS)),
            ("watch=1&sendInitialEvents=false", Err(SIE_NEEDS)),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
                Err(SIE_NEEDS),
            ),
            ("watch=1&resourceVersionMatch=NotOlderThan", Err(RVM_WATCH)),
            ("watch=1&resourceVersionMatch=Exact", Err(RVM_WATCH)),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=Bogus",
                Err(r#"Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan""#),
            ),
            (
                "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
                Ok(Some(RvMatch::NotOlderThan)),
            ),
            ("watch=1&resourceVersionMatch=", Ok(None)),
        ];
        for (q, want) in cases {
            match (parse(q, SVC), want) {
                (Ok(o), Ok(m)) => assert_eq!(o.resource_version_match, *m, "{q}"),
                (Err(e), Err(msg)) => {
                    assert_eq!((e.code, e.reason), (422, "Invalid"), "{q}");
                    assert_eq!(e.message, *msg, "{q}");
                }
                (got, _) => panic!("{q}: unexpected {got:?}"),
            }
        }
    }

    #[test]
    fn unknown_parameters_are_ignored() {
        let o = ok("pretty=true&limit=-1&timeout=7m36s&foo=%20", SVC);
        assert_eq!(o, ListOptions::default());
    }

    #[test]
    fn limit_must_be_an_integer_as_the_apiserver_requires() {
        for q in ["limit=500", "limit=0", "limit=-3", "limit=%2B7"] {
            ok(q, SVC);
        }
        for q in [
            "limit=abc",
            "limit=",
            "limit=1.5",
            "limit=9223372036854775808",
        ] {
            let e = parse(q, SVC).expect_err(q);
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{q}");
            assert!(e.message.contains("limit"), "{q}: {}", e.message);
        }
    }
}
