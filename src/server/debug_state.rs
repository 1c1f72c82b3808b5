//! `/debug/state` on `--metrics-bind-address` (with `--debug`): one JSON document of what the
//! process holds — served objects and event logs per resource, every open watch stream with its
//! cursor and backlog, each reflector's position and the server it reads from, the upstream
//! servers (site relays and the cloud) with their health and which is selected, the snapshot
//! and its writer, edge-health and the process's memory and CPU.
//!
//! resourceVersions are JSON strings, as in Kubernetes: with the RV epoch they exceed 2^53, which
//! JSON tools reading numbers as doubles would round.
//!
//! It never holds up the event loop: the streams are read from `server::watchers` (a short lock
//! to clone at most `?watchers=N` handles, then relaxed atomics), the cache's writer counts
//! between two changes, under the view's lock once (object bytes are summed from the shared serialized bytes, a stream's backlog is
//! a binary search of its log), and the JSON is built after both are released.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::cache::store::{StaleObject, State};
use crate::k8s::Resource;
use crate::server::counters::{self, resource_label};
use crate::server::extras::Extras;
use crate::server::process::{self, ProcessStats};
use crate::server::watchers::{self, WatcherStatus};
use crate::upstream::domain::Role;
use crate::upstream::kind::REFLECTED;
use crate::upstream::stats::{self, Stats};
use crate::writer::{WriterHandle, DEBUG_WAIT};

/// Watch streams listed unless `?watchers=N` asks otherwise.
pub const DEFAULT_WATCHERS: usize = 100;
/// Most watch streams listed (the server's connection limit).
pub const MAX_WATCHERS: usize = crate::server::event_loop::MAX_CONNECTIONS;
/// Most abnormal nodes listed.
pub const MAX_NODES: usize = 100;
/// Most stale objects listed.
pub const MAX_STALE: usize = 100;

/// One served resource, as counted under the view's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceFacts {
    /// The resource.
    pub resource: Resource,
    /// Served objects.
    pub objects: usize,
    /// Their serialized bytes (each shared by every list and stream).
    pub bytes: usize,
    /// Event-log entries kept.
    pub log_entries: usize,
    /// The oldest resourceVersion a watch may resume from.
    pub horizon: u64,
}

/// What is read from the cache, under its lock, for one answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheFacts {
    /// `is_ready()`.
    pub ready: bool,
    /// `serving_snapshot()`.
    pub serving_snapshot: bool,
    /// The current resourceVersion.
    pub resource_version: u64,
    /// Per served resource.
    pub resources: Vec<ResourceFacts>,
    /// Abnormal nodes (at most [`MAX_NODES`]).
    pub abnormal_nodes: Vec<String>,
    /// How many nodes are abnormal.
    pub abnormal_total: usize,
    /// Per listed stream, in order: log entries after its cursor.
    pub pending: Vec<usize>,
    /// Objects held stale (at most [`MAX_STALE`]).
    pub stale: Vec<StaleObject>,
    /// How many objects are stale.
    pub stale_total: usize,
}

impl CacheFacts {
    /// Reads the facts (on the writer's thread; it allocates nothing per object).
    pub fn of(state: &State, streams: &[Arc<WatcherStatus>]) -> CacheFacts {
        let view = state.view();
        let view = view.read();
        let resources = Resource::ALL
            .iter()
            .map(|&r| {
                let c = view.collection(r);
                ResourceFacts {
                    resource: r,
                    objects: c.len(),
                    bytes: c.objects().map(|o| o.json_len()).sum(),
                    log_entries: c.log_len(),
                    horizon: c.horizon(),
                }
            })
            .collect();
        let abnormal = state.abnormal_nodes();
        let (stale, stale_total) = state.stale_objects(MAX_STALE);
        CacheFacts {
            ready: state.is_ready(),
            serving_snapshot: state.serving_snapshot(),
            resource_version: state.current_rv(),
            resources,
            abnormal_nodes: abnormal.iter().take(MAX_NODES).cloned().collect(),
            abnormal_total: abnormal.len(),
            pending: streams
                .iter()
                .map(|s| view.collection(s.info.resource).pending(s.cursor()))
                .collect(),
            stale,
            stale_total,
        }
    }
}

