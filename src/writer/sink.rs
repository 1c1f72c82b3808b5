//! The reflectors' side of the writer: [`CacheSink`] takes each upstream change on its
//! reflector's thread, prepares a list there (item by item as it is read: the one way a list
//! reaches the cache) and hands it to the one writer ([`WriterHandle`]), which applies it in the order
//! it comes. A watch event's object is prepared there too, as a list's item is
//! ([`WatchPreparer`]: canonical bytes, no `serde_json::Value`), so that the writer only compares,
//! keeps and publishes it. The reflectors are given this sink in `src/app.rs`.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::Instant;

use crate::cache::store::{ListPreparer, WatchPreparer};
use crate::handoff::list_order::{self, ListOrder};
use crate::handoff::{Change, ListApply, ListItems, Oversized, Sink};
use crate::k8s::Resource;
use crate::writer::WriterHandle;

/// Hands reflector changes to the one writer (`crate::writer`), which applies them in the order
/// they come, wakes the loop and tells the snapshot writer.
pub struct CacheSink {
    writer: WriterHandle,
    /// Nodes and Services list first.
    order: ListOrder,
    /// Whose Node a watch event keeps whole (the local one; `None`: every one, a relay), asked
    /// of the writer once, at the first watch event.
    facts_except: OnceLock<Option<String>>,
}

thread_local! {
    /// Each reflector thread's watch preparer (its decoder's buffers kept from event to event).
    static PREPARER: RefCell<Option<WatchPreparer>> = const { RefCell::new(None) };
}

impl CacheSink {
    /// The sink of `writer`'s reflectors (one per process: the list order is shared by them).
    pub fn new(writer: WriterHandle) -> CacheSink {
        CacheSink {
            writer,
            order: ListOrder::new(list_order::PATIENCE),
            facts_except: OnceLock::new(),
        }
    }
}

impl Sink for CacheSink {
    fn list_order(&self) -> Option<&ListOrder> {
        Some(&self.order)
    }

    fn apply(&self, kind: Resource, change: Change) {
        // On the reflector's thread: the object made canonical here, not on the writer.
        let local = self.facts_except.get_or_init(|| {
            // Ask once: whether the state keeps a relay view is set before the first change.
            // A writer gone keeps every Node whole here (the writer reduces them itself).
            self.writer
                .ask(|s| s.watch_preparer_except())
                .unwrap_or(None)
        });
        let prepared = PREPARER.with(|cell| {
            let mut cell = cell.borrow_mut();
            match &mut *cell {
                Some(p) if p.facts_except() == local.as_deref() => p.prepare(kind, change),
                other => {
                    let mut p = WatchPreparer::new(local.as_deref());
                    let prepared = p.prepare(kind, change);
                    *other = Some(p);
                    prepared
                }
            }
        });
        if let Some(prepared) = prepared {
            self.writer.apply(kind, prepared);
        }
    }

    fn list_items(&self, kind: Resource) -> Box<dyn ListApply + '_> {
        // Chosen before the read (how it is held, what is packed): only this reflector
        // changes this kind's objects, and the Services list first.
        let list = self.writer.list_preparer(kind);
        Box::new(Listing {
            sink: self,
            list,
            started: Instant::now(),
        })
    }
}

/// A list the cache takes item by item while the reflector reads it: each item is prepared on
/// the reflector's thread as soon as it is split from the body, and its text let go of.
struct Listing<'a> {
    sink: &'a CacheSink,
    list: ListPreparer,
    started: Instant,
}

impl ListItems for Listing<'_> {
    fn push(&mut self, text: Box<str>) {
        self.list.push(&text);
    }
    fn clear(&mut self) {
        self.list.clear();
    }
    fn len(&self) -> usize {
        self.list.pushed()
    }
    fn skipped(&mut self, item: Oversized) {
        self.list.skipped(&item);
    }
    fn facts_only_except(&self) -> Option<&str> {
        self.list.facts_except()
    }
}

impl ListApply for Listing<'_> {
    fn apply(self: Box<Self>) {
        let n = self.list.pushed();
        let kind = self.list.kind();
        self.sink
            .writer
            .apply_list(kind, self.list.finish(), n, self.started);
    }
}
