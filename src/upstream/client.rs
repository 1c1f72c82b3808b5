//! The upstream HTTP client for grid-wrapper's own API calls (lists, watches, discovery,
//! probes): one ureq 3 [`Agent`] per side built once from an [`UpstreamConfig`] and
//! [`UpstreamOptions`] (rustls with the ring provider, kubeconfig CA / insecure flag, client
//! certificate, bearer token) — the cloud upstream's, and the site relays' when
//! `--relay-kubeconfig` is given — and cloned into every reflector and proxy worker. Owns the
//! timeouts, the list size limit, the `--kube-qps`/`--kube-burst` token bucket and the
//! translation of ureq errors and `Status` bodies into [`UpstreamError`]. It never decodes
//! objects beyond the list envelope. With several servers (relays, `--master=A,B,…`) every
//! request goes through [`crate::upstream::failover`], which picks the server; each attempt is
//! counted in [`crate::upstream::stats::RequestStats`].
//!
//! It builds the agents of proxied requests too (one per side, see `Upstream::access`): they
//! present no client certificate to a cloud server and add no token, grid-wrapper's identity
//! being for its own requests (reflectors, discovery, probes, `grid-wrapper check`) only. The
//! forwarding itself ([`Upstream::forward`]) is [`crate::upstream::forward`]'s.
//!
//! Credentials are per server: each attempt takes the `Access` (agent and token) of the server
//! it goes to, by index, inside the failover's attempt, so the relays' client certificate and
//! token never reach a cloud server and the cloud's never reach a relay. A request naming a
//! resourceVersion is only sent to a server of the domain that issued it
//! ([`crate::upstream::domain`]); lists and watches say which server answered
//! ([`ListResult::origin`], [`WatchStream::origin`]).

use crate::handoff::{ListItems, Texts};
use crate::sync::lock;
use crate::upstream::backoff;
use crate::upstream::decode::{self, DecodeError, ListResult};
use crate::upstream::domain::{Role, RvOrigin};
use crate::upstream::failover::{self, check_server, Failed, Failover, FollowSelection};
use crate::upstream::kubeconfig::UpstreamConfig;
use crate::upstream::list_split::ListSplitter;
use crate::upstream::proto_list::ProtoListSplitter;
use crate::upstream::proto_watch::ProtoWatch;
use crate::upstream::retry_after::{self, Gate};
use crate::upstream::stats::{self, RequestStats, Stats, Verb};
use crate::upstream::throttle::TokenBucket;
use crate::upstream::tls;
use crate::upstream::token::TokenSource;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ureq::http;
use ureq::Agent;

mod encoding;
pub use crate::upstream::error::UpstreamError;
use encoding::Decoded;

/// TCP + TLS connection setup limit.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Limit for receiving a response head once the request is sent.
pub const RESPONSE_HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle limit between reads on a watch: longer than the longest `timeoutSeconds` the reflector
/// asks for (600 s), so only a dead connection trips it.
pub const WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(660);
/// End-to-end limit of one LIST (request, head and the whole body).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(300);
/// Default progress deadline of a LIST body: no byte for this long abandons it
/// (`--list-progress-timeout`).
pub const LIST_PROGRESS_TIMEOUT: Duration = Duration::from_secs(60);
/// Default progress deadline of a watch whose upstream sends bookmarks
/// (`--watch-progress-timeout`).
pub const WATCH_PROGRESS_TIMEOUT: Duration = Duration::from_secs(120);
/// Default bound on one list item (`--max-object-bytes`).
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 4 * 1024 * 1024;
/// Default bound on the items of one list, all its pages (`--max-list-items`; its derivation is
/// in [`crate::config::DEFAULT_MAX_LIST_ITEMS`]).
pub const DEFAULT_MAX_LIST_ITEMS: usize = 40_000;
/// Largest LIST body read (decompressed, when the upstream gzips it; the compressed body has the
/// same bound).
pub const MAX_LIST_BYTES: u64 = 256 * 1024 * 1024;
/// Read size of a LIST body on its way to the [`ListSplitter`].
const LIST_READ_BYTES: usize = 32 * 1024;
/// The `Accept` of lists and watches of the cached kinds (`--upstream-protobuf`, the default):
/// protobuf preferred (what kube-proxy asks for; smaller than JSON), JSON from an upstream that
/// does not serve it. Whichever `Content-Type` comes back is taken.
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";
/// The `Accept` of every other request of grid-wrapper's own (discovery, probes, reports), and
/// of the reflectors' lists and watches with `--upstream-protobuf=false`.
const ACCEPT_JSON: &str = "application/json";
/// Largest error (`Status`) body read.
pub const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;
/// A token file is re-read at most this often.
pub const TOKEN_REREAD_INTERVAL: Duration = Duration::from_secs(60);
/// Read buffer of a watch stream (on top of the connection's own input buffer; a line longer
/// than this is assembled by `decode::read_line`).
const WATCH_BUF_BYTES: usize = 16 * 1024;
/// Each pooled or watching connection's input buffer. ureq's default (128 KiB, plus as much
/// again for output), held by every watch and idle pooled connection, is large for a node
/// agent; a smaller buffer only makes a large LIST take more, cheap reads (see BENCHMARKS.md).
pub const INPUT_BUF_BYTES: usize = 32 * 1024;
/// Each connection's output buffer: it must hold a whole request head, and a forwarded head is
/// the client's (at most [`crate::http::request::DEFAULT_MAX_HEAD`]) plus `Host` and framing.
pub const OUTPUT_BUF_BYTES: usize = crate::http::request::DEFAULT_MAX_HEAD + 8 * 1024;
/// Largest response head accepted (ureq's default is 64 KiB): below [`INPUT_BUF_BYTES`], so an
/// oversized head fails with a clear error instead of filling the buffer. An apiserver's heads are
/// well under 2 KiB.
pub const MAX_RESPONSE_HEAD_BYTES: usize = 16 * 1024;

