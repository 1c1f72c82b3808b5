//! One log line per episode of refused connections (docs/SEMANTICS.md §12.1), per port: the
//! first refusal is logged naming its source and reason; the ones after it are only counted and
//! summarised at most once per [`SUMMARY_INTERVAL`]; an interval without a refusal ends the
//! episode. A flood of bad handshakes or an attacker filling the relay port then writes a handful
//! of lines, not one per connection, while every refusal is still counted in `/metrics`.
//!
//! Pure: the loop passes the time in and logs the lines returned.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::api::decide::Side;
use crate::server::counters::Refusal;

/// Least time between two summary lines of one port's episode.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// An open episode: refusals since its last line.
#[derive(Debug)]
struct RefusalRun {
    last_line: Instant,
    since: [u64; Refusal::ALL.len()],
}

/// The episode bookkeeping of one port.
#[derive(Debug)]
pub struct EpisodeLog {
    side: Side,
    episode: Option<RefusalRun>,
}

impl EpisodeLog {
    /// No episode open.
    pub fn new(side: Side) -> EpisodeLog {
        EpisodeLog {
            side,
            episode: None,
        }
    }

    /// A connection from `peer` was refused for `reason` (`detail` says more): the line to log
    /// if it opens an episode.
    pub fn refused(
        &mut self,
        now: Instant,
        reason: Refusal,
        peer: &str,
        detail: &str,
    ) -> Option<String> {
        if let Some(ep) = &mut self.episode {
            if let Some(n) = Refusal::ALL
                .iter()
                .position(|r| *r == reason)
                .and_then(|i| ep.since.get_mut(i))
            {
                *n += 1;
            }
            return None;
        }
        self.episode = Some(RefusalRun {
            last_line: now,
            since: [0; Refusal::ALL.len()],
        });
        Some(format!(
            "{} port: connection from {peer} refused ({}): {detail}; further refusals are counted in grid_wrapper_connections_refused_total and summarised here every {} s",
            self.side.name(),
            reason.name(),
            SUMMARY_INTERVAL.as_secs()
        ))
    }

    /// The summary line due at `now`, if any; ends an episode that had no refusal for a whole
    /// interval.
    pub fn tick(&mut self, now: Instant) -> Option<String> {
        let ep = self.episode.as_mut()?;
        let elapsed = now.saturating_duration_since(ep.last_line);
        if elapsed < SUMMARY_INTERVAL {
            return None;
        }
        let total: u64 = ep.since.iter().sum();
        if total == 0 {
            self.episode = None;
            return None;
        }
        let mut by_reason = String::new();
        for (reason, n) in Refusal::ALL.iter().zip(ep.since) {
            if n > 0 {
                let sep = if by_reason.is_empty() { "" } else { ", " };
                let _ = write!(by_reason, "{sep}{}: {n}", reason.name());
            }
        }
        ep.since = [0; Refusal::ALL.len()];
        ep.last_line = now;
        Some(format!(
            "{} port: {total} more connections refused in the last {} s ({by_reason})",
            self.side.name(),
            elapsed.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_opens_an_episode_then_summaries_at_most_every_interval() {
        let t0 = Instant::now();
        let mut log = EpisodeLog::new(Side::Relay);
        let first = log
            .refused(
                t0,
                Refusal::HandshakeRefused,
                "10.0.0.9:4000",
                "no certificate",
            )
            .expect("the first refusal is logged");
        assert!(first.contains("10.0.0.9:4000"), "{first}");
        assert!(first.contains("handshake_refused"), "{first}");
        let mut lines = 0;
        for i in 1..1000u64 {
            let now = t0 + Duration::from_millis(i);
            let reason = if i % 2 == 0 {
                Refusal::HandshakeRefused
            } else {
                Refusal::PerSource
            };
            lines += usize::from(log.refused(now, reason, "10.0.0.9:4001", "x").is_some());
            lines += usize::from(log.tick(now).is_some());
        }
        assert_eq!(lines, 0, "nothing more within the interval");
        let summary = log
            .tick(t0 + SUMMARY_INTERVAL)
            .expect("a summary once the interval is over");
        assert!(summary.contains("999 more"), "{summary}");
        assert!(summary.contains("handshake_refused: 499"), "{summary}");
        assert!(summary.contains("per_source: 500"), "{summary}");
        // A quiet interval ends the episode; the next refusal opens one with its own line.
        assert_eq!(log.tick(t0 + SUMMARY_INTERVAL * 2), None);
        let now = t0 + SUMMARY_INTERVAL * 2 + Duration::from_secs(1);
        assert!(log
            .refused(now, Refusal::HeadDeadline, "10.0.0.7:1", "slow")
            .is_some());
    }
}
