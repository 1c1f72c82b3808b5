//! One resource's served collection: the current served objects as shared serialized bytes, and
//! the bounded event log that lets a watch resume from any resourceVersion it was handed. Each
//! log entry keeps what its watchers share once the first has made it (opaque wire bytes, an
//! old object restamped with the entry's RV), so a change fans out without per-watcher copies.
//!
//! Owns no lock and does no I/O; [`crate::cache::store::State`] is its only writer: the methods
//! that change a [`Collection`] are the cache's own, reached through the writer's
//! `ViewWriter` only (readers get `&Collection`).

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::Value;

use crate::bytes;
use crate::cache::intern::Interner;
use crate::k8s::{ObjectKey, Resource};
use crate::proto::decode::{decode_object, TypeMeta};

/// An object's labels as a map, by key ([`labels_of`]): what a report or a one-off check reads;
/// the cache keeps labels as a [`LabelSet`].
pub type Labels = BTreeMap<String, String>;

/// `metadata.labels` of an object, compact: one sorted slice of pairs (a `BTreeMap` allocates a
/// whole ~0.5 KiB node even for one label, and there is one per served object and per Node).
/// The strings are shared (`Arc<str>`): the cache's writer gives every kept set the
/// [`Interner`]'s copies ([`LabelSet::interned`]), so a key or value that repeats across
/// objects is held once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSet(Box<[(Arc<str>, Arc<str>)]>);

impl LabelSet {
    /// The labels of a JSON object (non-string values ignored).
    pub fn of(obj: &Value) -> LabelSet {
        LabelSet::of_with(obj, |s| Arc::from(s))
    }

    /// The labels of a JSON object (non-string values ignored), its strings the shared copies
    /// of `names`.
    pub fn of_interned(obj: &Value, names: &mut Interner) -> LabelSet {
        LabelSet::of_with(obj, |s| names.get(s))
    }

    fn of_with(obj: &Value, mut share: impl FnMut(&str) -> Arc<str>) -> LabelSet {
        let Some(map) = obj.pointer("/metadata/labels").and_then(Value::as_object) else {
            return LabelSet::default();
        };
        // serde_json's map iterates in key order (no `preserve_order` feature).
        let mut pairs: Vec<(Arc<str>, Arc<str>)> = map
            .iter()
            .filter_map(|(k, v)| Some((share(k), share(v.as_str()?))))
            .collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        LabelSet(pairs.into_boxed_slice())
    }

    /// Labels from `(key, value)` pairs (sorted here; a repeated key keeps its last value).
    pub fn from_pairs(mut pairs: Vec<(Arc<str>, Arc<str>)>) -> LabelSet {
        pairs.reverse();
        pairs.sort_by(|a, b| a.0.cmp(&b.0)); // stable: the last of a repeated key comes first
        pairs.dedup_by(|later, first| later.0 == first.0);
        LabelSet(pairs.into_boxed_slice())
    }

