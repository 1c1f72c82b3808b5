//! The watch rules: which event a logged change gives a watcher with a given selection
//! (docs/SEMANTICS.md §6, "Selectors on watches"), and the [`InitialCursor`] that produces a
//! watch's initial state from the shared view as its client reads (§6.1). Pure: the watch
//! stream (`server::watch`) applies them to each log entry after its cursor, and
//! [`crate::api::wire`] frames what they return.

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::api::filter::Filter;
use crate::cache::collection::{Collection, Entry, Gone, Served};
use crate::k8s::ObjectKey;

/// An event a log entry gives a watcher ([`transition`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The object starts matching: `ADDED` with the new object.
    Added,
    /// The object keeps matching: `MODIFIED` with the new object.
    Modified,
    /// The object stops matching: `DELETED` with the old object stamped with the entry's RV.
    Deleted,
}

impl Event {
    /// Every event, in the order of their discriminants.
    pub const ALL: [Event; 3] = [Event::Added, Event::Modified, Event::Deleted];

    /// The event's `type`.
    pub fn name(self) -> &'static str {
        match self {
            Event::Added => "ADDED",
            Event::Modified => "MODIFIED",
            Event::Deleted => "DELETED",
        }
    }

    /// The object this event carries for `entry`.
    pub fn object(self, entry: &Entry) -> Option<Arc<Served>> {
        match self {
            Event::Added | Event::Modified => entry.new.clone(),
            Event::Deleted => entry.old_restamped(),
        }
    }
}

/// The event a watcher with `filter` gets for `entry`, if any.
///
/// `everything`: the filter selects every served object ([`crate::api::filter::Scope::Everything`],
/// e.g. kube-proxy's selector), so no object is matched.
pub fn transition(entry: &Entry, filter: &Filter, everything: bool) -> Option<Event> {
    let matches =
        |o: &Option<Arc<Served>>| o.as_ref().is_some_and(|s| everything || filter.matches(s));
    match (matches(&entry.old), matches(&entry.new)) {
        (false, true) => Some(Event::Added),
        (true, true) => Some(Event::Modified),
        // The old object stamped with the entry's RV (a real deletion's already is).
        (true, false) => Some(Event::Deleted),
        (false, false) => None,
    }
}

