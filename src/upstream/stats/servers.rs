//! Part of [`crate::upstream::stats`]: the upstream servers' failover state ([`ServerStats`]) and
//! the upstream requests by status code and latency ([`RequestStats`]), with their Prometheus
//! text. Pure: atomics and mutexes; callers pass durations in.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::histogram::Histogram;
use crate::sync::lock;
use crate::upstream::domain::Role;

/// The kind of an upstream request, the `verb` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// A LIST (reflectors, EndpointSlice probing); timed until the body is read and decoded.
    List,
    /// A WATCH start; timed until the response head.
    Watch,
    /// A JSON GET (API discovery); timed until the body is read.
    Get,
    /// A proxied client request; timed until the response head.
    Forward,
}

impl Verb {
    /// Every verb, in rendering order.
    pub const ALL: [Verb; 4] = [Verb::List, Verb::Watch, Verb::Get, Verb::Forward];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Get => "get",
            Verb::Forward => "forward",
        }
    }

    fn index(self) -> usize {
        match self {
            Verb::List => 0,
            Verb::Watch => 1,
            Verb::Get => 2,
            Verb::Forward => 3,
        }
    }
}

/// Upper bounds, in seconds, of the latency histogram's buckets (`+Inf` follows).
pub const LATENCY_BUCKETS: [f64; 8] = [0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0, 60.0];

/// Upstream requests by verb and HTTP status code, and their latency by verb.
#[derive(Debug)]
pub struct RequestStats {
    /// `(verb, code)` → count; code 0 = no HTTP answer.
    codes: Mutex<BTreeMap<(Verb, u16), u64>>,
    latency: [Histogram; 4],
    /// `(verb, format)` → successful lists and watches answered in that format.
    formats: Mutex<BTreeMap<(Verb, &'static str), u64>>,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            codes: Mutex::default(),
            latency: [const { Histogram::new(&LATENCY_BUCKETS) }; 4],
            formats: Mutex::default(),
        }
    }
}

impl RequestStats {
    /// Records one request (one attempt on one server): `code` is the HTTP status, `None` when
    /// no answer came (connect failure, timeout, broken connection).
    pub fn record(&self, verb: Verb, code: Option<u16>, took: Duration) {
        // HTTP codes are three digits; anything else would only grow the map.
        let code = code.filter(|c| (100..=999).contains(c)).unwrap_or(0);
        *lock(&self.codes).entry((verb, code)).or_insert(0) += 1;
        if let Some(h) = self.latency.get(verb.index()) {
            h.observe(took);
        }
    }

    /// Records a 2xx list or watch answer in `format` (`json` or `protobuf`).
    pub fn record_format(&self, verb: Verb, format: &'static str) {
        *lock(&self.formats).entry((verb, format)).or_insert(0) += 1;
    }

    /// Answers recorded for `verb` in `format`.
    pub fn format_count(&self, verb: Verb, format: &'static str) -> u64 {
        lock(&self.formats)
            .get(&(verb, format))
            .copied()
            .unwrap_or(0)
    }

    /// Requests recorded for `verb` with `code` (`None`: without an answer).
    pub fn count(&self, verb: Verb, code: Option<u16>) -> u64 {
        let key = (verb, code.unwrap_or(0));
        let codes = lock(&self.codes);
        codes.get(&key).copied().unwrap_or(0)
    }

    /// Appends `grid_wrapper_upstream_requests_total{verb,code}` (counter; `code="error"` when
    /// no HTTP answer came) and `grid_wrapper_upstream_request_duration_seconds{verb}`
    /// (histogram, buckets [`LATENCY_BUCKETS`]).
    pub fn render(&self, out: &mut String) {
        let name = "grid_wrapper_upstream_requests_total";
        let _ = writeln!(
            out,
            "# HELP {name} Upstream requests (each attempt on each server) by verb (list, watch, get, forward) and HTTP status code; code=\"error\" when no answer came."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        let codes = lock(&self.codes).clone();
        for ((verb, code), n) in codes {
            let code = match code {
                0 => "error".to_string(),
                c => c.to_string(),
            };
            let _ = writeln!(
                out,
                "{name}{{verb=\"{}\",code=\"{code}\"}} {n}",
                verb.name()
            );
        }
        let name = "grid_wrapper_upstream_responses_total";
        let _ = writeln!(
            out,
            "# HELP {name} Successful upstream lists and watches by the format they were answered in (json or protobuf)."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        let formats = lock(&self.formats).clone();
        for ((verb, format), n) in formats {
            let _ = writeln!(
                out,
                "{name}{{verb=\"{}\",format=\"{format}\"}} {n}",
                verb.name()
            );
        }
        let name = "grid_wrapper_upstream_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Upstream request latency by verb: list and get until the body is read, watch and forward until the response head."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        for verb in Verb::ALL {
            if let Some(h) = self.latency.get(verb.index()) {
                h.render(out, name, "verb", verb.name());
            }
        }
    }
}

/// A label value with `\`, `"` and newlines escaped (Prometheus text format).
pub(super) fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One server of the list, as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// The URL as shown (no user info).
    pub url: String,
    /// A relay or the cloud upstream.
    pub role: Role,
    /// Considered healthy now.
    pub healthy: bool,
}

/// The failover state of the upstream servers (the relays of `--relay-servers`, then the cloud
/// servers of `--master=A,B,…`), mirrored here by `upstream::failover` on every change.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// In order of preference; empty until an upstream client exists.
    servers: Mutex<Vec<ServerInfo>>,
    selected: AtomicUsize,
    /// Switches to a less preferred server, then back to a more preferred one.
    switches: [AtomicU64; 2],
}

