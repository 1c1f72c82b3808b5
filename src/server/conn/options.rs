//! [`ServerOptions`]: the server-wide settings every connection uses.

use std::sync::Mutex;
use std::time::Duration;

use crate::http::request::Limits;

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
    /// TLS serving configuration (`--insecure=false`); `None` serves plain HTTP.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// Where a reloaded TLS configuration is handed to the loop (SIGHUP, changed files).
    pub tls_reload: Option<TlsSlot>,
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
            tls: None,
            tls_reload: None,
        }
    }
}
