//! Upstream changes prepared before they reach the writer, on the reflector's thread. A list,
//! the one shape a list has ([`ListPreparer`]), is taken item by item as it is read; a watch
//! event's object ([`WatchPreparer`]) the same way, one item: each object decoded, cleaned and
//! made canonical compact bytes there (`canonical::Decoder::item`, no `serde_json::Value`), a
//! Node other than the local one reduced to its facts, an endpoint object's spans recorded and
//! its bytes packed, so that the writer only compares bytes, recomputes what changed and
//! publishes (`State::apply_item`, the same for a listed item and a watched one).

use std::collections::{BTreeMap, BTreeSet};

use log::warn;
use serde_json::Value;

use super::{clean, excluded, excluding, node_facts, raw, Raw};
use crate::cache::canonical::{self, AsIs, Item};
use crate::cache::pack;
use crate::handoff::refused::{self, Reason};
use crate::handoff::{Change, Oversized, Watched};
use crate::k8s::ObjectKey;
use crate::k8s::Resource;

/// An upstream change as the reflector thread hands it to the writer: a list's items, or a watch
/// event's object, decoded, cleaned and re-serialized, so that applying either only compares
/// bytes and recomputes what changed.
#[derive(Debug)]
pub enum Prepared {
    /// A full list (initial or relist) as compact bytes by key, excluded objects dropped.
    Listed(BTreeMap<ObjectKey, Listed>),
    /// A watch event's object added or modified, prepared as a list's item is.
    Upserted(ObjectKey, Listed),
    /// A watch event's object that carries an excluding label: it left the view (a deletion).
    Left(ObjectKey),
    /// A watch event's deletion.
    Deleted(ObjectKey),
}

/// How a prepared list holds its endpoint objects' bytes ([`super::State::hold_for`] chooses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Whole, as well as packed: a kind's first list, every object of which is published (the
    /// writer would otherwise unpack each one again under its lock, which delayed readiness).
    Whole,
    /// Only packed where there is a packed copy: a relist, whose objects mostly compare equal
    /// to the stored ones (packed to packed), so the list is held once, not twice, while the
    /// whole cache is in memory too.
    PackedOnly,
}

/// One object of a prepared list.
#[derive(Debug)]
pub struct Listed {
    /// Its canonical compact bytes; `None` when they are kept only packed (`as_is.packed`: an
    /// endpoint object of a list, whose whole bytes are let go of as soon as they are packed,
    /// so that a prepared list holds its endpoint objects once, packed, not twice).
    bytes: Option<Raw>,
    /// For an endpoint object read from text, what publishing it as it came needs.
    pub as_is: Option<AsIs>,
    /// The item was over the object bound and not kept: its size. The cache keeps serving the
    /// version it holds of this key (stale), so the key is not absent from the list.
    oversized: Option<u64>,
}

impl Listed {
    /// Whole bytes, as listed.
    pub fn new(bytes: Raw, as_is: Option<AsIs>) -> Listed {
        Listed {
            bytes: Some(bytes),
            as_is,
            oversized: None,
        }
    }

    /// An item of `bytes` over the object bound, known by its key only.
    fn oversized(bytes: u64) -> Listed {
        Listed {
            bytes: None,
            as_is: None,
            oversized: Some(bytes),
        }
    }

    /// The size of an item over the object bound (`None` for a kept one).
    pub fn too_large(&self) -> Option<u64> {
        self.oversized
    }

    /// The same, held as `hold` says (only the packed copy, if `as_is` has one, for
    /// [`Hold::PackedOnly`]).
    fn held(bytes: Raw, as_is: Option<AsIs>, hold: Hold) -> Listed {
        let packed = as_is.as_ref().is_some_and(|f| f.packed.is_some());
        Listed {
            bytes: (hold == Hold::Whole || !packed).then_some(bytes),
            as_is,
            oversized: None,
        }
    }

