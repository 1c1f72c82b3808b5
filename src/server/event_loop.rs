//! The event loop: one mio `Poll` on one thread owns every client socket, kube-proxy's and, with
//! `--relay-bind-address`, the followers' on the relay port (`server::relay`). Reflector and
//! proxy threads never touch sockets; they publish (to the cache or a channel) and `wake()` the
//! loop.
//!
//! A round costs what it visits: which connection may open is decided by `server::admission`
//! and which ones wait on the loop or have a timer due is kept by `server::schedule`, both in
//! constant or logarithmic time, and each listener accepts at most [`ACCEPTS_PER_ROUND`]
//! connections a round, so a storm of new connections on one port cannot hold up the requests
//! of the connections already open on the other.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{debug, info, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::api::decide::Side;
use crate::cache::published::View;
use crate::server::admission::{Admission, Budgets, Verdict};
use crate::server::conn::{Conn, Ctx, ServerOptions};
use crate::server::counters::{self, Refusal};
use crate::server::proxy::Proxy;
use crate::server::refusals::EpisodeLog;
use crate::server::relay::RelayPort;
use crate::server::schedule::{Due, Schedule};
use crate::server::transport::Transport;
use crate::sync::lock;
use crate::upstream::client::Upstream;
use crate::writer::WriterHandle;

/// The listening socket.
const LISTENER: Token = Token(0);
/// Wakes from reflector and proxy threads.
const WAKER: Token = Token(1);
/// The relay port's listening socket.
const RELAY_LISTENER: Token = Token(2);
/// The first connection token; tokens are never reused.
const FIRST_CONN: usize = 3;
/// The loop wakes at least this often (timers are also computed exactly).
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// How long a graceful shutdown lets proxied requests finish and queued bytes drain.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// Most open connections on the kube-proxy port; further ones are closed at once. The relay port
/// has its own budget (`--relay-max-connections`, [`ServerOptions::relay_max_connections`]) and
/// the metrics port its own loop and limit, so neither can take a connection from kube-proxy
/// (docs/SEMANTICS.md §12.1).
pub const MAX_CONNECTIONS: usize = 1024;
/// Most connections one listener accepts in a round. A listener left with more is visited again
/// in the next round, which then does not sleep (readiness is edge-triggered: no new event would
/// come for what already waits); the connections already open are served in between.
pub const ACCEPTS_PER_ROUND: usize = 32;
/// Most sources whose relay connection rate is remembered (`server::admission::RateTable`).
const RATE_SOURCES: usize = 4096;

/// The server facing kube-proxy.
#[derive(Debug)]
pub struct Server {
    poll: Poll,
    /// `None` once shutting down.
    listener: Option<TcpListener>,
    waker: Arc<Waker>,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    /// The cache's writer (told to build v1beta1 EndpointSlices when first asked for).
    writer: WriterHandle,
    /// The served view the writer publishes into: what the loop reads.
    view: View,
    proxy: Proxy,
    opts: ServerOptions,
    seed: u64,
    /// The relay port, with `--relay-bind-address`.
    relay: Option<RelayPort>,
    /// Refused connections, logged once per episode: the kube-proxy port's, the relay port's.
    refusals: [EpisodeLog; 2],
    /// Which new connection may open, and which open ones may be evicted.
    admission: Admission,
    /// Which connections a round visits besides those their sockets report.
    schedule: Schedule,
    /// The listeners that stopped at [`ACCEPTS_PER_ROUND`]: the kube-proxy port's, the relay
    /// port's.
    still_ready: [bool; 2],
}

