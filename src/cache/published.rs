//! What readers see: the served collections, the current resourceVersion and readiness, behind
//! their own lock. The one writer (the thread that owns [`crate::cache::store::State`]) computes a
//! change — decoding, topology, serialization — without holding this lock, and takes it only to
//! read an object's previous served version and to record the new one. So a LIST or a watch pump
//! waits at most for one object's record, never for a relist or a relabel.
//!
//! The types say who may write. Readers (the event loop, the relay port, preflight, tests) hold a
//! [`View`]: it can be cloned and only read ([`View::read`] derefs to `&Published`, and every
//! public method of [`Published`] and of [`crate::cache::collection::Collection`] takes `&self`). The
//! writer's side holds the one `ViewWriter`, which is not `Clone` and alone reaches
//! `&mut Published`: recording, trimming and ageing the logs, readiness and the served versions.
//!
//! The read guard cannot give a `&mut Published`:
//!
//! ```compile_fail,E0596
//! use grid_wrapper::cache::published::Published;
//! use grid_wrapper::cache::store::{Settings, State};
//! use grid_wrapper::cache::collection::Retention;
//!
//! let settings = Settings {
//!     hostname: "h".into(),
//!     wrapper_in_cluster: true,
//!     retention: Retention::for_queue(16),
//! };
//! let view = State::new(settings, 1).view();
//! let mut guard = view.read();
//! let _writable: &mut Published = &mut *guard; // no `DerefMut`: does not compile
//! ```
//!
//! nor call a mutating method (they are the cache's own, and take `&mut self`):
//!
//! ```compile_fail,E0624
//! # use grid_wrapper::cache::store::{Settings, State};
//! # use grid_wrapper::cache::collection::Retention;
//! # let settings = Settings {
//! #     hostname: "h".into(),
//! #     wrapper_in_cluster: true,
//! #     retention: Retention::for_queue(16),
//! # };
//! let view = State::new(settings, 1).view();
//! view.read().age(10_000); // the writer's: does not compile
//! ```
//!
//! while reading compiles:
//!
//! ```
//! # use grid_wrapper::cache::store::{Settings, State};
//! # use grid_wrapper::cache::collection::Retention;
//! # use grid_wrapper::k8s::Resource;
//! # let settings = Settings {
//! #     hostname: "h".into(),
//! #     wrapper_in_cluster: true,
//! #     retention: Retention::for_queue(16),
//! # };
//! let view = State::new(settings, 1).view();
//! let reader = view.clone();
//! let guard = reader.read();
//! assert!(!guard.is_ready());
//! assert_eq!(guard.collection(Resource::Nodes).len(), 0);
//! assert!(guard.collection(Resource::Nodes).entries_after(1).is_ok());
//! ```
//!
//! One lock per record, not an `Arc` swapped per change: see docs/ARCHITECTURE.md (Locks).

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::cache::collection::{Collection, Retention};
use crate::cache::facts::SharedFacts;
use crate::k8s::Resource;
use crate::sync::lock;

/// The served view of every resource.
#[derive(Debug)]
pub struct Published {
    served: [Collection; Resource::ALL.len()],
    rv: u64,
    ready: bool,
    v1beta1: bool,
    /// Whether ServiceCIDRs are served (both versions): from their first list, or a snapshot
    /// that holds them, on (docs/SEMANTICS.md §5); until then requests for them are proxied.
    cidrs: bool,
    /// How much history each collection keeps.
    retention: Retention,
    /// The writer's clock (seconds) at its latest trim: the time base of the logs' entries.
    clock: u64,
    /// What the health listener reads without this lock (stored while it is held).
    facts: Arc<SharedFacts>,
    /// The relay view only: every node's runtime view as the relay answers a follower's report
    /// (docs/SEMANTICS.md §13.1), serialized once, and its generation (the answer's `ETag`).
    site_pods: Option<(u64, Arc<[u8]>)>,
    /// The readers' view only: the one Node it holds and serves whole (`--hostname`); every
    /// other Node is the apiserver's to answer (docs/SEMANTICS.md §1.1). `None`: every Node
    /// the upstream has (the relay view).
    only_node: Option<Arc<str>>,
}

