//! The simulated apiserver's state: objects by kind and key, the resourceVersion counter, the
//! bounded event history used for watch resumption, and the rules that decide how a watch with a
//! given `resourceVersion` starts (as grid-wrapper's: docs/SEMANTICS.md §6), plus the
//! `/sim/reset-rv` fault: the RV counter restarts lower, every object is re-stamped, the open
//! watches end, are cut or stay, and from then on a `resourceVersion` above the current one is
//! "too large" (504) or, like a real apiserver, silently accepted, instead of 410. Pure: no
//! sockets, threads or clocks; the server wraps it in a `Mutex` + `Condvar`.

use crate::fault::{too_large_status, OpenWatches, TooLarge};
use grid_wrapper::k8s::status::ApiError;
use grid_wrapper::k8s::{ObjectKey, Resource};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The first resourceVersion; the first change gets `START_RV + 1`.
pub const START_RV: u64 = 100;
/// Default number of events kept for watch resumption (`--history`).
pub const DEFAULT_HISTORY: usize = 1000;

/// A stored kind. Both EndpointSlice versions share [`Kind::Slice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// core/v1 Node (cluster-scoped).
    Node,
    /// core/v1 Service.
    Service,
    /// core/v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io EndpointSlice, stored in the version it was applied in.
    Slice,
    /// networking.k8s.io/v1 ServiceCIDR (cluster-scoped).
    Cidr,
}

impl Kind {
    /// Every stored kind.
    pub const ALL: [Kind; 5] = [
        Kind::Node,
        Kind::Service,
        Kind::Endpoints,
        Kind::Slice,
        Kind::Cidr,
    ];

    /// Parses a `kind` field value.
    pub fn from_kind(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == kind)
    }

    /// The stored kind a served resource reads.
    pub fn of(res: Resource) -> Kind {
        match res {
            Resource::Nodes => Kind::Node,
            Resource::Services => Kind::Service,
            Resource::Endpoints => Kind::Endpoints,
            Resource::SlicesV1 | Resource::SlicesV1beta1 => Kind::Slice,
            Resource::CidrsV1 | Resource::CidrsV1beta1 => Kind::Cidr,
        }
    }

    /// A served resource of this kind (v1 for slices): names come from it.
    fn resource(self) -> Resource {
        match self {
            Kind::Node => Resource::Nodes,
            Kind::Service => Resource::Services,
            Kind::Endpoints => Resource::Endpoints,
            Kind::Slice => Resource::SlicesV1,
            Kind::Cidr => Resource::CidrsV1,
        }
    }

    /// The `kind` string.
    pub fn name(self) -> &'static str {
        self.resource().kind()
    }

    /// Plural resource name (for Status details and `/sim/state`).
    pub fn plural(self) -> &'static str {
        self.resource().plural()
    }
}

/// Watch event type of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object updated.
    Modified,
    /// Object deleted.
    Deleted,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One logged change. `old`/`new` are the stored objects before/after (stamped); for a deletion
/// `new` is `None` and the DELETED object is `old` re-stamped with `rv`.
#[derive(Debug)]
pub struct Event {
    /// RV assigned to the change.
    pub rv: u64,
    /// Kind of the changed object.
    pub kind: Kind,
    /// Its key.
    pub key: ObjectKey,
    /// ADDED / MODIFIED / DELETED.
    pub etype: EventType,
    /// Object before the change.
    pub old: Option<Arc<Value>>,
    /// Object after the change.
    pub new: Option<Arc<Value>>,
}

/// How a watch starts, decided atomically with registration (the caller holds the lock).
#[derive(Debug)]
pub enum WatchStart {
    /// RV absent/`""`/`"0"`: ADDED for these objects (sorted by key), then events after `cursor`.
    Snapshot {
        /// Current objects of the kind.
        objects: Vec<Arc<Value>>,
        /// The snapshot RV.
        cursor: u64,
    },
    /// Resume: replay events after `cursor`.
    Resume {
        /// The requested RV.
        cursor: u64,
    },
    /// Too old, in the future (while "too large" answers are off), or not a number: ERROR 410
    /// then close.
    Expired(ApiError),
    /// Above the current RV while "too large" answers are on: answer `status` in form `mode`.
    TooLarge {
        /// HTTP 504 or an ERROR event.
        mode: TooLarge,
        /// The Status ([`too_large_status`]).
        status: Value,
    },
}