impl Server {
    /// Binds the listener and prepares the loop.
    pub fn bind(
        addr: SocketAddr,
        writer: WriterHandle,
        upstream: Option<Upstream>,
        opts: ServerOptions,
    ) -> io::Result<Server> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let proxy = Proxy::new(upstream, waker.clone());
        let view = writer.view();
        let admission = Admission::new(Budgets {
            kube_proxy: MAX_CONNECTIONS,
            relay: opts.relay_max_connections,
            relay_per_source: opts.relay_max_per_source,
            relay_rate: opts.relay_connection_rate,
            rate_sources: RATE_SOURCES,
        });
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Ok(Server {
            poll,
            listener: Some(listener),
            waker,
            conns: HashMap::new(),
            next_token: FIRST_CONN,
            writer,
            view,
            proxy,
            opts,
            seed: seed | 1,
            relay: None,
            refusals: [
                EpisodeLog::new(Side::KubeProxy),
                EpisodeLog::new(Side::Relay),
            ],
            admission,
            schedule: Schedule::new(),
            still_ready: [false; 2],
        })
    }

    /// Serves the relay port too (docs/SEMANTICS.md §12): its connections read the relay view.
    pub fn serve_relay(&mut self, mut port: RelayPort) -> io::Result<()> {
        if let Some(listener) = port.listener.as_mut() {
            self.poll
                .registry()
                .register(listener, RELAY_LISTENER, Interest::READABLE)?;
        }
        self.relay = Some(port);
        Ok(())
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.listener {
            Some(l) => l.local_addr(),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "shut down")),
        }
    }

    /// The loop's waker, for threads that publish.
    pub fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// A cheap xorshift number in [0, 1) for watch-lifetime jitter.
    fn jitter(&mut self) -> f64 {
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Runs until `stop` is set, then shuts down gracefully (see [`Server::shutdown`]). Only a
    /// failing `poll` ends it with an error.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Relaxed) {
            self.reload_tls();
            self.turn(&mut events, MAX_SLEEP)?;
        }
        self.shutdown(&mut events, SHUTDOWN_GRACE);
        Ok(())
    }

    /// Takes a new serving TLS configuration, if one was handed over (certificate reload).
    /// Connections already open keep theirs; new ones use the new one.
    fn reload_tls(&mut self) {
        if let Some(relay) = &mut self.relay {
            relay.reload_tls();
        }
        let Some(slot) = &self.opts.tls_reload else {
            return;
        };
        let fresh = lock(slot).take();
        if let Some(cfg) = fresh {
            self.opts.tls = Some(cfg);
        }
    }

    /// Graceful shutdown: stop accepting (the listening socket is closed), end every watch with
    /// its terminating chunk, answer held requests 503, let proxied requests finish within
    /// `grace`, flush what is queued; whatever is still open after `grace` is closed.
    pub fn shutdown(&mut self, events: &mut Events, grace: Duration) {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        if let Some(mut listener) = self.relay.as_mut().and_then(|r| r.listener.take()) {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        let open = self.conns.len();
        let watches = self.conns.values().filter(|c| c.is_active()).count();
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            let keep = match self.conns.get_mut(&token) {
                Some(conn) => conn.begin_shutdown() && conn.write(),
                None => false,
            };
            if keep {
                self.reschedule(token);
                self.rearm(token);
            } else {
                self.close(token);
            }
        }
        let deadline = Instant::now() + grace;
        while !self.conns.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if let Err(e) = self.turn(events, left.min(Duration::from_millis(100))) {
                warn!("shutdown: poll failed: {e}");
                break;
            }
        }
        let proxying = self.conns.values().filter(|c| c.is_proxying()).count();
        info!(
            "shutdown: {open} connections ({watches} watches or requests in flight) ended; {} still open after {} ms closed ({proxying} proxied requests cut)",
            self.conns.len(),
            grace.as_millis()
        );
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            self.close(token);
        }
    }

    /// One round: poll (at most `max_sleep`), read and write what is ready, accept a bounded
    /// number of new connections, drive every connection that waits on the loop or whose timer
    /// is due.
    fn turn(&mut self, events: &mut Events, max_sleep: Duration) -> io::Result<()> {
        let now = Instant::now();
        // A watch with a backlog left over from the last round, or a listener with connections
        // still waiting: look at sockets, do not sleep.
        let timeout = if self.schedule.any_backlog() || self.still_ready.contains(&true) {
            Duration::ZERO
        } else {
            let next = self
                .schedule
                .next_timer()
                .map_or(max_sleep, |t| t.saturating_duration_since(now))
                .min(max_sleep);
            next + Duration::from_millis(1)
        };
        match self.poll.poll(events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        for log in &mut self.refusals {
            if let Some(line) = log.tick(now) {
                warn!("{line}");
            }
        }
        let jitter = self.jitter();
        let mut touched: Vec<Token> = Vec::new();
        let mut accept = std::mem::take(&mut self.still_ready);
        for event in events.iter() {
            match event.token() {
                LISTENER => accept[0] = true,
                RELAY_LISTENER => accept[1] = true,
                WAKER => {}
                token => {
                    if let Some(conn) = self.conns.get_mut(&token) {
                        let alive = (!event.is_readable() && !event.is_read_closed()
                            || conn.read(now))
                            && (!event.is_writable() || conn.write());
                        if alive {
                            touched.push(token);
                        } else {
                            self.close(token);
                        }
                    }
                }
            }
        }
        for (i, side) in [Side::KubeProxy, Side::Relay].into_iter().enumerate() {
            if accept[i] {
                self.still_ready[i] = self.accept(side, now, &mut touched);
            }
        }
        // Connections that wait on the loop (watches, proxies, held requests) are driven on
        // every round: wakes coalesce, so a wake means "go look", not "one thing happened".
        // Then those whose socket was ready, and idle ones whose timer is due.
        let mut to_drive: Vec<Token> = self.schedule.to_visit(now).into_iter().map(Token).collect();
        to_drive.extend(touched);
        to_drive.sort_unstable();
        to_drive.dedup();
        let ctx = Ctx {
            writer: &self.writer,
            proxy: &self.proxy,
            opts: &self.opts,
            now,
            jitter,
        };
        let mut dead = Vec::new();
        let mut rearm = Vec::new();
        for token in to_drive {
            let Some(conn) = self.conns.get_mut(&token) else {
                continue;
            };
            if conn.drive(&ctx) {
                rearm.push(token);
            } else {
                dead.push(token);
            }
        }
        for token in rearm {
            self.reschedule(token);
            self.rearm(token);
        }
        for token in dead {
            self.close(token);
        }
        Ok(())
    }

    /// Records what a connection waits for after it was opened or driven: its timer, whether it
    /// waits on the loop, and whether it may still be evicted.
    fn reschedule(&mut self, token: Token) {
        let Some(conn) = self.conns.get(&token) else {
            return;
        };
        self.schedule.set(
            token.0,
            Due {
                timer: conn.next_timer(&self.opts),
                active: conn.is_active(),
                backlog: conn.has_backlog(),
            },
        );
        if self.admission.is_evictable(token.0) && conn.settled() {
            self.admission.settled(token.0);
        }
    }

    /// Re-registers a connection whose interest changed (closes it if that fails).
    fn rearm(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let want = conn.interest();
        if conn.registered() == Some(want) {
            return;
        }
        if let Err(e) = self.poll.registry().reregister(conn.socket(), token, want) {
            debug!("reregister failed: {e}");
            self.close(token);
            return;
        }
        conn.set_registered(want);
    }

    /// Accepts what waits on `side`'s listener, at most [`ACCEPTS_PER_ROUND`]. Returns whether
    /// it stopped there with more possibly waiting.
    fn accept(&mut self, side: Side, now: Instant, touched: &mut Vec<Token>) -> bool {
        for _ in 0..ACCEPTS_PER_ROUND {
            let listener = match (side, &self.relay) {
                (Side::KubeProxy, _) => &self.listener,
                (Side::Relay, Some(relay)) => &relay.listener,
                (Side::Relay, None) => return false,
            };
            let Some(listener) = listener else {
                return false;
            };
            match listener.accept() {
                Ok((sock, peer)) => self.open(side, sock, peer, now, touched),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Running out of descriptors must not end the loop.
                    warn!("accept failed: {e}");
                    return false;
                }
            }
        }
        true
    }

    /// Opens an accepted socket as a connection if admission lets it (closing the connection
    /// it evicts), and reads what it has already sent.
    fn open(
        &mut self,
        side: Side,
        mut sock: mio::net::TcpStream,
        peer: SocketAddr,
        now: Instant,
        touched: &mut Vec<Token>,
    ) {
        if !self.admit(side, peer, now) {
            return;
        }
        // The relay port's connections read the relay view, over its own TLS.
        let (tls, view) = match (side, &self.relay) {
            (Side::Relay, Some(relay)) => (Some(relay.tls().clone()), relay.view.clone()),
            _ => (self.opts.tls.clone(), self.view.clone()),
        };
        let token = Token(self.next_token);
        self.next_token += 1;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut sock, token, Interest::READABLE)
        {
            warn!("cannot register {peer}: {e}");
            return;
        }
        let _ = sock.set_nodelay(true);
        let transport = match Transport::new(sock, tls.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                warn!("cannot start TLS for {peer}: {e}");
                return;
            }
        };
        let mut conn = Conn::new(
            transport,
            side,
            view,
            peer.to_string(),
            self.opts.limits,
            now,
        );
        conn.set_registered(Interest::READABLE);
        // Data may already be there (edge-triggered: read now).
        if conn.read(now) {
            self.conns.insert(token, conn);
            self.admission.opened(token.0, side, peer.ip());
            self.reschedule(token);
            touched.push(token);
        } else {
            let _ = self.poll.registry().deregister(conn.socket());
            if let Some((reason, detail)) = conn.take_refusal() {
                self.refused(side, reason, conn.peer(), &detail, now);
            }
        }
    }

    /// Whether a connection from `peer` may open on `side` now ([`Admission::admit`]): the
    /// relay port refuses a source at its limit or over its rate and, when full, closes its
    /// oldest connection that has completed neither a request nor an authenticated handshake to
    /// make room (an attacker's idle or trickling sockets go before the new one is refused); the
    /// kube-proxy port refuses beyond its budget. Refusals are counted and logged.
    fn admit(&mut self, side: Side, peer: SocketAddr, now: Instant) -> bool {
        let source = peer.ip();
        let reason = match self.admission.admit(side, source, now) {
            Verdict::Admit => return true,
            Verdict::Evict(victim) => {
                let token = Token(victim);
                if let Some(mut conn) = self.conns.remove(&token) {
                    let _ = self.poll.registry().deregister(conn.socket());
                    let detail = format!(
                        "{} connections open: closed to make room for {peer}, as it had completed neither a request nor a TLS handshake with a client certificate",
                        self.admission.budgets().relay
                    );
                    self.refused(side, Refusal::Evicted, conn.peer(), &detail, now);
                }
                self.admission.closed(victim);
                self.schedule.remove(victim);
                return true;
            }
            Verdict::Refuse(reason) => reason,
        };
        let b = self.admission.budgets();
        let detail = match reason {
            Refusal::PerSource => format!("{} connections from {source} open", b.relay_per_source),
            Refusal::Rate => format!(
                "more than {} new connections a second from {source} after {} at once",
                b.relay_rate,
                b.relay_per_source.saturating_mul(2)
            ),
            _ => format!("{} connections open", self.admission.open(side)),
        };
        self.refused(side, reason, &peer.to_string(), &detail, now);
        false
    }

    /// Counts a refusal and logs it if it opens an episode.
    fn refused(&mut self, side: Side, reason: Refusal, peer: &str, detail: &str, now: Instant) {
        counters::global().refused(side, reason);
        let log = match side {
            Side::KubeProxy => &mut self.refusals[0],
            Side::Relay => &mut self.refusals[1],
        };
        if let Some(line) = log.refused(now, reason, peer, detail) {
            warn!("{line}");
        }
    }

    fn close(&mut self, token: Token) {
        self.admission.closed(token.0);
        self.schedule.remove(token.0);
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(conn.socket());
            if let Some((reason, detail)) = conn.take_refusal() {
                self.refused(conn.side(), reason, conn.peer(), &detail, Instant::now());
            }
        }
    }
}