impl ServerStats {
    /// Registers the servers (URLs as shown, with their role, in order of preference), all
    /// healthy, the first selected. Switch counts are kept.
    pub fn set_servers(&self, servers: &[(String, Role)]) {
        let mut s = lock(&self.servers);
        *s = servers
            .iter()
            .map(|(url, role)| ServerInfo {
                url: url.clone(),
                role: *role,
                healthy: true,
            })
            .collect();
        self.selected.store(0, Ordering::Relaxed);
    }

    /// Records whether server `index` is healthy.
    pub fn set_healthy(&self, index: usize, healthy: bool) {
        let mut s = lock(&self.servers);
        if let Some(entry) = s.get_mut(index) {
            entry.healthy = healthy;
        }
    }

    /// Whether server `index` is healthy (`false` if there is no such server).
    pub fn healthy(&self, index: usize) -> bool {
        let s = lock(&self.servers);
        s.get(index).is_some_and(|e| e.healthy)
    }

    /// Every server, in order of preference (empty before an upstream client exists).
    pub fn servers(&self) -> Vec<ServerInfo> {
        lock(&self.servers).clone()
    }

    /// Server `index` (`None` if there is no such server).
    pub fn server(&self, index: usize) -> Option<ServerInfo> {
        lock(&self.servers).get(index).cloned()
    }

