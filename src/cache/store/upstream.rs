//! What the upstream said: the upstream objects by resource and key, and how they are kept — as
//! compact bytes, or, when they are the served bytes but for the resourceVersion stamp (Nodes,
//! Services, and the endpoint objects that no topology key or edge-health status prunes), not at
//! all: they are read back from the served object ([`StandIn`]), which spares a second copy of
//! everything served as it came. The others (pruned), once published, are kept packed
//! ([`crate::cache::pack`]): they are read only to recompute them or to compare a relisted object
//! with them.
//!
//! Invariants: a [`Stored::AsServed`] object's served object (of the [`StandIn`] resource) is
//! its bytes with the stamp of its RV added; a [`Stored::Own`] object is either being published
//! or listed in `to_pack` ([`UpstreamObjects::settle`]); what is read back
//! ([`UpstreamObjects::bytes`]) is always exactly the upstream's canonical bytes, wherever kept.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::publisher::Publisher;
use super::{parse, Listed, Raw};
use crate::bytes;
use crate::cache::collection::{stamp_span, Served};
use crate::cache::pack::{self, Packed};
use crate::cache::snapshot::Blob;
use crate::k8s::{ObjectKey, Resource};

/// An upstream object as the cache keeps it.
#[derive(Clone, Debug)]
pub(super) enum Stored {
    /// Its compact JSON (until it is published: then [`Stored::AsServed`] or
    /// [`Stored::Packed`]).
    Own(Raw),
    /// Its compact JSON, packed: the served object differs (it is pruned).
    Packed(Packed),
    /// The served object of the same key, without its `metadata.resourceVersion`.
    AsServed,
}

/// An upstream object as [`super::State::export`] hands it to the snapshot writer: taken by the
/// cache's writer by sharing what the cache holds (pointer copies), made whole by the snapshot
/// writer, one object at a time.
#[derive(Clone, Debug)]
pub enum Exported {
    /// Its compact JSON.
    Raw(Raw),
    /// Its compact JSON, packed.
    Packed(Packed),
    /// A served object: the upstream's bytes but for the stamp of its RV, found and cut out
    /// while it is written.
    Served(ServedBytes),
}

/// A served object, shared, and its JSON and where the stamp of its RV is in it: taken once,
/// by the snapshot writer (on its own thread, which decodes it when only its protobuf form is
/// kept), the first time it is asked for.
#[derive(Clone, Debug)]
pub struct ServedBytes {
    served: Arc<Served>,
    json: OnceLock<Stamped>,
}

/// A served object's JSON, and where the stamp of its RV is in it (`None`: nowhere).
type Stamped = (Arc<[u8]>, Option<(usize, usize)>);

impl ServedBytes {
    fn new(served: Arc<Served>) -> ServedBytes {
        ServedBytes {
            served,
            json: OnceLock::new(),
        }
    }

    /// Its JSON, and where the stamp is in it.
    fn json(&self) -> &Stamped {
        self.json.get_or_init(|| {
            let json = self.served.json();
            let stamp = stamp_span(&json, self.served.rv);
            (json, stamp)
        })
    }

    /// The bytes before and after the stamp (`None`: no stamp of the RV in them).
    fn around_stamp(&self) -> Option<(&[u8], &[u8])> {
        let (json, stamp) = self.json();
        let (from, to) = (*stamp)?;
        Some((json.get(..from)?, json.get(to..)?))
    }
}

impl Exported {
    /// A served object (the relay view's), shared.
    pub(super) fn served(served: Arc<Served>) -> Exported {
        Exported::Served(ServedBytes::new(served))
    }

    /// What the cache holds for one object: shared, and `served` (the served object) only
    /// asked for when the cache keeps it as that.
    fn of(stored: &Stored, served: impl FnOnce() -> Option<Arc<Served>>) -> Option<Exported> {
        Some(match stored {
            Stored::Own(raw) => Exported::Raw(raw.clone()),
            Stored::Packed(packed) => Exported::Packed(packed.clone()),
            Stored::AsServed => Exported::Served(ServedBytes::new(served()?)),
        })
    }

    /// Its bytes, whole (`None`: packed bytes that do not unpack, served bytes without the
    /// stamp of their RV).
    pub fn bytes(&self) -> Option<Raw> {
        if let Exported::Raw(raw) = self {
            return Some(raw.clone());
        }
        let mut out = Vec::with_capacity(self.len());
        self.write_with(&mut |piece| {
            out.extend_from_slice(piece);
            Ok(())
        })
        .ok()?;
        Some(Raw::from(out))
    }
}

impl Blob for Exported {
    fn len(&self) -> usize {
        match self {
            Exported::Raw(raw) => raw.len(),
            Exported::Packed(packed) => packed.len(),
            // Without a stamp `write_with` fails: the length is then moot.
            Exported::Served(served) => served
                .around_stamp()
                .map_or(served.json().0.len(), |(b, a)| b.len() + a.len()),
        }
    }

