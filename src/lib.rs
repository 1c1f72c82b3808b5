//! grid-wrapper: a node-local, topology-pruning cache that kube-proxy talks to instead of the
//! apiserver — a drop-in replacement for SuperEdge's `application-grid-wrapper`.
//!
//! # Why this shape
//!
//! An edge node has little CPU and memory, and kube-proxy opens a handful of long watches. One
//! mio event loop owns every client socket; a few blocking threads (one ureq list+watch
//! reflector per upstream resource, one worker per proxied request) do the waiting. No async
//! runtime: blocking I/O on a few threads keeps the code small and the binary static and tiny.
//! Each served object version is serialized **once**; every list and every watcher shares those
//! bytes (`Arc<[u8]>`), written with vectored I/O.
//!
//! # Brief overview: two flows
//!
//! ```text
//!  kube-proxy ─TCP─▶ server::event_loop ─▶ server::conn ─▶ http::request (parse)
//!                         ▲                                 │
//!                         │ Waker                           ▼
//!                         │                        api::route ─▶ api::handlers ─▶ cache::published (read, own lock)
//!                         │                                 │                     server::watch (streams)
//!                         │                                 └▶ server::proxy ─▶ upstream::client (worker thread)
//!  apiserver ─ureq─▶ upstream::reflector ─▶ cache::store::prepare (decode, off every lock)
//!                                              ─▶ cache::store::State::apply (writer lock)
//!                                              ├─ cache::topology (pure pruning) + k8s::convert
//!                                              └─ cache::published / cache::view (new RV, shared
//!                                                 bytes, event log; one record per lock) ─▶ wake the loop
//! ```
//!
//! **A request:** [`server::event_loop::Server`] accepts and polls; [`server::conn::Conn`] reads
//! bytes into [`http::request::RequestReader`], which yields a [`http::request::Request`];
//! [`api::route::route`] maps (method, path) to a [`api::route::Route`]; [`api::handlers::handle`]
//! answers from the [`cache::published::Published`] view with a list/get [`api::handlers::Reply`] or a
//! [`api::handlers::WatchPlan`], which [`server::watch::Watcher`] streams from the event log.
//! Everything else goes to [`server::proxy`], which forwards it upstream on a worker thread.
//!
//! **An upstream change:** a [`upstream::reflector`] thread lists, then watches, and hands each
//! change to the cache (a list body is split into its items as it is read,
//! [`upstream::list_split`], and each item handed at once to the sink's taker,
//! [`upstream::kind::Sink::list_items`], so a list is never held as the texts of all its items):
//! a list is reduced to canonical bytes item by item off every lock
//! ([`cache::store::ListPreparer`], with [`cache::canonical`]: no `serde_json::Value` per item; for
//! a v1 slice also where each endpoint sits, for core/v1 Endpoints each address, so that a
//! topology Service's objects are pruned by cutting bytes; keys
//! are compared by [`bytes`], not by the C library's `memcmp`, slow in musl), then
//! [`cache::store::State::apply_prepared`] runs under the writer's lock (the single writer).
//! The first lists come in a fixed order ([`upstream::list_order`]: Nodes and Services before
//! the endpoint objects, which are then served right the first time). The store keeps upstream objects (those served as
//! they came only as their served bytes, the pruned ones packed by [`cache::pack`]: a list's
//! as it is decoded, off the lock, a watch event's after it is served), recomputes the affected
//! served objects with the pure [`cache::topology`] functions, and
//! [`cache::view::Collection::record`]s each real change with a new resourceVersion in the
//! per-resource event log of the [`cache::published::Published`] view, which has its own lock,
//! taken once per recorded object: the event loop reads only that view, so a relist or a relabel
//! never holds it for longer than one record. Then the loop is woken and every watcher pulls the
//! entries after its cursor.
//!
//! # Edge autonomy: the disk, signals, edge-health
//!
//! **A snapshot:** after changes, the [`persist`] writer thread takes every upstream object
//! under the lock ([`cache::store::State::export`]: pointer copies), then encodes it
//! ([`cache::snapshot`]: format version, CRC-32) and writes it crash-safely off the lock. On
//! start, [`app`] loads it ([`persist::CacheDir::load`]: damaged or foreign → one WARN, ignored),
//! draws this process's RV epoch ([`cache::epoch`], kept in the same directory) and serves it at
//! once ([`cache::store::State::restore`]); the reflectors' first lists are diffed against it.
//!
//! **Edge-health:** [`upstream::edge_health`] polls the map, [`cache::health`] parses it and
//! resolves node names and InternalIPs, [`cache::store::State::set_edge_health`] recomputes the
//! objects with an endpoint on a node whose status changed.
//!
//! **Signals:** `server::signals` turns SIGTERM/SIGINT into a graceful stop of the loop
//! (`server::event_loop::Server::shutdown`) followed by the final snapshot, and SIGHUP (or
//! changed files) into a TLS reload. Reflector health is counted in [`upstream::stats`].
//!
//! **Explaining:** `/debug/topology` on the metrics address (`server::debug_topology`) copies
//! what it needs under the lock ([`cache::store::explain`]: shared bytes, a few labels), then
//! evaluates it off the lock with the verdicts that prune ([`cache::topology::explain`]), so an
//! explanation never disagrees with what is served.
//!
//! # Pure core, thin shell
//!
//! Pure (no sockets, threads or clocks; unit-tested and fuzzable): [`http`], [`api`],
//! [`cache`] (with the snapshot format and the edge-health map), [`k8s`], [`config`],
//! [`upstream::decode`], [`upstream::list_split`], [`upstream::kubeconfig::parse`], [`upstream::stats`],
//! [`upstream::failover::Selection`] (which of several apiservers to use).
//! I/O shell: `server`, `upstream::client`, `upstream::reflector`, `upstream::edge_health`,
//! `persist` (the disk; its writer's failure bookkeeping is pure), `app` (startup wiring),
//! `preflight` (`grid-wrapper check`: one pass against the upstream and a report; its report
//! building is pure) —
//! behind the default feature `io`, so the fuzz crate builds the core without mio, ureq or
//! rustls (`default-features = false`).

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod api;
#[cfg(feature = "io")]
pub mod app;
pub mod bytes;
pub mod cache;
pub mod config;
pub mod http;
pub mod k8s;
#[cfg(feature = "io")]
pub mod persist;
#[cfg(feature = "io")]
pub mod preflight;
#[cfg(feature = "io")]
pub mod server;
pub mod upstream;