    /// The same labels, their strings the shared copies of `names`.
    pub fn interned(&self, names: &mut Interner) -> LabelSet {
        let pairs = self.0.iter().map(|(k, v)| (names.get(k), names.get(v)));
        LabelSet(pairs.collect())
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// Whether the object has label `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs in key order, shared.
    pub fn pairs(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        self.0.iter()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(Arc<str>, Arc<str>)> for LabelSet {
    fn from_iter<I: IntoIterator<Item = (Arc<str>, Arc<str>)>>(pairs: I) -> LabelSet {
        LabelSet::from_pairs(pairs.into_iter().collect())
    }
}

/// Labels that keep an object out of kube-proxy's view (docs/SEMANTICS.md §4: kube-proxy's
/// label selector, [`crate::k8s::SERVICE_PROXY_SELECTOR`]).
pub const EXCLUDING_LABELS: [&str; 2] = [
    "service.kubernetes.io/headless",
    "service.kubernetes.io/service-proxy-name",
];

/// Whether the served objects of `res` went through the admission filter, so that none of them
/// carries an [`EXCLUDING_LABELS`] label (the writer keeps such objects out of the cache): the
/// resources listed upstream with kube-proxy's selector, every one but Nodes and ServiceCIDRs.
/// What a reader may rely on, such as the LIST fast path (`crate::api::filter`).
pub fn admission_filtered(res: Resource) -> bool {
    res.label_selector().is_some()
}

/// One served object version: serialized once, shared by every list and watcher.
///
/// It holds one form of its content once it can: its JSON until it is compacted (by the
/// compactor, [`crate::cache::compaction`], or by a first protobuf read if that comes first);
/// then its protobuf form alone when that form decodes back to exactly the same JSON
/// ([`Served::protobuf`]), else both. Its JSON is [`Served::json`] either way: the kept bytes,
/// or a fresh decode of the protobuf form, the same bytes.
#[derive(Debug)]
pub struct Served {
    /// `namespace/name`.
    pub key: ObjectKey,
    /// grid-wrapper's resourceVersion of this content.
    pub rv: u64,
    /// `metadata.labels`, for label selectors.
    pub labels: LabelSet,
    /// A Service's selectable `spec` fields, for field selectors; `None` for any object
    /// without them (boxed: every object but a Service has none).
    pub spec: Option<Box<ServiceFields>>,
    /// The form (or forms) held: changed once at most, from JSON to protobuf or to both, by its
    /// compaction; immutable bytes either way, so filling it is not a change of the
    /// view (it needs no view lock, only the `Arc<Served>`).
    body: Mutex<Body>,
    /// A newer version (or a deletion) replaced it in a view: what the compactor skips.
    superseded: AtomicBool,
}

/// A Service's `spec` fields a field selector may name (docs/SEMANTICS.md §1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceFields {
    /// `spec.clusterIP`.
    pub cluster_ip: Option<Box<str>>,
    /// `spec.type`.
    pub service_type: Option<Box<str>>,
}

impl ServiceFields {
    /// The fields of a JSON object; `None` when it has neither.
    pub fn of(obj: &Value) -> Option<Box<ServiceFields>> {
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).map(Box::from);
        let fields = ServiceFields {
            cluster_ip: text("/spec/clusterIP"),
            service_type: text("/spec/type"),
        };
        (fields != ServiceFields::default()).then(|| Box::new(fields))
    }
}

/// What a [`Served`] holds of its content.
#[derive(Debug)]
enum Body {
    /// Its JSON (the object with `kind`, `apiVersion` and `metadata.resourceVersion` = `rv`),
    /// and its protobuf form once made, when that form does not give back the same JSON.
    Json {
        json: Arc<[u8]>,
        protobuf: Option<Arc<[u8]>>,
    },
    /// Its protobuf form alone (framed as field 2), which decodes to exactly its JSON.
    Protobuf {
        protobuf: Arc<[u8]>,
        /// What tells a changed object from this one without decoding it.
        fingerprint: Fingerprint,
        /// The length of its JSON.
        json_len: usize,
        /// The resource it was encoded as (its message, and the `kind` and `apiVersion` its
        /// JSON starts with).
        res: Resource,
    },
}

/// The form a [`Served`] holds, as `/metrics` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Its JSON (and its protobuf form too once a protobuf client read it, when that form
    /// does not decode to the same JSON).
    Json,
    /// Its protobuf form only.
    Protobuf,
}

/// A compacted object's JSON without the stamp of its RV ([`stamp_span`]), as 128 bits of
/// keyed hash and a length: what the writer compares a new version with, without decoding the
/// old one. Texts that differ in either differ; texts with equal fingerprints are taken as the
/// same (two SipHash-1-3 hashes under keys drawn at random once per process, which nothing
/// outside the process sees: two different texts match as often as two random 128-bit numbers
/// do, whatever an upstream sends; the trade content-addressed stores make).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    hash: (u64, u64),
    len: usize,
}

