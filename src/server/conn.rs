//! One client connection: a state machine driven by socket readiness, the `Waker` and timers.
//!
//! `Idle` (reading the next request) → `Held` (cache not ready yet) → a reply goes out and the
//! connection returns to `Idle`; or `Streaming` (a watch, pumped by
//! [`crate::server::watch::Watcher`]) / `Proxying` (a forwarded request, its answer framed by
//! [`crate::server::proxy::Proxied`]) until the stream ends; `Closing` flushes what is queued
//! and closes.

use std::net::IpAddr;
use std::time::Instant;

use log::{debug, info, warn};
use mio::net::TcpStream;
use mio::Interest;

use crate::api::decide::{decide, Fate, Label, Side, Turn};
use crate::api::handlers::{self, Answer, Reply};
use crate::api::negotiate::Format;
use crate::api::route::Route;
use crate::api::runtime_report;
use crate::api::serving::Serving;
use crate::api::wire::Segment;
use crate::cache::published::{View, ViewRef};
use crate::handoff::site_pods;
use crate::http::request::{Limits, ReadError, Request, RequestReader};
use crate::http::response::{self, Body};
use crate::k8s::status::ApiError;
use crate::k8s::Resource;
use crate::server::counters::{self, EndReason, Refusal, RouteKind};
use crate::server::outbound::Outbound;
use crate::server::proxy::{Proxied, Proxy, Pumped};
use crate::server::transport::{ReadEnd, Transport};
use crate::server::watch::{End, StreamOptions, Watcher, HIGH_WATER, STALLS, STALL_EPISODE_GAP};
use crate::server::watchers;
use crate::writer::WriterHandle;

mod options;
pub use options::{ServerOptions, TlsSlot};

/// What a connection needs from the server while it is driven.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The cache's writer: told (without waiting) to build v1beta1 EndpointSlices at the first
    /// request for them.
    pub writer: &'a WriterHandle,
    /// Proxy workers.
    pub proxy: &'a Proxy,
    /// Settings.
    pub opts: &'a ServerOptions,
    /// The loop's clock reading for this round.
    pub now: Instant,
    /// A number in [0, 1) for default watch lifetimes.
    pub jitter: f64,
}

/// The host part of a socket address's text (`10.0.0.1` of `10.0.0.1:4000`, `[::1]` of
/// `[::1]:4000`): what the relay port's per-source limit counts by.
pub fn host_of(peer: &str) -> &str {
    peer.rsplit_once(':').map_or(peer, |(host, _)| host)
}

#[derive(Debug)]
enum Phase {
    Idle,
    Held { req: Request, until: Instant },
    Streaming(Box<Watcher>),
    Proxying(Proxied),
    Closing,
}

/// One accepted connection.
#[derive(Debug)]
pub struct Conn {
    transport: Transport,
    /// The port it came in on.
    side: Side,
    /// What its cache-backed requests read: the readers' view on the kube-proxy port, the
    /// relay view on the relay port. Never held by the writer while it computes.
    view: View,
    peer: String,
    reader: RequestReader,
    out: Outbound,
    phase: Phase,
    keep_alive: bool,
    /// The request being answered is HTTP/1.0: a streamed body (a watch, a proxied answer) is
    /// close-delimited, never chunked (RFC 9112 §6.1).
    http10: bool,
    last_active: Instant,
    registered: Option<Interest>,
    eof: bool,
    /// A watch stopped after its share of this round ([`STREAM_FILLS_PER_ROUND`]) with more
    /// events to send and an empty socket queue: the loop must come round again at once.
    backlog: bool,
    /// Route kind and resource of the request being answered (for the counters).
    label: (RouteKind, Option<Resource>),
    /// When it was accepted.
    accepted: Instant,
    /// When it could first carry a request: the accept for plain TCP, the TLS handshake's end.
    ready_at: Option<Instant>,
    /// A request head has been read whole on it.
    served: bool,
    /// When the first byte of the head being read (after the first request) arrived.
    head_started: Option<Instant>,
    /// Why it is being closed before completing a request, for the loop to count and log.
    refusal: Option<(Refusal, String)>,
}

/// How many times one round refills a watch's output (up to its high water each). A burst of
/// thousands of events per watcher (a relabel of the local node in a large cluster) is then sent in
/// turns across all connections, so a LIST or a new request waits for one round, not for every
/// watcher's whole backlog.
const STREAM_FILLS_PER_ROUND: usize = 1;

