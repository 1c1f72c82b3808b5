//! The one writer: a thread that owns the cache's [`State`] and applies every change to it, one
//! message at a time (I/O shell; the state machine it drives is pure).
//!
//! Everyone else holds a [`WriterHandle`] handle and sends it messages over a channel: the reflectors
//! their prepared changes and lists (through [`CacheSink`], `writer/sink.rs`), the edge-health
//! poller its map, the runtime source its view of the local pods, the reflector starter the EndpointSlice version, the event loop its wish for
//! v1beta1 EndpointSlices, the snapshot writer and the debug pages their questions
//! ([`WriterHandle::ask`]). Nobody locks the state: it has no lock.
//!
//! Readers read what the writer publishes: the served view ([`crate::cache::published`]), which
//! the writer records into one object at a time under the view's own short lock, and the facts
//! the health listener reads as atomics ([`crate::cache::facts`]). A relist, a relabel or an
//! export in progress on this thread makes none of them wait.
//!
//! After each change the writer wakes the event loop and tells the snapshot writer (two
//! callbacks given at [`Unstarted::start`], in `src/app.rs`), then packs the upstream bytes that change left to
//! pack, a batch at a time, handling any message that comes in meanwhile first.
//!
//! The writer alone changes the view, ageing its logs included: every
//! [`crate::cache::published::AGE_EVERY`], between messages, it trims the event logs at its own
//! clock ([`State::age`]), so that a log filled by a burst of churn is emptied once the window
//! passes although no change comes. Readers never write: they hold a read-only
//! [`View`](crate::cache::published::View).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{info, warn};

use crate::cache::facts::SharedFacts;
use crate::cache::published::{View, AGE_EVERY};
use crate::cache::store::{Applied, ListPreparer, Prepared, State};
use crate::handoff::edge_health::EdgeHealthMap;
use crate::handoff::runtime_pods::RuntimePods;
use crate::handoff::site_pods::NodeReport;
use crate::k8s::status::ApiError;
use crate::k8s::Resource;

pub mod compactor;
mod sink;

pub use sink::CacheSink;

/// Upstream bytes packed per turn between two looks at the channel.
const PACK_BATCH: usize = 256;

/// Messages the channel holds before a sender waits: a reflector that gets ahead of the writer
/// by this many changes waits for it. Enough for a reflector to decode its next event while the
/// writer applies the last one; small, because every queued event is a decoded object (with 1,024
/// the peak RSS at scale S rose by the cached JSON's size under a burst of changes).
const QUEUE: usize = 32;

/// What the writer is told to do.
enum Message {
    /// Apply a prepared change.
    Apply {
        kind: Resource,
        change: Prepared,
        /// A list's item count and when its preparing started (for the log line).
        list: Option<(usize, Instant)>,
        sent: Instant,
        /// Told once the change is applied (a list: its sender waits for it).
        done: Option<mpsc::Sender<()>>,
    },
    /// The edge-health poller's latest map.
    EdgeHealth(EdgeHealthMap),
    /// The runtime source's latest view of the local pods (docs/SEMANTICS.md §13).
    RuntimePods(RuntimePods),
    /// A follower's report of its node's pods, taken on the relay port (§13.1).
    NodeReport(NodeReport),
    /// The relays' answer to this follower's report: every node's view.
    RelayedReports(Vec<NodeReport>),
    /// Mirror this EndpointSlice version.
    ExpectSlices(Resource),
    /// Mirror this ServiceCIDR version, or none (the upstream has none).
    ExpectCidrs(Option<Resource>),
    /// Build and serve v1beta1 EndpointSlices (the first request for them came).
    ServeV1beta1,
    /// Run a question on the state, between changes.
    Ask(Box<dyn FnOnce(&State) + Send>),
    /// Test-only: change the state outside the change path (to set a hook).
    #[cfg(test)]
    Tweak(Box<dyn FnOnce(&mut State) + Send>),
}

/// Told after a change: wake the event loop; tell the snapshot writer.
pub struct Callbacks {
    /// The served view changed: the event loop should look.
    pub wake: Box<dyn Fn() + Send>,
    /// The cache's content changed: a snapshot is due.
    pub changed: Box<dyn Fn() + Send>,
}

impl Callbacks {
    /// Callbacks that wake the event loop through `waker` ([`wake_with`]) and call `changed`.
    pub fn waking(waker: Arc<mio::Waker>, changed: Box<dyn Fn() + Send>) -> Callbacks {
        Callbacks {
            wake: wake_with(waker),
            changed,
        }
    }

