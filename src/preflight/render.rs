//! The report as text (for people) or JSON (for automation). Pure.

use std::fmt::Write as _;

use super::model::{Access, Count, Report, RuntimeReport};

/// The `--output=json` document, pretty-printed, with a final newline.
pub fn json(report: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(report).map(|mut s| {
        s.push('\n');
        s
    })
}

fn count(c: Option<Count>) -> String {
    c.map_or("?".into(), |c| format!("{}/{}", c.kept, c.total))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `runtime <endpoint>: answers, …` or `runtime <endpoint>: NOT answering (<failure>)`.
fn runtime_line(rt: &RuntimeReport) -> String {
    let mut s = format!("runtime {}: ", rt.endpoint);
    if !rt.reachable {
        let _ = write!(s, "NOT answering ({})", rt.failure.unwrap_or("?"));
        return s;
    }
    let n = |v: Option<usize>| v.unwrap_or(0);
    let _ = write!(
        s,
        "answers, {} ({} ready), {} with an address, {} known without a ready sandbox",
        plural(n(rt.sandboxes), "sandbox", "sandboxes"),
        n(rt.ready_sandboxes),
        plural(n(rt.pods_with_address), "pod", "pods"),
        n(rt.pods_not_ready)
    );
    match &rt.repairs {
        Some(c) => {
            let _ = write!(
                s,
                "; would repair now: EndpointSlice endpoints {} to the runtime's address, {} \
                 not ready; Endpoints addresses {} to the runtime's address, {} not ready",
                c.endpoint_slice_addresses,
                c.endpoint_slice_not_ready,
                c.endpoints_addresses,
                c.endpoints_not_ready
            );
        }
        None => s.push_str("; repairs unknown (the upstream lists are incomplete)"),
    }
    s
}

/// The `--output=text` report. Problem lines are `problem: <tag>: <message>`, warnings
/// `warning: <tag>: <message>`, advisories `advice: <tag>: <message>`; the last line is `result: ready` or `result: NOT ready (…)`.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    let u = &r.upstream;
    line(format!(
        "grid-wrapper check: node {:?}, upstream {}",
        r.hostname,
        if u.server.is_empty() {
            "(none)"
        } else {
            &u.server
        }
    ));
    let mut up = String::from(if u.reachable {
        "upstream: reachable"
    } else {
        "upstream: NOT reachable"
    });
    if let Some(v) = &u.git_version {
        let _ = write!(up, ", version {v}");
    }
    if let (Some(v), Some(src)) = (&u.endpoint_slice_version, u.endpoint_slice_version_source) {
        let how = match src {
            "discovery" => format!("API discovery lists {}", u.discovery_versions.join(", ")),
            "probe" => "API discovery failed; decided by LIST probes".into(),
            _ => "a guess: neither API discovery nor the LIST probes succeeded".into(),
        };
        let _ = write!(up, ", EndpointSlices {v} ({how})");
    }
    match (&u.service_cidr_version, u.service_cidrs) {
        (Some(v), _) => {
            let _ = write!(up, ", ServiceCIDRs {v}");
        }
        (None, Some("absent")) => up.push_str(", no ServiceCIDRs (proxied)"),
        (None, Some("forbidden")) => up.push_str(", ServiceCIDRs forbidden (proxied)"),
        _ => {}
    }
    line(up);
    for relay in &r.relays {
        let mut s = format!(
            "relay {}: {}",
            relay.server,
            if relay.reachable {
                "reachable"
            } else {
                "NOT reachable"
            }
        );
        if let Some(v) = &relay.git_version {
            let _ = write!(s, ", version {v}");
        }
        let failed: Vec<&Access> = relay.access.iter().filter(|a| !a.allowed).collect();
        if !relay.access.is_empty() && failed.is_empty() {
            let _ = write!(
                s,
                ", list + watch ok ({} resources)",
                relay.access.len() / 2
            );
        }
        line(s);
        for a in failed {
            let e = a.error.as_deref().unwrap_or("");
            line(format!(
                "  FAILED  {:<5} {} ({}): {e}",
                a.verb, a.resource, a.api_version
            ));
        }
    }
    if let Some(rt) = &r.runtime {
        line(runtime_line(rt));
    }
    if !r.access.is_empty() {
        line("access (list + watch as the reflectors do them):".into());
        for a in &r.access {
            let what = format!("{} ({})", a.resource, a.api_version);
            match &a.error {
                None => line(format!("  ok      {:<5} {what}", a.verb)),
                Some(e) => line(format!("  FAILED  {:<5} {what}: {e}", a.verb)),
            }
        }
    }
    match r.node.found {
        None => line(format!("node {}: unknown (Nodes not listed)", r.node.name)),
        Some(false) => line(format!("node {}: NOT FOUND", r.node.name)),
        Some(true) if r.node.topology_labels.is_empty() => {
            line(format!("node {}: found", r.node.name))
        }
        Some(true) => {
            let labels: Vec<String> = r
                .node
                .topology_labels
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => format!("{k} MISSING"),
                })
                .collect();
            line(format!(
                "node {}: found; topology labels: {}",
                r.node.name,
                labels.join(", ")
            ))
        }
    }
    if let Some(services) = &r.topology_services {
        if services.is_empty() {
            line("topology Services: none (no Service has a topologyKeys annotation)".into());
        } else {
            line(format!(
                "topology Services (keys in use: {}); endpoints kept/total on this node:",
                r.topology_keys.join(", ")
            ));
        }
        for s in services {
            let mut l = format!(
                "  {}/{} [{}]: EndpointSlices {}, Endpoints {}",
                s.namespace,
                s.name,
                s.topology_keys.join(", "),
                count(s.endpoint_slice_endpoints),
                count(s.endpoints_addresses)
            );
            if s.fully_pruned == Some(true) {
                l.push_str(" - FULLY PRUNED");
            }
            line(l);
        }
    }
    if let Some(t) = &r.totals {
        line(format!(
            "totals: {}, {} fully pruned; EndpointSlice endpoints kept {}, Endpoints addresses \
             kept {}; would serve {}, {}, {}, {}",
            plural(t.topology_services, "topology Service", "topology Services"),
            t.fully_pruned_services,
            count(Some(t.endpoint_slice_endpoints)),
            count(Some(t.endpoints_addresses)),
            plural(t.served.nodes, "node", "nodes"),
            plural(t.served.services, "service", "services"),
            plural(t.served.endpoints, "endpoints", "endpoints"),
            plural(t.served.endpointslices, "endpointslice", "endpointslices"),
        ));
    }
    for a in &r.advisories {
        line(format!("advice: {}: {}", a.tag.as_str(), a.message));
    }
    for w in &r.warnings {
        line(format!("warning: {}: {}", w.tag.as_str(), w.message));
    }
    for p in &r.problems {
        line(format!("problem: {}: {}", p.tag.as_str(), p.message));
    }
    if r.ready {
        line("result: ready".into());
    } else {
        line(format!(
            "result: NOT ready ({})",
            plural(r.problems.len(), "problem", "problems")
        ));
    }
    out
}
