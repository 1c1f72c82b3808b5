//! A follower's runtime reports (docs/SEMANTICS.md §13.1), I/O shell: one thread
//! (`site-report`) that, every poll interval, `PUT`s this node's runtime view to every relay of
//! `--relay-kubeconfig` and hands the views of the site they answer with (every node's,
//! merged) to a callback (normally a message to the cache's writer,
//! `crate::writer::WriterHandle::set_relayed_reports`).
//!
//! - Nothing is sent before the runtime source's first good view: a follower reports only what
//!   its runtime said. A new view is sent at once ([`OwnView::set`] wakes the thread), not at
//!   the next interval: a moved pod reaches the relay one poll after the runtime names it.
//! - Each relay answers with the site's views, or 304 when the follower already holds them
//!   (`If-None-Match`: the generation it last had of that relay). The relays that answered in a
//!   round give the views handed over, merged by node; a round in which none answered hands
//!   nothing over, and the views held expire on the cache's side.
//! - One WARN per relay when its reports start failing (a 403 says why: the follower's source
//!   address is not one of its Node's addresses), one INFO when they succeed again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::handoff::runtime_pods::RuntimePods;
use crate::handoff::site_pods::{self, NodeReport};
use crate::sync::lock;
use crate::upstream::client::Upstream;

/// The shortest validity a follower states for its report (seconds).
const MIN_REPORT_VALID_FOR: u64 = 60;

/// The latest view of the local runtime, shared by the runtime source (who sets it) and the
/// reporter (who reads it, woken by each new one).
#[derive(Debug, Default)]
pub struct OwnView {
    /// The view and how many views were set.
    view: Mutex<(Option<RuntimePods>, u64)>,
    changed: Condvar,
}

impl OwnView {
    /// Sets the runtime source's new view and wakes the reporter.
    pub fn set(&self, pods: RuntimePods) {
        let mut v = lock(&self.view);
        v.0 = Some(pods);
        v.1 += 1;
        self.changed.notify_all();
    }

    /// The view now and its number.
    fn get(&self) -> (Option<RuntimePods>, u64) {
        lock(&self.view).clone()
    }

    /// Waits until `due`, a view after number `seen` is set, or `stop`, whichever first.
    fn wait(&self, seen: u64, due: Instant, stop: &AtomicBool) {
        let mut v = lock(&self.view);
        while v.1 == seen && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= due {
                return;
            }
            // In slices, so that `stop` is seen within 100 ms.
            let slice = (due - now).min(Duration::from_millis(100));
            v = match self.changed.wait_timeout(v, slice) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// How long a report sent every `interval` says it holds: four intervals, at least a minute
/// (a report or two lost on the LAN, or a relay restart, does not drop a node's view).
pub fn valid_for(interval: Duration) -> u64 {
    (interval.as_secs() * 4).max(MIN_REPORT_VALID_FOR)
}

/// Starts the reporter: every `interval`, reports `own`'s view of `hostname`'s pods to every
/// relay of `upstream`, calling `on_answer` with the site's views they answered, until `stop`.
pub fn spawn(
    upstream: Upstream,
    hostname: String,
    interval: Duration,
    own: Arc<OwnView>,
    on_answer: Box<dyn Fn(Vec<NodeReport>) + Send>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("site-report".into())
        .spawn(move || {
            let relays = upstream.relay_servers();
            let mut held: Vec<Relay> = relays.into_iter().map(Relay::new).collect();
            info!(
                "runtime reports: node {hostname}'s pods to {} relay(s) every {} s",
                held.len(),
                interval.as_secs()
            );
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let (view, seen) = own.get();
                if let Some(view) = view {
                    let body = site_pods::encode_report(&hostname, &view, valid_for(interval));
                    let path = format!("{}{hostname}", site_pods::REPORT_PATH);
                    let answered: Vec<&Relay> = held
                        .iter_mut()
                        .filter_map(|relay| {
                            relay.exchange(&upstream, &path, &body).then_some(&*relay)
                        })
                        .collect();
                    if !answered.is_empty() {
                        on_answer(merge(answered.iter().map(|r| r.views.as_slice())));
                    }
                }
                own.wait(seen, started + interval, &stop);
            }
        })
}

/// The views of several relays' answers, merged by node (the first relay's wins).
fn merge<'a>(answers: impl Iterator<Item = &'a [NodeReport]>) -> Vec<NodeReport> {
    let mut by_node: BTreeMap<&str, &NodeReport> = BTreeMap::new();
    for views in answers {
        for r in views {
            by_node.entry(r.node.as_str()).or_insert(r);
        }
    }
    by_node.into_values().cloned().collect()
}

