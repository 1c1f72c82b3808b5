//! grid-wrapper: a node-local, topology-pruning cache that kube-proxy talks to instead of the
//! apiserver — a drop-in replacement for SuperEdge's `application-grid-wrapper`.
//!
//! What clients get is specified in `docs/SEMANTICS.md`. How the code is built — the module map,
//! both flows step by step, the threads and what each lock guards, edge autonomy, the pure core
//! and the I/O shell — is in `docs/ARCHITECTURE.md`. In
//! code comments, `§N` names a section of `docs/SEMANTICS.md` (unless an RFC is named), and
//! measured figures are left to `BENCHMARKS.md`.
//!
//! # Modules
//!
//! | module | what it is |
//! |---|---|
//! | [`http`] | HTTP/1.1 over byte slices: the request reader and its limits, response framing |
//! | [`api`] | query options, selectors, routing, JSON/protobuf negotiation, the one decision of a request's fate, the cache-backed list, get and watch answers, the watch rules, the answers' bytes in each format (`api::wire`), and the relay port's own answers |
//! | [`cache`] | upstream objects, topology pruning, served bytes, resourceVersions and event logs |
//! | [`k8s`] | served resources, object keys, the `Status` object, EndpointSlice conversion |
//! | [`proto`] | the Kubernetes protobuf encoding: the schema, the object encoder, the envelope and watch framing |
//! | [`config`] | command-line flags into a validated `Config` |
//! | [`bytes`] | byte-string comparison that does not go through the C library's `memcmp` |
//! | [`handoff`] | what the upstream hands the cache: changes, lists item by item, the receiver, the first-list order, the edge-health map |
//! | [`upstream`] | the apiserver side: kubeconfig, ureq client, forwarding of proxied requests, decoding, reflectors and their supervisor, failover |
//! | [`server`] | the mio event loop, connections (kube-proxy's and, with `--relay-bind-address`, the relay port's), watches, proxy workers and the framing of their answers, signals, health |
//! | [`persist`] | `--cache-dir`: the snapshot and epoch files and the snapshot writer thread |
//! | [`writer`] | the one writer: the thread that owns the cache's state and applies every change; the sink that hands it reflector changes |
//! | [`app`] | startup wiring (the sink the reflectors feed, whom the writer wakes, the writer hearing the versions the reflector supervisor mirrors), graceful shutdown |
//! | [`preflight`] | `grid-wrapper check`: one pass against the upstream, and a report |
//!
//! Below every layer, for all of them: [`bytes`] (byte comparisons), [`histogram`] (the latency
//! histogram of `/metrics`), [`sync`] (the one way a
//! mutex is locked) and, for the I/O shell, `clock` (wall-clock Unix seconds).
//!
//! `http`, `api`, `proto`, `cache`, `k8s`, `config` and the decoding parts of `upstream` are the pure core
//! (no sockets, threads or clocks). The I/O shell (`server`, `persist`, `app`, `preflight`, the
//! upstream threads) is behind the default feature `io`, so the fuzz crate builds the core alone.
//!
//! # Two flows
//!
//! ```text
//!  ── event loop thread (main) ─────────────────────────────────────────────────────────────
//!  kube-proxy ─TCP─▶ server::event_loop ─▶ server::conn ◀─▶ server::transport ─▶ http::request
//!                      ▲                     │ View::read ─▶ api::decide (api::route, api::negotiate)
//!                      │ Waker               ├─▶ api::handlers ─▶ api::wire ─▶ http::response
//!                      │                     ├─▶ server::watch ─▶ api::transition ─▶ api::wire
//!                      │                     ├─▶ server::outbound ─▶ server::transport (writev)
//!                      │                     └─▶ server::proxy (Proxied::pump) ◀─channel─ proxy thread: upstream::forward
//!  ── cache-writer ────┴───────────────────────────────────────────────────────────────────
//!    writer ─▶ cache::store::State::apply_prepared ─▶ cache::topology ─▶ store::publisher
//!           ─▶ cache::published + cache::collection (one record at a time) ─▶ writer::Callbacks
//!      ▲ bounded channel
//!  ── reflect-<Kind>, one thread per resource ──────────────────────────────────────────────
//!  apiserver ─ureq─▶ upstream::client ─▶ upstream::reflector ─▶ writer::CacheSink
//!    a list:  upstream::list_split ─▶ cache::store::ListPreparer (canonical bytes per item)
//!    a watch: upstream::decode (a serde_json Value) ─▶ cache::store::prepare (unchanged)
//! ```
//!
//! **A LIST**, on the event loop thread: [`server::event_loop`] → [`server::conn`] →
//! [`server::transport`] → [`http::request`] → [`cache::published::View::read`] →
//! [`api::serving`] → [`api::decide`] ([`api::route`], [`api::negotiate`]) → [`api::handlers`] →
//! [`api::wire`] ([`api::wire::json`]; a protobuf list is framed once the view's lock is
//! released) → [`http::response`] → [`server::outbound`] → [`server::transport`] (`writev`).
//! **A WATCH** goes from [`api::handlers`] to [`server::watch`], whose
//! [`api::transition::InitialCursor`] produces the initial events a batch at a time; the loop
//! pumps the stream every round. **A proxied request** goes from [`api::decide`] to
//! [`server::proxy`], whose worker sends it through [`upstream::forward`]; on the loop,
//! [`server::proxy::Proxied::pump`] frames the answer's pieces for the client.
//!
//! **An upstream change**, on its resource's `reflect-<Kind>` thread: [`upstream::reflector`]
//! reads through [`upstream::client`] (failover, sliced reads). A watch line is split into its
//! type and its object's text by [`upstream::decode`] (the object checked, not decoded) and the
//! object made canonical bytes by the sink ([`cache::store::WatchPreparer`]); a list's items are
//! split by [`upstream::list_split`] and made canonical bytes as they come
//! ([`cache::store::ListPreparer`]), the same way. The sink, [`writer::CacheSink`], is chosen in
//! `app` and handed to each reflector by [`upstream::supervisor`], which starts them. On the
//! `cache-writer` thread, [`writer`] calls [`cache::store::State::apply_prepared`]: each object
//! is compared on its bytes, pruned by [`cache::topology`], and its
//! served bytes are made once with a new resourceVersion and recorded in the
//! [`cache::published::Published`] view, one record at a time under the view's lock. Then
//! [`writer::Callbacks`] (also set in `app`) wake the loop, whose watchers pull the new entries:
//! [`server::watch`] → [`api::transition`] → [`api::wire`] → [`server::outbound`] →
//! [`server::transport`]. Every file of both flows, step by step, with its thread:
//! `docs/ARCHITECTURE.md` §3.

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod api;
#[cfg(feature = "io")]
pub mod app;
pub mod bytes;
pub mod cache;
#[cfg(feature = "io")]
pub mod clock;
pub mod config;
/// The container runtime's CRI over a unary gRPC client of our own (HTTP/2, HPACK, gRPC framing).
pub mod cri;
pub mod handoff;
pub mod histogram;
pub mod http;
pub mod k8s;
#[cfg(feature = "io")]
pub mod persist;
#[cfg(feature = "io")]
pub mod preflight;
pub mod proto;
#[cfg(feature = "io")]
pub mod server;
pub mod sync;
pub mod upstream;
#[cfg(feature = "io")]
pub mod writer;
