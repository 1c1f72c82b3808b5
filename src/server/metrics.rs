//! `/metrics` on `--metrics-bind-address`: the Prometheus text exposition of the cache, the
//! snapshot writer, edge-health and the reflectors.

use crate::cache::store::State;
use crate::k8s::Resource;
use crate::server::health::Extras;

/// Prometheus text exposition of the cache's state.
pub fn render(state: &State, extras: &Extras, now_unix: u64) -> String {
    use std::fmt::Write as _;
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
        vec![(String::new(), u64::from(state.is_ready()))],
    );
    gauge(
        "grid_wrapper_resource_version",
        "The last resourceVersion handed out.",
        vec![(String::new(), state.current_rv())],
    );
    let per = |f: &dyn Fn(Resource) -> usize| {
        Resource::ALL
            .iter()
            .map(|&r| {
                let label = format!("{{resource=\"{}.{}\"}}", r.plural(), r.api_version());
                (label, f(r) as u64)
            })
            .collect::<Vec<_>>()
    };
    gauge(
        "grid_wrapper_objects",
        "Served objects per resource.",
        per(&|r| state.collection(r).len()),
    );
    gauge(
        "grid_wrapper_event_log_entries",
        "Event-log entries kept per resource for watch resumption.",
        per(&|r| state.collection(r).log_len()),
    );
    gauge(
        "grid_wrapper_edge_health_abnormal_nodes",
        "Cached nodes the edge-health map reports abnormal (their endpoints are not served).",
        vec![(
            String::new(),
            state
                .abnormal_nodes()
                .iter()
                .filter(|n| {
                    let key = crate::k8s::ObjectKey::new("", n.as_str());
                    state.collection(Resource::Nodes).get(&key).is_some()
                })
                .count() as u64,
        )],
    );
    gauge(
        "grid_wrapper_serving_snapshot",
        "1 while the served view comes from the on-disk snapshot (upstream not synced yet).",
        vec![(String::new(), u64::from(state.serving_snapshot()))],
    );
    if let Some(written) = extras.snapshot_written.filter(|_| state.serving_snapshot()) {
        gauge(
            "grid_wrapper_snapshot_age_seconds",
            "Age of the on-disk snapshot being served (wall clock).",
            vec![(String::new(), now_unix.saturating_sub(written))],
        );
    }
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
    crate::upstream::stats::global().render_prometheus(&mut out);
    out
}
