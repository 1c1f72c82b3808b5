//! The cache: upstream objects, the topology-pruned served view, RVs and the event log.
//!
//! - [`canonical`]: an upstream list item's canonical compact bytes, made without a `Value`;
//! - [`epoch`]: the shape of resourceVersions, a per-process epoch above a counter;
//! - [`facts`]: the cache's figures for probes and `/metrics`, read without a lock;
//! - [`intern`]: one shared copy of each string that repeats across cached objects;
//! - [`edge_health`]: the edge-health map resolved against the cached nodes (pure functions);
//! - [`pack`]: a small LZ77 for the upstream bytes of pruned objects;
//! - [`repair`]: the repair rule: a served endpoint object as the local runtime says its pods are;
//! - [`published`]: what readers see, every served collection behind one lock: a read-only handle
//!   for readers, one writing handle for the writer;
//! - [`snapshot`]: the on-disk snapshot's file format;
//! - [`store`]: `State`, the binder, and the cache's parts, each a type in its own module:
//!   - `store::upstream`: what the upstream said, by resource and key, and how it is kept;
//!   - `store::index`: node labels, topology keys, slice owners, the by-node index, dirty sets;
//!   - `store::publisher`: the RV counter and the readers' view, written one object at a time;
//!   - `store::edge_health`: the edge-health map and the abnormal nodes it resolves to;
//!   - `store::serve`: the filter's inputs, borrowed from the parts;
//!   - `store::prepare`: lists prepared off every lock (pure);
//!   - [`store::explain`]: `/debug/topology`'s data, on a copied input (pure);
//! - [`topology`]: the pruning rules as pure functions, and each endpoint's verdict;
//! - [`collection`]: one resource's served objects as shared bytes and its bounded event log.

pub mod canonical;
pub mod collection;
pub mod compaction;
pub mod edge_health;
pub mod epoch;
pub mod facts;
pub mod intern;
pub mod pack;
pub mod published;
pub mod repair;
pub mod snapshot;
pub mod store;
pub mod topology;
