//! The watch rules (`api::transition`) and the watch framing (`api::wire`) fed arbitrary label
//! and field selectors, a path namespace, and arbitrary sequences of relabels and deletions of
//! EndpointSlices or Nodes (labels that enter and leave the selection, the excluding labels of
//! the admission filter included). Invariants: a watcher that starts from the selected objects
//! and applies every event it is given holds, after every change, exactly what a LIST with the
//! same selection returns (an ADDED only for an object it does not hold, a MODIFIED or DELETED
//! only for one it does, no event for one that neither matched nor matches), and so does a
//! second watcher that takes its initial state from an `InitialCursor` a few events at a time
//! between the changes (once complete, and after every later change); every event's
//! object carries the change's resourceVersion; skipping the matching for an "everything"
//! selection gives the same events; every event is one HTTP chunk of the right size, the JSON
//! one an event line with its type and object, the shared framing the same bytes as framing
//! the event alone.
#![no_main]
use std::collections::BTreeMap;
use std::ops::ControlFlow;

use grid_wrapper::api::filter::{Filter, Scope};
use grid_wrapper::api::handlers::select;
use grid_wrapper::api::negotiate::Format;
use grid_wrapper::api::query;
use grid_wrapper::api::transition::{transition, Event, InitialCursor, Item};
use grid_wrapper::api::wire::{self, Segment};
use grid_wrapper::cache::store::{Settings, State};
use grid_wrapper::cache::collection::{Entry, Retention, Served};
use grid_wrapper::handoff::Change;
use grid_wrapper::k8s::Resource;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const KEYS: [&str; 4] = [
    "a",
    "b",
    "service.kubernetes.io/headless",
    "service.kubernetes.io/service-proxy-name",
];
const NAMESPACES: [&str; 2] = ["default", "other"];

