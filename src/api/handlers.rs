//! Cache-backed answers: list, get and watch starts, computed from the [`Published`] view under
//! its lock (the readers' view, not the writer's state).
//! Pure: the server frames the [`Answer`] and streams watches.

use std::sync::Arc;

use crate::api::filter::{Filter, Scope};
use crate::api::negotiate::Format;
use crate::api::query::{self, ListOptions, RvMatch};
use crate::api::route::Route;
use crate::api::wire::{self, Segment};
use crate::cache::collection::Served;
use crate::cache::published::Published;
use crate::k8s::status::ApiError;
use crate::k8s::{ObjectKey, Resource};

/// Default watch lifetime without `timeoutSeconds`: 1800 s × (1 + jitter), the apiserver's rule
/// (docs/SEMANTICS.md §6).
pub const DEFAULT_WATCH_SECS: u64 = 1800;

/// A complete response.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub code: u16,
    /// The body's format.
    pub format: Format,
    /// `Retry-After` seconds, if any.
    pub retry_after: Option<u32>,
    /// Body pieces, concatenated.
    pub body: Vec<Segment>,
}

impl Reply {
    /// A `Status` error reply in JSON.
    pub fn error(err: &ApiError) -> Reply {
        Reply::error_as(Format::Json, err)
    }

    /// A `Status` error reply in `format` (the negotiated one, as the apiserver answers errors).
    pub fn error_as(format: Format, err: &ApiError) -> Reply {
        Reply {
            code: err.code,
            format,
            retry_after: err.retry_after,
            body: vec![Segment::Owned(wire::status(format, err))],
        }
    }

    /// A 200 reply of `body` in `format`.
    fn ok(format: Format, body: Vec<Segment>) -> Reply {
        Reply {
            code: 200,
            format,
            retry_after: None,
            body,
        }
    }

