//! Failure bookkeeping of one reflector (pure: the reflector passes the `Instant`s in): failure
//! *episodes* for logging and the `failing` stat, and the count of failures without progress that
//! makes a reflector give up its resourceVersion (see the table in `reflector.rs`).
//!
//! An episode opens at the first failure after a success (or at startup) and ends at the next
//! success: watch progress (an event or bookmark, or a watch that ended normally), or a
//! successful list if no watch failed in the episode. A list alone does not end an episode in
//! which a watch failed: a reflector that can list but not watch (RBAC without `watch`, a proxy
//! that breaks streams) would otherwise log a new episode on every relist.

use crate::upstream::client::UpstreamError;
use std::time::{Duration, Instant};

/// Consecutive failures without progress, of requests naming a resourceVersion (watch starts,
/// watch streams, relists at an RV), after which the reflector drops that RV and relists from
/// scratch (no `resourceVersion`): no RV is retried forever.
pub const MAX_FAILURES_WITHOUT_PROGRESS: u32 = 3;

/// Phase of a failed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A LIST.
    List,
    /// A WATCH: its start or its stream.
    Watch,
}

/// The kind of a failure: its log hint, and what makes a failure "new" inside an episode (each
/// kind is logged at WARN once per episode, the repeats at DEBUG).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// 401/403: credentials or RBAC.
    Auth,
    /// TLS handshake or certificate failure.
    Tls,
    /// No connection, or a connection that broke.
    Unreachable,
    /// A connection that stayed silent past its progress deadline.
    Stalled,
    /// An HTTP error status other than 401/403 (each code is its own kind).
    Status(u16),
    /// A body or watch event that could not be decoded or was too long.
    Undecodable,
    /// A list over `--max-list-items`, abandoned.
    TooManyItems,
    /// Anything else (a protocol error, a watch that ended at once).
    Other,
}

impl Cause {
    /// Classifies an upstream error.
    pub(crate) fn of(e: &UpstreamError) -> Cause {
        match e {
            UpstreamError::Tls(_) => Cause::Tls,
            UpstreamError::Unreachable(_) => Cause::Unreachable,
            UpstreamError::Stalled(_) => Cause::Stalled,
            UpstreamError::Status {
                code: 401 | 403, ..
            } => Cause::Auth,
            UpstreamError::Status { code, .. } => Cause::Status(*code),
            UpstreamError::Decode(_) | UpstreamError::TooLarge { .. } => Cause::Undecodable,
            UpstreamError::TooManyItems { .. } => Cause::TooManyItems,
            _ => Cause::Other,
        }
    }

    /// What the operator should check, appended to the WARN line.
    pub(crate) fn hint(self) -> &'static str {
        match self {
            Cause::Auth => "; check RBAC (list and watch) and the kubeconfig's credentials",
            // Fix (tests/it/tls_upstream.rs): a TLS/certificate failure (wrong CA, rejected client
            // certificate) does not heal by retrying; like RBAC it is the operator's to fix.
            Cause::Tls => "; check the kubeconfig's certificate-authority and client certificate",
            Cause::TooManyItems => "; the objects of the last complete list stay served",
            Cause::Status(429) => {
                "; the apiserver is shedding load (API Priority and Fairness): each request waits \
                 for its Retry-After before it is asked again"
            }
            Cause::Stalled => {
                "; presumed dead: check the network path and any proxy or load balancer in \
                 between"
            }
            _ => "",
        }
    }
}

/// How a watch (its start or its stream) failed.
pub(crate) enum WatchFailure {
    /// 410 Expired: the RV left the upstream's window (routine; relist at the RV).
    Expired(String),
    /// The upstream refused the RV as too large: its RVs went backwards.
    TooLarge(String),
    /// A line we cannot apply (undecodable or over-long): relist at the RV.
    Undecodable(String),
    /// Anything else: rewatch at the RV.
    Other(Cause, String),
}

impl WatchFailure {
    /// The failure as logged.
    pub(crate) fn text(&self) -> &str {
        match self {
            WatchFailure::Expired(t)
            | WatchFailure::TooLarge(t)
            | WatchFailure::Undecodable(t)
            | WatchFailure::Other(_, t) => t,
        }
    }

