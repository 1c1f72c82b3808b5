//! [`InitialCursor`]: a watcher that takes its initial state a few events at a time while
//! objects are added, modified, deleted and relabelled in and out of its selection (before and
//! after its cursor) holds, once the cursor is done and after every later change, exactly what a
//! list returns; it is never sent an ADDED for an object it holds, nor a MODIFIED or DELETED for
//! one it does not.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde_json::{json, Value};

use super::*;
use crate::api::filter::Scope;
use crate::api::handlers::select;
use crate::cache::published::Published;
use crate::cache::store::test_support::{self, texts};
use crate::cache::store::State;
use crate::handoff::Change;
use crate::k8s::Resource;

const RES: Resource = Resource::SlicesV1;
const KEYS: usize = 24;

fn slice(i: usize, gen: u64, tag: u64) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": format!("s-{i:02}"),
            "labels": {"kubernetes.io/service-name": "web", "gen": gen.to_string()}},
        "addressType": "IPv4", "endpoints": [], "ports": [{"port": tag}]})
}

/// A ready cache serving slices s-00..s-23, every other one labelled `gen=1`.
fn cache() -> State {
    let mut st = test_support::state("edge-1", 1);
    for k in [Resource::Nodes, Resource::Services, Resource::Endpoints] {
        st.apply_list(k, texts(&[]), 0);
    }
    let slices = (0..KEYS).step_by(2).map(|i| slice(i, i as u64 % 4 / 2, 0));
    st.apply_list(RES, slices.map(|s| s.to_string()), 0);
    assert!(st.is_ready());
    st
}

fn filter(q: &str) -> (Filter, bool) {
    let filter = super::tests::filter_of(RES, q);
    let everything = filter.scope(RES) == Scope::Everything;
    (filter, everything)
}

/// What a watcher holds: key → the bytes of the last object it was sent.
type Held = BTreeMap<ObjectKey, Vec<u8>>;

/// Applies one event to `held`, checking it is one an informer can take.
fn apply(held: &mut Held, event: Event, obj: &Served, rv: u64) {
    assert_eq!(obj.rv, rv, "an event's object carries its change's RV");
    match event {
        Event::Added => assert!(
            held.insert(obj.key.clone(), obj.json().to_vec()).is_none(),
            "ADDED for {:?}, already held",
            obj.key
        ),
        Event::Modified => assert!(
            held.insert(obj.key.clone(), obj.json().to_vec()).is_some(),
            "MODIFIED for {:?}, not held",
            obj.key
        ),
        Event::Deleted => assert!(
            held.remove(&obj.key).is_some(),
            "DELETED for {:?}, not held",
            obj.key
        ),
    }
}

/// A list's answer, as a watcher would hold it.
fn listed(v: &Published, f: &Filter) -> Held {
    select(RES, f, v)
        .iter()
        .map(|o| (o.key.clone(), o.json().to_vec()))
        .collect()
}

