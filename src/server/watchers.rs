//! The open watch streams, visible outside the event loop (for `/debug/state`).
//!
//! A stream registers once when it starts (one short lock) and unregisters when its
//! [`WatchHandle`] drops (one short lock). In between, the loop only stores relaxed atomics
//! (cursor, unsent bytes, events) in the stream's shared [`WatcherStatus`]; the health thread
//! takes the registry lock just long enough to clone at most a bounded number of `Arc`s.
//!
//! Lock order: the loop may take the registry lock while it holds the view's lock (a stream
//! starts under it); the health thread never holds the registry lock while the view's lock is
//! taken for it, so the two cannot deadlock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::k8s::Resource;
use crate::server::counters::{Counters, EndReason};
use crate::sync;

/// Longest selector text kept per watcher (bytes; cut at a char boundary).
pub const MAX_SELECTOR_TEXT: usize = 256;

/// What is known of a watch stream when it starts.
#[derive(Clone, Debug)]
pub struct WatchInfo {
    /// The client's address.
    pub peer: String,
    /// The watched resource.
    pub resource: Resource,
    /// The namespace of a namespaced path.
    pub namespace: Option<String>,
    /// `labelSelector` as given (decoded, capped at [`MAX_SELECTOR_TEXT`]).
    pub label_selector: String,
    /// `fieldSelector` as given (decoded, capped at [`MAX_SELECTOR_TEXT`]).
    pub field_selector: String,
    /// Unix seconds of the start.
    pub started_unix: u64,
    /// The resourceVersion the stream starts at (its initial events, if any, are produced as
    /// its client reads, from this resourceVersion on).
    pub cursor: u64,
    /// Whether the stream is on the relay port (a follower's), not the kube-proxy port.
    pub relay: bool,
}

/// One open watch stream, shared by the event loop (writer) and the health thread (reader).
#[derive(Debug)]
pub struct WatcherStatus {
    /// A number unique in this process, in start order.
    pub id: u64,
    /// What was known at the start.
    pub info: WatchInfo,
    cursor: AtomicU64,
    unsent: AtomicU64,
    events: AtomicU64,
    initial: AtomicBool,
}

impl WatcherStatus {
    /// The last log entry (resourceVersion) the stream has queued.
    pub fn cursor(&self) -> u64 {
        self.cursor.load(Relaxed)
    }

    /// Bytes queued for the client, not yet written to its socket.
    pub fn unsent_bytes(&self) -> u64 {
        self.unsent.load(Relaxed)
    }

    /// Events queued to the stream so far (initial ones included).
    pub fn events(&self) -> u64 {
        self.events.load(Relaxed)
    }

    /// Whether the stream is still sending its initial events (its cursor is then the
    /// resourceVersion what it sent is consistent with).
    pub fn sending_initial(&self) -> bool {
        self.initial.load(Relaxed)
    }
}

