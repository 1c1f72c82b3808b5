//! `/debug/topology` on `--metrics-bind-address`: why each endpoint is kept or pruned.
//!
//! - `GET /debug/topology`: every topology Service with its keys, the local node's values and
//!   kept/total endpoints over its Endpoints object and over its v1 EndpointSlices.
//! - `GET /debug/topology/<namespace>/<service>`: every endpoint of its Endpoints and slices,
//!   with its node, that node's values, kept or pruned, the reason and the served
//!   resourceVersion of each object; also for a Service without topology (edge-health reasons).
//!
//! Query: `format=json` (default) or `format=text` (aligned tables for a terminal), and
//! `limit=N` (1–[`MAX_LIMIT`], default [`DEFAULT_LIMIT`]): at most N Services in the overview, N
//! endpoint rows in a Service's view; the output says when it was truncated. Anything else is a
//! 400, an unknown path or Service a 404, both as JSON `Status` objects.
//!
//! The data comes from [`crate::cache::store::explain`]: the cache's writer copies shared bytes
//! and a few labels between two changes (503 if it does not answer within 2 s); parsing,
//! evaluating and formatting happen on the debug worker, so the event loop is never held up.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::api::query::decode_query;
use crate::api::route::segment;
use crate::cache::store::explain::{Overview, ServiceExplanation};
use crate::k8s::status::ApiError;
use crate::k8s::ObjectKey;
use crate::writer::{Busy, WriterHandle, DEBUG_WAIT};

/// Rows (Services, or endpoints of one Service) listed unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 500;
/// Largest accepted `limit`.
pub const MAX_LIMIT: usize = 5000;
/// Longest table cell in the text format (longer ones are cut with `…`); the last column is
/// not cut.
const MAX_CELL: usize = 64;

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Text,
}

/// Parsed query parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Options {
    format: Format,
    limit: usize,
}

impl Options {
    fn parse(query: &str) -> Result<Options, ApiError> {
        let mut opts = Options {
            format: Format::Json,
            limit: DEFAULT_LIMIT,
        };
        let mut seen = Vec::new();
        for (key, value) in decode_query(query)? {
            if seen.contains(&key) {
                continue; // the first of repeated keys is the one read, as for the API
            }
            match key.as_str() {
                "format" => {
                    opts.format = match value.as_str() {
                        "json" | "" => Format::Json,
                        "text" => Format::Text,
                        v => {
                            return Err(ApiError::bad_request(format!(
                                "invalid value for format: {:?}: must be json or text",
                                cut(v)
                            )))
                        }
                    }
                }
                "limit" => {
                    opts.limit = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            ApiError::bad_request(format!(
                                "invalid value for limit: {:?}: must be an integer from 1 to {MAX_LIMIT}",
                                cut(&value)
                            ))
                        })?
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "unknown query parameter {:?}: only format and limit are accepted",
                        cut(other)
                    )))
                }
            }
            seen.push(key);
        }
        Ok(opts)
    }
}

/// `None`: the overview; `Some`: one Service. `path` starts with `/debug/topology`.
fn target(path: &str) -> Result<Option<ObjectKey>, ApiError> {
    let rest = path.strip_prefix("/debug/topology").unwrap_or(path);
    if rest.is_empty() || rest == "/" {
        return Ok(None);
    }
    let parts: Vec<&str> = rest.strip_prefix('/').unwrap_or(rest).split('/').collect();
    let [namespace, name] = parts[..] else {
        return Err(ApiError::new(
            404,
            "NotFound",
            "no such path: use /debug/topology or /debug/topology/<namespace>/<service>",
        ));
    };
    match (segment(namespace), segment(name)) {
        (Some(ns), Some(n)) if ns.len() <= 253 && n.len() <= 253 => Ok(Some(ObjectKey::new(&ns, &n))),
        _ => Err(ApiError::bad_request(
            "invalid namespace or service name in the path (empty, too long, bad %-escape or not UTF-8)",
        )),
    }
}

/// (status, Content-Type, body) for `/debug/topology[/<namespace>/<service>]`.
pub fn answer(path: &str, query: &str, writer: &WriterHandle) -> (u16, &'static str, String) {
    match respond(path, query, writer) {
        Ok(ok) => ok,
        Err(e) => (
            e.code,
            JSON,
            String::from_utf8_lossy(&e.to_json()).into_owned(),
        ),
    }
}

fn respond(
    path: &str,
    query: &str,
    writer: &WriterHandle,
) -> Result<(u16, &'static str, String), ApiError> {
    let opts = Options::parse(query)?;
    match target(path)? {
        None => {
            let limit = opts.limit;
            let input = writer
                .ask_within(DEBUG_WAIT, move |s| s.overview_input(limit))
                .map_err(Busy::to_api_error)?;
            let overview = input.overview();
            Ok(render(opts.format, &overview, overview_text))
        }
        Some(key) => {
            let asked = key.clone();
            let input = writer
                .ask_within(DEBUG_WAIT, move |s| s.explain_input(&asked))
                .map_err(Busy::to_api_error)?;
            let Some(input) = input else {
                let mut e = ApiError::new(
                    404,
                    "NotFound",
                    format!("service {key} is not cached (no Service, Endpoints or EndpointSlice)"),
                );
                e.kind = Some("services".into());
                e.name = Some(key.name.to_string());
                return Err(e);
            };
            let explanation = input.explain(opts.limit);
            Ok(render(opts.format, &explanation, service_text))
        }
    }
}

fn render<T: Serialize>(
    format: Format,
    data: &T,
    text: fn(&T) -> String,
) -> (u16, &'static str, String) {
    match format {
        // Serializing plain structs of strings and numbers cannot fail.
        Format::Json => (
            200,
            JSON,
            serde_json::to_string_pretty(data).unwrap_or_default() + "\n",
        ),
        Format::Text => (200, TEXT, text(data)),
    }
}

