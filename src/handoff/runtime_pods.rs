//! The container runtime's view of the local node's pods (docs/SEMANTICS.md §13): what the
//! runtime source (`upstream::runtime`) hands the cache's writer after a poll that changed it, and
//! the one rule that builds it from the runtime's ready sandboxes ([`RuntimePods::from_sandboxes`]).
//! A hand-off type: both sides import it; it imports neither. Pure but for the poll counts
//! ([`record_poll`], read by `/metrics`) and the poll record beside them ([`poll_status`], read
//! by `/readyz`).
//!
//! Key: the pod's namespace/name (the sandbox metadata's, which is the Pod's). Of several ready
//! sandboxes of one pod the newest wins (`created_at`, then `attempt`, then the uid, so that the
//! same sandboxes always give the same view). Addresses that do not parse as IP literals are
//! left out; a ready sandbox without any usable address (a host-network pod) is not in the view
//! (nothing to serve from it). A pod is known not ready when the runtime lists sandboxes of it
//! and none ready (a pod with a ready sandbox, addressed or not, never is).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::k8s::ObjectKey;

/// A pod's newest ready sandbox, as the repair rule needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimePod {
    /// The sandbox metadata's uid: the Pod's, or for a static pod the kubelet's config hash.
    pub uid: String,
    /// The sandbox's creation, nanoseconds since the epoch (as the runtime says).
    pub created_at: i64,
    /// The sandbox's `ip` then `additional_ips`, parsed, in that order.
    pub ips: Vec<IpAddr>,
}

impl RuntimePod {
    /// The first address of the family of `v6` (`true`: IPv6), the one a repair serves.
    pub fn first_of(&self, v6: bool) -> Option<IpAddr> {
        self.ips.iter().copied().find(|ip| ip.is_ipv6() == v6)
    }
}

