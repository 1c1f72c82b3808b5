//! The order of the first lists: Nodes and Services before Endpoints and EndpointSlices.
//! ServiceCIDRs depend on nothing and go at once (and nothing waits for them: an upstream
//! without them has no ServiceCIDR reflector at all).
//!
//! An endpoint object is served according to its Service (topology keys or not) and to the labels
//! of the nodes its endpoints are on. Applied before them, every endpoint object is served once
//! unfiltered, then recomputed and served again when the Services list arrives: every endpoint
//! object decoded, filtered and serialized twice, all of it between the last upstream list and
//! readiness (BENCHMARKS.md has the cost). Nodes and Services are the small lists, so letting them
//! go first costs little.
//!
//! The wait is bounded: an endpoint reflector goes ahead once Nodes and Services have each
//! tried one list (whether it worked or not), or once neither has made progress (started or
//! ended a list) for `patience`, so a Services list that stalls or cannot be made never holds
//! the others back for long (they then list at once, and are recomputed when the Services
//! arrive). After that first round the order never waits again, and no list ever waits for
//! another's I/O.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::k8s::Resource;
use crate::sync;

/// How long an endpoint reflector waits for Nodes and Services to make progress.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// The first-list order of one process's reflectors (shared by its cache sink).
#[derive(Debug)]
pub struct ListOrder {
    progress: Mutex<Progress>,
    changed: Condvar,
    patience: Duration,
}

/// Bits per kind ([`bit`]).
#[derive(Debug)]
struct Progress {
    /// Has tried a list.
    tried: u8,
    /// Is listing now.
    listing: u8,
    /// When a list last started or ended (or the order was made).
    last: Instant,
}

fn bit(kind: Resource) -> u8 {
    1 << kind.sync_slot()
}

/// What endpoint objects wait for: a list tried by Nodes and by Services.
const FIRST: u8 = 1 << 0 | 1 << 1;

impl ListOrder {
    /// An order whose endpoint reflectors wait for at most `patience` without progress.
    pub fn new(patience: Duration) -> Self {
        ListOrder {
            progress: Mutex::new(Progress {
                tried: 0,
                listing: 0,
                last: Instant::now(),
            }),
            changed: Condvar::new(),
            patience,
        }
    }

    /// The longest an endpoint reflector waits without progress.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    fn lock(&self) -> MutexGuard<'_, Progress> {
        sync::lock(&self.progress)
    }

    /// Before `kind` lists: for Endpoints and EndpointSlices, waits until Nodes and Services
    /// have tried a list, or neither made progress for the patience. Returns whether the
    /// patience ran out.
    pub fn wait_turn(&self, kind: Resource) -> bool {
        if matches!(kind, Resource::Nodes | Resource::Services) || kind.is_cidr() {
            return false;
        }
        let mut p = self.lock();
        while p.tried & FIRST != FIRST {
            let left = if p.listing & FIRST != 0 {
                self.patience // one of them is listing: wait for it
            } else {
                let left = (p.last + self.patience).saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return true;
                }
                left
            };
            p = self
                .changed
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        false
    }

    /// `kind` starts a list (it has its turn).
    pub fn listing(&self, kind: Resource) {
        let mut p = self.lock();
        p.listing |= bit(kind);
        p.last = Instant::now();
        self.changed.notify_all();
    }

    /// After `kind` tried a list (applied or failed).
    pub fn tried(&self, kind: Resource) {
        let mut p = self.lock();
        p.listing &= !bit(kind);
        p.tried |= bit(kind);
        p.last = Instant::now();
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const PATIENT: Duration = Duration::from_secs(600);

    /// Runs `kind`'s turn on a thread: wait, then record the kind, then mark it tried.
    fn lister(
        order: &Arc<ListOrder>,
        log: &Arc<Mutex<Vec<Resource>>>,
        kind: Resource,
    ) -> std::thread::JoinHandle<bool> {
        let (order, log) = (order.clone(), log.clone());
        std::thread::spawn(move || {
            let impatient = order.wait_turn(kind);
            log.lock().unwrap().push(kind);
            order.tried(kind);
            impatient
        })
    }

    #[test]
    fn endpoint_objects_list_after_nodes_and_services_whoever_comes_first() {
        let order = Arc::new(ListOrder::new(PATIENT));
        let log = Arc::new(Mutex::new(Vec::new()));
        // The endpoint reflectors arrive first and must wait (the patience is long).
        let slices = lister(&order, &log, Resource::SlicesV1);
        let endpoints = lister(&order, &log, Resource::Endpoints);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            log.lock().unwrap().is_empty(),
            "nobody went before Services"
        );
        lister(&order, &log, Resource::Services).join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            *log.lock().unwrap(),
            [Resource::Services],
            "Nodes has not listed yet"
        );
        lister(&order, &log, Resource::Nodes).join().unwrap();
        assert!(!slices.join().unwrap() && !endpoints.join().unwrap());
        let log = log.lock().unwrap();
        assert_eq!(log[..2], [Resource::Services, Resource::Nodes]);
        assert_eq!(log.len(), 4);
        // From now on nobody waits, not even with no patience at all.
        drop(log);
        assert!(!order.wait_turn(Resource::Endpoints));
    }

    #[test]
    fn a_failed_list_counts_and_patience_bounds_the_wait() {
        let order = ListOrder::new(Duration::from_millis(30));
        // Nobody lists Nodes or Services: the endpoint reflector goes ahead once its patience
        // ran out (and says so).
        assert!(order.wait_turn(Resource::SlicesV1beta1));
        // A tried list counts whether it worked or not (the caller marks it either way).
        order.tried(Resource::Nodes);
        order.tried(Resource::Services);
        assert!(!order.wait_turn(Resource::SlicesV1beta1));
    }

    #[test]
    fn a_list_in_progress_is_waited_for_beyond_the_patience() {
        let order = Arc::new(ListOrder::new(Duration::from_millis(20)));
        let log = Arc::new(Mutex::new(Vec::new()));
        // Services is listing (a big cluster's list takes long) when the slices come.
        order.listing(Resource::Services);
        let slices = lister(&order, &log, Resource::SlicesV1);
        std::thread::sleep(Duration::from_millis(200)); // ten patiences
        assert!(
            log.lock().unwrap().is_empty(),
            "the slices waited for Services"
        );
        order.tried(Resource::Services);
        // Nodes has not started: after a patience without progress the slices go ahead.
        assert!(slices.join().unwrap(), "impatient: Nodes never listed");
        assert_eq!(*log.lock().unwrap(), [Resource::SlicesV1]);
    }

    #[test]
    fn nodes_and_services_never_wait() {
        // Nodes and Services never wait.
        let fresh = ListOrder::new(PATIENT);
        assert!(!fresh.wait_turn(Resource::Nodes));
        assert!(!fresh.wait_turn(Resource::Services));
    }

    #[test]
    fn servicecidrs_never_wait() {
        // They depend on no Node or Service: a fresh order lets them list at once (a wait
        // would run out of this short patience, and say so).
        let fresh = ListOrder::new(Duration::from_millis(50));
        assert!(!fresh.wait_turn(Resource::CidrsV1));
        assert!(!fresh.wait_turn(Resource::CidrsV1beta1));
    }
}
