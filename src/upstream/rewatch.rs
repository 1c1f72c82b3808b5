//! Re-watching from a resourceVersion the upstream may have left behind (docs/SEMANTICS.md §7):
//! whether a reflector first reads the upstream's current resourceVersion, and what that answer
//! says of the one it holds. Pure; the reflector makes the read.
//!
//! An apiserver whose resourceVersions went back (etcd restored from a backup, a control plane
//! rebuilt at the same address) accepts a watch from its own future without an error and sends
//! nothing on it, no event and no bookmark, until its counter passes that resourceVersion: the
//! changes made in between would never reach the cache. So before a reflector watches again
//! from an RV that did not just come from a list (or from a watch that lived out its term with
//! lines on it), it reads the upstream's current RV (a `limit=1` list without
//! `resourceVersion`: a quorum read of one item), and relists from scratch when that is lower.
//!
//! | the reflector re-watches from its RV …                             | read the current RV first? |
//! |--------------------------------------------------------------------|----------------------------|
//! | right after a list, or a read of the current RV, that gave it       | no                         |
//! | after a watch that ended normally having lived its term (`timeoutSeconds`, less [`RENEWAL_SLACK`]) with at least one event or bookmark | no: a routine renewal |
//! | after any other end: an early or empty end (an apiserver shutting down ends its watches cleanly; a failover ends them too), a broken or silent watch, a failed start | yes |
//! | issued by a relay (another grid-wrapper)                            | never: a relay answers an RV from its future with 410 (§6), and it serves whole lists, `limit` or not |
//! | that is not a whole number (RVs are opaque strings)                 | never: nothing to compare  |
//!
//! A renewal is spared the read because it is the common case (every reflector, every few
//! minutes, on every node) and the watch it ended proved the upstream was at or past the RV: a
//! replacement in the instant between the two watches gives a silent watch, which is read
//! again at its progress deadline (or at the end of its term, when the upstream is not known to
//! send bookmarks).

use crate::handoff::refused;
use crate::upstream::domain::{Role, RvOrigin};
use std::time::Duration;

/// A watch that ended this close to the end of its term (or later) lived it out.
pub(crate) const RENEWAL_SLACK: Duration = Duration::from_secs(5);

/// Why the reflector is about to watch from the RV it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rewatch {
    /// The RV is known current: a list or a read of the current RV gave it.
    Fresh,
    /// A watch from it ended normally (its stream's end), after `lasted`, having asked for
    /// `term` (`timeoutSeconds`), with `lines` events and bookmarks applied.
    Ended {
        /// How long the stream lasted.
        lasted: Duration,
        /// The `timeoutSeconds` it asked for.
        term: Duration,
        /// Events and bookmarks it carried.
        lines: u64,
    },
    /// Anything else: a broken or silent watch, a failed start.
    Interrupted,
}

/// Whether the reflector reads the upstream's current RV before watching from `rv`, issued by
/// `from` (see the module table).
pub(crate) fn read_current_first(why: Rewatch, rv: &str, from: Option<RvOrigin>) -> bool {
    if from.is_some_and(|o| o.role == Role::Relay) || rv.parse::<u64>().is_err() {
        return false;
    }
    match why {
        Rewatch::Fresh => false,
        Rewatch::Ended {
            lasted,
            term,
            lines,
        } => lines == 0 || lasted.saturating_add(RENEWAL_SLACK) < term,
        Rewatch::Interrupted => true,
    }
}

/// Whether the upstream's `current` resourceVersion is below the `held` one: its RVs went back
/// and a watch from `held` would wait silently. Whole numbers only (`refused::older`).
pub(crate) fn went_back(held: &str, current: &str) -> bool {
    refused::older(current, held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(role: Role) -> Option<RvOrigin> {
        Some(RvOrigin {
            server: 0,
            domain: 0,
            role,
        })
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn only_an_interrupted_or_short_or_empty_watch_of_the_cloud_reads_the_current_rv_first() {
        let cloud = origin(Role::Cloud);
        let ended = |lasted, term, lines| Rewatch::Ended {
            lasted: S(lasted),
            term: S(term),
            lines,
        };
        assert!(!read_current_first(Rewatch::Fresh, "100", cloud));
        assert!(read_current_first(Rewatch::Interrupted, "100", cloud));
        // A renewal: its term lived out (within the slack), lines on it.
        assert!(!read_current_first(ended(300, 300, 4), "100", cloud));
        assert!(!read_current_first(ended(296, 300, 1), "100", cloud));
        assert!(!read_current_first(ended(301, 300, 1), "100", cloud));
        // Ended early (a shutdown, a failover), or nothing on it (a silent watch's term).
        assert!(read_current_first(ended(290, 300, 4), "100", cloud));
        assert!(read_current_first(ended(2, 300, 9), "100", cloud));
        assert!(read_current_first(ended(300, 300, 0), "100", cloud));
        // An unknown origin (a fake) is read as the cloud.
        assert!(read_current_first(Rewatch::Interrupted, "100", None));
        // Never for a relay's RV, never for an RV that is not a whole number.
        assert!(!read_current_first(
            Rewatch::Interrupted,
            "100",
            origin(Role::Relay)
        ));
        for rv in ["", "abc", "-1", "1.5", "18446744073709551616"] {
            assert!(!read_current_first(Rewatch::Interrupted, rv, cloud), "{rv}");
        }
    }

    #[test]
    fn went_back_compares_whole_numbers_only() {
        assert!(went_back("5000", "4000"));
        assert!(went_back("10", "9"));
        assert!(!went_back("5000", "5000"), "no change since: resume");
        assert!(!went_back("5000", "5001"));
        // Numbers, not strings: "900" < "1000".
        assert!(!went_back("900", "1000"));
        assert!(went_back("1000", "900"));
        // Opaque RVs are never compared.
        assert!(!went_back("5000", "abc"));
        assert!(!went_back("abc", "1"));
        assert!(!went_back("5000", ""));
    }
}
