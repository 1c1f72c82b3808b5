//! `/metrics` on `--metrics-bind-address`: the Prometheus text exposition of the cache, the
//! snapshot writer, edge-health, the server's requests and watches, the process and the
//! reflectors.

use std::fmt::Write as _;

use crate::cache::facts::Facts;
use crate::handoff::refused::{self, Reason};
use crate::handoff::runtime_pods::{self, PollOutcome};
use crate::k8s::Resource;
use crate::server::counters::resource_label;
use crate::server::extras::Extras;
use crate::server::{counters, process};

/// The whole `/metrics` text. The cache's part comes from its [`Facts`] (read without the
/// cache's lock); `/proc` and the counters are read as they are rendered.
pub fn render(facts: &Facts, extras: &Extras, now_unix: u64) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str(&render_cache(facts, extras, now_unix));
    render_writer(extras, &mut out);
    counters::global().render_prometheus(&mut out);
    process::render_prometheus(&process::read(), &mut out);
    crate::upstream::stats::global().render_prometheus(&mut out);
    out
}

/// Prometheus text exposition of the cache's state (and the restored snapshot's age).
pub fn render_cache(facts: &Facts, extras: &Extras, now_unix: u64) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, rows: Vec<(String, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    gauge(
        "grid_wrapper_ready",
        "1 once every reflector has listed and the view is built.",
        vec![(String::new(), u64::from(facts.ready))],
    );
    gauge(
        "grid_wrapper_resource_version",
        "The last resourceVersion handed out.",
        vec![(String::new(), facts.resource_version)],
    );
    let per = |f: &dyn Fn(Resource) -> u64| {
        Resource::ALL
            .iter()
            .map(|&r| {
                let label = format!("{{resource=\"{}\"}}", resource_label(r));
                (label, f(r))
            })
            .collect::<Vec<_>>()
    };
    gauge(
        "grid_wrapper_objects",
        "Served objects per resource (on the kube-proxy port: one Node, the local one).",
        per(&|r| facts.objects(r)),
    );
    gauge(
        "grid_wrapper_event_log_entries",
        "Event-log entries kept per resource for watch resumption.",
        per(&|r| facts.log_entries(r)),
    );
    gauge(
        "grid_wrapper_objects_stale",
        "Objects served at their last accepted version: a newer one over --max-object-bytes was refused.",
        per(&|r| facts.stale(r)),
    );
    gauge(
        "grid_wrapper_edge_health_abnormal_nodes",
        "Cached nodes the edge-health map reports abnormal (their endpoints are not served).",
        vec![(String::new(), facts.abnormal_nodes)],
    );
    gauge(
        "grid_wrapper_runtime_repairs",
        "Endpoints served as the container runtime says (its address, or not ready) instead of as the upstream says.",
        vec![(String::new(), facts.runtime_repairs)],
    );
    gauge(
        "grid_wrapper_runtime_site_views",
        "Other nodes whose container runtime view is in force here (reported to this relay, or answered by the relays this node follows), repairing their endpoints.",
        vec![(String::new(), facts.runtime_site_views)],
    );
    gauge(
        "grid_wrapper_serving_snapshot",
        "1 while the served view comes from the on-disk snapshot (upstream not synced yet).",
        vec![(String::new(), u64::from(facts.serving_snapshot))],
    );
    if let Some(written) = extras.snapshot_written.filter(|_| facts.serving_snapshot) {
        gauge(
            "grid_wrapper_snapshot_age_seconds",
            "Age of the on-disk snapshot being served (wall clock).",
            vec![(String::new(), now_unix.saturating_sub(written))],
        );
    }
    let _ = writeln!(
        out,
        "# HELP grid_wrapper_objects_refused_total Upstream objects refused: their kind, apiVersion or scope does not fit the resource listed or watched, or a watch event's resourceVersion is older than its stream's (logged at WARN once per list or stream)."
    );
    let _ = writeln!(out, "# TYPE grid_wrapper_objects_refused_total counter");
    for r in Resource::ALL {
        for why in Reason::ALL {
            let _ = writeln!(
                out,
                "grid_wrapper_objects_refused_total{{resource=\"{}\",reason=\"{}\"}} {}",
                resource_label(r),
                why.label(),
                refused::count(r, why)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP grid_wrapper_runtime_polls_total Polls of the container runtime (--container-runtime-endpoint) by outcome: ok, unreachable, timeout, bad_answer; a failed poll changes nothing served."
    );
    let _ = writeln!(out, "# TYPE grid_wrapper_runtime_polls_total counter");
    for outcome in PollOutcome::ALL {
        let _ = writeln!(
            out,
            "grid_wrapper_runtime_polls_total{{outcome=\"{}\"}} {}",
            outcome.label(),
            runtime_pods::polls(outcome)
        );
    }
    let _ = writeln!(
        out,
        "# HELP grid_wrapper_runtime_reports_total Followers' runtime reports on the relay port: taken, or refused (not from one of the Node's addresses, or malformed; a 403 or 400 Status says why)."
    );
    let _ = writeln!(out, "# TYPE grid_wrapper_runtime_reports_total counter");
    for (taken, label) in [(true, "taken"), (false, "refused")] {
        let _ = writeln!(
            out,
            "grid_wrapper_runtime_reports_total{{outcome=\"{label}\"}} {}",
            crate::handoff::site_pods::reports(taken)
        );
    }
    let _ = writeln!(
        out,
        "# HELP grid_wrapper_served_forms Served object versions held (the views', the relay view's and the event logs'), by the form they hold: protobuf alone (compacted once the cache is ready, or by a first protobuf read: its protobuf form gives back its JSON byte for byte, and a JSON reader gets that JSON decoded), or JSON (not compacted yet, or with its protobuf form too when that form does not give the same JSON back)."
    );
    let _ = writeln!(out, "# TYPE grid_wrapper_served_forms gauge");
    for (form, label) in crate::cache::collection::Form::ALL {
        let _ = writeln!(
            out,
            "grid_wrapper_served_forms{{form=\"{label}\"}} {}",
            form.alive()
        );
    }
    let _ = writeln!(
        out,
        "# HELP grid_wrapper_protobuf_unknown_field_objects_total Object versions encoded to protobuf without a field grid-wrapper's schema does not know, or decoded from the upstream's protobuf with such a field skipped (logged at WARN once per field)."
    );
    let _ = writeln!(
        out,
        "# TYPE grid_wrapper_protobuf_unknown_field_objects_total counter"
    );
    let unknown = crate::proto::unknown::objects();
    for r in Resource::ALL {
        let _ = writeln!(
            out,
            "grid_wrapper_protobuf_unknown_field_objects_total{{resource=\"{}\"}} {}",
            resource_label(r),
            unknown[r.index()]
        );
    }
    out
}

/// The snapshot writer's counters (with `--cache-dir`).
fn render_writer(extras: &Extras, out: &mut String) {
    if let Some(w) = &extras.writer {
        use std::sync::atomic::Ordering::Relaxed;
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        };
        counter(
            "grid_wrapper_snapshot_writes_total",
            "Snapshots written to --cache-dir.",
            w.writes.load(Relaxed),
        );
        counter(
            "grid_wrapper_snapshot_write_failures_total",
            "Snapshot writes that failed (the previous snapshot is kept).",
            w.failures.load(Relaxed),
        );
        counter(
            "grid_wrapper_cache_dir_warnings_total",
            "WARN lines about --cache-dir's contents: a name of grid-wrapper's held by a symbolic link, directory or special file (never followed), the directory writable by others, a newer-format snapshot kept aside.",
            w.dir_warnings.load(Relaxed),
        );
        let mut gauge = |name: &str, help: &str, v: String| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {v}");
        };
        gauge(
            "grid_wrapper_snapshot_last_write_timestamp_seconds",
            "Unix time of the last snapshot written (0 = none yet).",
            w.last_write_unix.load(Relaxed).to_string(),
        );
        gauge(
            "grid_wrapper_snapshot_unsaved_since_timestamp_seconds",
            "Unix time of the oldest change no snapshot holds yet (0 = every change is written).",
            w.unsaved_since_unix.load(Relaxed).to_string(),
        );
        gauge(
            "grid_wrapper_snapshot_bytes",
            "Size of the last snapshot written.",
            w.last_bytes.load(Relaxed).to_string(),
        );
        gauge(
            "grid_wrapper_snapshot_last_write_duration_seconds",
            "Encode + write + fsync time of the last snapshot.",
            format!("{:.3}", w.last_write_ms.load(Relaxed) as f64 / 1000.0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::Retention;
    use crate::cache::store::{Settings, State};
    use crate::server::exposition::check_exposition;

    #[test]
    fn the_whole_exposition_is_well_formed() {
        let st = State::new(
            Settings {
                hostname: "h".into(),
                wrapper_in_cluster: true,
                retention: Retention::for_queue(10),
            },
            42,
        );
        let extras = Extras {
            snapshot_written: Some(1),
            writer: Some(Default::default()),
            debug: false,
        };
        counters::global().request(counters::RouteKind::Proxy, None, 200);
        let text = render(&st.facts(), &extras, 100);
        let types = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for (name, kind) in [
            ("grid_wrapper_ready", "gauge"),
            ("grid_wrapper_snapshot_writes_total", "counter"),
            ("grid_wrapper_requests_total", "counter"),
            ("grid_wrapper_open_watches", "gauge"),
            ("grid_wrapper_watches_ended_total", "counter"),
            ("grid_wrapper_sent_bytes_total", "counter"),
            ("grid_wrapper_watch_events_sent_total", "counter"),
            ("grid_wrapper_upstream_relists_total", "counter"),
            ("process_cpu_seconds_total", "counter"),
            ("process_resident_memory_bytes", "gauge"),
        ] {
            assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
        }
    }

    #[test]
    fn the_checker_rejects_bad_expositions() {
        for bad in [
            "x 1\n",
            "# TYPE x gauge\nx{a=\"b\" 1\n",
            "# TYPE x gauge\nx one\n",
            "# TYPE x gauge\n# TYPE x gauge\nx 1\n",
            "# TYPE x counter\nx 1\n",
            "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n",
            "# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",
            "# TYPE 1x gauge\n",
            "# TYPE x gauge\nx{1a=\"1\"} 1\n",
            "# TYPE x gauge\nx{a=1} 1\n",
        ] {
            assert!(check_exposition(bad).is_err(), "accepted {bad:?}");
        }
        assert!(check_exposition("# HELP x h\n# TYPE x gauge\nx{a=\"1\",b=\"\"} 1.5\n").is_ok());
    }
}
