//! Percentiles, delivery analysis (apply → received by every watcher) and number formatting.

use crate::driver::ApplyRun;
use crate::watchers::WatchResult;

/// Nearest-rank percentile `p` (0–100) of `v` (sorted in place); 0 when empty.
pub fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// How a paced run reached the watchers.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Changes applied.
    pub changes: usize,
    /// Events delivered (marked events of this run, over all watchers, duplicates excluded).
    pub delivered: u64,
    /// Duplicate deliveries of one change to one watcher.
    pub duplicates: u64,
    /// Changes that every watcher received.
    pub complete: usize,
    /// Per complete change: latest receive − send, ns.
    pub all_lag: Vec<u64>,
    /// Per change (in apply order): the latest receive, ns since the base, if every watcher
    /// got it.
    pub latest: Vec<Option<u64>>,
    /// Per delivery: receive − send, ns.
    pub each_lag: Vec<u64>,
    /// Watchers whose stream ended, and the first reason.
    pub ended: usize,
    /// First end reason.
    pub end_reason: Option<String>,
    /// Last delivery of this run (any watcher) − last send, ns (negative: none after it).
    pub last_after_last_send: i64,
}

impl Delivery {
    /// Every watcher got every change and no stream ended.
    pub fn all_delivered(&self) -> bool {
        self.complete == self.changes && self.ended == 0
    }

    /// p-th percentile of the every-watcher lag, ns.
    pub fn all_pct(&self, p: f64) -> u64 {
        pct(&mut self.all_lag.clone(), p)
    }

    /// Median every-watcher lag of the first and of the last tenth of the complete changes
    /// (in apply order), ns: a rising pair means a backlog was building.
    pub fn trend(&self) -> (u64, u64) {
        let n = self.all_lag.len();
        let tenth = (n / 10).max(1).min(n);
        let mut first = self.all_lag[..tenth].to_vec();
        let mut last = self.all_lag[n - tenth..].to_vec();
        (pct(&mut first, 50.0), pct(&mut last, 50.0))
    }

    /// p-th percentile of the per-delivery lag, ns.
    pub fn each_pct(&self, p: f64) -> u64 {
        pct(&mut self.each_lag.clone(), p)
    }
}

/// Matches what each watcher received against what the run sent.
pub fn analyze(run: &ApplyRun, results: &[WatchResult]) -> Delivery {
    let n = run.sent_ns.len();
    let mut d = Delivery {
        changes: n,
        ..Delivery::default()
    };
    // Latest receive per change over watchers; how many watchers got it.
    let mut latest = vec![0u64; n];
    let mut got = vec![0usize; n];
    for r in results {
        if let (Some(why), true) = (&r.ended, d.end_reason.is_none()) {
            d.end_reason = Some(why.clone());
        }
        if r.ended.is_some() {
            d.ended += 1;
        }
        let mut seen = vec![false; n];
        for &(seq, at) in &r.recv {
            let Some(i) = seq.checked_sub(run.first_seq).map(|i| i as usize) else {
                continue;
            };
            if i >= n {
                continue;
            }
            if seen[i] {
                d.duplicates += 1;
                continue;
            }
            seen[i] = true;
            d.delivered += 1;
            got[i] += 1;
            latest[i] = latest[i].max(at);
            d.each_lag.push(at.saturating_sub(run.sent_ns[i]));
        }
    }
    let last_sent = run.sent_ns.last().copied().unwrap_or(0);
    let last_recv = latest.iter().copied().max().unwrap_or(0);
    d.last_after_last_send = last_recv as i64 - last_sent as i64;
    for i in 0..n {
        let complete = got[i] == results.len();
        if complete {
            d.complete += 1;
            d.all_lag.push(latest[i].saturating_sub(run.sent_ns[i]));
        }
        d.latest.push(complete.then_some(latest[i]));
    }
    d
}

/// Per change that both saw whole: when the last of `through`'s watchers received it, less
/// when `control` (a watch of the source itself) received it, ns (0 when the control was the
/// later one): what the hop through grid-wrapper added to the source's own delivery.
pub fn own_share(through: &Delivery, control: &Delivery) -> Vec<u64> {
    through
        .latest
        .iter()
        .zip(&control.latest)
        .filter_map(|(t, c)| Some(t.as_ref()?.saturating_sub(*c.as_ref()?)))
        .collect()
}

/// A duration given in ns, with a unit that keeps 2–3 significant digits.
pub fn dur(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

/// Bytes with a binary unit.
pub fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(pct(&mut v, 50.0), 50);
        assert_eq!(pct(&mut v, 99.0), 99);
        assert_eq!(pct(&mut v, 100.0), 100);
        assert_eq!(pct(&mut [], 50.0), 0);
    }

    #[test]
    fn analysis_counts_complete_changes_only() {
        let run = ApplyRun {
            first_seq: 10,
            sent_ns: vec![100, 200],
            ..ApplyRun::default()
        };
        let w1 = WatchResult {
            recv: vec![(10, 150), (11, 260), (11, 270)],
            ..WatchResult::default()
        };
        let w2 = WatchResult {
            recv: vec![(10, 180), (9, 1)],
            ..WatchResult::default()
        };
        let d = analyze(&run, &[w1, w2]);
        assert_eq!((d.delivered, d.duplicates, d.complete), (3, 1, 1));
        assert_eq!(d.all_lag, vec![80]);
        assert_eq!(d.latest, vec![Some(180), None]);
        assert!(!d.all_delivered());
    }

    #[test]
    fn own_share_is_the_hop_after_the_control_watch() {
        let run = ApplyRun {
            first_seq: 0,
            sent_ns: vec![100, 200, 300],
            ..ApplyRun::default()
        };
        let through = |recv: Vec<(u64, u64)>| WatchResult {
            recv,
            ..WatchResult::default()
        };
        let wrapper = analyze(
            &run,
            &[
                through(vec![(0, 150), (1, 260), (2, 330)]),
                through(vec![(0, 170), (2, 340)]),
            ],
        );
        let control = analyze(&run, &[through(vec![(0, 120), (1, 210), (2, 345)])]);
        // Change 1 did not reach every watcher; change 2 reached the control watch last.
        assert_eq!(own_share(&wrapper, &control), vec![50, 0]);
    }
}