/// One step of `cursor` taking at most `budget` events into `held`. Returns whether the
/// initial state is complete.
fn step(
    st: &State,
    cursor: &mut InitialCursor,
    f: &(Filter, bool),
    budget: usize,
    held: &mut Held,
) -> bool {
    st.with_view(|v| {
        let mut taken = 0;
        let done = cursor.step(v.collection(RES), v.current_rv(), &f.0, f.1, |item| {
            match item {
                Item::Change(entry, event) => {
                    let obj = event.object(entry).unwrap_or_else(|| panic!("no object"));
                    apply(held, event, &obj, entry.rv);
                }
                Item::Object(obj) => apply(held, Event::Added, obj, obj.rv),
            }
            taken += 1;
            if taken >= budget {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        let done = done.unwrap_or_else(|_| panic!("gone"));
        if done {
            // Complete: what it holds is a list at the cursor's RV, the view's current one.
            assert_eq!(cursor.at(), v.current_rv());
            assert_eq!(*held, listed(v, &f.0), "complete at {}", cursor.at());
        }
        done
    })
}

/// The `n`-th change of a deterministic sequence over every key: creations, updates, relabels
/// in and out of `gen=1`, deletions.
fn change(n: u64) -> Change {
    let x = n
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 33;
    let i = (x % KEYS as u64) as usize;
    match (x >> 8) % 4 {
        0 => Change::delete(&slice(i, 0, 0)),
        g => Change::upsert(&slice(i, g % 2, n)),
    }
}

#[test]
fn a_slow_watcher_ends_up_holding_what_a_list_returns() {
    for q in [
        "",
        "labelSelector=gen%3D1",
        "fieldSelector=metadata.name%21%3Ds-04",
    ] {
        // (A watcher that takes fewer events per step than the changes between its steps can
        // never catch up, in the initial state as in the log.)
        for budget in [2, 3, 5] {
            let mut st = cache();
            let f = filter(q);
            let mut held = Held::new();
            let mut cursor = InitialCursor::new(st.current_rv());
            let mut n = 0;
            let mut steps = 0;
            while !step(&st, &mut cursor, &f, budget, &mut held) {
                // A change between steps, anywhere in the key space.
                n += 1;
                st.apply(RES, change(n), 0);
                steps += 1;
                assert!(
                    steps < 10 * KEYS,
                    "{q} {budget}: the cursor never completes"
                );
            }
            assert!(steps > 0, "{q} {budget}: completed in one step");
            // Then the log, as the watch follows it from the cursor's RV.
            for _ in 0..30 {
                n += 1;
                st.apply(RES, change(n), 0);
            }
            st.with_view(|v| {
                let coll = v.collection(RES);
                let entries = coll
                    .entries_after(cursor.at())
                    .unwrap_or_else(|_| panic!("gone"));
                for entry in entries {
                    if let Some(event) = transition(entry, &f.0, f.1) {
                        let obj = event.object(entry).unwrap_or_else(|| panic!("no object"));
                        apply(&mut held, event, &obj, entry.rv);
                    }
                }
                assert_eq!(held, listed(v, &f.0), "{q} {budget}: after the log");
            });
        }
    }
}

/// A cache, a watcher of all of it and its cursor, after a first step that sent one object.
fn one_sent() -> (State, (Filter, bool), Held, InitialCursor) {
    let st = cache();
    let f = filter("");
    let mut held = Held::new();
    let mut cursor = InitialCursor::new(st.current_rv());
    assert!(!step(&st, &mut cursor, &f, 1, &mut held));
    (st, f, held, cursor)
}

#[test]
fn changes_past_the_cursor_are_sent_once_as_their_current_version() {
    let (mut st, f, held, mut cursor) = one_sent();
    assert_eq!(held.len(), 1);
    // s-10 (past the cursor) is updated twice, s-00 (sent) once, s-01 (before it) is created.
    st.apply(RES, Change::upsert(&slice(10, 0, 1)), 0);
    st.apply(RES, Change::upsert(&slice(10, 0, 2)), 0);
    st.apply(RES, Change::upsert(&slice(0, 0, 3)), 0);
    st.apply(RES, Change::upsert(&slice(1, 0, 4)), 0);
    let mut items = Vec::new();
    let done = st.with_view(|v| {
        cursor.step(v.collection(RES), v.current_rv(), &f.0, f.1, |item| {
            items.push(match item {
                Item::Change(e, ev) => (ev, e.rv, e.new.as_ref().map(|o| o.key.name.to_string())),
                Item::Object(o) => (Event::Added, o.rv, Some(o.key.name.to_string())),
            });
            ControlFlow::Continue(())
        })
    });
    assert_eq!(done, Ok(true));
    let names: Vec<(Event, String)> = items
        .iter()
        .map(|(ev, _, n)| (*ev, n.clone().unwrap_or_default()))
        .collect();
    let mut want = vec![
        (Event::Modified, "s-00".to_string()),
        (Event::Added, "s-01".to_string()),
    ];
    want.extend(
        (2..KEYS)
            .step_by(2)
            .map(|i| (Event::Added, format!("s-{i:02}"))),
    );
    assert_eq!(names, want);
    // s-10 is sent once, at its last version.
    let s10 = items.iter().find(|(_, _, n)| n.as_deref() == Some("s-10"));
    assert_eq!(s10.map(|(_, rv, _)| *rv), Some(st.current_rv() - 2));
}

#[test]
fn a_cursor_behind_the_history_is_gone() {
    let (mut st, f, _, mut cursor) = one_sent();
    // More changes than the history keeps, long after: the entries after the cursor go.
    for n in 0..300 {
        st.apply(RES, change(n), 10_000 + n);
    }
    let r = st.with_view(|v| {
        cursor.step(v.collection(RES), v.current_rv(), &f.0, f.1, |_| {
            ControlFlow::Continue(())
        })
    });
    assert_eq!(r, Err(Gone));
}