/// The `?watchers=N` bound (default [`DEFAULT_WATCHERS`], at most [`MAX_WATCHERS`]).
fn watcher_cap(query: &str) -> usize {
    query
        .split('&')
        .find_map(|p| p.strip_prefix("watchers=")?.parse::<usize>().ok())
        .unwrap_or(DEFAULT_WATCHERS)
        .min(MAX_WATCHERS)
}

/// (status, Content-Type, body) for `/debug/state`.
pub fn answer(query: &str, writer: &WriterHandle, extras: &Extras) -> (u16, &'static str, String) {
    let now = crate::clock::unix_now();
    let (open, streams) = watchers::global().snapshot(watcher_cap(query));
    let asked = streams.clone();
    let facts = match writer.ask_within(DEBUG_WAIT, move |s| CacheFacts::of(s, &asked)) {
        Ok(facts) => facts,
        Err(busy) => {
            let e = busy.to_api_error();
            return (
                e.code,
                "application/json",
                String::from_utf8_lossy(&e.to_json()).into_owned(),
            );
        }
    };
    let relay: u64 = Resource::ALL
        .iter()
        .map(|&r| counters::global().relay_watches(r))
        .sum();
    let doc = document(
        &facts,
        OpenStreams { all: open, relay },
        &streams,
        extras,
        stats::global(),
        &process::read(),
        now,
    );
    let body = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    (200, "application/json", body + "\n")
}

/// How many watch streams are open.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenStreams {
    /// On either port.
    pub all: usize,
    /// Of them, on the relay port (the followers'; docs/SEMANTICS.md §12).
    pub relay: u64,
}

