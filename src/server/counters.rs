//! Request, watch and traffic counters of the server facing kube-proxy, and their Prometheus
//! text exposition.
//!
//! The event loop records into the process-wide [`global`] registry on its hot path: every
//! method is a few relaxed atomic operations on fixed arrays — no lock, no allocation. Label
//! cardinality is bounded by construction: route kind × served resource × status code, where
//! codes outside a fixed table are counted by class (`4xx`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::api::decide::{Label, Side};
use crate::api::negotiate::Format;
use crate::api::route::Route;
use crate::histogram::Histogram;
use crate::k8s::Resource;

/// How a request was answered, for the `route` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// A LIST of a served collection.
    List,
    /// A GET of one served object.
    Get,
    /// A WATCH of a served collection.
    Watch,
    /// Forwarded upstream.
    Proxy,
    /// Not routed: the request could not be read (malformed, too large).
    Invalid,
    /// Answered by the relay port itself (docs/SEMANTICS.md §12): probes, discovery, and 404
    /// for what the relay view does not serve.
    Relay,
}

impl RouteKind {
    /// Every kind, in rendering order.
    pub const ALL: [RouteKind; 6] = [
        RouteKind::List,
        RouteKind::Get,
        RouteKind::Watch,
        RouteKind::Proxy,
        RouteKind::Invalid,
        RouteKind::Relay,
    ];

    /// The kind and resource of a decided request. A collection request is a watch when its raw
    /// query has `watch` with a value other than `0`/`false` (as `api::query` decides).
    pub fn of(label: &Label, query: &str) -> (RouteKind, Option<Resource>) {
        match label {
            Label::Relay => (RouteKind::Relay, None),
            Label::Proxy => (RouteKind::Proxy, None),
            Label::Route(Route::Object { res, .. }) => (RouteKind::Get, Some(*res)),
            Label::Route(Route::Collection { res, .. }) => {
                let watch = query.split('&').find_map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (k == "watch").then(|| v != "0" && !v.eq_ignore_ascii_case("false"))
                });
                let kind = if watch == Some(true) {
                    RouteKind::Watch
                } else {
                    RouteKind::List
                };
                (kind, Some(*res))
            }
        }
    }

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::List => "list",
            RouteKind::Get => "get",
            RouteKind::Watch => "watch",
            RouteKind::Proxy => "proxy",
            RouteKind::Invalid => "invalid",
            RouteKind::Relay => "relay",
        }
    }

    fn index(self) -> usize {
        match self {
            RouteKind::List => 0,
            RouteKind::Get => 1,
            RouteKind::Watch => 2,
            RouteKind::Proxy => 3,
            RouteKind::Invalid => 4,
            RouteKind::Relay => 5,
        }
    }
}

/// Why a watch stream ended, for the `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The client did not read fast enough (`--notify-channel-size` entries piled up).
    TooSlow,
    /// The stream fell behind the event history.
    Evicted,
    /// `timeoutSeconds` elapsed.
    Deadline,
    /// The client closed the connection (or it failed).
    ClientGone,
    /// grid-wrapper shut down.
    Shutdown,
    /// Refused at start: the requested resourceVersion is older than the history (one ERROR
    /// event with 410, then the end).
    Expired,
    /// The client read nothing of what waited for it for `--watch-stall-timeout`.
    Stalled,
}

impl EndReason {
    /// Every reason, in rendering order.
    pub const ALL: [EndReason; 7] = [
        EndReason::TooSlow,
        EndReason::Evicted,
        EndReason::Deadline,
        EndReason::ClientGone,
        EndReason::Shutdown,
        EndReason::Expired,
        EndReason::Stalled,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            EndReason::TooSlow => "too_slow",
            EndReason::Evicted => "evicted",
            EndReason::Deadline => "deadline",
            EndReason::ClientGone => "client_gone",
            EndReason::Shutdown => "shutdown",
            EndReason::Expired => "expired",
            EndReason::Stalled => "stalled",
        }
    }

    fn index(self) -> usize {
        match self {
            EndReason::TooSlow => 0,
            EndReason::Evicted => 1,
            EndReason::Deadline => 2,
            EndReason::ClientGone => 3,
            EndReason::Shutdown => 4,
            EndReason::Expired => 5,
            EndReason::Stalled => 6,
        }
    }
}

