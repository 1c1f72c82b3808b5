//! Upstream changes prepared outside the cache lock: a relist's items decoded, cleaned and
//! re-serialized by the reflector thread, so that the writer holds the lock only to compare
//! bytes and recompute what changed.

use std::collections::BTreeMap;

use log::warn;
use serde_json::Value;

use super::{clean, excluded, raw, Raw};
use crate::k8s::ObjectKey;
use crate::upstream::kind::{Change, UpstreamKind};

/// An upstream change reduced to what the cache compares, done by the reflector thread before
/// it takes the cache lock ([`prepare`]): a list's items decoded, cleaned and re-serialized, so
/// that applying a relist under the lock only compares bytes and recomputes what changed.
#[derive(Debug)]
pub enum Prepared {
    /// A full list (initial or relist) as compact bytes by key, excluded objects dropped.
    Listed(BTreeMap<ObjectKey, Raw>),
    /// A single upsert or deletion, applied as it is.
    One(Change),
}

/// The admitted, cleaned objects of a full list as compact bytes by key.
pub(super) fn fresh(
    kind: UpstreamKind,
    items: impl Iterator<Item = Value>,
) -> BTreeMap<ObjectKey, Raw> {
    items
        .filter(|o| !excluded(kind, o))
        .filter_map(clean)
        .map(|(key, obj)| (key, raw(&obj)))
        .collect()
}

/// Prepares `change` for [`State::apply_prepared`]. Pure and lock-free. Items are reduced to
/// compact bytes as they are decoded, so the whole list never exists as `Value`s at once.
pub fn prepare(kind: UpstreamKind, change: Change) -> Prepared {
    match change {
        Change::Replace(items) => Prepared::Listed(fresh(kind, items.into_iter())),
        Change::List(texts) => Prepared::Listed(fresh(
            kind,
            texts
                .into_iter()
                .filter_map(|t| match serde_json::from_str(&t) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        warn!("{kind:?}: skipping an undecodable list item: {e}");
                        None
                    }
                }),
        )),
        other => Prepared::One(other),
    }
}