/// ureq's per-connection buffers sized for a node agent (see [`INPUT_BUF_BYTES`]); used by every
/// agent grid-wrapper builds.
pub fn lean_buffers(
    b: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    b.input_buffer_size(INPUT_BUF_BYTES)
        .output_buffer_size(OUTPUT_BUF_BYTES)
        .max_response_header_size(MAX_RESPONSE_HEAD_BYTES)
}
/// The client's time limits. [`Timeouts::default`] is what the server uses (the constants
/// above); `grid-wrapper check` uses shorter ones so that it never waits long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP + TLS connection setup ([`CONNECT_TIMEOUT`]).
    pub connect: Duration,
    /// Receiving a response head once the request is sent; also the whole of a JSON GET
    /// ([`RESPONSE_HEAD_TIMEOUT`]).
    pub response_head: Duration,
    /// End-to-end limit of one LIST ([`LIST_TIMEOUT`]).
    pub list: Duration,
    /// Idle limit between reads ([`WATCH_IDLE_TIMEOUT`]): a watch whose upstream is not known
    /// to send bookmarks, and every other read.
    pub idle: Duration,
    /// No byte of a LIST body for this long abandons the list ([`LIST_PROGRESS_TIMEOUT`]).
    pub list_progress: Duration,
    /// No byte of a watch stream for this long, while the upstream is known to send bookmarks,
    /// abandons the watch ([`WATCH_PROGRESS_TIMEOUT`]).
    pub watch_progress: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: CONNECT_TIMEOUT,
            response_head: RESPONSE_HEAD_TIMEOUT,
            list: LIST_TIMEOUT,
            idle: WATCH_IDLE_TIMEOUT,
            list_progress: LIST_PROGRESS_TIMEOUT,
            watch_progress: WATCH_PROGRESS_TIMEOUT,
        }
    }
}

/// How LISTs are read, and the format the reflectors' lists and watches ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListSettings {
    /// The largest list item taken (`--max-object-bytes`, default
    /// [`DEFAULT_MAX_OBJECT_BYTES`]); a bigger one is skipped and reported.
    pub max_object_bytes: usize,
    /// Ask for a gzip'd body (`--upstream-gzip`, on by default); it is decompressed as it is
    /// split.
    pub gzip: bool,
    /// Ask for protobuf, lists and watches alike (`--upstream-protobuf`, on by default; off:
    /// JSON only).
    pub protobuf: bool,
    /// The most items one list may bring, all its pages (`--max-list-items`, default
    /// [`DEFAULT_MAX_LIST_ITEMS`]); a longer list is abandoned as it passes it.
    pub max_list_items: usize,
}

impl Default for ListSettings {
    fn default() -> Self {
        ListSettings {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            gzip: true,
            protobuf: true,
            max_list_items: DEFAULT_MAX_LIST_ITEMS,
        }
    }
}