/// One ready sandbox as the source reads it (the runtime's words, not yet trusted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox<'a> {
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.uid`.
    pub uid: &'a str,
    /// `metadata.attempt`.
    pub attempt: u32,
    /// `created_at`, in nanoseconds.
    pub created_at: i64,
    /// `network.ip` then `network.additional_ips[].ip`, as text.
    pub ips: &'a [String],
}

/// The local pods the runtime knows: those with a ready sandbox, and those it knows with none
/// (empty while the source lists only ready sandboxes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimePods {
    /// namespace/name → the newest ready sandbox.
    pub ready: BTreeMap<ObjectKey, RuntimePod>,
    /// Pods the runtime knows without a ready sandbox.
    pub not_ready: BTreeSet<ObjectKey>,
}

impl RuntimePods {
    /// The view from the runtime's ready sandboxes and the pods (namespace, name) of its other
    /// sandboxes (see the module doc for the rules).
    pub fn from_sandboxes<'a>(
        sandboxes: impl IntoIterator<Item = Sandbox<'a>>,
        others: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> RuntimePods {
        let mut newest: BTreeMap<ObjectKey, (i64, u32, &'a str, Vec<IpAddr>)> = BTreeMap::new();
        let mut with_ready = BTreeSet::new();
        for s in sandboxes {
            if s.name.is_empty() {
                continue;
            }
            with_ready.insert(ObjectKey::new(s.namespace, s.name));
            let ips: Vec<IpAddr> = s.ips.iter().filter_map(|t| t.trim().parse().ok()).collect();
            if ips.is_empty() {
                continue;
            }
            let key = ObjectKey::new(s.namespace, s.name);
            let rank = (s.created_at, s.attempt, s.uid);
            match newest.get(&key) {
                Some((c, a, u, _)) if (*c, *a, *u) >= rank => {}
                _ => {
                    newest.insert(key, (s.created_at, s.attempt, s.uid, ips));
                }
            }
        }
        let ready = newest
            .into_iter()
            .map(|(key, (created_at, _, uid, ips))| {
                let pod = RuntimePod {
                    uid: uid.to_string(),
                    created_at,
                    ips,
                };
                (key, pod)
            })
            .collect();
        let not_ready = others
            .into_iter()
            .filter(|(_, name)| !name.is_empty())
            .map(|(namespace, name)| ObjectKey::new(namespace, name))
            .filter(|key| !with_ready.contains(key))
            .collect();
        RuntimePods { ready, not_ready }
    }

    /// Whether the runtime knows no local pod (no repair can apply).
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty() && self.not_ready.is_empty()
    }
}

/// How one poll of the runtime ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollOutcome {
    /// It answered: the view is the answer.
    Ok,
    /// No connection, a socket error, or the runtime closed it.
    Unreachable,
    /// No complete answer within the deadline.
    Timeout,
    /// It broke HTTP/2, HPACK or gRPC, answered an error status, or a message that does not
    /// decode.
    BadAnswer,
}

impl PollOutcome {
    /// Every outcome, in `/metrics`' order.
    pub const ALL: [PollOutcome; 4] = [
        PollOutcome::Ok,
        PollOutcome::Unreachable,
        PollOutcome::Timeout,
        PollOutcome::BadAnswer,
    ];

    /// The `outcome` label.
    pub fn label(self) -> &'static str {
        match self {
            PollOutcome::Ok => "ok",
            PollOutcome::Unreachable => "unreachable",
            PollOutcome::Timeout => "timeout",
            PollOutcome::BadAnswer => "bad_answer",
        }
    }
}

static POLLS: [AtomicU64; PollOutcome::ALL.len()] =
    [const { AtomicU64::new(0) }; PollOutcome::ALL.len()];

/// The runtime source's polls as `/readyz` tells them: the last one that answered, and since
/// when and how they fail.
static RECORD: PollRecord = PollRecord::new();
/// The endpoint polled (the source's `--container-runtime-endpoint`), once one was.
static ENDPOINT: OnceLock<String> = OnceLock::new();
/// The instant the record's times count from.
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Milliseconds since [`EPOCH`] (monotonic).
fn now_ms() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Counts one poll of the runtime and records when it ended, for `/readyz`.
pub fn record_poll(outcome: PollOutcome) {
    POLLS[outcome as usize].fetch_add(1, Relaxed);
    RECORD.record(outcome, now_ms());
}

/// Records the endpoint being polled (the first one named stays: a process polls one).
pub fn record_endpoint(endpoint: &str) {
    if ENDPOINT.get().is_none() {
        let _ = ENDPOINT.set(endpoint.to_string());
    }
}

/// The runtime source's state now, `None` when no runtime was polled in this process.
pub fn poll_status() -> Option<PollStatus> {
    let endpoint = ENDPOINT.get()?;
    Some(RECORD.status(endpoint, now_ms()))
}

/// What `/readyz` says of the runtime source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollStatus {
    /// The endpoint, as given.
    pub endpoint: String,
    /// How long ago the last poll that answered ended; `None`: none has since the start.
    pub last_ok_ago: Option<Duration>,
    /// While polls fail: for how long (since the first failed poll of the episode ended), and
    /// how the last one failed.
    pub failing: Option<(Duration, PollOutcome)>,
}

/// When polls answered and since when they fail, as atomics the source thread writes and the
/// health listener reads (times in milliseconds from a fixed instant, plus one: zero is never).
#[derive(Debug)]
pub struct PollRecord {
    last_ok: AtomicU64,
    failing_since: AtomicU64,
    last_failure: AtomicU64,
}

impl Default for PollRecord {
    fn default() -> Self {
        PollRecord::new()
    }
}

impl PollRecord {
    /// Nothing recorded.
    pub const fn new() -> PollRecord {
        PollRecord {
            last_ok: AtomicU64::new(0),
            failing_since: AtomicU64::new(0),
            last_failure: AtomicU64::new(0),
        }
    }

    /// Records a poll that ended at `now_ms` with `outcome`.
    pub fn record(&self, outcome: PollOutcome, now_ms: u64) {
        let at = now_ms.saturating_add(1);
        if outcome == PollOutcome::Ok {
            self.last_ok.store(at, Relaxed);
            self.failing_since.store(0, Relaxed);
        } else {
            self.last_failure.store(outcome as u64, Relaxed);
            // The first failure of an episode opens it; later ones leave its start.
            let _ = self.failing_since.compare_exchange(0, at, Relaxed, Relaxed);
        }
    }

    /// The state at `now_ms`.
    pub fn status(&self, endpoint: &str, now_ms: u64) -> PollStatus {
        let ago = |at: u64| Duration::from_millis(now_ms.saturating_sub(at - 1));
        let last_ok = self.last_ok.load(Relaxed);
        let failing_since = self.failing_since.load(Relaxed);
        let outcome = usize::try_from(self.last_failure.load(Relaxed))
            .ok()
            .and_then(|i| PollOutcome::ALL.get(i))
            .copied()
            .unwrap_or(PollOutcome::Unreachable);
        PollStatus {
            endpoint: endpoint.to_string(),
            last_ok_ago: (last_ok != 0).then(|| ago(last_ok)),
            failing: (failing_since != 0).then(|| (ago(failing_since), outcome)),
        }
    }
}

/// Polls of the runtime that ended with `outcome` since the start.
pub fn polls(outcome: PollOutcome) -> u64 {
    POLLS[outcome as usize].load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb<'a>(
        name: &'a str,
        uid: &'a str,
        attempt: u32,
        at: i64,
        ips: &'a [String],
    ) -> Sandbox<'a> {
        Sandbox {
            namespace: "ns",
            name,
            uid,
            attempt,
            created_at: at,
            ips,
        }
    }

    #[test]
    fn the_newest_ready_sandbox_of_a_pod_wins_and_bad_addresses_are_left_out() {
        let old = vec!["10.0.0.5".to_string()];
        let new = vec![
            "10.0.0.9".to_string(),
            "fd00::9".to_string(),
            "junk".to_string(),
        ];
        let none = vec!["not-an-ip".to_string()];
        let view = RuntimePods::from_sandboxes(
            [
                sb("a", "u1", 1, 200, &new),
                sb("a", "u1", 0, 100, &old),
                sb("b", "u2", 0, 100, &none),
                sb("", "u3", 0, 100, &old),
            ],
            [("ns", "a"), ("ns", "b"), ("ns", "c")],
        );
        assert_eq!(view.ready.len(), 1, "{view:?}");
        // A stale sandbox of a pod with a ready one (addressed or host-network) is not a
        // not-ready pod; a pod with none ready is.
        assert_eq!(
            view.not_ready.iter().cloned().collect::<Vec<_>>(),
            vec![ObjectKey::new("ns", "c")]
        );
        let a = &view.ready[&ObjectKey::new("ns", "a")];
        assert_eq!(
            a.ips,
            vec![
                "10.0.0.9".parse::<IpAddr>().unwrap(),
                "fd00::9".parse().unwrap()
            ]
        );
        assert_eq!(a.first_of(false).unwrap().to_string(), "10.0.0.9");
        assert_eq!(a.first_of(true).unwrap().to_string(), "fd00::9");
        // The order the runtime lists them in does not matter.
        let again = RuntimePods::from_sandboxes(
            [sb("a", "u1", 0, 100, &old), sb("a", "u1", 1, 200, &new)],
            [],
        );
        assert_eq!(again.ready, view.ready);
    }
}
