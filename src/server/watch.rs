//! One open watch stream: initial events (produced from the shared view as the client reads,
//! [`InitialCursor`]), then the event log from its cursor, bookmarks, the deadline and the stall
//! bound (docs/SEMANTICS.md §6, §6.1). Its I/O state only: which event a log entry gives it
//! is [`crate::api::transition`]'s rule, and the events' bytes are [`crate::api::wire`]'s (each
//! served object's shared bytes, and a log entry's framing made once per format and shared by
//! all its watchers: the fan-out of one change to many watchers allocates nothing per watcher).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::api::filter::{Filter, Scope};
use crate::api::handlers::{InitialEnd, WatchPlan};
use crate::api::negotiate::Format;
use crate::api::transition::{transition, InitialCursor, Item};
use crate::api::wire::{self, EventChunk};
use crate::cache::collection::Gone;
use crate::cache::published::Published;
use crate::k8s::Resource;
use crate::server::counters::{self, EndReason};
use crate::server::outbound::Outbound;
use crate::server::watchers::{query_value, WatchHandle, WatchInfo};

/// Bookmark period on a quiet stream (the apiserver's cadence).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// The final bookmark is sent this long before the deadline.
pub const FINAL_BOOKMARK_BEFORE: Duration = Duration::from_secs(2);
/// Stop pulling log entries once this many bytes wait unsent.
pub const HIGH_WATER: usize = 256 * 1024;
/// Stop producing initial events once this many bytes wait unsent: what a watch that does not
/// read holds while its initial events are due (its queue holds a pointer and a few bytes of
/// framing per event, so smaller than [`HIGH_WATER`] as many thousands may be due at once).
pub const INITIAL_HIGH_WATER: usize = 64 * 1024;

/// Why a watch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `timeoutSeconds` elapsed.
    Deadline,
    /// The client could not keep up: more than the queue bound waited (never thinned).
    TooSlow,
    /// The log no longer holds the entries after the cursor.
    Evicted,
    /// The client read nothing of what waited for it for the stall bound
    /// (`--watch-stall-timeout`), whatever the event rate.
    Stalled,
}

impl End {
    /// The `reason` this end is counted under.
    pub fn reason(self) -> EndReason {
        match self {
            End::Deadline => EndReason::Deadline,
            End::TooSlow => EndReason::TooSlow,
            End::Evicted => EndReason::Evicted,
            End::Stalled => EndReason::Stalled,
        }
    }
}

/// Stalled watches end in herds (a wedged client holds several, a herd of followers relists
/// at once): the first end of an episode is logged at WARN, the others at DEBUG, every one
/// counted. An episode ends after [`STALL_EPISODE_GAP`] seconds without a stalled end.
#[derive(Debug)]
pub struct StallEpisodes(AtomicU64);

/// Seconds without a stalled end that close an episode of them.
pub const STALL_EPISODE_GAP: u64 = 60;

impl StallEpisodes {
    /// No episode yet.
    pub const fn new() -> StallEpisodes {
        StallEpisodes(AtomicU64::new(0))
    }

    /// Records a stalled end at `now_unix`; true when it opens an episode (log it at WARN).
    pub fn opens_episode(&self, now_unix: u64) -> bool {
        // Stored plus one: 0 is "never".
        let last = self.0.swap(now_unix.saturating_add(1), Relaxed);
        last == 0 || now_unix.saturating_add(1) > last.saturating_add(STALL_EPISODE_GAP)
    }
}

impl Default for StallEpisodes {
    fn default() -> Self {
        StallEpisodes::new()
    }
}

/// The process's episodes of stalled watches (both ports).
pub static STALLS: StallEpisodes = StallEpisodes::new();

/// The initial state still being sent: its cursor over the view and the marker that ends it.
#[derive(Debug)]
struct Initial {
    cursor: InitialCursor,
    end: InitialEnd,
}

/// State of one watch stream.
#[derive(Debug)]
pub struct Watcher {
    res: Resource,
    /// The events' wire format.
    format: Format,
    filter: Filter,
    /// `filter` selects every served object of `res`: events need no matching.
    everything: bool,
    /// The resourceVersion what was queued is consistent with: the last log entry consumed
    /// (while the initial state is sent, its cursor's [`InitialCursor::at`]).
    cursor: u64,
    /// The initial state, while objects of it remain to be sent.
    initial: Option<Initial>,
    bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    final_bookmark_sent: bool,
    /// The current RV when this stream's output last backed up (≥ its high water unsent), or
    /// `None` while it drains. Only entries published after it count against the queue bound.
    blocked_at: Option<u64>,
    /// The stall bound: the stream ends when its client has read nothing for this long while
    /// bytes wait for it.
    stall: Duration,
    /// When the client last read something (or had nothing waiting), as of the last tick.
    progress_at: Instant,
    /// Bytes were written to the socket since the last tick.
    wrote: bool,
    /// The body is chunked (an HTTP/1.1 client); otherwise close-delimited (HTTP/1.0): each
    /// event's chunk framing is left out ([`wire::unchunked`]).
    chunked: bool,
    /// The stream's entry in the registry of open watches, once tracked.
    track: Option<WatchHandle>,
}