    fn write_with(&self, put: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        match self {
            Exported::Raw(raw) => put(raw),
            Exported::Served(served) => {
                let (before, after) = served
                    .around_stamp()
                    .ok_or_else(|| io::Error::other("a served object without its stamp"))?;
                put(before)?;
                put(after)
            }
            Exported::Packed(packed) => packed
                .with_unpacked(put)
                .unwrap_or_else(|| Err(io::Error::other("packed bytes that do not unpack"))),
        }
    }
}

/// The upstream objects of every resource (slices of the version mirrored), and the ones whose
/// bytes are left to pack.
#[derive(Debug, Default)]
pub(super) struct UpstreamObjects {
    nodes: BTreeMap<String, Stored>,
    services: BTreeMap<ObjectKey, Stored>,
    endpoints: BTreeMap<ObjectKey, Stored>,
    slices: BTreeMap<ObjectKey, Stored>,
    /// ServiceCIDRs of the version mirrored.
    cidrs: BTreeMap<ObjectKey, Stored>,
    /// Upstream bytes that [`UpstreamObjects::pack_pending`] is to pack: left for after the
    /// change is served, so that readiness and other writers do not wait for it.
    to_pack: Vec<(Resource, ObjectKey)>,
}

/// The served objects that may stand in for upstream ones: the view, and the EndpointSlice
/// version mirrored (only served slices of that version carry the upstream's bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct StandIn<'a> {
    publisher: &'a Publisher,
    slice_kind: Resource,
}

impl<'a> StandIn<'a> {
    pub(super) fn new(publisher: &'a Publisher, slice_kind: Resource) -> StandIn<'a> {
        StandIn {
            publisher,
            slice_kind,
        }
    }

    /// The served resource whose objects may stand in for upstream objects of `kind`.
    fn mirror(&self, kind: Resource) -> Option<Resource> {
        match kind {
            Resource::Nodes | Resource::Services | Resource::Endpoints => Some(kind),
            Resource::SlicesV1 if self.slice_kind == Resource::SlicesV1 => Some(kind),
            Resource::SlicesV1 | Resource::SlicesV1beta1 => None,
            // Both versions are served; the one mirrored is the upstream object as it came.
            Resource::CidrsV1 | Resource::CidrsV1beta1 => Some(kind),
        }
    }

    /// The served object that stands in for upstream object `key` of `kind`.
    fn served(&self, kind: Resource, key: &ObjectKey) -> Option<Arc<Served>> {
        self.publisher.served(self.mirror(kind)?, key)
    }
}

impl UpstreamObjects {
    fn map(&self, kind: Resource) -> Option<&BTreeMap<ObjectKey, Stored>> {
        match kind {
            Resource::Nodes => None,
            Resource::Services => Some(&self.services),
            Resource::Endpoints => Some(&self.endpoints),
            Resource::SlicesV1 | Resource::SlicesV1beta1 => Some(&self.slices),
            Resource::CidrsV1 | Resource::CidrsV1beta1 => Some(&self.cidrs),
        }
    }

    fn map_mut(&mut self, kind: Resource) -> Option<&mut BTreeMap<ObjectKey, Stored>> {
        match kind {
            Resource::Nodes => None,
            Resource::Services => Some(&mut self.services),
            Resource::Endpoints => Some(&mut self.endpoints),
            Resource::SlicesV1 | Resource::SlicesV1beta1 => Some(&mut self.slices),
            Resource::CidrsV1 | Resource::CidrsV1beta1 => Some(&mut self.cidrs),
        }
    }

    pub(super) fn get(&self, kind: Resource, key: &ObjectKey) -> Option<&Stored> {
        match self.map(kind) {
            None => self.nodes.get(&*key.name),
            Some(map) => map.get(key),
        }
    }

    fn get_mut(&mut self, kind: Resource, key: &ObjectKey) -> Option<&mut Stored> {
        if kind == Resource::Nodes {
            return self.nodes.get_mut(&*key.name);
        }
        self.map_mut(kind)?.get_mut(key)
    }

    /// Whether an object of `kind` is kept at `key`.
    pub(super) fn contains(&self, kind: Resource, key: &ObjectKey) -> bool {
        self.get(kind, key).is_some()
    }

    /// Whether any object of `kind` is kept.
    pub(super) fn holds_any(&self, kind: Resource) -> bool {
        match self.map(kind) {
            None => !self.nodes.is_empty(),
            Some(map) => !map.is_empty(),
        }
    }

    /// How many objects of `kind` are kept.
    pub(super) fn count(&self, kind: Resource) -> usize {
        self.map(kind).map_or(self.nodes.len(), BTreeMap::len)
    }