/// The readers' handle on the [`Published`] view: cloned freely, read only ([`View::read`]).
/// The writer records into the same view through its `ViewWriter`.
#[derive(Clone, Debug)]
pub struct View(Arc<Mutex<Published>>);

impl View {
    /// The view, locked for reading while the guard lives (keep it short: the writer waits for
    /// it to record the next object).
    pub fn read(&self) -> ViewRef<'_> {
        ViewRef(lock(&self.0))
    }
}

/// A read lock on the [`Published`] view ([`View::read`]): `&Published` only.
pub struct ViewRef<'a>(MutexGuard<'a, Published>);

impl Deref for ViewRef<'_> {
    type Target = Published;

    fn deref(&self) -> &Published {
        &self.0
    }
}

/// The writer's handle on a [`Published`] view: the only way to `&mut Published`. Not `Clone`:
/// the writer's publisher holds the one handle of each view (the readers' and the relay view).
#[derive(Debug)]
pub(crate) struct ViewWriter(Arc<Mutex<Published>>);

impl ViewWriter {
    /// A new view, empty and not ready, whose history starts at `rv`.
    pub(crate) fn new(rv: u64, retention: Retention) -> ViewWriter {
        ViewWriter(Arc::new(Mutex::new(Published::new(rv, retention))))
    }

    /// A readers' handle on this view.
    pub(crate) fn reader(&self) -> View {
        View(Arc::clone(&self.0))
    }

    /// The view, locked for reading (the writer's own reads between records).
    pub(crate) fn read(&self) -> ViewRef<'_> {
        ViewRef(lock(&self.0))
    }

    /// The view, locked for writing while the guard lives.
    pub(crate) fn write(&mut self) -> MutexGuard<'_, Published> {
        lock(&self.0)
    }
}

impl Published {
    /// An empty, not yet ready view whose history starts at `rv` and keeps `retention`.
    pub(crate) fn new(rv: u64, retention: Retention) -> Published {
        Published {
            served: std::array::from_fn(|_| Collection::new(rv)),
            rv,
            ready: false,
            v1beta1: false,
            cidrs: false,
            retention,
            clock: 0,
            facts: Arc::new(SharedFacts::new(rv)),
            site_pods: None,
            only_node: None,
        }
    }

    /// How much history each collection keeps.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The served objects and event log of one resource.
    pub fn collection(&self, res: Resource) -> &Collection {
        &self.served[res.index()]
    }

    /// The same, for the writer.
    pub(crate) fn collection_mut(&mut self, res: Resource) -> &mut Collection {
        &mut self.served[res.index()]
    }

    /// Every collection, for the writer.
    pub(crate) fn collections_mut(&mut self) -> impl Iterator<Item = &mut Collection> {
        self.served.iter_mut()
    }

    /// The current resourceVersion: the last one recorded.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// Whether the cache is ready to answer (see `State::is_ready`).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// Whether v1beta1 EndpointSlices are built (see `State::serve_v1beta1`).
    pub fn serves_v1beta1(&self) -> bool {
        self.v1beta1
    }

    /// Whether ServiceCIDRs are served from the cache (see `State::serves_cidrs`).
    pub fn serves_cidrs(&self) -> bool {
        self.cidrs
    }

    /// The one Node this view holds whole, when it holds only one (the readers' view): a request
    /// that could select another Node is forwarded upstream ([`crate::api::decide`]).
    pub fn only_node(&self) -> Option<&Arc<str>> {
        self.only_node.as_ref()
    }

