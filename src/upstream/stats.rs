//! Reflector health counters per upstream resource, the upstream servers' failover state and
//! the upstream requests by code and latency (`stats/servers.rs`: [`ServerStats`],
//! [`RequestStats`]), and their Prometheus text exposition. Pure: atomics and mutexes, no clock
//! (the callers pass wall-clock seconds and durations in), so it builds without the `io`
//! feature.
//!
//! The reflectors started by `upstream::reflector::spawn` record into the process-wide [`global`]
//! registry; tests give each reflector a [`KindStats`] of its own.

use crate::k8s::Resource;
use crate::sync::lock;
use crate::upstream::kind::REFLECTED;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

mod servers;
pub use servers::{RequestStats, ServerInfo, ServerStats, Verb, LATENCY_BUCKETS};

/// Longest error text kept by [`KindStats::record_error`] (bytes; cut at a char boundary).
pub const MAX_ERROR_TEXT: usize = 1024;

/// Why a reflector that had listed went back to listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelistReason {
    /// 410 Expired: the watch RV left the upstream's window; relisted at that RV.
    Expired,
    /// "Too large resource version": the upstream's RVs went backwards; relisted from scratch.
    TooLarge,
    /// The same RV kept failing without progress; relisted from scratch.
    Repeated,
    /// A watch event could not be decoded (or was over-long); relisted at the last good RV.
    Undecodable,
    /// The selected server is of another resourceVersion domain than the RV held (a relay, or
    /// the cloud, see [`crate::upstream::domain`]); relisted from scratch.
    ServerSwitch,
    /// Read before a re-watch, the upstream's current resourceVersion was below the one held
    /// (etcd restored, control plane replaced: the reflectors' `rewatch` rules); relisted from
    /// scratch.
    WentBack,
}

impl RelistReason {
    /// Every reason, in a fixed order.
    pub const ALL: [RelistReason; 6] = [
        RelistReason::Expired,
        RelistReason::TooLarge,
        RelistReason::Repeated,
        RelistReason::Undecodable,
        RelistReason::ServerSwitch,
        RelistReason::WentBack,
    ];

    /// A short snake_case name (logs, labels).
    pub fn name(self) -> &'static str {
        match self {
            RelistReason::Expired => "expired",
            RelistReason::TooLarge => "too_large",
            RelistReason::Repeated => "repeated_failures",
            RelistReason::Undecodable => "undecodable",
            RelistReason::ServerSwitch => "server_switch",
            RelistReason::WentBack => "went_back",
        }
    }

    fn index(self) -> usize {
        match self {
            RelistReason::Expired => 0,
            RelistReason::TooLarge => 1,
            RelistReason::Repeated => 2,
            RelistReason::Undecodable => 3,
            RelistReason::ServerSwitch => 4,
            RelistReason::WentBack => 5,
        }
    }
}

/// The counters of one upstream resource's reflector. Every method takes `&self`; readers and the
/// reflector thread share it through an `Arc`.
#[derive(Debug, Default)]
pub struct KindStats {
    active: AtomicBool,
    relists: [AtomicU64; RelistReason::ALL.len()],
    watch_errors: AtomicU64,
    last_contact: AtomicU64,
    failing: AtomicBool,
    /// Unix seconds when the open failure episode began; 0 = none open.
    failing_since: AtomicU64,
    /// Lists and watches abandoned at their progress deadline.
    stalls: AtomicU64,
    /// Upstream objects skipped for being larger than the object bound.
    oversized: AtomicU64,
    /// Lists and watches answered 429 Too Many Requests.
    throttled: AtomicU64,
    last_error: Mutex<String>,
    /// The reflector's state and upstream resourceVersion, e.g. `("Watching", "12345")`.
    position: Mutex<(&'static str, String)>,
    /// Index (in [`ServerStats`]' list) + 1 of the server the reflector last listed or started
    /// a watch from; 0 = none yet.
    server: AtomicUsize,
}

impl KindStats {
    /// All zero: inactive, never contacted, not failing.
    pub fn new() -> Self {
        KindStats::default()
    }

    /// Marks the reflector of this resource as running (`true`) or stopped; only running ones
    /// are rendered.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Relaxed);
    }