    /// Records a switch to server `to`: `back` when it is more preferred than the previous one.
    pub fn record_switch(&self, to: usize, back: bool) {
        self.selected.store(to, Ordering::Relaxed);
        if let Some(c) = self.switches.get(usize::from(back)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The selected server's index (0 = primary).
    pub fn selected(&self) -> usize {
        self.selected.load(Ordering::Relaxed)
    }

    /// Switches so far: to a less preferred server (`back == false`) or back to a more
    /// preferred one.
    pub fn switches(&self, back: bool) -> u64 {
        self.switches
            .get(usize::from(back))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Appends `grid_wrapper_upstream_switches_total{direction="failover"|"failback"}`
    /// (counter), `grid_wrapper_upstream_server_healthy{server,index}` (gauge 0/1),
    /// `grid_wrapper_upstream_server_role{server,index,role}` (always 1; `role` is `relay` or
    /// `cloud`), `grid_wrapper_upstream_current_server_index` (gauge, 0 = the most preferred)
    /// and `grid_wrapper_upstream_current_server_info{server,index,role}` (1 for the selected
    /// server); nothing before the servers are registered.
    pub fn render(&self, out: &mut String) {
        let servers = lock(&self.servers).clone();
        if servers.is_empty() {
            return;
        }
        let name = "grid_wrapper_upstream_switches_total";
        let _ = writeln!(
            out,
            "# HELP {name} Upstream server switches: failover = to a less preferred server, failback = back to a more preferred one."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (direction, back) in [("failover", false), ("failback", true)] {
            let n = self.switches(back);
            let _ = writeln!(out, "{name}{{direction=\"{direction}\"}} {n}");
        }
        let name = "grid_wrapper_upstream_server_healthy";
        let _ = writeln!(
            out,
            "# HELP {name} 1 while the upstream server is considered healthy (index = position in the server list: the relays of --relay-servers, then --master; 0 = the most preferred)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (i, s) in servers.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{server=\"{}\",index=\"{i}\"}} {}",
                label_value(&s.url),
                u8::from(s.healthy)
            );
        }
        let name = "grid_wrapper_upstream_server_role";
        let _ = writeln!(
            out,
            "# HELP {name} Each upstream server's role (always 1): relay (a site relay, --relay-kubeconfig) or cloud (--kubeconfig/--master)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (i, s) in servers.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{server=\"{}\",index=\"{i}\",role=\"{}\"}} 1",
                label_value(&s.url),
                s.role
            );
        }
        let selected = self.selected();
        let name = "grid_wrapper_upstream_current_server_index";
        let _ = writeln!(
            out,
            "# HELP {name} Index in the server list (relays, then --master) of the upstream server requests go to (0 = the most preferred)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {selected}");
        if let Some(s) = servers.get(selected) {
            let name = "grid_wrapper_upstream_current_server_info";
            let _ = writeln!(
                out,
                "# HELP {name} The upstream server requests go to now (always 1), with its URL and role (relay or cloud)."
            );
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(
                out,
                "{name}{{server=\"{}\",index=\"{selected}\",role=\"{}\"}} 1",
                label_value(&s.url),
                s.role
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_by_code_and_a_cumulative_latency_histogram() {
        let r = RequestStats::default();
        let ms = Duration::from_millis;
        r.record(Verb::List, Some(200), ms(3));
        r.record(Verb::List, Some(200), ms(30));
        r.record(Verb::List, Some(410), ms(200));
        r.record(Verb::Forward, None, ms(70_000));
        r.record(Verb::Watch, Some(65535), ms(1)); // not an HTTP code: counted as "error"
        assert_eq!(r.count(Verb::List, Some(200)), 2);
        assert_eq!(r.count(Verb::Forward, None), 1);
        assert_eq!(r.count(Verb::Watch, None), 1);
        let mut out = String::new();
        r.render(&mut out);
        for line in [
            "# TYPE grid_wrapper_upstream_requests_total counter\n",
            "grid_wrapper_upstream_requests_total{verb=\"list\",code=\"200\"} 2\n",
            "grid_wrapper_upstream_requests_total{verb=\"list\",code=\"410\"} 1\n",
            "grid_wrapper_upstream_requests_total{verb=\"forward\",code=\"error\"} 1\n",
            "# TYPE grid_wrapper_upstream_request_duration_seconds histogram\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"list\",le=\"0.005\"} 1\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"list\",le=\"0.025\"} 1\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"list\",le=\"0.1\"} 2\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"list\",le=\"0.25\"} 3\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"list\",le=\"+Inf\"} 3\n",
            "grid_wrapper_upstream_request_duration_seconds_sum{verb=\"list\"} 0.233\n",
            "grid_wrapper_upstream_request_duration_seconds_count{verb=\"list\"} 3\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"forward\",le=\"60\"} 0\n",
            "grid_wrapper_upstream_request_duration_seconds_bucket{verb=\"forward\",le=\"+Inf\"} 1\n",
            "grid_wrapper_upstream_request_duration_seconds_count{verb=\"get\"} 0\n",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        // Codes render in a stable order: verb, then code.
        let list_200 = out.find("verb=\"list\",code=\"200\"").unwrap();
        let list_410 = out.find("verb=\"list\",code=\"410\"").unwrap();
        assert!(list_200 < list_410);
    }

    #[test]
    fn servers_render_once_registered() {
        let s = ServerStats::default();
        let mut out = String::new();
        s.render(&mut out);
        assert!(out.is_empty(), "no upstream client yet: {out}");
        s.set_servers(&[
            ("https://r:51010".into(), Role::Relay),
            ("https://b\"x:6443".into(), Role::Cloud),
        ]);
        assert!(s.healthy(0) && s.healthy(1) && !s.healthy(2));
        s.set_healthy(0, false);
        s.record_switch(1, false);
        s.record_switch(0, true);
        s.record_switch(1, false);
        assert_eq!(
            (s.switches(false), s.switches(true), s.selected()),
            (2, 1, 1)
        );
        s.render(&mut out);
        for line in [
            "# TYPE grid_wrapper_upstream_switches_total counter\n",
            "grid_wrapper_upstream_switches_total{direction=\"failover\"} 2\n",
            "grid_wrapper_upstream_switches_total{direction=\"failback\"} 1\n",
            "# TYPE grid_wrapper_upstream_server_healthy gauge\n",
            "grid_wrapper_upstream_server_healthy{server=\"https://r:51010\",index=\"0\"} 0\n",
            "grid_wrapper_upstream_server_healthy{server=\"https://b\\\"x:6443\",index=\"1\"} 1\n",
            "grid_wrapper_upstream_server_role{server=\"https://r:51010\",index=\"0\",role=\"relay\"} 1\n",
            "grid_wrapper_upstream_server_role{server=\"https://b\\\"x:6443\",index=\"1\",role=\"cloud\"} 1\n",
            "# TYPE grid_wrapper_upstream_current_server_index gauge\n",
            "grid_wrapper_upstream_current_server_index 1\n",
            "grid_wrapper_upstream_current_server_info{server=\"https://b\\\"x:6443\",index=\"1\",role=\"cloud\"} 1\n",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        // Re-registering resets health and selection, not the counters.
        s.set_servers(&[("https://a:6443".into(), Role::Cloud)]);
        assert!(s.healthy(0));
        assert_eq!((s.selected(), s.switches(false)), (0, 2));
    }
}