    /// From now on this view holds and serves only the Node `name` ([`Published::only_node`]).
    pub fn set_only_node(&mut self, name: &str) {
        self.only_node = Some(Arc::from(name));
    }

    /// The writer's clock at its latest trim (seconds, the time base of the log entries).
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Drops every log entry beyond the retention at `now` (the writer's clock, after each
    /// change).
    pub(crate) fn trim(&mut self, now: u64) {
        self.clock = self.clock.max(now);
        self.trim_logs(now);
    }

    /// Trims the logs at `now` (the writer's clock) when it is past the latest trim: the writer
    /// calls it every [`AGE_EVERY`] between changes, so that a log filled by a burst of churn is
    /// emptied once the window passes although no change comes (a watch resuming from before it
    /// gets 410 and relists, as from the apiserver). Stores the logs' lengths into the facts.
    pub(crate) fn age(&mut self, now: u64) {
        if now > self.clock {
            self.clock = now;
            self.trim_logs(now);
            self.facts.store_log_entries(&self.log_lens());
        }
    }

    /// The figures the health listener reads (`crate::cache::facts`): the writer stores them at
    /// the end of each change, `Published::age` the logs' lengths.
    pub fn facts(&self) -> Arc<SharedFacts> {
        Arc::clone(&self.facts)
    }

    /// Served objects per resource, in [`Resource::ALL`] order.
    pub fn object_counts(&self) -> [u64; Resource::ALL.len()] {
        std::array::from_fn(|i| self.served[i].len() as u64)
    }

    /// Event-log entries per resource, in [`Resource::ALL`] order.
    pub fn log_lens(&self) -> [u64; Resource::ALL.len()] {
        std::array::from_fn(|i| self.served[i].log_len() as u64)
    }

    fn trim_logs(&mut self, now: u64) {
        for coll in self.served.iter_mut() {
            coll.trim(&self.retention, now);
        }
    }

    pub(crate) fn set_rv(&mut self, rv: u64) {
        self.rv = rv;
    }

    pub(crate) fn set_ready(&mut self) {
        self.ready = true;
    }

    pub(crate) fn set_v1beta1(&mut self) {
        self.v1beta1 = true;
    }

    /// The relay view's slice version: v1beta1 (an upstream without v1) or v1.
    pub(crate) fn set_relay_slices(&mut self, v1beta1: bool) {
        self.v1beta1 = v1beta1;
    }

    pub(crate) fn set_site_pods(&mut self, generation: u64, bytes: Arc<[u8]>) {
        self.site_pods = Some((generation, bytes));
    }

    /// The relay view's answer to a follower's runtime report: its generation and bytes (none
    /// before the first view, or on the readers' view).
    pub fn site_pods(&self) -> Option<(u64, Arc<[u8]>)> {
        self.site_pods.clone()
    }

    pub(crate) fn set_cidrs(&mut self) {
        self.cidrs = true;
    }
}

/// How often the writer ages the logs while no change comes (`Published::age`, the writer's).
pub const AGE_EVERY: Duration = Duration::from_secs(5);

/// A locked view of one collection (what `State::collection` returns).
pub struct CollectionRef<'a> {
    guard: ViewRef<'a>,
    res: Resource,
}

impl<'a> CollectionRef<'a> {
    pub(crate) fn new(guard: ViewRef<'a>, res: Resource) -> CollectionRef<'a> {
        CollectionRef { guard, res }
    }
}

impl Deref for CollectionRef<'_> {
    type Target = Collection;