    /// Callbacks that do nothing (a writer nobody needs to hear from: tests, tools).
    pub fn none() -> Callbacks {
        Callbacks {
            wake: Box::new(|| {}),
            changed: Box::new(|| {}),
        }
    }
}

/// How long a debug page waits for the writer's answer before it answers 503.
pub const DEBUG_WAIT: Duration = Duration::from_secs(2);

/// The writer did not answer in time (it is applying a long change) or is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

impl Busy {
    /// The 503 a page answers with when the writer does not answer in time.
    pub fn to_api_error(self) -> ApiError {
        ApiError::unavailable(
            "the cache's writer is busy applying a change (a relist?); retry",
            Some(1),
        )
    }
}

/// A handle on the one writer; cheap to clone, one per thread that sends it changes.
#[derive(Clone)]
pub struct WriterHandle {
    tx: SyncSender<Message>,
    view: View,
    /// The relay view (`--relay-bind-address`), when the state keeps one.
    relay_view: Option<View>,
    facts: Arc<SharedFacts>,
    /// Whether v1beta1 EndpointSlices were asked for (sent once).
    v1beta1_asked: Arc<AtomicBool>,
}

impl std::fmt::Debug for WriterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHandle").finish_non_exhaustive()
    }
}

impl WriterHandle {
    /// A handle on `state`'s writer, and the writer itself, not started yet: messages sent
    /// before [`Unstarted::start`] wait in the channel (the handle is needed to wire the event
    /// loop and the snapshot writer whose callbacks the writer takes).
    pub fn new(state: State) -> (WriterHandle, Unstarted) {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let handle = WriterHandle {
            tx,
            view: state.view(),
            relay_view: state.relay_view(),
            facts: state.shared_facts(),
            v1beta1_asked: Arc::new(AtomicBool::new(state.serves_v1beta1())),
        };
        (handle, Unstarted { state, rx })
    }

    /// The served view the writer publishes into.
    pub fn view(&self) -> View {
        self.view.clone()
    }

    /// The relay view the writer publishes into, when the state keeps one
    /// ([`State::keep_relay_view`]): what the relay port serves.
    pub fn relay_view(&self) -> Option<View> {
        self.relay_view.clone()
    }

    /// The figures the writer stores after each change.
    pub fn facts(&self) -> Arc<SharedFacts> {
        self.facts.clone()
    }

    /// Hands a prepared watch event to the writer. Changes are applied in the order they are
    /// sent (one channel), so a reflector's next change follows this one; the reflector does not
    /// wait for it to be applied, only for room in the queue.
    pub fn apply(&self, kind: Resource, change: Prepared) {
        self.send_change(kind, change, None, None);
    }

    /// Hands a prepared list to the writer and waits until it is applied: a reflector never
    /// holds a second prepared list of its kind (a relist storm would otherwise keep several
    /// alive at once, each the size of the kind's objects). `items` and `since`: for the log line.
    pub fn apply_list(&self, kind: Resource, change: Prepared, items: usize, since: Instant) {
        let (done, applied) = mpsc::channel();
        self.send_change(kind, change, Some((items, since)), Some(done));
        let _ = applied.recv();
    }

    fn send_change(
        &self,
        kind: Resource,
        change: Prepared,
        list: Option<(usize, Instant)>,
        done: Option<mpsc::Sender<()>>,
    ) {
        let msg = Message::Apply {
            kind,
            change,
            list,
            sent: Instant::now(),
            done,
        };
        if self.tx.send(msg).is_err() {
            warn!("{kind:?}: a change for the cache's writer, which is gone; dropped");
        }
    }

    /// Hands the edge-health poller's map to the writer.
    pub fn set_edge_health(&self, map: EdgeHealthMap) {
        if self.tx.send(Message::EdgeHealth(map)).is_err() {
            warn!("an edge-health map for the cache's writer, which is gone; dropped");
        }
    }

    /// Hands the runtime source's view of the local pods to the writer (§13).
    pub fn set_runtime_pods(&self, pods: RuntimePods) {
        if self.tx.send(Message::RuntimePods(pods)).is_err() {
            warn!("a runtime view for the cache's writer, which is gone; dropped");
        }
    }

    /// Pins the EndpointSlice version (see `State::expect_slices`).
    pub fn expect_slices(&self, kind: Resource) {
        let _ = self.tx.send(Message::ExpectSlices(kind));
    }

    /// Sets the ServiceCIDR version to mirror, or none (see `State::expect_cidrs`).
    pub fn expect_cidrs(&self, kind: Option<Resource>) {
        let _ = self.tx.send(Message::ExpectCidrs(kind));
    }