    /// Classifies a watch that failed to start.
    pub(crate) fn of_error(e: &UpstreamError) -> WatchFailure {
        let text = format!("watch failed to start: {e}");
        if e.is_rv_too_large() {
            WatchFailure::TooLarge(text)
        } else if e.status_code() == Some(410) {
            WatchFailure::Expired(text)
        } else {
            WatchFailure::Other(Cause::of(e), text)
        }
    }
}

/// A failure episode that just ended: how many failures, over how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ended {
    /// Failures in the episode.
    pub(crate) failures: u32,
    /// From its first failure to its end.
    pub(crate) lasted: Duration,
}

/// The bookkeeping; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct Episode {
    /// Failures in the open episode; 0 = none open.
    failures: u32,
    /// When the open episode began.
    since: Option<Instant>,
    /// The kinds of failure logged at WARN in the open episode.
    warned: Vec<Cause>,
    /// A watch failed in the open episode.
    watch_failed: bool,
    /// Failures naming an RV since the last watch progress or from-scratch relist.
    stuck: u32,
    /// A from-scratch relist was decided since the last watch progress.
    scratched: bool,
}

impl Episode {
    /// Records a failure at `now`; `true` if it is to be logged at WARN (it opens the episode, or
    /// it is of a kind not seen yet in the episode), else at DEBUG.
    pub(crate) fn fail(&mut self, now: Instant, phase: Phase, cause: Cause) -> bool {
        if self.failures == 0 {
            self.since = Some(now);
            self.warned.clear();
        }
        self.failures = self.failures.saturating_add(1);
        self.watch_failed |= phase == Phase::Watch;
        let warn = !self.warned.contains(&cause);
        if warn {
            self.warned.push(cause);
        }
        warn
    }

    /// Whether an episode is open.
    pub(crate) fn failing(&self) -> bool {
        self.failures > 0
    }

    /// A successful list: ends the episode unless a watch failed in it.
    pub(crate) fn listed(&mut self, now: Instant) -> Option<Ended> {
        if self.watch_failed {
            None
        } else {
            self.end(now)
        }
    }

    /// Watch progress (an event or bookmark, or a watch that ended normally): ends any episode
    /// and restarts the count of failures without progress.
    pub(crate) fn progressed(&mut self, now: Instant) -> Option<Ended> {
        self.stuck = 0;
        self.scratched = false;
        self.end(now)
    }