/// How to build an [`Upstream`] besides its cloud servers: the site relays before them, the
/// pacing of grid-wrapper's own requests, the time and list limits. [`UpstreamOptions::default`]:
/// no relays, unpaced, the server's time and list limits.
#[derive(Clone, Copy, Debug)]
pub struct UpstreamOptions<'a> {
    /// The site relays (`--relay-kubeconfig`, `--relay-servers`): their servers come before the
    /// cloud's, each reached with the relays' credentials.
    pub relays: Option<&'a UpstreamConfig>,
    /// `--kube-qps`: paces LIST, WATCH and discovery requests (not forwarded ones); `<= 0`
    /// means unlimited.
    pub qps: f64,
    /// `--kube-burst`.
    pub burst: u32,
    /// The time limits.
    pub timeouts: Timeouts,
    /// The list limits and format (`--max-object-bytes`, `--upstream-gzip`,
    /// `--upstream-protobuf`, `--max-list-items`).
    pub lists: ListSettings,
}

impl Default for UpstreamOptions<'_> {
    fn default() -> Self {
        UpstreamOptions {
            relays: None,
            qps: 0.0,
            burst: 1,
            timeouts: Timeouts::default(),
            lists: ListSettings::default(),
        }
    }
}

/// The limits of one GET of [`Upstream`]'s own (a list, discovery).
#[derive(Clone, Copy, Debug)]
struct GetBounds {
    /// The whole exchange.
    timeout: Duration,
    /// No byte for this long fails the read.
    per_read: Duration,
    /// The most body bytes taken, as sent and once decoded.
    limit: u64,
    /// Ask for a gzip'd body.
    gzip: bool,
    /// The `Accept` header.
    accept: &'static str,
}

/// How one side's servers are reached: the agent (its TLS roots and client certificate) and
/// its bearer token for grid-wrapper's own requests, and the agent of proxied requests (see
/// `Upstream::access`). No `Debug`: it holds a secret.
struct Access {
    agent: Agent,
    proxy_agent: Agent,
    token: TokenSource,
}

/// A watch stream and the server it comes from.
pub struct WatchStream {
    /// The response body, as lines.
    pub lines: Box<dyn BufRead + Send>,
    /// Where its resourceVersions come from (`None` when unknown, e.g. a test fake).
    pub origin: Option<RvOrigin>,
}

impl fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream")
            .field("origin", &self.origin)
            .finish()
    }
}

struct Inner {
    /// The servers and which one is selected.
    failover: Arc<Failover>,
    /// Per server, in the failover's order: the access of its side (relay or cloud).
    access: Vec<Arc<Access>>,
    bucket: Mutex<TokenBucket>,
    timeouts: Timeouts,
    /// The largest list item taken; a bigger one is skipped and reported.
    max_object_bytes: usize,
    /// LISTs ask for gzip (`--upstream-gzip`).
    list_gzip: bool,
    /// The `Accept` of lists and watches of the cached kinds (`--upstream-protobuf`).
    cache_accept: &'static str,
    /// The most items of one list (`--max-list-items`).
    max_list_items: usize,
    requests: Arc<RequestStats>,
    /// Requests held back by a server's `Retry-After` (keyed by server and path).
    gate: Mutex<Gate>,
}

/// A relay's answer to a runtime report: its body and `ETag`.
pub type RelayAnswer = (Vec<u8>, Option<String>);

/// Handle to the upstream apiserver(s); cheap to clone (one shared agent and connection pool,
/// one failover state).
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("failover", &self.inner.failover)
            .finish()
    }
}

impl Upstream {
    /// Builds the agents once from `cloud` and `opts` (the site relays, the pacing, the time
    /// and list limits). Every server of [`UpstreamConfig::server_list`] (the relays' first) is
    /// checked; with several, a probe thread starts (see [`crate::upstream::failover`]).
    /// Records into [`stats::global`].
    pub fn new(cloud: &UpstreamConfig, opts: UpstreamOptions<'_>) -> Result<Self, UpstreamError> {
        Self::with_stats(cloud, opts, stats::global())
    }

    /// The largest list item taken ([`ListSettings::max_object_bytes`]).
    pub fn max_object_bytes(&self) -> usize {
        self.inner.max_object_bytes
    }

    /// The most items of one list ([`ListSettings::max_list_items`]).
    pub fn max_list_items(&self) -> usize {
        self.inner.max_list_items
    }