    /// Its canonical compact bytes if they were kept whole.
    pub fn bytes(&self) -> Option<&Raw> {
        self.bytes.as_ref()
    }

    /// Its canonical compact bytes (unpacked again if they were kept packed); `None` only for
    /// packed bytes that do not unpack, which this process never makes.
    pub fn whole(&self) -> Option<Raw> {
        match (&self.bytes, &self.as_is) {
            (Some(bytes), _) => Some(bytes.clone()),
            (None, Some(facts)) => facts.packed.as_ref()?.with_unpacked(|raw| Raw::from(raw)),
            (None, None) => None,
        }
    }
}

/// The admitted, cleaned objects of a full list as compact bytes by key.
pub(super) fn fresh(
    kind: Resource,
    items: impl Iterator<Item = Value>,
) -> BTreeMap<ObjectKey, Raw> {
    let mut warned = false;
    items
        .filter_map(|o| admitted(kind, o, &mut warned))
        .collect()
}

/// The oracle a list's path is checked against (by the tests and the `list_item` fuzz target):
/// the items decoded into `Value`s first, then admitted, cleaned and serialized one by one (as a
/// watch event is), as a prepared list. The running server never takes a list so: it takes
/// every list through a [`ListPreparer`].
pub fn values_oracle(kind: Resource, items: impl IntoIterator<Item = Value>) -> Prepared {
    let listed = fresh(kind, items.into_iter())
        .into_iter()
        .map(|(key, bytes)| (key, Listed::new(bytes, None)));
    Prepared::Listed(listed.collect())
}

/// An object of a list, cleaned, as compact bytes, unless it is dropped (excluded, nameless)
/// or refused ([`refused::misfit`]: counted, and named in a WARN once per list by `warned`).
fn admitted(kind: Resource, obj: Value, warned: &mut bool) -> Option<(ObjectKey, Raw)> {
    if excluded(kind, &obj) {
        return None;
    }
    let key = ObjectKey::of(&obj)?;
    if let Some(reason) = refused::misfit_value(kind, &obj) {
        refuse_item(kind, &key, reason, warned);
        return None;
    }
    clean(kind, obj).map(|(key, obj)| (key, raw(&obj)))
}

/// A list item that does not fit `kind`, refused: counted, and named in one WARN per list (the
/// others at DEBUG), so that a lying upstream cannot flood the log.
fn refuse_item(kind: Resource, key: &ObjectKey, reason: Reason, warned: &mut bool) {
    refused::record(kind, reason);
    let text = format!(
        "{kind:?}: refusing list item {key:?}: it does not fit the resource listed ({}); not served",
        reason.label()
    );
    if std::mem::replace(warned, true) {
        log::debug!("{text}");
    } else {
        warn!("{text} (further ones in this list at debug level; counted in grid_wrapper_objects_refused_total)");
    }
}

/// A list prepared item by item as its texts come (by the reflector while it reads the list:
/// each item's text is let go of as soon as it is prepared): the one way a list reaches the
/// cache, in the server (`writer::CacheSink`), in `grid-wrapper check`, the tests and
/// the benches ([`super::State::apply_list`]). It gives what [`values_oracle`] gives.
#[derive(Debug)]
pub struct ListPreparer {
    kind: Resource,
    hold: Hold,
    decoder: canonical::Decoder,
    /// `None`: every endpoint object is packed as it is decoded; else only those of these
    /// Services ([`ListPreparer::packing_only_for`]).
    packs: Option<BTreeSet<ObjectKey>>,
    out: BTreeMap<ObjectKey, Listed>,
    pushed: usize,
    /// An item of this list was refused and named in a WARN ([`refuse_item`]).
    warned_misfit: bool,
    /// A list of Nodes: every Node but this one (the local one) is kept as its facts only
    /// ([`ListPreparer::facts_only_except`]).
    facts_except: Option<String>,
}