/// How a stream is sent, from its connection.
#[derive(Clone, Copy, Debug)]
pub struct StreamOptions {
    /// The stall bound: the stream ends when its client has read nothing for this long while
    /// bytes wait for it (`--watch-stall-timeout`).
    pub stall: Duration,
    /// Chunked body (HTTP/1.1) or close-delimited (HTTP/1.0).
    pub chunked: bool,
}

/// Queues `event`, chunk-framed or not.
fn push_event(out: &mut Outbound, event: EventChunk, chunked: bool) {
    if chunked {
        out.push_all(event);
    } else {
        out.push_all(wire::unchunked(event));
    }
}

impl Watcher {
    /// Starts a stream sent as `opts` says. Its initial events are produced by
    /// [`Watcher::pump`] as the socket drains. Returns `None` (after queueing the ERROR event)
    /// when the plan is expired.
    pub fn start(
        plan: WatchPlan,
        now: Instant,
        opts: StreamOptions,
        out: &mut Outbound,
    ) -> Option<Watcher> {
        if let Some(err) = &plan.expired {
            push_event(out, wire::error_event(plan.format, err), opts.chunked);
            counters::global().watch_ended(EndReason::Expired);
            return None;
        }
        let initial = plan.initial.then(|| Initial {
            cursor: InitialCursor::new(plan.cursor),
            end: plan.initial_end,
        });
        Some(Watcher {
            res: plan.res,
            format: plan.format,
            everything: plan.filter.scope(plan.res) == Scope::Everything,
            filter: plan.filter,
            cursor: plan.cursor,
            initial,
            bookmarks: plan.bookmarks,
            deadline: now + Duration::from_secs(plan.timeout_secs),
            next_bookmark: now + BOOKMARK_EVERY,
            final_bookmark_sent: false,
            blocked_at: None,
            stall: opts.stall,
            progress_at: now,
            wrote: false,
            chunked: opts.chunked,
            track: None,
        })
    }

    /// Attaches the stream's registry entry (see `server::watchers`): from now on the cursor
    /// and event count are published there, and dropping the watcher unregisters it.
    pub fn track(&mut self, handle: WatchHandle) {
        handle.set_cursor(self.cursor);
        handle.set_initial(self.initial.is_some());
        self.track = Some(handle);
    }

    /// Publishes the bytes waiting for the client (to the registry, if tracked) after a write
    /// that took `written` bytes.
    pub fn set_unsent(&mut self, bytes: usize, written: usize) {
        self.wrote |= written > 0;
        if let Some(t) = &self.track {
            t.set_unsent(bytes);
        }
    }

    /// Counts the stream ended for `reason` (if tracked; otherwise dropping it says nothing).
    pub fn ended(&self, reason: EndReason) {
        if let Some(t) = &self.track {
            t.end(reason);
        }
    }

    /// The watched resource.
    pub fn resource(&self) -> Resource {
        self.res
    }

    /// The last log entry (resourceVersion) queued to the stream.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// What the registry of open streams keeps about this one, started by `peer` with the raw
    /// `query` (selectors shown as given).
    pub fn info(&self, peer: &str, query: &str, now_unix: u64, relay: bool) -> WatchInfo {
        WatchInfo {
            peer: peer.to_string(),
            resource: self.res,
            namespace: self.filter.namespace.clone(),
            label_selector: query_value(query, "labelSelector"),
            field_selector: query_value(query, "fieldSelector"),
            started_unix: now_unix,
            cursor: self.cursor,
            relay,
        }
    }

    /// Whether the initial state is still being sent.
    pub fn sending_initial(&self) -> bool {
        self.initial.is_some()
    }

    /// The unsent bytes at which [`Watcher::pump`] stops: [`INITIAL_HIGH_WATER`] while the
    /// initial events are due, [`HIGH_WATER`] after.
    pub fn high_water(&self) -> usize {
        if self.initial.is_some() {
            INITIAL_HIGH_WATER
        } else {
            HIGH_WATER
        }
    }

    /// When [`Watcher::tick`] next has something to do.
    pub fn next_timer(&self) -> Instant {
        let mut t = self.deadline.min(self.progress_at + self.stall);
        if self.bookmarks {
            t = t.min(self.next_bookmark);
            if !self.final_bookmark_sent {
                t = t.min(
                    self.deadline
                        .checked_sub(FINAL_BOOKMARK_BEFORE)
                        .unwrap_or(self.deadline),
                );
            }
        }
        t
    }