    /// Hands a follower's report, taken on the relay port, to the writer without waiting;
    /// `false` when the writer's queue is full (the follower reports again at its next poll).
    pub fn try_node_report(&self, report: NodeReport) -> bool {
        self.tx.try_send(Message::NodeReport(report)).is_ok()
    }

    /// Hands the relay's answer to this follower's report to the writer (§13.1).
    pub fn set_relayed_reports(&self, answer: Vec<NodeReport>) {
        if self.tx.send(Message::RelayedReports(answer)).is_err() {
            warn!("the relay's runtime views for the cache's writer, which is gone; dropped");
        }
    }

    /// Asks for v1beta1 EndpointSlices to be built and served from now on. Does not wait: the
    /// caller holds its request until the view serves them (the writer wakes the loop then).
    pub fn want_v1beta1(&self) {
        // The loop must not wait for room in the queue: when it is full, the next request asks
        // again.
        if !self.v1beta1_asked.swap(true, Ordering::Relaxed)
            && self.tx.try_send(Message::ServeV1beta1).is_err()
        {
            self.v1beta1_asked.store(false, Ordering::Relaxed);
        }
    }

    /// A taker for a list of `kind`, chosen by what the cache holds now (see
    /// `State::list_preparer`).
    pub fn list_preparer(&self, kind: Resource) -> ListPreparer {
        self.ask(move |s| s.list_preparer(kind))
            .unwrap_or_else(|_| ListPreparer::new(kind, crate::cache::store::Hold::Whole))
    }

    /// Runs `question` on the state between two changes and waits for its answer.
    pub fn ask<R: Send + 'static>(
        &self,
        question: impl FnOnce(&State) -> R + Send + 'static,
    ) -> Result<R, Busy> {
        let answer = self.send_question(question, true)?;
        answer.recv().map_err(|_| Busy)
    }

    /// [`WriterHandle::ask`], waiting at most `within` (the question is still answered later, and the
    /// answer dropped).
    pub fn ask_within<R: Send + 'static>(
        &self,
        within: Duration,
        question: impl FnOnce(&State) -> R + Send + 'static,
    ) -> Result<R, Busy> {
        // No waiting for room in the queue either: a full queue is a busy writer.
        let answer = self.send_question(question, false)?;
        answer.recv_timeout(within).map_err(|e| match e {
            RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected => Busy,
        })
    }

    /// Keeps the writer busy until the returned guard is dropped (a test stands in for a long
    /// change with it); returns once the writer is busy.
    #[cfg(test)]
    pub(crate) fn hold(&self) -> Held {
        let (release, wait) = mpsc::channel::<()>();
        let (busy_tx, busy) = mpsc::channel();
        let _ = self.send_question(
            move |_| {
                let _ = busy_tx.send(());
                let _ = wait.recv();
            },
            true,
        );
        let _ = busy.recv_timeout(Duration::from_secs(10));
        Held(release)
    }

    /// Parks the writer in the middle of its next change, after it recorded `after` objects
    /// into the view, until [`Park::release`].
    #[cfg(test)]
    pub(crate) fn park_mid_apply(&self, after: usize) -> Park {
        let (parked_tx, parked) = mpsc::channel();
        let (release, wait) = mpsc::channel::<()>();
        let mut seen = 0;
        let hook = crate::cache::store::RecordHook(Box::new(move || {
            seen += 1;
            if seen == after {
                let _ = parked_tx.send(());
                let _ = wait.recv();
            }
        }));
        let _ = self.tx.send(Message::Tweak(Box::new(move |s| {
            s.set_record_hook(Some(hook))
        })));
        Park { parked, release }
    }

    /// A running writer on `state` that tells nobody of its changes (tests).
    #[cfg(test)]
    pub(crate) fn started(state: State) -> WriterHandle {
        let (writer, unstarted) = WriterHandle::new(state);
        let _ = unstarted.start(Instant::now(), Callbacks::none());
        writer
    }

    fn send_question<R: Send + 'static>(
        &self,
        question: impl FnOnce(&State) -> R + Send + 'static,
        wait_for_room: bool,
    ) -> Result<Receiver<R>, Busy> {
        let (tx, rx) = mpsc::channel();
        let ask = Message::Ask(Box::new(move |s: &State| {
            let _ = tx.send(question(s));
        }));
        if wait_for_room {
            self.tx.send(ask).map_err(|_| Busy)?;
        } else {
            self.tx.try_send(ask).map_err(|_| Busy)?;
        }
        Ok(rx)
    }
}