    fn deref(&self) -> &Collection {
        self.guard.collection(self.res)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::cache::collection::Served;
    use crate::cache::store::test_support;
    use crate::handoff::Change;
    use crate::k8s::ObjectKey;

    #[test]
    fn readers_do_not_need_the_writer_lock() {
        let mut st = test_support::state("h", 1);
        test_support::list_all_empty(&mut st);
        let node = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "h"}});
        st.apply(Resource::Nodes, Change::upsert(&node), 0);
        let rv = st.current_rv();
        let view = st.view();
        let writer = Mutex::new(st);
        // The writer is busy (as during a relist or a relabel): a reader still reads the view.
        let busy = writer.lock().unwrap_or_else(|p| p.into_inner());
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let v = view.read();
            let _ = tx.send((
                v.is_ready(),
                v.current_rv(),
                v.collection(Resource::Nodes).len(),
            ));
        });
        let seen = rx.recv_timeout(Duration::from_secs(10));
        drop(busy);
        let _ = reader.join();
        assert_eq!(seen, Ok((true, rv, 1)), "the reader waited for the writer");
    }

    #[test]
    fn the_facts_follow_each_change_and_the_ageing() {
        use crate::cache::store::{Settings, State};
        let retention = Retention {
            min_entries: 0,
            max_entries: 1024,
            window_secs: 75,
            max_bytes: 16 << 20,
        };
        let mut st = State::new(
            Settings {
                hostname: "h".into(),
                wrapper_in_cluster: true,
                retention,
            },
            1,
        );
        let facts = st.shared_facts();
        assert_eq!(facts.load(), st.facts());
        assert!(!facts.load().ready);
        test_support::list_all_empty(&mut st);
        let node = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "h"}});
        st.apply(Resource::Nodes, Change::upsert(&node), 0);
        let now = facts.load();
        assert_eq!(now, st.facts());
        assert!(now.ready && !now.serving_snapshot);
        assert_eq!(now.resource_version, st.current_rv());
        assert_eq!(
            (
                now.objects(Resource::Nodes),
                now.log_entries(Resource::Nodes)
            ),
            (1, 1)
        );
        // Read while the writer is busy: as the health listener does while a relist is applied.
        let writer = Mutex::new(st);
        let busy = writer.lock().unwrap_or_else(|p| p.into_inner());
        assert_eq!(facts.load(), now);
        // The writer ages the log long after the change: the facts say so.
        drop(busy);
        lock(&writer).age(10_000);
        assert_eq!(facts.load().log_entries(Resource::Nodes), 0);
        assert_eq!(facts.load().objects(Resource::Nodes), 1);
    }

    #[test]
    fn ageing_empties_a_log_that_no_change_trims() {
        let retention = Retention {
            min_entries: 2,
            max_entries: 1024,
            window_secs: 75,
            max_bytes: 16 << 20,
        };
        let mut view = Published::new(0, retention);
        let node = |rv: u64| {
            let v = json!({"kind": "Node", "apiVersion": "v1",
                "metadata": {"name": "n", "resourceVersion": rv.to_string()}});
            Arc::new(Served::from_value(ObjectKey::new("", "n"), rv, &v))
        };
        // A burst of ten changes at the writer's second 0, then nothing.
        for rv in 1..=10 {
            let coll = view.collection_mut(Resource::Nodes);
            coll.record(&ObjectKey::new("", "n"), Some(node(rv)), rv, 0);
            view.trim(0);
        }
        let log = |v: &Published| v.collection(Resource::Nodes).log_len();
        assert_eq!(log(&view), 10);
        // The writer ages the logs every few seconds while no change comes.
        for secs in (5..=75).step_by(5) {
            view.age(secs);
            assert_eq!(log(&view), 10, "{secs} s after the burst: kept");
            assert_eq!(view.facts().load().log_entries(Resource::Nodes), 10);
        }
        view.age(80);
        assert_eq!(
            log(&view),
            2,
            "80 s after the burst: aged down to the minimum"
        );
        assert_eq!(view.collection(Resource::Nodes).horizon(), 8);
        assert_eq!(view.facts().load().log_entries(Resource::Nodes), 2);
        assert_eq!(view.clock(), 80, "the writer's clock at its latest trim");
        // A clock that does not move on ages nothing.
        view.age(80);
        assert_eq!(log(&view), 2);
    }
}
