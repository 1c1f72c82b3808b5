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
//! | [`upstream`] | the apiserver side: kubeconfig, ureq client, decoding, reflectors, failover |
//! | [`server`] | the mio event loop, connections (kube-proxy's and, with `--relay-bind-address`, the relay port's), watches, proxy workers, signals, health |
//! | [`persist`] | `--cache-dir`: the snapshot and epoch files and the snapshot writer thread |
//! | [`writer`] | the one writer: the thread that owns the cache's state and applies every change; the sink that hands it reflector changes |
//! | [`app`] | startup wiring, graceful shutdown |
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
//!  kube-proxy ─TCP─▶ server::event_loop ─▶ server::conn ─▶ http::request (parse)
//!                         ▲                                 │
//!                         │ Waker                           ▼
//!                         │                        api::route ─▶ api::handlers ─▶ cache::published (read, view lock)
//!                         │                                 │                     server::watch (streams)
//!                         │                                 └▶ server::proxy ─▶ upstream::client (worker thread)
//!  apiserver ─ureq─▶ upstream::reflector ─▶ cache::store::prepare / ListPreparer (off every lock)
//!                                              ─▶ writer (one thread, a channel) ─▶ cache::store::State::apply_prepared
//!                                              ├─ cache::topology (pure pruning) + k8s::convert
//!                                              └─ cache::published + cache::view (new RV, shared
//!                                                 bytes, event log; view lock per record) ─▶ wake the loop
//! ```
//!
//! **A request:** [`server::event_loop::Server`] polls, [`server::conn::Conn`] feeds
//! [`http::request::RequestReader`], [`api::decide::decide`] decides its fate (fed by
//! [`api::route::route`] and [`api::negotiate::negotiate`]), and [`api::handlers::handle`]
//! answers from the [`cache::published::Published`] view (read through the read-only
//! [`cache::published::View`]) or plans a
//! watch that [`server::watch::Watcher`] streams from the event log. Anything else goes upstream
//! through [`server::proxy`], on a worker thread.
//!
//! **An upstream change:** an [`upstream::reflector`] thread lists (item by item,
//! [`upstream::list_split`]) and watches; each change is prepared off every lock
//! ([`cache::store::ListPreparer`]), sent to the one [`writer`] thread, which owns the cache's
//! state and applies it with [`cache::store::State::apply_prepared`], pruned by [`cache::topology`], and recorded with a new
//! resourceVersion in the [`cache::published::Published`] view, one record at a time under the
//! view's own lock. Then the loop is woken and every watcher pulls the entries after its cursor.

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