impl ListPreparer {
    /// An empty list of `kind`, its endpoint objects held as `hold` says.
    pub fn new(kind: Resource, hold: Hold) -> Self {
        ListPreparer {
            kind,
            hold,
            decoder: canonical::Decoder::packing(),
            packs: None,
            out: BTreeMap::new(),
            pushed: 0,
            warned_misfit: false,
            facts_except: None,
        }
    }

    /// The same, keeping of every Node but `local` only its facts (`store/node_facts.rs`),
    /// reduced here, off the writer (a list of any other kind is unchanged).
    pub fn facts_only_except(self, local: &str) -> Self {
        ListPreparer {
            facts_except: Some(local.to_string()),
            ..self
        }
    }

    /// The same, packing only the endpoint objects of `services` (an object of any other
    /// Service is held whole only, whatever the hold).
    pub fn packing_only_for(self, services: BTreeSet<ObjectKey>) -> Self {
        ListPreparer {
            decoder: canonical::Decoder::default(),
            packs: Some(services),
            ..self
        }
    }

    /// How it holds its endpoint objects.
    pub fn hold(&self) -> Hold {
        self.hold
    }

    /// Prepares the next item (dropped if excluded; skipped with a WARN if undecodable).
    pub fn push(&mut self, text: &str) {
        let kind = self.kind;
        let skip = |e: serde_json::Error| warn!("{kind:?}: skipping an undecodable list item: {e}");
        self.pushed += 1;
        let kept = match self.decoder.item(text, kind, excluding(kind)) {
            Ok(Item::Kept(key, bytes, mut as_is)) => {
                if let (Some(services), Some(facts)) = (&self.packs, &mut as_is) {
                    let service = match kind {
                        Resource::Endpoints => Some(&key),
                        _ => facts.service.as_ref(),
                    };
                    if service.is_some_and(|s| services.contains(s)) {
                        facts.packed = pack::pack(&bytes);
                    }
                }
                Some((key, Listed::held(bytes, as_is, self.hold)))
            }
            Ok(Item::Dropped) => None,
            Ok(Item::Misfit(key, reason)) => {
                refuse_item(kind, &key, reason, &mut self.warned_misfit);
                None
            }
            Ok(Item::Slow) => serde_json::from_str(text)
                .map_err(skip)
                .ok()
                .and_then(|obj| admitted(kind, obj, &mut self.warned_misfit))
                .map(|(key, bytes)| (key, Listed::new(bytes, None))),
            Err(e) => {
                skip(e);
                None
            }
        };
        let kept = kept.map(|(key, listed)| match (&self.facts_except, listed.bytes()) {
            (Some(local), Some(bytes)) if kind == Resource::Nodes && *key.name != **local => {
                let facts = node_facts::reduce_bytes(bytes).unwrap_or_else(|| bytes.clone());
                (key, Listed::new(facts, None))
            }
            _ => (key, listed),
        });
        self.out.extend(kept);
    }

    /// An item over the object bound, not kept: recorded by its key (when its first bytes named
    /// it), so that applying the list keeps the version the cache holds instead of deleting it.
    /// An item not named cannot be told from an absent one.
    pub fn skipped(&mut self, item: &Oversized) {
        let Some(name) = item.name.as_deref().filter(|n| !n.is_empty()) else {
            return;
        };
        let key = ObjectKey::new(item.namespace.as_deref().unwrap_or(""), name);
        self.out.insert(key, Listed::oversized(item.bytes));
    }

    /// Forgets the items so far (the list is read again).
    pub fn clear(&mut self) {
        self.out.clear();
        self.pushed = 0;
    }

    /// The list's kind.
    pub fn kind(&self) -> Resource {
        self.kind
    }

    /// How many items were pushed (kept or not).
    pub fn pushed(&self) -> usize {
        self.pushed
    }