    fn end(&mut self, now: Instant) -> Option<Ended> {
        if self.failures == 0 {
            return None;
        }
        let ended = Ended {
            failures: self.failures,
            lasted: self
                .since
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s)),
        };
        *self = Episode {
            stuck: self.stuck,
            scratched: self.scratched,
            ..Episode::default()
        };
        Some(ended)
    }

    /// Counts a failure of a request that named an RV; returns the failures without progress.
    pub(crate) fn stuck(&mut self) -> u32 {
        self.stuck = self.stuck.saturating_add(1);
        self.stuck
    }

    /// A relist from scratch was decided: the count without progress starts over. `true` if it
    /// is the first since the last watch progress (only then may it skip the backoff: an
    /// upstream that refuses even the RVs of its own fresh lists must not make a hot loop).
    pub(crate) fn scratch(&mut self) -> bool {
        self.stuck = 0;
        !std::mem::replace(&mut self.scratched, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_warns_once_per_cause_and_ends_with_progress() {
        let t0 = Instant::now();
        let mut e = Episode::default();
        assert!(!e.failing());
        assert_eq!(e.progressed(t0), None, "no episode, nothing to report");
        assert!(
            e.fail(t0, Phase::Watch, Cause::Other),
            "first failure warns"
        );
        assert!(!e.fail(t0, Phase::Watch, Cause::Other), "repeat: debug");
        assert!(
            e.fail(t0, Phase::List, Cause::Auth),
            "new cause warns again"
        );
        assert!(!e.fail(t0, Phase::List, Cause::Auth));
        assert!(
            !e.fail(t0, Phase::Watch, Cause::Other),
            "a kind already warned of in this episode: debug"
        );
        assert!(e.failing());
        assert_eq!(e.listed(t0), None, "a watch failed: a list does not end it");
        let end = e.progressed(t0 + Duration::from_secs(7));
        assert_eq!(
            end,
            Some(Ended {
                failures: 5,
                lasted: Duration::from_secs(7)
            })
        );
        assert!(!e.failing());
        // A list-only episode ends with a list; the next one warns afresh.
        assert!(e.fail(t0, Phase::List, Cause::Other));
        assert_eq!(e.listed(t0).map(|x| x.failures), Some(1));
        assert!(e.fail(t0, Phase::List, Cause::Other));
    }

    #[test]
    fn each_new_kind_of_failure_warns_once_per_episode() {
        let t0 = Instant::now();
        let mut e = Episode::default();
        // A connection error opens the episode; an HTML list body after it is a new kind.
        assert!(e.fail(t0, Phase::List, Cause::Unreachable));
        assert!(e.fail(t0, Phase::List, Cause::Undecodable));
        assert!(!e.fail(t0, Phase::List, Cause::Unreachable));
        assert!(!e.fail(t0, Phase::List, Cause::Undecodable));
        // Each HTTP code is its own kind; so is a stall.
        assert!(e.fail(t0, Phase::List, Cause::Status(500)));
        assert!(e.fail(t0, Phase::List, Cause::Status(503)));
        assert!(!e.fail(t0, Phase::List, Cause::Status(500)));
        assert!(e.fail(t0, Phase::Watch, Cause::Stalled));
        assert!(!e.fail(t0, Phase::Watch, Cause::Stalled));
        // A new episode warns afresh.
        e.progressed(t0);
        assert!(e.fail(t0, Phase::List, Cause::Unreachable));
    }

    #[test]
    fn stuck_count_and_scratch_budget() {
        let t0 = Instant::now();
        let mut e = Episode::default();
        assert_eq!((e.stuck(), e.stuck()), (1, 2));
        assert!(e.scratch(), "first relist from scratch since progress");
        assert_eq!(e.stuck(), 1, "scratch restarts the count");
        assert!(!e.scratch(), "second one without progress must back off");
        e.listed(t0);
        assert!(!e.scratch(), "a list is no watch progress");
        e.progressed(t0);
        assert!(e.scratch());
        assert_eq!(e.stuck(), 1);
        e.progressed(t0);
        assert_eq!(e.stuck(), 1, "progress restarts the count");
    }

    #[test]
    fn causes_and_hints() {
        let st = |code| UpstreamError::Status {
            code,
            reason: String::new(),
            message: String::new(),
            causes: vec![],
            retry_after: None,
        };
        assert_eq!(Cause::of(&st(401)), Cause::Auth);
        assert_eq!(Cause::of(&st(403)), Cause::Auth);
        assert_eq!(Cause::of(&st(500)), Cause::Status(500));
        assert_eq!(Cause::of(&UpstreamError::Tls("bad ca".into())), Cause::Tls);
        assert_eq!(
            Cause::of(&UpstreamError::Unreachable("refused".into())),
            Cause::Unreachable
        );
        assert_eq!(
            Cause::of(&UpstreamError::Stalled("silent".into())),
            Cause::Stalled
        );
        assert_eq!(
            Cause::of(&UpstreamError::Decode(
                crate::upstream::decode::DecodeError::Json("<html>".into())
            )),
            Cause::Undecodable
        );
        assert!(Cause::Stalled.hint().contains("presumed dead"));
        assert!(Cause::Auth.hint().contains("RBAC"));
        assert!(Cause::Tls.hint().contains("certificate-authority"));
        assert_eq!(
            Cause::of(&UpstreamError::TooManyItems { limit: 3 }),
            Cause::TooManyItems
        );
        assert!(Cause::TooManyItems.hint().contains("stay served"));
        assert_eq!(Cause::Other.hint(), "");
        assert_eq!(Cause::Status(500).hint(), "");
    }
}