/// Status codes counted under their own label value; any other code is counted by class.
const CODES: [u16; 25] = [
    200, 201, 202, 204, 301, 302, 304, 400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429,
    431, 500, 501, 502, 503, 504,
];
/// Label values of the class slots after [`CODES`]; the last one takes codes outside 100–599.
const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];
const CODE_SLOTS: usize = CODES.len() + CLASSES.len();
/// Served resources plus one slot for "no resource" (proxied and invalid requests).
const RES_SLOTS: usize = Resource::ALL.len() + 1;
const ROUTES: usize = RouteKind::ALL.len();

/// The slot of a status code.
fn code_slot(code: u16) -> usize {
    match CODES.iter().position(|&c| c == code) {
        Some(i) => i,
        None => {
            CODES.len()
                + usize::from(code / 100)
                    .wrapping_sub(1)
                    .min(CLASSES.len() - 1)
        }
    }
}

/// The `resource` label value of a served resource, as in `grid_wrapper_objects`
/// (`<plural>.<apiVersion>`, e.g. `services.v1`, `endpointslices.discovery.k8s.io/v1`).
pub fn resource_label(res: Resource) -> String {
    format!("{}.{}", res.plural(), res.api_version())
}

fn res_slot(res: Option<Resource>) -> usize {
    res.map_or(RES_SLOTS - 1, Resource::index)
}

impl Side {
    /// Counts a connection of this side opened (`true`) or closed, in `/metrics`.
    pub fn count(self, opened: bool) {
        if self == Side::Relay {
            global().relay_connection(opened);
        }
    }

    fn index(self) -> usize {
        match self {
            Side::KubeProxy => 0,
            Side::Relay => 1,
        }
    }
}

/// Why a connection was refused or closed before it completed a request (docs/SEMANTICS.md
/// §12.1): the `reason` label of `grid_wrapper_connections_refused_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The port's connection budget is full and no connection could be evicted for it.
    BudgetFull,
    /// The source address already holds the relay port's per-source limit.
    PerSource,
    /// Closed to make room for a new connection: it had not completed a request yet.
    Evicted,
    /// The TLS handshake did not finish within its deadline.
    HandshakeDeadline,
    /// The request head did not arrive complete within its deadline.
    HeadDeadline,
    /// The TLS handshake failed (most often: no or an untrusted client certificate).
    HandshakeRefused,
    /// The source opened new relay connections faster than its rate allows.
    Rate,
}

impl Refusal {
    /// Every reason, in rendering order.
    pub const ALL: [Refusal; 7] = [
        Refusal::BudgetFull,
        Refusal::PerSource,
        Refusal::Evicted,
        Refusal::HandshakeDeadline,
        Refusal::HeadDeadline,
        Refusal::HandshakeRefused,
        Refusal::Rate,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::BudgetFull => "budget_full",
            Refusal::PerSource => "per_source",
            Refusal::Evicted => "evicted",
            Refusal::HandshakeDeadline => "handshake_deadline",
            Refusal::HeadDeadline => "head_deadline",
            Refusal::HandshakeRefused => "handshake_refused",
            Refusal::Rate => "rate",
        }
    }

    fn index(self) -> usize {
        match self {
            Refusal::BudgetFull => 0,
            Refusal::PerSource => 1,
            Refusal::Evicted => 2,
            Refusal::HandshakeDeadline => 3,
            Refusal::HeadDeadline => 4,
            Refusal::HandshakeRefused => 5,
            Refusal::Rate => 6,
        }
    }
}

