//! The event loop: one mio `Poll` on one thread owns every client socket, kube-proxy's and, with
//! `--relay-bind-address`, the followers' on the relay port (`server::relay`). Reflector and
//! proxy threads never touch sockets; they publish (to the cache or a channel) and `wake()` the
//! loop.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{debug, info, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::cache::published::View;
use crate::server::conn::{Conn, Ctx, ServerOptions, Side};
use crate::server::counters::{self, Refusal};
use crate::server::proxy::Proxy;
use crate::server::refusals::EpisodeLog;
use crate::server::relay::RelayPort;
use crate::server::transport::Transport;
use crate::sync::lock;
use crate::upstream::client::Upstream;
use crate::writer::Writer;

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
    cache: Writer,
    /// The served view the writer publishes into: what the loop reads.
    view: View,
    proxy: Proxy,
    opts: ServerOptions,
    seed: u64,
    /// The relay port, with `--relay-bind-address`.
    relay: Option<RelayPort>,
    /// Refused connections, logged once per episode: the kube-proxy port's, the relay port's.
    refusals: [EpisodeLog; 2],
}

impl Server {
    /// Binds the listener and prepares the loop.
    pub fn bind(
        addr: SocketAddr,
        cache: Writer,
        upstream: Option<Upstream>,
        opts: ServerOptions,
    ) -> io::Result<Server> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let proxy = Proxy::new(upstream, waker.clone());
        let view = cache.view();
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
            cache,
            view,
            proxy,
            opts,
            seed: seed | 1,
            relay: None,
            refusals: [
                EpisodeLog::new(Side::KubeProxy),
                EpisodeLog::new(Side::Relay),
            ],
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

    /// One round: poll (at most `max_sleep`), read and write what is ready, drive every
    /// connection that waits on the loop.
    fn turn(&mut self, events: &mut Events, max_sleep: Duration) -> io::Result<()> {
        let now = Instant::now();
        let next = self
            .conns
            .values()
            .map(|c| c.next_timer(&self.opts))
            .min()
            .map_or(max_sleep, |t| t.saturating_duration_since(now))
            .min(max_sleep);
        // A watch with a backlog left over from the last round: look at sockets, do not sleep.
        let timeout = if self.conns.values().any(Conn::has_backlog) {
            Duration::ZERO
        } else {
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
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept(Side::KubeProxy, now, &mut touched),
                RELAY_LISTENER => self.accept(Side::Relay, now, &mut touched),
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
        // Connections that wait on the loop (watches, proxies, held requests) are driven on
        // every round: wakes coalesce, so a wake means "go look", not "one thing happened".
        let mut to_drive: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_active())
            .map(|(t, _)| *t)
            .collect();
        to_drive.extend(touched);
        to_drive.sort_unstable();
        to_drive.dedup();
        // Idle connections past their timeout.
        to_drive.extend(
            self.conns
                .iter()
                .filter(|(_, c)| !c.is_active() && c.next_timer(&self.opts) <= now)
                .map(|(t, _)| *t),
        );
        let ctx = Ctx {
            cache: &self.cache,
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
            self.rearm(token);
        }
        for token in dead {
            self.close(token);
        }
        Ok(())
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

    /// Accepts what waits on `side`'s listener.
    fn accept(&mut self, side: Side, now: Instant, touched: &mut Vec<Token>) {
        loop {
            let listener = match (side, &self.relay) {
                (Side::KubeProxy, _) => &self.listener,
                (Side::Relay, Some(relay)) => &relay.listener,
                (Side::Relay, None) => return,
            };
            let Some(listener) = listener else {
                return;
            };
            match listener.accept() {
                Ok((mut sock, peer)) => {
                    // The relay port's connections read the relay view, over its own TLS.
                    let (tls, view) = match (side, &self.relay) {
                        (Side::Relay, Some(relay)) => {
                            (Some(relay.tls().clone()), relay.view.clone())
                        }
                        _ => (self.opts.tls.clone(), self.view.clone()),
                    };
                    if !self.admit(side, peer, now) {
                        continue;
                    }
                    let token = Token(self.next_token);
                    self.next_token += 1;
                    if let Err(e) =
                        self.poll
                            .registry()
                            .register(&mut sock, token, Interest::READABLE)
                    {
                        warn!("cannot register {peer}: {e}");
                        continue;
                    }
                    let _ = sock.set_nodelay(true);
                    let transport = match Transport::new(sock, tls.as_ref()) {
                        Ok(t) => t,
                        Err(e) => {
                            warn!("cannot start TLS for {peer}: {e}");
                            continue;
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
                        touched.push(token);
                    } else {
                        let _ = self.poll.registry().deregister(conn.socket());
                        if let Some((reason, detail)) = conn.take_refusal() {
                            self.refused(side, reason, conn.peer(), &detail, now);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Running out of descriptors must not end the loop.
                    warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Whether a connection from `peer` may open on `side` now: the relay port refuses a source
    /// at its limit and, when full, closes its oldest connection that has not completed a request
    /// yet to make room (an attacker's idle or trickling sockets go before the new one is
    /// refused); the kube-proxy port refuses beyond its budget. Refusals are counted and logged.
    fn admit(&mut self, side: Side, peer: SocketAddr, now: Instant) -> bool {
        let budget = match side {
            Side::KubeProxy => MAX_CONNECTIONS,
            Side::Relay => self.opts.relay_max_connections,
        };
        let per_source = self.opts.relay_max_per_source;
        let peer_text = peer.to_string();
        let source = crate::server::conn::host_of(&peer_text);
        let (mut open, mut same_source) = (0, 0);
        for c in self.conns.values().filter(|c| c.side() == side) {
            open += 1;
            if side == Side::Relay && c.peer_ip() == source {
                same_source += 1;
            }
        }
        if side == Side::Relay && same_source >= per_source {
            let detail = format!("{per_source} connections from {source} open");
            self.refused(side, Refusal::PerSource, &peer_text, &detail, now);
            return false;
        }
        if open < budget {
            return true;
        }
        let oldest = match side {
            Side::Relay => self
                .conns
                .iter()
                .filter(|(_, c)| c.side() == side && c.awaits_first_request())
                .map(|(t, _)| *t)
                .min(),
            Side::KubeProxy => None,
        };
        let Some(token) = oldest else {
            let detail = format!("{budget} connections open");
            self.refused(side, Refusal::BudgetFull, &peer_text, &detail, now);
            return false;
        };
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(conn.socket());
            let detail = format!("{budget} connections open: closed to make room for {peer}, as it had not completed a request");
            self.refused(side, Refusal::Evicted, conn.peer(), &detail, now);
        }
        true
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
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(conn.socket());
            if let Some((reason, detail)) = conn.take_refusal() {
                self.refused(conn.side(), reason, conn.peer(), &detail, Instant::now());
            }
        }
    }
}