impl Conn {
    /// Wraps a socket accepted on `side`'s port, whose cache-backed requests read `view`.
    pub fn new(
        transport: Transport,
        side: Side,
        view: View,
        peer: String,
        limits: Limits,
        now: Instant,
    ) -> Conn {
        side.count(true);
        Conn {
            transport,
            side,
            view,
            peer,
            reader: RequestReader::new(limits),
            out: Outbound::default(),
            phase: Phase::Idle,
            keep_alive: true,
            http10: false,
            last_active: now,
            registered: None,
            eof: false,
            backlog: false,
            label: (RouteKind::Invalid, None),
            accepted: now,
            ready_at: None,
            served: false,
            head_started: None,
            refusal: None,
        }
    }

    /// The port it came in on.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The peer's address, as logged.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The peer's host (its address without the port), as text.
    pub fn peer_ip(&self) -> &str {
        host_of(&self.peer)
    }

    /// Whether it has completed a request or a TLS handshake with a client certificate: from
    /// then on it is never evicted to make room for another (docs/SEMANTICS.md §12.1).
    pub fn settled(&self) -> bool {
        self.served || self.transport.has_client_certificate()
    }

    /// Why it is being closed before completing a request, if it is (taken once).
    pub fn take_refusal(&mut self) -> Option<(Refusal, String)> {
        self.refusal.take()
    }

    /// The deadline that runs now, with the refusal it ends in: the TLS handshake's, then the
    /// first request head's (from the connection's start), then a later head's (from its first
    /// byte). None while a request is answered or between requests (the idle timeout's turn).
    fn deadline(&self, opts: &ServerOptions) -> Option<(Instant, Refusal)> {
        if !matches!(self.phase, Phase::Idle) {
            return None;
        }
        match self.ready_at {
            None => Some((
                self.accepted + opts.handshake_timeout,
                Refusal::HandshakeDeadline,
            )),
            Some(ready) if !self.served => Some((ready + opts.head_timeout, Refusal::HeadDeadline)),
            Some(_) => self
                .head_started
                .map(|t| (t + opts.head_timeout, Refusal::HeadDeadline)),
        }
    }

    /// The socket, for (de)registration.
    pub fn socket(&mut self) -> &mut TcpStream {
        self.transport.socket()
    }

    /// The interest registered last, if any.
    pub fn registered(&self) -> Option<Interest> {
        self.registered
    }

    /// Records the registered interest.
    pub fn set_registered(&mut self, i: Interest) {
        self.registered = Some(i);
    }

    /// The interest the connection needs now: always readable (to notice a client leaving),
    /// writable only while bytes wait.
    pub fn interest(&self) -> Interest {
        if self.out.is_empty() && !self.transport.wants_write() {
            Interest::READABLE
        } else {
            Interest::READABLE | Interest::WRITABLE
        }
    }

    /// Whether a watch has events left after its share of the round while its socket took
    /// everything: the loop must drive it again without sleeping.
    pub fn has_backlog(&self) -> bool {
        self.backlog
    }

    /// Whether the connection waits on the loop (wakes, timers) rather than on its socket.
    pub fn is_active(&self) -> bool {
        matches!(
            self.phase,
            Phase::Held { .. } | Phase::Streaming(_) | Phase::Proxying(_)
        )
    }

    /// The next instant at which [`Conn::drive`] has timed work.
    pub fn next_timer(&self, opts: &ServerOptions) -> Instant {
        match &self.phase {
            Phase::Held { until, .. } => *until,
            Phase::Streaming(w) => w.next_timer(),
            Phase::Idle => {
                let idle = self.last_active + opts.idle_timeout;
                self.deadline(opts).map_or(idle, |(at, _)| at.min(idle))
            }
            _ => self.last_active + opts.idle_timeout,
        }
    }