    /// The keys of `kind`, in order.
    pub(super) fn keys(&self, kind: Resource) -> Vec<ObjectKey> {
        match self.map(kind) {
            None => self.nodes.keys().map(|n| ObjectKey::new("", n)).collect(),
            Some(map) => map.keys().cloned().collect(),
        }
    }

    /// The keys of the kept slices, in order.
    pub(super) fn slice_keys(&self) -> impl ExactSizeIterator<Item = &ObjectKey> {
        self.slices.keys()
    }

    /// Keeps `stored` as the upstream object `key` of `kind`.
    pub(super) fn insert(&mut self, kind: Resource, key: &ObjectKey, stored: Stored) {
        match self.map_mut(kind) {
            None => self.nodes.insert(key.name.to_string(), stored),
            Some(map) => map.insert(key.clone(), stored),
        };
    }

    /// Forgets the upstream object `key` of `kind`; whether it was kept.
    pub(super) fn remove(&mut self, kind: Resource, key: &ObjectKey) -> bool {
        match self.map_mut(kind) {
            None => self.nodes.remove(&*key.name).is_some(),
            Some(map) => map.remove(key).is_some(),
        }
    }

    /// The upstream object for a snapshot: what the cache holds, shared.
    pub(super) fn blob(
        &self,
        kind: Resource,
        key: &ObjectKey,
        by: StandIn<'_>,
    ) -> Option<Exported> {
        Exported::of(self.get(kind, key)?, || by.served(kind, key))
    }

    /// Every upstream object of `kind` for a snapshot, in key order ([`UpstreamObjects::blob`]
    /// of each, walking the store once). The served view is locked per object, as the loop
    /// locks it per request, so that a LIST never waits for a whole export.
    pub(super) fn blobs(&self, kind: Resource, by: StandIn<'_>) -> Vec<Exported> {
        match self.map(kind) {
            None => self
                .nodes
                .iter()
                .filter_map(|(name, stored)| {
                    Exported::of(stored, || by.served(kind, &ObjectKey::new("", name)))
                })
                .collect(),
            Some(map) => map
                .iter()
                .filter_map(|(key, stored)| Exported::of(stored, || by.served(kind, key)))
                .collect(),
        }
    }

    /// The upstream object's compact JSON (a copy when it is kept packed or as the served
    /// object).
    pub(super) fn bytes(&self, kind: Resource, key: &ObjectKey, by: StandIn<'_>) -> Option<Raw> {
        self.blob(kind, key, by)?.bytes()
    }

    /// The upstream object, decoded.
    pub(super) fn value(&self, kind: Resource, key: &ObjectKey, by: StandIn<'_>) -> Option<Value> {
        parse(&self.bytes(kind, key, by)?)
    }

    /// Whether the stored upstream object of `key` has exactly these bytes.
    pub(super) fn same(
        &self,
        kind: Resource,
        key: &ObjectKey,
        bytes: &[u8],
        by: StandIn<'_>,
    ) -> bool {
        match self.get(kind, key) {
            None => false,
            Some(Stored::Own(raw)) => bytes::eq(raw, bytes),
            Some(Stored::Packed(packed)) => {
                packed.len() == bytes.len()
                    && packed.with_unpacked(|raw| bytes::eq(raw, bytes)) == Some(true)
            }
            Some(Stored::AsServed) => by
                .served(kind, key)
                .is_some_and(|served| served.unstamped_eq(bytes)),
        }
    }

    /// [`UpstreamObjects::same`] of a listed object, without unpacking it where it was kept
    /// packed (a relist's unchanged pruned objects compare packed to packed).
    pub(super) fn same_listed(
        &self,
        kind: Resource,
        key: &ObjectKey,
        listed: &Listed,
        by: StandIn<'_>,
    ) -> bool {
        let stored = self.get(kind, key);
        let packed = listed.as_is.as_ref().and_then(|f| f.packed.as_ref());
        match (stored, listed.bytes(), packed) {
            (None, _, _) => false,
            // Packed both (a pruned object's list item or watch event): compared packed, not
            // unpacked, whether or not the whole bytes came too.
            (Some(Stored::Packed(stored)), _, Some(packed)) => stored.packs_same(packed),
            (_, Some(bytes), _) => self.same(kind, key, bytes, by),
            (_, None, Some(packed)) => packed
                .with_unpacked(|raw| self.same(kind, key, raw, by))
                .unwrap_or(false),
            (_, None, None) => false,
        }
    }

    /// Before a recomputation may change the served object: keep the upstream bytes again.
    pub(super) fn materialize(&mut self, kind: Resource, key: &ObjectKey, by: StandIn<'_>) {
        if matches!(self.get(kind, key), Some(Stored::AsServed)) {
            let bytes = self.bytes(kind, key, by);
            if let (Some(bytes), Some(stored)) = (bytes, self.get_mut(kind, key)) {
                *stored = Stored::Own(bytes);
            }
        }
    }