impl Fingerprint {
    /// The fingerprint of `json` stamped with `rv`; `None` without a stamp of `rv` in it.
    fn of_stamped(json: &[u8], rv: u64) -> Option<Fingerprint> {
        let (from, to) = stamp_span(json, rv)?;
        Some(Fingerprint::of_pieces(&json[..from], &json[to..]))
    }

    /// The fingerprint of the text `before ++ after`.
    fn of_pieces(before: &[u8], after: &[u8]) -> Fingerprint {
        use std::hash::{BuildHasher, Hasher};
        // Keyed once per process (two independent keys): what an upstream sends cannot be
        // made to collide.
        static KEYS: OnceLock<(RandomState, RandomState)> = OnceLock::new();
        let keys = KEYS.get_or_init(|| (RandomState::new(), RandomState::new()));
        let hash = |key: &RandomState| {
            let mut h = key.build_hasher();
            // `write` streams: two pieces hash as their concatenation.
            h.write(before);
            h.write(after);
            h.finish()
        };
        Fingerprint {
            hash: (hash(&keys.0), hash(&keys.1)),
            len: before.len() + after.len(),
        }
    }
}

/// Served objects alive, by the form they hold (indexed by [`Form`]): `/metrics`'s
/// `grid_wrapper_served_forms`.
static FORMS: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];