/// Every open watch stream.
#[derive(Debug)]
pub struct Registry {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<WatcherStatus>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// Empty.
    pub const fn new() -> Registry {
        Registry {
            next_id: AtomicU64::new(1),
            open: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers a started stream (and counts it open in `counters`); it stays listed until the
    /// returned handle drops.
    pub fn register(&'static self, info: WatchInfo, counters: &'static Counters) -> WatchHandle {
        let id = self.next_id.fetch_add(1, Relaxed);
        counters.watch_opened(info.resource);
        if info.relay {
            counters.relay_watch(info.resource, true);
        }
        let status = Arc::new(WatcherStatus {
            id,
            cursor: AtomicU64::new(info.cursor),
            unsent: AtomicU64::new(0),
            events: AtomicU64::new(0),
            initial: AtomicBool::new(false),
            info,
        });
        self.lock().insert(id, status.clone());
        WatchHandle {
            status,
            registry: self,
            counters,
            ended: AtomicBool::new(false),
        }
    }

    /// (number of open streams, the first `max` of them in start order).
    pub fn snapshot(&self, max: usize) -> (usize, Vec<Arc<WatcherStatus>>) {
        let open = self.lock();
        (open.len(), open.values().take(max).cloned().collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<WatcherStatus>>> {
        sync::lock(&self.open)
    }
}

/// The event loop's side of one registered stream. Dropping it unregisters the stream, counts
/// it closed, and counts it ended as `client_gone` unless [`WatchHandle::end`] said why first.
#[derive(Debug)]
pub struct WatchHandle {
    status: Arc<WatcherStatus>,
    registry: &'static Registry,
    counters: &'static Counters,
    ended: AtomicBool,
}

impl WatchHandle {
    /// Records whether the stream is still sending its initial events.
    pub fn set_initial(&self, sending: bool) {
        self.status.initial.store(sending, Relaxed);
    }

    /// Records the stream's cursor.
    pub fn set_cursor(&self, rv: u64) {
        self.status.cursor.store(rv, Relaxed);
    }

    /// Records the bytes waiting for the client.
    pub fn set_unsent(&self, bytes: usize) {
        self.status.unsent.store(bytes as u64, Relaxed);
    }

    /// Counts `n` events queued to the stream.
    pub fn add_events(&self, n: usize) {
        if n > 0 {
            self.status.events.fetch_add(n as u64, Relaxed);
        }
    }

    /// Counts the stream ended for `reason` (once; later calls are ignored).
    pub fn end(&self, reason: EndReason) {
        if !self.ended.swap(true, Relaxed) {
            self.counters.watch_ended(reason);
        }
    }

    /// The shared status.
    pub fn status(&self) -> &Arc<WatcherStatus> {
        &self.status
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.end(EndReason::ClientGone);
        self.counters.watch_closed(self.status.info.resource);
        if self.status.info.relay {
            self.counters.relay_watch(self.status.info.resource, false);
        }
        self.registry.lock().remove(&self.status.id);
    }
}

/// The process-wide registry of the event loop's streams.
pub fn global() -> &'static Registry {
    static GLOBAL: Registry = Registry::new();
    &GLOBAL
}

/// The decoded value of `key` in a raw query string (`+` is a space, bad escapes are kept as
/// they are), capped at [`MAX_SELECTOR_TEXT`] bytes; empty when absent. For display only.
pub fn query_value(query: &str, key: &str) -> String {
    let Some(raw) = query
        .split('&')
        .find_map(|p| p.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
    else {
        return String::new();
    };
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len().min(MAX_SELECTOR_TEXT));
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_SELECTOR_TEXT {
        let hex = raw
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(res: Resource) -> WatchInfo {
        WatchInfo {
            peer: "127.0.0.1:1".into(),
            resource: res,
            namespace: None,
            label_selector: String::new(),
            field_selector: String::new(),
            started_unix: 1,
            cursor: 10,
            relay: false,
        }
    }

    #[test]
    fn handles_register_update_and_unregister() {
        static REG: Registry = Registry::new();
        static C: Counters = Counters::new();
        let a = REG.register(info(Resource::Nodes), &C);
        let b = REG.register(info(Resource::Services), &C);
        let c = REG.register(info(Resource::Services), &C);
        assert_eq!(C.open_watches(Resource::Services), 2);
        let relayed = REG.register(
            WatchInfo {
                relay: true,
                ..info(Resource::Services)
            },
            &C,
        );
        assert_eq!(C.relay_watches(Resource::Services), 1);
        assert_eq!(C.open_watches(Resource::Services), 3);
        relayed.end(EndReason::Shutdown);
        drop(relayed);
        assert_eq!(C.relay_watches(Resource::Services), 0);
        b.set_cursor(42);
        b.set_unsent(7);
        b.add_events(3);
        let (open, listed) = REG.snapshot(2);
        assert_eq!((open, listed.len()), (3, 2));
        assert_eq!(listed[0].id, a.status().id);
        assert_eq!(
            (
                listed[1].cursor(),
                listed[1].unsent_bytes(),
                listed[1].events()
            ),
            (42, 7, 3)
        );
        b.end(EndReason::TooSlow);
        b.end(EndReason::Deadline);
        drop(b);
        drop(a);
        assert_eq!(C.watches_ended(EndReason::TooSlow), 1);
        assert_eq!(C.watches_ended(EndReason::Deadline), 0);
        assert_eq!(C.watches_ended(EndReason::ClientGone), 1);
        assert_eq!(C.open_watches(Resource::Services), 1);
        assert_eq!(C.open_watches(Resource::Nodes), 0);
        let (open, listed) = REG.snapshot(10);
        assert_eq!((open, listed[0].id), (1, c.status().id));
    }

    #[test]
    fn selectors_are_decoded_for_display_and_capped() {
        let q = "watch=1&labelSelector=%21service.kubernetes.io%2Fheadless%2Ca+in+(b)&x=%zz";
        assert_eq!(
            query_value(q, "labelSelector"),
            "!service.kubernetes.io/headless,a in (b)"
        );
        assert_eq!(query_value(q, "x"), "%zz");
        assert_eq!(query_value(q, "fieldSelector"), "");
        let long = format!("labelSelector={}", "a".repeat(1000));
        assert_eq!(query_value(&long, "labelSelector").len(), MAX_SELECTOR_TEXT);
        assert_eq!(
            query_value("labelSelector=%e2%9c", "labelSelector"),
            "\u{fffd}"
        );
    }
}