/// One relay, as the reporter knows it.
struct Relay {
    /// Its index among the upstream's servers.
    index: usize,
    /// The generation of its last answer (`ETag`), and the views it held.
    etag: Option<String>,
    views: Vec<NodeReport>,
    /// Its reports are failing (a WARN was written).
    failing: bool,
}

impl Relay {
    fn new(index: usize) -> Relay {
        Relay {
            index,
            etag: None,
            views: Vec::new(),
            failing: false,
        }
    }

    /// One report to this relay; `true` when it answered (its views are current).
    fn exchange(&mut self, upstream: &Upstream, path: &str, body: &[u8]) -> bool {
        let name = || upstream.server_name(self.index);
        let result = upstream
            .put_runtime_report(self.index, path, body, self.etag.as_deref())
            .map_err(|e| e.to_string())
            .and_then(|answer| match answer {
                None => Ok(()),
                Some((bytes, etag)) => {
                    self.views = site_pods::decode_list(&bytes).map_err(|e| e.to_string())?;
                    self.etag = etag;
                    Ok(())
                }
            });
        match result {
            Ok(()) => {
                if self.failing {
                    info!("runtime reports to relay {} succeed again", name());
                    self.failing = false;
                }
                debug!(
                    "runtime report to relay {}: the site's views of {} node(s)",
                    name(),
                    self.views.len()
                );
                true
            }
            Err(e) => {
                if self.failing {
                    debug!("runtime report to relay {}: {e}", name());
                } else {
                    warn!(
                        "runtime report to relay {}: {e}; the other nodes' pods it relayed are served until their views expire",
                        name()
                    );
                    self.failing = true;
                }
                // A relay that restarted answers a new generation; ask for it whole.
                self.etag = None;
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(node: &str, valid_for: u64) -> NodeReport {
        NodeReport {
            node: node.into(),
            pods: RuntimePods::default(),
            valid_for,
        }
    }

    #[test]
    fn a_new_view_wakes_the_reporter_before_its_interval() {
        let own = Arc::new(OwnView::default());
        let stop = AtomicBool::new(false);
        let (_, seen) = own.get();
        let setter = {
            let own = own.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                own.set(RuntimePods::default());
            })
        };
        let t = Instant::now();
        own.wait(seen, t + Duration::from_secs(30), &stop);
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "woken by the new view"
        );
        assert_eq!(own.get().1, seen + 1);
        let _ = setter.join();
        // Without a new view it waits until due.
        let t = Instant::now();
        own.wait(seen + 1, t + Duration::from_millis(200), &stop);
        assert!(t.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn a_report_holds_four_intervals_and_at_least_a_minute() {
        assert_eq!(valid_for(Duration::from_secs(5)), 60);
        assert_eq!(valid_for(Duration::from_secs(30)), 120);
    }

    #[test]
    fn answers_are_merged_by_node_the_first_relays_winning() {
        let a = vec![report("n1", 10), report("n2", 10)];
        let b = vec![report("n2", 99), report("n3", 99)];
        let merged = merge([a.as_slice(), b.as_slice()].into_iter());
        let got: Vec<(&str, u64)> = merged
            .iter()
            .map(|r| (r.node.as_str(), r.valid_for))
            .collect();
        assert_eq!(got, [("n1", 10), ("n2", 10), ("n3", 99)]);
    }
}