/// A label selector of up to three requirements over [`KEYS`], from `bytes`.
fn label_selector(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| {
            let k = KEYS[usize::from(b % 4)];
            match (b >> 2) % 6 {
                0 => format!("{k}=x"),
                1 => format!("{k}!=x"),
                2 => k.to_string(),
                3 => format!("!{k}"),
                4 => format!("{k} in (x,y)"),
                _ => format!("{k} notin (y)"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn field_selector(b: u8) -> &'static str {
    ["", "metadata.name=o-1", "metadata.namespace=default", "metadata.name!=o-2", "metadata.name=o-1,metadata.namespace=other"]
        [usize::from(b % 5)]
}

fn percent_encoded(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// An object's labels from `mask`: `a` absent, `x`, `y` or empty; `b`; the excluding labels.
fn labels(mask: u8) -> Value {
    let mut l = json!({"kubernetes.io/service-name": "s"});
    match mask & 3 {
        1 => l["a"] = json!("x"),
        2 => l["a"] = json!("y"),
        3 => l["a"] = json!(""),
        _ => {}
    }
    if mask & 4 != 0 {
        l["b"] = json!("x");
    }
    if mask & 0x18 == 0x18 {
        l[KEYS[2]] = json!("");
    }
    if mask & 0x60 == 0x60 {
        l[KEYS[3]] = json!("p");
    }
    l
}

fn object(res: Resource, i: u8, mask: u8) -> Value {
    let name = format!("o-{}", i % 4);
    if res == Resource::Nodes {
        return json!({"kind":"Node","apiVersion":"v1","metadata":{"name":name,"labels":labels(mask)}});
    }
    json!({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","addressType":"IPv4",
        "metadata":{"namespace":NAMESPACES[usize::from(i >> 2) % 2],"name":name,"labels":labels(mask)},
        "endpoints":[{"addresses":["10.0.0.1"]}]})
}

fn concat(segments: &[Segment]) -> Vec<u8> {
    segments.iter().flat_map(|s| s.as_bytes().iter().copied()).collect()
}

/// One chunk: its size line in lower-case hex, exactly that many bytes, CRLF. Returns the data.
fn chunk_data(chunk: &[u8]) -> &[u8] {
    let line_end = chunk.windows(2).position(|w| w == b"\r\n").expect("a chunk-size line");
    let size = std::str::from_utf8(&chunk[..line_end]).expect("hex digits");
    assert_eq!(size, size.to_ascii_lowercase());
    let size = usize::from_str_radix(size, 16).expect("a chunk size");
    let data = &chunk[line_end + 2..];
    assert_eq!(data.len(), size + 2, "the chunk size");
    assert!(data.ends_with(b"\r\n"));
    &data[..size]
}

/// Frames `entry`'s `event` in both formats and checks each frame.
fn check_frames(res: Resource, entry: &Entry, event: Event) {
    let obj = event.object(entry).expect("an event carries an object");
    for format in [Format::Json, Format::Protobuf] {
        let shared = concat(&wire::entry_event(format, res, entry, event).expect("an event"));
        let alone = concat(&wire::event(format, res, event.name(), &obj));
        assert_eq!(shared, alone, "{event:?} {format:?}: shared framing differs");
        let data = chunk_data(&shared);
        if format == Format::Json {
            let line = data.strip_suffix(b"\n").expect("an event line ends with a newline");
            let v: Value = serde_json::from_slice(line).expect("an event line is JSON");
            assert_eq!(v["type"], event.name());
            let want: Value = serde_json::from_slice(&obj.json()).expect("served JSON");
            assert_eq!(v["object"], want);
        }
    }
}

type Held = BTreeMap<String, Vec<u8>>;

/// Applies `event` of an object at `rv` to `held`, as an informer would: an ADDED only for an
/// object it does not hold, a MODIFIED or DELETED only for one it does.
fn apply(held: &mut Held, event: Event, obj: &Served, rv: u64) {
    let key = obj.key.to_string();
    assert_eq!(obj.rv, rv, "an event's object carries its change's RV");
    match event {
        Event::Added => assert!(held.insert(key.clone(), obj.json().to_vec()).is_none(), "ADDED of {key}, held"),
        Event::Modified => assert!(held.insert(key.clone(), obj.json().to_vec()).is_some(), "MODIFIED of {key}, not held"),
        Event::Deleted => assert!(held.remove(&key).is_some(), "DELETED of {key}, not held"),
    }
}

/// A watcher that takes its initial state from an [`InitialCursor`], `budget` events per step,
/// then follows the log.
struct Slow {
    held: Held,
    cursor: InitialCursor,
    /// Where it follows the log from, once its initial state is complete.
    log_at: Option<u64>,
}

impl Slow {
    fn step(&mut self, st: &State, res: Resource, filter: &Filter, everything: bool, budget: usize) {
        if self.log_at.is_some() {
            return;
        }
        let held = &mut self.held;
        let mut taken = 0;
        let done = st.with_view(|v| {
            self.cursor.step(v.collection(res), v.current_rv(), filter, everything, |item| {
                match item {
                    Item::Change(entry, event) => {
                        apply(held, event, &event.object(entry).expect("an object"), entry.rv)
                    }
                    Item::Object(obj) => apply(held, Event::Added, obj, obj.rv),
                }
                taken += 1;
                if taken >= budget { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
            })
        });
        if done.expect("the log holds the entries after the cursor") {
            self.log_at = Some(self.cursor.at());
            assert_eq!(self.cursor.at(), st.current_rv());
            assert_eq!(*held, selected(st, res, filter), "the initial state differs from a LIST");
        }
    }

    /// Once complete: the log entries after the cursor.
    fn follow(&mut self, st: &State, res: Resource, filter: &Filter, everything: bool) {
        let Some(at) = self.log_at else { return };
        let entries = st.collection(res).after(at, usize::MAX).expect("the log");
        for entry in &entries {
            if let Some(e) = transition(entry, filter, everything) {
                apply(&mut self.held, e, &e.object(entry).expect("an object"), entry.rv);
            }
        }
        self.log_at = Some(st.current_rv());
        assert_eq!(self.held, selected(st, res, filter), "the slow watcher differs from a LIST");
    }
}

fn selected(st: &State, res: Resource, filter: &Filter) -> Held {
    st.with_view(|v| select(res, filter, v))
        .iter()
        .map(|o| (o.key.to_string(), o.json().to_vec()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((head, ops)) = data.split_first_chunk::<4>() else { return };
    let res = if head[0] & 0x80 != 0 { Resource::Nodes } else { Resource::SlicesV1 };
    let labels_len = usize::from(head[0] % 4).min(ops.len());
    let (selector_bytes, ops) = ops.split_at(labels_len);
    let mut q = format!("labelSelector={}", percent_encoded(&label_selector(selector_bytes)));
    let fields = field_selector(head[1]);
    if !fields.is_empty() {
        q += &format!("&fieldSelector={}", percent_encoded(fields));
    }
    let Ok(opts) = query::parse(&q, res.selectable_fields()) else { return };
    let namespace = match head[2] % 3 {
        1 | 2 if res.namespaced() => Some(NAMESPACES[usize::from(head[2] % 3) - 1].to_string()),
        _ => None,
    };
    let filter = Filter { namespace, labels: opts.label_selector, fields: opts.field_selector };
    let everything = filter.scope(res) == Scope::Everything;

    let settings = Settings { hostname: "h".into(), wrapper_in_cluster: true, retention: Retention::for_queue(100) };
    let mut st = State::new(settings, 1);
    for kind in [Resource::Nodes, Resource::Services, Resource::Endpoints, Resource::SlicesV1] {
        st.apply_list(kind, std::iter::empty::<&str>(), 0);
    }
    // A first state from the header's last byte: each of the eight objects present or not.
    let initial: Vec<Value> = (0..8u8).filter(|i| head[3] & (1 << i) != 0).map(|i| object(res, i, i.wrapping_mul(37))).collect();
    st.apply_list(res, initial.iter().map(Value::to_string), 0);

    let mut held = selected(&st, res, &filter);
    let mut cursor = st.current_rv();
    // A second watcher that takes its initial state a few events at a time between changes.
    let mut slow = Slow { held: Held::new(), cursor: InitialCursor::new(cursor), log_at: None };
    for op in ops.chunks_exact(2).take(64) {
        slow.step(&st, res, &filter, everything, usize::from(op[1] >> 6) + 1);
        let change = if op[0] & 0x80 != 0 {
            Change::delete(&object(res, op[0], 0))
        } else {
            Change::upsert(&object(res, op[0], op[1]))
        };
        st.apply(res, change, 0);
        let entries = st.collection(res).after(cursor, usize::MAX).expect("the log holds the entries after the cursor");
        for entry in &entries {
            let event = transition(entry, &filter, everything);
            if everything {
                assert_eq!(event, transition(entry, &filter, false), "skipping the matching changed the event");
            }
            let key = entry.new.as_ref().or(entry.old.as_ref()).expect("an entry has an object").key.to_string();
            match event {
                Some(e @ (Event::Added | Event::Modified)) => {
                    assert_eq!(held.contains_key(&key), e == Event::Modified, "{e:?} of {key}");
                    let obj = e.object(entry).expect("a new object");
                    assert_eq!(obj.rv, entry.rv);
                    held.insert(key, obj.json().to_vec());
                    check_frames(res, entry, e);
                }
                Some(Event::Deleted) => {
                    assert!(held.remove(&key).is_some(), "DELETED of {key}, not held");
                    let obj = Event::Deleted.object(entry).expect("the old object");
                    assert_eq!(obj.rv, entry.rv, "a DELETED object carries the change's RV");
                    check_frames(res, entry, Event::Deleted);
                }
                None => assert!(!held.contains_key(&key), "{key} left without an event"),
            }
            cursor = entry.rv;
        }
        assert_eq!(held, selected(&st, res, &filter), "the watcher's objects differ from a LIST: {q}");
        slow.follow(&st, res, &filter, everything);
    }
    // Once changes stop, the slow watcher's initial state completes in one unbounded step.
    slow.step(&st, res, &filter, everything, usize::MAX);
    assert!(slow.log_at.is_some(), "the initial state never completes");
    slow.follow(&st, res, &filter, everything);
});