/// Keeps the writer busy while it lives (see `WriterHandle::hold`).
#[cfg(test)]
pub(crate) struct Held(#[allow(dead_code)] mpsc::Sender<()>);

/// A writer parked mid-apply (see `WriterHandle::park_mid_apply`).
#[cfg(test)]
pub(crate) struct Park {
    parked: Receiver<()>,
    release: mpsc::Sender<()>,
}

#[cfg(test)]
impl Park {
    /// Waits until the writer is parked (at most 10 s).
    pub(crate) fn wait_parked(&self) {
        let _ = self.parked.recv_timeout(Duration::from_secs(10));
    }

    /// Lets the writer go on.
    pub(crate) fn release(self) {
        let _ = self.release.send(());
    }
}

/// The writer before its thread runs (see [`WriterHandle::new`]).
pub struct Unstarted {
    state: State,
    rx: Receiver<Message>,
}

impl Unstarted {
    /// Starts the writer thread. `started` is the time base of the event logs' window
    /// (monotonic seconds since it). The thread ends when every [`WriterHandle`] handle is dropped.
    pub fn start(self, started: Instant, callbacks: Callbacks) -> std::io::Result<JoinHandle<()>> {
        let Unstarted { state, rx } = self;
        std::thread::Builder::new()
            .name("cache-writer".into())
            .spawn(move || {
                let thread = Thread::new(state, started, callbacks);
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| thread.run(rx)));
                if run.is_err() {
                    // Nothing would apply changes any more while readiness still said yes: end
                    // the process, so that the kubelet restarts it (from the snapshot, if any),
                    // as the edge profile's `panic = "abort"` does by itself.
                    log::error!("the cache writer panicked (see above); exiting");
                    std::process::exit(70);
                }
            })
    }
}

/// The writer thread's own part: the state, and whom to tell.
struct Thread {
    state: State,
    started: Instant,
    callbacks: Callbacks,
    /// When the logs are next aged ([`Thread::age_if_due`]).
    age_due: Instant,
}

impl Thread {
    fn new(state: State, started: Instant, callbacks: Callbacks) -> Thread {
        Thread {
            state,
            started,
            callbacks,
            age_due: started + AGE_EVERY,
        }
    }