    /// Body length in bytes.
    pub fn len(&self) -> usize {
        self.body.iter().map(|s| s.as_bytes().len()).sum()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What opens a watch stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialEnd {
    /// No marker after the initial events.
    None,
    /// A plain BOOKMARK at the snapshot RV (RV ""/"0" start with `allowWatchBookmarks`).
    Bookmark,
    /// The WatchList BOOKMARK with `k8s.io/initial-events-end: "true"` (docs/SEMANTICS.md §6).
    InitialEventsEnd,
}

/// A watch to start: initial events, then log entries after `cursor`, until the deadline. The
/// initial events are not copied here: the stream produces them from the view as its client
/// reads (`api::transition::InitialCursor`, docs/SEMANTICS.md §6.1).
#[derive(Debug)]
pub struct WatchPlan {
    /// The watched resource.
    pub res: Resource,
    /// Selection applied to every event (transitions: docs/SEMANTICS.md §6).
    pub filter: Filter,
    /// The resourceVersion the stream starts at: entries with rv > cursor follow (the initial
    /// state, if any, is the selection at this resourceVersion or a later one).
    pub cursor: u64,
    /// Whether the current selection is sent first, as `ADDED` events in key order.
    pub initial: bool,
    /// Marker after the initial events.
    pub initial_end: InitialEnd,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// Stream lifetime in seconds.
    pub timeout_secs: u64,
    /// Set when the requested RV cannot be served: send 200, one ERROR event, then close.
    pub expired: Option<ApiError>,
    /// The events' format.
    pub format: Format,
}

/// A list to answer: its selected objects, framed by [`ListPlan::reply`] once the view's lock is
/// released (the first protobuf list of a resource encodes its objects, a JSON list decodes the
/// objects held only in protobuf: no writer waits for that).
#[derive(Debug)]
pub struct ListPlan {
    /// The listed resource.
    pub res: Resource,
    /// The list's resourceVersion.
    pub rv: u64,
    /// The body's format.
    pub format: Format,
    /// The selected objects, in key order.
    pub items: Vec<Arc<Served>>,
}

impl ListPlan {
    /// The complete reply: each item's shared bytes in the plan's format.
    pub fn reply(&self) -> Reply {
        Reply::ok(
            self.format,
            wire::list(self.format, self.res, self.rv, self.items.iter()),
        )
    }
}

/// The answer to one routed request.
#[derive(Debug)]
pub enum Answer {
    /// A complete response.
    Reply(Reply),
    /// A list, to frame off the view's lock.
    List(ListPlan),
    /// A watch stream.
    Watch(Box<WatchPlan>),
}

impl Answer {
    /// The complete reply of a list or a reply (`None` for a watch).
    pub fn into_reply(self) -> Option<Reply> {
        match self {
            Answer::Reply(r) => Some(r),
            Answer::List(plan) => Some(plan.reply()),
            Answer::Watch(_) => None,
        }
    }
}

/// Answers a request for a cache-backed route in `format` (negotiated when its fate was
/// decided, `api::decide`). `jitter` ∈ [0, 1) spreads default watch lifetimes.
pub fn handle(route: &Route, query: &str, format: Format, view: &Published, jitter: f64) -> Answer {
    let (res, namespace, name) = match route {
        Route::Collection { res, namespace } => (*res, namespace, None),
        Route::Object {
            res,
            namespace,
            name,
        } => (*res, namespace, Some(name)),
    };
    if !view.is_ready() {
        return Answer::Reply(Reply::error_as(format, &not_ready()));
    }
    if let Some(name) = name {
        let key = ObjectKey::new(namespace.as_deref().unwrap_or(""), name);
        return Answer::Reply(match view.collection(res).get(&key) {
            Some(obj) => Reply::ok(format, wire::object(format, res, obj)),
            None => Reply::error_as(format, &ApiError::not_found(res.plural(), name)),
        });
    }
    let opts = match query::parse(query, res.selectable_fields()) {
        Ok(o) => o,
        Err(e) => return Answer::Reply(Reply::error_as(format, &e)),
    };
    let filter = Filter {
        namespace: namespace.clone(),
        labels: opts.label_selector.clone(),
        fields: opts.field_selector.clone(),
    };
    if opts.watch {
        Answer::Watch(Box::new(watch(res, filter, &opts, view, jitter, format)))
    } else {
        list(res, &filter, &opts, view, format)
    }
}

/// The 503 answered before the first sync (docs/SEMANTICS.md §7).
pub fn not_ready() -> ApiError {
    ApiError::unavailable(
        "grid-wrapper has not finished its initial sync with the apiserver",
        Some(1),
    )
}

/// Objects of `res` selected by `filter`, in key order.
pub fn select(res: Resource, filter: &Filter, view: &Published) -> Vec<Arc<Served>> {
    match filter.scope(res) {
        Scope::Everything => view.collection(res).objects().cloned().collect(),
        Scope::PerItem => select_per_item(res, filter, view),
    }
}

/// [`select`] matching every candidate object against `filter`.
fn select_per_item(res: Resource, filter: &Filter, view: &Published) -> Vec<Arc<Served>> {
    let coll = view.collection(res);
    // Fast path for `metadata.name=<n>` (kube-proxy's node informer).
    if let Some(name) = filter.fields.required("metadata.name") {
        let namespaces: Vec<String> = match (
            &filter.namespace,
            filter.fields.required("metadata.namespace"),
        ) {
            (Some(ns), _) => vec![ns.clone()],
            (None, Some(ns)) => vec![ns.to_string()],
            (None, None) if !res.namespaced() => vec![String::new()],
            (None, None) => {
                return coll
                    .objects()
                    .filter(|o| filter.matches(o))
                    .cloned()
                    .collect();
            }
        };
        return namespaces
            .iter()
            .filter_map(|ns| coll.get(&ObjectKey::new(ns, name)))
            .filter(|o| filter.matches(o))
            .cloned()
            .collect();
    }
    coll.objects()
        .filter(|o| filter.matches(o))
        .cloned()
        .collect()
}

fn list(
    res: Resource,
    filter: &Filter,
    opts: &ListOptions,
    view: &Published,
    format: Format,
) -> Answer {
    let current = view.current_rv();
    if opts.resource_version_match == Some(RvMatch::Exact) {
        let requested = opts.resource_version.as_deref().unwrap_or("");
        if requested.parse::<u64>().ok() != Some(current) {
            return Answer::Reply(Reply::error_as(
                format,
                &ApiError::expired(requested, current),
            ));
        }
    }
    // Framed off the lock, in either format: the first protobuf list of a resource encodes its
    // objects, and a JSON list decodes those held only in protobuf (`Served::json`).
    Answer::List(ListPlan {
        res,
        rv: current,
        format,
        items: select(res, filter, view),
    })
}

fn watch(
    res: Resource,
    filter: Filter,
    opts: &ListOptions,
    view: &Published,
    jitter: f64,
    format: Format,
) -> WatchPlan {
    let current = view.current_rv();
    let timeout_secs = opts.timeout_seconds.unwrap_or(
        DEFAULT_WATCH_SECS + (DEFAULT_WATCH_SECS as f64 * jitter.clamp(0.0, 1.0)) as u64,
    );
    let mut plan = WatchPlan {
        res,
        filter,
        cursor: current,
        initial: false,
        initial_end: InitialEnd::None,
        bookmarks: opts.allow_watch_bookmarks,
        timeout_secs,
        expired: None,
        format,
    };
    let rv = opts.resource_version.as_deref().unwrap_or("");
    let numeric = rv.parse::<u64>().ok();
    let horizon = view.collection(res).horizon();
    if opts.send_initial_events == Some(true) {
        // WatchList (docs/SEMANTICS.md §6): snapshot at the current RV, sorted ADDED, end marker.
        if !rv.is_empty() && numeric.is_none_or(|r| r > current) {
            plan.expired = Some(ApiError::expired(rv, current));
            return plan;
        }
        plan.initial = true;
        plan.initial_end = InitialEnd::InitialEventsEnd;
        return plan;
    }
    if opts.send_initial_events == Some(false) && rv.is_empty() {
        return plan; // from now, no initial events
    }
    match numeric {
        _ if rv.is_empty() || rv == "0" => {
            plan.initial = true;
            if plan.bookmarks {
                plan.initial_end = InitialEnd::Bookmark;
            }
        }
        Some(r) if horizon <= r && r <= current => plan.cursor = r,
        _ => plan.expired = Some(ApiError::expired(rv, current)),
    }
    plan
}

#[cfg(test)]
#[path = "handlers_tests.rs"]
mod tests;
