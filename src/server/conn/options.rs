//! [`ServerOptions`]: the server-wide settings every connection uses.

use std::sync::Mutex;
use std::time::Duration;

use crate::http::request::Limits;

/// The TLS handshake's deadline: Go's `http.Transport` gives up on a handshake after 10 s
/// (`TLSHandshakeTimeout`), so a client that is still handshaking after that has gone anyway.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The request head's deadline. A client sends its head in one write as soon as it is connected,
/// so a slow network is all it must cover; ten seconds is many round trips of any LAN and inside
/// kube-apiserver's own `ReadHeaderTimeout` (32 s), while a trickling client holds a connection
/// for seconds, not for the idle timeout.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Server-wide settings every connection uses.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Request size limits.
    pub limits: Limits,
    /// Per-watcher queue bound (`--notify-channel-size`).
    pub queue: usize,
    /// How long a cache-backed request waits for the first sync before 503.
    pub not_ready_hold: Duration,
    /// Idle keep-alive connections are closed after this.
    pub idle_timeout: Duration,
    /// A TLS handshake must finish within this of the accept (docs/SEMANTICS.md §12.1).
    pub handshake_timeout: Duration,
    /// A request head must arrive complete within this: the first from the connection's
    /// start (accept, or the handshake's end), a later one from its first byte.
    pub head_timeout: Duration,
    /// TLS serving configuration (`--insecure=false`); `None` serves plain HTTP.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// Where a reloaded TLS configuration is handed to the loop (SIGHUP, changed files).
    pub tls_reload: Option<TlsSlot>,
    /// Most connections open on the relay port (`--relay-max-connections`).
    pub relay_max_connections: usize,
    /// Most relay connections from one source address (`--relay-max-connections-per-source`).
    pub relay_max_per_source: usize,
    /// New relay connections a second from one source after its burst
    /// (`--relay-connection-rate-per-source`); 0 = no limit.
    pub relay_connection_rate: u32,
    /// A watch whose client reads nothing for this long while bytes wait for it ends
    /// (`--watch-stall-timeout`, docs/SEMANTICS.md §6).
    pub watch_stall: Duration,
}

/// A reloaded serving TLS configuration waiting for the loop to take it.
pub type TlsSlot = std::sync::Arc<Mutex<Option<std::sync::Arc<rustls::ServerConfig>>>>;

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            limits: Limits::default(),
            queue: 100,
            not_ready_hold: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(120),
            handshake_timeout: HANDSHAKE_TIMEOUT,
            head_timeout: HEAD_TIMEOUT,
            tls: None,
            tls_reload: None,
            relay_max_connections: crate::config::DEFAULT_RELAY_MAX_CONNECTIONS,
            relay_max_per_source: crate::config::DEFAULT_RELAY_MAX_PER_SOURCE,
            relay_connection_rate: crate::config::DEFAULT_RELAY_CONNECTION_RATE,
            watch_stall: crate::config::DEFAULT_WATCH_STALL_TIMEOUT,
        }
    }
}