/// The counters of the server facing kube-proxy. Every method takes `&self`.
#[derive(Debug)]
pub struct Counters {
    requests: [[[AtomicU64; CODE_SLOTS]; RES_SLOTS]; ROUTES],
    open_watches: [AtomicI64; Resource::ALL.len()],
    watches_ended: [AtomicU64; EndReason::ALL.len()],
    sent_bytes: [AtomicU64; ROUTES],
    watch_events: [AtomicU64; Resource::ALL.len()],
    /// Connections open on the relay port (docs/SEMANTICS.md §12).
    relay_connections: AtomicI64,
    /// Of `open_watches`, those on the relay port: the followers' watches.
    relay_watches: [AtomicI64; Resource::ALL.len()],
    /// Connections refused or closed before their first request, per port and reason.
    refused: [[AtomicU64; Refusal::ALL.len()]; Side::ALL.len()],
    /// Successful answers from the cache (lists, gets, watch starts), JSON then protobuf.
    formats: [AtomicU64; 2],
    /// How long cache-backed LISTs, then GETs, took to answer ([`Counters::answered`]).
    answer_latency: [Histogram; 2],
}

/// Upper bounds, in seconds, of the answer-latency histogram's buckets (`+Inf` follows): a
/// LIST from the cache takes from microseconds (a small collection) to tens of milliseconds (a
/// first protobuf LIST that encodes every object).
pub const ANSWER_BUCKETS: [f64; 10] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.25, 1.0,
];

impl Default for Counters {
    fn default() -> Self {
        Counters::new()
    }
}

impl Counters {
    /// All zero.
    pub const fn new() -> Counters {
        Counters {
            requests: [const { [const { [const { AtomicU64::new(0) }; CODE_SLOTS] }; RES_SLOTS] };
                ROUTES],
            open_watches: [const { AtomicI64::new(0) }; Resource::ALL.len()],
            watches_ended: [const { AtomicU64::new(0) }; EndReason::ALL.len()],
            sent_bytes: [const { AtomicU64::new(0) }; ROUTES],
            watch_events: [const { AtomicU64::new(0) }; Resource::ALL.len()],
            relay_connections: AtomicI64::new(0),
            relay_watches: [const { AtomicI64::new(0) }; Resource::ALL.len()],
            refused: [const { [const { AtomicU64::new(0) }; Refusal::ALL.len()] }; Side::ALL.len()],
            formats: [const { AtomicU64::new(0) }; 2],
            answer_latency: [const { Histogram::new(&ANSWER_BUCKETS) }; 2],
        }
    }

    /// Times one cache-backed answer of `route` (LIST or GET; other routes are not timed): from
    /// its decision to its reply queued for the socket, the socket write not included.
    pub fn answered(&self, route: RouteKind, took: Duration) {
        let slot = match route {
            RouteKind::List => 0,
            RouteKind::Get => 1,
            _ => return,
        };
        if let Some(h) = self.answer_latency.get(slot) {
            h.observe(took);
        }
    }

    /// Answers of `route` timed so far.
    pub fn answers_timed(&self, route: RouteKind) -> u64 {
        match route {
            RouteKind::List => self.answer_latency[0].count(),
            RouteKind::Get => self.answer_latency[1].count(),
            _ => 0,
        }
    }

    /// Counts a successful answer from the cache (a list, a get, a watch's start) in `format`.
    pub fn answered_in(&self, format: Format) {
        self.formats[format_slot(format)].fetch_add(1, Relaxed);
    }

    /// Successful answers from the cache so far in `format`.
    pub fn answers_in(&self, format: Format) -> u64 {
        self.formats[format_slot(format)].load(Relaxed)
    }