/// The JSON document (pure: every input is passed in).
pub fn document(
    facts: &CacheFacts,
    open: OpenStreams,
    streams: &[Arc<WatcherStatus>],
    extras: &Extras,
    reflectors: &Stats,
    proc: &ProcessStats,
    now_unix: u64,
) -> Value {
    let resources: serde_json::Map<String, Value> = facts
        .resources
        .iter()
        .map(|r| {
            let v = json!({
                "objects": r.objects,
                "bytes": r.bytes,
                "event_log": {"entries": r.log_entries, "horizon": r.horizon.to_string()},
            });
            (resource_label(r.resource), v)
        })
        .collect();
    let items: Vec<Value> = streams
        .iter()
        .zip(facts.pending.iter().chain(std::iter::repeat(&0)))
        .map(|(s, &pending)| {
            let i = &s.info;
            json!({
                "id": s.id,
                "peer": i.peer,
                "port": if i.relay { "relay" } else { "kube-proxy" },
                "resource": resource_label(i.resource),
                "namespace": i.namespace,
                "label_selector": i.label_selector,
                "field_selector": i.field_selector,
                "started_unix": i.started_unix,
                "cursor": s.cursor().to_string(),
                "pending_entries": pending,
                "unsent_bytes": s.unsent_bytes(),
                "events_sent": s.events(),
                "initial_events": s.sending_initial(),
            })
        })
        .collect();
    let servers = reflectors.servers().servers();
    let selected = reflectors.servers().selected();
    let server_json = |i: usize| {
        servers.get(i).map(|s| {
            json!({"index": i, "url": s.url, "role": s.role.name(), "relay": s.role == Role::Relay})
        })
    };
    let upstream_servers: Vec<Value> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "index": i,
                "url": s.url,
                "role": s.role.name(),
                "relay": s.role == Role::Relay,
                "healthy": s.healthy,
                "selected": i == selected,
            })
        })
        .collect();
    let upstream = json!({
        "servers": upstream_servers,
        "selected": server_json(selected),
    });
    let reflectors: Vec<Value> = REFLECTED
        .iter()
        .map(|&k| (k, reflectors.kind(k)))
        .filter(|(_, s)| s.active())
        .map(|(k, s)| {
            let (state, rv) = s.position();
            let error = s.last_error();
            let contact = s.last_contact();
            let since = s.failing_since();
            json!({
                "resource": stats::resource_label(k),
                "server": s.server().and_then(server_json),
                "state": state,
                "resource_version": rv,
                "failing": s.failing(),
                "failing_since_unix": (since > 0).then_some(since),
                "failing_for_seconds": (since > 0).then(|| now_unix.saturating_sub(since)),
                "stalls": s.stalls(),
                "objects_too_large": s.oversized(),
                "last_contact_unix": contact,
                "last_contact_age_seconds": (contact > 0).then(|| now_unix.saturating_sub(contact)),
                "last_error": (!error.is_empty()).then_some(error),
                "relists": s.relists(),
                "watch_errors": s.watch_errors(),
            })
        })
        .collect();
    let stale: Vec<Value> = facts
        .stale
        .iter()
        .map(|o| {
            json!({
                "resource": resource_label(o.resource),
                "namespace": &*o.key.namespace,
                "name": &*o.key.name,
                "refused_bytes": o.mark.bytes,
                "served_resource_version": o.mark.served_rv.to_string(),
            })
        })
        .collect();
    let written = extras.snapshot_written;
    let writer = extras.writer.as_ref().map(|w| {
        json!({
            "writes": w.writes.load(Relaxed),
            "failures": w.failures.load(Relaxed),
            "last_write_unix": w.last_write_unix.load(Relaxed),
            "last_bytes": w.last_bytes.load(Relaxed),
            "last_write_seconds": w.last_write_ms.load(Relaxed) as f64 / 1000.0,
        })
    });
    json!({
        "now_unix": now_unix,
        "version": env!("CARGO_PKG_VERSION"),
        "ready": facts.ready,
        "resource_version": facts.resource_version.to_string(),
        "resources": resources,
        "watchers": {
            "open": open.all,
            "relay_open": open.relay,
            "listed": items.len(),
            "truncated": items.len() < open.all,
            "items": items,
        },
        "reflectors": reflectors,
        "upstream": upstream,
        "snapshot": {
            "serving": facts.serving_snapshot,
            "written_unix": written,
            "age_seconds": written.map(|w| now_unix.saturating_sub(w)),
            "writer": writer,
        },
        "stale_objects": {
            "items": stale,
            "total": facts.stale_total,
            "truncated": facts.stale.len() < facts.stale_total,
        },
        "edge_health": {
            "abnormal_nodes": facts.abnormal_nodes,
            "abnormal_total": facts.abnormal_total,
            "truncated": facts.abnormal_nodes.len() < facts.abnormal_total,
        },
        "process": {
            "resident_memory_bytes": proc.resident_bytes,
            "resident_memory_peak_bytes": proc.resident_peak_bytes,
            "virtual_memory_bytes": proc.virtual_bytes,
            "cpu_seconds": proc.cpu_seconds,
            "threads": proc.threads,
            "open_fds": proc.open_fds,
            "max_fds": proc.max_fds,
            "start_time_seconds": proc.start_time_seconds,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::Retention;
    use crate::cache::store::Settings;
    use crate::server::counters::Counters;
    use crate::server::watchers::{Registry, WatchInfo};

    fn state() -> State {
        State::new(
            Settings {
                hostname: "h".into(),
                wrapper_in_cluster: true,
                retention: Retention::for_queue(10),
            },
            42,
        )
    }

    #[test]
    fn watcher_cap_is_bounded() {
        assert_eq!(watcher_cap(""), DEFAULT_WATCHERS);
        assert_eq!(watcher_cap("x=1&watchers=3"), 3);
        assert_eq!(watcher_cap("watchers=999999"), MAX_WATCHERS);
        assert_eq!(watcher_cap("watchers=-1"), DEFAULT_WATCHERS);
    }

    #[test]
    fn document_shape() {
        static REG: Registry = Registry::new();
        static C: Counters = Counters::new();
        let info = |res, cursor| WatchInfo {
            peer: "10.0.0.1:5000".into(),
            resource: res,
            namespace: None,
            label_selector: "!service.kubernetes.io/headless".into(),
            field_selector: String::new(),
            started_unix: 100,
            cursor,
            relay: res == Resource::Nodes,
        };
        let a = REG.register(info(Resource::Services, 42), &C);
        let _b = REG.register(info(Resource::Nodes, 42), &C);
        assert_eq!(C.relay_watches(Resource::Nodes), 1);
        a.set_unsent(10);
        let (open, listed) = REG.snapshot(1);
        let st = state();
        let facts = CacheFacts::of(&st, &listed);
        assert_eq!(facts.pending, vec![0]);
        assert_eq!(facts.resources.len(), Resource::ALL.len());
        let reflectors = Stats::new();
        reflectors.kind(Resource::Nodes).set_active(true);
        reflectors
            .kind(Resource::Nodes)
            .set_position("Watching", "777");
        reflectors.kind(Resource::Nodes).record_contact(90);
        reflectors.kind(Resource::Nodes).record_failing_since(70);
        reflectors.kind(Resource::Nodes).record_stall();
        reflectors.servers().set_servers(&[
            ("https://r1:51010".into(), Role::Relay),
            ("https://cloud:6443".into(), Role::Cloud),
        ]);
        reflectors.servers().set_healthy(0, false);
        reflectors.servers().record_switch(1, false);
        reflectors.kind(Resource::Nodes).set_server(1);
        let extras = Extras {
            snapshot_written: Some(40),
            ..Extras::default()
        };
        let proc = ProcessStats {
            resident_bytes: Some(4096),
            ..ProcessStats::default()
        };
        let open = OpenStreams {
            all: open,
            relay: 1,
        };
        let d = document(&facts, open, &listed, &extras, &reflectors, &proc, 100);
        assert_eq!(d["resource_version"], "42");
        assert_eq!(d["resources"]["services.v1"]["objects"], 0);
        assert_eq!(d["resources"]["nodes.v1"]["event_log"]["horizon"], "42");
        assert_eq!(d["watchers"]["open"], 2);
        assert_eq!(d["watchers"]["relay_open"], 1);
        assert_eq!(d["watchers"]["truncated"], true);
        let w = &d["watchers"]["items"][0];
        assert_eq!(w["resource"], "services.v1");
        assert_eq!(w["port"], "kube-proxy");
        assert_eq!(w["label_selector"], "!service.kubernetes.io/headless");
        assert_eq!(
            (&w["cursor"], &w["unsent_bytes"]),
            (&json!("42"), &json!(10))
        );
        assert_eq!(d["reflectors"].as_array().map(Vec::len), Some(1));
        assert_eq!(d["reflectors"][0]["state"], "Watching");
        assert_eq!(d["reflectors"][0]["resource_version"], "777");
        assert_eq!(d["reflectors"][0]["last_contact_age_seconds"], 10);
        assert_eq!(d["reflectors"][0]["last_error"], Value::Null);
        assert_eq!(d["reflectors"][0]["failing_since_unix"], 70);
        assert_eq!(d["reflectors"][0]["failing_for_seconds"], 30);
        assert_eq!(d["reflectors"][0]["stalls"], 1);
        assert_eq!(d["reflectors"][0]["objects_too_large"], 0);
        // Which server each reflector reads from, and every server with its role.
        let server = &d["reflectors"][0]["server"];
        assert_eq!(server["url"], "https://cloud:6443");
        assert_eq!(
            (&server["role"], &server["relay"]),
            (&json!("cloud"), &json!(false))
        );
        assert_eq!(d["upstream"]["selected"]["index"], 1);
        let relay = &d["upstream"]["servers"][0];
        assert_eq!(relay["url"], "https://r1:51010");
        assert_eq!(relay["role"], "relay");
        assert_eq!(
            (&relay["healthy"], &relay["selected"]),
            (&json!(false), &json!(false))
        );
        assert_eq!(d["upstream"]["servers"][1]["selected"], true);
        assert_eq!(d["snapshot"]["age_seconds"], 60);
        assert_eq!(d["snapshot"]["writer"], Value::Null);
        assert_eq!(d["process"]["resident_memory_bytes"], 4096);
        assert_eq!(d["edge_health"]["abnormal_total"], 0);
    }
}