    /// The Node it keeps whole besides every other's facts, in a list of Nodes
    /// ([`ListPreparer::facts_only_except`]; `None`: every item whole).
    pub fn facts_except(&self) -> Option<&str> {
        match self.kind {
            Resource::Nodes => self.facts_except.as_deref(),
            _ => None,
        }
    }

    /// The prepared list, for [`super::State::apply_prepared`].
    pub fn finish(self) -> Prepared {
        Prepared::Listed(self.out)
    }

    /// The prepared objects by key.
    pub(super) fn into_objects(self) -> BTreeMap<ObjectKey, Listed> {
        self.out
    }
}

/// Prepares watch events' changes on the reflector's thread ([`WatchPreparer::prepare`]), with
/// the decoder's buffers kept from event to event.
#[derive(Debug)]
pub struct WatchPreparer {
    decoder: canonical::Decoder,
    /// Every Node but this one (the local one) is kept as its facts only, as a list's
    /// ([`ListPreparer::facts_only_except`]); `None`: Nodes whole (a relay).
    facts_except: Option<String>,
}

impl WatchPreparer {
    /// A preparer that packs every endpoint object's bytes (whether the object is pruned, which
    /// keeps the packed copy, is only known on the writer) and reduces every Node but `local`
    /// to its facts (`None`: none, a relay).
    pub fn new(facts_except: Option<&str>) -> Self {
        WatchPreparer {
            decoder: canonical::Decoder::packing(),
            facts_except: facts_except.map(str::to_string),
        }
    }

    /// The Node it keeps whole besides every other's facts (`None`: every Node whole).
    pub fn facts_except(&self) -> Option<&str> {
        self.facts_except.as_deref()
    }

    /// `change` of `kind` prepared for [`super::State::apply_prepared`]: an upserted object
    /// made canonical by the list's decoder (`canonical::Decoder::item`: cleaned, typed, its
    /// endpoint spans and packed bytes; a Node reduced to its facts), an object over the bound
    /// as a list's item over it is (by its key), an object carrying an excluding label as its
    /// leaving, a deletion by its key. `None` for an object that is not one (undecodable,
    /// nameless, or not of `kind`: the reflector has checked it already).
    pub fn prepare(&mut self, kind: Resource, change: Change) -> Option<Prepared> {
        let Watched { key, text } = match change {
            Change::Upsert(watched) => watched,
            Change::Delete(key) => return Some(Prepared::Deleted(key)),
            Change::Oversized(item) => {
                // As a list's item over the bound: known by its key (`None` unnamed).
                let name = item.name.as_deref().filter(|n| !n.is_empty())?;
                let key = ObjectKey::new(item.namespace.as_deref().unwrap_or(""), name);
                return Some(Prepared::Upserted(key, Listed::oversized(item.bytes)));
            }
        };
        let read = self.decoder.item(&text, kind, excluding(kind));
        self.decoder.shrink();
        let (key, listed) = match read {
            Ok(Item::Kept(key, bytes, as_is)) => (key, Listed::new(bytes, as_is)),
            Ok(Item::Dropped) if !key.name.is_empty() => return Some(Prepared::Left(key)),
            Ok(Item::Slow) => {
                let obj: Value = serde_json::from_str(&text).ok()?;
                if excluded(kind, &obj) {
                    return Some(Prepared::Left(key));
                }
                refused::misfit_value(kind, &obj).is_none().then_some(())?;
                let (key, obj) = clean(kind, obj)?;
                (key, Listed::new(raw(&obj), None))
            }
            Ok(Item::Dropped | Item::Misfit(..)) | Err(_) => return None,
        };
        let listed = match (&self.facts_except, listed.bytes()) {
            (Some(local), Some(bytes)) if kind == Resource::Nodes && *key.name != **local => {
                let facts = node_facts::reduce_bytes(bytes).unwrap_or_else(|| bytes.clone());
                Listed::new(facts, None)
            }
            _ => listed,
        };
        Some(Prepared::Upserted(key, listed))
    }
}