fn overview_text(o: &Overview) -> String {
    let mut out = String::new();
    let known = if o.local_node_known {
        ""
    } else {
        " (not a cached Node: every topology Service is empty)"
    };
    let _ = writeln!(out, "Local node: {}{known}", clean(&o.local_node));
    if !o.abnormal_nodes.is_empty() {
        let names: Vec<String> = o.abnormal_nodes.iter().take(20).map(|n| clean(n)).collect();
        let more = o.abnormal_node_count.saturating_sub(names.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(out, "Edge-health abnormal: {}{tail}", names.join(", "));
    }
    let _ = writeln!(out, "Topology Services: {}", o.topology_services);
    if o.truncated {
        let _ = writeln!(
            out,
            "(truncated: showing the first {} of {}; raise ?limit= up to {MAX_LIMIT})",
            o.services.len(),
            o.topology_services
        );
    }
    out.push('\n');
    let rows = o
        .services
        .iter()
        .map(|s| {
            let counts = |c: Option<crate::cache::store::explain::Counts>| {
                c.map_or("-".to_string(), |c| format!("{}/{}", c.kept, c.total))
            };
            vec![
                s.namespace.clone(),
                s.name.clone(),
                s.keys.join(","),
                values(&s.local_values),
                counts(s.endpoints),
                counts(s.endpoint_slices),
                s.source.clone(),
            ]
        })
        .collect::<Vec<_>>();
    let head = [
        "NAMESPACE",
        "SERVICE",
        "KEYS",
        "LOCAL VALUES",
        "ENDPOINTS",
        "V1 SLICES",
        "SOURCE",
    ];
    out.push_str(&table(&head, &rows));
    out.push_str("\nENDPOINTS: kept/total over the Endpoints object; V1 SLICES: over its discovery.k8s.io/v1 EndpointSlices.\n");
    out
}

fn service_text(e: &ServiceExplanation) -> String {
    let mut out = String::new();
    let what = match e.class {
        "topology" => format!(
            "topology Service, keys {} (from {})",
            e.keys.join(","),
            clean(e.source.as_deref().unwrap_or("?"))
        ),
        "normal" => "no topology keys: not filtered by topology".to_string(),
        _ => "no Service cached: not filtered by topology".to_string(),
    };
    let _ = writeln!(
        out,
        "Service {}/{}: {what}",
        clean(&e.namespace),
        clean(&e.name)
    );
    let local = if !e.local_node_known {
        "not a cached Node".to_string()
    } else if e.local_values.is_empty() {
        "cached".to_string()
    } else {
        values(&e.local_values)
    };
    let _ = writeln!(out, "Local node {}: {local}", clean(&e.local_node));
    for note in &e.notes {
        let _ = writeln!(out, "Note: {}", clean(note));
    }
    for (objects, why) in [
        ("Endpoints", &e.endpoints_decision),
        ("EndpointSlices", &e.slices_decision),
    ] {
        if let Some(why) = why {
            let _ = writeln!(out, "Decision ({objects}): {}", clean(why));
        }
    }
    for o in &e.objects {
        let rv = o.resource_version.as_deref().unwrap_or("not served");
        let rewritten = if o.rewritten {
            " (rewritten to the local apiserver)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{} {} ({}): served resourceVersion {rv}, {} of {} endpoints kept{rewritten}",
            o.kind,
            clean(&o.name),
            o.api_version,
            o.kept,
            o.total
        );
    }
    if e.truncated {
        let _ = writeln!(
            out,
            "(truncated: {} endpoint rows listed, {} more not shown; raise ?limit= up to {MAX_LIMIT})",
            e.rows, e.omitted_rows
        );
    }
    out.push('\n');
    let mut rows = Vec::new();
    for o in &e.objects {
        let object = match o.kind {
            "Endpoints" => format!("endpoints/{}", o.name),
            _ => format!("endpointslices/{}", o.name),
        };
        for ep in &o.endpoints {
            let address = if ep.list == "notReadyAddresses" {
                format!("{} (not ready)", ep.address)
            } else {
                ep.address.clone()
            };
            rows.push(vec![
                object.clone(),
                address,
                ep.node.clone().unwrap_or_else(|| "<none>".into()),
                values(&ep.node_values),
                if ep.kept { "kept" } else { "pruned" }.to_string(),
                ep.reason.to_string(),
                match &ep.runtime {
                    Some(fix) => format!("{}; {fix}", ep.message),
                    None => ep.message.clone(),
                },
            ]);
        }
    }
    let head = [
        "OBJECT",
        "ADDRESS",
        "NODE",
        "NODE VALUES",
        "VERDICT",
        "REASON",
        "DETAIL",
    ];
    out.push_str(&table(&head, &rows));
    out
}

/// `k=v,k2=<none>`; `-` when empty.
fn values(map: &BTreeMap<String, Option<String>>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("<none>")))
        .collect();
    parts.join(",")
}

/// An aligned table: every column padded to its widest cell (cells cleaned and cut), the last
/// one not padded.
fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let last = head.len().saturating_sub(1);
    let cells: Vec<Vec<String>> = std::iter::once(head.iter().map(|h| h.to_string()).collect())
        .chain(rows.iter().map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| if i == last { clean(c) } else { cut(&clean(c)) })
                .collect()
        }))
        .collect();
    let mut widths = vec![0; head.len()];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i == last {
                line.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                line.push_str(c);
                line.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Control characters (a label value or name could carry a terminal escape) shown escaped.
fn clean(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// At most [`MAX_CELL`] characters, `…` marking a cut.
fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_CELL {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_CELL - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
#[path = "debug_topology_tests.rs"]
mod tests;