    /// Reads everything the socket has (edge-triggered readiness). Returns false when the
    /// connection must close now.
    pub fn read(&mut self, now: Instant) -> bool {
        let (reader, transport) = (&mut self.reader, &mut self.transport);
        let mut failed = None;
        let end = transport.read(&mut |bytes| {
            self.last_active = now;
            match reader.push(bytes) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        });
        if self.ready_at.is_none() && !self.transport.is_handshaking() {
            self.ready_at = Some(now);
        }
        if let Some(e) = failed {
            self.fail_request(e);
            return true;
        }
        match end {
            // A client that half-closes right after its request (data and FIN in one readiness
            // event) still gets its answer: `drive` answers what was received, then closes;
            // open watches and proxied streams end at once.
            Ok(ReadEnd::Eof) => {
                self.eof = true;
                true
            }
            Ok(ReadEnd::Blocked) => true,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                // A TLS failure: on the relay port most often a follower without a certificate
                // of the relay's client CA, which an operator needs to see; the loop counts it
                // and logs it once per episode (a scan must not write a line per connection).
                debug!("{}: TLS refused: {e}", self.peer);
                let hint = match self.side {
                    Side::Relay => {
                        "; a client certificate chaining to --relay-client-ca-file is required"
                    }
                    Side::KubeProxy => "",
                };
                self.refusal = Some((
                    Refusal::HandshakeRefused,
                    format!("TLS refused ({e}){hint}"),
                ));
                false
            }
            Err(e) => {
                debug!("{}: read failed: {e}", self.peer);
                false
            }
        }
    }

    /// Writes what is queued. Returns false when the connection must close now.
    pub fn write(&mut self) -> bool {
        let before = self.out.len();
        let result = self.transport.write(&mut self.out);
        let written = before - self.out.len().min(before);
        if written > 0 {
            counters::global().sent(self.label.0, written);
        }
        if let Phase::Streaming(w) = &mut self.phase {
            w.set_unsent(self.out.len(), written);
        }
        if let Err(e) = result {
            debug!("{}: write failed: {e}", self.peer);
            return false;
        }
        !(matches!(self.phase, Phase::Closing) && self.out.is_empty())
    }

    /// Advances the state machine as far as it can go without blocking. Returns false when the
    /// connection is finished.
    pub fn drive(&mut self, ctx: &Ctx<'_>) -> bool {
        // The client is gone (or sends no more): free a watcher or proxy worker at once.
        if self.eof && matches!(self.phase, Phase::Streaming(_) | Phase::Proxying(_)) {
            return false;
        }
        self.backlog = false;
        let mut fills = 0;
        loop {
            // `full`: a stream stopped filling at its high water with more to come. Nothing will
            // wake this connection for that backlog (the log entries are already published,
            // a proxy worker waits on its full channel), so once the socket takes everything,
            // go round again instead of waiting for the next wake or timer — a watch only up to
            // its share of the round, then the loop comes back (`backlog`).
            let mut full = false;
            let progressed = match std::mem::replace(&mut self.phase, Phase::Closing) {
                Phase::Idle => self.next_request(ctx),
                Phase::Held { req, until } => {
                    let turn = Turn::Held {
                        now: ctx.now,
                        until,
                    };
                    self.dispatch(req, ctx, turn);
                    !matches!(self.phase, Phase::Held { .. })
                }
                Phase::Streaming(w) => {
                    self.stream(w, ctx);
                    fills += 1;
                    full = matches!(&self.phase,
                        Phase::Streaming(w) if self.out.len() >= w.high_water());
                    if full && fills >= STREAM_FILLS_PER_ROUND {
                        if !self.write() {
                            return false;
                        }
                        self.backlog = self.out.is_empty();
                        break;
                    }
                    false
                }
                Phase::Proxying(answer) => {
                    let ended = self.pump_proxied(answer);
                    full = !ended && self.out.len() >= HIGH_WATER;
                    ended
                }
                Phase::Closing => false,
            };
            if !self.write() {
                return false;
            }
            if !(progressed || full && self.out.is_empty()) {
                break;
            }
        }
        if self.eof {
            // Half-closed client: close once the answers to what it sent are written (a held
            // request is still answered when the hold ends).
            match self.phase {
                Phase::Held { .. } => {}
                Phase::Streaming(_) | Phase::Proxying(_) => return false,
                _ if self.out.is_empty() => return false,
                _ => {}
            }
        }
        if let Some((at, reason)) = self.deadline(ctx.opts) {
            if ctx.now >= at {
                let what = match reason {
                    Refusal::HandshakeDeadline => "TLS handshake",
                    _ => "request head",
                };
                let limit = match reason {
                    Refusal::HandshakeDeadline => ctx.opts.handshake_timeout,
                    _ => ctx.opts.head_timeout,
                };
                debug!("{}: {what} not complete within {limit:?}", self.peer);
                self.refusal = Some((
                    reason,
                    format!("{what} not complete within {} s", limit.as_secs()),
                ));
                return false;
            }
        }
        if matches!(self.phase, Phase::Idle)
            && self.out.is_empty()
            && ctx.now >= self.last_active + ctx.opts.idle_timeout
        {
            debug!("{}: idle timeout", self.peer);
            return false;
        }
        true
    }

    fn next_request(&mut self, ctx: &Ctx<'_>) -> bool {
        match self.reader.next_request() {
            Ok(Some(req)) => {
                self.last_active = ctx.now;
                self.served = true;
                self.head_started = None;
                let turn = Turn::Arrived {
                    now: ctx.now,
                    not_ready_hold: ctx.opts.not_ready_hold,
                };
                self.dispatch(req, ctx, turn);
                true
            }
            Ok(None) => {
                // A later request's head deadline runs from its first byte.
                self.head_started = match self.head_started {
                    _ if !self.reader.reading_head() => None,
                    Some(t) => Some(t),
                    None => Some(ctx.now),
                };
                if self.reader.take_continue() {
                    // The reader is advanced only here, in `Idle`: every earlier response on
                    // this connection is already wholly queued (a reply is queued at once, a
                    // proxied response is relayed to its end before the phase returns to
                    // `Idle`, a watch never returns to it), so the interim answer goes after
                    // it in the queue, never inside it.
                    self.out.push(Segment::Static(response::CONTINUE));
                }
                self.phase = Phase::Idle;
                false
            }
            Err(e) => {
                self.fail_request(e);
                false
            }
        }
    }

    /// Answers a malformed request with a Status and closes.
    fn fail_request(&mut self, e: ReadError) {
        info!(
            "{}: bad request ({}): {}",
            self.peer,
            e.status(),
            e.message()
        );
        self.label = (RouteKind::Invalid, None);
        counters::global().request(RouteKind::Invalid, None, e.status());
        self.out
            .push_owned(response::status(&e.to_api_error(), false));
        self.phase = Phase::Closing;
    }

    /// Carries out the decision on `req` ([`decide`]), made from the facts of this port's view.
    fn dispatch(&mut self, req: Request, ctx: &Ctx<'_>, turn: Turn) {
        self.keep_alive = req.keep_alive();
        self.http10 = req.minor_version == 0;
        let handle = self.view.clone();
        let view = handle.read();
        let decision = decide(&req, self.side, &Serving::of(&view), turn);
        self.label = RouteKind::of(&decision.label, &req.query);
        if decision.ask_v1beta1 {
            ctx.writer.want_v1beta1();
        }
        match decision.fate {
            Fate::Serve { route, format } => self.serve(req, &route, format, view, ctx),
            Fate::Probe(code, text) => {
                drop(view);
                self.reply_text(code, text);
            }
            Fate::Reply(reply) => {
                drop(view);
                match decision.label {
                    Label::Relay => {
                        debug!("{}: relay GET {} → {}", self.peer, req.path, reply.code);
                    }
                    _ => debug!(
                        "{}: {} {}?{} → {}",
                        self.peer, req.method, req.path, req.query, reply.code
                    ),
                }
                self.reply(reply);
            }
            Fate::Hold { until, .. } => {
                drop(view);
                self.phase = Phase::Held { req, until };
            }
            Fate::Proxy(_) => {
                drop(view);
                self.forward(req, ctx);
            }
            Fate::RuntimeReport => {
                let node = site_pods::node_of_path(&req.path).unwrap_or_default();
                let peer = host_of(&self.peer)
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>();
                let Ok(peer) = peer else {
                    drop(view);
                    return self.reply(Reply::error(&ApiError::new(
                        403,
                        "Forbidden",
                        "a runtime report needs the connection's source address",
                    )));
                };
                let etag = req.header_str("if-none-match");
                let taken = runtime_report::take(node, &req.body, peer, etag, &view);
                drop(view);
                self.take_report(node, taken, ctx);
            }
        }
    }

    /// Carries out a follower's runtime report (docs/SEMANTICS.md §13.1): the report to the
    /// writer (never waiting for it: a full queue is a 503, and the follower reports again at its
    /// next poll), then the answer.
    fn take_report(&mut self, node: &str, taken: runtime_report::Taken, ctx: &Ctx<'_>) {
        match taken.report {
            Some(report) => {
                debug!("{}: runtime report of node {node}", self.peer);
                if !ctx.writer.try_node_report(report) {
                    return self.reply(Reply::error(&ApiError::unavailable(
                        "the cache's writer is busy; report again",
                        Some(1),
                    )));
                }
                site_pods::record_report(true);
            }
            None => {
                // Counted; the follower says why once per episode (a line here per report
                // would be one every poll interval).
                site_pods::record_report(false);
                debug!(
                    "{}: runtime report of node {node} refused ({})",
                    self.peer, taken.reply.code
                );
            }
        }
        let etag = taken.etag;
        let extra: Vec<(&str, &str)> = etag.iter().map(|e| ("ETag", e.as_str())).collect();
        self.reply_with(taken.reply, &extra);
    }

    /// Answers `req` from this port's view (`view`, locked): a get, a list or a watch.
    fn serve(&mut self, req: Request, r: &Route, format: Format, view: ViewRef<'_>, ctx: &Ctx<'_>) {
        let began = Instant::now();
        let answer = handlers::handle(r, &req.query, format, &view, ctx.jitter);
        match answer {
            Answer::Reply(reply) => {
                drop(view);
                debug!(
                    "{}: GET {}?{} → {}",
                    self.peer, req.path, req.query, reply.code
                );
                if reply.code == 200 {
                    counters::global().answered_in(reply.format);
                }
                self.reply(reply);
                counters::global().answered(self.label.0, began.elapsed());
            }
            Answer::List(plan) => {
                // Framed off the lock: a first protobuf list encodes its objects, a JSON list
                // decodes those held only in protobuf.
                drop(view);
                let reply = plan.reply();
                debug!(
                    "{}: LIST {}?{} → {} ({} items)",
                    self.peer,
                    req.path,
                    req.query,
                    reply.code,
                    plan.items.len()
                );
                counters::global().answered_in(reply.format);
                self.reply(reply);
                counters::global().answered(self.label.0, began.elapsed());
            }
            Answer::Watch(plan) => {
                let head = response::head(
                    200,
                    &[
                        ("Content-Type", plan.format.watch_content_type()),
                        ("Cache-Control", "no-cache, private"),
                    ],
                    self.streamed_body(),
                    true,
                );
                self.out.push_owned(head);
                counters::global().request(self.label.0, self.label.1, 200);
                counters::global().answered_in(plan.format);
                debug!(
                    "{}: WATCH {}?{} from {}",
                    self.peer, req.path, req.query, plan.cursor
                );
                // The initial events are produced by the pump, a bounded batch at a time as
                // the client reads, from the view (docs/SEMANTICS.md §6.1).
                let opts = StreamOptions {
                    stall: ctx.opts.watch_stall,
                    chunked: !self.http10,
                };
                match Watcher::start(*plan, ctx.now, opts, &mut self.out) {
                    Some(mut w) => {
                        let info = w.info(
                            &self.peer,
                            &req.query,
                            crate::clock::unix_now(),
                            self.side == Side::Relay,
                        );
                        w.track(watchers::global().register(info, counters::global()));
                        let _ = w.pump(&view, &mut self.out, ctx.opts.queue, ctx.now);
                        drop(view);
                        self.phase = Phase::Streaming(Box::new(w));
                    }
                    None => {
                        drop(view);
                        self.end_stream();
                    }
                }
            }
        }
    }

    /// Sends `req` upstream on a proxy worker.
    fn forward(&mut self, req: Request, ctx: &Ctx<'_>) {
        debug!("{}: {} {} → proxy", self.peer, req.method, req.path);
        let body = req.method != "HEAD";
        match ctx.proxy.start(req) {
            Ok(rx) => self.phase = Phase::Proxying(Proxied::new(rx, body, self.http10)),
            Err(e) => self.reply(Reply::error(&e)),
        }
    }

    /// Graceful shutdown: a watch ends with its terminating chunk, a held request gets 503, an
    /// idle connection closes; a proxied request goes on (the loop bounds it) and then closes.
    /// Returns false when the connection can close at once.
    pub fn begin_shutdown(&mut self) -> bool {
        self.keep_alive = false;
        match std::mem::replace(&mut self.phase, Phase::Closing) {
            Phase::Streaming(w) => {
                w.ended(EndReason::Shutdown);
                self.end_stream();
            }
            Phase::Held { .. } => self.reply(Reply::error(&ApiError::unavailable(
                "grid-wrapper is shutting down",
                Some(1),
            ))),
            proxying @ Phase::Proxying(_) => self.phase = proxying,
            Phase::Idle | Phase::Closing => {}
        }
        !(matches!(self.phase, Phase::Closing)
            && self.out.is_empty()
            && !self.transport.wants_write())
    }

    /// Whether a proxied request is still in flight.
    pub fn is_proxying(&self) -> bool {
        matches!(self.phase, Phase::Proxying(_))
    }

    /// How a watch's body is framed for the request's version.
    fn streamed_body(&self) -> Body {
        if self.http10 {
            Body::Close
        } else {
            Body::Chunked
        }
    }

    /// Queues the streamed body's end (the last chunk; nothing for a close-delimited body) and
    /// closes once it is written.
    fn end_stream(&mut self) {
        if !self.http10 {
            let mut last = Vec::new();
            response::push_last_chunk(&mut last);
            self.out.push_owned(last);
        }
        self.phase = Phase::Closing;
    }

    /// A plain-text answer (the relay port's probes).
    fn reply_text(&mut self, code: u16, text: &'static str) {
        counters::global().request(self.label.0, self.label.1, code);
        self.out.push_owned(response::head(
            code,
            &[("Content-Type", "text/plain; charset=utf-8")],
            Body::Length(text.len()),
            self.keep_alive,
        ));
        self.out.push(Segment::Static(text.as_bytes()));
        self.phase = if self.keep_alive {
            Phase::Idle
        } else {
            Phase::Closing
        };
    }

    fn reply(&mut self, reply: Reply) {
        self.reply_with(reply, &[]);
    }

    /// [`Conn::reply`] with `extra` headers.
    fn reply_with(&mut self, reply: Reply, extra: &[(&str, &str)]) {
        counters::global().request(self.label.0, self.label.1, reply.code);
        let retry = reply.retry_after.map(|s| s.to_string());
        let mut headers: Vec<(&str, &str)> = vec![("Content-Type", reply.format.content_type())];
        headers.extend_from_slice(extra);
        if let Some(r) = &retry {
            headers.push(("Retry-After", r));
        }
        self.out.push_owned(response::head(
            reply.code,
            &headers,
            Body::Length(reply.len()),
            self.keep_alive,
        ));
        for seg in reply.body {
            self.out.push(seg);
        }
        self.phase = if self.keep_alive {
            Phase::Idle
        } else {
            Phase::Closing
        };
    }

    fn stream(&mut self, mut w: Box<Watcher>, ctx: &Ctx<'_>) {
        let handle = self.view.clone();
        let view = handle.read();
        let result = w
            .pump(&view, &mut self.out, ctx.opts.queue, ctx.now)
            .and_then(|()| w.tick(&view, &mut self.out, ctx.now));
        drop(view);
        match result {
            Ok(()) => self.phase = Phase::Streaming(w),
            Err(end) => {
                w.ended(end.reason());
                match end {
                    End::Deadline => debug!("{}: watch of {} reached its deadline", self.peer, w.resource().plural()),
                    End::TooSlow => warn!(
                        "{}: watch of {} ended: client too slow (more than {} events queued); it will resume from its last resourceVersion",
                        self.peer, w.resource().plural(), ctx.opts.queue
                    ),
                    End::Evicted => warn!(
                        "{}: watch of {} ended: it fell behind the event history",
                        self.peer, w.resource().plural()
                    ),
                    End::Stalled => {
                        let what = format!(
                            "{}: watch of {} ended: the client read nothing for {} s while events waited{}; it will resume from its last resourceVersion",
                            self.peer, w.resource().plural(), ctx.opts.watch_stall.as_secs(),
                            if w.sending_initial() { " (during its initial events)" } else { "" }
                        );
                        if STALLS.opens_episode(crate::clock::unix_now()) {
                            warn!("{what} (further stalled watches are logged at debug until none for {STALL_EPISODE_GAP} s; all are counted in grid_wrapper_watches_ended_total{{reason=\"stalled\"}})");
                        } else {
                            debug!("{what}");
                        }
                    }
                }
                self.end_stream();
            }
        }
    }

    /// Frames what the proxy worker sent ([`Proxied::pump`]) and moves on as it says. Returns
    /// whether something was done that lets the connection go on at once.
    fn pump_proxied(&mut self, mut answer: Proxied) -> bool {
        match answer.pump(&mut self.out, &mut self.keep_alive) {
            Pumped::Pending { progressed } => {
                self.phase = Phase::Proxying(answer);
                progressed
            }
            Pumped::Done => {
                self.phase = if self.keep_alive {
                    Phase::Idle
                } else {
                    Phase::Closing
                };
                true
            }
            Pumped::Failed(err) => {
                self.reply(Reply::error(&err));
                true
            }
            Pumped::Broken => {
                self.phase = Phase::Closing;
                true
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.side.count(false);
    }
}
