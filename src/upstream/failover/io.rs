//! The I/O side of `upstream::failover`: the shared [`Failover`] (the [`Selection`] behind a
//! mutex, the servers' URLs, logging and stats), the per-request attempt loop
//! ([`Failover::call`]), the classification of a failed attempt, the watch reader that ends when
//! the selection moves ([`FollowSelection`], woken every [`FOLLOW_TICK`] while its stream is
//! quiet) and the probe thread ([`spawn_prober`]).

use super::{
    probe_passed, redact_userinfo, Outcome, Selection, Signal, PROBE_INTERVAL, PROBE_PATH, RISE,
};
use crate::sync;
use crate::upstream::client::{is_stall, Upstream, UpstreamError};
use crate::upstream::domain::{self, Role, RvOrigin};
use crate::upstream::stats::{RequestStats, ServerStats, Verb};
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// With several servers, the longest a watch stream's read waits before it looks at the
/// selection again: a stream whose server is no longer the selected one ends within this of the
/// switch, however quiet the stream (a watch gets a bookmark about once a minute).
pub(crate) const FOLLOW_TICK: Duration = Duration::from_secs(1);

/// Checks one server URL; returns it without trailing `/` and whether it is https.
pub(crate) fn check_server(server: &str) -> Result<(String, bool), UpstreamError> {
    let base = server.trim_end_matches('/').to_string();
    let uri: ureq::http::Uri = base
        .parse()
        .map_err(|e| UpstreamError::Config(format!("server {server:?}: {e}")))?;
    let https = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => true,
        Some(s) if s.eq_ignore_ascii_case("http") => false,
        _ => {
            return Err(UpstreamError::Config(format!(
                "server {server:?}: scheme must be http or https"
            )))
        }
    };
    if uri.host().is_none_or(str::is_empty) || uri.query().is_some() {
        return Err(UpstreamError::Config(format!(
            "server {server:?}: needs a host and no query"
        )));
    }
    Ok((base, https))
}

/// How one attempt on one server failed.
#[derive(Debug)]
pub(crate) enum Failed {
    /// A ureq error: transport, timeout, TLS, or a body read.
    Ureq(ureq::Error),
    /// Anything else: an error status (decoded), an undecodable body, an unsendable request.
    Upstream(UpstreamError),
}

impl From<ureq::Error> for Failed {
    fn from(e: ureq::Error) -> Self {
        Failed::Ureq(e)
    }
}

impl From<UpstreamError> for Failed {
    fn from(e: UpstreamError) -> Self {
        Failed::Upstream(e)
    }
}

/// What a failed attempt says about its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// No connection: nothing was sent. Unhealthy; any request may go to the next server.
    Refused,
    /// Connected, then TLS failed or no response head came in time. Unhealthy; the request may
    /// have been sent, so only idempotent ones go to the next server.
    NoAnswer,
    /// An HTTP answer (an error status).
    Answered,
    /// Nothing reliable (a connection broken mid-body, a bad body, a local error).
    Unknown,
}

fn is_tls(e: &io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some()
}

impl Failed {
    fn reach(&self) -> Reach {
        use io::ErrorKind as K;
        use ureq::Error as E;
        use ureq::Timeout as T;
        match self {
            Failed::Upstream(UpstreamError::Status { .. }) => Reach::Answered,
            Failed::Upstream(_) => Reach::Unknown,
            Failed::Ureq(E::Io(e)) if is_tls(e) => Reach::NoAnswer,
            Failed::Ureq(E::Io(e)) => match e.kind() {
                K::ConnectionRefused
                | K::HostUnreachable
                | K::NetworkUnreachable
                | K::AddrNotAvailable => Reach::Refused,
                _ => Reach::Unknown,
            },
            Failed::Ureq(E::HostNotFound | E::ConnectionFailed) => Reach::Refused,
            Failed::Ureq(E::Timeout(T::Connect | T::Resolve)) => Reach::Refused,
            // A body that stopped coming (a list's progress deadline): the server stopped
            // answering; a list is idempotent and may be read from the next server.
            Failed::Ureq(E::Timeout(T::SendRequest | T::RecvResponse | T::PerRead)) => {
                Reach::NoAnswer
            }
            Failed::Ureq(E::Rustls(_) | E::Tls(_)) => Reach::NoAnswer,
            Failed::Ureq(_) => Reach::Unknown,
        }
    }

