//! The order of the first lists: Nodes and Services before Endpoints and EndpointSlices.
//!
//! An endpoint object is served according to its Service (topology keys or not) and to the
//! labels of the nodes its endpoints are on. Applied before them, every endpoint object is
//! served once unfiltered, then recomputed and served again when the Services list arrives:
//! at scale S, 2,000 objects decoded, filtered and serialized twice, all of it between the last
//! upstream list and readiness. Reflectors list one at a time anyway (one full list in memory,
//! process-wide), so letting Nodes and Services go first costs no parallelism.
//!
//! The wait is bounded: an endpoint reflector goes ahead once Nodes and Services have each
//! tried one list (whether it worked or not), or after `patience`, whichever comes first, so a
//! Services reflector that cannot list never holds the others back for long. After that first
//! round the order never waits again.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::kind::UpstreamKind;

/// How long an endpoint reflector waits for the first Nodes and Services lists at most.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// The first-list order of one process's reflectors (shared by its cache sink).
#[derive(Debug)]
pub struct ListOrder {
    /// Bit per kind ([`bit`]): has tried a list.
    tried: Mutex<u8>,
    changed: Condvar,
    patience: Duration,
}

fn bit(kind: UpstreamKind) -> u8 {
    1 << kind.slot()
}

/// What endpoint objects wait for: a list tried by Nodes and by Services.
const FIRST: u8 = 1 << 0 | 1 << 1;

impl ListOrder {
    /// An order whose endpoint reflectors wait at most `patience`.
    pub fn new(patience: Duration) -> Self {
        ListOrder {
            tried: Mutex::new(0),
            changed: Condvar::new(),
            patience,
        }
    }

    /// The longest an endpoint reflector waits.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    fn lock(&self) -> MutexGuard<'_, u8> {
        self.tried.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before `kind` lists: for Endpoints and EndpointSlices, waits until Nodes and Services
    /// have tried a list, at most the patience. Returns whether the patience ran out.
    pub fn wait_turn(&self, kind: UpstreamKind) -> bool {
        if matches!(kind, UpstreamKind::Nodes | UpstreamKind::Services) {
            return false;
        }
        let deadline = Instant::now() + self.patience;
        let mut tried = self.lock();
        while *tried & FIRST != FIRST {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            tried = self
                .changed
                .wait_timeout(tried, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        false
    }

    /// After `kind` tried a list (applied or failed).
    pub fn tried(&self, kind: UpstreamKind) {
        let mut tried = self.lock();
        if *tried & bit(kind) == 0 {
            *tried |= bit(kind);
            self.changed.notify_all();
        }
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
        log: &Arc<Mutex<Vec<UpstreamKind>>>,
        kind: UpstreamKind,
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
        let slices = lister(&order, &log, UpstreamKind::SlicesV1);
        let endpoints = lister(&order, &log, UpstreamKind::Endpoints);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            log.lock().unwrap().is_empty(),
            "nobody went before Services"
        );
        lister(&order, &log, UpstreamKind::Services).join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            *log.lock().unwrap(),
            [UpstreamKind::Services],
            "Nodes has not listed yet"
        );
        lister(&order, &log, UpstreamKind::Nodes).join().unwrap();
        assert!(!slices.join().unwrap() && !endpoints.join().unwrap());
        let log = log.lock().unwrap();
        assert_eq!(log[..2], [UpstreamKind::Services, UpstreamKind::Nodes]);
        assert_eq!(log.len(), 4);
        // From now on nobody waits, not even with no patience at all.
        drop(log);
        assert!(!order.wait_turn(UpstreamKind::Endpoints));
    }

    #[test]
    fn a_failed_list_counts_and_patience_bounds_the_wait() {
        let order = ListOrder::new(Duration::from_millis(30));
        // Nobody lists Nodes or Services: the endpoint reflector goes ahead once its patience
        // ran out (and says so).
        assert!(order.wait_turn(UpstreamKind::SlicesV1beta1));
        // A tried list counts whether it worked or not (the caller marks it either way).
        order.tried(UpstreamKind::Nodes);
        order.tried(UpstreamKind::Services);
        assert!(!order.wait_turn(UpstreamKind::SlicesV1beta1));
        // Nodes and Services never wait.
        let fresh = ListOrder::new(PATIENT);
        assert!(!fresh.wait_turn(UpstreamKind::Nodes));
        assert!(!fresh.wait_turn(UpstreamKind::Services));
    }
}