/// What an [`InitialCursor`] step hands its watcher, in stream order.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    /// A logged change to an object the watcher was already sent (its key is at or before the
    /// cursor): the event [`transition`] gives it.
    Change(&'a Entry, Event),
    /// A current object of the selection, not sent before: an `ADDED`.
    Object(&'a Arc<Served>),
}

/// A watch's initial state, produced a step at a time from the shared view instead of copied
/// up front (docs/SEMANTICS.md §6.1): the objects are sent in key order from a key cursor, and
/// what the watcher holds — every selected object up to the cursor — stays equal to what a
/// list at [`InitialCursor::at`] returns up to that key. Each step first replays the log
/// entries after `at` that touch the part already sent (entries past the cursor are skipped:
/// the cursor sends their current version when it gets there), then moves `at` to the current
/// resourceVersion and sends current objects from the cursor on. When the objects run out, the
/// initial state is complete at `at`, and the watch follows the log from there.
#[derive(Clone, Debug)]
pub struct InitialCursor {
    /// The last key sent (or passed over as not selected); `None` before the first.
    sent_upto: Option<ObjectKey>,
    /// The resourceVersion the sent prefix is consistent with.
    at: u64,
}

impl InitialCursor {
    /// A cursor that has sent nothing, over a view at resourceVersion `at`.
    pub fn new(at: u64) -> InitialCursor {
        InitialCursor {
            sent_upto: None,
            at,
        }
    }

    /// The resourceVersion what was sent is consistent with.
    pub fn at(&self) -> u64 {
        self.at
    }

    /// One step over `coll` (whose view is at `current`) for a watcher with `filter`
    /// (`everything`: as for [`transition`]). `emit` takes each item in stream order and
    /// says whether to go on ([`ControlFlow::Break`] once the watcher's output is full: the
    /// item it was given counts as sent). Returns `Ok(true)` when the initial state is
    /// complete at [`InitialCursor::at`], `Ok(false)` when `emit` stopped it first, and
    /// `Err(Gone)` when the log no longer holds the entries after `at`.
    pub fn step<'a>(
        &mut self,
        coll: &'a Collection,
        current: u64,
        filter: &Filter,
        everything: bool,
        mut emit: impl FnMut(Item<'a>) -> ControlFlow<()>,
    ) -> Result<bool, Gone> {
        for entry in coll.entries_after(self.at)? {
            let key = entry.new.as_ref().or(entry.old.as_ref()).map(|o| &o.key);
            let sent = matches!((key, &self.sent_upto), (Some(k), Some(upto)) if k <= upto);
            self.at = entry.rv;
            if let Some(event) = sent
                .then(|| transition(entry, filter, everything))
                .flatten()
            {
                if emit(Item::Change(entry, event)).is_break() {
                    return Ok(false);
                }
            }
        }
        self.at = self.at.max(current);
        let mut last: Option<&ObjectKey> = None;
        let mut done = true;
        for obj in coll.objects_from(self.sent_upto.as_ref()) {
            last = Some(&obj.key);
            if (everything || filter.matches(obj)) && emit(Item::Object(obj)).is_break() {
                done = false;
                break;
            }
        }
        if let Some(k) = last {
            self.sent_upto = Some(k.clone());
        }
        Ok(done)
    }
}

#[cfg(test)]
#[path = "transition_cursor_tests.rs"]
mod cursor_tests;

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::filter::Scope;
    use crate::api::query;
    use crate::cache::store::test_support::{self, texts};
    use crate::handoff::Change;
    use crate::k8s::Resource;

    const L: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

    fn slice(name: &str, gen: u32, extra: Option<(&str, &str)>) -> serde_json::Value {
        let mut labels = json!({"kubernetes.io/service-name": "web", "gen": gen.to_string()});
        if let Some((k, v)) = extra {
            labels[k] = json!(v);
        }
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": "default", "name": name, "labels": labels},
            // As the apiserver writes an empty slice (`null`s): its protobuf form gives it back.
            "addressType": "IPv4", "endpoints": null, "ports": null})
    }

    /// The selection of a watch of `res` with query `q` (no namespace).
    pub(crate) fn filter_of(res: Resource, q: &str) -> Filter {
        let opts = query::parse(q, res.selectable_fields()).unwrap_or_else(|e| panic!("{e:?}"));
        Filter {
            namespace: None,
            labels: opts.label_selector,
            fields: opts.field_selector,
        }
    }

    /// The v1 slices' log entries of `changes`, applied to a ready cache that serves slice "a".
    fn logged(changes: Vec<Change>) -> (Resource, Vec<Entry>) {
        let mut st = test_support::state("edge-1", 1);
        let res = Resource::SlicesV1;
        for k in [Resource::Nodes, Resource::Services, Resource::Endpoints] {
            st.apply_list(k, texts(&[]), 0);
        }
        st.apply_list(res, texts(&[slice("a", 0, None)]), 0);
        let ready_at = st.current_rv();
        let n = changes.len();
        for change in changes {
            st.apply(res, change, 0);
        }
        let entries = st.collection(res).after(ready_at, 100).unwrap_or_default();
        assert_eq!(entries.len(), n);
        (res, entries)
    }

    /// Logged entries of slice changes: two updates (a watcher whose selection the second stops
    /// matching gets its old content with the change's RV) and a deletion.
    pub(crate) fn slice_entries() -> (Resource, Vec<Entry>) {
        logged(vec![
            Change::upsert(&slice("a", 1, None)),
            Change::upsert(&slice("a", 2, Some(("gen-old", "")))),
            Change::delete(&slice("a", 2, None)),
        ])
    }

    #[test]
    fn a_selector_leaver_is_restamped_once_per_entry() {
        let (_, entries) = slice_entries();
        let leaver = &entries[1];
        let (Some(old), Some(_)) = (&leaver.old, &leaver.new) else {
            panic!("not an update");
        };
        assert_ne!(old.rv, leaver.rv);
        let a = leaver.old_restamped().unwrap_or_else(|| panic!("no old"));
        let b = leaver.old_restamped().unwrap_or_else(|| panic!("no old"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.rv, leaver.rv);
        assert_eq!(a.json()[..], old.restamped(leaver.rv).json()[..]);
        // A deletion's old content already carries the deletion's RV.
        let deletion = &entries[2];
        let d = deletion.old_restamped().unwrap_or_else(|| panic!("no old"));
        assert!(deletion.old.as_ref().is_some_and(|o| Arc::ptr_eq(o, &d)));
    }

    #[test]
    fn a_selector_change_is_an_added_or_a_deleted() {
        // "a" is served at gen 0 before the entries: it enters `gen=1`, stays in it (another
        // label changes), leaves it, and is deleted outside it; "b" comes and goes inside it.
        let (res, entries) = logged(vec![
            Change::upsert(&slice("a", 1, None)),
            Change::upsert(&slice("a", 1, Some(("x", "y")))),
            Change::upsert(&slice("a", 2, None)),
            Change::delete(&slice("a", 2, None)),
            Change::upsert(&slice("b", 1, None)),
            Change::delete(&slice("b", 1, None)),
        ]);
        let filter = filter_of(res, "labelSelector=gen%3D1");
        let got: Vec<Option<Event>> = entries
            .iter()
            .map(|e| transition(e, &filter, false))
            .collect();
        use Event::*;
        let want = [
            Some(Added),
            Some(Modified),
            Some(Deleted),
            None,
            Some(Added),
            Some(Deleted),
        ];
        assert_eq!(got, want);
        // The leaver's DELETED carries its last matching content at the change's RV.
        let leaver = &entries[2];
        let obj = Deleted
            .object(leaver)
            .unwrap_or_else(|| panic!("no object"));
        assert_eq!(obj.rv, leaver.rv);
        assert_eq!(obj.labels.get("gen"), Some("1"));
        // Everything selected: every entry is an event, by the objects' presence alone.
        let all = Filter::default();
        let got: Vec<Option<Event>> = entries.iter().map(|e| transition(e, &all, true)).collect();
        let want = [
            Some(Modified),
            Some(Modified),
            Some(Modified),
            Some(Deleted),
            Some(Added),
            Some(Deleted),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn events_for_everything_selections_skip_matching_but_are_the_same() {
        let (res, entries) = logged(vec![
            Change::upsert(&slice("b", 0, None)),
            Change::upsert(&slice("a", 1, None)),
            // Gains an excluding label: leaves the view (a deletion).
            Change::upsert(&slice("b", 1, Some(("service.kubernetes.io/headless", "")))),
            Change::delete(&slice("a", 1, None)),
        ]);
        for q in [
            L,
            "",
            "labelSelector=gen%3D1",
            "fieldSelector=metadata.name%3Da",
        ] {
            let filter = filter_of(res, q);
            let everything = filter.scope(res) == Scope::Everything;
            assert_eq!(everything, q == L || q.is_empty(), "{q}");
            let events = |skip: bool| -> Vec<Option<(&'static str, Vec<u8>)>> {
                entries
                    .iter()
                    .map(|e| {
                        let event = transition(e, &filter, skip)?;
                        Some((event.name(), event.object(e)?.json().to_vec()))
                    })
                    .collect()
            };
            assert_eq!(events(everything), events(false), "{q}");
        }
    }
}