    /// The client's time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.inner.timeouts
    }

    /// One side's access: agents with `cfg`'s TLS settings and `cfg`'s token. Proxied requests
    /// get an agent of their own (its own connections) presenting no client certificate to a
    /// cloud server: a certificate is grid-wrapper's identity, and a proxied request carries only
    /// its client's credentials (docs/SEMANTICS.md §8). To a relay they present the relay
    /// certificate: the relay port admits no connection without one, and the relay forwards with
    /// no credentials of its own, so it lends nothing upstream (§8.1).
    fn access(
        cfg: &UpstreamConfig,
        role: Role,
        https: bool,
        timeouts: &Timeouts,
    ) -> Result<Access, UpstreamError> {
        let tls = tls::tls_configs(cfg, https)?;
        let agent_with = |tls: ureq::tls::TlsConfig| -> Agent {
            let config = lean_buffers(Agent::config_builder())
                .tls_config(tls)
                .http_status_as_error(false)
                .max_redirects(0)
                .user_agent(concat!("grid-wrapper/", env!("CARGO_PKG_VERSION")))
                .timeout_connect(Some(timeouts.connect))
                .timeout_recv_response(Some(timeouts.response_head))
                .timeout_per_read(Some(timeouts.idle))
                .allow_non_standard_methods(true)
                .build();
            failover::sliced_agent(config)
        };
        let agent = agent_with(tls.own);
        let proxy_agent = match role {
            Role::Relay => agent.clone(),
            Role::Cloud => agent_with(tls.anonymous),
        };
        let token = TokenSource::new(
            cfg.token.clone(),
            cfg.token_file.clone(),
            TOKEN_REREAD_INTERVAL,
        );
        Ok(Access {
            agent,
            proxy_agent,
            token,
        })
    }

    /// [`Upstream::new`] recording into `stats` (tests give each their own).
    pub(crate) fn with_stats(
        cloud: &UpstreamConfig,
        opts: UpstreamOptions<'_>,
        stats: &Stats,
    ) -> Result<Self, UpstreamError> {
        let UpstreamOptions {
            relays,
            qps,
            burst,
            timeouts,
            lists,
        } = opts;
        let mut bases = Vec::new();
        let mut roles = Vec::new();
        let mut access = Vec::new();
        let sides = relays
            .map(|r| (r, Role::Relay))
            .into_iter()
            .chain([(cloud, Role::Cloud)]);
        for (cfg, role) in sides {
            let side = |e: UpstreamError| match (role, e) {
                (Role::Relay, UpstreamError::Config(m)) => {
                    UpstreamError::Config(format!("--relay-kubeconfig: {m}"))
                }
                (_, e) => e,
            };
            let mut https = false;
            let servers = cfg.server_list();
            for server in &servers {
                let (base, tls) = check_server(server).map_err(side)?;
                https |= tls;
                bases.push(base);
            }
            let one = Arc::new(Self::access(cfg, role, https, &timeouts).map_err(side)?);
            roles.extend(servers.iter().map(|_| role));
            access.extend(servers.iter().map(|_| one.clone()));
        }
        let bucket = Mutex::new(TokenBucket::new(qps, burst, Instant::now()));
        let several = bases.len() > 1;
        let inner = Arc::new(Inner {
            failover: Arc::new(Failover::new(bases, roles, stats.servers().clone())),
            access,
            bucket,
            timeouts,
            max_object_bytes: lists.max_object_bytes,
            list_gzip: lists.gzip,
            cache_accept: if lists.protobuf {
                ACCEPT_PROTOBUF
            } else {
                ACCEPT_JSON
            },
            max_list_items: lists.max_list_items,
            requests: stats.requests().clone(),
            gate: Mutex::new(Gate::default()),
        });
        if several {
            let weak = Arc::downgrade(&inner);
            failover::spawn_prober(move || weak.upgrade().map(|inner| Upstream { inner }));
        }
        Ok(Upstream { inner })
    }

    /// The first server's URL (the first relay when following relays, else the primary cloud
    /// server), without trailing `/`.
    pub fn server(&self) -> &str {
        self.inner.failover.base(0)
    }

    /// The URL of the server requests go to now, without trailing `/`.
    pub fn current_server(&self) -> &str {
        let f = &self.inner.failover;
        f.base(f.selected())
    }

    /// Whether the server requests go to now is a relay or the cloud upstream.
    pub fn current_role(&self) -> Role {
        let f = &self.inner.failover;
        f.role(f.selected())
    }

    /// Server `i`'s access: the credentials of its side, never the other's.
    fn access_of(&self, i: usize) -> Result<&Access, Failed> {
        self.inner.access.get(i).map(|a| &**a).ok_or_else(|| {
            Failed::Upstream(UpstreamError::Config(format!("no upstream server #{i}")))
        })
    }

    pub(crate) fn failover(&self) -> &Arc<Failover> {
        &self.inner.failover
    }

    /// Where each attempt of this client is counted.
    pub(crate) fn requests(&self) -> &RequestStats {
        &self.inner.requests
    }

    /// Server `i`'s agent for proxied requests ([`crate::upstream::forward`]): no client
    /// certificate of grid-wrapper's to a cloud server, never a token.
    pub(crate) fn proxy_agent(&self, i: usize) -> Result<&Agent, Failed> {
        Ok(&self.access_of(i)?.proxy_agent)
    }

    /// One probe of server `i` (`GET` [`failover::PROBE_PATH`], bounded by
    /// [`failover::PROBE_TIMEOUT`], not paced, not counted): its HTTP status.
    pub(crate) fn probe(&self, i: usize) -> Result<u16, UpstreamError> {
        let resp = self
            .authorized_get(i, failover::PROBE_PATH, ACCEPT_JSON)
            .map_err(Failed::into_error)?
            .config()
            .timeout_global(Some(failover::PROBE_TIMEOUT))
            .build()
            .call()?;
        let status = resp.status().as_u16();
        // Drain a little so the connection can be reused; the verdict is the status.
        let _ = resp
            .into_body()
            .into_with_config()
            .limit(4096)
            .read_to_vec();
        Ok(status)
    }

    /// The servers that are site relays (`--relay-kubeconfig`), by index.
    pub fn relay_servers(&self) -> Vec<usize> {
        let f = &self.inner.failover;
        (0..f.len()).filter(|&i| f.role(i) == Role::Relay).collect()
    }

    /// Server `i`'s name for the log (its URL, without credentials).
    pub fn server_name(&self, i: usize) -> String {
        self.inner.failover.named(i)
    }

    /// `PUT`s this node's runtime report `body` to relay `i` at `path` (docs/SEMANTICS.md §13.1),
    /// with its side's agent (the relay client certificate) and token, bounded by the response
    /// head timeout and [`MAX_ERROR_BODY_BYTES`]×256; not through the failover selection (every
    /// relay gets the report), not paced, not counted. The answer's body and `ETag`, or `None`
    /// for a 304 to `if_none_match`.
    pub fn put_runtime_report(
        &self,
        i: usize,
        path: &str,
        body: &[u8],
        if_none_match: Option<&str>,
    ) -> Result<Option<RelayAnswer>, UpstreamError> {
        let access = self.access_of(i).map_err(Failed::into_error)?;
        let base = self.inner.failover.base(i);
        let mut req = access
            .agent
            .put(format!("{base}{path}"))
            .header("Accept", "application/json")
            .header("Content-Type", "application/json");
        if let Some(tok) = access.token.current(Instant::now()) {
            req = req.header("Authorization", format!("Bearer {tok}"));
        }
        if let Some(etag) = if_none_match {
            req = req.header("If-None-Match", etag);
        }
        let resp = req
            .config()
            .timeout_global(Some(self.inner.timeouts.response_head))
            .build()
            .send(body)?;
        if resp.status().as_u16() == 304 {
            return Ok(None);
        }
        let resp = Self::check_status(resp)?;
        let etag = resp
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp
            .into_body()
            .into_with_config()
            .limit(MAX_ERROR_BODY_BYTES * 256)
            .read_to_vec()?;
        Ok(Some((body, etag)))
    }

    fn pace(&self) {
        let wait = lock(&self.inner.bucket).take(Instant::now());
        if let Some(d) = wait {
            std::thread::sleep(d);
        }
    }

    /// A GET of server `i` with its side's agent and token.
    fn authorized_get(
        &self,
        i: usize,
        path_and_query: &str,
        accept: &str,
    ) -> Result<ureq::RequestBuilder<ureq::typestate::WithoutBody>, Failed> {
        let access = self.access_of(i)?;
        let base = self.inner.failover.base(i);
        let mut req = access
            .agent
            .get(format!("{base}{path_and_query}"))
            .header("Accept", accept);
        if let Some(tok) = access.token.current(Instant::now()) {
            req = req.header("Authorization", format!("Bearer {tok}"));
        }
        Ok(req)
    }

    /// Turns a non-2xx response into [`UpstreamError::Status`] (reading a bounded body); a 429
    /// or 5xx answer's `Retry-After` is kept in it.
    fn check_status(
        resp: http::Response<ureq::Body>,
    ) -> Result<http::Response<ureq::Body>, UpstreamError> {
        let code = resp.status().as_u16();
        if (200..300).contains(&code) {
            return Ok(resp);
        }
        let retry_after = resp
            .headers()
            .get(http::header::RETRY_AFTER)
            .filter(|_| retry_after::honoured_for(code))
            .and_then(|v| retry_after::parse(v.as_bytes(), std::time::SystemTime::now()));
        let mut body = Vec::new();
        let _ = resp
            .into_body()
            .into_with_config()
            .limit(MAX_ERROR_BODY_BYTES)
            .reader()
            .read_to_end(&mut body);
        let s = decode::decode_status_body(&body, code);
        Err(UpstreamError::Status {
            code,
            reason: s.reason,
            message: s.message,
            causes: s.causes,
            retry_after,
        })
    }

    /// Waits while server `i` holds `path_and_query` back (an earlier answer's `Retry-After`):
    /// whoever asks (a reflector, discovery, the ServiceCIDR re-check, `grid-wrapper check`)
    /// never repeats a request before the time its server gave. Bounded by
    /// [`retry_after::MAX_RETRY_AFTER`] and its jitter.
    fn await_gate(&self, i: usize, path_and_query: &str) {
        let key = format!("{i} {}", retry_after::key(path_and_query));
        let wait = lock(&self.inner.gate).wait(&key, Instant::now());
        if let Some(d) = wait {
            std::thread::sleep(d);
        }
    }

    /// A failed answer of server `i` to `path_and_query`: with a `Retry-After`, the request is
    /// held back that long on that server (jittered upward: a fleet told the same value does
    /// not return in one instant), and the error names the server for the log.
    fn held_back(&self, i: usize, path_and_query: &str, e: UpstreamError) -> UpstreamError {
        let UpstreamError::Status {
            code,
            reason,
            message,
            causes,
            retry_after: Some(ra),
        } = e
        else {
            return e;
        };
        let key = format!("{i} {}", retry_after::key(path_and_query));
        let now = Instant::now();
        let until = now + retry_after::jittered(ra, backoff::random_below(u64::MAX));
        lock(&self.inner.gate).hold(&key, until, now);
        UpstreamError::Status {
            code,
            reason,
            message: format!("{message} [{}]", self.inner.failover.named(i)),
            causes,
            retry_after: Some(ra),
        }
    }

    /// GET within `bounds`, the body read through its `Content-Encoding` by `consume`, through
    /// the failover selection (only to servers of `rv_from`'s domain, if given); a non-2xx
    /// answer is an [`UpstreamError::Status`]. Also says which server answered.
    fn get_bounded<T>(
        &self,
        verb: Verb,
        path_and_query: &str,
        (bounds, rv_from): (GetBounds, Option<RvOrigin>),
        mut consume: impl FnMut(Decoded<ureq::BodyReader<'static>>, Format) -> Result<T, Failed>,
    ) -> Result<(T, RvOrigin), UpstreamError> {
        let f = &self.inner.failover;
        let limit = bounds.limit;
        f.call(verb, &self.inner.requests, rv_from, |i, _| {
            self.await_gate(i, path_and_query);
            self.pace();
            let mut req = self.authorized_get(i, path_and_query, bounds.accept)?;
            if bounds.gzip {
                req = req.header("Accept-Encoding", encoding::ACCEPT_GZIP);
            }
            let resp = req
                .config()
                .timeout_global(Some(bounds.timeout))
                .timeout_per_read(Some(bounds.per_read))
                .build()
                .call()?;
            let resp =
                Self::check_status(resp).map_err(|e| self.held_back(i, path_and_query, e))?;
            let code = resp.status().as_u16();
            let format = Format::of(&resp);
            let coding = resp
                .headers()
                .get(http::header::CONTENT_ENCODING)
                .map(|v| v.as_bytes().to_vec());
            let body = resp.into_body().into_with_config().limit(limit).reader();
            let body = Decoded::new(body, coding.as_deref(), limit).map_err(UpstreamError::from)?;
            Ok(((consume(body, format)?, f.origin(i)), code))
        })
    }

    /// GET a JSON document (discovery), body bounded by [`MAX_ERROR_BODY_BYTES`]×16.
    pub fn get_json(&self, path_and_query: &str) -> Result<serde_json::Value, UpstreamError> {
        let bounds = GetBounds {
            timeout: self.inner.timeouts.response_head,
            per_read: self.inner.timeouts.idle,
            limit: MAX_ERROR_BODY_BYTES * 16,
            gzip: false,
            accept: ACCEPT_JSON,
        };
        let (body, _) = self.get_bounded(Verb::Get, path_and_query, (bounds, None), |r, _| {
            let mut body = Vec::new();
            r.feed_all(&mut [0; 8192], |chunk| body.extend_from_slice(chunk))?;
            Ok(body)
        })?;
        serde_json::from_slice(&body)
            .map_err(|e| UpstreamError::Decode(DecodeError::Json(e.to_string())))
    }

    /// LIST: GET with a [`Timeouts::list`] limit (default [`LIST_TIMEOUT`]) and a body of at most
    /// [`MAX_LIST_BYTES`], asking for gzip ([`ListSettings::gzip`]), decompressed and split into
    /// its items as it arrives ([`ListSplitter`]: the whole body is never in memory next to its
    /// items, compressed or not), decoded.
    pub fn list(&self, path_and_query: &str) -> Result<ListResult, UpstreamError> {
        let mut texts = Texts::default();
        let mut list = self.list_into(path_and_query, &mut texts)?;
        list.items = texts.0;
        Ok(list)
    }

    /// [`Upstream::list`], each item handed to `items` as soon as it is split from the body
    /// (the answer's `items` is then empty); an item over [`Upstream::max_object_bytes`] is
    /// not kept but reported to [`ListItems::skipped`]. `items` is cleared before each attempt (another
    /// server may be tried); after an error, what it holds is a part of no list.
    pub fn list_into(
        &self,
        path_and_query: &str,
        items: &mut dyn ListItems,
    ) -> Result<ListResult, UpstreamError> {
        self.list_into_from(path_and_query, items, None)
    }

    /// [`Upstream::list_into`] of a query naming a resourceVersion (or a `continue` token)
    /// issued by `rv_from`: sent only to a server of its domain (else
    /// [`UpstreamError::ForeignResourceVersion`], nothing sent). The answer's
    /// [`ListResult::origin`] is the server that answered.
    pub fn list_into_from(
        &self,
        path_and_query: &str,
        items: &mut dyn ListItems,
        rv_from: Option<RvOrigin>,
    ) -> Result<ListResult, UpstreamError> {
        let bounds = GetBounds {
            timeout: self.inner.timeouts.list,
            per_read: self.inner.timeouts.list_progress,
            limit: MAX_LIST_BYTES,
            gzip: self.inner.list_gzip,
            accept: self.inner.cache_accept,
        };
        let requests = &self.inner.requests;
        let (split, origin) = self.get_bounded(
            Verb::List,
            path_and_query,
            (bounds, rv_from),
            |r, format| {
                items.clear();
                let mut split = Splitter::new(
                    format,
                    self.inner.max_object_bytes,
                    items.facts_only_except(),
                );
                let mut buf = vec![0; LIST_READ_BYTES];
                // Stops reading once the list has failed for its bytes outside the items or
                // the taker takes no more (a list bound): the rest is not worth its bytes.
                r.feed_while(&mut buf, |chunk| {
                    split.feed(chunk);
                    split.take_items().for_each(|text| items.push(text));
                    split.take_oversized().for_each(|o| items.skipped(o));
                    !split.failed() && !items.full()
                })?;
                requests.record_format(Verb::List, format.name());
                Ok(split)
            },
        )?;
        let (list, oversized) = split.finish_with_oversized();
        oversized.into_iter().for_each(|o| items.skipped(o));
        let mut list = list?;
        list.items.drain(..).for_each(|text| items.push(text));
        list.origin = Some(origin);
        Ok(list)
    }

    /// WATCH: the response body as a line source. No global timeout; a read idle for
    /// [`Timeouts::idle`] (default [`WATCH_IDLE_TIMEOUT`]) fails with an I/O error. Non-2xx → [`UpstreamError::Status`].
    /// With several servers the stream ends once another server is selected (see
    /// [`crate::upstream::failover`]).
    ///
    /// `bookmarks_expected`: the upstream is known to send bookmarks, so a stream silent for
    /// [`Timeouts::watch_progress`] is presumed dead (the read fails with a timeout, see
    /// [`is_stall`]); otherwise the limit is [`Timeouts::idle`].
    pub fn watch(
        &self,
        path_and_query: &str,
        bookmarks_expected: bool,
    ) -> Result<Box<dyn BufRead + Send>, UpstreamError> {
        Ok(self
            .watch_from(path_and_query, bookmarks_expected, None)?
            .lines)
    }

    /// [`Upstream::watch`] from a resourceVersion issued by `rv_from`: started only on a server
    /// of its domain (else [`UpstreamError::ForeignResourceVersion`], nothing sent); the stream
    /// says which server it comes from.
    pub fn watch_from(
        &self,
        path_and_query: &str,
        bookmarks_expected: bool,
        rv_from: Option<RvOrigin>,
    ) -> Result<WatchStream, UpstreamError> {
        let t = &self.inner.timeouts;
        let per_read = if bookmarks_expected {
            t.watch_progress
        } else {
            t.idle
        };
        let f = &self.inner.failover;
        f.call(Verb::Watch, &self.inner.requests, rv_from, |i, _| {
            self.await_gate(i, path_and_query);
            self.pace();
            let req = self
                .authorized_get(i, path_and_query, self.inner.cache_accept)?
                .config();
            let resp = req.timeout_per_read(Some(per_read)).build().call()?;
            let resp =
                Self::check_status(resp).map_err(|e| self.held_back(i, path_and_query, e))?;
            let code = resp.status().as_u16();
            let format = Format::of(&resp);
            self.inner
                .requests
                .record_format(Verb::Watch, format.name());
            let lines = BufReader::with_capacity(WATCH_BUF_BYTES, resp.into_body().into_reader());
            let lines = FollowSelection::new(lines, f.clone(), i, per_read);
            let lines: Box<dyn BufRead + Send> = match format {
                Format::Json => Box::new(lines),
                Format::Protobuf => Box::new(ProtoWatch::new(
                    lines,
                    self.inner
                        .max_object_bytes
                        .saturating_add(decode::WATCH_EVENT_ENVELOPE_BYTES),
                )),
            };
            let origin = Some(f.origin(i));
            Ok((WatchStream { lines, origin }, code))
        })
    }
}