    pub(crate) fn into_error(self) -> UpstreamError {
        match self {
            Failed::Ureq(e) => e.into(),
            Failed::Upstream(e) => e,
        }
    }
}

/// The servers of one upstream client and which one is selected; shared by every clone of the
/// client, its watch streams and its probe thread.
#[derive(Debug)]
pub(crate) struct Failover {
    /// Base URLs (no trailing `/`), in order of preference.
    bases: Vec<String>,
    /// The same without user info, for logs and metrics.
    shown: Vec<String>,
    /// Each server's role: the relays come first.
    roles: Vec<Role>,
    /// Each server's resourceVersion domain ([`domain::domains`]).
    domains: Vec<usize>,
    selection: Mutex<Selection>,
    /// `selection.selected()`, readable without the lock (watch streams check it per read).
    selected: AtomicUsize,
    /// Switches of the selection so far: a stream opened on a server that was not selected
    /// (every server down) ends only once the selection moves again.
    switches: AtomicU64,
    stats: Arc<ServerStats>,
}

impl Failover {
    /// The servers `bases` (at least one), the first selected, each with its role in `roles`
    /// (a server without one is a cloud server); registers them in `stats`.
    pub(crate) fn new(bases: Vec<String>, roles: Vec<Role>, stats: Arc<ServerStats>) -> Failover {
        let shown: Vec<String> = bases.iter().map(|b| redact_userinfo(b)).collect();
        let roles: Vec<Role> = (0..bases.len())
            .map(|i| roles.get(i).copied().unwrap_or(Role::Cloud))
            .collect();
        let listed: Vec<(String, Role)> =
            shown.iter().cloned().zip(roles.iter().copied()).collect();
        stats.set_servers(&listed);
        if bases.len() > 1 {
            let named: Vec<String> = listed.iter().map(|(u, r)| format!("{u} ({r})")).collect();
            log::info!(
                "upstream servers in order of preference: {} (requests go to the first healthy one; an unhealthy one is probed with GET {PROBE_PATH} every {} s)",
                named.join(", "),
                PROBE_INTERVAL.as_secs()
            );
        }
        Failover {
            selection: Mutex::new(Selection::new(bases.len())),
            domains: domain::domains(&roles),
            roles,
            bases,
            shown,
            selected: AtomicUsize::new(0),
            switches: AtomicU64::new(0),
            stats,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Selection> {
        sync::lock(&self.selection)
    }

    /// How many servers.
    pub(crate) fn len(&self) -> usize {
        self.bases.len()
    }

    /// Base URL of server `i` (empty if there is none).
    pub(crate) fn base(&self, i: usize) -> &str {
        self.bases.get(i).map_or("", String::as_str)
    }

    fn shown(&self, i: usize) -> &str {
        self.shown.get(i).map_or("?", String::as_str)
    }

    /// Server `i`'s role (a cloud server if there is no such server).
    pub(crate) fn role(&self, i: usize) -> Role {
        self.roles.get(i).copied().unwrap_or(Role::Cloud)
    }

    /// Server `i` for logs: its role and URL, e.g. `relay https://r1:51010`.
    pub(crate) fn named(&self, i: usize) -> String {
        format!("{} {}", self.role(i), self.shown(i))
    }

    /// Where an RV issued by server `i` comes from.
    pub(crate) fn origin(&self, i: usize) -> RvOrigin {
        RvOrigin {
            server: i,
            domain: self.domains.get(i).copied().unwrap_or(i),
            role: self.role(i),
        }
    }

    /// The selected server.
    pub(crate) fn selected(&self) -> usize {
        self.selected.load(Ordering::SeqCst)
    }

    /// Switches of the selection so far.
    fn switches(&self) -> u64 {
        self.switches.load(Ordering::SeqCst)
    }

    /// The servers the probe thread checks now.
    pub(crate) fn to_probe(&self) -> Vec<usize> {
        self.lock().to_probe()
    }

    /// Applies an observation (`why`: the failure, for the log), updates the stats, and logs a
    /// health change or a switch (only with several servers: one server has no failover).
    pub(crate) fn observe(&self, i: usize, signal: Signal, why: &str) {
        let outcome = {
            let mut sel = self.lock();
            let outcome = sel.observe(i, signal);
            self.selected.store(sel.selected(), Ordering::SeqCst);
            if let Some(healthy) = outcome.healthy {
                self.stats.set_healthy(i, healthy);
            }
            if let Some((from, to)) = outcome.switched {
                self.switches.fetch_add(1, Ordering::SeqCst);
                self.stats.record_switch(to, to < from);
            }
            outcome
        };
        if self.len() > 1 {
            self.log(i, outcome, why);
        }
    }

    fn log(&self, i: usize, outcome: Outcome, why: &str) {
        match (outcome.switched, outcome.healthy) {
            (Some((from, to)), _) if to > from => log::warn!(
                "upstream failover: {} is unreachable ({why}); switching to {} (#{to}); failing back once it passes {RISE} probes of {PROBE_PATH}",
                self.named(from),
                self.named(to)
            ),
            (Some((from, to)), _) => log::info!(
                "upstream failback: {} (#{to}) is healthy again; switching back from {}",
                self.named(to),
                self.named(from)
            ),
            (None, Some(false)) => log::warn!(
                "upstream server {} (#{i}) is unreachable ({why}); probing it every {} s",
                self.named(i),
                PROBE_INTERVAL.as_secs()
            ),
            (None, Some(true)) => {
                log::info!("upstream server {} (#{i}) is healthy again", self.named(i));
            }
            (None, None) => {}
        }
    }

    /// Runs one request: `once(i, base)` on the servers in [`Selection::attempt_order`] until
    /// one answers or a failure says nothing about its server (see the module table); each
    /// attempt is counted in `requests`. `Ok` carries the value and the HTTP status.
    ///
    /// `rv_from`: the request names a resourceVersion issued by that server. A server of
    /// another domain is never sent it: when it is the next to try, the call fails at once
    /// with [`UpstreamError::ForeignResourceVersion`] (nothing sent, nothing counted), and the
    /// caller starts again without that RV.
    pub(crate) fn call<T>(
        &self,
        verb: Verb,
        requests: &RequestStats,
        rv_from: Option<RvOrigin>,
        mut once: impl FnMut(usize, &str) -> Result<(T, u16), Failed>,
    ) -> Result<T, UpstreamError> {
        let order = self.lock().attempt_order();
        let mut last = None;
        for i in order {
            if let Some(from) = rv_from.filter(|o| o.domain != self.origin(i).domain) {
                return Err(UpstreamError::ForeignResourceVersion {
                    issued_by: self.named(from.server),
                    now: self.named(i),
                });
            }
            let started = Instant::now();
            let result = once(i, self.base(i));
            let took = started.elapsed();
            let failed = match result {
                Ok((value, code)) => {
                    requests.record(verb, Some(code), took);
                    self.observe(i, Signal::Answered, "");
                    return Ok(value);
                }
                Err(f) => f,
            };
            let reach = failed.reach();
            let err = failed.into_error();
            requests.record(verb, err.status_code(), took);
            match reach {
                Reach::Answered => {
                    self.observe(i, Signal::Answered, "");
                    return Err(err);
                }
                Reach::Unknown => return Err(err),
                Reach::Refused | Reach::NoAnswer => {
                    self.observe(i, Signal::Unreachable, &err.to_string());
                    if reach == Reach::NoAnswer && verb == Verb::Forward {
                        return Err(err);
                    }
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| UpstreamError::Unreachable("no upstream server".into())))
    }
}

/// A watch body that ends (EOF) once the selected server is no longer the one it streams from:
/// checked before each read from the network, once the stream received data or the selection
/// moved since it opened, so nothing received is dropped and the reflector resumes at its last
/// RV on the selected server (a partial last line is a truncated stream: rewatched from the RV
/// before it). With several servers its network reads wait at most [`FOLLOW_TICK`]
/// ([`super::slice`]): a read cut short before the stream's own `limit` since its last data is
/// tried again after that check, so a quiet stream follows a switch within [`FOLLOW_TICK`];
/// past `limit` the timeout is the stream's (a stall, [`is_stall`]).
pub(crate) struct FollowSelection<R> {
    inner: BufReader<R>,
    failover: Arc<Failover>,
    server: usize,
    /// The selection's switches when the stream opened.
    opened_at: u64,
    /// The stream's read limit (its progress deadline or idle limit).
    limit: Duration,
    /// The longest one network read waits ([`FOLLOW_TICK`] with several servers).
    slice: Option<Duration>,
    /// When data last came (or the stream opened).
    last_data: Instant,
    received: bool,
    moved: bool,
}

impl<R: Read> FollowSelection<R> {
    /// Follows the selection for a stream from server `server`, held to `limit` between data.
    pub(crate) fn new(
        inner: BufReader<R>,
        failover: Arc<Failover>,
        server: usize,
        limit: Duration,
    ) -> Self {
        FollowSelection {
            opened_at: failover.switches(),
            slice: (failover.len() > 1).then_some(FOLLOW_TICK),
            inner,
            failover,
            server,
            limit,
            last_data: Instant::now(),
            received: false,
            moved: false,
        }
    }

    fn leaving(&mut self) -> bool {
        if !self.moved
            && (self.received || self.failover.switches() != self.opened_at)
            && self.inner.buffer().is_empty()
            && self.failover.selected() != self.server
        {
            self.moved = true;
            log::debug!(
                "a watch on {} ends: the selected upstream server is now {}",
                self.failover.shown(self.server),
                self.failover.shown(self.failover.selected())
            );
        }
        self.moved
    }
}

impl<R: Read> BufRead for FollowSelection<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            if self.leaving() {
                return Ok(&[]);
            }
            let inner = &mut self.inner;
            match super::slice::sliced(self.slice, || inner.fill_buf().map(<[u8]>::len)) {
                Ok(_) => break,
                Err(e) if is_stall(&e) && self.last_data.elapsed() < self.limit => {}
                Err(e) => return Err(e),
            }
        }
        // Buffered now (or the end): no second read from the network.
        let buf = self.inner.fill_buf()?;
        if !buf.is_empty() {
            self.received = true;
            self.last_data = Instant::now();
        }
        Ok(buf)
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
    }
}

