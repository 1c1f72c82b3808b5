//! Upstream failover (`--master=A,B,…`, and the site relays of `--relay-kubeconfig` before
//! them): which of several servers the reflectors and proxied requests use. The rule is [`Selection`] (pure): **the first healthy
//! server in `--master` order**; when none is healthy, the last selected one stays selected.
//!
//! | signal                                                            | effect on the server     |
//! |-------------------------------------------------------------------|--------------------------|
//! | a request got an HTTP answer (any status)                         | healthy at once          |
//! | a request could not connect (refused, unreachable, DNS, connect timeout) | unhealthy; every request moves to the next server at once |
//! | a request connected but failed TLS or got no response head in time | unhealthy; LIST/WATCH/GET move to the next server at once, a proxied request fails (it may have been sent) |
//! | any other failure (a connection broken mid-body, a bad body)      | nothing: says nothing reliable about the server |
//! | a probe `GET /readyz` of an unhealthy server answers < 500 within 2 s | one pass; [`RISE`] passes in a row → healthy |
//! | a probe fails (no answer, or 5xx: the apiserver says it is not ready) | passes reset             |
//!
//! Health is **passive** for the servers in use (no extra requests in the normal case: at edge
//! scale every node's probes would load the control plane) and **active** for the unhealthy
//! ones: a background thread probes each of them every [`PROBE_INTERVAL`] (with one server there
//! is nothing to fail over to, no thread, and no new log line). A request tries the selected
//! server, then the other healthy ones, then the unhealthy ones, each in `--master` order.
//!
//! **Switches.** To a less preferred server: WARN (`upstream failover`); back to a more
//! preferred one: INFO (`upstream failback`); both counted in
//! [`crate::upstream::stats::ServerStats`]. A reflector's watch resumes at its resourceVersion
//! on the new server when it is of the same resourceVersion domain (the cloud servers: one
//! cluster, one etcd, the same RVs); only if that fails does the reflector's usual 410 /
//! too-large handling relist. A server of another domain (each relay is one of its own,
//! [`crate::upstream::domain`]) is never sent that RV: the request fails before it is sent and
//! the reflector relists from scratch. A watch stream open on a server that is no
//! longer selected ends at the next data it receives, or within `FOLLOW_TICK` when it is quiet
//! (its reads are sliced: `slice.rs`) — so after a failback the reflectors move back within a
//! tick of the switch, not at their watch's next bookmark or its timeout — and is resumed at its
//! RV on the selected server (`FollowSelection`), or relisted from scratch in another domain. Proxied requests use the selected
//! server when they start; a proxied stream stays where it started.

use std::time::Duration;

/// Pause between two probe rounds of the unhealthy servers.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// Limit of one probe (connect, request, response head and body).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Probes that must pass in a row before an unhealthy server is healthy again.
pub const RISE: u32 = 2;
/// What a probe requests (the apiserver's readiness endpoint, readable without RBAC grants).
pub const PROBE_PATH: &str = "/readyz";

/// What is known of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerHealth {
    /// Healthy (or not known to be otherwise: every server starts so).
    Up,
    /// Unhealthy, with the probes passed in a row since.
    Down {
        /// Consecutive passed probes.
        passes: u32,
    },
}

/// An observation about one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A request got an HTTP answer.
    Answered,
    /// A request could not reach it (see the module table).
    Unreachable,
    /// A probe passed.
    ProbePassed,
    /// A probe failed.
    ProbeFailed,
}

/// What an observation changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The server's health changed to this.
    pub healthy: Option<bool>,
    /// The selection moved `(from, to)`.
    pub switched: Option<(usize, usize)>,
}

/// Whether a probe's HTTP status means "up": any answer below 500 (a 401/403/404 still proves
/// a live server; `/readyz` answers 500 while the apiserver is not ready).
pub fn probe_passed(status: u16) -> bool {
    status < 500
}

/// The server-selection state machine: per-server [`ServerHealth`] and the selected index. Pure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    health: Vec<ServerHealth>,
    selected: usize,
}

impl Selection {
    /// `n` servers (at least one), all healthy, the first selected.
    pub fn new(n: usize) -> Selection {
        Selection {
            health: vec![ServerHealth::Up; n.max(1)],
            selected: 0,
        }
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.health.len()
    }

    /// Never: there is always at least one server.
    pub fn is_empty(&self) -> bool {
        self.health.is_empty()
    }

    /// The server requests go to first.
    pub fn selected(&self) -> usize {
        self.selected
    }

    /// Server `i`'s health (`None` if there is no such server).
    pub fn health(&self, i: usize) -> Option<ServerHealth> {
        self.health.get(i).copied()
    }

    fn up(&self, i: usize) -> bool {
        self.health.get(i) == Some(&ServerHealth::Up)
    }

    /// The order a request tries the servers in: the selected one, the other healthy ones,
    /// then the unhealthy ones, each group in preference order.
    pub fn attempt_order(&self) -> Vec<usize> {
        let others = (0..self.len()).filter(|&i| i != self.selected);
        let (up, down): (Vec<usize>, Vec<usize>) = others.partition(|&i| self.up(i));
        std::iter::once(self.selected)
            .chain(up)
            .chain(down)
            .collect()
    }

    /// The servers to probe: the unhealthy ones.
    pub fn to_probe(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| !self.up(i)).collect()
    }

    /// Applies one observation about server `i` (ignored if there is no such server) and
    /// re-selects: the first healthy server, or the current one if none is healthy.
    pub fn observe(&mut self, i: usize, signal: Signal) -> Outcome {
        let Some(h) = self.health.get_mut(i) else {
            return Outcome::default();
        };
        let before = *h;
        *h = match (signal, before) {
            (Signal::Answered, _) => ServerHealth::Up,
            (Signal::Unreachable, _) => ServerHealth::Down { passes: 0 },
            (Signal::ProbePassed, ServerHealth::Up) => ServerHealth::Up,
            (Signal::ProbePassed, ServerHealth::Down { passes })
                if passes.saturating_add(1) >= RISE =>
            {
                ServerHealth::Up
            }
            (Signal::ProbePassed, ServerHealth::Down { passes }) => ServerHealth::Down {
                passes: passes.saturating_add(1),
            },
            (Signal::ProbeFailed, ServerHealth::Up) => ServerHealth::Down { passes: 0 },
            (Signal::ProbeFailed, ServerHealth::Down { .. }) => ServerHealth::Down { passes: 0 },
        };
        let was_up = before == ServerHealth::Up;
        let is_up = *h == ServerHealth::Up;
        let healthy = (was_up != is_up).then_some(is_up);
        let from = self.selected;
        if let Some(first) = (0..self.len()).find(|&j| self.up(j)) {
            self.selected = first;
        }
        Outcome {
            healthy,
            switched: (self.selected != from).then_some((from, self.selected)),
        }
    }
}

/// `url` without a `user:password@` part (for logs and metric labels).
pub fn redact_userinfo(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = url.get(start..).unwrap_or_default();
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest.get(..authority_end).and_then(|a| a.rfind('@')) {
        Some(at) => format!(
            "{}{}",
            url.get(..start).unwrap_or_default(),
            rest.get(at + 1..).unwrap_or_default()
        ),
        None => url.to_string(),
    }
}

#[cfg(feature = "io")]
pub(crate) use io::{check_server, spawn_prober, Failed, Failover, FollowSelection};

#[cfg(feature = "io")]
mod io;
#[cfg(feature = "io")]
mod slice;
#[cfg(feature = "io")]
pub(crate) use slice::agent as sliced_agent;

#[cfg(test)]
#[path = "failover_tests.rs"]
mod tests;