/// The format of a list or watch answer, by its `Content-Type`: protobuf for
/// `application/vnd.kubernetes.protobuf` (with any parameters, `;stream=watch` for a watch), JSON
/// otherwise (also without a `Content-Type`, as before protobuf was asked for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

impl Format {
    fn of(resp: &http::Response<ureq::Body>) -> Format {
        let media = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::trim);
        match media {
            Some(m) if m.eq_ignore_ascii_case(crate::proto::envelope::CONTENT_TYPE) => {
                Format::Protobuf
            }
            _ => Format::Json,
        }
    }

    /// The `format` label of `grid_wrapper_upstream_responses_total`.
    fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Protobuf => "protobuf",
        }
    }
}

/// A list body's splitter for its format.
enum Splitter {
    Json(ListSplitter),
    Protobuf(Box<ProtoListSplitter>),
}

impl Splitter {
    /// `facts_except`: [`ListItems::facts_only_except`] (a protobuf list's other Nodes are then
    /// decoded as their facts only; a JSON list's are read whole anyway).
    fn new(format: Format, max_item: usize, facts_except: Option<&str>) -> Splitter {
        match format {
            Format::Json => Splitter::Json(ListSplitter::with_max_item_bytes(max_item)),
            Format::Protobuf => Splitter::Protobuf(Box::new(
                ProtoListSplitter::with_max_item_bytes(max_item).node_facts_except(facts_except),
            )),
        }
    }
    fn feed(&mut self, chunk: &[u8]) {
        match self {
            Splitter::Json(s) => s.feed(chunk),
            Splitter::Protobuf(s) => s.feed(chunk),
        }
    }
    fn take_items(&mut self) -> std::vec::Drain<'_, Box<str>> {
        match self {
            Splitter::Json(s) => s.take_items(),
            Splitter::Protobuf(s) => s.take_items(),
        }
    }
    fn take_oversized(&mut self) -> std::vec::Drain<'_, crate::handoff::Oversized> {
        match self {
            Splitter::Json(s) => s.take_oversized(),
            Splitter::Protobuf(s) => s.take_oversized(),
        }
    }
    fn failed(&self) -> bool {
        match self {
            Splitter::Json(s) => s.failed(),
            Splitter::Protobuf(s) => s.failed(),
        }
    }
    fn finish_with_oversized(
        self,
    ) -> (
        Result<ListResult, DecodeError>,
        Vec<crate::handoff::Oversized>,
    ) {
        match self {
            Splitter::Json(s) => s.finish_with_oversized(),
            Splitter::Protobuf(s) => s.finish_with_oversized(),
        }
    }
}

/// Whether a read error of a watch stream is a missed progress deadline (no byte in time)
/// rather than a broken connection.
pub fn is_stall(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::TimedOut
        || e.get_ref()
            .and_then(|inner| inner.downcast_ref::<ureq::Error>())
            .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)))
}

#[cfg(test)]
#[path = "client_tests.rs"]
pub(crate) mod tests;
