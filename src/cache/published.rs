//! What readers see: the served collections, the current resourceVersion and readiness, behind
//! their own lock ([`View`]). The single writer ([`crate::cache::store::State`], under its own
//! lock) computes a change — decoding, topology, serialization — without holding this one, and
//! takes it only to read an object's previous served version and to record the new one. So a
//! LIST or a watch pump waits at most for one object's record, never for a relist or a relabel.
//!
//! Lock order: the writer's `State` lock, then this one; never the reverse.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cache::view::Collection;
use crate::k8s::Resource;

/// The served view of every resource.
#[derive(Debug)]
pub struct Published {
    served: [Collection; 5],
    rv: u64,
    ready: bool,
    v1beta1: bool,
}

/// The readers' handle on the [`Published`] view (shared with the writer).
pub type View = Arc<Mutex<Published>>;

/// Locks the view (a poisoned lock is taken over: the view is updated one object at a time, so
/// a panic between two records leaves a consistent state).
pub fn lock(view: &Mutex<Published>) -> MutexGuard<'_, Published> {
    view.lock().unwrap_or_else(|p| p.into_inner())
}

impl Published {
    /// An empty, not yet ready view whose history starts at `rv`.
    pub fn new(rv: u64) -> Published {
        Published {
            served: std::array::from_fn(|_| Collection::new(rv)),
            rv,
            ready: false,
            v1beta1: false,
        }
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

    pub(crate) fn set_rv(&mut self, rv: u64) {
        self.rv = rv;
    }

    pub(crate) fn set_ready(&mut self) {
        self.ready = true;
    }

    pub(crate) fn set_v1beta1(&mut self) {
        self.v1beta1 = true;
    }
}

/// A locked view of one collection (what `State::collection` returns).
pub struct CollectionRef<'a> {
    guard: MutexGuard<'a, Published>,
    res: Resource,
}

impl<'a> CollectionRef<'a> {
    pub(crate) fn new(guard: MutexGuard<'a, Published>, res: Resource) -> CollectionRef<'a> {
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
    use crate::cache::store::test_support;
    use crate::upstream::kind::{Change, UpstreamKind};

    #[test]
    fn readers_do_not_need_the_writer_lock() {
        let mut st = test_support::state("h", 1);
        for kind in [
            UpstreamKind::Nodes,
            UpstreamKind::Services,
            UpstreamKind::Endpoints,
            UpstreamKind::SlicesV1,
        ] {
            st.apply(kind, Change::Replace(vec![]), 0);
        }
        let node = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "h"}});
        st.apply(UpstreamKind::Nodes, Change::Upsert(node), 0);
        let rv = st.current_rv();
        let view = st.view();
        let writer = Mutex::new(st);
        // The writer is busy (as during a relist or a relabel): a reader still reads the view.
        let busy = writer.lock().unwrap_or_else(|p| p.into_inner());
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let v = lock(&view);
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
}