impl<R: Read> Read for FollowSelection<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            for (o, b) in out.iter_mut().zip(buf) {
                *o = *b;
            }
            n
        };
        self.consume(n);
        Ok(n)
    }
}

/// Starts the probe thread: every [`PROBE_INTERVAL`] it probes each unhealthy server
/// ([`Upstream::probe`]). `upstream` yields the client, or `None` once every clone of it is
/// gone (then the thread ends).
pub(crate) fn spawn_prober(upstream: impl Fn() -> Option<Upstream> + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("upstream-probe".into())
        .spawn(move || loop {
            std::thread::sleep(PROBE_INTERVAL);
            let Some(up) = upstream() else {
                return;
            };
            let failover = up.failover();
            for i in failover.to_probe() {
                let (signal, why) = match up.probe(i) {
                    Ok(code) if probe_passed(code) => (Signal::ProbePassed, String::new()),
                    Ok(code) => (Signal::ProbeFailed, format!("{PROBE_PATH} answered {code}")),
                    Err(e) => (Signal::ProbeFailed, e.to_string()),
                };
                log::debug!(
                    "probe of {}: {}",
                    failover.shown(i),
                    if why.is_empty() { "passed" } else { &why }
                );
                failover.observe(i, signal, &why);
            }
        });
    if let Err(e) = spawned {
        log::warn!(
            "cannot start the upstream probe thread: {e}; an unreachable server is retried only when the others fail"
        );
    }
}
