//! What the simulator's connection threads share ([`Shared`]): the store and its `Condvar`, the
//! request recorder and served log, the counters, the listeners' state and the load model
//! (`load`). Its own module so that the server shell, the control API and the watch streams
//! all take it from here, and none of them from another.

use crate::api;
use crate::fault::EdgeHealthStub;
use crate::httpio::Request;
use crate::listen::Listen;
use crate::load::Load;
use crate::routes::SliceVersions;
use crate::store::Store;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use grid_wrapper::api::negotiate::{negotiate, Format, Negotiated};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Most recorded requests kept (oldest dropped first).
pub const MAX_RECORDED: usize = 10_000;
/// One request the simulator did not serve from its store.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Raw query.
    pub query: String,
    /// Headers.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Body bytes.
    pub body: Vec<u8>,
    /// The listen address it arrived on (`HOST:PORT`).
    pub listen: String,
    /// Its connection presented a client certificate.
    pub client_certificate: bool,
}

impl Recorded {
    /// JSON form for `GET /sim/requests` (body in base64).
    pub fn to_json(&self) -> Value {
        let header = |name: &str| {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let headers: Vec<Value> = self
            .headers
            .iter()
            .map(|(n, v)| json!([n, String::from_utf8_lossy(v)]))
            .collect();
        json!({
            "method": self.method, "path": self.path, "query": self.query,
            "headers": headers,
            "contentType": header("content-type"),
            "authorization": header("authorization"),
            "body": BASE64.encode(&self.body),
            "bodyLength": self.body.len(),
            "listen": self.listen,
            "clientCertificate": self.client_certificate,
        })
    }
}

/// One LIST or WATCH the simulator served from its store (`GET /sim/served`).
#[derive(Clone, Debug)]
pub struct Served {
    /// `list` or `watch`.
    pub verb: &'static str,
    /// Path.
    pub path: String,
    /// Raw query.
    pub query: String,
    /// The request's `Accept-Encoding`, if any.
    pub accept_encoding: Option<String>,
    /// The answer's `Content-Encoding` (`gzip` for a compressed list), if any.
    pub content_encoding: Option<&'static str>,
    /// Body bytes as sent (a list's; 0 for a watch, whose bytes are not counted).
    pub bytes: u64,
    /// Body bytes before compression (equal to `bytes` when not compressed).
    pub plain_bytes: u64,
    /// The answer's format (`json` or `protobuf`).
    pub format: Format,
}

impl Served {
    /// JSON form for `GET /sim/served`.
    pub fn to_json(&self) -> Value {
        json!({
            "verb": self.verb, "path": self.path, "query": self.query,
            "acceptEncoding": self.accept_encoding, "contentEncoding": self.content_encoding,
            "bytes": self.bytes, "plainBytes": self.plain_bytes,
            "format": format_name(self.format),
        })
    }
}

/// Everything the connection threads share.
#[derive(Debug)]
pub struct Shared {
    /// Objects, RVs and history.
    pub store: Mutex<Store>,
    /// Notified after every store change and on `/sim/close-watches`.
    pub changed: Condvar,
    /// Recorded requests (bounded by [`MAX_RECORDED`]).
    pub recorded: Mutex<VecDeque<Recorded>>,
    /// Lists and watches served from the store (bounded by [`MAX_RECORDED`]).
    pub served: Mutex<VecDeque<Served>>,
    /// EndpointSlice versions served.
    pub slices: SliceVersions,
    /// Whether networking.k8s.io/v1 servicecidrs are served (`--no-servicecidrs`: 404).
    pub cidrs: bool,
    /// Whether lists, watches and GETs are served in protobuf to clients that prefer it
    /// (`--no-protobuf`: JSON whatever the `Accept`, as an upstream without protobuf).
    pub protobuf: bool,
    /// BOOKMARK period (`None` = never).
    pub bookmark_interval: Option<Duration>,
    /// Required bearer token.
    pub token: Option<String>,
    /// A client certificate authenticates a request too (`--client-cert-optional`).
    pub certificate_authenticates: bool,
    /// Currently open watch streams.
    pub open_watches: AtomicUsize,
    /// LIST requests served.
    pub served_lists: AtomicU64,
    /// WATCH requests served.
    pub served_watches: AtomicU64,
    /// Single-object GETs served.
    pub served_gets: AtomicU64,
    /// Body bytes of the LIST answers sent (compressed when they were).
    pub list_bytes: AtomicU64,
    /// Event bytes written to watch streams (each event's JSON line or protobuf frame, without chunk framing).
    pub watch_bytes: AtomicU64,
    /// Body bytes of the LIST answers before compression.
    pub list_plain_bytes: AtomicU64,
    /// LIST answers sent gzip'd.
    pub gzipped_lists: AtomicU64,
    /// LIST answers sent in protobuf.
    pub protobuf_lists: AtomicU64,
    /// WATCH streams sent in protobuf.
    pub protobuf_watches: AtomicU64,
    /// Single-object GETs answered in protobuf.
    pub protobuf_gets: AtomicU64,
    /// The `/sim/edge-health` stub.
    pub edge_health: EdgeHealthStub,
    /// The load model (`--max-in-flight`, `/sim/load`): 429s and 503s with `Retry-After`.
    pub load: Load,
    /// The minor version `GET /version` reports (`--kube-version`).
    pub kube_minor: u32,
    /// The first listener's state and accepted connections (for refusals).
    first_listen: Listen,
    /// The other listeners', in `--listen` order.
    more_listens: Vec<Listen>,
}

impl Shared {
    /// Wraps a loaded store.
    pub fn new(
        store: Store,
        slices: SliceVersions,
        bookmark_interval: Option<Duration>,
        token: Option<String>,
    ) -> Self {
        Shared {
            store: Mutex::new(store),
            changed: Condvar::new(),
            recorded: Mutex::new(VecDeque::new()),
            served: Mutex::new(VecDeque::new()),
            slices,
            cidrs: true,
            protobuf: true,
            bookmark_interval,
            token,
            certificate_authenticates: false,
            open_watches: AtomicUsize::new(0),
            served_lists: AtomicU64::new(0),
            served_watches: AtomicU64::new(0),
            served_gets: AtomicU64::new(0),
            list_bytes: AtomicU64::new(0),
            watch_bytes: AtomicU64::new(0),
            list_plain_bytes: AtomicU64::new(0),
            gzipped_lists: AtomicU64::new(0),
            protobuf_lists: AtomicU64::new(0),
            protobuf_watches: AtomicU64::new(0),
            protobuf_gets: AtomicU64::new(0),
            edge_health: EdgeHealthStub::default(),
            load: Load::default(),
            kube_minor: api::DEFAULT_KUBE_MINOR,
            first_listen: Listen::default(),
            more_listens: Vec::new(),
        }
    }