/// What `/sim/reset-rv` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reset {
    /// The RV before.
    pub previous: u64,
    /// The new current RV (`rv` + number of objects).
    pub current: u64,
    /// Objects re-stamped.
    pub restamped: usize,
    /// The watch epoch (a new one when the open watches end).
    pub epoch: u64,
    /// What became of the open watches.
    pub watches: OpenWatches,
    /// The form too-large answers now take.
    pub mode: TooLarge,
}

/// Errors of control operations.
pub type OpResult<T> = Result<T, ApiError>;

/// The object store and its history.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<(Kind, ObjectKey), Arc<Value>>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    capacity: usize,
    /// Highest RV evicted from `history` by capacity: a live watcher behind it lost events.
    evicted: u64,
    /// Lowest RV a new watch may resume from (raised by eviction and `/sim/compact`).
    horizon: u64,
    /// Bumped by `/sim/close-watches`; watchers that started under an older epoch end.
    epoch: u64,
    /// Bumped by a reset that cuts the open watches; watchers that started before are cut.
    cuts: u64,
    uid_counter: u64,
    /// How an RV above the current one is answered (`None`: 410 as for any unusable RV).
    too_large: Option<TooLarge>,
    /// The form `/sim/reset-rv` turns on when its body names none (`--too-large`).
    too_large_default: TooLarge,
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// An empty store keeping `history` events (at least 1).
    pub fn new(history: usize) -> Self {
        Store {
            objects: BTreeMap::new(),
            rv: START_RV,
            history: VecDeque::new(),
            capacity: history.max(1),
            evicted: START_RV,
            horizon: START_RV,
            epoch: 0,
            cuts: 0,
            uid_counter: 0,
            too_large: None,
            too_large_default: TooLarge::default(),
        }
    }

    /// `--too-large MODE`: too-large answers on from the start, in `mode`, which is also the
    /// default form of later resets.
    pub fn enable_too_large(&mut self, mode: TooLarge) {
        self.too_large = Some(mode);
        self.too_large_default = mode;
    }

    /// How an RV above the current one is answered now (`None`: 410).
    pub fn too_large(&self) -> Option<TooLarge> {
        self.too_large
    }

    /// Current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Lowest RV a new watch can resume from.
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// Current watch epoch (see [`Store::close_watches`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Resets that cut the open watches so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Number of events held.
    pub fn history_len(&self) -> usize {
        self.history.len()
    }

    /// Object count of one kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.objects.keys().filter(|(k, _)| *k == kind).count()
    }

    /// One object.
    pub fn get(&self, kind: Kind, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects.get(&(kind, key.clone())).cloned()
    }

    /// All objects of a kind, sorted by namespace/name.
    pub fn list(&self, kind: Kind) -> Vec<Arc<Value>> {
        self.objects
            .range((kind, ObjectKey::default())..)
            .take_while(|((k, _), _)| *k == kind)
            .map(|(_, v)| Arc::clone(v))
            .collect()
    }

    fn push(&mut self, ev: Event) -> Arc<Event> {
        let ev = Arc::new(ev);
        self.history.push_back(Arc::clone(&ev));
        while self.history.len() > self.capacity {
            if let Some(old) = self.history.pop_front() {
                self.evicted = self.evicted.max(old.rv);
                self.horizon = self.horizon.max(old.rv);
            }
        }
        ev
    }

    /// Creates or replaces an object (`kind` field required; slices in either apiVersion).
    /// Always assigns a new RV and logs ADDED or MODIFIED.
    pub fn apply(&mut self, mut obj: Value) -> OpResult<Arc<Event>> {
        let kind_str = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let kind = Kind::from_kind(kind_str).ok_or_else(|| {
            ApiError::bad_request(format!(
                "kind must be Node, Service, Endpoints, EndpointSlice or ServiceCIDR, got {kind_str:?}"
            ))
        })?;
        let api_version = match kind {
            Kind::Slice => match obj.get("apiVersion").and_then(Value::as_str) {
                None | Some("discovery.k8s.io/v1") => "discovery.k8s.io/v1",
                Some("discovery.k8s.io/v1beta1") => "discovery.k8s.io/v1beta1",
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "unsupported EndpointSlice apiVersion {other:?}"
                    )))
                }
            },
            Kind::Cidr => Resource::CidrsV1.api_version(),
            _ => "v1",
        };
        let o = obj
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("object expected"))?;
        o.insert("apiVersion".into(), json!(api_version));
        let meta = o
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        if matches!(kind, Kind::Node | Kind::Cidr) {
            meta.remove("namespace");
        } else if meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            meta.insert("namespace".into(), json!("default"));
        }
        let key = ObjectKey::of(&obj)
            .ok_or_else(|| ApiError::bad_request("metadata.name is required"))?;
        let old = self.objects.get(&(kind, key.clone())).cloned();
        self.rv += 1;
        let rv = self.rv;
        let uid = match old
            .as_ref()
            .and_then(|o| o.pointer("/metadata/uid"))
            .and_then(Value::as_str)
        {
            Some(u) => u.to_string(),
            None => {
                self.uid_counter += 1;
                format!("00000000-0000-4000-8000-{:012x}", self.uid_counter)
            }
        };
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.entry("uid").or_insert_with(|| json!(uid));
            meta.entry("creationTimestamp")
                .or_insert_with(|| json!("2024-01-01T00:00:00Z"));
        }
        set_rv(&mut obj, rv);
        let new = Arc::new(obj);
        self.objects.insert((kind, key.clone()), Arc::clone(&new));
        let etype = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        Ok(self.push(Event {
            rv,
            kind,
            key,
            etype,
            old,
            new: Some(new),
        }))
    }

    /// Deletes an object; the DELETED event carries its last content stamped with the new RV.
    pub fn delete(&mut self, kind: Kind, key: &ObjectKey) -> OpResult<Arc<Event>> {
        let old = self
            .objects
            .remove(&(kind, key.clone()))
            .ok_or_else(|| ApiError::not_found(kind.plural(), &key.name))?;
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*old).clone();
        set_rv(&mut last, rv);
        Ok(self.push(Event {
            rv,
            kind,
            key: key.clone(),
            etype: EventType::Deleted,
            old: Some(Arc::new(last)),
            new: None,
        }))
    }

    /// Grows a Node by `bytes`: its `status.images` becomes one image whose name is that many
    /// bytes (after `metadata`, as an oversized Node's image list is in a real apiserver's
    /// JSON); 0 removes the padding. MODIFIED with a new RV.
    pub fn pad_node(&mut self, name: &str, bytes: usize) -> OpResult<Arc<Event>> {
        let key = ObjectKey::new("", name);
        let cur = self
            .get(Kind::Node, &key)
            .ok_or_else(|| ApiError::not_found("nodes", name))?;
        let mut node = (*cur).clone();
        let status = node
            .as_object_mut()
            .ok_or_else(|| ApiError::internal("stored node not an object"))?
            .entry("status")
            .or_insert_with(|| json!({}));
        let Some(status) = status.as_object_mut() else {
            return Err(ApiError::internal("stored node status not an object"));
        };
        if bytes == 0 {
            status.remove("images");
        } else {
            let image = json!({"names": ["x".repeat(bytes)], "sizeBytes": bytes});
            status.insert("images".into(), json!([image]));
        }
        self.apply(node)
    }

    /// Merges labels into a Node (`null` removes a label); MODIFIED with a new RV.
    pub fn label_node(
        &mut self,
        name: &str,
        labels: &serde_json::Map<String, Value>,
    ) -> OpResult<Arc<Event>> {
        let key = ObjectKey::new("", name);
        let cur = self
            .get(Kind::Node, &key)
            .ok_or_else(|| ApiError::not_found("nodes", name))?;
        let mut node = (*cur).clone();
        let meta = node
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| ApiError::internal("stored node without metadata"))?;
        let lbls = meta
            .entry("labels")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| ApiError::internal("stored node labels not an object"))?;
        for (k, v) in labels {
            match v {
                Value::Null => {
                    lbls.remove(k);
                }
                Value::String(s) => {
                    lbls.insert(k.clone(), json!(s));
                }
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "label {k:?}: value must be a string or null"
                    )))
                }
            }
        }
        self.apply(node)
    }

    /// Forgets all history: every watch resuming from an RV below the current one gets 410.
    /// Events stay readable for already-running watchers (they are not the resumption path).
    pub fn compact(&mut self) -> u64 {
        self.horizon = self.rv;
        self.horizon
    }

    /// Ends every open watch (they see a new epoch). Returns the new epoch.
    pub fn close_watches(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    /// `/sim/reset-rv`: the upstream is replaced by one whose RV counter restarted at `rv`.
    /// Every object is re-stamped `rv+1`, `rv+2`, … in key order (so the new current RV is `rv`
    /// plus the object count, which must stay below the current RV), the history is cleared
    /// (horizon = new current), the open watches end (new epoch), are cut or stay as `watches`
    /// says, and too-large answers are turned on in `mode` (or the `--too-large` default).
    pub fn reset_rv(
        &mut self,
        rv: u64,
        mode: Option<TooLarge>,
        watches: OpenWatches,
    ) -> OpResult<Reset> {
        let previous = self.rv;
        let count = self.objects.len();
        let current = u64::try_from(count)
            .ok()
            .and_then(|c| rv.checked_add(c))
            .unwrap_or(u64::MAX);
        if rv == 0 || current >= previous {
            return Err(ApiError::bad_request(format!(
                "rv {rv}: the {count} stored objects are re-stamped rv+1..=rv+{count}, so rv must \
                 be at least 1 and rv+{count} below the current resourceVersion {previous}"
            )));
        }
        self.rv = rv;
        for obj in self.objects.values_mut() {
            self.rv += 1;
            let mut o = (**obj).clone();
            set_rv(&mut o, self.rv);
            *obj = Arc::new(o);
        }
        self.history.clear();
        self.evicted = self.rv;
        self.horizon = self.rv;
        match watches {
            OpenWatches::End => self.epoch += 1,
            OpenWatches::Cut => self.cuts += 1,
            OpenWatches::Keep => {}
        }
        let mode = mode.unwrap_or(self.too_large_default);
        self.too_large = Some(mode);
        Ok(Reset {
            previous,
            current: self.rv,
            restamped: count,
            epoch: self.epoch,
            mode,
            watches,
        })
    }

    /// The too-large Status for a `resourceVersion` parameter above the current RV, when
    /// too-large answers are on (used by LIST: always answered with HTTP 504).
    pub fn too_large_status(&self, rv_param: Option<&str>) -> Option<Value> {
        self.too_large?;
        let s = rv_param?;
        let r = s.parse::<u64>().ok()?;
        (r > self.rv).then(|| too_large_status(s, self.rv))
    }

    /// Decides how a watch on `kind` with the given `resourceVersion` parameter starts.
    pub fn start_watch(&self, kind: Kind, rv_param: Option<&str>) -> WatchStart {
        match rv_param {
            None | Some("") | Some("0") => WatchStart::Snapshot {
                objects: self.list(kind),
                cursor: self.rv,
            },
            Some(s) => match (s.parse::<u64>(), self.too_large) {
                (Ok(r), _) if r >= self.horizon && r <= self.rv => WatchStart::Resume { cursor: r },
                // From the future, silently: nothing until the counter passes `r`.
                (Ok(r), Some(TooLarge::Silent)) if r > self.rv => WatchStart::Resume { cursor: r },
                (Ok(r), Some(mode)) if r > self.rv => WatchStart::TooLarge {
                    mode,
                    status: too_large_status(s, self.rv),
                },
                _ => WatchStart::Expired(ApiError::expired(s, self.rv)),
            },
        }
    }

    /// Events after `cursor` (all kinds, in RV order) and the new cursor (= current RV), or
    /// `None` when events after `cursor` were already evicted (the watcher lagged; end it).
    pub fn events_after(&self, cursor: u64) -> Option<(Vec<Arc<Event>>, u64)> {
        if cursor < self.evicted {
            return None;
        }
        let start = self.history.partition_point(|e| e.rv <= cursor);
        let evs = self.history.range(start..).cloned().collect();
        Some((evs, self.rv.max(cursor)))
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
