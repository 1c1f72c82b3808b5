//! Content negotiation for cache-backed answers, as the apiserver does it (docs/SEMANTICS.md §1,
//! "Content type"): the `Accept` header's media ranges, ordered by q-value and then by
//! specificity, each tried in turn against the formats the cache serves. Pure.
//!
//! | range (first acceptable wins) | answer |
//! |---|---|
//! | `application/vnd.kubernetes.protobuf` | protobuf |
//! | `application/json`, `application/*`, `*/*`, or no `Accept` at all | JSON |
//! | one of those with `as=`, `g=` or `v=` (a Table or metadata-only conversion) | skipped: the cache does not convert |
//! | only conversions | forwarded to the apiserver, which does |
//! | nothing acceptable | 406 `NotAcceptable` |

/// A wire format of cache-backed answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf` (`;stream=watch` for watches).
    Protobuf,
}

impl Format {
    /// `Content-Type` of a complete answer.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Protobuf => PROTOBUF,
        }
    }

    /// `Content-Type` of a watch stream.
    pub fn watch_content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
        }
    }
}

/// The Kubernetes protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What an `Accept` header asks of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// Answer from the cache in this format.
    Serve(Format),
    /// Only conversions the cache does not do (`as=Table` …): forward upstream.
    Forward,
    /// Nothing the cache or the apiserver would serve here: 406.
    NotAcceptable,
}

/// One media range of an `Accept` header.
#[derive(Debug)]
struct Range<'a> {
    kind: &'a str,
    subtype: &'a str,
    q: f32,
    /// `as`, `g` or `v` parameters: a conversion of the object.
    converts: bool,
}

impl Range<'_> {
    /// `type/subtype` 2, `type/*` 1, `*/*` 0: the more specific range wins a q-value tie.
    fn specificity(&self) -> u8 {
        match (self.kind, self.subtype) {
            ("*", _) => 0,
            (_, "*") => 1,
            _ => 2,
        }
    }

    /// The format this range selects among those the cache serves.
    fn format(&self) -> Option<Format> {
        let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        match (self.kind, self.subtype) {
            ("*", "*") => Some(Format::Json),
            (k, "*") if is(k, "application") => Some(Format::Json),
            (k, s) if is(k, "application") && is(s, "json") => Some(Format::Json),
            (k, s) if is(k, "application") && is(s, "vnd.kubernetes.protobuf") => {
                Some(Format::Protobuf)
            }
            _ => None,
        }
    }
}

/// Parses one comma-separated range; `None` for an empty or malformed one (skipped, as the
/// apiserver's parser does).
fn parse_range(text: &str) -> Option<Range<'_>> {
    let mut parts = text.split(';');
    let media = parts.next()?.trim();
    let (kind, subtype) = media.split_once('/')?;
    let (kind, subtype) = (kind.trim(), subtype.trim());
    if kind.is_empty() || subtype.is_empty() || (kind == "*" && subtype != "*") {
        return None;
    }
    let mut range = Range {
        kind,
        subtype,
        q: 1.0,
        converts: false,
    };
    for param in parts {
        let (name, value) = param.split_once('=').unwrap_or((param, ""));
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("q") {
            // An unparsable or out-of-range q counts as 0 (not acceptable).
            range.q = value
                .parse::<f32>()
                .ok()
                .filter(|q| (0.0..=1.0).contains(q))
                .unwrap_or(0.0);
        } else if ["as", "g", "v"]
            .iter()
            .any(|p| name.eq_ignore_ascii_case(p))
        {
            range.converts = true;
        }
    }
    Some(range)
}

/// Negotiates the answer's format from the request's `Accept` header.
pub fn negotiate(accept: Option<&str>) -> Negotiated {
    let accept = accept.unwrap_or("").trim();
    if accept.is_empty() {
        return Negotiated::Serve(Format::Json);
    }
    let mut ranges: Vec<Range<'_>> = accept.split(',').filter_map(parse_range).collect();
    // Stable: equal q and specificity keep the client's order.
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then(b.specificity().cmp(&a.specificity()))
    });
    let mut conversion = false;
    for range in ranges.iter().filter(|r| r.q > 0.0) {
        match range.format() {
            Some(_) if range.converts => conversion = true,
            Some(format) => return Negotiated::Serve(format),
            None => {}
        }
    }
    if conversion {
        Negotiated::Forward
    } else {
        Negotiated::NotAcceptable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Negotiated = Negotiated::Serve(Format::Json);
    const PB: Negotiated = Negotiated::Serve(Format::Protobuf);

    #[test]
    fn accept_headers_negotiate_as_the_apiserver_does() {
        let cases: &[(Option<&str>, Negotiated)] = &[
            (None, JSON),
            (Some(""), JSON),
            (Some("   "), JSON),
            (Some("application/json"), JSON),
            (Some("Application/JSON"), JSON),
            (Some("application/json; charset=utf-8"), JSON),
            (Some("application/*"), JSON),
            (Some("*/*"), JSON),
            // kube-proxy (client-go with the protobuf content type).
            (Some("application/vnd.kubernetes.protobuf, */*"), PB),
            (Some("application/vnd.kubernetes.protobuf,application/json"), PB),
            (Some("application/vnd.kubernetes.protobuf"), PB),
            (Some("application/vnd.kubernetes.protobuf;stream=watch"), PB),
            // The more specific range wins a tie, whatever the order.
            (Some("*/*, application/vnd.kubernetes.protobuf"), PB),
            (Some("application/*, application/vnd.kubernetes.protobuf"), PB),
            // q-values.
            (Some("application/vnd.kubernetes.protobuf;q=0.5, application/json"), JSON),
            (Some("application/vnd.kubernetes.protobuf;q=0, */*"), JSON),
            (Some("application/json;q=0.9, application/vnd.kubernetes.protobuf"), PB),
            (Some("application/json;q=0"), Negotiated::NotAcceptable),
            (Some("application/json; q=0.000, application/yaml"), Negotiated::NotAcceptable),
            (Some("*/*;q=0, application/json;q=0.5"), JSON),
            (Some("*/*;q=0.1"), JSON),
            (Some("application/json;q=abc"), Negotiated::NotAcceptable),
            (Some("application/json;q=2"), Negotiated::NotAcceptable),
            // Formats the cache does not serve.
            (Some("application/yaml"), Negotiated::NotAcceptable),
            (Some("text/html, application/xml"), Negotiated::NotAcceptable),
            (Some("text/html"), Negotiated::NotAcceptable),
            (Some("text/*"), Negotiated::NotAcceptable),
            (Some("application/jsonx"), Negotiated::NotAcceptable),
            (Some("garbage"), Negotiated::NotAcceptable),
            (Some(",,;"), Negotiated::NotAcceptable),
            (Some("*/json"), Negotiated::NotAcceptable),
            // kubectl get: Table conversions first, then plain JSON, which the cache serves.
            (
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
                JSON,
            ),
            // Only a conversion: the apiserver does it.
            (Some("application/json;as=Table;v=v1;g=meta.k8s.io"), Negotiated::Forward),
            (
                Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                Negotiated::Forward,
            ),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate(*accept), *want, "{accept:?}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(Format::Json.content_type(), "application/json");
        assert_eq!(
            Format::Protobuf.content_type(),
            "application/vnd.kubernetes.protobuf"
        );
        assert_eq!(
            Format::Protobuf.watch_content_type(),
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        assert_eq!(Format::Json.watch_content_type(), "application/json");
    }
}