    /// Handles messages until every handle is dropped; packs between them and ages the logs
    /// every [`AGE_EVERY`].
    fn run(mut self, rx: Receiver<Message>) {
        loop {
            self.age_if_due(Instant::now());
            let msg = if self.state.pack_pending(0) > 0 {
                match rx.try_recv() {
                    Ok(msg) => msg,
                    Err(TryRecvError::Empty) => {
                        self.state.pack_pending(PACK_BATCH);
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => return,
                }
            } else {
                match rx.recv_timeout(self.age_due.saturating_duration_since(Instant::now())) {
                    Ok(msg) => msg,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            self.handle(msg);
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Ages the logs of every view at the writer's clock when `at` is past the due time, then
    /// schedules the next ageing [`AGE_EVERY`] later. A change trims the logs by itself; this
    /// empties the ones no change comes to trim.
    fn age_if_due(&mut self, at: Instant) {
        if at >= self.age_due {
            self.age_due = at + AGE_EVERY;
            let now = at.saturating_duration_since(self.started).as_secs();
            self.state.age(now);
            let applied = self.state.expire_node_reports(now);
            self.tell(&applied);
        }
    }

    fn handle(&mut self, msg: Message) {
        match msg {
            Message::Apply {
                kind,
                change,
                list,
                sent,
                done,
            } => {
                let t0 = Instant::now();
                let applied = self.state.apply_prepared(kind, change, self.now());
                if let Some((n, prepared_from)) = list {
                    // A list is the writer's longest job: its cost, as the reflector saw it.
                    info!(
                        "{kind:?}: list of {n} items applied, {:.1} ms in all: read and decoded in {:.1} ms, queued {:.1} ms for the writer, applied by the writer in {:.1} ms; {} changes published",
                        prepared_from.elapsed().as_secs_f64() * 1e3,
                        (sent - prepared_from).as_secs_f64() * 1e3,
                        (t0 - sent).as_secs_f64() * 1e3,
                        t0.elapsed().as_secs_f64() * 1e3,
                        applied.events,
                    );
                }
                self.log_milestones(&applied);
                self.tell(&applied);
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            Message::EdgeHealth(map) => {
                let applied = self.state.set_edge_health(map, self.now());
                self.tell(&applied);
            }
            Message::RuntimePods(pods) => {
                let applied = self.state.set_runtime_pods(pods, self.now());
                self.tell(&applied);
            }
            Message::NodeReport(report) => {
                let applied = self.state.take_node_report(report, self.now());
                self.tell(&applied);
            }
            Message::RelayedReports(answer) => {
                let applied = self.state.take_relayed_reports(answer, self.now());
                self.tell(&applied);
            }
            Message::ExpectSlices(kind) => self.state.expect_slices(kind),
            Message::ExpectCidrs(kind) => {
                let applied = self.state.expect_cidrs(kind, self.now());
                self.log_milestones(&applied);
                self.tell(&applied);
            }
            Message::ServeV1beta1 => {
                self.state.serve_v1beta1();
                (self.callbacks.wake)();
            }
            Message::Ask(question) => question(&self.state),
            #[cfg(test)]
            Message::Tweak(tweak) => tweak(&mut self.state),
        }
    }

    fn log_milestones(&self, applied: &Applied) {
        let state = &self.state;
        if applied.became_ready {
            let [nodes, services, endpoints, slices, cidrs] = state.served_counts();
            let cidr_kind = match state.cidr_kind() {
                Some(kind) => format!("{cidrs} servicecidrs ({kind:?} upstream)"),
                None => "no servicecidrs (none upstream: proxied)".into(),
            };
            info!(
                "cache ready at resourceVersion {}: {nodes} nodes, {services} services, {endpoints} endpoints, {slices} endpointslices ({:?} upstream), {cidr_kind}",
                state.current_rv(),
                state.slice_kind(),
            );
        }
        if applied.upstream_synced {
            info!(
                "upstream synced: the snapshot is no longer served as such; resourceVersion {}",
                state.current_rv()
            );
        }
    }

    /// Wakes the loop and tells the snapshot writer, when something changed.
    fn tell(&self, applied: &Applied) {
        if applied.events > 0 || applied.became_ready {
            (self.callbacks.changed)();
            (self.callbacks.wake)();
        } else if applied.facts_changed {
            // Another Node's facts: nothing served changed, the snapshot did.
            (self.callbacks.changed)();
        }
    }
}

/// A waker callback that logs (once per call) when the loop cannot be woken.
pub fn wake_with(waker: Arc<mio::Waker>) -> Box<dyn Fn() + Send> {
    Box::new(move || {
        if let Err(e) = waker.wake() {
            warn!("cannot wake the event loop: {e}");
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cache::collection::Retention;
    use crate::cache::store::{test_support, Settings};
    use crate::handoff::Change;

    #[test]
    fn the_writer_ages_the_logs_that_no_change_trims() {
        let retention = Retention {
            min_entries: 0,
            max_entries: 1024,
            window_secs: 75,
            max_bytes: 16 << 20,
        };
        let settings = Settings {
            hostname: "h".into(),
            wrapper_in_cluster: true,
            retention,
        };
        let mut st = State::new(settings, 1);
        st.keep_relay_view();
        test_support::list_all_empty(&mut st);
        // A burst of changes at the writer's second 0, then nothing.
        for name in ["a", "b", "c"] {
            let meta = json!({"name": name, "namespace": "default"});
            let svc = json!({"kind": "Service", "apiVersion": "v1", "metadata": meta});
            st.apply(Resource::Services, Change::upsert(&svc), 0);
        }
        let (view, relay) = (st.view(), st.relay_view().expect("a relay view is kept"));
        let facts = st.shared_facts();
        let logs = || [&view, &relay].map(|v| v.read().collection(Resource::Services).log_len());
        assert_eq!(logs(), [3, 3]);
        let t0 = Instant::now();
        let mut thread = Thread::new(st, t0, Callbacks::none());
        thread.age_if_due(t0 + Duration::from_secs(74));
        assert_eq!(logs(), [3, 3], "within the window");
        // Not due yet (the last ageing was less than AGE_EVERY ago), although past the window.
        thread.age_if_due(t0 + Duration::from_secs(78));
        assert_eq!(logs(), [3, 3], "aged before it was due");
        thread.age_if_due(t0 + Duration::from_secs(79));
        assert_eq!(logs(), [0, 0], "past the window: both views aged");
        assert_eq!(facts.load().log_entries(Resource::Services), 0);
        assert_eq!(facts.load().objects(Resource::Services), 3, "objects kept");
        let read = view.read();
        assert_eq!(
            read.collection(Resource::Services).horizon(),
            read.current_rv()
        );
    }
}