    /// Counts one answered request (a watch counts when its stream starts).
    pub fn request(&self, route: RouteKind, res: Option<Resource>, code: u16) {
        if let Some(c) = self
            .requests
            .get(route.index())
            .and_then(|r| r.get(res_slot(res)))
            .and_then(|r| r.get(code_slot(code)))
        {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Requests counted so far for one (route, resource, code).
    pub fn requests(&self, route: RouteKind, res: Option<Resource>, code: u16) -> u64 {
        self.requests
            .get(route.index())
            .and_then(|r| r.get(res_slot(res)))
            .and_then(|r| r.get(code_slot(code)))
            .map_or(0, |c| c.load(Relaxed))
    }

    /// A watch stream of `res` opened.
    pub fn watch_opened(&self, res: Resource) {
        if let Some(g) = self.open_watches.get(res.index()) {
            g.fetch_add(1, Relaxed);
        }
    }

    /// A watch stream of `res` closed.
    pub fn watch_closed(&self, res: Resource) {
        if let Some(g) = self.open_watches.get(res.index()) {
            g.fetch_sub(1, Relaxed);
        }
    }

    /// A connection opened (`true`) or closed on the relay port.
    pub fn relay_connection(&self, opened: bool) {
        self.relay_connections
            .fetch_add(if opened { 1 } else { -1 }, Relaxed);
    }

    /// A connection on `side` refused or closed for `reason`.
    pub fn refused(&self, side: Side, reason: Refusal) {
        if let Some(c) = self
            .refused
            .get(side.index())
            .and_then(|r| r.get(reason.index()))
        {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Connections on `side` refused or closed for `reason` so far.
    pub fn refusals(&self, side: Side, reason: Refusal) -> u64 {
        self.refused
            .get(side.index())
            .and_then(|r| r.get(reason.index()))
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Connections open on the relay port.
    pub fn relay_connections(&self) -> u64 {
        self.relay_connections.load(Relaxed).max(0) as u64
    }

    /// A watch stream of `res` opened (`true`) or closed on the relay port (counted in
    /// [`Counters::watch_opened`] as well).
    pub fn relay_watch(&self, res: Resource, opened: bool) {
        if let Some(g) = self.relay_watches.get(res.index()) {
            g.fetch_add(if opened { 1 } else { -1 }, Relaxed);
        }
    }

    /// Open watch streams of `res` on the relay port.
    pub fn relay_watches(&self, res: Resource) -> u64 {
        self.relay_watches
            .get(res.index())
            .map_or(0, |g| g.load(Relaxed).max(0) as u64)
    }

    /// Open watch streams of `res`.
    pub fn open_watches(&self, res: Resource) -> u64 {
        self.open_watches
            .get(res.index())
            .map_or(0, |g| u64::try_from(g.load(Relaxed)).unwrap_or(0))
    }

    /// Counts one ended watch stream.
    pub fn watch_ended(&self, reason: EndReason) {
        if let Some(c) = self.watches_ended.get(reason.index()) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Watch streams ended so far for `reason`.
    pub fn watches_ended(&self, reason: EndReason) -> u64 {
        self.watches_ended
            .get(reason.index())
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Counts response bytes written to a client socket.
    pub fn sent(&self, route: RouteKind, bytes: usize) {
        if let Some(c) = self.sent_bytes.get(route.index()) {
            c.fetch_add(bytes as u64, Relaxed);
        }
    }

    /// Response bytes written so far for `route`.
    pub fn sent_bytes(&self, route: RouteKind) -> u64 {
        self.sent_bytes
            .get(route.index())
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Counts `n` watch events (ADDED, MODIFIED, DELETED) queued to streams of `res`.
    pub fn watch_events(&self, res: Resource, n: usize) {
        if let Some(c) = self.watch_events.get(res.index()) {
            c.fetch_add(n as u64, Relaxed);
        }
    }

    /// Watch events queued so far to streams of `res`.
    pub fn watch_events_sent(&self, res: Resource) -> u64 {
        self.watch_events
            .get(res.index())
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Appends the Prometheus text exposition of these counters to `out`:
    /// `grid_wrapper_requests_total{route,resource,code}`, `grid_wrapper_open_watches{resource}`,
    /// `grid_wrapper_watches_ended_total{reason}`, `grid_wrapper_sent_bytes_total{route}` and
    /// `grid_wrapper_watch_events_sent_total{resource}` and
    /// `grid_wrapper_answer_duration_seconds{route}`. Request series appear once counted.
    pub fn render_prometheus(&self, out: &mut String) {
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
        };
        let labels: Vec<String> = Resource::ALL.iter().map(|&r| resource_label(r)).collect();
        let res_label = |slot: usize| labels.get(slot).map_or("", String::as_str);
        let name = "grid_wrapper_requests_total";
        head(out, name, "counter", "Requests answered on the kube-proxy and relay ports, by route kind (list, get, watch, proxy, invalid, relay: the relay port's own probes and discovery), served resource (empty when proxied) and status code (codes outside a fixed table by class, e.g. 4xx); a watch counts when its stream starts.");
        for route in RouteKind::ALL {
            for (slot, row) in self.requests[route.index()].iter().enumerate() {
                for (c, n) in row.iter().enumerate() {
                    let n = n.load(Relaxed);
                    if n == 0 {
                        continue;
                    }
                    let code = match CODES.get(c) {
                        Some(code) => code.to_string(),
                        None => CLASSES[(c - CODES.len()).min(CLASSES.len() - 1)].to_string(),
                    };
                    let _ = writeln!(
                        out,
                        "{name}{{route=\"{}\",resource=\"{}\",code=\"{code}\"}} {n}",
                        route.name(),
                        res_label(slot)
                    );
                }
            }
        }
        let name = "grid_wrapper_open_watches";
        head(
            out,
            name,
            "gauge",
            "Watch streams open now, per served resource.",
        );
        for r in Resource::ALL {
            let _ = writeln!(
                out,
                "{name}{{resource=\"{}\"}} {}",
                res_label(r.index()),
                self.open_watches(r)
            );
        }
        let name = "grid_wrapper_relay_connections";
        head(
            out,
            name,
            "gauge",
            "Connections open now on the relay port (--relay-bind-address): the followers'.",
        );
        let _ = writeln!(out, "{name} {}", self.relay_connections());
        let name = "grid_wrapper_relay_open_watches";
        head(
            out,
            name,
            "gauge",
            "Of grid_wrapper_open_watches, those on the relay port (the followers' reflectors), per served resource.",
        );
        for r in Resource::ALL {
            let _ = writeln!(
                out,
                "{name}{{resource=\"{}\"}} {}",
                res_label(r.index()),
                self.relay_watches(r)
            );
        }
        let name = "grid_wrapper_connections_refused_total";
        head(out, name, "counter", "Connections refused or closed before completing a request, by port (kube-proxy, relay) and reason: budget_full (the port's connection budget is full), per_source (the relay port's per-source limit), evicted (closed to make room: it had not completed a request), handshake_deadline, head_deadline, handshake_refused (TLS failed, e.g. no client certificate), rate (the relay port's per-source rate of new connections).");
        for side in Side::ALL {
            for reason in Refusal::ALL {
                let _ = writeln!(
                    out,
                    "{name}{{port=\"{}\",reason=\"{}\"}} {}",
                    side.name(),
                    reason.name(),
                    self.refusals(side, reason)
                );
            }
        }
        let name = "grid_wrapper_watches_ended_total";
        head(out, name, "counter", "Watch streams ended, by reason: too_slow (the client did not keep up), evicted (fell behind the event history), deadline (timeoutSeconds), client_gone, shutdown, expired (resourceVersion older than the history at start), stalled (the client read nothing for --watch-stall-timeout while events waited).");
        for reason in EndReason::ALL {
            let _ = writeln!(
                out,
                "{name}{{reason=\"{}\"}} {}",
                reason.name(),
                self.watches_ended(reason)
            );
        }
        let name = "grid_wrapper_sent_bytes_total";
        head(
            out,
            name,
            "counter",
            "Response bytes written to kube-proxy connections (before TLS), by route kind.",
        );
        for route in RouteKind::ALL {
            let _ = writeln!(
                out,
                "{name}{{route=\"{}\"}} {}",
                route.name(),
                self.sent_bytes(route)
            );
        }
        let name = "grid_wrapper_cache_answers_total";
        head(out, name, "counter", "Successful answers from the cache (lists, gets, watch starts) by wire format: json, or protobuf (kube-proxy's default).");
        for (format, label) in [(Format::Json, "json"), (Format::Protobuf, "protobuf")] {
            let _ = writeln!(
                out,
                "{name}{{format=\"{label}\"}} {}",
                self.answers_in(format)
            );
        }
        let name = "grid_wrapper_watch_events_sent_total";
        head(out, name, "counter", "Watch events (ADDED, MODIFIED, DELETED; initial events included, bookmarks not) queued to watch streams, per served resource.");
        for r in Resource::ALL {
            let _ = writeln!(
                out,
                "{name}{{resource=\"{}\"}} {}",
                res_label(r.index()),
                self.watch_events_sent(r)
            );
        }
        let name = "grid_wrapper_answer_duration_seconds";
        head(out, name, "histogram", "Time to answer a cache-backed LIST or GET on the kube-proxy and relay ports, by route (list, get): from the request's decision to its reply queued for the socket (the socket write and any hold before the first sync not included).");
        for (slot, route) in [RouteKind::List, RouteKind::Get].into_iter().enumerate() {
            if let Some(h) = self.answer_latency.get(slot) {
                h.render(out, name, "route", route.name());
            }
        }
    }
}

/// The slot of `format` in [`Counters`]' per-format counters.
fn format_slot(format: Format) -> usize {
    match format {
        Format::Json => 0,
        Format::Protobuf => 1,
    }
}

/// The process-wide registry the event loop records into.
pub fn global() -> &'static Counters {
    static GLOBAL: Counters = Counters::new();
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_their_slot_or_their_class() {
        assert_eq!(code_slot(200), 0);
        assert_eq!(CODES[code_slot(504)], 504);
        assert_eq!(code_slot(418), CODES.len() + 3);
        assert_eq!(code_slot(299), CODES.len() + 1);
        assert_eq!(code_slot(103), CODES.len());
        assert_eq!(code_slot(0), CODE_SLOTS - 1);
        assert_eq!(code_slot(99), CODE_SLOTS - 1);
        assert_eq!(code_slot(600), CODE_SLOTS - 1);
        assert_eq!(code_slot(u16::MAX), CODE_SLOTS - 1);
    }

    #[test]
    fn counters_move_and_render_with_bounded_labels() {
        let c = Counters::new();
        c.request(RouteKind::List, Some(Resource::Services), 200);
        c.request(RouteKind::List, Some(Resource::Services), 200);
        c.request(RouteKind::Get, Some(Resource::Nodes), 404);
        c.request(RouteKind::Proxy, None, 418);
        c.request(RouteKind::Invalid, None, 431);
        c.request(RouteKind::Watch, Some(Resource::SlicesV1), 200);
        c.watch_opened(Resource::SlicesV1);
        c.watch_opened(Resource::SlicesV1);
        c.watch_closed(Resource::SlicesV1);
        c.watch_closed(Resource::Nodes); // never below zero in the exposition
        c.watch_ended(EndReason::TooSlow);
        c.sent(RouteKind::Watch, 1000);
        c.sent(RouteKind::Watch, 24);
        c.watch_events(Resource::SlicesV1, 3);
        c.relay_connection(true);
        c.relay_watch(Resource::SlicesV1, true);
        c.refused(Side::Relay, Refusal::HeadDeadline);
        c.refused(Side::Relay, Refusal::HeadDeadline);
        assert_eq!(c.refusals(Side::Relay, Refusal::HeadDeadline), 2);
        c.answered_in(Format::Protobuf);
        c.answered(RouteKind::List, Duration::from_micros(700));
        c.answered(RouteKind::Watch, Duration::from_secs(1)); // not timed
        assert_eq!(c.answers_timed(RouteKind::List), 1);
        assert_eq!(c.answers_timed(RouteKind::Watch), 0);
        assert_eq!(
            c.requests(RouteKind::List, Some(Resource::Services), 200),
            2
        );
        assert_eq!(c.open_watches(Resource::SlicesV1), 1);
        assert_eq!(c.open_watches(Resource::Nodes), 0);
        let mut out = String::new();
        c.render_prometheus(&mut out);
        for line in [
            "# TYPE grid_wrapper_requests_total counter\n",
            "grid_wrapper_requests_total{route=\"list\",resource=\"services.v1\",code=\"200\"} 2\n",
            "grid_wrapper_requests_total{route=\"get\",resource=\"nodes.v1\",code=\"404\"} 1\n",
            "grid_wrapper_requests_total{route=\"proxy\",resource=\"\",code=\"4xx\"} 1\n",
            "grid_wrapper_requests_total{route=\"invalid\",resource=\"\",code=\"431\"} 1\n",
            "grid_wrapper_requests_total{route=\"watch\",resource=\"endpointslices.discovery.k8s.io/v1\",code=\"200\"} 1\n",
            "# TYPE grid_wrapper_open_watches gauge\n",
            "grid_wrapper_open_watches{resource=\"endpointslices.discovery.k8s.io/v1\"} 1\n",
            "grid_wrapper_open_watches{resource=\"nodes.v1\"} 0\n",
            "grid_wrapper_watches_ended_total{reason=\"too_slow\"} 1\n",
            "grid_wrapper_watches_ended_total{reason=\"client_gone\"} 0\n",
            "grid_wrapper_sent_bytes_total{route=\"watch\"} 1024\n",
            "grid_wrapper_watch_events_sent_total{resource=\"endpointslices.discovery.k8s.io/v1\"} 3\n",
            "grid_wrapper_relay_connections 1\n",
            "grid_wrapper_relay_open_watches{resource=\"endpointslices.discovery.k8s.io/v1\"} 1\n",
            "grid_wrapper_relay_open_watches{resource=\"nodes.v1\"} 0\n",
            "grid_wrapper_connections_refused_total{port=\"relay\",reason=\"head_deadline\"} 2\n",
            "grid_wrapper_connections_refused_total{port=\"kube-proxy\",reason=\"budget_full\"} 0\n",
            "grid_wrapper_cache_answers_total{format=\"json\"} 0\n",
            "grid_wrapper_cache_answers_total{format=\"protobuf\"} 1\n",
            "# TYPE grid_wrapper_answer_duration_seconds histogram\n",
            "grid_wrapper_answer_duration_seconds_bucket{route=\"list\",le=\"0.0005\"} 0\n",
            "grid_wrapper_answer_duration_seconds_bucket{route=\"list\",le=\"0.001\"} 1\n",
            "grid_wrapper_answer_duration_seconds_count{route=\"list\"} 1\n",
            "grid_wrapper_answer_duration_seconds_count{route=\"get\"} 0\n",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        // Only counted request series; every other family has a fixed set.
        let samples = out.lines().filter(|l| !l.starts_with('#')).count();
        let per_resource = Resource::ALL.len();
        assert_eq!(
            samples,
            5 + per_resource
                + 1
                + per_resource
                + Side::ALL.len() * Refusal::ALL.len()
                + EndReason::ALL.len()
                + RouteKind::ALL.len()
                + 2
                + per_resource
                + 2 * (ANSWER_BUCKETS.len() + 3),
            "{out}"
        );
        assert_eq!(out.matches("# TYPE ").count(), 10);
    }

    #[test]
    fn route_kind_of_a_request() {
        let col = Label::Route(Route::Collection {
            res: Resource::Nodes,
            namespace: None,
        });
        for (q, want) in [
            ("", RouteKind::List),
            ("watch=true", RouteKind::Watch),
            ("labelSelector=a&watch", RouteKind::Watch),
            ("watch=1&watch=0", RouteKind::Watch),
            ("watch=0", RouteKind::List),
            ("watch=FALSE", RouteKind::List),
            ("watchx=1", RouteKind::List),
        ] {
            assert_eq!(RouteKind::of(&col, q), (want, Some(Resource::Nodes)), "{q}");
        }
        assert_eq!(
            RouteKind::of(&Label::Proxy, "watch=1"),
            (RouteKind::Proxy, None)
        );
        assert_eq!(
            RouteKind::of(&Label::Relay, "watch=1"),
            (RouteKind::Relay, None)
        );
        let obj = Label::Route(Route::Object {
            res: Resource::Services,
            namespace: Some("d".into()),
            name: "n".into(),
        });
        assert_eq!(
            RouteKind::of(&obj, ""),
            (RouteKind::Get, Some(Resource::Services))
        );
    }

    #[test]
    fn global_is_one_instance() {
        assert!(std::ptr::eq(global(), global()));
    }
}