    /// Whether a reflector of this resource is running.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Counts one relist (a listed reflector going back to listing).
    pub fn record_relist(&self, reason: RelistReason) {
        if let Some(c) = self.relists.get(reason.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Relists so far, all reasons.
    pub fn relists(&self) -> u64 {
        self.relists.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Relists so far for one reason.
    pub fn relists_for(&self, reason: RelistReason) -> u64 {
        self.relists
            .get(reason.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Counts one failed watch (start refused, ERROR event, broken, empty or undecodable stream).
    pub fn record_watch_error(&self) {
        self.watch_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Failed watches so far.
    pub fn watch_errors(&self) -> u64 {
        self.watch_errors.load(Ordering::Relaxed)
    }

    /// Records a successful contact (a list, or any watch line) at `unix_secs`.
    pub fn record_contact(&self, unix_secs: u64) {
        self.last_contact.fetch_max(unix_secs, Ordering::Relaxed);
    }

    /// Unix seconds of the last successful contact; 0 = never.
    pub fn last_contact(&self) -> u64 {
        self.last_contact.load(Ordering::Relaxed)
    }

    /// Sets whether the reflector is in a failure episode (not failing also forgets when the
    /// episode began).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::Relaxed);
        if !failing {
            self.failing_since.store(0, Ordering::Relaxed);
        }
    }

    /// A failure episode began at `unix_secs` (kept until [`KindStats::set_failing`]`(false)`;
    /// a later call in the same episode changes nothing).
    pub fn record_failing_since(&self, unix_secs: u64) {
        let _ = self.failing_since.compare_exchange(
            0,
            unix_secs.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Unix seconds when the open failure episode began; 0 = none open.
    pub fn failing_since(&self) -> u64 {
        self.failing_since.load(Ordering::Relaxed)
    }

    /// Counts a list or watch abandoned at its progress deadline.
    pub fn record_stall(&self) {
        self.stalls.fetch_add(1, Ordering::Relaxed);
    }

    /// Lists and watches abandoned at their progress deadline so far.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// Counts an upstream object skipped for its size.
    pub fn record_oversized(&self) {
        self.oversized.fetch_add(1, Ordering::Relaxed);
    }

    /// Upstream objects skipped for their size so far.
    pub fn oversized(&self) -> u64 {
        self.oversized.load(Ordering::Relaxed)
    }

    /// Counts a list or watch answered 429 Too Many Requests.
    pub fn record_throttled(&self) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
    }

    /// Lists and watches answered 429 so far.
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }

    /// Whether the reflector is in a failure episode (failed, not yet recovered).
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Keeps `text` (at most [`MAX_ERROR_TEXT`] bytes) as the last error.
    pub fn record_error(&self, text: &str) {
        let mut end = text.len().min(MAX_ERROR_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut last = lock(&self.last_error);
        last.clear();
        last.push_str(text.get(..end).unwrap_or_default());
    }

    /// Records the reflector's state (`Empty`, `Listed`, `Watching`) and its upstream RV.
    pub fn set_position(&self, state: &'static str, rv: &str) {
        let mut p = lock(&self.position);
        if p.0 != state || p.1 != rv {
            p.0 = state;
            p.1.clear();
            p.1.push_str(rv);
        }
    }

    /// The reflector's last recorded state and upstream RV (`("", "")` before its first step).
    pub fn position(&self) -> (&'static str, String) {
        let p = lock(&self.position);
        (p.0, p.1.clone())
    }

    /// Records the server (its index in the server list) the reflector's last list or watch
    /// came from.
    pub fn set_server(&self, index: usize) {
        self.server
            .store(index.saturating_add(1), Ordering::Relaxed);
    }

    /// The server the reflector's last list or watch came from (`None` before the first).
    pub fn server(&self) -> Option<usize> {
        self.server.load(Ordering::Relaxed).checked_sub(1)
    }

    /// The last error recorded; empty if none.
    pub fn last_error(&self) -> String {
        lock(&self.last_error).clone()
    }
}

/// A resource's position in [`REFLECTED`] (the stats array's order).
fn kind_index(kind: Resource) -> usize {
    match kind {
        Resource::Nodes => 0,
        Resource::Services => 1,
        Resource::Endpoints => 2,
        Resource::SlicesV1 => 3,
        Resource::SlicesV1beta1 => 4,
        Resource::CidrsV1 => 5,
        Resource::CidrsV1beta1 => 6,
    }
}

/// The `resource` label of a kind: the plural for core resources, kubectl's
/// `plural.version.group` for the two versions of EndpointSlices and of ServiceCIDRs (so they
/// never collide).
pub fn resource_label(kind: Resource) -> &'static str {
    match kind {
        Resource::Nodes => "nodes",
        Resource::Services => "services",
        Resource::Endpoints => "endpoints",
        Resource::SlicesV1 => "endpointslices.v1.discovery.k8s.io",
        Resource::SlicesV1beta1 => "endpointslices.v1beta1.discovery.k8s.io",
        Resource::CidrsV1 => "servicecidrs.v1.networking.k8s.io",
        Resource::CidrsV1beta1 => "servicecidrs.v1beta1.networking.k8s.io",
    }
}

/// The counters of every upstream resource, of the upstream servers and of the upstream
/// requests.
#[derive(Debug, Default)]
pub struct Stats {
    kinds: [Arc<KindStats>; REFLECTED.len()],
    servers: Arc<ServerStats>,
    requests: Arc<RequestStats>,
}

impl Stats {
    /// Fresh counters for every kind.
    pub fn new() -> Self {
        Stats::default()
    }

    /// The counters of `kind`.
    pub fn kind(&self, kind: Resource) -> &Arc<KindStats> {
        // kind_index is always < 5, the array's length.
        &self.kinds[kind_index(kind)]
    }

    /// The upstream servers' failover state (recorded by the upstream client).
    pub fn servers(&self) -> &Arc<ServerStats> {
        &self.servers
    }

    /// The upstream requests by code and latency (recorded by the upstream client).
    pub fn requests(&self) -> &Arc<RequestStats> {
        &self.requests
    }

    /// Appends the Prometheus text exposition of the running reflectors' counters to `out`:
    /// `grid_wrapper_upstream_relists_total`, `grid_wrapper_upstream_watch_errors_total`
    /// (counters), `grid_wrapper_upstream_last_contact_timestamp_seconds` (0 = never) and
    /// `grid_wrapper_upstream_failing` (0/1), each with a `resource` label
    /// ([`resource_label`]). Kinds without a running reflector are left out. Then the servers'
    /// failover state ([`ServerStats::render`], once an upstream client exists) and the
    /// upstream requests ([`RequestStats::render`]).
    pub fn render_prometheus(&self, out: &mut String) {
        type Metric = (
            &'static str,
            &'static str,
            &'static str,
            fn(&KindStats) -> u64,
        );
        let metrics: [Metric; 8] = [
            (
                "grid_wrapper_upstream_relists_total",
                "counter",
                "Times a reflector that had listed went back to listing (410, resourceVersion too large, repeated failures, undecodable events, a move to another server's resourceVersions, the upstream's resourceVersion gone back).",
                KindStats::relists,
            ),
            (
                "grid_wrapper_upstream_watch_errors_total",
                "counter",
                "Failed upstream watches: refused at start, ERROR events (410 included), broken, empty or undecodable streams.",
                KindStats::watch_errors,
            ),
            (
                "grid_wrapper_upstream_last_contact_timestamp_seconds",
                "gauge",
                "Unix time of the last successful upstream list or received watch line; 0 = never.",
                KindStats::last_contact,
            ),
            (
                "grid_wrapper_upstream_failing",
                "gauge",
                "1 while the reflector is failing (from its first failure until it lists or watches successfully again).",
                |k| u64::from(k.failing()),
            ),
            (
                "grid_wrapper_upstream_failing_since_timestamp_seconds",
                "gauge",
                "Unix time of the first failure of the reflector's open failure episode; 0 = not failing.",
                KindStats::failing_since,
            ),
            (
                "grid_wrapper_upstream_stalls_total",
                "counter",
                "Upstream lists and watches abandoned because no byte came within their progress deadline (--list-progress-timeout, --watch-progress-timeout).",
                KindStats::stalls,
            ),
            (
                "grid_wrapper_upstream_objects_too_large_total",
                "counter",
                "Upstream objects larger than --max-object-bytes, skipped (not served).",
                KindStats::oversized,
            ),
            (
                "grid_wrapper_upstream_throttled_total",
                "counter",
                "Upstream lists and watches answered 429 Too Many Requests (the apiserver shedding load); the next attempt waits for its Retry-After.",
                KindStats::throttled,
            ),
        ];
        for (name, kind, help, value) in metrics {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for k in REFLECTED {
                let s = self.kind(k);
                if s.active() {
                    let _ = writeln!(
                        out,
                        "{name}{{resource=\"{}\"}} {}",
                        resource_label(k),
                        value(s)
                    );
                }
            }
        }
        self.render_reflector_servers(out);
        self.servers.render(out);
        self.requests.render(out);
    }

    /// `grid_wrapper_upstream_reflector_server_index{resource,server,role}`: per running
    /// reflector, the index of the server its last list or watch came from (nothing for a
    /// reflector that has not read yet, or before the servers are registered).
    fn render_reflector_servers(&self, out: &mut String) {
        let name = "grid_wrapper_upstream_reflector_server_index";
        let mut header = false;
        for k in REFLECTED {
            let s = self.kind(k);
            let Some((i, server)) = s
                .server()
                .filter(|_| s.active())
                .and_then(|i| Some((i, self.servers.server(i)?)))
            else {
                continue;
            };
            if !header {
                header = true;
                let _ = writeln!(
                    out,
                    "# HELP {name} The server each reflector reads from now (its last list or watch): its index in the server list (relays, then --master), URL and role (relay or cloud)."
                );
                let _ = writeln!(out, "# TYPE {name} gauge");
            }
            let _ = writeln!(
                out,
                "{name}{{resource=\"{}\",server=\"{}\",role=\"{}\"}} {i}",
                resource_label(k),
                servers::label_value(&server.url),
                server.role
            );
        }
    }
}

/// The process-wide registry the spawned reflectors record into.
pub fn global() -> &'static Stats {
    static GLOBAL: OnceLock<Stats> = OnceLock::new();
    GLOBAL.get_or_init(Stats::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::domain::Role;

    #[test]
    fn counters_move_and_error_text_is_capped() {
        let s = KindStats::new();
        assert_eq!((s.relists(), s.watch_errors(), s.last_contact()), (0, 0, 0));
        assert!(!s.failing() && !s.active() && s.last_error().is_empty());
        s.record_relist(RelistReason::TooLarge);
        s.record_relist(RelistReason::TooLarge);
        s.record_relist(RelistReason::Expired);
        assert_eq!(s.relists(), 3);
        assert_eq!(s.relists_for(RelistReason::TooLarge), 2);
        assert_eq!(s.relists_for(RelistReason::Repeated), 0);
        s.record_watch_error();
        assert_eq!(s.watch_errors(), 1);
        s.record_contact(100);
        s.record_contact(90); // never goes backwards
        assert_eq!(s.last_contact(), 100);
        s.set_failing(true);
        assert!(s.failing());
        s.record_failing_since(500);
        s.record_failing_since(600); // the episode's start stays
        assert_eq!(s.failing_since(), 500);
        s.set_failing(false);
        assert_eq!(s.failing_since(), 0, "no episode, no start");
        s.set_failing(true);
        s.record_stall();
        s.record_oversized();
        s.record_oversized();
        assert_eq!((s.stalls(), s.oversized()), (1, 2));
        s.record_error(&"é".repeat(MAX_ERROR_TEXT));
        let e = s.last_error();
        assert!(
            e.len() <= MAX_ERROR_TEXT && e.len() > MAX_ERROR_TEXT - 2,
            "{}",
            e.len()
        );
        s.record_error("short");
        assert_eq!(s.last_error(), "short");
        let names: Vec<&str> = RelistReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "expired",
                "too_large",
                "repeated_failures",
                "undecodable",
                "server_switch",
                "went_back"
            ]
        );
    }

    #[test]
    fn prometheus_text_for_running_reflectors() {
        let st = Stats::new();
        let mut out = String::new();
        st.render_prometheus(&mut out);
        assert!(!out.contains("resource="), "nothing running: {out}");
        assert!(out.contains("# TYPE grid_wrapper_upstream_relists_total counter\n"));

        let nodes = st.kind(Resource::Nodes);
        nodes.set_active(true);
        nodes.record_relist(RelistReason::Repeated);
        nodes.record_watch_error();
        nodes.record_watch_error();
        nodes.record_contact(1_700_000_000);
        nodes.set_failing(true);
        nodes.record_failing_since(1_700_000_001);
        nodes.record_stall();
        nodes.record_oversized();
        nodes.record_throttled();
        st.kind(Resource::SlicesV1).set_active(true);
        let mut out = String::new();
        st.render_prometheus(&mut out);
        for line in [
            "# HELP grid_wrapper_upstream_relists_total ",
            "# TYPE grid_wrapper_upstream_relists_total counter\n",
            "grid_wrapper_upstream_relists_total{resource=\"nodes\"} 1\n",
            "# TYPE grid_wrapper_upstream_watch_errors_total counter\n",
            "grid_wrapper_upstream_watch_errors_total{resource=\"nodes\"} 2\n",
            "# TYPE grid_wrapper_upstream_last_contact_timestamp_seconds gauge\n",
            "grid_wrapper_upstream_last_contact_timestamp_seconds{resource=\"nodes\"} 1700000000\n",
            "grid_wrapper_upstream_last_contact_timestamp_seconds{resource=\"endpointslices.v1.discovery.k8s.io\"} 0\n",
            "# TYPE grid_wrapper_upstream_failing gauge\n",
            "grid_wrapper_upstream_failing{resource=\"nodes\"} 1\n",
            "grid_wrapper_upstream_failing{resource=\"endpointslices.v1.discovery.k8s.io\"} 0\n",
            "grid_wrapper_upstream_failing_since_timestamp_seconds{resource=\"nodes\"} 1700000001\n",
            "# TYPE grid_wrapper_upstream_stalls_total counter\n",
            "grid_wrapper_upstream_stalls_total{resource=\"nodes\"} 1\n",
            "grid_wrapper_upstream_objects_too_large_total{resource=\"nodes\"} 1\n",
            "# TYPE grid_wrapper_upstream_throttled_total counter\n",
            "grid_wrapper_upstream_throttled_total{resource=\"nodes\"} 1\n",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        assert!(!out.contains("services"), "{out}");
        // Every sample line is `name{labels} value`, preceded by its HELP and TYPE: 8 reflector
        // metrics (16 samples), then the request and response-format counters (no sample yet)
        // and the latency histogram (4 verbs × (9 buckets + sum + count)); no server metrics
        // before an upstream client registers its servers.
        assert_eq!(out.lines().filter(|l| l.starts_with("# HELP")).count(), 11);
        assert_eq!(out.lines().filter(|l| !l.starts_with('#')).count(), 16 + 44);
        assert!(
            !out.contains("grid_wrapper_upstream_switches_total"),
            "{out}"
        );
        st.servers().set_servers(&[
            ("http://a".into(), Role::Cloud),
            ("http://b".into(), Role::Cloud),
        ]);
        st.requests()
            .record(Verb::Watch, Some(200), std::time::Duration::ZERO);
        let mut out = String::new();
        st.render_prometheus(&mut out);
        assert!(out.contains("grid_wrapper_upstream_switches_total{direction=\"failover\"} 0\n"));
        assert!(out.contains("grid_wrapper_upstream_current_server_index 0\n"));
        assert!(
            out.contains("grid_wrapper_upstream_requests_total{verb=\"watch\",code=\"200\"} 1\n")
        );
        // The global registry is one instance.
        assert!(std::ptr::eq(global(), global()));
    }
}

#[cfg(test)]
mod tests_servers {
    use super::*;
    use crate::upstream::domain::Role;

    #[test]
    fn each_running_reflector_says_which_server_it_reads_from() {
        let st = Stats::new();
        st.kind(Resource::Nodes).set_active(true);
        st.kind(Resource::Services).set_active(true);
        st.kind(Resource::Nodes).set_server(0);
        let mut out = String::new();
        st.render_prometheus(&mut out);
        assert!(
            !out.contains("reflector_server_index"),
            "no servers yet: {out}"
        );
        st.servers().set_servers(&[
            ("https://r1:51010".into(), Role::Relay),
            ("https://cloud:6443".into(), Role::Cloud),
        ]);
        let mut out = String::new();
        st.render_prometheus(&mut out);
        assert!(out.contains("# TYPE grid_wrapper_upstream_reflector_server_index gauge\n"));
        assert!(out.contains(
            "grid_wrapper_upstream_reflector_server_index{resource=\"nodes\",server=\"https://r1:51010\",role=\"relay\"} 0\n"
        ), "{out}");
        assert!(
            !out.contains("reflector_server_index{resource=\"services"),
            "not read yet"
        );
        st.kind(Resource::Nodes).set_server(1);
        let mut out = String::new();
        st.render_prometheus(&mut out);
        assert!(out.contains(
            "grid_wrapper_upstream_reflector_server_index{resource=\"nodes\",server=\"https://cloud:6443\",role=\"cloud\"} 1\n"
        ), "{out}");
    }
}