    /// Moves events into `out` until it holds [`Watcher::high_water`] bytes: the initial state's next
    /// objects while it is being sent (and the log entries that touch what it already sent),
    /// then the log entries after the cursor. `queue` is the watcher's bound
    /// (`--notify-channel-size`): when the socket is backed up and more entries than that wait,
    /// the watch ends.
    pub fn pump(
        &mut self,
        view: &Published,
        out: &mut Outbound,
        queue: usize,
        now: Instant,
    ) -> Result<(), End> {
        let coll = view.collection(self.res);
        // Fix (protocol_slow test): the slow-consumer rule (docs/SEMANTICS.md §6) counted the
        // whole backlog after the cursor, so a watch resuming into more than `queue` large
        // entries was ended as "too slow" as soon as its socket filled, although it was reading
        // at full speed — the replay it is entitled to (§6, "Starting a watch") is not a queue
        // overflow. Now only entries published while the stream stays backed up count, like the
        // original's channel.
        if out.len() >= self.high_water() {
            let since = *self.blocked_at.get_or_insert(view.current_rv());
            if coll.pending(self.cursor.max(since)) > queue {
                return Err(End::TooSlow);
            }
            return Ok(());
        }
        self.blocked_at = None;
        let mut sent = 0;
        let mut result = self.pump_initial(view, out, &mut sent);
        if result.is_ok() && self.initial.is_none() {
            match coll.entries_after(self.cursor) {
                Ok(entries) => {
                    for entry in entries {
                        if out.len() >= HIGH_WATER {
                            break;
                        }
                        let event = transition(entry, &self.filter, self.everything)
                            .and_then(|e| wire::entry_event(self.format, self.res, entry, e));
                        if let Some(event) = event {
                            push_event(out, event, self.chunked);
                            sent += 1;
                        }
                        self.cursor = entry.rv;
                    }
                }
                Err(_) => result = Err(End::Evicted),
            }
        }
        if sent > 0 {
            self.next_bookmark = now + BOOKMARK_EVERY;
            counters::global().watch_events(self.res, sent);
        }
        if let Some(t) = &self.track {
            t.add_events(sent);
            t.set_cursor(self.cursor);
            t.set_initial(self.initial.is_some());
        }
        result
    }

    /// The initial state's next step ([`InitialCursor::step`]), while it is being sent; its end
    /// marker once it is complete. Adds the events queued to `sent`.
    fn pump_initial(
        &mut self,
        view: &Published,
        out: &mut Outbound,
        sent: &mut usize,
    ) -> Result<(), End> {
        let Some(initial) = &mut self.initial else {
            return Ok(());
        };
        let (format, res, chunked) = (self.format, self.res, self.chunked);
        let step = initial.cursor.step(
            view.collection(res),
            view.current_rv(),
            &self.filter,
            self.everything,
            |item| {
                let event = match item {
                    Item::Change(entry, event) => wire::entry_event(format, res, entry, event),
                    Item::Object(obj) => Some(wire::event(format, res, "ADDED", obj)),
                };
                if let Some(event) = event {
                    push_event(out, event, chunked);
                    *sent += 1;
                }
                if out.len() >= INITIAL_HIGH_WATER {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        );
        self.cursor = initial.cursor.at();
        match step {
            Err(Gone) => Err(End::Evicted),
            Ok(false) => Ok(()),
            Ok(true) => {
                let initial_end = match initial.end {
                    InitialEnd::None => None,
                    InitialEnd::Bookmark => Some(false),
                    InitialEnd::InitialEventsEnd => Some(true),
                };
                if let Some(initial_end) = initial_end {
                    let marker = wire::bookmark(format, res, self.cursor, initial_end);
                    push_event(out, marker, chunked);
                }
                self.initial = None;
                Ok(())
            }
        }
    }

    /// Bookmarks and the deadline. Call after [`Watcher::pump`]; bookmarks are only sent when
    /// the watcher has consumed every entry (so the bookmark RV is true for it).
    /// A stream whose client read nothing for the stall bound while bytes waited ends
    /// ([`End::Stalled`]).
    pub fn tick(&mut self, view: &Published, out: &mut Outbound, now: Instant) -> Result<(), End> {
        if now >= self.deadline {
            return Err(End::Deadline);
        }
        if std::mem::take(&mut self.wrote) || out.is_empty() {
            self.progress_at = now;
        } else if now >= self.progress_at + self.stall {
            return Err(End::Stalled);
        }
        if !self.bookmarks
            || self.initial.is_some()
            || view.collection(self.res).pending(self.cursor) > 0
        {
            return Ok(());
        }
        let final_due = !self.final_bookmark_sent && now + FINAL_BOOKMARK_BEFORE >= self.deadline;
        if now >= self.next_bookmark || final_due {
            self.cursor = self.cursor.max(view.current_rv());
            if let Some(t) = &self.track {
                t.set_cursor(self.cursor);
            }
            let bookmark = wire::bookmark(self.format, self.res, self.cursor, false);
            push_event(out, bookmark, self.chunked);
            self.next_bookmark = now + BOOKMARK_EVERY;
            self.final_bookmark_sent |= final_due;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_ends_warn_once_per_episode() {
        let e = StallEpisodes::new();
        assert!(e.opens_episode(1000));
        assert!(!e.opens_episode(1000));
        assert!(!e.opens_episode(1000 + STALL_EPISODE_GAP));
        // Each end extends the episode; a gap longer than the bound opens a new one.
        assert!(!e.opens_episode(1000 + 2 * STALL_EPISODE_GAP));
        assert!(e.opens_episode(1001 + 3 * STALL_EPISODE_GAP));
    }
}