impl Form {
    fn count(self) -> &'static AtomicI64 {
        &FORMS[self as usize]
    }

    /// The served object versions alive that hold this form (the view's, the relay view's,
    /// the logs' and those a reader still holds).
    pub fn alive(self) -> u64 {
        self.count().load(Ordering::Relaxed).max(0) as u64
    }

    /// The forms, as `/metrics` labels them.
    pub const ALL: [(Form, &'static str); 2] = [(Form::Protobuf, "protobuf"), (Form::Json, "json")];
}

impl Body {
    fn form(&self) -> Form {
        match self {
            Body::Json { .. } => Form::Json,
            Body::Protobuf { .. } => Form::Protobuf,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let form = lock_body(&self.body).form();
        form.count().fetch_sub(1, Ordering::Relaxed);
    }
}

/// The body's lock: held only to read or swap pointers, or by whoever compacts it while
/// it encodes (a second one waits for that object only). A panic under it left the body
/// whole (it is only ever replaced at once), so a poisoned lock is taken over.
fn lock_body(body: &Mutex<Body>) -> MutexGuard<'_, Body> {
    body.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Served {
    /// Builds a served object from its final JSON (`rv` already stamped into it).
    pub fn from_value(key: ObjectKey, rv: u64, value: &Value) -> Served {
        // Serializing a Value cannot fail (its keys are strings).
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        Served::with_bytes(key, rv, value, bytes)
    }

    /// Builds a served object without a `Value`: its final JSON and its labels (an endpoint
    /// object, which has no selectable `spec` fields).
    pub fn from_parts(key: ObjectKey, rv: u64, bytes: Vec<u8>, labels: LabelSet) -> Served {
        Served::new(key, rv, bytes.into(), labels, None)
    }

    /// Builds a served object from its final JSON and that JSON's serialization.
    pub fn with_bytes(key: ObjectKey, rv: u64, value: &Value, bytes: Vec<u8>) -> Served {
        Served::new(
            key,
            rv,
            bytes.into(),
            LabelSet::of(value),
            ServiceFields::of(value),
        )
    }

    fn new(
        key: ObjectKey,
        rv: u64,
        json: Arc<[u8]>,
        labels: LabelSet,
        spec: Option<Box<ServiceFields>>,
    ) -> Served {
        Form::Json.count().fetch_add(1, Ordering::Relaxed);
        Served {
            key,
            rv,
            labels,
            spec,
            body: Mutex::new(Body::Json {
                json,
                protobuf: None,
            }),
            superseded: AtomicBool::new(false),
        }
    }

    /// Marks it replaced in a view by a newer version or a deletion (it may live on in the
    /// event log and with readers).
    pub(crate) fn supersede(&self) {
        self.superseded.store(true, Ordering::Relaxed);
    }

    /// Whether a newer version or a deletion replaced it in a view.
    pub fn superseded(&self) -> bool {
        self.superseded.load(Ordering::Relaxed)
    }

    /// The value of a selectable field (docs/SEMANTICS.md §1), `None` when the object has none.
    pub fn field(&self, name: &str) -> Option<&str> {
        match name {
            "metadata.name" => Some(&self.key.name),
            "metadata.namespace" => Some(&self.key.namespace),
            "spec.clusterIP" => self.spec.as_ref()?.cluster_ip.as_deref(),
            "spec.type" => self.spec.as_ref()?.service_type.as_deref(),
            _ => None,
        }
    }

    /// The JSON object with `kind`, `apiVersion` and `metadata.resourceVersion` = `rv`: the
    /// bytes kept, or, when only the protobuf form is kept, that form decoded (a copy made for
    /// the caller and not kept; the same bytes, see [`Served::protobuf`]).
    pub fn json(&self) -> Arc<[u8]> {
        let (protobuf, res) = match &*lock_body(&self.body) {
            Body::Json { json, .. } => return Arc::clone(json),
            Body::Protobuf { protobuf, res, .. } => (Arc::clone(protobuf), *res),
        };
        // Decoded without the lock. It decoded to these very bytes when it was kept.
        decode_framed(res, &protobuf).unwrap_or_default().into()
    }

    /// The length of [`Served::json`] (without decoding it).
    pub fn json_len(&self) -> usize {
        match &*lock_body(&self.body) {
            Body::Json { json, .. } => json.len(),
            Body::Protobuf { json_len, .. } => *json_len,
        }
    }

    /// The form held now.
    pub fn form(&self) -> Form {
        lock_body(&self.body).form()
    }

    /// This version's protobuf form, as a `res` message framed as field 2 (a list's `items`, an
    /// envelope's `raw`): encoded from the JSON on the first call, then shared by every protobuf
    /// list and watcher. Fields the built-in schema does not know are left out and reported to
    /// [`crate::proto::unknown`]. A reader may call it with or without the view's read guard
    /// held (two first readers at once: one encodes, the other waits for that object only).
    ///
    /// The first call also decodes the form it made: when that gives back the JSON byte for
    /// byte (and no field was left out), the JSON is dropped and only the protobuf form kept
    /// ([`Form::Protobuf`]); otherwise both are.
    pub fn protobuf(&self, res: Resource) -> Arc<[u8]> {
        let mut body = lock_body(&self.body);
        let json = match &*body {
            Body::Json {
                protobuf: Some(pb), ..
            }
            | Body::Protobuf { protobuf: pb, .. } => return Arc::clone(pb),
            Body::Json {
                json,
                protobuf: None,
            } => Arc::clone(json),
        };
        // Straight from the JSON text, without a `serde_json::Value`. Our own bytes always
        // parse; an object that somehow does not encodes as empty.
        let encoded = crate::proto::encode_json(res, &json);
        crate::proto::unknown::note(res, &self.key, &encoded.unknown);
        let protobuf: Arc<[u8]> = encoded.bytes.into();
        let exact = encoded.unknown.is_empty()
            && decode_framed(res, &protobuf).is_some_and(|back| back[..] == json[..]);
        let fingerprint = exact
            .then(|| Fingerprint::of_stamped(&json, self.rv))
            .flatten();
        *body = match fingerprint {
            Some(fingerprint) => {
                Form::Json.count().fetch_sub(1, Ordering::Relaxed);
                Form::Protobuf.count().fetch_add(1, Ordering::Relaxed);
                Body::Protobuf {
                    protobuf: Arc::clone(&protobuf),
                    fingerprint,
                    json_len: json.len(),
                    res,
                }
            }
            None => Body::Json {
                json,
                protobuf: Some(Arc::clone(&protobuf)),
            },
        };
        protobuf
    }

    /// Whether `new` (stamped with `new_rv`) is this object's content but for the
    /// resourceVersion ([`same_but_rv`]). When only the protobuf form is kept, the two are
    /// compared by their fingerprints ([`Fingerprint`]), without decoding.
    pub fn same_but_rv(&self, new: &[u8], new_rv: u64) -> bool {
        let fingerprint = match &*lock_body(&self.body) {
            Body::Json { json, .. } => return same_but_rv(new, new_rv, json, self.rv),
            Body::Protobuf { fingerprint, .. } => *fingerprint,
        };
        // Compared without decoding the old version ([`Fingerprint`]).
        Fingerprint::of_stamped(new, new_rv) == Some(fingerprint)
    }

    /// Whether this object's JSON is `raw` with the stamp of its RV added ([`stamp_span`]):
    /// by fingerprints when only the protobuf form is kept, as for [`Served::same_but_rv`].
    pub fn unstamped_eq(&self, raw: &[u8]) -> bool {
        let fingerprint = match &*lock_body(&self.body) {
            Body::Json { json, .. } => return unstamped_eq(raw, json, self.rv),
            Body::Protobuf { fingerprint, .. } => *fingerprint,
        };
        Fingerprint::of_pieces(raw, &[]) == fingerprint
    }

    /// The same content stamped with another resourceVersion (a DELETED event's object).
    pub fn restamped(&self, rv: u64) -> Served {
        let json = self.json();
        let mut value: Value = match serde_json::from_slice(&json) {
            Ok(v) => v,
            // Our own bytes always parse; keep the old bytes if they somehow do not.
            Err(_) => Value::Null,
        };
        if value.is_null() {
            return Served::new(
                self.key.clone(),
                rv,
                json,
                self.labels.clone(),
                self.spec.clone(),
            );
        }
        stamp_rv(&mut value, rv);
        Served::from_value(self.key.clone(), rv, &value)
    }
}

/// The JSON of a served object's protobuf form (a `res` message framed as field 2), with its
/// `kind` and `apiVersion`, in the form the cache serves JSON in (keys sorted, as serializing a
/// `serde_json::Value` writes them); `None` when it does not decode. Written straight in that
/// form ([`crate::proto::decode::decode_object_sorted`]); what that leaves out, as Go's JSON
/// made that form by [`crate::cache::canonical::tree::sorted`] (the same bytes).
pub(crate) fn decode_framed(res: Resource, framed: &[u8]) -> Option<Vec<u8>> {
    let msg = unframe(framed)?;
    let type_meta = TypeMeta {
        api_version: res.api_version(),
        kind: res.kind(),
    };
    match crate::proto::decode::decode_object_sorted(res, msg, Some(type_meta)) {
        Ok(sorted) => Some(sorted.json),
        Err(crate::proto::decode::DecodeError::NotSorted(_)) => {
            let go = decode_object(res, msg, Some(type_meta)).ok()?;
            crate::cache::canonical::tree::sorted(&go.json)
        }
        Err(_) => None,
    }
}

/// The message inside a served object's protobuf form: after its tag (field 2,
/// length-delimited) and length, to the end.
fn unframe(framed: &[u8]) -> Option<&[u8]> {
    let (&tag, rest) = framed.split_first()?;
    let mut at = 0;
    let len = crate::proto::read::varint(rest, &mut at).ok()?;
    let msg = rest.get(at..)?;
    (tag == 0x12 && u64::try_from(msg.len()).ok()? == len).then_some(msg)
}

/// `metadata.labels` of an object (non-string values ignored).
pub fn labels_of(obj: &Value) -> Labels {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `new` (stamped with `new_rv`) equals `old` (stamped with `old_rv`) but for the
/// resourceVersion. `new_rv` is a never-issued number, so its first `"resourceVersion":"…"`
/// occurrence in `new` is the stamp.
pub fn same_but_rv(new: &[u8], new_rv: u64, old: &[u8], old_rv: u64) -> bool {
    let new_stamp = rv_stamp(new_rv);
    let old_stamp = rv_stamp(old_rv);
    let Some(at) = find_stamp(new, &new_stamp) else {
        return false;
    };
    let rest = at + new_stamp.len();
    old.len() + new_stamp.len() == new.len() + old_stamp.len()
        && old[..at] == new[..at]
        && old.get(at..at + old_stamp.len()) == Some(old_stamp.as_bytes())
        && old.get(at + old_stamp.len()..) == Some(&new[rest..])
}

/// The text `publish` stamps into served JSON: `"resourceVersion":"<rv>"`.
pub fn rv_stamp(rv: u64) -> String {
    format!("\"resourceVersion\":\"{rv}\"")
}

/// Where the first `stamp` (an [`rv_stamp`]) starts in `hay`. Anchored on the stamp's capital
/// `V`, rare in JSON, so a served object is scanned once with `memchr`-like speed instead of one
/// comparison per byte (the writer runs this several times per object; in profiles the naive
/// window search was the largest single cost of applying a list, see BENCHMARKS.md).
pub fn find_stamp(hay: &[u8], stamp: &str) -> Option<usize> {
    const V_AT: usize = "\"resource".len();
    let stamp = stamp.as_bytes();
    debug_assert_eq!(stamp.get(V_AT), Some(&b'V'));
    let mut from = V_AT;
    while from < hay.len() {
        let v = from + hay[from..].iter().position(|&b| b == b'V')?;
        let at = v - V_AT;
        if hay[at..].starts_with(stamp) {
            return Some(at);
        }
        from = v + 1;
    }
    None
}

/// Where `publish`'s stamp `"resourceVersion":"<rv>"` sits in `served`, with one adjacent
/// comma: the first occurrence of that exact text is the stamp (as `same_but_rv` relies on).
pub fn stamp_span(served: &[u8], rv: u64) -> Option<(usize, usize)> {
    let stamp = rv_stamp(rv);
    let at = find_stamp(served, &stamp)?;
    let end = at + stamp.len();
    Some(if served.get(end) == Some(&b',') {
        (at, end + 1)
    } else if at > 0 && served[at - 1] == b',' {
        (at - 1, end)
    } else {
        (at, end)
    })
}

/// Whether `served` is `raw` with the stamp of `rv` added.
pub fn unstamped_eq(raw: &[u8], served: &[u8], rv: u64) -> bool {
    stamp_span(served, rv).is_some_and(|(from, to)| {
        served.len() - (to - from) == raw.len()
            && bytes::eq(&served[..from], &raw[..from])
            && bytes::eq(&served[to..], &raw[from..])
    })
}

/// Sets `metadata.resourceVersion` to `rv` (creating `metadata` if needed).
pub fn stamp_rv(value: &mut Value, rv: u64) {
    if let Some(obj) = value.as_object_mut() {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if !meta.is_object() {
            *meta = Value::Object(Default::default());
        }
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
}

/// One logged change of one served object.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The change's resourceVersion.
    pub rv: u64,
    /// Served content before the change; for a deletion, already stamped with `rv`.
    pub old: Option<Arc<Served>>,
    /// Served content after the change; `None` for a deletion.
    pub new: Option<Arc<Served>>,
    /// What every watcher of this entry shares ([`Entry::wire`], [`Entry::old_restamped`]),
    /// made by the first watcher that needs it: one pointer until then.
    shared: OnceLock<Box<EntryShared>>,
}

/// Slots of [`Entry::wire`]: one per event type and wire format that an entry can be sent as,
/// and one per event type for the JSON of its object.
pub const WIRE_SLOTS: usize = 9;

/// The lazily made parts of an [`Entry`] that its watchers share.
#[derive(Clone, Debug, Default)]
struct EntryShared {
    wire: [OnceLock<Arc<[u8]>>; WIRE_SLOTS],
    restamped: OnceLock<Option<Arc<Served>>>,
}

impl Entry {
    fn new(rv: u64, old: Option<Arc<Served>>, new: Option<Arc<Served>>) -> Entry {
        Entry {
            rv,
            old,
            new,
            shared: OnceLock::new(),
        }
    }

    fn shared(&self) -> &EntryShared {
        self.shared.get_or_init(Box::default)
    }

    /// The bytes kept in `slot` (< [`WIRE_SLOTS`]) for this entry: made by `make` on the first
    /// call, then shared by every later caller. The fan-out frames an event once per entry and
    /// wire format, not once per watcher (what a slot holds is the server's business).
    pub fn wire(&self, slot: usize, make: impl FnOnce() -> Arc<[u8]>) -> Arc<[u8]> {
        match self.shared().wire.get(slot) {
            Some(cell) => Arc::clone(cell.get_or_init(make)),
            None => make(),
        }
    }

    /// `old` stamped with this entry's resourceVersion: the object of the DELETED event a
    /// watcher gets when the change makes the object stop matching its selection. Made once
    /// per entry (`old` itself when it already carries that resourceVersion, as a deletion's
    /// does).
    pub fn old_restamped(&self) -> Option<Arc<Served>> {
        let old = self.old.as_ref()?;
        if old.rv == self.rv {
            return Some(Arc::clone(old));
        }
        self.shared()
            .restamped
            .get_or_init(|| Some(Arc::new(old.restamped(self.rv))))
            .clone()
    }
}

/// Why a watcher cannot continue from its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

/// How long and how much history a collection keeps.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Always keep at least this many entries (`--notify-channel-size`).
    pub min_entries: usize,
    /// Never keep more than this many entries.
    pub max_entries: usize,
    /// Keep entries younger than this (seconds), up to `max_entries`.
    pub window_secs: u64,
    /// Beyond `min_entries`, keep at most this many bytes of logged objects.
    pub max_bytes: usize,
}

impl Retention {
    /// Retention for a given `--notify-channel-size`: at least that many entries (a watch ended
    /// as too slow after that many piled up can resume); beyond them, what a resuming client
    /// needs, bounded the way the apiserver's watch cache is: entries younger than 75 s (its
    /// `eventFreshDuration`), at most 1,024 entries (or the minimum, if larger) and 16 MiB of
    /// logged objects per resource (binding only for very large objects: a full log of ordinary
    /// slices stays far below it). A watch resuming from before that gets 410 and relists.
    pub fn for_queue(size: usize) -> Retention {
        let min_entries = size.max(1);
        Retention {
            min_entries,
            max_entries: min_entries.max(1024),
            window_secs: 75,
            max_bytes: 16 << 20,
        }
    }
}

/// The served objects of one resource and their event log.
#[derive(Debug)]
pub struct Collection {
    objects: BTreeMap<ObjectKey, Arc<Served>>,
    log: VecDeque<(u64, Entry)>,
    /// Bytes of the objects the log holds (old and new of every entry).
    log_bytes: usize,
    horizon: u64,
}

fn entry_bytes(e: &Entry) -> usize {
    e.old.as_ref().map_or(0, |o| o.json_len()) + e.new.as_ref().map_or(0, |n| n.json_len())
}

impl Collection {
    /// An empty collection whose history starts at `horizon`.
    pub fn new(horizon: u64) -> Collection {
        Collection {
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            log_bytes: 0,
            horizon,
        }
    }

    /// Current served objects in key order.
    pub fn objects(&self) -> impl ExactSizeIterator<Item = &Arc<Served>> {
        self.objects.values()
    }

    /// Current served objects in key order after `key` (all of them for `None`): where a
    /// watch's initial state resumes (`api::transition::InitialCursor`).
    pub fn objects_from(&self, key: Option<&ObjectKey>) -> impl Iterator<Item = &Arc<Served>> {
        use std::ops::Bound::{Excluded, Unbounded};
        let start = key.map_or(Unbounded, Excluded);
        self.objects.range((start, Unbounded)).map(|(_, v)| v)
    }

    /// Number of served objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are no served objects.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// One served object.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Served>> {
        self.objects.get(key)
    }

    /// Oldest resourceVersion a watch may resume from.
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// Forgets the history and starts it at `rv` (used once, when the cache becomes ready).
    pub(crate) fn reset_history(&mut self, rv: u64) {
        // A new log, not a cleared one: the sync logged every object, and a cleared log would
        // keep that room (an entry's worth per object, which adds up in a large cluster) for good.
        self.log = VecDeque::new();
        self.log_bytes = 0;
        self.horizon = rv;
    }

    /// Number of logged entries.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Adds a served object without logging it (building a view that has no history yet; see
    /// `State::serve_v1beta1`).
    pub(crate) fn seed(&mut self, served: Arc<Served>) {
        self.objects.insert(served.key.clone(), served);
    }

    /// Replaces (or removes, with `None`) the served object at `key` and logs the change.
    /// `rv` must be above every earlier rv. Returns the logged entry.
    pub(crate) fn record(
        &mut self,
        key: &ObjectKey,
        new: Option<Arc<Served>>,
        rv: u64,
        now: u64,
    ) -> Entry {
        let old = match &new {
            Some(served) => self.objects.insert(key.clone(), served.clone()),
            None => self.objects.remove(key),
        };
        // Out of the view: what the compactor skips.
        if let Some(old) = &old {
            old.supersede();
        }
        // A deletion's event carries the old content stamped with the deletion's RV.
        let old = match new {
            Some(_) => old,
            None => old.map(|old| Arc::new(old.restamped(rv))),
        };
        let entry = Entry::new(rv, old, new);
        self.log_bytes += entry_bytes(&entry);
        self.log.push_back((now, entry.clone()));
        entry
    }

    /// Drops entries beyond the retention, raising the horizon to the newest dropped rv.
    pub(crate) fn trim(&mut self, retention: &Retention, now: u64) {
        while let Some((at, entry)) = self.log.front() {
            let len = self.log.len();
            let beyond_min = len > retention.min_entries;
            let too_many = len > retention.max_entries;
            let too_big = beyond_min && self.log_bytes > retention.max_bytes;
            let expired = beyond_min && now.saturating_sub(*at) > retention.window_secs;
            if !(too_many || too_big || expired) {
                break;
            }
            self.horizon = self.horizon.max(entry.rv);
            self.log_bytes -= entry_bytes(entry).min(self.log_bytes);
            self.log.pop_front();
        }
        // A burst (a list, a relabel) grew the log beyond what the retention keeps: give the
        // room back once it is mostly empty (with slack, so that steady churn does not
        // reallocate it again and again).
        let len = self.log.len().max(Self::LOG_ROOM_KEPT);
        if self.log.capacity() > 4 * len {
            self.log.shrink_to(2 * len);
        }
    }

    /// Log entries' room kept however empty the log gets.
    const LOG_ROOM_KEPT: usize = 256;

    /// Copies of the entries with rv > `cursor`, at most `max` of them. `Err(Gone)` when
    /// entries after `cursor` were already evicted (the watcher fell behind the history).
    pub fn after(&self, cursor: u64, max: usize) -> Result<Vec<Entry>, Gone> {
        Ok(self.entries_after(cursor)?.take(max).cloned().collect())
    }

    /// The entries with rv > `cursor`, in order, borrowed: what a watch pump reads under the
    /// view's lock, copying nothing. `Err(Gone)` as for [`Collection::after`].
    pub fn entries_after(&self, cursor: u64) -> Result<impl Iterator<Item = &Entry>, Gone> {
        if cursor < self.horizon {
            return Err(Gone);
        }
        Ok(self.log.range(self.first_after(cursor)..).map(|(_, e)| e))
    }

    /// Number of entries with rv > `cursor`.
    pub fn pending(&self, cursor: u64) -> usize {
        self.log.len() - self.first_after(cursor)
    }

    /// The index of the first entry with rv > `cursor`. A watcher that is up to date (the
    /// common case, asked once per watcher whenever the loop wakes) costs no search.
    fn first_after(&self, cursor: u64) -> usize {
        match self.log.back() {
            Some((_, last)) if last.rv > cursor => {
                self.log.partition_point(|(_, e)| e.rv <= cursor)
            }
            _ => self.log.len(),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_forms;