    /// The same with `n` listeners (at least one).
    pub fn with_listeners(mut self, n: usize) -> Self {
        self.more_listens
            .resize_with(n.saturating_sub(1), Listen::default);
        self
    }

    /// Listener `i` (the first if there is no such listener).
    pub fn listen(&self, i: usize) -> &Listen {
        i.checked_sub(1)
            .and_then(|j| self.more_listens.get(j))
            .unwrap_or(&self.first_listen)
    }

    /// Every listener, in `--listen` order.
    pub fn listens(&self) -> impl Iterator<Item = &Listen> {
        std::iter::once(&self.first_listen).chain(&self.more_listens)
    }

    /// Outages of every listener so far.
    pub fn outages(&self) -> u64 {
        self.listens().map(Listen::outages).sum()
    }

    /// The format of a list, watch or GET answer for a request with this `Accept`: protobuf
    /// when it is the first media type the simulator can serve (the apiserver's negotiation,
    /// `grid_wrapper::api::negotiate`) and protobuf is served; JSON otherwise (also for an
    /// `Accept` nothing serves, as before protobuf was served).
    pub fn format(&self, accept: Option<&str>) -> Format {
        match negotiate(accept) {
            Negotiated::Serve(Format::Protobuf) if self.protobuf => Format::Protobuf,
            _ => Format::Json,
        }
    }

    /// Logs a list or watch served from the store, and counts a list's bytes.
    pub(crate) fn log_served(
        &self,
        req: &Request,
        verb: &'static str,
        format: Format,
        coding: Option<&'static str>,
        bytes: (usize, usize),
    ) {
        let (sent, plain) = (bytes.0 as u64, bytes.1 as u64);
        if format == Format::Protobuf {
            let counter = match verb {
                "list" => &self.protobuf_lists,
                _ => &self.protobuf_watches,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if verb == "list" {
            self.list_bytes.fetch_add(sent, Ordering::Relaxed);
            self.list_plain_bytes.fetch_add(plain, Ordering::Relaxed);
            if coding.is_some() {
                self.gzipped_lists.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut log = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        if log.len() >= MAX_RECORDED {
            log.pop_front();
        }
        log.push_back(Served {
            verb,
            path: req.path.clone(),
            query: req.query.clone(),
            accept_encoding: req.header_str("accept-encoding").map(str::to_string),
            content_encoding: coding,
            bytes: sent,
            plain_bytes: plain,
            format,
        });
    }

    pub(crate) fn record(&self, req: &Request, listener: usize, client_certificate: bool) {
        let listen = self
            .listen(listener)
            .addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut rec = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        if rec.len() >= MAX_RECORDED {
            rec.pop_front();
        }
        rec.push_back(Recorded {
            method: req.method.clone(),
            path: req.path.clone(),
            query: req.query.clone(),
            headers: req.headers.clone(),
            body: req.body.clone(),
            listen,
            client_certificate,
        });
    }
}

/// The name of a format in `/sim/served` and `/sim/state`.
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::Json => "json",
        Format::Protobuf => "protobuf",
    }
}