    /// After a publication: drop the upstream bytes if the served object carries them, else
    /// leave them for [`UpstreamObjects::pack_pending`].
    pub(super) fn settle(&mut self, kind: Resource, key: &ObjectKey, by: StandIn<'_>) {
        let Some(Stored::Own(raw)) = self.get(kind, key) else {
            return;
        };
        let same = by
            .served(kind, key)
            .is_some_and(|served| served.unstamped_eq(raw));
        if !same {
            self.to_pack.push((kind, key.clone()));
        } else if let Some(stored) = self.get_mut(kind, key) {
            *stored = Stored::AsServed;
        }
    }

    /// Packs up to `max` of the upstream bytes kept for pruned objects since the last call
    /// ([`crate::cache::pack`]); returns how many are left. The writer calls it after each change
    /// is applied and served, a batch at a time between its messages. A list's endpoint objects
    /// come packed already (packed as the list is decoded, on the reflector's thread: packing a
    /// list's worth in the change that applies it delayed readiness, and packing it here
    /// afterwards left the unpacked bytes' holes behind in the allocator); what is left here is a
    /// watch event's object, or one a relabel or edge-health change newly prunes.
    pub(super) fn pack_pending(&mut self, max: usize) -> usize {
        let batch = self
            .to_pack
            .split_off(self.to_pack.len().saturating_sub(max));
        for (kind, key) in batch {
            let Some(Stored::Own(raw)) = self.get(kind, &key) else {
                continue; // packed already, served as it came, or gone
            };
            if let (Some(packed), Some(stored)) = (pack::pack(raw), self.get_mut(kind, &key)) {
                *stored = Stored::Packed(packed);
            }
        }
        self.to_pack.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::{unstamped_eq, LabelSet};

    fn served(json: &[u8], rv: u64) -> Arc<Served> {
        let key = ObjectKey::new("", "n");
        Arc::new(Served::from_parts(
            key,
            rv,
            json.to_vec(),
            LabelSet::default(),
        ))
    }

    /// Served bytes that do not carry the stamp of their RV (which the cache never makes) are
    /// refused when made whole or written: an error, not a panic, not wrong bytes on disk.
    #[test]
    fn served_bytes_without_their_stamp_are_refused() {
        let served_json = br#"{"metadata":{"name":"n","resourceVersion":"76"}}"#;
        let blob = Exported::Served(ServedBytes::new(served(served_json, 77)));
        assert_eq!(blob.bytes(), None);
        let err = blob
            .write_with(&mut |_| Ok(()))
            .expect_err("no stamp of RV 77");
        assert!(err.to_string().contains("without its stamp"), "{err}");
        // The snapshot writer passes the error on.
        let snap = crate::cache::snapshot::Snapshot {
            meta: crate::cache::snapshot::Meta {
                identity: crate::cache::snapshot::Identity {
                    hostname: "h".into(),
                    upstream: "u".into(),
                },
                written_unix_secs: 1,
                rv: 77,
                slice_kind: Resource::SlicesV1,
                cidr_kind: None,
            },
            objects: crate::cache::snapshot::Objects {
                nodes: vec![blob],
                services: Vec::new(),
                endpoints: Vec::new(),
                slices: Vec::new(),
                cidrs: Vec::new(),
            },
        };
        assert!(crate::cache::snapshot::write_to(&snap, Vec::new()).is_err());
        assert!(crate::cache::snapshot::encode(&snap).is_empty());
    }

    #[test]
    fn the_stamp_is_cut_wherever_it_sits() {
        let raw = br#"{"kind":"Node","metadata":{"labels":{"a":"b"},"name":"n"},"spec":{}}"#;
        let mid = br#"{"kind":"Node","metadata":{"labels":{"a":"b"},"name":"n","resourceVersion":"77"},"spec":{}}"#;
        assert!(unstamped_eq(raw, mid, 77));
        assert!(!unstamped_eq(raw, mid, 78), "another RV");
        let first = br#"{"metadata":{"resourceVersion":"5","name":"n"}}"#;
        assert!(unstamped_eq(br#"{"metadata":{"name":"n"}}"#, first, 5));
        let alone = br#"{"metadata":{"resourceVersion":"5"}}"#;
        assert!(unstamped_eq(br#"{"metadata":{}}"#, alone, 5));
        let changed = br#"{"kind":"Node","metadata":{"labels":{"a":"c"},"name":"n","resourceVersion":"77"},"spec":{}}"#;
        assert!(!unstamped_eq(raw, changed, 77), "content differs");
        assert_eq!(
            Exported::Served(ServedBytes::new(served(mid, 77)))
                .bytes()
                .as_deref(),
            Some(&raw[..]),
            "the stamp removed by decoding gives the same bytes"
        );
    }
}
